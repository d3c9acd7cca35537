"""Calibrated cost coefficients: fitted to measured times, kept per machine, served by a plugin.

The defaults a target plugin supplies are rough (reciprocal throughputs in cycles). A
calibration times many small serial programs on this machine, fits the coefficients to the
times (``fit``), and keeps the result in a file (``save``)::

    $XDG_CONFIG_HOME/morello/calibration/<machine>/<target>.json

(``~/.config`` when ``XDG_CONFIG_HOME`` is unset; ``<machine>`` is ``machine_name()``, the host
and CPU model). This module is registered as a built-in plugin (``morello.calibration``)
whose ``morello_cost_coefficients`` hook is ``tryfirst``: where the file exists, its
coefficients override the target's defaults, and the memo table's namespace changes with
them (it hashes the coefficients), so answers found under the defaults are not reused.

Set ``MORELLO_CALIBRATION=off`` to ignore the file (``load`` returns None: the defaults
apply), or block the plugin: ``Plugins(block=["morello.calibration"])``.

The fit is linear. Every coefficient a fit adjusts is a *parameter* (``parameters``); the
cost of an Impl tree grows with each by a *feature* (``features``): the lines, operations
or trips it pays that coefficient for. A program's time is modelled as the sum of its
features times the parameters, fitted by non-negative least squares over the programs'
relative errors (``fit``; ``fit_stats`` judges given coefficients). Only ``fit`` imports
NumPy and SciPy (the ``fit`` extra: ``pip install 'morello[fit]'``), so that loading
coefficients stays light.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import os
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import attrs

from morello import hookimpl
from morello.errors import TargetError
from morello.target import STRIDED, CostCoefficients, Target

if TYPE_CHECKING:
    from morello.context import SynthesisContext
    from morello.impl import Impl

#: The version of the calibration file's layout; ``load`` refuses any other.
FORMAT: Final = 1

#: The environment variable that turns calibrated coefficients off (value ``off``).
ENV_VAR: Final = "MORELLO_CALIBRATION"

#: How much ``features`` raises each parameter: large, so that the integer ceilings of the
#: cost rules (a kernel's ``n * op / 8``, a loop's latency shared by its chains) round by a
#: negligible fraction of the difference.
DELTA: Final = 1000

#: With execution resources, ``features`` takes its slopes at the coefficients times this,
#: where ``DELTA`` is far too small a step to move a cost from one resource to another.
RESOURCE_SCALE: Final = 1_000_000

#: The coefficient fields that parameters name one entry of, by level or name.
_ENTRY_FIELDS: Final = ("level_hit", "named", "chain_latency", "stream_restart")
_MAPPING_FIELDS: Final = (*_ENTRY_FIELDS, "stream_hit", "stream_burst")
_INT_FIELDS: Final = ("stream_lines", "stream_reuse", "fork_join")
_REQUIRED_FIELDS: Final = ("level_hit", "named")


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/morello`` (``~/.config/morello`` when unset or empty)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "morello"


def _slug(text: str) -> str:
    """``text`` lowercased, runs of other characters than letters and digits as one ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


@functools.cache
def cpu_model() -> str:
    """The CPU's model as the system names it (``/proc/cpuinfo``), or ``unknown-cpu``."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    import platform

    return platform.processor().strip() or "unknown-cpu"


def _cpu_slug(model: str) -> str:
    """A short slug of a CPU model: no trademark marks, clock, or words ``CPU``/``Processor``."""
    text = re.sub(r"\((r|tm|c)\)", " ", model, flags=re.IGNORECASE)
    text = text.split("@")[0]
    text = re.sub(r"\b(cpu|processor)\b", " ", text, flags=re.IGNORECASE)
    return _slug(text) or "unknown-cpu"


def _host_name() -> str:
    """This machine's network name (possibly qualified)."""
    if hasattr(os, "uname"):
        return os.uname().nodename
    import platform

    return platform.node()


