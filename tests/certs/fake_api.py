"""An in-process API server speaking just enough of Secrets and webhook configurations for kube_certs."""

from __future__ import annotations

import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration

Key = tuple[str, str | None, str]


@dataclass
class FakeApi:
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    resource_version: int = 0
    fail_next: dict[str, int] = field(default_factory=dict)
    """method -> number of upcoming requests of that method answered 409 Conflict."""
    writes: list[tuple[str, str]] = field(default_factory=list)

    def put(self, plural: str, namespace: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        self.resource_version += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.resource_version)
        self.objects[(plural, namespace, stored["metadata"]["name"])] = stored
        return stored

    def get(self, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return self.objects.get((plural, namespace, name))


def status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason}
    body["message"] = message
    return web.json_response(body, status=code)


def app_for(api: FakeApi) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        info = request.match_info
        plural, namespace, name = info["plural"], info.get("namespace"), info.get("name")
        if api.fail_next.get(request.method, 0) > 0:
            api.fail_next[request.method] -= 1
            return status(409, "Conflict", "the object has been modified; please apply your changes again")
        if request.method == "GET":
            assert name is not None
            obj = api.get(plural, namespace, name)
            return web.json_response(obj) if obj else status(404, "NotFound", f"{plural} {name!r} not found")
        body = json.loads(await request.read())
        if request.method == "POST":
            name = body["metadata"]["name"]
            if api.get(plural, namespace, name) is not None:
                return status(409, "AlreadyExists", f"{plural} {name!r} already exists")
            api.writes.append(("create", name))
            return web.json_response(api.put(plural, namespace, body), status=201)
        assert name is not None
        current = api.get(plural, namespace, name)
        if current is None:
            return status(404, "NotFound", f"{plural} {name!r} not found")
        wanted_rv = (body.get("metadata") or {}).get("resourceVersion")
        if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
            return status(409, "Conflict", "the object has been modified")
        if request.method == "PUT":
            api.writes.append(("update", name))
            return web.json_response(api.put(plural, namespace, body))
        assert request.content_type == "application/merge-patch+json"
        merged = copy.deepcopy(current)
        for key, value in body.items():
            if key == "metadata":
                continue
            merged[key] = value
        api.writes.append(("patch", name))
        return web.json_response(api.put(plural, namespace, merged))

    app = web.Application()
    app.router.add_route("*", "/api/v1/namespaces/{namespace}/{plural}", handle)
    app.router.add_route("*", "/api/v1/namespaces/{namespace}/{plural}/{name}", handle)
    app.router.add_route("*", "/apis/admissionregistration.k8s.io/v1/{plural}/{name}", handle)
    return app


@asynccontextmanager
async def serve(api: FakeApi) -> AsyncIterator[ApiClient]:
    runner = web.AppRunner(app_for(api))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    client = ApiClient(configuration)
    try:
        yield client
    finally:
        await client.close()
        await runner.cleanup()
