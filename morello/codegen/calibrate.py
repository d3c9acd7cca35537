"""``python -m morello calibrate``: fit the cost coefficients to this machine.

The training set is whole small programs built from the target's own kernels and moves:
for each function of ``TRAINING`` that the target implements (matrix products of several
shapes and layouts, f32 and bf16 vector-matrix products that stream their weights, an
elementwise op, a broadcast add, a row softmax), the chosen program and its cheapest
rivals (``fidelity.cheapest_programs``: the exact cheapest costs plus random programs near
the chosen one, 2% apart), so that each coefficient is seen at work in many proportions.
Each function's programs are compiled into one library and checked against NumPy once
(``fidelity.compiled_batches``), then timed, their batches taken in turn. Each program's
cost is linear in the coefficients (``calibration.features``: how much its cost grows per
unit of each); the coefficients are fitted by non-negative least squares on relative
error (``calibration.fit``). The timing is repeated ``rounds`` times, every function in
turn each round, and each program's fastest round is fitted (``quiet_time``). The result
is written to the per-machine file that the calibration plugin reads (``calibration.save``).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from morello import calibration
from morello.codegen.c import lower_function
from morello.codegen.fidelity import cheapest_programs, compiled_batches
from morello.codegen.timing import Timing, measure_interleaved
from morello.context import SynthesisContext
from morello.errors import MorelloError, SpecError
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.search.solve import Memo, synthesize
from morello.target import CostCoefficients


def _mm(m: int, k: int, n: int, b: str = "", dt: str = "f32") -> str:
    lay = f" {b}" if b else ""
    return (
        f"func mm_{m}x{k}x{n}{'_' + b.split('(')[0] if b else ''}_{dt}(a: {dt}[{m}, {k}], "
        f"b: {dt}[{k}, {n}]{lay}) -> c: f32[{m}, {n}] {{\n    c = matmul(a, b)\n}}\n"
    )


#: The training functions (spec-file text); those a target does not implement are skipped.
TRAINING: tuple[str, ...] = (
    _mm(16, 16, 16),
    _mm(32, 32, 32),
    _mm(64, 64, 64),
    _mm(96, 96, 96),
    _mm(128, 128, 128),
    _mm(8, 256, 256),
    _mm(4, 512, 512),
    _mm(64, 256, 32),
    _mm(32, 64, 128, "col_major"),
    _mm(1, 512, 2048),
    _mm(1, 512, 2048, "packed_cols(16)", "bf16"),
    # Larger shapes, none of the standard set's: a first calibration from the small ones
    # alone chose programs 1.2-2.4x slower for 512^3 and up, 4x1024x1024 and the gemma
    # matvec (BENCHMARKS.md), whose operands do not fit the caches the small ones fit.
    _mm(192, 192, 192),
    _mm(4, 2048, 512),
    _mm(2, 1024, 2048),
    _mm(1, 1024, 8192),
    _mm(1, 1024, 8192, "packed_cols(16)", "bf16"),
    "func relu_256x1024(x: f32[256, 1024]) -> y: f32[256, 1024] {\n    y = relu(x)\n}\n",
    "func add_bias(x: f32[64, 256], b: f32[256]) -> y: f32[64, 256] {\n    y = add(x, b)\n}\n",
    "func softmax_32x256(x: f32[32, 256]) -> y: f32[32, 256] {\n    y = softmax(x)\n}\n",
)


#: Weight of the pull toward the target's defaults (``calibration.fit``'s ``prior``). A
#: trade measured on two sets of three runs (BENCHMARKS.md): fitted to one run and tested on
#: functions left out of the fit in another, a weaker pull ranks a left-out function's
#: programs a little better (Kendall tau 0.28-0.33 at 0.6, 0.26-0.30 at 1.0, on a noisy
#: machine), but moves the coefficients more between two runs: at 1.0, 8-10 of 12 stayed
#: within 5% on the noisy machine (6-8 at 0.6) and all 12 on a quiet one (11-12 at 0.6),
#: with the same or lower error on left-out functions.
PRIOR = 1.0

#: With execution resources, the fits after the first: each takes the slopes again at the
#: coefficients the last one found (``calibrate``).
REFITS = 3

#: Passes of refinement (``calibrate``): after a fit, each training function is synthesized
#: under the fitted coefficients, its ``REFINE_TOP`` cheapest programs there that were not
#: timed yet are timed, and the fit is made again with them. The rivals first timed are the
#: default model's neighbours, so a fit may prefer a program none of them resembles, whose
#: time it has never seen (BENCHMARKS.md: a fit without this chose a vector-matrix product
#: that walks the weights' columns, 2.6 times slower than the defaults' choice).
REFINE = 1
REFINE_TOP = 3


def training_programs(ctx: SynthesisContext) -> list[Program]:
    """The functions of ``TRAINING`` that ``ctx``'s target implements."""
    out = []
    for text in TRAINING:
        (func,) = parse_spec_file("calibrate.lark", text).funcs
        try:
            out.append(build_program(func, ctx))
        except SpecError:
            continue  # an op or dtype this target has no kernels for
    return out


