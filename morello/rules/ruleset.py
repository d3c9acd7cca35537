"""RuleSet: the ops, rewrites and kernels one target enables, assembled from rule files.

``assemble_rule_set`` merges parsed rule files (``RuleFile``, what ``morello.lang.rule_file``
makes of one file): it resolves overloads, checks declarations against each other and the
target, and skips files whose required CPU features the target lacks. Finding and reading
the files is ``morello.lang.rule_sets``'s job, so this package imports no parser. Knows no
rule set by name.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence

import attrs

from morello.errors import RuleError
from morello.layout import layout_by_name
from morello.rules.graph import GRAPH_PATTERN, GraphOp, parse_graph_name
from morello.rules.index_notation import OpDef, base_name, overload_key
from morello.rules.kernels import Kernel
from morello.rules.rewrites import DecomposeRule, Rule, SchemaRule
from morello.spec import TensorSpec
from morello.target import LEVEL_ROLES, CostCoefficients, Target

log = logging.getLogger(__name__)


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


def _schema_object(schemas: Iterable[str], name: str) -> object:
    """The schema called ``name`` when ``schemas`` maps names to schemas (else None)."""
    return schemas.get(name) if isinstance(schemas, Mapping) else None


class OpTable(Mapping[str, "OpDef | GraphOp"]):
    """The declared ops by key, and graph ops by their canonical text, built on demand.

    An op name may be declared several times with operands of other ranks or number
    (overloads, e.g. ``add`` of two matrices and ``add`` of a matrix and a row vector): the
    first declaration goes by its name, each later one by ``overload_key``. ``resolve``
    picks the overload for a call. Iterating yields the declared ops only (the graphs are
    unbounded in number).
    """

    def __init__(self, declared: Mapping[str, OpDef]) -> None:
        self._declared = dict(declared)
        self._graphs: dict[str, GraphOp] = {}
        self._by_name: dict[str, list[str]] = {}
        for key in self._declared:
            self._by_name.setdefault(base_name(key), []).append(key)

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

    def names(self) -> list[str]:
        """The declared op names (an overloaded name once)."""
        return list(self._by_name)

    def overloads(self, name: str) -> list[tuple[str, OpDef]]:
        """Every (key, OpDef) declared under ``name``, in declaration order."""
        return [(k, self._declared[k]) for k in self._by_name.get(name, ())]

    def resolve(
        self, name: str, input_ranks: Sequence[int], output_rank: int | None = None
    ) -> str | None:
        """The key of the overload of ``name`` taking inputs of ``input_ranks`` (and giving
        ``output_rank`` if known); None if none or several fit."""
        fits = [
            k
            for k, d in self.overloads(name)
            if [len(a.indices) for a in d.inputs] == list(input_ranks)
            and (output_rank is None or len(d.output.indices) == output_rank)
        ]
        return fits[0] if len(fits) == 1 else None

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

    def copies_into(self, dtype: str, rank: int) -> frozenset[str]:
        """The levels some kernel of an identity op (a move) writes ``dtype`` values of
        operand rank ``rank`` into."""
        return self._copy_levels.get((dtype, rank), frozenset())

    @functools.cached_property
    def _copy_levels(self) -> dict[tuple[str, int], frozenset[str]]:
        out: dict[tuple[str, int], set[str]] = {}
        for k in self.kernels:
            op = self.ops.get(k.op)
            if op is None or not op.is_identity:
                continue
            dest = k.operands[-1]
            out.setdefault((dest.dtype, len(dest.dims)), set()).update(dest.levels)
        return {key: frozenset(levels) for key, levels in out.items()}

    def implementable(self, op: str, dtypes: Sequence[str] | None = None) -> bool:
        """Whether some kernel computes ``op`` (in either form), or a decomposition rewrites
        it into ops that are implementable.

        With ``dtypes`` (one per operand, the output last), the kernels must take exactly
        those dtypes (moves never convert, so some kernel must), and a decomposition's
        stages are checked with the dtypes its tensors have (a temporary has the output's).
        """
        if dtypes is None:
            return op in self._implementable
        return self._typed(op, tuple(dtypes), frozenset())

    def _typed(self, op: str, dtypes: tuple[str, ...], visiting: frozenset[str]) -> bool:
        key = (op, dtypes)
        if key in self._typed_memo:
            return self._typed_memo[key]
        if any(k.op == op and tuple(p.dtype for p in k.operands) == dtypes for k in self.kernels):
            self._typed_memo[key] = True
            return True
        found = False
        for r in self.rules:
            if not isinstance(r, DecomposeRule) or r.op != op or op in visiting:
                continue
            names = (*r.params, r.output)
            if len(names) != len(dtypes):
                continue
            of = dict(zip(names, dtypes, strict=True))
            if all(
                self._typed(
                    st.op,
                    tuple(of.get(a, dtypes[-1]) for a in (*st.args, st.target)),
                    visiting | {op},
                )
                for st in r.stages
            ):
                found = True
                break
        if found or not visiting:  # a miss under the cycle guard may hold elsewhere
            self._typed_memo[key] = found
        return found

    @functools.cached_property
    def _typed_memo(self) -> dict[tuple[str, tuple[str, ...]], bool]:
        return {}

    @functools.cached_property
    def _implementable(self) -> set[str]:
        done = {k.op for k in self.kernels}
        decompositions = [r for r in self.rules if isinstance(r, DecomposeRule)]
        grew = True
        while grew:
            grew = False
            for r in decompositions:
                if r.op not in done and all(st.op in done for st in r.stages):
                    done.add(r.op)
                    grew = True
        return done

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


def assemble_rule_set(
    target: Target,
    coefficients: CostCoefficients,
    chosen: Sequence[RuleFile],
    schemas: Iterable[str],
    trusted: Collection[str] = (),
) -> RuleSet:
    """The rule set of ``target`` from the rule files ``chosen`` for it, in order.

    ``schemas`` are the registered schemas (a mapping from names, or just the names).
    Decompositions are evaluated against their ops' index notation
    (``DecomposeRule.value_mismatch``, with NumPy), except those of the files whose paths
    are ``trusted``: the built-in ones, which the test suite evaluates instead, so that
    synthesis does not import NumPy.

    Raises:
        RuleError: declarations disagree with each other or with the target.
    """
    ops: dict[str, OpDef] = {}
    rules: list[Rule] = []
    kernels: list[Kernel] = []
    for rf in chosen:
        unmet = [f for f in rf.requires if f not in target.isa]
        if unmet:
            log.info("skipping %s: target %s lacks %s", rf.path, target.name, ", ".join(unmet))
            continue
        for op in rf.ops:
            key = op.name
            if op.name in ops:
                key = overload_key(op)
                for other in (d for k, d in ops.items() if base_name(k) == op.name):
                    if overload_key(other) == key:
                        raise RuleError(
                            f"op {op.name!r} is declared twice with operands of the same "
                            "ranks (an overload needs other ranks or another number)",
                            op.loc,
                        )
            ops[key] = op
        rules.extend(rf.rules)
        kernels.extend(rf.kernels)
    table = OpTable(ops)
    kernels = [
        _resolve_kernel(k, table)
        for k in (_kernel_levels(k, target) for k in kernels)
        if k is not None
    ]
    rules = [r for rule in rules for r in _resolve_rule(rule, table)]
    _check(target, coefficients, table, rules, kernels, schemas, frozenset(trusted))
    return RuleSet(table, tuple(rules), tuple(kernels), tuple(rf.path for rf in chosen))


def _no_overload(name: str, table: OpTable, ranks: Sequence[int], out: int | None) -> str:
    def form(ins: Sequence[int], res: int | None) -> str:
        return "(" + ", ".join(map(str, ins)) + ")" + ("" if res is None else f" -> {res}")

    forms = ", ".join(
        form([len(a.indices) for a in d.inputs], len(d.output.indices))
        for _, d in table.overloads(name)
    )
    return f"no form of {name} has operand ranks {form(ranks, out)} (forms: {forms})"


def _kernel_levels(k: Kernel, target: Target) -> Kernel | None:
    """``k`` with level roles (``@registers|cache``) replaced by the target's levels of those
    roles; None when some operand (or its scratch) names only roles the target has no level
    for, so the kernel cannot apply there. Unknown names stay for ``_check`` to report."""
    names = {lv.name for lv in target.levels}

    def resolve(levels: Sequence[str]) -> tuple[str, ...] | None:
        out: list[str] = []
        for name in levels:
            if name in names or name not in LEVEL_ROLES:
                out.append(name)
            else:
                out.extend(lv.name for lv in target.levels if lv.role == name)
        return tuple(dict.fromkeys(out)) if out or not levels else None

    operands = []
    for pat in k.operands:
        levels = resolve(pat.levels)
        if levels is None:
            return None
        operands.append(attrs.evolve(pat, levels=levels))
    scratch = []
    for level, units in k.scratch:
        resolved = resolve((level,))
        if resolved is None:
            return None
        scratch.extend((lv, units) for lv in resolved[:1])
    return attrs.evolve(k, operands=tuple(operands), scratch=tuple(scratch))


def _resolve_kernel(k: Kernel, table: OpTable) -> Kernel:
    """``k`` with its op's name replaced by the key of the overload its pattern's ranks fit."""
    overloads = table.overloads(k.op)
    if not overloads:
        raise RuleError(f"kernel {k.name}: unknown op {k.op!r}", k.loc)
    if len(overloads) == 1:
        return attrs.evolve(k, op=overloads[0][0])  # mismatches are reported by _check
    ranks = [len(p.dims) for p in k.operands[:-1]]
    key = table.resolve(k.op, ranks, len(k.operands[-1].dims))
    if key is None:
        msg = _no_overload(k.op, table, ranks, len(k.operands[-1].dims))
        raise RuleError(f"kernel {k.name}: {msg}", k.loc)
    return attrs.evolve(k, op=key)


def _resolve_rule(rule: Rule, table: OpTable) -> list[Rule]:
    """A decomposition per overload of its op whose stages all resolve (stage ops named by
    key); schema rules unchanged."""
    if not isinstance(rule, DecomposeRule):
        return [rule]
    if not table.overloads(rule.op):
        raise RuleError(f"rewrite {rule.name}: unknown op {rule.op!r}", rule.loc)
    out: list[Rule] = []
    first_error = None
    for key, opdef in table.overloads(rule.op):
        if len(opdef.inputs) != len(rule.params):
            continue
        names = (*rule.params, rule.output)
        ranks = dict(zip(names, (len(a.indices) for a in opdef.operands), strict=True))
        stages = []
        for st in rule.stages:
            if any(a not in ranks for a in st.args):
                unknown = next(a for a in st.args if a not in ranks)
                raise RuleError(
                    f"rewrite {rule.name}: {unknown!r} is read before it is assigned", rule.loc
                )
            arg_ranks = [ranks[a] for a in st.args]
            if not table.overloads(st.op):
                raise RuleError(f"rewrite {rule.name}: unknown op {st.op!r}", rule.loc)
            stage_key = table.resolve(st.op, arg_ranks, ranks.get(st.target))
            if stage_key is None:
                first_error = first_error or _no_overload(
                    st.op, table, arg_ranks, ranks.get(st.target)
                )
                break
            ranks.setdefault(st.target, len(table[stage_key].output.indices))  # type: ignore[union-attr]
            stages.append(attrs.evolve(st, op=stage_key))
        else:
            out.append(attrs.evolve(rule, op=key, stages=tuple(stages)))
    if not out:
        why = first_error or f"{rule.op} has no overload of {len(rule.params)} input(s)"
        raise RuleError(f"rewrite {rule.name}: {why}", rule.loc)
    return out


def _no_accumulating_form(what: str, op: str) -> str:
    return (
        f"{what}: {op} has no accumulating form (a reduction inside its expression), so it "
        "cannot accumulate or be split along a reduction"
    )


def _check(
    target: Target,
    coefficients: CostCoefficients,
    ops: OpTable,
    rules: list[Rule],
    kernels: list[Kernel],
    schemas: Iterable[str],
    trusted: frozenset[str],
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
        opdef = ops[k.op]
        assert isinstance(opdef, OpDef)
        if k.accum and opdef.combiner is None:
            raise RuleError(_no_accumulating_form(f"kernel {k.name}", base_name(k.op)), k.loc)
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
                        f"(target {target.name} has {', '.join(sorted(level_names))}; "
                        f"roles: {', '.join(LEVEL_ROLES)})",
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
                    f"(target {target.name} has {', '.join(sorted(level_names))}; "
                    f"roles: {', '.join(LEVEL_ROLES)})",
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
                if p.op not in ("*", GRAPH_PATTERN) and not ops.overloads(p.op):
                    raise RuleError(f"rewrite {r.name}: unknown op {p.op!r}", r.loc)
                if r.schema in splitting and any(
                    d.combiner is None for _, d in ops.overloads(p.op)
                ):
                    raise RuleError(_no_accumulating_form(f"rewrite {r.name}", p.op), r.loc)
        elif isinstance(r, DecomposeRule):
            for st in r.stages:
                stage_def = ops[st.op]
                assert isinstance(stage_def, OpDef)
                if st.accum and stage_def.combiner is None:
                    raise RuleError(
                        _no_accumulating_form(f"rewrite {r.name}", base_name(st.op)), r.loc
                    )
            why = None if r.loc is not None and r.loc.path in trusted else r.value_mismatch(ops)
            if why is not None:
                raise RuleError(f"rewrite {r.name}: {why}", r.loc)
