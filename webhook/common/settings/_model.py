"""The settings tree: frozen msgspec Structs whose annotations carry the limits (`Annotated[int, Meta(ge=1)]`).

Every field says what its default means.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
import msgspec.inspect

from planner import Fabric
from webhook.common.names import (
    DEVICE_ANNOTATION_910,
    DEVICE_ANNOTATION_1980,
    NPU_LABEL_VALUE,
    NPU_NODE_LABEL,
    NPU_RESOURCE,
)

RuleMode = Literal["reject", "warn"]
BelowMinNodes = Literal["reject", "skip"]

AtLeastOne = Annotated[int, msgspec.Meta(ge=1)]
"""A count: 1 or more."""
Positive = Annotated[float, msgspec.Meta(gt=0)]
"""Seconds or a factor that must be above zero."""
ZeroOrMore = Annotated[float, msgspec.Meta(ge=0)]
"""Seconds where zero means no wait."""
Name = Annotated[str, msgspec.Meta(min_length=1)]
"""A name that must not be empty."""
AbsolutePath = Annotated[str, msgspec.Meta(pattern="^/")]
"""A path from the root of a node or a container."""
NAMESPACE_PATTERN = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
"""A Kubernetes namespace name: an RFC 1123 label."""
NamespaceName = Annotated[str, msgspec.Meta(pattern=NAMESPACE_PATTERN)]
"""The name of a namespace."""
STEERING_TIME_LIMIT_S = 20.0
"""Default of `planning.steeringTimeLimitS` (also what planning without settings uses)."""
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
"""A TCP or UDP port number."""


class HostPathVolume(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A driver file or directory from the node, mounted at the same path in NPU containers."""

    name: Name
    """Volume name in the pod spec."""
    path: AbsolutePath
    """Path on the node, and mount path in the container."""


DEFAULT_HOST_PATHS: tuple[HostPathVolume, ...] = (
    HostPathVolume("ascend-driver", "/usr/local/Ascend/driver"),
    HostPathVolume("ascend-add-ons", "/usr/local/Ascend/add-ons"),
    HostPathVolume("localtime", "/etc/localtime"),
    HostPathVolume("hccn", "/etc/hccn.conf"),
    HostPathVolume("npu-smi", "/usr/local/sbin/npu-smi"),
)


class ServerLimits(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Connection limits and timeouts of one HTTP server (admission or the extender)."""

    max_connections: Annotated[int, msgspec.Meta(ge=1, le=65536)] = 512
    """Open connections at most (per process). At the cap a new connection waits in the listen backlog, and the
    connection idle longest is closed to make room for it; with none idle it waits until one closes (the kernel
    refuses it when the backlog is full). A TLS connection holds about 290 KiB (asyncio's 256 KiB read buffer), so
    512 of them about 148 MiB: with the serving process and the planning process that fits the Deployment's 1 GiB."""
    header_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=15)] = 10.0
    """A request's headers (and a new connection's TLS handshake) must arrive within this, counted from the first
    byte (or the connection); a client that sends them slower is disconnected."""
    body_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 10.0
    """A request's body must arrive within this after its headers; a slower one is disconnected."""
    keep_alive_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=3600)] = 120.0
    """An idle connection is closed after this. Longer than the 90 s after which Go's HTTP clients (kube-apiserver,
    Volcano) close their own idle connections, so the server never closes one a client is about to reuse."""
    body_buffer_mib: Annotated[int, msgspec.Meta(ge=1, le=65536)] = 64
    """Request bodies being read at once, in MiB; a request whose body does not fit waits for room (within
    body_timeout_s). At least the largest body the server accepts."""


