"""Enumerates every Impl of a tiny Spec: an oracle for tests and a debugging aid.
Knows no op by name.

The DP of ``solve.py`` walks the spec graph depth-first, reuses answers across memory
limits, breaks ties and shares a memo table across searches. This module checks it from
outside with code that shares none of that: it only calls ``spec_actions`` (what the rules
offer) and the cost model (``action_cost``, ``action_peaks``).

Two oracles, both exact, for Specs of different sizes:

- ``enumerate_impls`` builds every complete Impl tree by plain recursion, recomputing every
  sub-tree for every combination (nothing is memoized but each Spec's list of actions and
  tree count, used only to skip actions with a child that has no tree at all), and
  ``min_by_enumeration`` takes the cheapest of those that fit their memory limits. The number
  of trees grows very fast (thousands for Specs of one element per dimension, millions at
  two), so this is for the very smallest Specs; ``count_impls`` says how many there are.
- ``Frontiers`` recurses over the same actions but keeps, for each Spec, only the
  (cost, peaks) pairs that no other tree of that Spec beats in both cost and every level's
  peak. It is exact when ``action_cost`` and ``action_peaks`` never decrease when a child's
  cost or peak grows (true of the affine model: loops multiply by a positive trip count,
  blocks and moves add, peaks take maxima and add; with execution resources a cost is
  compared part by part, base and each resource's use, which every node adds or bounds by
  their most, so the same holds of each part; and the fills of residencies a loop around
  pays once, ``cost.loop_fills``, are parts too, negated, since a larger fill costs that
  loop less), and unlike a bare "min over actions of the
  children's minima" it does not trust the rules to enforce memory limits: a tree counts only
  if every node's peaks are within its Spec's limits, which is checked here.

``exhaustive_search`` picks enumeration when the tree count is small and the frontier
otherwise, and says which it used. ``impl_problems`` re-checks a finished Impl tree (for
instance the DP's answer) from scratch: legal actions, costs and peaks recomputed bottom-up,
peaks within limits.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence

import attrs

from morello.context import SynthesisContext
from morello.cost import Cost, action_cost, action_peaks
from morello.impl import Action, Impl
from morello.search.expand import spec_actions
from morello.spec import Spec

# Trees above this count are not enumerated by ``exhaustive_search``'s automatic choice.
DEFAULT_MAX_TREES = 50_000


class TooManyImpls(Exception):
    """Enumeration stopped at its limit, so its minimum would not be exhaustive."""


class _Actions:
    """Each Spec's action list, computed once (the only thing the enumeration memoizes)."""

    def __init__(self, ctx: SynthesisContext) -> None:
        self.ctx = ctx
        self._lists: dict[Spec, list[Action]] = {}

    def __call__(self, spec: Spec) -> list[Action]:
        got = self._lists.get(spec)
        if got is None:
            got = self._lists[spec] = spec_actions(spec, self.ctx)
        return got


def fits(spec: Spec, peaks: Sequence[int]) -> bool:
    """Whether ``peaks`` are within ``spec``'s memory limits at every level."""
    return all(p <= lim for p, lim in zip(peaks, spec.limits, strict=True))


def enumerate_impls(spec: Spec, ctx: SynthesisContext, limit: int | None = None) -> Iterator[Impl]:
    """Every complete Impl tree the rules build for ``spec``, with costs and peaks.

    Trees are yielded whether or not they fit their memory limits (see ``impl_fits``), in a
    fixed order: actions in ``spec_actions`` order, then children's trees in the same order,
    the last child varying fastest. Sub-trees are rebuilt for every combination. ``limit``
    stops after that many trees.

    Actions with a child that has no tree at all are skipped up front (by ``count_impls``):
    they yield nothing either way, but enumerating their other children first could take
    time exponential in what they would have yielded.
    """
    actions = _Actions(ctx)
    counts: dict[Spec, int] = {}

    def trees(s: Spec) -> Iterator[Impl]:
        for action in actions(s):
            if all(count_impls(c, ctx, counts) for c in action.children):
                yield from combos(s, action, action.children, ())

    def combos(
        s: Spec, action: Action, children: tuple[Spec, ...], chosen: tuple[Impl, ...]
    ) -> Iterator[Impl]:
        i = len(chosen)
        if i == len(children):
            cost = action_cost(s, action, [c.cost for c in chosen], ctx)
            peaks = action_peaks(s, action, [c.peaks for c in chosen], ctx)
            yield Impl(s, action, chosen, cost, peaks)
            return
        for sub in trees(children[i]):
            yield from combos(s, action, children, (*chosen, sub))

    for n, impl in enumerate(trees(spec)):
        if limit is not None and n >= limit:
            return
        yield impl


