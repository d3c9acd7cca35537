"""The DP engine: expand Specs into a dependency graph, solve it bottom-up."""

from __future__ import annotations

from morello.search.expand import expand, spec_actions
from morello.search.solve import SearchStats, solve, synthesize

__all__ = ["SearchStats", "expand", "solve", "spec_actions", "synthesize"]
