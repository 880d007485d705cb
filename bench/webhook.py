"""Admission webhook throughput: POST /jobs/mutate over TLS on loopback at fixed concurrency.

Generates certificates, starts `ringroute serve --no-controller --workers N` on 127.0.0.1, and drives it with
an AdmissionReview of a realistic 8-task route-planned Volcano Job (the documented job, 8 cards per pod).
Load generator: Debian's `wrk` with a Lua script (installed with apt-get when missing and allowed), or else
several aiohttp client processes. Prints one JSON line per concurrency level, then a summary line.
`--micro` instead times the admission code in this process, phase by phase (no HTTP, no TLS).

    python bench/webhook.py [--workers 2] [--duration 8] [--concurrency 10 50 200] [--client auto|wrk|aiohttp]
    python bench/webhook.py --micro
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import multiprocessing
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import timeit
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import stop_process_group  # noqa: E402
from certs import generate_bundle  # noqa: E402
from emulation.admission import admission_review  # noqa: E402

SERVICE, NAMESPACE = "ringroute-webhook", "ringroute-system"
TARGET = {"concurrency": 50, "rps": 1500.0, "p99_ms": 20.0, "errors": 0}
TASKS = 8

WRK_SCRIPT = r"""
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("RINGROUTE_BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()

-- Paced mode: each connection waits an exponential think time before each request (mean in ms from the env),
-- so the offered rate is about connections / (think time + latency) instead of "as fast as possible".
local think_ms = tonumber(os.getenv("RINGROUTE_BENCH_THINK_MS") or "0")
if think_ms > 0 then
  init = function(args) math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16)) end
  delay = function() return math.floor(-math.log(1 - math.random()) * think_ms + 0.5) end
