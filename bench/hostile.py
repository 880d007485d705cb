"""Hostile clients against one `ringroute serve` on loopback (admission over TLS, the extender's own process):
memory and latency stay within the figures ringroute promises.

Prints JSON lines (`python bench/hostile.py [--connections 1500] [--requests 150]`), each with the measured figure,
its target and pass/fail, then a summary:
- `unique_mount_paths`: 150 POST /jobs/validate, each job with its own 1 MB volume mount path: admission's RSS
  growth after them (target <= 64 MB: nothing is kept per request);
- `idle_tls_connections`: 1,500 TLS connections opened and left idle (more than admission.server.maxConnections:
  the idle-longest make room), a /jobs/validate on a new connection meanwhile (target <= 2 s), admission's RSS
  growth once they are closed (target <= 150 MB) and at its peak;
- `extender_300mib_body`: a 300 MiB POST /extender/predicate streamed at full speed: the answer (413, or the
  connection closed) and the extender process's peak RSS growth (target <= 64 MB);
- `admission_while_extender_scores`: /jobs/mutate at concurrency 10 for 5 s while prioritize calls of 20,000
  compact nodes run back to back against the extender (target p99 <= 300 ms, no errors);
- `flood_7mib_bodies`: 2,000 POST /jobs/validate at once, each an UPDATE review of just under 7 MiB (the largest
  body admission reads), against a fresh server: how each ended for the client (an admission verdict, HTTP 429, the
  connection closed without an answer, none within 30 s) and when; the share the server answered more than 5 s
  (the webhook timeout) after their headers (target <= 1 %; every one answered within 30 s, and no more closed
  without an answer than the kernel dropped from the full listen backlog); the
  server's peak RSS growth (target <= 500 MB: asyncio's TLS buffers of the connections at their cap, up to 0.77 MiB
  each with a body arriving, the body buffer, one review being checked); small reviews on new connections meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import multiprocessing
import re
import resource
import ssl
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._common import emit  # noqa: E402
from bench.burst import padded_job  # noqa: E402
from bench.extender import _task_of_job, extender_load, node_infos, prioritize_body, rss_mib, serve  # noqa: E402
from bench.webhook import client_context, realistic_review, run_aiohttp, server_cpu_seconds  # noqa: E402
from certs import generate_bundle  # noqa: E402
from emulation.admission import admission_review  # noqa: E402

TARGETS = {
    "unique_mount_paths": ("rss_growth_mb", 64.0),
    "idle_tls_connections": ("rss_growth_after_close_mb", 150.0),
    "idle_tls_connections/new_request": ("new_request_s", 2.0),
    "extender_300mib_body": ("peak_rss_growth_mb", 64.0),
    "admission_while_extender_scores": ("p99_ms", 300.0),
    "flood_7mib_bodies": ("server_answered_late", 0.01),
    "flood_7mib_bodies/memory": ("peak_rss_growth_mb", 500.0),
}
MB = 1024 * 1024


def admission_pid(extender_pid: int) -> int:
    """`ringroute serve` itself: the extender process's parent."""
    return int(Path(f"/proc/{extender_pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def judged(case: str, record: dict[str, Any]) -> dict[str, Any]:
    """`record` with the target of `case` and whether the figure meets it."""
    key, target = TARGETS[case]
    record[f"target_{key}"] = target
    record["pass"] = bool(record[key] <= target)
    return record


async def post(
    port: int, context: ssl.SSLContext, path: str, body: bytes, *, timeout_s: float = 30.0
) -> tuple[int, bytes]:
    """One POST on a new TLS connection (closed after the answer)."""
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"), timeout_s
    )
    try:
        head = (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        writer.write(head + body)
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout_s)
        rest = await asyncio.wait_for(reader.read(), timeout_s)
        return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]
    finally:
        writer.close()


def review_with_mount_path(base: dict[str, Any], index: int, path_bytes: int) -> bytes:
    """A /jobs/validate review whose first container mounts a volume at its own `path_bytes`-long path."""
    review = copy.deepcopy(base)
    review["request"]["uid"] = f"mount-path-{index}"
    job = review["request"]["object"]
    # As the validating webhook sees the job: after mutation, which removes the vendor-only plugin.
    (job["spec"].get("plugins") or {}).pop("configmap1980", None)
    spec = job["spec"]["tasks"][0]["template"]["spec"]
    prefix = f"/data/{index:06d}/"
    spec["containers"][0].setdefault("volumeMounts", []).append(
        {"name": "scratch", "mountPath": prefix + "p" * (path_bytes - len(prefix))}
    )
    spec.setdefault("volumes", []).append({"name": "scratch", "emptyDir": {}})
    return orjson.dumps(review)


