"""Volcano's job plugins, and who writes the rank-table ConfigMap: ringroute or the vendor fork's configmap1980
plugin (`validateJobCreate`'s plugin checks of vc-webhook-manager, v1.7.0 through master)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.admission.jobview import JobView, as_list, as_mapping, as_str
from webhook.admission.policy.naming import task_name
from webhook.admission.policy.violation import Violation, quoted
from webhook.admission.policy.volcano_release import (
    JOB_PLUGINS,
    MPI_WORKER_CHECK_UNTIL,
    VENDOR_CONFIGMAP_PLUGIN,
    accepts,
    configured_release,
    not_accepted,
)
from webhook.common.names import RANK_TABLE_WRITER_ANNOTATION, RINGROUTE_WRITER, VOLCANO_PLUGIN_WRITER
from webhook.common.settings import Settings

JOB_PLUGIN = "volcano-job-plugins"
RANK_TABLE_WRITER = "rank-table-writer"
_MPI = "mpi"


def plugins_of(job: JobView) -> Mapping[str, Any]:
    """`spec.plugins` (empty when absent or not an object)."""
    return as_mapping(job.spec.get("plugins"))


def rank_table_writer(job: JobView, settings: Settings) -> str:
    """Who writes `configmap1980-<job>`, so there is only ever one writer.

    The vendor's configmap1980 plugin writes it only where the fork runs (`configmapPlugin: installed`), the job
    names the plugin, and the job is not route-planned; every other job gets its table from ringroute (the
    mutation removes the plugin from route-planned jobs and, on open-source Volcano, from every job).
    """
    if (
        settings.volcano.configmap_plugin == "installed"
        and VENDOR_CONFIGMAP_PLUGIN in plugins_of(job)
        and not job.route_planned
    ):
        return VOLCANO_PLUGIN_WRITER
    return RINGROUTE_WRITER


def check_job_plugins(job: JobView, settings: Settings) -> list[Violation]:
    """Every plugin in `spec.plugins` is one the release has ("unable to find job plugin"); an `mpi` job names
    its master (and, before 1.15, its worker) task."""
    plugins = plugins_of(job)
    found: list[Violation] = []
    for name in plugins:
        if name == VENDOR_CONFIGMAP_PLUGIN:
            if settings.volcano.configmap_plugin != "installed":
                found.append(
                    Violation(
                        f"spec.plugins[{name}]",
                        "NotSupported",
                        name,
                        f"open-source Volcano has no job plugin {quoted([name])} (the cloud vendor's fork has; "
                        "settings say it is not installed) and refuses the job; ringroute's mutating webhook removes "
                        f"it and writes {job.configmap_name or 'the rank-table ConfigMap'} itself: remove it from "
                        "spec.plugins, or ask the cluster admin why the mutating webhook did not run",
                        JOB_PLUGIN,
                    )
                )
            continue
        since = JOB_PLUGINS.get(name)
        if since is not None and accepts(since, settings):
            continue
        found.append(
            Violation(
                f"spec.plugins[{name}]",
                "NotSupported",
                name,
                not_accepted("job plugin", name, JOB_PLUGINS, settings, ' ("unable to find job plugin")')
                + "; remove it from spec.plugins",
                JOB_PLUGIN,
            )
        )
    if _MPI in plugins:
        found += _check_mpi_tasks(job, as_list(plugins.get(_MPI)), settings)
    return found


def _mpi_roles(arguments: Sequence[Any]) -> dict[str, str]:
    """The master and worker task names from the mpi plugin's arguments, parsed as Go's flag package does."""
    roles = {"master": "master", "worker": "worker"}
    items = [a for a in arguments if isinstance(a, str)]
    i = 0
    while i < len(items):
        arg = items[i]
        if arg == "--" or not arg.startswith("-") or arg == "-":
            break  # the first non-flag argument ends parsing
        name, equals, value = arg.lstrip("-").partition("=")
        if name not in ("master", "worker", "port"):
            break  # an unknown flag is an error: the flags before it still count
        if not equals:
            if i + 1 >= len(items):
                break
            i += 1
            value = items[i]
        if name in roles:
            roles[name] = value
        i += 1
    return roles


def _check_mpi_tasks(job: JobView, arguments: Sequence[Any], settings: Settings) -> list[Violation]:
    names = {task_name(t, i) for i, t in enumerate(job.tasks)}
    roles = _mpi_roles(arguments)
    release = configured_release(settings)
    checked = ["master"] if release is not None and release >= MPI_WORKER_CHECK_UNTIL else ["master", "worker"]
    return [
        Violation(
            f"spec.plugins[{_MPI}]",
            "Invalid",
            list(arguments),
            f"the mpi plugin's {role} task {quoted([roles[role]])} is not a task of this job and Volcano refuses the "
            f'job ("the specified mpi {role} task was not found"); name a task {quoted([roles[role]])}, or pass '
            f"--{role}=<task name>",
            JOB_PLUGIN,
        )
        for role in checked
        if roles[role] not in names
    ]


def check_rank_table_writer(job: JobView, settings: Settings) -> list[Violation]:
    """Exactly one writer of `configmap1980-<job>`: the `ringroute.io/rank-table-writer` annotation agrees with
    the plugins the job names (the mutation sets both; this catches a job it did not see)."""
    if job.profile is None or not job.name:
        return []
    recorded = as_str(job.annotations.get(RANK_TABLE_WRITER_ANNOTATION)) or RINGROUTE_WRITER
    path = f"metadata.annotations[{RANK_TABLE_WRITER_ANNOTATION}]"
    configmap = job.configmap_name
    named = VENDOR_CONFIGMAP_PLUGIN in plugins_of(job)
    if settings.volcano.configmap_plugin != "installed" or not named:
        if recorded == VOLCANO_PLUGIN_WRITER:
            return [
                Violation(
                    path,
                    "Invalid",
                    recorded,
                    f"no configmap1980 job plugin runs for this job, so nothing would write {configmap}; "
                    f'remove the annotation (ringroute then writes it) or set it to "{RINGROUTE_WRITER}"',
                    RANK_TABLE_WRITER,
                )
            ]
        return []
    if job.route_planned:
        return [
            Violation(
                f"spec.plugins[{VENDOR_CONFIGMAP_PLUGIN}]",
                "Forbidden",
                None,
                f"a route-planned job gets its rank table from ringroute, and the configmap1980 plugin would write "
                f"{configmap} too; remove the plugin from spec.plugins (ringroute's mutating webhook does)",
                RANK_TABLE_WRITER,
            )
        ]
    if recorded != VOLCANO_PLUGIN_WRITER:
        return [
            Violation(
                path,
                "Invalid",
                recorded,
                f"the job names the configmap1980 plugin, which writes {configmap}, so ringroute must not: set the "
                f'annotation to "{VOLCANO_PLUGIN_WRITER}" (ringroute\'s mutating webhook does), or remove the plugin',
                RANK_TABLE_WRITER,
            )
        ]
    return []


__all__ = [
    "JOB_PLUGIN",
    "RANK_TABLE_WRITER",
    "check_job_plugins",
    "check_rank_table_writer",
    "plugins_of",
    "rank_table_writer",
]
