"""Errors the planner raises for bad input. Each message is one line naming the object, the field and the fix."""

from __future__ import annotations


class InputError(ValueError):
    """Malformed input: YAML/JSON that does not parse, or an object of the wrong kind."""


class TopologyError(InputError):
    """The topology cannot be built: a node without topology labels, unknown label keys, inconsistent tiers."""


class PlacementError(InputError):
    """The pods do not make a complete placement (missing pods, device info, bindings)."""


class RankTableError(InputError):
    """A rank table is malformed or inconsistent."""
