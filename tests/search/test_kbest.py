"""The k cheapest Impls: checked against full enumeration on tiny Specs.

``enumerate_impls`` builds every tree of a Spec (morello.search.exhaustive); the costs of the
ones that fit their limits, sorted, must be the costs ``KBest`` lists, in the same order, and
each listed tree must be a legal one (costs and peaks recomputed from scratch). ``KBest``
orders trees where a loop takes off a residency its trips repeat (``cost.takes_off``) by
their cost without that credit (``kbest.listed_cost``): each has a twin, the residency above
the loop, of the same C and one unit below the credited cost, which it lists first.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from morello.context import SynthesisContext
from morello.cost import takes_off
from morello.impl import Impl
from morello.search.exhaustive import enumerate_impls, impl_fits, impl_problems
from morello.search.kbest import KBest, distinct_programs, listed_cost
from morello.search.solve import synthesize
from morello.spec import Spec

TINY = [(1, 1, 1), (1, 1, 2), (1, 2, 1), (2, 1, 1)]


def _listed(impl: Impl, ctx: SynthesisContext) -> int:
    """The cost ``KBest`` lists ``impl`` at, recomputed bottom-up (``listed_cost``)."""
    costs = [_listed(c, ctx) for c in impl.children]
    return int(listed_cost(impl.spec, impl.action, costs, ctx))


@pytest.mark.parametrize("shape", TINY)
def test_k_best_costs_equal_enumeration(
    shape: tuple[int, int, int], matmul_spec: Callable[..., Spec], ctx: SynthesisContext
) -> None:
    spec = matmul_spec(*shape)
    trees = [impl for impl in enumerate_impls(spec, ctx) if impl_fits(impl)]
    want = sorted(_listed(impl, ctx) for impl in trees)
    assert want, "the oracle found no Impl"
    got = list(KBest(ctx).impls(spec, len(want) + 5))
    assert [_listed(i, ctx) for i in got] == want
    # Every tree a loop's credit prices lower is listed, at its model cost, after a twin of
    # that cost less one unit: the same residency above the loop.
    for i, impl in enumerate(got):
        if any(takes_off(n.cost) for n in impl.walk()):
            assert any(int(t.cost) < int(impl.cost) for t in got[:i])
    for impl in got[:50]:
        assert impl_problems(impl, ctx) == []
    keys = {repr(i) for i in got}
    assert len(keys) == len(got), "an Impl tree was listed twice"


@pytest.mark.parametrize("shape", TINY[1:3])
def test_distinct_costs_equal_enumeration(
    shape: tuple[int, int, int], matmul_spec: Callable[..., Spec], ctx: SynthesisContext
) -> None:
    """One tree per cost (as ``KBest`` lists it: ``listed_cost``)."""
    spec = matmul_spec(*shape)
    want = {_listed(impl, ctx) for impl in enumerate_impls(spec, ctx) if impl_fits(impl)}
    got = [_listed(i, ctx) for i in KBest(ctx, distinct_costs=True).impls(spec, len(want) + 5)]
    assert got == sorted(want)


def test_first_is_the_dp_answer(matmul_spec: Callable[..., Spec], ctx: SynthesisContext) -> None:
    spec = matmul_spec(8, 8, 16)
    best, _ = synthesize(spec, ctx, {})
    first = next(KBest(ctx, {}).impls(spec, 1))
    assert first.cost == best.cost
    assert first.action == best.action


def test_larger_spec_lists_in_order(
    matmul_spec: Callable[..., Spec], ctx: SynthesisContext
) -> None:
    spec = matmul_spec(16, 16, 16)
    got = list(KBest(ctx, {}).impls(spec, 40))
    assert len(got) == 40
    costs = [i.cost for i in got]
    assert costs == sorted(costs)
    for impl in got:
        assert impl_problems(impl, ctx) == []
        assert impl_fits(impl)


def test_distinct_programs_drops_equal_texts() -> None:
    texts = ["a", "a", "b", "c", "b", "d"]
    got = distinct_programs(iter(texts), 3, lambda t: t, pulls=10)  # type: ignore[arg-type]
    assert got == ["a", "b", "c"]
    assert distinct_programs(iter(texts), 9, lambda t: t, pulls=2) == ["a"]  # type: ignore[arg-type]
