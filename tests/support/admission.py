"""Builders and helpers of the admission tests: example jobs, AdmissionReviews, patches, a TLS server on loopback,
and Hypothesis strategies of NPU jobs."""

from __future__ import annotations

import base64
import copy
import ssl
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import jsonpatch
import jsonschema
import orjson
import yaml
from hypothesis import strategies as st

from certs import ServingCertificates
from emulation.admission import JOBS_RESOURCE, admission_review
from webhook.admission import server
from webhook.admission.jobview import as_mapping, read_job
from webhook.admission.mutation import NO_FACTS, ClusterFacts, PatchOp, plan_create
from webhook.admission.policy.network_topology import topology_facts
from webhook.admission.server import admission_app
from webhook.common import http_server
from webhook.common.metrics import Metrics
from webhook.common.names import INJECTED_ANNOTATION
from webhook.common.settings import Settings

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
    settings: Settings | None = None,
    certificates: ServingCertificates | None = None,
) -> tuple[Service, Callable[[], Awaitable[None]]]:
    certs = certificates or ServingCertificates(tls_material)
    metrics = Metrics()
    settings = settings or Settings()
    app = admission_app(settings, metrics, certificates=certs)
    # Served as `ringroute serve` serves it: a refused body's connection closes once the answer is sent, where
    # aiohttp alone would keep reading the rest for 10 s (its lingering time).
    runner = await http_server.serve(app, "127.0.0.1", 0, settings.admission.server, ssl_context=certs.ssl_context())
    port = runner.addresses[0][1]
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl))

    async def stop() -> None:
        await session.close()
        await runner.cleanup()

    return Service(f"https://127.0.0.1:{port}", session, metrics), stop


def hold_large_answers(monkeypatch: Any) -> threading.Event:
    """Large requests (over INLINE_MAX_BYTES) wait in the worker thread, off the event loop, until the returned
    event is set; `monkeypatch` (pytest's) puts the handlers back after the test."""
    release = threading.Event()
    answer = server.AdmissionHandlers.answer

    def held(
        self: server.AdmissionHandlers, endpoint: server.Endpoint, body: bytes | bytearray
    ) -> tuple[int, bytes, str]:
        if len(body) > server.INLINE_MAX_BYTES:
            assert threading.current_thread() is not threading.main_thread(), "large requests run off the loop"
            release.wait(30)
        return answer(self, endpoint, body)

    monkeypatch.setattr(server.AdmissionHandlers, "answer", held)
    return release


def patch_of(answer: dict[str, Any]) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = orjson.loads(base64.b64decode(answer["response"]["patch"]))
    return result


def mutate(job: Mapping[str, Any], settings: Settings, facts: ClusterFacts = NO_FACTS) -> list[PatchOp]:
    """The ops the mutating webhook returns for `job` on CREATE."""
    return plan_create(read_job(job, settings), facts).ops


def injected_items(ops: Sequence[PatchOp]) -> list[str]:
    """What a patch injects, as recorded in its `ringroute.io/injected` annotation."""
    for op in reversed(ops):
        value = op.get("value")
        if op["path"] == "/metadata/annotations/ringroute.io~1injected" and isinstance(value, str):
            return value.split(",")
        if isinstance(value, Mapping):
            annotations = as_mapping(value.get("annotations")) if "annotations" in value else value
            recorded = annotations.get(INJECTED_ANNOTATION)
            if isinstance(recorded, str):
                return recorded.split(",")
    return []


# -- Hypothesis strategies -----------------------------------------------------------------------------------------

env_names = st.sampled_from(["RANK_TABLE_FILE", "POD_NAME", "POD_IP", "HOST_IP", "ROUTE_PLAN", "OTHER"])
mount_paths = st.sampled_from(["/user/config", "/usr/local/Ascend/driver", "/etc/localtime", "/data", "/tmp/x"])
volume_sources: st.SearchStrategy[dict[str, Any]] = st.sampled_from(
    [
        {"emptyDir": {}},
        {"hostPath": {"path": "/usr/local/Ascend/driver"}},
        {"configMap": {"name": "configmap1980-prop"}},
        {"configMap": {"name": "other"}},
    ]
)


