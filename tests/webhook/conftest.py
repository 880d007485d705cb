"""Fixtures of the admission tests: example jobs, job builders, AdmissionReviews, a TLS server on loopback."""

from __future__ import annotations

import base64
import copy
import json
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import jsonschema
import orjson
import pytest
import referencing
import yaml
from aiohttp import web

from certs import ServingCertificates
from webhook.admission_types import JOBS_RESOURCE, admission_review
from webhook.metrics import Metrics
from webhook.server import ConfigMapWriter, admission_app
from webhook.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_JOBS = ROOT / "examples" / "jobs"


def load_example(name: str) -> dict[str, Any]:
    """A job from examples/jobs/."""
    data = yaml.safe_load((EXAMPLE_JOBS / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def without_vendor_plugin(job: dict[str, Any]) -> dict[str, Any]:
    """The job without the vendor fork's `configmap1980` plugin, as ringroute's mutation leaves it on open-source
    Volcano: what the validating webhook sees of the examples (which keep the plugin of the documented job)."""
    plugins = job.get("spec", {}).get("plugins")
    if isinstance(plugins, dict):
        plugins.pop("configmap1980", None)
    return job


def container(job: dict[str, Any], task: int = 0, index: int = 0) -> dict[str, Any]:
    """A container of a job, for editing in tests."""
    found: dict[str, Any] = job["spec"]["tasks"][task]["template"]["spec"]["containers"][index]
    return found


def apply_ops(job: dict[str, Any], ops: Sequence[Mapping[str, object]]) -> dict[str, Any]:
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
    resource: tuple[str, str, str] = JOBS_RESOURCE,
) -> dict[str, Any]:
    """An AdmissionReview as the API server sends it (the tests' defaults: a fixed uid, user alice)."""
    return admission_review(
        job, operation=operation, uid=uid, dry_run=dry_run, old=old, resource=resource, username="alice"
    )


@pytest.fixture(scope="session")
def volcano_job_schema() -> jsonschema.Draft202012Validator:
    crd = yaml.safe_load((ROOT / "tests" / "data" / "schemas" / "batch.volcano.sh_jobs.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return jsonschema.Draft202012Validator(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="session")
def pod_template_schema() -> jsonschema.Draft202012Validator:
    """Kubernetes' own PodTemplateSpec schema (strict: unknown fields are errors), from kubernetes-validate."""
    kv = pytest.importorskip("kubernetes_validate")
    base = resources.files(kv) / "kubernetes-json-schema"
    folder = sorted(p.name for p in base.iterdir() if p.name.endswith("-local-strict"))[-1]
    schema = json.loads((base / folder / "podtemplatespec-v1.json").read_text())
    definitions = json.loads((base / folder / "_definitions.json").read_text())
    registry: referencing.Registry[Any] = referencing.Resource.from_contents(definitions) @ referencing.Registry()
    registry = referencing.Resource.from_contents(schema) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


def check_schemas(
    job: dict[str, Any], crd: jsonschema.Draft202012Validator, pod: jsonschema.Draft202012Validator
) -> None:
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in crd.iter_errors(job)]
    for task in job["spec"]["tasks"]:
        errors += [
            f"template/{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in pod.iter_errors(task["template"])
        ]
    assert errors == []


def bare_job() -> dict[str, Any]:
    """A labelled NPU job with nothing but the essentials: no env, no volumes, no affinity, no task label."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "bare", "namespace": "default", "labels": {"ring-controller.cce": "ascend-1980"}},
        "spec": {
            "minAvailable": 3,
            "tasks": [
                {
                    "name": "worker",
                    "replicas": 3,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "train",
                                    "image": "train:v1",
                                    "command": ["python", "train.py"],
                                    "resources": {"limits": {"huawei.com/ascend-1980": "8"}},
                                }
                            ]
                        }
                    },
                }
            ],
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
    """A route-planned job of `replicas` pods with `cards` cards each (defaults: 4 x 8, conforming; without the
    vendor plugin, as the validating webhook sees it)."""
    base = without_vendor_plugin(load_example("distributed-route-plan.yaml"))

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


Post = Callable[..., Awaitable[tuple[int, Any]]]


class Service:
    """A running admission app on 127.0.0.1 with TLS, and a client that trusts only its CA."""

    def __init__(self, base: str, session: aiohttp.ClientSession, metrics: Metrics) -> None:
        self.base = base
        self.session = session
        self.metrics = metrics

    async def post(self, path: str, body: Any, *, content_type: str = "application/json") -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        async with self.session.post(self.base + path, data=data, headers={"Content-Type": content_type}) as resp:
            raw = await resp.read()
            try:
                return resp.status, orjson.loads(raw)
            except orjson.JSONDecodeError:
                return resp.status, raw.decode()

    async def get(self, path: str) -> tuple[int, str]:
        async with self.session.get(self.base + path) as resp:
            return resp.status, await resp.text()


async def start(
    tls_material: Path,
    client_ssl: ssl.SSLContext,
    configmaps: ConfigMapWriter | None,
    settings: Settings | None = None,
    certificates: ServingCertificates | None = None,
) -> tuple[Service, Callable[[], Awaitable[None]]]:
    certs = certificates or ServingCertificates(tls_material)
    metrics = Metrics()
    app = admission_app(settings or Settings(), metrics, configmaps=configmaps, certificates=certs)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.ssl_context())
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl))

    async def stop() -> None:
        await session.close()
        await runner.cleanup()

    return Service(f"https://127.0.0.1:{port}", session, metrics), stop


@pytest.fixture
async def service(
    tls_material: Path, client_ssl: ssl.SSLContext, fake_configmaps: FakeConfigMaps
) -> AsyncIterator[Service]:
    running, stop = await start(tls_material, client_ssl, fake_configmaps)
    yield running
    await stop()


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = orjson.loads(base64.b64decode(answer["response"]["patch"]))
    return result
