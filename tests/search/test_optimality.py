"""Optimality: on tiny Specs the DP's cost equals the minimum over all Impls.

The oracle (morello.search.exhaustive) shares no code with the DP but the rules' action lists
and the cost model. Which oracle decides each case:

- full enumeration (every tree built, the cheapest fitting one taken) where a Spec has at most
  ``ENUMERATE_UP_TO`` trees: the 1x1x1, 1x1x2, 1x2x1 and 2x1x1 products (2,398 to 27,110
  trees each); and ``test_enumeration_agrees_with_frontier`` cross-checks the two oracles there;
- the Pareto-frontier recursion everywhere else (up to ~1e35 trees for 3x3x3, which no
  enumeration can build).

Each case also re-checks the DP's tree from scratch (legal actions, costs and peaks recomputed
bottom-up, peaks within limits) and runs the DP both in a fresh memo and in one shared across
all cases, which must not change any answer.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import attrs
import pytest

from morello.context import SynthesisContext
from morello.errors import NoImplementationError
from morello.search.exhaustive import (
    Frontiers,
    OracleResult,
    count_impls,
    enumerate_impls,
    exhaustive_search,
    impl_fits,
    impl_problems,
)
from morello.search.solve import Solution, synthesize
from morello.spec import Spec

ENUMERATE_UP_TO = 30_000
DIMS = (1, 2, 3, 4)
ALL_SHAPES = list(itertools.product(DIMS, DIMS, DIMS))
# b in column-major order: a subset, every dimension size appearing in each position.
COL_MAJOR_SHAPES = [
    (1, 1, 1), (1, 2, 1), (2, 1, 2), (1, 4, 1), (3, 1, 3), (2, 2, 2),
    (1, 3, 4), (4, 3, 1), (3, 3, 3), (2, 4, 3), (4, 2, 4), (4, 4, 4),
]  # fmt: skip
# Shapes whose vector width lets vector kernels apply (the 64 tiny ones never do).
VECTOR_SHAPES = [(1, 1, 8), (1, 2, 8), (2, 1, 8), (2, 2, 8), (1, 4, 8), (3, 1, 8)]


@pytest.fixture(scope="module")
def shared_memo() -> dict[Spec, Solution | None]:
    return {}


@pytest.fixture(scope="module")
def frontiers(ctx: SynthesisContext) -> Frontiers:
    return Frontiers(ctx)


@pytest.fixture(scope="module")
def oracle(ctx: SynthesisContext, frontiers: Frontiers) -> Callable[[Spec], OracleResult]:
    """``exhaustive_search`` with its results kept for the module (enumerations are slow)."""
    results: dict[Spec, OracleResult] = {}

    def search(spec: Spec) -> OracleResult:
        if spec not in results:
            results[spec] = exhaustive_search(
                spec, ctx, max_trees=ENUMERATE_UP_TO, frontiers=frontiers
            )
        return results[spec]

    return search


def dp_cost(
    spec: Spec, ctx: SynthesisContext, memo: dict[Spec, Solution | None] | None
) -> int | None:
    """The DP's cost (None where it finds nothing), after re-checking its tree from scratch."""
    try:
        impl, _ = synthesize(spec, ctx, memo)
    except NoImplementationError:
        return None
    assert impl_problems(impl, ctx) == []
    return impl.cost


def check_optimal(
    spec: Spec,
    ctx: SynthesisContext,
    oracle: Callable[[Spec], OracleResult],
    shared_memo: dict[Spec, Solution | None],
) -> None:
    """The DP, in a fresh memo and in the shared one, finds the oracle's least cost."""
    best = oracle(spec)
    if best.best is not None:
        assert impl_problems(best.best, ctx) == []
    fresh = dp_cost(spec, ctx, None)
    shared = dp_cost(spec, ctx, shared_memo)
    detail = (
        f"{spec.describe()} limits {spec.limits}: oracle by {best.method} of {best.trees} trees"
    )
    assert fresh == best.cost, detail
    assert shared == best.cost, detail


@pytest.mark.parametrize(("m", "k", "n"), ALL_SHAPES)
def test_dp_is_optimal_row_major(
    m: int, k: int, n: int, ctx: SynthesisContext, matmul_spec, oracle, shared_memo
) -> None:
    check_optimal(matmul_spec(m, k, n), ctx, oracle, shared_memo)


@pytest.mark.parametrize(("m", "k", "n"), COL_MAJOR_SHAPES)
def test_dp_is_optimal_b_col_major(
    m: int, k: int, n: int, ctx: SynthesisContext, matmul_spec, oracle, shared_memo
) -> None:
    check_optimal(matmul_spec(m, k, n, "col_major"), ctx, oracle, shared_memo)


