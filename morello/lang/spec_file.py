"""Spec files -> typed functions -> root Specs.

A spec file holds one or more ``func``s. Each is a small dataflow graph of op applications
over typed tensor parameters; the check pass resolves op names against the rule set, binds
index sizes (reporting shape mismatches), and builds the root Spec. Knows no op by name.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import lark

from morello.codegen.names import C_KEYWORDS, CXX_KEYWORDS
from morello.dtypes import DTYPES
from morello.errors import SourceLocation, SpecError, SpecSyntaxError
from morello.lang._lark import loc_of, parse, read_source
from morello.lang.syntax import TensorType, tensor_type
from morello.layout import (
    LAYOUT_FAMILIES,
    PARAMETRIC_FAMILIES,
    Layout,
    layout_by_name,
    packed_family,
)
from morello.rules.graph import GraphOp, Statement, canonical, graph_inputs
from morello.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from collections.abc import Sequence

    from morello.context import SynthesisContext
    from morello.rules.index_notation import Access, OpDef
    from morello.target import MemoryLevel


@attrs.frozen
class Param:
    """``name: type``."""

    name: str
    type: TensorType
    loc: SourceLocation = attrs.field(eq=False)


@attrs.frozen
class Call:
    """``op(args)``; an argument is a name or a nested call."""

    op: str
    args: tuple[Call | Var, ...] = attrs.field(converter=tuple)
    loc: SourceLocation = attrs.field(eq=False)


@attrs.frozen
class Var:
    """A reference to a parameter or an earlier statement's result."""

    name: str
    loc: SourceLocation = attrs.field(eq=False)


@attrs.frozen
class Stmt:
    """``name = expr``."""

    target: str
    expr: Call | Var
    loc: SourceLocation = attrs.field(eq=False)


@attrs.frozen
class FuncDef:
    """One ``func`` of a spec file."""

    name: str
    params: tuple[Param, ...] = attrs.field(converter=tuple)
    result: Param
    stmts: tuple[Stmt, ...] = attrs.field(converter=tuple)
    parallel: bool
    loc: SourceLocation = attrs.field(eq=False)


@attrs.frozen
class SpecFile:
    """A parsed spec file."""

    path: str
    funcs: tuple[FuncDef, ...] = attrs.field(converter=tuple)


def parse_spec_file(path: str | Path, text: str | None = None) -> SpecFile:
    """Parse a spec file (syntax only; see ``build_spec`` for the check pass).

    Raises:
        SpecSyntaxError: the text does not follow the grammar.
        SpecError: the file cannot be read, or two functions have one name.
    """
    path = str(path)
    if text is None:
        text = read_source(path, "spec file", SpecError)
    tree = parse("spec.lark", text, path, SpecSyntaxError)
    funcs = [_func(path, f) for f in tree.children]  # type: ignore[arg-type]
    first: dict[str, FuncDef] = {}
    for func in funcs:
        # Each becomes a C function of that name, and C allows one definition.
        if func.name in first:
            at = first[func.name].loc
            raise SpecError(
                f"function {func.name} is defined twice (first at line {at.line})", func.loc
            )
        first[func.name] = func
    return SpecFile(path, tuple(funcs))


def _func(path: str, tree: lark.Tree[lark.Token]) -> FuncDef:
    ch = list(tree.children)
    parallel = False
    if isinstance(ch[0], lark.Token) and ch[0].type == "PARALLEL":
        parallel = True
        ch = ch[1:]
    name = str(ch[0])
    params: list[Param] = []
    idx = 1
    if isinstance(ch[idx], lark.Tree) and ch[idx].data == "params":  # type: ignore[union-attr]
        params = [_param(path, p) for p in ch[idx].children]  # type: ignore[union-attr,arg-type]
        idx += 1
    result = _param(path, ch[idx])  # type: ignore[arg-type]
    stmts = [_stmt(path, s) for s in ch[idx + 1 :]]  # type: ignore[arg-type]
    return FuncDef(name, tuple(params), result, tuple(stmts), parallel, loc_of(path, tree))


