"""``morello fidelity``: the programs it picks, its rank statistics and its command line."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from morello.cli import main
from morello.codegen import bench, fidelity
from morello.codegen.fidelity import (
    cheapest_programs,
    placement_agreement,
    rank_agreement,
    rematch,
    time_impls,
    time_impls_placed,
)
from morello.codegen.timing import Timing
from morello.context import SynthesisContext
from morello.errors import ExitCode
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.search.exhaustive import impl_problems
from morello.search.solve import synthesize


def _program(ctx: SynthesisContext, m: int, k: int, n: int) -> Program:
    text = f"func f(a: f32[{m}, {k}], b: f32[{k}, {n}]) -> c: f32[{m}, {n}] {{\n"
    text += "    c = matmul(a, b)\n}\n"
    (func,) = parse_spec_file("f.lark", text).funcs
    return build_program(func, ctx)


def test_rank_agreement_of_equal_and_reversed_orders() -> None:
    same = rank_agreement([1, 2, 3, 4], [1.0, 2.0, 3.0, 4.0])
    assert same["kendall_tau"] == pytest.approx(1.0)
    assert same["spearman_rho"] == pytest.approx(1.0)
    assert same["fastest_rank"] == 0
    assert same["chosen_over_fastest"] == 1.0
    rev = rank_agreement([1, 2, 3, 4], [4.0, 3.0, 2.0, 1.0])
    assert rev["kendall_tau"] == pytest.approx(-1.0)
    assert rev["fastest_rank"] == 3
    assert rev["chosen_over_fastest"] == 4.0
    assert rank_agreement([5], [1.0])["kendall_tau"] is None


def test_placement_agreement_is_the_median_tau_of_the_placement_pairs() -> None:
    # Three programs on three placements: placements 0 and 1 order them alike (tau 1),
    # placement 2 reverses the last two (tau 1/3 against each of the others).
    placed = [[1.0, 1.1, 1.0], [2.0, 2.1, 3.0], [3.0, 3.1, 2.5]]
    assert placement_agreement(placed) == pytest.approx(1 / 3)
    assert placement_agreement([[1.0, 2.0], [2.0, 1.0]]) == pytest.approx(-1.0)
    assert placement_agreement([[1.0], [2.0], [3.0]]) is None  # one placement
    assert placement_agreement([[1.0, 2.0]]) is None  # one program
    assert placement_agreement([[1.0, 1.0], [1.0, 2.0]]) is None  # one placement constant


def test_cheapest_programs_start_at_the_chosen_one_and_are_spaced(
    ctx: SynthesisContext,
) -> None:
    program = _program(ctx, 16, 16, 16)
    memo: dict = {}
    best, _ = synthesize(program.spec, ctx, memo)
    got = cheapest_programs(program, ctx, memo, top=12, spacing=0.02, samples=300)
    assert got[0].cost == best.cost
    assert 2 <= len(got) <= 12
    for a, b in itertools.pairwise(got):
        assert b.cost >= a.cost * 1.02
    for impl in got:
        assert impl_problems(impl, ctx) == []


def test_cheapest_programs_are_reproducible(ctx: SynthesisContext) -> None:
    program = _program(ctx, 8, 8, 16)
    one = cheapest_programs(program, ctx, {}, top=6, samples=100)
    two = cheapest_programs(program, ctx, {}, top=6, samples=100)
    assert [i.cost for i in one] == [i.cost for i in two]


@pytest.mark.runs_code
@pytest.mark.times_code
def test_cli_fidelity_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    spec = tmp_path / "mm.lark"
    spec.write_text(
        "func f(a: f32[16, 16], b: f32[16, 16]) -> c: f32[16, 16] {\n    c = matmul(a, b)\n}\n"
    )
    code = main(
        ["fidelity", "-t", target_name, "--no-db", "--top", "4", "--rounds", "2",
         "--spacing", "0.05", "--trees", "--json", str(spec)]
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == ExitCode.OK, err
    rep = json.loads(out)
    assert rep["spec"] == f"{spec}:f"
    progs = rep["programs"]
    assert 2 <= len(progs) <= 4
    assert [p["rank"] for p in progs] == list(range(len(progs)))
    assert all(p["seconds"] > 0 for p in progs)
    assert 0 <= rep["fastest_rank"] < len(progs)
    assert rep["chosen_over_fastest"] >= 1.0
    assert rep["kendall_tau"] is None or -1.0 <= rep["kendall_tau"] <= 1.0
    assert rep["spacing"] == 0.05
    for a, b in itertools.pairwise(progs):
        assert b["cost"] >= a["cost"] * 1.05
    assert f"cost {progs[0]['cost']}" in progs[0]["impl"].splitlines()[0]
    # Timed on bench's four placements of the buffers, each program by the median one.
    assert rep["placements"] == bench.PLACEMENTS
    for p in progs:
        assert len(p["placements"]) == bench.PLACEMENTS
        assert p["seconds"] == statistics.median(p["placements"])
        assert p["seconds_low"] <= min(p["placements"])
        assert p["seconds_high"] >= max(p["placements"])
    assert rep["placement_tau"] == placement_agreement([p["placements"] for p in progs])
    # The programs measured faster than the chosen one are timed again against it.
    m = rep["rematch"]
    if rep["fastest_rank"] == 0:
        assert m is None
    else:
        assert m["ranks"][0] == rep["fastest_rank"]
        assert len(m["ranks"]) == len(m["ratios"]) == len(m["first_ratios"]) <= 3
        assert m["first_ratios"][0] == pytest.approx(rep["chosen_over_fastest"])
        assert m["rounds"] == fidelity.REMATCH_ROUNDS * rep["placements"]
        assert m["chosen_over_fastest"] >= 1.0
        assert m["fastest_rank"] in (0, *m["ranks"])


def test_rematch_times_the_faster_programs_again(
    ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    program = _program(ctx, 8, 8, 8)
    impls = ["chosen", "a", "b", "c", "d"]  # stand-ins: the timing is faked below
    again = {"chosen": 10.0, "a": 11.0, "b": 9.5, "c": 10.0, "d": 8.0}
    calls = []

    def fake(program, subset, seconds, ctx, placements):
        calls.append((list(subset), list(seconds), placements))
        return [again[subset[0]] / again[i] for i in subset[1:]]

    monkeypatch.setattr(fidelity, "time_pairs", fake)
    # First pass: d slower than the chosen program, a, b and c faster (a the fastest).
    m = rematch(program, impls, [10.0, 5.0, 6.0, 8.0, 12.0], ctx, 2, 4)  # type: ignore[arg-type]
    assert calls == [(["chosen", "a", "b"], [10.0, 5.0, 6.0], 4)]  # the two fastest first
    assert m is not None
    assert m["ranks"] == [1, 2]
    assert m["first_ratios"] == [2.0, 10.0 / 6.0]
    assert m["ratios"] == [10.0 / 11.0, 10.0 / 9.5]
    assert (m["fastest_rank"], m["chosen_over_fastest"]) == (2, 10.0 / 9.5)
    assert m["rounds"] == 4 * fidelity.REMATCH_ROUNDS
    # Where no contender beats the chosen program again, it is the fastest.
    m = rematch(program, impls, [10.0, 5.0, 11.0, 12.0, 13.0], ctx, 3, 1)  # type: ignore[arg-type]
    assert m is not None
    assert (m["ranks"], m["fastest_rank"], m["chosen_over_fastest"]) == ([1], 0, 1.0)
    # Nothing to rematch where the chosen program was measured fastest.
    calls.clear()
    assert rematch(program, impls, [1.0, 2.0, 3.0, 4.0, 5.0], ctx) is None  # type: ignore[arg-type]
    assert calls == []


@pytest.mark.runs_code
def test_pair_harness_times_each_side_of_the_pair(ctx: SynthesisContext, tmp_path: Path) -> None:
    """Two functions of known relative cost (a loop of 20,000 steps and one of 2,000)
    alternate in the harness; each side's times land in its own array."""
    import ctypes

    import numpy as np

    from morello.codegen.compile import compile_shared
    from morello.codegen.fidelity import pair_harness
    from morello.codegen.runner import native_arch
    from morello.codegen.timing import PRELUDE

    if not native_arch(ctx.target):
        pytest.skip(f"{ctx.target.name}'s code does not run natively here")
    program = _program(ctx, 2, 2, 2)
    body = "volatile float s = 0; for (int i = 0; i < {n}; i++) s += a[0]; c[0] = s;"
    sig = "(const float *restrict a, const float *restrict b, float *restrict c)"
    c_text = (
        PRELUDE
        + f"void slow{sig} {{ {body.format(n=20000)} }}\n"
        + f"void quick{sig} {{ {body.format(n=2000)} }}\n"
        + pair_harness(program, "slow", "quick")
    )
    lib = ctypes.CDLL(str(compile_shared(c_text, ctx.target, tmp_path)))
    bufs = [np.ones(4, dtype=np.float32) for _ in range(3)]
    t1, t2 = np.zeros(9), np.zeros(9)
    ptrs = [ctypes.c_void_p(b.ctypes.data) for b in (*bufs, t1, t2)]
    lib.slow_vs_quick(*ptrs[:3], ctypes.c_long(9), ctypes.c_long(3), *ptrs[3:])
    assert (t1 > 0).all() and (t2 > 0).all()
    assert 3 < np.median(t1) / np.median(t2) < 30  # 10 times the steps


