"""Execution resources: the work inside a register tile costs its busiest resource.

* ``CostCoefficients.resources`` is checked: each price names a coefficient or a level.
* A kernel's cost splits into ``base`` and per-resource ``use``; its value is the sum of the
  base and the busiest use.
* Nodes computing into registers add their children resource by resource; a node whose
  output is in memory adds values, so a register tile's loads overlap its FMAs and passes
  one after the other do not.
* Ties break on total work: between two Impls of one value, the one that leaves more room
  beside its siblings (an A element loaded once into a register rather than broadcast from
  L1 into each FMA).
* Without resources, every cost is a plain int, as before.
* On small Specs the DP's answer is the exhaustive search's least cost under resources too
  (whose frontiers compare costs part by part). The DP picks by value at each Spec, which
  is not exact in general (a dearer child may overlap better with its siblings); these
  shapes show it finds the least cost where the choices are few.
"""

from __future__ import annotations

import pickle

import attrs
import pytest

from morello.context import SynthesisContext
from morello.cost import Cost, combine, work
from morello.impl import Impl
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import KernelAction, LoopAction, MoveAction
from morello.search.exhaustive import Frontiers, exhaustive_search
from morello.search.solve import synthesize
from morello.spec import Spec
from morello.target import CostCoefficients

pytestmark = pytest.mark.target("zen1")

#: FMAs and loads issue two a cycle each and stores one: equal weights, stores twice.
RESOURCES = {
    "fp": {"fma": 3, "vector_op": 3, "mac": 3},
    "load": {"L1": 3, "vector_load": 0, "scalar_op": 0},
    "store": {"vector_store": 6},
}


@pytest.fixture(scope="module")
def rctx(ctx: SynthesisContext) -> SynthesisContext:
    """``ctx`` with zen1's coefficients and ``RESOURCES``."""
    return attrs.evolve(ctx, coefficients=attrs.evolve(ctx.coefficients, resources=RESOURCES))


@pytest.fixture(scope="module")
def frontiers(rctx: SynthesisContext) -> Frontiers:
    """The exhaustive search's frontiers under ``RESOURCES``, shared by the module."""
    return Frontiers(rctx)


def _spec(ctx: SynthesisContext, text: str) -> Spec:
    return build_program(parse_spec_file("<t>", text).funcs[0], ctx).spec


def _tile(ctx: SynthesisContext, m: int, k: int, n: int) -> Spec:
    """``c += a @ b``'s Spec with a and b in L1 and c in registers: the largest register
    tile of the program for the product in L1."""
    text = (
        f"func f(a: f32[{m}, {k}] @L1, b: f32[{k}, {n}] @L1) -> c: f32[{m}, {n}] @L1 {{\n"
        "    c = matmul(a, b)\n}\n"
    )
    spec = _spec(ctx, text)
    impl, _ = synthesize(spec, ctx, {})
    tiles = [
        node.spec
        for node in impl.walk()
        if node.spec.operands[-1].level.name == "VRF" and node.spec.op == "matmul"
    ]
    assert tiles, "no register tile"
    return max(tiles, key=lambda s: s.operands[-1].volume)


def test_resources_must_price_known_terms() -> None:
    with pytest.raises(ValueError, match="neither a named coefficient nor a level"):
        CostCoefficients(level_hit={"L1": 2}, named={"fma": 1}, resources={"fp": {"fmaa": 1}})
    with pytest.raises(ValueError, match="price of 'fma'"):
        CostCoefficients(level_hit={"L1": 2}, named={"fma": 1}, resources={"fp": {"fma": -1}})
    c = CostCoefficients(level_hit={"L1": 2}, named={"fma": 1}, resources={"fp": {"fma": 1}})
    assert hash(c) != hash(attrs.evolve(c, resources={}))


def test_cost_value_is_base_plus_busiest() -> None:
    c = Cost(5, (3, 7, 2))
    assert c == 12 and c.base == 5 and c.use == (3, 7, 2)
    assert work(c) == 17 and work(12) == 12
    again = pickle.loads(pickle.dumps(c))
    assert isinstance(again, Cost) and (again.base, again.use) == (5, (3, 7, 2))
    assert type(c + 1) is int and c + 1 == 13  # arithmetic gives values
    assert str(c) == "12 = 5 + max(3, 7, 2)" and f"{c:d}" == "12"


