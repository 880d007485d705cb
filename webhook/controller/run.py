"""Lease + controller wiring: campaign for the controller Lease and run the controller while leading."""

from __future__ import annotations

import asyncio

from webhook.common.metrics import Metrics
from webhook.common.settings import Settings
from webhook.controller.reconciler import Controller
from webhook.kube.client import KubeRepository
from webhook.kube.leader import LeaderElector


async def run_controller(
    settings: Settings,
    repo: KubeRepository,
    metrics: Metrics,
    *,
    identity: str,
    stop: asyncio.Event,
    orphan_grace_s: float | None = None,
    pending_event_interval_s: float | None = None,
) -> None:
    """Campaign for the controller Lease and run the controller while leading; returns after `stop` is set,
    with the lease released (`orphan_grace_s`/`pending_event_interval_s` default to `settings.controller`)."""
    controller_settings = settings.controller
    elector = LeaderElector(
        repo,
        metrics,
        name=controller_settings.lease_name,
        namespace=controller_settings.lease_namespace,
        identity=identity,
        lease_duration_s=controller_settings.lease_duration_s,
        renew_deadline_s=controller_settings.renew_deadline_s,
        retry_period_s=controller_settings.retry_period_s,
    )

    async def lead() -> None:
        controller = Controller(
            settings,
            repo,
            metrics,
            identity=identity,
            is_leader=elector.is_leader,
            orphan_grace_s=orphan_grace_s,
            pending_event_interval_s=pending_event_interval_s,
        )
        await controller.run()

    await elector.run(lead, stop)


__all__ = ["run_controller"]
