"""Rendered manifests: the base and every overlay, as lists of plain dicts; and the overlays docs/deploy.md tells
people to write, as files next to a `ringroute` checkout, the way the guide lays them out."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.kustomize import VARIANTS, render

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"
DOCUMENTED_FILE = re.compile(r"```yaml\n# (?P<path>my-ringroute[\w-]*/[\w.-]+)\n(?P<text>.*?)```", re.S)
"""A file of an overlay in the guide: a yaml block whose first line names it (`# my-ringroute/kustomization.yaml`)."""


@pytest.fixture(scope="session")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {name: render(path) for name, path in VARIANTS.items()}


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def objects(renders: dict[str, list[dict[str, Any]]], variant: str) -> list[dict[str, Any]]:
    return renders[variant]


@pytest.fixture(scope="session")
def documented(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The guide's overlays (by directory name), written next to `ringroute`, a link to this repository."""
    workspace = tmp_path_factory.mktemp("guide")
    (workspace / "ringroute").symlink_to(ROOT, target_is_directory=True)
    overlays: dict[str, Path] = {}
    for match in DOCUMENTED_FILE.finditer(GUIDE.read_text(encoding="utf-8")):
        path = workspace / match["path"]
        path.parent.mkdir(exist_ok=True)
        assert not path.exists(), f"the guide shows {match['path']} twice"
        path.write_text(match["text"], encoding="utf-8")
        overlays[path.parent.name] = path.parent
    assert set(overlays) == {"my-ringroute", "my-ringroute-namespaced"}
    return overlays
