"""Jobs to read through admission, the controller and the extender, and what each service reads of them.

`FIXTURES` are the example jobs, the seed job and the odd cases that once read differently; `route_plan_jobs`
makes jobs around the rules of `webhook.common.jobfacts` (where ROUTE_PLAN is set and how "true" is spelt, zero
and missing card counts, NPU and CPU tasks). `Services` runs jobs through the real services: admission over HTTP
in front of the emulated API server, the controller against it, and the extender decoding the pods Volcano makes
of the stored jobs as vc-scheduler sends them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson
import yaml
from hypothesis import strategies as st

from emulation.cluster import NS, device_annotation, node_ip
from emulation.volcano_payloads import task_info
from tests.support.admission import EXAMPLE_JOBS, load_example
from tests.support.controller import Harness, admission_chain, fast_settings, running_controller
from webhook.admission.jobview import read_job
from webhook.admission.policy import RULES
from webhook.admission.policy.size import JOB_SIZE
from webhook.common.jobfacts import JobFacts, job_facts
from webhook.common.names import (
    GROUP_NAME_ANNOTATION,
    JOB_NAME_LABEL,
    JOB_VERSION_ANNOTATION,
    ROUTE_PLAN_ANNOTATION,
    TASK_SPEC_KEY,
)
from webhook.common.settings import PolicySettings, Settings
from webhook.extender.app import decode
from webhook.extender.fit import read_task
from webhook.extender.wire import PredicateRequest
from webhook.kube.client import JOBS

Obj = dict[str, Any]
NPU = "huawei.com/ascend-1980"
ROOT_DATA = EXAMPLE_JOBS.parents[1] / "tests" / "data"


def warn_only(settings: Settings) -> Settings:
    """`settings` with every admission rule a warning (the size rule always rejects): every job is admitted, so
    the controller and the extender see what admission read, whatever the policy thinks of it."""
    modes = tuple((rule, "warn") for rule in RULES if rule != JOB_SIZE)
    return msgspec.structs.replace(settings, policy=PolicySettings(rule_modes=modes))  # type: ignore[arg-type]


def _job(tasks: list[Obj], annotations: Mapping[str, str] | None = None, name: str = "job") -> Obj:
    metadata: Obj = {"name": name, "namespace": NS, "labels": {"ring-controller.cce": "ascend-1980"}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": metadata, "spec": {"tasks": tasks}}


def _task(name: str, replicas: int, containers: list[Obj], init: list[Obj] | None = None) -> Obj:
    spec: Obj = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def _container(name: str, cards: str | None = "8", env: Mapping[str, str] | None = None) -> Obj:
    container: Obj = {"name": name, "image": "train:1", "command": ["python", "train.py"]}
    if cards is not None:
        container["resources"] = {"requests": {NPU: cards}, "limits": {NPU: cards}}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return container


def _odd_cases() -> dict[str, Obj]:
    """Jobs the services once read differently: "true" spelt otherwise, ROUTE_PLAN where no HCCL runs, zero cards."""
    plan = {"ROUTE_PLAN": "true"}
    limits_only = _container("t", env=plan)
    limits_only["resources"] = {"limits": {NPU: "8"}}  # requests default to limits
    return {
        "annotated-space-true": _job([_task("w", 3, [_container("t")])], {ROUTE_PLAN_ANNOTATION: " true"}),
        "annotated-upper-true": _job([_task("w", 3, [_container("t")])], {ROUTE_PLAN_ANNOTATION: "TRUE"}),
        "annotated-yes": _job([_task("w", 3, [_container("t")])], {ROUTE_PLAN_ANNOTATION: "yes"}),
        "env-space-true": _job([_task("w", 3, [_container("t", env={"ROUTE_PLAN": "True "})])]),
        "init-only": _job([_task("w", 3, [_container("t")], [_container("setup", None, plan)])]),
        "cpu-container-only": _job([_task("w", 3, [_container("t"), _container("log", None, plan)])]),
        "cpu-task-only": _job([_task("w", 3, [_container("t")]), _task("ps", 1, [_container("p", None, plan)])]),
        "zero-cards-task": _job([_task("w", 3, [_container("t", env=plan)]), _task("z", 2, [_container("z", "0")])]),
        "limits-only": _job([_task("w", 3, [limits_only])]),
        "two-npu-tasks": _job([_task("a", 2, [_container("t", env=plan)]), _task("b", 2, [_container("t")])]),
    }


def fixtures() -> dict[str, Obj]:
    """The example jobs, the seed job and the odd cases, by a DNS-safe name each, in namespace NS."""
    found: dict[str, Obj] = {}
    for path in sorted(EXAMPLE_JOBS.glob("*.yaml")):
        found[f"example-{path.stem}"] = load_example(path.name)
    seed = yaml.safe_load_all((ROOT_DATA / "vcjob-seed.yaml").read_text(encoding="utf-8"))
    found["seed"] = next(d for d in seed if d and d.get("kind") == "Job")
    found.update(_odd_cases())
    for name, job in found.items():
        job["metadata"]["name"] = name
        job["metadata"]["namespace"] = NS
    return found


FIXTURES = fixtures()

# -- Hypothesis -----------------------------------------------------------------------------------------------------

truth_texts = st.sampled_from(["true", " true", "TRUE", "True\n", "false", "FALSE ", "yes", "1", ""])
card_texts = st.sampled_from([None, "8", "8", "0"])
"""Cards of a training container: none, 8 (a whole node), or zero."""


@st.composite
def _generated_container(draw: st.DrawFn, name: str, *, init: bool = False, side: bool = False) -> Obj:
    """A container; a `side` container asks for no card (every pod of a rank table has the same device count,
    so a pod has one training container)."""
    container: Obj = {"name": name, "image": "img"}
    if not init:
        container["command"] = ["python", "train.py"]
    cards = None if init else draw(st.sampled_from([None, "0"]) if side else card_texts)
    if cards is not None:
        # Limits alone (the API server defaults requests to them); requests alone it refuses for NPUs.
        resources: Obj = {"limits": {NPU: cards}}
        if draw(st.booleans()):
            resources["requests"] = {NPU: cards}
        container["resources"] = resources
    if draw(st.integers(0, 2)) == 0:
        container["env"] = [{"name": "ROUTE_PLAN", "value": draw(truth_texts)}]
    return container


@st.composite
def route_plan_jobs(draw: st.DrawFn, name: str = "gen") -> Obj:
    """A job whose route planning and NPU pods depend on the shared rules: ROUTE_PLAN spelt in many ways on
    training, side and init containers, the annotation on the Job or a template, zero or missing card counts."""
    tasks = []
    for t in range(draw(st.integers(1, 3))):
        count = draw(st.integers(1, 2))
        training = draw(st.integers(0, count - 1))
        containers = [draw(_generated_container(f"c{c}", side=c != training)) for c in range(count)]
        init = [draw(_generated_container("setup", init=True))] if draw(st.booleans()) else None
        task = _task(f"t{t}", draw(st.integers(0, 3)), containers, init)
        if draw(st.integers(0, 4)) == 0:
            task["template"]["metadata"] = {"annotations": {ROUTE_PLAN_ANNOTATION: draw(truth_texts)}}
        tasks.append(task)
    annotations = {ROUTE_PLAN_ANNOTATION: draw(truth_texts)} if draw(st.booleans()) else None
    job = _job(tasks, annotations, name)
    if draw(st.integers(0, 9)) == 0:
        job["metadata"]["labels"]["ring-controller.cce"] = "ascend-310"  # a profile ringroute does not know
    return job


# -- what each service reads ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reading:
    """What a service made of a job: the facts the three must agree on."""

    profile: str | None
    """Label value of the profile it uses (None: it has no opinion of the job)."""
    route_planned: bool
    npu_pods: int
    npu_tasks: tuple[str, ...]
    """Names of the tasks whose pods it counts as NPU pods."""


def facts_reading(facts: JobFacts) -> Reading:
    """The shared reading, as the services are expected to report it."""
    profile = facts.rank_table_profile
    if profile is None:
        return Reading(None, False, 0, ())
    tasks = tuple(t.name for t in facts.npu_tasks if t.replicas)  # a task without pods shows in no pod
    return Reading(profile.label_value, facts.route_planned, facts.npu_pods, tasks)


def admission_reading(job: Obj, settings: Settings) -> Reading:
    """What admission's reader makes of a job (the view every checker and the mutation work from)."""
    view = read_job(job, settings)
    if view.profile is None or not view.npu_pods:
        return Reading(None, False, 0, ())
    names = tuple(t.task.get("name") or f"default{t.pointer.rsplit('/', 1)[1]}" for t in view.npu_tasks if t.replicas)
    return Reading(view.profile.label_value, view.route_planned, view.npu_pods, names)


