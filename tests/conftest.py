"""Shared test fixtures: paths to the vendored Volcano CRDs and the documented example job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def seed_documents() -> list[dict[str, Any]]:
    """The ConfigMap and Volcano Job from the product documentation (shared/examples/vcjob-seed.yaml)."""
    return [d for d in yaml.safe_load_all((DATA / "vcjob-seed.yaml").read_text(encoding="utf-8")) if d]


@pytest.fixture
def seed_job(seed_documents: list[dict[str, Any]]) -> dict[str, Any]:
    """A fresh copy of the documented Volcano Job."""
    import copy

    return copy.deepcopy(next(d for d in seed_documents if d["kind"] == "Job"))
