"""What the rendered objects promise: security settings, webhook rules, RBAC, wiring between objects."""

from __future__ import annotations

from typing import Any

import yaml

from tests.support.kustomize import one
from webhook.common.names import RING_LABEL
from webhook.common.settings import settings_from_mapping

NAMESPACE = "ringroute-system"
SERVICE_ACCOUNT = "ringroute"
SECRET = "ringroute-webhook-tls"

Grant = tuple[str, str, str, str, str]
"""(scope, apiGroup, resource, verb, resourceName or "*")."""

CORE_GRANTS: set[Grant] = {
    *{("cluster", "batch.volcano.sh", "jobs", v, "*") for v in ("list", "watch")},
    ("cluster", "batch.volcano.sh", "jobs/finalizers", "update", "*"),
    *{("cluster", "", r, v, "*") for r in ("pods", "nodes") for v in ("list", "watch")},
    ("cluster", "", "pods", "patch", "*"),
    *{("cluster", "topology.volcano.sh", "hypernodes", v, "*") for v in ("list", "watch")},
    *{("cluster", "", "configmaps", v, "*") for v in ("get", "list", "watch", "create", "update", "delete")},
    ("cluster", "", "events", "create", "*"),
    *{(NAMESPACE, "coordination.k8s.io", "leases", v, "*") for v in ("get", "create", "update")},
}
SELF_SIGNED_GRANTS: set[Grant] = {
    (NAMESPACE, "", "secrets", "get", SECRET),
    (NAMESPACE, "", "secrets", "update", SECRET),
    (NAMESPACE, "", "secrets", "create", "*"),
    *{
        ("cluster", "admissionregistration.k8s.io", r, v, "ringroute")
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
        for v in ("get", "patch")
    },
}


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment", "ringroute")["spec"]["template"]["spec"]
    return spec


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    containers = pod_spec(objects)["containers"]
    assert len(containers) == 1
    return dict(containers[0])


def grants_of_service_account(objects: list[dict[str, Any]]) -> set[Grant]:
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o for o in objects}
    grants: set[Grant] = set()
    for binding in objects:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        subjects = binding["subjects"]
        assert subjects == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
        ref = binding["roleRef"]
        role_namespace = binding["metadata"].get("namespace") if ref["kind"] == "Role" else None
        role = roles[(ref["kind"], role_namespace, ref["name"])]
        scope = binding["metadata"].get("namespace", "cluster")
        for rule in role["rules"]:
            names = rule.get("resourceNames", ["*"])
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in names:
                            grants.add((scope, group, resource, verb, name))
    return grants


def test_rbac_grants_exactly_what_ringroute_uses(objects: list[dict[str, Any]], variant: str) -> None:
    expected = CORE_GRANTS | (SELF_SIGNED_GRANTS if variant == "self-signed" else set())
    assert grants_of_service_account(objects) == expected


def test_every_role_is_bound_and_nothing_uses_wildcards_or_escalation(objects: list[dict[str, Any]]) -> None:
    roles = [o for o in objects if o["kind"] in ("Role", "ClusterRole")]
    bound = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in objects if b["kind"].endswith("RoleBinding")}
    assert {(r["kind"], r["metadata"]["name"]) for r in roles} == bound
    for role in roles:
        for rule in role["rules"]:
            values = [*rule["apiGroups"], *rule["resources"], *rule["verbs"]]
            assert "*" not in values, role["metadata"]["name"]
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])


def test_deployment_runs_three_spread_replicas_guarded_by_a_disruption_budget(objects: list[dict[str, Any]]) -> None:
    deployment = one(objects, "Deployment", "ringroute")
    assert deployment["spec"]["replicas"] == 3
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    terms = pod_spec(objects)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    pdb = one(objects, "PodDisruptionBudget", "ringroute")
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert 1 <= pdb["spec"]["minAvailable"] < deployment["spec"]["replicas"]


def test_the_webhook_pods_are_evicted_after_workloads_and_never_preempt_them(objects: list[dict[str, Any]]) -> None:
    priority = one(objects, "PriorityClass", "ringroute-webhook")
    # The highest value a cluster may define (scheduling's HighestUserDefinablePriority), below the system classes.
    assert priority["value"] == 1_000_000_000
    assert priority["preemptionPolicy"] == "Never"
    assert priority["globalDefault"] is False
    assert pod_spec(objects)["priorityClassName"] == "ringroute-webhook"
    assert "priorityClassName" not in extender_pod(objects), "the extender is ignorable: it may be evicted first"


