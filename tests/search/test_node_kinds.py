"""A new kind of Impl node is a new class: search, memo table, cost and codegen ask the node.

The kind here, written in this test module alone, is a loop that walks its tiles backwards
(``for (i = trips - 1; i >= 0; i--)``), offered by a rule object placed first in the rule
set. Synthesis picks it (it claims half a forward loop's cost), the memo table
stores and replays its decision, the pretty-printer describes it, and the C it writes is
compiled and checked against NumPy. No engine module knows it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from morello.cli import format_impl
from morello.codegen.c import Emitter, Lin, View
from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.db.table import MemoTable
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import LoopAction
from morello.nodes.base import NodeBase
from morello.rules.schemas import tile_tensor
from morello.search.expand import past_forced
from morello.search.solve import synthesize
from morello.spec import Spec

SPEC = "func f(a: f32[16, 8], b: f32[8, 8]) -> c: f32[16, 8] {\n    c = matmul(a, b)\n}\n"


@attrs.frozen
class BackwardLoop(NodeBase):
    """Loop over output index ``var`` of the root-sized Spec in steps of ``step``, last first."""

    var: str
    step: int
    trips: int
    body: Spec

    @property
    def children(self) -> tuple[Spec, ...]:
        return (self.body,)

    def describe(self) -> str:
        return f"backward: for {self.var} in {self.trips} x {self.step}, last first"

    def decision(self) -> tuple[Any, ...]:
        return ("backward", self.var, self.step)

    def cost(self, spec: Spec, child_costs: Sequence[int], ctx: SynthesisContext) -> int:
        # Half a forward loop's cost, so that the search surely picks it: this test is about
        # how the engine dispatches to a node kind, not about the cost model.
        return self.trips * child_costs[0] // 2

    def emit(self, em: Emitter, impl: Impl, views: list[View]) -> None:
        uses = em.ctx.ruleset.ops[impl.spec.op].operands_using(self.var)
        var = em.names.fresh("i")
        em.emit(f"for (int {var} = {self.trips - 1}; {var} >= 0; {var}--) {{")
        em.depth += 1
        shifted = list(views)
        for i, d in uses:
            shifted[i] = shifted[i].shifted(d, Lin.var(var).scale(self.step))
        em.node(impl.children[0], shifted)
        em.depth -= 1
        em.emit("}")


@attrs.frozen
class BackwardRows:
    """A rule object: rows of a 16-row output in two steps of 8, backwards."""

    name = "backward"

    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[BackwardLoop]:
        opdef = ctx.ruleset.ops[spec.op]
        if spec.op != "matmul" or spec.output.shape[0] != 16:
            return
        var = opdef.output.indices[0]
        operands = list(spec.operands)
        for i, d in opdef.operands_using(var):
            tile = tile_tensor(operands[i], d, 8)
            if tile is None:
                return
            operands[i] = tile
        yield BackwardLoop(var, 8, 2, spec.with_operands(operands))


@pytest.fixture
def backward_ctx(ctx: SynthesisContext) -> SynthesisContext:
    ruleset = attrs.evolve(ctx.ruleset, rules=(BackwardRows(), *ctx.ruleset.rules))
    return attrs.evolve(ctx, ruleset=ruleset)


@pytest.mark.runs_code
def test_new_node_kind_is_searched_stored_printed_and_compiled(
    backward_ctx: SynthesisContext, tmp_path: Path
) -> None:
    ctx = backward_ctx
    program = build_program(parse_spec_file("<f>", SPEC).funcs[0], ctx)
    table = MemoTable(ctx)
    impl, _ = synthesize(program.spec, ctx, table)
    assert sum(isinstance(n.action, BackwardLoop) for n in impl.walk()) == 1
    assert "backward: for m in 2 x 8, last first" in format_impl(impl, ctx)

    # The memo table stores the decision and a second search replays it from the table.
    again, stats = synthesize(program.spec, ctx, table)
    assert again == impl
    assert stats.specs_visited == 0

    source = lower_to_c("f", [(program, impl)], ctx)
    assert "for (int i0 = 1; i0 >= 0; i0--) {" in source.c_text
    check(compile_shared(source.c_text, ctx.target, tmp_path), program, ctx)


def test_each_node_kind_prices_itself(backward_ctx: SynthesisContext) -> None:
    ctx = backward_ctx
    program = build_program(parse_spec_file("<f>", SPEC).funcs[0], ctx)
    # Past a residency in an L2 (where the target has one), whose steps a loop would fill once.
    spec = past_forced(program.spec, ctx)
    (backward,) = BackwardRows().actions(spec, ctx)
    forward = LoopAction("tile_out", backward.var, 8, 2, backward.body, None)
    assert backward.cost(spec, [100], ctx) == 100
    assert forward.cost(spec, [100], ctx) == 200


@attrs.frozen
class GreedyBackwardLoop(BackwardLoop):
    """A backward loop whose peaks rule claims more memory than the Spec it runs under has."""

    def peaks(
        self, spec: Spec, child_peaks: Sequence[tuple[int, ...]], ctx: SynthesisContext
    ) -> tuple[int, ...]:
        return tuple(2 * limit for limit in spec.limits)


@attrs.frozen
class GreedyBackwardRows(BackwardRows):
    def actions(self, spec: Spec, ctx: SynthesisContext) -> Iterator[BackwardLoop]:
        for loop in super().actions(spec, ctx):
            yield GreedyBackwardLoop(loop.var, loop.step, loop.trips, loop.body)


def test_a_node_kind_claiming_more_than_its_limits_is_named(ctx: SynthesisContext) -> None:
    """A node kind whose peaks exceed the limits it was chosen under would make the memo
    table store a box that runs backwards; it is reported, naming the node, when stored."""
    ruleset = attrs.evolve(ctx.ruleset, rules=(GreedyBackwardRows(), *ctx.ruleset.rules))
    greedy = attrs.evolve(ctx, ruleset=ruleset)
    program = build_program(parse_spec_file("<f>", SPEC).funcs[0], greedy)
    with pytest.raises(AssertionError, match=r"backward: for m in 2 x 8, last first needs"):
        synthesize(program.spec, greedy, MemoTable(greedy))
