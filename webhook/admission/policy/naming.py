"""Rules on names: the scheduler, the accelerator profile label, and the rank-table ConfigMap name."""

from __future__ import annotations

import re

from webhook.admission.jobview import JobView, TaskView, as_mapping, as_str
from webhook.admission.policy.violation import Violation, quoted
from webhook.common.names import RING_LABEL, VOLCANO_SCHEDULER
from webhook.common.settings import Settings

SCHEDULER_NAME = "scheduler-name"
ACCELERATOR_PROFILE = "accelerator-profile"
CONFIGMAP_NAME = "configmap-name"

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_SUBDOMAIN_MAX = 253
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
NAME_MAX = 63
"""Longest Kubernetes name label (RFC 1123 label, qualified-name part)."""


def is_dns_subdomain(name: str) -> bool:
    """RFC 1123 subdomain, the rule for ConfigMap names."""
    return len(name) <= _DNS_SUBDOMAIN_MAX and _DNS_SUBDOMAIN.match(name) is not None


def check_scheduler_name(job: JobView, _settings: Settings) -> list[Violation]:
    """Only Volcano schedules gangs and calls the ringroute extender."""
    found = []
    places = [("spec.schedulerName", job.spec.get("schedulerName"))]
    places += [(f"{t.field}.template.spec.schedulerName", t.pod_spec.get("schedulerName")) for t in job.tasks]
    for path, value in places:
        if value in (None, "", VOLCANO_SCHEDULER):
            continue
        found.append(
            Violation(
                path,
                "NotSupported",
                value,
                f'supported values: "{VOLCANO_SCHEDULER}" (or leave it empty); NPU jobs need Volcano\'s gang '
                "scheduling",
                SCHEDULER_NAME,
            )
        )
    return found


def check_accelerator_profile(job: JobView, settings: Settings) -> list[Violation]:
    """The ring-controller.cce label names a configured accelerator profile, the same on every template."""
    known = [p.label_value for p in settings.profiles]
    label_path = f"metadata.labels[{RING_LABEL}]"
    if job.profile is None:
        return [
            Violation(
                label_path,
                "NotSupported",
                job.labels.get(RING_LABEL),
                f"supported values: {quoted(known)}; use the value of your nodes' accelerator",
                ACCELERATOR_PROFILE,
            )
        ]
    found = []
    for task in job.tasks:
        value = as_mapping(as_mapping(task.template.get("metadata")).get("labels")).get(RING_LABEL)
        if value is not None and value != job.profile_label:
            found.append(
                Violation(
                    f"{task.field}.template.metadata.labels[{RING_LABEL}]",
                    "Invalid",
                    value,
                    f'must match the job label ("{job.profile_label}"); use one accelerator per job',
                    ACCELERATOR_PROFILE,
                )
            )
    return found


def check_configmap_name(job: JobView, _settings: Settings) -> list[Violation]:
    """`<prefix><job name>` must be a valid ConfigMap name, or the rank table has nowhere to go."""
    if job.profile is None or not job.name:
        return []
    name = job.profile.configmap_name(job.name)
    if is_dns_subdomain(name):
        return []
    room = _DNS_SUBDOMAIN_MAX - len(job.profile.configmap_prefix)
    return [
        Violation(
            "metadata.name",
            "Invalid",
            as_str(job.name),
            f'the rank-table ConfigMap "{name}" is not a valid name (lowercase letters, digits, "-" and ".", '
            f"at most {room} characters after the prefix); rename the job",
            CONFIGMAP_NAME,
        )
    ]


def is_dns_label(name: str) -> bool:
    """RFC 1123 label: the rule for task names."""
    return len(name) <= NAME_MAX and _DNS_LABEL.match(name) is not None


def is_qualified_name(name: str) -> bool:
    """Kubernetes' qualified name (`[prefix/]name`, name at most 63 characters): Volcano's rule for job and pod
    names."""
    prefix, slash, local = name.rpartition("/")
    if slash and (not prefix or not is_dns_subdomain(prefix)):
        return False
    return 0 < len(local) <= NAME_MAX and _QUALIFIED_NAME.match(local) is not None


def task_name(task: TaskView, index: int) -> str:
    """The task's name as Volcano's validating webhook sees it (its mutating webhook names unnamed tasks)."""
    return as_str(task.task.get("name")) or f"default{index}"


__all__ = [
    "is_dns_label",
    "is_qualified_name",
    "task_name",
    "ACCELERATOR_PROFILE",
    "CONFIGMAP_NAME",
    "SCHEDULER_NAME",
    "check_accelerator_profile",
    "check_configmap_name",
    "check_scheduler_name",
    "is_dns_subdomain",
]
