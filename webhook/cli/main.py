"""`ringroute` command line: one argparse module per command, each registering its own parsers.

Command modules only parse arguments; the heavy imports (aiohttp, kubernetes_asyncio, numpy, scipy) happen inside
their handlers, so `ringroute --help` is fast. Every failure is one line on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from webhook.cli import certs, extender, fabric, plan, serve, simulate_scheduling
from webhook.cli.errors import CommandError, one_line, printable
from webhook.cli.parser import RingrouteParser

log = logging.getLogger("ringroute")

# Each module exposes `register(subparsers) -> None`; its parsers set `handler(args) -> int`.
_COMMAND_MODULES = (
    serve,  # serve
    extender,  # extender
    certs,  # certs generate
    plan,  # plan, simulate, topology generate
    simulate_scheduling,  # simulate-scheduling
    fabric,  # fabric calibrate, fabric show
)


KUBECTL_PLUGIN = "kubectl-ringroute"
"""The executable name kubectl looks for on PATH to run `kubectl ringroute ...` (kubectl's plugin convention)."""


def program_name(argv0: str | None = None) -> str:
    """`kubectl ringroute` when run as the kubectl plugin (by its executable's name), else `ringroute`."""
    name = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else "")).name
    if name.startswith(KUBECTL_PLUGIN):  # kubectl-ringroute, kubectl-ringroute.exe, kubectl-ringroute-script.py
        return "kubectl ringroute"
    return "ringroute"


def build_parser(prog: str = "ringroute") -> argparse.ArgumentParser:
    """The full argument parser (`prog` names the program in help and errors)."""
    parser = RingrouteParser(
        prog=prog,
        description="Topology-aware rank tables for Ascend NPU training on Kubernetes + Volcano.",
        top_level=True,
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ringroute` and `kubectl-ringroute` console scripts."""
    parser = build_parser(program_name())
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, format="%(message)s", stream=sys.stderr)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except CommandError as exc:
        print(printable(f"{args.command_prog}: error: {exc}"), file=sys.stderr)
    except Exception as exc:
        # Whatever a command did not foresee still ends in one line; the traceback is there for the asking.
        log.debug("traceback of the error below", exc_info=True)
        print(
            printable(
                f"{args.command_prog}: error: unexpected {type(exc).__name__}: {one_line(str(exc))}; "
                "rerun with --log-level DEBUG for the traceback"
            ),
            file=sys.stderr,
        )
    return 2


if __name__ == "__main__":
    sys.exit(main())
