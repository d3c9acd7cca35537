"""Solves the spec-dependency graph in reverse topological order for the cheapest Impl.

For each Spec the solver keeps the action of least cost; ties break on lower peak memory
(fastest level first) and then on the action's position in the Spec's action list, so
results are deterministic.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import attrs
import networkx as nx

from morello.context import SynthesisContext
from morello.cost import action_cost, action_peaks
from morello.db.table import MISSING, MemoTable, Stored
from morello.errors import NoImplementationError, RuleError
from morello.impl import Action, Impl
from morello.search.expand import expand
from morello.spec import Spec


@attrs.frozen
class Solution:
    """The best decision for one Spec."""

    action: Action
    cost: int
    peaks: tuple[int, ...]


@attrs.frozen
class SearchStats:
    """Size and duration of one synthesis."""

    specs_visited: int
    graph_nodes: int
    graph_edges: int
    seconds: float


def _order_key(sol: Solution, index: int) -> tuple[int, tuple[int, ...], int]:
    return (sol.cost, tuple(reversed(sol.peaks)), index)


def solve(
    graph: nx.DiGraph,
    ctx: SynthesisContext,
    known: Mapping[Spec, Solution | Stored | None] | None = None,
) -> dict[Spec, Solution | Stored | None]:
    """Best solution of every Spec in ``graph`` (None where no implementation fits).

    Nodes whose ``actions`` are None were not expanded; their solutions come from ``known``.
    """
    try:
        order = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(graph)
        specs = " -> ".join(u.describe() for u, _ in cycle[:3])
        raise RuleError(f"the rewrites form a cycle: {specs} ...") from None
    best: dict[Spec, Solution | Stored | None] = {}
    for spec in reversed(order):
        actions = graph.nodes[spec]["actions"]
        if actions is None:
            assert known is not None
            best[spec] = known[spec]
            continue
        winner: Solution | None = None
        winner_key = None
        for index, action in enumerate(actions):
            subs = [best[c] for c in action.children]
            if any(s is None for s in subs):
                continue
            costs = [s.cost for s in subs]  # type: ignore[union-attr]
            peaks = [s.peaks for s in subs]  # type: ignore[union-attr]
            sol = Solution(
                action,
                action_cost(spec, action, costs, ctx),
                action_peaks(spec, action, peaks, ctx),
            )
            key = _order_key(sol, index)
            if winner_key is None or key < winner_key:
                winner, winner_key = sol, key
        best[spec] = winner
    return best


def build_impl(spec: Spec, lookup: Callable[[Spec], Solution | None]) -> Impl:
    """The Impl tree of ``spec`` from per-Spec solutions."""
    sol = lookup(spec)
    assert sol is not None, spec
    children = tuple(build_impl(c, lookup) for c in sol.action.children)
    return Impl(spec, sol.action, children, sol.cost, sol.peaks)


Memo = dict[Spec, "Solution | None"] | MemoTable


def synthesize(
    spec: Spec, ctx: SynthesisContext, memo: Memo | None = None
) -> tuple[Impl, SearchStats]:
    """The cheapest Impl of ``spec`` and statistics of the search.

    ``memo`` (a MemoTable, or a plain dict of Spec -> Solution) holds earlier solutions: Specs
    found there are not expanded again, and every Spec solved here is added to it.

    Raises:
        NoImplementationError: nothing implements ``spec`` within its memory limits.
    """
    start = time.perf_counter()
    found: dict[Spec, Solution | Stored | None] = {}

    def known(s: Spec) -> bool:
        if memo is None:
            return False
        if isinstance(memo, dict):
            if s in memo:
                found[s] = memo[s]
                return True
            return False
        hit = memo.get(s)
        if hit is MISSING:
            return False
        found[s] = hit  # type: ignore[assignment]
        return True

    graph = expand(spec, ctx, known)
    best = solve(graph, ctx, found)
    if isinstance(memo, dict):
        memo.update((s, b) for s, b in best.items() if s not in found)  # type: ignore[misc]
    elif memo is not None:
        for s, b in best.items():
            if s not in found:
                memo.put(s, b)  # type: ignore[arg-type]

    def lookup(s: Spec) -> Solution | None:
        sol = best.get(s, MISSING)
        if sol is MISSING:
            sol = memo[s] if isinstance(memo, dict) else memo.get(s)  # type: ignore[union-attr]
        if isinstance(sol, Stored):
            assert isinstance(memo, MemoTable)
            action = memo.resolve(s, sol)
            if action is None:
                raise AssertionError(f"memo table decision {sol.decision} fits no action of {s}")
            return Solution(action, sol.cost, sol.peaks)
        return sol  # type: ignore[return-value]

    if lookup(spec) is None:
        limits = ", ".join(
            f"{lv.name} {n}{'' if lv.counts_registers else ' lines'}"
            for lv, n in zip(ctx.target.levels, spec.limits, strict=True)
        )
        raise NoImplementationError(
            f"no implementation of {spec.describe()} fits the memory limits ({limits}) "
            f"with the rules of target {ctx.target.name}"
        )
    impl = build_impl(spec, lookup)
    stats = SearchStats(
        specs_visited=sum(1 for s in graph if graph.nodes[s]["actions"] is not None),
        graph_nodes=graph.number_of_nodes(),
        graph_edges=graph.number_of_edges(),
        seconds=time.perf_counter() - start,
    )
    return impl, stats
