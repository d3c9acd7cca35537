"""Dead ends: Specs that have no implementation, recognized without searching below them.

An operand is *stranded* when it lives in a level that no kernel reachable from its Spec
accepts, and it cannot leave that level because every level it may move to (the level's
``moves_to``) has no room left in the Spec's limits. Such a Spec has no implementation:

* limits never grow below a Spec (moves, temporaries and parallel shares only take), so
  the operand stays where it is in every Spec below, and tiles of it too;
* every action of the rule set keeps the operand, at its level, in at least one child whose
  op is among the ops *reachable* from the Spec's op (the op itself, the stages of its
  decompositions, and so on), unless the action moves it, which needs room it has not got;
* so every Impl would end in a kernel of a reachable op reading the operand at that level,
  and no such kernel exists.

For example, on a target whose main memory moves only into its L1 cache, and whose product
and zero kernels read no operand in main memory, a product tile with an operand still in
main memory after a move has taken all of L1 is one. Synthesizing a 128^3 product met about
19,000 of these (a quarter of the Specs it solved), and solved each, with its lattice of
tiles below, to find nothing; now each is answered at once.

The second point is a promise of each rule. Decompositions are checked here (every operand
of the pattern must appear in some stage). A schema makes the promise with an
``operand_ops(rule, op, ctx)`` method returning the ops of the children its actions leave
the operands in (see ``morello.rules.schemas.Schema``); a rule of a schema without one
makes every op it applies to unprunable. The DP is checked against exhaustive enumeration,
which never prunes, in ``tests/search``. Knows no op, level or kernel by name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from morello.rules.rewrites import DecomposeRule, SchemaRule

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.spec import Spec

#: ``accepted`` for an op some path from which accepts anything (or is not understood).
ANY = None


class DeadEnds:
    """Answers ``dead(spec)`` for one context, working out each op's levels once."""

    def __init__(self, ctx: SynthesisContext) -> None:
        self.ctx = ctx
        target = ctx.target
        # Per level name: the positions (in a Spec's limits) of the levels it moves to.
        self._exits = {
            lv.name: tuple(target.level_index(d) for d in lv.moves_to) for lv in target.levels
        }
        self._all_levels = frozenset(lv.name for lv in target.levels)
        # Per op: (level name, exits) for each level its operands would be stranded in.
        self._strandings: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {}

    def dead(self, spec: Spec) -> bool:
        """Whether ``spec`` has a stranded operand (so no implementation)."""
        strandings = self._strandings.get(spec.op)
        if strandings is None:
            strandings = self._strandings[spec.op] = self._strandings_of(spec.op)
        for level, exits in strandings:
            for ts in spec.operands:
                if ts.level == level and all(spec.limits[i] == 0 for i in exits):
                    return True
        return False

    def _strandings_of(self, op: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
        accepted = self.accepted(op)
        if accepted is ANY:
            return ()
        return tuple(
            (level, exits) for level, exits in self._exits.items() if level not in accepted
        )

    def accepted(self, op: str) -> frozenset[str] | None:
        """The levels some kernel of an op reachable from ``op`` reads or writes an operand
        in, or ``ANY`` (None) when that cannot be bounded."""
        levels: set[str] = set()
        seen = {op}
        todo = [op]
        while todo:
            name = todo.pop()
            for kernel in self.ctx.ruleset.kernels:
                if kernel.op != name:
                    continue
                for pattern in kernel.operands:
                    if not pattern.levels:
                        return ANY
                    levels.update(pattern.levels)
            below = self._ops_below(name)
            if below is ANY:
                return ANY
            for other in below:
                if other not in seen:
                    seen.add(other)
                    todo.append(other)
        return frozenset(levels & self._all_levels)

    def _ops_below(self, op: str) -> set[str] | None:
        """The ops of the children the rules' actions leave an operand of ``op`` in, or
        ``ANY`` when a rule does not say."""
        out: set[str] = set()
        for rule in self.ctx.ruleset.rules:
            if isinstance(rule, DecomposeRule):
                if rule.op != op:
                    continue
                used = {a for st in rule.stages for a in (*st.args, st.target)}
                if not used >= {*rule.params, rule.output}:
                    return ANY  # a stage list that drops an operand frees it
                out.update(st.op for st in rule.stages)
            elif isinstance(rule, SchemaRule):
                if not any(p.matches_op(op) for p in rule.patterns):
                    continue
                schema = self.ctx.schemas[rule.schema]
                operand_ops = getattr(schema, "operand_ops", None)
                if operand_ops is None:
                    return ANY
                got = operand_ops(rule, op, self.ctx)
                if got is None:
                    return ANY
                out.update(got)
            else:  # a kind of rule this module does not know
                return ANY
        return out
