"""What admission keeps between requests is bounded by configuration, not by what clients send."""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from tests.support.admission import bare_job, mutate
from webhook.admission.policy import judge
from webhook.common.settings import Settings


def job_with_mount_path(path: str) -> dict[str, Any]:
    job = bare_job()
    container = job["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": "data", "mountPath": path}]
    container["workingDir"] = path
    job["spec"]["tasks"][0]["template"]["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    return job


def test_requests_with_unique_megabyte_mount_paths_leave_no_memory_behind() -> None:
    settings = Settings()
    judge(job_with_mount_path("/warm"), None, settings)
    mutate(job_with_mount_path("/warm"), settings)
    gc.collect()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for i in range(30):
            path = f"/data/{i:04d}/" + "x" * 1_000_000
            judge(job_with_mount_path(path), None, settings)
            mutate(job_with_mount_path(path + "/"), settings)
        gc.collect()
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after - before < 2_000_000, f"{(after - before) / 1e6:.1f} MB kept after 60 requests of 1 MB paths"