async def unique_mount_paths(port: int, pid: int, context: ssl.SSLContext, requests: int) -> dict[str, Any]:
    base = realistic_review()
    for i in range(3):  # warm-up: code paths, TLS, allocator arenas
        await post(port, context, "/jobs/validate", review_with_mount_path(base, -1 - i, 4096))
    before = rss_mib(pid)
    answered = denied = 0
    started = time.perf_counter()
    for i in range(requests):
        status, body = await post(port, context, "/jobs/validate", review_with_mount_path(base, i, MB))
        answer = orjson.loads(body)["response"]
        answered += status == 200 and answer["uid"] == f"mount-path-{i}"
        denied += not answer["allowed"]
    elapsed = time.perf_counter() - started
    await asyncio.sleep(1.0)
    after = rss_mib(pid)
    return judged(
        "unique_mount_paths",
        {
            "case": "unique_mount_paths",
            "requests": requests,
            "mount_path_bytes": MB,
            "answered_200": answered,
            "denied": denied,
            "seconds": round(elapsed, 2),
            "rss_before_mb": before,
            "rss_after_mb": after,
            "rss_growth_mb": round(after - before, 1),
        },
    )


async def idle_tls_connections(port: int, pid: int, context: ssl.SSLContext, count: int) -> list[dict[str, Any]]:
    before = rss_mib(pid)
    hwm_before = rss_mib(pid, "VmHWM")
    writers: list[asyncio.StreamWriter] = []
    failed = 0
    opened_at = time.perf_counter()

    async def open_one() -> None:
        nonlocal failed
        try:
            _reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1"), 30
            )
            writers.append(writer)
        except (OSError, TimeoutError, ssl.SSLError):
            failed += 1

    for start in range(0, count, 100):  # handshakes 100 at a time, as a connection flood arrives
        await asyncio.gather(*(open_one() for _ in range(min(100, count - start))))
    opening = time.perf_counter() - opened_at
    during = rss_mib(pid)
    body = review_with_mount_path(realistic_review(), 0, 64)
    asked = time.perf_counter()
    status, _ = await post(port, context, "/jobs/validate", body)
    new_request_s = time.perf_counter() - asked
    still_open = sum(not w.transport.is_closing() for w in writers)
    for writer in writers:
        writer.close()
    await asyncio.sleep(3.0)
    after = rss_mib(pid)
    peak = rss_mib(pid, "VmHWM")
    closed = {
        "case": "idle_tls_connections",
        "connections": count,
        "handshakes_failed": failed,
        "opening_s": round(opening, 2),
        "rss_before_mb": before,
        "rss_with_connections_mb": during,
        "rss_after_close_mb": after,
        "rss_growth_after_close_mb": round(after - before, 1),
        "peak_rss_growth_mb": round(max(peak, hwm_before) - before, 1),
        "client_side_open_before_close": still_open,
    }
    meanwhile = {"case": "idle_tls_connections/new_request", "status": status, "new_request_s": round(new_request_s, 3)}
    return [judged("idle_tls_connections", closed), judged("idle_tls_connections/new_request", meanwhile)]


async def extender_300mib_body(port: int, pid: int) -> dict[str, Any]:
    size = 300 * MB
    before = rss_mib(pid)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"POST /extender/predicate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n".encode()
    )
    chunk = b'{"task":' + b" " * (MB - 8)
    sent = 0
    started = time.perf_counter()
    answer = asyncio.create_task(reader.readline())
    with contextlib.suppress(ConnectionError):
        while sent < size and not answer.done():
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)
    try:
        status_line = await asyncio.wait_for(answer, 30)
    except (ConnectionError, TimeoutError):
        status_line = b""
    elapsed = time.perf_counter() - started
    writer.close()
    with contextlib.suppress(ConnectionError):
        await writer.wait_closed()
    await asyncio.sleep(0.5)
    status = int(status_line.split()[1]) if status_line.startswith(b"HTTP/") else None
    peak = rss_mib(pid, "VmHWM")
    record = {
        "case": "extender_300mib_body",
        "body_mib": size // MB,
        "status": status,
        "refused": status == 413 or status is None,
        "sent_mib_before_refusal": round(sent / MB, 1),
        "seconds": round(elapsed, 3),
        "rss_before_mb": before,
        "peak_rss_mb": peak,
        "peak_rss_growth_mb": round(max(0.0, peak - before), 1),
    }
    judged("extender_300mib_body", record)
    record["pass"] = record["pass"] and record["refused"]
    return record


