"""ringroute's planning library: topology model, rank-table formats, rank planning, route pinning, simulation.

Pure: numpy/scipy in, plain data out. It imports nothing from `webhook`, aiohttp or kubernetes_asyncio.
"""

from planner._errors import InputError, PlacementError, RankTableError, TopologyError
from planner._model import (
    Device,
    Fabric,
    Layout,
    Pattern,
    Placement,
    Routing,
    Server,
    Topology,
)

# -- placement, topology sources and rank-table formats (planner/io) --
from planner.io._placement import (
    PlacementProblem,
    PlacementReadout,
    load_kube_objects,
    placement_from_pods,
    read_placement,
    render_placement_problems,
)
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

# -- rank planning (planner/core) --
# isort: split
from planner.core._baselines import BASELINES, baseline_order
from planner.core._plan import plan_ranks
from planner.core._result import STATUS_MESSAGES, PlanResult

# -- network model, simulator and route pinning (planner/sim) --
# isort: split
from planner.sim._colouring import edge_colouring
from planner.sim._evaluate import (
    OrderEvaluation,
    SeedMetrics,
    evaluate_order,
    order_seed_metrics,
    paired_difference,
    ring_cross_edges,
)
from planner.sim._loads import ecmp_max_loads, flow_rates, link_loads, max_link_loads, max_min_rates
from planner.sim._network import LINK_TIER_LEAF, LINK_TIER_NIC, LINK_TIER_SPINE, JobNetwork, job_network
from planner.sim._patterns import halving_doubling_sizes, halving_doubling_steps, lambda_star, ring_flows
from planner.sim._pinning import pin_routes
from planner.sim._plot import plot_link_loads
from planner.sim._route_plan import RoutePlan, RoutesFile

__all__ = [
    # planner-io
    "DEFAULT_LABEL_KEYS",
    "INITIALIZING_RANK_TABLE",
    "PlacementProblem",
    "PlacementReadout",
    "RankTable",
    "RankTableDevice",
    "RankTableServer",
    "build_rank_table",
    "check_fabric",
    "dump_topology_file",
    "generate_topology",
    "load_kube_objects",
    "load_topology_file",
    "nodes_for_topology",
    "parse_rank_table",
    "parse_ranks_env",
    "placement_from_pods",
    "read_placement",
    "render_placement_problems",
    "render_rank_table",
    "render_ranks_env",
    "topology_for_placement",
    "topology_from_hypernodes",
    "topology_from_nodes",
    "topology_from_tor_configmap",
    # planner-core
    "BASELINES",
    "STATUS_MESSAGES",
    "PlanResult",
    "baseline_order",
    "plan_ranks",
    # planner-sim
    "LINK_TIER_LEAF",
    "LINK_TIER_NIC",
    "LINK_TIER_SPINE",
    "JobNetwork",
    "OrderEvaluation",
    "RoutePlan",
    "RoutesFile",
    "SeedMetrics",
    "ecmp_max_loads",
    "edge_colouring",
    "evaluate_order",
    "flow_rates",
    "halving_doubling_sizes",
    "halving_doubling_steps",
    "job_network",
    "lambda_star",
    "link_loads",
    "max_link_loads",
    "max_min_rates",
    "order_seed_metrics",
    "paired_difference",
    "pin_routes",
    "plot_link_loads",
    "ring_cross_edges",
    "ring_flows",
    # shared model
    "Device",
    "InputError",
    "PlacementError",
    "RankTableError",
    "TopologyError",
    "Fabric",
    "Layout",
    "Pattern",
    "Placement",
    "Routing",
    "Server",
    "Topology",
]
