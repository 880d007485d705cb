"""Admission policy: pure checkers of a Volcano Job against the settings, run all at once, rendered once.

Each rule is a small function `(job: JobView, settings) -> list[Violation]` in its own module; `validate` runs
every one and `classify` splits the findings into denials and warnings by the rule's configured mode.

UPDATE ratchets: a violation the stored object already had (same rule, same path) is a warning, so a job admitted
before a rule existed (or before ringroute was installed) can still be scaled or have its finalizers removed;
only violations the update introduces are denied. UPDATE also runs the update rules (`UPDATE_CHECKERS`), which
compare the new object with the stored one (Volcano allows changing only replicas and minAvailable).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.admission.jobview import JobView, as_mapping, as_str, read_job
from webhook.admission.policy import (
    naming,
    network_topology,
    rank_table_mount,
    resources,
    route_plan,
    size,
    volcano,
    volcano_plugins,
    volcano_update,
    workdir,
)
from webhook.admission.policy.network_topology import NO_FACTS, ClusterFacts
from webhook.admission.policy.violation import Reason, Violation, render
from webhook.common.names import INJECTED_ANNOTATION
from webhook.common.settings import Settings

Checker = Callable[[JobView, Settings], list[Violation]]
UpdateChecker = Callable[[JobView, JobView, Settings], list[Violation]]
"""An update rule: `(new job, stored job, settings) -> violations`."""

CHECKERS: tuple[tuple[str, Checker], ...] = (
    (naming.ACCELERATOR_PROFILE, naming.check_accelerator_profile),
    (naming.SCHEDULER_NAME, naming.check_scheduler_name),
    (naming.CONFIGMAP_NAME, naming.check_configmap_name),
    (resources.REQUESTS_EQUAL_LIMITS, resources.check_requests_equal_limits),
    (resources.CARD_COUNT, resources.check_card_count),
    (route_plan.REQUEST, route_plan.check_route_plan_request),
    (route_plan.MIN_NODES, route_plan.check_min_nodes),
    (route_plan.FULL_NODE, route_plan.check_full_node),
    (route_plan.ONE_POD_PER_NODE, route_plan.check_one_pod_per_node),
    (route_plan.MA_RUN_METHOD, route_plan.check_ma_run_method),
    (route_plan.GANG, route_plan.check_gang),
    (workdir.LOCAL_WORKING_DIR, workdir.check_local_working_dir),
    (rank_table_mount.SUBPATH_MOUNT, rank_table_mount.check_subpath_mount),
    (rank_table_mount.MOUNT_PATH_TAKEN, rank_table_mount.check_mount_path_free),
    (volcano_plugins.RANK_TABLE_WRITER, volcano_plugins.check_rank_table_writer),
    (volcano_plugins.JOB_PLUGIN, volcano_plugins.check_job_plugins),
    (volcano.COUNTS, volcano.check_counts),
    (volcano.NAMES, volcano.check_names),
    (volcano.LIFECYCLE_POLICIES, volcano.check_lifecycle_policies),
    (volcano.TASK_DEPENDENCIES, volcano.check_task_dependencies),
    (volcano.VOLUMES, volcano.check_volumes),
    (volcano.QUEUE, volcano.check_queue),
    (volcano.TOPOLOGY, volcano.check_topology),
)
"""Every rule by name, in the order its findings are reported."""

CREATE_ONLY: frozenset[str] = frozenset(
    {
        volcano_plugins.JOB_PLUGIN,
        volcano.NAMES,
        volcano.LIFECYCLE_POLICIES,
        volcano.TASK_DEPENDENCIES,
        volcano.VOLUMES,
        volcano.QUEUE,
        volcano.TOPOLOGY,
    }
)
"""Rules Volcano applies on CREATE only: on UPDATE its update rule covers them (the fields are fixed), and some
legitimate updates would break them (the job controller fills in a PVC's volumeClaimName next to volumeClaim)."""

UPDATE_CHECKERS: tuple[tuple[str, UpdateChecker], ...] = ((volcano_update.UPDATE, volcano_update.check_update),)
"""Rules that compare an UPDATE with the stored object, reported after the others."""

RULES: tuple[str, ...] = (
    size.JOB_SIZE,
    *(name for name, _ in (*CHECKERS, *UPDATE_CHECKERS)),
    network_topology.NETWORK_TOPOLOGY_CAPACITY,
)
"""Every rule by name: the size rule, which runs first and alone, then CHECKERS and UPDATE_CHECKERS, then the rule
that reads the cluster's HyperNodes (on CREATE, when `ringroute serve` knows them)."""


def validate(
    job: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    settings: Settings,
    *,
    size_at_most: int | None = None,
    facts: ClusterFacts = NO_FACTS,
) -> list[Violation]:
    """All violations of `job` (the new object on UPDATE; `old` is the stored one, or None on CREATE).

    A job over `admission.maxJobKib` gets the size violation alone: no other rule reads it (`size_at_most`, a bound
    on its size the caller knows, spares measuring a small one). A job that is being deleted is not checked: its
    remaining updates only remove finalizers. `facts` (the cluster's HyperNodes) let a CREATE be checked against
    what the cluster can hold; on UPDATE spec.networkTopology cannot change, so nothing is checked against them.
    """
    if old is not None and as_mapping(as_mapping(job).get("metadata")).get("deletionTimestamp"):
        return []
    too_large = size.check_job_size(as_mapping(job), settings, at_most=size_at_most)
    if too_large is not None:
        return [too_large]
    view = read_job(job, settings)
    found: list[Violation] = []
    for name, checker in CHECKERS:
        if old is None or name not in CREATE_ONLY:
            found.extend(checker(view, settings))
    if old is not None:
        stored = read_job(old, settings)
        for _, update_checker in UPDATE_CHECKERS:
            found.extend(update_checker(view, stored, settings))
    else:
        record = (as_str(view.annotations.get(INJECTED_ANNOTATION)) or "").split(",")
        injected = network_topology.INJECTED_NETWORK_TOPOLOGY in record
        found.extend(network_topology.check_capacity(view, facts, injected=injected))
    return found


def rule_mode(rule: str, settings: Settings) -> str:
    """`reject` or `warn` for a rule (`belowMinNodes: skip` makes the minimum-nodes rule a warning)."""
    if rule == size.JOB_SIZE:
        return "reject"  # a warning would admit the job unchecked: the limit is raised with admission.maxJobKib
    if rule == route_plan.MIN_NODES and settings.policy.below_min_nodes == "skip":
        return "warn"
    return settings.policy.mode(rule)


RATCHET_NOTE = " (already present before this update: allowed until fixed)"
"""Appended to the warning of a violation the stored object already had."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """Violations split by enforcement mode."""

    denials: tuple[Violation, ...]
    warnings: tuple[Violation, ...]
    ratcheted: tuple[Violation, ...] = ()
    """Violations of reject-mode rules the stored object already had (UPDATE); reported as warnings."""

    @property
    def allowed(self) -> bool:
        """No rule in reject mode was violated."""
        return not self.denials

    @property
    def http_code(self) -> int:
        """403 when every denial is Forbidden, else 422 (as the API server answers field errors)."""
        return 403 if self.denials and all(v.reason == "Forbidden" for v in self.denials) else 422

    def message(self) -> str:
        """The denials, rendered once."""
        return render(self.denials)

    def warning_messages(self) -> list[str]:
        """The `warnings` of the AdmissionResponse: warn-mode findings, then ratcheted ones with a note."""
        return [v.render() for v in self.warnings] + [v.render() + RATCHET_NOTE for v in self.ratcheted]


def violation_key(violation: Violation) -> tuple[str, str]:
    """What makes two findings "the same" across an UPDATE: the rule and the field path."""
    return violation.rule, violation.path


def classify(
    violations: Sequence[Violation], settings: Settings, *, existing: Collection[tuple[str, str]] = ()
) -> Verdict:
    """Split violations into denials (reject mode), warnings (warn mode) and ratcheted ones (reject mode, but
    `existing` holds their `violation_key`: the stored object already had them)."""
    denials: list[Violation] = []
    warnings: list[Violation] = []
    ratcheted: list[Violation] = []
    for violation in violations:
        if rule_mode(violation.rule, settings) != "reject":
            warnings.append(violation)
        elif violation_key(violation) in existing:
            ratcheted.append(violation)
        else:
            denials.append(violation)
    return Verdict(tuple(denials), tuple(warnings), tuple(ratcheted))


def existing_violations(old: Mapping[str, Any] | None, settings: Settings) -> frozenset[tuple[str, str]]:
    """The `violation_key`s of the stored object on UPDATE (empty on CREATE)."""
    if old is None:
        return frozenset()
    return frozenset(violation_key(v) for v in validate(old, None, settings))


def judge(job: Mapping[str, Any], old: Mapping[str, Any] | None, settings: Settings) -> Verdict:
    """validate + classify, ratcheting against `old` on UPDATE."""
    return classify(validate(job, old, settings), settings, existing=existing_violations(old, settings))


__all__ = [
    "CHECKERS",
    "CREATE_ONLY",
    "RATCHET_NOTE",
    "RULES",
    "UPDATE_CHECKERS",
    "Checker",
    "JobView",
    "Reason",
    "UpdateChecker",
    "Verdict",
    "Violation",
    "classify",
    "existing_violations",
    "judge",
    "read_job",
    "render",
    "rule_mode",
    "validate",
    "violation_key",
]
