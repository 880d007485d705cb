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

# -- placement and topology sources (planner/_placement.py, planner/_topology_sources.py) --
# -- rank-table formats (planner/_ranktable.py) --
# -- planning, routes and simulation (planner/_plan.py, _ring.py, _hd.py, _routes.py, _simulate.py) --

__all__ = [
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
