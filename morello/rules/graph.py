"""Graphs of ops: a function of several statements, synthesized as one Spec.

A graph op is a sequence of statements ``t = op(args)`` over tensors: the graph's inputs
(``i0``, ``i1``, ...), intermediates (``t0``, ``t1``, ...) and its output (``o``). It behaves
like an op declared in index notation, so the generic schemas apply to it unchanged:

* its **index variables** are the classes of the statements' indices joined through the
  tensors they index (the index of a matmul's output row and the index of the add that reads
  that row are one variable). Each variable has a size, bound by a dim of an input or of the
  output;
* a variable is **tileable** when tiling the output along it tiles exactly one dim of each
  operand it runs along and nothing else: it is no statement's reduction index (a softmax
  row must be whole to be summed) and reaches no operand twice. ``tile_out`` tiles a graph
  along those only, which is how a graph is *fused*: each tile computes the intermediates it
  needs;
* the ``pipeline`` schema peels the first statement off: it computes that statement's output
  into a temporary the search places (registers, a buffer), then the rest of the graph reads
  it. Pipelining a tile of a fused graph keeps its intermediate in registers.

A graph op is named by its canonical text (``graph:t0=matmul(i0,i1);o=matmul(t0,i2)``), with
tensors renamed in order of first use, so structurally equal graphs are the same op; the rule
set resolves such names on demand (``RuleSet.ops``). Knows no op by name.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import numpy as np

from morello.rules.index_notation import Access, IndexedOperands, OpDef

#: Prefix of graph op names.
GRAPH_PREFIX = "graph:"
#: The op pattern of rule files that matches every graph (``rewrite pipeline for graph``).
GRAPH_PATTERN = "graph"
OUTPUT = "o"
#: The partial result ``GraphOp.with_partial`` adds in, and its first statement's new target
#: (neither is a canonical name, so neither can clash with the graph's own).
PARTIAL = "partial"
_LAST = "last"

_STMT = re.compile(r"^([a-z][a-z0-9_]*)=([A-Za-z_][A-Za-z0-9_./]*)\(([a-z0-9_,]*)\)$")


def is_graph(op_name: str) -> bool:
    """Whether ``op_name`` names a graph op."""
    return op_name.startswith(GRAPH_PREFIX)


@attrs.frozen
class Statement:
    """``target = op(args)`` over tensor names."""

    target: str
    op: str
    args: tuple[str, ...] = attrs.field(converter=tuple)

    def text(self) -> str:
        """``t0=matmul(i0,i1)``."""
        return f"{self.target}={self.op}({','.join(self.args)})"


def graph_inputs(statements: Sequence[Statement]) -> tuple[str, ...]:
    """The tensors ``statements`` read but do not assign, in order of first use."""
    targets = {s.target for s in statements}
    seen: list[str] = []
    for s in statements:
        seen.extend(a for a in s.args if a not in targets and a not in seen)
    return tuple(seen)


def canonical(statements: Sequence[Statement], output: str) -> tuple[Statement, ...]:
    """The statements with tensors renamed: inputs ``i<n>`` and intermediates ``t<n>`` in
    order of first use, the output ``o``."""
    targets = {s.target for s in statements}
    inputs: dict[str, str] = {}
    temps: dict[str, str] = {}
    out = []
    for s in statements:
        args = []
        for a in s.args:
            if a in targets:
                args.append(temps[a])
            else:
                args.append(inputs.setdefault(a, f"i{len(inputs)}"))
        target = OUTPUT if s.target == output else temps.setdefault(s.target, f"t{len(temps)}")
        out.append(Statement(target, s.op, tuple(args)))
    return tuple(out)


def graph_name(statements: Sequence[Statement]) -> str:
    """The op name of canonical ``statements``."""
    return GRAPH_PREFIX + ";".join(s.text() for s in statements)


def parse_graph_name(name: str) -> tuple[Statement, ...] | None:
    """The statements a graph op name spells, or None if it is not one."""
    if not is_graph(name):
        return None
    out = []
    for part in name[len(GRAPH_PREFIX) :].split(";"):
        m = _STMT.match(part)
        if m is None:
            return None
        args = tuple(a for a in m.group(3).split(",") if a)
        out.append(Statement(m.group(1), m.group(2), args))
    return tuple(out)


class _Classes:
    """Union-find over (tensor, dim) and (statement, index) nodes."""

    def __init__(self) -> None:
        self.parent: dict[tuple[str, object], tuple[str, object]] = {}

    def find(self, x: tuple[str, object]) -> tuple[str, object]:
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: tuple[str, object], b: tuple[str, object]) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


@attrs.frozen(slots=False)
class GraphOp(IndexedOperands):
    """A graph of op applications that acts as one op; see the module docstring.

    ``statements`` are canonical; ``defs`` gives each statement's OpDef.
    """

    statements: tuple[Statement, ...] = attrs.field(converter=tuple)
    defs: tuple[OpDef, ...] = attrs.field(converter=tuple, eq=False, repr=False)

    @classmethod
    def build(cls, statements: Sequence[Statement], ops: Mapping[str, OpDef]) -> GraphOp:
        """The graph of canonical ``statements`` over the declared ``ops``.

        Raises:
            KeyError: a statement names an op ``ops`` lacks.
            ValueError: the statements' indices cannot be given sizes from the operands.
        """
        graph = cls(tuple(statements), tuple(ops[s.op] for s in statements))
        graph._check()
        return graph

    @property
    def name(self) -> str:
        """The canonical text, the graph's op name."""
        return graph_name(self.statements)

    # -- tensors -----------------------------------------------------------------------------

    @functools.cached_property
    def input_names(self) -> tuple[str, ...]:
        """The graph's inputs, in order (``i0``, ``i1``, ...)."""
        return graph_inputs(self.statements)

    @property
    def tensor_names(self) -> tuple[str, ...]:
        """Inputs then the output: the operand order of the graph's Specs."""
        return (*self.input_names, OUTPUT)

    # -- index variables ---------------------------------------------------------------------

    @functools.cached_property
    def _classes(self) -> tuple[dict[tuple[str, int], str], frozenset[str]]:
        """Each (tensor, dim) -> its variable, and the variables some statement reduces or
        cannot tile."""
        uf = _Classes()
        for n, (s, d) in enumerate(zip(self.statements, self.defs, strict=True)):
            for acc, tensor in zip(d.operands, (*s.args, s.target), strict=True):
                for dim, ix in enumerate(acc.indices):
                    uf.union((tensor, dim), (f"#{n}", ix))
            for ix in d.reduction_vars:
                uf.find((f"#{n}", ix))
        names: dict[tuple[str, object], str] = {}
        order = [(OUTPUT, dim) for dim in range(self.defs[-1].rank(len(self.defs[-1].inputs)))]
        for t in self.input_names:
            order += [(t, dim) for dim in range(self._rank(t))]
        for node in order + sorted(uf.parent, key=str):
            root = uf.find(node)
            if root not in names:
                names[root] = f"v{len(names)}"
        dims: dict[tuple[str, int], str] = {}
        for node in uf.parent:
            if not str(node[0]).startswith("#"):
                dims[(str(node[0]), int(node[1]))] = names[uf.find(node)]  # type: ignore[call-overload]
        # Not tileable: a statement's reduction index, and an output index the statement's op
        # cannot tile (a row its inner reduction reads whole, as softmax's).
        reduced = frozenset(
            names[uf.find((f"#{n}", ix))]
            for n, d in enumerate(self.defs)
            for ix in d.index_vars
            if ix in d.reduction_vars or ix not in d.tileable_vars
        )
        return dims, reduced

    def _rank(self, tensor: str) -> int:
        for s, d in zip(self.statements, self.defs, strict=True):
            if s.target == tensor:
                return d.rank(len(d.inputs))
            for acc, a in zip(d.inputs, s.args, strict=True):
                if a == tensor:
                    return len(acc.indices)
        raise KeyError(tensor)

    def _var(self, tensor: str, dim: int) -> str:
        return self._classes[0][(tensor, dim)]

    @functools.cached_property
    def inputs(self) -> tuple[Access, ...]:
        """Each input with the graph variables of its dims."""
        return tuple(
            Access(t, tuple(self._var(t, d) for d in range(self._rank(t))))
            for t in self.input_names
        )

    @functools.cached_property
    def output(self) -> Access:
        """The output with the graph variables of its dims."""
        return Access(OUTPUT, tuple(self._var(OUTPUT, d) for d in range(self._rank(OUTPUT))))

    @functools.cached_property
    def operands(self) -> tuple[Access, ...]:  # type: ignore[override]
        """Inputs then output."""
        return (*self.inputs, self.output)

    @property
    def reduction_vars(self) -> tuple[str, ...]:
        """None: a graph has no accumulating form, so nothing splits it along a reduction."""
        return ()

    @functools.cached_property
    def tileable_vars(self) -> tuple[str, ...]:
        """Output variables along which tiling the output tiles exactly one dim per operand."""
        reduced = self._classes[1]
        out = []
        for v in self.output.indices:
            if v in reduced:
                continue
            uses = self.operands_using(v)
            if len({i for i, _ in uses}) != len(uses):
                continue  # two dims of one operand (a tensor read with other indices too)
            out.append(v)
        return tuple(out)

    @property
    def is_identity(self) -> bool:
        """A graph is never a plain copy."""
        return False

    @property
    def expr(self) -> None:
        """A graph has no single expression (see ``statements``)."""
        return None

    def tensor_shape(self, tensor: str, sizes: Mapping[str, int]) -> tuple[int, ...]:
        """Shape of any tensor of the graph (an intermediate too) given variable sizes."""
        return tuple(sizes[self._var(tensor, d)] for d in range(self._rank(tensor)))

    def _check(self) -> None:
        bound = set(self.index_vars)
        for (tensor, dim), v in self._classes[0].items():
            if v not in bound:
                raise ValueError(
                    f"the size of dim {dim} of {tensor} follows from no input or output"
                )

    # -- semantics ---------------------------------------------------------------------------

    def flops(self, sizes: Mapping[str, int]) -> int:
        """Arithmetic operations of every statement over its full index space."""
        total = 0
        for s, d in zip(self.statements, self.defs, strict=True):
            shapes = [self.tensor_shape(t, sizes) for t in (*s.args, s.target)]
            local = d.sizes(shapes)
            assert isinstance(local, dict)
            total += d.flops(local)
        return total

    def error_bound(
        self,
        inputs: Sequence[np.ndarray],
        errors: Sequence[np.ndarray],
        shape: tuple[int, ...],
        u: float,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The graph's value and error bound (``OpDef.error_bound``), statement by statement:
        each statement's inputs carry the errors the earlier statements bound."""
        import numpy as np

        env = {
            t: (np.asarray(x, dtype=np.float64), np.asarray(e, dtype=np.float64))
            for t, x, e in zip(self.input_names, inputs, errors, strict=True)
        }
        sizes: dict[str, int] = {}
        for acc, arr in zip(self.operands, [*inputs, np.empty(shape)], strict=True):
            sizes.update(zip(acc.indices, np.shape(arr), strict=False))
        for s, d in zip(self.statements, self.defs, strict=True):
            env[s.target] = d.error_bound(
                [env[a][0] for a in s.args],
                [env[a][1] for a in s.args],
                self.tensor_shape(s.target, sizes),
                u,
            )
        return env[OUTPUT]

    def reference(
        self, inputs: Sequence[np.ndarray], out: np.ndarray | None = None, accum: bool = False
    ) -> np.ndarray:
        """Evaluate the statements in order with NumPy (float64 for float dtypes)."""
        import numpy as np

        env = dict(zip(self.input_names, inputs, strict=True))
        shapes = [np.shape(x) for x in inputs]
        shapes.append(np.shape(out) if out is not None else ())
        sizes: dict[str, int] = {}
        for acc, shape in zip(self.operands, shapes, strict=True):
            sizes.update(zip(acc.indices, shape, strict=False))
        for s, d in zip(self.statements, self.defs, strict=True):
            shape = self.tensor_shape(s.target, sizes)
            env[s.target] = d.reference([env[a] for a in s.args], np.zeros(shape))
        result = env[OUTPUT]
        if accum:
            assert out is not None
            result = out.astype(np.float64) + result
        return np.array(result)

    def statement_vars(self, n: int) -> dict[str, str]:
        """Statement ``n``'s own index variables, each with the graph variable it is."""
        s, d = self.statements[n], self.defs[n]
        out: dict[str, str] = {}
        for acc, tensor in zip(d.operands, (*s.args, s.target), strict=True):
            for dim, ix in enumerate(acc.indices):
                out[ix] = self._var(tensor, dim)
        return out

    def with_partial(
        self, combine: str, ops: Mapping[str, OpDef]
    ) -> tuple[GraphOp, tuple[str, ...]]:
        """This graph with a partial result of its first statement added in: ``t = op(a, b);
        ...`` becomes ``last = op(a, b); t = combine(last, partial); ...``, where ``partial``
        (``PARTIAL``) is a new input and ``combine`` an op of ``ops`` that combines two
        values of ``t``'s shape. Returns the new graph and its tensors (inputs then output)
        in this graph's names."""
        first = self.statements[0]
        statements = (
            Statement(_LAST, first.op, first.args),
            Statement(first.target, combine, (_LAST, PARTIAL)),
            *self.statements[1:],
        )
        new = GraphOp.build(canonical(statements, OUTPUT), {**_ops_of(self), **ops})
        return new, (*graph_inputs(statements), OUTPUT)

    def peel(self) -> tuple[Statement, GraphOp | None, tuple[str, ...]]:
        """The first statement, the rest of the graph (None if one statement remains), and
        the rest's tensors (inputs then output) in this graph's names."""
        return self._peeled

    @functools.cached_property
    def _peeled(self) -> tuple[Statement, GraphOp | None, tuple[str, ...]]:
        # Worked out once per graph: the pipeline schema asks at every Spec of it, and
        # building the rest (its index classes) took a quarter of a 12-statement chain's
        # synthesis.
        first, rest = self.statements[0], self.statements[1:]
        if len(rest) == 1:
            return first, None, (*rest[0].args, OUTPUT)
        rest_graph = GraphOp.build(canonical(rest, OUTPUT), _ops_of(self))
        return first, rest_graph, (*graph_inputs(rest), OUTPUT)


def _ops_of(graph: GraphOp) -> dict[str, OpDef]:
    return {s.op: d for s, d in zip(graph.statements, graph.defs, strict=True)}
