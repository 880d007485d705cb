"""The fabric load ledger: every running job's load on every switch link, and what it leaves for the next job.

A job's traffic (`JobTraffic`) is its load per fabric link, from the routes its queue pairs take: through the
hash model from the ports it was given (steered or spread), as its route plan says (routes.json, for a fabric
that follows it), or, when neither is known, the ECMP expectation (each flow spread evenly over the spines, and
cores, both its ends reach). Loads are in flows; a queue pair of a job with Q of them weighs 1/Q. A job's load on
a link is the largest over its collective's steps (steps of one job never overlap; steps of different jobs may).

`FabricLedger` adds them up. It holds no state beyond the jobs put into it, so it is rebuilt from their rank
tables whenever needed. Its version moves with every change, and every link remembers the version that last
changed it, so a plan made against the ledger can tell at commit time whether the links it planned around moved.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from planner._errors import InputError
from planner.sim._fabric_links import FabricLinks, LinkBackground, LinkName, background_from_loads, link_name
from planner.sim._network import JobNetwork
from planner.sim._route_plan import RoutePlan

Delivery = Literal["hashed", "planned", "ecmp"]
"""How a job's loads are known: its ports through the hash model, its route plan as written, or ECMP's mean."""


@dataclass(frozen=True, eq=False)
class JobTraffic:
    """One job's load on the fabric's switch links (sparse), and its cross-leaf demand per tier-1 switch."""

    key: str
    """`namespace/job` (or a plan directory) naming the job."""
    nodes: tuple[str, ...]
    """Its servers in rank order."""
    links: np.ndarray
    """Fabric ids of the links it loads, ascending."""
    loads: np.ndarray
    """Its load on each, in flows."""
    delivery: Delivery
    qps: int
    switch_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Fabric tier-1 switch ids (leaf x plane) it sends or receives cross-leaf flows at."""
    switch_out: np.ndarray = field(default_factory=lambda: np.zeros(0))
    """Cross-leaf flows it sends from each of those switches (largest over its steps)."""
    switch_in: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pod_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """(pod x plane) ids of its cross-pod flows, 3 tiers."""
    pod_out: np.ndarray = field(default_factory=lambda: np.zeros(0))
    pod_in: np.ndarray = field(default_factory=lambda: np.zeros(0))
    warnings: tuple[str, ...] = ()
    """Why its loads are less exact than they could be (unreadable routes counted as ECMP, say)."""

    @property
    def servers(self) -> int:
        return len(self.nodes)


def _step_link_loads(network: JobNetwork, routes: RoutePlan) -> list[np.ndarray]:
    """Switch-link loads (flows, local ids) of every step of a route plan."""
    q = routes.qps
    out: list[np.ndarray] = []
    for step, spines, cores in zip(routes.steps, routes.spines, routes.cores, strict=True):
        rows, nic = np.nonzero(spines >= 0)
        pair = rows // q
        src, dst = step[pair, 0], step[pair, 1]
        spine, core = spines[rows, nic], cores[rows, nic]
        ids = [
            network.leaf_link(network.tier1_switch(src, nic), spine, up=True),
            network.leaf_link(network.tier1_switch(dst, nic), spine, up=False),
        ]
        crossing = core >= 0
        if crossing.any():
            plane = nic if network.layout == "rail" else np.zeros_like(nic)
            p, j, c = plane[crossing], spine[crossing], core[crossing]
            ids.append(network.spine_link(network.server_pod[src[crossing]], p, j, c, up=True))
            ids.append(network.spine_link(network.server_pod[dst[crossing]], p, j, c, up=False))
        out.append(np.bincount(np.concatenate(ids), minlength=network.num_links) / q)
    return out


