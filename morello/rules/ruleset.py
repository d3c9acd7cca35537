"""RuleSet: the ops, rewrites and kernels one target enables, assembled from rule files.

Built-in rule files are package data of ``morello_rules``; a rule file's rule-set name is its
file stem, and a target enables rule sets by name. Extra files (from plugins or ``--rules``)
are always enabled. Knows no rule set by name.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Iterator, Mapping
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

import attrs

from morello.errors import RuleError
from morello.lang._lark import read_source
from morello.lang.rule_file import RuleFile, parse_rule_file
from morello.layout import layout_by_name
from morello.rules.graph import GRAPH_PATTERN, GraphOp, parse_graph_name
from morello.rules.index_notation import OpDef
from morello.rules.kernels import Kernel
from morello.rules.rewrites import DecomposeRule, Rule, SchemaRule
from morello.rules.schemas import BUILTIN_SCHEMAS, BUILTIN_SIZE_POLICIES
from morello.spec import TensorSpec
from morello.target import CostCoefficients, Target

log = logging.getLogger(__name__)

_RULES_PACKAGE = "morello_rules"


def builtin_rule_files() -> list[Traversable]:
    """Every ``.rules`` file shipped with the package, sorted by path."""
    out: list[tuple[str, Traversable]] = []

    def walk(node: Traversable, prefix: str) -> None:
        for child in node.iterdir():
            if child.is_dir():
                walk(child, f"{prefix}{child.name}/")
            elif child.name.endswith(".rules"):
                out.append((prefix + child.name, child))

    walk(files(_RULES_PACKAGE), "")
    return [t for _, t in sorted(out, key=lambda p: p[0])]


def _expand_paths(paths: Iterable[Traversable | Path | str]) -> list[Traversable | Path]:
    out: list[Traversable | Path] = []
    for p in paths:
        node = Path(p) if isinstance(p, str) else p
        if node.is_dir():
            out.extend(
                sorted(
                    (c for c in node.iterdir() if c.name.endswith(".rules")),
                    key=lambda c: c.name,
                )
            )
        else:
            out.append(node)
    return out


def _schema_object(schemas: Iterable[str], name: str) -> object:
    """The schema called ``name`` when ``schemas`` maps names to schemas (else None)."""
    return schemas.get(name) if isinstance(schemas, Mapping) else None


def _read(
    node: Traversable | Path, schemas: Iterable[str], size_policies: Iterable[str]
) -> RuleFile:
    text = read_source(node, "rule file", RuleError)
    return parse_rule_file(str(node), text, schemas, size_policies)


class OpTable(Mapping[str, "OpDef | GraphOp"]):
    """The declared ops by name, and graph ops by their canonical text, built on demand.

    Iterating yields the declared ops only (the graphs are unbounded in number).
    """

    def __init__(self, declared: Mapping[str, OpDef]) -> None:
        self._declared = dict(declared)
        self._graphs: dict[str, GraphOp] = {}

    def __getitem__(self, name: str) -> OpDef | GraphOp:
        got = self._declared.get(name)
        if got is not None:
            return got
        graph = self._graphs.get(name)
        if graph is None:
            statements = parse_graph_name(name)
            if statements is None:
                raise KeyError(name)
            graph = self._graphs[name] = GraphOp.build(statements, self._declared)
        return graph

    def __contains__(self, name: object) -> bool:
        return name in self._declared

    def __iter__(self) -> Iterator[str]:
        return iter(self._declared)

    def __len__(self) -> int:
        return len(self._declared)

    def graph(self, graph: GraphOp) -> GraphOp:
        """Remember ``graph`` under its name (the one a Spec of it carries) and return it."""
        return self._graphs.setdefault(graph.name, graph)


@attrs.frozen(slots=False)
class RuleSet:
    """What one target enables: ops by name, rewrite rules and kernels in file order."""

    ops: OpTable
    rules: tuple[Rule, ...]
    kernels: tuple[Kernel, ...]
    files: tuple[str, ...]

    def copy_op(self, rank: int) -> str | None:
        """Name of the first identity op (a move) of operand rank ``rank``."""
        return self._copy_ops.get(rank)

    @functools.cached_property
    def _copy_ops(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for name, op in self.ops.items():
            if op.is_identity:
                out.setdefault(op.rank(0), name)
        return out

    def kernel(self, name: str) -> Kernel:
        """The kernel called ``name``; KeyError if absent."""
        return self._kernels_by_name[name]

    @functools.cached_property
    def _kernels_by_name(self) -> dict[str, Kernel]:
        return {k.name: k for k in self.kernels}

    def includes(self) -> list[str]:
        """Headers needed by the enabled kernels, in first-use order."""
        out: list[str] = []
        for k in self.kernels:
            for h in k.includes:
                if h not in out:
                    out.append(h)
        return out


def layout_named(name: str, ts: TensorSpec) -> bool:
    """Whether ``ts``'s canonical layout is the layout family ``name``."""
    lay = layout_by_name(name, len(ts.shape))
    if lay is None:
        return False
    canon = lay.canonical(ts.shape)
    return canon is not None and canon.dims == ts.layout.dims


