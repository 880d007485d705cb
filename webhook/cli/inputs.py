"""Reading the command line's input files: every failure is a CommandError naming the flag and the file.

The readers behind these (the YAML and JSON parsers, the planner's object readers, the settings loader) report
the mistakes they foresee. Input nested too deeply, holding numbers too long to convert, or shaped unlike anything
kubectl prints can still make them raise something else; here that, too, becomes one line naming the file.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from planner import InputError
from webhook.cli.errors import CommandError, one_line, unreadable

if TYPE_CHECKING:
    from webhook.common.settings import Settings, SettingsError

T = TypeVar("T")

MAX_INPUT_CHARS = 1 << 30
"""Largest input file read, in characters: `kubectl get nodes -o yaml` of 10,000 nodes is a few hundred MB, and
a file past this (or a device such as /dev/zero) is refused before it exhausts memory."""

KUBECTL_HINT = "pass kubectl get -o yaml output"


def read_text(path: Path, flag: str) -> str:
    """The UTF-8 text of `path`, given as `flag`."""
    try:
        with path.open(encoding="utf-8") as stream:
            text = stream.read(MAX_INPUT_CHARS + 1)
    except OSError as exc:
        raise CommandError(f"{flag} {path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{flag} {path}: not UTF-8 text; {KUBECTL_HINT}") from None
    if len(text) > MAX_INPUT_CHARS:
        limit = f"{MAX_INPUT_CHARS >> 20} MiB" if MAX_INPUT_CHARS >= 1 << 20 else f"{MAX_INPUT_CHARS} characters"
        raise CommandError(f"{flag} {path}: larger than {limit}; pass only the objects needed")
    return text


def read_from(where: str, build: Callable[[], T], hint: str = KUBECTL_HINT) -> T:
    """`build()`, which interprets a file's content; any failure is a CommandError that starts with `where`."""
    try:
        return build()
    except InputError as exc:
        raise CommandError(f"{where}: {one_line(str(exc), limit=None)}") from None
    except CommandError:
        raise
    except Exception as exc:  # whatever the file made the reader do, the user needs the file's name
        raise unreadable(where, exc, hint) from None


def read_settings(path: Path | None, flag: str) -> Settings:
    """The settings tree from `path` (built-in settings when None), given as `flag`."""
    from webhook.common.settings import SettingsError, load_settings

    try:
        return load_settings(path)
    except SettingsError as exc:
        raise settings_error(exc, flag) from None
    except Exception as exc:
        raise unreadable(f"{flag} {path}", exc, "pass a ringroute settings file (YAML)") from None


def source_ports(args: argparse.Namespace, settings: Settings) -> tuple[int, int]:
    """--source-ports FIRST-LAST (plan, simulate, fabric calibrate), else the settings' planning.sourcePorts."""
    text: str | None = getattr(args, "source_ports", None)
    if text is None:
        return settings.planning.source_ports
    first, dash, last = text.partition("-")
    if not dash or not (first.isascii() and first.isdigit() and last.isascii() and last.isdigit()):
        raise CommandError(f"--source-ports {text}: give FIRST-LAST, e.g. 49152-65535")
    if len(first) > 5 or len(last) > 5 or not 1 <= int(first) <= int(last) <= 65535:
        raise CommandError(f"--source-ports {text}: a range within 1-65535, first <= last")
    return int(first), int(last)


def settings_error(exc: SettingsError, flag: str) -> CommandError:
    """Every problem of a refused settings file: a first line naming `flag` and the file, then one line each."""
    from webhook.common.settings import SettingsError

    flat = SettingsError(tuple(one_line(problem, limit=None) for problem in exc.problems), exc.source)
    return CommandError(f"{flag} {flat}")


__all__ = [
    "KUBECTL_HINT",
    "MAX_INPUT_CHARS",
    "read_from",
    "read_settings",
    "read_text",
    "settings_error",
    "source_ports",
]
