"""Which BLAS routine computes a Spec, read from the op's index notation and the layouts.

A benchmark's peer must run the same computation on the same buffers. An op is a matrix
product when its index notation says so, whatever its name, operand order or index letters:
two rank-2 inputs, a rank-2 output, and a body that is one sum over one index of the product
of the two inputs, each input indexed by that reduction index and one output index. The
layouts then give each buffer's strides, and with them the transposes and leading dimensions
of a row-major ``gemm`` call (or ``gemv`` where one output extent is 1). A product of a
matrix and a vector (one rank-1 input, a rank-1 output) is a ``gemv`` call alone, and a product
of two vectors summed into a scalar (a rank-0 output) a ``dot`` call. Knows no op by name.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from morello.layout import Layout, row_major
from morello.rules.index_notation import Access, OpDef, summed_product
from morello.spec import Spec, TensorSpec

#: CBLAS enumerators (the values every CBLAS header uses).
ROW_MAJOR = 101
NO_TRANS = 111
TRANS = 112


@attrs.frozen
class Operand:
    """A buffer handed to BLAS: which operand of the Spec (read as ``blas_layout`` says)."""

    index: int


@attrs.frozen
class GemmCall:
    """``C = op(A) op(B)`` in row-major CBLAS terms: A is M x K, B is K x N, C is M x N."""

    a: Operand
    b: Operand
    c: Operand
    trans_a: bool
    trans_b: bool
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int

    routine = "gemm"


@attrs.frozen
class GemvCall:
    """``y = op(A) x`` in row-major CBLAS terms, A stored as ``rows x cols`` with ``lda``."""

    a: Operand
    x: Operand
    y: Operand
    trans: bool
    rows: int
    cols: int
    lda: int
    incx: int
    incy: int

    routine = "gemv"


@attrs.frozen
class DotCall:
    """``out = x . y``: the dot product of two vectors of ``n`` elements, a scalar."""

    x: Operand
    y: Operand
    out: Operand
    n: int
    incx: int
    incy: int

    routine = "dot"


BlasCall = GemmCall | GemvCall | DotCall


def _sum_of_a_product(opdef: OpDef, out_rank: int) -> tuple[str, Access, Access] | None:
    """``(k, x, y)`` if ``opdef`` has two inputs, an output of ``out_rank`` and the body
    ``sum(k) x * y`` over one index ``k``; None otherwise."""
    if len(opdef.inputs) != 2 or len(opdef.output.indices) != out_rank:
        return None
    product = summed_product(opdef.expr)
    if product is None or len(product[0].indices) != 1:
        return None
    reduction, lhs, rhs = product
    (k,) = reduction.indices
    return k, lhs, rhs


def matmul_structure(opdef: OpDef) -> tuple[str, str, str] | None:
    """``(i, j, k)`` if ``opdef`` is a matrix product ``out[i|j, j|i] = sum(k) x * y``.

    ``i`` is the free index of the first input, ``j`` that of the second; None for any op
    that is not a plain product of two matrices summed over one shared index.
    """
    found = _sum_of_a_product(opdef, 2)
    if found is None:
        return None
    k, lhs, rhs = found
    declared = {acc.tensor: acc for acc in opdef.inputs}
    factors = [lhs, rhs]
    if sorted(f.tensor for f in factors) != sorted(declared) or len(declared) != 2:
        return None
    free: list[str] = []
    for acc in opdef.inputs:
        used = next(f for f in factors if f.tensor == acc.tensor)
        if used.indices != acc.indices or len(acc.indices) != 2 or acc.indices.count(k) != 1:
            return None
        (other,) = [ix for ix in acc.indices if ix != k]
        free.append(other)
    i, j = free
    if i == j or set(opdef.output.indices) != {i, j} or k in opdef.output.indices:
        return None
    return i, j, k


def matvec_structure(opdef: OpDef) -> tuple[int, int, str, str] | None:
    """``(matrix, vector, i, k)`` if ``opdef`` is ``out[i] = sum(k) M[i|k, k|i] * v[k]``.

    ``matrix`` and ``vector`` are the positions of the rank-2 and the rank-1 input (a vector
    times a matrix is the same product, its matrix read transposed); None for any other op.
    """
    found = _sum_of_a_product(opdef, 1)
    if found is None:
        return None
    k, lhs, rhs = found
    ranks = [len(acc.indices) for acc in opdef.inputs]
    if sorted(ranks) != [1, 2]:
        return None
    matrix, vector = ranks.index(2), ranks.index(1)
    mat, vec = opdef.inputs[matrix], opdef.inputs[vector]
    used = {f.tensor: f.indices for f in (lhs, rhs)}
    if used.get(mat.tensor) != mat.indices or used.get(vec.tensor) != vec.indices:
        return None
    (i,) = opdef.output.indices
    if vec.indices != (k,) or set(mat.indices) != {i, k} or i == k:
        return None
    return matrix, vector, i, k


def dot_structure(opdef: OpDef) -> str | None:
    """``k`` if ``opdef`` is ``out[] = sum(k) x[k] * y[k]`` (a dot product); None otherwise."""
    found = _sum_of_a_product(opdef, 0)
    if found is None:
        return None
    k, lhs, rhs = found
    declared = sorted(acc.tensor for acc in opdef.inputs)
    if sorted((lhs.tensor, rhs.tensor)) != declared or len(set(declared)) != 2:
        return None
    if any(acc.indices != (k,) for acc in (*opdef.inputs, lhs, rhs)):
        return None
    return k


def strides(ts: TensorSpec) -> tuple[int | None, ...] | None:
    """Element stride of each dimension (None for extent 1), or None if not strided."""
    if not ts.layout.is_strided():
        return None
    out: list[int | None] = []
    for d, n in enumerate(ts.shape):
        if n == 1:
            out.append(None)
            continue
        unit = [0] * len(ts.shape)
        unit[d] = 1
        out.append(ts.layout.offset(ts.shape, unit))
    return tuple(out)


def _row_major_view(
    st: Sequence[int | None], rows_dim: int, cols_dim: int, rows: int, cols: int
) -> tuple[bool, int] | None:
    """``(transposed, ld)`` reading a matrix with these strides as row-major rows x cols."""
    r, c = st[rows_dim], st[cols_dim]
    if c in (1, None) and (r is None or r >= cols):
        return False, r if r is not None else max(1, cols)
    if r in (1, None) and (c is None or c >= rows):
        return True, c if c is not None else max(1, rows)
    return None


def blas_calls(opdef: OpDef, spec: Spec) -> list[BlasCall]:
    """The BLAS calls that compute ``spec`` (gemm, and gemv where an output extent is 1).

    Empty when the op is not a matrix product. An operand whose layout is not strided is
    read as a row-major copy of its values (``blas_layout``); the caller passes that copy.
    """
    if spec.accum:
        return []
    found = matmul_structure(opdef)
    if found is None:
        return _matvec_calls(opdef, spec) or _dot_calls(opdef, spec)
    i, _, k = found
    sizes = opdef.sizes([t.shape for t in spec.operands])
    assert isinstance(sizes, dict)
    views = [_view(ts) for ts in spec.operands]
    out = len(spec.operands) - 1
    out_idx = opdef.output.indices
    # Orient the product so that the output is a row-major M x N matrix (CBLAS cannot
    # write a transposed C): its row index is M's, its column index N's.
    for row_var, col_var in ((out_idx[0], out_idx[1]), (out_idx[1], out_idx[0])):
        cview = _row_major_view(
            views[out], out_idx.index(row_var), out_idx.index(col_var), sizes[row_var],
            sizes[col_var],
        )  # fmt: skip
        if cview is not None and not cview[0]:
            break
    else:  # pragma: no cover - a strided rank-2 output always has a row-major reading
        return []
    ldc = cview[1]
    left = 0 if row_var == i else 1
    right = 1 - left
    m, n, kk = sizes[row_var], sizes[col_var], sizes[k]
    acc_l, acc_r = opdef.inputs[left].indices, opdef.inputs[right].indices
    av = _row_major_view(views[left], acc_l.index(row_var), acc_l.index(k), m, kk)
    bv = _row_major_view(views[right], acc_r.index(k), acc_r.index(col_var), kk, n)
    assert av is not None and bv is not None
    a, b, c = (Operand(x) for x in (left, right, out))
    calls: list[BlasCall] = [GemmCall(a, b, c, av[0], bv[0], m, n, kk, av[1], bv[1], ldc)]
    if m == 1:
        # y[j] = sum_k x[k] B[k, j]: B read as stored (K x N, or N x K when transposed).
        incx = _step(views[left][acc_l.index(k)])
        incy = _step(views[out][out_idx.index(col_var)])
        rows, cols = (n, kk) if bv[0] else (kk, n)
        calls.append(GemvCall(b, a, c, not bv[0], rows, cols, bv[1], incx, incy))
    elif n == 1:
        incx = _step(views[right][acc_r.index(k)])
        incy = _step(views[out][out_idx.index(row_var)])
        rows, cols = (kk, m) if av[0] else (m, kk)
        calls.append(GemvCall(a, b, c, av[0], rows, cols, av[1], incx, incy))
    return calls


def _matvec_calls(opdef: OpDef, spec: Spec) -> list[BlasCall]:
    """The ``gemv`` call of a matrix-vector product (``matvec_structure``), or none."""
    found = matvec_structure(opdef)
    if found is None:
        return []
    matrix, vector, i, k = found
    sizes = opdef.sizes([t.shape for t in spec.operands])
    assert isinstance(sizes, dict)
    out = len(spec.operands) - 1
    acc = opdef.inputs[matrix].indices
    view = _row_major_view(_view(spec.operands[matrix]), acc.index(i), acc.index(k), sizes[i],
                           sizes[k])  # fmt: skip
    assert view is not None
    trans, lda = view
    # Stored as i x k: y = A x; stored as k x i (a vector times a matrix): y = A^T x.
    rows, cols = (sizes[k], sizes[i]) if trans else (sizes[i], sizes[k])
    incx = _step(_view(spec.operands[vector])[0])
    incy = _step(_view(spec.operands[out])[0])
    return [GemvCall(Operand(matrix), Operand(vector), Operand(out), trans, rows, cols, lda,
                     incx, incy)]  # fmt: skip


def _dot_calls(opdef: OpDef, spec: Spec) -> list[BlasCall]:
    """The ``dot`` call of a dot product of two vectors (``dot_structure``), or none."""
    if dot_structure(opdef) is None:
        return []
    x, y = spec.operands[0], spec.operands[1]
    incx, incy = _step(_view(x)[0]), _step(_view(y)[0])
    return [DotCall(Operand(0), Operand(1), Operand(2), x.shape[0], incx, incy)]


def blas_layout(ts: TensorSpec) -> Layout:
    """The layout BLAS reads ``ts`` in: its own if strided, else that of a row-major copy."""
    if strides(ts) is not None:
        return ts.layout
    layout = row_major(len(ts.shape)).canonical(ts.shape)
    assert layout is not None
    return layout


def _view(ts: TensorSpec) -> tuple[int | None, ...]:
    """Strides of ``ts`` as BLAS reads it (see ``blas_layout``)."""
    st = strides(attrs.evolve(ts, layout=blas_layout(ts)))
    assert st is not None
    return st


def _step(stride: int | None) -> int:
    return 1 if stride is None else stride