def volcano_pods(job: Obj, job_index: int) -> list[Obj]:
    """The pods vc-controller-manager makes of a stored Job: each task's template with Volcano's labels and
    annotations, `<job>-<task>-<index>`, bound to a node of its own and running; those asking for cards carry
    the device plugin's annotation."""
    name = job["metadata"]["name"]
    uid = job["metadata"].get("uid", "")
    pods: list[Obj] = []
    for number, task in enumerate(job["spec"].get("tasks") or []):
        task_name = task.get("name") or f"default{number}"
        template = task.get("template") or {}
        for index in range(task.get("replicas") or 0):
            pod_name = f"{name}-{task_name}-{index}"
            node = f"npu-{len(pods)}"
            meta = copy.deepcopy(template.get("metadata") or {})
            labels = {**(meta.get("labels") or {}), JOB_NAME_LABEL: name, TASK_SPEC_KEY: task_name}
            annotations = {
                **(meta.get("annotations") or {}),
                JOB_VERSION_ANNOTATION: "0",
                TASK_SPEC_KEY: task_name,
                GROUP_NAME_ANNOTATION: f"{name}-{uid}",
            }
            spec = copy.deepcopy(template.get("spec") or {})
            spec["nodeName"] = node
            cards = 0
            for container in spec.get("containers") or []:
                resources = container.get("resources") or {}
                if "limits" in resources:  # the API server's defaulting: requests of what only limits name
                    resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}
                cards += int((resources.get("requests") or {}).get(NPU, 0))
            if cards:
                annotations.update(device_annotation(pod_name, node, devices=cards))
            pods.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod_name,
                        "namespace": job["metadata"]["namespace"],
                        "uid": f"{uid}-{task_name}-{index}",
                        "labels": labels,
                        "annotations": annotations,
                        "ownerReferences": [
                            {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": name, "uid": uid}
                        ],
                    },
                    "spec": spec,
                    "status": {
                        "phase": "Running",
                        "hostIP": node_ip(node),
                        "podIP": f"172.20.{job_index}.{len(pods) + 1}",
                    },
                }
            )
    return pods


