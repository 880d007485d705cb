"""What `ringroute plan` and `ringroute simulate` read: the job's pods (from files or, with --job, the cluster),
the topology, the accelerator profile and the planning choices, each failure a CommandError naming the flag."""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import msgspec

from planner import (
    Fabric,
    InputError,
    Placement,
    Topology,
    load_kube_objects,
    load_topology_file,
    read_placement,
    render_placement_problems,
    topology_for_placement,
    topology_from_hypernodes,
    topology_from_nodes,
    topology_from_tor_configmap,
)
from webhook.cli import live, plan_budget, running
from webhook.cli.errors import CommandError
from webhook.cli.inputs import read_from, read_settings, read_text, source_ports
from webhook.common.names import RING_LABEL
from webhook.common.settings import AcceleratorProfile, Settings

if TYPE_CHECKING:
    from planner import HashModel, Pattern, PlanResult, Routing
    from webhook.controller.graded_plan import GradedPlan, PlanRequest
    from webhook.kube.whatif import ClusterObjects

log = logging.getLogger("ringroute.plan")

T = TypeVar("T")

MAX_QPS = 32
"""HCCL_RDMA_QPS_PER_CONNECTION's upper limit (CANN environment variable reference)."""


def load_objects(path: Path, flag: str) -> list[dict[str, Any]]:
    text = read_text(path, flag)
    return read_from(f"{flag} {path}", lambda: load_kube_objects(text))


def guarded(flag: str, path: Path | None, build: Callable[[], T]) -> T:
    """`build()`; an InputError becomes a CommandError naming `flag` (and `path`: then any failure does, since
    `build` reads that file's objects)."""
    if path is not None:
        return read_from(f"{flag} {path}", build)
    try:
        return build()
    except InputError as exc:
        raise CommandError(f"{flag}: {exc}") from None


def _settings(args: argparse.Namespace) -> Settings:
    return read_settings(args.settings, "--settings")


def hash_model_of(args: argparse.Namespace, settings: Settings) -> HashModel | None:
    """--hash-model FILE, else the settings' topology.hashModelFile (checked when the settings were read)."""
    from planner import load_hash_model
    from webhook.common.settings import settings_hash_model

    path: Path | None = getattr(args, "hash_model", None)
    if path is None:
        return settings_hash_model(settings)
    text = read_text(path, "--hash-model")
    return read_from(
        f"--hash-model {path}", lambda: load_hash_model(text), "pass a file ringroute fabric calibrate wrote"
    )


def _ring_label(pod: Mapping[str, Any]) -> str | None:
    """The pod's accelerator label value; None when absent, or when the pod is too malformed to carry one."""
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    value = labels.get(RING_LABEL) if isinstance(labels, Mapping) else None
    return str(value) if value else None


def _profile(settings: Settings, pods: Sequence[dict[str, Any]], requested: str | None) -> AcceleratorProfile:
    wanted = requested
    if wanted is None:
        wanted = next((label for label in map(_ring_label, pods) if label is not None), None)
    if wanted is None:
        return settings.profiles[0]
    profile = settings.profile(wanted)
    if profile is None:
        known = ", ".join(p.label_value for p in settings.profiles)
        raise CommandError(f"--profile {wanted}: unknown accelerator profile (known: {known}); pass --profile")
    return profile


def _fabric(base: Fabric, args: argparse.Namespace) -> Fabric:
    changes: dict[str, Any] = {}
    for flag, field in (
        ("layout", "layout"),
        ("nics", "nics_per_server"),
        ("link_gbps", "link_gbps"),
        ("leaf_uplinks", "leaf_uplinks"),
        ("oversubscription", "leaf_oversubscription"),
    ):
        value = getattr(args, flag, None)
        if value is not None:
            changes[field] = value
    fabric = replace(base, **changes)
    from planner import check_fabric

    guarded("fabric", None, lambda: check_fabric(fabric, "fabric"))
    return fabric


def _topology(args: argparse.Namespace, settings: Settings, cluster: ClusterObjects | None = None) -> Topology:
    """The topology from the flags' files; with `cluster` (--job), what they leave out comes from the cluster."""
    sources = [flag for flag in ("hypernodes", "tor_configmap", "topology") if getattr(args, flag) is not None]
    if len(sources) > 1:
        flags = " and ".join("--" + s.replace("_", "-") for s in sources)
        raise CommandError(f"{flags}: give one topology source")
    live_nodes = cluster is not None and args.nodes is None
    if not sources and args.nodes is None and not live_nodes:
        raise CommandError(
            "topology: missing; pass --nodes FILE (node labels), --hypernodes FILE --nodes FILE, "
            "--tor-configmap FILE or --topology FILE"
        )
    if args.topology_labels is not None and (sources or (args.nodes is None and not live_nodes)):
        raise CommandError("--topology-labels: only applies to --nodes without another topology source")
    nodes = load_objects(args.nodes, "--nodes") if args.nodes is not None else cluster.nodes if cluster else []
    if "topology" in sources:
        text = read_text(args.topology, "--topology")
        topology = read_from(
            f"--topology {args.topology}", lambda: load_topology_file(text), "pass a ringroute topology file"
        )
        return replace(topology, fabric=_fabric(topology.fabric, args))
    fabric = _fabric(settings.topology.fabric, args)
    if "hypernodes" in sources:
        if args.nodes is None and not live_nodes:
            raise CommandError("--hypernodes: also pass --nodes FILE (regexMatch and labelMatch select Node objects)")
        hypernodes = load_objects(args.hypernodes, "--hypernodes")
        return guarded("--hypernodes", args.hypernodes, lambda: topology_from_hypernodes(hypernodes, nodes, fabric))
    if "tor_configmap" in sources:
        objects = load_objects(args.tor_configmap, "--tor-configmap")
        if len(objects) != 1:
            raise CommandError(f"--tor-configmap {args.tor_configmap}: expected one ConfigMap, found {len(objects)}")
        return guarded(
            "--tor-configmap",
            args.tor_configmap,
            lambda: topology_from_tor_configmap(objects[0], fabric, nodes=nodes),
        )
    if cluster is not None and live_nodes and args.topology_labels is None:
        found = live.cluster_topology(cluster, nodes, fabric)  # HyperNodes, else the tor ConfigMap
        if found is not None:
            return found
    keys: Sequence[str] = settings.topology.label_keys
    if args.topology_labels is not None:
        keys = [k.strip() for k in args.topology_labels.split(",") if k.strip()]
        if not keys:
            raise CommandError("--topology-labels: give label keys, top-most first (e.g. volcano.sh/tor)")
    if cluster is not None and live_nodes:
        labelled = live.labelled_nodes(cluster, keys)
        return read_from("nodes in the cluster", lambda: topology_from_nodes(labelled, keys, fabric))
    return guarded("--nodes", args.nodes, lambda: topology_from_nodes(nodes, keys, fabric))


