"""Volcano's rule for Job updates: nothing in `spec` changes but `minAvailable`, `priorityClassName` and each
task's `replicas` and `minAvailable`, and no task is added or removed.

From `validateJobUpdate` (`pkg/webhooks/admission/jobs/validate/admit_job.go`), the same from v1.7.0 to master
(v1.7's message names only minAvailable and replicas, but its code already ignores priorityClassName and the
tasks' minAvailable). Volcano compares the decoded Go structs with `equality.Semantic.DeepEqual`: a missing field
equals its zero value and an empty list or map, and quantities compare by amount ("1" equals "1000m"). This
comparison treats every empty value as missing, so it may let through a change Volcano then refuses (say, setting
a pointer field to 0), but it never refuses an update Volcano accepts. A job-level volume's `volumeClaimName` is
ignored when the volume has a `volumeClaim` (the job controller fills it in).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.admission.jobview import JobView, as_list, as_mapping
from webhook.admission.policy.violation import Violation, render_value
from webhook.admission.quantity import parse_quantity
from webhook.common.settings import Settings

UPDATE = "volcano-update"

_ALLOWED = "minAvailable, priorityClassName and the tasks' replicas and minAvailable"
_FIX = "change only those, or delete the job and create it again"
_QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "allocatable"})
_QUANTITY_VALUES = frozenset({"sizeLimit", "storage"})
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCALAR_SHOWN = 80


def _normal(value: Any, key: str | None = None) -> Any:
    """`value` with every empty member dropped and quantities as amounts (None when all of it is empty)."""
    if isinstance(value, Mapping):
        quantities = key in _QUANTITY_MAPS
        out = {}
        for k, v in value.items():
            item = _quantity(v) if quantities else _normal(v, k)
            if item is not None:
                out[k] = item
        return out or None
    if isinstance(value, list):
        items = [_normal(v) for v in value]
        return items or None
    if key in _QUANTITY_VALUES:
        return _quantity(value)
    if value is None or value is False or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool) and value == 0:
        return None
    return value


def _quantity(value: Any) -> Any:
    amount = parse_quantity(value)
    if amount is None:
        return _normal(value)
    return ("quantity", amount) if amount else None


def _comparable_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec without what an update may change."""
    comparable = {k: v for k, v in spec.items() if k not in ("minAvailable", "priorityClassName")}
    comparable["tasks"] = [
        {k: v for k, v in as_mapping(task).items() if k not in ("replicas", "minAvailable")}
        for task in as_list(spec.get("tasks"))
    ]
    comparable["volumes"] = [_comparable_volume(as_mapping(volume)) for volume in as_list(spec.get("volumes"))]
    return comparable


def _comparable_volume(volume: Mapping[str, Any]) -> dict[str, Any]:
    if volume.get("volumeClaim") is None:
        return dict(volume)
    return {k: v for k, v in volume.items() if k != "volumeClaimName"}


def _step(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if _IDENTIFIER.match(key) else f"{path}[{key}]"


def first_difference(old: Any, new: Any, path: str) -> tuple[str, Any, Any] | None:
    """(field path, old, new) of the first place two normalised values differ, in the new object's order."""
    if old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            found = first_difference(old.get(key), new.get(key), _step(path, key))
            if found is not None:
                return found
        return None
    if isinstance(old, list) and isinstance(new, list):
        for index in range(max(len(old), len(new))):
            a = old[index] if index < len(old) else None
            b = new[index] if index < len(new) else None
            found = first_difference(a, b, _step(path, index))
            if found is not None:
                return found
        return None
    return path, old, new


def _shown(value: Any) -> str:
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "quantity":
        value = float(value[1])
    if value is None:
        return "unset"
    text = render_value(value)
    return text if len(text) <= _SCALAR_SHOWN and not isinstance(value, dict | list) else "a different value"


def check_update(job: JobView, old: JobView, settings: Settings) -> list[Violation]:
    """An UPDATE changes nothing Volcano keeps fixed: the first changed field is named, with what may change."""
    try:
        return _check_update(job, old, settings)
    except RecursionError:  # the comparison recurses once per level; requests may nest 1,024 levels
        return [
            Violation(
                "spec",
                "Forbidden",
                None,
                "values nested hundreds of levels deep could not be compared with the stored job (no Volcano Job "
                f"field nests like that); {_FIX}",
                UPDATE,
            )
        ]


def _check_update(job: JobView, old: JobView, _settings: Settings) -> list[Violation]:
    old_tasks, new_tasks = as_list(old.spec.get("tasks")), as_list(job.spec.get("tasks"))
    if len(old_tasks) != len(new_tasks):
        return [
            Violation(
                "spec.tasks",
                "Forbidden",
                None,
                f"Volcano refuses job updates that add or remove tasks ({len(old_tasks)} before, {len(new_tasks)} "
                f"now); delete the job and create it again",
                UPDATE,
            )
        ]
    before_spec, after_spec = _comparable_spec(old.spec), _comparable_spec(job.spec)
    if before_spec == after_spec:
        return []  # the common case (a scale, a metadata change), decided without normalising the templates
    found = first_difference(_normal(before_spec) or {}, _normal(after_spec) or {}, "spec")
    if found is None:
        return []
    path, before, after = found
    hint = ""
    if after is None:
        # The usual cause: a re-applied file without the defaults Volcano's mutating webhook filled in on create.
        hint = f" (a re-applied file must carry the stored value: `kubectl get vcjob {job.name or 'NAME'} -o yaml`)"
    return [
        Violation(
            path,
            "Forbidden",
            None,
            f"Volcano refuses job updates that change anything in spec but {_ALLOWED} (was {_shown(before)}, now "
            f"{_shown(after)}{hint}); {_FIX}",
            UPDATE,
        )
    ]


__all__ = ["UPDATE", "check_update", "first_difference"]
