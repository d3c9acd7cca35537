"""Lark front ends: spec files and rule files -> typed objects (errors carry file:line:col)."""

from __future__ import annotations

from morello.lang.rule_file import RuleFile, parse_rule_file
from morello.lang.spec_file import SpecFile, parse_spec_file

__all__ = ["RuleFile", "SpecFile", "parse_rule_file", "parse_spec_file"]
