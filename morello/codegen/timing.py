"""How every timed thing is timed: one C loop shape and one batching rule.

Generated code and its peers are timed alike: a C function calls the thing ``iters`` times
between two reads of the monotonic clock, with a compiler barrier after each call so no call
can be merged with the next, and returns the seconds. ``measure`` makes one warm-up call,
grows the batch until it lasts ``min_batch_s``, then keeps the median and spread of
``repeats`` batches.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

import attrs

#: What a C file holding ``timed_loop`` functions needs before anything else.
PRELUDE = "#define _POSIX_C_SOURCE 199309L\n#include <time.h>\n"


@attrs.frozen
class Timing:
    """Seconds per call: median and the spread (min, max) over repeated batches."""

    median: float
    low: float
    high: float


def timed_loop(
    name: str,
    params: Sequence[str],
    body: Sequence[str],
    setup: Sequence[str] = (),
    finish: Sequence[str] = (),
) -> str:
    """C source of ``double name(params..., long iters)``: seconds for ``iters`` runs of body.

    ``body`` holds the statements of one run, ``setup`` and ``finish`` those before and after
    the timed region (declarations, folding results into a sink), all without indentation.
    """
    return "\n".join(
        [
            f"double {name}({', '.join([*params, 'long iters'])})",
            "{",
            *(f"    {line}" for line in setup),
            "    struct timespec t0, t1;",
            "    clock_gettime(CLOCK_MONOTONIC, &t0);",
            "    for (long it = 0; it < iters; it++) {",
            *(f"        {line}" for line in body),
            '        __asm__ __volatile__("" ::: "memory");',
            "    }",
            "    clock_gettime(CLOCK_MONOTONIC, &t1);",
            *(f"    {line}" for line in finish),
            "    return (double)(t1.tv_sec - t0.tv_sec)",
            "        + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);",
            "}",
            "",
        ]
    )


def measure(batch: Callable[[int], float], repeats: int, min_batch_s: float) -> Timing:
    """Time ``batch(iters)`` (seconds per call over ``iters`` calls) as the module says."""
    iters = _batch_size(batch, min_batch_s)
    samples = [batch(iters) for _ in range(repeats)]
    return Timing(statistics.median(samples), min(samples), max(samples))


def _batch_size(batch: Callable[[int], float], min_batch_s: float) -> int:
    """After one warm-up call, the calls a batch needs to last ``min_batch_s``."""
    batch(1)
    iters = 1
    while True:
        t = batch(iters) * iters
        if t >= min_batch_s or iters >= 1 << 30:
            return iters
        iters = max(iters * 2, int(iters * min_batch_s / max(t, 1e-9)))


def measure_interleaved(
    batches: Sequence[Callable[[int], float]], repeats: int, min_batch_s: float
) -> list[Timing]:
    """``measure`` for several things at once, their batches taken in turn.

    Each gets its own batch size (grown as ``measure`` grows it); then each of ``repeats``
    rounds times one batch of every thing, so a change in the machine's speed during the
    run (another process, the clock) falls on all of them alike instead of on the few timed
    while it lasted.
    """
    sizes = [_batch_size(batch, min_batch_s) for batch in batches]
    samples: list[list[float]] = [[] for _ in batches]
    for _ in range(repeats):
        for batch, iters, out in zip(batches, sizes, samples, strict=True):
            out.append(batch(iters))
    return [Timing(statistics.median(s), min(s), max(s)) for s in samples]
