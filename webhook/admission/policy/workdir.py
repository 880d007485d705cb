"""The working directory of an NPU container must be local, not on a shared filesystem.

Training scripts write rank-local files (kernel meta, logs, checkpoints staging) into the working directory;
on a shared filesystem every node writes the same paths.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.admission.jobview import (
    ContainerView,
    JobView,
    TaskView,
    as_list,
    as_mapping,
    as_str,
    normal_path,
    unwrap_launcher,
)
from webhook.admission.policy.violation import Violation
from webhook.common.settings import Settings

LOCAL_WORKING_DIR = "working-dir-local"

SHARED_VOLUME_KINDS = ("nfs", "cephfs", "glusterfs", "csi", "persistentVolumeClaim")
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh"})
_CD = re.compile(r"^\s*cd\s+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(&&|;)")


@dataclass(frozen=True, slots=True)
class WorkingDir:
    """A container's working directory and the field it came from."""

    directory: str
    field: str


def _shell_script(container: ContainerView) -> tuple[str, str] | None:
    """(script, field) of a `sh -c SCRIPT` / `bash -c SCRIPT` container, split over command and args."""
    command = as_list(container.container.get("command"))
    user_command = unwrap_launcher(command)
    skipped = len(command) - len(user_command)
    argv = [as_str(a) for a in user_command]
    in_command = len(argv)
    argv += [as_str(a) for a in as_list(container.container.get("args"))]
    if len(argv) < 3 or argv[0] is None or posixpath.basename(argv[0]) not in _SHELLS:
        return None
    # `sh -c`, `bash -lc`, `bash -ec` ...: the first argument ending in c among leading options
    for i in range(1, len(argv) - 1):
        option = argv[i]
        if option is None or not option.startswith("-"):
            return None
        if "c" in option[1:]:
            script, at = argv[i + 1], i + 1
            if script is None:
                return None
            where = f"command[{at + skipped}]" if at < in_command else f"args[{at - in_command}]"
            return script, f"{container.field}.{where}"
    return None


def working_dir(container: ContainerView) -> WorkingDir | None:
    """Where the container's process runs: a leading `cd DIR &&` in a shell command wins over `workingDir`."""
    base = as_str(container.container.get("workingDir"))
    shell = _shell_script(container)
    if shell is not None:
        match = _CD.match(shell[0])
        if match:
            target = match.group(1)
            if target[0] in "\"'":
                target = target[1:-1]
            if not target.startswith("/"):
                target = posixpath.join(base or "/", target)
            return WorkingDir(posixpath.normpath(target), shell[1])
    if base:
        return WorkingDir(posixpath.normpath(base), f"{container.field}.workingDir")
    return None


def _shared_kind(volume: Mapping[str, Any], subdirectory: str, settings: Settings) -> str | None:
    for kind in SHARED_VOLUME_KINDS:
        if kind in volume:
            return kind
    host_path = as_str(as_mapping(volume.get("hostPath")).get("path"))
    if host_path:
        on_host = posixpath.normpath(posixpath.join(host_path, subdirectory)) if subdirectory else host_path
        for configured in settings.policy.shared_host_path_prefixes:
            prefix = configured.rstrip("/")
            if on_host == prefix or on_host.startswith(prefix + "/"):
                return f"hostPath {host_path}"
    return None


def _covering_mount(container: ContainerView, directory: str) -> tuple[Mapping[str, Any], str] | None:
    """The mount that holds `directory` (longest mountPath wins) and the directory's path inside it."""
    best: tuple[Mapping[str, Any], str] | None = None
    best_len = -1
    for mount in container.mounts:
        mount_path = as_str(mount.get("mountPath"))
        if not mount_path:
            continue
        root = normal_path(mount_path)
        inside = directory == root or directory.startswith(root.rstrip("/") + "/")
        if inside and len(root) > best_len:
            best_len = len(root)
            best = (mount, directory[len(root) :].lstrip("/"))
    return best


def _check_container(
    container: ContainerView, task: TaskView, settings: Settings, route_planned: bool
) -> Violation | None:
    found = working_dir(container)
    if found is None:
        return None
    covering = _covering_mount(container, found.directory)
    if covering is None:
        return None
    mount, inside = covering
    volume = task.volume(mount.get("name"))
    if volume is None:
        return None
    sub_path = as_str(mount.get("subPath")) or ""
    kind = _shared_kind(volume, posixpath.join(sub_path, inside) if sub_path else inside, settings)
    if kind is None:
        return None
    why = "route planning needs" if route_planned else "NPU training needs"
    return Violation(
        found.field,
        "Forbidden",
        found.directory,
        f'"{found.directory}" is on volume "{volume.get("name")}" ({kind}); {why} a local working directory '
        "(copy the code into the image or an emptyDir and cd there)",
        LOCAL_WORKING_DIR,
    )


def check_local_working_dir(job: JobView, settings: Settings) -> list[Violation]:
    """NPU containers do not run from a directory on nfs/cephfs/glusterfs/csi/PVC or a shared hostPath."""
    if job.profile is None:
        return []
    route_planned = job.route_planned
    found = []
    for task in job.npu_tasks:
        for container in task.npu_containers:
            violation = _check_container(container, task, settings, route_planned)
            if violation is not None:
                found.append(violation)
    return found


__all__ = ["LOCAL_WORKING_DIR", "SHARED_VOLUME_KINDS", "WorkingDir", "check_local_working_dir", "working_dir"]
