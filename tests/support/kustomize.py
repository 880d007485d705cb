"""A small kustomize renderer for ringroute's own manifests, so the tests need no kubectl.

It understands exactly what `manifests/` uses: `resources` (files and directories with a kustomization) and
`patches` given by `path` (strategic merge by kind/name, with the merge keys of the fields patched here and
`null` deleting a field). A test checks it against `kubectl kustomize` when kubectl is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
VARIANTS = {
    "base": MANIFESTS,
    "cert-manager": MANIFESTS / "overlays" / "cert-manager",
    "self-signed": MANIFESTS / "overlays" / "self-signed",
}
"""ringroute's kustomize base and overlays, by name."""
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "patches"}

# Strategic-merge keys of the lists patched in manifests/ (from the Kubernetes API's patchMergeKey).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "webhooks": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


class KustomizeError(ValueError):
    """A kustomization uses something this renderer does not support, or refers to a missing object."""


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize directory` would emit (order aside)."""
    directory = Path(directory)
    kustomization_path = next((directory / n for n in KUSTOMIZATION_FILES if (directory / n).exists()), None)
    if kustomization_path is None:
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    kustomization = yaml.safe_load(kustomization_path.read_text(encoding="utf-8")) or {}
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise KustomizeError(f"{kustomization_path}: unsupported fields {sorted(unsupported)}")
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(load_documents(path))
    for patch_entry in kustomization.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise KustomizeError(f"{kustomization_path}: only `path` patches are supported, got {patch_entry}")
        for patch in load_documents(directory / patch_entry["path"]):
            target = find(objects, patch["kind"], patch["metadata"]["name"])
            index = objects.index(target)
            objects[index] = strategic_merge(target, patch)
    return objects


def load_documents(path: Path) -> list[dict[str, Any]]:
    """The non-empty YAML documents of a file."""
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The one object of that kind and name (raises KustomizeError when there is none)."""
    for obj in objects:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            return obj
    raise KustomizeError(f"no {kind}/{name} to patch")


def strategic_merge(original: Any, patch: Any, field: str | None = None) -> Any:
    """Kubernetes strategic merge for maps and merge-keyed lists; other lists are replaced, null deletes."""
    if isinstance(original, dict) and isinstance(patch, dict):
        merged = copy.deepcopy(original)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key in merged:
                merged[key] = strategic_merge(merged[key], value, key)
            else:
                merged[key] = copy.deepcopy(value)
        return merged
    if isinstance(original, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        merged_list = copy.deepcopy(original)
        for item in patch:
            match = next((i for i, old in enumerate(merged_list) if old.get(key) == item.get(key)), None)
            if match is None:
                merged_list.append(copy.deepcopy(item))
            else:
                merged_list[match] = strategic_merge(merged_list[match], item, None)
        return merged_list
    return copy.deepcopy(patch)


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The single object of a kind (and name); fails the test when there are none or several."""
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]
