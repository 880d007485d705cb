"""Lease leader election: one writer at a time, release on stop, takeover after a crash or a stolen lease."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from emulation.apiserver import FakeApiServer
from emulation.cluster import NS, add_job, cluster_nodes, make_job, make_pod
from tests.support.controller import fast_settings, running_controller, wait_for
from webhook.common.metrics import Metrics
from webhook.controller.run import run_controller
from webhook.kube.client import KubeRepository
from webhook.kube.leader import LeaderElector

LEASE = {"lease_duration_s": 1.0, "renew_deadline_s": 0.6, "retry_period_s": 0.15}


def holder(server: FakeApiServer) -> str | None:
    lease = server.get("leases", NS, "ringroute-controller")
    return None if lease is None else (lease.get("spec") or {}).get("holderIdentity")


class Replica:
    def __init__(self, server: FakeApiServer, identity: str) -> None:
        self.identity = identity
        self.api = server.client(agent=identity)
        self.metrics = Metrics()
        self.stop = asyncio.Event()
        settings = fast_settings(**LEASE)
        self.task = asyncio.create_task(
            run_controller(
                settings,
                KubeRepository(self.api, self.metrics),
                self.metrics,
                identity=identity,
                stop=self.stop,
                pending_event_interval_s=0,
            )
        )

    def leader_gauge(self) -> float:
        return float(self.metrics.leader._value.get())

    async def crash(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.api.close()

    async def shutdown(self) -> None:
        self.stop.set()
        await asyncio.wait_for(self.task, 5)
        await self.api.close()


async def seed(server: FakeApiServer) -> None:
    for node in cluster_nodes(2, 8):
        await server.apply("nodes", node)


async def test_only_the_leader_writes_and_a_stopped_leader_releases_the_lease_at_once() -> None:
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        await seed(server)
        a = Replica(server, "replica-a")
        await wait_for(lambda: holder(server) == "replica-a")
        b = Replica(server, "replica-b")
        job = make_job("one", 3)
        await add_job(server, job)
        for i, node in enumerate(["npu-0", "npu-8", "npu-9"]):
            await server.apply("pods", make_pod(job, i, node))
        await wait_for(
            lambda: (
                '"completed"'
                in (server.get("configmaps", NS, "configmap1980-one") or {})
                .get("data", {})
                .get("jobstart_hccl.json", "")
            )
        )
        assert {r.agent for r in server.writes("configmaps")} == {"replica-a"}
        assert a.leader_gauge() == 1.0
        assert b.leader_gauge() == 0.0
        loop = asyncio.get_running_loop()
        stopped_at = loop.time()
        await a.shutdown()
        assert holder(server) in (None, "replica-b")
        await wait_for(lambda: holder(server) == "replica-b", timeout_s=3)
        assert loop.time() - stopped_at < 1.0, "a released lease is taken without waiting for it to expire"
        await b.shutdown()
        assert holder(server) is None


async def test_leader_lost_mid_reconcile_writes_nothing_and_the_second_replica_takes_over() -> None:
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        await seed(server)
        a = Replica(server, "replica-a")
        await wait_for(lambda: holder(server) == "replica-a")
        b = Replica(server, "replica-b")
        job = make_job("two", 3)
        await add_job(server, job)
        await wait_for(lambda: server.get("configmaps", NS, "configmap1980-two") is not None)

        def steal(lease: dict[str, Any]) -> None:
            lease["spec"]["holderIdentity"] = "intruder"

        await server.mutate("leases", NS, "ringroute-controller", steal)
        await wait_for(lambda: a.leader_gauge() == 0.0, timeout_s=1.0)
        # Until its next renewal A cannot know; from the moment it notices, it writes nothing.
        stolen_at = len(server.requests)
        for i, node in enumerate(["npu-0", "npu-8", "npu-9"]):
            await server.apply("pods", make_pod(job, i, node))
        await asyncio.sleep(0.5)
        assert not server.writes("configmaps", since=stolen_at), "nobody writes while the intruder holds the lease"
        await a.crash()  # A would campaign again; take it out so that B is the one to take over
        await wait_for(lambda: holder(server) == "replica-b", timeout_s=5)
        await wait_for(
            lambda: (
                '"completed"'
                in (server.get("configmaps", NS, "configmap1980-two") or {})
                .get("data", {})
                .get("jobstart_hccl.json", "")
            )
        )
        writers = {r.agent for r in server.writes("configmaps", since=stolen_at)}
        assert writers == {"replica-b"}
        assert not [r for r in server.writes("events", since=stolen_at) if r.agent == "replica-a"]
        await b.shutdown()


async def test_a_crashed_leader_is_replaced_after_the_lease_expires_and_only_then_creates_the_configmap() -> None:
    async with FakeApiServer(bookmark_interval_s=0.5) as server:
        await seed(server)
        a = Replica(server, "replica-a")
        await wait_for(lambda: holder(server) == "replica-a")
        b = Replica(server, "replica-b")
        await asyncio.sleep(0.3)
        await a.crash()
        assert holder(server) == "replica-a", "a crash does not release the lease"
        job = make_job("three", 3)
        await add_job(server, job)
        await asyncio.sleep(0.1)
        assert server.get("configmaps", NS, "configmap1980-three") is None, "no leader, no ConfigMap: pods wait"
        for i, node in enumerate(["npu-0", "npu-1", "npu-8"]):
            await server.apply("pods", make_pod(job, i, node))
        await wait_for(lambda: holder(server) == "replica-b", timeout_s=4)
        await wait_for(lambda: server.get("configmaps", NS, "configmap1980-three") is not None, timeout_s=2)
        assert {r.agent for r in server.writes("configmaps")} == {"replica-b"}
        await wait_for(
            lambda: (
                '"completed"'
                in (server.get("configmaps", NS, "configmap1980-three") or {})
                .get("data", {})
                .get("jobstart_hccl.json", "")
            )
        )
        await b.shutdown()


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def elector(repo: KubeRepository, identity: str, clock: Clock) -> LeaderElector:
    return LeaderElector(
        repo,
        Metrics(),
        name="l",
        namespace=NS,
        identity=identity,
        lease_duration_s=1.0,
        renew_deadline_s=0.6,
        retry_period_s=0.1,
        clock=clock,
    )


async def test_the_write_fence_closes_when_renewal_stops() -> None:
    clock = Clock()
    async with FakeApiServer() as server, server.repository() as repo:
        me = elector(repo, "me", clock)
        assert not me.is_leader()
        assert await me._try_acquire_or_renew()
        me._set_leading(True)
        assert me.is_leader()
        clock.now += 0.59
        assert me.is_leader()
        clock.now += 0.02
        assert not me.is_leader(), "no write once the renew deadline passed without a renewal"


async def test_a_follower_takes_the_lease_only_a_full_duration_after_the_record_last_changed() -> None:
    clock = Clock()
    async with FakeApiServer() as server, server.repository() as repo:
        leader, follower = elector(repo, "a", clock), elector(repo, "b", clock)
        assert await leader._try_acquire_or_renew()
        assert not await follower._try_acquire_or_renew(), "held by a"
        clock.now += 0.5
        assert await leader._try_acquire_or_renew(), "a renews"
        clock.now += 0.6
        assert not await follower._try_acquire_or_renew(), "b saw the renewal only now: the wait starts again"
        clock.now += 0.9
        assert not await follower._try_acquire_or_renew()
        clock.now += 0.2
        assert await follower._try_acquire_or_renew(), "a full lease duration without a change: b takes over"
        lease = server.get("leases", NS, "l")
        assert lease is not None
        assert lease["spec"]["holderIdentity"] == "b"
        assert lease["spec"]["leaseTransitions"] == 1
        assert not await leader._try_acquire_or_renew(), "a, back from a pause, finds b holding it"


async def test_a_released_lease_is_taken_at_once() -> None:
    clock = Clock()
    async with FakeApiServer() as server, server.repository() as repo:
        leader, follower = elector(repo, "a", clock), elector(repo, "b", clock)
        assert await leader._try_acquire_or_renew()
        assert not await follower._try_acquire_or_renew()
        await leader.release()
        assert await follower._try_acquire_or_renew(), "no holder: no wait"


async def test_reconcile_that_loses_the_lease_while_planning_writes_nothing() -> None:
    calls = {"n": 0}

    def leader_until_planning_ends() -> bool:
        calls["n"] += 1
        return calls["n"] <= 1  # true for the check at the start of reconcile only

    async with running_controller(settings=fast_settings(debounce_s=0.3)) as h:
        job = make_job("fence", 3)
        await add_job(h.server, job)
        await h.wait_status("fence", "initializing")
        await h.settle()
        h.controller.is_leader = leader_until_planning_ends
        before = len(h.server.requests)
        for i, node in enumerate(["npu-0", "npu-8", "npu-16"]):
            await h.server.apply("pods", make_pod(job, i, node))
        await h.settle(0.8)
        assert h.metrics.plan_latency._sum.get() > 0, "the reconcile got as far as planning"
        assert calls["n"] >= 2
        assert h.status("fence") == "initializing"
        assert not h.server.writes(since=before)
