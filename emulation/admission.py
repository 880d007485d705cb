"""AdmissionReviews as the API server sends them to a webhook (for the demo, the benchmarks and the tests)."""

from __future__ import annotations

import base64
import copy
import uuid
from typing import Any

JOBS_RESOURCE = ("batch.volcano.sh", "v1alpha1", "jobs")
"""(group, version, plural) of Volcano Jobs, the resource ringroute admits."""


def admission_review(
    obj: Any,
    *,
    operation: str = "CREATE",
    uid: str | None = None,
    dry_run: bool = False,
    old: Any = None,
    resource: tuple[str, str, str] = JOBS_RESOURCE,
    username: str = "kubernetes-admin",
    kind: str | None = None,
) -> dict[str, Any]:
    """An AdmissionReview v1 as the API server sends it.

    `obj` is sent as given (it may be malformed on purpose); name and namespace are read from it when present.
    `kind` defaults to the resource's singular, capitalised (`Job` for jobs).
    """
    group, version, plural = resource
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    namespace = metadata.get("namespace", "default") if isinstance(metadata, dict) else "default"
    kind_name = kind or ("Job" if plural == "jobs" else plural.rstrip("s").title())
    group_version_kind = {"group": group, "version": version, "kind": kind_name}
    options = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}.get(operation)
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid if uid is not None else str(uuid.uuid4()),
            "kind": group_version_kind,
            "resource": {"group": group, "version": version, "resource": plural},
            "requestKind": group_version_kind,
            "requestResource": {"group": group, "version": version, "resource": plural},
            "name": name,
            "namespace": namespace,
            "operation": operation,
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options} if options else None,
        },
    }


def local_webhooks(configuration: dict[str, Any], port: int, ca_pem: bytes, namespace: str) -> dict[str, Any]:
    """A copy of one of ringroute's webhook configurations named after `namespace`, calling
    https://127.0.0.1:PORT (with CA `ca_pem`) instead of the Service, for jobs of that namespace only: for a test
    or a benchmark against a real API server, beside other users of the cluster."""
    local = copy.deepcopy(configuration)
    local["metadata"]["name"] = f"ringroute-{namespace}"
    for hook in local["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca_pem).decode()}
        only = {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
        hook["namespaceSelector"] = {"matchExpressions": [only]}
    return local


__all__ = ["JOBS_RESOURCE", "admission_review", "local_webhooks"]
