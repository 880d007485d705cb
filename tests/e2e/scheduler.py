"""ringroute's scheduler extender served by an e2e test and added to the real vc-scheduler's configuration."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from webhook.common.metrics import Metrics
from webhook.common.settings import ExtenderSettings, Settings
from webhook.extender.app import ExtenderService, serve_extender


def scheduler_conf() -> Path | None:
    """vc-scheduler's configuration file, when this process may edit it: `RINGROUTE_E2E_SCHEDULER_CONF`, else the
    real-cluster kit's `<state>/volcano/scheduler.conf` beside the kubeconfig."""
    named = os.environ.get("RINGROUTE_E2E_SCHEDULER_CONF")
    path = Path(named) if named else Path(os.environ["RINGROUTE_E2E_KUBECONFIG"]).parent / "volcano" / "scheduler.conf"
    return path if path.is_file() and os.access(path, os.W_OK) else None


@contextlib.asynccontextmanager
async def extender_in_scheduler(
    conf: Path, settings: Settings | None = None, *, allocate_events: bool = True
) -> AsyncIterator[Metrics]:
    """ringroute's extender served here (with `settings`, on loopback) and added to vc-scheduler's configuration,
    which is restored on exit; `allocate_events` names the allocate verbs, which Volcano 1.13 and later know."""
    settings = settings or Settings(extender=ExtenderSettings(listen="127.0.0.1:0"))
    metrics = Metrics()
    server = await serve_extender(ExtenderService(settings, metrics), "127.0.0.1", 0)
    original = await asyncio.to_thread(conf.read_text)
    plugin = (
        "  - name: extender\n"
        "    arguments:\n"
        f"      extender.urlPrefix: http://127.0.0.1:{server.port}/extender\n"
        "      extender.httpTimeout: 1s\n"
        "      extender.onSessionOpenVerb: onSessionOpen\n"
        "      extender.onSessionCloseVerb: onSessionClose\n"
        "      extender.predicateVerb: predicate\n"
        "      extender.prioritizeVerb: prioritize\n"
    )
    if allocate_events:
        plugin += "      extender.allocateFuncVerb: allocate\n      extender.deallocateFuncVerb: deallocate\n"
    plugin += "      extender.ignorable: true\n"
    try:
        await asyncio.to_thread(conf.write_text, original.rstrip("\n") + "\n" + plugin)
        for _ in range(100):  # vc-scheduler reloads the file: wait for its first call
            if metrics.registry.get_sample_value(
                "ringroute_extender_requests_total", {"verb": "onSessionOpen", "outcome": "ok"}
            ):
                break
            await asyncio.sleep(0.1)
        yield metrics
    finally:
        await asyncio.to_thread(conf.write_text, original)
        await server.close(grace_s=1.0)
