"""Random spec functions for fuzzing, and the checks each must pass.

``random_case`` draws one function from a ``random.Random``: a single op application or a
graph of several, over parameters of random shapes, layouts and (for the inputs of a
contraction, a reduction or a row-wise op that nothing else reads) a narrower dtype. The ops
come from the rule set and are chosen by the *shape* of their index notation, not by name: a
contraction (a reduced index shared by two inputs), an elementwise op, a broadcast (an input
of lower rank), a reduction, a row-wise op (a reduction inside its expression), a copy, a
fill (no inputs).
The function is built top-down from its result, so every shape agrees by construction: an
op's output indices take the sizes wanted there, its other indices get fresh sizes, and each
argument is a parameter, an earlier intermediate of the same shape, or another op
application, written nested or as a named statement.

A share of cases is made invalid on purpose (a shape that disagrees, a statement never
used, an unknown op, a name read before it is assigned) and carries the error the check
pass must report; ``rejection_problem`` checks it. ``check_case`` runs a valid one the way
``--check`` does: synthesize, lower, compile, compare with NumPy on the inputs of seed 0.

Valid cases are drawn again when their reference is NaN, or when ``--check``'s tolerance
(``codegen.harness.tolerance``) is too tight for them: when rounding each statement's
result, as every implementation does, or moving the inputs by a rounding, already leaves
it. Comparing those would test rounding luck, not the generated code (with a tolerance that
evaluated a graph on the inputs' absolute values, several in a hundred graphs that subtract
were such; with the first-order error bound it is about one in a hundred, mostly results past
the largest f32). Knows no op by name.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import attrs
import numpy as np

from morello.codegen.compile import compile_shared
from morello.codegen.harness import (
    Comparison,
    check,
    random_inputs,
    reference,
    run,
    tolerance,
)
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.dtypes import DTYPES
from morello.errors import CheckFailed, SpecError
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.rules.graph import OUTPUT, GraphOp
from morello.rules.index_notation import OpDef
from morello.search.solve import Memo, synthesize

T = TypeVar("T")

#: The dtype of every generated result (and of every input but a narrow contraction's,
#: reduction's or row-wise op's; that op's own result, inside a graph, is computed in it too).
RESULT_DTYPE = "f32"
#: The seed of the inputs ``--check`` compares on, and so the one the cases are drawn for.
CHECK_SEED = 0
RESULT = "y"
UNUSED = "u"
UNDEFINED = "nowhere"

#: How often an op of each kind (see the module docstring) is drawn for an application.
KIND_WEIGHTS = {
    "contraction": 4.0,
    "elementwise": 3.0,
    "broadcast": 2.5,
    "reduction": 2.0,
    "rowwise": 1.2,
    "copy": 0.3,
    "fill": 0.5,
}


class NoCheckableCase(Exception):
    """``random_case`` drew ``max_attempts`` valid functions and none was checkable."""


@attrs.frozen
class FuzzOptions:
    """What ``random_case`` draws.

    Most extents are at most ``max_extent``; a share ``large_share`` goes up to
    ``large_extent`` (never below ``max_extent``). A valid case is drawn again when moving
    its inputs by ``probe_roundings`` units of roundoff moves the reference by more than
    the tolerance (0: only non-finite references are drawn again).
    """

    max_extent: int = 24
    large_extent: int = 40
    large_share: float = 0.03
    max_ops: int = 5
    max_statements: int = 4
    invalid_share: float = 0.1
    narrow_share: float = 0.5
    col_major_share: float = 0.3
    parallel_share: float = 0.03
    probe_roundings: float = 1.0
    max_attempts: int = 50


@attrs.frozen
class ExpectedError:
    """The SpecError an invalid case must give: a part of its message (one of several
    wordings) and, where the mistake has one place, its line and column."""

    kind: str
    fragments: tuple[str, ...]  # the message has one of these
    line: int | None = None
    column: int | None = None


@attrs.frozen
class FuzzCase:
    """One generated function: its text, what it exercises, and the error it must give
    (None for a valid one)."""

    name: str
    text: str
    features: frozenset[str]
    error: ExpectedError | None = None

    @property
    def path(self) -> str:
        """The file name locations are reported against."""
        return f"{self.name}.lark"

    @property
    def valid(self) -> bool:
        """Whether the case must synthesize and pass the check."""
        return self.error is None


def op_kind(opdef: OpDef) -> str:
    """The kind of an op by the shape of its index notation (see the module docstring)."""
    if not opdef.inputs:
        return "fill"
    if opdef.is_identity:
        return "copy"
    out = opdef.output.indices
    for v in opdef.reduction_vars:
        if sum(v in a.indices for a in opdef.inputs) >= 2:
            return "contraction"
    if opdef.reduction_vars:
        return "reduction"
    if opdef.combiner is None:
        return "rowwise"
    if any(a.indices != out for a in opdef.inputs):
        return "broadcast"
    return "elementwise"


# ---- the function as a tree -----------------------------------------------------------------


@attrs.define(eq=False)
class _Param:
    name: str
    vars: tuple[int, ...]
    dtype: str
    layout: str | None


@attrs.define(eq=False)
class _App:
    key: str
    opdef: OpDef
    vars: tuple[int, ...]
    args: list[_App | _Param] = attrs.Factory(list)
    target: str | None = None
    uses: int = 0
    spelled: str | None = None  # the op name as written, when it is not the declared one


@attrs.define
class _Tokens:
    """Where the rendered text puts each op name and tensor reference (line, column)."""

    calls: dict[int, tuple[int, int]] = attrs.Factory(dict)  # id(_App) -> place
    refs: list[tuple[str, int, int]] = attrs.Factory(list)  # (name, line, column)
    stmts: dict[str, int] = attrs.Factory(dict)  # target -> line


class _Builder:
    """Draws one function top-down from its result."""

    def __init__(self, rng: random.Random, ctx: SynthesisContext, options: FuzzOptions) -> None:
        self.rng = rng
        self.options = options
        self.ops = [
            (k, d, op_kind(d)) for k, d in ctx.ruleset.ops.items() if ctx.ruleset.implementable(k)
        ]
        self.extent: list[int] = []
        self.parent: list[int] = []
        self.params: list[_Param] = []
        self.apps: list[_App] = []
        self.features: set[str] = set()
        self.narrow = [n for n, d in DTYPES.items() if RESULT_DTYPE in d.accumulates_into]
        self.ops_names = ctx.ruleset.ops.names()

    # -- sizes -----------------------------------------------------------------------------

    def new_var(self, extent: int | None = None) -> int:
        if extent is None:
            extent = self.draw_extent()
        self.extent.append(extent)
        self.parent.append(len(self.parent))
        return len(self.extent) - 1

    def find(self, v: int) -> int:
        while self.parent[v] != v:
            self.parent[v] = self.parent[self.parent[v]]
            v = self.parent[v]
        return v

    def unify(self, a: Sequence[int], b: Sequence[int]) -> None:
        for x, y in zip(a, b, strict=True):
            self.parent[self.find(x)] = self.find(y)

    def shape(self, vs: Sequence[int]) -> tuple[int, ...]:
        return tuple(self.extent[v] for v in vs)

    def draw_extent(self) -> int:
        o, r = self.options, self.rng.random()
        if r < 0.1:
            return 1
        if r < 0.3:
            return self.rng.choice([m for m in range(8, o.max_extent + 1, 8)] or [o.max_extent])
        if r < 0.3 + o.large_share:
            return self.rng.randint(o.max_extent, max(o.max_extent, o.large_extent))
        return self.rng.randint(2, max(2, o.max_extent))

    # -- the tree --------------------------------------------------------------------------

    def pick_op(self, rank: int, root_alone: bool) -> tuple[str, OpDef, str]:
        fits = [
            (k, d, kind)
            for k, d, kind in self.ops
            if len(d.output.indices) == rank and (kind != "fill" or root_alone)
        ]
        weights = [KIND_WEIGHTS[kind] for _, _, kind in fits]
        return _weighted(self.rng, fits, weights)

    def app(self, vars_: tuple[int, ...], budget: int, root_alone: bool = False) -> _App:
        key, opdef, kind = self.pick_op(len(vars_), root_alone)
        self.features.add(f"kind:{kind}")
        if kind == "elementwise" and len(vars_) == 1:
            self.features.add("elementwise-of-vectors")
        if kind == "contraction" and len(vars_) == 1:
            self.features.add("product-with-a-vector")
        if not vars_:
            self.features.add("scalar")
        self.features.add(f"op:{opdef.name}")
        sizes = dict(zip(opdef.output.indices, vars_, strict=True))
        node = _App(key, opdef, vars_)
        shares = self.split(budget - 1, len(opdef.inputs))
        for acc, share in zip(opdef.inputs, shares, strict=True):
            for ix in acc.indices:
                if ix not in sizes:
                    sizes[ix] = self.new_var()
            arg_vars = tuple(sizes[ix] for ix in acc.indices)
            arg = self.operand(arg_vars, share)
            node.args.append(arg)
            if isinstance(arg, _App):
                self.features.add(f"{kind}<-{op_kind(arg.opdef)}")
        self.apps.append(node)
        return node

    def split(self, budget: int, n: int) -> list[int]:
        shares = [0] * n
        for _ in range(max(budget, 0)):
            if n == 0:
                break
            shares[0 if self.rng.random() < 0.5 else self.rng.randrange(n)] += 1
        return shares

    def operand(self, vars_: tuple[int, ...], budget: int) -> _App | _Param:
        shape = self.shape(vars_)
        if budget > 0 and self.rng.random() < 0.85:
            return self.app(vars_, budget)
        earlier = [a for a in self.apps if self.shape(a.vars) == shape]
        if earlier and self.rng.random() < 0.3:
            node = self.rng.choice(earlier)
            self.unify(node.vars, vars_)
            self.features.add("intermediate-read-twice")
            return node
        same = [p for p in self.params if self.shape(p.vars) == shape]
        if same and self.rng.random() < 0.15:
            self.unify(same[0].vars, vars_)
            self.features.add("param-read-twice")
            return same[0]
        return self.param(vars_)

    def param(self, vars_: tuple[int, ...]) -> _Param:
        r = self.rng.random()
        layout = None
        if len(vars_) == 2 and r < self.options.col_major_share:
            layout = "col_major"
            self.features.add("col_major")
        elif r > 0.9:
            layout = "row_major"
        p = _Param(_param_name(len(self.params)), vars_, RESULT_DTYPE, layout)
        self.params.append(p)
        return p


def _weighted(rng: random.Random, items: Sequence[T], weights: Sequence[float]) -> T:
    """One of ``items`` by weight, from one ``rng.random()`` (so a draw of 0 picks the first,
    and Hypothesis shrinks toward it)."""
    x = rng.random() * sum(weights)
    for item, w in zip(items, weights, strict=True):
        x -= w
        if x < 0:
            return item
    return items[-1]


def _param_name(i: int) -> str:
    letters = "abcdefghkmnpqrsvwxz"
    return letters[i] if i < len(letters) else f"p{i}"


# ---- drawing a case -------------------------------------------------------------------------


def random_case(
    rng: random.Random,
    ctx: SynthesisContext,
    name: str = "fuzz",
    options: FuzzOptions | None = None,
) -> FuzzCase:
    """One random function named ``name`` (valid, or invalid with its expected error)."""
    options = options or FuzzOptions()
    invalid = rng.random() < options.invalid_share
    for attempt in range(options.max_attempts):
        b = _Builder(rng, ctx, options)
        root = _draw_tree(b)
        _choose_statements(b, root)
        if invalid:
            return _make_invalid(b, root, name)
        text, _ = _render(b, root, name)
        redrawn = {"redrawn"} if attempt else set()
        case = FuzzCase(name, text, frozenset(b.features | _shape_features(b) | redrawn))
        if _checkable(case, ctx, options.probe_roundings):
            return case
    raise NoCheckableCase(f"no checkable case in {options.max_attempts} draws")


def case_for_seed(
    seed: int, index: int, ctx: SynthesisContext, options: FuzzOptions | None = None
) -> FuzzCase:
    """Case ``index`` of a run with ``seed``: the same case on every machine and run."""
    rng = random.Random(f"morello-fuzz:{seed}:{index}")
    return random_case(rng, ctx, f"fuzz_{seed}_{index}", options)


def _draw_tree(b: _Builder) -> _App:
    o = b.options
    weights = [7, 5, 4, 3, 1, *([1] * o.max_ops)][: o.max_ops]
    n_ops = _weighted(b.rng, range(1, o.max_ops + 1), weights)
    r = b.rng.random()
    rank = 0 if r < 0.08 else 1 if r < 0.25 else 2
    root = b.app(tuple(b.new_var() for _ in range(rank)), n_ops, root_alone=n_ops == 1)
    own = _narrowable(b)
    if own and b.narrow and b.rng.random() < o.narrow_share:
        narrow = b.rng.choice(b.narrow)
        app = b.rng.choice(own)
        for p in app.args:
            assert isinstance(p, _Param)
            p.dtype = narrow
        b.features.add(f"dtype:{narrow}" if len(b.apps) == 1 else f"dtype:{narrow}-in-graph")
        b.features.add(f"dtype:{narrow}-{op_kind(app.opdef)}")
    b.features.add(f"result-rank:{rank}")
    return root


def _narrowable(b: _Builder) -> list[_App]:
    """Contractions, reductions and row-wise ops (softmax) whose inputs are all parameters
    that nothing else reads: those may take a narrower dtype (the product, sum or maximum
    accumulates into f32; softmax widens its row as it subtracts the row's maximum) without
    another op seeing it."""
    readers: dict[int, set[int]] = {}
    for app in b.apps:
        for arg in app.args:
            readers.setdefault(id(arg), set()).add(id(app))
    return [
        app
        for app in b.apps
        if op_kind(app.opdef) in ("contraction", "reduction", "rowwise")
        and all(isinstance(a, _Param) and readers[id(a)] == {id(app)} for a in app.args)
    ]


def _choose_statements(b: _Builder, root: _App) -> None:
    """Count uses; name every intermediate read twice, and others at random."""

    def count(node: _App) -> None:
        node.uses += 1
        if node.uses == 1:
            for a in node.args:
                if isinstance(a, _App):
                    count(a)

    count(root)
    root.target = RESULT
    named = 1
    for node in b.apps:
        if node is root:
            continue
        if node.uses > 1 or (named < b.options.max_statements and b.rng.random() < 0.45):
            node.target = f"t{named - 1}"
            named += 1
    if len(b.apps) > 1:
        b.features.add("graph")
        b.features.add("nested" if any(a.target is None for a in b.apps) else "flat")
        if named > 1:
            b.features.add("named-intermediate")
    b.features.add(f"statements:{named}")


def _shape_features(b: _Builder) -> set[str]:
    out = set()
    for p in b.params:
        for n in b.shape(p.vars):
            out.add("extent-1" if n == 1 else "extent-x8" if n % 8 == 0 else "extent-not-x8")
            if n > b.options.max_extent:
                out.add("extent-large")
    return out


# ---- rendering ------------------------------------------------------------------------------


def _type(b: _Builder, vars_: Sequence[int], dtype: str, layout: str | None) -> str:
    dims = ", ".join(str(b.extent[v]) for v in vars_)
    return f"{dtype}[{dims}]" + (f" {layout}" if layout else "")


def _render(
    b: _Builder,
    root: _App,
    name: str,
    extra: Callable[[list[_App]], list[_App]] | None = None,
    result_type: str | None = None,
) -> tuple[str, _Tokens]:
    """The function's text (statements in dependency order, possibly reordered by
    ``extra``), and where its tokens are."""
    parallel = b.rng.random() < b.options.parallel_share
    if parallel:
        b.features.add("parallel")
    order: list[_App] = []
    seen: set[int] = set()

    def visit(node: _App) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for a in node.args:
            if isinstance(a, _App):
                visit(a)
        if node.target is not None:
            order.append(node)

    visit(root)
    if extra is not None:
        order = extra(order)
    params = ", ".join(f"{p.name}: {_type(b, p.vars, p.dtype, p.layout)}" for p in b.params)
    rtype = result_type or _type(b, root.vars, RESULT_DTYPE, None)
    head = f"{'parallel ' if parallel else ''}func {name}({params}) -> {RESULT}: {rtype} {{"
    lines = ["# drawn by morello.fuzzing", head]
    tokens = _Tokens()
    for node in order:
        assert node.target is not None
        line = len(lines) + 1
        tokens.stmts[node.target] = line
        text = f"    {node.target} = "
        lines.append(text + _expr(node, line, len(text) + 1, tokens, top=True))
    lines.append("}")
    return "\n".join(lines) + "\n", tokens


def _expr(node: _App | _Param, line: int, col: int, tokens: _Tokens, top: bool = False) -> str:
    if isinstance(node, _Param) or (node.target is not None and not top):
        ref = node.name if isinstance(node, _Param) else node.target
        assert ref is not None
        tokens.refs.append((ref, line, col))
        return ref
    tokens.calls[id(node)] = (line, col)
    text = f"{node.spelled or node.opdef.name}("
    parts = []
    for a in node.args:
        part = _expr(a, line, col + len(text), tokens)
        parts.append(part)
        text += part + ", "
    return f"{node.spelled or node.opdef.name}({', '.join(parts)})"


# ---- invalid cases --------------------------------------------------------------------------


def _make_invalid(b: _Builder, root: _App, name: str) -> FuzzCase:
    """Break the drawn function in one place: the drawn kind of mistake, or the next one
    that applies (an unknown op always does)."""
    kinds = [_bad_shape, _unused, _unknown_op, _undefined]
    first = b.rng.randrange(len(kinds))
    for breaker in kinds[first:] + kinds[:first]:
        made = breaker(b, root, name)
        if made is not None:
            return made
    raise AssertionError("an unknown op can always be written")


def _invalid(b: _Builder, name: str, text: str, err: ExpectedError) -> FuzzCase:
    return FuzzCase(name, text, frozenset({*b.features, f"invalid:{err.kind}"}), err)


def _unknown_op(b: _Builder, root: _App, name: str) -> FuzzCase:
    """An op name the rule set does not declare."""
    node = b.rng.choice(b.apps)
    known = set(b.ops_names)
    spellings = [node.opdef.name + "s", node.opdef.name[:-1], "frobnicate", "no_such_op"]
    node.spelled = b.rng.choice([s for s in spellings if s and s not in known])
    text, tokens = _render(b, root, name)
    place = tokens.calls[id(node)]
    return _invalid(
        b, name, text, ExpectedError("unknown_op", (f"unknown op {node.spelled!r}",), *place)
    )


def _bad_shape(b: _Builder, root: _App, name: str) -> FuzzCase | None:
    """A result dim, or a parameter dim another operand shares, of a different size."""
    positions = [(p, d) for p in b.params for d in range(len(p.vars))]
    roots = [b.find(p.vars[d]) for p, d in positions]
    roots += [b.find(v) for v in root.vars]
    shared = [pd for pd, r in zip(positions, roots, strict=False) if roots.count(r) >= 2]
    # (a scalar result has no dim to change)
    if root.opdef.inputs and root.vars and (not shared or b.rng.random() < 0.5):
        d = b.rng.randrange(len(root.vars))
        vars_ = list(root.vars)
        vars_[d] = b.new_var(_other_extent(b, b.extent[root.vars[d]]))
        rtype = _type(b, vars_, RESULT_DTYPE, None)
        text, tokens = _render(b, root, name, result_type=rtype)
        err = ExpectedError("shape", ("shape mismatch",), tokens.stmts[RESULT], 5)
        return _invalid(b, name, text, err)
    if not shared:
        return None
    p, d = b.rng.choice(shared)
    vars_ = list(p.vars)
    vars_[d] = b.new_var(_other_extent(b, b.extent[p.vars[d]]))
    p.vars = tuple(vars_)
    text, _ = _render(b, root, name)
    return _invalid(b, name, text, ExpectedError("shape", ("mismatch",)))


def _other_extent(b: _Builder, n: int) -> int:
    return b.rng.choice([m for m in (n - 1, n + 1, 2 * n, n + 8) if m >= 1 and m != n])


def _unused(b: _Builder, root: _App, name: str) -> FuzzCase | None:
    """A statement whose result nothing reads, just before the result's."""
    # Of an f32 parameter: the unary ops have f32 kernels only, and an op no kernel takes
    # is an error of its own, found first.
    f32 = [p for p in b.params if p.dtype == "f32"]
    p = b.rng.choice(f32) if f32 else None
    if p is None:
        return None
    unary = [
        (k, d)
        for k, d, kind in b.ops
        if len(d.inputs) == 1 and len(d.inputs[0].indices) == len(p.vars) and kind != "copy"
    ]
    if not unary:
        return None
    key, opdef = b.rng.choice(unary)
    sizes = dict(zip(opdef.inputs[0].indices, p.vars, strict=True))
    extra = _App(key, opdef, tuple(sizes[ix] for ix in opdef.output.indices), [p], UNUSED)
    text, tokens = _render(b, root, name, extra=lambda order: [*order[:-1], extra, order[-1]])
    never = f"{UNUSED!r} is assigned but never used"
    err = ExpectedError("unused", (never,), tokens.stmts[UNUSED], 5)
    return _invalid(b, name, text, err)


