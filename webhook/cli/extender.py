"""`ringroute extender`: the Volcano scheduler extender alone, in the foreground (its own container)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from webhook.cli.serve import ServeOptions, load_options_settings, parse_address, run_extender
from webhook.common.settings import ExtenderSettings


def register(subparsers: Any) -> None:
    """Add `extender` to the `ringroute` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "extender",
        help="run the Volcano scheduler extender alone (for a container of its own)",
        description=(
            "Serve the Volcano scheduler extender (predicate, prioritize, onSessionOpen, allocate events) in the "
            "foreground, without admission or the controller. The Deployment runs it as its own container, so "
            "it has its own CPU and memory limits; `ringroute serve` runs the same in a supervised child process."
        ),
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings YAML, as in the ringroute-settings ConfigMap (default: built-in settings)",
    )
    parser.add_argument(
        "--listen",
        metavar="ADDR:PORT",
        help=f"extender address (default: settings extender.listen, {ExtenderSettings().listen})",
    )
    parser.set_defaults(handler=_extender)


def _extender(args: argparse.Namespace) -> int:
    if args.listen is not None:
        parse_address(args.listen, "--listen")
    options = ServeOptions(
        host="127.0.0.1",
        port=0,
        cert_dir=Path("."),
        config=args.config,
        kubeconfig=None,
        workers=1,
        controller=False,
        extender=True,
        extender_listen=args.listen,
        self_signed_secret=None,
        log_level=args.log_level,
    )
    load_options_settings(options)  # fail fast on a bad settings file
    return asyncio.run(run_extender(options))
