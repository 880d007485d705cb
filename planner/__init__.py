"""ringroute's planning library: topology model, rank-table formats, rank planning, route pinning, simulation.

Pure: numpy/scipy in, plain data out. It imports nothing from `webhook`, aiohttp or kubernetes_asyncio.
Every public name lives here; the modules under `io`, `core`, `sim` and `fabric` are private. Names load on first use
(PEP 562), so `from planner import Fabric` costs no numpy or scipy import: settings parsing and `ringroute --help`
stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Which private module defines each public name; `__getattr__` imports it on first use.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "planner._errors": ("InputError", "PlacementError", "RankTableError", "TopologyError"),
    "planner._model": (
        "Device",
        "Fabric",
        "IgnoredPod",
        "Layout",
        "Pattern",
        "Placement",
        "Routing",
        "Server",
        "Topology",
    ),
    "planner._hash_model": (
        "HASH_FUNCTIONS",
        "BucketRule",
        "FabricSwitch",
        "HashFunction",
        "HashModel",
        "HashProbe",
        "HashSample",
        "HashSpec",
        "LearnedHash",
        "SwitchHash",
        "SwitchTier",
        "check_switch_hash",
        "spine_switch_name",
        "tier1_switch_name",
        "tier_of_switch_name",
    ),
    "planner.io._device_annotations": ("DEFAULT_ANNOTATION_KEYS",),
    "planner.io._hypernode_tree": ("HyperNodeInfo", "HyperNodeTree", "hypernode_tree"),
    "planner.io._quantity": ("MAX_EXPONENT", "MAX_QUANTITY_CHARS", "read_quantity"),
    "planner.io._hash_model_file": ("dump_hash_model", "hash_model_document", "load_hash_model", "read_hash_model"),
    "planner.io._hash_samples": ("MAX_SAMPLES", "MAX_SAMPLE_LINE_CHARS", "dump_hash_probes", "read_hash_samples"),
    "planner.io._kube_objects": ("load_kube_objects",),
    "planner.io._placement": ("placement_from_pods", "read_placement"),
    "planner.io._placement_types": ("PlacementProblem", "PlacementReadout", "render_placement_problems"),
    "planner.io._ranktable": (
        "INITIALIZING_RANK_TABLE",
        "RankTable",
        "RankTableDevice",
        "RankTableServer",
        "build_rank_table",
        "parse_rank_table",
        "parse_ranks_env",
        "render_rank_table",
        "render_ranks_env",
    ),
    "planner.io._topology_file": (
        "check_fabric",
        "dump_topology_file",
        "generate_topology",
        "load_topology_file",
        "nodes_for_topology",
    ),
    "planner.io._topology_sources": (
        "DEFAULT_LABEL_KEYS",
        "topology_for_placement",
        "topology_from_hypernodes",
        "topology_from_nodes",
        "topology_from_tor_configmap",
    ),
    "planner.core._baselines": ("BASELINES", "baseline_order"),
    "planner.core._plan": ("plan_ranks",),
    "planner.core._ring_order": ("RingOrder", "ring_order"),
    "planner.core._result": ("STATUS_MESSAGES", "PlanResult"),
    "planner.core._source_ports": ("SteeringResult", "steer_source_ports"),
    "planner.core._fabric_load": ("check_one_fabric", "fabric_ledger", "resolve_nodes", "running_job_traffic"),
    "planner.io._running_job": (
        "RANK_TABLE_FILE",
        "REPORT_FILE",
        "ROUTES_FILE",
        "STATE_FILE",
        "RouteRecord",
        "RunningJob",
        "read_running_job",
    ),
    "planner.sim._fabric_links": ("FabricLinks", "LinkBackground", "LinkName", "fabric_links"),
    "planner.sim._ledger": (
        "Delivery",
        "FabricLedger",
        "FabricReport",
        "JobOutlook",
        "JobShare",
        "JobTraffic",
        "LinkUse",
        "job_traffic",
        "plan_outlook",
    ),
    "planner.io._qp_ports": (
        "MAX_CONFIG_LINES",
        "QP_PORT_CONFIG_FILE",
        "QpPortLine",
        "read_qp_port_config",
        "render_qp_port_config",
    ),
    "planner.fabric._calibrate": ("calibrate_hash_model",),
    "planner.fabric._calibration_result": (
        "CALIBRATION_STATUS_MESSAGES",
        "CalibrationResult",
        "CalibrationStatus",
        "HoldoutCheck",
        "SwitchCalibration",
        "describe_switch_hash",
    ),
    "planner.fabric._learning": ("samples_to_learn",),
    "planner.sim._colouring": ("edge_colouring",),
    "planner.sim._evaluate": (
        "LinkLoads",
        "OrderEvaluation",
        "SeedMetrics",
        "evaluate_order",
        "order_link_loads",
        "order_seed_metrics",
        "paired_difference",
        "ring_cross_edges",
    ),
    "planner.sim._loads": ("ecmp_max_loads", "flow_rates", "link_loads", "max_link_loads", "max_min_rates"),
    "planner.sim._network": ("LINK_TIER_LEAF", "LINK_TIER_NIC", "LINK_TIER_SPINE", "JobNetwork", "job_network"),
    "planner.sim._patterns": ("halving_doubling_sizes", "halving_doubling_steps", "lambda_star", "ring_flows"),
    "planner.fabric._hashing": ("compile_switch_hash", "hash_output"),
    "planner.sim._pinning": ("pin_routes", "routes_from_assignment"),
    "planner.fabric._port_search": (
        "DEFAULT_PORT_RANGE",
        "CompiledModel",
        "SourcePorts",
        "spread_ports",
    ),
    "planner.fabric._hashed_routes": ("hashed_routes",),
    # matplotlib is imported only when a plot is drawn (the optional `plot` extra)
    "planner.sim._plot": ("link_load_figure", "plot_link_loads"),
    "planner.fabric._probes": (
        "DEFAULT_PROBE_PORTS",
        "AddressPool",
        "SwitchProbes",
        "address_pool",
        "fabric_switches",
        "probe_tuples",
        "switch_pools",
    ),
    "planner.sim._route_plan": ("RoutePlan", "RoutesFile"),
    "planner.sim._summary": (
        "MetricChange",
        "explain_max_link_load",
        "format_fraction",
        "format_gain",
        "format_load",
        "headline",
        "metric_changes",
        "run_title",
        "seed_note",
    ),
}
_MODULE_OF: dict[str, str] = {name: module for module, names in _EXPORTS.items() for name in names}

if TYPE_CHECKING:
    from planner._errors import InputError, PlacementError, RankTableError, TopologyError
    from planner._hash_model import (
        HASH_FUNCTIONS,
        BucketRule,
        FabricSwitch,
        HashFunction,
        HashModel,
        HashProbe,
        HashSample,
        HashSpec,
        LearnedHash,
        SwitchHash,
        SwitchTier,
        check_switch_hash,
        spine_switch_name,
        tier1_switch_name,
        tier_of_switch_name,
    )
    from planner._model import Device, Fabric, IgnoredPod, Layout, Pattern, Placement, Routing, Server, Topology
    from planner.core._baselines import BASELINES, baseline_order
    from planner.core._fabric_load import check_one_fabric, fabric_ledger, resolve_nodes, running_job_traffic
    from planner.core._plan import plan_ranks
    from planner.core._result import STATUS_MESSAGES, PlanResult
    from planner.core._ring_order import RingOrder, ring_order
    from planner.core._source_ports import SteeringResult, steer_source_ports
    from planner.fabric._calibrate import calibrate_hash_model
    from planner.fabric._calibration_result import (
        CALIBRATION_STATUS_MESSAGES,
        CalibrationResult,
        CalibrationStatus,
        HoldoutCheck,
        SwitchCalibration,
        describe_switch_hash,
    )
    from planner.fabric._hashed_routes import hashed_routes
    from planner.fabric._hashing import compile_switch_hash, hash_output
    from planner.fabric._learning import samples_to_learn
    from planner.fabric._port_search import DEFAULT_PORT_RANGE, CompiledModel, SourcePorts, spread_ports
    from planner.fabric._probes import (
        DEFAULT_PROBE_PORTS,
        AddressPool,
        SwitchProbes,
        address_pool,
        fabric_switches,
        probe_tuples,
        switch_pools,
    )
    from planner.io._device_annotations import DEFAULT_ANNOTATION_KEYS
    from planner.io._hash_model_file import dump_hash_model, hash_model_document, load_hash_model, read_hash_model
    from planner.io._hash_samples import MAX_SAMPLE_LINE_CHARS, MAX_SAMPLES, dump_hash_probes, read_hash_samples
    from planner.io._hypernode_tree import HyperNodeInfo, HyperNodeTree, hypernode_tree
    from planner.io._kube_objects import load_kube_objects
    from planner.io._placement import placement_from_pods, read_placement
    from planner.io._placement_types import PlacementProblem, PlacementReadout, render_placement_problems
    from planner.io._qp_ports import (
        MAX_CONFIG_LINES,
        QP_PORT_CONFIG_FILE,
        QpPortLine,
        read_qp_port_config,
        render_qp_port_config,
    )
    from planner.io._quantity import MAX_EXPONENT, MAX_QUANTITY_CHARS, read_quantity
    from planner.io._ranktable import (
        INITIALIZING_RANK_TABLE,
        RankTable,
        RankTableDevice,
        RankTableServer,
        build_rank_table,
        parse_rank_table,
        parse_ranks_env,
        render_rank_table,
        render_ranks_env,
    )
    from planner.io._running_job import (
        RANK_TABLE_FILE,
        REPORT_FILE,
        ROUTES_FILE,
        STATE_FILE,
        RouteRecord,
        RunningJob,
        read_running_job,
    )
    from planner.io._topology_file import (
        check_fabric,
        dump_topology_file,
        generate_topology,
        load_topology_file,
        nodes_for_topology,
    )
    from planner.io._topology_sources import (
        DEFAULT_LABEL_KEYS,
        topology_for_placement,
        topology_from_hypernodes,
        topology_from_nodes,
        topology_from_tor_configmap,
    )
    from planner.sim._colouring import edge_colouring
    from planner.sim._evaluate import (
        LinkLoads,
        OrderEvaluation,
        SeedMetrics,
        evaluate_order,
        order_link_loads,
        order_seed_metrics,
        paired_difference,
        ring_cross_edges,
    )
    from planner.sim._fabric_links import FabricLinks, LinkBackground, LinkName, fabric_links
    from planner.sim._ledger import (
        Delivery,
        FabricLedger,
        FabricReport,
        JobOutlook,
        JobShare,
        JobTraffic,
        LinkUse,
        job_traffic,
        plan_outlook,
    )
    from planner.sim._loads import ecmp_max_loads, flow_rates, link_loads, max_link_loads, max_min_rates
    from planner.sim._network import LINK_TIER_LEAF, LINK_TIER_NIC, LINK_TIER_SPINE, JobNetwork, job_network
    from planner.sim._patterns import halving_doubling_sizes, halving_doubling_steps, lambda_star, ring_flows
    from planner.sim._pinning import pin_routes, routes_from_assignment
    from planner.sim._plot import link_load_figure, plot_link_loads
    from planner.sim._route_plan import RoutePlan, RoutesFile
    from planner.sim._summary import (
        MetricChange,
        explain_max_link_load,
        format_fraction,
        format_gain,
        format_load,
        headline,
        metric_changes,
        run_title,
        seed_note,
    )
else:
    # Hidden from type checkers: to mypy a module-level __getattr__ makes every name importable (as Any), so a
    # misspelt `from planner import ...` would pass; the block above gives them each public name with its type.
    def __getattr__(name: str) -> Any:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module 'planner' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    # one fabric, many jobs: the running jobs' load on every link, and what it leaves for the next job
    "Delivery",
    "FabricLedger",
    "FabricLinks",
    "FabricReport",
    "JobOutlook",
    "JobShare",
    "JobTraffic",
    "LinkBackground",
    "LinkName",
    "LinkUse",
    "RANK_TABLE_FILE",
    "REPORT_FILE",
    "ROUTES_FILE",
    "STATE_FILE",
    "RouteRecord",
    "RunningJob",
    "check_one_fabric",
    "fabric_ledger",
    "fabric_links",
    "job_traffic",
    "plan_outlook",
    "read_running_job",
    "resolve_nodes",
    "running_job_traffic",
    # source-port steering and MultiQpSrcPort.cfg
    "DEFAULT_PORT_RANGE",
    "CompiledModel",
    "MAX_CONFIG_LINES",
    "QP_PORT_CONFIG_FILE",
    "QpPortLine",
    "SourcePorts",
    "SteeringResult",
    "compile_switch_hash",
    "hash_output",
    "hashed_routes",
    "read_qp_port_config",
    "render_qp_port_config",
    "routes_from_assignment",
    "spread_ports",
    "steer_source_ports",
    # shared model and errors
    "Device",
    "Fabric",
    "IgnoredPod",
    "InputError",
    "Layout",
    "Pattern",
    "Placement",
    "PlacementError",
    "RankTableError",
    "Routing",
    "Server",
    "Topology",
    "TopologyError",
    # the fabric's hash model: declared and learned switch hashes, samples and probes
    "HASH_FUNCTIONS",
    "BucketRule",
    "FabricSwitch",
    "HashFunction",
    "HashModel",
    "HashProbe",
    "HashSample",
    "HashSpec",
    "LearnedHash",
    "SwitchHash",
    "SwitchTier",
    "check_switch_hash",
    "spine_switch_name",
    "tier1_switch_name",
    "tier_of_switch_name",
    # calibration of the hash model from switches' answers, and the probes to ask them
    "CALIBRATION_STATUS_MESSAGES",
    "DEFAULT_PROBE_PORTS",
    "AddressPool",
    "CalibrationResult",
    "CalibrationStatus",
    "HoldoutCheck",
    "SwitchCalibration",
    "SwitchProbes",
    "address_pool",
    "calibrate_hash_model",
    "describe_switch_hash",
    "fabric_switches",
    "probe_tuples",
    "samples_to_learn",
    "switch_pools",
    # io: placement, topology sources and file, rank-table formats
    "DEFAULT_ANNOTATION_KEYS",
    "MAX_EXPONENT",
    "MAX_QUANTITY_CHARS",
    "DEFAULT_LABEL_KEYS",
    "HyperNodeInfo",
    "HyperNodeTree",
    "INITIALIZING_RANK_TABLE",
    "PlacementProblem",
    "PlacementReadout",
    "RankTable",
    "RankTableDevice",
    "RankTableServer",
    "build_rank_table",
    "check_fabric",
    "MAX_SAMPLES",
    "MAX_SAMPLE_LINE_CHARS",
    "dump_hash_model",
    "dump_hash_probes",
    "hash_model_document",
    "load_hash_model",
    "read_hash_model",
    "read_hash_samples",
    "dump_topology_file",
    "generate_topology",
    "hypernode_tree",
    "load_kube_objects",
    "load_topology_file",
    "nodes_for_topology",
    "parse_rank_table",
    "parse_ranks_env",
    "placement_from_pods",
    "read_placement",
    "read_quantity",
    "render_placement_problems",
    "render_rank_table",
    "render_ranks_env",
    "topology_for_placement",
    "topology_from_hypernodes",
    "topology_from_nodes",
    "topology_from_tor_configmap",
    # core: rank planning and baseline orders
    "BASELINES",
    "STATUS_MESSAGES",
    "PlanResult",
    "baseline_order",
    "plan_ranks",
    "RingOrder",
    "ring_order",
    # sim: network model, simulator, route pinning, plots
    "LINK_TIER_LEAF",
    "LINK_TIER_NIC",
    "LINK_TIER_SPINE",
    "JobNetwork",
    "LinkLoads",
    "MetricChange",
    "OrderEvaluation",
    "RoutePlan",
    "RoutesFile",
    "SeedMetrics",
    "ecmp_max_loads",
    "edge_colouring",
    "evaluate_order",
    "explain_max_link_load",
    "flow_rates",
    "format_fraction",
    "format_gain",
    "format_load",
    "halving_doubling_sizes",
    "halving_doubling_steps",
    "headline",
    "job_network",
    "lambda_star",
    "link_load_figure",
    "link_loads",
    "max_link_loads",
    "max_min_rates",
    "metric_changes",
    "order_link_loads",
    "order_seed_metrics",
    "paired_difference",
    "pin_routes",
    "plot_link_loads",
    "ring_cross_edges",
    "ring_flows",
    "run_title",
    "seed_note",
]
