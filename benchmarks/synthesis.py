"""Synthesis time, graph size and memo-table compression for square f32 matmuls.

    python benchmarks/synthesis.py --target zen1 16 32 64          # cold synthesis (issue 2)
    python benchmarks/synthesis.py --target zen1 --memo 64 128 256  # memo table (issue 3)

Cold runs use an in-memory table that starts empty. ``--memo`` additionally fills one SQLite
file with all sizes in order, and reports boxes vs. solved Specs, file bytes vs. a pickled
dict of Spec -> solution, warm re-run times and the speed-up of a size that shares
sub-problems with earlier ones. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import pickle
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from morello.context import make_context
from morello.db.sqlite import file_stats, open_table
from morello.db.table import MemoTable, decision_of
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize

SPEC = "func mm_{n}(a: f32[{n}, {n}], b: f32[{n}, {n}]) -> c: f32[{n}, {n}] {{ c = matmul(a, b) }}"


def program(n: int, ctx):  # type: ignore[no-untyped-def]
    return build_program(parse_spec_file(f"mm_{n}.lark", SPEC.format(n=n)).funcs[0], ctx)


def cold(sizes: list[int], ctx, repeat: int) -> None:  # type: ignore[no-untyped-def]
    print("| spec | specs visited | graph nodes | graph edges | cold synthesis (s, median) |")
    print("|---|---|---|---|---|")
    for n in sizes:
        times = []
        for _ in range(repeat):
            table = MemoTable(ctx)
            _impl, st = synthesize(program(n, ctx).spec, ctx, table)
            times.append(st.seconds)
        print(
            f"| matmul {n}x{n}x{n} | {st.specs_visited} | {st.graph_nodes} | "
            f"{st.graph_edges} | {statistics.median(times):.1f} |"
        )


def memo(sizes: list[int], ctx) -> None:  # type: ignore[no-untyped-def]
    folder = Path(tempfile.mkdtemp(prefix="morello-bench-"))
    db = folder / "memo.sqlite3"
    print(
        "| spec | cold (s) | after earlier sizes (s) | warm re-run (s) | warm speed-up | "
        "Specs solved (total) | boxes (total) | Specs per box | SQLite bytes | pickled dict bytes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    solved: dict[object, object] = {}
    for n in sizes:
        prog = program(n, ctx)
        t_cold = synthesize(prog.spec, ctx, MemoTable(ctx))[1].seconds
        table = open_table(db, ctx)
        t0 = time.perf_counter()
        _impl, _st = synthesize(prog.spec, ctx, table)
        table.flush()
        t_shared = time.perf_counter() - t0
        # Solutions of a plain dict memo, for the size comparison.
        plain: dict[object, object] = {}
        synthesize(prog.spec, ctx, plain)  # type: ignore[arg-type]
        for spec, sol in plain.items():
            solved[spec] = None if sol is None else (decision_of(sol.action), sol.cost, sol.peaks)  # type: ignore[attr-defined]
        table.close()
        warm_table = open_table(db, ctx)
        t0 = time.perf_counter()
        synthesize(prog.spec, ctx, warm_table)
        t_warm = time.perf_counter() - t0
        warm_table.close()
        fs = file_stats(db)
        pickled = len(pickle.dumps(solved, protocol=pickle.HIGHEST_PROTOCOL))
        print(
            f"| matmul {n}^3 | {t_cold:.1f} | {t_shared:.1f} | {t_warm:.4f} | "
            f"{t_cold / t_warm:.0f}x | {len(solved)} | {fs['boxes']} | "
            f"{len(solved) / fs['boxes']:.1f} | {fs['bytes']} | {pickled} |"
        )


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("sizes", nargs="+", type=int)
    ap.add_argument("--target", default="zen1")
    ap.add_argument("--memo", action="store_true", help="memo-table benchmark instead of cold runs")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ctx = make_context(args.target)
    print(
        f"<!-- {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()} "
        f"python {platform.python_version()} -->"
    )
    if args.memo:
        memo(args.sizes, ctx)
    else:
        cold(args.sizes, ctx, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