def machine_name() -> str:
    """A short, stable, filesystem-safe name of this machine: host and CPU model.

    For example ``myhost-intel-xeon-platinum-8480`` (host ``myhost.example.com``, CPU
    ``Intel(R) Xeon(R) Platinum 8480+``): the host name's first label, then the CPU model
    without trademark marks, clock or the words ``CPU`` and ``Processor``.
    """
    host = _slug(_host_name().split(".")[0]) or "unknown-host"
    return f"{host}-{_cpu_slug(cpu_model())}"[:96].strip("-")


def calibration_path(target_name: str) -> Path:
    """``config_dir()/calibration/<machine_name()>/<target>.json``.

    A target name is used as it is (other characters than letters, digits, ``_``, ``.`` and
    ``-`` become ``-``).
    """
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", target_name).strip(".") or "_"
    return config_dir() / "calibration" / machine_name() / f"{stem}.json"


def coefficients_json(coeffs: CostCoefficients) -> dict[str, Any]:
    """Every field of ``coeffs`` as JSON values (tuples as lists)."""
    out: dict[str, Any] = {}
    for field in attrs.fields(CostCoefficients):
        value = getattr(coeffs, field.name)
        if field.name == "stream_hit":
            value = {k: list(v) for k, v in value.items()}
        elif field.name == "resources":
            value = {k: dict(v) for k, v in value.items()}
        elif isinstance(value, Mapping):
            value = dict(value)
        out[field.name] = value
    return out


