"""The launcher script stored in every rank-table ConfigMap (`webhook/common/launcher.sh`, POSIX sh)."""

from __future__ import annotations

from functools import cache
from importlib import resources

LAUNCHER_TIMEOUT_PLACEHOLDER = "@RINGROUTE_LAUNCHER_TIMEOUT@"


@cache
def _template() -> str:
    return resources.files("webhook.common").joinpath("launcher.sh").read_text(encoding="utf-8")


def launcher_script(timeout_s: int) -> str:
    """The launcher with its default wait bound (`RINGROUTE_LAUNCHER_TIMEOUT` overrides it at run time)."""
    if timeout_s < 0:
        raise ValueError(f"launcher timeout must be at least 0 seconds (got {timeout_s})")
    return _template().replace(LAUNCHER_TIMEOUT_PLACEHOLDER, str(int(timeout_s)))


__all__ = ["LAUNCHER_TIMEOUT_PLACEHOLDER", "launcher_script"]
