"""Gang placement: which leaf switches a route-planned job should take, decided once for the whole job.

Volcano allocates a gang task by task and checks resource fit before any plugin predicate, so a node that one of
the job's tasks filled is never offered again within the session, and each prioritize call sees only the nodes
that still fit. Scoring every call on its own therefore spreads a gang over the leaves with the most room. The
extender instead plans the job's domains when it first meets the job in a session and steers every later call to
that plan.

`plan_gang` chooses, lexicographically:
1. the fewest leaves the job spans (leaves that already host its tasks count, and their free nodes are used first),
2. then the fewest spine domains (tier 2),
3. then the best fit: the least free capacity left behind in the chosen leaves, so big free leaves stay whole for
   big jobs.

Pure functions of plain data; no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

EXACT_FIT_BUDGET = 200_000
"""Bitset operations the exact best-fit search may spend; beyond it the last leaf is chosen best-fit greedily."""
SPINE_SETS_ENUMERATED = 4096
"""Spine sets of one size tried exhaustively when there are at most this many (above it: greedy)."""
SPINE_SETS_TRIED = 32
"""Candidate spine sets (tightest first) whose best fit is computed before choosing among them."""


@dataclass(frozen=True, slots=True)
class LeafRoom:
    """One leaf switch as the planner sees it for one job."""

    leaf: str
    spine: str | None
    """Tier-2 domain (None in a 2-tier fabric or when the labels do not say)."""
    free: int
    """Nodes under the leaf that could take one of the job's tasks now (whole free nodes for route-planned jobs)."""
    hosted: int = 0
    """Tasks of the job already running or allocated under this leaf."""


@dataclass(frozen=True, slots=True)
class GangPlan:
    """Where the rest of a job goes: new tasks per leaf, and what that costs against its bounds."""

    take: Mapping[str, int]
    """New tasks per leaf (only leaves that take some)."""
    need: int
    """Tasks the plan places."""
    leaves: tuple[str, ...]
    """Every leaf the job spans afterwards (hosting leaves included), sorted."""
    spines: tuple[str, ...]
    """Every spine domain the job spans afterwards, sorted (empty in a 2-tier fabric)."""
    slack: int
    """Free nodes the plan leaves unused in the leaves it takes nodes from."""
    leaves_bound: int
    """Fewest leaves any placement of the job could span given the free nodes (the plan meets it)."""
    free: Mapping[str, int]
    """Free nodes at planning time of each leaf the plan takes from."""

    @property
    def full_leaves(self) -> frozenset[str]:
        """Leaves whose every free node the plan takes; filled before the one partly used leaf."""
        return frozenset(leaf for leaf, count in self.take.items() if count == self.free[leaf])


def plan_gang(rooms: Iterable[LeafRoom], need: int) -> GangPlan | None:
    """The leaves for `need` more tasks of one job, or None when the free nodes cannot hold them.

    `rooms` lists every leaf with free nodes or hosted tasks (a leaf listed twice is an error). Deterministic:
    ties are broken by leaf and spine name.
    """
    by_leaf: dict[str, LeafRoom] = {}
    for room in rooms:
        if room.leaf in by_leaf:
            raise ValueError(f"leaf {room.leaf!r} listed twice")
        if room.free < 0 or room.hosted < 0:
            raise ValueError(f"leaf {room.leaf!r}: free and hosted must be >= 0")
        by_leaf[room.leaf] = room
    if need <= 0:
        return _plan({}, 0, by_leaf, leaves_bound=_hosted_leaf_count(by_leaf))
    hosting = sorted((r for r in by_leaf.values() if r.hosted), key=lambda r: (-r.free, r.leaf))
    hosting_free = sum(r.free for r in hosting)
    if hosting_free >= need:
        # Free nodes under leaves the job already uses cost no new leaf.
        take = _fill(hosting, need)
        return _plan(take, need, by_leaf, leaves_bound=len(hosting))
    rest = need - hosting_free
    hosted_leaves = {r.leaf for r in hosting}
    hosted_spines = {r.spine for r in hosting if r.spine is not None}
    others = sorted(
        (r for r in by_leaf.values() if r.leaf not in hosted_leaves and r.free > 0), key=lambda r: (-r.free, r.leaf)
    )
    k = _fewest_leaves([r.free for r in others], rest)
    if k is None:
        return None
    chosen = _choose_with_fewest_spines(others, hosted_spines, k, rest)
    take = {r.leaf: r.free for r in hosting}
    for room, count in chosen:
        take[room.leaf] = count
    return _plan(take, need, by_leaf, leaves_bound=len(hosting) + k)


