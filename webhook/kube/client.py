"""Kubernetes I/O of ringroute: the only module that talks to the API server (controller, leader, certificates).

Objects travel as plain camelCase dicts (what the API server sends), parsed with orjson: the generated model
classes of kubernetes_asyncio are slow for thousands of pods and the planner reads dicts anyway.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import aiohttp
import orjson
from kubernetes_asyncio.client import ApiClient, Configuration

from webhook.common.metrics import Metrics
from webhook.common.names import (
    COORDINATION_GROUP,
    COORDINATION_VERSION,
    HYPERNODES_PLURAL,
    JOBS_PLURAL,
    LEASES_PLURAL,
    VOLCANO_BATCH_GROUP,
    VOLCANO_BATCH_VERSION,
    VOLCANO_TOPOLOGY_GROUP,
    VOLCANO_TOPOLOGY_VERSION,
)

log = logging.getLogger("ringroute.kube")

_JSON = "application/json"
_MERGE_PATCH = "application/merge-patch+json"


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0 for network errors and timeouts)."""

    def __init__(self, operation: str, status: int, message: str) -> None:
        super().__init__(f"{operation}: HTTP {status}: {message}" if status else f"{operation}: {message}")
        self.operation = operation
        self.status = status


class ConflictError(KubeError):
    """409: the object changed since it was read (resourceVersion guard) or already exists."""


class GoneError(KubeError):
    """410: the resourceVersion to watch from is too old; relist."""


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """A REST resource: API group ("" for core), version, plural, and whether it lives in namespaces."""

    group: str
    version: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """`apiVersion` of the objects (`v1`, `batch.volcano.sh/v1alpha1`)."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """URL path of the collection (all namespaces when namespace is None) or of one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


JOBS = ResourceKind(VOLCANO_BATCH_GROUP, VOLCANO_BATCH_VERSION, JOBS_PLURAL)
PODS = ResourceKind("", "v1", "pods")
NODES = ResourceKind("", "v1", "nodes", namespaced=False)
CONFIGMAPS = ResourceKind("", "v1", "configmaps")
EVENTS = ResourceKind("", "v1", "events")
LEASES = ResourceKind(COORDINATION_GROUP, COORDINATION_VERSION, LEASES_PLURAL)
HYPERNODES = ResourceKind(VOLCANO_TOPOLOGY_GROUP, VOLCANO_TOPOLOGY_VERSION, HYPERNODES_PLURAL, namespaced=False)


