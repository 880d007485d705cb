"""The size rule: a job larger than `admission.maxJobKib` is denied before any other rule reads it.

Every rule and the mutation do work in proportion to the job; the limit keeps that work (and the patch) within what
the webhook can answer well inside its timeout. The default, 1.5 MiB of JSON, is about the most etcd stores per
object by default: the API server could not store a larger Volcano Job anyway, with or without ringroute.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import orjson

from webhook.admission.jobview import as_mapping
from webhook.admission.policy.violation import Violation
from webhook.common.settings import Settings

JOB_SIZE = "job-size"

_ADVICE = (
    "run many pods from one task with replicas rather than one task per pod, and keep scripts and data out of the "
    "job (a ConfigMap or the image)"
)


def job_bytes(job: Any) -> int:
    """Length of the job as compact JSON (as the API server sends and stores it)."""
    try:
        return len(orjson.dumps(job))
    except TypeError:  # nested deeper than orjson writes (254 levels; requests may nest 1,024)
        return _json_length(job)


def _json_length(value: Any) -> int:
    """Compact JSON length of parsed JSON, without recursion."""
    total, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + max(len(item) - 1, 0) + sum(len(orjson.dumps(key)) + 1 for key in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 2 + max(len(item) - 1, 0)
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool) and item.bit_length() > 63:
            total += int(item.bit_length() * math.log10(2)) + 2  # beyond what orjson writes
        else:
            try:
                total += len(orjson.dumps(item))
            except TypeError:
                total += len(repr(item))
    return total


def limit_bytes(settings: Settings) -> int:
    """The largest job admitted, in bytes."""
    return settings.admission.max_job_kib * 1024


def _limit_text(settings: Settings) -> str:
    return f"{limit_bytes(settings):,} bytes (admission.maxJobKib: {settings.admission.max_job_kib})"


def check_job_size(job: Mapping[str, Any], settings: Settings, *, at_most: int | None = None) -> Violation | None:
    """The size violation of `job`, or None. `at_most` is a bound the caller already knows (the request body's
    length): when it is within the limit the job is not measured."""
    limit = limit_bytes(settings)
    if at_most is not None and at_most <= limit:
        return None
    size = job_bytes(job)
    if size <= limit:
        return None
    spec, metadata = as_mapping(job.get("spec")), as_mapping(job.get("metadata"))
    path = "metadata" if metadata and job_bytes(metadata) > job_bytes(spec) else "spec"
    return Violation(
        path,
        "TooLong",
        None,
        f"the job is {size:,} bytes of JSON; ringroute checks jobs of up to {_limit_text(settings)}: {_ADVICE}",
        JOB_SIZE,
    )


def too_large_after_mutation(estimate: int, npu_tasks: int, settings: Settings) -> Violation:
    """The violation of a job whose additions would take it over the limit (`estimate`: its size with the additions
    made so far, a lower bound)."""
    return Violation(
        "spec.tasks",
        "TooLong",
        None,
        f"with the volumes, mounts and env ringroute adds to the NPU containers of its {npu_tasks:,} NPU tasks the job "
        f"would be more than {estimate:,} bytes of JSON, over the {_limit_text(settings)} ringroute admits (the API "
        f"server could not store it either): {_ADVICE}",
        JOB_SIZE,
    )


__all__ = ["JOB_SIZE", "check_job_size", "job_bytes", "limit_bytes", "too_large_after_mutation"]
