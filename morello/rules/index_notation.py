"""Ops in index notation, and everything generic derived from them.

An op such as ``op matmul(a[m, k], b[k, n]) -> c[m, n] = sum(k) a[m, k] * b[k, n]`` yields:
its index variables (output ones first, then reductions), operand shapes from index sizes,
which input region an output tile needs (an input dim follows its index), a NumPy reference
and a FLOP count. The accumulating form (``c += op(...)``) adds the expression to the output
instead of overwriting it. Knows no op by name.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    import numpy as np

from morello.errors import SourceLocation

# ---- expressions ------------------------------------------------------------------------


@attrs.frozen
class Access:
    """``a[m, k]``."""

    tensor: str
    indices: tuple[str, ...] = attrs.field(converter=tuple)


@attrs.frozen
class Const:
    """A numeric literal."""

    value: float


@attrs.frozen
class BinOp:
    """``lhs op rhs`` for op in ``+ - * /``."""

    op: str
    lhs: Expr
    rhs: Expr


@attrs.frozen
class Func:
    """``max(x, 0)`` and friends (the functions NumPy provides elementwise)."""

    name: str
    args: tuple[Expr, ...] = attrs.field(converter=tuple)


@attrs.frozen
class Reduce:
    """``sum(k) body`` or ``max(k) body``: ``body`` combined over ``indices`` by ``combiner``."""

    indices: tuple[str, ...] = attrs.field(converter=tuple)
    body: Expr
    combiner: str = "sum"


Expr = Access | Const | BinOp | Func | Reduce

#: The functions an op expression may call, with their number of arguments.
FUNC_ARITIES: Final = {"max": 2, "min": 2, "exp": 1}
#: The relative error, in units of the unit roundoff u, that an implementation of each
#: function may add to its result, for the tolerance of ``--check`` (``error_bound``): a
#: kernel of ``exp`` must stay within 1.0e-7 relative (1.7 u; the vector kernels state
#: their bound, measured over every f32, in their rule files; C's expf is within 1 ulp).
#: The error its argument carries is propagated separately (amplified by the result).
FUNC_ROUNDINGS = {"max": 0, "min": 0, "exp": 2}


@functools.cache
def _numpy_ops() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The NumPy reference's functions (``FUNC_ARITIES``), reductions (over axes, and two
    values into one) and binary operators; imported when a reference is first computed, not
    by synthesis."""
    import numpy as np

    funcs = {"max": np.maximum, "min": np.minimum, "exp": np.exp}
    assert {n: f.nin for n, f in funcs.items()} == FUNC_ARITIES
    reducers = {"sum": (np.sum, np.add), "max": (np.max, np.maximum)}
    binops = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}
    return funcs, reducers, binops


def _accesses(e: Expr) -> list[Access]:
    if isinstance(e, Access):
        return [e]
    if isinstance(e, BinOp):
        return _accesses(e.lhs) + _accesses(e.rhs)
    if isinstance(e, Func):
        return [a for arg in e.args for a in _accesses(arg)]
    if isinstance(e, Reduce):
        return _accesses(e.body)
    return []


def _reduces(e: Expr) -> list[Reduce]:
    if isinstance(e, Reduce):
        return [e, *_reduces(e.body)]
    if isinstance(e, BinOp):
        return _reduces(e.lhs) + _reduces(e.rhs)
    if isinstance(e, Func):
        return [r for arg in e.args for r in _reduces(arg)]
    return []


def summed_product(e: Expr) -> tuple[Reduce, Access, Access] | None:
    """``(reduction, x, y)`` if ``e`` is ``sum(...) x[...] * y[...]``, a sum of the product of
    two accesses (a matrix product, a dot product); None otherwise."""
    if not isinstance(e, Reduce) or e.combiner != "sum":
        return None
    body = e.body
    if (
        isinstance(body, BinOp)
        and body.op == "*"
        and isinstance(body.lhs, Access)
        and isinstance(body.rhs, Access)
    ):
        return e, body.lhs, body.rhs
    return None


def _flops_per_point(e: Expr) -> int:
    if isinstance(e, BinOp):
        return 1 + _flops_per_point(e.lhs) + _flops_per_point(e.rhs)
    if isinstance(e, Func):
        return 1 + sum(_flops_per_point(a) for a in e.args)
    if isinstance(e, Reduce):
        return 1 + _flops_per_point(e.body)
    return 0


# ---- op definitions ---------------------------------------------------------------------


def overload_key(op: OpDef) -> str:
    """The name an overload of ``op.name`` goes by: the name and its operands' ranks
    (inputs then output), e.g. ``add/2.1.2`` for ``add(a[i, j], b[j]) -> c[i, j]``."""
    return f"{op.name}/" + ".".join(str(len(a.indices)) for a in op.operands)