class ExtenderServerLimits(ServerLimits, frozen=True, forbid_unknown_fields=True):
    """ServerLimits with the extender's defaults, so a settings file that sets one of them keeps the others:
    Volcano keeps at most 2 idle connections and checks 16 nodes at once, so 256 connections leave room for several
    schedulers (each holds a 64 KiB request-head buffer: 16 MiB at the cap); bodies of up to 256 MiB (onSessionOpen)
    get 30 s and fit the 320 MiB body buffer."""

    max_connections: Annotated[int, msgspec.Meta(ge=1, le=65536)] = 256
    body_timeout_s: Annotated[float, msgspec.Meta(gt=0, le=600)] = 30.0
    body_buffer_mib: Annotated[int, msgspec.Meta(ge=1, le=65536)] = 320


class AcceleratorProfile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What a value of the `ring-controller.cce` label means on this cluster."""

    label_value: Name = NPU_LABEL_VALUE
    """The `ring-controller.cce` label value that selects this profile."""
    resource_name: Name = NPU_RESOURCE
    """Extended resource of one NPU card."""
    cards_per_node: AtLeastOne = 8
    """Cards on one node; a route-planned pod must request all of them."""
    allowed_cards: Annotated[tuple[AtLeastOne, ...], msgspec.Meta(min_length=1)] = (1, 2, 4, 8)
    """Card counts a pod may request (HCCL supports these groupings); each at most cards_per_node."""
    rank_table_version: Literal["1.0", "1.2"] = "1.0"
    """jobstart_hccl.json version: "1.0" for Snt9b/910B, "1.2" (super-pod fields) for Snt9b23/910C."""
    configmap_prefix: str = "configmap1980-"
    """The rank-table ConfigMap is named prefix + job name."""
    mount_path: AbsolutePath = "/user/config"
    """Directory where the ConfigMap is mounted in NPU containers."""
    rank_table_file: Name = "jobstart_hccl.json"
    """File (ConfigMap key) of the rank table under mount_path."""
    device_annotation_keys: Annotated[tuple[Name, ...], msgspec.Meta(min_length=1)] = (
        DEVICE_ANNOTATION_1980,
        DEVICE_ANNOTATION_910,
    )
    """Pod annotations the device plugin writes device info to, first match wins."""
    host_path_volumes: tuple[HostPathVolume, ...] = DEFAULT_HOST_PATHS
    """Driver volumes every NPU container needs."""
    node_selector: tuple[tuple[str, str], ...] = ((NPU_NODE_LABEL, NPU_LABEL_VALUE),)
    """nodeSelector entries added to NPU pod templates when absent (a mapping in YAML)."""
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


class PolicySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """How strictly admission enforces each rule."""

    below_min_nodes: BelowMinNodes = "reject"
    """Route-planned job with fewer than min_route_plan_nodes pods: reject, or admit and plan without routing."""
    min_route_plan_nodes: AtLeastOne = 3
    """Route planning needs at least this many NPU pods (ring neighbours on different leaves)."""
    rule_modes: tuple[tuple[str, RuleMode], ...] = ()
    """Per-rule overrides by rule name (a mapping in YAML); rules not listed reject."""
    shared_host_path_prefixes: tuple[AbsolutePath, ...] = ("/mnt/sfs_turbo", "/mnt/nfs", "/mnt/shared")
    """hostPath prefixes that are network filesystems on this cluster (a working dir there is rejected)."""

    def mode(self, rule: str) -> RuleMode:
        """Enforcement mode of a rule: `reject` unless configured as `warn`."""
        return dict(self.rule_modes).get(rule, "reject")


class TopologySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where the network topology comes from."""

    label_keys: tuple[Name, ...] = ()
    """Node label keys, top-most tier first; empty recognises volcano.sh/tor, NVIDIA and topograph labels."""
    use_hypernodes: bool = True
    """Read Volcano HyperNode objects when the CRD exists (they win over labels)."""
    tor_configmap: str | None = None
    """`namespace/name` of a MindCluster basic-tor-node-cm ConfigMap to read leaves and slice ids from."""
    fabric: Fabric = Fabric()
    """Link rate, uplinks and oversubscription: facts labels do not carry (the default is a 1:1 Clos)."""
    hash_model_file: Name | None = None
    """How the fabric's switches hash a packet onto an uplink (`ringroute fabric calibrate` writes the file; a
    path relative to the settings file's directory, e.g. a second key of the settings ConfigMap). With it, pinned
    routes are delivered as per-queue-pair UDP source ports (MultiQpSrcPort.cfg); None: no steering."""


class PlanningSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Defaults for rank planning."""

    pattern: Literal["ring", "halving-doubling", "mixed"] = "ring"
    """Collective pattern to optimise for."""
    routing: Literal["ecmp", "slice", "pinned"] = "ecmp"
    """Routing model of the fabric."""
    qps_per_connection: Annotated[int, msgspec.Meta(ge=1, le=32)] = 1
    """Queue pairs per cross-leaf connection (1 to 32, HCCL's limit): under ecmp each is hashed on its own; with
    pinned routes each is pinned on its own (a flow may be split over spines). Above 1, or with a hash model,
    ringroute writes them as MultiQpSrcPort.cfg and the launcher points HCCL_RDMA_QP_PORT_CONFIG_PATH at it."""
    source_ports: tuple[Port, Port] = (49152, 65535)
    """First and last UDP source port ringroute may give a queue pair (a range the hosts' firewalls and the
    switches' ACLs let through); wider ranges give steering more ports to choose from."""
    time_limit_s: Positive = 2.0
    """Planner time budget per job."""
    steering_time_limit_s: Positive = STEERING_TIME_LIMIT_S
    """Time the source-port search may take per job (with a hash model): past it, the plan falls back to spread
    ports with a warning Event. 12,288 address pairs x 4 queue pairs of a 4,096-server ring take about 0.2 s;
    halving-doubling on 256 servers of a 3-tier fabric calibrated switch by switch about 8 s."""
    seed: Annotated[int, msgspec.Meta(ge=0)] = 0
    """Seed of the planner's rng (plans are deterministic)."""


class ControllerSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The rank-table controller inside `ringroute serve`."""

    enabled: bool = True
    """Run the controller (every replica still serves admission)."""
    namespaces: tuple[NamespaceName, ...] = ()
    """Namespaces whose jobs the controller manages, each watched on its own (so RBAC may grant only these); empty
    manages every namespace."""
    debounce_s: ZeroOrMore = 0.2
    """Wait this long after the last change to a job before reconciling it."""
    lease_name: Name = "ringroute-controller"
    """coordination.k8s.io Lease used for leader election."""
    lease_namespace: Name = "ringroute-system"
    """Namespace of the Lease."""
    lease_duration_s: Positive = 15.0
    """Lease duration; a new leader takes over at most this long after the old one dies."""
    renew_deadline_s: Positive = 10.0
    """Leader gives up (stops writing) when it cannot renew within this; shorter than lease_duration_s."""
    retry_period_s: Positive = 2.0
    """Interval between lease acquire/renew attempts; shorter than renew_deadline_s."""
    launcher_timeout_s: AtLeastOne = 1800
    """Launcher waits at most this long for a completed rank table."""
    orphan_grace_s: Positive = 300.0
    """Delete ConfigMaps ringroute created for jobs that never appeared after this long."""
    pending_event_interval_s: ZeroOrMore = 10.0
    """Minimum seconds between two RankTablePending Events of one job (posted only when the message changed)."""
    configmap_create_workers: AtLeastOne = 8
    """Concurrent creations of rank-table ConfigMaps for new Jobs (a burst of jobs is served this many at a time)."""
    pod_updates: bool = True
    """After each rank-table write, annotate every pod of the job (`ringroute.io/rank-table-version`) so kubelet
    rewrites its table file at once instead of at its next periodic sync, up to 90 s later (docs/controller.md)."""
    pod_update_concurrency: AtLeastOne = 16
    """Pod updates in flight at once, over all jobs."""
    pod_update_retry_s: Positive = 90.0
    """A pod update that fails is retried with backoff for this long; kubelet's own periodic sync (1 min plus up to
    50 % jitter by default) has refreshed the file by then."""
    planning_process: bool = True
    """Plan in a worker process with its own memory limit, so a runaway plan cannot take admission down (false: in a
    thread of the serving process, which shares its memory limit and interpreter lock with admission)."""
    planning_memory_limit_mib: Annotated[int, msgspec.Meta(ge=192)] = 512
    """Data-size limit of the planning process (RLIMIT_DATA); a plan level that reaches it falls to the next cheaper
    one (the same plan without pinned routes, the ring order alone, pod-index order; docs/controller.md). With the
    serving process beside it (150-250 MiB measured) it fits the Deployment's 1 GiB."""
    planning_timeout_s: Positive = 60.0
    """A plan level still running after this long is stopped (its process killed) and the next cheaper one runs."""


class ExtenderSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The Volcano scheduler extender endpoint."""

    enabled: bool = True
    """Serve /extender/* on its own port."""
    listen: str = "0.0.0.0:8888"
    """Address of the extender's HTTP listener (ADDR:PORT)."""
    max_body_mib: AtLeastOne = 128
    """Largest predicate, prioritize or event body in MiB (a prioritize call of Volcano 1.9+ with default flags is
    at most about 25 MiB; 1.7/1.8 send every free node: about 17 MiB per 1,000). Larger ones get a neutral
    answer, unread."""
    job_memory_ttl_s: Positive = 900.0
    """Forget a job's placement memory when no call mentioned it for this long."""
    gang_planning: bool = True
    """Plan each route-planned job's leaves once per scheduling session and steer Volcano's task-by-task
    allocation to that plan (false: score each call on its own)."""
    enforce_plan: bool = True
    """With onSessionOpen data, the predicate refuses nodes outside the plan: Volcano offers prioritize only a
    share of the feasible nodes on clusters over 100 nodes, so scores alone cannot reach the planned leaves."""
    plan_attempts: AtLeastOne = 2
    """Sessions a job may stay pending under an enforced plan before its plan is only scored, not enforced."""
    plan_ttl_s: Positive = 30.0
    """Without onSessionOpen (sessions invisible), keep a job's plan this long after the last call that used it."""
    score_weight: Positive = 100.0
    """Multiplies the extender's scores (0-100 before weighting, 5 points between preferences): at 100 each step
    is 500 of Volcano's points, more than the 350 nodeorder and binpack can add at their default weights."""
    max_state_mib: AtLeastOne = 256
    """Memory for what the extender keeps between calls (node views, by estimated bytes); the least recently seen
    nodes are forgotten first."""
    max_session_open_mib: AtLeastOne = 256
    """Largest onSessionOpen body read (Volcano sends its whole cache: about 60-85 MiB per 1,000 nodes); a larger
    one is answered without being used, and the extender plans from what calls show."""
    server: ExtenderServerLimits = ExtenderServerLimits()
    """Connections and timeouts of the extender's HTTP server: Volcano keeps at most 2 idle connections and checks 16
    nodes at once, so 256 connections leave room for several schedulers; bodies of up to 256 MiB get 30 s."""


class AdmissionSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The admission webhook."""

    max_job_kib: Annotated[int, msgspec.Meta(ge=64, le=65536)] = 1536
    """Largest job admitted, in KiB of JSON, with what ringroute adds to it: a larger one is denied, naming its size
    (1536 is about the most etcd stores per object by default, so the API server could not store a larger job)."""
    answer_within_s: Annotated[float, msgspec.Meta(gt=0, le=29)] = 4.0
    """A review still waiting this long after its headers (for room to read its body, or its turn) is refused as
    busy: the shipped webhooks' timeoutSeconds (5) less 1 s for the network; keep it below yours."""
    server: ServerLimits = ServerLimits()
    """Connections and timeouts of the admission HTTPS server (requests are at most 7 MiB)."""


class NetworkTopologySettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """`spec.networkTopology` that admission requests for route-planned jobs on Volcano with HyperNodes (v1.12+)."""

    inject: Literal["sized", "fixed", "never"] = "sized"
    """sized: `hard` at the lowest HyperNode tier where one HyperNode holds the whole job by capacity (the
    HyperNodes and Nodes `ringroute serve` watches); fixed: always `mode` at `highestTierAllowed`; never: none."""
    unsized: Literal["omit", "soft"] = "omit"
    """sized, when no HyperNode holds the job: omit (no networkTopology; Volcano and the extender place it as on
    a cluster without HyperNodes) or soft (Volcano prefers one HyperNode and never waits for one)."""
    mode: Literal["hard", "soft"] = "hard"
    """fixed: Volcano's mode, hard keeps the job within the tier, soft prefers it."""
    highest_tier_allowed: AtLeastOne = 1
    """fixed: highest HyperNode tier the job may span (1 = one leaf switch)."""


class VolcanoSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
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


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole configuration of a ringroute process."""

    profiles: Annotated[tuple[AcceleratorProfile, ...], msgspec.Meta(min_length=1)] = DEFAULT_PROFILES
    """Accelerator profiles by label value: the 8-card `ascend-1980` and the 16-card super-pod profile."""
    policy: PolicySettings = PolicySettings()
    """How admission enforces its rules: by default every rule rejects."""
    topology: TopologySettings = TopologySettings()
    """Where the topology comes from: by default HyperNodes, else well-known node labels, on a 1:1 Clos."""
    planning: PlanningSettings = PlanningSettings()
    """Planning defaults: by default rings under ECMP, one queue pair, 2 s per job."""
    controller: ControllerSettings = ControllerSettings()
    """The rank-table controller: by default on, leader-elected through a Lease in ringroute-system."""
    extender: ExtenderSettings = ExtenderSettings()
    """The scheduler extender: by default on port 8888, planning each job's gang."""
    volcano: VolcanoSettings = VolcanoSettings()
    """The Volcano release and distribution: by default detected, open-source Volcano."""
    admission: AdmissionSettings = AdmissionSettings()
    """The admission webhook: by default jobs up to 1.5 MiB."""

    def profile(self, label_value: str | None) -> AcceleratorProfile | None:
        """The profile selected by a `ring-controller.cce` label value, if any."""
        for profile in self.profiles:
            if profile.label_value == label_value:
                return profile
        return None


class SettingsError(ValueError):
    """The settings file or a flag is invalid: every problem found, one line each, naming the key path."""

    def __init__(self, problems: str | tuple[str, ...] | list[str], source: str | None = None) -> None:
        self.problems: tuple[str, ...] = (problems,) if isinstance(problems, str) else tuple(problems)
        """One line per problem, `key.path: what is wrong`."""
        self.source = source
        """The file the problems are in, when there is one."""
        super().__init__(self.problems, source)

    def __str__(self) -> str:
        if self.source is None:
            return "\n".join(self.problems)
        if len(self.problems) == 1:
            return f"{self.source}: {self.problems[0]}"
        lines = "".join(f"\n  {problem}" for problem in self.problems)
        return f"{self.source}: {len(self.problems)} problems{lines}"


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


__all__ = [
    "DEFAULT_PROFILES",
    "AdmissionSettings",
    "MIN_VOLCANO_RELEASE",
    "NETWORK_TOPOLOGY_RELEASE",
    "AcceleratorProfile",
    "ControllerSettings",
    "ExtenderSettings",
    "HostPathVolume",
    "NetworkTopologySettings",
    "PlanningSettings",
    "PolicySettings",
    "Settings",
    "ExtenderServerLimits",
    "ServerLimits",
    "SettingsError",
    "TopologySettings",
    "VolcanoSettings",
    "volcano_release",
]
