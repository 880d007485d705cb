"""`make demo`: the ringroute admission webhook end to end on this machine, then a planned placement.

1. Make a CA and a serving certificate in a temporary directory.
2. Start `ringroute`'s admission server on a loopback port over TLS (no Kubernetes needed).
3. Send the example jobs of examples/jobs/ as AdmissionReviews over HTTPS, verifying the server with the CA,
   the way the API server does: mutate first, apply the patch, then validate the result.
4. Plan node ranks for a job placed on a generated two-tier network and print the metrics before and after.
5. Deliver the same job's pinned routes to an ECMP fabric: per-queue-pair UDP source ports chosen through the
   leaves' hash (MultiQpSrcPort.cfg), against ECMP and against ports spread without a hash model.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import jsonpatch  # noqa: E402
import orjson  # noqa: E402
import yaml  # noqa: E402
from aiohttp import web  # noqa: E402

from certs import ServingCertificates, generate_bundle  # noqa: E402
from emulation.admission import admission_review  # noqa: E402
from planner import (  # noqa: E402
    Device,
    HashModel,
    HashSpec,
    Placement,
    Server,
    SwitchHash,
    Topology,
    format_fraction,
    format_load,
    generate_topology,
    metric_changes,
    plan_ranks,
    steer_source_ports,
)
from webhook.admission.server import admission_app  # noqa: E402
from webhook.common.metrics import Metrics  # noqa: E402
from webhook.common.names import INJECTED_ANNOTATION  # noqa: E402
from webhook.common.settings import Settings  # noqa: E402

JOBS = ROOT / "examples" / "jobs"
CASES = (
    ("documented.yaml", "the documented job (1 node, 1 card)"),
    ("distributed-route-plan.yaml", "its distributed variant (4 pods x 8 cards, ROUTE_PLAN=true)"),
    ("rejected-two-nodes.yaml", "route planning on 2 nodes"),
    ("rejected-four-cards-route-plan.yaml", "route planning with 4-card pods"),
    ("rejected-workdir-nfs.yaml", "working directory on NFS"),
    ("rejected-requests-not-limits.yaml", "NPU requests != limits"),
)
WIDTH = 100


def say(text: str = "", indent: int = 0) -> None:
    prefix = " " * indent
    for line in text.splitlines() or [""]:
        print(
            textwrap.fill(
                line,
                WIDTH,
                initial_indent=prefix,
                subsequent_indent=prefix + "  ",
                break_on_hyphens=False,
                break_long_words=False,
            )
            if line
            else ""
        )


def review(job: dict[str, Any]) -> dict[str, Any]:
    """What the API server sends for `kubectl apply` of a new job."""
    return admission_review(job)


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with session.post(url, data=orjson.dumps(body), headers={"Content-Type": "application/json"}) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{url}: HTTP {resp.status}: {await resp.text()}")
        answer: dict[str, Any] = await resp.json()
        response: dict[str, Any] = answer["response"]
        if response["uid"] != body["request"]["uid"]:
            raise RuntimeError(f"{url}: the answer does not echo the request uid")
        return response


def describe_patch(ops: list[dict[str, Any]]) -> list[str]:
    """One line per op, readable: where and what."""
    lines = []
    for op in ops:
        if "value" not in op:  # a remove op names only its path
            lines.append(f"{op['op']} {op['path']}")
            continue
        value = op["value"]
        if isinstance(value, dict) and "name" in value:
            shown = value["name"] + (f" -> {value['mountPath']}" if "mountPath" in value else "")
            if "configMap" in value:
                shown += f" (ConfigMap {value['configMap']['name']})"
            if "hostPath" in value:
                shown += f" (hostPath {value['hostPath']['path']})"
        else:
            shown = orjson.dumps(value).decode()
        if len(shown) > 60:
            shown = shown[:57] + "..."
        lines.append(f"{op['op']} {op['path']}  {shown}")
    return lines


async def admission_demo(base: str, client_ssl: ssl.SSLContext) -> None:
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ssl)) as session:
        for filename, title in CASES:
            job = yaml.safe_load((JOBS / filename).read_text(encoding="utf-8"))
            say(f"-- {title}: examples/jobs/{filename}")
            mutated = job
            response = await post(session, f"{base}/jobs/mutate", review(job))
            if "patch" in response:
                ops = orjson.loads(base64.b64decode(response["patch"]))
                mutated = jsonpatch.apply_patch(job, ops)
                injected = mutated["metadata"]["annotations"][INJECTED_ANNOTATION]
                say(f"mutate: {len(ops)} patch ops; {INJECTED_ANNOTATION}={injected}", 3)
                if filename in ("documented.yaml", "distributed-route-plan.yaml"):
                    for line in describe_patch(ops):
                        say(line, 6)
            verdict = await post(session, f"{base}/jobs/validate", review(mutated))
            if verdict["allowed"]:
                say("validate: ADMITTED", 3)
                if filename == "distributed-route-plan.yaml":
                    command = mutated["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["command"]
                    say(f"command now: {' '.join(command)}", 6)
            else:
                status = verdict["status"]
                say(f"validate: DENIED (HTTP 200, allowed: false, code {status['code']})", 3)
                for cause in status["details"]["causes"]:
                    say(cause["message"], 6)
            for warning in verdict.get("warnings", []):
                say(f"warning: {warning}", 6)
            say()


def scattered_job(name: str, nodes: list[str], cards: int = 8) -> Placement:
    """A job with one 8-card pod per node, task index = position in `nodes` (what Volcano placed)."""
    servers = tuple(
        Server(
            pod_name=f"{name}-worker-{i}",
            node_name=node,
            server_id=f"10.0.0.{i + 1}",
            host_ip=f"10.0.0.{i + 1}",
            pod_ip=f"172.16.0.{i + 1}",
            task_name="worker",
            task_index=i,
            devices=tuple(Device(device_id=d, device_ip=f"192.168.{i}.{d + 1}") for d in range(cards)),
        )
        for i, node in enumerate(nodes)
    )
    return Placement(job_name=name, namespace="default", servers=servers)


def demo_job() -> tuple[Placement, Topology]:
    """32 pods x 8 cards on scattered free nodes of a 16-leaf two-tier Clos."""
    import random

    topology = generate_topology(leaves=16, servers_per_leaf=8)
    rng = random.Random(7)
    nodes = rng.sample(sorted(topology.paths), 32)  # a fragmented cluster: free nodes are scattered
    return scattered_job("bert-32x8", nodes), topology


def planning_demo() -> None:
    say("-- rank planning: 32 pods x 8 cards placed on free nodes of a 16-leaf two-tier Clos (8 nodes/leaf)")
    placement, topology = demo_job()
    result = plan_ranks(placement, topology, "ring", "ecmp", rng=0, time_limit=2.0)
    before, after = result.before, result.after
    say(f"planner: {result.message} ({result.wall_time_s * 1000:.0f} ms); rank 0 stays on task index 0", 3)
    say(f"{'metric':44} {'pod-index order':>16} {'ringroute':>12} {'bound':>8}", 3)
    # the numbers and rounding of `ringroute plan` and the plan report
    for change in metric_changes(before, after):
        name = f"{change.label} ({change.unit})" if change.unit else change.label
        say(f"{name:44} {change.before_text:>16} {change.after_text:>12} {change.bound_text:>8}", 3)
    say()


LEAF_HASH = HashModel(tiers={"leaf": SwitchHash(HashSpec("crc16-ccitt", seed=0x1D0F, bucket="modulo"))})
"""The leaves' ECMP hash, as `ringroute fabric calibrate` would write it (a declared CRC-16 with a seed)."""


