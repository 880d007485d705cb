"""Rules on how NPU containers mount the rank-table ConfigMap."""

from __future__ import annotations

from webhook.admission.jobview import JobView, as_mapping, as_str, normal_path
from webhook.admission.policy.violation import Violation
from webhook.common.settings import Settings

SUBPATH_MOUNT = "rank-table-subpath"
MOUNT_PATH_TAKEN = "rank-table-mount-path"


def check_subpath_mount(job: JobView, _settings: Settings) -> list[Violation]:
    """kubelet never refreshes subPath mounts, so a subPath-mounted rank table stays "initializing" forever."""
    name = job.configmap_name
    if name is None:
        return []
    found = []
    for task in job.tasks:
        for container in (*task.containers, *task.init_containers):
            for k, mount in enumerate(container.mounts):
                if not (mount.get("subPath") or mount.get("subPathExpr")):
                    continue  # the common case, decided without looking up the volume
                volume = task.volume(mount.get("name"))
                if volume is None or as_mapping(volume.get("configMap")).get("name") != name:
                    continue
                for key in ("subPath", "subPathExpr"):
                    if mount.get(key):
                        found.append(
                            Violation(
                                f"{container.field}.volumeMounts[{k}].{key}",
                                "Forbidden",
                                mount.get(key),
                                f'ConfigMap "{name}" is mounted with {key}, and kubelet never updates subPath '
                                'mounts, so the job would wait forever for "completed"; mount the volume as a '
                                "directory (no subPath)",
                                SUBPATH_MOUNT,
                            )
                        )
    return found


def check_mount_path_free(job: JobView, _settings: Settings) -> list[Violation]:
    """The profile's mount path holds the rank-table ConfigMap, not another volume."""
    profile = job.profile
    name = job.configmap_name
    if profile is None or name is None:
        return []
    target = normal_path(profile.mount_path)
    found = []
    for task in job.npu_tasks:
        for container in task.npu_containers:
            for k, mount in enumerate(container.mounts):
                mount_path = as_str(mount.get("mountPath"))
                if not mount_path or normal_path(mount_path) != target:
                    continue
                volume = task.volume(mount.get("name"))
                if volume is not None and as_mapping(volume.get("configMap")).get("name") == name:
                    continue
                found.append(
                    Violation(
                        f"{container.field}.volumeMounts[{k}].mountPath",
                        "Forbidden",
                        mount_path,
                        f'{profile.mount_path} is where ConfigMap "{name}" (the rank table) is mounted; '
                        "mount volume " + f'"{mount.get("name")}" elsewhere',
                        MOUNT_PATH_TAKEN,
                    )
                )
    return found


__all__ = ["MOUNT_PATH_TAKEN", "SUBPATH_MOUNT", "check_mount_path_free", "check_subpath_mount"]