@pytest.mark.runs_code
@pytest.mark.times_code
def test_time_paired_times_each_program_against_the_first(ctx: SynthesisContext) -> None:
    """The first program's time on a placement is its own; a copy of it, timed against
    it with calls alternating, reads about the same; one program alone is timed against
    itself."""
    from morello.codegen.fidelity import time_paired

    program = _program(ctx, 8, 16, 16)
    (chosen,) = cheapest_programs(program, ctx, {}, top=1)
    placed = time_paired(program, [chosen, chosen], ctx, placements=2, rounds=3, round_s=0.005)
    assert [len(p) for p in placed] == [2, 2]
    for first, copy in zip(*placed, strict=True):
        assert 0 < first.low <= first.median <= first.high
        assert copy.low <= copy.median <= copy.high
        assert 0.5 < copy.median / first.median < 2.0
    (alone,) = time_paired(program, [chosen], ctx, rounds=1, round_s=0.001)
    assert len(alone) == 1 and alone[0].median > 0


@pytest.mark.runs_code
@pytest.mark.times_code
def test_time_impls_on_placements(ctx: SynthesisContext) -> None:
    program = _program(ctx, 8, 16, 16)
    impls = cheapest_programs(program, ctx, {}, top=2, samples=50)
    one = time_impls_placed(program, impls, ctx, repeats=1, min_batch_s=0.0001)
    assert [len(p) for p in one] == [1] * len(impls)
    three = time_impls_placed(program, impls, ctx, 1, 0.0001, placements=3)
    assert [len(p) for p in three] == [3] * len(impls)
    merged = time_impls(program, impls, ctx, 1, 0.0001, placements=3)
    assert all(t.median > 0 for t in merged)


