"""An in-process Kubernetes API server for tests and benchmarks (aiohttp on loopback).

It speaks what the controller and the self-managed certificates use, with the semantics that matter: list + watch
with resourceVersions, bookmarks and 410 Gone after compaction; get/create/update/merge-patch/delete with 409 on a
stale resourceVersion, on an existing name and on failed delete preconditions (a merge patch that changes nothing
stores nothing, and one that names another UID is a 422, as on a real API server); ownerReference validation (422)
and garbage collection as kube-controller-manager does it (see `_collect`); an admission chain of webhooks on
create, update and patch, with `dryRun=All`; API discovery; and injected faults (HTTP errors and slow answers) by
method and path.
Pods behave as the real API server keeps them: a created pod's status is `Pending`, updates of the pod leave its
status alone, and only `pods/<name>/status` (kubelet) and `pods/<name>/binding` (the scheduler) change the status
and the node, so tests can play a pod's life in the order a cluster writes it.

Served: pods, nodes, configmaps, events, secrets, Volcano jobs, leases, Mutating/ValidatingWebhookConfigurations,
and (with `hypernodes=True`) Volcano HyperNodes.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import copy
import datetime as dt
import itertools
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jsonpatch
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

from emulation.admission import admission_review
from webhook.common.metrics import Metrics
from webhook.kube.client import KubeRepository

Obj = dict[str, Any]

SERVED: dict[tuple[str, str], tuple[str, bool]] = {
    # (group, plural) -> (version, namespaced)
    ("", "pods"): ("v1", True),
    ("", "nodes"): ("v1", False),
    ("", "configmaps"): ("v1", True),
    ("", "events"): ("v1", True),
    ("", "secrets"): ("v1", True),
    ("batch.volcano.sh", "jobs"): ("v1alpha1", True),
    ("coordination.k8s.io", "leases"): ("v1", True),
    ("topology.volcano.sh", "hypernodes"): ("v1alpha1", False),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): ("v1", False),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): ("v1", False),
}
KINDS = {
    "pods": "Pod",
    "nodes": "Node",
    "configmaps": "ConfigMap",
    "events": "Event",
    "secrets": "Secret",
    "jobs": "Job",
    "leases": "Lease",
    "hypernodes": "HyperNode",
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
}
MERGE_PATCH = "application/merge-patch+json"
PATCH_TYPES = (MERGE_PATCH, "application/strategic-merge-patch+json")
"""Patches accepted; a strategic merge patch is applied as a merge patch (the same for the maps tests patch)."""
REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    503: "ServiceUnavailable",
}
"""Status reasons of injected faults and admission denials; any other code answers "InternalError"."""
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")
"""DeleteOptions.propagationPolicy values; Background is the API server's default for these resources."""

Review = dict[str, Any]
AdmissionCall = Callable[[Review], Awaitable[dict[str, Any]]]
"""Takes an AdmissionReview (with `request`) and answers its `response` (allowed, patch, status, warnings)."""


@dataclass
class AdmissionWebhook:
    """One step of the admission chain of a resource; steps run in order, mutating ones first as the API server
    runs them. A denial stops the request: nothing is stored."""

    name: str
    call: AdmissionCall


def http_webhook(name: str, url: str) -> AdmissionWebhook:
    """An admission step that POSTs the AdmissionReview to `url` (a plain-HTTP webhook on loopback)."""

    async def call(review: Review) -> dict[str, Any]:
        async with aiohttp.ClientSession() as session, session.post(url, json=review) as answer:
            answer.raise_for_status()
            response: dict[str, Any] = (await answer.json())["response"]
            return response

    return AdmissionWebhook(name, call)


@dataclass
class Fault:
    """Answer matching requests with `status` (or delay them by `delay_s` first), `times` times (-1: always).

    `status=0` only delays. An empty `path_contains` matches every path.
    """

    method: str
    path_contains: str
    status: int = 500
    times: int = 1
    delay_s: float = 0.0
    query_contains: str = ""


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    status: int = 0
    agent: str = ""