def prioritize_calls(extender_port: int) -> float:
    """Prioritize calls the extender has answered so far (its /metrics)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{extender_port}/metrics", timeout=10) as response:
        text = response.read().decode()
    pattern = r'ringroute_extender_requests_total\{[^}]*verb="prioritize"[^}]*\} ([0-9.e+]+)'
    return sum(float(m) for m in re.findall(pattern, text))


def admission_while_extender_scores(
    admission_port: int, extender_port: int, ca_pem: str, nodes: int, seconds: float
) -> dict[str, Any]:
    body = prioritize_body(_task_of_job("compact"), node_infos("compact", nodes, 0, seed=0))
    url = f"http://127.0.0.1:{extender_port}/extender/prioritize"
    load = multiprocessing.get_context("spawn").Process(target=extender_load, args=(url, body, 1), daemon=True)
    load.start()
    try:
        time.sleep(3.0)  # the first calls are under way
        calls_before = prioritize_calls(extender_port)
        result = run_aiohttp(admission_port, 10, seconds, orjson.dumps(realistic_review()), ca_pem)
        calls = prioritize_calls(extender_port) - calls_before
    finally:
        load.terminate()
        load.join(10)
    record = {
        "case": "admission_while_extender_scores",
        "extender_load": f"prioritize of {nodes} compact nodes back to back ({len(body) / MB:.1f} MiB each)",
        "prioritize_calls_answered": int(calls),
        "concurrency": 10,
        **{k: result[k] for k in ("requests", "rps", "p50_ms", "p99_ms", "max_ms", "errors", "non_2xx")},
    }
    judged("admission_while_extender_scores", record)
    record["pass"] = record["pass"] and result["errors"] == 0 and result["non_2xx"] == 0 and calls > 0
    return record


FLOOD_CHUNK = 256 * 1024
"""The flood's clients send their bodies in chunks of this, as fast as the server takes them."""


def flood_body() -> bytes:
    """An UPDATE review of just under admission's 7 MiB limit: a job of about 3.4 MiB, stored and updated."""
    import random

    job = padded_job("flood", 3.45 * 1024, random.Random(7))
    body = orjson.dumps(admission_review(job, operation="UPDATE", old=job, uid="flood"))
    assert 6.5 * MB < len(body) < 7 * MB, len(body)
    return body


async def flood_one(port: int, context: ssl.SSLContext, body: memoryview, timeout_s: float) -> tuple[str, float]:
    """One POST of `body`, sent while the server takes it and no longer once its answer came, as Go's HTTP client
    does: (outcome, seconds until the answer's head). The outcome is `verdict` (HTTP 200 with an admission verdict),
    `busy_denial` (HTTP 200, code 429), `http_<status>`, `closed` (the connection ended without an answer) or
    `no_answer` (nothing within `timeout_s`)."""
    started = time.perf_counter()
    writer = None
    sending: asyncio.Task[None] | None = None

    async def send(writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(body), FLOOD_CHUNK):
                writer.write(body[start : start + FLOOD_CHUNK])
                await writer.drain()

    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
            writer.write(
                f"POST /jobs/validate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n".encode()
            )
            sending = asyncio.create_task(send(writer))
            head = await reader.readuntil(b"\r\n\r\n")
            seconds = time.perf_counter() - started
            sending.cancel()
            status = int(head.split(b" ", 2)[1])
            if status != 200:
                return f"http_{status}", seconds
            length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
            response = orjson.loads(await reader.readexactly(length))["response"]
            busy = not response["allowed"] and (response.get("status") or {}).get("code") == 429
            return "busy_denial" if busy else "verdict", seconds
    except TimeoutError:
        return "no_answer", time.perf_counter() - started
    except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
        return "closed", time.perf_counter() - started
    finally:
        if sending is not None:
            sending.cancel()
        if writer is not None:
            writer.close()


