"""Ops in index notation as array code: the functions the NumPy and JAX peers run.

An op (an ``OpDef``) or a graph of ops (a ``GraphOp``) becomes straight-line array code for
an array module ``xp`` (NumPy, or ``jax.numpy`` under ``jax.jit``), the calls a user of that
module would write. The code is found once, by evaluating the op on NumPy arrays of the
operands' shapes and noting each call (``ArrayProgram``), so running it costs no more than
the calls. Every value is an array with an index variable naming each of its axes, so an
expression is evaluated over the variables it uses and no more:

* a sum over one shared index of a product of two accesses (``sum(k) a[m, k] * b[k, n]``)
  is ``xp.matmul``, its operands transposed as their indices require (a view in NumPy, a
  dimension number in XLA); other sums of products of accesses are ``xp.einsum``;
* ``+ - * /`` and the functions of index notation (``max`` is ``xp.maximum``, ``exp``) are
  the module's elementwise functions, their operands broadcast by index variable;
* ``sum(k)`` and ``max(k)`` of anything else are ``xp.sum`` and ``xp.max`` along the axes of
  the reduced variables; constants (``-inf`` too) are Python floats;
* a subexpression equal to one already evaluated, up to the names of its variables, is not
  evaluated again: ``exp(x[i, j] - max(k) x[i, k]) / sum(k) exp(x[i, k] - max(l) x[i, l])``
  takes one row maximum and one ``exp``, as written by hand.

A graph runs its statements in order, each on its arguments' arrays (a copy is no call).
Knows no op by name: only the expression trees of ``index_notation.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import numpy as np

from morello.rules.graph import GraphOp
from morello.rules.index_notation import Access, BinOp, Const, Expr, Func, OpDef, Reduce

#: Each operator and function of index notation: the array module's function.
_ELEMENTWISE = {
    "+": "add",
    "-": "subtract",
    "*": "multiply",
    "/": "divide",
    "max": "maximum",
    "min": "minimum",
    "exp": "exp",
}
#: Each reduction's combiner: the array module's reduction.
_REDUCTIONS = {"sum": "sum", "max": "max"}


def array_function(
    op: OpDef | GraphOp, shapes: Sequence[Sequence[int]], xp: Any, dtype: Any
) -> ArrayProgram:
    """The function computing ``op`` on arrays of module ``xp``; see the module docstring.

    ``shapes`` are the operands' shapes (inputs then output) and ``dtype`` the arrays'
    element type. The function takes the input arrays in operand order and returns the
    output array.
    """
    tracer = _Tracer()
    inputs = [tracer._keep(np.zeros(shape, dtype)) for shape in shapes[:-1]]
    with np.errstate(all="ignore"):
        if isinstance(op, GraphOp):
            out = _trace_graph(op, shapes, tracer, inputs, dtype)
        else:
            out = _trace_op(op, tuple(shapes[-1]), tracer, inputs, dtype)
    return ArrayProgram(xp, tuple(tracer._steps), len(inputs), tracer._slot(out))


@attrs.frozen
class _Slot:
    """A value of an ``ArrayProgram``: an input, or the result of an earlier step."""

    index: int


@attrs.frozen
class ArrayProgram:
    """Straight-line array code: each step calls a function of ``xp`` by name on earlier
    values and constants. Calling it runs the steps on the inputs (under ``jax.jit``, once,
    as it traces), so running it costs what writing the calls by hand would."""

    xp: Any = attrs.field(eq=False)
    steps: tuple[tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]], ...]
    inputs: int
    output: int
    _bound: tuple[Any, ...] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        bound = tuple((getattr(self.xp, name), a, dict(kw)) for name, a, kw in self.steps)
        object.__setattr__(self, "_bound", bound)

    @property
    def calls(self) -> tuple[str, ...]:
        """The name of the function each step calls."""
        return tuple(name for name, _, _ in self.steps)

    def __call__(self, *arrays: Any) -> Any:
        if len(arrays) != self.inputs:
            raise TypeError(f"expected {self.inputs} arrays, got {len(arrays)}")
        values = list(arrays)
        for fn, args, kwargs in self._bound:
            values.append(fn(*[values[a.index] if type(a) is _Slot else a for a in args], **kwargs))
        return values[self.output]


class _Tracer:
    """An array module (NumPy) that notes each call it makes as a step of an ArrayProgram,
    each array argument as the step that made it. (Its own names start with an underscore,
    as no function of NumPy's does.)"""

    def __init__(self) -> None:
        self._steps: list[tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]] = []
        self._values: list[Any] = []  # kept alive, so that no two share an id
        self._slots: dict[int, int] = {}

    def _keep(self, value: Any) -> Any:
        self._slots.setdefault(id(value), len(self._values))
        self._values.append(value)
        return value

    def _slot(self, value: Any) -> int:
        return self._slots[id(value)]

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)
        fn = getattr(np, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            refs = tuple(_Slot(self._slots[id(a)]) if id(a) in self._slots else a for a in args)
            self._steps.append((name, refs, tuple(sorted(kwargs.items()))))
            return self._keep(fn(*args, **kwargs))

        return call


def _trace_graph(
    graph: GraphOp,
    shapes: Sequence[Sequence[int]],
    xp: _Tracer,
    inputs: Sequence[Any],
    dtype: Any,
) -> Any:
    sizes = graph.sizes(shapes)
    if not isinstance(sizes, dict):
        raise ValueError(f"operand shapes {list(shapes)} conflict at index {sizes[0]}")
    env = dict(zip(graph.input_names, inputs, strict=True))
    for s, d in zip(graph.statements, graph.defs, strict=True):
        shape = graph.tensor_shape(s.target, sizes)
        env[s.target] = _trace_op(d, shape, xp, [env[a] for a in s.args], dtype)
    return env[graph.output.tensor]


def _trace_op(
    op: OpDef, out_shape: tuple[int, ...], xp: _Tracer, inputs: Sequence[Any], dtype: Any
) -> Any:
    ev = _Evaluator(xp, dict(zip((a.tensor for a in op.inputs), inputs, strict=True)))
    value, labels = ev.eval(op.expr)
    out_vars = op.output.indices
    extra = [v for v in labels if v not in out_vars]
    if extra:
        raise ValueError(f"{op.name}: index {extra[0]} is neither reduced nor an output's")
    if not labels:
        return ev.call("full", out_shape, value, dtype=dtype)
    value = _arrange(ev, value, labels, out_vars)
    if tuple(value.shape) != out_shape:
        value = ev.call("broadcast_to", value, out_shape)
    return value


#: An array and the index variable of each of its axes (a Python float has none).
Labeled = tuple[Any, tuple[str, ...]]


class _Evaluator:
    """Evaluates expressions over named axes, once per subexpression up to renaming."""

    def __init__(self, xp: Any, env: Mapping[str, Any]) -> None:
        self.xp = xp
        self.env = env
        self.memo: dict[tuple[Any, ...], tuple[Any, tuple[str, ...]]] = {}

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.xp, name)(*args, **kwargs)

    def eval(self, e: Expr) -> Labeled:
        free: dict[str, str] = {}
        key = _key(e, {}, free)
        hit = self.memo.get(key)
        if hit is not None:
            value, canon = hit
            back = {c: v for v, c in free.items()}
            return value, tuple(back[c] for c in canon)
        value, labels = self._eval(e)
        self.memo[key] = (value, tuple(free[v] for v in labels))
        return value, labels

    def _eval(self, e: Expr) -> Labeled:
        if isinstance(e, Const):
            return float(e.value), ()
        if isinstance(e, Access):
            return self._access(e)
        if isinstance(e, BinOp):
            (lhs, rhs), labels = _align(self, [self.eval(e.lhs), self.eval(e.rhs)])
            return self.call(_ELEMENTWISE[e.op], lhs, rhs), labels
        if isinstance(e, Func):
            args, labels = _align(self, [self.eval(a) for a in e.args])
            return self.call(_ELEMENTWISE[e.name], *args), labels
        assert isinstance(e, Reduce)
        if e.combiner == "sum":
            product = _product(e.body)
            if product is not None and len(product[0]) > 1:
                return self._contract(product, e.indices)
        value, labels = self.eval(e.body)
        missing = [v for v in e.indices if v not in labels]
        if missing:
            raise ValueError(f"reduction over {missing[0]}, which its body does not index")
        axes = tuple(labels.index(v) for v in e.indices)
        kept = tuple(v for v in labels if v not in e.indices)
        return self.call(_REDUCTIONS[e.combiner], value, axis=axes), kept

    def _access(self, e: Access) -> Labeled:
        arr = self.env[e.tensor]
        if len(set(e.indices)) == len(e.indices):
            return arr, e.indices
        # A variable indexing two dims reads a diagonal.
        letters = _letters(e.indices)
        kept = tuple(dict.fromkeys(e.indices))
        subs = "".join(letters[v] for v in e.indices) + "->" + "".join(letters[v] for v in kept)
        return self.call("einsum", subs, arr), kept

    def _contract(
        self, product: tuple[list[Access], list[float]], reduced: Sequence[str]
    ) -> Labeled:
        """``sum(reduced)`` of a product of accesses (and constants): matmul or einsum."""
        accesses, consts = product
        factors = [self.eval(a) for a in accesses]
        value, labels = self._matmul(factors, reduced) or self._einsum(factors, reduced)
        for c in consts:
            value = self.call("multiply", value, c)
        return value, labels

    def _matmul(self, factors: Sequence[Labeled], reduced: Sequence[str]) -> Labeled | None:
        """``xp.matmul`` for two factors sharing exactly the one reduced index, each with at
        most one other index of its own, or None where it does not apply."""
        if len(factors) != 2 or len(reduced) != 1:
            return None
        (a, la), (b, lb) = factors
        (k,) = reduced
        if k not in la or k not in lb or set(la) & set(lb) != {k}:
            return None
        m = [v for v in la if v != k]
        n = [v for v in lb if v != k]
        if len(m) > 1 or len(n) > 1:
            return None
        a = _transpose(self, a, la, (*m, k))
        b = _transpose(self, b, lb, (k, *n))
        return self.call("matmul", a, b), (*m, *n)

    def _einsum(self, factors: Sequence[Labeled], reduced: Sequence[str]) -> Labeled:
        labels = [v for _, ls in factors for v in ls]
        letters = _letters(labels)
        out = tuple(v for v in dict.fromkeys(labels) if v not in reduced)
        subs = ",".join("".join(letters[v] for v in ls) for _, ls in factors)
        subs += "->" + "".join(letters[v] for v in out)
        return self.call("einsum", subs, *(a for a, _ in factors), optimize=True), out


