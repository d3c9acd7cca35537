"""The spec-dependency graph: acyclic, complete, and the same every time it is built."""

from __future__ import annotations

import sys

import attrs
import networkx as nx
import pytest

from morello.context import SynthesisContext
from morello.errors import RuleError
from morello.nodes import BlockAction
from morello.search.expand import expand, spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec

# ``morello.search`` re-exports the function ``expand``, which hides the module of that name.
EXPAND_MODULE = sys.modules["morello.search.expand"]
SOLVE_MODULE = sys.modules["morello.search.solve"]

SHAPES = [(1, 1, 1), (2, 3, 4), (4, 4, 4)]


@pytest.fixture(scope="module", params=SHAPES, ids=str)
def root_and_graph(request: pytest.FixtureRequest, ctx: SynthesisContext, matmul_spec):
    root = matmul_spec(*request.param)
    return root, expand(root, ctx)


def reachable(root: Spec, ctx: SynthesisContext) -> set[Spec]:
    """Every Spec reachable from ``root`` through the rules, found without the graph code."""
    seen = {root}
    stack = [root]
    while stack:
        for action in spec_actions(stack.pop(), ctx):
            for child in action.children:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    return seen


def test_graph_is_a_dag(root_and_graph) -> None:
    _, graph = root_and_graph
    assert nx.is_directed_acyclic_graph(graph)
    assert nx.number_of_selfloops(graph) == 0


def test_every_edge_changes_the_spec(root_and_graph) -> None:
    _, graph = root_and_graph
    for parent, child in graph.edges:
        assert parent != child


def test_edges_are_exactly_the_actions_children(root_and_graph) -> None:
    _, graph = root_and_graph
    for spec, data in graph.nodes(data=True):
        actions = data["actions"]
        assert actions is not None, "a graph built without a memo expands every node"
        wanted = {c for a in actions for c in a.children}
        assert all(c in graph for c in wanted)
        assert set(graph.successors(spec)) == wanted


def test_graph_holds_every_reachable_spec(root_and_graph, ctx: SynthesisContext) -> None:
    root, graph = root_and_graph
    assert set(graph.nodes) == reachable(root, ctx)
    assert nx.descendants(graph, root) | {root} == set(graph.nodes)


def test_node_actions_are_the_rules_actions(root_and_graph, ctx: SynthesisContext) -> None:
    _, graph = root_and_graph
    for spec, data in graph.nodes(data=True):
        assert data["actions"] == spec_actions(spec, ctx)


def test_expansion_is_deterministic(root_and_graph, ctx: SynthesisContext) -> None:
    root, graph = root_and_graph
    again = expand(root, ctx)
    assert graph.number_of_nodes() == again.number_of_nodes()
    assert graph.number_of_edges() == again.number_of_edges()
    assert list(graph.nodes) == list(again.nodes)
    assert list(graph.edges) == list(again.edges)


def test_node_count_of_a_fixed_spec_is_stable(ctx: SynthesisContext, matmul_spec) -> None:
    counts = {expand(matmul_spec(2, 2, 2), ctx).number_of_nodes() for _ in range(3)}
    assert len(counts) == 1
    # A 1x1x1 product is a sub-problem of a 2x2x2 one, so its graph is a strict subgraph.
    small = expand(matmul_spec(1, 1, 1), ctx).number_of_nodes()
    assert 0 < small < counts.pop()


def test_known_specs_are_leaves(ctx: SynthesisContext, matmul_spec) -> None:
    root = matmul_spec(2, 2, 2)
    full = expand(root, ctx)
    known = set(full.successors(root))
    cut = expand(root, ctx, known.__contains__)
    assert set(cut.nodes) == {root} | known
    for spec in known:
        assert cut.nodes[spec]["actions"] is None
        assert cut.out_degree(spec) == 0


def test_a_rewrite_that_changes_nothing_is_reported(
    ctx: SynthesisContext, matmul_spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    def with_noop(spec: Spec, c: SynthesisContext) -> list:
        actions = spec_actions(spec, c)
        if spec.accum:
            actions.append(BlockAction("noop", (spec,), (tuple(range(len(spec.operands))),)))
        return actions

    monkeypatch.setattr(EXPAND_MODULE, "spec_actions", with_noop)
    with pytest.raises(RuleError, match="does not change"):
        expand(matmul_spec(1, 1, 1), ctx)
    monkeypatch.setattr(SOLVE_MODULE, "spec_actions", with_noop)
    with pytest.raises(RuleError, match="rewrite noop: block of 1 does not change"):
        synthesize(matmul_spec(1, 1, 1), ctx)


def test_a_longer_cycle_is_reported(
    ctx: SynthesisContext, matmul_spec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two rewrites that undo each other: the walk names the Specs of the cycle."""

    def flip(spec: Spec) -> Spec:
        return attrs.evolve(spec, serial=not spec.serial)

    def with_flip(spec: Spec, c: SynthesisContext) -> list:
        actions = spec_actions(spec, c)
        if spec.accum:
            actions.append(BlockAction("flip", (flip(spec),), (tuple(range(len(spec.operands))),)))
        return actions

    monkeypatch.setattr(SOLVE_MODULE, "spec_actions", with_flip)
    with pytest.raises(RuleError, match=r"the rewrites form a cycle: .* -> "):
        synthesize(matmul_spec(1, 1, 1), ctx)
