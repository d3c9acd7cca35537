"""How well the cost model ranks programs: cheap programs under the model, timed.

``python -m morello fidelity`` takes a function's N cheapest programs from a pool
(``cheapest_programs``: the exact cheapest predicted costs from ``morello.search.kbest``,
plus random programs near the chosen one), keeping only programs at least 1% apart in
predicted cost, compiles them into one library, checks each against NumPy and times each
against the chosen program, calls of the two alternating in groups of at least 50 us
(``time_paired``), on the same four placements of the buffers within a page as ``bench``
(where the buffers lie can halve one program's speed and not its rival's), each program's
time the chosen one's times the median ratio, on the median placement. (The way before,
every program's batches of 20 ms taken in turn, ``time_impls_placed``, stays for
``calibrate`` and as ``--batches``: a burst of other work falls on some programs of a
round and not on others.) Then it compares the two orders:
Kendall's tau and Spearman's rho between predicted cost and measured time, where the
measured-fastest program sits in the predicted order, and how much faster it is than the
chosen one (rank 0).

The fastest of fifty noisy timings is biased: even when every program ran at the same speed,
the least of fifty draws would sit a few percent below the chosen program's one draw (the
winner's curse). So the few programs measured faster than the chosen one are timed again
against it, each pair alone with calls alternating as ``benchmarks/ab.py`` times two
programs (``rematch``), and the report gives both figures: the first pass's and the
rematch's.

Why not simply the N cheapest trees: on a 64^3 product the 1,000 cheapest trees all have
the chosen one's cost (the loops that store a register tile nest many ways, and most print
the same C), and the 60 cheapest distinct costs lie within 0.05% of it, far below what
timing resolves.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import random
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from morello.codegen.bench import (
    PLACEMENTS,
    buffer_params,
    median_placement,
    placement_count,
    require_native,
    timed_batch,
    timing_buffers,
    timing_harness,
)
from morello.codegen.c import lower_function
from morello.codegen.compile import compile_shared, scratch_folder
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.codegen.timing import PRELUDE, Timing, measure_interleaved
from morello.context import SynthesisContext
from morello.errors import MorelloError
from morello.impl import Impl
from morello.lang.spec_file import Program
from morello.search.kbest import KBest
from morello.search.solve import Memo


def cheapest_programs(
    program: Program,
    ctx: SynthesisContext,
    memo: Memo | None,
    top: int,
    spacing: float = 0.01,
    samples: int = 0,
    seed: int = 0,
) -> list[Impl]:
    """The ``top`` cheapest programs of a pool, at least ``spacing`` apart in predicted cost,
    cheapest (the chosen one) first.

    The pool: the ``top`` cheapest predicted costs (``KBest`` with ``distinct_costs``: the
    exact nearest rivals of the chosen program, though often within a fraction of a percent
    of it) and ``samples`` (default ``40 * top``) random programs near the chosen one
    (``KBest.sample``, about two random decisions per program), programs with the same C
    counted once. A program joins the list only if it is predicted at least ``spacing``
    (relative) dearer than the one before it: rivals closer than that differ by less than
    timing noise, and a rank correlation over them would measure only the noise.
    """
    kbest = KBest(ctx, memo, distinct_costs=True)
    pool: dict[str, Impl] = {}

    def add(impl: Impl) -> None:
        pool.setdefault(lower_function(impl, program, ctx)[0], impl)

    for impl in kbest.impls(program.spec, top):
        add(impl)
    chosen = next(iter(pool.values()))
    rng = random.Random(seed)
    deviate = min(1.0, 2 / len(chosen.walk()))
    for _ in range(samples or 40 * top):
        add(kbest.sample(program.spec, rng, deviate))
    ordered = sorted(pool.values(), key=lambda impl: impl.cost)  # stable: chosen first
    kept = [ordered[0]]
    for impl in ordered[1:]:
        if len(kept) >= top:
            break
        if impl.cost >= kept[-1].cost * (1 + spacing):
            kept.append(impl)
    return kept


def time_impls(
    program: Program,
    impls: Sequence[Impl],
    ctx: SynthesisContext,
    repeats: int = 5,
    min_batch_s: float = 0.02,
    workdir: Path | None = None,
    placements: int = 1,
) -> list[Timing]:
    """Seconds per call of each Impl of ``program``, after checking each against NumPy.

    All are compiled into one library (function ``<name>_r<i>`` for the ``i``-th) and timed
    on the same buffers, in turn; with ``placements`` above 1, on that many placements of the
    buffers within a page as ``bench`` times (``time_impls_placed``), each Impl's timing the
    median placement's.

    Raises:
        CheckFailed: an Impl computes a wrong answer.
        MorelloError: the target's code does not run natively here.
    """
    placed = time_impls_placed(program, impls, ctx, repeats, min_batch_s, workdir, placements)
    return [median_placement(p) for p in placed]


def time_impls_placed(
    program: Program,
    impls: Sequence[Impl],
    ctx: SynthesisContext,
    repeats: int = 5,
    min_batch_s: float = 0.02,
    workdir: Path | None = None,
    placements: int = 1,
) -> list[list[Timing]]:
    """``time_impls`` for each placement: per Impl, its timing on each buffer placement.

    With one placement the buffers lie where NumPy puts them (a large array at the same
    place in a page every time, a small one anywhere); with more, at ``bench.placement``'s
    offsets (``bench.placement_count`` of them), the same in every run. Where the buffers
    lie decides 4K aliasing, which can slow one program by half and leave its rival alone,
    so a ranking timed on one placement may rank the placement. Every batch of every Impl
    and placement is taken in turn.
    """
    with compiled_batches(program, impls, ctx, workdir, placements) as per_impl:
        flat = [batch for batches in per_impl for batch in batches]
        timings = measure_interleaved(flat, repeats, min_batch_s)
        count = len(per_impl[0]) if per_impl else 1
        return [timings[i * count : (i + 1) * count] for i in range(len(impls))]


@contextlib.contextmanager
def compiled_batches(
    program: Program,
    impls: Sequence[Impl],
    ctx: SynthesisContext,
    workdir: Path | None = None,
    placements: int = 1,
) -> Iterator[list[list[Callable[[int], float]]]]:
    """``impls`` compiled into one library (function ``<name>_r<i>`` for the ``i``-th),
    each checked against NumPy, and one set of buffers per placement (see
    ``time_impls_placed``), shared by every Impl: they compute the same. Yields, per Impl,
    its timed batch on each placement (``bench.timed_batch``), usable until the context
    exits, so that rounds of timing need not compile and check again (``calibrate``).

    Raises:
        CheckFailed: an Impl computes a wrong answer.
        MorelloError: the target's code does not run natively here.
    """
    require_native(ctx.target, "fidelity")

    def loops(variants: Sequence[Program]) -> str:
        return "".join(timing_harness(v, ctx) for v in variants)

    with checked_library(program, impls, ctx, loops, workdir, placements) as (lib, variants, sets):
        yield [[timed_batch(lib, v.name, ptrs) for _, ptrs in sets] for v in variants]


@contextlib.contextmanager
def checked_library(
    program: Program,
    impls: Sequence[Impl],
    ctx: SynthesisContext,
    harness: Callable[[Sequence[Program]], str],
    workdir: Path | None = None,
    placements: int = 1,
) -> Iterator[tuple[ctypes.CDLL, list[Program], list[tuple[list[Any], list[Any]]]]]:
    """``impls`` compiled into one library beside ``harness(variants)``'s C (the ``i``-th as
    function ``<name>_r<i>``, its program the ``i``-th variant), each checked against NumPy,
    and one set of buffers per placement (``bench.timing_buffers``; where NumPy puts them
    with one placement), shared by every Impl: they compute the same. Yields the loaded
    library, the variants and the buffer sets, usable until the context exits.

    Raises:
        CheckFailed: an Impl computes a wrong answer.
    """
    count = 1 if placements <= 1 else placement_count(program, placements)
    with scratch_folder("morello-fidelity-", workdir) as folder:
        variants = [attrs.evolve(program, name=f"{program.name}_r{i}") for i in range(len(impls))]
        source = lower_to_c("fidelity", list(zip(variants, impls, strict=True)), ctx)
        c_text = PRELUDE + source.c_text + "\n" + harness(variants)
        lib_path = compile_shared(c_text, ctx.target, folder)
        for v in variants:
            check(lib_path, v, ctx)
        lib = ctypes.CDLL(str(lib_path))
        sets = [timing_buffers(program, ctx, None if count == 1 else w) for w in range(count)]
        yield lib, variants, sets


def rank_agreement(costs: Sequence[float], seconds: Sequence[float]) -> dict[str, Any]:
    """How well ``costs`` (predicted, in the model's order: the first is the chosen program)
    order ``seconds`` (measured).

    Keys: ``kendall_tau`` and ``spearman_rho`` (None with fewer than 2 programs or when
    either side is constant), ``fastest_rank`` (the measured-fastest program's position in
    the predicted order, 0 = the chosen one) and ``chosen_over_fastest`` (the chosen
    program's time over the fastest's: 1.0 when the model chose the fastest).
    """
    from scipy.stats import kendalltau, spearmanr  # SciPy: the `fit` extra

    fastest = min(range(len(seconds)), key=lambda i: seconds[i])
    tau = rho = None
    if len(costs) >= 2 and len(set(costs)) > 1 and len(set(seconds)) > 1:
        tau = float(kendalltau(costs, seconds).statistic)
        rho = float(spearmanr(costs, seconds).statistic)
    return {
        "kendall_tau": tau,
        "spearman_rho": rho,
        "fastest_rank": fastest,
        "chosen_over_fastest": seconds[0] / seconds[fastest],
    }


def placement_agreement(placed_seconds: Sequence[Sequence[float]]) -> float | None:
    """How well the measurements agree with themselves: the median, over every two buffer
    placements, of Kendall's tau between the programs' times on one and on the other.

    ``placed_seconds[i][w]`` is program ``i``'s time on placement ``w``. No model can be
    expected to rank the programs much better than two placements of the same programs rank
    each other, so this is the ceiling to read the model's tau against. None with fewer than
    two placements or programs, or where a placement's times are all equal.
    """
    from scipy.stats import kendalltau  # SciPy: the `fit` extra

    count = min((len(p) for p in placed_seconds), default=0)
    if len(placed_seconds) < 2 or count < 2:
        return None
    columns = [[p[w] for p in placed_seconds] for w in range(count)]
    taus = [
        float(kendalltau(columns[u], columns[v]).statistic)
        for u in range(count)
        for v in range(u + 1, count)
        if len(set(columns[u])) > 1 and len(set(columns[v])) > 1
    ]
    return statistics.median(taus) if taus else None


REMATCH = 3
"""How many of the measured-fastest programs ``fidelity`` times again against the chosen one."""

REMATCH_ROUNDS = 7
"""Rounds of alternating calls per placement in a rematch, each lasting about
``REMATCH_ROUND_S``: the rematch's ratio is the median of the rounds' ratios."""
REMATCH_ROUND_S = 0.1


def pair_harness(program: Program, first: str, second: str) -> str:
    """C source of ``void <first>_vs_<second>(arg0, arg1, ..., long _calls, long _reps,
    double *_t1, double *_t2)``: ``_calls`` times, ``_reps`` calls of ``first`` then
    ``_reps`` of ``second`` on the same buffers (the program's parameters in order), the
    seconds of each group stored in ``_t1[i]`` and ``_t2[i]``.

    Alternating every few calls, not every batch of 20 ms, puts both programs under the
    same machine: a burst of other work or a change of clock falls on both alike.
    """
    decl, args = buffer_params(program)
    lines = [
        f"void {first}_vs_{second}({', '.join(decl)}, long _calls, long _reps, double *_t1, "
        "double *_t2)",
        "{",
        "    struct timespec _a, _b, _c;",
        "    for (long _i = 0; _i < _calls; _i++) {",
        "        clock_gettime(CLOCK_MONOTONIC, &_a);",
        "        for (long _r = 0; _r < _reps; _r++) {",
        f"            {first}({args});",
        '            __asm__ __volatile__("" ::: "memory");',
        "        }",
        "        clock_gettime(CLOCK_MONOTONIC, &_b);",
        "        for (long _r = 0; _r < _reps; _r++) {",
        f"            {second}({args});",
        '            __asm__ __volatile__("" ::: "memory");',
        "        }",
        "        clock_gettime(CLOCK_MONOTONIC, &_c);",
        "        _t1[_i] = (_b.tv_sec - _a.tv_sec) + 1e-9 * (_b.tv_nsec - _a.tv_nsec);",
        "        _t2[_i] = (_c.tv_sec - _b.tv_sec) + 1e-9 * (_c.tv_nsec - _b.tv_nsec);",
        "    }",
        "}",
        "",
    ]
    return "\n".join(lines)


def rematch(
    program: Program,
    impls: Sequence[Impl],
    seconds: Sequence[float],
    ctx: SynthesisContext,
    contenders: int = REMATCH,
    placements: int = 1,
) -> dict[str, Any] | None:
    """The chosen program (``impls[0]``) timed again against the ``contenders`` programs
    measured fastest in the first pass (``seconds``, in ``impls``' order), those measured
    faster than it only, each pair as ``benchmarks/ab.py`` times two programs
    (``time_pairs``). None when the first pass measured the chosen program fastest.

    Keys: ``ranks`` (the contenders' positions in the predicted order, fastest first),
    ``first_ratios`` (the chosen program's time over each contender's in the first pass),
    ``ratios`` (the same in the rematch), ``rounds`` (per pair), and ``fastest_rank`` and
    ``chosen_over_fastest`` as ``rank_agreement`` gives them, from the rematch (rank 0 and
    1.0 when no contender beat the chosen program there).

    Raises:
        CheckFailed: a program computes a wrong answer.
    """
    faster = sorted((i for i in range(1, len(seconds)) if seconds[i] < seconds[0]),
                    key=lambda i: seconds[i])[:contenders]  # fmt: skip
    if not faster:
        return None
    count = 1 if placements <= 1 else placement_count(program, placements)
    ratios = time_pairs(program, [impls[0], *(impls[i] for i in faster)],
                        [seconds[0], *(seconds[i] for i in faster)], ctx, count)  # fmt: skip
    best = max(range(len(faster)), key=lambda j: ratios[j])
    won = ratios[best] > 1.0
    return {
        "ranks": faster,
        "first_ratios": [seconds[0] / seconds[i] for i in faster],
        "ratios": ratios,
        "rounds": REMATCH_ROUNDS * count,
        "fastest_rank": faster[best] if won else 0,
        "chosen_over_fastest": ratios[best] if won else 1.0,
    }


PAIRED_ROUNDS = 3
"""Rounds of alternating calls per placement in ``fidelity``'s first pass (``time_paired``),
each lasting about ``PAIRED_ROUND_S``: fewer and shorter than a rematch's, as every program
of the list is timed so."""
PAIRED_ROUND_S = 0.05


def time_pairs(
    program: Program,
    impls: Sequence[Impl],
    seconds: Sequence[float],
    ctx: SynthesisContext,
    placements: int = 1,
) -> list[float]:
    """For each Impl after the first, the first one's time over its own, timed as
    ``benchmarks/ab.py`` times two programs: compiled into one library, checked against
    NumPy, calls alternating (``pair_harness``; groups of calls of at least 50 us, sized by
    ``seconds``, each Impl's time per call as measured before), ``REMATCH_ROUNDS`` rounds on
    each of ``placements`` placements of the buffers; a round's ratio is the median group
    time of the first Impl over the other's, the result the median round's.

    Raises:
        CheckFailed: a program computes a wrong answer.
    """
    with paired_library(program, impls, ctx, placements) as (lib, variants, sets):
        first = variants[0].name
        return [
            statistics.median(
                r
                for _, ptrs in sets
                for r, _ in alternate(
                    lib,
                    first,
                    v.name,
                    ptrs,
                    (seconds[0], other),
                    REMATCH_ROUNDS,
                    REMATCH_ROUND_S,
                    5,
                )
            )
            for v, other in zip(variants[1:], seconds[1:], strict=True)
        ]


def time_paired(
    program: Program,
    impls: Sequence[Impl],
    ctx: SynthesisContext,
    placements: int = 1,
    rounds: int = PAIRED_ROUNDS,
    round_s: float = PAIRED_ROUND_S,
) -> list[list[Timing]]:
    """``time_impls_placed``'s answer, each Impl timed against the first rather than all in
    turn: per Impl, its timing on each of ``placements`` placements of the buffers.

    Each Impl after the first runs ``rounds`` rounds on each placement with calls of it and
    of the first alternating (``pair_harness``, groups of at least 50 us, each round about
    ``round_s`` seconds), so that what the machine does meanwhile falls on both alike; its
    time on a placement is the first Impl's there (the median group time per call of all
    its pairs) times the median round's ratio, its spread the rounds' least and greatest
    ratios. Batches of all the programs taken in turn, 20 ms each, let a burst of other
    work or a change of clock fall on some programs and not others: eight copies of one
    program read 111-133 us that way (BENCHMARKS.md, "The fastest of the 50, timed
    again"), and two such runs of one list agree far less than two paired runs ("Fidelity's
    first pass paired").

    Raises:
        CheckFailed: a program computes a wrong answer.
    """
    with paired_library(program, impls, ctx, placements) as (lib, variants, sets):
        first = variants[0].name
        others = variants[1:] or variants[:1]  # one program: timed against itself
        ratios: list[list[list[float]]] = [[[] for _ in sets] for _ in others]
        firsts: list[list[float]] = [[] for _ in sets]
        for k, v in enumerate(others):
            for w, (_, ptrs) in enumerate(sets):
                estimate = probe(lib, first, v.name, ptrs)  # sizes the groups
                timed = alternate(lib, first, v.name, ptrs, estimate, rounds, round_s)
                ratios[k][w] = [1 / r for r, _ in timed]  # the other's time over the first's
                firsts[w].extend(t for _, t in timed)
        base = [statistics.median(f) for f in firsts]
        chosen = [Timing(b, min(f), max(f)) for b, f in zip(base, firsts, strict=True)]
        placed = [chosen]
        for per_placement in ratios[: len(variants) - 1]:
            placed.append(
                [
                    Timing(b * statistics.median(r), b * min(r), b * max(r))
                    for b, r in zip(base, per_placement, strict=True)
                ]
            )
        return placed


@contextlib.contextmanager
def paired_library(
    program: Program, impls: Sequence[Impl], ctx: SynthesisContext, placements: int
) -> Iterator[tuple[ctypes.CDLL, list[Program], list[tuple[list[Any], list[Any]]]]]:
    """``checked_library`` with a ``pair_harness`` of the first Impl against each other
    one (against itself when it is the only one), on ``placements`` buffer sets."""

    def pairs(variants: Sequence[Program]) -> str:
        others = variants[1:] or variants[:1]
        return "".join(pair_harness(program, variants[0].name, v.name) for v in others)

    with checked_library(program, impls, ctx, pairs, None, placements) as loaded:
        yield loaded


def probe(lib: ctypes.CDLL, first: str, second: str, ptrs: Sequence[Any]) -> tuple[float, float]:
    """The seconds of one call of ``first`` and of ``second`` through ``<first>_vs_<second>``
    in ``lib`` on the buffers at ``ptrs``, after one call of each to warm up: enough to size
    ``alternate``'s groups."""
    return _pair_rounds(lib, first, second, ptrs, 1, 1, 2)[-1]


def alternate(
    lib: ctypes.CDLL,
    first: str,
    second: str,
    ptrs: Sequence[Any],
    seconds: tuple[float, float],
    rounds: int,
    round_s: float,
    least: int = 3,
) -> list[tuple[float, float]]:
    """``rounds`` rounds of ``<first>_vs_<second>`` in ``lib`` on the buffers at ``ptrs``,
    each about ``round_s`` seconds (and at least ``least`` groups) of groups of at least
    50 us given ``seconds``, the two functions' times per call. Per round: the first's
    median group time over the second's, and the first's median seconds per call.
    """
    reps = max(1, math.ceil(50e-6 / max(seconds)))
    calls = max(least, int(round_s / (reps * sum(seconds)))) | 1
    return [
        (a / max(b, 1e-12), a / reps)
        for a, b in _pair_rounds(lib, first, second, ptrs, calls, reps, rounds)
    ]


def _pair_rounds(
    lib: ctypes.CDLL,
    first: str,
    second: str,
    ptrs: Sequence[Any],
    calls: int,
    reps: int,
    rounds: int,
) -> list[tuple[float, float]]:
    """``rounds`` calls of ``<first>_vs_<second>`` with ``calls`` groups of ``reps`` calls
    each: per round, the two sides' median group times."""
    import numpy as np

    fn = getattr(lib, f"{first}_vs_{second}")
    fn.restype = None
    t1, t2 = np.zeros(calls), np.zeros(calls)
    out = [ctypes.c_void_p(t1.ctypes.data), ctypes.c_void_p(t2.ctypes.data)]
    timed = []
    for _ in range(rounds):
        fn(*ptrs, ctypes.c_long(calls), ctypes.c_long(reps), *out)
        timed.append((float(np.median(t1)), float(np.median(t2))))
    return timed


def fidelity(
    program: Program,
    ctx: SynthesisContext,
    memo: Memo | None,
    top: int = 50,
    repeats: int = 5,
    min_batch_s: float = 0.02,
    spacing: float = 0.01,
    describe: Callable[[Impl], str] | None = None,
    placements: int = PLACEMENTS,
    contenders: int = REMATCH,
    batches: bool = False,
    rounds: int = PAIRED_ROUNDS,
) -> dict[str, Any]:
    """The fidelity report of one function: its ``top`` cheapest programs, timed (each
    against the chosen program, ``rounds`` rounds on each placement: ``time_paired``; with
    ``batches``, all in turn, ``repeats`` batches of ``min_batch_s`` each:
    ``time_impls_placed``), and how the model's order agrees with the measured one
    (``rank_agreement``'s keys; ``rematch``, the ``contenders`` measured fastest timed again
    against the chosen program, or None: ``rematch``; ``placement_tau``, how well the
    buffer placements' times order the programs alike, the ceiling for the model's tau:
    ``placement_agreement``; plus ``programs``: rank, cost, seconds and spread for each, its
    median on each buffer placement, and its Impl tree as text where ``describe`` is given;
    and ``flops`` and ``placements``, how many placements each program was timed on:
    ``placements`` asked, fewer where their buffers would be too large).

    Raises:
        MorelloError: SciPy is missing, or the code does not run natively here.
        CheckFailed: a program computes a wrong answer.
    """
    try:
        import scipy.stats  # noqa: F401
    except ImportError:
        raise MorelloError(
            "fidelity needs SciPy for its rank statistics: pip install 'morello[fit]'"
        ) from None
    require_native(ctx.target, "fidelity")
    impls = cheapest_programs(program, ctx, memo, top, spacing)
    placed = (
        time_impls_placed(program, impls, ctx, repeats, min_batch_s, None, placements)
        if batches
        else time_paired(program, impls, ctx, placements, rounds)
    )
    timings = [median_placement(p) for p in placed]
    opdef = ctx.ruleset.ops.get(program.spec.op)
    flops = None
    if opdef is not None:
        sizes = opdef.sizes([t.shape for t in program.spec.operands])
        flops = opdef.flops(sizes) if isinstance(sizes, dict) else None
    report = rank_agreement([i.cost for i in impls], [t.median for t in timings])
    report["placement_tau"] = placement_agreement([[pt.median for pt in p] for p in placed])
    seconds = [t.median for t in timings]
    report["rematch"] = (
        rematch(program, impls, seconds, ctx, contenders, len(placed[0]))
        if contenders > 0
        else None
    )
    report.update(
        function=program.name,
        target=ctx.target.name,
        top=top,
        spacing=spacing,
        flops=flops,
        placements=len(placed[0]),
        programs=[
            {
                "rank": n,
                "cost": impl.cost,
                "seconds": t.median,
                "seconds_low": t.low,
                "seconds_high": t.high,
                "placements": [pt.median for pt in p],
                "gflops": flops / t.median / 1e9 if flops else None,
                **({"impl": describe(impl)} if describe else {}),
            }
            for n, (impl, t, p) in enumerate(zip(impls, timings, placed, strict=True))
        ],
    )
    return report


def plot(reports: Sequence[dict[str, Any]], path: Path, title: str) -> None:
    """Predicted cost against measured time, one panel per function (matplotlib).

    Raises:
        MorelloError: matplotlib is missing.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise MorelloError("--plot needs matplotlib: pip install 'morello[plot]'") from None
    n = len(reports)
    cols = min(n, 5)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 4 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax, rep in zip(axes.flat, reports, strict=False):
        progs = rep["programs"]
        xs = [p["cost"] for p in progs]
        ys = [p["seconds"] * 1e6 for p in progs]
        ax.scatter(xs[1:], ys[1:], s=14, color="tab:blue", label="others")
        ax.scatter(xs[:1], ys[:1], s=40, color="tab:red", marker="*", label="chosen")
        f = rep["fastest_rank"]
        ax.scatter([xs[f]], [ys[f]], s=60, facecolors="none", edgecolors="k", label="fastest")
        m = rep.get("rematch")
        if m is not None and m["fastest_rank"] != f:  # the rematch's verdict, if another
            g = m["fastest_rank"]
            ax.scatter([xs[g]], [ys[g]], s=60, marker="s", facecolors="none",
                       edgecolors="tab:green", label="fastest after the rematch")  # fmt: skip
        tau, ceiling = rep["kendall_tau"], rep.get("placement_tau")
        again = ""
        if m is not None:
            again = f"\nafter the rematch: chosen / fastest {m['chosen_over_fastest']:.3f}"
        ax.set_title(
            rep.get("name", rep["function"])
            + ("" if tau is None else f": tau {tau:.2f}")
            + ("" if ceiling is None else f" (placements {ceiling:.2f})")
            + again,
            fontsize=9,
        )
        ax.set_xlabel("predicted cost")
        ax.set_ylabel("measured µs per call")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