class WatchEvent(TypedDict):
    """One line of a watch stream: ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: dict[str, Any]


async def connect(kubeconfig: str | None) -> ApiClient | None:
    """An API client from a kubeconfig file, in-cluster config, `$KUBECONFIG` or `~/.kube/config`.

    Returns None (with a warning) when no API server configuration can be found.
    """
    from kubernetes_asyncio import config

    configuration = Configuration()
    if kubeconfig:
        try:
            await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
        except (OSError, config.ConfigException) as exc:
            raise KubeError("connect", 0, f"cannot load kubeconfig {kubeconfig}: {exc}") from exc
        return ApiClient(configuration)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        return ApiClient(configuration)
    candidates = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates.append(str(Path.home() / ".kube" / "config"))
    for candidate in candidates:
        if Path(candidate).is_file():  # noqa: ASYNC240 (start-up, once)
            await config.load_kube_config(config_file=candidate, client_configuration=configuration)
            return ApiClient(configuration)
    log.warning("event=no_api_server detail=%s", "no in-cluster config, $KUBECONFIG or ~/.kube/config found")
    return None


class KubeRepository:
    """Reads, watches and writes Kubernetes objects as dicts; counts API errors in `metrics.api_errors`."""

    def __init__(self, api: ApiClient, metrics: Metrics, *, request_timeout_s: float = 10.0) -> None:
        self.api = api
        self.metrics = metrics
        self.request_timeout_s = request_timeout_s

    async def close(self) -> None:
        """Close the API client's connections."""
        await self.api.close()

    # -- generic REST ----------------------------------------------------------------------------------------

    async def _open(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        timeout: float | aiohttp.ClientTimeout | None = None,  # noqa: ASYNC109 (aiohttp's per-request timeout)
    ) -> aiohttp.ClientResponse:
        try:
            response = await self.api.call_api(
                path,
                method,
                query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
                header_params={"Content-Type": content_type, "Accept": _JSON},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout if timeout is not None else self.request_timeout_s,
            )
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.metrics.api_errors.labels(operation, "network").inc()
            raise KubeError(operation, 0, f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc
        return cast(aiohttp.ClientResponse, response)

    async def _call(
        self,
        operation: str,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = _JSON,
        missing_ok: bool = False,
    ) -> Any:
        response = await self._open(operation, method, path, query=query, body=body, content_type=content_type)
        try:
            try:
                payload = await response.read()
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.metrics.api_errors.labels(operation, "network").inc()
                raise KubeError(operation, 0, f"{type(exc).__name__}: {exc}") from exc
        finally:
            response.release()
        status = response.status
        if 200 <= status < 300:
            return orjson.loads(payload) if payload else None
        if status == 404 and missing_ok:
            return None
        self.metrics.api_errors.labels(operation, str(status)).inc()
        raise _error(operation, status, payload)

    async def list_objects(
        self, kind: ResourceKind, namespace: str | None = None, *, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """All objects of a kind (optionally in one namespace, by label selector) and the list resourceVersion."""
        result = await self._call(
            f"list {kind.plural}", "GET", kind.path(namespace), query={"labelSelector": label_selector}
        )
        items = [cast(dict[str, Any], item) for item in result.get("items") or []]
        for item in items:
            # Items of a list carry no kind; watch events and single GETs do.
            item.setdefault("apiVersion", kind.api_version)
        return items, str((result.get("metadata") or {}).get("resourceVersion", ""))

    async def watch_objects(
        self,
        kind: ResourceKind,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: str | None = None,
        timeout_s: int = 300,
    ) -> AsyncIterator[WatchEvent]:
        """Watch events after `resource_version` until the server ends the stream (after about timeout_s).

        Bookmarks are requested and passed through. Raises GoneError when the version is too old (relist).
        """
        operation = f"watch {kind.plural}"
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "labelSelector": label_selector,
            "timeoutSeconds": str(timeout_s),
        }
        response = await self._open(
            operation,
            "GET",
            kind.path(namespace),
            query=query,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s, sock_read=timeout_s + 30),
        )
        try:
            if response.status != 200:
                payload = await response.read()
                self.metrics.api_errors.labels(operation, str(response.status)).inc()
                raise _error(operation, response.status, payload)
            buffer = b""
            try:
                # Lines can be far longer than aiohttp's readline limit (a completed 1,024-server table).
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    while b"\n" in buffer:
                        line, buffer = buffer.split(b"\n", 1)
                        if line.strip():
                            yield _watch_event(operation, line)
            except (aiohttp.ClientError, TimeoutError) as exc:
                self.metrics.api_errors.labels(operation, "network").inc()
                raise KubeError(operation, 0, f"stream broken: {type(exc).__name__}") from exc
            if buffer.strip():
                yield _watch_event(operation, buffer)
        finally:
            response.release()

    async def get_object(self, kind: ResourceKind, namespace: str | None, name: str) -> dict[str, Any] | None:
        """One object, or None when it does not exist."""
        result = await self._call(f"get {kind.plural}", "GET", kind.path(namespace, name), missing_ok=True)
        return cast(dict[str, Any] | None, result)

    async def create_object(self, kind: ResourceKind, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create; raises ConflictError (409 AlreadyExists) when the name is taken."""
        namespace = (body.get("metadata") or {}).get("namespace")
        return cast(dict[str, Any], await self._call(f"create {kind.plural}", "POST", kind.path(namespace), body=body))

    async def replace_object(self, kind: ResourceKind, body: Mapping[str, Any]) -> dict[str, Any]:
        """Update (PUT) guarded by `metadata.resourceVersion`; ConflictError when the object changed meanwhile."""
        meta = body.get("metadata") or {}
        if not meta.get("resourceVersion"):
            raise ValueError("replace_object: metadata.resourceVersion is required for a guarded update")
        path = kind.path(meta.get("namespace"), meta["name"])
        return cast(dict[str, Any], await self._call(f"update {kind.plural}", "PUT", path, body=body))

    async def patch_object(
        self, kind: ResourceKind, namespace: str | None, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch (include `metadata.resourceVersion` in the patch to guard it)."""
        path = kind.path(namespace, name)
        result = await self._call(f"patch {kind.plural}", "PATCH", path, body=patch, content_type=_MERGE_PATCH)
        return cast(dict[str, Any], result)

    async def delete_object(
        self,
        kind: ResourceKind,
        namespace: str | None,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """Delete with optional uid/resourceVersion preconditions; False when it was already gone."""
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions}
        result = await self._call(
            f"delete {kind.plural}", "DELETE", kind.path(namespace, name), body=body, missing_ok=True
        )
        return result is not None

    async def has_resource(self, kind: ResourceKind) -> bool:
        """Whether the API server serves this resource (discovery; e.g. the HyperNode CRD is installed)."""
        base = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        result = await self._call(f"discover {kind.group or 'core'}", "GET", base, missing_ok=True)
        if result is None:
            return False
        return any(r.get("name") == kind.plural for r in result.get("resources") or [])

    # -- ConfigMaps ------------------------------------------------------------------------------------------

    async def get_configmap(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A ConfigMap, or None."""
        return await self.get_object(CONFIGMAPS, namespace, name)


def _error(operation: str, status: int, payload: bytes) -> KubeError:
    message = payload.decode("utf-8", "replace")[:300]
    try:
        decoded = orjson.loads(payload)
        if isinstance(decoded, dict) and decoded.get("message"):
            message = str(decoded["message"])
    except orjson.JSONDecodeError:
        pass
    if status == 409:
        return ConflictError(operation, status, message)
    if status == 410:
        return GoneError(operation, status, message)
    return KubeError(operation, status, message)


def _watch_event(operation: str, line: bytes) -> WatchEvent:
    try:
        decoded = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise KubeError(operation, 0, f"malformed watch line: {exc}") from exc
    event_type = str(decoded.get("type", ""))
    obj = decoded.get("object") or {}
    if event_type == "ERROR":
        status = int(obj.get("code") or 500)
        raise _error(operation, status, orjson.dumps(obj))
    return {"type": event_type, "object": obj}


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; True when `stop` was set meanwhile."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=max(seconds, 0.0))
    except TimeoutError:
        return False
    return True


__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "HYPERNODES",
    "JOBS",
    "LEASES",
    "NODES",
    "PODS",
    "ConflictError",
    "GoneError",
    "KubeError",
    "KubeRepository",
    "ResourceKind",
    "WatchEvent",
    "connect",
    "sleep_or_stop",
]
