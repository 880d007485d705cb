"""The rank-table ConfigMap `configmap1980-<job>`: its initial body, its completed data, and the size check.

Pure functions of the job, the profile and rendered planner output; the controller does the I/O.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from planner import INITIALIZING_RANK_TABLE, QP_PORT_CONFIG_FILE, RANK_TABLE_FILE
from webhook.common.launcher import launcher_script
from webhook.common.names import (
    CREATED_BY_ANNOTATION,
    CREATED_BY_RINGROUTE,
    LAUNCHER_KEY,
    RING_LABEL,
    VOLCANO_JOB_API_VERSION,
)
from webhook.common.settings import AcceleratorProfile, Settings

RANKS_ENV_KEY = "ranks.env"
"""`<pod-name>=<node-rank>` lines of the completed plan."""
PLAN_REPORT_KEY = "ringroute-plan.json"
"""The planner's report (metrics before and after, bounds) of a route-planned job."""
ROUTES_KEY = "routes.json"
"""Pinned routes, when the routing model is `pinned`."""
QP_PORT_CONFIG_KEY = QP_PORT_CONFIG_FILE
"""Per-queue-pair UDP source ports for HCCL (HCCL_RDMA_QP_PORT_CONFIG_PATH names the directory holding it)."""
STATE_KEY = "ringroute-state.json"
"""What the controller needs after a restart: job UID/version and the servers in rank order."""
GZIP_SUFFIX = ".gz"


CONFIGMAP_DATA_LIMIT = 1024 * 1024
"""The API server rejects a ConfigMap whose data and binaryData together exceed 1 MiB."""


class ConfigMapTooLargeError(ValueError):
    """The completed data does not fit into one ConfigMap; the message says by how much and the fix."""


class StateRecord(TypedDict):
    """Content of `ringroute-state.json`."""

    jobUid: str
    jobVersion: str
    servers: list[list[str]]
    """`[pod name, node name]` per node rank."""


@dataclass(frozen=True, slots=True)
class ConfigMapPayload:
    """`data` and `binaryData` of a ConfigMap, with their size as the API server counts it."""

    data: dict[str, str]
    binary_data: dict[str, str]
    size: int
    omitted: tuple[str, ...] = ()
    """Optional keys (plan report, routes) replaced by a note because the whole would not fit."""

    @property
    def sha256(self) -> str:
        """Stable hash of the payload (written as an annotation to notice user edits)."""
        return payload_hash(self.data, self.binary_data)


def payload_hash(data: Mapping[str, str] | None, binary_data: Mapping[str, str] | None) -> str:
    """sha256 over sorted keys and values of data and binaryData."""
    digest = hashlib.sha256()
    for section in (data or {}, binary_data or {}):
        for key in sorted(section):
            digest.update(key.encode())
            digest.update(b"\0")
            digest.update(section[key].encode())
            digest.update(b"\0")
        digest.update(b"\1")
    return digest.hexdigest()


def data_size(data: Mapping[str, str], binary_data: Mapping[str, str]) -> int:
    """Bytes the API server counts against the 1 MiB limit (keys + values, binaryData decoded)."""
    total = sum(len(k.encode()) + len(v.encode()) for k, v in data.items())
    total += sum(len(k.encode()) + len(base64.b64decode(v)) for k, v in binary_data.items())
    return total


