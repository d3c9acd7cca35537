"""The built-in decompositions compute their ops.

A decomposition from a ``--rules`` file or a plugin is evaluated against its op's index
notation when the rule set is assembled (``DecomposeRule.value_mismatch``); the built-in
ones are trusted there, so that synthesis need not import NumPy, and evaluated here
instead, on every target's rule set.
"""

from __future__ import annotations

import numpy as np

from morello.context import SynthesisContext
from morello.rules.rewrites import DecomposeRule


def test_every_builtin_decomposition_computes_its_op(ctx: SynthesisContext) -> None:
    rules = [r for r in ctx.ruleset.rules if isinstance(r, DecomposeRule)]
    assert {r.name for r in rules} >= {"to_accum", "softmax", "exp_shifted", "div_rows"}
    for r in rules:
        opdef = ctx.ruleset.ops[r.op]
        sizes = {ix: 2 + n for n, ix in enumerate(opdef.index_vars)}
        inputs = {p: np.ones(opdef.operand_shape(i, sizes)) for i, p in enumerate(r.params)}
        out_shape = opdef.operand_shape(len(r.params), sizes)
        assert r._evaluate(ctx.ruleset.ops, inputs, out_shape) is not None, r.name  # judged
        assert r.value_mismatch(ctx.ruleset.ops) is None, r.name