def impl_fits(impl: Impl) -> bool:
    """Whether every node of ``impl`` has peaks within its Spec's limits."""
    return all(fits(node.spec, node.peaks) for node in impl.walk())


def count_impls(spec: Spec, ctx: SynthesisContext, counts: dict[Spec, int] | None = None) -> int:
    """How many trees ``enumerate_impls`` yields for ``spec`` (counted, not built).

    ``counts`` caches the counts of Specs already seen and may be shared across calls.
    """
    actions = _Actions(ctx)
    known: dict[Spec, int] = {} if counts is None else counts

    def count(s: Spec) -> int:
        got = known.get(s)
        if got is None:
            got = known[s] = sum(math.prod(count(c) for c in a.children) for a in actions(s))
        return got

    return count(spec)


@attrs.frozen
class EnumerationResult:
    """The cheapest fitting tree of a full enumeration, and how many trees there were."""

    best: Impl | None
    trees: int
    fitting: int


def min_by_enumeration(
    spec: Spec, ctx: SynthesisContext, limit: int | None = None
) -> EnumerationResult:
    """The cheapest of all trees of ``spec`` that fit their limits (the first one on ties).

    Raises:
        TooManyImpls: more than ``limit`` trees.
    """
    best: Impl | None = None
    trees = fitting = 0
    for impl in enumerate_impls(spec, ctx, None if limit is None else limit + 1):
        trees += 1
        if limit is not None and trees > limit:
            raise TooManyImpls(f"{spec.describe()} has more than {limit} Impl trees")
        if not impl_fits(impl):
            continue
        fitting += 1
        if best is None or impl.cost < best.cost:
            best = impl
    return EnumerationResult(best, trees, fitting)


@attrs.frozen
class _Point:
    """One non-dominated (cost, peaks) of a Spec, with the tree that achieves it."""

    cost: int
    peaks: tuple[int, ...]
    action: Action
    children: tuple[_Point, ...]

    def impl(self, spec: Spec) -> Impl:
        kids = tuple(p.impl(c) for p, c in zip(self.children, self.action.children, strict=True))
        return Impl(spec, self.action, kids, self.cost, self.peaks)


def _parts(cost: int) -> tuple[int, ...]:
    """A cost as its base then each resource's use (``morello.cost.Cost``), then its fills
    negated (a loop around takes more off for larger ones); a plain int is all base. The
    trees of one Spec have resource uses alike (all or none), so the parts line up."""
    if not isinstance(cost, Cost):
        return (int(cost),)
    return (cost.base, *cost.use, *(-f for f in cost.fills))


def _dominates(a: _Point, b: _Point) -> bool:
    """Whether ``a`` is no worse than ``b`` in every part of its cost and every peak. Costs
    are compared part by part because a parent adds the parts of its children inside a
    register tile: a cheaper value alone does not make a child the better one there."""
    if a.cost > b.cost or any(x > y for x, y in zip(a.peaks, b.peaks, strict=True)):
        return False
    parts = itertools.zip_longest(_parts(a.cost), _parts(b.cost), fillvalue=0)
    return all(x <= y for x, y in parts)


def _prune(points: list[_Point]) -> list[_Point]:
    """The points no other point dominates (the earliest of equal ones), cheapest first."""
    points.sort(key=lambda p: (p.cost, p.peaks))
    kept: list[_Point] = []
    for p in points:
        if not any(_dominates(k, p) for k in kept):
            kept.append(p)
    return kept


