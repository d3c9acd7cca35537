"""A rewrite schema and a size policy added by a plugin, with no engine change.

The plugin here is a module built in this test: it registers a schema ``halve`` (loop over
an output index in two halves) and a size policy ``sevens`` (steps of 7). A rule file in
``tmp_path`` names both; the rule set loads, synthesis offers and can use their actions, and
a rule file naming a schema nobody registered is still a located error listing the ones
that are.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import attrs
import pytest

from morello import hookimpl
from morello.context import SynthesisContext, make_context
from morello.errors import RuleError, TargetError
from morello.impl import Action
from morello.lang.spec_file import build_program, parse_spec_file
from morello.nodes import LoopAction
from morello.plugins import Plugins
from morello.rules.rewrites import SchemaRule
from morello.rules.schemas import TileOut
from morello.search.expand import past_forced, spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec


@attrs.frozen
class Halve:
    """Loop over each even output extent in two halves."""

    name: str = "halve"

    def actions(self, rule: SchemaRule, spec: Spec, ctx: SynthesisContext) -> Iterator[Action]:
        for loop in TileOut().actions(rule, spec, ctx):
            assert isinstance(loop, LoopAction)
            if loop.trips == 2 and loop.tail is None:
                yield attrs.evolve(loop, rule=self.name)


def _plugin(name: str = "halving_plugin") -> ModuleType:
    mod = ModuleType(name)

    @hookimpl
    def morello_rewrite_schemas() -> list[Halve]:
        return [Halve()]

    @hookimpl
    def morello_size_policies() -> dict[str, object]:
        return {"sevens": lambda n: [7] if n > 7 else []}

    mod.morello_rewrite_schemas = morello_rewrite_schemas  # type: ignore[attr-defined]
    mod.morello_size_policies = morello_size_policies  # type: ignore[attr-defined]
    return mod


def _ctx(target_name: str, tmp_path: Path, text: str) -> SynthesisContext:
    rules = tmp_path / "halving.rules"
    rules.write_text(text, encoding="utf-8")
    plugins = Plugins(modules=[_plugin()])
    return make_context(target_name, plugins, [rules])


def _spec(ctx: SynthesisContext, m: int) -> Spec:
    """The product's Spec, past a residency in an L2 (where the target has one)."""
    text = f"func f(a: f32[{m}, 8], b: f32[8, 8]) -> c: f32[{m}, 8] {{\n    c = matmul(a, b)\n}}\n"
    return past_forced(build_program(parse_spec_file("<f>", text).funcs[0], ctx).spec, ctx)


def test_rule_file_uses_a_schema_and_a_size_policy_from_a_plugin(
    target_name: str, tmp_path: Path
) -> None:
    ctx = _ctx(
        target_name,
        tmp_path,
        "rewrite halve for matmul sizes pow2\nrewrite tile_out for matmul sizes sevens\n",
    )
    assert list(ctx.schemas) == [
        "tile_out",
        "split",
        "split_init",
        "move",
        "pipeline",
        "split_fuse",
        "parallel_tile_out",
        "reside",
        "halve",
    ]
    spec = _spec(ctx, 16)
    halves = [a for a in spec_actions(spec, ctx) if getattr(a, "rule", None) == "halve"]
    assert [(a.var, a.step) for a in halves] == [("m", 8), ("n", 4)]  # type: ignore[attr-defined]
    sevens = [
        a
        for a in spec_actions(_spec(ctx, 14), ctx)
        if isinstance(a, LoopAction) and a.rule == "tile_out" and a.step == 7
    ]
    # n = 8: one step of 7 and a tail (a target with its own sevens, spr, offers them twice)
    assert sorted(set(a.var for a in sevens)) == ["m", "n"]
    impl, _ = synthesize(spec, ctx)  # the extended rule set still synthesizes
    assert impl.cost > 0


def test_unknown_schema_lists_the_registered_ones(target_name: str, tmp_path: Path) -> None:
    with pytest.raises(RuleError) as info:
        _ctx(target_name, tmp_path, "rewrite quarter for matmul\n")
    assert str(info.value).splitlines()[0] == (
        f"{tmp_path / 'halving.rules'}:1:9: error: unknown rewrite schema 'quarter' "
        "(known: tile_out, split, split_init, move, pipeline, split_fuse, parallel_tile_out, "
        "reside, halve)"
    )


def test_a_schema_name_two_plugins_provide_is_an_error() -> None:
    with pytest.raises(TargetError) as info:
        Plugins(modules=[_plugin(), _plugin("copy_plugin")], entry_points=False).rewrite_schemas()
    assert str(info.value) == (
        "morello: error: rewrite schema 'halve' is provided by both 'halving_plugin' and "
        "'copy_plugin'"
    )
