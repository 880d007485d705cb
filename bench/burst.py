"""A burst of job submissions against one `ringroute serve`: refusals, latency, CPU and memory.

Prints JSON lines (`python bench/burst.py [--kubeconfig FILE] [--rounds 5] [--reviews 200]`), seeded:
- `loopback`: 200 AdmissionReviews at once of Volcano Jobs of 2-80 KiB (half CREATE, half UPDATE: those carry the
  stored job too, so their bodies are up to 160 KiB), each on its own TLS connection to 127.0.0.1, as the API
  server sends a burst: first to /jobs/mutate, then (once all are answered) the mutated jobs to /jobs/validate.
  Per endpoint and round: refused (any answer but an admission verdict: a 429 denial, an HTTP error, no answer),
  p50/p99/max latency from connect to answer, the server's CPU per review and its peak RSS;
- `large_request_workers`: the same burst with the large-request threads replaced, in the bench's own launch of
  the server, by 1, 2 or 4 threads, or by 1 or 2 processes, and `--workers 2` (two serving processes sharing the
  port): which serves large jobs faster on this machine;
- `kubectl`: with `--kubeconfig` (a cluster with Volcano's CRDs and webhooks, such as ../shared/cluster's),
  ringroute's shipped webhook configurations registered for one namespace and pointed at the server on loopback,
  then 50 parallel `kubectl apply` of 64-80 KiB jobs (CREATE), then the same files with one more replica (UPDATE):
  admitted or refused (kubectl's message), p50/p99 of kubectl's wall time, the server's verdicts from its
  /metrics, its CPU per review and peak RSS; without it, one line saying it was skipped;
- `summary`: each target pass/fail (0 refused and p99 <= 1 s on loopback; every kubectl apply admitted).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import os
import random
import re
import shutil
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit, stop_process_group  # noqa: E402
from bench.webhook import client_context, free_port, server_cpu_seconds, wait_ready  # noqa: E402
from certs import generate_bundle  # noqa: E402
from emulation.admission import admission_review, local_webhooks  # noqa: E402

SEED = 24
REVIEWS = 200
ROUNDS = 5
JOB_KIB = (2, 80)
LARGEST_JOBS = 50
LARGEST_KIB = (1400, 1450)
"""A burst of updates of jobs near the largest admitted (admission.maxJobKib: 1536): their reviews, 2.8 MiB each, are
twice the body buffer, so most wait for room."""
MIX = f"{REVIEWS} x {JOB_KIB[0]}-{JOB_KIB[1]} KiB, CREATE and UPDATE"
LARGEST = f"{LARGEST_JOBS} x {LARGEST_KIB[0]}-{LARGEST_KIB[1]} KiB, UPDATE"
KUBECTL_JOBS = 50
KUBECTL_KIB = (64, 80)
TARGET_P99_S = 1.0
ANSWER_TIMEOUT_S = 10.0
"""A client gives up on an answer after this (longer than the webhook timeout, so a late answer shows as late)."""
BASE_JOB = ROOT / "examples" / "jobs" / "distributed-route-plan.yaml"


@dataclass(frozen=True)
class Submission:
    """One job of the burst: its AdmissionReviews as the API server sends them to each webhook."""

    name: str
    operation: str
    job_bytes: int
    mutate: bytes
    validate: bytes


def padded_job(name: str, kib: float, rng: random.Random) -> dict[str, Any]:
    """The route-planned example job renamed, grown to about `kib` KiB of JSON with env vars (the usual way a job
    gets large: hyperparameters, paths, feature flags) of seeded lengths."""
    job: dict[str, Any] = yaml.safe_load(BASE_JOB.read_text(encoding="utf-8"))
    job["metadata"]["name"] = name
    job["metadata"]["namespace"] = "default"
    anti = job["spec"]["tasks"][0]["template"]["spec"]["affinity"]["podAntiAffinity"]
    anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]["matchExpressions"][0]["values"] = [name]
    env = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["env"]
    size, target, index = len(orjson.dumps(job)), int(kib * 1024), 0
    while size < target:
        value = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789/_-.", k=rng.randint(8, 400)))
        item = {"name": f"TRAIN_PARAM_{index:04d}", "value": value[: max(1, target - size - 40)]}
        env.insert(len(env) - 1, item)
        size += len(orjson.dumps(item)) + 1
        index += 1
    return job


def mutated(job: dict[str, Any], operation: str, old: dict[str, Any] | None) -> dict[str, Any]:
    """The job after ringroute's mutation (computed in this process, as the server would)."""
    from webhook.admission.jobview import read_job
    from webhook.admission.mutation import plan_create, plan_update
    from webhook.common.settings import default_settings

    view = read_job(job, default_settings())
    ops = plan_create(view).ops if operation == "CREATE" else plan_update(view, old or {}).ops
    result: dict[str, Any] = jsonpatch.apply_patch(job, copy.deepcopy(ops))
    return result