def load_rule_set(
    target: Target,
    coefficients: CostCoefficients,
    extra: Iterable[Traversable | Path | str] = (),
    schemas: Iterable[str] = BUILTIN_SCHEMAS,
    size_policies: Iterable[str] = BUILTIN_SIZE_POLICIES,
) -> RuleSet:
    """Assemble the rule set of ``target`` from built-in and extra rule files.

    ``schemas`` and ``size_policies`` are the names rule files may use (the registered ones).

    Raises:
        RuleError: a file is unreadable or wrong, or declarations disagree across files.
    """
    chosen: list[RuleFile] = []
    for node in builtin_rule_files():
        stem = node.name[: -len(".rules")]
        if stem in target.rule_sets:
            chosen.append(_read(node, schemas, size_policies))
    known_sets = {rf.rule_set for rf in chosen}
    missing = [s for s in target.rule_sets if s not in known_sets]
    chosen.extend(_read(node, schemas, size_policies) for node in _expand_paths(extra))
    if missing and not any(rf.rule_set in missing for rf in chosen):
        raise RuleError(
            f"target {target.name!r} enables rule set(s) {', '.join(missing)} "
            "but no such rule files are installed"
        )
    ops: dict[str, OpDef] = {}
    rules: list[Rule] = []
    kernels: list[Kernel] = []
    for rf in chosen:
        unmet = [f for f in rf.requires if f not in target.isa]
        if unmet:
            log.info("skipping %s: target %s lacks %s", rf.path, target.name, ", ".join(unmet))
            continue
        for op in rf.ops:
            if op.name in ops:
                raise RuleError(f"op {op.name!r} is declared twice", op.loc)
            ops[op.name] = op
        rules.extend(rf.rules)
        kernels.extend(rf.kernels)
    _check(target, coefficients, ops, rules, kernels, schemas)
    return RuleSet(OpTable(ops), tuple(rules), tuple(kernels), tuple(rf.path for rf in chosen))


def _no_accumulating_form(what: str, op: str) -> str:
    return (
        f"{what}: {op} has no accumulating form (a reduction inside its expression), so it "
        "cannot accumulate or be split along a reduction"
    )


def _check(
    target: Target,
    coefficients: CostCoefficients,
    ops: Mapping[str, OpDef],
    rules: list[Rule],
    kernels: list[Kernel],
    schemas: Iterable[str],
) -> None:
    splitting = {
        name for name in schemas if getattr(_schema_object(schemas, name), "splits", False)
    }
    level_names = {lv.name for lv in target.levels}
    seen: set[str] = set()
    for k in kernels:
        if k.name in seen:
            raise RuleError(f"kernel {k.name!r} is declared twice", k.loc)
        seen.add(k.name)
        if k.op not in ops:
            raise RuleError(f"kernel {k.name}: unknown op {k.op!r}", k.loc)
        opdef = ops[k.op]
        if k.accum and opdef.combiner is None:
            raise RuleError(_no_accumulating_form(f"kernel {k.name}", k.op), k.loc)
        if len(k.operands) != len(opdef.operands):
            raise RuleError(
                f"kernel {k.name}: {k.op} takes {len(opdef.inputs)} input(s), "
                f"pattern has {len(k.operands) - 1}",
                k.loc,
            )
        bound: set[str] = set()
        for pat, acc in zip(k.operands, opdef.operands, strict=True):
            if len(pat.dims) != len(acc.indices):
                raise RuleError(
                    f"kernel {k.name}: operand {pat.name} has rank {len(pat.dims)}, "
                    f"{k.op} expects {len(acc.indices)}",
                    k.loc,
                )
            for lv in pat.levels:
                if lv not in level_names:
                    raise RuleError(
                        f"kernel {k.name}: unknown memory level {lv!r} "
                        f"(target {target.name} has {', '.join(sorted(level_names))})",
                        k.loc,
                    )
            for layout in pat.layouts:
                if layout_by_name(layout, len(pat.dims)) is None:
                    raise RuleError(f"kernel {k.name}: unknown layout {layout!r}", k.loc)
            bound.update(d for d in pat.dims if isinstance(d, str))
        for lv, _ in k.scratch:
            if lv not in level_names:
                raise RuleError(
                    f"kernel {k.name}: scratch in unknown memory level {lv!r} "
                    f"(target {target.name} has {', '.join(sorted(level_names))})",
                    k.loc,
                )
        for term in k.cost:
            for name in term.names:
                if name not in bound and name not in coefficients.named:
                    raise RuleError(
                        f"kernel {k.name}: unknown cost coefficient {name!r} "
                        f"(target {target.name} defines "
                        f"{', '.join(coefficients.named) or 'none'})",
                        k.loc,
                    )
    for r in rules:
        if isinstance(r, SchemaRule):
            for p in r.patterns:
                if p.op not in ("*", GRAPH_PATTERN) and p.op not in ops:
                    raise RuleError(f"rewrite {r.name}: unknown op {p.op!r}", r.loc)
                if r.schema in splitting and p.op in ops and ops[p.op].combiner is None:
                    raise RuleError(_no_accumulating_form(f"rewrite {r.name}", p.op), r.loc)
        elif isinstance(r, DecomposeRule):
            for op in (r.op, *(s.op for s in r.stages)):
                if op not in ops:
                    raise RuleError(f"rewrite {r.name}: unknown op {op!r}", r.loc)
            for st in r.stages:
                if st.accum and ops[st.op].combiner is None:
                    raise RuleError(_no_accumulating_form(f"rewrite {r.name}", st.op), r.loc)