end

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'RINGROUTE_WRK {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max, latency.mean))
end
"""


def realistic_review(tasks: int = TASKS) -> dict[str, Any]:
    """An AdmissionReview (CREATE, dry run) of the documented job grown to `tasks` tasks of one 8-card pod."""
    documents = yaml.safe_load_all((ROOT / "tests" / "data" / "vcjob-seed.yaml").read_text(encoding="utf-8"))
    job = next(d for d in documents if d and d.get("kind") == "Job")
    job["metadata"]["name"] = "bert-pretrain"
    job["metadata"]["uid"] = str(uuid.UUID(int=1))
    job["spec"]["minAvailable"] = tasks
    template_task = job["spec"]["tasks"][0]
    container = template_task["template"]["spec"]["containers"][0]
    container["resources"] = {
        "requests": {"huawei.com/ascend-1980": "8", "cpu": "180", "memory": "1400Gi"},
        "limits": {"huawei.com/ascend-1980": "8", "cpu": "180", "memory": "1400Gi"},
    }
    container["env"].append({"name": "ROUTE_PLAN", "value": "true"})
    container["command"] = ["/bin/bash", "-c", "cd /home/ma-user/modelarts/user-job-dir && bash run_pretrain.sh"]
    job["spec"]["tasks"] = []
    for i in range(tasks):
        task = copy.deepcopy(template_task)
        task["name"] = f"worker-{i}"
        task["replicas"] = 1
        job["spec"]["tasks"].append(task)
    # Admission has no side effects, so a dry run takes exactly the path of a real create.
    return admission_review(job, dry_run=True, username="alice")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def client_context(ca_file: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca_file))
    return context


@contextlib.contextmanager
def running_server(
    cert_dir: Path, port: int, *, workers: int, config: Path, mode: str, log_path: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """`ringroute serve` (or, with mode "inprocess", a bare admission_app) on 127.0.0.1:port."""
    if mode == "serve":
        command = [
            sys.executable, "-m", "webhook", "serve",
            "--listen", f"127.0.0.1:{port}", "--cert-dir", str(cert_dir), "--config", str(config),
            "--no-controller", "--workers", str(workers),
        ]  # fmt: skip
    else:
        command = [sys.executable, str(Path(__file__).resolve()), "--_serve", str(cert_dir), str(port), str(workers)]
    log = log_path.open("wb")
    process = subprocess.Popen(
        command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=_server_env()
    )
    try:
        yield process
    finally:
        stop_process_group(process, 15)
        log.close()


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KUBECONFIG", None)  # no API server: admission only
    env["KUBECONFIG"] = os.devnull
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


def wait_ready(port: int, ca_file: Path, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    import http.client

    deadline = time.monotonic() + timeout_s
    context = client_context(ca_file)
    last: object = None
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with status {process.returncode} before becoming ready")
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=2)
            conn.request("GET", "/readyz")
            status = conn.getresponse().status
            conn.close()
            if status == 200:
                return
            last = status
        except OSError as exc:
            last = exc
        time.sleep(0.2)
    raise RuntimeError(f"server not ready after {timeout_s}s (last: {last!r})")


def check_answer(port: int, ca_file: Path, body: bytes, uid: str) -> dict[str, Any]:
    """One request checked for content: allowed, uid echoed, a JSON patch present."""
    import base64
    import http.client

    conn = http.client.HTTPSConnection("127.0.0.1", port, context=client_context(ca_file), timeout=5)
    conn.request("POST", "/jobs/mutate", body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = json.loads(response.read())
    conn.close()
    answer = payload["response"]
    if response.status != 200 or answer["uid"] != uid or not answer["allowed"] or "patch" not in answer:
        raise RuntimeError(f"unexpected answer {response.status}: {json.dumps(payload)[:400]}")
    ops = json.loads(base64.b64decode(answer["patch"]))
    return {"response_bytes": len(json.dumps(payload)), "patch_ops": len(ops)}


def ensure_wrk(allow_install: bool) -> str | None:
    path = shutil.which("wrk")
    if path or not allow_install:
        return path
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return None
    result = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "wrk"],
        capture_output=True,
        check=False,
        timeout=300,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    if result.returncode != 0:
        return None
    return shutil.which("wrk")


def run_wrk(
    wrk: str, port: int, concurrency: int, duration_s: float, *, body_file: Path, work: Path, think_ms: float = 0.0
) -> dict[str, Any]:
    script = work / "mutate.lua"
    script.write_text(WRK_SCRIPT, encoding="utf-8")
    threads = min(2, concurrency)
    command = [
        wrk, "-t", str(threads), "-c", str(concurrency), "-d", f"{duration_s:g}s", "--timeout", "5s",
        "-s", str(script), f"https://127.0.0.1:{port}/jobs/mutate",
    ]  # fmt: skip
    result = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=False,
        timeout=duration_s + 60,
        env={**os.environ, "RINGROUTE_BENCH_BODY": str(body_file), "RINGROUTE_BENCH_THINK_MS": f"{think_ms:.3f}"},
    )
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("RINGROUTE_WRK ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no summary (exit {result.returncode}): {result.stdout} {result.stderr}")
    raw = json.loads(line.removeprefix("RINGROUTE_WRK "))
    seconds = raw["duration_us"] / 1e6
    return {
        "requests": raw["requests"],
        "duration_s": round(seconds, 3),
        "rps": round(raw["requests"] / seconds, 1),
        "p50_ms": round(raw["p50_us"] / 1000, 2),
        "p90_ms": round(raw["p90_us"] / 1000, 2),
        "p99_ms": round(raw["p99_us"] / 1000, 2),
        "max_ms": round(raw["max_us"] / 1000, 2),
        "mean_ms": round(raw["mean_us"] / 1000, 2),
        "errors": raw["connect"] + raw["read"] + raw["write"] + raw["timeout"],
        "non_2xx": raw["status"],
    }


def _aiohttp_worker(args: tuple[int, int, float, bytes, str]) -> dict[str, Any]:
    port, tasks, duration_s, body, ca_pem = args

    async def main() -> dict[str, Any]:
        import aiohttp

        context = ssl.create_default_context(cadata=ca_pem)
        latencies: list[float] = []
        errors = non_2xx = 0
        connector = aiohttp.TCPConnector(ssl=context, limit=tasks, force_close=False)
        url = f"https://127.0.0.1:{port}/jobs/mutate"
        deadline = time.perf_counter() + duration_s
        async with aiohttp.ClientSession(connector=connector, headers={"Content-Type": "application/json"}) as s:

            async def loop() -> None:
                nonlocal errors, non_2xx
                while time.perf_counter() < deadline:
                    started = time.perf_counter()
                    try:
                        async with s.post(url, data=body) as r:
                            await r.read()
                            if not 200 <= r.status < 300:
                                non_2xx += 1
                    except (aiohttp.ClientError, TimeoutError):
                        errors += 1
                        continue
                    latencies.append(time.perf_counter() - started)

            await asyncio.gather(*(loop() for _ in range(tasks)))
        return {"latencies": latencies, "errors": errors, "non_2xx": non_2xx}

    return asyncio.run(main())


def run_aiohttp(port: int, concurrency: int, duration_s: float, body: bytes, ca_pem: str) -> dict[str, Any]:
    processes = max(1, min(os.cpu_count() or 1, concurrency))
    shares = [concurrency // processes + (1 if i < concurrency % processes else 0) for i in range(processes)]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = pool.map(_aiohttp_worker, [(port, n, duration_s, body, ca_pem) for n in shares])
    elapsed = time.perf_counter() - started
    latencies = sorted(x for r in results for x in r["latencies"])
    n = len(latencies)

    def pct(q: float) -> float:
        return round(latencies[min(n - 1, int(q * n))] * 1000, 2) if n else float("nan")

    return {
        "requests": n,
        "duration_s": round(min(elapsed, duration_s), 3),
        "rps": round(n / duration_s, 1),
        "p50_ms": pct(0.50),
        "p90_ms": pct(0.90),
        "p99_ms": pct(0.99),
        "max_ms": round(latencies[-1] * 1000, 2) if n else float("nan"),
        "errors": sum(r["errors"] for r in results),
        "non_2xx": sum(r["non_2xx"] for r in results),
    }


def paced(wrk: str, port: int, *, body_file: Path, work: Path, rate: float, seconds: float) -> dict[str, Any]:
    """Latency at an offered rate over TARGET["concurrency"] connections (think time calibrated once)."""
    concurrency = int(TARGET["concurrency"])
    think_ms = 1000.0 * concurrency / rate
    probe = run_wrk(wrk, port, concurrency, 2.0, body_file=body_file, work=work, think_ms=think_ms)
    # rate = connections / (think + mean latency): take the mean latency seen in the probe off the think time.
    think_ms = max(0.5, think_ms - probe["mean_ms"])
    result = run_wrk(wrk, port, concurrency, seconds, body_file=body_file, work=work, think_ms=think_ms)
    return {
        "mode": "paced",
        "concurrency": concurrency,
        "offered_rps": rate,
        "think_ms": round(think_ms, 2),
        **result,
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }


def _meets(result: dict[str, Any] | None, min_rps: float) -> bool:
    return bool(
        result
        and result["rps"] >= min_rps
        and result["p99_ms"] <= TARGET["p99_ms"]
        and result["errors"] == 0
        and result["non_2xx"] == 0
    )


def server_cpu_seconds(pid: int) -> float:
    """User+system CPU of the server process group (the parent and its workers), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pid:  # process group id
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def serve_inprocess(cert_dir: str, port: int, workers: int) -> None:
    """Fallback server when `ringroute serve` is not available: admission_app on TLS, SO_REUSEPORT workers."""
    from aiohttp import web

    from certs import ServingCertificates
    from webhook.admission.server import admission_app
    from webhook.common.metrics import Metrics
    from webhook.common.settings import default_settings

    def one() -> None:
        certificates = ServingCertificates(Path(cert_dir))
        app = admission_app(default_settings(), Metrics(), certificates=certificates)
        web.run_app(
            app,
            host="127.0.0.1",
            port=port,
            ssl_context=certificates.ssl_context(),
            reuse_port=True,
            print=None,
            access_log=None,
        )

    children = []
    for _ in range(workers - 1):
        pid = os.fork()
        if pid == 0:
            one()
            os._exit(0)
        children.append(pid)
    one()