def quiet_time(rounds: Sequence[float]) -> float:
    """The time fitted for a program timed once per round: its fastest round.

    On a shared machine other work only slows a program down, and not all programs alike.
    In three calibrations on one machine (BENCHMARKS.md), the rounds of a program spread by
    30% (median over the programs); the medians of the rounds moved 3-7% from one run to
    the next and took the fitted coefficients with them, the fastest rounds 2%. An FMA loop
    timed beside the programs did not track the slowdowns (5% where a 64^3 product lost
    30%): they come from the caches and memory that other tenants share, not the clock.
    """
    return min(rounds)


#: The ``round_spread`` above which ``calibrate`` warns that a second run may fit otherwise.
#: Where two runs disagreed, programs had spread by 30% (an EPYC, 2026-11-24: 6-8 of 12
#: coefficients within 5%) and 20-24% (a Zen 4 at a busy hour, stop 80: 6 of 12); quiet runs
#: that agreed within 4% predate the figure (BENCHMARKS.md, "Repeatability on a quiet
#: machine", "`calibrate` twice"). 10% is set below the busy runs, not measured on a quiet one.
BUSY_SPREAD = 0.10


def round_spread(rounds_of: Sequence[Sequence[float]]) -> float:
    """How much the machine moved while the programs were timed: each program's slowest
    round over its fastest, less 1, the median over the programs (0 with fewer than two
    rounds). Other work on a shared machine slows programs unevenly, and the fit follows
    the fastest rounds only as far as they agree."""
    spreads = [max(r) / min(r) - 1 for r in rounds_of if len(r) >= 2 and min(r) > 0]
    return statistics.median(spreads) if spreads else 0.0