def _undefined(b: _Builder, root: _App, name: str) -> FuzzCase | None:
    """A name read before it is assigned: never assigned, assigned later, or by itself."""
    readers = [a for a in b.apps if any(isinstance(x, _Param) for x in a.args)]
    named = [a for a in b.apps if a.target is not None and a is not root]
    selfish = [a for a in b.apps if a.target is not None and a.args]
    hows = [h for h, c in (("never", readers), ("later", named), ("itself", selfish)) if c]
    if not hows:
        return None
    how = b.rng.choice(hows)
    b.features.add(f"undefined:{how}")
    order_of = None
    if how == "never":
        node = b.rng.choice(readers)
        i = b.rng.choice([i for i, x in enumerate(node.args) if isinstance(x, _Param)])
        old = node.args[i]
        node.args[i] = _Param(UNDEFINED, old.vars, old.dtype, None)
        missing = UNDEFINED
        fragments = (f"unknown tensor {missing!r}",)
    else:
        if how == "later":
            node = b.rng.choice(named)

            def order_of(order: list[_App]) -> list[_App]:
                return [a for a in order if a is not node] + [node]

        else:
            node = b.rng.choice(selfish)
            node.args[b.rng.randrange(len(node.args))] = node
        missing = node.target
        fragments = (
            f"unknown tensor {missing!r}",
            f"{missing!r} is read before it is assigned",
            f"{missing!r} reads itself",
        )
    text, tokens = _render(b, root, name, extra=order_of)
    line, col = next((ln, c) for ref, ln, c in tokens.refs if ref == missing)
    err = ExpectedError("undefined", fragments, line, col)
    return _invalid(b, name, text, err)