def steering_demo() -> None:
    say("-- the same job's pinned routes on an ECMP fabric: a UDP source port per queue pair (4 per connection)")
    placement, topology = demo_job()
    pinned = plan_ranks(placement, topology, "ring", "pinned", qps=4, rng=0, time_limit=2.0)
    ecmp = plan_ranks(placement, topology, "ring", "ecmp", qps=4, rng=0, time_limit=2.0)
    spread = steer_source_ports(placement, topology, ecmp, None)  # no hash model: ports spread for entropy
    steered = steer_source_ports(placement, topology, pinned, LEAF_HASH)
    assert spread.predicted is not None
    assert spread.baseline is not None
    assert steered.predicted is not None
    say(f"{'delivery':68} {'max link load':>14} {'ring busbw':>11}", 3)
    for label, evaluation in (
        ("ECMP, 1 queue pair per connection (mean over hash seeds)", spread.baseline),
        ("ECMP, 4 queue pairs on spread ports, no hash model (mean)", spread.predicted),
        ("4 queue pairs steered through the leaves' hash (MultiQpSrcPort.cfg)", steered.predicted),
    ):
        say(f"{label:68} {format_load(evaluation.max_link_load):>14} {format_fraction(evaluation.ring_busbw):>11}", 3)
    held = "every queue pair on its planned spine" if steered.off_plan == 0 else f"{steered.off_plan} rerouted"
    first = steered.config_text().splitlines()[2]  # after the two comment lines
    say(f"MultiQpSrcPort.cfg: {steered.lines} address pairs, {held}; the first: {first}", 3)
    say()


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="ringroute-demo-") as tmp:
        cert_dir = Path(tmp)
        generate_bundle("ringroute", "ringroute-system", cert_dir, days=1, extra_names=("127.0.0.1", "localhost"))
        say(f"certificates: CA and ECDSA P-256 serving pair in {cert_dir} (ca.crt, tls.crt, tls.key)")
        certificates = ServingCertificates(cert_dir)
        metrics = Metrics()
        app = admission_app(Settings(), metrics, certificates=certificates)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certificates.ssl_context())
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        base = f"https://127.0.0.1:{port}"
        say(f"admission server: {base} (TLS >= 1.2; no API server here, so ConfigMap creation is skipped)")
        say()
        client_ssl = ssl.create_default_context(cafile=str(cert_dir / "ca.crt"))
        try:
            await admission_demo(base, client_ssl)
        finally:
            await runner.cleanup()
        say("server stopped")
        say()
    planning_demo()
    steering_demo()
    return 0


if __name__ == "__main__":
    import logging

    logging.basicConfig(level=logging.ERROR)
    sys.exit(asyncio.run(main()))
