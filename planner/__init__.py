"""ringroute's planning library: topology model, rank-table formats, rank planning, route pinning, simulation,
and the fabric model (the switches' hash, its calibration, source-port steering).

Pure: numpy/scipy in, plain data out. It imports nothing from `webhook`, aiohttp or kubernetes_asyncio.
Every public name lives here; the modules under `io`, `core`, `sim` and `fabric` are private. Names load on first
use (PEP 562), so `from planner import Fabric` costs no numpy or scipy import: settings parsing and
`ringroute --help` stay fast.

The public names are written once, as the imports of the `if TYPE_CHECKING:` block below: type checkers read them
there with their real types (every name imported there is public: `implicit_reexport` for this module in
pyproject.toml), and at run time `__getattr__` reads the same block from this file to know which private module
defines each name.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # the shared model and the errors every public function raises
    from planner._errors import InputError, PlacementError, RankTableError, TopologyError

    # the fabric's hash model: declared and learned switch hashes, samples and probes (data)
    from planner._hash_model import (
        FabricSwitch,
        HashFunction,
        HashModel,
        HashProbe,
        HashSample,
        HashSpec,
        LearnedHash,
        SwitchHash,
        tier_of_switch_name,
    )
    from planner._model import Device, Fabric, Layout, Pattern, Placement, Routing, Server, Topology

    # core: rank planning, baseline orders, source ports for a plan, the running jobs' load
    from planner.core._baselines import BASELINES, baseline_order
    from planner.core._fabric_load import fabric_ledger, running_job_traffic
    from planner.core._plan import plan_ranks
    from planner.core._result import PlanResult
    from planner.core._ring_order import RingOrder, ring_order
    from planner.core._source_ports import SteeringResult, steer_source_ports

    # fabric model: calibration of the hash model from switches' answers, the probes to ask them, hashing
    from planner.fabric._calibrate import calibrate_hash_model
    from planner.fabric._calibration_result import CalibrationResult, describe_switch_hash
    from planner.fabric._hashing import compile_switch_hash
    from planner.fabric._learning import samples_to_learn
    from planner.fabric._port_search import CompiledModel
    from planner.fabric._probes import (
        AddressPool,
        SwitchProbes,
        address_pool,
        fabric_switches,
        probe_tuples,
        switch_pools,
    )

    # io: placement, topology sources and file, rank-table, hash-model, samples and port-file formats
    from planner.io._device_annotations import DEFAULT_ANNOTATION_KEYS
    from planner.io._hash_model_file import dump_hash_model, load_hash_model, read_hash_model
    from planner.io._hash_samples import MAX_SAMPLE_LINE_CHARS, dump_hash_probes, read_hash_samples
    from planner.io._hypernode_tree import HyperNodeTree, hypernode_tree
    from planner.io._kube_objects import load_kube_objects
    from planner.io._placement import placement_from_pods, read_placement
    from planner.io._placement_types import PlacementProblem, PlacementReadout, render_placement_problems
    from planner.io._qp_ports import QP_PORT_CONFIG_FILE, QpPortLine
    from planner.io._quantity import MAX_EXPONENT, MAX_QUANTITY_CHARS, read_quantity
    from planner.io._ranktable import (
        INITIALIZING_RANK_TABLE,
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

    # sim: network model, simulator, route pinning, the fabric's links and load ledger, metric text, plots
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
    from planner.sim._fabric_links import LinkBackground, fabric_links
    from planner.sim._ledger import Delivery, FabricLedger, FabricReport, JobOutlook, job_traffic, plan_outlook
    from planner.sim._loads import ecmp_max_loads, flow_rates, link_loads, max_link_loads, max_min_rates
    from planner.sim._network import JobNetwork, job_network
    from planner.sim._patterns import halving_doubling_sizes, halving_doubling_steps, lambda_star, ring_flows
    from planner.sim._pinning import pin_routes

    # matplotlib is imported only when a plot is drawn (the optional `plot` extra)
    from planner.sim._plot import link_load_figure, plot_link_loads
    from planner.sim._route_plan import RoutePlan
    from planner.sim._summary import (
        explain_max_link_load,
        format_fraction,
        format_load,
        headline,
        metric_changes,
        seed_note,
    )
__all__: list[str]
"""Every public name: those the block above imports (built at run time from it)."""

if not TYPE_CHECKING:
    # Which private module defines each public name, read from the block above. Hidden from type checkers: to mypy
    # a module-level __getattr__ makes every name importable (as Any), so a misspelt `from planner import ...` would
    # pass.
    _MODULE_OF: dict[str, str] = {
        alias.name: str(node.module)
        for block in ast.parse(Path(__file__).read_text(encoding="utf-8")).body
        if isinstance(block, ast.If)  # the `if TYPE_CHECKING:` block, the module's only `if`
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    __all__ = sorted(_MODULE_OF)

    def __getattr__(name: str) -> Any:
        module = _MODULE_OF.get(name)
        if module is None:
            raise AttributeError(f"module 'planner' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return __all__
