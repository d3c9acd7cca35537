"""The DP engine: a memoized depth-first walk of the spec-dependency graph."""

from __future__ import annotations

from morello.search.expand import expand, spec_actions
from morello.search.solve import SearchStats, synthesize

__all__ = ["SearchStats", "expand", "spec_actions", "synthesize"]
