"""Specs as coordinates: a discrete table key and a point in Z>=0^d.

The key holds what has no useful order: the op, whether it accumulates, whether it must be
serial (and if not, the most threads its parallel loops may use), and per operand its dtype,
level, canonical layout (physical dims and contiguity) and vector size. The point holds what
is ordered, on the tile scale:

* one coordinate per index variable of the op, on the tile scale of the size's family. A
  size is ``m * 2^k`` with ``m`` odd. Family 0 is ``m`` = 1 or 3: the coordinate is the size's
  position in 1, 2, 3, 4, 6, 8, 12, 16, ... (powers of two and three times them), so
  neighbouring tile sizes are neighbouring points and their boxes can merge. Every other odd
  ``m`` is a family of its own, held in the key, with coordinate ``k``: 7, 14, 28, 56 (tiles
  of a 7 x 2^k size policy) are neighbouring points of family 7, and a tail or an odd root
  (5, 10, 100 = 25 * 4) lands in its family like any size;
* one coordinate per memory level: ``bit_length(limit)``, i.e. 0 for no memory and
  ``log2(limit) + 1`` otherwise (limits are always powers of two).

Operand shapes are not stored: they follow from the index sizes through the op's index
notation. ``spec_to_coords`` and ``coords_to_spec`` are inverse on canonical Specs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from morello.dtypes import DTYPES
from morello.layout import Layout
from morello.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from morello.context import SynthesisContext

Key = tuple[Any, ...]
Point = tuple[int, ...]


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def size_coord(n: int) -> tuple[int, int]:
    """``(family, coordinate)`` of a positive size ``n``.

    Family 0 holds 1, 2, 3, 4, 6, 8, 12, ... in order: 1 is 0, ``2^a`` is ``2a - 1`` and
    ``3 * 2^b`` is ``2b + 2``. Any other ``n = m * 2^k`` (``m`` odd, at least 5) is ``(m, k)``.
    """
    if n <= 0:
        raise ValueError(f"a size is positive, not {n}")
    if _is_pow2(n):
        return 0, max(0, 2 * (n.bit_length() - 1) - 1)
    if n % 3 == 0 and _is_pow2(n // 3):
        return 0, 2 * (n // 3).bit_length()
    k = (n & -n).bit_length() - 1
    return n >> k, k


def size_from_coord(family: int, c: int) -> int:
    """Inverse of ``size_coord``."""
    if family:
        return family << c
    if c == 0:
        return 1
    if c % 2:
        return 1 << ((c + 1) // 2)
    return 3 << ((c - 2) // 2)


def limit_coord(n: int) -> int:
    """Coordinate of a memory limit (a power of two, or 0)."""
    return n.bit_length()


def limit_from_coord(c: int) -> int:
    """Inverse of ``limit_coord``."""
    return 0 if c == 0 else 1 << (c - 1)


def spec_to_coords(spec: Spec, ctx: SynthesisContext) -> tuple[Key, Point]:
    """The (table key, point) of a canonical Spec."""
    opdef = ctx.ruleset.ops[spec.op]
    sizes = opdef.sizes([t.shape for t in spec.operands])
    assert isinstance(sizes, dict)
    families = []
    size_point = []
    for v in opdef.index_vars:
        family, c = size_coord(sizes[v])
        families.append(family)
        size_point.append(c)
    operands = tuple(
        (t.dtype.name, t.level.name, t.layout.dims, t.layout.contig, t.vector_size or 0)
        for t in spec.operands
    )
    key = (spec.op, spec.accum, _serial_key(spec, ctx), tuple(families), operands)
    point = (*size_point, *(limit_coord(n) for n in spec.limits))
    return key, point


def _serial_key(spec: Spec, ctx: SynthesisContext) -> bool | tuple[str, int]:
    """``True`` for a serial Spec; for one that may run in parallel, the thread count its
    answers were found for (``("threads", n)``), so that answers for other counts are
    never read back."""
    return True if spec.serial else ("threads", ctx.threads)


def coords_to_spec(key: Key, point: Point, ctx: SynthesisContext) -> Spec:
    """The Spec at ``point`` of table ``key``."""
    op, accum, serial_key, families, operands = key
    serial = serial_key is True
    opdef = ctx.ruleset.ops[op]
    nvars = len(opdef.index_vars)
    sizes = {
        v: size_from_coord(family, c)
        for v, family, c in zip(opdef.index_vars, families, point[:nvars], strict=True)
    }
    limits = tuple(limit_from_coord(c) for c in point[nvars:])
    tensors = []
    for i, (dtype, level, dims, contig, vs) in enumerate(operands):
        layout = Layout(tuple(tuple(d) for d in dims), contig)
        shape = opdef.operand_shape(i, sizes)
        lv = ctx.target.level(level)
        tensors.append(TensorSpec(shape, DTYPES[dtype], lv, layout, vs or None))
    return Spec(op, tuple(tensors), accum, limits, serial)