# ---- checks ---------------------------------------------------------------------------------


def program_of(case: FuzzCase, ctx: SynthesisContext) -> Program:
    """Parse and check ``case`` (raises what the check pass raises)."""
    (func,) = parse_spec_file(case.path, case.text).funcs
    return build_program(func, ctx)


def _checkable(case: FuzzCase, ctx: SynthesisContext, roundings: float) -> bool:
    """Whether the reference has no NaN and a finite tolerance wherever it is finite, an
    evaluation that rounds every statement's result to the result dtype is within half the
    tolerance (the other half is for the roundings inside statements), and the reference
    moves by no more than the tolerance when the inputs move by ``roundings`` units of
    roundoff (see the module docstring)."""
    prog = program_of(case, ctx)
    inputs = random_inputs(prog, ctx, CHECK_SEED)
    with np.errstate(all="ignore"):
        want = reference(prog, inputs, ctx)
        allowed = tolerance(prog, inputs, ctx)
        if np.isnan(want).any() or not np.isfinite(allowed[np.isfinite(want)]).all():
            return False
        if not _within(_rounded_per_statement(prog, inputs, ctx), want, allowed / 2):
            return False
        u = ctx.dtype(RESULT_DTYPE).unit_roundoff
        rng = np.random.default_rng(CHECK_SEED)
        for _ in range(2 if roundings else 0):
            moved = {
                k: v * (1 + roundings * u * rng.uniform(-1, 1, np.shape(v)))
                for k, v in inputs.items()
            }
            if not _within(reference(prog, moved, ctx), want, allowed):
                return False
    return True


