"""List + watch caches of Kubernetes objects (resume from resourceVersion, relist on 410 Gone, bookmarks, backoff).

Each Informer keeps one resource's objects as plain dicts, stripped of what ringroute never reads, and calls its
handler for every change.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.kube.client import GoneError, KubeError, KubeRepository, ResourceKind

log = logging.getLogger("ringroute.informer")

WATCH_TIMEOUT_S = (240, 360)
"""Server-side watch timeout range; each watch ends and resumes from its resourceVersion."""
BACKOFF_S = (0.2, 30.0)
"""Retry delay after API errors: starts at the first, doubles up to the second."""

Obj = dict[str, Any]


def object_key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` (or `name` for cluster-scoped objects): the cache key of an object."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def object_version(obj: Mapping[str, Any]) -> str:
    """`metadata.resourceVersion` ("" when absent)."""
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _strip(obj: Obj) -> Obj:
    """Drop what the controller never reads (managedFields; node images) to keep the caches small."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    status = obj.get("status")
    if obj.get("kind") == "Node" and isinstance(status, dict):
        status.pop("images", None)
    return obj


EventHandler = Callable[[str, Obj, Obj | None], None]


@dataclass
class Informer:
    """A list + watch cache of one resource; calls `on_event(type, object, previous)` for every change."""

    repo: KubeRepository
    kind: ResourceKind
    on_event: EventHandler
    namespace: str | None = None
    label_selector: str | None = None
    keep: Callable[[Obj], Obj] | None = None
    """What to keep of each object (after managedFields and node images are dropped); the whole object if None.
    A cache that reads a few fields of thousands of Nodes keeps only those."""
    store: dict[str, Obj] = field(default_factory=dict)
    synced: asyncio.Event = field(default_factory=asyncio.Event)
    generation: int = 0
    """Bumped on every change (callers cache derived data by it)."""
    resource_version: str | None = None
    relists: int = 0

    async def run(self) -> None:
        """List, then watch from the list's resourceVersion forever (cancel to stop)."""
        backoff = BACKOFF_S[0]
        while True:
            try:
                if self.resource_version is None:
                    await self._relist()
                async for event in self.repo.watch_objects(
                    self.kind,
                    self.namespace,
                    resource_version=self.resource_version or "",
                    label_selector=self.label_selector,
                    timeout_s=random.randint(*WATCH_TIMEOUT_S),
                ):
                    self._apply(event["type"], event["object"])
                    backoff = BACKOFF_S[0]
            except GoneError:
                log.info("event=watch_expired resource=%s detail=relisting", self.kind.plural)
                self.resource_version = None
            except KubeError as exc:
                log.warning("event=watch_failed resource=%s error=%s retry_s=%.1f", self.kind.plural, exc, backoff)
                await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
                backoff = min(backoff * 2, BACKOFF_S[1])

    def _kept(self, obj: Obj) -> Obj:
        stripped = _strip(obj)
        return self.keep(stripped) if self.keep is not None else stripped

    async def _relist(self) -> None:
        items, resource_version = await self.repo.list_objects(
            self.kind, self.namespace, label_selector=self.label_selector
        )
        self.relists += 1
        fresh = {object_key(o): self._kept(o) for o in items}
        previous, self.store = self.store, fresh
        self.generation += 1
        self.resource_version = resource_version
        for key, gone in previous.items():
            if key not in fresh:
                self.on_event("DELETED", gone, gone)
        for key, obj in fresh.items():
            before = previous.get(key)
            if before is None or object_version(before) != object_version(obj):
                self.on_event("MODIFIED" if before else "ADDED", obj, before)
        self.synced.set()

    def _apply(self, event_type: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("resourceVersion"):
            self.resource_version = str(meta["resourceVersion"])
        if event_type == "BOOKMARK":
            return
        obj.setdefault("apiVersion", self.kind.api_version)
        obj = self._kept(obj)
        key = object_key(obj)
        old = self.store.get(key)
        if event_type == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self.generation += 1
        self.on_event(event_type, obj, old)


__all__ = ["BACKOFF_S", "EventHandler", "Informer", "Obj", "object_key", "object_version"]
