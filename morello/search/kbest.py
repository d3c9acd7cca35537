"""The k cheapest Impls of a Spec under the cost model, found lazily.

``synthesize`` keeps one answer per Spec. To see how well the model ranks the programs it
chooses between (``python -m morello fidelity``) we need the next cheapest ones too. This is
the lazy k-best algorithm for hypergraphs (Huang and Chiang, 2005, "Better k-best parsing",
algorithm 3) over the spec-dependency graph: a Spec is a node, each of its actions a
hyperedge to its children, and a derivation an action with a rank for each child (rank 0 is
the child's cheapest Impl, rank 1 its second cheapest, ...).

Each Spec keeps a heap of candidate derivations. Its cheapest candidates start as every
action over its children's cheapest Impls, whose costs come from the ordinary DP (memo table
included), so a Spec's actions are enumerated only when something asks for its second Impl.
Taking a Spec's next Impl pops the heap and pushes the popped derivation's neighbours (one
child's rank raised by one), asking that child for its next Impl in turn. This is exact
because every node's cost and peaks never decrease when a child's do (loops multiply by a
positive trip count, blocks and moves add, peaks take maxima and add), the same property
``exhaustive.py`` relies on. A derivation whose peaks exceed its Spec's limits is passed
over (its neighbours are still explored). A loop that would take off a residency its trips
repeat (``cost.loop_fills``) is priced here without that credit (``listed_cost``): the
credit is the one thing that can make a node cheaper when a child grows dearer (a child with
a larger fill), which the order above cannot follow. Without it every tree keeps the value
of its parts, and a tree that the credit would price lower has a twin, its residency above
the loop, of the same C and the credited price less one unit, which the list holds before
it (``distinct_programs`` then keeps the twin's text once). Passing over such trees instead
(stop 78) kept the order too, but a loop whose every cheap body starts with a residency had
to dig through its body's whole list for one that does not: the calibration's 8x256x256
product spent minutes there. Ties break as in the DP: lower peaks (fastest level first),
then the action's position, then the children's ranks.

The k cheapest derivations are distinct Impl trees, but two trees may print the same C (a
cache residency writes no code, so moving a tile into L1 or not is the same program);
``distinct_programs`` keeps the first of each text. Most of the cheapest trees of a large
Spec cost exactly the same (the loops that store a register tile can nest many ways); with
``distinct_costs`` each Spec lists one tree per cost.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from morello.context import SynthesisContext
from morello.cost import action_cost, action_peaks, takes_off, with_fills, work
from morello.impl import Action, Impl
from morello.search.exhaustive import fits
from morello.search.expand import spec_actions
from morello.search.solve import Memo, answerer, walking
from morello.spec import Spec

_Key = tuple[Any, ...]


@attrs.frozen
class _Derivation:
    action: Action
    ranks: tuple[int, ...]
    cost: int
    peaks: tuple[int, ...]


class _Node:
    """One Spec's actions, candidate heap and the derivations popped so far (in order)."""

    def __init__(self, actions: list[Action]) -> None:
        self.actions = actions
        self.heap: list[tuple[_Key, int, tuple[int, ...], _Derivation]] = []
        self.seen: set[tuple[int, tuple[int, ...]]] = set()
        self.found: list[_Derivation] = []
        self.kinds: set[int] = set()  # costs found, if distinct_costs
        self.last: tuple[int, tuple[int, ...]] | None = None  # popped, neighbours not pushed


