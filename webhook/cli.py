"""`ringroute` command line: one sub-command group per module, each registering its own parsers.

Heavy imports (aiohttp, kubernetes_asyncio, scipy) happen inside the handlers, so `ringroute --help` is fast.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

# Each module exposes `register(subparsers) -> None`; its parsers set `handler(args) -> int`.
_COMMAND_MODULES = (
    "webhook.cli_serve",  # serve
    "webhook.cli_certs",  # certs generate
    "webhook.cli_plan",  # plan, simulate, topology generate
    "webhook.cli_extender",  # simulate-scheduling
)


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 2, nothing written."""


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (modules that are not installed are left out)."""
    parser = argparse.ArgumentParser(
        prog="ringroute",
        description="Topology-aware rank tables for Ascend NPU training on Kubernetes + Volcano.",
    )
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ringroute` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(message)s", stream=sys.stderr)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args))
    except CommandError as exc:
        print(f"ringroute {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
