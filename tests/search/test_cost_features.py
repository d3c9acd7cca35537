"""The cost model's stream, latency and scratch features, on their own and in a decision.

* ``CostCoefficients.line_cost``: a tile of several long runs is priced as concurrent
  streams; short runs, or too many, are a strided walk.
* A reduction loop over register accumulators pays the chain latency once per trip, shared
  by the output's registers.
* A kernel's ``scratch`` registers must fit the Spec's limits for the kernel to match.
* Together they make zen1 walk several 16-column bf16 panels at once into many accumulators.
* A loop across the runs of an operand its Spec reads once (or uses at most
  ``stream_reuse`` times an element) pays for restarting them
  (``stream_restart``), which makes zen1's f32 matvec read whole rows of its weights; one
  that reads a short piece of each row per trip pays for its lines again (a strided walk).
* A loop that takes a cached tile's streamed rows one long burst at a time pays one stream's
  price for their lines (``stream_burst``).
* An input moved into a level small enough to fold (zen1's RF, one element) pays its lines,
  not its copy kernel's instruction: the same as the kernel reading it in place.
* A loop pays once for a residency its steps start with, of an operand it does not run
  along: the same as that residency above the loop.
"""

from __future__ import annotations

import attrs
import pytest

from morello.context import SynthesisContext, make_context
from morello.cost import access_cost, action_cost, fills, takes_off, with_fills
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import InitLoopAction, KernelAction, LoopAction, MoveAction
from morello.search.expand import spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec
from morello.target import CostCoefficients

pytestmark = pytest.mark.target("zen1")


def test_line_cost_streams_and_strides() -> None:
    c = CostCoefficients(
        level_hit={"GL": 20},
        named={},
        stream_hit={"GL": (20, 15, 12)},
        stream_lines=4,
    )
    assert c.line_cost("GL", 1, 1) == 20
    assert c.line_cost("GL", 2, 4) == 15
    assert c.line_cost("GL", 3, 100) == 12
    assert c.line_cost("GL", 2, 3) == 40  # runs too short to stream
    assert c.line_cost("GL", 4, 100) == 40  # more runs than streams
    plain = CostCoefficients(level_hit={"GL": 20}, named={})
    assert plain.line_cost("GL", 1, 1) == 20
    assert plain.line_cost("GL", 2, 100) == 40


def _program(ctx: SynthesisContext, text: str):  # type: ignore[no-untyped-def]
    return build_program(parse_spec_file("<t>", text).funcs[0], ctx)


