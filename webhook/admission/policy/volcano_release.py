"""What each Volcano release accepts in a Job, read from volcano-sh/volcano v1.7.0 through master.

Sources: `pkg/controllers/job/plugins/factory.go` (job plugins), `pkg/webhooks/admission/jobs/validate/util.go`
(lifecycle-policy events and actions), and from v1.14 the `job-validation-policy` ValidatingAdmissionPolicy
(`installer/helm/chart/volcano/policy/jobs-validating.yaml`), installed by the chart only with
`custom.vap_enable: true` (false by default from v1.14.0 through v1.15.1; no template tests the Kubernetes version,
whatever the values file's comment says) or by `installer/volcano-development-vap.yaml`.

`settings.volcano.version` names the release; "auto" means any release ringroute supports, so only what every
release from 1.7 accepts is accepted.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from webhook.admission.policy.violation import quoted
from webhook.common.settings import Settings

Release = tuple[int, int, int]
"""(major, minor, patch)."""

OLDEST: Release = (1, 7, 0)
"""The oldest release ringroute supports."""

JOB_PLUGINS: Mapping[str, Release] = {
    "ssh": OLDEST,
    "env": OLDEST,
    "svc": OLDEST,
    "tensorflow": OLDEST,
    "mpi": OLDEST,
    "pytorch": OLDEST,
    "hcclrank": (1, 12, 3),
    "ray": (1, 13, 0),
}
"""Built-in job plugins and the first release that has each (`plugins.GetPluginBuilder`)."""

VENDOR_CONFIGMAP_PLUGIN = "configmap1980"
"""The cloud vendor's fork's job plugin that writes `configmap1980-<job>`; open-source Volcano refuses it."""

POLICY_EVENTS: Mapping[str, Release] = {
    "*": OLDEST,
    "PodFailed": OLDEST,
    "PodEvicted": OLDEST,
    "Unknown": OLDEST,
    "TaskCompleted": OLDEST,
    "TaskFailed": OLDEST,
    "JobUpdated": OLDEST,
    "PodPending": (1, 11, 0),
}
"""Lifecycle-policy events a job may name, with the first release that accepts each."""

POLICY_ACTIONS: Mapping[str, Release] = {
    "AbortJob": OLDEST,
    "RestartJob": OLDEST,
    "RestartTask": OLDEST,
    "TerminateJob": OLDEST,
    "CompleteJob": OLDEST,
    "ResumeJob": OLDEST,
    "RestartPod": (1, 11, 0),
}
"""Lifecycle-policy actions a job may name, with the first release that accepts each. `RestartPartition` is
missing on purpose: the webhook of 1.14+ takes it, but the ValidatingAdmissionPolicy of the same releases does not."""

HIERARCHICAL_QUEUES: Release = (1, 11, 0)
"""From this release Volcano refuses jobs submitted to the `root` queue."""

VALIDATING_ADMISSION_POLICY: Release = (1, 14, 0)
"""From this release the `job-validation-policy` ValidatingAdmissionPolicy checks jobs too (CREATE and UPDATE)."""

MPI_WORKER_CHECK_UNTIL: Release = (1, 15, 0)
"""Releases before this one also refuse an `mpi` job whose worker task is missing."""

_STRICT_PARTITION_MIN_AVAILABLE: tuple[tuple[Release, Release], ...] = (
    ((1, 14, 0), (1, 14, 3)),
    ((1, 15, 0), (1, 15, 1)),
)
"""Release ranges [from, to) whose partitionPolicy check compares a task's minAvailable with
minPartitions x partitionSize even when minPartitions is 0 (later patches compare only when it is set)."""

_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def configured_release(settings: Settings) -> Release | None:
    """The release `settings.volcano.version` names (patch 0 when it names only major.minor); None for auto."""
    match = _VERSION.match(settings.volcano.version.strip())
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def release_text(release: Release) -> str:
    """`1.12.3`, or `1.12` for a .0 patch."""
    major, minor, patch = release
    return f"{major}.{minor}.{patch}" if patch else f"{major}.{minor}"


def accepts(since: Release, settings: Settings) -> bool:
    """Whether the configured release (every supported one, for auto) has something that came in `since`."""
    release = configured_release(settings)
    return since <= (release or OLDEST)


def known(table: Mapping[str, Release], settings: Settings) -> list[str]:
    """The names of `table` the configured release accepts, sorted."""
    return sorted(name for name, since in table.items() if accepts(since, settings))


def strict_partition_min_available(settings: Settings) -> bool:
    """Whether the release checks a partitioned task's minAvailable even when minPartitions is 0 (auto: yes)."""
    release = configured_release(settings)
    if release is None:
        return True
    return any(low <= release < high for low, high in _STRICT_PARTITION_MIN_AVAILABLE)


def volcano_named(settings: Settings) -> str:
    """The release a message talks about: `Volcano 1.10`, or any supported release for auto."""
    release = configured_release(settings)
    if release is None:
        return f"Volcano (any release from {release_text(OLDEST)}, volcano.version: auto)"
    return f"Volcano {settings.volcano.version.strip().lstrip('v')}"


def not_accepted(kind: str, name: str, table: Mapping[str, Release], settings: Settings, extra: str = "") -> str:
    """Why a named plugin/event/action is refused, naming the release and the values it takes."""
    since = table.get(name)
    supported = f"supported values: {quoted(known(table, settings))}"
    quoted_name = quoted([name])
    if since is None:
        return f"{volcano_named(settings)} has no {kind} {quoted_name}{extra}; {supported}"
    if configured_release(settings) is None:
        return (
            f"Volcano before {release_text(since)} has no {kind} {quoted_name} and volcano.version is auto (any "
            f"release from {release_text(OLDEST)}); {supported}, or have the cluster admin set volcano.version to "
            "the cluster's release"
        )
    return (
        f"{volcano_named(settings)} has no {kind} {quoted_name} (it came in {release_text(since)}); {supported}, or "
        "have the cluster admin correct volcano.version if the cluster runs a newer Volcano"
    )


__all__ = [
    "not_accepted",
    "volcano_named",
    "HIERARCHICAL_QUEUES",
    "JOB_PLUGINS",
    "MPI_WORKER_CHECK_UNTIL",
    "OLDEST",
    "POLICY_ACTIONS",
    "POLICY_EVENTS",
    "VALIDATING_ADMISSION_POLICY",
    "VENDOR_CONFIGMAP_PLUGIN",
    "Release",
    "accepts",
    "configured_release",
    "known",
    "release_text",
    "strict_partition_min_available",
]
