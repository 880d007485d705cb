"""Which Job a rank-table ConfigMap belongs to, the running job it describes, and which ones ringroute made for a
Job that never appeared.

Pure: it reads the ConfigMap and the settings it is handed.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

from planner import RunningJob, read_running_job
from webhook.common.kube_time import parse_time
from webhook.common.names import CREATED_BY_ANNOTATION, CREATED_BY_RINGROUTE, RING_LABEL
from webhook.common.rank_configmap import plan_files, rank_table_status
from webhook.common.settings import Settings


def configmap_job_key(configmap: Mapping[str, Any], settings: Settings) -> str | None:
    """`namespace/job` of the Job a rank-table ConfigMap belongs to (by profile label and name prefix), or None."""
    meta = configmap.get("metadata") or {}
    profile = settings.profile((meta.get("labels") or {}).get(RING_LABEL))
    name = str(meta.get("name", ""))
    if profile is None or not name.startswith(profile.configmap_prefix):
        return None
    return f"{meta.get('namespace')}/{name[len(profile.configmap_prefix) :]}"


def running_job_of(
    configmap: Mapping[str, Any], settings: Settings, *, ports_first: bool = False
) -> tuple[str, RunningJob] | None:
    """(`namespace/job`, the running job) of a completed rank-table ConfigMap, as the fabric ledger counts it; None
    for a ConfigMap of no job or whose table is not completed. Raises InputError for a table that cannot be read."""
    key = configmap_job_key(configmap, settings)
    profile = settings.profile(((configmap.get("metadata") or {}).get("labels") or {}).get(RING_LABEL))
    if key is None or profile is None or rank_table_status(configmap, profile) != "completed":
        return None
    files = plan_files(configmap, profile)
    return key, read_running_job(files, key=key, where=f"ConfigMap of {key}", ports_first=ports_first)


def is_orphan(
    configmap: Mapping[str, Any], settings: Settings, jobs: Container[str], *, now: float, grace_s: float
) -> bool:
    """A rank-table ConfigMap ringroute created, owned by nobody, whose Job (not in `jobs`) never appeared within
    `grace_s` of its creation (`now` in Unix seconds)."""
    job_key = configmap_job_key(configmap, settings)
    meta = configmap.get("metadata") or {}
    if job_key is None or job_key in jobs:
        return False
    if (meta.get("annotations") or {}).get(CREATED_BY_ANNOTATION) != CREATED_BY_RINGROUTE:
        return False  # never delete what a user made
    if meta.get("ownerReferences"):
        return False  # the garbage collector handles owned ones
    created = parse_time(meta.get("creationTimestamp"))
    return created is not None and now - created.timestamp() >= grace_s


__all__ = ["configmap_job_key", "is_orphan"]
