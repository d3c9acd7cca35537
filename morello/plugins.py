"""Plugin manager: entry-point discovery, validation, lookup of targets by name.

Built-in targets are loaded exactly like third-party ones, through the ``morello``
entry-point group, so the engine names none of them.
"""

from __future__ import annotations

import importlib.metadata
import traceback
from collections.abc import Iterable
from importlib.resources.abc import Traversable
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pluggy

from morello import calibration, hookspecs
from morello.errors import MorelloError, TargetError
from morello.rules import schemas as builtin_schemas
from morello.rules.schemas import Schema, SizePolicy
from morello.target import CostCoefficients, Target

#: The plugin name of the built-in schemas and size policies.
BUILTIN_PLUGIN = "morello.builtin"
#: The plugin name of the built-in calibration plugin (``morello.calibration``).
CALIBRATION_PLUGIN = "morello.calibration"


@attrs.frozen
class InstalledTarget:
    """A target with the plugin (and distribution) that provided it."""

    target: Target
    plugin: str
    dist: str


class Plugins:
    """A plugin manager with the engine's hooks, loaded from entry points and/or modules."""

    def __init__(
        self,
        modules: Iterable[ModuleType | object] = (),
        *,
        entry_points: bool = True,
        block: Iterable[str] = (),
    ) -> None:
        """Load plugins and validate them.

        Args:
            modules: plugin objects (usually modules) to register in-process, after the
                entry points; their name is ``module.__name__``.
            entry_points: also load every entry point of the ``morello`` group.
            block: plugin (entry-point) names to skip.

        Raises:
            TargetError: a plugin implements a hook that does not exist, or a hook with
                arguments its specification lacks; the message names the plugin.
        """
        self.pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        # The built-in rewrite schemas and size policies come in as a plugin like any other.
        self.pm.register(builtin_schemas, name=BUILTIN_PLUGIN)
        for name in block:
            self.pm.set_blocked(name)
        # This machine's calibrated coefficients (a file, if any) override the targets'
        # defaults through a tryfirst hook; registered after the block list so that
        # ``block=["morello.calibration"]`` turns it off.
        self.pm.register(calibration, name=CALIBRATION_PLUGIN)
        try:
            if entry_points:
                self._import_entry_points()
                self.pm.load_setuptools_entrypoints(hookspecs.PROJECT_NAME)
            for mod in modules:
                self.pm.register(mod)
        except pluggy.PluginValidationError as exc:
            name = self.pm.get_name(exc.plugin) or str(getattr(exc.plugin, "__name__", "?"))
            reason = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise TargetError(f"invalid plugin {name!r}: {reason}") from None
        self._check_pending()

    def _import_entry_points(self) -> None:
        """Import every plugin module that is not blocked before pluggy registers them, so
        that one that fails to import (a Target that its own validation refuses, a syntax
        error) is a TargetError naming it, not a traceback from pluggy's loop."""
        for dist in importlib.metadata.distributions():
            for ep in dist.entry_points:
                if ep.group != hookspecs.PROJECT_NAME or self.pm.is_blocked(ep.name):
                    continue
                try:
                    ep.load()
                except Exception as exc:
                    where = f"{dist.metadata['Name']} {dist.version}"
                    raise TargetError(
                        f"plugin {ep.name!r} ({where}) failed to load"
                        f"{_raised_in(exc, module=ep.module)}: {type(exc).__name__}: {exc}"
                    ) from None

    def _check_pending(self) -> None:
        # pluggy's own check_pending names the plugin object, not its name; report the
        # unknown hook and the known ones instead, so a typo is easy to see.
        known = sorted(
            name for name, caller in vars(self.pm.hook).items() if caller.spec is not None
        )
        for name, caller in sorted(vars(self.pm.hook).items()):
            if caller.spec is not None:
                continue
            for impl in caller.get_hookimpls():
                if not impl.optionalhook:
                    raise TargetError(
                        f"plugin {impl.plugin_name!r} implements unknown hook {name!r} "
                        f"(known hooks: {', '.join(known)})"
                    )
        self.pm.check_pending()

    @staticmethod
    def _call(impl: pluggy.HookImpl, hook: str) -> Any:
        """What one plugin's implementation of ``hook`` (which takes no arguments) returns;
        a TargetError naming the plugin and its line if it raises."""
        try:
            return impl.function()
        except MorelloError:
            raise
        except Exception as exc:
            raise _failed(impl, hook, exc) from None

    def _hook(self, hook: str, **kwargs: Any) -> Any:
        """``hook`` called through pluggy (every plugin's implementation, or the first
        result). A plugin's own MorelloError (the calibration file's, say) passes through;
        any other exception is a TargetError naming the plugin."""
        try:
            return getattr(self.pm.hook, hook)(**kwargs)
        except MorelloError:
            raise
        except Exception as exc:
            raise self._hook_failed(hook, exc) from None

    def _hook_failed(self, hook: str, exc: Exception) -> TargetError:
        """The error for a hook that raised, naming the plugin whose implementation the
        exception came through last (pluggy calls several) and its innermost line there."""
        impls = {i.function.__code__: i for i in getattr(self.pm.hook, hook).get_hookimpls()}
        culprit = None
        for frame, _ in traceback.walk_tb(exc.__traceback__):
            culprit = impls.get(frame.f_code, culprit)
        if culprit is None:
            return TargetError(f"a plugin's {hook} failed: {type(exc).__name__}: {exc}")
        return _failed(culprit, hook, exc)

    def _dist_of(self, plugin: object) -> str:
        for plug, dist in self.pm.list_plugin_distinfo():
            if plug is plugin:
                return f"{dist.project_name} {dist.version}"
        return "(registered in-process)"

    def targets(self) -> list[InstalledTarget]:
        """Every target of every plugin, in name order; duplicates are an error."""
        found: dict[str, InstalledTarget] = {}
        for impl in self.pm.hook.morello_targets.get_hookimpls():
            result = self._call(impl, "morello_targets")
            if not isinstance(result, Iterable) or isinstance(result, Target):
                raise TargetError(
                    f"plugin {impl.plugin_name!r}: morello_targets returned "
                    f"{type(result).__name__}, not an iterable of Targets"
                )
            for t in result:
                if not isinstance(t, Target):
                    raise TargetError(
                        f"plugin {impl.plugin_name!r} returned {type(t).__name__}, not a Target"
                    )
                if t.name in found:
                    raise TargetError(
                        f"target {t.name!r} is provided by both {found[t.name].plugin!r} "
                        f"and {impl.plugin_name!r}"
                    )
                found[t.name] = InstalledTarget(t, impl.plugin_name, self._dist_of(impl.plugin))
        return [found[n] for n in sorted(found)]

    def target(self, name: str) -> Target:
        """The target called ``name``; TargetError naming the installed ones if absent."""
        installed = self.targets()
        for it in installed:
            if it.target.name == name:
                return it.target
        if not installed:
            raise TargetError(
                f"unknown target {name!r}: no targets installed; run `pip install -e .`"
            )
        names = ", ".join(it.target.name for it in installed)
        raise TargetError(f"unknown target {name!r} (installed: {names}; see --list-targets)")

    def rule_paths(self, target: Target) -> list[Traversable | Path]:
        """Extra rule files plugins supply for ``target``."""
        out: list[Traversable | Path] = []
        for result in self._hook("morello_rule_paths", target=target):
            out.extend(result or ())
        return out

    def cost_coefficients(self, target: Target) -> CostCoefficients:
        """The winning cost coefficients for ``target``."""
        coeffs = self._hook("morello_cost_coefficients", target=target)
        if coeffs is None:
            raise TargetError(f"no plugin supplies cost coefficients for target {target.name!r}")
        if not isinstance(coeffs, CostCoefficients):
            raise TargetError(f"cost coefficients for {target.name!r} are not CostCoefficients")
        missing = [lv.name for lv in target.levels if lv.name not in coeffs.level_hit]
        if missing:
            raise TargetError(
                f"cost coefficients for {target.name!r} lack level(s) {', '.join(missing)}"
            )
        return coeffs

    def rewrite_schemas(self) -> dict[str, Schema]:
        """Every registered rewrite schema by name; a name two plugins provide is an error."""
        found: dict[str, tuple[Schema, str]] = {}
        for impl in self.pm.hook.morello_rewrite_schemas.get_hookimpls():
            for schema in self._call(impl, "morello_rewrite_schemas"):
                if schema.name in found:
                    raise TargetError(
                        f"rewrite schema {schema.name!r} is provided by both "
                        f"{found[schema.name][1]!r} and {impl.plugin_name!r}"
                    )
                found[schema.name] = (schema, impl.plugin_name)
        return {name: schema for name, (schema, _) in found.items()}

    def size_policies(self) -> dict[str, SizePolicy]:
        """Every registered size policy by name; a name two plugins provide is an error."""
        found: dict[str, tuple[SizePolicy, str]] = {}
        for impl in self.pm.hook.morello_size_policies.get_hookimpls():
            for name, policy in dict(self._call(impl, "morello_size_policies")).items():
                if name in found:
                    raise TargetError(
                        f"size policy {name!r} is provided by both {found[name][1]!r} "
                        f"and {impl.plugin_name!r}"
                    )
                found[name] = (policy, impl.plugin_name)
        return {name: policy for name, (policy, _) in found.items()}


def _failed(impl: pluggy.HookImpl, hook: str, exc: Exception) -> TargetError:
    """The error for ``impl`` of ``hook`` having raised ``exc``: the plugin, its line."""
    where = _raised_in(exc, filename=impl.function.__code__.co_filename)
    return TargetError(
        f"plugin {impl.plugin_name!r}: {hook} failed{where}: {type(exc).__name__}: {exc}"
    )


def _raised_in(exc: BaseException, *, module: str = "", filename: str = "") -> str:
    """`` at FILE:LINE``: the innermost line the exception passed through in ``module`` (or
    a submodule) or in the file ``filename``, where a plugin's author should look; empty if
    none."""
    where = ""
    for frame, line in traceback.walk_tb(exc.__traceback__):
        name = frame.f_globals.get("__name__", "")
        in_module = bool(module) and (name == module or name.startswith(module + "."))
        if in_module or frame.f_code.co_filename == filename:
            where = f" at {frame.f_code.co_filename}:{line}"
    return where
