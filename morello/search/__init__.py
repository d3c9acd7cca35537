"""The DP engine: a memoized depth-first walk of the spec-dependency graph."""

from __future__ import annotations

from morello.search.expand import expand, only_forced, past_forced, spec_actions, under_forced
from morello.search.solve import SearchStats, synthesize

__all__ = [
    "SearchStats",
    "expand",
    "only_forced",
    "past_forced",
    "spec_actions",
    "synthesize",
    "under_forced",
]
