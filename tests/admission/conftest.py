"""Fixtures of the admission tests: schemas, example jobs, a job builder, a TLS server on loopback."""

from __future__ import annotations

import copy
import json
import ssl
from collections.abc import AsyncIterator, Callable
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import yaml

from tests.support.admission import ROOT, Service, container, load_example, start, without_vendor_plugin
from webhook.common.settings import Settings


@pytest.fixture(scope="session")
def volcano_job_schema() -> jsonschema.Draft202012Validator:
    crd = yaml.safe_load((ROOT / "tests" / "data" / "schemas" / "batch.volcano.sh_jobs.yaml").read_text())
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return jsonschema.Draft202012Validator(version["schema"]["openAPIV3Schema"])


@pytest.fixture(scope="session")
def pod_template_schema() -> jsonschema.Draft202012Validator:
    """Kubernetes' own PodTemplateSpec schema (strict: unknown fields are errors), from kubernetes-validate."""
    import kubernetes_validate as kv

    base = resources.files(kv) / "kubernetes-json-schema"
    folder = sorted(p.name for p in base.iterdir() if p.name.endswith("-local-strict"))[-1]
    schema = json.loads((base / folder / "podtemplatespec-v1.json").read_text())
    definitions = json.loads((base / folder / "_definitions.json").read_text())
    registry: referencing.Registry[Any] = referencing.Resource.from_contents(definitions) @ referencing.Registry()
    registry = referencing.Resource.from_contents(schema) @ registry
    return jsonschema.Draft202012Validator(schema, registry=registry)


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


@pytest.fixture
async def service(tls_material: Path, client_ssl: ssl.SSLContext) -> AsyncIterator[Service]:
    running, stop = await start(tls_material, client_ssl)
    yield running
    await stop()