def _param(path: str, tree: lark.Tree[lark.Token]) -> Param:
    name, tt = tree.children
    return Param(str(name), tensor_type(path, tt), loc_of(path, name))  # type: ignore[arg-type]


def _stmt(path: str, tree: lark.Tree[lark.Token]) -> Stmt:
    target, expr = tree.children
    return Stmt(str(target), _expr(path, expr), loc_of(path, target))  # type: ignore[arg-type]


def _expr(path: str, tree: lark.Tree[lark.Token]) -> Call | Var:
    if tree.data == "var":
        tok = tree.children[0]
        return Var(str(tok), loc_of(path, tok))
    name_tok, *rest = tree.children
    args: list[Call | Var] = []
    if rest:
        args = [_expr(path, a) for a in rest[0].children]  # type: ignore[union-attr,arg-type]
    return Call(str(name_tok), tuple(args), loc_of(path, name_tok))


# ---- check pass -----------------------------------------------------------------------------


#: The most elements a tensor may have: the generated C indexes every buffer with ``int``
#: loop variables and offsets, which stay below a tensor's size, so this bounds them.
MAX_ELEMENTS = 2**31 - 1


def tensor_spec_of(tt: TensorType, what: str, levels: Sequence[MemoryLevel]) -> TensorSpec:
    """The TensorSpec a spec-file type denotes (defaults: first level, row-major), with its
    dtype and level resolved (``levels``: the target's)."""
    if tt.dtype not in DTYPES:
        raise SpecError(f"{what}: dtype {tt.dtype} is not supported yet", tt.loc)
    for d in tt.dims:
        if not isinstance(d, int):
            raise SpecError(f"{what}: dimensions must be integers, found {d!r}", tt.loc)
        if d <= 0:
            raise SpecError(f"{what}: dimensions must be positive, found {d}", tt.loc)
    volume = math.prod(int(d) for d in tt.dims)
    if volume > MAX_ELEMENTS:
        raise SpecError(
            f"{what}: at most {MAX_ELEMENTS} elements (the C indexes them with int), "
            f"found {volume}",
            tt.loc,
        )
    if tt.vector_size is not None:
        raise SpecError(f"{what}: vector sizes are chosen by the synthesizer, not written", tt.loc)
    if len(tt.levels) > 1:
        raise SpecError(f"{what}: a parameter lives in exactly one memory level", tt.loc)
    by_name = {lv.name: lv for lv in levels}
    level = tt.levels[0] if tt.levels else levels[0].name
    if level not in by_name:
        raise SpecError(
            f"{what}: unknown memory level {level!r} (this target has {', '.join(by_name)})",
            tt.loc,
        )
    if len(tt.props) > 1:
        raise SpecError(f"{what}: more than one layout given", tt.loc)
    name = tt.props[0] if tt.props else "row_major"
    shape = tuple(int(d) for d in tt.dims)
    layout = layout_by_name(name, len(shape))
    if layout is None:
        packed = packed_family(name)
        if packed is not None:
            if packed[1] < 2:
                raise SpecError(f"{what}: the block of {name} must be 2 or more", tt.loc)
            raise SpecError(
                f"{what}: layout {name} packs a matrix, but the tensor has rank {len(shape)}",
                tt.loc,
            )
        known = ", ".join([*LAYOUT_FAMILIES, *(f"{p}(N)" for p in PARAMETRIC_FAMILIES)])
        raise SpecError(f"{what}: unknown layout {name!r} (known: {known})", tt.loc)
    canon = layout.canonical(shape)
    if canon is None:
        dims = ", ".join(map(str, shape))
        raise SpecError(f"{what}: layout {name} does not fit shape [{dims}]", tt.loc)
    return TensorSpec(shape, DTYPES[tt.dtype], by_name[level], canon)


@attrs.frozen
class Program:
    """A checked function: its root Spec and how Spec operands map to C parameters."""

    name: str
    spec: Spec
    params: tuple[tuple[str, TensorSpec], ...]
    result: tuple[str, TensorSpec]
    operand_params: tuple[str, ...]