def job_owner_reference(job: Mapping[str, Any]) -> dict[str, Any] | None:
    """Controller ownerReference to the Volcano Job, so the garbage collector deletes the ConfigMap with it
    (None for a job without a UID, i.e. one not stored yet)."""
    meta = job.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        return None
    return {
        "apiVersion": job.get("apiVersion") or VOLCANO_JOB_API_VERSION,
        "kind": job.get("kind") or "Job",
        "name": meta.get("name", ""),
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def initializing_data(settings: Settings, profile: AcceleratorProfile) -> dict[str, str]:
    """Data of a ConfigMap whose table is not ready: the initializing status and the launcher."""
    return {
        profile.rank_table_file: INITIALIZING_RANK_TABLE,
        LAUNCHER_KEY: launcher_script(settings.controller.launcher_timeout_s),
    }


def initial_configmap(job: Mapping[str, Any], profile: AcceleratorProfile, settings: Settings) -> dict[str, Any]:
    """A v1 ConfigMap for the job, status "initializing", owned by the Job when it has a UID."""
    meta = job.get("metadata") or {}
    name = str(meta.get("name", ""))
    metadata: dict[str, Any] = {
        "name": profile.configmap_name(name),
        "labels": {RING_LABEL: profile.label_value},
        "annotations": {CREATED_BY_ANNOTATION: CREATED_BY_RINGROUTE},
    }
    namespace = meta.get("namespace")
    if namespace:
        metadata["namespace"] = namespace
    owner = job_owner_reference(job)
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": initializing_data(settings, profile)}


def state_record(job_uid: str, job_version: str, servers_in_rank_order: Sequence[tuple[str, str]]) -> str:
    """`ringroute-state.json`: lets a restarted or new leader keep survivors' ranks on partial replacement."""
    record: StateRecord = {
        "jobUid": job_uid,
        "jobVersion": job_version,
        "servers": [[pod, node] for pod, node in servers_in_rank_order],
    }
    return json.dumps(record, separators=(",", ":"))


def parse_state_record(text: str | None) -> StateRecord | None:
    """The state record, or None when it is missing or not ours (never raises: it is only a hint)."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("servers"), list):
        return None
    servers = [[str(s[0]), str(s[1])] for s in value["servers"] if isinstance(s, list) and len(s) == 2]
    return {"jobUid": str(value.get("jobUid", "")), "jobVersion": str(value.get("jobVersion", "")), "servers": servers}


def completed_payload(
    settings: Settings,
    profile: AcceleratorProfile,
    *,
    rank_table: str,
    ranks_env: str,
    state: str,
    plan_report: str | None = None,
    routes: str | None = None,
    qp_ports: str | None = None,
    limit: int = CONFIGMAP_DATA_LIMIT,
) -> ConfigMapPayload:
    """The completed ConfigMap data, checked against the size limit.

    Over the limit, optional parts are replaced by a short note: the plan report first, then the pinned routes
    (4,096 servers under `mixed` pinning route about 100 MB), then both. The source ports (MultiQpSrcPort.cfg)
    change what the fabric does, so they go last: first stored gzip-compressed in binaryData (the launcher
    decompresses them), then left out. If the profile allows it, the table itself is stored gzip-compressed in
    binaryData too (the status file says "completed" and the launcher decompresses it). Raises
    ConfigMapTooLargeError when it still does not fit.
    """
    launcher = launcher_script(settings.controller.launcher_timeout_s)
    data = {profile.rank_table_file: rank_table, RANKS_ENV_KEY: ranks_env, LAUNCHER_KEY: launcher, STATE_KEY: state}
    optional = {key: text for key, text in ((ROUTES_KEY, routes), (PLAN_REPORT_KEY, plan_report)) if text}
    ports_forms: list[tuple[dict[str, str], dict[str, str]]] = [({}, {})]
    if qp_ports:
        ports_forms = [({QP_PORT_CONFIG_KEY: qp_ports}, {}), ({}, {QP_PORT_CONFIG_KEY + GZIP_SUFFIX: _gzip(qp_ports)})]
    for ports_data, ports_binary in ports_forms:
        # Keep both, else the routes alone, else the report alone, else neither.
        for kept in (set(optional), {ROUTES_KEY} & set(optional), {PLAN_REPORT_KEY} & set(optional), set()):
            notes = {key: _omitted(key, text, limit) for key, text in optional.items() if key not in kept}
            candidate = {**data, **ports_data, **{key: optional[key] for key in kept}, **notes}
            size = data_size(candidate, ports_binary)
            if size <= limit:
                return ConfigMapPayload(candidate, dict(ports_binary), size, tuple(notes))
    omitted = tuple(optional)
    data.update({key: _omitted(key, text, limit) for key, text in optional.items()})
    plain_size = data_size(data, {})
    if not profile.gzip_rank_table:
        if plain_size <= limit:  # only without the source ports
            return ConfigMapPayload(data, {}, plain_size, (*omitted, QP_PORT_CONFIG_KEY))
        raise ConfigMapTooLargeError(
            f"rank table ConfigMap needs {plain_size} bytes (limit {limit}); set gzipRankTable: true in the "
            f"accelerator profile {profile.label_value!r} (the launcher decompresses it) or run a smaller job"
        )
    data[profile.rank_table_file] = json.dumps(
        {"status": "completed", "compressed": profile.rank_table_file + GZIP_SUFFIX}, separators=(",", ":")
    )
    binary = {profile.rank_table_file + GZIP_SUFFIX: _gzip(rank_table)}
    for ports_binary in ([ports_forms[-1][1]] if qp_ports else []) + [{}]:
        size = data_size(data, {**binary, **ports_binary})
        if size <= limit:
            left_out = omitted if ports_binary or not qp_ports else (*omitted, QP_PORT_CONFIG_KEY)
            return ConfigMapPayload(data, {**binary, **ports_binary}, size, left_out)
    raise ConfigMapTooLargeError(
        f"rank table ConfigMap needs {size} bytes even gzip-compressed (limit {limit}); split the job into smaller jobs"
    )


def _gzip(text: str) -> str:
    return base64.b64encode(gzip.compress(text.encode(), compresslevel=6, mtime=0)).decode()


def _omitted(key: str, text: str, limit: int) -> str:
    """What stands in for an optional part left out of the ConfigMap."""
    size = len(text.encode())
    return json.dumps({"omitted": f"{key} of {size} bytes left out: the ConfigMap is limited to {limit} bytes"})


MAX_PLAN_FILE_BYTES = 32 * 1024 * 1024
"""Largest file a gzip-compressed ConfigMap key may inflate to when read back (a 1 MiB ConfigMap of plan files
inflates to a few MB; anything bigger is refused, not held)."""


def plan_files(configmap: Mapping[str, Any], profile: AcceleratorProfile) -> dict[str, str]:
    """The plan's files a completed rank-table ConfigMap holds, named as `ringroute plan --out-dir` names them
    (`jobstart_hccl.json`, `ringroute-plan.json`, `ringroute-state.json`, `routes.json`, `MultiQpSrcPort.cfg`),
    gzip-compressed ones inflated; a key that cannot be read is left out."""
    data = configmap.get("data") or {}
    binary = configmap.get("binaryData") or {}
    texts: dict[str, str] = {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
    for key, value in binary.items():
        if isinstance(key, str) and key.endswith(GZIP_SUFFIX) and isinstance(value, str):
            inflated = _gunzip(value)
            if inflated is not None:
                texts[key[: -len(GZIP_SUFFIX)]] = inflated
    names = {
        profile.rank_table_file: RANK_TABLE_FILE,
        PLAN_REPORT_KEY: PLAN_REPORT_KEY,
        STATE_KEY: STATE_KEY,
        ROUTES_KEY: ROUTES_KEY,
        QP_PORT_CONFIG_KEY: QP_PORT_CONFIG_KEY,
    }
    return {name: texts[key] for key, name in names.items() if key in texts}


def _gunzip(value: str) -> str | None:
    try:
        inflater = zlib.decompressobj(wbits=31)  # gzip framing
        raw = inflater.decompress(base64.b64decode(value, validate=True), MAX_PLAN_FILE_BYTES)
        if inflater.unconsumed_tail:
            return None  # past the bound
        return raw.decode()
    except (ValueError, zlib.error):
        return None


def rank_table_status(configmap: Mapping[str, Any], profile: AcceleratorProfile) -> str | None:
    """The `status` of the table in a ConfigMap ("initializing", "completed", ...; None if unreadable)."""
    text = (configmap.get("data") or {}).get(profile.rank_table_file)
    if not isinstance(text, str):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    status = value.get("status") if isinstance(value, dict) else None
    return status if isinstance(status, str) else None


def owned_by(configmap: Mapping[str, Any], owner: Mapping[str, Any] | None) -> bool:
    """Whether the ConfigMap has an owner reference to `owner` (True when there is no owner to have)."""
    if owner is None:
        return True
    refs = (configmap.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner["uid"] for r in refs)


def configmap_update(
    job: Mapping[str, Any],
    profile: AcceleratorProfile,
    settings: Settings,
    configmap: Mapping[str, Any] | None,
    *,
    data: dict[str, str],
    binary_data: dict[str, str],
    annotations: Mapping[str, str | None],
) -> dict[str, Any]:
    """The ConfigMap body to create (`configmap` None) or to write over `configmap`: its data replaced, the
    annotations merged (None removes one), and owned by the job."""
    owner = job_owner_reference(job)
    if configmap is None:
        body = initial_configmap(job, profile, settings)
    else:
        body = {k: v for k, v in configmap.items() if k not in ("data", "binaryData")}
        body["metadata"] = dict(configmap.get("metadata") or {})
    meta = body["metadata"]
    merged = dict(meta.get("annotations") or {})
    for k, v in annotations.items():
        if v is None:
            merged.pop(k, None)
        else:
            merged[k] = v
    meta["annotations"] = merged
    if owner is not None and not owned_by(body, owner):
        # A reference to an earlier Job of the same name goes; other owners stay.
        others = [
            o
            for o in meta.get("ownerReferences") or []
            if not (o.get("kind") == owner["kind"] and o.get("name") == owner["name"])
        ]
        if any(o.get("controller") for o in others):
            # The API server allows one controller reference; the Job still owns it for garbage collection.
            owner = {**owner, "controller": False}
        meta["ownerReferences"] = [*others, owner]
    body["data"] = data
    if binary_data:
        body["binaryData"] = binary_data
    return body


__all__ = [
    "configmap_update",
    "owned_by",
    "CONFIGMAP_DATA_LIMIT",
    "PLAN_REPORT_KEY",
    "QP_PORT_CONFIG_KEY",
    "RANKS_ENV_KEY",
    "ROUTES_KEY",
    "STATE_KEY",
    "ConfigMapPayload",
    "ConfigMapTooLargeError",
    "StateRecord",
    "completed_payload",
    "data_size",
    "initial_configmap",
    "initializing_data",
    "job_owner_reference",
    "parse_state_record",
    "plan_files",
    "MAX_PLAN_FILE_BYTES",
    "payload_hash",
    "rank_table_status",
    "state_record",
]
