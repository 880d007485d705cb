"""Shared test fixtures: paths to the vendored Volcano CRDs, the documented example job, and TLS material."""

from __future__ import annotations

import gc
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

# The helpers in tests/support assert too: show their comparisons as pytest shows a test's.
pytest.register_assert_rewrite("tests.support")

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


@pytest.fixture(autouse=True)
def thawed_collector() -> Iterator[None]:
    """The extender's onSessionOpen endpoint (called over HTTP, or in process by the emulated scheduler) freezes
    what is alive after it out of the cyclic collector; in the test process that would keep every later test's
    cyclic garbage alive, so thaw after each test."""
    yield
    gc.unfreeze()


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


@pytest.fixture(scope="session")
def tls_material(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a serving pair for 127.0.0.1/localhost, made by ringroute's own cert tooling."""
    from certs import generate_bundle

    out = tmp_path_factory.mktemp("certs")
    generate_bundle("ringroute", "ringroute-system", out, days=2, extra_names=("localhost", "127.0.0.1"))
    return out


@pytest.fixture
def client_ssl(tls_material: Path) -> ssl.SSLContext:
    """A client context that trusts only the generated CA."""
    context = ssl.create_default_context(cafile=str(tls_material / "ca.crt"))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
