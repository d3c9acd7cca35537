"""Morello: synthesizes fast C for small tensor programs by dynamic programming.

The engine knows no op, kernel or target by name: ops, rewrites and kernels come from rule
files, targets from plugins.
"""

from __future__ import annotations

from morello.errors import MorelloError
from morello.hookspecs import hookimpl
from morello.target import CostCoefficients, MemoryLevel, Target

__version__ = "0.1.0"

__all__ = [
    "CostCoefficients",
    "MemoryLevel",
    "MorelloError",
    "Target",
    "__version__",
    "hookimpl",
]