@pytest.mark.parametrize(("m", "k", "n"), VECTOR_SHAPES)
def test_dp_is_optimal_with_vectors(
    m: int, k: int, n: int, ctx: SynthesisContext, matmul_spec, oracle, shared_memo
) -> None:
    check_optimal(matmul_spec(m, k, n), ctx, oracle, shared_memo)


# Memory limits below the root's, by level (slowest first; None keeps the root's limit).
# Limits are powers of two (or 0), as every Spec's are (see morello.spec.subtract_limits).
SQUEEZES = [
    (None, 0, 0, 0),  # nothing fits in the faster levels: no implementation at all
    (None, 1, 0, 1),
    (None, 1, 1, 2),
    (None, 2, 2, 2),
    (None, 4, 1, 2),
    (None, 512, 2, 1),
    (None, 512, 0, 0),  # no registers: scalar code straight from the cache
]
SQUEEZED_SHAPES = [(1, 1, 1), (2, 2, 2), (2, 3, 4), (1, 2, 8)]


def squeezed(root: Spec, squeeze: tuple[int | None, ...], ctx: SynthesisContext) -> Spec:
    """``root`` under smaller limits. A cache that holds whole Specs (an L2) keeps its limit,
    and the squeeze applies to the other levels, in order."""
    whole = set(ctx.target.whole_specs_levels)
    squeezable = [i for i in range(len(root.limits)) if i not in whole]
    if len(squeeze) != len(squeezable):
        pytest.skip("the squeezed limits are written for a four-level target")
    limits = list(root.limits)
    for i, s in zip(squeezable, squeeze, strict=True):
        if s is not None:
            limits[i] = s
    return attrs.evolve(root, limits=tuple(limits))


@pytest.mark.parametrize("squeeze", SQUEEZES, ids=str)
@pytest.mark.parametrize("shape", SQUEEZED_SHAPES, ids=str)
def test_dp_is_optimal_under_tight_limits(
    shape: tuple[int, int, int],
    squeeze: tuple[int | None, ...],
    ctx: SynthesisContext,
    matmul_spec,
    oracle,
    shared_memo,
) -> None:
    check_optimal(squeezed(matmul_spec(*shape), squeeze, ctx), ctx, oracle, shared_memo)


def test_tight_limits_cover_both_outcomes(ctx: SynthesisContext, matmul_spec, oracle) -> None:
    # The squeezes above include Specs with and without any implementation.
    costs = {oracle(squeezed(matmul_spec(2, 2, 2), sq, ctx)).cost for sq in SQUEEZES}
    assert None in costs
    assert len(costs - {None}) >= 2


@pytest.mark.parametrize(("m", "k", "n"), [(1, 1, 1), (1, 2, 1), (1, 1, 2), (2, 1, 1)])
def test_enumeration_agrees_with_frontier(
    m: int, k: int, n: int, ctx: SynthesisContext, matmul_spec, oracle
) -> None:
    # Both oracles are exact where enumeration is feasible (which also checks, on these
    # Specs, that the cost model is monotone as the frontier assumes).
    spec = matmul_spec(m, k, n)
    enumerated = oracle(spec)
    if enumerated.method != "enumeration":
        pytest.skip(f"{enumerated.trees} trees: too many to enumerate on this target")
    assert enumerated.fitting == enumerated.trees == count_impls(spec, ctx)
    best = Frontiers(ctx).best(spec)
    assert best is not None
    assert enumerated.cost == best.cost


def test_enumeration_yields_distinct_complete_trees(ctx: SynthesisContext, matmul_spec) -> None:
    spec = matmul_spec(1, 1, 1)
    impls = list(enumerate_impls(spec, ctx))
    assert len(impls) == count_impls(spec, ctx)
    assert len(set(impls)) == len(impls)
    for impl in impls[:: max(1, len(impls) // 200)]:
        assert impl.spec == spec
        assert impl_fits(impl)
        assert impl_problems(impl, ctx) == []
        assert all(not node.action.children for node in impl.walk() if not node.children)
    assert len(list(enumerate_impls(spec, ctx, limit=10))) == 10


def test_enumeration_counts(ctx: SynthesisContext, matmul_spec) -> None:
    # How many trees the rules build (for zen1: 2,398 at 1x1x1, 8,139,780 at 2x2x2, about
    # 1e35 at 3x3x3 and 9.7e10 at 4x4x4): why full enumeration stops at a few elements.
    counts = {d: count_impls(matmul_spec(*d), ctx) for d in [(1, 1, 1), (2, 2, 2)]}
    assert 0 < counts[(1, 1, 1)] < counts[(2, 2, 2)]
