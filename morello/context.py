"""SynthesisContext: everything a synthesis needs, passed down explicitly (no globals)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import attrs

from morello.dtypes import Dtype, dtype
from morello.errors import TargetError
from morello.lang.rule_sets import load_rule_set
from morello.plugins import Plugins
from morello.rules.ruleset import RuleSet
from morello.rules.schemas import BUILTIN_SCHEMAS, BUILTIN_SIZE_POLICIES, Schema, SizePolicy
from morello.target import CostCoefficients, Target


def _thread_count(ctx: SynthesisContext, _attr: attrs.Attribute[int], value: int) -> None:
    processors = ctx.target.processors
    if not 1 <= value <= processors:
        many = "processor" if processors == 1 else "processors"
        raise TargetError(
            f"--threads must be from 1 to the {processors} {many} of target "
            f"{ctx.target.name}, found {value}"
        )


@attrs.frozen
class SynthesisContext:
    """Target, enabled rules, cost coefficients, and the registered schemas and size policies.

    ``threads`` is the most threads a parallel loop may run on (by default the target's
    ``processors``, so that the same spec gives the same C on any machine); it matters only
    to Specs that may run in parallel, whose memo-table entries it keys.
    """

    target: Target
    ruleset: RuleSet
    coefficients: CostCoefficients
    schemas: Mapping[str, Schema] = attrs.field(default=BUILTIN_SCHEMAS, eq=False)
    size_policies: Mapping[str, SizePolicy] = attrs.field(default=BUILTIN_SIZE_POLICIES, eq=False)
    threads: int = attrs.field(
        default=attrs.Factory(lambda ctx: ctx.target.processors, takes_self=True),
        validator=_thread_count,
        kw_only=True,
    )
    #: Data derived from the fields above, worked out once per context by the code that
    #: needs it (the search's dead ends); a copy made with ``attrs.evolve`` starts empty.
    derived: dict[str, Any] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    def dtype(self, name: str) -> Dtype:
        """Dtype by name."""
        return dtype(name)


def make_context(
    target_name: str,
    plugins: Plugins | None = None,
    extra_rules: Iterable[Traversable | Path | str] = (),
    threads: int | None = None,
) -> SynthesisContext:
    """Build a context for the named target with its rule sets and coefficients.

    ``threads`` bounds parallel loops (default: the target's ``processors``).

    Raises:
        TargetError: unknown target, bad plugin, or ``threads`` not from 1 to the target's
            processors.
        RuleError / RuleSyntaxError: a rule file is wrong.
    """
    plugins = plugins or Plugins()
    target = plugins.target(target_name)
    coeffs = plugins.cost_coefficients(target)
    extra = [*plugins.rule_paths(target), *extra_rules]
    schemas = plugins.rewrite_schemas()
    policies = plugins.size_policies()
    ruleset = load_rule_set(target, coeffs, extra, schemas, policies)
    if threads is None:
        threads = target.processors
    return SynthesisContext(target, ruleset, coeffs, schemas, policies, threads=threads)