def _loops_under_latency(ctx: SynthesisContext, latency: int) -> list[int]:
    """The loop nodes of the Impl of a 1x64x64 bf16 matvec under chain latency ``latency``."""
    coeffs = attrs.evolve(ctx.coefficients, chain_latency={"VRF": latency})
    sub = attrs.evolve(ctx, coefficients=coeffs)
    text = (
        "func f(x: bf16[1, 64], w: bf16[64, 64] packed_cols(16)) -> y: f32[1, 64] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    impl, _ = synthesize(_program(sub, text).spec, sub, {})
    return [n for n in impl.walk() if isinstance(n.action, LoopAction)]  # type: ignore[misc]


@pytest.mark.runs_code
def test_chain_latency_prefers_many_accumulators(ctx: SynthesisContext) -> None:
    # With a latency, the reduction loop runs over all 8 accumulators (k outside n); the
    # loop over one accumulator at a time would wait 8x as long per trip.
    loops = _loops_under_latency(ctx, 5)
    splits = [n for n in loops if n.action.var == "k"]
    assert splits, "no reduction loop"
    assert all(n.spec.output.shape == (1, 64) for n in splits), [n.spec.describe() for n in splits]


def test_scratch_must_fit_the_limits(ctx: SynthesisContext) -> None:
    kernel = ctx.ruleset.kernel("bcast_fma_bf16_f32x8")
    assert kernel.scratch == (("VRF", 2),)
    text = (
        "func f(x: bf16[1, 1] @L1, w: bf16[1, 8] @L1) -> y: f32[1, 8] @L1 {\n"
        "    y = matmul(x, w)\n}\n"
    )
    spec = _program(ctx, text).spec
    out = attrs.evolve(spec.operands[-1], level=ctx.target.level("VRF"), vector_size=8)
    leaf = attrs.evolve(spec, operands=(*spec.operands[:-1], out), accum=True)
    vrf = ctx.target.level_index("VRF")

    def matches(vrf_limit: int) -> bool:
        limits = list(leaf.limits)
        limits[vrf] = vrf_limit
        s = attrs.evolve(leaf, limits=tuple(limits))
        return any(
            isinstance(a, KernelAction) and a.kernel == kernel.name for a in spec_actions(s, ctx)
        )

    assert matches(2)
    assert not matches(1)


@pytest.mark.runs_code
def test_gemma_walks_several_panels_into_many_accumulators(ctx: SynthesisContext) -> None:
    """The main loop reads at least four 16-column panels at once into 8 to 16 accumulators.

    (With tile sizes of 3 * 2^k it takes six panels, 96 outputs in 12 registers, and a tail of
    four; the two measured alike, BENCHMARKS.md.)
    """
    text = (
        "func f(x: bf16[1, 2048], w: bf16[2048, 16384] packed_cols(16)) -> y: f32[1, 16384] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    impl, _ = synthesize(_program(ctx, text).spec, ctx, {})
    vrf_moves = [
        n.action.dest
        for n in impl.walk()
        if isinstance(n.action, MoveAction) and n.action.dest.level.name == "VRF"
    ]
    widest = max(vrf_moves, key=lambda d: d.volume)
    assert widest.shape[1] >= 64 and 8 <= widest.volume // 8 <= 16, vrf_moves


MATVEC = (
    "func f(x: f32[1, 2048], w: f32[2048, 16384]) -> y: f32[1, 16384] {\n    y = matmul(x, w)\n}\n"
)


def _restart_ctx(ctx: SynthesisContext, restart: int) -> SynthesisContext:
    coeffs = attrs.evolve(ctx.coefficients, stream_restart={"GL": restart} if restart else {})
    return attrs.evolve(ctx, coefficients=coeffs)


def _loops(ctx: SynthesisContext, spec: Spec) -> dict[tuple[str, int], LoopAction]:
    return {(a.var, a.step): a for a in spec_actions(spec, ctx) if isinstance(a, LoopAction)}


def _restarts(ctx: SynthesisContext, spec: Spec) -> dict[tuple[str, int], int]:
    """What ``stream_restart={"GL": 1}`` adds to each loop action on ``spec``."""
    costs = {}
    for c in (_restart_ctx(ctx, 0), _restart_ctx(ctx, 1)):
        for key, loop in _loops(c, spec).items():
            zeros = [0] * len(loop.children)
            costs[key] = action_cost(spec, loop, zeros, c) - costs.get(key, 0)
    return costs


def test_stream_restart_charges_loops_across_runs(ctx: SynthesisContext) -> None:
    """A loop over rows of streamed weights starts its step's runs again; one over n does not.

    The weights of a matvec are read once (m = 1). In a block of 4096 columns of them (2048
    runs of 16 KiB), a loop over k in steps of 8 rows starts 8 runs per trip; a loop over n
    continues its runs. Whole rows are one run, so a loop over them restarts nothing, nor
    does one across a tile of runs few enough to stream together. A
    matmul with m = 16 reuses the weights (served from caches) and pays no restarts; one
    with m = 4 uses each weight fewer times than zen1's ``stream_reuse`` of 8 and pays.
    """
    whole = attrs.evolve(_program(ctx, MATVEC).spec, accum=True)
    assert _restarts(ctx, whole)[("k", 8)] == 0
    block = _loops(ctx, whole)[("n", 4096)].body
    assert block.operands[1].shape == (2048, 4096)
    restarts = _restarts(ctx, block)
    assert restarts[("k", 8)] == 256 * 8
    assert restarts[("n", 8)] == 0
    # A tile of 8 runs (as many as ``stream_hit`` prices together) is tracked as one set of
    # streams: a loop across it restarts none (a loop around it continues them), whereas one
    # across a tile of 16 runs restarts each step's runs.
    assert len(ctx.coefficients.stream_hit["GL"]) == 8
    eight, sixteen = (_loops(ctx, block)[("k", rows)].body for rows in (8, 16))
    assert _restarts(ctx, eight)[("k", 4)] == 0
    assert _restarts(ctx, sixteen)[("k", 4)] == 4 * 4
    # Runs shorter than stream_lines (16 lines) are a strided walk, not restarted streams.
    narrow = _loops(ctx, whole)[("n", 128)].body
    assert set(_restarts(ctx, narrow).values()) == {0}
    text = MATVEC.replace("f32[1, ", "f32[16, ")
    reused = _loops(ctx, attrs.evolve(_program(ctx, text).spec, accum=True))[("n", 4096)].body
    assert set(_restarts(ctx, reused).values()) == {0}
    assert ctx.coefficients.stream_reuse == 8
    text = MATVEC.replace("f32[1, ", "f32[4, ")
    few = _loops(ctx, attrs.evolve(_program(ctx, text).spec, accum=True))[("n", 4096)].body
    assert _restarts(ctx, few)[("k", 8)] == 256 * 8
    once = attrs.evolve(ctx, coefficients=attrs.evolve(ctx.coefficients, stream_reuse=1))
    assert set(_restarts(once, few).values()) == {0}


def test_loop_across_short_runs_pays_a_strided_walk(ctx: SynthesisContext) -> None:
    """A loop whose step is one short run of each row pays for those lines a second time.

    In a 96-column strip of a matvec's weights (2048 rows of 6 lines), a loop over k in
    steps of 1 reads one 6-line piece per trip, 64 KiB from the last: the prefetchers never
    follow it, so its lines cost twice the single-run price (``stream_hit[0]``) its tiles
    were given. Steps of 8 rows are 8 short runs, priced as a walk already; a loop over n
    continues its runs; an operand reused more than ``stream_reuse`` times is not charged,
    nor is a copy.
    """
    single = ctx.coefficients.stream_hit["GL"][0]
    whole = attrs.evolve(_program(ctx, MATVEC).spec, accum=True)
    strip = _loops(ctx, whole)[("n", 96)].body
    assert strip.operands[1].shape == (2048, 96)
    loops = _loops(ctx, strip)
    assert loops[("k", 1)]._stream_cost(strip, ctx) == 2048 * 6 * single
    assert loops[("k", 8)]._stream_cost(strip, ctx) == 0
    assert loops[("n", 16)]._stream_cost(strip, ctx) == 0
    text = MATVEC.replace("f32[1, ", "f32[16, ")
    reused = _loops(ctx, attrs.evolve(_program(ctx, text).spec, accum=True))[("n", 96)].body
    assert _loops(ctx, reused)[("k", 1)]._stream_cost(reused, ctx) == 0
    text = MATVEC.replace("f32[1, ", "f32[8, ")  # each weight used 8 times: still a walk
    few = _loops(ctx, attrs.evolve(_program(ctx, text).spec, accum=True))[("n", 96)].body
    assert _loops(ctx, few)[("k", 1)]._stream_cost(few, ctx) == 2048 * 6 * single
    # Packing a strip of 64 rows into L1: the copy reads each row's piece once, but it is
    # made for a computation that reuses them, and pays no walk.
    text = MATVEC.replace("2048", "64")
    strip = _loops(ctx, attrs.evolve(_program(ctx, text).spec, accum=True))[("n", 96)].body
    (pack,) = [
        a
        for a in spec_actions(strip, ctx)
        if isinstance(a, MoveAction)
        and a.operand == 1
        and a.new_buffer
        and a.dest.level.name == "L1"
    ]
    copy = pack.children[0]
    assert ctx.ruleset.ops[copy.op].is_identity and copy.operands[0].shape == (64, 96)
    assert _loops(ctx, copy)[("i", 1)]._stream_cost(copy, ctx) == 0


def test_a_loop_pays_for_the_short_piece_of_its_tail(ctx: SynthesisContext) -> None:
    """A loop with a tail of one row pays for that row's piece as for each trip's."""
    text = MATVEC.replace("2048", "2049")
    whole = attrs.evolve(_program(ctx, text).spec, accum=True)
    strip = _loops(ctx, whole)[("n", 96)].body
    loop = _loops(ctx, strip)[("k", 2)]
    assert loop.tail is not None and loop.tail.operands[1].shape == (1, 96)
    assert loop._stream_cost(strip, ctx) == 6 * ctx.coefficients.stream_hit["GL"][0]


def test_f32_matvec_prices_the_column_walk_above_whole_rows(ctx: SynthesisContext) -> None:
    """The matvec that walks 96-column strips down all 2048 rows costs more than the choice.

    Measured (BENCHMARKS.md, cost-model notes) the walk runs 1.6-2.6 times slower than the
    chosen program that reads whole rows; before short pieces were priced as a walk, the
    model put it only 8% above, and a calibrated fit below.
    """
    spec = _program(ctx, MATVEC).spec
    memo: dict[Spec, object] = {}
    chosen = synthesize(spec, ctx, memo)[0].cost
    strips = _loops(ctx, spec)[("n", 96)]
    walk = action_cost(
        spec, strips, [synthesize(child, ctx, memo)[0].cost for child in strips.children], ctx
    )
    assert walk > 1.5 * chosen, (walk, chosen)


@pytest.mark.runs_code
def test_f32_matvec_reads_whole_rows(ctx: SynthesisContext) -> None:
    """With restarts priced, zen1's f32 matvec walks whole rows of the weights, not blocks.

    No loop over n encloses the loop over k: each trip of k reads a few whole rows of w
    (runs of 64 KiB), not 4096-column blocks (runs of 16 KiB, four times the restarts).
    """
    impl, _ = synthesize(_program(ctx, MATVEC).spec, ctx, {})
    k_loops = [
        n
        for n in impl.walk()
        if isinstance(n.action, LoopAction | InitLoopAction) and n.action.var == "k"
    ]
    assert k_loops[0].spec.operands[1].shape == (2048, 16384), k_loops[0].spec.describe()
    # Every loop over k that reads w from main memory reads whole rows; the innermost of
    # them steps a few rows at a time (an outer split_init may take 64 rows first).
    in_memory = [n for n in k_loops if n.spec.operands[1].level.name == "GL"]
    assert all(n.spec.operands[1].shape[1] == 16384 for n in in_memory), [
        n.spec.describe() for n in in_memory
    ]
    assert 4 <= in_memory[-1].action.step <= 8


def _burst_ctx(ctx: SynthesisContext, burst: int | None) -> SynthesisContext:
    coeffs = attrs.evolve(ctx.coefficients, stream_burst={"GL": burst} if burst else {})
    return attrs.evolve(ctx, coefficients=coeffs)


def _cached_tile(ctx: SynthesisContext, spec: Spec, n: int) -> Spec:
    """``spec`` (a matvec's k-step) tiled by ``n`` columns, the weights' tile cached in L1."""
    tile = _loops(ctx, spec)[("n", n)].body
    (cached,) = [
        a
        for a in spec_actions(tile, ctx)
        if isinstance(a, MoveAction)
        and a.operand == 1
        and not a.new_buffer
        and a.dest.level.name == "L1"
    ]
    return cached.children[0]


def test_a_loop_taking_cached_rows_in_long_bursts_pays_one_stream(ctx: SynthesisContext) -> None:
    """8 rows of a matvec's weights cached in L1 on their way from main memory: a loop over
    k in steps of 1 reads one row of the tile per trip. With ``stream_burst`` 16, a row of 32
    lines (512 columns) is one stream at a time: its lines pay ``stream_hit[0]`` less the
    8 streams' price. A row of 16 lines pays nothing, nor does a loop over n (each step
    takes all 8 rows), nor a reused operand, nor a target without the coefficient."""
    burst = _burst_ctx(ctx, 16)
    prices = ctx.coefficients.stream_hit["GL"]
    step = _loops(burst, attrs.evolve(_program(burst, MATVEC).spec, accum=True))[("k", 8)].body
    wide = _cached_tile(burst, step, 512)
    assert wide.operands[1].shape == (8, 512) and wide.operands[1].level.name == "L1"
    loops = _loops(burst, wide)
    assert loops[("k", 1)]._burst_cost(wide, burst) == 8 * 32 * (prices[0] - prices[7]) > 0
    assert loops[("n", 256)]._burst_cost(wide, burst) == 0
    narrow = _cached_tile(burst, step, 256)
    assert _loops(burst, narrow)[("k", 1)]._burst_cost(narrow, burst) == 0
    # The charge is part of the loop's cost only where the target declares bursts.
    plain = _burst_ctx(ctx, None)
    zeros = [0] * len(loops[("k", 1)].children)
    with_bursts = action_cost(wide, loops[("k", 1)], zeros, burst)
    assert with_bursts - action_cost(wide, _loops(plain, wide)[("k", 1)], zeros, plain) == (
        8 * 32 * (prices[0] - prices[7])
    )
    text = MATVEC.replace("f32[1, ", "f32[4, ")
    reused_step = _loops(burst, attrs.evolve(_program(burst, text).spec, accum=True))[("k", 8)]
    reused = _cached_tile(burst, reused_step.body, 512)
    assert _loops(burst, reused)[("k", 1)]._burst_cost(reused, burst) == 0


def test_stream_reuse_is_a_positive_integer() -> None:
    assert CostCoefficients(level_hit={"GL": 20}, named={}).stream_reuse == 1
    for bad in (0, True, 2.0):
        with pytest.raises(ValueError, match=r"stream_reuse is .*, not a positive integer"):
            CostCoefficients(level_hit={"GL": 20}, named={}, stream_reuse=bad)


def test_stream_burst_names_a_streamed_level() -> None:
    with pytest.raises(ValueError, match="stream_hit does not price"):
        CostCoefficients(level_hit={"GL": 20}, named={}, stream_burst={"GL": 16})
    with pytest.raises(ValueError, match="not a positive integer"):
        CostCoefficients(
            level_hit={"GL": 20}, named={}, stream_hit={"GL": (20,)}, stream_burst={"GL": 0}
        )


def test_an_unrolled_loop_pays_once_for_what_it_does_not_run_along(ctx: SynthesisContext) -> None:
    """In C, a loop along registers is its body repeated, and the repeats read an input the
    loop does not run along at the same address: the compiler loads it once
    (``LoopAction.loaded_once``). A 4x24 register tile in L1 broadcasts each element of A
    into three FMAs along n, paying one read of it, not three; a ``for`` loop (k, along A and
    B in L1) pays every trip's reads, and the output, written, is never taken off."""
    text = (
        "func f(a: f32[4, 16] @L1, b: f32[16, 24] @L1) -> c: f32[4, 24] @L1 {\n"
        "    c = matmul(a, b)\n}\n"
    )
    impl, _ = synthesize(_program(ctx, text).spec, ctx, {})
    along_n = [
        n
        for n in impl.walk()
        if isinstance(n.action, LoopAction)
        and n.action.var == "n"
        and n.spec.operands[0].shape == (1, 1)
        and n.spec.operands[0].level.name == "L1"
    ]
    assert along_n, "no broadcast of A from L1 in the chosen program"
    for node in along_n:
        loop, spec = node.action, node.spec
        assert loop.trips == 3 and loop.tail is None
        assert loop.loaded_once(spec, ctx) == [(2, spec.operands[0])]
        (body,) = node.children
        read = access_cost(spec.operands[0], ctx)
        assert read > 0 and node.cost == 3 * body.cost - 2 * read
    over_k = next(
        n for n in impl.walk() if isinstance(n.action, LoopAction) and n.action.var == "k"
    )
    assert over_k.spec.operands[-1].level.name == "VRF"
    assert over_k.action.loaded_once(over_k.spec, ctx) == []
    # The tail of such a loop reads the body's tile of the input too.
    tailed = attrs.evolve(along_n[0].action, trips=2, step=8, tail=along_n[0].action.body)
    assert tailed.loaded_once(along_n[0].spec, ctx) == [(2, along_n[0].spec.operands[0])]


def _fold_costs(ctx: SynthesisContext) -> tuple[int, int]:
    """A broadcast FMA of A's element from L1, priced as the kernel reading it in place and as
    a move of the element into RF around the kernel reading the register."""
    text = (
        "func f(a: f32[4, 16] @L1, b: f32[16, 24] @L1) -> c: f32[4, 24] @L1 {\n"
        "    c = matmul(a, b)\n}\n"
    )
    memo: dict[Spec, object] = {}
    impl, _ = synthesize(_program(ctx, text).spec, ctx, memo)
    spec = next(
        n.spec
        for n in impl.walk()
        if n.spec.operands[0].shape == (1, 1)
        and n.spec.operands[0].level.name == "L1"
        and n.spec.operands[1].shape == (1, 8)
    )
    actions = spec_actions(spec, ctx)
    in_place = next(a for a in actions if isinstance(a, KernelAction))
    moved = next(
        a
        for a in actions
        if isinstance(a, MoveAction) and a.operand == 0 and a.dest.level.name == "RF"
    )
    kids = [synthesize(child, ctx, memo)[0].cost for child in moved.children]
    return action_cost(spec, in_place, [], ctx), action_cost(spec, moved, kids, ctx)


def test_an_element_moved_into_a_folding_level_pays_its_lines_only(ctx: SynthesisContext) -> None:
    """zen1's RF folds a single f32 (``MemoryLevel.folds``): the kernels that read it take it
    from memory in their own instruction (``vbroadcastss``), so moving A's element into RF
    before a broadcast FMA compiles to what reading it in place does, and costs the same: the
    move pays the element's lines, not the load kernel's instruction. Before, it was priced
    a third dearer (4 against 3), and among the top 50 of 8x512x512 a program whose register
    tile loads A's element into RF inside its loop along n ran level with the chosen one at
    1.72 times its price (BENCHMARKS.md, "An element moved into a register folds")."""
    in_place, moved = _fold_costs(ctx)
    assert in_place == moved
    # A level that does not fold (spr's RF): the copy's kernel is an instruction of its own.
    spr = make_context("spr")
    in_place, moved = _fold_costs(spr)
    assert moved > in_place


def _cached(ctx: SynthesisContext, spec: Spec, operand: int) -> MoveAction:
    """The residency of ``operand`` in L1 offered at ``spec``."""
    return next(
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, MoveAction)
        and not a.new_buffer
        and a.operand == operand
        and a.dest.level.name == "L1"
    )


def test_a_loop_pays_once_for_a_residency_its_trips_repeat(ctx: SynthesisContext) -> None:
    """A residency writes no C, so B's tile made resident in L1 inside a loop over rows (which
    does not run along B) is the same program as B's tile made resident above the loop, and
    costs the same but for one unit: the loop pays the fill once (``cost.loop_fills``), not
    once per trip.
    Before, the residency inside cost three fills more here, and among 1024^3's top 50 a
    program with C's tile resident inside a loop over k was priced 1.52 times the chosen one
    against 1.09 with it above, and ran 0.995 of its time (BENCHMARKS.md). A's tile, which
    the loop runs along, is new data on every trip and pays every time."""
    text = (
        "func f(a: f32[16, 64] @GL, b: f32[64, 24] @GL) -> c: f32[16, 24] @GL {\n"
        "    c = matmul(a, b)\n}\n"
    )
    spec = _program(ctx, text).spec
    memo: dict[Spec, object] = {}
    loop = next(
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, LoopAction) and a.var == "m" and a.trips == 4 and a.tail is None
    )
    inside = _cached(ctx, loop.body, 1)
    inner = synthesize(inside.body, ctx, memo)[0].cost
    body = action_cost(loop.body, inside, [inner], ctx)
    in_loop = action_cost(spec, loop, [body], ctx)
    above = _cached(ctx, spec, 1)
    same_loop = next(
        a
        for a in spec_actions(above.body, ctx)
        if isinstance(a, LoopAction) and a.describe() == loop.describe()
    )
    assert same_loop.body == inside.body
    hoisted = action_cost(spec, above, [action_cost(above.body, same_loop, [inner], ctx)], ctx)
    fill = access_cost(spec.operands[1], ctx) + access_cost(inside.dest, ctx)
    assert fill > 0
    # One unit dearer, so that the search and ``KBest`` take the residency above.
    assert in_loop == hoisted + 1
    assert in_loop == action_cost(spec, loop, [with_fills(body, ())], ctx) - (3 * fill - 1)
    assert takes_off(in_loop) and not takes_off(hoisted)
    # A's tile (and C's) move with the loop: no credit, though B's below A's still has one.
    along = _cached(ctx, loop.body, 0)
    body_a = action_cost(loop.body, along, [synthesize(along.body, ctx, memo)[0].cost], ctx)
    got = fills(body_a)
    assert got[0] > 0 and got[1] > 0
    stripped = action_cost(spec, loop, [with_fills(body_a, ())], ctx)
    assert action_cost(spec, loop, [body_a], ctx) == stripped - (3 * got[1] - 1)
