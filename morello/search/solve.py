"""Finds the cheapest Impl of a Spec: a memoized depth-first walk of the spec-dependency graph.

The graph is the one ``expand`` builds (Specs as nodes, each action's sub-Specs as edges), but
the solver walks it lazily, children before parents, and keeps for each Spec the action of
least cost; ties break on lower peak memory (fastest level first) and then on the action's
position in the Spec's action list, so results are deterministic.

Depth-first order lets a Spec use answers found earlier in the same walk for the same goal
under other memory limits: a solution found under limits L that needs limits P is optimal
for every limit between P and L, and "no implementation under L" holds below L too. Specs
that differ only in limits are common (every move lowers its body's limits), so this keeps
the walk far smaller than the graph. The memo table stores the same ranges across runs.

A range reaches above the limits it was found under, too, as far as its *ceiling*: while the
Spec's actions are listed, every rule that leaves one out for lack of room says how much
room it needed (``spec.short_of``), and a Spec's answer holds under larger limits that give
none of those actions room, below its children's ceilings. Synthesizing a graph solves the
same goals under larger limits again and again (the first stage of a pipeline meets them
with a temporary's room taken; dense_relu solved 135k of its 258k Specs a second time, under
larger limits), and most of those answers are the same.
"""

from __future__ import annotations

import contextlib
import gc
import operator
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from morello.context import SynthesisContext
from morello.cost import action_cost, action_peaks, work
from morello.db.table import MISSING, Decided, MemoTable, Stored, decision_of
from morello.errors import NoImplementationError, RuleError
from morello.impl import Action, Impl
from morello.search.dead_ends import DeadEnds
from morello.search.expand import action_for, spec_actions
from morello.spec import EVERY_LEVEL, NO_CEILING, Spec, noting_shortfalls


@attrs.frozen
class Solution:
    """The best decision for one Spec."""

    action: Action
    cost: int
    peaks: tuple[int, ...]


@attrs.frozen
class SearchStats:
    """Size and duration of one synthesis.

    ``specs_visited`` counts the Specs whose actions were enumerated and solved,
    ``graph_nodes`` every Spec the walk met (answered from earlier results or not),
    ``graph_edges`` the sub-Spec references it followed, and ``specs_taken_in`` the
    answers helper walks solved and sent (``synthesize``'s ``jobs``).
    """

    specs_visited: int
    graph_nodes: int
    graph_edges: int
    seconds: float
    specs_taken_in: int = 0


Answer = Solution | Stored | None
_PROGRESS_EVERY = 256  # Specs solved between two progress reports
Memo = dict[Spec, "Solution | None"] | MemoTable


def _order_key(sol: Solution, index: int) -> tuple[int, int, tuple[int, ...], int]:
    return (sol.cost, work(sol.cost), tuple(reversed(sol.peaks)), index)


def _goal(spec: Spec) -> tuple[Any, ...]:
    """A Spec without its limits."""
    return (spec.op, spec.operands, spec.accum, spec.serial)


def _at_most(low: tuple[int, ...], high: tuple[int, ...]) -> bool:
    return all(a <= b for a, b in zip(low, high, strict=True))


_TRADE_EVERY = 256  # Specs solved between two trades of answers with helper walks


def _rotated(actions: list[Action], first: int) -> Iterator[tuple[int, Action]]:
    """``actions`` with their positions, from position ``first`` round to ``first - 1``."""
    n = len(actions)
    for i in range(n):
        j = (first + i) % n
        yield j, actions[j]


def _ceiling(spec: Spec, shortfalls: dict[int, int]) -> list[int]:
    """The most room per level under which ``spec``'s own actions are those listed: one
    less than the least room an action left out needed there (``spec.short_of``), and never
    below the Spec's limits (a need noted after room was taken for a first temporary may
    be within them)."""
    limits = spec.limits
    if EVERY_LEVEL in shortfalls:
        return list(limits)
    return [
        max(shortfalls[j] - 1, limits[j]) if j in shortfalls else NO_CEILING
        for j in range(len(limits))
    ]


