"""Expands a root Spec into the networkx DiGraph of every Spec reachable through the rules.

Each node carries ``actions``: the list of actions (rewrites and kernels) that apply to it,
in a fixed order (kernels first, then rules in rule-file order). Every action makes progress,
so the graph is acyclic; a rule set that breaks this is reported. Knows no op by name.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import networkx as nx

from morello.context import SynthesisContext
from morello.db.table import decision_of
from morello.errors import RuleError
from morello.impl import Action, Impl
from morello.nodes import KernelAction
from morello.rules.ruleset import layout_named
from morello.spec import Spec


def spec_actions(
    spec: Spec,
    ctx: SynthesisContext,
    named: str | None = None,
    making: tuple[Any, ...] | None = None,
) -> list[Action]:
    """Every action applicable to ``spec``: matching kernels, then each rule's actions
    (only the kernels and rules called ``named``, if given; rules may offer only the
    actions that could make decision ``making``). When some action is ``forced``, only the
    forced ones."""
    out: list[Action] = []
    for kernel in ctx.ruleset.kernels:
        if kernel.op != spec.op or (named is not None and kernel.name != named):
            continue
        bindings = kernel.match(spec, layout_named, ctx.target.level_index)
        if bindings is not None:
            out.append(KernelAction(kernel.name, tuple(sorted(bindings.items()))))
    for rule in ctx.ruleset.rules:
        if named is not None and rule.name != named:
            continue
        narrow = None if making is None else getattr(rule, "actions_making", None)
        out.extend(rule.actions(spec, ctx) if narrow is None else narrow(spec, ctx, making))
    # A forced action (a cache the program cannot opt out of) is the only choice there is.
    forced = [a for a in out if getattr(a, "forced", False)]
    return forced or out


def only_forced(spec: Spec, ctx: SynthesisContext) -> Action | None:
    """The action at ``spec`` when it is the only one offered, ``forced`` and of one child
    (residency in a cache the program cannot opt out of); None where the search has a
    choice."""
    offered = spec_actions(spec, ctx)
    if len(offered) != 1 or not getattr(offered[0], "forced", False):
        return None
    return offered[0] if len(offered[0].children) == 1 else None


def past_forced(spec: Spec, ctx: SynthesisContext) -> Spec:
    """The first Spec at or below ``spec`` where the search has a choice: ``spec`` itself,
    or below the forced actions above it (``only_forced``)."""
    while (forced := only_forced(spec, ctx)) is not None:
        spec = forced.children[0]
    return spec


def under_forced(spec: Spec, ctx: SynthesisContext, build: Callable[[Spec], Impl]) -> Impl:
    """``build(past_forced(spec, ctx))`` under the forced actions above it: a tree for
    ``spec`` whose first chosen node is what ``build`` makes (for tools and tests that force
    decisions by hand)."""
    forced = only_forced(spec, ctx)
    if forced is None:
        return build(spec)
    child = under_forced(forced.children[0], ctx, build)
    cost = forced.cost(spec, [child.cost], ctx)
    peaks = forced.peaks(spec, [child.peaks], ctx)
    return Impl(spec, forced, (child,), cost, peaks)


def expand(
    root: Spec,
    ctx: SynthesisContext,
    known: Callable[[Spec], bool] | None = None,
) -> nx.DiGraph:
    """The spec-dependency graph below ``root``.

    ``known(spec)`` may report Specs that are already solved elsewhere (a memo table); they
    become leaves of the graph (``actions`` None) and are not expanded.
    """
    # Equal Specs are interned to one object so that the many dictionary lookups below hit
    # Python's identity fast path instead of comparing Specs field by field.
    interned: dict[Spec, Spec] = {root: root}
    node_actions: dict[Spec, list[Action] | None] = {}
    edges: list[tuple[Spec, Spec]] = []
    queue = deque([root])
    while queue:
        spec = queue.popleft()
        if known is not None and known(spec):
            node_actions[spec] = None
            continue
        actions = spec_actions(spec, ctx)
        node_actions[spec] = actions
        for action in actions:
            for child in action.children:
                canon = interned.get(child)
                if canon is spec:
                    raise RuleError(
                        f"rewrite {action.describe()} does not change {spec.describe()}"
                    )
                if canon is None:
                    interned[child] = canon = child
                    queue.append(child)
                edges.append((spec, canon))
    import networkx as nx  # the graph's users need it; synthesis (spec_actions) does not

    graph = nx.DiGraph()
    graph.add_nodes_from((s, {"actions": a}) for s, a in node_actions.items())
    graph.add_edges_from(edges)
    return graph


def action_for(spec: Spec, decision: tuple[object, ...], ctx: SynthesisContext) -> Action | None:
    """The action of ``spec`` that makes ``decision`` (see ``decision_of``), if any.

    A decision names the rule or kernel that made it second (after its kind), so only that
    rule's or kernel's actions are enumerated.
    """
    named = decision[1] if len(decision) > 1 and isinstance(decision[1], str) else None
    for action in spec_actions(spec, ctx, named, decision):
        if decision_of(action) == decision:
            return action
    return None
