"""Fixtures of the admission tests: example jobs, job builders, AdmissionReviews, a TLS server on loopback."""

from __future__ import annotations

import copy
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from webhook.mutation import PatchOp
from webhook.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_JOBS = ROOT / "examples" / "jobs"


def load_example(name: str) -> dict[str, Any]:
    """A job from examples/jobs/."""
    data = yaml.safe_load((EXAMPLE_JOBS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def container(job: dict[str, Any], task: int = 0, index: int = 0) -> dict[str, Any]:
    """A container of a job, for editing in tests."""
    found: dict[str, Any] = job["spec"]["tasks"][task]["template"]["spec"]["containers"][index]
    return found


def apply_ops(job: dict[str, Any], ops: list[PatchOp]) -> dict[str, Any]:
    """The job after a patch, applied by an independent RFC 6902 implementation."""
    result: dict[str, Any] = jsonpatch.apply_patch(job, copy.deepcopy(ops))
    return result


def review(
    job: Any,
    *,
    operation: str = "CREATE",
    uid: str = "7b0d1c4e-1111-4a5b-9c1d-000000000001",
    dry_run: bool = False,
    old: Any = None,
    resource: tuple[str, str, str] = ("batch.volcano.sh", "v1alpha1", "jobs"),
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it."""
    group, version, plural = resource
    metadata = job.get("metadata") if isinstance(job, dict) else None
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": group, "version": version, "kind": "Job"},
            "resource": {"group": group, "version": version, "resource": plural},
            "name": name,
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": job,
            "oldObject": old,
            "dryRun": dry_run,
        },
    }


@pytest.fixture
def settings() -> Settings:
    return Settings()


@pytest.fixture
def documented_job() -> dict[str, Any]:
    return load_example("documented.yaml")


@pytest.fixture
def distributed_job() -> dict[str, Any]:
    return load_example("distributed-route-plan.yaml")


@pytest.fixture
def make_route_planned() -> Callable[..., dict[str, Any]]:
    """A route-planned job of `replicas` pods with `cards` cards each (defaults: 4 x 8, conforming)."""
    base = load_example("distributed-route-plan.yaml")

    def build(replicas: int = 4, cards: int = 8, min_available: int | None = None) -> dict[str, Any]:
        job = copy.deepcopy(base)
        job["spec"]["tasks"][0]["replicas"] = replicas
        job["spec"]["minAvailable"] = replicas if min_available is None else min_available
        quantity = str(cards)
        container(job)["resources"] = {
            "requests": {"huawei.com/ascend-1980": quantity},
            "limits": {"huawei.com/ascend-1980": quantity},
        }
        return job

    return build


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


class FakeConfigMaps:
    """ConfigMapWriter that records bodies; optionally slow or failing."""

    def __init__(self, *, delay_s: float = 0.0, error: Exception | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.delay_s = delay_s
        self.error = error

    async def ensure_configmap(self, body: dict[str, Any]) -> str:
        import asyncio

        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.error is not None:
            raise self.error
        self.bodies.append(body)
        return "created"


@pytest.fixture
def fake_configmaps() -> FakeConfigMaps:
    return FakeConfigMaps()