def test_kernel_splits_into_resources(rctx: SynthesisContext, ctx: SynthesisContext) -> None:
    text = "func f(a: f32[4, 1] @L1, b: f32[1, 24] @L1) -> c: f32[4, 24] @L1 { c = matmul(a, b) }"
    spec = _spec(rctx, text)
    # A leaf FMA over a register tile: one FMA, and the broadcast from L1 when a is there.
    impl, _ = synthesize(spec, rctx, {})
    kernels = [n for n in impl.walk() if isinstance(n.action, KernelAction)]
    fma = next(n for n in kernels if n.action.kernel == "bcast_fma_f32x8")
    assert isinstance(fma.cost, Cost) and fma.cost.use[0] == 3 and fma.cost.use[2] == 0
    load = next(n for n in kernels if n.action.kernel == "vload_f32x8")
    assert load.cost.use == (0, 3, 0)  # one L1 line at the load port's price
    # Without resources the same kernels cost plain ints.
    plain = [n for n in synthesize(spec, ctx, {})[0].walk() if isinstance(n.action, KernelAction)]
    assert all(type(n.cost) is int for n in plain)


def test_register_tile_overlaps_and_memory_adds(rctx: SynthesisContext) -> None:
    spec = _tile(rctx, 4, 16, 24)
    impl, _ = synthesize(spec, rctx, {})
    assert isinstance(impl.cost, Cost)
    # 4x24 over 16 steps of k: 12 FMAs a step bound it; its loads (3 rows of b, 4 elements
    # of a) overlap them.
    fp, load, store = impl.cost.use
    assert fp >= 16 * 12 * 3 and load < fp and store == 0
    assert impl.cost == impl.cost.base + fp
    # The node that stores the tile to memory adds its parts' values.
    text = (
        "func f(a: f32[4, 16] @L1, b: f32[16, 24] @L1) -> c: f32[4, 24] @L1 {\n"
        "    c = matmul(a, b)\n}\n"
    )
    outer, _ = synthesize(_spec(rctx, text), rctx, {})
    moves = [n for n in outer.walk() if isinstance(n.action, MoveAction)]
    out_move = next(n for n in moves if n.spec.operands[-1].level.name == "L1")
    assert type(out_move.cost) is int
    assert out_move.cost == sum(int(c.cost) for c in out_move.children)


def test_loop_adds_use_by_resource(rctx: SynthesisContext) -> None:
    spec = _tile(rctx, 4, 16, 24)
    impl, _ = synthesize(spec, rctx, {})
    loops = [n for n in impl.walk() if isinstance(n.action, LoopAction) and n.action.var == "k"]
    assert loops
    loop = loops[0]
    body = loop.children[0].cost
    assert isinstance(body, Cost)
    extra = loop.action.extra_cost(loop.spec, rctx)
    assert loop.cost.use == tuple(loop.action.trips * u for u in body.use)
    assert loop.cost.base == loop.action.trips * body.base + extra
    assert combine(loop.spec, [body], 0, rctx, [2]).use == tuple(2 * u for u in body.use)


def test_ties_break_on_total_work(rctx: SynthesisContext) -> None:
    # One step of k of a 4x24 tile with b's row in registers: broadcasting each element of a
    # from L1 into its 3 FMAs (which read it once: the unrolled loop's repeats share the
    # load, ``LoopAction.loaded_once``) or loading it into a register first cost the same,
    # their FMAs. With the scalar move priced at the load port, the load first does more
    # work, and the broadcast is chosen; priced nowhere, the two do the same work, the same
    # instructions in C, and either may be.
    def step_of(ctx: SynthesisContext) -> Impl:
        impl, _ = synthesize(_tile(ctx, 4, 16, 24), ctx, {})
        return next(
            n
            for n in impl.walk()
            if n.spec.operands[0].shape == (4, 1) and n.spec.operands[1].level.name == "VRF"
        )

    resources = {**RESOURCES, "load": {**RESOURCES["load"], "scalar_op": 1}}
    dear = attrs.evolve(rctx, coefficients=attrs.evolve(rctx.coefficients, resources=resources))
    step = step_of(dear)
    kernels = {n.action.kernel for n in step.walk() if isinstance(n.action, KernelAction)}
    assert kernels == {"bcast_fma_f32x8"}, kernels
    assert step.cost.use[1] == 4 * 3  # four reads of a at the load port's price
    assert step.cost == step_of(rctx).cost  # the same value either way