def test_median_placement_and_placement_count(
    ctx: SynthesisContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    placed = [Timing(3.0, 2.0, 4.0), Timing(1.0, 0.5, 1.5), Timing(2.0, 1.8, 9.0)]
    assert bench.median_placement(placed) == Timing(2.0, 0.5, 9.0)
    program = _program(ctx, 16, 16, 16)  # 3 KiB of buffers
    assert bench.placement_count(program) == bench.PLACEMENTS
    assert bench.placement_count(program, 2) == 2
    monkeypatch.setattr(bench, "PLACEMENT_BYTES", 2 * bench.bytes_per_call(program))
    assert bench.placement_count(program) == 2
    monkeypatch.setattr(bench, "PLACEMENT_BYTES", 1)
    assert bench.placement_count(program) == 1  # one at least


def test_cli_fidelity_missing_spec_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], target_name: str
) -> None:
    code = main(["fidelity", "-t", target_name, str(tmp_path / "nope.lark")])
    _, err = capsys.readouterr()
    assert code != ExitCode.OK
    assert len(err.strip().splitlines()) == 1
    assert "nope.lark" in err
    assert "Traceback" not in err


def test_fidelity_text_states_the_placements_ceiling() -> None:
    from morello.cli import _fidelity_text

    progs = [
        {"rank": r, "cost": 100 + r, "seconds": s, "gflops": None}
        for r, s in enumerate([2e-6, 1e-6, 3e-6])
    ]
    report = {
        "spec": "x.lark:f", "top": 3, "spacing": 0.01, "flops": None, "programs": progs,
        "kendall_tau": 1 / 3, "spearman_rho": 0.5, "fastest_rank": 1,
        "chosen_over_fastest": 2.0, "placements": 4, "placement_tau": 0.875,
    }  # fmt: skip
    text = _fidelity_text(report)
    assert "kendall tau 0.333" in text
    assert "the 4 buffer placements order the programs alike with tau 0.875" in text
    assert "100.0% faster than the chosen one" in text
    assert "placements order" not in _fidelity_text({**report, "placement_tau": None})
    assert "rematch" not in text
    m = {"ranks": [1], "first_ratios": [2.0], "ratios": [1.02], "rounds": 28,
         "fastest_rank": 1, "chosen_over_fastest": 1.02}  # fmt: skip
    text = _fidelity_text({**report, "rematch": m})
    assert "rank 1 2.000 then 1.020" in text
    assert "after the rematch: rank 1 is 2.0% faster than the chosen one" in text
    m = {**m, "ratios": [0.99], "fastest_rank": 0, "chosen_over_fastest": 1.0}
    assert "after the rematch: the chosen program is the fastest" in _fidelity_text(
        {**report, "rematch": m}
    )


def test_plot_marks_the_rematch(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    progs = [
        {"rank": r, "cost": 100 + r, "seconds": s} for r, s in enumerate([2e-6, 1e-6, 3e-6, 1.5e-6])
    ]
    report = {"function": "f", "programs": progs, "kendall_tau": 0.0, "fastest_rank": 1,
              "placement_tau": 0.5}  # fmt: skip
    m = {"ranks": [1, 3], "first_ratios": [2.0, 4 / 3], "ratios": [0.99, 1.02],
         "rounds": 7, "fastest_rank": 3, "chosen_over_fastest": 1.02}  # fmt: skip
    fidelity.plot([report, {**report, "rematch": m}], tmp_path / "f.png", "t")
    assert (tmp_path / "f.png").stat().st_size > 1000
