"""Rule files -> ops, rewrite rules and kernels (syntax errors carry file:line:col).

The check pass here covers what one file can know: placeholders in templates name operands,
op expressions use declared indices, schema names exist. Cross-file checks (a kernel's op is
declared somewhere, its levels exist on the target) happen when a rule set is assembled.
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs
import lark

from morello.errors import RuleError, RuleSyntaxError, SourceLocation
from morello.lang._lark import loc_of, parse
from morello.lang.syntax import tensor_type
from morello.rules.index_notation import Access, BinOp, Const, Expr, Func, OpDef, Reduce
from morello.rules.kernels import PLACEHOLDER, CostTerm, Kernel, OperandPattern
from morello.rules.rewrites import (
    SCHEMAS,
    SIZE_POLICIES,
    DecomposeRule,
    OpPattern,
    Rule,
    SchemaRule,
    Stage,
)

_KERNEL_PROPS = ("contiguous",)


@attrs.frozen
class RuleFile:
    """The declarations of one ``.rules`` file; its rule-set name is the file stem."""

    rule_set: str
    path: str
    requires: tuple[str, ...]
    includes: tuple[str, ...]
    ops: tuple[OpDef, ...]
    rules: tuple[Rule, ...]
    kernels: tuple[Kernel, ...]


def parse_rule_file(path: str | Path, text: str | None = None) -> RuleFile:
    """Parse and check one rule file.

    Raises:
        RuleSyntaxError: the file does not follow the grammar.
        RuleError: a declaration is well-formed but inconsistent.
    """
    path = str(path)
    if text is None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RuleError(f"cannot read rule file {path}: {_reason(exc)}") from None
    tree = parse("rules.lark", text, path, RuleSyntaxError)
    return _Builder(path).build(tree)


def _reason(exc: Exception) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc)


class _Builder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.requires: list[str] = []
        self.includes: list[str] = []
        self.ops: list[OpDef] = []
        self.rules: list[Rule] = []
        self.kernels: list[Kernel] = []

    def loc(self, node: lark.Tree[lark.Token] | lark.Token) -> SourceLocation:
        return loc_of(self.path, node)

    def build(self, tree: lark.Tree[lark.Token]) -> RuleFile:
        for item in tree.children:
            assert isinstance(item, lark.Tree)
            getattr(self, f"_{item.data}")(item)
        return RuleFile(
            Path(self.path).stem,
            self.path,
            tuple(self.requires),
            tuple(self.includes),
            tuple(self.ops),
            tuple(self.rules),
            tuple(self.kernels),
        )

    def _requires(self, item: lark.Tree[lark.Token]) -> None:
        self.requires.extend(str(t) for t in item.children)

    def _include(self, item: lark.Tree[lark.Token]) -> None:
        self.includes.append(str(item.children[0]))

    # ---- ops -----------------------------------------------------------------------------

    def _op_def(self, item: lark.Tree[lark.Token]) -> None:
        name_tok = item.children[0]
        rest = item.children[1:]
        inputs: list[Access] = []
        if len(rest) == 3:
            params = rest[0]
            assert isinstance(params, lark.Tree)
            inputs = [self._access(a) for a in params.children]  # type: ignore[arg-type]
            rest = rest[1:]
        out_tree, expr_tree = rest
        output = self._access(out_tree)  # type: ignore[arg-type]
        expr = self._expr(expr_tree)  # type: ignore[arg-type]
        names = [a.tensor for a in (*inputs, output)]
        loc = self.loc(item)
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise RuleError(f"op {name_tok}: operand {dup!r} declared twice", loc)
        for acc in _all_accesses(expr):
            decl = next((a for a in inputs if a.tensor == acc.tensor), None)
            if decl is None:
                raise RuleError(f"op {name_tok}: {acc.tensor!r} is not an input", loc)
            if len(decl.indices) != len(acc.indices):
                raise RuleError(
                    f"op {name_tok}: {acc.tensor} has rank {len(decl.indices)}, "
                    f"used with {len(acc.indices)} indices",
                    loc,
                )
        opdef = OpDef(str(name_tok), tuple(inputs), output, expr, loc)
        reduced = _reduced(expr)
        for v in opdef.reduction_vars:
            if v not in reduced:
                raise RuleError(
                    f"op {name_tok}: index {v!r} is not in the output and not summed", loc
                )
        self.ops.append(opdef)

    def _access(self, tree: lark.Tree[lark.Token]) -> Access:
        name, *indices = (str(t) for t in tree.children)
        return Access(name, tuple(indices))

    def _expr(self, tree: lark.Tree[lark.Token] | lark.Token) -> Expr:
        if isinstance(tree, lark.Token):
            raise AssertionError(tree)
        kind = tree.data
        ch = tree.children
        if kind == "access":
            return self._access(tree)
        if kind == "const":
            return Const(float(str(ch[0])))
        if kind in ("add", "sub", "mul"):
            op = {"add": "+", "sub": "-", "mul": "*"}[str(kind)]
            return BinOp(op, self._expr(ch[0]), self._expr(ch[1]))
        if kind == "func":
            fname = str(ch[0])
            if fname not in ("max", "min"):
                raise RuleError(f"unknown function {fname!r} (known: max, min)", self.loc(tree))
            return Func(fname, tuple(self._expr(c) for c in ch[1:]))
        if kind == "reduce":
            *idx, body = ch
            return Reduce(tuple(str(i) for i in idx), self._expr(body))
        raise AssertionError(kind)

    # ---- rewrites ------------------------------------------------------------------------

    def _schema_rewrite(self, item: lark.Tree[lark.Token]) -> None:
        name_tok, pats, *options = item.children
        assert isinstance(pats, lark.Tree)
        loc = self.loc(item)
        if str(name_tok) not in SCHEMAS:
            raise RuleError(
                f"unknown rewrite schema {str(name_tok)!r} (known: {', '.join(SCHEMAS)}); "
                "op-specific rewrites are written 'rewrite name: op(args) -> out => { ... }'",
                self.loc(name_tok),  # type: ignore[arg-type]
            )
        patterns = []
        for p in pats.children:
            assert isinstance(p, lark.Tree)
            toks = [str(t) for t in p.children]
            patterns.append(OpPattern(toks[-1], accum_only=len(toks) == 2))
        sizes = "pow2"
        layouts: tuple[str, ...] = ("*",)
        for opt in options:
            assert isinstance(opt, lark.Tree)
            if opt.data == "sizes_option":
                sizes = str(opt.children[0])
                if sizes not in SIZE_POLICIES:
                    raise RuleError(
                        f"unknown size policy {sizes!r} (known: {', '.join(SIZE_POLICIES)})",
                        self.loc(opt),
                    )
            else:
                layouts = tuple(str(t) for t in opt.children)
        self.rules.append(SchemaRule(str(name_tok), tuple(patterns), sizes, layouts, loc))

    def _decompose_rewrite(self, item: lark.Tree[lark.Token]) -> None:
        ch = list(item.children)
        name, op = str(ch[0]), str(ch[1])
        params: tuple[str, ...] = ()
        idx = 2
        if isinstance(ch[idx], lark.Tree) and ch[idx].data == "names":  # type: ignore[union-attr]
            params = tuple(str(t) for t in ch[idx].children)  # type: ignore[union-attr]
            idx += 1
        output = str(ch[idx])
        known = (*params, output)
        stages = []
        for st in ch[idx + 1 :]:
            assert isinstance(st, lark.Tree)
            target, assign, sop, *rest = st.children
            args = tuple(str(t) for t in rest[0].children) if rest else ()  # type: ignore[union-attr]
            for n in (*args, str(target)):
                if n not in known:
                    raise RuleError(
                        f"rewrite {name}: {n!r} is not an operand of the pattern", self.loc(st)
                    )
            stages.append(Stage(str(target), str(assign) == "+=", str(sop), args))
        self.rules.append(DecomposeRule(name, op, params, output, tuple(stages), self.loc(item)))

    # ---- kernels -------------------------------------------------------------------------

    def _kernel(self, item: lark.Tree[lark.Token]) -> None:
        name_tok, pattern, cost_clause, c_clause = item.children
        assert isinstance(pattern, lark.Tree)
        out_tree, assign, op_tok, *rest = pattern.children
        ins = []
        if rest:
            ins = [self._operand(o) for o in rest[0].children]  # type: ignore[union-attr,arg-type]
        out = self._operand(out_tree)  # type: ignore[arg-type]
        operands = (*ins, out)
        names = [o.name for o in operands]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise RuleError(f"kernel {name_tok}: operand {dup!r} named twice", self.loc(pattern))
        assert isinstance(cost_clause, lark.Tree) and isinstance(c_clause, lark.Tree)
        cost = self._cost(cost_clause.children[0])  # type: ignore[arg-type]
        lines = []
        for tok in c_clause.children:
            assert isinstance(tok, lark.Token)
            line = _unescape(str(tok)[1:-1])
            for m in PLACEHOLDER.finditer(line):
                if m.group(2) not in names:
                    raise RuleError(
                        f"kernel {name_tok}: template names unknown operand {{{m.group(0)[1:-1]}}}"
                        f" (operands: {', '.join(names)})",
                        self.loc(tok),
                    )
            stray = _stray_brace(line)
            if stray is not None:
                raise RuleError(
                    f"kernel {name_tok}: unknown placeholder {stray}; "
                    "templates allow only {x} and {&x} for operands x",
                    self.loc(tok),
                )
            lines.append(line)
        self.kernels.append(
            Kernel(
                name=str(name_tok),
                op=str(op_tok),
                accum=str(assign) == "+=",
                operands=operands,
                cost=cost,
                c_lines=tuple(lines),
                rule_set=Path(self.path).stem,
                requires=tuple(self.requires),
                includes=tuple(self.includes),
                loc=self.loc(item),
            )
        )

    def _operand(self, tree: lark.Tree[lark.Token]) -> OperandPattern:
        name_tok, tt_tree = tree.children
        tt = tensor_type(self.path, tt_tree)  # type: ignore[arg-type]
        contiguous = False
        layouts = []
        for prop in tt.props:
            if prop in _KERNEL_PROPS:
                contiguous = True
            else:
                layouts.append(prop)
        return OperandPattern(
            str(name_tok), tt.dtype, tt.dims, tt.levels, tt.vector_size, contiguous, tuple(layouts)
        )

    def _cost(self, tree: lark.Tree[lark.Token]) -> tuple[CostTerm, ...]:
        if tree.data == "cost_add":
            left, right = tree.children
            return (*self._cost(left), *self._cost(right))  # type: ignore[arg-type]
        factor = 1
        names = []
        for f in tree.children:
            assert isinstance(f, lark.Tree)
            tok = str(f.children[0])
            if f.data == "cost_int":
                factor *= int(tok)
            else:
                names.append(tok)
        return (CostTerm(factor, tuple(names)),)


def _all_accesses(e: Expr) -> list[Access]:
    if isinstance(e, Access):
        return [e]
    if isinstance(e, BinOp):
        return _all_accesses(e.lhs) + _all_accesses(e.rhs)
    if isinstance(e, Func):
        return [a for x in e.args for a in _all_accesses(x)]
    if isinstance(e, Reduce):
        return _all_accesses(e.body)
    return []


def _reduced(e: Expr) -> set[str]:
    if isinstance(e, Reduce):
        return set(e.indices) | _reduced(e.body)
    if isinstance(e, BinOp):
        return _reduced(e.lhs) | _reduced(e.rhs)
    if isinstance(e, Func):
        return set().union(*(_reduced(a) for a in e.args))
    return set()


def _unescape(s: str) -> str:
    return s.replace('\\"', '"').replace("\\\\", "\\")


_BAD_PLACEHOLDER = re.compile(r"\{[^{}\s]+\}")


def _stray_brace(line: str) -> str | None:
    """A brace group that looks like a placeholder but is not ``{x}`` or ``{&x}``.

    Braces with spaces inside (C blocks, compound literals written ``{ 0 }``) pass.
    """
    m = _BAD_PLACEHOLDER.search(PLACEHOLDER.sub("", line))
    return None if m is None else m.group(0)
