"""Rendered manifests: the base and every overlay, as lists of plain dicts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.manifests.kustomize import render

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
VARIANTS = {
    "base": MANIFESTS,
    "cert-manager": MANIFESTS / "overlays" / "cert-manager",
    "self-signed": MANIFESTS / "overlays" / "self-signed",
}


@pytest.fixture(scope="session")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {name: render(path) for name, path in VARIANTS.items()}


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def objects(renders: dict[str, list[dict[str, Any]]], variant: str) -> list[dict[str, Any]]:
    return renders[variant]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of a kind (and name); fails the test when there are none or several."""
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