def stored(job: dict[str, Any]) -> dict[str, Any]:
    """The job as the API server stores it after a CREATE: mutated, with a uid and a resourceVersion."""
    result = mutated(job, "CREATE", None)
    (result["spec"].get("plugins") or {}).pop("configmap1980", None)
    result["metadata"].update(uid=f"00000000-0000-4000-8000-{abs(hash(job['metadata']['name'])) % 10**12:012d}")
    result["metadata"]["resourceVersion"] = "1000"
    return result


def scaled(job: dict[str, Any]) -> dict[str, Any]:
    """The update Volcano allows: one more replica, the gang grown with it."""
    result = copy.deepcopy(job)
    result["spec"]["tasks"][0]["replicas"] += 1
    result["spec"]["minAvailable"] += 1
    return result


def burst(
    count: int, seed: int, kib: tuple[int, int] = JOB_KIB, operations: tuple[str, ...] = ("CREATE", "UPDATE")
) -> list[Submission]:
    """`count` jobs of `kib` KiB (uniform, seeded), each created or updated, taking `operations` in turn."""
    rng = random.Random(seed)
    submissions = []
    for i in range(count):
        name = f"burst-{seed}-{i:04d}"
        job = padded_job(name, rng.uniform(*kib), rng)
        operation = operations[i % len(operations)]
        if operation == "CREATE":
            first = admission_review(job, uid=f"{name}-m")
            after = mutated(job, "CREATE", None)
            (after["spec"].get("plugins") or {}).pop("configmap1980", None)
            second = admission_review(after, uid=f"{name}-v")
        else:
            old = stored(job)
            new = scaled(old)
            first = admission_review(new, operation="UPDATE", old=old, uid=f"{name}-m")
            second = admission_review(mutated(new, "UPDATE", old), operation="UPDATE", old=old, uid=f"{name}-v")
        submissions.append(
            Submission(name, operation, len(orjson.dumps(job)), orjson.dumps(first), orjson.dumps(second))
        )
    return submissions


# -- the client ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What one review got: HTTP status (0: none), the admission verdict, the latency."""

    status: int
    allowed: bool | None
    code: int | None
    uid_echoed: bool
    seconds: float
    error: str = ""

    @property
    def verdict(self) -> str:
        """admitted, denied (a policy denial), busy (the 429 denial), http_<status>, or no_answer."""
        if self.status == 0:
            return "no_answer"
        if self.status != 200 or not self.uid_echoed:
            return f"http_{self.status}"
        if self.allowed:
            return "admitted"
        return "busy" if self.code == 429 else "denied"


