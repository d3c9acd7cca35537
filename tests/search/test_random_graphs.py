"""Random functions from ``morello.fuzzing``, synthesized, compiled and compared with NumPy.

Valid functions come from a seed Hypothesis draws, so they follow the generator's own mix of
ops and shapes (the spec text is shown with a failure); extents stay at 12 or less and
graphs at three ops, to keep the file near a minute with the ``dev`` profile. Invalid
functions, which cost no synthesis, let Hypothesis drive every choice (``st.randoms``), which
favours the degenerate ones (extents of 1, the first op of each kind); each must be rejected
with a SpecError at the place of the mistake.
``benchmarks/fuzz.py`` runs the same generator at scale.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, note, reject
from hypothesis import strategies as st

from morello.codegen.harness import Comparison
from morello.context import SynthesisContext
from morello.fuzzing import (
    FuzzCase,
    FuzzOptions,
    NoCheckableCase,
    case_for_seed,
    check_case,
    op_kind,
    program_of,
    random_case,
    rejection_problem,
)
from morello.search.solve import Memo

SMALL = FuzzOptions(max_extent=12, large_share=0.0, max_ops=3, invalid_share=0.0)
INVALID = FuzzOptions(max_extent=12, large_share=0.0, invalid_share=1.0)


class _Synthesis:
    """The context, one memo table (later examples reuse earlier answers) and a build folder,
    shared by the module's examples, with a repr short enough for Hypothesis to print."""

    def __init__(self, ctx: SynthesisContext, root: Path) -> None:
        self.ctx = ctx
        self.memo: Memo = {}
        self.root = root
        self.runs = 0

    def check(self, case: FuzzCase) -> Comparison:
        self.runs += 1
        return check_case(case, self.ctx, self.memo, self.root / f"{self.runs}").comparison

    def __repr__(self) -> str:
        return f"<context of {self.ctx.target.name}, memo table of {len(self.memo)} Specs>"


@pytest.fixture(scope="module")
def synthesis(ctx: SynthesisContext, tmp_path_factory: pytest.TempPathFactory) -> _Synthesis:
    return _Synthesis(ctx, tmp_path_factory.mktemp("random_graphs"))


@pytest.mark.runs_code
@given(seed=st.integers(0, 2**32 - 1))
def test_random_functions_match_numpy(synthesis: _Synthesis, seed: int) -> None:
    try:
        case = random_case(random.Random(seed), synthesis.ctx, "random_graph", SMALL)
    except NoCheckableCase:
        reject()
    note(case.text)
    assert synthesis.check(case).ok  # a mismatch raises CheckFailed first, with the place


@given(rng=st.randoms(use_true_random=False))
def test_invalid_functions_give_a_located_spec_error(
    synthesis: _Synthesis, rng: random.Random
) -> None:
    case = random_case(rng, synthesis.ctx, "invalid_graph", INVALID)
    note(case.text)
    problem = rejection_problem(case, synthesis.ctx)
    assert problem is None, problem


def test_generator_is_deterministic_and_its_valid_cases_build(ctx: SynthesisContext) -> None:
    wanted = {
        "kind:contraction", "kind:elementwise", "kind:broadcast", "kind:reduction",
        "kind:rowwise", "graph", "nested", "named-intermediate", "col_major", "extent-1",
        "result-rank:1", "contraction<-contraction", "elementwise<-contraction",
    }  # fmt: skip
    seen: set[str] = set()
    for i in range(1000):  # the draws soon reach every kind of op and shape of graph
        case = case_for_seed(3, i, ctx)
        assert case == case_for_seed(3, i, ctx)
        seen |= case.features
        if case.valid:
            program_of(case, ctx)
        if wanted <= seen:
            break
    assert wanted <= seen, wanted - seen


def test_op_kinds_follow_the_index_notation(ctx: SynthesisContext) -> None:
    ops = ctx.ruleset.ops
    assert op_kind(ops["matmul"]) == "contraction"  # type: ignore[arg-type]
    assert op_kind(ops["sum"]) == "reduction"  # type: ignore[arg-type]
    assert op_kind(ops["softmax"]) == "rowwise"  # type: ignore[arg-type]
    assert op_kind(ops["relu"]) == "elementwise"  # type: ignore[arg-type]
    assert op_kind(ops["move"]) == "copy"  # type: ignore[arg-type]
    assert op_kind(ops["zero"]) == "fill"  # type: ignore[arg-type]
    broadcast = ops.resolve("add", [2, 1])
    assert broadcast is not None
    assert op_kind(ops[broadcast]) == "broadcast"  # type: ignore[arg-type]
