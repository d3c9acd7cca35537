"""Spec files -> typed functions -> root Specs.

A spec file holds one or more ``func``s. Each is a small dataflow graph of op applications
over typed tensor parameters; the check pass resolves op names against the rule set, binds
index sizes (reporting shape mismatches), and builds the root Spec. Knows no op by name.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import lark

from morello.dtypes import DTYPES
from morello.errors import SourceLocation, SpecError, SpecSyntaxError
from morello.lang._lark import loc_of, parse
from morello.lang.syntax import TensorType, tensor_type
from morello.layout import LAYOUT_FAMILIES, Layout, layout_by_name
from morello.spec import Spec, TensorSpec

if TYPE_CHECKING:
    from morello.context import SynthesisContext


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
        SpecError: the file cannot be read.
    """
    path = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror.lower() if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
            raise SpecError(f"cannot read spec file {path}: {reason}") from None
    tree = parse("spec.lark", text, path, SpecSyntaxError)
    return SpecFile(path, tuple(_func(path, f) for f in tree.children))  # type: ignore[arg-type]


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


def tensor_spec_of(tt: TensorType, what: str, levels: list[str]) -> TensorSpec:
    """The TensorSpec a spec-file type denotes (defaults: first level, row-major)."""
    if tt.dtype not in DTYPES:
        raise SpecError(f"{what}: dtype {tt.dtype} is not supported yet", tt.loc)
    for d in tt.dims:
        if not isinstance(d, int):
            raise SpecError(f"{what}: dimensions must be integers, found {d!r}", tt.loc)
        if d <= 0:
            raise SpecError(f"{what}: dimensions must be positive, found {d}", tt.loc)
    if tt.vector_size is not None:
        raise SpecError(f"{what}: vector sizes are chosen by the synthesizer, not written", tt.loc)
    if len(tt.levels) > 1:
        raise SpecError(f"{what}: a parameter lives in exactly one memory level", tt.loc)
    level = tt.levels[0] if tt.levels else levels[0]
    if level not in levels:
        raise SpecError(
            f"{what}: unknown memory level {level!r} (this target has {', '.join(levels)})",
            tt.loc,
        )
    if len(tt.props) > 1:
        raise SpecError(f"{what}: more than one layout given", tt.loc)
    name = tt.props[0] if tt.props else "row_major"
    shape = tuple(int(d) for d in tt.dims)
    layout = layout_by_name(name, len(shape))
    if layout is None:
        known = ", ".join(LAYOUT_FAMILIES)
        raise SpecError(f"{what}: unknown layout {name!r} (known: {known})", tt.loc)
    canon = layout.canonical(shape)
    assert canon is not None
    return TensorSpec(shape, tt.dtype, level, canon)


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


