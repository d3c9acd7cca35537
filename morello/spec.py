"""Specs: the goals the synthesizer decomposes.

A Spec is an op (by name, as declared in rule files) applied to TensorSpecs (each holding
its dtype and memory level as objects, resolved when it is built), whether it
accumulates into its output, the memory still available at each level, and whether the code
must be serial. Specs are immutable, hashed once, and always canonical (layouts in canonical
form for their shapes), so equal goals are equal keys.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Iterator, Sequence

import attrs

from morello.dtypes import Dtype
from morello.layout import Layout
from morello.target import MemoryLevel, Target


@attrs.frozen(cache_hash=True)
class TensorSpec:
    """One operand: shape, dtype, memory level, canonical layout and vector size."""

    shape: tuple[int, ...] = attrs.field(converter=tuple)
    dtype: Dtype
    level: MemoryLevel
    layout: Layout
    vector_size: int | None = None

    @property
    def volume(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    def describe(self) -> str:
        """Compact text such as ``f32[8, 8] @L1 row_major v8``."""
        dims = ", ".join(map(str, self.shape))
        text = f"{self.dtype.name}[{dims}] @{self.level.name}"
        if self.layout.dims:
            text += " " + self.layout.describe(len(self.shape))
        if self.vector_size is not None:
            text += f" v{self.vector_size}"
        return text


_INTERNED: dict[TensorSpec, TensorSpec] = {}
_INTERN_LIMIT = 1 << 20


def interned(ts: TensorSpec) -> TensorSpec:
    """The one object equal to ``ts`` that the search uses.

    The search keys dictionaries by Specs and TensorSpecs. A lookup compares its key with
    the stored one field by field unless they are the same object, so the tiles and moved
    operands the rewrites make are interned (``schemas.tile_tensor``, ``_buffers_for``):
    equal operands are then identical and most lookups stop at the identity check. The
    table is bounded (emptied when it passes ``_INTERN_LIMIT`` entries), which only costs
    the comparisons again.
    """
    found = _INTERNED.get(ts)
    if found is not None:
        return found
    if len(_INTERNED) >= _INTERN_LIMIT:
        _INTERNED.clear()
    _INTERNED[ts] = ts
    return ts


@functools.lru_cache(maxsize=1 << 18)
def lines_and_runs(ts: TensorSpec, elem_bytes: int, line_bytes: int) -> tuple[int, int]:
    """Cache lines of ``line_bytes`` that ``ts`` touches, and its number of contiguous runs.

    Memoized: the search asks this of the same tiles (mostly the same objects, see
    ``schemas.tile_tensor``) for every loop, move and kernel it prices.
    """
    return ts.layout.cache_lines(ts.shape, elem_bytes, line_bytes), ts.layout.runs(ts.shape)


def memory_units(ts: TensorSpec, level: MemoryLevel) -> int:
    """What ``ts`` costs against the limit of ``level``: registers or cache lines."""
    if level.counts_registers:
        if ts.vector_size:
            return -(-ts.volume // ts.vector_size)
        return ts.volume
    return lines_and_runs(ts, ts.dtype.size, level.line_bytes)[0]


def cache_ways(ts: TensorSpec, level: MemoryLevel) -> int:
    """Ways of a set-associative ``level`` that ``ts`` needs, assuming its runs alias.

    A TensorSpec does not know the stride between its runs (tiles of different parents are
    the same goal), so this assumes the worst case that matters in practice: a power-of-two
    stride, under which every run starts in the same set. A run of ``r`` lines then takes
    ``ceil(r / sets)`` ways, and each run its own. A contiguous tile needs
    ``ceil(lines / sets)``. Returns 0 for levels without ``ways``.
    """
    if not level.ways or level.counts_registers:
        return 0
    lines, runs = lines_and_runs(ts, ts.dtype.size, level.line_bytes)
    run_lines = -(-lines // runs)
    return runs * -(-run_lines // level.sets)


def snap_down(value: int) -> int:
    """Largest power of two not above ``value`` (0 stays 0)."""
    return 0 if value <= 0 else 1 << (value.bit_length() - 1)


def snap_up(value: int) -> int:
    """Smallest power of two not below ``value`` (0 stays 0)."""
    return 0 if value <= 0 else 1 << (value - 1).bit_length()


def subtract_limits(
    target: Target, limits: tuple[int, ...], level_idx: int, units: int
) -> tuple[int, ...] | None:
    """Limits after allocating ``units`` at one level, or None if they don't fit.

    What is left snaps down to a power of two, so that limits form a small lattice: this
    keeps the graph and the memo table small at the price of sometimes leaving a few
    registers or lines unused. A level that shares its registers with others
    (``MemoryLevel.shares``) takes the units from each of them. A level that bounds each
    buffer on its own (``MemoryLevel.per_buffer``) only checks that they fit.
    """
    out = list(limits)
    for idx in target.sharing(level_idx, units):  # registers shared with another level: both
        if units > out[idx]:
            short_of(idx, units)
            return None
        if not target.levels[idx].per_buffer:
            out[idx] = snap_down(out[idx] - units)
    return tuple(out)


def add_peak(target: Target, peak: list[int], level_idx: int, units: int) -> None:
    """Raise ``peak`` (a child's, per level) by a buffer of ``units`` at one level held while
    the child runs, as ``subtract_limits`` allocates it: ``snap_up(u + r)`` for a child that
    needs ``r``, since it leaves the child ``snap_down(limit - u)``; at a level that bounds
    each buffer on its own, the larger of ``snap_up(u)`` and ``r``."""
    for j in target.sharing(level_idx, units):
        if target.levels[j].per_buffer:
            peak[j] = max(peak[j], snap_up(units))
        else:
            peak[j] = snap_up(peak[j] + units)


@attrs.frozen(cache_hash=True)
class Spec:
    """A goal: ``op`` over ``operands`` (inputs then the output) under memory ``limits``.

    ``limits`` has one entry per target level (registers, or cache lines), each a power of
    two or 0: roots start at the snapped-down capacities and every allocation snaps down.
    """

    op: str
    operands: tuple[TensorSpec, ...] = attrs.field(converter=tuple)
    accum: bool
    limits: tuple[int, ...] = attrs.field(converter=tuple)
    serial: bool = True

    @property
    def output(self) -> TensorSpec:
        """The output operand (always last)."""
        return self.operands[-1]

    def with_operands(self, operands: Sequence[TensorSpec]) -> Spec:
        """The same goal over other operands."""
        return Spec(self.op, tuple(operands), self.accum, self.limits, self.serial)

    def describe(self) -> str:
        """One-line text form, e.g. ``c: f32[1, 8] @VRF += matmul(a: ..., b: ...)``."""
        *ins, out = self.operands
        args = ", ".join(t.describe() for t in ins)
        eq = "+=" if self.accum else "="
        return f"{out.describe()} {eq} {self.op}({args})"


#: What ``short_of`` notes while a Spec's actions are listed (``noting_shortfalls``): per
#: level index, the least room an action left out needed; ``EVERY_LEVEL`` for a rule that
#: cannot say (then every level is short).
_shortfalls: list[dict[int, int]] = []
EVERY_LEVEL = -1
#: A ceiling above every limit (``morello.search.solve``): nothing was short of room there.
NO_CEILING = 1 << 62


def short_of(level_idx: int, need: int) -> None:
    """Note that an action was left out because level ``level_idx`` had less room than
    ``need`` (``EVERY_LEVEL``: for want of room somewhere, unknown where).

    Every rule that leaves an action out for lack of room says so, here or through
    ``subtract_limits`` (which does): the search then knows how far up the limits its
    answer holds (``morello.search.solve``). Outside ``noting_shortfalls`` it does nothing."""
    if _shortfalls:
        log = _shortfalls[-1]
        if need < log.get(level_idx, need + 1):
            log[level_idx] = need


@contextlib.contextmanager
def noting_shortfalls() -> Iterator[dict[int, int]]:
    """The shortfalls (level index -> least room needed) ``short_of`` notes inside."""
    log: dict[int, int] = {}
    _shortfalls.append(log)
    try:
        yield log
    finally:
        _shortfalls.pop()
