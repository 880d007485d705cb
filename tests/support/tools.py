"""Commands some tests run (dash, kustomize): where one is missing the test is skipped, except under CI=true,
where a missing command fails the test (CI must not pass by running less)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT_TOOLS = ROOT / "tools" / "node_modules" / ".bin"
"""Where `make test` installs the test tools it takes from the npm registry (tools/package.json)."""


def in_ci() -> bool:
    """Whether this run is CI's (`CI=true`, as CI services and `.ci/run` set it)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def require_tool(name: str, install: str) -> str:
    """The path of command `name`; skips the calling test when it is missing (fails under CI=true)."""
    path = shutil.which(name, path=str(PROJECT_TOOLS)) or shutil.which(name)
    if path is not None:
        return path
    message = f"{name} is not installed on this machine ({install})"
    if in_ci():
        pytest.fail(f"{message}; under CI=true a missing tool fails instead of skipping")
    pytest.skip(message)
