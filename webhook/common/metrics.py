"""Prometheus metrics of the ringroute service, one registry per process (tests build their own)."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True)
class Metrics:
    """Every metric the service exports; admission, controller and extender share one registry."""

    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        r = self.registry
        set_ = object.__setattr__
        set_(
            self,
            "admission_requests",
            Counter(
                "ringroute_admission_requests_total",
                "Admission requests by endpoint and verdict.",
                ["endpoint", "verdict"],
                registry=r,
            ),
        )
        set_(
            self,
            "admission_latency",
            Histogram(
                "ringroute_admission_latency_seconds",
                "Admission handling time by endpoint.",
                ["endpoint"],
                buckets=_LATENCY_BUCKETS,
                registry=r,
            ),
        )
        set_(
            self,
            "admission_busy",
            Counter(
                "ringroute_admission_busy_total",
                "Admission requests answered busy (also counted as verdict busy), by endpoint and answer: denied "
                "(read, but no worker thread free within admission.answerWithinS: HTTP 200, allowed false, code 429), "
                "refused_at_once (more bodies wait for room than could be read in time: HTTP 429 with Retry-After), "
                "refused_late (its body not read within admission.answerWithinS: HTTP 429).",
                ["endpoint", "answer"],
                registry=r,
            ),
        )
        set_(
            self,
            "admission_violations",
            Counter(
                "ringroute_admission_violations_total",
                "Policy violations found, by rule.",
                ["rule"],
                registry=r,
            ),
        )
        set_(
            self,
            "configmap_creates",
            Counter(
                "ringroute_configmap_creates_total",
                "Rank-table ConfigMaps the controller created for new Jobs, by outcome (created, exists, error).",
                ["outcome"],
                registry=r,
            ),
        )
        set_(
            self,
            "plans",
            Counter(
                "ringroute_plans_total",
                "Rank tables planned by the controller, by outcome.",
                ["outcome"],
                registry=r,
            ),
        )
        set_(
            self,
            "plan_latency",
            Histogram(
                "ringroute_plan_seconds",
                "Planner wall time per rank table.",
                buckets=_LATENCY_BUCKETS,
                registry=r,
            ),
        )
        set_(
            self,
            "pod_updates",
            Counter(
                "ringroute_pod_updates_total",
                "Pod annotation updates after rank-table writes (kubelet then refreshes the table file), by outcome: "
                "updated, gone (404), refused (422, not retried), retried (a failed attempt, retried with backoff), "
                "given_up (still failing after controller.podUpdateRetryS).",
                ["outcome"],
                registry=r,
            ),
        )
        set_(
            self,
            "table_to_pods",
            Histogram(
                "ringroute_rank_table_pods_updated_seconds",
                "Time from a rank-table write to the last pod of its job updated.",
                buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0),
                registry=r,
            ),
        )
        set_(
            self,
            "reconcile_latency",
            Histogram(
                "ringroute_reconcile_seconds",
                "Controller reconcile time per job.",
                buckets=_LATENCY_BUCKETS,
                registry=r,
            ),
        )
        set_(
            self,
            "api_errors",
            Counter(
                "ringroute_api_errors_total",
                "Kubernetes API errors by operation and status.",
                ["operation", "status"],
                registry=r,
            ),
        )
        set_(
            self,
            "leader",
            Gauge("ringroute_leader", "1 while this replica holds the controller lease.", registry=r),
        )
        set_(
            self,
            "extender_requests",
            Counter(
                "ringroute_extender_requests_total",
                "Scheduler extender calls by verb and outcome.",
                ["verb", "outcome"],
                registry=r,
            ),
        )
        set_(
            self,
            "extender_latency",
            Histogram(
                "ringroute_extender_latency_seconds",
                "Scheduler extender handling time by verb.",
                ["verb"],
                buckets=_LATENCY_BUCKETS,
                registry=r,
            ),
        )
        set_(
            self,
            "extender_degraded",
            Counter(
                "ringroute_extender_degraded_total",
                "Extender calls answered with neutral scores after an internal error.",
                ["verb"],
                registry=r,
            ),
        )
        set_(
            self,
            "extender_gang_plans",
            Counter(
                "ringroute_extender_gang_plans_total",
                "Gang plans of route-planned jobs: enforced (predicate keeps the job on its leaves), scored (only "
                "prioritize steers); and jobs not planned: no_fit (the free nodes cannot hold the job, within one "
                "domain of its hard networkTopology tier), size_unknown, no_topology (no node has topology labels), "
                "left_to_volcano (hard networkTopology at a tier the node labels do not describe: the extender "
                "stays out), placed (no task of the job is pending).",
                ["outcome"],
                registry=r,
            ),
        )
        set_(
            self,
            "extender_session_bytes",
            Gauge(
                "ringroute_extender_session_open_bytes",
                "Size of the last onSessionOpen body (the scheduler cache Volcano sends each session).",
                registry=r,
            ),
        )
        set_(
            self,
            "extender_session_nodes",
            Gauge("ringroute_extender_session_nodes", "Nodes in the last onSessionOpen body.", registry=r),
        )
        set_(
            self,
            "extender_state_bytes",
            Gauge(
                "ringroute_extender_state_bytes",
                "Estimated bytes of the node views the extender keeps (bounded by extender.maxStateMib).",
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_max_link_load",
            Gauge(
                "ringroute_fabric_max_link_load",
                "Largest load (flows) on any switch link over every running job ringroute counts.",
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_bound",
            Gauge(
                "ringroute_fabric_max_link_load_bound",
                "Lower bound on that load over every routing of all the running jobs' flows together.",
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_jobs",
            Gauge(
                "ringroute_fabric_jobs",
                "Running jobs in the fabric load ledger, by delivery.",
                ["delivery"],
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_job_busbw",
            Gauge(
                "ringroute_fabric_job_busbw",
                "Predicted bus bandwidth (fraction of line rate) of each running job with every job's load counted.",
                ["namespace", "job"],
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_rebuild",
            Histogram(
                "ringroute_fabric_ledger_rebuild_seconds",
                "Time to rebuild the fabric load ledger from every completed rank-table ConfigMap.",
                buckets=(*_LATENCY_BUCKETS, 30.0, 60.0),
                registry=r,
            ),
        )
        set_(
            self,
            "fabric_replans",
            Counter(
                "ringroute_fabric_replans_total",
                "Plans made again because the links they were planned around changed before their table was written.",
                registry=r,
            ),
        )
        # process_resident_memory_bytes, process_cpu_seconds_total, open file descriptors (Linux /proc).
        ProcessCollector(registry=r)

    admission_requests: Counter = field(init=False)
    admission_latency: Histogram = field(init=False)
    admission_busy: Counter = field(init=False)
    admission_violations: Counter = field(init=False)
    configmap_creates: Counter = field(init=False)
    plans: Counter = field(init=False)
    plan_latency: Histogram = field(init=False)
    pod_updates: Counter = field(init=False)
    table_to_pods: Histogram = field(init=False)
    reconcile_latency: Histogram = field(init=False)
    api_errors: Counter = field(init=False)
    leader: Gauge = field(init=False)
    extender_requests: Counter = field(init=False)
    extender_latency: Histogram = field(init=False)
    extender_degraded: Counter = field(init=False)
    extender_gang_plans: Counter = field(init=False)
    extender_session_bytes: Gauge = field(init=False)
    extender_session_nodes: Gauge = field(init=False)
    extender_state_bytes: Gauge = field(init=False)
    fabric_max_link_load: Gauge = field(init=False)
    fabric_bound: Gauge = field(init=False)
    fabric_jobs: Gauge = field(init=False)
    fabric_job_busbw: Gauge = field(init=False)
    fabric_rebuild: Histogram = field(init=False)
    fabric_replans: Counter = field(init=False)
