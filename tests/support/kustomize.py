"""A small kustomize renderer for ringroute's own manifests, so the tests need no kustomize binary.

It understands what `manifests/` and the overlays its documentation shows use: `resources` (files and directories
with a kustomization), `components`, `patches` (a file or an inline `patch`, strategic merge by kind/name with the
merge keys of the fields patched here, `null` deleting a field and `$patch: delete` an object, or a JSON 6902 list
of operations for a `target` whose kind and name may be regular expressions), `images` and `labels` (without
selectors or templates). Tests check it against kustomize itself.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
VARIANTS = {
    "base": MANIFESTS,
    "cert-manager": MANIFESTS / "overlays" / "cert-manager",
    "self-signed": MANIFESTS / "overlays" / "self-signed",
}
"""ringroute's kustomize base and overlays, by name."""
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
SUPPORTED_KEYS = {"apiVersion", "kind", "resources", "components", "patches", "images", "labels"}

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
# Where kustomize's image transformer looks for containers.
POD_SPEC_PATHS = (("spec",), ("spec", "template", "spec"), ("spec", "jobTemplate", "spec", "template", "spec"))


class KustomizeError(ValueError):
    """A kustomization uses something this renderer does not support, or refers to a missing object."""


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects `kustomize build directory` would emit (order aside)."""
    directory = Path(directory)
    kustomization_path, kustomization = load_kustomization(directory)
    if kustomization.get("kind", "Kustomization") != "Kustomization":
        raise KustomizeError(f"{kustomization_path}: a {kustomization['kind']} is used through `components`")
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = directory / entry
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(load_documents(path))
    for entry in kustomization.get("components", []):
        component_path, component = load_kustomization(directory / entry)
        if component.get("kind") != "Component":
            raise KustomizeError(f"{component_path}: components must be of kind Component")
        for resource in component.get("resources", []):
            objects.extend(load_documents(directory / entry / resource))
        objects = transform(objects, component, component_path)
    return transform(objects, kustomization, kustomization_path)


def load_kustomization(directory: Path) -> tuple[Path, dict[str, Any]]:
    path = next((directory / n for n in KUSTOMIZATION_FILES if (directory / n).exists()), None)
    if path is None:
        raise KustomizeError(f"{directory}: no kustomization.yaml")
    kustomization = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    unsupported = set(kustomization) - SUPPORTED_KEYS
    if unsupported:
        raise KustomizeError(f"{path}: unsupported fields {sorted(unsupported)}")
    return path, kustomization


def transform(objects: list[dict[str, Any]], kustomization: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """A kustomization's transformers in kustomize's order: patches, labels, images."""
    for entry in kustomization.get("patches", []):
        if set(entry) - {"path", "patch", "target"} or ("path" in entry) == ("patch" in entry):
            raise KustomizeError(f"{path}: a patch needs `path` or `patch` (and an optional `target`), got {entry}")
        text = (path.parent / entry["path"]).read_text(encoding="utf-8") if "path" in entry else entry["patch"]
        for patch in [doc for doc in yaml.safe_load_all(text) if doc]:
            objects = apply_patch(objects, patch, entry.get("target"), path)
    for entry in kustomization.get("labels", []):
        if entry.get("includeSelectors") or entry.get("includeTemplates"):
            raise KustomizeError(f"{path}: labels with includeSelectors or includeTemplates are not supported")
        for obj in objects:
            obj["metadata"].setdefault("labels", {}).update({k: str(v) for k, v in entry["pairs"].items()})
    for image in kustomization.get("images", []):
        for container in containers(objects):
            container["image"] = set_image(container["image"], image)
    return objects


def apply_patch(
    objects: list[dict[str, Any]], patch: Any, target: dict[str, Any] | None, path: Path
) -> list[dict[str, Any]]:
    if isinstance(patch, list):
        if target is None:
            raise KustomizeError(f"{path}: a JSON 6902 patch needs a target")
        matched = [i for i, obj in enumerate(objects) if selected(obj, target)]
        if not matched:
            raise KustomizeError(f"{path}: no object matches the target {target}")
        for i in matched:
            objects[i] = jsonpatch.apply_patch(objects[i], patch)
        return objects
    if target is not None:
        raise KustomizeError(f"{path}: strategic-merge patches with a target are not supported")
    found = find(objects, patch["kind"], patch["metadata"]["name"])
    if patch.get("$patch") == "delete":
        return [obj for obj in objects if obj is not found]
    index = objects.index(found)
    objects[index] = strategic_merge(found, patch)
    return objects


def selected(obj: dict[str, Any], target: dict[str, Any]) -> bool:
    """kustomize's target selector: group, version, kind, name and namespace as anchored regular expressions."""
    unsupported = set(target) - {"group", "version", "kind", "name", "namespace"}
    if unsupported:
        raise KustomizeError(f"target fields {sorted(unsupported)} are not supported")
    group, _, version = obj["apiVersion"].rpartition("/")
    values = {
        "group": group,
        "version": version,
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "namespace": obj["metadata"].get("namespace", ""),
    }
    return all(re.fullmatch(str(pattern), values[key]) for key, pattern in target.items())


def containers(objects: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every container and init container of the objects' pod specs."""
    for obj in objects:
        for spec_path in POD_SPEC_PATHS:
            spec: Any = obj
            for key in spec_path:
                spec = spec.get(key) if isinstance(spec, dict) else None
            if isinstance(spec, dict):
                yield from spec.get("containers", [])
                yield from spec.get("initContainers", [])


def set_image(image: str, change: dict[str, Any]) -> str:
    """kustomize's image transformer on one image: the name must match exactly; tag and digest are replaced."""
    match = re.fullmatch(re.escape(change["name"]) + r"(?P<tag>:[\w.-]*)?(?P<digest>@sha256:[0-9a-f]+)?", image)
    if match is None:
        return image
    name = change.get("newName", change["name"])
    if "digest" in change:
        tag = f":{change['newTag']}" if "newTag" in change else ""
        return f"{name}{tag}@{change['digest']}"
    if "newTag" in change:
        return f"{name}:{change['newTag']}"
    return f"{name}{match['tag'] or ''}{match['digest'] or ''}"


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
