"""Hook specifications for target plugins; this docstring is the plugin tutorial.

A target plugin is a module that implements some of the hooks below with
``@morello.hookimpl`` and is advertised as an entry point in the ``morello`` group. The
built-in targets are loaded exactly this way, so the engine names none of them::

    # my_target.py
    from __future__ import annotations

    from morello import CostCoefficients, MemoryLevel, Target, hookimpl

    MINE = Target(
        name="mine",
        description="my board: one cache, eight scalar registers",
        levels=(
            MemoryLevel(name="GL", capacity=1 << 30, moves_to=("L1",)),
            MemoryLevel(name="L1", capacity=32 * 1024, addressed=False, moves_to=("RF",)),
            MemoryLevel(name="RF", capacity=8, unit="registers"),
        ),
        rule_sets=("core", "scalar"),
    )

    @hookimpl
    def morello_targets() -> list[Target]:
        return [MINE]

    @hookimpl(trylast=True)
    def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
        if target.name != MINE.name:
            return None
        return CostCoefficients(
            level_hit={"GL": 10, "L1": 1, "RF": 0}, named={"mac": 1, "scalar_op": 1}
        )

and, in the plugin package's ``pyproject.toml``::

    [project.entry-points.morello]
    mine = "my_target"

After ``pip install`` of that package, ``python -m morello --list-targets`` shows ``mine``.
A hook function whose name is not one of the hooks below (a typo such as
``morello_target``) is an error that names the plugin. See docs/targets.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pluggy

from morello.target import CostCoefficients, Target

if TYPE_CHECKING:
    from morello.rules.schemas import Schema, SizePolicy

PROJECT_NAME: Final = "morello"
"""The pluggy project name, which is also the entry-point group plugins advertise."""

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def morello_targets() -> Iterable[Target]:  # type: ignore[empty-body]
    """Return the targets this plugin provides.

    Called once per plugin; results are collected from every plugin. Target names must be
    unique: a name two plugins provide is a ``TargetError`` naming both plugins.

    Returns:
        The plugin's ``Target`` values (frozen data; build them once, at import).

    Example::

        @hookimpl
        def morello_targets() -> list[Target]:
            return [MINE]
    """


@hookspec
def morello_rule_paths(target: Target) -> Iterable[Traversable | Path]:  # type: ignore[empty-body]
    """Return extra ``.rules`` files or folders to load for ``target``.

    Results of all plugins are concatenated. Files found this way are always enabled for
    ``target`` (the target's ``rule_sets`` select among the built-in files only). Return an
    empty list for targets you do not serve.

    Args:
        target: the target a synthesis was asked for, whichever plugin provided it.

    Returns:
        Files or folders; a folder contributes its ``*.rules`` files in name order.

    Example::

        @hookimpl
        def morello_rule_paths(target: Target) -> list[Traversable]:
            if target.name != MINE.name:
                return []
            return [importlib.resources.files("my_target") / "kernels.rules"]
    """


@hookspec(firstresult=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """Return the affine cost coefficients for ``target``, or None to pass.

    The first non-None result wins (``firstresult``): a calibration plugin marked
    ``tryfirst`` overrides the defaults a target plugin supplies with ``trylast``. The
    coefficients must give a ``level_hit`` for every memory level of the target and every
    name the enabled kernels' ``cost`` clauses use.

    Args:
        target: the target being set up.

    Returns:
        The coefficients, or None when this plugin has none for ``target``.

    Example::

        @hookimpl(tryfirst=True)
        def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
            return MEASURED.get(target.name)
    """


@hookspec
def morello_rewrite_schemas() -> Iterable[Schema]:  # type: ignore[empty-body]
    """Return rewrite schemas that rule files may name: ``rewrite <name> for <ops> ...``.

    Results are collected from every plugin; a schema name two plugins provide is a
    ``TargetError`` naming both. The built-in ``tile_out``, ``split`` and ``move`` come from
    ``morello.rules.schemas``, registered this same way before any entry point.

    Returns:
        Objects with a ``name`` and ``actions(rule, spec, ctx)``, which yields the actions
        (``morello.nodes``, or a kind of your own) that the rule line offers for ``spec``;
        ``rule.sizes`` names its size policy (``ctx.size_policies``), ``rule.layouts`` its
        layouts. Every action must make progress (a smaller tile, a faster level, another
        op), or the search reports a cycle.

    Example::

        @hookimpl
        def morello_rewrite_schemas() -> list[Schema]:
            return [TileSquare()]   # rule files may now say `rewrite tile_square for matmul`
    """


@hookspec
def morello_size_policies() -> Mapping[str, SizePolicy]:  # type: ignore[empty-body]
    """Return size policies that schema rules may name: ``rewrite tile_out for * sizes NAME``.

    Results are merged from every plugin; a name two plugins provide is a ``TargetError``.
    Built in: ``pow2``, ``pow2_3``, ``all``.

    Returns:
        Name -> function of an extent returning the loop steps to offer (each below the
        extent, increasing).

    Example::

        @hookimpl
        def morello_size_policies() -> dict[str, SizePolicy]:
            return {"even": lambda n: list(range(2, n, 2))}
    """
