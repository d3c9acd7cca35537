"""A loop whose body packs an input copies the next trip's tile ahead, inside the body.

``LoopAction.emit`` gives a loop whose body is a copy of an input the index runs along into a
new buffer (a panel packed into L1) two buffers: the first trip's copy before the loop, and
each trip copies the next trip's tile piece by piece inside the innermost loop of its body
(``Emitter.for_loop`` and ``Interleave``); a ``split_init`` loop does the same from its
first step. Checked here: where the pieces go and how often, pieces too far apart declined,
a failed attempt taken back, no copying ahead when two tiles do not fit the level, and the C
of forced trees against NumPy (pieces in a k loop, a loop with a tail, split_init loops of
two steps, more steps, and a tail).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from morello.codegen.c import Buffer, Emitter, Interleave, Lin, View, prefetch_addresses
from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.codegen.names import Names
from morello.context import SynthesisContext
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.layout import row_major
from morello.nodes import InitLoopAction, LoopAction, MoveAction
from morello.nodes.reside import not_resident
from morello.search.expand import spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec, TensorSpec


def _program(text: str, ctx: SynthesisContext) -> Program:
    (func,) = parse_spec_file("t.lark", text).funcs
    return build_program(func, ctx)


def _matmul(m: int, k: int, n: int) -> str:
    return f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{ c = matmul(a, b) }}"


def _solved(action: object, spec: Spec, children: tuple[Impl, ...], ctx: SynthesisContext) -> Impl:
    cost = action.cost(spec, [c.cost for c in children], ctx)  # type: ignore[attr-defined]
    peaks = action.peaks(spec, [c.peaks for c in children], ctx)  # type: ignore[attr-defined]
    return Impl(spec, action, children, cost, peaks)  # type: ignore[arg-type]


def _packed(body: Spec, ctx: SynthesisContext, memo: dict[Spec, object], operand: int = 1) -> Impl:
    """``body`` as a copy of ``operand`` into a new buffer in a cache, the rest by the DP."""
    move = next(
        a
        for a in spec_actions(body, ctx)
        if isinstance(a, MoveAction)
        and a.operand == operand
        and a.new_buffer
        and not a.dest.level.counts_registers
    )
    kids = tuple(synthesize(c, ctx, memo)[0] for c in move.children)
    return _solved(move, body, kids, ctx)


def _packing_loop(spec: Spec, ctx: SynthesisContext, step: int) -> Impl:
    """``spec`` as a loop over n in steps of ``step`` whose body packs b (operand 1) into a new
    buffer in the first cache level; everything below by the DP. (Packing from main memory:
    where the target has an L2 that holds whole Specs, the Spec is not resident there.)"""
    spec = not_resident(spec, ctx)
    (loop,) = [
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, LoopAction) and (a.var, a.step) == ("n", step)
    ]
    memo: dict[Spec, object] = {}
    children = [_packed(loop.body, ctx, memo)]
    if loop.tail is not None:
        children.append(synthesize(loop.tail, ctx, memo)[0])
    return _solved(loop, spec, tuple(children), ctx)


def _nested_packing_loop(spec: Spec, ctx: SynthesisContext, outer: int, inner: int) -> Impl:
    """``spec`` as a loop over n in steps of ``outer`` whose body is a loop over n in steps of
    ``inner`` (no tail) packing b as ``_packing_loop``; the outer tail, if any, by the DP."""
    spec = not_resident(spec, ctx)
    (loop,) = [
        a
        for a in spec_actions(spec, ctx)
        if isinstance(a, LoopAction) and (a.var, a.step) == ("n", outer)
    ]
    children = [_packing_loop(loop.body, ctx, inner)]
    if loop.tail is not None:
        children.append(synthesize(loop.tail, ctx, {})[0])
    return _solved(loop, spec, tuple(children), ctx)


def _packing_init_loop(spec: Spec, ctx: SynthesisContext, step: int) -> Impl:
    """``spec`` as a split_init loop over k in steps of ``step`` whose first step and body
    both copy their columns of a (strided rows) into a buffer; the rest by the DP (packing
    from main memory, as ``_packing_loop``)."""
    spec = not_resident(spec, ctx)
    (loop,) = [
        a for a in spec_actions(spec, ctx) if isinstance(a, InitLoopAction) and a.step == step
    ]
    memo: dict[Spec, object] = {}
    children = [_packed(loop.first, ctx, memo, 0), _packed(loop.body, ctx, memo, 0)]
    if loop.tail is not None:
        children.append(synthesize(loop.tail, ctx, memo)[0])
    return _solved(loop, spec, tuple(children), ctx)


def _c(prog: Program, impl: Impl, ctx: SynthesisContext) -> str:
    return lower_to_c("f", [(prog, impl)], ctx).c_text


def test_pieces_go_into_the_innermost_loop_spread_over_its_iterations(
    ctx: SynthesisContext,
) -> None:
    em = Emitter(ctx, Names())
    done: list[str] = []

    def piece(em: Emitter, index: Lin) -> None:
        done.append(index.render())
        em.emit(f"copy({index.render()});")

    def inner() -> None:
        em.emit("work();")

    def middle() -> None:
        em.emit("int next = 0, gap = 1;")
        em.interleave = Interleave(6, piece, "next", "gap", len(em.loop_trips))
        em.for_loop("j", 0, 4, lambda: em.for_loop("k", 0, 8, inner))
        em.interleave = None

    em.for_loop("i", 0, 3, middle)
    text = "\n".join(line.strip() for line in em.lines)
    # 4 x 8 iterations inside the trip, 6 pieces: one every 5 iterations of the k loop.
    assert done == ["next"]
    assert "for (int k = 0; k < 8; k++) {\nif (--gap == 0) {\ngap = 5;\nif (next < 6) {" in text
    assert text.index("copy(next);") < text.index("work();")
    assert text.count("copy(") == 1
    assert em.loop_trips == [] and em.depth == 1


def test_more_pieces_than_iterations_take_one_each(ctx: SynthesisContext) -> None:
    em = Emitter(ctx, Names())
    work = Interleave(10, lambda em, i: em.emit(f"copy({i.render()});"), "next", "gap", 0)
    em.interleave = work
    em.for_loop("k", 0, 4, lambda: em.emit("work();"))
    # the other 6 pieces are the caller's: LoopAction copies them after the body
    assert work.every == 1 and "gap = 1;" in "\n".join(em.lines)


def test_pieces_too_far_apart_are_declined(ctx: SynthesisContext) -> None:
    em = Emitter(ctx, Names())
    work = Interleave(2, lambda em, i: em.emit("copy();"), "next", "gap", 0)
    em.interleave = work
    em.for_loop("k", 0, 2 * (Interleave.SPARSEST + 1), lambda: em.emit("work();"))
    assert work.every == 0 and not work.placed
    assert "copy();" not in "\n".join(em.lines)


def test_an_attempt_that_fails_takes_its_lines_and_names_back(ctx: SynthesisContext) -> None:
    em = Emitter(ctx, Names())
    em.emit("kept();")
    outer = em.interleave = Interleave(4, lambda em, i: em.emit("copy();"), "next", "gap", 0)

    def write() -> bool:
        em.for_loop(em.names.fresh("i"), 0, 4, lambda: em.emit("dropped();"))
        return False

    assert not em.attempt(write)
    assert em.lines == ["    kept();"] and outer.every is None and em.interleave is outer
    assert em.names.fresh("i") == "i0"


def test_an_interleave_stays_pending_without_a_loop(ctx: SynthesisContext) -> None:
    em = Emitter(ctx, Names())
    work = Interleave(4, lambda em, i: em.emit("copy();"), "next", "gap", 0)
    em.interleave = work
    em.emit("straight_line();")
    assert work.every is None and "copy();" not in "\n".join(em.lines)


def _row_tile(ctx: SynthesisContext, shape: tuple[int, int]) -> tuple[View, TensorSpec]:
    """A ``shape`` tile at row ``r`` (a C variable) and column 24 of a 64x512 f32 buffer."""
    f32 = ctx.dtype("f32")
    gl = ctx.target.levels[0]
    buf = Buffer("b", f32, (64, 512), row_major(2), "memory")
    layout = row_major(2).tile((64, 512), shape)
    assert layout is not None
    return View(buf, (Lin.var("r"), Lin() + 24)), TensorSpec(shape, f32, gl, layout)


def test_prefetch_addresses_touch_every_line_of_each_run(ctx: SynthesisContext) -> None:
    # 24 floats (96 bytes) span two or three 64-byte lines, wherever the buffer starts
    view, ts = _row_tile(ctx, (1, 24))
    assert prefetch_addresses(view, ts, 8) == [
        "&b[512 * r + 24]",
        "&b[512 * r + 40]",
        "&b[512 * r + 47]",
    ]
    # two rows: each its own run
    view, ts = _row_tile(ctx, (2, 8))
    assert prefetch_addresses(view, ts, 8) == [
        "&b[512 * r + 24]",
        "&b[512 * r + 31]",
        "&b[512 * r + 536]",
        "&b[512 * r + 543]",
    ]
    # more lines than allowed: none
    assert prefetch_addresses(view, ts, 3) is None
    view, ts = _row_tile(ctx, (8, 64))
    assert prefetch_addresses(view, ts, 8) is None


def test_each_piece_prefetches_the_piece_a_fixed_distance_later(ctx: SynthesisContext) -> None:
    em = Emitter(ctx, Names())
    view, ts = _row_tile(ctx, (1, 24))

    def reads(index: Lin) -> list[tuple[View, TensorSpec]]:
        return [(View(view.buffer, (index, view.origin[1])), ts)]

    work = Interleave(40, lambda em, i: em.emit(f"copy({i.render()});"), "next", "gap", 0)
    work.reads = (32, reads)  # 32 whole pieces, then a tail
    em.interleave = work
    em.for_loop("k", 0, 320, lambda: em.emit("work();"))
    text = "\n".join(line.strip() for line in em.lines)
    # a piece every 8 iterations: the one Interleave.AHEAD iterations later is 8 pieces on
    later = Interleave.AHEAD // 8
    assert work.every == 8
    assert (
        f"if (next < 40) {{\nif (next + {later} < 32) {{\n"
        f"__builtin_prefetch(&b[512 * next + {512 * later + 24}]);" in text
    )
    assert text.count("__builtin_prefetch") == 3
    assert text.index("__builtin_prefetch") < text.index("copy(next);")


@pytest.mark.parametrize(("n", "trips"), [(32, 4), (36, 4)])
def test_two_panels_each_trip_copying_the_next(ctx: SynthesisContext, n: int, trips: int) -> None:
    prog = _program(_matmul(4, 64, n), ctx)
    text = _c(prog, _packing_loop(prog.spec, ctx, 8), ctx)
    # the first trip's panel is copied before the loop; the last trip copies nothing ahead
    assert re.search(r"float \*restrict panel0 = (i[0-9]+) & 1 \? t[0-9]+ : t[0-9]+;", text)
    found = re.search(rf"int next0 = i[0-9]+ \+ 1 < {trips} \? 0 : ([0-9]+);", text)
    assert found, text
    pieces = found.group(1)  # the rows of the panel, or the trips of the target's row loop
    assert "if (--gap0 == 0) {" in text
    assert text.index("ahead0[") < text.index(f"for (; next0 < {pieces}; next0++) {{")
    # where a piece is one row of the panel (8 floats), it prefetches a later one's row of b
    prefetches = re.search(r"if \(next0 \+ [0-9]+ < 64\) \{\s*__builtin_prefetch\(&b\[", text)
    assert (pieces == "64") == bool(prefetches), text


@pytest.mark.parametrize(("n", "tail"), [(32, False), (36, True)])
def test_a_nest_of_two_loops_over_one_index_copies_ahead_across_it(
    ctx: SynthesisContext, n: int, tail: bool
) -> None:
    # 2 x (2 x 8) columns (and a tail of 4): one loop of 4 trips with two panels, so the
    # second outer trip's first panel is copied during the first outer trip's last
    prog = _program(_matmul(4, 64, n), ctx)
    impl = _nested_packing_loop(prog.spec, ctx, 16, 8)
    assert (impl.action.trips, impl.action.tail is not None) == (2, tail)
    text = _c(prog, impl, ctx)
    assert re.search(r"int next0 = i[0-9]+ \+ 1 < 4 \? 0 : [0-9]+;", text), text
    assert text.count("float *restrict panel") == 1
    assert not re.search(r"for \(int i[0-9]+ = 0; i[0-9]+ < 2; i[0-9]+\+\+\) \{\s*float", text)


def test_no_copy_ahead_when_two_tiles_do_not_fit_the_level(ctx: SynthesisContext) -> None:
    # a panel of 5/8 of the first cache: one fits, two do not
    cache = next(lv for lv in ctx.target.levels if lv.packs)
    rows = cache.capacity * 5 // 8 // (16 * 4)
    prog = _program(_matmul(4, rows, 32), ctx)
    text = _c(prog, _packing_loop(prog.spec, ctx, 16), ctx)
    # one buffer for the panel (loops inside may still copy their own, smaller tiles ahead)
    assert text.count(f"[{rows * 16}] __attribute__") == 1


def test_a_split_init_loop_copies_ahead_from_its_first_step(ctx: SynthesisContext) -> None:
    prog = _program(_matmul(4, 256, 8), ctx)
    text = _c(prog, _packing_init_loop(prog.spec, ctx, 64), ctx)
    # the first step copies the second step's tile into the second buffer from its first row
    assert "int next0 = 0;" in text
    assert re.search(r"int next1 = i[0-9]+ \+ 1 < 4 \? 0 : 4;", text)


CASES = {
    # pieces inside the body's k loop
    "k-loop": (_matmul(4, 64, 32), 8),
    # a tail after the loop copies its own tile in place
    "tail": (_matmul(4, 64, 36), 8),
    # a piece every iteration (as many pieces as iterations)
    "every-iteration": (_matmul(1, 4, 24), 8),
    # three trips of a wide tile
    "wide": (_matmul(6, 32, 48), 16),
}


INIT_CASES = {
    # a loop over the later steps
    "init-loop": (_matmul(4, 256, 8), 64),
    # two steps: the second written out, copied by the first
    "init-two-steps": (_matmul(3, 128, 16), 64),
    # a tail of 8 steps of k after the loop
    "init-tail": (_matmul(2, 200, 8), 64),
}


@pytest.mark.runs_code
@pytest.mark.parametrize("case", sorted(INIT_CASES))
def test_c_of_a_split_init_loop_copying_ahead_matches_numpy(
    ctx: SynthesisContext, case: str, tmp_path: Path
) -> None:
    text, step = INIT_CASES[case]
    prog = _program(text, ctx)
    impl = _packing_init_loop(prog.spec, ctx, step)
    source = _c(prog, impl, ctx)
    assert "int next0 = 0;" in source
    check(compile_shared(source, ctx.target, tmp_path), prog, ctx)


@pytest.mark.runs_code
@pytest.mark.parametrize("n", [32, 36])
def test_c_of_a_nest_copying_ahead_across_it_matches_numpy(
    ctx: SynthesisContext, n: int, tmp_path: Path
) -> None:
    prog = _program(_matmul(4, 64, n), ctx)
    source = _c(prog, _nested_packing_loop(prog.spec, ctx, 16, 8), ctx)
    check(compile_shared(source, ctx.target, tmp_path), prog, ctx)


@pytest.mark.runs_code
@pytest.mark.parametrize("case", sorted(CASES))
def test_c_of_a_loop_copying_ahead_matches_numpy(
    ctx: SynthesisContext, case: str, tmp_path: Path
) -> None:
    text, step = CASES[case]
    prog = _program(text, ctx)
    impl = _packing_loop(prog.spec, ctx, step)
    source = _c(prog, impl, ctx)
    # (whether the loop copies ahead depends on the target's copy loops; the test above
    # checks that it does for this shape of copy)
    check(compile_shared(source, ctx.target, tmp_path), prog, ctx)