class Frontiers:
    """Pareto frontiers of (cost, peaks) per Spec, for one context; reusable across roots.

    Shares nothing with the DP: a frontier is derived only from ``spec_actions`` and the
    cost model, by depth-first recursion.
    """

    def __init__(self, ctx: SynthesisContext) -> None:
        self.ctx = ctx
        self._actions = _Actions(ctx)
        self._frontiers: dict[Spec, list[_Point]] = {}
        self.counts: dict[Spec, int] = {}

    def __call__(self, spec: Spec) -> list[_Point]:
        """The frontier of ``spec``: empty if no tree fits its limits."""
        got = self._frontiers.get(spec)
        if got is not None:
            return got
        ctx = self.ctx
        points: list[_Point] = []
        for action in self._actions(spec):
            subs = [self(c) for c in action.children]
            if any(not s for s in subs):
                continue
            for combo in _product(subs):
                cost = action_cost(spec, action, [p.cost for p in combo], ctx)
                peaks = action_peaks(spec, action, [p.peaks for p in combo], ctx)
                if fits(spec, peaks):
                    points.append(_Point(cost, peaks, action, combo))
        got = self._frontiers[spec] = _prune(points)
        return got

    def best(self, spec: Spec) -> Impl | None:
        """A cheapest fitting tree of ``spec`` (least peaks among the cheapest), or None."""
        frontier = self(spec)
        return frontier[0].impl(spec) if frontier else None


def _product(lists: Sequence[list[_Point]]) -> Iterator[tuple[_Point, ...]]:
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head, *rest)


@attrs.frozen
class OracleResult:
    """What ``exhaustive_search`` found.

    ``method`` is ``"enumeration"`` (every tree built) or ``"frontier"``; ``trees`` is the
    number of rule-built trees; ``fitting`` how many of them fit their limits (enumeration
    only).
    """

    cost: int | None
    best: Impl | None
    method: str
    trees: int
    fitting: int | None


def exhaustive_search(
    spec: Spec,
    ctx: SynthesisContext,
    max_trees: int = DEFAULT_MAX_TREES,
    frontiers: Frontiers | None = None,
) -> OracleResult:
    """The cheapest Impl of ``spec`` over all trees that fit their memory limits.

    Builds every tree when there are at most ``max_trees`` of them, and uses the Pareto
    frontiers otherwise. ``frontiers``, if given, is reused (with its cached tree counts).
    """
    frontiers = frontiers or Frontiers(ctx)
    trees = count_impls(spec, ctx, frontiers.counts)
    if trees <= max_trees:
        res = min_by_enumeration(spec, ctx)
        assert res.trees == trees, (res.trees, trees)
        cost = None if res.best is None else res.best.cost
        return OracleResult(cost, res.best, "enumeration", trees, res.fitting)
    best = frontiers.best(spec)
    return OracleResult(None if best is None else best.cost, best, "frontier", trees, None)


def exhaustive_min(
    spec: Spec,
    ctx: SynthesisContext,
    max_trees: int = DEFAULT_MAX_TREES,
    frontiers: Frontiers | None = None,
) -> int | None:
    """The least cost of any Impl of ``spec`` that fits its limits; None if there is none."""
    return exhaustive_search(spec, ctx, max_trees, frontiers).cost


def impl_problems(impl: Impl, ctx: SynthesisContext) -> list[str]:
    """What is wrong with ``impl``, re-checked from scratch; empty if nothing.

    Every node's action must be one ``spec_actions`` offers for its Spec, its children must
    solve the action's sub-Specs in order, its cost and peaks must equal those recomputed
    bottom-up from the leaves, and its peaks must be within its Spec's limits.
    """
    problems: list[str] = []

    def check(node: Impl) -> tuple[int, tuple[int, ...]]:
        child_results = [check(c) for c in node.children]
        where = f"{node.spec.describe()} [{node.action.describe()}]"
        if node.action not in spec_actions(node.spec, ctx):
            problems.append(f"{where}: action not offered by the rules")
        got = tuple(c.spec for c in node.children)
        if got != node.action.children:
            problems.append(
                f"{where}: children solve {len(got)} Specs that differ from the action's"
            )
        cost = action_cost(node.spec, node.action, [r[0] for r in child_results], ctx)
        peaks = action_peaks(node.spec, node.action, [r[1] for r in child_results], ctx)
        if cost != node.cost:
            problems.append(f"{where}: cost {node.cost}, recomputed {cost}")
        if peaks != node.peaks:
            problems.append(f"{where}: peaks {node.peaks}, recomputed {peaks}")
        if not fits(node.spec, peaks):
            problems.append(f"{where}: peaks {peaks} exceed limits {node.spec.limits}")
        return cost, peaks

    check(impl)
    return problems
