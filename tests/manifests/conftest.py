"""Rendered manifests: the base and every overlay, as lists of plain dicts."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.kustomize import VARIANTS, render


@pytest.fixture(scope="session")
def renders() -> dict[str, list[dict[str, Any]]]:
    return {name: render(path) for name, path in VARIANTS.items()}


@pytest.fixture(params=sorted(VARIANTS))
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def objects(renders: dict[str, list[dict[str, Any]]], variant: str) -> list[dict[str, Any]]:
    return renders[variant]