RequestLog = list[Request]
"""Named at module level: inside FakeApiServer, `list` is its own method."""


@dataclass
class _Store:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    history: list[tuple[int, str, Obj]] = field(default_factory=list)
    dropped: int = 0
    """History entries forgotten by compaction (watch cursors are absolute indices)."""


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


def _match_labels(obj: Mapping[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for raw_term in selector.split(","):
        term = raw_term.strip()
        if not term:
            continue
        if term.startswith("!"):
            if term[1:] in labels:
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key) == value:
                return False
        elif "=" in term:
            key, value = term.split("=", 1)
            if labels.get(key.rstrip("=")) != value:
                return False
        elif term not in labels:
            return False
    return True


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class FakeApiServer:
    """The emulated API server; use `async with FakeApiServer() as server`, then `server.client()`."""

    def __init__(self, *, hypernodes: bool = False, bookmark_interval_s: float = 1.0) -> None:
        self.served = dict(SERVED)
        if not hypernodes:
            del self.served[("topology.volcano.sh", "hypernodes")]
        self.bookmark_interval_s = bookmark_interval_s
        self.stores: dict[str, _Store] = {plural: _Store() for _, plural in self.served}
        self._rv = itertools.count(1000)
        self.resource_version = 999
        self.compacted = 0
        """Watches from a resourceVersion below this get 410 Gone."""
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        # An Event replaced on every change, not a Condition: cancelling a watch waiting on Condition.wait()
        # under wait_for can leave the lock released twice on Python 3.11 and hang the other watches.
        self._changed = asyncio.Event()
        self._tick = 0
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.watch_starts: dict[str, int] = {}
        self.watch_generation = 0
        """Bumped by `drop_watches`; open watch streams of an older generation end."""
        self.admission: dict[str, list[AdmissionWebhook]] = {}
        """Admission chain per plural, run on HTTP create, update and patch (objects written by `apply` skip it)."""
        self.created_at: dict[tuple[str, str, str], float] = {}
        """`time.perf_counter()` when each (plural, namespace, name) was last created (benchmarks read it)."""

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeApiServer:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def url(self) -> str:
        """The server's base URL (for a kubeconfig's `cluster.server`)."""
        return f"http://127.0.0.1:{self.port}"

    def client(self, agent: str | None = None) -> ApiClient:
        """A kubernetes_asyncio ApiClient pointed at this server (its User-Agent names the replica)."""
        configuration = Configuration(host=self.url)
        api = ApiClient(configuration)
        if agent:
            api.user_agent = agent
        return api

    @contextlib.asynccontextmanager
    async def repository(
        self, metrics: Metrics | None = None, *, agent: str | None = None, request_timeout_s: float = 10.0
    ) -> AsyncIterator[KubeRepository]:
        """ringroute's KubeRepository on a `client(agent)` of this server; the client is closed on exit."""
        api = self.client(agent)
        try:
            yield KubeRepository(api, metrics or Metrics(), request_timeout_s=request_timeout_s)
        finally:
            await api.close()

    # -- direct access for tests (no HTTP) -------------------------------------------------------------------

    def _next_rv(self) -> str:
        self.resource_version = next(self._rv)
        return str(self.resource_version)

    def _record(self, plural: str, event_type: str, obj: Obj) -> None:
        self.stores[plural].history.append((self.resource_version, event_type, copy.deepcopy(obj)))

    async def _notify(self) -> None:
        self._tick += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def get(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        obj = self.stores[plural].objects.get((namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def list(self, plural: str, namespace: str | None = None) -> list[Obj]:
        return [
            copy.deepcopy(o)
            for (ns, _), o in sorted(self.stores[plural].objects.items())
            if namespace is None or ns == namespace
        ]

    async def apply(self, plural: str, obj: Obj) -> Obj:
        """Create or replace an object as a kube user would (no resourceVersion check)."""
        return await self._write(plural, copy.deepcopy(obj), guard=False)

    async def mutate(self, plural: str, namespace: str | None, name: str, change: Callable[[Obj], None]) -> Obj:
        """Change a stored object in place (as another client's update would)."""
        obj = self.get(plural, namespace, name)
        assert obj is not None, f"{plural} {namespace}/{name} does not exist"
        change(obj)
        return await self._write(plural, obj, guard=False)

    async def remove(self, plural: str, namespace: str | None, name: str, *, propagation: str = "Background") -> bool:
        """Delete an object and, like the garbage collector, what it owns (`propagation` as in DeleteOptions)."""
        result = self._delete(plural, namespace or "", name, propagation)
        await self._notify()
        return result

    def compact(self) -> None:
        """Forget history: watches from older resourceVersions now get 410 Gone."""
        self.compacted = self.resource_version + 1
        for store in self.stores.values():
            store.dropped += len(store.history)
            store.history.clear()

    async def drop_watches(self) -> None:
        """End every open watch stream (an API server restart, a load balancer timeout)."""
        self.watch_generation += 1
        await self._notify()

    def writes(self, plural: str | None = None, *, since: int = 0) -> RequestLog:
        """Successful write requests (optionally of one resource), from request number `since`."""
        return [
            r
            for r in self.requests[since:]
            if r.method in ("POST", "PUT", "PATCH", "DELETE")
            and 200 <= r.status < 300
            and (plural is None or f"/{plural}" in r.path)
        ]

    # -- storage ---------------------------------------------------------------------------------------------

    async def _write(self, plural: str, obj: Obj, *, guard: bool, create_only: bool = False) -> Obj:
        written = self._put(plural, obj, guard=guard, create_only=create_only)
        await self._notify()
        return written

    def _put(self, plural: str, obj: Obj, *, guard: bool, create_only: bool = False) -> Obj:
        meta = obj.setdefault("metadata", {})
        _check_owner_references(meta)
        namespace = meta.get("namespace", "") if self._namespaced(plural) else ""
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        key = (namespace, meta["name"])
        store = self.stores[plural]
        current = store.objects.get(key)
        if create_only and current is not None:
            raise _ConflictError("AlreadyExists", f'{plural} "{meta["name"]}" already exists')
        if (
            guard
            and current is not None
            and meta.get("resourceVersion") not in (None, "")
            and (meta["resourceVersion"] != current["metadata"]["resourceVersion"])
        ):
            raise _ConflictError(
                "Conflict",
                f'Operation cannot be fulfilled on {plural} "{meta["name"]}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        if current is not None:
            meta["uid"] = current["metadata"]["uid"]
            meta["creationTimestamp"] = current["metadata"]["creationTimestamp"]
        else:
            meta.setdefault("uid", str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
        obj.setdefault("kind", KINDS[plural])
        obj.setdefault("apiVersion", self._api_version(plural))
        meta["resourceVersion"] = self._next_rv()
        store.objects[key] = obj
        if current is None:
            self.created_at[(plural, *key)] = time.perf_counter()
        self._record(plural, "MODIFIED" if current is not None else "ADDED", obj)
        written = copy.deepcopy(obj)
        if meta.get("ownerReferences"):
            # An object created for an owner that is already gone is collected too (the answer still shows it).
            self._collect(plural, *key)
        return written

    def _delete(self, plural: str, namespace: str, name: str, propagation: str = "Background") -> bool:
        store = self.stores[plural]
        obj = store.objects.get((namespace, name))
        if obj is None:
            return False
        uid = obj["metadata"]["uid"]
        dependents = [
            (other_plural, ns, other_name)
            for other_plural, other in self.stores.items()
            for (ns, other_name), dependent in list(other.objects.items())
            if any(o.get("uid") == uid for o in (dependent.get("metadata") or {}).get("ownerReferences") or [])
        ]
        if propagation == "Foreground":
            # The owner stays until the dependents are gone (the real one marks it with a finalizer meanwhile).
            for dependent in dependents:
                self._collect(*dependent, gone=uid, propagation="Foreground")
        store.objects.pop((namespace, name))
        self._next_rv()
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        self._record(plural, "DELETED", obj)
        for dependent in dependents:
            if propagation == "Orphan":
                self._strip_owner(*dependent, {uid})
            else:
                self._collect(*dependent)
        return True

    def _collect(
        self, plural: str, namespace: str, name: str, *, gone: str | None = None, propagation: str = "Background"
    ) -> None:
        """What kube-controller-manager's garbage collector does with one object that has ownerReferences.

        It looks every owner up by group, kind, name and uid: with none left the object is deleted; with some
        left the references to the absent ones are removed and the object stays. Owners of a kind the server does
        not serve cannot be looked up, so the object stays. `gone` counts one owner as absent (foreground
        deletion, before the owner is removed).
        """
        obj = self.stores[plural].objects.get((namespace, name))
        if obj is None:
            return
        refs = (obj.get("metadata") or {}).get("ownerReferences") or []
        alive = [self._owner_exists(r, namespace) if r.get("uid") != gone else False for r in refs]
        absent = {r["uid"] for r, a in zip(refs, alive, strict=True) if a is False}
        if not absent:
            return
        if all(a is False for a in alive):
            self._delete(plural, namespace, name, propagation)
        else:
            self._strip_owner(plural, namespace, name, absent)

    def _strip_owner(self, plural: str, namespace: str, name: str, uids: set[str]) -> None:
        obj = self.get(plural, namespace, name)
        if obj is None:
            return
        meta = obj["metadata"]
        meta["ownerReferences"] = [r for r in meta.get("ownerReferences") or [] if r.get("uid") not in uids]
        if not meta["ownerReferences"]:
            del meta["ownerReferences"]
        self._put(plural, obj, guard=False)

    def _owner_exists(self, ref: Mapping[str, Any], namespace: str) -> bool | None:
        """True or False when the owner can be looked up, None when its kind is not served here."""
        group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        plural = next((p for (g, p) in self.served if g == group and KINDS[p] == ref.get("kind")), None)
        if plural is None:
            return None
        owner = self.stores[plural].objects.get((namespace if self._namespaced(plural) else "", ref.get("name", "")))
        return owner is not None and owner["metadata"]["uid"] == ref.get("uid")

    def _namespaced(self, plural: str) -> bool:
        return next(n for (_, p), (_, n) in self.served.items() if p == plural)

    def _api_version(self, plural: str) -> str:
        group, version = next((g, v) for (g, p), (v, _) in self.served.items() if p == plural)
        return f"{group}/{version}" if group else version

    # -- HTTP ------------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        record = Request(request.method, request.path, dict(request.query), agent=request.headers.get("User-Agent", ""))
        self.requests.append(record)
        response = await self._dispatch(request)
        record.status = response.status
        return response

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        for fault in self.faults:
            if (
                fault.times != 0
                and fault.method in (request.method, "*")
                and fault.path_contains in request.path
                and fault.query_contains in request.query_string
            ):
                if fault.times > 0:
                    fault.times -= 1
                if fault.delay_s:
                    await asyncio.sleep(fault.delay_s)
                if fault.status:
                    return _status(fault.status, REASONS.get(fault.status, "InternalError"), "injected fault")
                break
        parts = [p for p in request.path.split("/") if p]
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return _status(404, "NotFound", f"unknown path {request.path}")
        if not rest:
            resources = [
                {"name": p, "namespaced": n, "kind": KINDS[p]}
                for (g, p), (v, n) in self.served.items()
                if g == group and v == version
            ]
            if not resources:
                return _status(404, "NotFound", f"the server could not find {request.path}")
            return web.json_response({"kind": "APIResourceList", "groupVersion": version, "resources": resources})
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        plural, name = rest[0], (rest[1] if len(rest) > 1 else None)
        subresource = rest[2] if len(rest) > 2 else None
        if (group, plural) not in self.served or self.served[(group, plural)][0] != version:
            return _status(404, "NotFound", f"the server could not find the requested resource {request.path}")
        try:
            if subresource is not None and name is not None:
                return await self._subresource(request, plural, namespace, name, subresource)
            return await self._resource(request, plural, namespace, name)
        except _ConflictError as exc:
            return _status(409, exc.reason, exc.message)
        except _RefusedError as exc:
            return _status(exc.code, REASONS.get(exc.code, "InternalError"), exc.message)

    async def _resource(
        self, request: web.Request, plural: str, namespace: str | None, name: str | None
    ) -> web.StreamResponse:
        method = request.method
        if name is None:
            if method == "GET":
                return await self._collection(request, plural, namespace)
            if method == "POST":
                return await self._create(request, plural, namespace)
            return _status(405, "MethodNotAllowed", f"{method} on a collection")
        current = self.stores[plural].objects.get((namespace or "", name))
        if current is None:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        if method == "GET":
            return web.json_response(current)
        if method == "PUT":
            body = await request.json()
            body.setdefault("metadata", {})["namespace"] = namespace or ""
            if not self._namespaced(plural):
                body["metadata"].pop("namespace", None)
            if plural == "pods":
                body["status"] = copy.deepcopy(current.get("status") or {})  # only pods/status changes it
            dry_run = "All" in request.query.getall("dryRun", [])
            body = await self._admit(plural, "UPDATE", body, current, dry_run=dry_run)
            if dry_run:
                return web.json_response(body)
            return web.json_response(await self._write(plural, body, guard=True))
        if method == "PATCH":
            return await self._merge_patch(request, plural, name, current)
        if method == "DELETE":
            return await self._delete_request(request, plural, namespace, name, current)
        return _status(405, "MethodNotAllowed", method)

    async def _subresource(
        self, request: web.Request, plural: str, namespace: str | None, name: str, subresource: str
    ) -> web.StreamResponse:
        """`<plural>/<name>/status` (GET, PUT, PATCH: only `status` changes, as kubelet and controllers write it)
        and `pods/<name>/binding` (POST: the scheduler binds a pod to a node, once)."""
        current = self.stores[plural].objects.get((namespace or "", name))
        if current is None:
            return _status(404, "NotFound", f'{plural} "{name}" not found')
        if subresource == "binding" and plural == "pods" and request.method == "POST":
            target = ((await request.json()).get("target") or {}).get("name")
            if not target:
                raise _RefusedError(422, "target.name: Required value")
            if (current.get("spec") or {}).get("nodeName"):
                raise _ConflictError(
                    "Conflict", f'pod {name} is already assigned to node "{current["spec"]["nodeName"]}"'
                )
            bound = copy.deepcopy(current)
            bound.setdefault("spec", {})["nodeName"] = target
            return web.json_response(await self._write(plural, bound, guard=True), status=201)
        if subresource != "status":
            return _status(404, "NotFound", f"the server could not find the requested resource {request.path}")
        if request.method == "GET":
            return web.json_response(current)
        if request.method == "PUT":
            body = await request.json()
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise _ConflictError("Conflict", f'Operation cannot be fulfilled on {plural} "{name}": modified')
            status = body.get("status") or {}
        elif request.method == "PATCH":
            if request.content_type not in PATCH_TYPES:
                return _status(415, "UnsupportedMediaType", f"PATCH {request.content_type}: only {PATCH_TYPES} here")
            patch = await request.json()
            wanted = (patch.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != current["metadata"]["resourceVersion"]:
                raise _ConflictError("Conflict", f'Operation cannot be fulfilled on {plural} "{name}": modified')
            status = merge_patch(current.get("status") or {}, patch.get("status") or {})
        else:
            return _status(405, "MethodNotAllowed", request.method)
        updated = copy.deepcopy(current)
        updated["status"] = status
        return web.json_response(await self._write(plural, updated, guard=True))

    async def _collection(self, request: web.Request, plural: str, namespace: str | None) -> web.StreamResponse:
        if request.query.get("watch") in ("true", "1"):
            return await self._watch(request, plural, namespace)
        selector = request.query.get("labelSelector")
        items = [
            o
            for (ns, _), o in sorted(self.stores[plural].objects.items())
            if (namespace is None or ns == namespace) and _match_labels(o, selector)
        ]
        body = {
            "kind": KINDS[plural] + "List",
            "apiVersion": self._api_version(plural),
            "metadata": {"resourceVersion": str(self.resource_version)},
            "items": items,
        }
        return web.Response(body=json.dumps(body), content_type="application/json")

    async def _create(self, request: web.Request, plural: str, namespace: str | None) -> web.StreamResponse:
        body = await request.json()
        body.setdefault("metadata", {})
        if namespace:
            body["metadata"]["namespace"] = namespace
        body["metadata"].pop("resourceVersion", None)
        if plural == "pods":
            body["status"] = {"phase": "Pending"}  # a new pod's status is the API server's, then kubelet's
        dry_run = "All" in request.query.getall("dryRun", [])
        body = await self._admit(plural, "CREATE", body, None, dry_run=dry_run)
        if dry_run:
            return web.json_response(body, status=201)
        created = await self._write(plural, body, guard=False, create_only=True)
        return web.json_response(created, status=201)

    async def _merge_patch(self, request: web.Request, plural: str, name: str, current: Obj) -> web.StreamResponse:
        if request.content_type not in PATCH_TYPES:
            return _status(415, "UnsupportedMediaType", f"PATCH {request.content_type}: only {PATCH_TYPES} here")
        patch = await request.json()
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise _ConflictError("Conflict", f'Operation cannot be fulfilled on {plural} "{name}": modified')
        if plural == "pods":
            patch.pop("status", None)  # only pods/status changes it
        merged = merge_patch(current, patch)
        uid = merged["metadata"].get("uid")
        if uid != current["metadata"]["uid"]:
            # A UID in a patch is no precondition: the patched object fails validation (measured on v1.36).
            raise _RefusedError(
                422,
                f'{KINDS[plural]} "{name}" is invalid: metadata.uid: Invalid value: "{uid}": field is immutable',
            )
        merged["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        dry_run = "All" in request.query.getall("dryRun", [])
        merged = await self._admit(plural, "UPDATE", merged, current, dry_run=dry_run)
        if dry_run or merged == current:
            # A patch that changes nothing stores nothing: no new resourceVersion, no watch event.
            return web.json_response(merged)
        return web.json_response(await self._write(plural, merged, guard=True))

    async def _delete_request(
        self, request: web.Request, plural: str, namespace: str | None, name: str, current: Obj
    ) -> web.StreamResponse:
        body = (await request.json()) if request.can_read_body else {}
        pre = (body or {}).get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != current["metadata"]["uid"]:
            raise _ConflictError("Conflict", "Precondition failed: UID in precondition does not match")
        if pre.get("resourceVersion") and pre["resourceVersion"] != current["metadata"]["resourceVersion"]:
            raise _ConflictError("Conflict", "Precondition failed: ResourceVersion in precondition does not match")
        propagation = (body or {}).get("propagationPolicy") or request.query.get("propagationPolicy", "Background")
        if propagation not in PROPAGATION_POLICIES:
            raise _RefusedError(400, f'unsupported propagationPolicy "{propagation}"')
        self._delete(plural, namespace or "", name, propagation)
        await self._notify()
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Success"})

    async def _admit(self, plural: str, operation: str, obj: Obj, old: Obj | None, *, dry_run: bool) -> Obj:
        """Run the admission chain: apply each mutating patch, stop at the first denial (nothing is stored)."""
        group = next(g for (g, p) in self.served if p == plural)
        version = self.served[(group, plural)][0]
        for webhook in self.admission.get(plural, []):
            review: Review = admission_review(
                obj,
                operation=operation,
                old=old,
                dry_run=dry_run,
                resource=(group, version, plural),
                kind=KINDS[plural],
            )
            response = await webhook.call(review)
            if not response.get("allowed"):
                status = response.get("status") or {}
                # A denial without a code is a 403, as the API server answers it.
                code = int(status.get("code") or 403)
                raise _RefusedError(
                    code, f'admission webhook "{webhook.name}" denied the request: {status.get("message", "")}'
                )
            if response.get("patch"):
                ops = json.loads(base64.b64decode(response["patch"]))
                obj = jsonpatch.apply_patch(obj, ops)
        return obj

    async def _watch(self, request: web.Request, plural: str, namespace: str | None) -> web.StreamResponse:
        self.watch_starts[plural] = self.watch_starts.get(plural, 0) + 1
        selector = request.query.get("labelSelector")
        bookmarks = request.query.get("allowWatchBookmarks") == "true"
        timeout = float(request.query.get("timeoutSeconds", "300"))
        since = request.query.get("resourceVersion", "")
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        generation = self.watch_generation
        store = self.stores[plural]

        async def send(event_type: str, obj: Obj) -> None:
            await response.write(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")

        async def expired(message: str) -> web.StreamResponse:
            expired_status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410}
            await send("ERROR", {**expired_status, "reason": "Expired", "message": message})
            return response

        if since in ("", "0"):
            index = store.dropped + len(store.history)
            for (ns, _), obj in sorted(store.objects.items()):
                if (namespace is None or ns == namespace) and _match_labels(obj, selector):
                    await send("ADDED", obj)
        else:
            cursor = int(since)
            index = store.dropped + bisect.bisect_right([h[0] for h in store.history], cursor)
            if cursor < self.compacted - 1:
                return await expired(f"too old resource version: {cursor}")
        last_bookmark = loop.time()
        while loop.time() < deadline and self.watch_generation == generation:
            seen = self._tick
            if index < store.dropped:
                return await expired("too old resource version")
            while index - store.dropped < len(store.history):
                _, event_type, obj = store.history[index - store.dropped]
                index += 1
                ns = (obj.get("metadata") or {}).get("namespace", "")
                if (namespace is None or ns == namespace) and _match_labels(obj, selector):
                    await send(event_type, obj)
            cursor = self.resource_version
            if bookmarks and loop.time() - last_bookmark >= self.bookmark_interval_s:
                last_bookmark = loop.time()
                await send(
                    "BOOKMARK",
                    {
                        "kind": KINDS[plural],
                        "apiVersion": self._api_version(plural),
                        "metadata": {"resourceVersion": str(cursor)},
                    },
                )
            wait = min(deadline - loop.time(), self.bookmark_interval_s)
            if wait <= 0:
                break
            if self._tick == seen:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), timeout=wait)
        return response


class _ConflictError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class _RefusedError(Exception):
    """A request the API server refuses with `code`: invalid (422), denied by admission, a bad option (400)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_owner_references(meta: Mapping[str, Any]) -> None:
    """The API server's validation of metadata.ownerReferences (apimachinery ValidateOwnerReferences)."""
    refs = meta.get("ownerReferences") or []
    for i, ref in enumerate(refs):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                raise _RefusedError(422, f"metadata.ownerReferences[{i}].{key}: Required value")
    controllers = [f"{r['kind']}/{r['name']}" for r in refs if r.get("controller")]
    if len(controllers) > 1:
        raise _RefusedError(
            422,
            "metadata.ownerReferences: Invalid value: Only one reference can have Controller set to true. "
            f'Found "true" in references for {controllers[0]} and {controllers[1]}',
        )