def build_spec(func: FuncDef, ctx: SynthesisContext) -> Spec:
    """The root Spec of ``func``; see ``build_program``."""
    return build_program(func, ctx).spec


def build_program(func: FuncDef, ctx: SynthesisContext, *, require_kernels: bool = True) -> Program:
    """Check ``func`` against the rule set and build its root Spec.

    With ``require_kernels`` (the default), an op that no kernel or decomposition of the
    target implements is an error at its call; without, the program is only described
    (the peers of a benchmark run it without synthesis).

    Raises:
        SpecError: unknown op or name, arity, rank, shape or dtype mismatch, a graph of
            more ops than synthesis supports, or a ``parallel func`` with one thread.
    """
    if func.parallel and ctx.threads < 2:
        raise SpecError(_one_thread(func, ctx), func.loc)
    checker = _Checker(func, ctx, require_kernels)
    apps = checker.check()  # the result is assigned an op application, so there is one
    limits = ctx.target.max_limits()
    params = tuple((p.name, checker.env[p.name]) for p in func.params)
    result = (func.result.name, checker.result)
    if len(apps) == 1:
        (app,) = apps
        spec = Spec(app.op, (*app.args, app.produced), False, limits, not func.parallel)
        operand_params = (*app.arg_names, func.result.name)
        return Program(func.name, spec, params, result, operand_params)
    # Several ops: one graph op over the tensors the function reads, in order of first use.
    statements = [Statement(a.name, a.op, a.arg_names) for a in apps]
    try:
        graph = GraphOp.build(canonical(statements, func.result.name), ctx.ruleset.ops)
    except ValueError as exc:
        raise SpecError(f"function {func.name}: {exc}", func.loc) from None
    graph = ctx.ruleset.ops.graph(graph)
    inputs = graph_inputs(statements)
    operands = (*(checker.env[n] for n in inputs), checker.result)
    spec = Spec(graph.name, operands, False, limits, not func.parallel)
    return Program(func.name, spec, params, result, (*inputs, func.result.name))


def _one_thread(func: FuncDef, ctx: SynthesisContext) -> str:
    """Why ``parallel func`` cannot run in parallel: it would silently be serial."""
    target = ctx.target
    if target.processors < 2:
        return (
            f"parallel func {func.name} needs 2 or more threads, but target {target.name} "
            "has 1 processor (remove 'parallel')"
        )
    return (
        f"parallel func {func.name} needs --threads 2 or more (target {target.name} has "
        f"{target.processors} processors), found --threads {ctx.threads}"
    )


def _check_c_name(name: str, what: str, loc: SourceLocation) -> None:
    """A SpecError if ``name`` cannot name a C function or parameter (the C uses the spec
    file's names as written), or, for a function, if C++ could not call it through the
    header. A parameter named like a C++ keyword is spelled otherwise in the header's
    prototype (``codegen.header``), where its name is only documentation."""
    if name in C_KEYWORDS:
        raise SpecError(f"{what} {name!r}: a C keyword cannot be a name here", loc)
    if what == "function" and name in CXX_KEYWORDS:
        raise SpecError(
            f"function {name!r}: a C++ keyword cannot name a function (its header is for C "
            "and C++)",
            loc,
        )
    if name.startswith("_"):
        raise SpecError(
            f"{what} {name!r}: names beginning with '_' are the C compiler's "
            "(its intrinsics and builtins); choose another",
            loc,
        )


@attrs.frozen
class _App:
    """One op application found by the check pass, with its operand TensorSpecs."""

    call: Call
    op: str  # the key of the overload the call resolves to
    args: tuple[TensorSpec, ...] = attrs.field(converter=tuple)
    produced: TensorSpec
    arg_names: tuple[str, ...] = attrs.field(converter=tuple)
    name: str  # the statement's target, or a made-up name for a nested call


