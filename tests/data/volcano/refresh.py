"""Refresh the excerpts of Volcano's Go structs in this folder from a volcano-sh/volcano clone.

    python tests/data/volcano/refresh.py /path/to/volcano

For each release tag the extender knows (`RELEASE_TAGS`), every struct whose JSON keys it reads and the payload
builders write (`GO_FIELDS`) is copied from its source file at that tag, with the structs it embeds, into
`<tag>/<path of the source file>`: tests/extender/test_release_tables.py reads the keys from these excerpts, so
the check runs without a clone.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from webhook.extender.volcano_releases import GO_FIELDS, RELEASE_TAGS  # noqa: E402

SOURCE_FILES = {
    "TaskInfo": "pkg/scheduler/api/job_info.go",
    "TransactionContext": "pkg/scheduler/api/job_info.go",
    "JobInfo": "pkg/scheduler/api/job_info.go",
    "TopologyInfo": "pkg/scheduler/api/job_info.go",
    "DisruptionBudget": "pkg/scheduler/api/job_info.go",
    "NodeInfo": "pkg/scheduler/api/node_info.go",
    "NodeState": "pkg/scheduler/api/node_info.go",
    "NodeUsage": "pkg/scheduler/api/node_info.go",
    "Resource": "pkg/scheduler/api/resource_info.go",
    "QueueInfo": "pkg/scheduler/api/queue_info.go",
    "NamespaceInfo": "pkg/scheduler/api/namespace_info.go",
    "SubJobInfo": "pkg/scheduler/api/sub_job_info.go",
    "GPUDevice": "pkg/scheduler/api/device_info.go",
    "Status": "pkg/scheduler/api/types.go",
    "PredicateRequest": "pkg/scheduler/plugins/extender/argument.go",
    "PrioritizeRequest": "pkg/scheduler/plugins/extender/argument.go",
    "OnSessionOpenRequest": "pkg/scheduler/plugins/extender/argument.go",
    "EventHandlerRequest": "pkg/scheduler/plugins/extender/argument.go",
    "PredicateResponse": "pkg/scheduler/plugins/extender/argument.go",
    "PrioritizeResponse": "pkg/scheduler/plugins/extender/argument.go",
    "EventHandlerResponse": "pkg/scheduler/plugins/extender/argument.go",
}
"""Where each struct the emulation writes is declared in volcano-sh/volcano."""


def struct_block(source: str, struct: str) -> str | None:
    """`type <struct> struct {...}` as declared in `source`, or None."""
    match = re.search(rf"^type {struct} struct \{{\n.*?^\}}\n", source, re.S | re.M)
    return match.group(0) if match else None


def embedded(block: str) -> list[str]:
    """Names of the structs a struct block embeds without a field name."""
    names = []
    for raw in block.splitlines()[1:-1]:
        parts = re.sub(r"`.*`", "", re.sub(r"//.*$", "", raw)).split()
        if len(parts) == 1:
            names.append(parts[0])
    return names


def excerpt(source: str, structs: list[str]) -> str:
    """The blocks of `structs` and of every struct of the same file they embed, in source order."""
    wanted: dict[str, str] = {}
    pending = list(structs)
    while pending:
        name = pending.pop()
        block = struct_block(source, name)
        if name in wanted or block is None:
            continue
        wanted[name] = block
        pending += embedded(block)
    return "\n".join(sorted(wanted.values(), key=source.index))


def main(clone: Path) -> int:
    for release, tag in RELEASE_TAGS.items():
        by_file: dict[str, list[str]] = {}
        for struct, path in SOURCE_FILES.items():
            if struct in GO_FIELDS[release]:
                by_file.setdefault(path, []).append(struct)
        for path, structs in by_file.items():
            source = subprocess.run(
                ["git", "-C", str(clone), "show", f"{tag}:{path}"], capture_output=True, text=True, check=True
            ).stdout
            out = HERE / tag / path
            out.parent.mkdir(parents=True, exist_ok=True)
            header = f"// volcano-sh/volcano {tag}:{path} (excerpt: the structs whose JSON keys ringroute writes)\n\n"
            out.write_text(header + excerpt(source, structs), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