async def server_latencies(port: int, context: ssl.SSLContext) -> dict[str, float]:
    """The server's own count of /jobs/validate answers by latency bucket (from its /metrics): le -> count."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname="127.0.0.1")
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        text = (await reader.read()).decode()
    finally:
        writer.close()
    pattern = r'ringroute_admission_latency_seconds_bucket\{endpoint="validate",le="([^"]+)"\} ([0-9.e+]+)'
    return {le: float(count) for le, count in re.findall(pattern, text)}


def listen_overflows() -> int:
    """Connections the kernel dropped from full listen backlogs so far (TcpExt ListenOverflows; the machine's)."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split(), strict=True))["ListenOverflows"])
    return 0


async def flood_7mib_bodies(port: int, pid: int, context: ssl.SSLContext, count: int) -> list[dict[str, Any]]:
    body = memoryview(flood_body())
    small = review_with_mount_path(realistic_review(), 0, 64)
    await post(port, context, "/jobs/validate", small)
    before, latencies_before = rss_mib(pid), await server_latencies(port, context)
    cpu_before, overflows_before = server_cpu_seconds(pid), listen_overflows()
    started = time.perf_counter()
    flood = [asyncio.create_task(flood_one(port, context, body, 30.0)) for _ in range(count)]
    small_seconds = []
    for _ in range(5):  # small reviews on new connections meanwhile, one after the other
        await asyncio.sleep(0.5)
        asked = time.perf_counter()
        try:
            status, _ = await post(port, context, "/jobs/validate", small)
        except (OSError, TimeoutError, ssl.SSLError, IndexError):  # IndexError: closed before an answer
            status = 0
        small_seconds.append(round(time.perf_counter() - asked, 3) if status == 200 else None)
    results = await asyncio.gather(*flood)
    elapsed = time.perf_counter() - started
    cpu, overflows = server_cpu_seconds(pid) - cpu_before, listen_overflows() - overflows_before
    await asyncio.sleep(2.0)
    latencies = {le: n - latencies_before.get(le, 0.0) for le, n in (await server_latencies(port, context)).items()}
    outcomes: dict[str, int] = {}
    for outcome, _seconds in results:
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    seconds = sorted(s for _, s in results)
    answered = sum(n for o, n in outcomes.items() if o not in ("closed", "no_answer"))
    record = {
        "case": "flood_7mib_bodies",
        "requests": count,
        "body_mib": round(len(body) / MB, 2),
        "outcomes": outcomes,
        "answered": answered,
        # Connections past the cap and the listen backlog (1,024) that the kernel dropped: the client's SYN or
        # handshake answered late, then a reset ("closed").
        "kernel_listen_overflows": overflows,
        # Counted by the server from each request's headers to its answer (small reviews included).
        "server_answered": int(latencies["+Inf"]),
        "server_answered_late": round(1 - latencies["5.0"] / max(latencies["+Inf"], 1), 4),
        "server_slowest_answer_within_s": min(
            (float(le) for le, n in latencies.items() if n == latencies["+Inf"]), default=0.0
        ),
        "client_p50_s": round(seconds[len(seconds) // 2], 2),
        "client_p99_s": round(seconds[int(0.99 * (len(seconds) - 1))], 2),
        "client_slowest_s": round(seconds[-1], 2),
        "seconds": round(elapsed, 2),
        "server_cpu_ms_per_request": round(1000 * cpu / count, 2),
        "small_reviews_meanwhile_s": small_seconds,
    }
    judged("flood_7mib_bodies", record)
    closed = outcomes.get("closed", 0)
    record["pass"] = record["pass"] and outcomes.get("no_answer", 0) == 0 and closed <= overflows
    memory = {
        "case": "flood_7mib_bodies/memory",
        "rss_before_mb": before,
        "peak_rss_mb": rss_mib(pid, "VmHWM"),
        "peak_rss_growth_mb": round(rss_mib(pid, "VmHWM") - before, 1),
        "rss_after_mb": rss_mib(pid),
    }
    return [record, judged("flood_7mib_bodies/memory", memory)]


async def run(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    cert_dir = work / "certs"
    generate_bundle("ringroute-webhook", "ringroute-system", cert_dir, days=1, extra_names=["localhost", "127.0.0.1"])
    context = client_context(cert_dir / "ca.crt")
    rows: list[dict[str, Any]] = []
    with serve(cert_dir, work / "serve.log") as (admission_port, extender_port, extender_pid):
        pid = admission_pid(extender_pid)
        for row in [
            await unique_mount_paths(admission_port, pid, context, args.requests),
            *await idle_tls_connections(admission_port, pid, context, args.connections),
            await extender_300mib_body(extender_port, extender_pid),
            await asyncio.to_thread(
                admission_while_extender_scores,
                admission_port,
                extender_port,
                (cert_dir / "ca.crt").read_text(),
                args.nodes,
                args.seconds,
            ),
        ]:
            emit(row)
            rows.append(row)
    with serve(cert_dir, work / "serve-flood.log") as (admission_port, _extender_port, extender_pid):
        for row in await flood_7mib_bodies(admission_port, admission_pid(extender_pid), context, args.flood):
            emit(row)
            rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=150, help="validate requests with unique 1 MB mount paths")
    parser.add_argument("--connections", type=int, default=1500, help="idle TLS connections")
    parser.add_argument("--nodes", type=int, default=20000, help="prioritize candidates while admission is timed")
    parser.add_argument("--seconds", type=float, default=5.0, help="admission load duration")
    parser.add_argument("--flood", type=int, default=2000, help="concurrent 7 MiB reviews of the flood")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(args.connections, args.flood) + 256
    if soft < wanted:  # this client holds every connection open at once
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, wanted), hard))
    with tempfile.TemporaryDirectory() as work:
        rows = asyncio.run(run(args, Path(work)))
    checks = {row["case"]: "pass" if row["pass"] else "FAIL" for row in rows}
    emit({"case": "summary", "ok": all(v == "pass" for v in checks.values()), "checks": checks})
    return 0


if __name__ == "__main__":
    sys.exit(main())
