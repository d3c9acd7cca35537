"""Dead ends (``morello.search.dead_ends``): every Spec called dead has no implementation,
and answering dead ends at once changes no answer of the search."""

from __future__ import annotations

import attrs
import pytest

import morello.search.solve as solve
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.rules.rewrites import DecomposeRule, Stage
from morello.search.dead_ends import ANY, DeadEnds
from morello.search.solve import Solution, synthesize
from morello.spec import Spec, snap_down

SOURCES = {
    "matmul": "func f(a: f32[8, 8], b: f32[8, 16]) -> c: f32[8, 16] { c = matmul(a, b) }",
    "dense": (
        "func f(x: f32[2, 8], w: f32[8, 16], b: f32[16]) -> y: f32[2, 16] "
        "{ y = relu(add(matmul(x, w), b)) }"
    ),
    "softmax": "func f(x: f32[2, 16]) -> y: f32[2, 16] { y = softmax(x) }",
}


def _spec(ctx: SynthesisContext, name: str, cache_lines: int | None = None) -> Spec:
    """The function's Spec; with ``cache_lines``, the limit of every cache level that
    operands are moved into lowered to it (a small cache fills up in small Specs, which is
    where operands get stranded; a cache holding whole Specs, an L2, keeps its size)."""
    (func,) = parse_spec_file(f"<{name}>", SOURCES[name]).funcs
    spec = build_program(func, ctx).spec
    if cache_lines is None:
        return spec
    limits = tuple(
        n if i == 0 or lv.counts_registers or lv.whole_specs else min(n, cache_lines)
        for i, (lv, n) in enumerate(zip(ctx.target.levels, spec.limits, strict=True))
    )
    return attrs.evolve(spec, limits=limits)


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_dead_ends_against_full_search(ctx: SynthesisContext, name: str) -> None:
    """Against the search without pruning: each Spec it solved that is called dead has no
    implementation, some are dead where the root's op can strand an operand, and the
    search with pruning finds the same program visiting fewer Specs."""
    spec = _spec(ctx, name, cache_lines=16)
    judge = DeadEnds(ctx)
    solved: dict[Spec, Solution | None] = {}
    with pytest.MonkeyPatch.context() as mp:
        # Answers held only under their own limits (no ceilings, ``test_ceilings.py``), so
        # that the Specs visited count what the pruning saves and nothing else.
        mp.setattr(solve, "_ceiling", lambda spec, shortfalls: list(spec.limits))
        pruned, pruned_stats = synthesize(spec, ctx, {})
        mp.setattr(DeadEnds, "ceiling", lambda self, spec: None)  # no Spec is dead
        full, full_stats = synthesize(spec, ctx, solved)
    dead = [s for s in solved if judge.dead(s)]
    wrong = [s.describe() for s in dead if solved[s] is not None]
    assert not wrong, f"called dead but implemented: {wrong[:3]}"
    if any(judge.strandings(spec.op, spec.accum, len(spec.operands))):
        assert dead, "no dead end met: the test no longer exercises the pruning"
    assert pruned == full
    assert pruned_stats.specs_visited <= full_stats.specs_visited - len(dead)
    assert synthesize(spec, ctx, {})[0] == full  # and with ceilings


def test_stranded_operand(ctx: SynthesisContext) -> None:
    """An operand in a level no reachable kernel reads, with no room in any level it moves
    to, makes its Spec dead; room in one of those levels revives it. Its ceiling is 0 at
    those levels, and room up to its ceiling elsewhere leaves it dead."""
    judge = DeadEnds(ctx)
    spec = _spec(ctx, "matmul")
    found = [
        (i, level, exits)
        for i, stranded in enumerate(judge.strandings(spec.op, spec.accum, len(spec.operands)))
        for level, exits in stranded
        if exits
    ]
    if not found:
        pytest.skip(f"the kernels of {ctx.target.name} read every level")
    i, level, exits = found[0]
    operands = list(spec.operands)
    operands[i] = attrs.evolve(operands[i], level=ctx.target.level(level))
    starved = tuple(0 if j in exits else n for j, n in enumerate(spec.limits))
    assert judge.dead(attrs.evolve(spec, operands=tuple(operands), limits=starved))
    assert not judge.dead(attrs.evolve(spec, operands=tuple(operands)))
    small = tuple(0 if j in exits else max(1, n // 8) for j, n in enumerate(spec.limits))
    dead = attrs.evolve(spec, operands=tuple(operands), limits=small)
    ceiling = judge.ceiling(dead)
    assert all(ceiling[j] == 0 for j in exits)
    top = ctx.target.max_limits()
    raised = tuple(snap_down(min(c, t)) for c, t in zip(ceiling, top, strict=True))
    assert raised != small and judge.dead(attrs.evolve(dead, limits=raised))


def test_scratch_that_cannot_fit(ctx: SynthesisContext) -> None:
    """A kernel whose scratch registers exceed the limits reads nothing below them: with
    none of the scratch needs fitting, at least as many levels strand as with all."""
    judge = DeadEnds(ctx)
    spec = _spec(ctx, "matmul")
    arity = len(spec.operands)
    roomy = judge.strandings(spec.op, True, arity)
    starved = judge.strandings(spec.op, True, arity, (False,) * len(judge._needs))
    for a, b in zip(roomy, starved, strict=True):
        assert set(a) <= set(b)


def test_schema_without_promise_disables_pruning(ctx: SynthesisContext) -> None:
    """A rule whose schema has no ``operand_places`` may free operands: nothing it applies to is
    called dead."""

    @attrs.frozen
    class Opaque:  # the built-in tile_out's actions, without its promise
        name: str = "tile_out"

        def actions(self, rule, spec, ctx):  # type: ignore[no-untyped-def]
            return ctx_schemas["tile_out"].actions(rule, spec, ctx)

    ctx_schemas = ctx.schemas
    opaque = attrs.evolve(ctx, schemas={**ctx.schemas, "tile_out": Opaque()})
    assert DeadEnds(opaque).accepted(("matmul", False, 0)) is ANY
    assert DeadEnds(opaque).strandings("matmul", False, 3) == ((), (), ())


def test_decomposition_dropping_an_operand_disables_pruning(ctx: SynthesisContext) -> None:
    """A decomposition whose stages never read one of its operands frees it."""
    drop = DecomposeRule("drop", "matmul", ("a", "b"), "c", (Stage("c", False, "zero", ()),))
    ruleset = attrs.evolve(ctx.ruleset, rules=(*ctx.ruleset.rules, drop))
    assert DeadEnds(attrs.evolve(ctx, ruleset=ruleset)).accepted(("matmul", False, 0)) is ANY
