"""The topology flags of the `fabric` commands (calibrate, load): a topology file or Node objects, and settings."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from webhook.cli.errors import CommandError
from webhook.cli.inputs import read_from, read_text

if TYPE_CHECKING:
    from planner import Topology
    from webhook.common.settings import Settings


def add_topology_arguments(topology: argparse._ArgumentGroup) -> None:
    """The topology flags of the `fabric` commands: a topology file or Node objects, and the settings."""
    topology.add_argument("--topology", type=Path, metavar="FILE", help="ringroute topology file")
    topology.add_argument("--nodes", type=Path, metavar="FILE", help="Node objects whose labels carry the topology")
    topology.add_argument(
        "--topology-labels",
        metavar="K1,K2",
        help="node label keys, top-most first (default: settings topology.labelKeys, else the labels recognised)",
    )
    topology.add_argument(
        "--leaf-uplinks", type=int, metavar="U", help="uplinks per tier-1 switch (default: from the fabric)"
    )
    topology.add_argument(
        "--settings",
        type=Path,
        metavar="FILE",
        help="ringroute settings: fabric, topology labels, profiles (default: built-in settings)",
    )


def read_topology(args: argparse.Namespace, settings: Settings) -> Topology | None:
    """The topology of --topology or --nodes (None without either), with --leaf-uplinks applied."""
    from dataclasses import replace

    from planner import check_fabric, load_topology_file, topology_from_nodes
    from webhook.cli.plan_case import guarded, load_objects

    if args.topology is not None and args.nodes is not None:
        raise CommandError("--topology and --nodes: give one topology source")
    if args.topology_labels is not None and args.nodes is None:
        raise CommandError("--topology-labels: only applies to --nodes")
    if args.topology is not None:
        text = read_text(args.topology, "--topology")
        topology = read_from(
            f"--topology {args.topology}", lambda: load_topology_file(text), "pass a ringroute topology file"
        )
    elif args.nodes is not None:
        nodes = load_objects(args.nodes, "--nodes")
        keys: Sequence[str] = settings.topology.label_keys
        if args.topology_labels is not None:
            keys = [k.strip() for k in args.topology_labels.split(",") if k.strip()]
        fabric = settings.topology.fabric
        topology = guarded("--nodes", args.nodes, lambda: topology_from_nodes(nodes, keys, fabric))
    else:
        if args.leaf_uplinks is not None:
            raise CommandError("--leaf-uplinks: only applies with --topology or --nodes")
        return None
    if args.leaf_uplinks is not None:
        fabric = replace(topology.fabric, leaf_uplinks=args.leaf_uplinks)
        guarded("--leaf-uplinks", None, lambda: check_fabric(fabric, "fabric"))
        topology = replace(topology, fabric=fabric)
    return topology


__all__ = ["add_topology_arguments", "read_topology"]