class KBest:
    """The cheapest Impls of any Spec, in order of cost, computed as they are asked for.

    ``memo`` is the DP's memo table (or dict); the cheapest Impl of every Spec comes from it,
    solving what it lacks. With ``distinct_costs``, a Spec lists one Impl per cost as the
    list orders them (``listed_cost``; the first in the tie-break order): the ``k``-th is
    the cheapest Impl of the ``k``-th cheapest cost. That is exact too, since a node's
    listed cost depends only on its children's listed costs, and
    it skips the many trees that differ only where the model sees no difference (a loop of
    stores split in two nested loops, say).
    """

    def __init__(
        self, ctx: SynthesisContext, memo: Memo | None = None, *, distinct_costs: bool = False
    ) -> None:
        self.ctx = ctx
        self.distinct_costs = distinct_costs
        self._best = answerer(ctx, memo)
        self._nodes: dict[Spec, _Node] = {}
        self._impls: dict[tuple[Spec, int], Impl] = {}
        self._feasible: dict[Spec, list[Action]] = {}

    def impls(self, spec: Spec, limit: int) -> Iterator[Impl]:
        """Up to ``limit`` Impls of ``spec``, cheapest first."""
        for k in range(limit):
            with walking():
                impl = self.impl(spec, k)
            if impl is None:
                return
            yield impl

    def impl(self, spec: Spec, k: int) -> Impl | None:
        """The ``k``-th cheapest Impl of ``spec`` (0: the DP's), None if it has fewer."""
        got = self._impls.get((spec, k))
        if got is None:
            d = self._derivation(spec, k)
            if d is None:
                return None
            children = []
            for child, r in zip(d.action.children, d.ranks, strict=True):
                sub = self.impl(child, r)
                assert sub is not None, (child, r)
                children.append(sub)
            # The model's cost, credit and all (the list's order used ``listed_cost``).
            cost = action_cost(spec, d.action, [c.cost for c in children], self.ctx)
            got = Impl(spec, d.action, tuple(children), cost, d.peaks)
            self._impls[(spec, k)] = got
        return got

    def sample(self, spec: Spec, rng: random.Random, deviate: float) -> Impl:
        """A random Impl of ``spec`` near the cheapest: at each node, with probability
        ``deviate``, a uniformly drawn action instead of the cheapest one (its children drawn
        the same way); an action whose tree does not fit its Spec's limits is passed over
        for the cheapest. ``spec`` must have an Impl."""
        with walking():
            return self._sample(spec, rng, deviate)

    def _sample(self, spec: Spec, rng: random.Random, deviate: float) -> Impl:
        best = self.impl(spec, 0)
        assert best is not None, spec
        if rng.random() >= deviate:
            action = best.action
        else:
            actions = self._feasible.get(spec)
            if actions is None:
                actions = [
                    a
                    for a in spec_actions(spec, self.ctx)
                    if all(self._best(c) is not None for c in a.children)
                ]
                self._feasible[spec] = actions
            action = rng.choice(actions) if actions else best.action
        children = tuple(self._sample(c, rng, deviate) for c in action.children)
        cost = action_cost(spec, action, [c.cost for c in children], self.ctx)
        peaks = action_peaks(spec, action, [c.peaks for c in children], self.ctx)
        if not fits(spec, peaks):
            return best
        return Impl(spec, action, children, cost, peaks)

    def _cost(self, spec: Spec, k: int) -> tuple[int, tuple[int, ...]] | None:
        """Cost and peaks of ``spec``'s ``k``-th Impl (the DP's answer for k = 0)."""
        if k == 0:
            got = self._best(spec)
            return None if got is None else (got.cost, got.peaks)
        d = self._derivation(spec, k)
        return None if d is None else (d.cost, d.peaks)

    def _node(self, spec: Spec) -> _Node:
        node = self._nodes.get(spec)
        if node is None:
            node = _Node(spec_actions(spec, self.ctx))
            self._nodes[spec] = node
            for index, action in enumerate(node.actions):
                self._push(spec, node, index, (0,) * len(action.children))
        return node

    def _push(self, spec: Spec, node: _Node, index: int, ranks: tuple[int, ...]) -> None:
        if (index, ranks) in node.seen:
            return
        node.seen.add((index, ranks))
        action = node.actions[index]
        costs, peaks = [], []
        for child, r in zip(action.children, ranks, strict=True):
            got = self._cost(child, r)
            if got is None:
                return  # the child has no Impl of that rank: nor any of higher ranks
            costs.append(got[0])
            peaks.append(got[1])
        d = _Derivation(
            action,
            ranks,
            listed_cost(spec, action, costs, self.ctx),
            action_peaks(spec, action, peaks, self.ctx),
        )
        key = (d.cost, work(d.cost), tuple(reversed(d.peaks)), index, ranks)
        heapq.heappush(node.heap, (key, index, ranks, d))

    def _derivation(self, spec: Spec, k: int) -> _Derivation | None:
        node = self._node(spec)
        while len(node.found) <= k:
            if node.last is not None:
                index, ranks = node.last
                node.last = None
                for j in range(len(ranks)):
                    self._push(spec, node, index, (*ranks[:j], ranks[j] + 1, *ranks[j + 1 :]))
            if not node.heap:
                return None
            _, index, ranks, d = heapq.heappop(node.heap)
            node.last = (index, ranks)
            if not fits(spec, d.peaks):
                continue
            if self.distinct_costs:
                # One tree per cost: without the loops' credit (``listed_cost``) the
                # residencies at a tree's top do not change what a parent costs.
                if int(d.cost) in node.kinds:
                    continue
                node.kinds.add(int(d.cost))
            node.found.append(d)
        return node.found[k]


def listed_cost(spec: Spec, action: Action, costs: list[int], ctx: SynthesisContext) -> int:
    """What ``KBest`` lists a derivation at: the model's cost (``action_cost``), but where a
    loop would take off a residency its trips repeat (``cost.takes_off``), the cost without
    that credit (the children's fills left out), so that a node never costs less when a
    child costs more."""
    cost = action_cost(spec, action, costs, ctx)
    if takes_off(cost):
        cost = action_cost(spec, action, [with_fills(c, ()) for c in costs], ctx)
    return cost


def distinct_programs(
    impls: Iterator[Impl], count: int, text: Callable[[Impl], str], pulls: int
) -> list[Impl]:
    """The first ``count`` of ``impls`` whose ``text`` (their C) differs from every earlier
    one, looking at no more than ``pulls`` of them."""
    out: list[Impl] = []
    seen: set[str] = set()
    for n, impl in enumerate(impls):
        if n >= pulls or len(out) >= count:
            break
        t = text(impl)
        if t not in seen:
            seen.add(t)
            out.append(impl)
    return out