@st.composite
def npu_jobs(draw: st.DrawFn) -> dict[str, Any]:
    volumes = draw(
        st.lists(
            st.tuples(st.sampled_from(["v1", "v2", "ringroute-config", "ascend-driver"]), volume_sources),
            max_size=4,
            unique_by=lambda t: t[0],
        )
    )
    tasks = []
    for t in range(draw(st.integers(1, 3))):
        containers = []
        for c in range(draw(st.integers(1, 2))):
            container: dict[str, Any] = {"name": f"c{c}", "image": "img"}
            if draw(st.booleans()):
                container["resources"] = {"limits": {"huawei.com/ascend-1980": "8"}}
            if draw(st.booleans()):
                container["env"] = [
                    {"name": n, "value": "true"} for n in draw(st.lists(env_names, max_size=3, unique=True))
                ]
            if draw(st.booleans()) and volumes:
                paths = draw(st.lists(mount_paths, max_size=3, unique=True))
                container["volumeMounts"] = [
                    {"name": draw(st.sampled_from([v[0] for v in volumes])), "mountPath": p} for p in paths
                ]
            if draw(st.booleans()):
                container["command"] = draw(
                    st.lists(st.sampled_from(["python", "train.py", "/bin/sh"]), min_size=1, max_size=3)
                )
            containers.append(container)
        spec: dict[str, Any] = {"containers": containers}
        if draw(st.booleans()):
            spec["volumes"] = [{"name": n, **src} for n, src in volumes]
        if draw(st.booleans()):
            spec["nodeSelector"] = draw(
                st.dictionaries(st.sampled_from(["a/b", "accelerator/huawei-npu", "x~y"]), st.just("v"), max_size=2)
            )
        if draw(st.booleans()):
            spec["affinity"] = draw(st.sampled_from([{}, {"podAntiAffinity": {}}, {"nodeAffinity": {}}]))
        template: dict[str, Any] = {"spec": spec}
        if draw(st.booleans()):
            template["metadata"] = draw(st.sampled_from([{}, {"labels": {}}, {"labels": {"app": "x"}}]))
        tasks.append({"name": f"t{t}", "replicas": draw(st.integers(0, 5)), "template": template})
    metadata: dict[str, Any] = {"name": "prop", "labels": {"ring-controller.cce": "ascend-1980"}}
    if draw(st.booleans()):
        metadata["annotations"] = draw(
            st.sampled_from([{}, {"ringroute.io/route-plan": "true"}, {"ringroute.io/launcher": "false"}])
        )
    spec_top: dict[str, Any] = {"tasks": tasks}
    if draw(st.booleans()):
        spec_top["schedulerName"] = draw(st.sampled_from(["", "volcano"]))
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": metadata, "spec": spec_top}


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-5, 20)
    | st.text(max_size=8)
    | st.sampled_from(["8", "true", "volcano", "ascend-1980", "/mnt/nfs", "ROUTE_PLAN", "huawei.com/ascend-1980"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)

KEYS = [
    "metadata",
    "spec",
    "tasks",
    "template",
    "containers",
    "initContainers",
    "resources",
    "limits",
    "requests",
    "env",
    "volumeMounts",
    "volumes",
    "command",
    "args",
    "workingDir",
    "labels",
    "annotations",
    "name",
    "replicas",
    "minAvailable",
    "schedulerName",
    "affinity",
    "nodeSelector",
]


@st.composite
def damaged_jobs(draw: st.DrawFn, *, admitted: bool = False) -> Any:
    """The example jobs (`admitted`: as stored after ringroute's mutation) with one to three values anywhere
    replaced by random JSON."""
    job = load_example(
        draw(st.sampled_from(["documented.yaml", "distributed-route-plan.yaml", "rejected-workdir-nfs.yaml"]))
    )
    if admitted:
        job = apply_ops(job, mutate(job, Settings()))
    for _ in range(draw(st.integers(1, 3))):
        node: Any = job
        path: list[Any] = []
        while isinstance(node, dict | list) and node and draw(st.integers(0, 4)) > 0:
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict) else list(range(len(node)))))
            path.append(key)
            node = node[key]
        if not path:
            return draw(json_values)
        parent = job
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = draw(json_values | st.dictionaries(st.sampled_from(KEYS), json_values, max_size=3))
    return job


def volcano_defaults(job: dict[str, Any]) -> dict[str, Any]:
    """What vc-webhook-manager's mutating webhook does on CREATE: queue, maxRetry, minAvailable and task defaults,
    with /spec/tasks replaced by their Go serialisation (empty resources, a null creationTimestamp)."""
    job = copy.deepcopy(job)
    spec = job["spec"]
    spec.setdefault("queue", "default")
    spec.setdefault("schedulerName", "volcano")
    spec["maxRetry"] = spec.get("maxRetry") or 3
    spec["minAvailable"] = spec.get("minAvailable") or sum(t.get("replicas", 0) for t in spec["tasks"])
    for index, task in enumerate(spec["tasks"]):
        task.setdefault("name", f"default{index}")
        task.setdefault("minAvailable", task.get("replicas", 0))
        task["maxRetry"] = task.get("maxRetry") or 3
        task["template"].setdefault("metadata", {})["creationTimestamp"] = None
        for c in task["template"]["spec"]["containers"]:
            c.setdefault("resources", {})
    return job


def leaf_spine_objects(
    leaves: int = 6, per_leaf: int = 4, *, cards: int = 8, resource: str = "huawei.com/ascend-1980"
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes `node-00`.. with `cards` allocatable, labelled `volcano.sh/tor: leaf-<t>`, and the HyperNodes over
    them as the issue's cluster has them: `leaf-<t>` at tier 1 (labelMatch) and `spine` at tier 2."""
    nodes = [
        {
            "kind": "Node",
            "metadata": {"name": f"node-{i:02d}", "labels": {"volcano.sh/tor": f"leaf-{i // per_leaf}"}},
            "status": {"allocatable": {resource: str(cards), "cpu": "192"}},
        }
        for i in range(leaves * per_leaf)
    ]
    hypernodes = [
        {
            "kind": "HyperNode",
            "metadata": {"name": f"leaf-{t}"},
            "spec": {
                "tier": 1,
                "tierName": "leaf",
                "members": [
                    {"type": "Node", "selector": {"labelMatch": {"matchLabels": {"volcano.sh/tor": f"leaf-{t}"}}}}
                ],
            },
        }
        for t in range(leaves)
    ]
    hypernodes.append(
        {
            "kind": "HyperNode",
            "metadata": {"name": "spine"},
            "spec": {
                "tier": 2,
                "tierName": "spine",
                "members": [
                    {"type": "HyperNode", "selector": {"exactMatch": {"name": f"leaf-{t}"}}} for t in range(leaves)
                ],
            },
        }
    )
    return nodes, hypernodes


def leaf_spine_facts(leaves: int = 6, per_leaf: int = 4, *, cards: int = 8) -> ClusterFacts:
    """The facts `ringroute serve` hands admission for `leaf_spine_objects`."""
    nodes, hypernodes = leaf_spine_objects(leaves, per_leaf, cards=cards)
    resources = {profile.resource_name for profile in Settings().profiles}
    return ClusterFacts(topology=topology_facts(hypernodes, nodes, resources))