@pytest.mark.parametrize(
    ("m", "k", "n", "level"),
    [(1, 1, 8, "L1"), (2, 1, 8, "L1"), (4, 8, 24, "L1"), (8, 4, 8, "L1"), (2, 8, 24, "GL")],
)
def test_dp_matches_exhaustive_under_resources(
    m: int, k: int, n: int, level: str, rctx: SynthesisContext, frontiers: Frontiers
) -> None:
    text = (
        f"func f(a: f32[{m}, {k}] @{level}, b: f32[{k}, {n}] @{level}) "
        f"-> c: f32[{m}, {n}] @{level} {{\n"
        "    c = matmul(a, b)\n}\n"
    )
    spec = _spec(rctx, text)
    best = exhaustive_search(spec, rctx, frontiers=frontiers)
    impl, _ = synthesize(spec, rctx, {})
    assert best.cost is not None
    assert impl.cost == best.cost, f"{best.method} of {best.trees} trees"


#: ``RESOURCES`` with the wait on accumulator chains as a resource of its own: an FMA's
#: result ready 5 cycles after it issues, two FMAs a cycle at 3 each, so 30 a trip.
CHAIN = {**RESOURCES, "chain": {}}


@pytest.fixture(scope="module")
def cctx(ctx: SynthesisContext) -> SynthesisContext:
    """``ctx`` with ``CHAIN`` and chain latencies in the resources' units."""
    coeffs = attrs.evolve(ctx.coefficients, resources=CHAIN, chain_latency={"VRF": 30, "RF": 18})
    return attrs.evolve(ctx, coefficients=coeffs)


def _k_loops(impl: Impl) -> list[Impl]:
    return [n for n in impl.walk() if isinstance(n.action, LoopAction) and n.action.var == "k"]


def test_chain_resource_bounds_a_step_by_its_latency(cctx: SynthesisContext) -> None:
    # 4x8: 4 FMAs a step, 12 at the FMAs' price, wait 30 for the previous step's sums.
    small = _k_loops(synthesize(_tile(cctx, 4, 16, 8), cctx, {})[0])[0]
    fp, _, _, chain = small.cost.use
    assert chain == small.action.trips * 30
    assert chain > fp and small.cost == small.cost.base + chain
    # 4x24: 12 FMAs a step, 36, so the FMAs bound it and the wait hides under them.
    big = _k_loops(synthesize(_tile(cctx, 4, 16, 24), cctx, {})[0])[0]
    fp, _, _, chain = big.cost.use
    assert chain == big.action.trips * 30 < fp
    assert big.cost == big.cost.base + fp
    # The wait is not also added to the base, as the additive model's share of it is.
    assert big.action.extra_cost(big.spec, cctx) == 0


def test_chain_is_charged_by_the_innermost_reduction_loop(cctx: SynthesisContext) -> None:
    # A loop's cost reads of its Spec only the output's level and the op (zen1 has no
    # whole-Spec cache, and a loop over registers restarts no streams), so one step's Spec
    # stands in for the loops' own here.
    step_spec = _tile(cctx, 4, 1, 24)
    step, _ = synthesize(step_spec, cctx, {})
    assert step.cost.use[3] == 0  # no loop in one step of k
    four = LoopAction("split", "k", 1, 4, step_spec, None).cost(step_spec, [step.cost], cctx)
    assert four.use[3] == 4 * 30
    eight = LoopAction("split", "k", 4, 2, step_spec, None).cost(step_spec, [four], cctx)
    assert eight.use[3] == 8 * 30  # 2 trips of the inner loop's 4 waits, nothing more
    assert eight.use == tuple(2 * u for u in four.use)
    # A tail with no loop of its own waits once more.
    tailed = LoopAction("split", "k", 1, 4, step_spec, step_spec)
    assert tailed.cost(step_spec, [step.cost, step.cost], cctx).use[3] == 5 * 30


@pytest.mark.parametrize(("m", "k", "n"), [(1, 4, 8), (4, 8, 24), (2, 8, 16)])
def test_dp_matches_exhaustive_with_chains(m: int, k: int, n: int, cctx: SynthesisContext) -> None:
    text = (
        f"func f(a: f32[{m}, {k}] @L1, b: f32[{k}, {n}] @L1) -> c: f32[{m}, {n}] @L1 {{\n"
        "    c = matmul(a, b)\n}\n"
    )
    spec = _spec(cctx, text)
    best = exhaustive_search(spec, cctx, frontiers=Frontiers(cctx))
    impl, _ = synthesize(spec, cctx, {})
    assert best.cost is not None
    assert impl.cost == best.cost, f"{best.method} of {best.trees} trees"
