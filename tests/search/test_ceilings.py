"""Ceilings (``morello.search.solve``): an answer is reused under larger limits only as far
as no action left out for lack of room would fit, and doing so changes no answer."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import attrs
import pytest

import morello.search.solve as solve
from morello.context import SynthesisContext
from morello.db.table import MISSING, Decided, MemoTable
from morello.lang.spec_file import build_program, parse_spec_file
from morello.rules.rewrites import SchemaRule
from morello.rules.ruleset import layout_named
from morello.search.solve import answerer, synthesize, walking
from morello.spec import (
    EVERY_LEVEL,
    NO_CEILING,
    Spec,
    noting_shortfalls,
    short_of,
    subtract_limits,
)

#: Small functions whose searches move operands and hold temporaries (so limits vary).
SOURCES = {
    "matmul": "func f(a: f32[2, 8], b: f32[8, 16]) -> c: f32[2, 16] { c = matmul(a, b) }",
    "dense": (
        "func f(x: f32[2, 8], w: f32[8, 8], b: f32[8]) -> y: f32[2, 8] "
        "{ y = relu(add(matmul(x, w), b)) }"
    ),
    "softmax": "func f(x: f32[2, 8]) -> y: f32[2, 8] { y = softmax(x) }",
}


def _spec(ctx: SynthesisContext, name: str) -> Spec:
    (func,) = parse_spec_file(f"<{name}>", SOURCES[name]).funcs
    return build_program(func, ctx).spec


def _limit_sweep(ctx: SynthesisContext, spec: Spec) -> Iterator[Spec]:
    """``spec`` under a lattice of smaller limits, smallest first: each cache level at 8
    lines or its limit, each register level at half or all its registers."""
    choices = []
    for i, (lv, n) in enumerate(zip(ctx.target.levels, spec.limits, strict=True)):
        if i == 0 or lv.whole_specs:
            choices.append((n,))
        elif lv.counts_registers:
            choices.append(tuple(sorted({max(1, n // 2), n})))
        else:
            choices.append(tuple(sorted({min(8, n), n})))
    for limits in itertools.product(*choices):
        yield attrs.evolve(spec, limits=limits)


def _without_ceilings(mp: pytest.MonkeyPatch) -> None:
    """The search as it was before ceilings: every answer holds up to its own limits."""
    mp.setattr(solve, "_ceiling", lambda spec, shortfalls: list(spec.limits))


def _answers(ctx: SynthesisContext, specs: list[Spec]) -> list[int | None]:
    """The cost of each Spec, all answered by one walk (in order), None without one."""
    answer = answerer(ctx, {})
    with walking():
        return [None if (got := answer(s)) is None else got.cost for s in specs]


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_same_answers_as_without_ceilings(ctx: SynthesisContext, name: str) -> None:
    """One walk answering a goal under limits from the smallest up (where answers are
    reused upwards) gives each the cost a search without ceilings finds, and the root the
    same program, visiting fewer Specs."""
    root = _spec(ctx, name)
    specs = list(_limit_sweep(ctx, root))
    with_ceilings = _answers(ctx, specs)
    impl, stats = synthesize(root, ctx, {})
    with pytest.MonkeyPatch.context() as mp:
        _without_ceilings(mp)
        without = _answers(ctx, specs)
        old_impl, old_stats = synthesize(root, ctx, {})
    wrong = [
        (s.limits, a, b) for s, a, b in zip(specs, with_ceilings, without, strict=True) if a != b
    ]
    assert not wrong, f"costs differ (limits, with, without): {wrong[:3]}"
    assert impl == old_impl
    assert stats.specs_visited <= old_stats.specs_visited


def test_graph_reuses_answers_above_their_limits(ctx: SynthesisContext) -> None:
    """A graph meets its stages' goals under several limits: ceilings answer some of them
    without solving them again (what this test exists to exercise)."""
    root = _spec(ctx, "dense")
    _, stats = synthesize(root, ctx, {})
    with pytest.MonkeyPatch.context() as mp:
        _without_ceilings(mp)
        _, old_stats = synthesize(root, ctx, {})
    assert stats.specs_visited < old_stats.specs_visited


def test_shortfalls_are_noted_only_while_listing(ctx: SynthesisContext) -> None:
    """A move that does not fit notes the room it needed at each level it would take;
    outside ``noting_shortfalls`` nothing is kept; the least need per level wins."""
    target = ctx.target
    limits = target.max_limits()
    idx = 1  # the level after main memory
    short_of(idx, 3)  # no frame: ignored
    with noting_shortfalls() as log:
        assert subtract_limits(target, limits, idx, limits[idx] + 5) is None
        assert subtract_limits(target, limits, idx, 1) is not None
        short_of(idx, limits[idx] + 9)
    assert log == {idx: limits[idx] + 5}
    with noting_shortfalls() as outer, noting_shortfalls() as inner:
        short_of(idx, 7)
    assert inner == {idx: 7} and outer == {}


def test_kernel_short_of_scratch_notes_it(ctx: SynthesisContext) -> None:
    """A kernel that would match but for its scratch registers notes their need."""
    kernels = [k for k in ctx.ruleset.kernels if k.scratch]
    if not kernels:
        pytest.skip(f"no kernel of {ctx.target.name} needs scratch registers")
    solved: dict[Spec, solve.Solution | None] = {}
    synthesize(_spec(ctx, "matmul"), ctx, solved)
    matching = (
        (s, k)
        for s, k in itertools.product(solved, kernels)
        if k.match(s, layout_named) is not None  # (bindings may be empty)
    )
    found = next(matching, None)
    if found is None:
        pytest.skip("no Spec of the search matches a kernel with scratch")
    s, k = found
    (level, units), *_ = k.scratch
    idx = ctx.target.level_index(level)
    starved = list(s.limits)
    starved[idx] = units - 1
    with noting_shortfalls() as log:
        starved_spec = attrs.evolve(s, limits=tuple(starved))
        assert k.match(starved_spec, layout_named, ctx.target.level_index) is None
    assert log == {idx: units}


def test_schema_without_reports_room_bounds_every_level(ctx: SynthesisContext) -> None:
    """A schema that does not promise to report its shortfalls (a plugin's) makes every
    Spec it applies to hold only under its own limits."""

    @attrs.frozen
    class Quiet:
        name: str = "quiet"

        def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[object]:
            return iter(())

    rule = SchemaRule("quiet", ctx.ruleset.rules[0].patterns)
    spec = _spec(ctx, "matmul")
    schemas = dict(ctx.schemas)
    schemas["quiet"] = Quiet()
    quiet_ctx = attrs.evolve(ctx, schemas=schemas)
    if not any(p.matches(spec) for p in rule.patterns):
        pytest.skip("the first rule's patterns do not match a product")
    with noting_shortfalls() as log:
        assert list(rule.actions(spec, quiet_ctx)) == []
    assert EVERY_LEVEL in log
    assert solve._ceiling(spec, log) == list(spec.limits)


def test_memo_table_box_reaches_the_ceiling(ctx: SynthesisContext) -> None:
    """A solution stored with a ceiling is read back under limits up to it, not above."""
    root = _spec(ctx, "matmul")
    small = next(_limit_sweep(ctx, root))
    impl, _ = synthesize(small, ctx, {})
    grow = next(
        (j for j, (a, b) in enumerate(zip(small.limits, root.limits, strict=True)) if a < b),
        None,
    )
    if grow is None:
        pytest.skip("the smallest limits of the sweep are the root's")
    ceiling = list(small.limits)
    ceiling[grow] = small.limits[grow] * 2
    table = MemoTable(ctx)
    table.put(small, solve.Solution(impl.action, impl.cost, impl.peaks), tuple(ceiling))
    above = list(small.limits)
    above[grow] = small.limits[grow] * 2
    assert isinstance(table.get(attrs.evolve(small, limits=tuple(above))), Decided)
    above[grow] = small.limits[grow] * 4
    if above[grow] <= root.limits[grow]:
        assert table.get(attrs.evolve(small, limits=tuple(above))) is MISSING
    assert max(ctx.target.max_limits()) < NO_CEILING


def test_ceiling_never_below_the_limits(ctx: SynthesisContext) -> None:
    """A need noted against less room than the Spec has (a decomposition's second
    temporary, after the first took room) leaves the ceiling at the Spec's limits there;
    a need above them lifts it to one less than the need."""
    spec = _spec(ctx, "matmul")
    j = next(i for i, n in enumerate(spec.limits) if n > 2)
    assert solve._ceiling(spec, {j: spec.limits[j] - 1})[j] == spec.limits[j]
    assert solve._ceiling(spec, {j: 3 * spec.limits[j]})[j] == 3 * spec.limits[j] - 1
    others = solve._ceiling(spec, {j: 3 * spec.limits[j]})
    assert all(c == NO_CEILING for i, c in enumerate(others) if i != j)