async def post_once(port: int, context: ssl.SSLContext, path: str, body: bytes, uid: str) -> Answer:
    """One POST on a new TLS connection, as the API server opens one per concurrent webhook call."""
    started = time.perf_counter()
    writer = None
    try:
        async with asyncio.timeout(ANSWER_TIMEOUT_S):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
            head = (
                f"POST {path}?timeout=5s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            writer.write(head + body)
            await writer.drain()
            raw_head = await reader.readuntil(b"\r\n\r\n")
            status = int(raw_head.split(b" ", 2)[1])
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", raw_head).group(1))  # type: ignore[union-attr]
            payload = await reader.readexactly(length)
    except (OSError, TimeoutError, ssl.SSLError, asyncio.IncompleteReadError, AttributeError) as exc:
        return Answer(0, None, None, False, time.perf_counter() - started, type(exc).__name__)
    finally:
        if writer is not None:
            writer.close()
    seconds = time.perf_counter() - started
    try:
        response = orjson.loads(payload).get("response") or {}
    except orjson.JSONDecodeError:
        response = {}
    code = (response.get("status") or {}).get("code")
    return Answer(status, response.get("allowed"), code, response.get("uid") == uid, seconds)


async def send_all(port: int, ca_file: Path, path: str, bodies: Sequence[tuple[bytes, str]]) -> list[Answer]:
    """Every body at once, each on its own connection."""
    context = client_context(ca_file)
    return await asyncio.gather(*(post_once(port, context, path, body, uid) for body, uid in bodies))


def percentile(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def summarise(answers: Sequence[Answer]) -> dict[str, Any]:
    verdicts: dict[str, int] = {}
    for answer in answers:
        verdicts[answer.verdict] = verdicts.get(answer.verdict, 0) + 1
    seconds = [a.seconds for a in answers]
    return {
        "reviews": len(answers),
        "refused": sum(n for v, n in verdicts.items() if v not in ("admitted", "denied")),
        "verdicts": verdicts,
        "p50_ms": round(1000 * percentile(seconds, 0.50), 1),
        "p99_ms": round(1000 * percentile(seconds, 0.99), 1),
        "max_ms": round(1000 * max(seconds), 1),
    }


# -- the server ---------------------------------------------------------------------------------------------------


VARIANTS: dict[str, tuple[str, int]] = {
    "threads-1": ("thread", 1),
    "threads-2": ("thread", 2),
    "threads-4": ("thread", 4),
    "processes-1": ("process", 1),
    "processes-2": ("process", 2),
}
"""Large-request executors the `large_request_workers` case compares (kind, how many)."""


def _serve_variant(kind: str, count: int, argv: list[str]) -> None:
    """`ringroute serve` with its large-request threads replaced: `count` threads, or `count` worker processes
    that each check requests with admission's code and the default settings (this bench's own launch of the
    server; what ships is `LARGE_REQUEST_THREADS`)."""
    from webhook.admission import server

    if kind == "thread":
        server.LARGE_REQUEST_THREADS = count
    else:
        server.LargeRequests = _process_pool(count)  # type: ignore[attr-defined]
    from webhook.cli.main import main

    raise SystemExit(main(argv))


def _process_pool(count: int) -> type[Any]:
    """LargeRequests whose work runs in `count` processes (each decodes, checks and encodes the whole request)."""
    import concurrent.futures
    import functools
    import multiprocessing

    from webhook.admission.large_requests import LargeRequests

    class InProcesses(LargeRequests):
        def __init__(self, _threads: int) -> None:
            super().__init__(count)
            self._executor = concurrent.futures.ProcessPoolExecutor(  # type: ignore[assignment]
                count, mp_context=multiprocessing.get_context("spawn"), initializer=_start_checking
            )

        async def run(self, work: Any, deadline: float) -> Any:
            endpoint, body = work.args
            return await super().run(functools.partial(_check, endpoint, bytes(body)), deadline)

    return InProcesses


_checker: Any = None


def _start_checking() -> None:
    global _checker  # noqa: PLW0603 (one handler per worker process)
    from webhook.admission.server import AdmissionHandlers
    from webhook.common.metrics import Metrics
    from webhook.common.settings import default_settings

    _checker = AdmissionHandlers(default_settings(), Metrics(), None)


def _check(endpoint: str, body: bytes) -> tuple[int, bytes, str]:
    result: tuple[int, bytes, str] = _checker.answer(endpoint, body)
    return result


def group_peak_rss_mib(pid: int) -> float:
    """Sum of the peak RSS (VmHWM) of the process group `pid` leads: the server and its workers."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[2]) != pid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024.0
        except (OSError, ValueError, IndexError):
            continue
    return round(total, 1)


@contextlib.contextmanager
def running_serve(
    cert_dir: Path, port: int, log_path: Path, *, workers: int = 1, variant: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`ringroute serve` (admission only, no API server) on 127.0.0.1:port, ready."""
    argv = [
        "serve", "--listen", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir), "--no-controller", "--no-extender",
        "--workers", str(workers),
    ]  # fmt: skip
    if variant is None:
        command = [sys.executable, "-m", "webhook", *argv]
    else:
        kind, count = VARIANTS[variant]
        launch = f"import sys; sys.path.insert(0, {str(ROOT)!r}); from bench.burst import _serve_variant; "
        command = [sys.executable, "-c", launch + f"_serve_variant({kind!r}, {count}, {argv!r})"]
    env = dict(os.environ, KUBECONFIG=os.devnull)
    env.pop("KUBERNETES_SERVICE_HOST", None)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            wait_ready(port, cert_dir / "ca.crt", process)
            yield process
        finally:
            stop_process_group(process, 20)


def loopback_rounds(
    port: int, ca_file: Path, process: subprocess.Popen[bytes], submissions: Sequence[Submission], rounds: int
) -> dict[str, list[dict[str, Any]]]:
    """`rounds` bursts per endpoint: each round's figures, by endpoint."""
    by_endpoint: dict[str, list[dict[str, Any]]] = {"mutate": [], "validate": []}
    for _round in range(rounds):
        for endpoint, endpoint_rows in by_endpoint.items():
            bodies = [(getattr(s, endpoint), f"{s.name}-{endpoint[0]}") for s in submissions]
            cpu_before = server_cpu_seconds(process.pid)
            started = time.perf_counter()
            answers = asyncio.run(send_all(port, ca_file, f"/jobs/{endpoint}", bodies))
            wall = time.perf_counter() - started
            cpu = server_cpu_seconds(process.pid) - cpu_before
            row = summarise(answers)
            row["burst_s"] = round(wall, 3)
            row["server_cpu_ms_per_review"] = round(1000 * cpu / len(answers), 2)
            row["server_peak_rss_mib"] = group_peak_rss_mib(process.pid)
            endpoint_rows.append(row)
    return by_endpoint


def combined(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Rounds of one endpoint together: refusals summed, the median round's p50/p99, the worst max."""
    middle = sorted(rows, key=lambda r: r["p99_ms"])[len(rows) // 2]
    return {
        "rounds": len(rows),
        "refused": sum(r["refused"] for r in rows),
        "p50_ms": middle["p50_ms"],
        "p99_ms": middle["p99_ms"],
        "p99_ms_rounds": [r["p99_ms"] for r in rows],
        "max_ms": max(r["max_ms"] for r in rows),
        "burst_s": middle["burst_s"],
        "server_cpu_ms_per_review": round(sum(r["server_cpu_ms_per_review"] for r in rows) / len(rows), 2),
        "server_peak_rss_mib": max(r["server_peak_rss_mib"] for r in rows),
        "verdicts_last_round": rows[-1]["verdicts"],
    }


def bench_loopback(
    cert_dir: Path, work: Path, bursts: Mapping[str, Sequence[Submission]], rounds: int, *, case: str = "loopback",
    variant: str | None = None, workers: int = 1,
) -> list[dict[str, Any]]:  # fmt: skip
    """Each burst `rounds` times per endpoint against one server (after a warm-up burst): a row per burst and
    endpoint."""
    port = free_port()
    rows = []
    with running_serve(cert_dir, port, work / f"serve-{case}-{variant}.log", workers=workers, variant=variant) as p:
        first = next(iter(bursts.values()))
        asyncio.run(send_all(port, cert_dir / "ca.crt", "/jobs/mutate", [(s.mutate, f"{s.name}-m") for s in first]))
        for name, submissions in bursts.items():
            results = loopback_rounds(port, cert_dir / "ca.crt", p, submissions, rounds)
            sizes = sorted(s.job_bytes for s in submissions)
            for endpoint, endpoint_rows in results.items():
                row: dict[str, Any] = {"case": case}
                if case != "loopback":
                    row["executor"] = variant or f"--workers {workers}"
                row |= {
                    "burst": name,
                    "endpoint": f"/jobs/{endpoint}",
                    "reviews": len(submissions),
                    "job_kib_min_max": [round(sizes[0] / 1024, 1), round(sizes[-1] / 1024, 1)],
                    "request_mib_total": round(sum(len(getattr(s, endpoint)) for s in submissions) / 2**20, 1),
                    **combined(endpoint_rows),
                }
                rows.append(row)
    return rows


# -- through the API server ---------------------------------------------------------------------------------------


def webhook_configurations(port: int, ca_pem: bytes, namespace: str) -> list[dict[str, Any]]:
    """The shipped webhook configurations (manifests/base/webhooks.yaml) for `namespace` only, calling the server
    on loopback."""
    documents = [d for d in yaml.safe_load_all((ROOT / "manifests" / "base" / "webhooks.yaml").read_text()) if d]
    return [local_webhooks(document, port, ca_pem, namespace) for document in documents]


def kubectl(
    kubeconfig: Path, *args: str, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """kubectl of the real-cluster kit (or the one on PATH) against `kubeconfig`."""
    binary = shutil.which("kubectl") or "/var/tmp/ringroute-cluster-bin/kubectl"
    return subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


def admission_counts(port: int, ca_file: Path) -> dict[str, float]:
    """From the server's /metrics: ringroute_admission_requests_total as `endpoint/verdict`, and the latency
    histogram's buckets of both endpoints together as `le=<bound>`."""
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(ca_file), timeout=10)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    counts: dict[str, float] = {}
    pattern = r'ringroute_admission_requests_total\{endpoint="(\w+)",verdict="(\w+)"\} ([0-9.e+]+)'
    for endpoint, verdict, value in re.findall(pattern, text):
        counts[f"{endpoint}/{verdict}"] = float(value)
    for bound, value in re.findall(
        r'ringroute_admission_latency_seconds_bucket\{endpoint="\w+",le="([^"]+)"\} ([0-9.e+]+)', text
    ):
        counts[f"le={bound}"] = counts.get(f"le={bound}", 0.0) + float(value)
    return counts


def answered_within(delta: dict[str, int], share: float) -> float | None:
    """The smallest latency bucket bound (seconds) within which `share` of the answers counted in `delta` fell
    (buckets are cumulative; one that gained nothing is absent)."""
    total = delta.get("le=+Inf", 0)
    buckets = sorted((float(k[3:]), n) for k, n in delta.items() if k.startswith("le=") and k != "le=+Inf")
    return next((bound for bound, count in buckets if count >= share * total), None)


def parallel_applies(kubeconfig: Path, files: Sequence[Path], cache: Path) -> list[tuple[bool, float, str]]:
    """`kubectl apply -f FILE` of every file at once: (admitted, seconds that kubectl ran, its message)."""
    import concurrent.futures

    def apply(path: Path) -> tuple[bool, float, str]:
        started = time.perf_counter()
        done = kubectl(kubeconfig, "--cache-dir", str(cache), "apply", "-f", str(path), timeout=300)
        message = (done.stdout + done.stderr).decode(errors="replace").strip()
        return done.returncode == 0, time.perf_counter() - started, message

    with concurrent.futures.ThreadPoolExecutor(len(files)) as pool:
        return list(pool.map(apply, files))


def scaled_files(kubeconfig: Path, namespace: str, work: Path) -> list[Path]:
    """The stored jobs of `namespace` with one more replica, as a user edits `kubectl get -o yaml` and applies it
    (Volcano refuses a re-applied file that drops what its defaulting added, such as tasks[].maxRetry)."""
    listed = kubectl(kubeconfig, "-n", namespace, "get", "jobs.batch.volcano.sh", "-o", "json")
    files = []
    for job in orjson.loads(listed.stdout)["items"]:
        job.pop("status", None)
        for field in ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"):
            job["metadata"].pop(field, None)
        job["spec"]["tasks"][0]["replicas"] += 1
        job["spec"]["minAvailable"] += 1
        path = work / f"{job['metadata']['name']}-scaled.json"
        path.write_bytes(orjson.dumps(job))
        files.append(path)
    return sorted(files)


def bench_kubectl(kubeconfig: Path, cert_dir: Path, work: Path, jobs: int, seed: int) -> list[dict[str, Any]]:
    namespace = f"rr-burst-{seed}"
    port = free_port()
    ca_file = cert_dir / "ca.crt"
    rows: list[dict[str, Any]] = []
    kubectl(kubeconfig, "delete", "namespace", namespace, "--ignore-not-found", "--wait=true")
    created = kubectl(kubeconfig, "create", "namespace", namespace)
    if created.returncode != 0:
        return [{"case": "kubectl", "error": created.stderr.decode().strip()}]
    rng = random.Random(seed)
    creates = []
    for i in range(jobs):
        job = padded_job(f"large-{i:03d}", rng.uniform(*KUBECTL_KIB), rng)
        job["metadata"]["namespace"] = namespace
        path = work / f"job-{i:03d}.json"
        path.write_bytes(orjson.dumps(job))
        creates.append(path)
    cache = work / "kube-cache"
    configurations = webhook_configurations(port, ca_file.read_bytes(), namespace)
    try:
        with running_serve(cert_dir, port, work / "serve-kubectl.log") as process:
            for document in configurations:
                applied = kubectl(kubeconfig, "apply", "-f", "-", stdin=orjson.dumps(document))
                if applied.returncode != 0:
                    return [{"case": "kubectl", "error": applied.stderr.decode().strip()}]
            kubectl(kubeconfig, "--cache-dir", str(cache), "api-resources")  # discovery cached once, not 50 times
            time.sleep(1.0)  # the API server's webhook informer sees the new configurations
            for operation in ("CREATE", "UPDATE"):
                files = creates if operation == "CREATE" else scaled_files(kubeconfig, namespace, work)
                before, cpu_before = admission_counts(port, ca_file), server_cpu_seconds(process.pid)
                results = parallel_applies(kubeconfig, files, cache)
                cpu = server_cpu_seconds(process.pid) - cpu_before
                after = admission_counts(port, ca_file)
                delta = {k: int(after[k] - before.get(k, 0)) for k in after if after[k] > before.get(k, 0)}
                verdicts = {k: n for k, n in delta.items() if not k.startswith("le=")}
                reviews = sum(verdicts.values())
                seconds = [s for _, s, _ in results]
                refusals = [message for ok, _, message in results if not ok]
                rows.append(
                    {
                        "case": "kubectl",
                        "operation": operation,
                        "parallel_applies": len(files),
                        "job_kib_min_max": [
                            round(min(f.stat().st_size for f in files) / 1024, 1),
                            round(max(f.stat().st_size for f in files) / 1024, 1),
                        ],
                        "admitted": len(files) - len(refusals),
                        "refused": len(refusals),
                        "first_refusal": refusals[0][-600:] if refusals else None,
                        "kubectl_p50_s": round(percentile(seconds, 0.5), 2),
                        "kubectl_p99_s": round(percentile(seconds, 0.99), 2),
                        "server_verdicts": verdicts,
                        "server_answers_p99_within_s": answered_within(delta, 0.99),
                        "server_cpu_ms_per_review": round(1000 * cpu / max(reviews, 1), 2),
                        "server_peak_rss_mib": group_peak_rss_mib(process.pid),
                    }
                )
    finally:
        for document in configurations:
            kind = document["kind"].lower()
            kubectl(kubeconfig, "delete", kind, document["metadata"]["name"], "--ignore-not-found")
        kubectl(kubeconfig, "delete", "namespace", namespace, "--ignore-not-found", "--wait=false")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reviews", type=int, default=REVIEWS, help=f"reviews per burst (default {REVIEWS})")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"bursts per endpoint (default {ROUNDS})")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=os.environ.get("RINGROUTE_BENCH_KUBECONFIG") or None,
        help="a cluster with Volcano for the kubectl case (default: $RINGROUTE_BENCH_KUBECONFIG; none skips it)",
    )
    parser.add_argument("--kubectl-jobs", type=int, default=KUBECTL_JOBS)
    parser.add_argument("--no-workers-study", action="store_true", help="skip the large_request_workers case")
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ringroute-burst-") as tmp:
        work = Path(tmp)
        cert_dir = work / "certs"
        generate_bundle("ringroute-webhook", "ringroute-system", cert_dir, days=1, extra_names=["127.0.0.1"])
        bursts = {
            MIX: burst(args.reviews, args.seed),
            LARGEST: burst(LARGEST_JOBS, args.seed, LARGEST_KIB, ("UPDATE",)),
        }
        for row in bench_loopback(cert_dir, work, bursts, args.rounds):
            emit(row)
            rows.append(row)
        if not args.no_workers_study:
            for variant, workers in [(variant, 1) for variant in VARIANTS] + [(None, 2)]:
                for row in bench_loopback(
                    cert_dir, work, bursts, args.rounds, case="large_request_workers", variant=variant, workers=workers
                ):
                    emit(row)
        if args.kubeconfig is None:
            emit({"case": "kubectl", "skipped": "no cluster: pass --kubeconfig or set RINGROUTE_BENCH_KUBECONFIG"})
        else:
            for row in bench_kubectl(args.kubeconfig, cert_dir, work, args.kubectl_jobs, args.seed):
                emit(row)
                rows.append(row)
    checks = {}
    for row in rows:
        if row["case"] == "loopback" and row["burst"] == MIX:
            checks[f"loopback {row['endpoint']}"] = row["refused"] == 0 and row["p99_ms"] <= 1000 * TARGET_P99_S
        elif row["case"] == "kubectl" and "operation" in row:
            checks[f"kubectl {row['operation']}"] = row["refused"] == 0
    emit(
        {
            "case": "summary",
            "ok": all(checks.values()),
            "checks": {k: "pass" if v else "FAIL" for k, v in checks.items()},
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