def _within(got: np.ndarray, want: np.ndarray, allowed: np.ndarray) -> bool:
    return bool((np.where(got == want, 0.0, np.abs(got - want)) <= allowed).all())


def _rounded_per_statement(
    prog: Program, inputs: dict[str, np.ndarray], ctx: SynthesisContext
) -> np.ndarray:
    """The reference of a graph with every statement's result rounded to the result dtype,
    as any implementation of it rounds them."""
    op = ctx.ruleset.ops[prog.spec.op]
    args = [inputs[n] for n in prog.operand_params[:-1]]
    dt = ctx.dtype(RESULT_DTYPE).np_dtype()
    if not isinstance(op, GraphOp):
        return op.reference(args, np.zeros(prog.spec.output.shape)).astype(dt)
    sizes = op.sizes([t.shape for t in prog.spec.operands])
    assert isinstance(sizes, dict)
    env = dict(zip(op.input_names, args, strict=True))
    for st, d in zip(op.statements, op.defs, strict=True):
        out = np.zeros(op.tensor_shape(st.target, sizes))
        env[st.target] = d.reference([env[a] for a in st.args], out).astype(dt)
    return env[OUTPUT]


@attrs.frozen
class CaseRun:
    """A valid case that passed ``check_case``."""

    comparison: Comparison
    seconds: float  # of synthesis
    cost: int  # the model's cost of the program synthesized
    taken_in: int = 0  # answers its search took from helper walks


