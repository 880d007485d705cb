"""A node's topology path, read from its own labels, and the numbering of paths prioritize looks scores up by."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from planner import DEFAULT_LABEL_KEYS
from webhook.extender.wire import NodeView

Path = tuple[str, ...]
"""Topology domains of a node, tier 1 (leaf) first."""

_TOPOGRAPH_TIERS = "fabric.topograph.run/tier-N"
"""How the planner names the topograph family: one `tier-<N>` key per tier present."""
DEFAULT_LABEL_FAMILIES: tuple[tuple[str, ...], ...] = tuple(
    tuple(f"fabric.topograph.run/tier-{n}" for n in range(1, 5)) if family == (_TOPOGRAPH_TIERS,) else family[::-1]
    for family in DEFAULT_LABEL_KEYS
)
"""The planner's label families (`planner.DEFAULT_LABEL_KEYS`, which `topology_from_nodes` reads when no keys
are configured), tier 1 first, tried in the same order."""

PathReader = Callable[[Mapping[str, str] | None], Path | None]


def label_path_reader(label_keys: Sequence[str] = ()) -> PathReader:
    """Read a node's path from its own labels: `label_keys` (top-most tier first, as in TopologySettings) or the
    recognised families; the node's values from tier 1 up, stopping at the first missing key.

    Per node on purpose: the extender sees changing subsets of nodes, while the planner's `topology_from_nodes`
    normalises a whole-cluster view.
    """
    families: tuple[tuple[str, ...], ...] = (tuple(reversed(label_keys)),) if label_keys else DEFAULT_LABEL_FAMILIES

    def read(labels: Mapping[str, str] | None) -> Path | None:
        if not labels:
            return None
        for family in families:
            first = labels.get(family[0])
            if not first:
                continue
            path = [first]
            for key in family[1:]:
                value = labels.get(key)
                if not value:
                    break
                path.append(value)
            return tuple(path)
        return None

    return read


def node_labels(info: NodeView) -> Mapping[str, str] | None:
    """metadata.labels of a NodeInfo's Node."""
    meta = info.Node.metadata if info.Node is not None else None
    return meta.labels if meta is not None else None


class PathTable:
    """Topology paths numbered in order of appearance, 0 standing for no topology: prioritize counts candidates
    per path and looks up their scores by number (a list index) rather than by tuple (hashed at every lookup)."""

    SLACK = 1024
    """Numbers of forgotten paths tolerated before the live ones are numbered afresh."""

    def __init__(self) -> None:
        self.paths: list[Path | None] = [None]
        self._numbers: dict[Path | None, int] = {None: 0}

    def number(self, path: Path | None) -> int:
        """The path's number, given now if it has none."""
        found = self._numbers.get(path)
        if found is None:
            found = self._numbers[path] = len(self.paths)
            self.paths.append(path)
        return found

    def __len__(self) -> int:
        return len(self.paths)


__all__ = ["DEFAULT_LABEL_FAMILIES", "Path", "PathReader", "PathTable", "label_path_reader", "node_labels"]
