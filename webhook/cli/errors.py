"""The one error type commands raise for the user, and the wording of failures no reader reports itself."""

from __future__ import annotations

import logging
import sys

log = logging.getLogger("ringroute")

_MAX_DETAIL = 300
"""Characters of an exception's text quoted in an error line (a parser may quote a whole document)."""


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 2, nothing written."""


def one_line(text: str, limit: int | None = _MAX_DETAIL) -> str:
    """`text` on one line (each run of whitespace one space), cut at `limit` characters unless that is None."""
    flat = " ".join(text.split())
    return flat if limit is None or len(flat) <= limit else flat[: limit - 3] + "..."


def printable(text: str) -> str:
    """`text` safe to print on a terminal: line breaks kept, other control characters and lone surrogates (which
    a hostile file can put into a quoted value) written as escapes."""
    return "\n".join(
        "".join(c if c.isprintable() else c.encode("unicode_escape", "backslashreplace").decode("ascii") for c in line)
        for line in text.split("\n")
    )


def unreadable(where: str, exc: Exception, hint: str = "check the file") -> CommandError:
    """The CommandError for an input that broke its reader in a way the reader does not report itself.

    `where` names the flag and file (`--pods pods.yaml`), `hint` what the file should be. Input this deep, long or
    malformed is never what kubectl prints, so the line says what is wrong with the file, not where the code stopped.
    """
    if isinstance(exc, RecursionError):
        return CommandError(f"{where}: nested too deeply to read; {hint}")
    if isinstance(exc, MemoryError):
        return CommandError(f"{where}: too large to read in memory; {hint}")
    if isinstance(exc, ValueError) and "integer string conversion" in str(exc):
        return CommandError(f"{where}: holds a number longer than {sys.get_int_max_str_digits()} digits; {hint}")
    log.debug("reading %s failed", where, exc_info=True)
    return CommandError(
        f"{where}: cannot read it ({type(exc).__name__}: {one_line(str(exc))}); {hint} "
        "(--log-level DEBUG shows where reading stopped)"
    )


__all__ = ["CommandError", "one_line", "printable", "unreadable"]
