"""The k cheapest Impls: checked against full enumeration on tiny Specs.

``enumerate_impls`` builds every tree of a Spec (morello.search.exhaustive); the costs of the
ones that fit their limits, sorted, must be the costs ``KBest`` lists, in the same order, and
each listed tree must be a legal one (costs and peaks recomputed from scratch). ``KBest``
leaves out trees where a loop takes off a residency its trips repeat (``cost.takes_off``):
each has a twin, the residency above the loop, of the same C and cost, which it lists.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from morello.context import SynthesisContext
from morello.cost import fills, takes_off
from morello.impl import Impl
from morello.search.exhaustive import enumerate_impls, impl_fits, impl_problems
from morello.search.kbest import KBest, distinct_programs
from morello.search.solve import synthesize
from morello.spec import Spec

TINY = [(1, 1, 1), (1, 1, 2), (1, 2, 1), (2, 1, 1)]


def _listed(impl: Impl) -> bool:
    """Whether ``KBest`` lists ``impl``: it fits, and no loop in it takes off a residency."""
    return impl_fits(impl) and not any(takes_off(n.cost) for n in impl.walk())


@pytest.mark.parametrize("shape", TINY)
def test_k_best_costs_equal_enumeration(
    shape: tuple[int, int, int], matmul_spec: Callable[..., Spec], ctx: SynthesisContext
) -> None:
    spec = matmul_spec(*shape)
    want = sorted(impl.cost for impl in enumerate_impls(spec, ctx) if _listed(impl))
    assert want, "the oracle found no Impl"
    got = list(KBest(ctx).impls(spec, len(want) + 5))
    assert [i.cost for i in got] == want
    for impl in got[:50]:
        assert impl_problems(impl, ctx) == []
    keys = {repr(i) for i in got}
    assert len(keys) == len(got), "an Impl tree was listed twice"


@pytest.mark.parametrize("shape", TINY[1:3])
def test_distinct_costs_equal_enumeration(
    shape: tuple[int, int, int], matmul_spec: Callable[..., Spec], ctx: SynthesisContext
) -> None:
    """One tree per cost, and per residencies at its top (``Cost.fills``: a loop around
    credits them, so two trees of one cost are not alike to it)."""
    spec = matmul_spec(*shape)
    want = {_kind(impl.cost) for impl in enumerate_impls(spec, ctx) if _listed(impl)}
    got = [_kind(i.cost) for i in KBest(ctx, distinct_costs=True).impls(spec, len(want) + 5)]
    assert sorted(got) == sorted(want)
    assert [c for c, _ in got] == sorted(c for c, _ in got)


def _kind(cost: int) -> tuple[int, tuple[int, ...]]:
    return int(cost), fills(cost)


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