def _lower(ceiling: list[int], spec: Spec, child: Spec, below: tuple[int, ...] | None) -> bool:
    """Lower ``ceiling`` (of ``spec``) to what the answer of ``child`` allows, whose own
    ceiling is ``below`` (None: unknown). Returns whether ``ceiling`` is now ``spec``'s limits.

    Where the child's limit equals the Spec's (a loop's body), the limit rises with the
    Spec's, at most as far: the child's ceiling holds as it is. Where it is lower (room was
    taken above it), how far it rises is the rule's affair, so the Spec's ceiling falls to
    its own limit unless the child's answer holds under any limit there."""
    limits = spec.limits
    if below is None:
        ceiling[:] = limits
        return True
    if all(map(operator.ge, below, ceiling)):
        return False  # nothing lowers it (the caller asks only while it is above the limits)
    bound = True
    theirs = child.limits
    for j, c in enumerate(below):
        mine = limits[j]
        if c < ceiling[j]:
            if theirs[j] == mine:
                ceiling[j] = c
            elif c != NO_CEILING:
                ceiling[j] = mine
        if ceiling[j] > mine:
            bound = False
    return bound


class _Walk:
    """One synthesis: the answers found so far and the Specs on the current path."""

    def __init__(
        self,
        ctx: SynthesisContext,
        memo: Memo | None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.memo = memo
        self.progress = progress
        self.answers: dict[Spec, Answer] = {}
        self.solved: dict[Spec, Solution | None] = {}  # Specs whose actions were enumerated
        # Per goal: the (ceiling, answer) pairs solved, each answer holding from its peaks
        # up to its ceiling; and the ceiling of each Spec's answer (none: its limits).
        self.ranges: dict[tuple[Any, ...], list[tuple[tuple[int, ...], Solution | None]]] = {}
        self.ceilings: dict[Spec, tuple[int, ...]] = {}
        self.path: dict[Spec, None] = {}  # the Specs being solved, outermost first
        dead_ends = ctx.derived.get("dead_ends")
        if dead_ends is None:
            dead_ends = ctx.derived["dead_ends"] = DeadEnds(ctx)
        self.dead_ends: DeadEnds = dead_ends
        self.edges = 0
        # Walking with helpers (``morello.search.parallel``): where this walk starts in each
        # Spec's action list, what it solved since it last traded answers with them, and
        # the trade, run every ``_TRADE_EVERY`` Specs solved (None: walking alone).
        self.first_action: Callable[[int], int] = lambda count: 0
        self.outbox: list[tuple[Any, ...]] | None = None
        self.trade: Callable[[], None] | None = None
        # Whether what this walk solves or takes in goes into ``memo`` (a helper only reads
        # the memo table's file: the first walk keeps it).
        self.keeps = isinstance(memo, MemoTable)

    def answer(self, spec: Spec) -> Answer:
        """The best solution of ``spec`` (a Stored decision when found for other limits)."""
        got = self.answers.get(spec, MISSING)
        if got is MISSING:
            got = self._shared(spec)
            if got is MISSING:
                dead = self.dead_ends.ceiling(spec)
                if dead is not None:
                    got = None  # not solved, nor stored: recognized as fast as looked up
                    self.ceilings[spec] = dead
            if got is MISSING:
                got = self._remembered(spec)
            if got is MISSING:
                got = self._solve(spec)
            self.answers[spec] = got  # type: ignore[assignment]
        return got  # type: ignore[return-value]

    def _shared(self, spec: Spec) -> Answer | object:
        """An answer found in this walk for the same goal whose range (from its peaks up to
        its ceiling) holds these limits."""
        for ceiling, sol in self.ranges.get(_goal(spec), ()):
            if not _at_most(spec.limits, ceiling):
                continue
            if sol is None:
                self.ceilings[spec] = ceiling
                return None  # no implementation under more memory: none under less
            if _at_most(sol.peaks, spec.limits):
                self.ceilings[spec] = ceiling
                if isinstance(sol, Stored):
                    return sol
                return Stored(decision_of(sol.action), sol.cost, sol.peaks)
        return MISSING

    def _remembered(self, spec: Spec) -> Answer | object:
        if self.memo is None:
            return MISSING
        if isinstance(self.memo, dict):
            return self.memo.get(spec, MISSING)
        # How far up the limits a stored answer holds, so a parent's range is as wide as
        # when the walk solves the Spec itself (without it, a resumed run met fewer Specs in
        # ranges it had found, and solved more than a cold one).
        # (Unknown for another process's answer, which is not looked up for it: that would
        # read the table's key from the file, which its answer is passed on to spare.)
        known = self.memo.solutions.get(spec)
        if known is not None:
            got, reach = known
        else:
            got, reach = self.memo.get_reach(spec)
            if isinstance(got, Decided):
                got = self._resolve(spec, got.decision)
                if isinstance(got, Solution):
                    self.memo.solutions[spec] = (got, reach)
        if reach is not None:
            self.ceilings[spec] = reach
        return got

    def _resolve(self, spec: Spec, decision: tuple[Any, ...]) -> Solution | object:
        """The solution a stored decision makes at ``spec``: its cost and peaks come from
        the children's answers (MISSING if the decision does not apply, which a table
        written under the same rules never holds)."""
        action = action_for(spec, decision, self.ctx)
        if action is None:
            return MISSING
        subs = []
        for child in action.children:
            self.edges += 1
            sub = self.answer(child)
            if sub is None:
                return MISSING
            subs.append(sub)
        return self._costed(spec, action, subs)

    def _costed(self, spec: Spec, action: Action, subs: list[Solution | Stored]) -> Solution:
        """``action`` at ``spec`` with its cost and peaks from its children's answers."""
        return Solution(
            action,
            action_cost(spec, action, [s.cost for s in subs], self.ctx),
            action_peaks(spec, action, [s.peaks for s in subs], self.ctx),
        )

    def _solve(self, spec: Spec) -> Solution | None:
        if spec in self.path:
            self._report_cycle(spec)
        self.path[spec] = None
        winner: Solution | None = None
        winner_key = None
        with noting_shortfalls() as shortfalls:
            actions = spec_actions(spec, self.ctx)
        ceiling = _ceiling(spec, shortfalls)
        bound = ceiling == list(spec.limits)  # then the children cannot lower it
        ceilings = self.ceilings
        first = self.first_action(len(actions))
        for index, action in enumerate(actions) if not first else _rotated(actions, first):
            subs: list[Solution | Stored] = []
            for child in action.children:
                self.edges += 1
                sub = self.answer(child)
                if not bound:
                    bound = _lower(ceiling, spec, child, ceilings.get(child))
                if sub is None:
                    break
                subs.append(sub)
            else:
                cost = action_cost(spec, action, [s.cost for s in subs], self.ctx)
                if winner is not None and cost > winner.cost:
                    continue  # peaks only break ties
                peaks = action_peaks(spec, action, [s.peaks for s in subs], self.ctx)
                sol = Solution(action, cost, peaks)
                key = _order_key(sol, index)
                if winner_key is None or key < winner_key:
                    winner, winner_key = sol, key
        del self.path[spec]
        self.solved[spec] = winner
        held = tuple(ceiling)
        ceilings[spec] = held
        self.ranges.setdefault(_goal(spec), []).append((held, winner))
        if self.keeps:
            # Saved as the walk goes, so a killed run keeps it.
            self.memo.put(spec, winner, held)  # type: ignore[union-attr]
        elif isinstance(self.memo, MemoTable):
            self.memo.forget_miss(spec)
        if self.progress is not None and len(self.solved) % _PROGRESS_EVERY == 0:
            self.progress(_PROGRESS_EVERY)
        if self.outbox is not None:
            if winner is None:
                self.outbox.append((spec, None, 0, (), held))
            else:
                self.outbox.append(
                    (spec, decision_of(winner.action), winner.cost, winner.peaks, held)
                )
            if self.trade is not None and len(self.outbox) >= _TRADE_EVERY:
                self.trade()
        return winner

    def take_in(self, answers: list[tuple[Any, ...]]) -> int:
        """Answers another walk of the same rules solved (``outbox``): each becomes this
        walk's answer of its Spec, with its ceiling, unless this walk has one or is solving
        it. Returns how many were new here."""
        new = 0
        memo = self.memo if self.keeps else None
        for spec, decision, cost, peaks, held in answers:
            if spec in self.answers or spec in self.path:
                continue
            got = None if decision is None else Stored(decision, cost, peaks)
            self.answers[spec] = got
            self.ceilings[spec] = held
            self.ranges.setdefault(_goal(spec), []).append((held, got))
            if memo is not None:
                memo.put(spec, got, held)
            new += 1
        if new and self.progress is not None:
            self.progress(new)  # the bar counts every walk's Specs
        return new

    def _report_cycle(self, spec: Spec) -> None:
        path = list(self.path)
        cycle = path[path.index(spec) :]
        if len(cycle) == 1:
            for action in spec_actions(spec, self.ctx):
                if spec in action.children:
                    raise RuleError(
                        f"rewrite {action.describe()} does not change {spec.describe()}"
                    )
        specs = " -> ".join(s.describe() for s in cycle[:3])
        raise RuleError(f"the rewrites form a cycle: {specs} ...")

    def solution(self, spec: Spec) -> Solution | None:
        """The answer of ``spec`` with its action at this Spec (resolving Stored decisions)."""
        got = self.answer(spec)
        if isinstance(got, Stored):
            action = action_for(spec, got.decision, self.ctx)
            if action is None:
                raise AssertionError(f"decision {got.decision} fits no action of {spec}")
            got = Solution(action, got.cost, got.peaks)
            self.answers[spec] = got
        return got

    def build(self, spec: Spec) -> Impl:
        """The Impl tree of ``spec``."""
        sol = self.solution(spec)
        assert sol is not None, spec
        children = tuple(self.build(c) for c in sol.action.children)
        return Impl(spec, sol.action, children, sol.cost, sol.peaks)

    def record(self, impl: Impl | None) -> None:
        """Add what this walk solved to the memo (and, for a dict, the tree's nodes)."""
        if isinstance(self.memo, dict):
            self.memo.update(self.solved)
            for node in impl.walk() if impl is not None else ():
                self.memo.setdefault(node.spec, Solution(node.action, node.cost, node.peaks))
        elif self.memo is not None:
            self.memo.flush()


# The cyclic garbage collector's first threshold during a walk. The walk allocates millions
# of small objects (Specs, actions, tuples) and frees few: at Python's default of 700, young
# collections ran every few hundred Specs and each older one scanned the growing memo, a
# tenth to a fifth of a graph's synthesis (mlp 29.0-33.7 s against 24.7-26.1 s; then 0.6 s of
# mlp's 24.8 s went to collections). Peak memory is the same (mlp 155 MB either way).
_WALK_GC_THRESHOLD = 100_000


@contextlib.contextmanager
def walking() -> Iterator[None]:
    """Python set up for the walk: the recursion limit raised to the depth of the graph,
    and the cyclic garbage collector run less often (``_WALK_GC_THRESHOLD``); both restored
    afterwards."""
    old = sys.getrecursionlimit()
    thresholds = gc.get_threshold()
    sys.setrecursionlimit(max(old, 20_000))
    gc.set_threshold(max(thresholds[0], _WALK_GC_THRESHOLD), *thresholds[1:])
    try:
        yield
    finally:
        sys.setrecursionlimit(old)
        gc.set_threshold(*thresholds)


def answerer(ctx: SynthesisContext, memo: Memo | None = None) -> Callable[[Spec], Answer]:
    """A function giving the best answer (cost and peaks) of any Spec, solving what ``memo``
    lacks; its answers are shared between calls. Call it within ``walking``."""
    return _Walk(ctx, memo).answer


def synthesize(
    spec: Spec,
    ctx: SynthesisContext,
    memo: Memo | None = None,
    progress: Callable[[int], None] | None = None,
    jobs: int = 1,
) -> tuple[Impl, SearchStats]:
    """The cheapest Impl of ``spec`` and statistics of the search.

    ``memo`` (a MemoTable, or a plain dict of Spec -> Solution) holds earlier solutions: Specs
    found there are not solved again, and every Spec solved here is added to it.
    ``progress(n)`` is told every few hundred Specs solved (a progress bar's ``update``).
    ``jobs``: walks of the graph at once, this one and ``jobs - 1`` helper processes that
    trade answers with it (``morello.search.parallel``); the Impl is the same for any number.
    Helpers start only where ``memo`` does not hold the answer already, and not with a plain
    dict ``memo``, which holds Solutions with their actions where a helper's answers are
    decisions (so the dict gets every Spec solved, as with one walk).

    Raises:
        NoImplementationError: nothing implements ``spec`` within its memory limits.
    """
    from morello.search.parallel import helpers

    start = time.perf_counter()
    walk = _Walk(ctx, memo, progress)
    taken_in = 0
    with walking():
        if jobs > 1 and (isinstance(memo, dict) or walk._remembered(spec) is not MISSING):
            jobs = 1  # a dict's answers hold actions; or answered already: nothing to share
        with helpers(walk, spec, ctx, jobs) as link:
            root = walk.answer(spec)
            taken_in = link.taken_in if link is not None else 0
        if root is None:
            walk.record(None)
            limits = ", ".join(
                f"{lv.name} {n}{'' if lv.counts_registers else ' lines'}"
                for lv, n in zip(ctx.target.levels, spec.limits, strict=True)
            )
            raise NoImplementationError(
                f"no implementation of {spec.describe()} fits the memory limits ({limits}) "
                f"with the rules of target {ctx.target.name}"
            )
        impl = walk.build(spec)
    walk.record(impl)
    stats = SearchStats(
        specs_visited=len(walk.solved),
        graph_nodes=len(walk.answers),
        graph_edges=walk.edges,
        seconds=time.perf_counter() - start,
        specs_taken_in=taken_in,
    )
    return impl, stats
