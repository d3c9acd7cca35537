"""SynthesisContext: everything a synthesis needs, passed down explicitly (no globals)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path

import attrs

from morello.dtypes import Dtype, dtype
from morello.lang.rule_sets import load_rule_set
from morello.plugins import Plugins
from morello.rules.ruleset import RuleSet
from morello.rules.schemas import BUILTIN_SCHEMAS, BUILTIN_SIZE_POLICIES, Schema, SizePolicy
from morello.target import CostCoefficients, Target


@attrs.frozen
class SynthesisContext:
    """Target, enabled rules, cost coefficients, and the registered schemas and size policies."""

    target: Target
    ruleset: RuleSet
    coefficients: CostCoefficients
    schemas: Mapping[str, Schema] = attrs.field(default=BUILTIN_SCHEMAS, eq=False)
    size_policies: Mapping[str, SizePolicy] = attrs.field(default=BUILTIN_SIZE_POLICIES, eq=False)

    def dtype(self, name: str) -> Dtype:
        """Dtype by name."""
        return dtype(name)


def make_context(
    target_name: str,
    plugins: Plugins | None = None,
    extra_rules: Iterable[Traversable | Path | str] = (),
) -> SynthesisContext:
    """Build a context for the named target with its rule sets and coefficients.

    Raises:
        TargetError: unknown target or bad plugin.
        RuleError / RuleSyntaxError: a rule file is wrong.
    """
    plugins = plugins or Plugins()
    target = plugins.target(target_name)
    coeffs = plugins.cost_coefficients(target)
    extra = [*plugins.rule_paths(target), *extra_rules]
    schemas = plugins.rewrite_schemas()
    policies = plugins.size_policies()
    ruleset = load_rule_set(target, coeffs, extra, schemas, policies)
    return SynthesisContext(target, ruleset, coeffs, schemas, policies)