def save(
    target_name: str, coeffs: CostCoefficients, info: Mapping[str, Any], *, units: str = "ps"
) -> Path:
    """Write ``coeffs`` as this machine's calibration of ``target_name``, atomically.

    Args:
        target_name: the target the coefficients are for.
        coeffs: the fitted coefficients.
        info: free-form, JSON-friendly facts about the fit (its statistics, the programs).
        units: what one unit of a coefficient is (``ps``: picoseconds).

    Returns:
        The file written (``calibration_path(target_name)``).
    """
    import datetime
    import tempfile

    path = calibration_path(target_name)
    doc = {
        "format": FORMAT,
        "target": target_name,
        "machine": machine_name(),
        "cpu": cpu_model(),
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "units": units,
        "coefficients": coefficients_json(coeffs),
        "info": dict(info),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _parse_coefficients(raw: object) -> CostCoefficients:
    """CostCoefficients from their JSON form; ValueError saying what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("'coefficients' is not an object")
    known = {f.name for f in attrs.fields(CostCoefficients)}
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ValueError(f"unknown coefficient field(s) {', '.join(unknown)}")
    missing = [name for name in _REQUIRED_FIELDS if name not in raw]
    if missing:
        raise ValueError(f"missing coefficient field(s) {', '.join(missing)}")
    for name in _MAPPING_FIELDS:
        value = raw.get(name, {})
        if not isinstance(value, dict):
            raise ValueError(f"{name} is not an object")
        for key, entry in value.items():
            ok = (
                isinstance(entry, list) and all(_is_int(e) for e in entry)
                if name == "stream_hit"
                else _is_int(entry)
            )
            if not ok:
                raise ValueError(f"{name}.{key} is {entry!r}, not a non-negative integer")
    resources = raw.get("resources", {})
    if not isinstance(resources, dict) or not all(
        isinstance(prices, dict) and all(_is_int(p) for p in prices.values())
        for prices in resources.values()
    ):
        raise ValueError("resources is not an object of objects of non-negative integers")
    for name in _INT_FIELDS:
        if name in raw and not _is_int(raw[name]):
            raise ValueError(f"{name} is {raw[name]!r}, not a non-negative integer")
    for name in ("stream_lines", "stream_reuse"):
        if raw.get(name, 1) < 1:
            raise ValueError(f"{name} must be at least 1")
    return CostCoefficients(**raw)


def load(target_name: str) -> CostCoefficients | None:
    """This machine's calibrated coefficients for ``target_name``, if any.

    Returns:
        The coefficients; None when there is no file, or ``MORELLO_CALIBRATION=off``.

    Raises:
        TargetError: ``MORELLO_CALIBRATION`` is set to neither ``on`` nor ``off``; the file
            is unreadable, damaged, of another format or for another target; the one-line
            message names it and says how to start fresh.
    """
    switch = os.environ.get(ENV_VAR, "").strip().lower()
    if switch == "off":
        return None
    if switch not in ("", "on"):  # a misspelt "off" must not quietly mean on
        raise TargetError(f"{ENV_VAR} must be 'on' or 'off' (or unset), found {switch!r}")
    path = calibration_path(target_name)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise _damaged(path, target_name, f"unreadable: {exc}") from None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict):
            raise ValueError("not a JSON object")
        if doc.get("format") != FORMAT:
            raise ValueError(f"format {doc.get('format')!r}, expected {FORMAT}")
        if doc.get("target") != target_name:
            raise ValueError(f"made for target {doc.get('target')!r}")
        return _parse_coefficients(doc.get("coefficients"))
    except (ValueError, TypeError) as exc:  # json.JSONDecodeError is a ValueError
        reason = " ".join(str(exc).split())
        raise _damaged(path, target_name, reason) from None


def _damaged(path: Path, target_name: str, reason: str) -> TargetError:
    return TargetError(
        f"calibration file {path} is damaged ({reason}); re-run "
        f"`python -m morello calibrate --target {target_name}` or delete the file"
    )


@hookimpl(tryfirst=True)
def morello_cost_coefficients(target: Target) -> CostCoefficients | None:
    """This machine's calibrated coefficients for ``target``; None (pass) without a file."""
    return load(target.name)


# --- Parameters -------------------------------------------------------------------------------


def parameters(coeffs: CostCoefficients) -> list[str]:
    """The names of the coefficients a fit adjusts, in a fixed order.

    Every nonzero entry of ``level_hit``, ``named``, ``chain_latency`` and
    ``stream_restart`` (``level_hit.<level>``, ``named.<name>``, ...), and one scale per
    level of ``stream_hit`` whose first entry is nonzero (``stream_hit.<level>``: its value
    is the first entry, and changing it scales the whole tuple, keeping the ratios between
    its entries). Zero entries stay out: a level whose ``level_hit`` is 0 is free (registers)
    by definition, and a name priced 0 is not a cost. With ``resources``, each nonzero price
    of a resource is one too (``resources.<resource>.<term>``), and the named coefficients
    they price are not (kernels pay the resources' prices instead). ``fork_join``,
    ``stream_lines``, ``stream_reuse`` and ``stream_burst`` are not parameters: calibration
    times serial programs, and the other three are thresholds.
    """
    priced = {term for prices in coeffs.resources.values() for term in prices}
    names: list[str] = []
    for field in _ENTRY_FIELDS:
        names.extend(
            f"{field}.{k}"
            for k, v in getattr(coeffs, field).items()
            if v and not (field == "named" and k in priced)
        )
    names.extend(f"stream_hit.{k}" for k, v in coeffs.stream_hit.items() if v and v[0])
    for resource, prices in coeffs.resources.items():
        names.extend(f"resources.{resource}.{term}" for term, v in prices.items() if v)
    return names


def _split(name: str) -> tuple[str, str]:
    field, dot, key = name.partition(".")
    if not dot or field not in (*_MAPPING_FIELDS, "resources"):
        raise KeyError(f"not a parameter name: {name!r}")
    if field == "resources" and "." not in key:
        raise KeyError(f"not a parameter name: {name!r} (resources.<resource>.<term>)")
    return field, key


def get_param(coeffs: CostCoefficients, name: str) -> float:
    """The value of parameter ``name`` (see ``parameters``) in ``coeffs``.

    Raises:
        KeyError: ``name`` is not of the form ``<field>.<key>`` or ``coeffs`` lacks the entry.
    """
    field, key = _split(name)
    if field == "resources":
        resource, _, term = key.partition(".")
        return float(coeffs.resources[resource][term])
    value = getattr(coeffs, field)[key]
    return float(value[0] if field == "stream_hit" else value)


def _positive_int(value: float) -> int:
    """``value`` rounded, but 1 rather than 0 for a positive value."""
    return max(1, round(value)) if value > 0 else 0


def with_params(coeffs: CostCoefficients, values: Mapping[str, float]) -> CostCoefficients:
    """``coeffs`` with the parameters in ``values`` set, as integers.

    Values are rounded; a positive value never rounds to 0 (it becomes 1) and a negative one
    is 0. Two kinds of parameter never become 0: ``level_hit`` (a level whose hit costs 0 is
    free, and its accesses would then have no feature to fit again) and the scale of
    ``stream_hit`` (a zero tuple loses the ratios between its entries); a fitted 0 becomes 1.
    A ``stream_hit`` scale multiplies every entry by ``new / old`` of the first entry, each
    rounded, at least 1 where it was nonzero.

    Raises:
        KeyError: a name is not a parameter of ``coeffs``.
    """
    changes: dict[str, Any] = {}
    for name, value in values.items():
        field, key = _split(name)
        if field == "resources":
            resource, _, term = key.partition(".")
            if term not in coeffs.resources.get(resource, {}):
                raise KeyError(f"{name}: no such price")
            new = changes.setdefault("resources", {r: dict(p) for r, p in coeffs.resources.items()})
            new[resource][term] = _positive_int(value)
            continue
        current = getattr(coeffs, field)
        if key not in current:
            raise KeyError(f"{name}: no such coefficient")
        new = changes.setdefault(field, dict(current))
        if field == "stream_hit":
            old = current[key]
            if not old or not old[0]:
                raise KeyError(f"{name}: the tuple has no nonzero first entry to scale")
            first = max(1.0, value)
            new[key] = tuple(_positive_int(e * first / old[0]) if e else 0 for e in old)
        elif field == "level_hit":
            new[key] = max(1, _positive_int(value))
        else:
            new[key] = _positive_int(value)
    return attrs.evolve(coeffs, **changes)


# --- Costs and features -----------------------------------------------------------------------


def tree_cost(impl: Impl, ctx: SynthesisContext) -> int:
    """The cost of the Impl tree ``impl`` under ``ctx``'s coefficients, bottom-up.

    Each node is costed as the search costs it (``action.cost`` of its children's costs), so
    under the coefficients the tree was found with this equals ``impl.cost``.
    """
    child_costs = [tree_cost(child, ctx) for child in impl.children]
    return impl.action.cost(impl.spec, child_costs, ctx)


def _delta_for(coeffs: CostCoefficients, name: str) -> int:
    """The step ``features`` raises ``name`` by: ``DELTA``, or for a ``stream_hit`` scale the
    multiple of the first entry nearest above it, so that every entry scales exactly."""
    if name.startswith("stream_hit."):
        first = int(get_param(coeffs, name))
        return first * -(-DELTA // first)
    return DELTA


def features(impl: Impl, ctx: SynthesisContext, names: Sequence[str]) -> list[float]:
    """How much the cost of ``impl`` grows per unit of each parameter in ``names``.

    Each parameter is raised alone, from ``ctx``'s coefficients, by a large step (``DELTA``;
    for a ``stream_hit`` scale, a multiple of the first entry so the tuple scales exactly),
    and the tree costed again (``tree_cost``): the difference over the step is what the tree
    pays per unit of the parameter, e.g. the lines it reads at a level.

    The model is linear and homogeneous in its coefficients but for three exceptions, so
    ``sum(value * feature)`` over ``parameters(ctx.coefficients)`` equals ``tree_cost``
    within a few parts in a thousand for serial trees of any size:

    * integer ceilings: a kernel cost such as ``n * op / 8`` and a loop's chain latency
      shared by its registers round up, which at the small default values adds up to a
      unit per node (the step is large so that features are the unrounded slopes);
    * ``fork_join``, not a parameter, adds a constant per parallel loop;
    * a level whose ``level_hit`` is 0 is free whatever its ``stream_hit``, so such entries
      contribute nothing (they are not parameters either);
    * with ``resources``, a register tile costs its busiest resource, so the cost is linear
      only piece by piece: the features are the slopes of the piece the coefficients are
      in, taken at the coefficients times ``RESOURCE_SCALE`` (where a step of ``DELTA`` is
      too small to move a tile to another resource; a tile whose resources tie counts the
      one that grows), and a fit that moves the coefficients to another piece needs them
      taken again there.

    Args:
        impl: an Impl tree found under ``ctx``.
        ctx: the context (target, rules, coefficients) to cost it in.
        names: parameters of ``ctx.coefficients`` (see ``parameters``).

    Returns:
        One feature per name, in order.
    """
    base_coeffs = ctx.coefficients
    if base_coeffs.resources:
        # A cost bound by its busiest resource is linear only piece by piece: take the
        # slopes of the piece the coefficients are in, by steps small against them.
        base_coeffs = scaled(base_coeffs, RESOURCE_SCALE)
        ctx = attrs.evolve(ctx, coefficients=base_coeffs)
    base = tree_cost(impl, ctx)
    out: list[float] = []
    for name in names:
        delta = _delta_for(base_coeffs, name)
        coeffs = with_params(base_coeffs, {name: get_param(base_coeffs, name) + delta})
        out.append((tree_cost(impl, attrs.evolve(ctx, coefficients=coeffs)) - base) / delta)
    return out


def scaled(coeffs: CostCoefficients, factor: int) -> CostCoefficients:
    """Every coefficient times ``factor``: the same model in a unit ``factor`` times smaller
    (costs scale by ``factor`` but for the rounding of integer ceilings)."""

    def times(m: Mapping[str, int]) -> dict[str, int]:
        return {k: v * factor for k, v in m.items()}

    return attrs.evolve(
        coeffs,
        level_hit=times(coeffs.level_hit),
        named=times(coeffs.named),
        stream_hit={k: tuple(e * factor for e in v) for k, v in coeffs.stream_hit.items()},
        chain_latency=times(coeffs.chain_latency),
        stream_restart=times(coeffs.stream_restart),
        fork_join=coeffs.fork_join * factor,
        resources={r: times(p) for r, p in coeffs.resources.items()},
    )


# --- Fitting ----------------------------------------------------------------------------------


def _relative_errors(predicted: Sequence[float], measured: Sequence[float]) -> list[float]:
    return [abs(p - m) / m for p, m in zip(predicted, measured, strict=True)]


def _error_stats(predicted: Sequence[float], measured: Sequence[float]) -> dict[str, Any]:
    errors = _relative_errors(predicted, measured)
    return {
        "programs": len(errors),
        "median_rel_error": statistics.median(errors) if errors else 0.0,
        "max_rel_error": max(errors, default=0.0),
    }


def _check_rows(rows: Sequence[Sequence[float]], seconds: Sequence[float], n: int) -> None:
    if len(rows) != len(seconds):
        raise ValueError(f"{len(rows)} feature rows but {len(seconds)} times")
    if not rows:
        raise ValueError("no programs to fit")
    if any(len(row) != n for row in rows):
        raise ValueError(f"every feature row needs {n} entries, one per parameter")
    if any(not s > 0 for s in seconds):
        raise ValueError("every measured time must be positive")


def predict(
    rows: Sequence[Sequence[float]], names: Sequence[str], coeffs: CostCoefficients
) -> list[float]:
    """Each row's features times the parameters ``names`` take in ``coeffs`` (in units of
    the coefficients)."""
    values = [get_param(coeffs, name) for name in names]
    return [sum(v * f for v, f in zip(values, row, strict=True)) for row in rows]


def fit_stats(
    rows: Sequence[Sequence[float]],
    seconds: Sequence[float],
    names: Sequence[str],
    coeffs: CostCoefficients,
    unit_s: float | None = None,
) -> dict[str, Any]:
    """How well ``coeffs`` predict the measured times, without fitting them ("before").

    The prediction of a program is its features times the parameters' values in ``coeffs``.

    Args:
        rows: one feature row per program (``features`` over ``names``).
        seconds: the programs' measured times.
        names: the parameters the rows' columns are.
        coeffs: the coefficients to judge.
        unit_s: seconds per unit of the coefficients (``1e-12`` for fitted ones, in
            picoseconds); None (the default) for coefficients of no known unit, such as a
            target's defaults in cycles, which are judged after the one scale that fits them
            best (reported as ``unit_s``: the implied seconds per unit, a clock period for
            cycles), so that only their ratios matter.

    Returns:
        ``programs``, ``median_rel_error``, ``max_rel_error`` (``|predicted - measured| /
        measured``) and ``unit_s``.

    Raises:
        ValueError: no rows, rows of the wrong length, or a time that is not positive.
    """
    _check_rows(rows, seconds, len(names))
    predicted = predict(rows, names, coeffs)
    if unit_s is None:
        # The scale s minimizing sum((s * p / t - 1) ** 2): the relative errors' least squares.
        ratios = [p / t for p, t in zip(predicted, seconds, strict=True)]
        squares = sum(r * r for r in ratios)
        unit_s = sum(ratios) / squares if squares else 1.0
    stats = _error_stats([p * unit_s for p in predicted], seconds)
    stats["unit_s"] = unit_s
    return stats


def _stream_order(names: Sequence[str], used: Sequence[int], base: CostCoefficients) -> Any:
    """The map from the fit's unknowns to the used parameters (``used`` indexes ``names``).

    The identity, but where a level's ``stream_hit`` scale and its ``level_hit`` are both
    used: the unknown in ``level_hit``'s place is its slack above the dearest stream price
    over ``STRIDED``, so that non-negative unknowns keep ``max(stream_hit) <= STRIDED *
    level_hit`` (a strided line's price, ``CostCoefficients.line_cost``).
    """
    import numpy as np

    order = np.eye(len(used))
    column = {names[i]: j for j, i in enumerate(used)}
    for level, entries in base.stream_hit.items():
        scale, hit = column.get(f"stream_hit.{level}"), column.get(f"level_hit.{level}")
        if scale is not None and hit is not None:
            order[hit, scale] = max(entries) / entries[0] / STRIDED
    return order


def fit(
    rows: Sequence[Sequence[float]],
    seconds: Sequence[float],
    names: Sequence[str],
    base: CostCoefficients,
    unit_s: float = 1e-12,
    *,
    clock: str = "named.fma",
    prior: float = 0.0,
    groups: Sequence[Any] | None = None,
    pair_weight: float = 1.0,
) -> tuple[CostCoefficients, dict[str, Any]]:
    """Fit the parameters ``names`` to measured times by non-negative least squares.

    A program's time, in units of ``unit_s``, is modelled as its features (``rows``) times
    the parameters. Each row is weighted by one over its measured time, so the fit minimizes
    the programs' *relative* errors (their times differ by orders of magnitude). A parameter
    whose least-squares value would be negative is 0 (``scipy.optimize.nnls``). A level's
    stream prices stay at most its strided price: the dearest ``stream_hit`` entry is at
    most twice ``level_hit`` where both are fitted (``_stream_order``).

    ``fork_join``, which serial programs cannot measure, is converted from ``base``'s units
    (cycles, for a target's defaults) to the new ones by a clock estimate: the ratio fitted
    over base of the parameter ``clock`` where it is fitted and positive (an operation that
    costs one cycle in the defaults), else the median of that ratio over the parameters
    fitted positive (1 if none is). So is a parameter that no program pays (a column of
    zeros in ``rows``), which the times say nothing about.

    Args:
        rows: one feature row per program (``features`` over ``names``).
        seconds: the programs' measured times.
        names: the parameters the rows' columns are (``parameters(base)``).
        base: the coefficients the features were computed under; those not in ``names``
            are kept (``fork_join`` converted as above).
        unit_s: seconds per unit of the fitted coefficients (``1e-12``: picoseconds).
        clock: the parameter whose ratio estimates the clock period.
        prior: weight of a pull toward ``base`` (scaled to fit as a whole): each parameter
            adds a residual of ``prior`` times its relative distance from there, against
            each program's relative error (0: none; ``calibrate`` uses a small one so that
            nearly collinear parameters come out the same from run to run).
        groups: a label per row (the function the program computes): each pair of rows
            with one label adds a row fitting the difference of their times, weighted by
            ``pair_weight`` (rivals are what the model must rank).
        pair_weight: weight of those rows (see ``groups``).

    Returns:
        The fitted coefficients (``with_params`` of ``base``, integers) and statistics:
        ``programs``, ``median_rel_error`` and ``max_rel_error`` of the fitted integer
        coefficients, ``params`` (name -> fitted value, before rounding), ``unit_s`` and
        ``clock_ratio`` (units per base unit).

    ``rows`` and ``seconds`` hold plain numbers; NumPy and SciPy are imported here only.

    Raises:
        ValueError: no rows, rows of the wrong length, or a time that is not positive.
    """
    import numpy as np
    from scipy.optimize import nnls

    _check_rows(rows, seconds, len(names))
    a = np.asarray(rows, dtype=float)
    y = np.asarray(seconds, dtype=float) / unit_s
    used = [i for i in range(len(names)) if np.any(a[:, i] != 0)]
    lhs = a[:, used] / y[:, None]
    rhs = np.ones(len(y))
    if groups is not None and pair_weight > 0:
        # Rivals of one function: the difference of two programs' features against the
        # difference of their times (relative to the slower), so the fit also answers the
        # question the search asks, which of two programs for one Spec is faster; what
        # the programs share cancels out.
        by_group: dict[Any, list[int]] = {}
        for i, g in enumerate(groups):
            by_group.setdefault(g, []).append(i)
        diff_rows, diff_rhs = [], []
        for members in by_group.values():
            for i, j in itertools.combinations(members, 2):
                slower = max(y[i], y[j])
                diff_rows.append((a[i, used] - a[j, used]) * (pair_weight / slower))
                diff_rhs.append((y[i] - y[j]) * (pair_weight / slower))
        if diff_rows:
            lhs = np.vstack([lhs, np.array(diff_rows)])
            rhs = np.concatenate([rhs, np.array(diff_rhs)])
    if prior > 0:
        # Each parameter is also pulled toward the base value times the one scale that fits
        # the base best: a row per parameter whose residual is ``prior`` times its relative
        # distance from there. Parameters the times pin down barely move; those that are
        # nearly collinear with others stay put instead of trading places with them from
        # one run to the next.
        scale = fit_stats(rows, seconds, names, base)["unit_s"] / unit_s
        centre = np.array([get_param(base, names[i]) * scale for i in used])
        keep = centre > 0
        pull = np.diag(np.where(keep, prior / np.where(keep, centre, 1.0), 0.0))[keep]
        lhs = np.vstack([lhs, pull])
        rhs = np.concatenate([rhs, np.full(int(keep.sum()), prior)])
    # A line the prefetchers follow never costs more than one they do not: each level's
    # dearest stream price stays at most its strided price (twice ``level_hit``). Solved as
    # ``level_hit = slack + stream scale * ratio / 2`` with the slack non-negative, so NNLS
    # keeps the order; without it, a fit whose programs read few strided lines can price
    # them below streams, and then choose a walk across rows (BENCHMARKS.md, stop 46).
    order = _stream_order(names, used, base)
    solution, _ = nnls(lhs @ order, rhs)
    solution = order @ solution
    fitted = {names[i]: float(value) for i, value in zip(used, solution, strict=True)}
    if fitted.get(clock, 0) > 0:
        ratio = fitted[clock] / get_param(base, clock)
    else:
        ratios = [v / get_param(base, n) for n, v in fitted.items() if v > 0]
        ratio = statistics.median(ratios) if ratios else 1.0
    for name in names:  # parameters no program pays: scaled by the clock estimate
        fitted.setdefault(name, get_param(base, name) * ratio)
    coeffs = with_params(base, fitted)
    coeffs = attrs.evolve(coeffs, fork_join=_positive_int(base.fork_join * ratio))
    stats = fit_stats(rows, seconds, names, coeffs, unit_s)
    stats["params"] = {name: fitted[name] for name in names}
    stats["clock_ratio"] = ratio
    return coeffs, stats