class _Checker:
    """Infers the TensorSpec of every statement of one function, reporting the first error."""

    def __init__(self, func: FuncDef, ctx: SynthesisContext, require_kernels: bool) -> None:
        self.func = func
        self.ctx = ctx
        self.require_kernels = require_kernels
        self.levels = ctx.target.levels
        self.env: dict[str, TensorSpec] = {}
        self.aliases: dict[str, str] = {}  # `h = x` makes h another name of x
        self.read_names: set[str] = set()  # every name a statement reads
        self.apps: list[_App] = []
        self.current: Stmt | None = None  # the statement being checked
        _check_c_name(func.name, "function", func.loc)
        for p in [*func.params, func.result]:
            _check_c_name(p.name, "result" if p is func.result else "parameter", p.loc)
        for p in func.params:
            if p.name in self.env:
                raise SpecError(f"parameter {p.name!r} is declared twice", p.loc)
            self.env[p.name] = tensor_spec_of(p.type, f"parameter {p.name}", self.levels)
        res = func.result
        if res.name in self.env:
            raise SpecError(f"result {res.name!r} has the name of a parameter", res.loc)
        self.result = tensor_spec_of(res.type, f"result {res.name}", self.levels)

    def check(self) -> list[_App]:
        params = {p.name for p in self.func.params}
        for st in self.func.stmts:
            if st.target in params:
                raise SpecError(f"{st.target!r} is a parameter and cannot be assigned", st.loc)
            if st.target in self.env:
                raise SpecError(f"{st.target!r} is assigned more than once", st.loc)
            is_result = st.target == self.func.result.name
            self.current = st
            self.env[st.target], name = self.infer(st.expr, st if is_result else None, st.target)
            if name != st.target:
                self.aliases[st.target] = name
        if self.func.result.name not in self.env:
            res = self.func.result
            raise SpecError(f"result {res.name!r} is never assigned", res.loc)
        for st in self.func.stmts:
            if st.target != self.func.result.name and st.target not in self.read_names:
                raise SpecError(f"{st.target!r} is assigned but never used", st.loc)
        return self.apps

    def infer(
        self, expr: Call | Var, stmt: Stmt | None, target: str | None = None
    ) -> tuple[TensorSpec, str]:
        """The TensorSpec of ``expr`` and the name of the tensor it denotes; ``stmt`` is given
        when it assigns the declared result, ``target`` is the name a statement gives it."""
        if isinstance(expr, Var):
            later = next((st for st in self.func.stmts if st.target == expr.name), None)
            if expr.name not in self.env and later is self.current:
                raise SpecError(
                    f"{expr.name!r} reads itself: a statement cannot use its own result",
                    expr.loc,
                )
            if expr.name not in self.env and later is not None:
                raise SpecError(
                    f"{expr.name!r} is read before it is assigned (on line "
                    f"{later.loc.line}): statements run in order, so a cycle has no value",
                    expr.loc,
                )
            if expr.name not in self.env:
                raise SpecError(
                    f"unknown tensor {expr.name!r} (not a parameter or an earlier result)",
                    expr.loc,
                )
            if stmt is not None:
                raise SpecError(
                    f"result {stmt.target!r} must be assigned an op application, "
                    f"found {expr.name!r}",
                    expr.loc,
                )
            self.read_names.add(expr.name)
            return self.env[expr.name], self.aliases.get(expr.name, expr.name)
        inferred = [self.infer(a, None) for a in expr.args]
        args = [ts for ts, _ in inferred]
        out_rank = len(self.result.shape) if stmt is not None else None
        key, opdef = self._opdef(expr, [len(ts.shape) for ts in args], out_rank)
        sizes = self._bind_sizes(expr, opdef, args)
        dtype_name = (args[0] if args else self.result).dtype.name
        if stmt is not None:
            produced = self.result
            self._check_result(expr, opdef, sizes, dtype_name, stmt)
        else:
            missing = [ix for ix in opdef.output.indices if ix not in sizes]
            if missing:
                raise SpecError(
                    f"{expr.op}: cannot infer the size of {', '.join(missing)} here; "
                    "assign it to the declared result",
                    expr.loc,
                )
            shape = tuple(sizes[ix] for ix in opdef.output.indices)
            dtype_name = self._intermediate_dtype(key, args, dtype_name)
            produced = TensorSpec(shape, DTYPES[dtype_name], self.levels[0], _row_major(shape))
        name = target if target is not None else f"%{len(self.apps)}"
        if self.require_kernels and not self.ctx.ruleset.implementable(key):
            raise SpecError(
                f"{expr.op} has no kernel on target {self.ctx.target.name}, and no rewrite "
                "decomposes it into ops that have",
                expr.loc,
            )
        dtypes = (*(ts.dtype.name for ts in args), produced.dtype.name)
        if self.require_kernels and not self.ctx.ruleset.implementable(key, dtypes):
            raise SpecError(
                f"{expr.op} of {', '.join(dtypes[:-1]) or 'no inputs'} into {dtypes[-1]} has "
                f"no kernel on target {self.ctx.target.name}, and no rewrite decomposes it "
                "into ops that have",
                expr.loc,
            )
        self.apps.append(
            _App(expr, key, tuple(args), produced, tuple(n for _, n in inferred), name)
        )
        return produced, name

    def _intermediate_dtype(self, key: str, args: list[TensorSpec], dtype_name: str) -> str:
        """An intermediate's dtype: its inputs', or else the first wider one they accumulate
        into that the target implements (``relu(matmul(a, b))`` with bf16 ``a`` and ``b``
        computes the product in f32, as a declared f32 result would)."""
        if not self.require_kernels:
            return dtype_name
        ins = tuple(ts.dtype.name for ts in args)
        for name in (dtype_name, *DTYPES[dtype_name].accumulates_into):
            if self.ctx.ruleset.implementable(key, (*ins, name)):
                return name
        return dtype_name  # reported below, as the inputs' dtype

    def _opdef(self, call: Call, ranks: list[int], out_rank: int | None) -> tuple[str, OpDef]:
        """The key and definition of the overload of ``call.op`` for arguments of ``ranks``
        (and a result of ``out_rank`` when it is the declared result)."""
        ops = self.ctx.ruleset.ops
        overloads = ops.overloads(call.op)
        if not overloads:
            names = sorted(ops.names())
            close = difflib.get_close_matches(call.op, names, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(names)}"
            raise SpecError(f"unknown op {call.op!r} ({hint})", call.loc)
        got = len(call.args)
        same_arity = [(k, d) for k, d in overloads if len(d.inputs) == got]
        if not same_arity:
            takes = " or ".join(
                sorted({f"{len(d.inputs)} argument{'s' if len(d.inputs) != 1 else ''}"
                        for _, d in overloads})
            )  # fmt: skip
            params = {tuple(a.tensor for a in d.inputs) for _, d in overloads}
            if len(params) == 1:  # one form, or forms whose inputs have the same names
                names_ = ", ".join(params.pop())
                takes += f" ({names_})" if names_ else ""
            raise SpecError(f"{call.op} takes {takes}, found {got}", call.loc)
        if len(same_arity) == 1:
            return same_arity[0]  # rank mismatches are reported with the signature
        key = ops.resolve(call.op, ranks, out_rank)
        if key is None:
            fits = [k for k, d in same_arity if [len(a.indices) for a in d.inputs] == ranks]
            key = fits[0] if fits else None  # forms differing in the result: the first
        if key is None:
            forms = "; ".join(_signature(d) for _, d in same_arity)
            found = ", ".join(str(r) for r in ranks)
            raise SpecError(
                f"no form of {call.op} takes arguments of rank {found} (forms: {forms})",
                call.loc,
            )
        opdef = ops[key]
        assert not isinstance(opdef, GraphOp)
        return key, opdef

    def _bind_sizes(self, call: Call, opdef: OpDef, args: list[TensorSpec]) -> dict[str, int]:
        sizes: dict[str, int] = {}
        source: dict[str, str] = {}
        first = args[0] if args else None
        for ts, acc, arg in zip(args, opdef.inputs, call.args, strict=True):
            if len(ts.shape) != len(acc.indices):
                params = {p.name for p in self.func.params}
                hint = _vector_hint(ts, acc, sizes) if _arg_name(arg) in params else ""
                raise SpecError(
                    f"rank mismatch in {_signature(opdef)}: {_arg_name(arg)} has rank "
                    f"{len(ts.shape)} but {_access(acc)} needs rank {len(acc.indices)}{hint}",
                    arg.loc,
                )
            if first is not None and ts.dtype != first.dtype:
                raise SpecError(
                    f"dtype mismatch in {call.op}: {_arg_name(call.args[0])} is "
                    f"{first.dtype.name} but {_arg_name(arg)} is {ts.dtype.name}",
                    arg.loc,
                )
            for ix, n in zip(acc.indices, ts.shape, strict=True):
                if ix in sizes and sizes[ix] != n:
                    raise SpecError(
                        f"shape mismatch in {_signature(opdef)}: {ix} is {sizes[ix]} in "
                        f"{source[ix]} but {n} in {_arg_name(arg)}",
                        arg.loc,
                    )
                sizes[ix] = n
                source.setdefault(ix, _arg_name(arg))
        return sizes

    def _check_result(
        self, call: Call, opdef: OpDef, sizes: dict[str, int], dtype_name: str, stmt: Stmt
    ) -> None:
        out = self.result
        if len(out.shape) != len(opdef.output.indices):
            raise SpecError(
                f"rank mismatch in {_signature(opdef)}: result {stmt.target} has rank "
                f"{len(out.shape)} but {_access(opdef.output)} needs rank "
                f"{len(opdef.output.indices)}",
                stmt.loc,
            )
        for ix, n in zip(opdef.output.indices, out.shape, strict=True):
            if ix in sizes and sizes[ix] != n:
                raise SpecError(
                    f"shape mismatch in {_signature(opdef)}: {ix} is {sizes[ix]} in the "
                    f"arguments but {n} in result {stmt.target}",
                    stmt.loc,
                )
            sizes[ix] = n
        # An op gives its inputs' dtype, or a wider one they accumulate into (bf16 -> f32).
        wider = DTYPES[dtype_name].accumulates_into
        if call.args and out.dtype.name != dtype_name and out.dtype.name not in wider:
            gives = " or ".join((dtype_name, *wider))
            raise SpecError(
                f"dtype mismatch: result {stmt.target} is {out.dtype.name} but {call.op} "
                f"gives {gives}",
                stmt.loc,
            )