def extender_reading(pods: list[Obj], settings: Settings) -> Reading:
    """What the extender makes of a job's pods, each sent to it as vc-scheduler sends a predicate call."""
    profiles: set[str] = set()
    route_planned: set[bool] = set()
    gang: set[int | None] = set()
    tasks: list[str] = []
    for pod in pods:
        body = orjson.dumps({"task": task_info(pod, status="Pending"), "node": None})
        request = decode(PredicateRequest, body)
        assert request.task is not None
        task = read_task(request.task, settings)
        if task.profile is None:
            continue
        profiles.add(task.profile.label_value)
        route_planned.add(task.route_planned)
        gang.add(task.npu_pods)
        spec_task = pod["metadata"]["labels"][TASK_SPEC_KEY]
        if spec_task not in tasks:
            tasks.append(spec_task)
    if not profiles:
        return Reading(None, False, 0, ())
    assert len(profiles) == len(route_planned) == len(gang) == 1, f"NPU pods differ: {route_planned}, {gang}"
    return Reading(profiles.pop(), route_planned.pop(), gang.pop() or 0, tuple(tasks))


@dataclass
class Outcome:
    """One job after the services: admission's and the extender's readings, and what the controller wrote."""

    admission: Reading
    extender: Reading
    stored: Obj
    controller: Reading


