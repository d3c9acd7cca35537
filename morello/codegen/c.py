"""Lowers an Impl tree to one readable C function.

Each operand of each node is a *view*: a buffer plus the logical coordinates of the tile's
first element. Each node kind writes its own C through the ``Emitter`` (``morello.nodes``):
loops shift the origin of the operands whose dims their index runs along (and unroll over
register-resident operands, which cannot be indexed); moves into addressed levels declare
buffers (register variables for register levels, arrays otherwise) with prologue/epilogue
copies; kernels render their templates. Serial loops are written through
``Emitter.for_loop``, whose innermost loop can take work an outer node spreads over its
iterations (``Interleave``: a loop copying its next trip's panel ahead). Knows no node kind,
kernel or target by name.
"""

from __future__ import annotations

import itertools
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

from morello.codegen.names import Names, respelled
from morello.layout import Layout
from morello.spec import TensorSpec

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.dtypes import Dtype
    from morello.impl import Impl
    from morello.lang.spec_file import Program

_STACK_LIMIT_BYTES = 64 * 1024
_ALIGN = 64


# ---- integer expressions ------------------------------------------------------------------


#: Per thread, ``bounds``: the least and greatest value of each loop variable of the loops
#: open around the line being written (``Emitter.for_loop``), which lets ``Lin`` drop a
#: packed layout's ``/`` and ``%`` where the range of a loop inside a block shows them to be
#: exact. Per thread, so that two functions written at once never read each other's loops.
_OPEN_LOOPS = threading.local()


def _loop_bounds() -> dict[str, tuple[int, int]]:
    """This thread's ranges of the open loops' variables (see ``_OPEN_LOOPS``)."""
    bounds: dict[str, tuple[int, int]] | None = getattr(_OPEN_LOOPS, "bounds", None)
    if bounds is None:
        bounds = _OPEN_LOOPS.bounds = {}
    return bounds


