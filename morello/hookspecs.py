"""Hook specifications for target plugins.

A target plugin is a module (or installed package) advertising an entry point in the
``morello`` group and implementing some of these hooks with ``@morello.hookimpl``::

    # my_target.py
    from morello import hookimpl, Target, MemoryLevel, CostCoefficients

    MY = Target(name="my", levels=(MemoryLevel(name="GL", capacity=1 << 30), ...), ...)

    @hookimpl
    def morello_targets():
        return [MY]

    @hookimpl(trylast=True)
    def morello_cost_coefficients(target):
        return CostCoefficients(level_hit={"GL": 10}, named={"mac": 1}) if target.name == "my" else None

and, in its ``pyproject.toml``::

    [project.entry-points.morello]
    my = "my_target"
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path

import pluggy

from morello.target import CostCoefficients, Target

PROJECT_NAME = "morello"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def morello_targets() -> Iterable[Target]:  # type: ignore[empty-body]
    """Return the targets this plugin provides.

    Every plugin may add targets; target names must be unique across plugins (a duplicate is
    reported naming both plugins).
    """


@hookspec
def morello_rule_paths(target: Target) -> Iterable[Traversable | Path]:  # type: ignore[empty-body]
    """Return extra ``.rules`` files or directories to load for ``target``.

    Results of all plugins are concatenated; files found this way are always enabled.
    Return an empty list for targets you do not serve.
    """


@hookspec(firstresult=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:  # type: ignore[empty-body]
    """Return the affine cost coefficients for ``target``, or None to pass.

    The first non-None result wins: a calibration plugin marked ``tryfirst`` overrides the
    defaults a target plugin supplies with ``trylast``.
    """
