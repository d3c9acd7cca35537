"""Decompositions may introduce temporaries: parsed, placed by the search, declared in C.

The rule here, written into ``tmp_path``, computes a product into a temporary and copies it
out (``t = matmul(a, b); c = move(t)``). It is useless for speed, which is the point: the
search must offer it with the temporary at every addressed level, in every layout and vector
size a new buffer may have there; the DP must agree with exhaustive enumeration when it is
in the rule set; and every placement, forced by taking it from the enumeration, must compile
and match NumPy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext, make_context
from morello.errors import NoImplementationError, RuleError
from morello.impl import Impl
from morello.lang.rule_file import parse_rule_file
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import BlockAction
from morello.search.exhaustive import exhaustive_search
from morello.search.expand import past_forced, spec_actions, under_forced
from morello.search.solve import synthesize

VIA_TEMP = "rewrite via_temp: matmul(a, b) -> c => { t = matmul(a, b); c = move(t) }\n"


@pytest.fixture(scope="module")
def temp_ctx(target_name: str, tmp_path_factory: pytest.TempPathFactory) -> SynthesisContext:
    path = tmp_path_factory.mktemp("rules") / "via_temp.rules"
    path.write_text(VIA_TEMP, encoding="utf-8")
    return make_context(target_name, extra_rules=[path])


def _program(ctx: SynthesisContext, m: int, k: int, n: int):  # type: ignore[no-untyped-def]
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    return build_program(parse_spec_file("<f>", text).funcs[0], ctx)


def test_temporary_is_parsed_from_a_new_name() -> None:
    (rule,) = parse_rule_file("<r>", VIA_TEMP).rules
    assert rule.temporaries == ("t",)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "rewrite r: matmul(a, b) -> c => { t = matmul(a, b); c = matmul(a, b) }\n",
            "<r>:1:35: error: rewrite r: temporary 't' is assigned but never read",
        ),
        (
            "rewrite r: matmul(a, b) -> c => { t += matmul(a, b); c = move(t) }\n",
            "<r>:1:35: error: rewrite r: unknown tensor 't' (the pattern names a, b, c)",
        ),
        (
            "rewrite r: matmul(a, b) -> c => { c = move(t); t = matmul(a, b) }\n",
            "<r>:1:44: error: rewrite r: unknown tensor 't' (the pattern names a, b, c)",
        ),
    ],
    ids=["never-read", "accumulates-into-new", "read-before-assigned"],
)
def test_temporary_errors_are_located(text: str, message: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_rule_file("<r>", text)
    assert str(info.value).splitlines()[0] == message


def test_search_offers_the_temporary_at_every_addressed_level(
    temp_ctx: SynthesisContext,
) -> None:
    # (past a residency in an L2, where the target has one: the operands are then there)
    spec = past_forced(_program(temp_ctx, 4, 4, 4).spec, temp_ctx)
    blocks = [
        a
        for a in spec_actions(spec, temp_ctx)
        if isinstance(a, BlockAction) and a.rule == "via_temp"
    ]
    placed = sorted(
        (ts.level.name, name or "-", ts.vector_size or 0)
        for b in blocks
        for name, ts in b.temporaries
    )
    addressed = [lv for lv in temp_ctx.target.levels if lv.addressed]
    # A temporary is laid out like the output; at the output's level the row-major
    # temporary would be the output itself (no progress), so it is offered at the other
    # addressed levels (main memory too, for an output resident in an L2).
    here = spec.output.level.name
    assert {level for level, _, _ in placed} == {lv.name for lv in addressed} - {here}
    assert {name for _, name, _ in placed} <= {"row_major", "-"}
    for b in blocks:
        ((_, temp),) = b.temporaries
        first, second = b.stages
        assert first.output == temp and second.operands[0] == temp
        assert first.limits == second.limits
        # The temporary lowers the stages' limits, unless its level bounds each buffer on
        # its own (main memory, offered for an output resident in an L2).
        assert (first.limits != spec.limits) != temp.level.per_buffer


def test_dp_equals_exhaustive_with_temporaries(temp_ctx: SynthesisContext) -> None:
    # The rule applies to every non-accumulating product below the root too, so the space
    # grows fast; the smallest products keep the oracle quick.
    for m, k, n in [(1, 1, 1), (1, 2, 1)]:
        spec = _program(temp_ctx, m, k, n).spec
        result = exhaustive_search(spec, temp_ctx, max_trees=30_000)
        impl, _ = synthesize(spec, temp_ctx, {})
        assert result.cost == impl.cost, (m, k, n)


@pytest.mark.runs_code
def test_every_placement_of_the_temporary_compiles_and_matches_numpy(
    temp_ctx: SynthesisContext, target_name: str, tmp_path: Path
) -> None:
    # Each placement is forced: the block at the root, its stages solved by the DP under
    # rules that also move the operands of copies (so a temporary in registers can be
    # copied out through the cache) and without the temporary rule (which, applying below
    # the root too, would make the search take minutes).
    moves = tmp_path / "moves.rules"
    moves.write_text("rewrite move for move\n", encoding="utf-8")
    stage_ctx = make_context(target_name, extra_rules=[moves])
    # t: f32[2, n] with n = 4 (8 scalars, which leave the scalar registers room for the
    # scalars of a that an unrolled loop over n holds) and, where the target's widest f32
    # vectors are longer, n = their lanes (two vectors): one shape may not fit both register
    # levels.
    widest = max([4, *(vt.lanes for vt in temp_ctx.target.vector_types if vt.dtype == "f32")])
    memo: dict = {}
    compiled = set()
    for n in sorted({4, widest}):
        program = _program(temp_ctx, 2, 2, n)
        spec = past_forced(program.spec, temp_ctx)
        blocks = [
            a
            for a in spec_actions(spec, temp_ctx)
            if isinstance(a, BlockAction) and a.rule == "via_temp"
        ]
        for i, block in enumerate(blocks):
            try:
                stages = [synthesize(stage, stage_ctx, memo)[0] for stage in block.stages]
            except NoImplementationError:  # e.g. a column-major vector tile no kernel reads
                continue
            impl = under_forced(
                program.spec,
                temp_ctx,
                lambda spec, block=block, stages=stages: Impl(
                    spec,
                    block,
                    tuple(stages),
                    block.cost(spec, [s.cost for s in stages], temp_ctx),
                    block.peaks(spec, [s.peaks for s in stages], temp_ctx),
                ),
            )
            source = lower_to_c("f", [(program, impl)], temp_ctx)
            lib = compile_shared(source.c_text, temp_ctx.target, tmp_path / f"{n}_{i}")
            check(lib, program, temp_ctx)  # raises CheckFailed on a mismatch
            assert block.describe().startswith(f"via_temp: block of 2, temporary f32[2, {n}] @")
            ((_, temp),) = block.temporaries
            compiled.add(temp.level.name)
    # Not the output's level: laid out like the output, the temporary there would be the
    # output. (Temporaries in main memory are compiled by the graph tests too: pipelined
    # intermediates.)
    here = past_forced(program.spec, temp_ctx).output.level.name
    assert compiled == {lv.name for lv in temp_ctx.target.levels if lv.addressed} - {here}
