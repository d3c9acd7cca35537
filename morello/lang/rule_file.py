"""Rule files -> ops, rewrite rules and kernels (syntax errors carry file:line:col).

The check pass here covers what one file can know: placeholders in templates name operands,
op expressions use declared indices, schema names exist. Cross-file checks (a kernel's op is
declared somewhere, its levels exist on the target) happen when a rule set is assembled.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import lark

from morello.errors import RuleError, RuleSyntaxError, SourceLocation
from morello.lang._lark import loc_of, parse, read_source
from morello.lang.syntax import tensor_type
from morello.rules.index_notation import (
    FUNC_ARITIES,
    Access,
    BinOp,
    Const,
    Expr,
    Func,
    OpDef,
    Reduce,
)
from morello.rules.kernels import MAX_MASK_BITS, PLACEHOLDER, CostTerm, Kernel, OperandPattern
from morello.rules.rewrites import (
    DecomposeRule,
    OpPattern,
    Rule,
    SchemaRule,
    Stage,
)
from morello.rules.ruleset import RuleFile
from morello.rules.schemas import (
    BUILTIN_SCHEMAS,
    BUILTIN_SIZE_POLICIES,
    LEVEL_KINDS,
    OPERAND_SETS,
)

_KERNEL_PROPS = ("contiguous",)


def parse_rule_file(
    path: str | Path,
    text: str | None = None,
    schemas: Iterable[str] = BUILTIN_SCHEMAS,
    size_policies: Iterable[str] = BUILTIN_SIZE_POLICIES,
) -> RuleFile:
    """Parse and check one rule file.

    ``schemas`` and ``size_policies`` are the names a ``rewrite`` line may use: the
    registered ones (the built-ins unless a plugin adds more).

    Raises:
        RuleSyntaxError: the file does not follow the grammar.
        RuleError: a declaration is well-formed but inconsistent.
    """
    path = str(path)
    if text is None:
        text = read_source(path, "rule file", RuleError)
    tree = parse("rules.lark", text, path, RuleSyntaxError)
    return _Builder(path, tuple(schemas), tuple(size_policies)).build(tree)


class _Builder:
    def __init__(self, path: str, schemas: tuple[str, ...], size_policies: tuple[str, ...]) -> None:
        self.path = path
        self.schemas = schemas
        self.size_policies = size_policies
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
        decls: list[tuple[Access, SourceLocation]] = []
        if len(rest) == 3:
            params = rest[0]
            assert isinstance(params, lark.Tree)
            decls = [self._access(a) for a in params.children]  # type: ignore[arg-type]
            rest = rest[1:]
        out_tree, expr_tree = rest
        out_decl = self._access(out_tree)  # type: ignore[arg-type]
        uses: list[tuple[Access, SourceLocation]] = []
        expr = self._expr(expr_tree, uses)  # type: ignore[arg-type]
        name = str(name_tok)
        seen: set[str] = set()
        for acc, acc_loc in (*decls, out_decl):
            if acc.tensor in seen:
                raise RuleError(f"op {name}: operand {acc.tensor!r} is declared twice", acc_loc)
            seen.add(acc.tensor)
        inputs = {acc.tensor: acc for acc, _ in decls}
        for acc, acc_loc in uses:
            decl = inputs.get(acc.tensor)
            if decl is None:
                known = f"inputs: {', '.join(inputs)}" if inputs else "it has no inputs"
                raise RuleError(f"op {name}: unknown tensor {acc.tensor!r} ({known})", acc_loc)
            if len(decl.indices) != len(acc.indices):
                used = len(acc.indices)
                raise RuleError(
                    f"op {name}: {acc.tensor} has rank {len(decl.indices)} "
                    f"but is used with {used} ind{'ex' if used == 1 else 'ices'}",
                    acc_loc,
                )
        loc = self.loc(item)
        opdef = OpDef(name, tuple(inputs.values()), out_decl[0], expr, loc)
        inner = _reduced(expr)
        for acc, acc_loc in uses:
            stray = next(
                (ix for ix in acc.indices if ix not in opdef.index_vars and ix not in inner),
                None,
            )
            if stray is not None:
                raise RuleError(
                    f"op {name}: index {stray!r} is not declared by any operand", acc_loc
                )
        reduced = _reduced(expr)
        for v in opdef.reduction_vars:
            if v not in reduced:
                raise RuleError(
                    f"op {name}: index {v!r} is not in the output and not summed",
                    self.loc(expr_tree),  # type: ignore[arg-type]
                )
        self.ops.append(opdef)

    def _access(self, tree: lark.Tree[lark.Token]) -> tuple[Access, SourceLocation]:
        name, *indices = (str(t) for t in tree.children)
        return Access(name, tuple(indices)), self.loc(tree)

    def _expr(
        self, tree: lark.Tree[lark.Token] | lark.Token, uses: list[tuple[Access, SourceLocation]]
    ) -> Expr:
        if isinstance(tree, lark.Token):
            raise AssertionError(tree)
        kind = tree.data
        ch = tree.children
        if kind == "access":
            use = self._access(tree)
            uses.append(use)
            return use[0]
        if kind == "const":
            return Const(float(str(ch[0])))
        if kind == "const_inf":
            return Const(float("inf"))
        if kind == "neg":
            inner = self._expr(ch[0], uses)
            if isinstance(inner, Const):
                return Const(-inner.value)
            return BinOp("-", Const(0.0), inner)
        if kind in ("add", "sub", "mul", "div"):
            op = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[str(kind)]
            return BinOp(op, self._expr(ch[0], uses), self._expr(ch[1], uses))
        if kind == "func_max":
            if len(ch) != 2:
                raise RuleError(f"max takes 2 arguments, found {len(ch)}", self.loc(tree))
            return Func("max", tuple(self._expr(c, uses) for c in ch))
        if kind == "func":
            fname = str(ch[0])
            if fname not in FUNC_ARITIES:
                known = ", ".join(sorted(FUNC_ARITIES))
                raise RuleError(f"unknown function {fname!r} (known: {known})", self.loc(tree))
            arity = FUNC_ARITIES[fname]
            if len(ch) - 1 != arity:
                raise RuleError(
                    f"{fname} takes {arity} arguments, found {len(ch) - 1}", self.loc(tree)
                )
            return Func(fname, tuple(self._expr(c, uses) for c in ch[1:]))
        if kind in ("reduce", "reduce_max"):
            *idx, body = ch
            combiner = "sum" if kind == "reduce" else "max"
            return Reduce(tuple(str(i) for i in idx), self._expr(body, uses), combiner)
        raise AssertionError(kind)

    # ---- rewrites ------------------------------------------------------------------------

    def _schema_rewrite(self, item: lark.Tree[lark.Token]) -> None:
        name_tok, pats, *options = item.children
        assert isinstance(pats, lark.Tree)
        loc = self.loc(item)
        if str(name_tok) not in self.schemas:
            close = difflib.get_close_matches(str(name_tok), self.schemas, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(self.schemas)}"
            raise RuleError(
                f"unknown rewrite schema {str(name_tok)!r} ({hint})",
                self.loc(name_tok),  # type: ignore[arg-type]
            )
        patterns = []
        for p in pats.children:
            assert isinstance(p, lark.Tree)
            toks = [str(t) for t in p.children]
            patterns.append(OpPattern(toks[-1], accum_only=len(toks) == 2))
        sizes = "pow2"
        layouts: tuple[str, ...] = ("*",)
        into: tuple[str, ...] = LEVEL_KINDS
        operands = "all"
        for opt in options:
            assert isinstance(opt, lark.Tree)
            if opt.data == "operands_option":
                operands = str(opt.children[0])
                if operands not in OPERAND_SETS:
                    raise RuleError(
                        f"unknown operand set {operands!r} (known: {', '.join(OPERAND_SETS)})",
                        self.loc(opt),
                    )
            elif opt.data == "into_option":
                into = tuple(str(t) for t in opt.children)
                for kind in into:
                    if kind not in LEVEL_KINDS:
                        raise RuleError(
                            f"unknown kind of level {kind!r} (known: {', '.join(LEVEL_KINDS)})",
                            self.loc(opt),
                        )
            elif opt.data == "sizes_option":
                sizes = str(opt.children[0])
                if sizes not in self.size_policies:
                    raise RuleError(
                        f"unknown size policy {sizes!r} (known: {', '.join(self.size_policies)})",
                        self.loc(opt),
                    )
            else:
                layouts = tuple(str(t) for t in opt.children)
        self.rules.append(
            SchemaRule(str(name_tok), tuple(patterns), sizes, layouts, loc, into, operands)
        )

    def _decompose_rewrite(self, item: lark.Tree[lark.Token]) -> None:
        ch = list(item.children)
        name, op = str(ch[0]), str(ch[1])
        params: tuple[str, ...] = ()
        idx = 2
        if isinstance(ch[idx], lark.Tree) and ch[idx].data == "names":  # type: ignore[union-attr]
            params = tuple(str(t) for t in ch[idx].children)  # type: ignore[union-attr]
            idx += 1
        output = str(ch[idx])
        pattern = (*params, output)
        known = list(pattern)
        temps: dict[str, lark.Token] = {}  # temporary -> where it is assigned
        used: set[str] = set()
        stages = []
        registers_only = False
        if isinstance(ch[-1], lark.Tree) and ch[-1].data == "in_registers":
            registers_only = True
            ch = ch[:-1]
        for st in ch[idx + 1 :]:
            assert isinstance(st, lark.Tree)
            target, assign, sop, *rest = st.children
            arg_toks = list(rest[0].children) if rest else []  # type: ignore[union-attr]
            for tok in arg_toks:
                if str(tok) not in known:
                    raise RuleError(
                        f"rewrite {name}: unknown tensor {str(tok)!r} "
                        f"(the pattern names {', '.join(pattern)})",
                        self.loc(tok),
                    )
                used.add(str(tok))
            if str(target) not in known:
                # A new name assigned with `=` is a temporary the later stages read.
                if str(assign) == "+=":
                    raise RuleError(
                        f"rewrite {name}: unknown tensor {str(target)!r} "
                        f"(the pattern names {', '.join(pattern)})",
                        self.loc(target),
                    )
                known.append(str(target))
                temps[str(target)] = target  # type: ignore[assignment]
            args = tuple(str(t) for t in arg_toks)
            stages.append(Stage(str(target), str(assign) == "+=", str(sop), args))
        for temp, tok in temps.items():
            if temp not in used:
                raise RuleError(
                    f"rewrite {name}: temporary {temp!r} is assigned but never read",
                    self.loc(tok),
                )
        if registers_only and not temps:
            raise RuleError(
                f"rewrite {name}: `in registers` places temporaries, but it has none",
                self.loc(item),
            )
        self.rules.append(
            DecomposeRule(name, op, params, output, tuple(stages), self.loc(item), registers_only)
        )

    # ---- kernels -------------------------------------------------------------------------

    def _kernel(self, item: lark.Tree[lark.Token]) -> None:
        names_tree, *rest = item.children
        assert isinstance(names_tree, lark.Tree)
        name_toks = names_tree.children
        patterns = [c for c in rest if isinstance(c, lark.Tree) and c.data == "kernel_pattern"]
        clauses = rest[len(patterns) : -1]
        cost_clause, c_clause = clauses[-1], rest[-1]
        if len(name_toks) != len(patterns):
            listed = ", ".join(map(str, name_toks))
            raise RuleError(
                f"kernel {listed}: {len(name_toks)} name(s) but {len(patterns)} pattern(s); "
                "each pattern needs a name, in order",
                self.loc(item),
            )
        scratch: list[tuple[str, int]] = []
        where: list[lark.Tree[lark.Token]] = []
        for clause in clauses[:-1]:
            assert isinstance(clause, lark.Tree)
            if clause.data == "where_clause":
                where = clause.children  # type: ignore[assignment]
                continue
            for it in clause.children:
                assert isinstance(it, lark.Tree)
                units_tok, level_tok = it.children
                scratch.append((str(level_tok), int(str(units_tok))))
        assert isinstance(cost_clause, lark.Tree) and isinstance(c_clause, lark.Tree)
        cost = self._cost(cost_clause.children[0])  # type: ignore[arg-type]
        for i, (name_tok, pattern) in enumerate(zip(name_toks, patterns, strict=True)):
            loc = self.loc(item) if i == 0 else self.loc(pattern)
            self._kernel_of(str(name_tok), pattern, loc, where, scratch, cost, c_clause)

    def _kernel_of(
        self,
        name: str,
        pattern: lark.Tree[lark.Token],
        loc: SourceLocation,
        where: list[lark.Tree[lark.Token]],
        scratch: list[tuple[str, int]],
        cost: tuple[CostTerm, ...],
        c_clause: lark.Tree[lark.Token],
    ) -> None:
        """One kernel: ``pattern`` with the clauses its declaration gives all its names."""
        out_tree, assign, op_tok, *rest = pattern.children
        trees = [*(rest[0].children if rest else ()), out_tree]  # type: ignore[union-attr]
        operands = tuple(self._operand(t) for t in trees)  # type: ignore[arg-type]
        names: list[str] = []
        for pat, tree in zip(operands, trees, strict=True):
            if pat.name in names:
                raise RuleError(
                    f"kernel {name}: operand {pat.name!r} is declared twice",
                    self.loc(tree),  # type: ignore[arg-type]
                )
            names.append(pat.name)
        dim_vars = [d for p in operands for d in p.dims if isinstance(d, str) and d != "*"]
        for d in dim_vars:
            if d in names:
                raise RuleError(f"kernel {name}: {d!r} names both an operand and a dimension", loc)
        bounds = self._bounds(name, where, dim_vars)
        lines = []
        for tok in c_clause.children:
            assert isinstance(tok, lark.Token)
            self._check_template(name, tok, names, dim_vars, bounds)
            lines.append(_unescape(str(tok)[1:-1]))
        self.kernels.append(
            Kernel(
                name=name,
                op=str(op_tok),
                accum=str(assign) == "+=",
                operands=operands,
                cost=cost,
                c_lines=tuple(lines),
                rule_set=Path(self.path).stem,
                requires=tuple(self.requires),
                includes=tuple(self.includes),
                scratch=tuple(scratch),
                bounds=tuple((v, lo, hi) for v, (lo, hi) in bounds.items()),
                loc=loc,
            )
        )

    def _bounds(
        self, kernel: str, where: list[lark.Tree[lark.Token]], dim_vars: list[str]
    ) -> dict[str, tuple[int, int]]:
        """``where`` bounds by dim variable: each names a dim variable of the pattern once,
        with ``1 <= lowest <= highest``."""
        bounds: dict[str, tuple[int, int]] = {}
        for bound in where:
            *lo_tok, var_tok, hi_tok = bound.children
            var, lo, hi = str(var_tok), int(str(lo_tok[0])) if lo_tok else 1, int(str(hi_tok))
            if var not in dim_vars:
                known = ", ".join(dict.fromkeys(dim_vars)) or "none"
                raise RuleError(
                    f"kernel {kernel}: 'where' bounds {var!r}, which is not a dim variable "
                    f"of the pattern (dim variables: {known})",
                    self.loc(var_tok),
                )
            if var in bounds:
                raise RuleError(f"kernel {kernel}: {var!r} is bounded twice", self.loc(var_tok))
            if not 1 <= lo <= hi:
                raise RuleError(
                    f"kernel {kernel}: empty or non-positive bound {lo} <= {var} <= {hi}",
                    self.loc(bound),
                )
            bounds[var] = (lo, hi)
        return bounds

    def _check_template(
        self,
        kernel: str,
        tok: lark.Token,
        operands: list[str],
        dim_vars: list[str],
        bounds: Mapping[str, tuple[int, int]],
    ) -> None:
        """Every ``{...}`` in a template line is ``{x}``, ``{&x}`` or ``{stride(x)}`` for an
        operand ``x``, ``{n}`` for a dim variable ``n`` of the pattern, or ``{mask(n)}`` for
        one that a ``where`` clause bounds by at most MAX_MASK_BITS."""
        raw = str(tok)[1:-1]
        for m in _BRACE_GROUP.finditer(raw):
            loc = SourceLocation(self.path, tok.line or 1, (tok.column or 1) + 1 + m.start())
            placeholder = PLACEHOLDER.fullmatch(m.group(0))
            if placeholder is None:
                raise RuleError(
                    f"kernel {kernel}: invalid placeholder {m.group(0)}; "
                    "templates allow only {x}, {&x} and {stride(x)} for an operand x, "
                    "{n} and {mask(n)} for a dim variable n",
                    loc,
                )
            if placeholder.group(4) is not None:
                if placeholder.group(4) not in operands:
                    raise RuleError(
                        f"kernel {kernel}: {m.group(0)} names {placeholder.group(4)!r}, which "
                        f"is not an operand (operands: {', '.join(operands)})",
                        loc,
                    )
                continue
            if placeholder.group(3) is not None:
                var = placeholder.group(3)
                if var not in dim_vars:
                    raise RuleError(
                        f"kernel {kernel}: {m.group(0)} names {var!r}, which is not a dim "
                        "variable of the pattern",
                        loc,
                    )
                if var not in bounds or bounds[var][1] > MAX_MASK_BITS:
                    raise RuleError(
                        f"kernel {kernel}: {m.group(0)} needs a bound on {var!r} of at most "
                        f"{MAX_MASK_BITS} lanes (add 'where {var} <= N' before the cost)",
                        loc,
                    )
                continue
            if not placeholder.group(1) and placeholder.group(2) in dim_vars:
                continue
            if placeholder.group(2) not in operands:
                raise RuleError(
                    f"kernel {kernel}: unknown placeholder {m.group(0)} "
                    f"(operands: {', '.join(operands)})",
                    loc,
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
        divisor = 1
        names = []
        for f in tree.children:
            assert isinstance(f, lark.Tree)
            tok = str(f.children[0])
            if f.data == "cost_int":
                factor *= int(tok)
            elif f.data == "cost_div":
                divisor = int(tok)
                if divisor == 0:
                    raise RuleError("cost: division by zero", self.loc(f))
            else:
                names.append(tok)
        return (CostTerm(factor, tuple(names), divisor),)


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


# A brace group with no space inside is a placeholder; ``{ 0 }`` and C blocks pass through.
_BRACE_GROUP: Final = re.compile(r"\{[^{}\s]+\}")