def _hosted_leaf_count(by_leaf: Mapping[str, LeafRoom]) -> int:
    return sum(1 for r in by_leaf.values() if r.hosted)


def _plan(take: Mapping[str, int], need: int, by_leaf: Mapping[str, LeafRoom], *, leaves_bound: int) -> GangPlan:
    take = {leaf: count for leaf, count in take.items() if count > 0}
    spanned = {leaf for leaf, r in by_leaf.items() if r.hosted} | set(take)
    spines = {by_leaf[leaf].spine for leaf in spanned} - {None}
    slack = sum(by_leaf[leaf].free - count for leaf, count in take.items())
    return GangPlan(
        take=take,
        need=need,
        leaves=tuple(sorted(spanned)),
        spines=tuple(sorted(s for s in spines if s is not None)),
        slack=slack,
        leaves_bound=max(leaves_bound, 1 if need > 0 else 0),
        free={leaf: by_leaf[leaf].free for leaf in take},
    )


def _fill(rooms: Sequence[LeafRoom], need: int) -> dict[str, int]:
    """Take `need` nodes from `rooms` in order."""
    take: dict[str, int] = {}
    left = need
    for room in rooms:
        if left <= 0:
            break
        count = min(room.free, left)
        take[room.leaf] = count
        left -= count
    return take


def _fewest_leaves(free: Sequence[int], need: int) -> int | None:
    """Smallest number of leaves whose free nodes add up to `need` (`free` sorted largest first)."""
    total = 0
    for count, value in enumerate(free, start=1):
        total += value
        if total >= need:
            return count
    return None


def _top_sum(rooms: Sequence[LeafRoom], k: int) -> int:
    return sum(sorted((r.free for r in rooms), reverse=True)[:k])


def _choose_with_fewest_spines(
    others: Sequence[LeafRoom], hosted_spines: set[str], k: int, need: int
) -> list[tuple[LeafRoom, int]]:
    """k leaves holding `need` nodes within the fewest new spine domains, best fit among those."""
    spines = sorted({r.spine for r in others if r.spine is not None})
    if not spines:
        return _best_fit(others, k, need)
    by_spine: dict[str | None, list[LeafRoom]] = {}
    for room in others:
        by_spine.setdefault(room.spine, []).append(room)
    # Leaves without a spine label never count as a new spine domain.
    base = list(by_spine.get(None, [])) + [r for s in hosted_spines for r in by_spine.get(s, [])]
    new_spines = [s for s in spines if s not in hosted_spines]
    for size in range(len(new_spines) + 1):
        candidates = _spine_sets(new_spines, by_spine, base, size=size, k=k, need=need)
        if not candidates:
            continue
        best: list[tuple[LeafRoom, int]] | None = None
        best_key: tuple[int, int] | None = None
        for spine_set in candidates[:SPINE_SETS_TRIED]:
            allowed = base + [r for s in spine_set for r in by_spine[s]]
            chosen = _best_fit(allowed, k, need)
            slack = sum(r.free - c for r, c in chosen)
            key = (slack, len({r.spine for r, _ in chosen}))
            if best_key is None or key < best_key:
                best, best_key = chosen, key
        assert best is not None
        return best
    return _best_fit(others, k, need)  # unreachable: all spines together hold the job


def _spine_sets(
    new_spines: Sequence[str],
    by_spine: Mapping[str | None, list[LeafRoom]],
    base: Sequence[LeafRoom],
    *,
    size: int,
    k: int,
    need: int,
) -> list[tuple[str, ...]]:
    """Sets of `size` new spines whose leaves (with `base`) can hold `need` nodes in k leaves, tightest first."""
    if size == 0:
        return [()] if _top_sum(base, k) >= need else []
    if math.comb(len(new_spines), size) <= SPINE_SETS_ENUMERATED:
        found: list[tuple[int, tuple[str, ...]]] = []
        for spine_set in itertools.combinations(new_spines, size):
            total = _top_sum(list(base) + [r for s in spine_set for r in by_spine[s]], k)
            if total >= need:
                found.append((total, spine_set))
        found.sort()
        return [s for _, s in found]
    # Greedy: add the spine that raises the best k-leaf total most, until the job fits.
    chosen: list[str] = []
    pool = list(base)
    remaining = list(new_spines)
    while remaining and len(chosen) < size:
        spine = max(remaining, key=lambda s: (_top_sum(pool + by_spine[s], k), s))
        chosen.append(spine)
        remaining.remove(spine)
        pool += by_spine[spine]
    return [tuple(chosen)] if len(chosen) == size and _top_sum(pool, k) >= need else []