def calibrate(
    ctx: SynthesisContext,
    memo: Memo | None,
    per_function: int = 12,
    rounds: int = 5,
    min_batch_s: float = 0.01,
    progress: Callable[[str], None] | None = None,
    prior: float = PRIOR,
    refine: int = REFINE,
) -> dict[str, Any]:
    """Time the training programs on this machine and fit the coefficients to them.

    Then ``refine`` times: synthesize each training function under the fitted coefficients,
    time the cheapest programs there that are not in its pool yet (``REFINE_TOP``) beside
    the pool's first program, and fit again with them (``_refine``). Their times are put on
    the scale of the pool's rounds by that first program's time in both.

    Returns a report: ``coefficients`` (the fitted CostCoefficients), ``before`` and
    ``after`` (fit statistics of the target's coefficients and of the fitted ones on the
    same programs, with ``mean_tau``: Kendall's tau between predicted and measured time
    within each function, averaged), ``programs`` and ``functions`` (how many),
    ``seconds`` (wall time), ``refined`` (how many programs the refinement added),
    ``round_spread`` (``round_spread`` of every program's rounds) and ``detail`` (per
    program: function, rank (its place in the pool: the refinement's programs come after
    the first pool's), measured seconds (``quiet_time`` of its rounds),
    the seconds predicted before and after the fit, its feature row over ``names``, the
    fitted parameters, ``rounds``, its time in each round (the median of the round's 3
    batches), ``round_lows``, each round's fastest batch, and ``refinement``, the pass
    that added it, 0 for the first pool). ``before`` and ``after`` also hold
    ``chosen_over_fastest``: over the functions, the geometric mean of the measured time of
    the program the coefficients predict cheapest in the function's pool over the fastest
    one's.
    Nothing is written; ``calibration.save`` does that.

    Raises:
        MorelloError: the code does not run natively here, or SciPy is missing.
    """
    try:
        import scipy.optimize  # noqa: F401
    except ImportError:
        raise MorelloError("calibrate needs SciPy: pip install 'morello[fit]'") from None
    start = time.perf_counter()
    say = progress or (lambda _msg: None)
    base = ctx.coefficients
    names = calibration.parameters(base)
    pools: list[tuple[Program, list[Impl]]] = []
    for program in training_programs(ctx):
        say(f"choosing programs of {program.name}")
        synthesize(program.spec, ctx, memo)
        pools.append((program, cheapest_programs(program, ctx, memo, per_function, spacing=0.02)))
    samples: list[list[list[float]]] = [[[] for _ in impls] for _, impls in pools]
    # Each round's fastest batch too, kept in the report (not fitted): what a floor nearer
    # the machine's best would read (benchmarks/calibration_repeat.py compares the two).
    lows: list[list[list[float]]] = [[[] for _ in impls] for _, impls in pools]
    with contextlib.ExitStack() as compiled:
        batches = []
        for program, impls in pools:
            say(f"compiling and checking the programs of {program.name}")
            batches.append(compiled.enter_context(compiled_batches(program, impls, ctx)))
        for r in range(rounds):
            for (program, _), timed, out, low in zip(pools, batches, samples, lows, strict=True):
                say(f"timing {program.name} (round {r + 1} of {rounds})")
                for t, acc, acc_low in zip(_round(timed, min_batch_s), out, low, strict=True):
                    acc.append(t.median)
                    acc_low.append(t.low)

    # The pass that added each program: 0 for the first pool, then each refinement's.
    passes: list[list[int]] = [[0] * len(impls) for _, impls in pools]

    def feature_rows(at: SynthesisContext) -> list[list[float]]:
        return [calibration.features(impl, at, names) for _, impls in pools for impl in impls]

    def fit_all() -> tuple[CostCoefficients, dict[str, Any], list[list[float]], list[list[float]]]:
        rows = feature_rows(ctx)
        seconds = [quiet_time(acc) for out in samples for acc in out]
        groups = [p.name for p, impls in pools for _ in impls]
        fitted, after = calibration.fit(rows, seconds, names, base, prior=prior, groups=groups)
        base_rows = rows
        if base.resources:
            # Costs bound by their busiest resource are linear only piece by piece, and the
            # fit may move a program to another piece: take the slopes again at the fitted
            # coefficients and fit again, until the fit stops moving.
            for _ in range(REFITS):
                say("fitting again at the fitted coefficients")
                rows = feature_rows(attrs.evolve(ctx, coefficients=fitted))
                again, after = calibration.fit(
                    rows, seconds, names, base, prior=prior, groups=groups
                )
                if again == fitted:
                    break
                fitted = again
        return fitted, after, rows, base_rows

    fitted, after, rows, base_rows = fit_all()
    refined = 0
    for n in range(refine):
        added = _refine(pools, samples, lows, passes, n + 1, ctx, fitted, rounds, min_batch_s, say)
        if not added:
            break
        refined += added
        fitted, after, rows, base_rows = fit_all()
    seconds = [quiet_time(acc) for out in samples for acc in out]
    before = calibration.fit_stats(base_rows, seconds, names, base)

    def predicted(coeffs: Any, unit_s: float, rows: list[list[float]]) -> list[float]:
        return [unit_s * p for p in calibration.predict(rows, names, coeffs)]

    labels = [(p.name, rank) for p, impls in pools for rank in range(len(impls))]
    rounds_of = [acc for out in samples for acc in out]
    lows_of = [acc for out in lows for acc in out]
    detail = [
        {
            "function": fn,
            "rank": rank,
            "seconds": t,
            "before": b,
            "after": a,
            "features": row,
            "rounds": acc,
            "round_lows": acc_low,
            "refinement": added_by,
        }
        for (fn, rank), t, b, a, row, acc, acc_low, added_by in zip(
            labels,
            seconds,
            predicted(base, before["unit_s"], base_rows),
            predicted(fitted, after["unit_s"], rows),
            rows,
            rounds_of,
            lows_of,
            [x for out in passes for x in out],
            strict=True,
        )
    ]
    from scipy.stats import kendalltau

    by_function = [[d for d in detail if d["function"] == p.name] for p, _ in pools]

    def mean_tau(key: str) -> float:
        taus = []
        for got in by_function:
            if len(got) >= 2:
                tau = kendalltau([d[key] for d in got], [d["seconds"] for d in got]).statistic
                taus.append(0.0 if tau != tau else float(tau))  # NaN: constant predictions
        return statistics.fmean(taus) if taus else 0.0

    def chosen_over_fastest(key: str) -> float:
        ratios = [
            min(got, key=lambda d: d[key])["seconds"] / min(d["seconds"] for d in got)
            for got in by_function
        ]
        return statistics.geometric_mean(ratios) if ratios else 1.0

    before["mean_tau"] = mean_tau("before")
    after["mean_tau"] = mean_tau("after")
    before["chosen_over_fastest"] = chosen_over_fastest("before")
    after["chosen_over_fastest"] = chosen_over_fastest("after")
    return {
        "coefficients": fitted,
        "before": before,
        "after": after,
        "functions": len(pools),
        "programs": len(rows),
        "refined": refined,
        "round_spread": round_spread(rounds_of),
        "seconds": time.perf_counter() - start,
        "names": names,
        "detail": detail,
    }


