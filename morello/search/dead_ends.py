"""Dead ends: Specs that have no implementation, recognized without searching below them.

An operand's *place* is its Spec's op, whether the Spec accumulates, and the operand's
position (a matmul's first input, an accumulating matmul's output). An operand is *stranded*
when no kernel that could read it at a place reachable from its own accepts its level, and
it cannot leave that level because every level it may move to (the level's ``moves_to``)
has no room left in the Spec's limits. Such a Spec has no implementation:

* limits never grow below a Spec (moves, temporaries and parallel shares only take), so
  the operand stays where it is in every Spec below, and tiles of it too;
* every action of the rule set keeps the operand, at its level, in at least one child, at
  a place *reachable* from its own (the same place through a loop, its stage's through a
  decomposition, and so on), unless the action moves it, which needs room it has not got;
* so every Impl would end in a kernel reading the operand at that level at a reachable
  place; a kernel whose scratch registers do not fit the Spec's limits never will (limits
  only shrink), and no other kernel takes the level.

For example, on a target whose main memory moves only into its L1 cache, and whose product
and zero kernels read no operand in main memory, a product tile with an operand still in
main memory after a move has taken all of L1 is one. Synthesizing a 128^3 product met about
19,000 of these (a quarter of the Specs it solved), and solved each, with its lattice of
tiles below, to find nothing; now each is answered at once.

The second point is a promise of each rule. Decompositions are checked here (every operand
of the pattern must appear in some stage). A schema makes the promise with an
``operand_places(rule, place, ctx)`` method returning the places of the children its
actions leave an operand at that place in (see ``morello.rules.schemas.Schema``); a rule of
a schema without one makes every place it applies to unprunable. The DP is checked against
exhaustive enumeration, which never prunes, in ``tests/search``, and every Spec called dead
against the search without pruning in ``tests/search/test_dead_ends.py``. Knows no op,
level or kernel by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from morello.rules.rewrites import DecomposeRule, SchemaRule
from morello.spec import NO_CEILING

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.rules.kernels import Kernel
    from morello.spec import Spec

#: An operand's place: op, whether the Spec accumulates, the operand's position.
Place = tuple[str, bool, int]
#: Per operand position: (level, the positions of its exits in the limits) for each level an
#: operand there would be stranded in.
Strandings = tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]
#: ``accepted`` for a place from which some kernel takes any level (or a rule says nothing).
ANY = None


class DeadEnds:
    """Answers ``dead(spec)`` for one context, working out each place's levels once."""

    def __init__(self, ctx: SynthesisContext) -> None:
        self.ctx = ctx
        target = ctx.target
        # Per level name: the positions (in a Spec's limits) of the levels it moves to.
        self._exits = {
            lv.name: tuple(target.level_index(d) for d in lv.moves_to) for lv in target.levels
        }
        self._all_levels = frozenset(lv.name for lv in target.levels)
        self._kernels: dict[tuple[str, bool], list[Kernel]] = {}
        needs: set[tuple[int, int]] = set()
        for k in ctx.ruleset.kernels:
            self._kernels.setdefault((k.op, k.accum), []).append(k)
            needs.update((target.level_index(lv), units) for lv, units in k.scratch)
        # The scratch needs of all kernels: which of them fit a Spec's limits decides which
        # kernels can still match anywhere below it.
        self._needs = tuple(sorted(needs))
        # Per (op, accum, which needs fit): for each operand position, (level, exits) for
        # each level an operand there would be stranded in.
        self._strandings: dict[tuple[object, ...], Strandings] = {}

    def dead(self, spec: Spec) -> bool:
        """Whether ``spec`` has a stranded operand (so no implementation)."""
        return self._stranded_exits(spec) is not None

    def _stranded_exits(self, spec: Spec) -> tuple[int, ...] | None:
        """The exits (limit positions) of a stranded operand of ``spec``, or None."""
        limits = spec.limits
        key = (spec.op, spec.accum, tuple(limits[i] >= n for i, n in self._needs))
        strandings = self._strandings.get(key)
        if strandings is None:
            strandings = self._strandings[key] = self.strandings(
                spec.op, spec.accum, len(spec.operands), key[2]
            )
        for ts, stranded in zip(spec.operands, strandings, strict=True):
            for level, exits in stranded:
                if ts.level.name == level and all(limits[i] == 0 for i in exits):
                    return exits
        return None

    def ceiling(self, spec: Spec) -> tuple[int, ...] | None:
        """For a dead ``spec``: the most room per level under which it stays dead (its
        stranded operand's exits stay empty, and no more kernels' scratch fits); None for
        a Spec that is not dead."""
        exits = self._stranded_exits(spec)
        if exits is None:
            return None
        limits = spec.limits
        out = [NO_CEILING] * len(limits)
        for i, n in self._needs:
            if limits[i] < n:
                out[i] = min(out[i], n - 1)
        for i in exits:
            out[i] = 0
        return tuple(out)

    def strandings(
        self, op: str, accum: bool, arity: int, fits: tuple[bool, ...] | None = None
    ) -> Strandings:
        """Per operand position of a Spec of ``op``: (level, exits) for each level an operand
        there is stranded in when every one of its exits is full. ``fits`` says which scratch
        needs fit the Spec's limits (all, by default)."""
        usable = dict(zip(self._needs, fits or (True,) * len(self._needs), strict=True))
        out = []
        for position in range(arity):
            accepted = self.accepted((op, accum, position), usable)
            if accepted is ANY:
                out.append(())
            else:
                out.append(tuple((lv, ex) for lv, ex in self._exits.items() if lv not in accepted))
        return tuple(out)

    def accepted(
        self, place: Place, usable: dict[tuple[int, int], bool] | None = None
    ) -> frozenset[str] | None:
        """The levels some kernel whose scratch is ``usable`` (default: all) reads or writes
        an operand in, at a place reachable from ``place``; ``ANY`` (None) when unbounded."""
        target = self.ctx.target
        levels: set[str] = set()
        seen = {place}
        todo = [place]
        while todo:
            op, accum, position = todo.pop()
            for k in self._kernels.get((op, accum), ()):
                if usable is not None and not all(
                    usable[(target.level_index(lv), n)] for lv, n in k.scratch
                ):
                    continue
                if position >= len(k.operands):
                    continue
                pattern = k.operands[position]
                if not pattern.levels:
                    return ANY
                levels.update(pattern.levels)
            below = self._places_below((op, accum, position))
            if below is ANY:
                return ANY
            for other in below:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return frozenset(levels & self._all_levels)

    def _places_below(self, place: Place) -> set[Place] | None:
        """The places the rules' actions leave an operand at ``place`` in, or ``ANY`` when a
        rule does not say."""
        op, accum, position = place
        out: set[Place] = set()
        for rule in self.ctx.ruleset.rules:
            if isinstance(rule, DecomposeRule):
                if rule.op != op or accum:
                    continue
                names = (*rule.params, rule.output)
                if position >= len(names):
                    return ANY
                name = names[position]
                found = False
                for st in rule.stages:
                    for j, arg in enumerate((*st.args, st.target)):
                        if arg == name:
                            out.add((st.op, st.accum, j))
                            found = True
                if not found:
                    return ANY  # a stage list that never reads the operand frees it
            elif isinstance(rule, SchemaRule):
                if not any(p.matches_op(op, accum) for p in rule.patterns):
                    continue
                schema = self.ctx.schemas[rule.schema]
                operand_places = getattr(schema, "operand_places", None)
                if operand_places is None:
                    return ANY
                got = operand_places(rule, place, self.ctx)
                if got is None:
                    return ANY
                out.update(got)
            else:  # a kind of rule this module does not know
                return ANY
        return out