@functools.lru_cache(maxsize=1 << 12)
def base_name(key: str) -> str:
    """The declared name of the op called ``key`` (an overload's key without its ranks)."""
    return key.split("/", 1)[0]


class IndexedOperands:
    """What follows from operands indexed by variables (``operands``: inputs then output):
    ranks, sizes bound by shapes, shapes from sizes, where a variable runs. Shared by ops
    in index notation and graphs of them (``graph.py``)."""

    operands: tuple[Access, ...]
    inputs: tuple[Access, ...]
    output: Access

    @functools.cached_property
    def index_vars(self) -> tuple[str, ...]:
        """Every index variable: the output's first, then others in order of appearance."""
        seen: list[str] = list(self.output.indices)
        for acc in self.inputs:
            for ix in acc.indices:
                if ix not in seen:
                    seen.append(ix)
        return tuple(seen)

    def rank(self, operand: int) -> int:
        """Rank of operand number ``operand``."""
        return len(self.operands[operand].indices)

    def sizes(self, shapes: Sequence[Sequence[int]]) -> dict[str, int] | tuple[str, int, int]:
        """Index sizes bound by operand shapes, or the first conflict ``(var, had, got)``."""
        sizes: dict[str, int] = {}
        for acc, shape in zip(self.operands, shapes, strict=True):
            for ix, n in zip(acc.indices, shape, strict=True):
                if ix in sizes and sizes[ix] != n:
                    return (ix, sizes[ix], n)
                sizes[ix] = n
        return sizes

    def operand_shape(self, operand: int, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """Shape of operand number ``operand`` given index sizes."""
        return tuple(sizes[ix] for ix in self.operands[operand].indices)

    def operands_using(self, var: str) -> tuple[tuple[int, int], ...]:
        """(operand, dim) pairs that an index variable runs along."""
        return self._uses.get(var, ())

    @functools.cached_property
    def _uses(self) -> dict[str, tuple[tuple[int, int], ...]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for i, acc in enumerate(self.operands):
            for d, ix in enumerate(acc.indices):
                out.setdefault(ix, []).append((i, d))
        return {v: tuple(u) for v, u in out.items()}


@attrs.frozen(slots=False)
class OpDef(IndexedOperands):
    """An op declared in a rule file; see the module docstring."""

    name: str
    inputs: tuple[Access, ...] = attrs.field(converter=tuple)
    output: Access
    expr: Expr
    loc: SourceLocation | None = attrs.field(default=None, eq=False)

    @property
    def operands(self) -> tuple[Access, ...]:
        """Inputs then output, the operand order of Specs."""
        return (*self.inputs, self.output)

    @property
    def operand_names(self) -> tuple[str, ...]:
        """Names of the operands as declared."""
        return tuple(a.tensor for a in self.operands)

    @property
    def reduction_vars(self) -> tuple[str, ...]:
        """Index variables that do not index the output."""
        return tuple(v for v in self.index_vars if v not in self.output.indices)

    @property
    def is_identity(self) -> bool:
        """Whether the op copies its single input unchanged (a move)."""
        return (
            len(self.inputs) == 1
            and isinstance(self.expr, Access)
            and self.expr == Access(self.inputs[0].tensor, self.output.indices)
            and self.inputs[0].indices == self.output.indices
        )

    @property
    def combiner(self) -> str | None:
        """How the accumulating form ``c += op(...)`` combines into ``c``: a reduction at the
        top of the expression by its own combiner (``sum`` adds, ``max`` keeps the larger),
        an op with no reduction by adding. None for an op with a reduction inside its
        expression (``x / sum(k) x``): it has no accumulating form, so it may neither
        accumulate nor be split along that reduction."""
        if isinstance(self.expr, Reduce):
            return None if _reduces(self.expr.body) else self.expr.combiner
        return None if self.reduction_vars or _reduces(self.expr) else "sum"

    @functools.cached_property
    def tileable_vars(self) -> tuple[str, ...]:
        """Output indices ``tile_out`` may loop over: those every use of every operand reads
        at the dim its declaration puts them (not ``j`` of ``x[i, j] / sum(k) x[i, k]``,
        whose inner reduction reads the whole row)."""
        declared = {a.tensor: a.indices for a in self.inputs}
        out = []
        for v in self.output.indices:
            ok = True
            for use in _accesses(self.expr):
                decl = declared[use.tensor]
                if any((u == v) != (d == v) for u, d in zip(use.indices, decl, strict=True)):
                    ok = False
            if ok:
                out.append(v)
        return tuple(out)

    def flops(self, sizes: Mapping[str, int]) -> int:
        """Arithmetic operations of one application over the full index space."""
        points = math.prod(sizes[v] for v in self.index_vars)
        return _flops_per_point(self.expr) * points

    # -- reference semantics ---------------------------------------------------------------

    def reference(
        self, inputs: Sequence[np.ndarray], out: np.ndarray | None = None, accum: bool = False
    ) -> np.ndarray:
        """Evaluate the op with NumPy (float64 accumulation for float dtypes).

        A product summed over indices becomes ``np.einsum``; any other expression is
        evaluated by broadcasting over all index variables.
        """
        import numpy as np

        env = dict(zip((a.tensor for a in self.inputs), inputs, strict=True))
        shape = tuple(np.shape(out)) if out is not None else None
        if shape is None:
            sizes: dict[str, int] = {}
            for acc, x in zip(self.inputs, inputs, strict=True):
                sizes.update(zip(acc.indices, np.shape(x), strict=True))
            shape = tuple(sizes.get(ix, 1) for ix in self.output.indices)
        value = self._einsum(env)
        if value is None:
            value = self._broadcast(env, shape)
        result = np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
        if accum:
            assert out is not None and self.combiner is not None
            _, combine = _numpy_ops()[1][self.combiner]
            result = combine(out.astype(np.float64), result)
        return np.array(result)

    def _einsum(self, env: Mapping[str, np.ndarray]) -> np.ndarray | None:
        import numpy as np

        if isinstance(self.expr, Reduce) and self.expr.combiner != "sum":
            return None
        body = self.expr.body if isinstance(self.expr, Reduce) else self.expr
        factors: list[Access] = []

        def collect(e: Expr) -> bool:
            if isinstance(e, Access):
                factors.append(e)
                return True
            if isinstance(e, BinOp) and e.op == "*":
                return collect(e.lhs) and collect(e.rhs)
            return False

        if not collect(body) or not factors:
            return None
        letters = {v: chr(ord("a") + i) for i, v in enumerate(self.index_vars)}
        subs = ",".join("".join(letters[ix] for ix in f.indices) for f in factors)
        out = "".join(letters[ix] for ix in self.output.indices)
        arrays = [np.asarray(env[f.tensor], dtype=np.float64) for f in factors]
        return np.einsum(f"{subs}->{out}", *arrays)

    def _broadcast(self, env: Mapping[str, np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        import numpy as np

        funcs, reducers, binops = _numpy_ops()

        names = list(self.index_vars)
        for r in _reduces(self.expr):
            names.extend(v for v in r.indices if v not in names)
        axes = {v: i for i, v in enumerate(names)}
        nd = len(axes)

        def ev(e: Expr) -> np.ndarray:
            if isinstance(e, Const):
                return np.asarray(e.value, dtype=np.float64)
            if isinstance(e, Access):
                arr = np.asarray(env[e.tensor], dtype=np.float64)
                order = [axes[ix] for ix in e.indices]
                arr = np.transpose(arr, np.argsort(order)) if order else arr
                full = [1] * nd
                for ix, n in zip(e.indices, np.shape(env[e.tensor]), strict=True):
                    full[axes[ix]] = n
                return arr.reshape(full)
            if isinstance(e, BinOp):
                lhs, rhs = ev(e.lhs), ev(e.rhs)
                return binops[e.op](lhs, rhs)
            if isinstance(e, Func):
                return funcs[e.name](*(ev(a) for a in e.args))
            assert isinstance(e, Reduce)
            reduce, _ = reducers[e.combiner]
            return reduce(ev(e.body), axis=tuple(axes[ix] for ix in e.indices), keepdims=True)

        with np.errstate(all="ignore"):  # inf and NaN are results too (exp(1000), 1 / 0)
            value = np.asarray(ev(self.expr))
        return self._to_output(value, axes, shape)

    def _to_output(
        self, value: np.ndarray, axes: Mapping[str, int], shape: tuple[int, ...]
    ) -> np.ndarray:
        import numpy as np

        nd = len(axes)
        value = value.reshape(value.shape + (1,) * (nd - value.ndim))
        # Reduced axes have extent 1 now; move the output's axes first and drop the rest.
        keep = [axes[ix] for ix in self.output.indices]
        value = np.transpose(value, keep + [i for i in range(nd) if i not in keep])
        value = value.reshape(value.shape[: len(keep)])
        return np.broadcast_to(value, shape)

    # -- error bounds ----------------------------------------------------------------------

    def error_bound(
        self,
        inputs: Sequence[np.ndarray],
        errors: Sequence[np.ndarray],
        shape: tuple[int, ...],
        u: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The op's value on ``inputs`` (float64) and a first-order bound on the error of any
        implementation rounding to unit roundoff ``u``, when each input is off by up to
        ``errors`` (elementwise).

        Propagated through the expression: a sum or difference adds its operands' errors, a
        product weighs each by the other's magnitude, a quotient divides by the divisor's, a
        function scales its argument's error by its derivative's bound (``exp``: its value)
        and adds ``FUNC_ROUNDINGS``; every operation rounds once more (u times its value).
        A reduction of n values adds their errors and the classic n u sum of magnitudes of
        recursive summation (a maximum is exact). A sum of products goes through einsum.
        """
        import numpy as np

        funcs, _, binops = _numpy_ops()
        names = list(self.index_vars)
        for r in _reduces(self.expr):
            names.extend(v for v in r.indices if v not in names)
        axes = {v: i for i, v in enumerate(names)}
        env = {
            a.tensor: (np.asarray(x, dtype=np.float64), np.asarray(e, dtype=np.float64))
            for a, x, e in zip(self.inputs, inputs, errors, strict=True)
        }
        fast = self._einsum_error(env, u)
        if fast is not None:
            value, err = fast
            return np.broadcast_to(value, shape).copy(), np.broadcast_to(err, shape).copy()
        nd = len(axes)

        def ev(e: Expr) -> tuple[np.ndarray, np.ndarray]:
            if isinstance(e, Const):
                return np.asarray(e.value, dtype=np.float64), np.asarray(0.0)
            if isinstance(e, Access):
                out = []
                for arr in env[e.tensor]:
                    order = [axes[ix] for ix in e.indices]
                    t = np.transpose(arr, np.argsort(order)) if order else arr
                    full = [1] * nd
                    for ix, n in zip(e.indices, np.shape(arr), strict=True):
                        full[axes[ix]] = n
                    out.append(t.reshape(full))
                return out[0], out[1]
            if isinstance(e, BinOp):
                (a, ea), (b, eb) = ev(e.lhs), ev(e.rhs)
                with np.errstate(all="ignore"):
                    v = binops[e.op](a, b)
                    if e.op in "+-":
                        err = ea + eb
                    elif e.op == "*":
                        err = np.abs(a) * eb + np.abs(b) * ea
                    else:
                        err = (ea + np.abs(v) * eb) / np.abs(b)
                return v, err + u * np.abs(v)
            if isinstance(e, Func):
                args = [ev(x) for x in e.args]
                with np.errstate(all="ignore"):
                    v = funcs[e.name](*(a for a, _ in args))
                    if e.name == "exp":
                        err = np.abs(v) * args[0][1]
                    else:  # max, min: 1-Lipschitz in each argument
                        err = functools.reduce(np.maximum, [ea for _, ea in args])
                return v, err + FUNC_ROUNDINGS[e.name] * u * np.abs(v)
            assert isinstance(e, Reduce)
            body, eb = ev(e.body)
            red_axes = tuple(axes[ix] for ix in e.indices)
            body, eb = np.broadcast_arrays(body, eb)
            if e.combiner == "max":
                return np.max(body, axis=red_axes, keepdims=True), np.max(
                    eb, axis=red_axes, keepdims=True
                )
            n = math.prod(body.shape[a] for a in red_axes)
            v = np.sum(body, axis=red_axes, keepdims=True)
            err = np.sum(eb, axis=red_axes, keepdims=True)
            return v, err + n * u * np.sum(np.abs(body), axis=red_axes, keepdims=True)

        value, err = ev(self.expr)
        value, err = np.broadcast_arrays(np.asarray(value), np.asarray(err))
        value = self._to_output(value, axes, shape)
        err = self._to_output(err, axes, shape)
        return np.array(value), np.array(err)

    def _einsum_error(
        self, env: Mapping[str, tuple[np.ndarray, np.ndarray]], u: float
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``error_bound`` of a sum of a product of two accesses (a matrix product) by
        einsum, without materializing every product."""
        import numpy as np

        product = summed_product(self.expr)
        if product is None:
            return None
        reduction, lhs, rhs = product
        letters = {v: chr(ord("a") + i) for i, v in enumerate(self.index_vars)}
        sub = ",".join("".join(letters[ix] for ix in f.indices) for f in (lhs, rhs))
        spec = f"{sub}->{''.join(letters[ix] for ix in self.output.indices)}"
        (a, ea), (b, eb) = env[lhs.tensor], env[rhs.tensor]
        n = 1
        for ix in reduction.indices:
            i, d = self.operands_using(ix)[0]
            n *= np.shape(env[self.operands[i].tensor][0])[d]
        value = np.einsum(spec, a, b)
        err = np.einsum(spec, np.abs(a), eb) + np.einsum(spec, ea, np.abs(b))
        err = err + (n + 1) * u * np.einsum(spec, np.abs(a), np.abs(b))
        return value, err