class Services:
    """Admission (over HTTP, rules as warnings) in front of the emulated API server, the controller against it,
    and the extender decoding the pods Volcano makes of the stored jobs."""

    def __init__(self, harness: Harness) -> None:
        self.h = harness

    async def run(self, jobs: Mapping[str, Obj], *, timeout_s: float = 30.0) -> dict[str, Outcome]:
        settings = self.h.settings
        async with self.h.server.repository(agent="user") as user:
            submitted = {name: await user.create_object(JOBS, copy.deepcopy(job)) for name, job in jobs.items()}
        readings = {name: admission_reading(job, settings) for name, job in jobs.items()}
        pods_of: dict[str, list[Obj]] = {}
        for number, (name, stored) in enumerate(submitted.items()):
            pods_of[name] = volcano_pods(stored, number)
            for pod in pods_of[name]:
                await self.h.server.apply("pods", pod)
        expected = {name: job_facts(stored, settings) for name, stored in submitted.items()}
        writers = [name for name, facts in expected.items() if facts.rank_table_profile is not None]
        await self._completed(writers, timeout_s)
        await self.h.settle()
        outcomes = {}
        for name, stored in submitted.items():
            outcomes[name] = Outcome(
                admission=readings[name],
                extender=extender_reading(pods_of[name], settings),
                stored=stored,
                controller=self._controller_reading(name, stored),
            )
        return outcomes

    async def _completed(self, names: list[str], timeout_s: float) -> None:
        """Wait for each job's completed table and the Event that reports it (posted after the write)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            reported = {e["involvedObject"]["name"] for e in self.h.events("RankTableCompleted")}
            waiting = [name for name in names if self.h.status(name) != "completed" or name not in reported]
            if not waiting:
                return
            assert asyncio.get_running_loop().time() < deadline, f"no completed table for {waiting}"
            await asyncio.sleep(0.05)

    def _controller_reading(self, name: str, stored: Obj) -> Reading:
        """The controller's reading, from what it wrote: a ConfigMap (the profile), a completed table of its NPU
        pods (the gang), their ranks (pod-index order goes task by task) and the completion event (whether it was
        asked to plan routes)."""
        configmap = self.h.configmap(name)
        if configmap is None:
            return Reading(None, False, 0, ())
        table = json.loads(configmap["data"]["jobstart_hccl.json"])
        [event] = [e for e in self.h.events("RankTableCompleted") if e["involvedObject"]["name"] == name]
        ranks = self.h.ranks(name)
        by_rank = [pod[len(name) + 1 :].rsplit("-", 1)[0] for pod in sorted(ranks, key=ranks.__getitem__)]
        order = [t.get("name") or f"default{i}" for i, t in enumerate(stored["spec"]["tasks"])]
        tasks = tuple(t for t in order if t in by_rank)
        route_planned = "route planning not requested" not in event["message"]
        if not route_planned:
            assert by_rank == sorted(by_rank, key=order.index), "pod-index order goes task by task"
        label = configmap["metadata"]["labels"]["ring-controller.cce"]
        return Reading(label, route_planned, int(table["server_count"]), tasks)


@contextlib.asynccontextmanager
async def services(settings: Settings | None = None) -> AsyncIterator[Services]:
    """The three services around one emulated API server (48 NPU nodes under 6 leaves)."""
    from emulation.cluster import cluster_nodes

    settings = settings or warn_only(fast_settings())
    async with (
        running_controller(nodes=cluster_nodes(6, 8), settings=settings) as h,
        admission_chain(h.server, settings),
    ):
        yield Services(h)