def _product(e: Expr) -> tuple[list[Access], list[float]] | None:
    """The accesses and constants whose product ``e`` is, or None if it is not a product."""
    if isinstance(e, Access):
        return [e], []
    if isinstance(e, Const):
        return [], [float(e.value)]
    if isinstance(e, BinOp) and e.op == "*":
        lhs, rhs = _product(e.lhs), _product(e.rhs)
        if lhs is None or rhs is None:
            return None
        accesses = lhs[0] + rhs[0]
        return (accesses, lhs[1] + rhs[1]) if accesses else None
    return None


def _key(e: Expr, bound: Mapping[str, str], free: dict[str, str]) -> tuple[Any, ...]:
    """``e`` with its variables renamed: free ones in order of first use (into ``free``),
    those a reduction binds by depth, so expressions equal up to renaming share a key."""

    def name(v: str) -> str:
        return bound[v] if v in bound else free.setdefault(v, f"f{len(free)}")

    if isinstance(e, Access):
        return ("access", e.tensor, tuple(name(v) for v in e.indices))
    if isinstance(e, Const):
        return ("const", float(e.value))
    if isinstance(e, BinOp):
        return ("binop", e.op, _key(e.lhs, bound, free), _key(e.rhs, bound, free))
    if isinstance(e, Func):
        return ("func", e.name, *(_key(a, bound, free) for a in e.args))
    assert isinstance(e, Reduce)
    inner = {**bound, **{v: f"r{len(bound) + i}" for i, v in enumerate(e.indices)}}
    return (
        "reduce",
        e.combiner,
        tuple(inner[v] for v in e.indices),
        _key(e.body, inner, free),
    )