def check_case(
    case: FuzzCase, ctx: SynthesisContext, memo: Memo, workdir: Path, jobs: int = 1
) -> CaseRun:
    """Synthesize (with ``jobs`` walks), lower, compile and check a valid case as ``--check``
    does.

    Raises:
        MorelloError: what synthesis, compilation or the check raise. A CheckFailed carries
            a note (``__notes__``) that sizes the worst error: ``gross``, or
            ``rounding-size`` when every element out of tolerance is within
            ``ROUNDING_SIZE`` roundoffs of its reference (then the tolerance, not the
            code, may be what is wrong).
    """
    prog = program_of(case, ctx)
    impl, stats = synthesize(prog.spec, ctx, memo, jobs=jobs)
    src = lower_to_c(case.name, [(prog, impl)], ctx)
    lib = compile_shared(src.c_text, ctx.target, workdir)
    try:
        comparison = check(lib, prog, ctx, seed=CHECK_SEED)
        return CaseRun(comparison, stats.seconds, impl.cost, stats.specs_taken_in)
    except CheckFailed as exc:
        exc.add_note(_error_size(lib, prog, ctx))
        raise


#: Errors up to this many units of roundoff of the reference count as rounding-size.
ROUNDING_SIZE = 64


def _error_size(lib: Path, prog: Program, ctx: SynthesisContext) -> str:
    inputs = random_inputs(prog, ctx, CHECK_SEED)
    got = run(lib, prog, inputs, ctx).astype(np.float64)
    want = reference(prog, inputs, ctx)
    with np.errstate(all="ignore"):
        err = np.where(got == want, 0.0, np.abs(got - want))
        bad = ~(err <= tolerance(prog, inputs, ctx))
        units = err[bad] / (ctx.dtype(RESULT_DTYPE).unit_roundoff * np.abs(want[bad]))
    worst = float(np.nanmax(units, initial=0.0)) if not np.isnan(units).any() else np.inf
    size = "rounding-size" if worst <= ROUNDING_SIZE else "gross"
    return f"{size}: the worst element out of tolerance is off by {worst:.3g} roundoffs"


def rejection_problem(case: FuzzCase, ctx: SynthesisContext) -> str | None:
    """What is wrong with how the check pass treats an invalid case, or None if it reports
    the expected SpecError at ``path:line:col``."""
    expected = case.error
    assert expected is not None
    try:
        program_of(case, ctx)
    except SpecError as exc:
        return _error_problem(case.path, expected, exc)
    except Exception as exc:  # anything else is the finding
        return f"expected a SpecError ({expected.kind}), got {type(exc).__name__}: {exc}"
    return f"accepted, but expected a SpecError ({expected.kind})"


def _error_problem(path: str, expected: ExpectedError, exc: SpecError) -> str | None:
    head = exc.headline()
    m = re.match(rf"{re.escape(path)}:(\d+):(\d+): error: ", head)
    if m is None:
        return f"error not located at {path}:line:col: {head}"
    if not any(f in exc.message for f in expected.fragments):
        return f"expected an error about {' or '.join(expected.fragments)}, got: {head}"
    got = (int(m.group(1)), int(m.group(2)))
    if expected.line is not None and got != (expected.line, expected.column):
        return f"expected the error at {expected.line}:{expected.column}, got: {head}"
    return None