def _step_ecmp_loads(network: JobNetwork, steps: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Expected switch-link loads (flows, local ids) of every step under ECMP: each cross-leaf flow spread evenly
    over the spines both its switches reach, and across pods over the cores both pods' spines reach."""
    out: list[np.ndarray] = []
    nics = network.nics
    for pairs in steps:
        loads = np.zeros(network.num_links)
        src = np.repeat(pairs[:, 0], nics)
        dst = np.repeat(pairs[:, 1], nics)
        nic = np.tile(np.arange(nics), pairs.shape[0])
        sw_a, sw_b = network.tier1_switch(src, nic), network.tier1_switch(dst, nic)
        cross = sw_a != sw_b
        src, dst, nic, sw_a, sw_b = src[cross], dst[cross], nic[cross], sw_a[cross], sw_b[cross]
        leaf_a, leaf_b = network.server_leaf[src], network.server_leaf[dst]
        spines = np.minimum(network.leaf_uplinks[leaf_a], network.leaf_uplinks[leaf_b])
        flow = np.repeat(np.arange(src.size), spines)
        spine = np.arange(flow.size) - np.repeat(np.cumsum(spines) - spines, spines)
        share = 1.0 / spines[flow]
        np.add.at(loads, network.leaf_link(sw_a[flow], spine, up=True), share)
        np.add.at(loads, network.leaf_link(sw_b[flow], spine, up=False), share)
        if network.listed_tiers == 2:
            pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
            up = np.flatnonzero(pod_a != pod_b)
            if up.size:
                cores = np.minimum(network.pod_uplinks[pod_a[up]], network.pod_uplinks[pod_b[up]])
                options = spines[up] * cores
                flow2 = np.repeat(up, options)
                within = np.arange(flow2.size) - np.repeat(np.cumsum(options) - options, options)
                width = np.repeat(cores, options)
                j, c = within // width, within % width
                plane = nic[flow2] if network.layout == "rail" else np.zeros_like(flow2)
                weight = 1.0 / np.repeat(options, options)
                np.add.at(loads, network.spine_link(pod_a[flow2], plane, j, c, up=True), weight)
                np.add.at(loads, network.spine_link(pod_b[flow2], plane, j, c, up=False), weight)
        out.append(loads)
    return out


def _demand(network: JobNetwork, steps: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
    """Per local tier-1 switch: cross-leaf flows out and in; per local (pod, plane): cross-pod flows out and in
    (each the largest over the steps)."""
    switches = len(network.leaf_names) * network.planes
    pods = len(network.pod_names) * network.planes
    out_s, in_s = np.zeros(switches), np.zeros(switches)
    out_p, in_p = np.zeros(pods), np.zeros(pods)
    nics = network.nics
    for pairs in steps:
        src = np.repeat(pairs[:, 0], nics)
        dst = np.repeat(pairs[:, 1], nics)
        nic = np.tile(np.arange(nics), pairs.shape[0])
        sw_a, sw_b = network.tier1_switch(src, nic), network.tier1_switch(dst, nic)
        cross = sw_a != sw_b
        out_s = np.maximum(out_s, np.bincount(sw_a[cross], minlength=switches))
        in_s = np.maximum(in_s, np.bincount(sw_b[cross], minlength=switches))
        if network.listed_tiers == 2:
            plane = nic if network.layout == "rail" else np.zeros_like(nic)
            pod_a, pod_b = network.server_pod[src], network.server_pod[dst]
            cp = pod_a != pod_b
            out_p = np.maximum(out_p, np.bincount((pod_a * network.planes + plane)[cp], minlength=pods))
            in_p = np.maximum(in_p, np.bincount((pod_b * network.planes + plane)[cp], minlength=pods))
    return out_s, in_s, out_p, in_p


def job_traffic(
    links: FabricLinks,
    network: JobNetwork,
    steps: Sequence[np.ndarray],
    *,
    key: str,
    routes: RoutePlan | None,
    delivery: Delivery,
    qps: int,
    warnings: Sequence[str] = (),
) -> JobTraffic:
    """A job's traffic from its steps (server pairs, `network` indices) and the routes its queue pairs take
    (`routes`; None: the ECMP expectation, as `delivery` must then say)."""
    if routes is None and delivery != "ecmp":
        raise InputError(f"traffic of {key}: {delivery} delivery needs routes")
    per_step = _step_ecmp_loads(network, steps) if routes is None else _step_link_loads(network, routes)
    local = np.zeros(network.num_links)
    for loads in per_step:
        np.maximum(local, loads, out=local)
    fabric_ids = links.local_ids(network)
    used = np.flatnonzero((local > 0) & (fabric_ids >= 0))
    order = np.argsort(fabric_ids[used])
    out_s, in_s, out_p, in_p = _demand(network, steps)
    leaf_ids = np.array([links.leaf_index[name] for name in network.leaf_names], dtype=np.int64)
    switch_ids = (np.repeat(leaf_ids, network.planes) * network.planes) + np.tile(
        np.arange(network.planes), leaf_ids.size
    )
    pod_ids = np.zeros(0, dtype=np.int64)
    if network.listed_tiers == 2:
        fabric_pods = np.array([links.pod_index[name] for name in network.pod_names], dtype=np.int64)
        pod_ids = np.repeat(fabric_pods, network.planes) * network.planes + np.tile(
            np.arange(network.planes), fabric_pods.size
        )
    return JobTraffic(
        key=key,
        nodes=network.nodes,
        links=fabric_ids[used][order],
        loads=local[used][order],
        delivery=delivery,
        qps=qps,
        switch_ids=switch_ids,
        switch_out=out_s,
        switch_in=in_s,
        pod_ids=pod_ids,
        pod_out=out_p if pod_ids.size else np.zeros(0),
        pod_in=in_p if pod_ids.size else np.zeros(0),
        warnings=tuple(warnings),
    )


# -- the ledger --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobShare:
    """A job on a link and its load there."""

    key: str
    load: float


@dataclass(frozen=True, slots=True)
class LinkUse:
    """A switch link's total load and the jobs on it (largest first)."""

    link: int
    name: LinkName
    load: float
    jobs: tuple[JobShare, ...]


@dataclass(frozen=True, slots=True)
class JobOutlook:
    """What a running job can expect on the shared fabric."""

    key: str
    servers: int
    delivery: Delivery
    qps: int
    bottleneck: float
    """Largest total load (flows, every job's) over the links it uses; 1.0 when it crosses no switch link."""
    own: float
    """Its own load on that link."""
    busbw: float
    """Predicted bus bandwidth, 1 / max(1, bottleneck): the slowest flow's fair share of its busiest link."""
    bottleneck_link: str | None
    warnings: tuple[str, ...] = ()
    sharing: int = 0
    """Other jobs on the fabric whose load was counted."""

    @property
    def others(self) -> float:
        """Other jobs' load on its bottleneck link."""
        return max(0.0, self.bottleneck - self.own)

    def to_dict(self) -> dict[str, object]:
        """For reports and `--json`."""
        return {
            "job": self.key,
            "servers": self.servers,
            "delivery": self.delivery,
            "qps": self.qps,
            "bottleneck_link": self.bottleneck_link,
            "bottleneck_load": round(self.bottleneck, 6),
            "own_load": round(self.own, 6),
            "other_jobs_load": round(self.others, 6),
            "predicted_busbw": round(self.busbw, 6),
            "other_jobs": self.sharing,
            "warnings": list(self.warnings),
        }

    def sentence(self) -> str:
        """One clause for Events and plan output."""
        if self.bottleneck_link is None:
            return "no queue pair crosses a switch link: predicted bus bandwidth 1.000 of line rate"
        if self.others > 1e-9:
            share = f"{self.others:.2f} of them other jobs' traffic"
        else:
            share = "none of them other jobs' traffic"
        sharing = f" ({self.sharing} other job{'s' if self.sharing != 1 else ''} on the fabric)" if self.sharing else ""
        return (
            f"busiest link {self.bottleneck_link} carries {self.bottleneck:.2f} flows, {share}{sharing}: predicted "
            f"bus bandwidth {self.busbw:.3f} of line rate"
        )


def plan_outlook(
    routes: RoutePlan, background: np.ndarray | None, *, key: str = "", sharing: int = 0, delivery: Delivery = "hashed"
) -> JobOutlook:
    """A planned job's outlook on a shared fabric: its busiest link over its steps with every job's load
    (`background`: the others', flows per link id of the routes' network), and its own part there."""
    network = routes.network
    extra = np.zeros(network.num_links) if background is None else np.asarray(background, dtype=np.float64)
    best: tuple[float, float, int] = (0.0, 0.0, -1)
    for own in _step_link_loads(network, routes):
        used = np.flatnonzero(own > 1e-12)
        if not used.size:
            continue
        total = own[used] + extra[used]
        at = int(np.argmax(total))
        if total[at] > best[0] + 1e-12:
            best = (float(total[at]), float(own[used][at]), int(used[at]))
    bottleneck, own_load, link = best
    if link < 0:
        return JobOutlook(key, network.servers, delivery, routes.qps, 1.0, 1.0, 1.0, None, sharing=sharing)
    name = link_name(network, link).render()
    busbw = 1.0 / max(1.0, bottleneck)
    return JobOutlook(key, network.servers, delivery, routes.qps, bottleneck, own_load, busbw, name, sharing=sharing)


@dataclass(frozen=True, eq=False)
class FabricReport:
    """The ledger's loads summed up: every link, the busiest ones, each job's outlook, and the bound."""

    loads: np.ndarray
    """Total load of every fabric link id."""
    max_link_load: float
    bound: float
    """Lower bound on the max link load over every routing of all the jobs' flows together (λ* of the fabric):
    max over tier-1 switches (and pods) of their cross flows over their uplinks, on the queue-pair grid; >= 1."""
    busiest: tuple[LinkUse, ...]
    jobs: tuple[JobOutlook, ...]
    links_used: int

    @property
    def busbw(self) -> float:
        """Server-weighted mean of the jobs' predicted bus bandwidth (NaN without jobs)."""
        servers = sum(j.servers for j in self.jobs)
        return sum(j.busbw * j.servers for j in self.jobs) / servers if servers else math.nan


class FabricLedger:
    """Every running job's traffic on one fabric, summed per link (module docstring)."""

    def __init__(self, links: FabricLinks) -> None:
        self.links = links
        self.loads = np.zeros(links.num_links)
        self.jobs: dict[str, JobTraffic] = {}
        self.version = 0
        self._changed_at = np.zeros(links.num_links, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.jobs)

    def __contains__(self, key: object) -> bool:
        return key in self.jobs

    def put(self, traffic: JobTraffic) -> None:
        """Add a job's traffic (replacing what the ledger held for its key)."""
        self._drop(traffic.key)
        self.loads[traffic.links] += traffic.loads
        self.jobs[traffic.key] = traffic
        self._touch(traffic.links)

    def remove(self, key: str) -> bool:
        """Take a job's traffic out; False when the ledger did not hold it."""
        old = self._drop(key)
        if old is None:
            return False
        self._touch(old.links)
        return True

    def _drop(self, key: str) -> JobTraffic | None:
        old = self.jobs.pop(key, None)
        if old is not None:
            self.loads[old.links] -= old.loads
            # sums of 1/Q leave rounding dust when jobs come and go
            self.loads[old.links] = np.where(np.abs(self.loads[old.links]) < 1e-9, 0.0, self.loads[old.links])
        return old

    def _touch(self, links: np.ndarray) -> None:
        self.version += 1
        self._changed_at[links] = self.version

    def moved_since(self, version: int, links: np.ndarray) -> bool:
        """Whether any of `links` (fabric ids) changed after ledger version `version`."""
        return bool(links.size) and int(self._changed_at[links].max()) > version

    def job_links(self, network: JobNetwork) -> np.ndarray:
        """Fabric ids of every switch link a job on `network` may use."""
        ids = self.links.local_ids(network)
        chosen: np.ndarray = ids[ids >= 0]
        return chosen

    def background(self, nodes: Sequence[str], *, exclude: str | None = None) -> LinkBackground:
        """The load of every job but `exclude` on the links a job on `nodes` may use."""
        loads = self.loads
        others = len(self.jobs)
        mine = self.jobs.get(exclude) if exclude is not None else None
        if mine is not None:
            loads = loads.copy()
            loads[mine.links] -= mine.loads
            loads[mine.links] = np.where(np.abs(loads[mine.links]) < 1e-9, 0.0, loads[mine.links])
            others -= 1
        return background_from_loads(self.links, loads, nodes, jobs=others, version=self.version)

    def bound(self, jobs: Iterable[JobTraffic] | None = None) -> float:
        """λ* of the fabric for `jobs` (default: every job held): see `FabricReport.bound`."""
        chosen = list(self.jobs.values()) if jobs is None else list(jobs)
        net = self.links.network
        switches = len(net.leaf_names) * net.planes
        out_s, in_s = np.zeros(switches), np.zeros(switches)
        pods = len(net.pod_names) * net.planes
        out_p, in_p = np.zeros(pods), np.zeros(pods)
        grid = 1
        for job in chosen:
            np.add.at(out_s, job.switch_ids, job.switch_out)
            np.add.at(in_s, job.switch_ids, job.switch_in)
            if job.pod_ids.size:
                np.add.at(out_p, job.pod_ids, job.pod_out)
                np.add.at(in_p, job.pod_ids, job.pod_in)
            if job.delivery != "ecmp":
                grid = math.lcm(grid, job.qps)
        uplinks = np.repeat(net.leaf_uplinks, net.planes).astype(np.float64)
        worst = float((np.maximum(out_s, in_s) * grid / uplinks).max(initial=0.0))
        if net.listed_tiers == 2 and pods:
            capacity = np.repeat(net.pod_spines * net.pod_uplinks, net.planes).astype(np.float64)
            worst = max(worst, float((np.maximum(out_p, in_p) * grid / capacity).max(initial=0.0)))
        return max(1.0, math.ceil(worst - 1e-9) / grid)

    def outlook(self, key: str) -> JobOutlook:
        """What job `key` can expect: its bottleneck link's load, its own part of it, its bus bandwidth."""
        job = self.jobs[key]
        if not job.links.size:
            return JobOutlook(key, job.servers, job.delivery, job.qps, 1.0, 1.0, 1.0, None, job.warnings)
        totals = self.loads[job.links]
        at = int(np.argmax(totals))
        bottleneck = float(totals[at])
        name = self.links.name(int(job.links[at])).render()
        busbw = 1.0 / max(1.0, bottleneck)
        return JobOutlook(
            key,
            job.servers,
            job.delivery,
            job.qps,
            bottleneck,
            float(job.loads[at]),
            busbw,
            name,
            job.warnings,
            sharing=len(self.jobs) - 1,
        )

    def link_use(self, link: int) -> LinkUse:
        """A link's load and the jobs on it."""
        return self.link_uses([link])[0]

    def link_uses(self, links: Sequence[int]) -> list[LinkUse]:
        """Each link's load and the jobs on it (largest first), in the order given: one pass over every job's
        links, however many are asked for (`fabric load --json` asks for every loaded one)."""
        wanted = np.asarray(links, dtype=np.int64)
        shares: dict[int, list[JobShare]] = {int(link): [] for link in wanted.tolist()}
        jobs = list(self.jobs.values())
        if jobs and wanted.size:
            ids = np.concatenate([job.links for job in jobs])
            loads = np.concatenate([job.loads for job in jobs])
            owner = np.repeat(np.arange(len(jobs)), [job.links.size for job in jobs])
            hit = np.flatnonzero(np.isin(ids, wanted))
            for link, load, index in zip(ids[hit].tolist(), loads[hit].tolist(), owner[hit].tolist(), strict=True):
                shares[link].append(JobShare(jobs[index].key, float(load)))
        out = []
        for link in wanted.tolist():
            found = sorted(shares[link], key=lambda s: (-s.load, s.key))
            out.append(LinkUse(int(link), self.links.name(int(link)), float(self.loads[link]), tuple(found)))
        return out

    def report(self, busiest: int = 10) -> FabricReport:
        """Every link's load, the `busiest` links with their jobs, every job's outlook, and the bound."""
        loads = self.loads
        order = np.argsort(-loads, kind="stable")
        top = [int(i) for i in order[:busiest] if loads[i] > 1e-12]
        jobs = tuple(self.outlook(key) for key in sorted(self.jobs))
        return FabricReport(
            loads=loads.copy(),
            max_link_load=float(loads.max(initial=0.0)),
            bound=self.bound(),
            busiest=tuple(self.link_uses(top)),
            jobs=jobs,
            links_used=int(np.count_nonzero(loads > 1e-12)),
        )


__all__ = [
    "Delivery",
    "FabricLedger",
    "FabricReport",
    "JobOutlook",
    "JobShare",
    "JobTraffic",
    "LinkUse",
    "job_traffic",
    "plan_outlook",
]