class PlanCase:
    """Everything `plan` and `simulate` read: the placement, its topology, the profile and planning choices."""

    def __init__(self, args: argparse.Namespace) -> None:
        if args.expected_pods is not None and args.expected_pods < 1:
            raise CommandError(f"--expected-pods {args.expected_pods}: must be at least 1")
        self.settings = _settings(args)
        cluster = live.read_cluster(args, self.settings)  # --job: the pods and topology from the cluster
        pods = cluster.pods if cluster is not None else load_objects(args.pods, "--pods")
        self.profile = _profile(self.settings, pods, args.profile)
        job: dict[str, Any] = {"expected_pods": args.expected_pods, "job_name": args.job_name}
        if cluster is not None:
            job = live.placement_options(args, cluster, self.profile.resource_name)
        where = live.job_where(cluster) if cluster is not None else f"--pods {args.pods}"
        readout = read_from(
            where,
            lambda: read_placement(
                pods,
                annotation_keys=self.profile.device_annotation_keys,
                resource_name=self.profile.resource_name,
                **job,
            ),
        )
        for problem in readout.problems[1:]:
            log.debug("placement problem: %s", problem.render())
        if readout.placement is None or readout.problems:
            raise CommandError(f"{where}: {render_placement_problems(readout.problems)}")
        self.placement: Placement = readout.placement
        topology = _topology(args, self.settings, cluster)
        self.topology = guarded("topology", None, lambda: topology_for_placement(topology, self.placement))
        planning = self.settings.planning
        self.pattern: Pattern = args.pattern or planning.pattern
        self.routing: Routing = args.routing or planning.routing
        self.qps = args.qps if args.qps is not None else planning.qps_per_connection
        self.seed = args.seed if args.seed is not None else planning.seed
        self.time_limit = args.time_limit if args.time_limit is not None else planning.time_limit_s
        if not 1 <= self.qps <= MAX_QPS:
            raise CommandError(f"--qps {self.qps}: HCCL takes 1 to {MAX_QPS} queue pairs per connection")
        if self.seed < 0:
            raise CommandError(f"--seed {self.seed}: must be 0 or more")
        if not 0 < self.time_limit < math.inf:  # also refuses nan
            raise CommandError(f"--time-limit {self.time_limit}: must be a positive number of seconds")
        self.hash_model = hash_model_of(args, self.settings)
        self.source_ports = source_ports(args, self.settings)
        self.planning = msgspec.structs.replace(
            planning,
            pattern=self.pattern,
            routing=self.routing,
            qps_per_connection=self.qps,
            seed=self.seed,
            time_limit_s=self.time_limit,
            source_ports=self.source_ports,
        )
        """The settings' planning section with the flags applied: what the plan request carries whole."""
        self.running = [running.read_plan_dir(directory) for directory in getattr(args, "running", None) or []]
        if cluster is not None:
            job_key = f"{cluster.namespace}/{(cluster.job.get('metadata') or {}).get('name')}"
            if cluster.rank_tables_refused is not None:
                log.warning(
                    "other jobs' rank tables not read, so the job is planned alone: %s", cluster.rank_tables_refused
                )
            self.running += running.running_jobs_of(cluster.rank_tables, self.settings, exclude=job_key)
        self.ledger = running.running_ledger(self.running, self.topology, self.hash_model) if self.running else None
        """The fabric load of the running jobs (--running, or the cluster's rank tables with --job)."""
        if self.ledger is not None:
            running.check_beside(self.placement, self.running, self.ledger)

    def request(self) -> PlanRequest:
        """The plan request: pinned routes around the running jobs' traffic when there are any."""
        from webhook.controller.graded_plan import PlanRequest

        background = None
        if self.ledger is not None and self.routing == "pinned":
            background = self.ledger.background([s.node_name for s in self.placement.servers])
        return PlanRequest(self.placement, self.topology, self.planning, self.hash_model, background)

    def budgeted(self, args: argparse.Namespace) -> GradedPlan:
        """The plan within the budget of --memory-limit and --planning-timeout (`webhook.cli.plan_budget`)."""
        return guarded("plan", None, lambda: plan_budget.budgeted_plan(args, self.request()))

    def plan(self) -> PlanResult:
        from planner import plan_ranks

        return guarded(
            "plan",
            None,
            lambda: plan_ranks(
                self.placement,
                self.topology,
                self.pattern,
                self.routing,
                qps=self.qps,
                rng=self.seed,
                time_limit=self.time_limit,
                background=self.request().background,
            ),
        )


__all__ = ["MAX_QPS", "PlanCase", "guarded", "hash_model_of", "load_objects"]
