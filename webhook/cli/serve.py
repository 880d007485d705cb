"""`ringroute serve`: admission over TLS, the scheduler extender on its own port, and the rank-table controller.

Admission runs in one process, or `--workers N` processes sharing the admission port (SO_REUSEPORT); the first
one also runs the controller and supervises the extender, which runs in a process of its own. SIGTERM drains
in-flight requests, releases the controller lease, stops the extender and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import multiprocessing
import os
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webhook.cli.errors import CommandError
from webhook.cli.inputs import read_settings
from webhook.common.lifeline import tied_process
from webhook.common.settings import ExtenderSettings

if TYPE_CHECKING:
    from webhook.common.metrics import Metrics
    from webhook.common.settings import Settings
    from webhook.kube.client import KubeRepository

log = logging.getLogger("ringroute.serve")

SHUTDOWN_GRACE_S = 10.0
"""In-flight requests get this long to finish after SIGTERM (the Pod's grace period is longer)."""
EXTENDER_RESTART_BACKOFF_S = (1.0, 2.0, 5.0, 10.0, 30.0)
"""Waits before restarting an extender process that died, growing with each restart."""


@dataclass(frozen=True)
class ServeOptions:
    """Parsed `ringroute serve` flags (picklable, handed to worker processes)."""

    host: str
    port: int
    cert_dir: Path
    config: Path | None
    kubeconfig: str | None
    workers: int
    controller: bool
    extender: bool
    extender_listen: str | None
    self_signed_secret: str | None
    log_level: str = "INFO"


def register(subparsers: Any) -> None:
    """Add `serve` to the `ringroute` parser."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the admission webhook, scheduler extender and rank-table controller",
        description=(
            "Serve /jobs/validate and /jobs/mutate over TLS (>= 1.2) with the certificate pair in --cert-dir "
            "(reloaded when it changes), the Volcano scheduler extender on its own port, and the rank-table "
            "controller when an API server is reachable."
        ),
    )
    parser.add_argument("--listen", default="0.0.0.0:9443", metavar="ADDR:PORT", help="admission address")
    parser.add_argument("--cert-dir", required=True, type=Path, metavar="DIR", help="directory with tls.crt, tls.key")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings YAML, as in the ringroute-settings ConfigMap (default: built-in settings)",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig (default: in-cluster config, else $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument("--workers", type=int, default=1, metavar="N", help="processes sharing the admission port")
    parser.add_argument("--no-controller", action="store_true", help="do not run the rank-table controller")
    parser.add_argument("--no-extender", action="store_true", help="do not serve the scheduler extender")
    parser.add_argument(
        "--extender-listen",
        metavar="ADDR:PORT",
        help=f"extender address (default: settings extender.listen, {ExtenderSettings().listen})",
    )
    parser.add_argument(
        "--self-signed-secret",
        metavar="NAMESPACE/NAME",
        help="keep a self-signed CA and serving pair in this Secret, write them to --cert-dir, and patch caBundle "
        "into ringroute's webhook configurations (default: none; certificates come from --cert-dir alone)",
    )
    parser.set_defaults(handler=_serve)


def parse_address(text: str, flag: str) -> tuple[str, int]:
    """`ADDR:PORT` (IPv6 as `[::1]:PORT`) -> (host, port); CommandError naming the flag."""
    host, sep, port_text = text.rpartition(":")
    if (
        not sep
        or not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5)
        or not 0 <= int(port_text) <= 65535
    ):
        raise CommandError(f"{flag}: expected ADDR:PORT such as 0.0.0.0:9443 (got {text!r})")
    return host.strip("[]") or "0.0.0.0", int(port_text)


def _serve(args: argparse.Namespace) -> int:
    host, port = parse_address(args.listen, "--listen")
    if args.extender_listen is not None:
        parse_address(args.extender_listen, "--extender-listen")
    if args.workers < 1:
        raise CommandError("--workers: must be at least 1")
    if args.workers > 1 and port == 0:
        raise CommandError("--workers: several workers need a fixed --listen port (not 0)")
    if not args.cert_dir.is_dir():
        raise CommandError(
            f"--cert-dir: {args.cert_dir} is not a directory; create one with `ringroute certs generate --out-dir DIR`"
        )
    if args.self_signed_secret is not None and "/" not in args.self_signed_secret:
        raise CommandError(
            "--self-signed-secret: expected NAMESPACE/NAME such as ringroute-system/ringroute-webhook-tls "
            f"(got {args.self_signed_secret!r})"
        )
    options = ServeOptions(
        host=host,
        port=port,
        cert_dir=args.cert_dir,
        config=args.config,
        kubeconfig=args.kubeconfig,
        workers=args.workers,
        controller=not args.no_controller,
        extender=not args.no_extender,
        extender_listen=args.extender_listen,
        self_signed_secret=args.self_signed_secret,
        log_level=args.log_level,
    )
    load_options_settings(options)  # fail fast, in the parent, on a bad settings file
    if options.workers == 1:
        return asyncio.run(run_worker(options, primary=True))
    return _run_workers(options)


def load_options_settings(options: ServeOptions) -> Settings:
    """The settings tree from --config plus the flags that override it; CommandError with every problem."""
    from msgspec.structs import replace

    settings = read_settings(options.config, "--config")
    controller = replace(settings.controller, enabled=settings.controller.enabled and options.controller)
    extender = replace(
        settings.extender,
        enabled=settings.extender.enabled and options.extender,
        listen=options.extender_listen or settings.extender.listen,
    )
    return replace(settings, controller=controller, extender=extender)


def stop_on_signals(stop: asyncio.Event | None = None) -> asyncio.Event:
    """`stop` (or a new event) set by SIGTERM or SIGINT; call from inside the running loop."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    return stop


def _worker_main(options: ServeOptions, primary: bool) -> None:
    logging.basicConfig(level=options.log_level.upper(), format="%(message)s")
    raise SystemExit(asyncio.run(run_worker(options, primary=primary)))


def _run_workers(options: ServeOptions) -> int:
    context = multiprocessing.get_context("spawn")
    # Each worker ends with this process, even when it is killed (and the worker's own children with the worker).
    workers = [
        tied_process(context, _worker_main, (options, i == 0), name=f"ringroute-worker-{i}", daemon=False)
        for i in range(options.workers)
    ]
    for worker in workers:
        worker.start()

    def forward(signum: int, _frame: Any) -> None:
        for worker in workers:
            if worker.pid is not None and worker.is_alive():
                os.kill(worker.pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    status = 0
    for worker in workers:
        worker.join()
        status = status or (worker.exitcode or 0)
    return status


async def _connect(options: ServeOptions, metrics: Metrics) -> KubeRepository | None:
    """A repository on the API server, or None (admission still runs; the controller needs one and does not
    start)."""
    from webhook.kube.client import KubeRepository, connect

    try:
        api = await connect(options.kubeconfig)
    except Exception as exc:
        if options.kubeconfig:
            raise CommandError(f"--kubeconfig: {exc}") from exc
        log.warning("event=no_api_server error=%r", exc)
        return None
    return KubeRepository(api, metrics) if api is not None else None


async def _self_signed(options: ServeOptions, repository: KubeRepository, stop: asyncio.Event) -> asyncio.Task[None]:
    """Sync the self-managed Secret once (so the files exist), then keep it renewed in the background."""
    from webhook.kube.self_signed import SelfSignedCertificates, SelfSignedSettings, parse_secret_ref

    assert options.self_signed_secret is not None
    namespace, name = parse_secret_ref(options.self_signed_secret)
    manager = SelfSignedCertificates(
        repository,
        SelfSignedSettings(secret_namespace=namespace, secret_name=name, cert_dir=options.cert_dir),
    )
    try:
        await manager.sync()
    except Exception as exc:
        log.error("event=self_signed_sync_failed error=%r action=retrying_in_background", exc)
    return asyncio.create_task(manager.run(stop), name="self-signed-certificates")


async def run_worker(options: ServeOptions, *, primary: bool, stop: asyncio.Event | None = None) -> int:
    """Serve until SIGTERM/SIGINT (or `stop`); the primary worker also runs the controller and supervises the
    extender's process."""
    from aiohttp import web

    from certs import ServingCertificates
    from webhook.admission.server import HANDLERS_KEY, admission_app
    from webhook.common import http_server
    from webhook.common.metrics import Metrics

    settings = load_options_settings(options)
    stop = stop_on_signals(stop)

    metrics = Metrics()
    repository = await _connect(options, metrics)
    tasks: list[asyncio.Task[Any]] = []
    if repository is None:
        log.warning("event=controller_disabled reason=no_api_server detail=no rank-table ConfigMaps or tables")
    if options.self_signed_secret and primary:
        if repository is None:
            raise CommandError("--self-signed-secret: needs an API server (in-cluster config or --kubeconfig)")
        tasks.append(await _self_signed(options, repository, stop))

    certificates = ServingCertificates(options.cert_dir)
    if not certificates.loaded:
        log.warning("event=no_certificate cert_dir=%s action=not_ready_until_tls_files_appear", options.cert_dir)
    tasks.append(asyncio.create_task(certificates.watch(10.0), name="certificate-watch"))
    runners: list[web.AppRunner] = []
    admission_web = admission_app(settings, metrics, certificates=certificates)
    if repository is not None and _volcano_has_network_topology(settings):
        # HyperNodes and node capacity for admission, watched here (admission holds no API client) and handed
        # over as one snapshot after each change; the first one before admission listens.
        from webhook.admission.policy.network_topology import ClusterFacts
        from webhook.cli.cluster_facts import start_cluster_facts

        handlers = admission_web[HANDLERS_KEY]

        def publish(facts: ClusterFacts) -> None:
            handlers.cluster_facts = facts

        tasks.append(await start_cluster_facts(repository, settings, publish, stop))
    # Connection cap, header, body and keep-alive timeouts per worker process (admission.server).
    admission = await http_server.serve(
        admission_web,
        options.host,
        options.port,
        settings.admission.server,
        ssl_context=certificates.ssl_context(),
        reuse_port=options.workers > 1,
        shutdown_timeout=SHUTDOWN_GRACE_S,
    )
    runners.append(admission)
    log.info("event=admission_listening address=%s:%d pid=%d", options.host, options.port, os.getpid())

    if primary and settings.extender.enabled:
        tasks.append(asyncio.create_task(supervise_extender(options, stop), name="extender-process"))

    if primary and settings.controller.enabled and repository is not None:
        from webhook.controller.run import run_controller

        identity = f"{socket.gethostname()}-{os.getpid()}"
        tasks.append(
            asyncio.create_task(
                run_controller(settings, repository, metrics, identity=identity, stop=stop), name="controller"
            )
        )

    # Everything loaded so far lives as long as the process: move it out of the collector's sight, so the
    # collections that per-request garbage triggers do not walk the whole start-up heap every time.
    gc.collect()
    gc.freeze()

    await stop.wait()
    log.info("event=shutting_down pid=%d", os.getpid())
    for task in tasks:
        if task.get_name() == "certificate-watch":
            task.cancel()
    # The controller and the certificate manager return on their own once `stop` is set (the controller
    # releases its lease); give them the grace period.
    await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
    for runner in runners:
        await runner.cleanup()
    if repository is not None:
        with contextlib.suppress(Exception):
            await repository.close()
    return 0


def _volcano_has_network_topology(settings: Settings) -> bool:
    """Whether the configured Volcano release can have HyperNodes (1.12+, or auto)."""
    from webhook.common.settings import NETWORK_TOPOLOGY_RELEASE, volcano_release

    release = volcano_release(settings.volcano.version)
    return release is None or release >= NETWORK_TOPOLOGY_RELEASE


async def supervise_extender(options: ServeOptions, stop: asyncio.Event) -> None:
    """Run the scheduler extender in a process of its own, restarted with backoff when it dies, until `stop`.

    Volcano's payloads are megabytes per call and arrive in bursts; in its own process the extender has its own
    CPU and event loop, so admission (which fails closed) never waits behind it, and a crash or an oversized body
    there leaves admission running.
    """
    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    restarts = 0
    while not stop.is_set():
        process = tied_process(context, _extender_main, (options,), name="ringroute-extender")
        process.start()
        log.info("event=extender_process_started pid=%s", process.pid)
        exited: asyncio.Future[Any] = loop.create_future()

        def on_exit(future: asyncio.Future[Any] = exited) -> None:
            if not future.done():
                future.set_result(None)

        loop.add_reader(process.sentinel, on_exit)
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([exited, stopping], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopping.cancel()
        if stop.is_set():
            if process.is_alive():
                process.terminate()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(exited), SHUTDOWN_GRACE_S)
            loop.remove_reader(process.sentinel)
            if process.is_alive():
                process.kill()
            process.join(1.0)
            return
        loop.remove_reader(process.sentinel)
        process.join(1.0)
        delay = EXTENDER_RESTART_BACKOFF_S[min(restarts, len(EXTENDER_RESTART_BACKOFF_S) - 1)]
        restarts += 1
        log.error("event=extender_process_exited exitcode=%s restart_in_s=%s", process.exitcode, delay)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


def _extender_main(options: ServeOptions) -> None:
    logging.basicConfig(level=options.log_level.upper(), format="%(message)s")
    raise SystemExit(asyncio.run(run_extender(options)))


async def run_extender(options: ServeOptions, *, stop: asyncio.Event | None = None) -> int:
    """Serve the scheduler extender until SIGTERM/SIGINT (or `stop`)."""
    from webhook.common.metrics import Metrics
    from webhook.extender.app import ExtenderService, serve_extender

    settings = load_options_settings(options)
    stop = stop_on_signals(stop)
    host, port = parse_address(settings.extender.listen, "extender.listen")
    server = await serve_extender(ExtenderService(settings, Metrics()), host, port)
    log.info("event=extender_listening address=%s:%d pid=%d", host, port, os.getpid())
    gc.collect()
    gc.freeze()
    await stop.wait()
    await server.close(SHUTDOWN_GRACE_S)
    return 0


__all__ = [
    "ServeOptions",
    "load_options_settings",
    "parse_address",
    "register",
    "run_extender",
    "run_worker",
    "supervise_extender",
]
