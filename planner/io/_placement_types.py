"""What reading a job's pods gives: the device-plugin annotation's shape, the problems found, the readout."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from planner._model import IgnoredPod, Placement


class DeviceInfo(TypedDict):
    """One device of the device-plugin annotation."""

    device_id: str
    device_ip: str
    super_device_id: NotRequired[str]


class DeviceAnnotation(TypedDict):
    """The device-plugin pod annotation (`...-configuration`)."""

    pod_name: str
    server_id: str
    devices: list[DeviceInfo]
    host_ip: NotRequired[str]
    super_pod_id: NotRequired[str]


@dataclass(frozen=True, slots=True)
class PlacementProblem:
    """Why the pods do not (yet) make a complete placement: which pod, which field, and what to do."""

    kind: str
    """Short machine-readable name: missing-pods, unbound, missing-annotation, device-failed, ..."""
    pod: str | None
    """`namespace/name` of the pod, or None for a problem of the whole job."""
    field: str
    """Field path in the pod (or job) the problem is about."""
    detail: str
    """What is wrong and how to fix it."""

    def render(self) -> str:
        """One line: `pod ns/name: field: detail`."""
        subject = f"pod {self.pod}" if self.pod else "job"
        return f"{subject}: {self.field}: {self.detail}"


@dataclass(frozen=True, slots=True)
class PlacementReadout:
    """The outcome of reading a job's pods: a placement when complete, and every problem found."""

    placement: Placement | None
    problems: tuple[PlacementProblem, ...]
    ignored_pods: tuple[str, ...]
    """Pods left out on purpose (another job, job UID or job version, terminated or being deleted)."""
    ignored: tuple[IgnoredPod, ...] = ()
    """The same pods with the reason each was left out."""

    @property
    def ready(self) -> bool:
        """True when the placement is complete and has no problem."""
        return self.placement is not None and not self.problems


def render_placement_problems(problems: Sequence[PlacementProblem]) -> str:
    """One line: the first problem, and how many more there are."""
    if not problems:
        return "no placement"
    more = len(problems) - 1
    return problems[0].render() + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")


__all__ = ["DeviceAnnotation", "DeviceInfo", "PlacementProblem", "PlacementReadout", "render_placement_problems"]