def test_pod_is_non_root_read_only_without_capabilities_and_confined_by_seccomp(
    objects: list[dict[str, Any]],
) -> None:
    pod_security = pod_spec(objects)["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security["runAsUser"] > 0
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    security = container(objects)["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert security.get("privileged", False) is False
    resources = container(objects)["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]
    namespace = one(objects, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_probes_hit_healthz_and_readyz_over_https_on_the_webhook_port(objects: list[dict[str, Any]]) -> None:
    c = container(objects)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"https": 9443}
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}
    assert "--no-extender" in c["args"]


def extender_pod(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment", "ringroute-extender")["spec"]["template"]["spec"]
    return spec


def test_the_extender_runs_in_pods_of_its_own_probed_on_its_healthz(objects: list[dict[str, Any]]) -> None:
    from webhook.common.metrics import Metrics
    from webhook.common.settings import Settings
    from webhook.extender.app import PREFIX, ExtenderService, extender_endpoints

    (extender,) = extender_pod(objects)["containers"]
    assert extender["command"] == ["ringroute", "extender"]
    assert {p["name"]: p["containerPort"] for p in extender["ports"]} == {"extender": 8888}
    endpoints = extender_endpoints(ExtenderService(Settings(), Metrics()))
    for probe in ("readinessProbe", "livenessProbe"):
        http = extender[probe]["httpGet"]
        assert http == {"path": "/extender/healthz", "port": "extender", "scheme": "HTTP"}
        assert "GET" in endpoints[http["path"]].methods
        assert http["path"].startswith(PREFIX)
    assert {"cpu", "memory"} <= set(extender["resources"]["limits"])


def test_the_extender_pods_are_confined_and_hold_no_api_token(objects: list[dict[str, Any]]) -> None:
    pod = extender_pod(objects)
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (extender,) = pod["containers"]
    security = extender["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    bound = {
        subject["name"]
        for binding in objects
        if binding["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for subject in binding.get("subjects", [])
    }
    assert pod["serviceAccountName"] not in bound


def test_services_route_443_to_the_webhook_and_8888_to_the_extender(objects: list[dict[str, Any]]) -> None:
    webhook_labels = one(objects, "Deployment", "ringroute")["spec"]["template"]["metadata"]["labels"]
    extender_labels = one(objects, "Deployment", "ringroute-extender")["spec"]["template"]["metadata"]["labels"]
    webhook = one(objects, "Service", "ringroute-webhook")
    extender = one(objects, "Service", "ringroute-extender")
    assert webhook["spec"]["selector"].items() <= webhook_labels.items()
    assert not webhook["spec"]["selector"].items() <= extender_labels.items()
    assert extender["spec"]["selector"].items() <= extender_labels.items()
    assert not extender["spec"]["selector"].items() <= webhook_labels.items()
    assert [(p["port"], p["targetPort"]) for p in webhook["spec"]["ports"]] == [(443, "https")]
    assert [(p["port"], p["targetPort"]) for p in extender["spec"]["ports"]] == [(8888, "extender")]


def test_the_extender_service_keeps_one_scheduler_on_one_replica(objects: list[dict[str, Any]]) -> None:
    extender = one(objects, "Service", "ringroute-extender")
    assert extender["spec"]["sessionAffinity"] == "ClientIP"
    assert extender["spec"]["sessionAffinityConfig"]["clientIP"]["timeoutSeconds"] >= 3600
    assert "sessionAffinity" not in one(objects, "Service", "ringroute-webhook")["spec"]  # the API server spreads


def test_container_args_point_at_the_mounted_certificates_and_settings(objects: list[dict[str, Any]]) -> None:
    c = container(objects)
    args = dict(a.removeprefix("--").partition("=")[::2] for a in c["args"])
    assert args["listen"] == "0.0.0.0:9443"
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    assert args["cert-dir"] in mounts
    assert args["config"] in mounts
    settings_volume = volumes[mounts[args["config"]]["name"]]
    assert settings_volume["configMap"]["name"] == "ringroute-settings"
    assert mounts[args["config"]]["subPath"] == "config.yaml"
    assert mounts["/tmp"]["name"] in volumes  # writable scratch space on a read-only root filesystem
    tls_volume = volumes[mounts[args["cert-dir"]]["name"]]
    if "self-signed-secret" in args:
        assert args["self-signed-secret"] == f"{NAMESPACE}/{SECRET}"
        assert "emptyDir" in tls_volume
        assert "secret" not in tls_volume
        assert mounts[args["cert-dir"]]["readOnly"] is False
    else:
        assert tls_volume["secret"]["secretName"] == SECRET
        assert mounts[args["cert-dir"]]["readOnly"] is True


def test_cert_manager_overlay_issues_the_secret_the_deployment_mounts(renders: dict[str, list[dict[str, Any]]]) -> None:
    objects = renders["cert-manager"]
    certificate = one(objects, "Certificate", "ringroute-webhook")
    volumes = {v["name"]: v for v in pod_spec(objects)["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == certificate["spec"]["secretName"] == SECRET
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(objects, kind, "ringroute")["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/ringroute-webhook"


def test_settings_config_map_is_a_valid_settings_file_for_this_namespace(objects: list[dict[str, Any]]) -> None:
    data = one(objects, "ConfigMap", "ringroute-settings")["data"]["config.yaml"]
    settings = settings_from_mapping(yaml.safe_load(data))
    assert settings.controller.lease_namespace == NAMESPACE
    assert settings.extender.listen.endswith(":8888")


def webhook(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    configuration = one(objects, kind, "ringroute")
    assert len(configuration["webhooks"]) == 1
    return dict(configuration["webhooks"][0])


def test_both_webhooks_intercept_labelled_volcano_jobs_outside_system_namespaces(
    objects: list[dict[str, Any]],
) -> None:
    for kind, path in (
        ("MutatingWebhookConfiguration", "/jobs/mutate"),
        ("ValidatingWebhookConfiguration", "/jobs/validate"),
    ):
        hook = webhook(objects, kind)
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 5
        assert hook["clientConfig"]["service"] == {
            "name": "ringroute-webhook",
            "namespace": NAMESPACE,
            "path": path,
            "port": 443,
        }
        assert hook["rules"] == [
            {
                "apiGroups": ["batch.volcano.sh"],
                "apiVersions": ["v1alpha1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["jobs"],
                "scope": "Namespaced",
            }
        ]
        assert hook["objectSelector"] == {"matchExpressions": [{"key": RING_LABEL, "operator": "Exists"}]}
        excluded = hook["namespaceSelector"]["matchExpressions"]
        assert excluded == [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", NAMESPACE]}
        ]


def test_mutation_has_no_side_effects_fails_closed_and_is_reinvoked(objects: list[dict[str, Any]]) -> None:
    hook = webhook(objects, "MutatingWebhookConfiguration")
    assert hook["sideEffects"] == "None"
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["failurePolicy"] == "Fail"


def test_admission_writes_nothing_so_rbac_grants_writes_only_the_controller_uses(
    objects: list[dict[str, Any]], variant: str
) -> None:
    # That admission holds no Kubernetes client at all is an import-linter contract (pyproject.toml).
    writes = {
        (group, resource, verb)
        for _, group, resource, verb, _ in grants_of_service_account(objects)
        if verb in ("create", "update", "patch", "delete")
    }
    controller_writes = {
        ("", "configmaps", "create"),
        ("", "configmaps", "update"),
        ("", "configmaps", "delete"),
        ("", "events", "create"),
        ("", "pods", "patch"),
        ("batch.volcano.sh", "jobs/finalizers", "update"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
    }
    certificates = {
        ("", "secrets", "create"),
        ("", "secrets", "update"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "patch"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch"),
    }
    assert writes == controller_writes | (certificates if variant == "self-signed" else set())


def test_validation_has_no_side_effects_and_fails_closed(objects: list[dict[str, Any]]) -> None:
    hook = webhook(objects, "ValidatingWebhookConfiguration")
    assert hook["sideEffects"] == "None"
    assert hook["failurePolicy"] == "Fail"


def test_webhooks_target_the_service_that_exists(objects: list[dict[str, Any]]) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        target = webhook(objects, kind)["clientConfig"]["service"]
        service = one(objects, "Service", target["name"])
        assert service["metadata"]["namespace"] == target["namespace"]
        assert target["port"] in [p["port"] for p in service["spec"]["ports"]]


def test_every_resource_the_code_talks_to_is_granted(objects: list[dict[str, Any]], variant: str) -> None:
    import webhook.kube.client
    import webhook.kube.self_signed

    modules = [webhook.kube.client] + ([webhook.kube.self_signed] if variant == "self-signed" else [])
    kinds = {
        (value.group, value.plural)
        for module in modules
        for value in vars(module).values()
        if isinstance(value, webhook.kube.client.ResourceKind)
    }
    assert len(kinds) >= 7
    granted = {(group, resource) for _, group, resource, _, _ in grants_of_service_account(objects)}
    assert kinds <= granted


def test_only_the_volcano_scheduler_may_reach_the_extender(objects: list[dict[str, Any]]) -> None:
    policy = one(objects, "NetworkPolicy", "ringroute-extender")
    extender_labels = one(objects, "Deployment", "ringroute-extender")["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= extender_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = policy["spec"]["ingress"]
    (peer,) = rule["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "volcano-system"}
    assert peer["podSelector"]["matchLabels"] == {"app": "volcano-scheduler"}
    assert rule["ports"] == [{"port": "extender", "protocol": "TCP"}]
    webhook_labels = one(objects, "Deployment", "ringroute")["spec"]["template"]["metadata"]["labels"]
    assert not policy["spec"]["podSelector"]["matchLabels"].items() <= webhook_labels.items()