@attrs.frozen
class Lin:
    """``const + sum(coef * var)``; opaque sub-expressions appear as variables."""

    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()

    @staticmethod
    def var(name: str) -> Lin:
        """The expression ``name``."""
        return Lin(0, ((name, 1),))

    def is_const(self) -> bool:
        """Whether no variables remain."""
        return not self.terms

    def __add__(self, other: Lin | int) -> Lin:
        if isinstance(other, int):
            return Lin(self.const + other, self.terms)
        merged = dict(self.terms)
        for v, c in other.terms:
            merged[v] = merged.get(v, 0) + c
        return Lin(self.const + other.const, tuple((v, c) for v, c in merged.items() if c))

    def scale(self, k: int) -> Lin:
        """``k * self``."""
        if k == 0:
            return Lin()
        return Lin(self.const * k, tuple((v, c * k) for v, c in self.terms))

    def floordiv(self, k: int) -> Lin:
        """``self / k`` (C division of non-negative values)."""
        if k == 1:
            return self
        if self.is_const():
            return Lin(self.const // k)
        split = self._split(k)
        if split is not None:
            return split[0].scale_down(k)
        return Lin.var(f"(({self.render()}) / {k})")

    def mod(self, k: int) -> Lin:
        """``self % k`` (of a non-negative value)."""
        if self.is_const():
            return Lin(self.const % k)
        split = self._split(k)
        if split is not None:
            return split[1]
        return Lin.var(f"(({self.render()}) % {k})")

    def scale_down(self, k: int) -> Lin:
        """``self / k`` where ``k`` divides the constant and every coefficient."""
        return Lin(self.const // k, tuple((v, c // k) for v, c in self.terms))

    def _split(self, k: int) -> tuple[Lin, Lin] | None:
        """``(multiple, rest)`` with ``self == multiple + rest``, ``multiple`` a multiple of
        ``k`` for every value of the variables and ``0 <= rest < k`` for every value the
        loops open around the current line give them (``Emitter.for_loop``'s bounds); None
        if the terms that are not multiples of ``k`` could leave that range or run over a
        variable of unknown range. So ``(96 * i + 8) % 16`` is ``8``, and in a loop of
        ``j`` from 0 to 255, ``(256 * i + j) / 256`` is ``i``."""
        lo = hi = self.const % k
        rest: list[tuple[str, int]] = []
        open_loops = _loop_bounds()
        for v, c in self.terms:
            if c % k == 0:
                continue
            bounds = open_loops.get(v)
            if bounds is None:
                return None
            lo += c * (bounds[0] if c > 0 else bounds[1])
            hi += c * (bounds[1] if c > 0 else bounds[0])
            rest.append((v, c))
        if lo < 0 or hi >= k:
            return None
        rest_lin = Lin(self.const % k, tuple(rest))
        return self + rest_lin.scale(-1), rest_lin

    def render(self) -> str:
        """C text, variables first, constant last."""
        parts = []
        for v, c in self.terms:
            parts.append(v if c == 1 else f"{c} * {v}")
        if self.const or not parts:
            parts.append(str(self.const))
        return " + ".join(parts)


def offset_of(layout: Layout, shape: Sequence[int], coords: Sequence[Lin]) -> Lin:
    """The buffer offset of ``coords`` as an expression."""
    total = Lin()
    for coord, div, mod, stride in layout.offset_terms(shape, coords):
        assert isinstance(coord, Lin)
        v = coord.floordiv(div)
        if mod is not None:
            v = v.mod(mod)
        total = total + v.scale(stride)
    return total


# ---- buffers and views --------------------------------------------------------------------


@attrs.frozen
class Buffer:
    """Storage of a tensor: a pointer/array, or a set of register variables."""

    name: str
    dtype: Dtype
    shape: tuple[int, ...]
    layout: Layout
    kind: str  # "memory" or "registers"
    lanes: int | None = None  # vector lanes per register variable


@attrs.frozen
class View:
    """A tile of a buffer starting at logical coordinates ``origin``."""

    buffer: Buffer
    origin: tuple[Lin, ...]

    def shifted(self, dim: int, by: Lin | int) -> View:
        """The view with ``origin[dim] += by``."""
        origin = list(self.origin)
        origin[dim] = origin[dim] + by
        return View(self.buffer, tuple(origin))


def shift_views(
    views: Sequence[View], uses: Iterable[tuple[int, int]], offset: Lin | int
) -> list[View]:
    """``views`` with each ``(operand, dim)`` of ``uses`` moved ``offset`` along ``dim``: the
    views of one trip of a loop over an index that runs along those dims."""
    shifted = list(views)
    for i, d in uses:
        shifted[i] = shifted[i].shifted(d, offset)
    return shifted


def offset_step(view: View, dim: int, by: int) -> Lin:
    """Elements in the view's buffer from its origin to the point ``by`` further along
    ``dim``: a constant where the layout is linear there, else an expression of the loop
    variables (a packed layout's blocks)."""
    buf = view.buffer
    here = offset_of(buf.layout, buf.shape, view.origin)
    return offset_of(buf.layout, buf.shape, view.shifted(dim, by).origin) + here.scale(-1)


def row_stride(view: View, rows: int) -> int:
    """Elements between consecutive indices of the view's first dim (``{stride(x)}``), for a
    tile of ``rows`` rows.

    A kernel reading the stride matches only tiles of strided layouts; such a tile of a
    packed buffer (rows of one panel or one block) has a fixed stride too, the same in every
    iteration of the loops around it. Where the offsets' expressions do not show that (a
    block's rows, offsets modulo the block), the stride is read from the tile's position in
    the first iteration (every loop variable 0). No fixed stride there is a codegen bug.
    """
    buf = view.buffer
    step = offset_step(view, 0, 1)
    if step.is_const():
        return step.const
    first = [c.const for c in view.origin]
    offsets = [
        buf.layout.offset(buf.shape, [first[0] + r, *first[1:]]) for r in range(max(rows, 2))
    ]
    steps = {b - a for a, b in itertools.pairwise(offsets)}
    if len(steps) != 1:
        raise AssertionError(f"no fixed row stride in {buf.name}: {step.render()}")
    return steps.pop()


def element(view: View, local: Sequence[int] | None = None) -> tuple[str, str]:
    """(lvalue, address) of the view's first element (or ``local`` offset within it)."""
    buf = view.buffer
    coords = list(view.origin)
    if local is not None:
        coords = [c + int(d) for c, d in zip(coords, local, strict=True)]
    off = offset_of(buf.layout, buf.shape, coords)
    if buf.kind == "registers":
        if not off.is_const():
            raise AssertionError(f"register buffer {buf.name} indexed by {off.render()}")
        if buf.lanes:
            if off.const % buf.lanes:
                raise AssertionError(f"vector tile of {buf.name} not aligned: {off.const}")
            name = f"{buf.name}_{off.const // buf.lanes}"
        else:
            name = f"{buf.name}_{off.const}"
        return name, f"&{name}"
    lvalue = f"{buf.name}[{off.render()}]"
    return lvalue, f"&{lvalue}"


def prefetch_addresses(view: View, ts: TensorSpec, most: int) -> list[str] | None:
    """At most ``most`` addresses within ``ts``'s tile at ``view`` that together touch every
    cache line it spans, wherever the buffer starts: each contiguous run's first element,
    then one every line, and its last. None where more are needed, or where the offsets
    within the tile are not constants."""
    line = max(1, ts.level.line_bytes // ts.dtype.size)
    if ts.volume > most * line:
        return None
    buf = view.buffer
    base = offset_of(buf.layout, buf.shape, view.origin)
    offsets = set()
    for local in itertools.product(*(range(n) for n in ts.shape)):
        coords = [c + d for c, d in zip(view.origin, local, strict=True)]
        off = offset_of(buf.layout, buf.shape, coords) + base.scale(-1)
        if not off.is_const():
            return None
        offsets.add(off.const)
    points: list[int] = []
    ordered = sorted(offsets)
    start = 0
    for i in range(1, len(ordered) + 1):
        if i < len(ordered) and ordered[i] == ordered[i - 1] + 1:
            continue
        first, last = ordered[start], ordered[i - 1]  # one contiguous run
        points += range(first, last, line)
        points.append(last)
        start = i
    if len(points) > most:
        return None
    return [f"&{buf.name}[{(base + p).render()}]" for p in points]


# ---- the emitter --------------------------------------------------------------------------


@attrs.define
class Interleave:
    """Work spread over the innermost serial loop of a body (``Emitter.for_loop``).

    ``rows`` pieces, ``emit_piece(em, index)`` each; the C variable ``next`` counts the pieces
    done and ``gap`` the loop iterations until the next one. The first innermost loop that
    finishes inside the body (below ``depth`` open loops) takes it: one piece every ``every``
    of its iterations, counting the iterations of the loops around it inside the body. When
    that would be sparser than ``SPARSEST``, it declines (``every`` 0) and the pieces are left
    to the caller: a piece that misses the caches every few thousand cycles stalls the
    loop, where a burst of them overlaps (BENCHMARKS.md, "A loop copies its next panel
    ahead": 1024^3's one row every 256 iterations ran 11% slower than a burst).

    ``reads`` (a node's ``piece_reads``): with it, each piece also prefetches the inputs of
    the piece ``AHEAD`` loop iterations later, so that its loads find them in the cache: a
    piece's few loads, alone among the loop's, miss to memory otherwise, and each miss
    stalls the loop (BENCHMARKS.md, "32x2048x512 at busy moments").
    """

    #: The most loop iterations between two pieces (measured: 8 to 64 gain, 256 loses).
    SPARSEST = 64
    #: Loop iterations between prefetching a piece's inputs and copying them (measured on
    #: 32x2048x512: 16 to 128 all gain).
    AHEAD = 64
    #: The most cache lines a piece prefetches (a longer run the hardware follows itself).
    MOST_LINES = 8

    rows: int
    emit_piece: Callable[[Emitter, Lin], None]
    next: str
    gap: str
    depth: int
    every: int | None = None
    reads: tuple[int, Callable[[Lin], list[tuple[View, TensorSpec]]]] | None = None

    @property
    def placed(self) -> bool:
        """Whether a loop took the pieces (else the caller copies them all)."""
        return bool(self.every)


class Emitter:
    """Writes one function's body: lines at the current depth, fresh names, new buffers.

    Node kinds (``morello.nodes``) write themselves through it: ``emit`` a line, ``node`` a
    child, ``declare`` a buffer, ``names.fresh`` a loop variable, ``for_loop`` a serial loop.
    """

    def __init__(self, ctx: SynthesisContext, names: Names) -> None:
        self.ctx = ctx
        self.names = names
        self.lines: list[str] = []
        self.depth = 1
        self.bindings: dict[str, Lin] = {}
        #: Trips of the serial ``for_loop``s open around the current line.
        self.loop_trips: list[int] = []
        #: Work waiting for the innermost loop of the body being emitted (``Interleave``).
        self.interleave: Interleave | None = None

    def attempt(self, write: Callable[[], bool]) -> bool:
        """Run ``write``; if it returns False, take back every line and name it made."""
        lines, names = len(self.lines), self.names.state()
        depth, trips, work = self.depth, list(self.loop_trips), self.interleave
        every = work.every if work is not None else None
        if write():
            return True
        del self.lines[lines:]
        self.names.restore(names)
        self.depth, self.loop_trips, self.interleave = depth, trips, work
        if work is not None:  # a loop taken back may have taken an outer loop's pieces
            work.every = every
        return False

    def for_loop(self, var: str, start: int, stop: int, body: Callable[[], None]) -> None:
        """``for (int var = start; var < stop; var++) { body }``, taking a pending
        ``interleave`` when no loop inside took it (it is then the innermost)."""
        self.emit(f"for (int {var} = {start}; {var} < {stop}; {var}++) {{")
        self.depth += 1
        top = len(self.lines)
        self.loop_trips.append(stop - start)
        open_loops = _loop_bounds()
        outer = open_loops.get(var)
        open_loops[var] = (start, max(start, stop - 1))
        try:
            body()
            work = self.interleave
            if work is not None and work.every is None and len(self.loop_trips) > work.depth:
                every = max(1, math.prod(self.loop_trips[work.depth :]) // work.rows)
                work.every = every if every <= work.SPARSEST else 0
                if work.placed:
                    self.lines[top:top] = self._captured(lambda: self._piece(work))
        finally:
            if outer is None:
                del open_loops[var]
            else:
                open_loops[var] = outer
        self.loop_trips.pop()
        self.depth -= 1
        self.emit("}")

    def _piece(self, work: Interleave) -> None:
        """Every ``work.every`` iterations, the next piece of ``work`` if one is left."""
        self.emit(f"if (--{work.gap} == 0) {{")
        self.depth += 1
        self.emit(f"{work.gap} = {work.every};")
        self.emit(f"if ({work.next} < {work.rows}) {{")
        self.depth += 1
        self._prefetch_ahead(work)
        work.emit_piece(self, Lin.var(work.next))
        self.emit(f"{work.next}++;")
        self.depth -= 1
        self.emit("}")
        self.depth -= 1
        self.emit("}")

    def _prefetch_ahead(self, work: Interleave) -> None:
        """Prefetch the inputs of the piece ``work.AHEAD`` iterations after this one, when it
        is a whole piece and they span at most ``work.MOST_LINES`` cache lines."""
        if work.reads is None or not work.every:
            return
        whole, reads = work.reads
        later = max(1, -(-work.AHEAD // work.every))
        addresses: list[str] = []
        for view, ts in reads(Lin.var(work.next) + later):
            lines = prefetch_addresses(view, ts, work.MOST_LINES - len(addresses))
            if lines is None:
                return
            addresses += lines
        if not addresses:
            return
        self.emit(f"if ({work.next} + {later} < {whole}) {{")
        for address in addresses:
            self.emit(f"    __builtin_prefetch({address});")
        self.emit("}")

    def _captured(self, write: Callable[[], None]) -> list[str]:
        """The lines ``write`` emits, taken out of the function (no interleave inside)."""
        saved_lines, saved_work = self.lines, self.interleave
        self.lines, self.interleave = [], None
        try:
            write()
            return self.lines
        finally:
            self.lines, self.interleave = saved_lines, saved_work

    def emit(self, line: str) -> None:
        """Add ``line`` at the current depth."""
        self.lines.append("    " * self.depth + line)

    def node(self, impl: Impl, views: list[View]) -> None:
        """Emit ``impl`` over ``views`` (one per operand of its Spec): the node writes itself."""
        impl.action.emit(self, impl, views)

    def declare(self, ts: TensorSpec) -> Buffer:
        """Declare a new buffer for ``ts``: register variables, a stack array, or heap memory."""
        level = ts.level
        dt = ts.dtype
        if level.counts_registers:
            if ts.vector_size:
                vt = self.ctx.target.vector_type(ts.dtype, ts.vector_size)
                assert vt is not None
                name = self.names.fresh("v")
                count = ts.volume // ts.vector_size
                decls = ", ".join(f"{name}_{i}" for i in range(count))
                self.emit(f"{vt.c_type} {decls};")
                return Buffer(name, ts.dtype, ts.shape, ts.layout, "registers", ts.vector_size)
            name = self.names.fresh("r")
            decls = ", ".join(f"{name}_{i}" for i in range(ts.volume))
            self.emit(f"{dt.c_type} {decls};")
            return Buffer(name, ts.dtype, ts.shape, ts.layout, "registers")
        name = self.names.fresh("t")
        count = ts.volume
        if on_heap(ts):
            size = -(-count * dt.size // _ALIGN) * _ALIGN
            self.emit(f"{dt.c_type} *restrict {name} = aligned_alloc({_ALIGN}, {size});")
        else:
            self.emit(f"{dt.c_type} {name}[{count}] __attribute__((aligned({_ALIGN})));")
        return Buffer(name, ts.dtype, ts.shape, ts.layout, "memory")


def on_heap(ts: TensorSpec) -> bool:
    """Whether a new buffer for ``ts`` is too large for the stack (it is allocated instead)."""
    return ts.volume * ts.dtype.size > _STACK_LIMIT_BYTES


def c_signature(
    program: Program,
    ctx: SynthesisContext,
    restrict: bool = True,
    renamed: Mapping[str, str] | None = None,
) -> str:
    """``void name(const float *restrict a, ..., float *restrict c)`` in parameter order.

    Without ``restrict`` it is the same function type (qualifiers of the parameters themselves
    do not count), spelled so that C++ accepts it too: that is the header's prototype.
    ``renamed`` spells some parameters otherwise: in a definition, those whose name would
    shadow a function the body calls (``lower_function``); in the header's prototype, those
    named like C++ keywords (``header``).
    """
    q = "restrict " if restrict else ""
    c_name = (renamed or {}).get
    parts = [f"const {ts.dtype.c_type} *{q}{c_name(n, n)}" for n, ts in program.params]
    name, ts = program.result
    parts.append(f"{ts.dtype.c_type} *{q}{c_name(name, name)}")
    return f"void {program.name}({', '.join(parts)})"


def dtype_headers(tensors: Iterable[TensorSpec], ctx: SynthesisContext) -> list[str]:
    """The headers the element types of ``tensors`` need (``<stdint.h>``), in first-use order."""
    headers: list[str] = []
    for ts in tensors:
        h = ts.dtype.c_header
        if h is not None and h not in headers:
            headers.append(h)
    return headers


#: Headers of the C library itself, placed before the others.
_LIBC_FIRST = ("<stdlib.h>",)


def _headers(impl: Impl, ctx: SynthesisContext) -> list[str]:
    headers = dtype_headers(impl.spec.operands, ctx)
    for node in impl.walk():
        for h in node.action.headers(ctx):
            if h in headers:
                continue
            if h in _LIBC_FIRST:
                headers.insert(0, h)
            else:
                headers.append(h)
    return headers


#: A name followed by an opening parenthesis: a call (or a function-like macro) in C text.
_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def lower_function(impl: Impl, program: Program, ctx: SynthesisContext) -> tuple[str, list[str]]:
    """C text of the function implementing ``program`` by ``impl``, and the headers it needs.

    Parameters keep their spec-file names unless one is also a function the body calls (a
    parameter ``expf`` where a kernel calls ``expf``, which it would shadow): that one is
    renamed ``<name>_arg`` (then ``<name>_arg1``, ...) in this definition only; the header's
    prototype keeps the spec file's name, which cannot shadow anything there.
    """
    names = [*(n for n, _ in program.params), program.result[0]]
    renamed: dict[str, str] = {}
    while True:
        reserved = set(names) | set(renamed.values()) | {program.name}
        em = Emitter(ctx, Names(reserved))
        views = []
        for ts, pname in zip(impl.spec.operands, program.operand_params, strict=True):
            buf = Buffer(renamed.get(pname, pname), ts.dtype, ts.shape, ts.layout, "memory")
            views.append(View(buf, tuple(Lin() for _ in ts.shape)))
        em.node(impl, views)
        called = {m.group(1) for line in em.lines for m in _CALLED.finditer(line)}
        clash = [n for n in names if renamed.get(n, n) in called]
        if not clash:
            break
        taken = reserved | called
        for n in clash:
            renamed[n] = respelled(n, "_arg", taken)
    text = [f"/* {impl.spec.describe()} */", c_signature(program, ctx, renamed=renamed), "{"]
    text.extend(em.lines)
    text.append("}")
    return "\n".join(text) + "\n", _headers(impl, ctx)
