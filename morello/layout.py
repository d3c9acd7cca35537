"""Layouts: how logical coordinates map to buffer offsets, and what tiling does to them.

A layout is a list of physical dimensions, slowest to fastest. Each names the logical dimension
it walks and either a fixed block size (a packed dimension) or ``None`` (whatever is left of
that logical dimension). ``contig`` counts the innermost physical dimensions over which the
data is contiguous; a tile of a tensor loses contiguity above the first physical dimension in
which it is smaller than its parent.

Canonical form (used in Specs): physical dimensions of extent 1 are dropped, neighbours of the
same logical dimension merged, and a block covering its whole dimension becomes unblocked. Two
tensors with the same canonical layout are addressed alike, which is what kernels match on.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Final

import attrs

PhysDim = tuple[int, int | None]


@attrs.frozen(cache_hash=True)
class Layout:
    """A physical layout over a logical shape; see the module docstring."""

    dims: tuple[PhysDim, ...] = attrs.field(converter=tuple)
    contig: int

    def __attrs_post_init__(self) -> None:
        if not 0 <= self.contig <= len(self.dims):
            raise ValueError(f"contig {self.contig} out of range for {len(self.dims)} dims")

    # -- geometry ------------------------------------------------------------------------

    def physical_shape(self, shape: Sequence[int]) -> tuple[int, ...] | None:
        """Extents of the physical dims for a logical shape, or None if the layout can't apply."""
        return _physical_shape(self, tuple(shape))

    def _physical_shape(self, shape: tuple[int, ...]) -> tuple[int, ...] | None:
        remaining = list(shape)
        out: list[int] = [0] * len(self.dims)
        seen = set()
        for idx in range(len(self.dims) - 1, -1, -1):
            ld, block = self.dims[idx]
            if ld >= len(shape):
                return None
            seen.add(ld)
            if block is None:
                out[idx] = remaining[ld]
                remaining[ld] = 1
            elif remaining[ld] < block:
                # A tile narrower than the block lies within one block.
                out[idx] = remaining[ld]
                remaining[ld] = 1
            elif remaining[ld] % block != 0:
                return None
            else:
                out[idx] = block
                remaining[ld] //= block
        if any(r != 1 for r in remaining):
            return None
        if any(shape[d] != 1 for d in range(len(shape)) if d not in seen):
            return None
        return tuple(out)

    def applies_to(self, shape: Sequence[int]) -> bool:
        """Whether this layout can describe a tensor of ``shape``."""
        return self.physical_shape(shape) is not None

    def is_fully_contiguous(self) -> bool:
        """Whether all physical dims are contiguous."""
        return self.contig == len(self.dims)

    def is_strided(self) -> bool:
        """Whether each logical dim has one fixed stride (no packed blocks)."""
        return all(block is None for _, block in self.dims)

    def offset_terms(
        self, shape: Sequence[int], coords: Sequence[object]
    ) -> list[tuple[object, int, int | None, int]]:
        """Terms of the buffer offset of logical ``coords`` in a buffer of logical ``shape``.

        Each term is ``(coord, divisor, modulus or None, stride)`` and contributes
        ``((coord // divisor) % modulus) * stride``. Callers render these symbolically.
        """
        phys = self.physical_shape(shape)
        assert phys is not None, (self, shape)
        terms: list[tuple[object, int, int | None, int]] = []
        stride = 1
        inner: dict[int, int] = {}
        for idx in range(len(self.dims) - 1, -1, -1):
            ld, _ = self.dims[idx]
            divisor = inner.get(ld, 1)
            outermost = _is_outermost_of(self.dims, idx)
            modulus = None if outermost else phys[idx]
            if phys[idx] != 1:
                terms.append((coords[ld], divisor, modulus, stride))
            inner[ld] = divisor * phys[idx]
            stride *= phys[idx]
        return terms

    def offset(self, shape: Sequence[int], coords: Sequence[int]) -> int:
        """Concrete buffer offset of integer ``coords``."""
        total = 0
        for coord, div, mod, stride in self.offset_terms(shape, coords):
            v = int(coord) // div  # type: ignore[call-overload]
            if mod is not None:
                v %= mod
            total += v * stride
        return total

    def runs(self, shape: Sequence[int]) -> int:
        """How many separate contiguous runs of memory a tensor of ``shape`` occupies."""
        phys = self.physical_shape(shape)
        assert phys is not None
        return math.prod(phys[: len(phys) - self.contig])

    def cache_lines(self, shape: Sequence[int], elem_bytes: int, line_bytes: int) -> int:
        """Cache lines touched by a tensor of ``shape`` in this layout (an estimate)."""
        phys = self.physical_shape(shape)
        assert phys is not None
        split = len(phys) - self.contig
        outer = math.prod(phys[:split])
        inner_bytes = math.prod(phys[split:]) * elem_bytes
        return outer * -(-inner_bytes // line_bytes)

    # -- tiling and canonical form ------------------------------------------------------

    def tile(self, parent: Sequence[int], tile: Sequence[int]) -> Layout | None:
        """The canonical layout of a ``tile``-shaped region of a ``parent``-shaped tensor."""
        return _tile(self, tuple(parent), tuple(tile))

    def _tile(self, parent: tuple[int, ...], tile: tuple[int, ...]) -> Layout | None:
        pphys = self.physical_shape(parent)
        tphys = self.physical_shape(tile)
        if pphys is None or tphys is None:
            return None
        for ld, block in self.dims:
            # Tiles narrower than a block lie within one block only if their extent divides
            # it (tiles start at multiples of their extent): a 12-wide tile of 16-wide
            # panels at column 12 spans two panels, which no one layout describes. A loop's
            # tail, which starts where the whole tiles end, is refused too when it does not
            # divide the block, though it would fit: refusing is safe, describing it wrong
            # was not (such a program computed wrong answers).
            if block is not None and tile[ld] < block <= parent[ld] and block % tile[ld]:
                return None
        common = 0
        for a, b in zip(reversed(pphys), reversed(tphys), strict=True):
            if a != b:
                break
            common += 1
        contig = min(self.contig, common + 1)
        return Layout(self.dims, contig)._canonical(tile, tphys)

    def canonical(self, shape: Sequence[int]) -> Layout | None:
        """This layout in canonical form for ``shape``, or None if it doesn't apply."""
        phys = self.physical_shape(shape)
        if phys is None:
            return None
        return self._canonical(shape, phys)

    def _canonical(self, shape: Sequence[int], phys: Sequence[int]) -> Layout:
        dims = list(self.dims)
        contig = self.contig
        # Drop physical dims of extent 1.
        kept: list[PhysDim] = []
        kept_phys: list[int] = []
        for idx, (d, p) in enumerate(zip(dims, phys, strict=True)):
            if p == 1:
                if idx >= len(dims) - contig:
                    contig -= 1
                continue
            kept.append(d)
            kept_phys.append(p)
        # A block that covers the whole logical extent is no block at all.
        for idx, (ld, block) in enumerate(kept):
            if block is not None and kept_phys[idx] >= shape[ld]:
                kept[idx] = (ld, None)
        # Merge neighbours of the same logical dim inside the contiguous suffix.
        merged: list[PhysDim] = []
        merged_phys: list[int] = []
        n = len(kept)
        for idx, (ld, block) in enumerate(kept):
            in_contig = idx >= n - contig
            if merged and merged[-1][0] == ld and in_contig and (idx - 1) >= n - contig:
                _prev_ld, prev_block = merged[-1]
                new_block = None if prev_block is None else prev_block * kept_phys[idx]
                if block is None:
                    new_block = None
                merged[-1] = (ld, new_block)
                merged_phys[-1] *= kept_phys[idx]
                contig -= 1
                continue
            merged.append((ld, block))
            merged_phys.append(kept_phys[idx])
        # An unblocked dim that is the only entry of its logical dim needs no block size.
        return Layout(tuple(merged), max(0, min(contig, len(merged))))

    def describe(self, rank: int) -> str:
        """Human-readable name: a family name where one fits, else the physical dims."""
        for name, ctor in LAYOUT_FAMILIES.items():
            cand = ctor(rank)
            if cand.dims == self.dims:
                suffix = "" if self.is_fully_contiguous() else f" c{self.contig}"
                return name + suffix
        parts = [str(ld) if b is None else f"{ld}p{b}" for ld, b in self.dims]
        return "[" + ",".join(parts) + f"] c{self.contig}"


# Layouts are immutable, so these pure functions are memoized; the search calls them for
# every tile of every operand.
@functools.lru_cache(maxsize=1 << 16)
def _physical_shape(layout: Layout, shape: tuple[int, ...]) -> tuple[int, ...] | None:
    return layout._physical_shape(shape)


@functools.lru_cache(maxsize=1 << 16)
def _tile(layout: Layout, parent: tuple[int, ...], tile: tuple[int, ...]) -> Layout | None:
    return layout._tile(parent, tile)


def _is_outermost_of(dims: Sequence[PhysDim], idx: int) -> bool:
    ld = dims[idx][0]
    return all(d[0] != ld for d in dims[:idx])


def row_major(rank: int) -> Layout:
    """Row-major (C order) layout of the given rank, fully contiguous."""
    return Layout(tuple((d, None) for d in range(rank)), rank)


def col_major(rank: int) -> Layout:
    """Column-major (Fortran order) layout of the given rank, fully contiguous."""
    return Layout(tuple((d, None) for d in reversed(range(rank))), rank)


def packed_cols(rank: int, block: int) -> Layout:
    """Panels of ``block`` consecutive last-dim indices, one after another.

    Within a panel the elements are row-major: for a [K, N] matrix with ``block = 16`` this
    is N/16 panels, each a K x 16 row-major block (B as GEMM micro-kernels like to read it).
    """
    dims = [(rank - 1, None), *((d, None) for d in range(rank - 1)), (rank - 1, block)]
    return Layout(tuple(dims), len(dims))


def packed_rows(rank: int, block: int) -> Layout:
    """Panels of ``block`` consecutive first-dim indices; column-major within a panel.

    For an [M, K] matrix with ``block = 4`` this is M/4 panels, each storing, for every k,
    the 4 values of its rows next to each other (A as GEMM micro-kernels like to read it).
    """
    dims = [(0, None), *((d, None) for d in range(1, rank)), (0, block)]
    return Layout(tuple(dims), len(dims))


LAYOUT_FAMILIES: Final[dict[str, Callable[[int], Layout]]] = {
    "row_major": row_major,
    "col_major": col_major,
}

PARAMETRIC_FAMILIES: Final[dict[str, Callable[[int, int], Layout]]] = {
    "packed_cols": packed_cols,
    "packed_rows": packed_rows,
}

_PARAMETRIC = re.compile(r"^([a-z_]+)\((\d+)\)$")


def layout_by_name(name: str, rank: int) -> Layout | None:
    """The layout family ``name`` at ``rank`` (``row_major``, ``packed_cols(16)``, ...).

    Returns None if no family has that name.
    """
    ctor = LAYOUT_FAMILIES.get(name)
    if ctor is not None:
        return ctor(rank)
    packed = packed_family(name)
    if packed is not None and packed[1] > 1 and rank >= 2:
        return PARAMETRIC_FAMILIES[packed[0]](rank, packed[1])
    return None


def packed_family(name: str) -> tuple[str, int] | None:
    """``(family, block)`` if ``name`` is a packed family with its block (``packed_cols(16)``),
    whatever the block and rank it may apply to; None otherwise."""
    m = _PARAMETRIC.match(name)
    if m and m.group(1) in PARAMETRIC_FAMILIES:
        return m.group(1), int(m.group(2))
    return None


@functools.lru_cache(maxsize=1 << 16)
def family_name(layout: Layout, shape: Sequence[int]) -> str | None:
    """The name of a layout family that gives ``layout`` on ``shape`` (canonical forms), if any.

    Memoized: decompositions ask it of every Spec they see (``shape`` must be hashable).

    ``packed_cols(16)`` and the like are tried with the block sizes ``layout`` uses.
    """
    candidates = [ctor(len(shape)) for ctor in LAYOUT_FAMILIES.values()]
    names = list(LAYOUT_FAMILIES)
    for block in sorted({b for _, b in layout.dims if b is not None}):
        for name, pctor in PARAMETRIC_FAMILIES.items():
            if len(shape) >= 2:
                candidates.append(pctor(len(shape), block))
                names.append(f"{name}({block})")
    for name, cand in zip(names, candidates, strict=True):
        if cand.canonical(shape) == layout:
            return name
    return None


def offset_formula(layout: Layout, shape: Sequence[int], coords: Sequence[str]) -> str:
    """The buffer offset of element ``coords`` as C-like text, e.g. ``(j / 64) * 4096 + i``."""
    parts = []
    for coord, div, mod, stride in reversed(layout.offset_terms(shape, list(coords))):
        term = str(coord) if div == 1 else f"{coord} / {div}"
        if mod is not None:
            term = f"({term}) % {mod}" if div != 1 else f"{term} % {mod}"
        elif div != 1:
            term = f"({term})"
        parts.append(term if stride == 1 else f"{term} * {stride}")
    return " + ".join(parts) or "0"