def _best_fit(rooms: Sequence[LeafRoom], k: int, need: int) -> list[tuple[LeafRoom, int]]:
    """Exactly k leaves of `rooms` with at least `need` free nodes in total and the fewest free nodes among such
    choices; the nodes taken per leaf (every leaf full but the smallest, which takes the rest)."""
    ordered = sorted(rooms, key=lambda r: (-r.free, r.leaf))
    picked = _exact_min_sum(ordered, k, need)
    if picked is None:
        picked = _greedy_min_sum(ordered, k, need)
    picked.sort(key=lambda r: (-r.free, r.leaf))
    take: list[tuple[LeafRoom, int]] = []
    left = need
    for room in picked:
        count = min(room.free, left)
        take.append((room, count))
        left -= count
    return take


def _greedy_min_sum(ordered: Sequence[LeafRoom], k: int, need: int) -> list[LeafRoom]:
    """The k-1 largest leaves, then the smallest leaf that completes the job."""
    head = list(ordered[: k - 1])
    missing = need - sum(r.free for r in head)
    tail = [r for r in ordered[k - 1 :] if r.free >= missing]
    last = min(tail, key=lambda r: (r.free, r.leaf))
    return [*head, last]


def _exact_min_sum(ordered: Sequence[LeafRoom], k: int, need: int) -> list[LeafRoom] | None:
    """Exactly k leaves with sum >= need and the least sum, by a bitset knapsack over distinct free counts.

    None when the search would exceed EXACT_FIT_BUDGET operations.
    """
    groups: dict[int, list[LeafRoom]] = {}
    for room in ordered:
        groups.setdefault(room.free, []).append(room)
    values = sorted(groups)
    items = sum(min(len(groups[v]), k) for v in values)
    if items * k > EXACT_FIT_BUDGET:
        return None
    cap = sum(r.free for r in ordered[:k])
    mask = (1 << (cap + 1)) - 1
    # reach[j]: bit s set when j leaves can hold exactly s free nodes; snapshots allow the walk back.
    reach = [1] + [0] * k
    snapshots: list[list[int]] = []
    for value in values:
        snapshots.append(list(reach))
        for _ in range(min(len(groups[value]), k)):
            for j in range(k, 0, -1):
                reach[j] |= (reach[j - 1] << value) & mask
    final = reach[k] >> need
    if not final:
        return None
    total = need + ((final & -final).bit_length() - 1)
    picked: list[LeafRoom] = []
    j, s = k, total
    for index in range(len(values) - 1, -1, -1):
        value, before = values[index], snapshots[index]
        for used in range(min(len(groups[value]), j), -1, -1):
            rest = s - used * value
            if rest >= 0 and (before[j - used] >> rest) & 1:
                picked.extend(groups[value][:used])
                j, s = j - used, rest
                break
    assert j == 0, j
    assert s == 0, s
    return picked


def plan_gang_within(rooms: Iterable[LeafRoom], need: int, domain_of: Mapping[str, str]) -> GangPlan | None:
    """`plan_gang` kept inside one domain (Volcano's hard networkTopology: one HyperNode of the job's tier): the
    leaves of each domain (`domain_of[leaf]`; leaves without one are left out) are planned on their own and the
    best plan wins, by the same order as `plan_gang` (fewest leaves, fewest spines, least slack), then by domain
    name. Leaves that already host the job fix its domain. None when no domain's free nodes hold the job."""
    by_domain: dict[str, list[LeafRoom]] = {}
    hosted_domains: set[str | None] = set()
    for room in rooms:
        domain = domain_of.get(room.leaf)
        if room.hosted:
            hosted_domains.add(domain)
        if domain is not None:
            by_domain.setdefault(domain, []).append(room)
    if None in hosted_domains or len(hosted_domains) > 1:
        return None  # the job already spans more than one domain (or one the labels do not name)
    best: tuple[tuple[int, int, int, str], GangPlan] | None = None
    for domain, members in by_domain.items():
        if hosted_domains and domain not in hosted_domains:
            continue
        plan = plan_gang(members, need)
        if plan is None:
            continue
        key = (len(plan.leaves), len(plan.spines), plan.slack, domain)
        if best is None or key < best[0]:
            best = (key, plan)
    return best[1] if best is not None else None


def leaves_lower_bound(free: Iterable[int], need: int) -> int | None:
    """Fewest leaves that can hold `need` tasks given the free nodes per leaf (None: they cannot)."""
    return _fewest_leaves(sorted(free, reverse=True), need) if need > 0 else 0


__all__ = ["GangPlan", "LeafRoom", "leaves_lower_bound", "plan_gang", "plan_gang_within"]
