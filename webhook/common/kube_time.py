"""Kubernetes timestamps: `Time` and `MicroTime` as the API server writes and reads them."""

from __future__ import annotations

import datetime as dt


def now_rfc3339(micro: bool = False) -> str:
    """Current UTC time as the API server writes it (`Time`, or `MicroTime` with micro=True)."""
    now = dt.datetime.now(dt.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> dt.datetime | None:
    """A Kubernetes Time/MicroTime string as an aware datetime (None when absent or malformed)."""
    if not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


__all__ = ["now_rfc3339", "parse_time"]
