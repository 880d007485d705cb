"""The one error type commands raise for the user."""

from __future__ import annotations


class CommandError(Exception):
    """A user-facing failure: printed as one line on stderr, exit status 2, nothing written."""


__all__ = ["CommandError"]