def _letters(labels: Sequence[str]) -> dict[str, str]:
    return {v: chr(ord("a") + i) for i, v in enumerate(dict.fromkeys(labels))}


def _transpose(ev: _Evaluator, value: Any, labels: Sequence[str], order: Sequence[str]) -> Any:
    """``value`` with its axes in the order of the variables ``order``."""
    perm = tuple(labels.index(v) for v in order)
    return value if perm == tuple(range(len(perm))) else ev.call("transpose", value, perm)


def _arrange(ev: _Evaluator, value: Any, labels: Sequence[str], target: Sequence[str]) -> Any:
    """``value`` transposed and given unit axes so that it broadcasts over ``target``."""
    present = [v for v in target if v in labels]
    value = _transpose(ev, value, labels, present)
    if len(present) == len(target):
        return value
    shape = [value.shape[present.index(v)] if v in present else 1 for v in target]
    return ev.call("reshape", value, tuple(shape))


def _align(ev: _Evaluator, values: Sequence[Labeled]) -> tuple[list[Any], tuple[str, ...]]:
    """The operands of an elementwise function, broadcast over the union of their variables
    (in order of first appearance), and that union. Leading axes an operand lacks are left
    to broadcasting (``x @ w + b`` adds ``b`` as it is); others become unit axes."""
    union = tuple(dict.fromkeys(v for _, labels in values for v in labels))
    out = []
    for value, labels in values:
        if labels:
            first = min(union.index(v) for v in labels)
            value = _arrange(ev, value, labels, union[first:])
        out.append(value)
    return out, union
