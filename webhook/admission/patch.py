"""JSON Patch building blocks for admission's mutation: RFC 6902 ops as plain dicts, a builder that records what
each op injects and how many bytes it adds, `copy` ops for tasks that repeat one pod template, and the part of an
op that restores what a stored object already has (for UPDATE). Pure.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from webhook.admission.jobview import TaskView, escape_pointer
from webhook.admission.policy.size import job_bytes
from webhook.admission.review import JsonPatchOperation

PatchOp = JsonPatchOperation
"""One RFC 6902 operation, a plain dict `{"op": "add", "path": ..., "value": ...}` (or `{"op": "remove", "path"}`)."""


MISSING: Any = object()


COPY_BUDGET_BYTES = 3 * 2**20
"""Most bytes the `copy` ops of one patch may copy: kube-apiserver refuses a patch that copies more
(`JSONPatchMaxCopyBytes`, 3 MiB). Past it, twin tasks get their own `add` ops."""


_OP_OVERHEAD = 4
"""Bytes an add adds besides its value and member name (quotes, colon, comma), for the size estimate."""


def add(path: str, value: Any) -> PatchOp:
    """An RFC 6902 `add` operation."""
    return {"op": "add", "path": path, "value": value}


def remove(path: str) -> PatchOp:
    """An RFC 6902 `remove` operation."""
    return {"op": "remove", "path": path}


def pointer(*tokens: str | int) -> str:
    """A JSON Pointer from raw tokens, escaping `~` and `/` (RFC 6901)."""
    return "".join("/" + escape_pointer(str(t)) for t in tokens)


def encode_patch(ops: Sequence[PatchOp]) -> str:
    """The base64 JSON Patch of an AdmissionResponse."""
    return base64.b64encode(orjson.dumps(ops)).decode("ascii")


@dataclass
class PatchBuilder:
    """Ops plus what they inject, collected while walking the job."""

    ops: list[PatchOp] = field(default_factory=list)
    injected: set[str] = field(default_factory=set)
    growth: int = 0
    """Bytes the ops add to the job (estimated from their values)."""
    copied: int = 0
    """Bytes the `copy` ops copy."""
    stopped: bool = False
    """The walk stopped: the job grew over the size limit."""

    def add(self, path: str, value: Any, what: str) -> None:
        """One `add`, recorded under `what`."""
        self.ops.append({"op": "add", "path": path, "value": value})
        self.injected.add(what)

    def extend_list(self, path: str, present: Any, items: list[Any], what: str | None) -> None:
        """Append items to the list at `path` (now `present`): `-` adds, or one add of the list when absent."""
        if not items:
            return
        if isinstance(present, list):
            end = path + "/-"
            self.ops += [{"op": "add", "path": end, "value": item} for item in items]
        else:
            self.ops.append({"op": "add", "path": path, "value": items})
        if what:
            self.injected.add(what)

    def extend_map(self, path: str, present: Any, entries: dict[str, Any], what: str | None) -> None:
        """Add entries to the object at `path` (now `present`): one add each, or one add of the object."""
        if not entries:
            return
        if isinstance(present, Mapping):
            self.ops += [{"op": "add", "path": f"{path}/{escape_pointer(k)}", "value": v} for k, v in entries.items()]
        else:
            self.ops.append({"op": "add", "path": path, "value": entries})
        if what is not None:
            self.injected.add(what)


def template_key(task: TaskView) -> bytes | None:
    """The task's pod template as JSON (exact: `1` and `true` differ), or None when it is not plain JSON."""
    try:
        return orjson.dumps(task.template)
    except TypeError:
        return None


def copy_twin_ops(patch: PatchBuilder, twin: WalkedTask, pointer: str) -> bool:
    """Append copies of the ops of the task `twin` walked, re-rooted at `pointer`."""
    ops = patch.ops[twin.start : twin.end]
    try:  # fresh values: a caller may change one task's ops without touching the other's
        values = orjson.loads(orjson.dumps([op["value"] for op in ops]))
    except TypeError:
        return False
    cut = len(twin.pointer)
    for op, value in zip(ops, values, strict=True):
        patch.ops.append({"op": "add", "path": pointer + op["path"][cut:], "value": value})
    patch.growth += twin.growth
    return True


def copy_twin_template(patch: PatchBuilder, twin: WalkedTask, pointer: str) -> bool:
    """One `copy` of the template `twin` mutated onto the task at `pointer` (whose template was the same JSON, so
    the result is what the twin's ops would make of it), within COPY_BUDGET_BYTES."""
    if patch.copied + twin.size > COPY_BUDGET_BYTES:
        return False
    patch.ops.append({"op": "copy", "from": f"{twin.pointer}/template", "path": f"{pointer}/template"})
    patch.copied += twin.size
    patch.growth += twin.growth
    return True


def op_growth(ops: list[PatchOp]) -> int:
    """Bytes `ops` add to the job: each value, plus the member name and punctuation of its place."""
    try:
        values = len(orjson.dumps([op.get("value") for op in ops]))
    except TypeError:
        values = sum(job_bytes(op.get("value")) for op in ops)
    return values + sum(len(op["path"]) - op["path"].rfind("/") + _OP_OVERHEAD for op in ops)


@dataclass(frozen=True, slots=True)
class WalkedTask:
    """A task whose ops were computed, for the tasks with the same template."""

    pointer: str
    start: int
    end: int
    growth: int
    """Bytes its ops add."""
    size: int
    """Bytes of its template after the ops (what a `copy` of it copies)."""


def resolve(document: Any, path: str) -> Any:
    """The value at a JSON Pointer, or MISSING."""
    node = document
    for raw in path.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(token, MISSING)
        elif isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        else:
            return MISSING
        if node is MISSING:
            return MISSING
    return node


def restorable(op: PatchOp, old: Mapping[str, Any]) -> PatchOp | None:
    """The part of `op` that puts back what `old` has at the same place, or None when it adds something new."""
    path = op["path"]
    if op["op"] == "remove":
        return op if resolve(old, path) is MISSING else None
    value = op["value"]
    if path.endswith("/-"):
        stored = resolve(old, path[:-2])
        return op if isinstance(stored, list) and value in stored else None
    stored = resolve(old, path)
    if stored == value:
        return op
    if isinstance(value, list) and isinstance(stored, list):
        items = [item for item in value if item in stored]
        return add(path, items) if items else None
    if isinstance(value, Mapping) and isinstance(stored, Mapping):
        entries = {k: v for k, v in value.items() if k in stored and stored[k] == v}
        return add(path, entries) if entries else None
    return None


__all__ = [
    "COPY_BUDGET_BYTES",
    "MISSING",
    "PatchBuilder",
    "PatchOp",
    "WalkedTask",
    "add",
    "copy_twin_ops",
    "copy_twin_template",
    "encode_patch",
    "op_growth",
    "pointer",
    "remove",
    "restorable",
    "template_key",
]
