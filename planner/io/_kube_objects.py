"""Kubernetes objects from `kubectl get -o yaml|json` output, and the few fields of a Pod the placement reads."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from planner._errors import InputError


def load_kube_objects(text: str) -> list[dict[str, Any]]:
    """Kubernetes objects from `kubectl get -o yaml|json` output: a `List`, multi-document YAML, or JSON.

    `List` objects (and `PodList`, `NodeList`, ...) are flattened into their items. Raises InputError naming the
    document or line when the text does not parse or holds something other than objects.
    """
    stripped = text.lstrip()
    documents: list[Any]
    if stripped.startswith(("{", "[")):
        try:
            parsed = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(
                f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}; fix the file or pass YAML"
            ) from exc
        except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; nesting past the stack
            raise InputError(f"unreadable JSON: {_unreadable(exc)}; fix the file") from None
        documents = parsed if isinstance(parsed, list) else [parsed]
    else:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        try:
            documents = list(yaml.load_all(text, Loader=loader))
        except yaml.YAMLError as exc:
            raise InputError(f"malformed YAML {_yaml_error_line(exc)}; fix the file") from exc
        except (ValueError, RecursionError) as exc:
            raise InputError(f"unreadable YAML: {_unreadable(exc)}; fix the file") from None
    objects: list[dict[str, Any]] = []
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        if not isinstance(document, dict):
            raise InputError(
                f"document {number}: expected a Kubernetes object (a mapping), got {type(document).__name__}"
            )
        kind = str(document.get("kind", ""))
        if "items" in document and (kind == "List" or kind.endswith("List")):
            items = document.get("items") or []
            if not isinstance(items, list):
                raise InputError(f"document {number}: items: expected a list of objects")
            for position, item in enumerate(items):
                if not isinstance(item, dict):
                    raise InputError(f"document {number}: items[{position}]: expected a Kubernetes object")
                objects.append(item)
        else:
            objects.append(document)
    return objects


def _unreadable(exc: ValueError | RecursionError) -> str:
    """What a parser's ValueError or RecursionError means to the person who wrote the file."""
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return "a number too long to convert" if "digits" in str(exc) else str(exc).splitlines()[0][:200]


def _yaml_error_line(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    if mark is not None:
        return f"at line {mark.line + 1} column {mark.column + 1}: {problem}"
    return f": {problem}"


def mapping_of(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    return mapping_of(mapping_of(obj.get("metadata")).get(key))


def labelled(pod: Mapping[str, Any], key: str) -> tuple[str, str] | None:
    """A label's value (else the annotation's) and the field path it came from, or None when neither is set."""
    for where in ("labels", "annotations"):
        value = meta(pod, where).get(key)
        if value is not None and str(value) != "":
            return str(value), f"metadata.{where}[{key}]"
    return None


def label_or_annotation(pod: Mapping[str, Any], key: str) -> str | None:
    found = labelled(pod, key)
    return None if found is None else found[0]


def pod_ref(pod: Mapping[str, Any]) -> str:
    metadata = mapping_of(pod.get("metadata"))
    name = str(metadata.get("name") or "<unnamed>")
    namespace = metadata.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def containers(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    containers = mapping_of(pod.get("spec")).get("containers")
    return [c for c in containers if isinstance(c, Mapping)] if isinstance(containers, list) else []


def resource_amounts(pod: Mapping[str, Any], resource_name: str) -> Iterator[tuple[int, Mapping[str, Any], str, Any]]:
    """(container position, container, `requests` or `limits`, amount) for every amount of `resource_name`."""
    for position, container in enumerate(containers(pod)):
        resources = mapping_of(container.get("resources"))
        for section in ("requests", "limits"):
            amount = mapping_of(resources.get(section)).get(resource_name)
            if amount is not None:
                yield position, container, section, amount


__all__ = [
    "containers",
    "label_or_annotation",
    "labelled",
    "load_kube_objects",
    "mapping_of",
    "meta",
    "pod_ref",
    "resource_amounts",
]