def _round(timed: Sequence[Sequence[Callable[[int], float]]], min_batch_s: float) -> list[Timing]:
    """One round of timing: each program's 3 batches (on its one placement; the median is
    the round's time), the programs' batches taken in turn (``timing.measure_interleaved``)."""
    return measure_interleaved([b[0] for b in timed], 3, min_batch_s)


def _refine(
    pools: list[tuple[Program, list[Impl]]],
    samples: list[list[list[float]]],
    lows: list[list[list[float]]],
    passes: list[list[int]],
    number: int,
    ctx: SynthesisContext,
    fitted: CostCoefficients,
    rounds: int,
    min_batch_s: float,
    say: Callable[[str], None],
) -> int:
    """One pass of refinement; returns how many programs it added to the pools.

    Each function is synthesized under the coefficients ``fitted`` (in a memo of its own:
    answers under coefficients nobody has checked stay out of the memo table), and its
    ``REFINE_TOP`` cheapest programs there whose C is not in its pool are timed in
    ``rounds`` rounds beside the pool's first program. Each new program's round times are
    scaled by the first program's ``quiet_time`` in the pool's rounds over its
    ``quiet_time`` in these, so that they read as if timed with the pool. The programs
    join the pool (``pools``, ``samples``, ``lows`` and ``passes`` are extended in place;
    ``lows``, each round's fastest batch, is scaled alike).
    """
    at = attrs.evolve(ctx, coefficients=fitted)
    memo: dict[Any, Any] = {}
    added = 0
    for i, (program, impls) in enumerate(pools):
        say(f"choosing programs of {program.name} under the fit")
        synthesize(program.spec, at, memo)
        known = {lower_function(impl, program, ctx)[0] for impl in impls}
        new = [
            impl
            for impl in cheapest_programs(program, at, memo, REFINE_TOP, spacing=0.02)
            if lower_function(impl, program, ctx)[0] not in known
        ]
        if not new:
            continue
        anchor = [impls[0], *new]
        times: list[list[float]] = [[] for _ in anchor]
        times_low: list[list[float]] = [[] for _ in anchor]
        with compiled_batches(program, anchor, ctx) as timed:
            for r in range(rounds):
                say(f"timing the fit's choices of {program.name} (round {r + 1} of {rounds})")
                for t, acc, acc_low in zip(
                    _round(timed, min_batch_s), times, times_low, strict=True
                ):
                    acc.append(t.median)
                    acc_low.append(t.low)
        scale = quiet_time(samples[i][0]) / quiet_time(times[0])
        scale_low = quiet_time(lows[i][0]) / quiet_time(times_low[0])
        impls.extend(new)
        samples[i].extend([t * scale for t in acc] for acc in times[1:])
        lows[i].extend([t * scale_low for t in acc] for acc in times_low[1:])
        passes[i].extend([number] * len(new))
        added += len(new)
    return added