def _signature(opdef: OpDef) -> str:
    ins = ", ".join(_access(a) for a in opdef.inputs)
    return f"{opdef.name}({ins}) -> {_access(opdef.output)}"  # the declared name


def _access(acc: Access) -> str:
    return f"{acc.tensor}[{', '.join(acc.indices)}]"


def _vector_hint(ts: TensorSpec, acc: Access, sizes: dict[str, int]) -> str:
    """How to declare a vector parameter where ``acc`` needs a matrix: as one row, or as one
    column where the row index is already bound to its length (``b`` of ``matmul(x, w)``)."""
    if len(ts.shape) != 1 or len(acc.indices) != 2:
        return ""
    n, (rows, cols) = ts.shape[0], acc.indices
    column = sizes.get(rows) == n and sizes.get(cols) != n
    shape, what = (f"[{n}, 1]", "column") if column else (f"[1, {n}]", "row")
    return f" (a vector may be declared as one {what}: {ts.dtype.name}{shape})"


def _arg_name(arg: Call | Var) -> str:
    return arg.name if isinstance(arg, Var) else f"{arg.op}(...)"


def _row_major(shape: tuple[int, ...]) -> Layout:
    lay = layout_by_name("row_major", len(shape))
    assert lay is not None
    canon = lay.canonical(shape)
    assert canon is not None
    return canon
