"""Synthesis is deterministic: the same Spec gets the same Impl tree, memo or not.

Also across processes with different string-hash seeds, so that no answer depends on the
iteration order of a set or dict keyed by hashed objects.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from morello.context import SynthesisContext
from morello.impl import Impl
from morello.search.solve import _WALK_GC_THRESHOLD, Solution, synthesize, walking
from morello.spec import Spec

SHAPES = [(1, 1, 1), (2, 3, 4), (4, 4, 4), (1, 2, 8)]


def decisions(impl: Impl) -> list[str]:
    """The tree's actions, pre-order, as text (comparable across processes)."""
    return [f"{node.spec.describe()} | {node.action.describe()}" for node in impl.walk()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_fresh_memos_give_equal_trees(
    shape: tuple[int, int, int], ctx: SynthesisContext, matmul_spec
) -> None:
    spec = matmul_spec(*shape)
    first, stats1 = synthesize(spec, ctx)
    second, stats2 = synthesize(spec, ctx, {})
    assert first == second
    assert first.cost == second.cost
    assert [n.action for n in first.walk()] == [n.action for n in second.walk()]
    assert stats1.graph_nodes == stats2.graph_nodes
    assert stats1.graph_edges == stats2.graph_edges


def test_shared_memo_gives_the_fresh_trees(ctx: SynthesisContext, matmul_spec) -> None:
    fresh = {shape: synthesize(matmul_spec(*shape), ctx)[0] for shape in SHAPES}
    for order in (SHAPES, SHAPES[::-1]):
        memo: dict[Spec, Solution | None] = {}
        for shape in order:
            impl, _ = synthesize(matmul_spec(*shape), ctx, memo)
            assert impl == fresh[shape], shape
        # A second pass is answered from the memo alone, with the same trees.
        for shape in order:
            impl, stats = synthesize(matmul_spec(*shape), ctx, memo)
            assert stats.specs_visited == 0
            assert impl == fresh[shape], shape


def test_sub_problems_solved_inside_a_larger_search_match_their_own_search(
    ctx: SynthesisContext, matmul_spec
) -> None:
    memo: dict[Spec, Solution | None] = {}
    big, _ = synthesize(matmul_spec(4, 4, 4), ctx, memo)
    for node in big.walk()[1:12]:
        own, _ = synthesize(node.spec, ctx)
        assert own == node


_CHILD = """
import json, sys
from morello.context import make_context
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize
ctx = make_context(sys.argv[1])
(func,) = parse_spec_file("mm.lark", sys.argv[2]).funcs
impl, stats = synthesize(build_program(func, ctx).spec, ctx)
out = [impl.cost, stats.graph_nodes, stats.graph_edges]
out += [f"{n.spec.describe()} | {n.action.describe()}" for n in impl.walk()]
print(json.dumps(out))
"""


def test_other_hash_seeds_give_the_same_tree(
    ctx: SynthesisContext, target_name: str, matmul_spec, matmul_source
) -> None:
    text = matmul_source(2, 3, 4)
    impl, stats = synthesize(matmul_spec(2, 3, 4), ctx)
    here = [impl.cost, stats.graph_nodes, stats.graph_edges, *decisions(impl)]
    for seed in ("0", "4242"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, target_name, text],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
            timeout=300,
        )
        assert json.loads(done.stdout) == here, f"PYTHONHASHSEED={seed}"


def test_walking_sets_python_up_and_restores_it() -> None:
    """The walk runs with a deep recursion limit and rare garbage collections, and Python's
    own settings are back afterwards, also when the walk raises."""
    limit, thresholds = sys.getrecursionlimit(), gc.get_threshold()
    with pytest.raises(KeyError), walking():
        assert sys.getrecursionlimit() >= 20_000
        assert gc.get_threshold()[0] >= _WALK_GC_THRESHOLD
        assert gc.get_threshold()[1:] == thresholds[1:]
        raise KeyError
    assert (sys.getrecursionlimit(), gc.get_threshold()) == (limit, thresholds)
