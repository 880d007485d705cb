"""Kubernetes Events: what the controller tells users on their Job and its rank-table ConfigMap."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from webhook.common.kube_time import now_rfc3339
from webhook.kube.client import EVENTS, KubeError, KubeRepository

log = logging.getLogger("ringroute.events")

EVENT_MESSAGE_LIMIT = 1024
"""events.k8s.io caps notes at 1 KiB; core Events are kept to the same length."""

EventType = Literal["Normal", "Warning"]


class EventRecorder:
    """Records core/v1 Events as one component (and replica, `instance`)."""

    def __init__(self, repo: KubeRepository, *, component: str = "ringroute-controller", instance: str = "") -> None:
        self.repo = repo
        self.component = component
        self.instance = instance

    async def emit(
        self, involved: Mapping[str, Any], *, reason: str, message: str, event_type: EventType = "Normal"
    ) -> None:
        """Record an Event on an object (failures are logged and counted, never raised)."""
        meta = involved.get("metadata") or {}
        namespace = meta.get("namespace") or "default"
        now = now_rfc3339()
        if len(message) > EVENT_MESSAGE_LIMIT:
            message = message[: EVENT_MESSAGE_LIMIT - 3] + "..."
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": involved.get("apiVersion", ""),
                "kind": involved.get("kind", ""),
                "name": meta.get("name", ""),
                "namespace": namespace,
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        try:
            await self.repo.create_object(EVENTS, body)
        except KubeError as exc:
            log.warning("event=event_not_recorded reason=%s error=%s", reason, exc)


__all__ = ["EVENT_MESSAGE_LIMIT", "EventRecorder", "EventType"]
