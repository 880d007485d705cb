"""`ringroute certs generate`: a CA and a serving certificate for the webhook Service, as TLS Secret files."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from webhook.cli.errors import CommandError
from webhook.cli.parser import hide_alias


def register(subparsers: Any) -> None:
    """Add the `certs` command group to the `ringroute` parser."""
    certs_parser: argparse.ArgumentParser = subparsers.add_parser(
        "certs",
        help="make webhook certificates",
        description="Make the admission webhook's certificates.",
    )
    certs_parser.set_defaults(handler=lambda _args: _usage(certs_parser))
    actions = certs_parser.add_subparsers(dest="certs_command", metavar="ACTION")
    generate = actions.add_parser(
        "generate",
        help="write ca.crt, tls.crt and tls.key for a Service",
        description=(
            "Make a new CA and an ECDSA P-256 serving certificate valid for S, S.N, S.N.svc and "
            "S.N.svc.cluster.local. Writes ca.crt (the webhook caBundle), tls.crt and tls.key (mode 0600): "
            "the key names of a Kubernetes TLS Secret. Prints one JSON line describing the result."
        ),
    )
    generate.add_argument("--service", required=True, metavar="S", help="Service name of the webhook")
    generate.add_argument("--namespace", required=True, metavar="N", help="namespace of the Service")
    # --out-dir names a directory in every command; --out was this option's name before.
    generate.add_argument(
        "--out-dir", "--out", dest="out_dir", required=True, type=Path, metavar="DIR", help="directory to write into"
    )
    hide_alias(generate, "--out")
    generate.add_argument("--days", type=int, default=365, metavar="DAYS", help="validity in days")
    generate.add_argument(
        "--extra-san",
        action="append",
        default=[],
        metavar="NAME",
        help="another DNS name or IP address for the serving certificate (repeatable), e.g. 127.0.0.1",
    )
    generate.set_defaults(handler=_generate)


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _generate(args: argparse.Namespace) -> int:
    from certs import CA_FILE, CERT_FILE, KEY_FILE, CertificateError, generate_bundle

    out: Path = args.out_dir
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out-dir: {out} exists and is not a directory; pass a directory path")
    try:
        bundle = generate_bundle(args.service, args.namespace, out, days=args.days, extra_names=args.extra_san)
    except CertificateError as exc:
        field = str(exc).split(":", 1)[0]
        flag = {"service": "--service", "namespace": "--namespace", "days": "--days"}.get(field, "--extra-san")
        raise CommandError(f"{flag}: {str(exc).split(': ', 1)[-1]}") from exc
    except OSError as exc:
        raise CommandError(f"--out-dir: cannot write to {out}: {exc.strerror or exc}") from exc
    summary = {
        "caBundle": str(out / CA_FILE),
        "certificate": str(out / CERT_FILE),
        "key": str(out / KEY_FILE),
        "dnsNames": list(bundle.dns_names),
        "serial": f"{bundle.serial:x}",
        "notAfter": bundle.not_after.isoformat(),
    }
    print(json.dumps(summary))
    return 0
