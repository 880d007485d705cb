"""One frozen settings tree, built once at start-up from a YAML file (a ConfigMap in the cluster) and flags.

Every field says what its default means. Nothing reads settings from globals: the tree is passed explicitly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

import yaml

from planner import Fabric

RuleMode = Literal["reject", "warn"]
BelowMinNodes = Literal["reject", "skip"]

RING_LABEL = "ring-controller.cce"
"""Label on the Job and its pod templates that marks an NPU job (value = accelerator profile)."""
ROUTE_PLAN_ENV = "ROUTE_PLAN"
"""Container env that asks for route planning (value "true")."""
ROUTE_PLAN_ANNOTATION = "ringroute.io/route-plan"
"""Job annotation that asks for route planning (value "true")."""
LAUNCHER_ANNOTATION = "ringroute.io/launcher"
"""Job annotation; "false" opts out of wrapping the command with the launcher."""
INJECTED_ANNOTATION = "ringroute.io/injected"
"""Job annotation the mutator writes: a comma-separated list of what it added."""
RANK_TABLE_WRITER_ANNOTATION = "ringroute.io/rank-table-writer"
"""Job annotation the mutator writes on CREATE: who writes `configmap1980-<job>`, "ringroute" or "volcano-plugin"
(the vendor fork's configmap1980 job plugin); missing means ringroute."""
NPU_PODS_ANNOTATION = "ringroute.io/npu-pods"
"""Pod-template annotation the mutator writes on CREATE: the job's total NPU pods (the gang the extender places)."""


@dataclass(frozen=True, slots=True)
class HostPathVolume:
    """A driver file or directory from the node, mounted at the same path in NPU containers."""

    name: str
    """Volume name in the pod spec."""
    path: str
    """Path on the node, and mount path in the container."""


DEFAULT_HOST_PATHS: tuple[HostPathVolume, ...] = (
    HostPathVolume("ascend-driver", "/usr/local/Ascend/driver"),
    HostPathVolume("ascend-add-ons", "/usr/local/Ascend/add-ons"),
    HostPathVolume("localtime", "/etc/localtime"),
    HostPathVolume("hccn", "/etc/hccn.conf"),
    HostPathVolume("npu-smi", "/usr/local/sbin/npu-smi"),
)


@dataclass(frozen=True, slots=True)
class AcceleratorProfile:
    """What a value of the `ring-controller.cce` label means on this cluster."""

    label_value: str = "ascend-1980"
    """The `ring-controller.cce` label value that selects this profile."""
    resource_name: str = "huawei.com/ascend-1980"
    """Extended resource of one NPU card."""
    cards_per_node: int = 8
    """Cards on one node; a route-planned pod must request all of them."""
    allowed_cards: tuple[int, ...] = (1, 2, 4, 8)
    """Card counts a pod may request (HCCL supports these groupings)."""
    rank_table_version: Literal["1.0", "1.2"] = "1.0"
    """jobstart_hccl.json version: "1.0" for Snt9b/910B, "1.2" (super-pod fields) for Snt9b23/910C."""
    configmap_prefix: str = "configmap1980-"
    """The rank-table ConfigMap is named prefix + job name."""
    mount_path: str = "/user/config"
    """Directory where the ConfigMap is mounted in NPU containers."""
    rank_table_file: str = "jobstart_hccl.json"
    """File (ConfigMap key) of the rank table under mount_path."""
    device_annotation_keys: tuple[str, ...] = (
        "cce.kubectl.kubernetes.io/ascend-1980-configuration",
        "ascend.kubectl.kubernetes.io/ascend-910-configuration",
    )
    """Pod annotations the device plugin writes device info to, first match wins."""
    host_path_volumes: tuple[HostPathVolume, ...] = DEFAULT_HOST_PATHS
    """Driver volumes every NPU container needs."""
    node_selector: tuple[tuple[str, str], ...] = (("accelerator/huawei-npu", "ascend-1980"),)
    """nodeSelector entries added to NPU pod templates when absent."""
    gzip_rank_table: bool = False
    """Store the rank table gzip+base64 in binaryData when it exceeds the ConfigMap limit."""

    @property
    def rank_table_path(self) -> str:
        """Absolute path of the rank table inside the container."""
        return f"{self.mount_path.rstrip('/')}/{self.rank_table_file}"

    def configmap_name(self, job_name: str) -> str:
        """Name of the job's rank-table ConfigMap."""
        return f"{self.configmap_prefix}{job_name}"


DEFAULT_PROFILES: tuple[AcceleratorProfile, ...] = (
    AcceleratorProfile(),
    AcceleratorProfile(
        label_value="ascend-1980-snt9b23",
        cards_per_node=16,
        allowed_cards=(1, 2, 4, 8, 16),
        rank_table_version="1.2",
    ),
)


@dataclass(frozen=True, slots=True)
class PolicySettings:
    """How strictly admission enforces each rule."""

    below_min_nodes: BelowMinNodes = "reject"
    """Route-planned job with fewer than min_route_plan_nodes pods: reject, or admit and plan without routing."""
    min_route_plan_nodes: int = 3
    """Route planning needs at least this many NPU pods (ring neighbours on different leaves)."""
    rule_modes: tuple[tuple[str, RuleMode], ...] = ()
    """Per-rule overrides by rule name; rules not listed reject."""
    shared_host_path_prefixes: tuple[str, ...] = ("/mnt/sfs_turbo", "/mnt/nfs", "/mnt/shared")
    """hostPath prefixes that are network filesystems on this cluster (a working dir there is rejected)."""

    def mode(self, rule: str) -> RuleMode:
        """Enforcement mode of a rule: `reject` unless configured as `warn`."""
        return dict(self.rule_modes).get(rule, "reject")


@dataclass(frozen=True, slots=True)
class TopologySettings:
    """Where the network topology comes from."""

    label_keys: tuple[str, ...] = ()
    """Node label keys, top-most tier first; empty recognises volcano.sh/tor, NVIDIA and topograph labels."""
    use_hypernodes: bool = True
    """Read Volcano HyperNode objects when the CRD exists (they win over labels)."""
    tor_configmap: str | None = None
    """`namespace/name` of a MindCluster basic-tor-node-cm ConfigMap to read leaves and slice ids from."""
    fabric: Fabric = Fabric()
    """Link rate, uplinks and oversubscription: facts labels do not carry."""


@dataclass(frozen=True, slots=True)
class PlanningSettings:
    """Defaults for rank planning."""

    pattern: Literal["ring", "halving-doubling", "mixed"] = "ring"
    """Collective pattern to optimise for."""
    routing: Literal["ecmp", "slice", "pinned"] = "ecmp"
    """Routing model of the fabric."""
    qps_per_connection: int = 1
    """HCCL_RDMA_QPS_PER_CONNECTION: queue pairs hashed independently per connection under ecmp."""
    time_limit_s: float = 2.0
    """Planner time budget per job."""
    seed: int = 0
    """Seed of the planner's rng (plans are deterministic)."""


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    """The rank-table controller inside `ringroute serve`."""

    enabled: bool = True
    """Run the controller (every replica still serves admission)."""
    namespace: str | None = None
    """Watch one namespace; None watches all."""
    debounce_s: float = 0.2
    """Wait this long after the last change to a job before reconciling it."""
    lease_name: str = "ringroute-controller"
    """coordination.k8s.io Lease used for leader election."""
    lease_namespace: str = "ringroute-system"
    """Namespace of the Lease."""
    lease_duration_s: float = 15.0
    """Lease duration; a new leader takes over at most this long after the old one dies."""
    renew_deadline_s: float = 10.0
    """Leader gives up (stops writing) when it cannot renew within this."""
    retry_period_s: float = 2.0
    """Interval between lease acquire/renew attempts."""
    launcher_timeout_s: int = 1800
    """Launcher waits at most this long for a completed rank table."""
    orphan_grace_s: float = 300.0
    """Delete ConfigMaps ringroute created for jobs that never appeared after this long."""
    pending_event_interval_s: float = 10.0
    """Minimum seconds between two RankTablePending Events of one job (posted only when the message changed)."""
    configmap_create_workers: int = 8
    """Concurrent creations of rank-table ConfigMaps for new Jobs (a burst of jobs is served this many at a time)."""


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    """The Volcano scheduler extender endpoint."""

    enabled: bool = True
    """Serve /extender/* on its own port."""
    listen: str = "0.0.0.0:8888"
    """Address of the extender's HTTP listener."""
    max_body_mib: int = 128
    """Largest predicate, prioritize or event body in MiB (a prioritize call of Volcano 1.9+ with default flags is
    at most about 25 MiB; 1.7/1.8 send every free node: about 17 MiB per 1,000). Larger ones get a neutral
    answer, unread."""
    job_memory_ttl_s: float = 900.0
    """Forget a job's placement memory when no call mentioned it for this long."""
    gang_planning: bool = True
    """Plan each route-planned job's leaves once per scheduling session and steer Volcano's task-by-task
    allocation to that plan (false: score each call on its own)."""
    enforce_plan: bool = True
    """With onSessionOpen data, the predicate refuses nodes outside the plan: Volcano offers prioritize only a
    share of the feasible nodes on clusters over 100 nodes, so scores alone cannot reach the planned leaves."""
    plan_attempts: int = 2
    """Sessions a job may stay pending under an enforced plan before its plan is only scored, not enforced."""
    plan_ttl_s: float = 30.0
    """Without onSessionOpen (sessions invisible), keep a job's plan this long after the last call that used it."""
    score_weight: float = 100.0
    """Multiplies the extender's scores (0-100 before weighting, 5 points between preferences): at 100 each step
    is 500 of Volcano's points, more than the 350 nodeorder and binpack can add at their default weights."""
    max_state_mib: int = 256
    """Memory for what the extender keeps between calls (node views, by estimated bytes); the least recently seen
    nodes are forgotten first."""
    max_session_open_mib: int = 256
    """Largest onSessionOpen body read (Volcano sends its whole cache: about 60-85 MiB per 1,000 nodes); a larger
    one is answered without being used, and the extender plans from what calls show."""


@dataclass(frozen=True, slots=True)
class NetworkTopologySettings:
    """`spec.networkTopology` that admission requests for route-planned jobs on Volcano with HyperNodes (v1.12+)."""

    inject: Literal["auto", "always", "never"] = "auto"
    """auto: request it when the cluster has HyperNode objects (checked by `ringroute serve`); always; never."""
    mode: Literal["hard", "soft"] = "hard"
    """Volcano's mode: hard keeps the job within the tier, soft prefers it."""
    highest_tier_allowed: int = 1
    """Highest HyperNode tier the job may span (1 = one leaf switch)."""


@dataclass(frozen=True, slots=True)
class VolcanoSettings:
    """Facts about the Volcano release and distribution the cluster runs."""

    version: str = "auto"
    """Volcano release ("1.7", "1.10", ...): decides the extender's answer shapes and which job plugins exist.
    auto: answers every release reads where one shape fits all, else the release detected from the request;
    admission then accepts only the job plugins and lifecycle-policy events and actions every release from 1.7 knows."""
    configmap_plugin: Literal["absent", "installed"] = "absent"
    """absent: open-source Volcano, which refuses jobs naming the vendor's `configmap1980` job plugin (ringroute
    removes it); installed: the cloud vendor's Volcano fork that provides that plugin runs here."""
    network_topology: NetworkTopologySettings = NetworkTopologySettings()
    """What admission requests of Volcano's own network-topology-aware scheduling."""


@dataclass(frozen=True, slots=True)
class Settings:
    """The whole configuration of a ringroute process."""

    profiles: tuple[AcceleratorProfile, ...] = DEFAULT_PROFILES
    """Accelerator profiles by label value."""
    policy: PolicySettings = PolicySettings()
    topology: TopologySettings = TopologySettings()
    planning: PlanningSettings = PlanningSettings()
    controller: ControllerSettings = ControllerSettings()
    extender: ExtenderSettings = ExtenderSettings()
    volcano: VolcanoSettings = VolcanoSettings()

    def profile(self, label_value: str | None) -> AcceleratorProfile | None:
        """The profile selected by a `ring-controller.cce` label value, if any."""
        for profile in self.profiles:
            if profile.label_value == label_value:
                return profile
        return None


class SettingsError(ValueError):
    """The settings file or a flag is invalid; the message names the key."""


T = TypeVar("T")


def _build(cls: type[T], data: Any, where: str) -> T:
    """Build a frozen dataclass from a mapping, converting lists to tuples and nested mappings to dataclasses."""
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise SettingsError(f"{where}: expected a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _snake(str(raw_key))
        if key not in fields:
            raise SettingsError(f"{where}.{raw_key}: unknown setting (known: {', '.join(sorted(fields))})")
        kwargs[key] = _convert(fields[key].type, value, f"{where}.{raw_key}", cls)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise SettingsError(f"{where}: {exc}") from exc


_NESTED: dict[str, type[Any]] = {
    "PolicySettings": PolicySettings,
    "TopologySettings": TopologySettings,
    "PlanningSettings": PlanningSettings,
    "ControllerSettings": ControllerSettings,
    "ExtenderSettings": ExtenderSettings,
    "VolcanoSettings": VolcanoSettings,
    "NetworkTopologySettings": NetworkTopologySettings,
    "Fabric": Fabric,
}


def _convert(annotation: Any, value: Any, where: str, owner: type[Any]) -> Any:
    text = str(annotation)
    if text in _NESTED:
        return _build(_NESTED[text], value, where)
    if text == "tuple[AcceleratorProfile, ...]":
        if not isinstance(value, list | tuple):
            raise SettingsError(f"{where}: expected a list of profiles")
        return tuple(
            _build(AcceleratorProfile, _profile_data(item, f"{where}[{i}]"), f"{where}[{i}]")
            for i, item in enumerate(value)
        )
    if text == "tuple[HostPathVolume, ...]":
        if not isinstance(value, list | tuple):
            raise SettingsError(f"{where}: expected a list of {{name, path}}")
        return tuple(_build(HostPathVolume, item, f"{where}[{i}]") for i, item in enumerate(value))
    if text.startswith("tuple[tuple[str,"):
        if isinstance(value, Mapping):
            return tuple((str(k), str(v)) for k, v in value.items())
        if isinstance(value, tuple):
            return value
        raise SettingsError(f"{where}: expected a mapping")
    if text.startswith("tuple["):
        if not isinstance(value, list | tuple):
            raise SettingsError(f"{where}: expected a list")
        return tuple(value)
    if text == "float":
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise SettingsError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if text == "int" and not (isinstance(value, int) and not isinstance(value, bool)):
        raise SettingsError(f"{where}: expected an integer, got {value!r}")
    if text == "bool" and not isinstance(value, bool):
        raise SettingsError(f"{where}: expected true or false, got {value!r}")
    if text.startswith("Literal[") or text in {"RuleMode", "BelowMinNodes", "Layout"}:
        return value
    return value


def _profile_data(item: Any, where: str) -> Any:
    """Profiles may name a built-in profile to start from (`base: ascend-1980`)."""
    if not isinstance(item, Mapping):
        raise SettingsError(f"{where}: expected a mapping")
    data = dict(item)
    base_name = data.pop("base", None)
    if base_name is None:
        return data
    base = next((p for p in DEFAULT_PROFILES if p.label_value == base_name), None)
    if base is None:
        raise SettingsError(f"{where}.base: unknown built-in profile {base_name!r}")
    merged = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    merged.update({_snake(str(k)): v for k, v in data.items()})
    return merged


def _snake(key: str) -> str:
    """Accept camelCase keys (Kubernetes style) as well as snake_case."""
    out = []
    for ch in key:
        if ch.isupper():
            out.append("_")
            out.append(ch.lower())
        else:
            out.append(ch)
    return "".join(out).replace("-", "_")


def settings_from_mapping(data: Mapping[str, Any] | None) -> Settings:
    """Build and check the settings tree from parsed YAML (None gives the defaults)."""
    settings = _build(Settings, data or {}, "settings")
    _check(settings)
    return settings


def load_settings(path: str | Path | None = None, **overrides: Any) -> Settings:
    """Read the settings file (if any), then apply flag overrides given as top-level fields."""
    data: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SettingsError(f"{path}: cannot read settings: {exc}") from exc
        if loaded is not None and not isinstance(loaded, Mapping):
            raise SettingsError(f"{path}: the settings file must be a mapping")
        data = dict(loaded or {})
    settings = settings_from_mapping(data)
    if overrides:
        settings = dataclasses.replace(settings, **overrides)
        _check(settings)
    return settings


def _check(settings: Settings) -> None:
    seen: set[str] = set()
    for i, profile in enumerate(settings.profiles):
        where = f"settings.profiles[{i}]"
        if profile.label_value in seen:
            raise SettingsError(f"{where}.labelValue: duplicate profile {profile.label_value!r}")
        seen.add(profile.label_value)
        if profile.cards_per_node < 1:
            raise SettingsError(f"{where}.cardsPerNode: must be at least 1")
        if any(c < 1 or c > profile.cards_per_node for c in profile.allowed_cards):
            raise SettingsError(f"{where}.allowedCards: every count must be in 1..cardsPerNode")
        if profile.rank_table_version not in ("1.0", "1.2"):
            raise SettingsError(f'{where}.rankTableVersion: must be "1.0" or "1.2"')
    if settings.policy.below_min_nodes not in ("reject", "skip"):
        raise SettingsError("settings.policy.belowMinNodes: must be reject or skip")
    for rule, mode in settings.policy.rule_modes:
        if mode not in ("reject", "warn"):
            raise SettingsError(f"settings.policy.ruleModes.{rule}: must be reject or warn")
    if settings.controller.orphan_grace_s <= 0:
        raise SettingsError("settings.controller.orphanGraceS: must be positive (seconds)")
    if settings.controller.pending_event_interval_s < 0:
        raise SettingsError("settings.controller.pendingEventIntervalS: must be zero or more (seconds)")
    if settings.controller.configmap_create_workers < 1:
        raise SettingsError("settings.controller.configmapCreateWorkers: must be at least 1")
    if settings.extender.max_body_mib < 1:
        raise SettingsError("settings.extender.maxBodyMib: must be at least 1 (MiB)")
    if settings.extender.max_state_mib < 1:
        raise SettingsError("settings.extender.maxStateMib: must be at least 1 (MiB)")
    if settings.extender.max_session_open_mib < 1:
        raise SettingsError("settings.extender.maxSessionOpenMib: must be at least 1 (MiB)")
    if settings.extender.job_memory_ttl_s <= 0:
        raise SettingsError("settings.extender.jobMemoryTtlS: must be positive (seconds)")
    if settings.extender.plan_attempts < 1:
        raise SettingsError("settings.extender.planAttempts: must be at least 1")
    if settings.extender.plan_ttl_s <= 0:
        raise SettingsError("settings.extender.planTtlS: must be positive (seconds)")
    if not settings.extender.score_weight > 0:
        raise SettingsError("settings.extender.scoreWeight: must be positive")
    if settings.planning.qps_per_connection < 1:
        raise SettingsError("settings.planning.qpsPerConnection: must be at least 1")
    volcano = settings.volcano
    release = None if volcano.version == "auto" else volcano_release(volcano.version)
    if volcano.version != "auto" and release is None:
        raise SettingsError(f"settings.volcano.version: {volcano.version!r} is not auto or a release like 1.7 or 1.10")
    if release is not None and release < MIN_VOLCANO_RELEASE:
        raise SettingsError(
            f"settings.volcano.version: ringroute supports Volcano 1.7 and later (got {volcano.version!r})"
        )
    if volcano.configmap_plugin not in ("absent", "installed"):
        raise SettingsError("settings.volcano.configmapPlugin: must be absent or installed")
    topology_request = volcano.network_topology
    if topology_request.inject not in ("auto", "always", "never"):
        raise SettingsError("settings.volcano.networkTopology.inject: must be auto, always or never")
    if topology_request.mode not in ("hard", "soft"):
        raise SettingsError("settings.volcano.networkTopology.mode: must be hard or soft")
    if topology_request.highest_tier_allowed < 1:
        raise SettingsError("settings.volcano.networkTopology.highestTierAllowed: must be at least 1")
    if topology_request.inject == "always" and release is not None and release < NETWORK_TOPOLOGY_RELEASE:
        raise SettingsError(
            "settings.volcano.networkTopology.inject: always needs Volcano 1.12 or later (spec.networkTopology); "
            f"volcano.version is {volcano.version!r}: use never, or the scheduler extender"
        )


MIN_VOLCANO_RELEASE = (1, 7)
"""The oldest Volcano release ringroute supports."""
NETWORK_TOPOLOGY_RELEASE = (1, 12)
"""The first Volcano release whose Job has `spec.networkTopology` (scheduling on HyperNodes)."""


def volcano_release(version: str) -> tuple[int, int] | None:
    """(major, minor) of a Volcano release string ("1.10", "v1.10.2"); None when it is not one."""
    parts = version.strip().lstrip("v").split(".")
    if len(parts) < 2 or not all(p.isascii() and p.isdecimal() for p in parts[:2]):
        return None
    return int(parts[0]), int(parts[1])


def default_settings() -> Settings:
    """The built-in settings (what a cluster gets with no settings file)."""
    return Settings()


__all__ = [
    "DEFAULT_PROFILES",
    "INJECTED_ANNOTATION",
    "LAUNCHER_ANNOTATION",
    "MIN_VOLCANO_RELEASE",
    "NETWORK_TOPOLOGY_RELEASE",
    "NPU_PODS_ANNOTATION",
    "RANK_TABLE_WRITER_ANNOTATION",
    "RING_LABEL",
    "ROUTE_PLAN_ANNOTATION",
    "ROUTE_PLAN_ENV",
    "AcceleratorProfile",
    "ControllerSettings",
    "ExtenderSettings",
    "HostPathVolume",
    "PlanningSettings",
    "PolicySettings",
    "Settings",
    "SettingsError",
    "NetworkTopologySettings",
    "TopologySettings",
    "VolcanoSettings",
    "default_settings",
    "volcano_release",
    "load_settings",
    "settings_from_mapping",
]
