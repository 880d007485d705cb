"""The controller's watches of namespaced resources: cluster-wide, or one list + watch per managed namespace.

With `controller.namespaces` set, RBAC may grant the controller only those namespaces (RoleBindings), where a
cluster-wide list would be forbidden; each namespace then gets an Informer of its own, and the controller reads
them as one cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from webhook.kube.client import KubeRepository, ResourceKind
from webhook.kube.informer import EventHandler, Informer, Obj, object_key


class NamespacesInformer:
    """One Informer per namespace behind the Informer interface the controller reads: a `store` of every
    namespace's objects, `synced` once each namespace was listed, `generation` and `relists` summed."""

    def __init__(
        self,
        repo: KubeRepository,
        kind: ResourceKind,
        on_event: EventHandler,
        namespaces: Sequence[str],
        label_selector: str | None = None,
    ) -> None:
        self.kind = kind
        self.on_event = on_event
        self.store: dict[str, Obj] = {}
        self.synced = asyncio.Event()
        self.parts = [Informer(repo, kind, self._forward, namespace, label_selector) for namespace in namespaces]

    @property
    def generation(self) -> int:
        """Bumped on every change in any namespace."""
        return sum(part.generation for part in self.parts)

    @property
    def relists(self) -> int:
        """Lists made so far, over all namespaces."""
        return sum(part.relists for part in self.parts)

    def _forward(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        # The merged store changes before the handler runs, as an Informer's own store does.
        key = object_key(obj)
        if event_type == "DELETED":
            self.store.pop(key, None)
        else:
            self.store[key] = obj
        self.on_event(event_type, obj, old)

    async def run(self) -> None:
        """Run every namespace's list + watch (cancel to stop); `synced` is set once all have listed."""
        tasks = [
            asyncio.create_task(part.run(), name=f"informer-{self.kind.plural}-{part.namespace}") for part in self.parts
        ]
        try:
            await asyncio.gather(*(part.synced.wait() for part in self.parts))
            self.synced.set()
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


def namespaced_informer(
    repo: KubeRepository,
    kind: ResourceKind,
    on_event: EventHandler,
    namespaces: Sequence[str],
    label_selector: str | None = None,
) -> Informer | NamespacesInformer:
    """A cache of `kind` in `namespaces` (every namespace when empty): one Informer when one watch covers them."""
    if len(namespaces) <= 1:
        return Informer(repo, kind, on_event, namespaces[0] if namespaces else None, label_selector)
    return NamespacesInformer(repo, kind, on_event, namespaces, label_selector)


__all__ = ["NamespacesInformer", "namespaced_informer"]