def microbench(tasks: int = TASKS, repeat: int = 7) -> dict[str, Any]:
    """Microseconds per call of each admission phase for the realistic job (best of `repeat`, collector on)."""
    import jsonpatch
    import orjson

    from webhook.admission.jobview import read_job
    from webhook.admission.mutation import encode_patch, plan_create, plan_update
    from webhook.admission.policy import classify, existing_violations, validate
    from webhook.admission.review import parse_review
    from webhook.common.settings import default_settings

    settings = default_settings()
    body = orjson.dumps(realistic_review(tasks))
    job: dict[str, Any] = orjson.loads(body)["request"]["object"]
    view = read_job(job, settings)
    ops = plan_create(view).ops
    stored: dict[str, Any] = jsonpatch.apply_patch(job, copy.deepcopy(ops))
    update_view = read_job(job, settings)  # an apply that dropped every injected field

    def mutate_path() -> str:
        admission = parse_review(body)["request"]
        return encode_patch(plan_create(read_job(admission.get("object") or {}, settings)).ops)

    def validate_path() -> Any:
        admission = parse_review(body)["request"]
        return classify(validate(admission.get("object") or {}, None, settings), settings)

    def validate_update() -> Any:
        old = stored
        return classify(validate(stored, old, settings), settings, existing=existing_violations(old, settings))

    phases = {
        "parse_review": lambda: parse_review(body),
        "read_job": lambda: read_job(job, settings),
        "mutate_view": lambda: plan_create(view).ops,
        "encode_patch": lambda: encode_patch(ops),
        "mutate_path": mutate_path,
        "validate_path": validate_path,
        "mutate_update_restore": lambda: plan_update(update_view, stored).ops,
        "validate_update_ratchet": validate_update,
    }
    assert plan_create(read_job(stored, settings)).ops == [], "the stored job needs nothing more"
    result: dict[str, Any] = {"bench": "webhook", "mode": "inprocess", "tasks": tasks, "request_bytes": len(body)}
    result["patch_ops"] = len(ops)
    for name, call in phases.items():
        timer = timeit.Timer(call, setup="gc.enable()")
        number, _ = timer.autorange()
        best = min(timer.repeat(repeat=repeat, number=number)) / number
        result[f"{name}_us"] = round(best * 1e6, 1)
    result["note"] = "mutate_path = parse_review + read_job + mutate_view + encode_patch, what /jobs/mutate runs"
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="server worker processes (default 2)")
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per concurrency level (default 8)")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up seconds before measuring (default 2)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[10, 50, 200])
    parser.add_argument("--client", choices=["auto", "wrk", "aiohttp"], default="auto")
    parser.add_argument(
        "--paced-rate",
        type=float,
        default=float(TARGET["rps"]),
        help="also measure latency at this offered rate over 50 connections (wrk only; 0 skips)",
    )
    parser.add_argument("--no-install", action="store_true", help="never apt-get install wrk")
    parser.add_argument(
        "--server",
        choices=["auto", "serve", "inprocess"],
        default="auto",
        help="`ringroute serve` (default when available) or a bare admission_app",
    )
    parser.add_argument("--micro", action="store_true", help="time the admission code in-process and exit")
    parser.add_argument("--_serve", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._serve:
        serve_inprocess(args._serve[0], int(args._serve[1]), int(args._serve[2]))
        return 0
    if args.micro:
        print(json.dumps(microbench()), flush=True)
        return 0
    if not 0 < args.duration <= 60:
        parser.error("--duration: must be in (0, 60] seconds")

    mode = args.server
    if mode == "auto":
        mode = "serve" if (ROOT / "webhook" / "cli_serve.py").exists() else "inprocess"
    wrk = None
    if args.client in ("auto", "wrk"):
        wrk = ensure_wrk(allow_install=not args.no_install)
        if wrk is None and args.client == "wrk":
            parser.error("--client wrk: wrk is not installed and could not be installed (apt-get install wrk)")
    client = "wrk" if wrk else "aiohttp"

    with tempfile.TemporaryDirectory(prefix="ringroute-bench-") as tmp:
        work = Path(tmp)
        cert_dir = work / "certs"
        generate_bundle(SERVICE, NAMESPACE, cert_dir, days=1, extra_names=["localhost", "127.0.0.1"])
        config = work / "config.yaml"
        config.write_text("extender:\n  enabled: false\ncontroller:\n  enabled: false\n", encoding="utf-8")
        review = realistic_review()
        body = json.dumps(review).encode()
        body_file = work / "review.json"
        body_file.write_bytes(body)
        port = free_port()
        ca_file = cert_dir / "ca.crt"
        with running_server(
            cert_dir, port, workers=args.workers, config=config, mode=mode, log_path=work / "server.log"
        ) as process:
            try:
                wait_ready(port, ca_file, process)
            except RuntimeError as exc:
                print((work / "server.log").read_text(errors="replace")[-3000:], file=sys.stderr)
                print(json.dumps({"bench": "webhook", "error": str(exc)}))
                return 1
            shape = check_answer(port, ca_file, body, review["request"]["uid"])
            common = {
                "bench": "webhook",
                "endpoint": "/jobs/mutate",
                "server": "ringroute serve" if mode == "serve" else "admission_app",
                "workers": args.workers,
                "client": client,
                "tasks": TASKS,
                "request_bytes": len(body),
                **shape,
                "cpus": os.cpu_count(),
            }
            print(json.dumps({**common, "phase": "setup"}), flush=True)

            def measure(concurrency: int, seconds: float) -> dict[str, Any]:
                if wrk:
                    return run_wrk(wrk, port, concurrency, seconds, body_file=body_file, work=work)
                return run_aiohttp(port, concurrency, seconds, body, ca_file.read_text())

            measure(min(args.concurrency), args.warmup)
            results = []
            for concurrency in args.concurrency:
                cpu_before = server_cpu_seconds(process.pid)
                result = measure(concurrency, args.duration)
                cpu = server_cpu_seconds(process.pid) - cpu_before
                result["server_cpu_cores"] = round(cpu / result["duration_s"], 2)
                # CPU per request does not depend on what else runs on the machine: capacity ~ cores / this.
                result["server_cpu_ms_per_request"] = round(1000 * cpu / max(result["requests"], 1), 3)
                # The machine may be shared: the 1-minute load average says how much else was running.
                result["loadavg_1m"] = round(os.getloadavg()[0], 2)
                line = {**common, "mode": "closed", "concurrency": concurrency, **result}
                results.append(line)
                print(json.dumps(line), flush=True)
            if wrk and args.paced_rate > 0:
                results.append(
                    paced(wrk, port, body_file=body_file, work=work, rate=args.paced_rate, seconds=args.duration)
                )
                print(json.dumps({**common, **results[-1]}), flush=True)
        closed = [r for r in results if r["mode"] == "closed"]
        at_target = next((r for r in closed if r["concurrency"] == TARGET["concurrency"]), None)
        at_rate = next((r for r in results if r["mode"] == "paced"), None)
        summary = {
            "bench": "webhook",
            "summary": True,
            "target": TARGET,
            "little_law_note": (
                "closed loop: mean latency = concurrency / throughput, so p99 <= 20 ms at concurrency 50 "
                "needs more than 2,500 req/s; the paced line measures latency at the target rate instead"
            ),
            "meets_target_closed_loop": _meets(at_target, TARGET["rps"]),
            # The offered rate is calibrated once, so accept an achieved rate within 3 % below it.
            "meets_target_paced": _meets(at_rate, 0.97 * TARGET["rps"]),
        }
        print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