def build_program(func: FuncDef, ctx: SynthesisContext) -> Program:
    """Check ``func`` against the rule set and build its root Spec.

    Raises:
        SpecError: unknown op or name, arity, shape or dtype mismatch, or a graph of more
            ops than synthesis supports.
    """
    levels = [lv.name for lv in ctx.target.levels]
    env: dict[str, TensorSpec] = {}
    for p in func.params:
        if p.name in env:
            raise SpecError(f"parameter {p.name!r} declared twice", p.loc)
        env[p.name] = tensor_spec_of(p.type, f"parameter {p.name}", levels)
    if func.result.name in env:
        raise SpecError(f"result {func.result.name!r} has the name of a parameter", func.result.loc)
    result = tensor_spec_of(func.result.type, f"result {func.result.name}", levels)
    apps: list[tuple[Call, list[TensorSpec], TensorSpec]] = []

    def infer(expr: Call | Var, out: TensorSpec | None) -> TensorSpec:
        if isinstance(expr, Var):
            if expr.name not in env:
                raise SpecError(f"unknown name {expr.name!r}", expr.loc)
            return env[expr.name]
        if expr.op not in ctx.ruleset.ops:
            known = ", ".join(sorted(ctx.ruleset.ops))
            raise SpecError(f"unknown op {expr.op!r} (known: {known})", expr.loc)
        opdef = ctx.ruleset.ops[expr.op]
        if len(expr.args) != len(opdef.inputs):
            raise SpecError(
                f"{expr.op} takes {len(opdef.inputs)} argument(s), found {len(expr.args)}",
                expr.loc,
            )
        args = [infer(a, None) for a in expr.args]
        for a, acc, arg in zip(args, opdef.inputs, expr.args, strict=True):
            if len(a.shape) != len(acc.indices):
                raise SpecError(
                    f"{expr.op}: argument {acc.tensor} must have rank {len(acc.indices)}, "
                    f"found {len(a.shape)}",
                    arg.loc,
                )
        dtypes = {a.dtype for a in args}
        if len(dtypes) > 1:
            found = ", ".join(a.dtype for a in args)
            raise SpecError(f"{expr.op}: arguments must share a dtype, found {found}", expr.loc)
        sizes: dict[str, int] = {}
        for a, acc in zip(args, opdef.inputs, strict=True):
            for dim, (ix, n) in enumerate(zip(acc.indices, a.shape, strict=True)):
                if ix in sizes and sizes[ix] != n:
                    raise SpecError(
                        f"{expr.op}: dimension {dim} of {acc.tensor} ({ix}) is {n}, "
                        f"but an earlier operand gives {ix} = {sizes[ix]}",
                        expr.loc,
                    )
                sizes[ix] = n
        dtype_name = args[0].dtype if args else (out.dtype if out else "f32")
        if out is not None:
            if len(out.shape) != len(opdef.output.indices):
                raise SpecError(
                    f"{expr.op}: result must have rank {len(opdef.output.indices)}, "
                    f"found {len(out.shape)}",
                    expr.loc,
                )
            for ix, n in zip(opdef.output.indices, out.shape, strict=True):
                if ix in sizes and sizes[ix] != n:
                    raise SpecError(
                        f"{expr.op}: result dimension {ix} is {n}, but the arguments give {sizes[ix]}",
                        expr.loc,
                    )
                sizes[ix] = n
            if args and out.dtype != dtype_name:
                raise SpecError(
                    f"{expr.op}: result dtype {out.dtype} differs from argument dtype {dtype_name}",
                    expr.loc,
                )
            produced = out
        else:
            missing = [ix for ix in opdef.output.indices if ix not in sizes]
            if missing:
                raise SpecError(
                    f"{expr.op}: cannot infer the size of {', '.join(missing)} here; "
                    "assign it to a declared result",
                    expr.loc,
                )
            shape = tuple(sizes[ix] for ix in opdef.output.indices)
            produced = TensorSpec(shape, dtype_name, levels[0], _row_major(shape))
        apps.append((expr, args, produced))
        return produced

    assigned: set[str] = set()
    for st in func.stmts:
        if st.target in env or st.target in assigned:
            raise SpecError(f"{st.target!r} is assigned more than once", st.loc)
        out = result if st.target == func.result.name else None
        ts = infer(st.expr, out)
        env[st.target] = ts
        assigned.add(st.target)
    if func.result.name not in assigned:
        raise SpecError(f"result {func.result.name!r} is never assigned", func.result.loc)
    if len(apps) != 1:
        raise SpecError(
            f"function {func.name} applies {len(apps)} ops; synthesis of graphs of several "
            "ops is not supported yet (write one op per function)",
            apps[1][0].loc if len(apps) > 1 else func.loc,
        )
    call, args, produced = apps[0]
    if not all(isinstance(a, Var) for a in call.args):
        raise SpecError("nested op applications are not supported yet", call.loc)
    limits = ctx.target.max_limits()
    spec = Spec(call.op, (*args, produced), False, limits, serial=not func.parallel)
    operand_params = (*(a.name for a in call.args if isinstance(a, Var)), func.result.name)
    params = tuple((p.name, env[p.name]) for p in func.params)
    return Program(func.name, spec, params, (func.result.name, result), operand_params)


def _row_major(shape: tuple[int, ...]) -> Layout:
    lay = layout_by_name("row_major", len(shape))
    assert lay is not None
    canon = lay.canonical(shape)
    assert canon is not None
    return canon
