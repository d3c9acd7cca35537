"""Benchmark peers are real BLAS, found from the op's structure and timed like our code.

* Detection: a matrix product is recognised from index notation whatever its name, operand
  order, index letters or output orientation, and for every row/col-major layout of every
  operand; the BLAS call derived for it is run by the peer child, which checks its output
  against NumPy (a wrong transpose or leading dimension fails there). A product of a
  matrix and a vector (either order, the matrix in either layout) is a gemv call, and one of
  two vectors into a scalar a dot call. Ops that are not a plain product get no BLAS peer.
* Timing: a peer of 128^3 is within 2x of the same library's sgemm called from an
  independent C loop (``blas_direct.c``), and ``bench --json`` on matmul_64 reports an
  OpenBLAS time within 15% of that loop in the same run, next to the array peers
  (``test_array_peers.py``) and a ratio to each. These are the acceptance checks of
  the peer harness, with margins far above this machine's noise: the einsum peer it replaced
  was 3-4x slower than BLAS at these sizes.
"""

from __future__ import annotations

import ctypes.util
import glob
import itertools
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import pytest

from morello.codegen.blas import (
    DotCall,
    GemmCall,
    GemvCall,
    blas_calls,
    dot_structure,
    matmul_structure,
    matvec_structure,
)
from morello.codegen.harness import random_inputs, reference, tolerance
from morello.codegen.peers import PeerMissing, PeerTiming, time_peers
from morello.codegen.runner import host_features
from morello.codegen.timing import Timing
from morello.context import SynthesisContext, make_context
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.target import ARRAY_PEER_LIBRARIES, BLAS_PEER_LIBRARIES, Peer

pytestmark = pytest.mark.times_code

ROOT = Path(__file__).resolve().parents[2]

# The same product written five ways: operand order, letters, output orientation, and a
# second operand stored transposed in its logical shape.
OPS = """\
op mm_swapped(b[k, n], a[m, k]) -> c[m, n] = sum(k) a[m, k] * b[k, n]
op mm_letters(x[p, q], y[q, r]) -> z[p, r] = sum(q) y[q, r] * x[p, q]
op mm_out_t(a[m, k], b[k, n]) -> c[n, m] = sum(k) a[m, k] * b[k, n]
op mm_b_t(a[m, k], b[n, k]) -> c[m, n] = sum(k) a[m, k] * b[n, k]
op scaled(a[m, k], b[k, n]) -> c[m, n] = sum(k) 2 * a[m, k] * b[k, n]
op ew(a[i, j], b[i, j]) -> c[i, j] = a[i, j] * b[i, j]
op inner(a[i, k], b[i, k]) -> c[i, j] = sum(k) a[i, k] * b[j, k] * b[i, k]
op mv_t(v[k], a[n, k]) -> c[n] = sum(k) a[n, k] * v[k]
op rowsum_scaled(a[m, k], v[k]) -> c[m] = sum(k) a[m, k] * a[m, k]
op dot_letters(u[q], v[q]) -> s[] = sum(q) v[q] * u[q]
op square_sum(u[q], v[q]) -> s[] = sum(q) u[q] * u[q]
"""

# (op, input shapes from m=3, k=5, n=7; output shape)
PRODUCTS = {
    "matmul": (("3, 5", "5, 7"), "3, 7"),
    "mm_swapped": (("5, 7", "3, 5"), "3, 7"),
    "mm_letters": (("3, 5", "5, 7"), "3, 7"),
    "mm_out_t": (("3, 5", "5, 7"), "7, 3"),
    "mm_b_t": (("3, 5", "7, 5"), "3, 7"),
}
LAYOUTS = ("row_major", "col_major")


@pytest.fixture(scope="module")
def ops_ctx(target_name: str, tmp_path_factory: pytest.TempPathFactory) -> SynthesisContext:
    path = tmp_path_factory.mktemp("ops") / "products.rules"
    path.write_text(OPS, encoding="utf-8")
    return make_context(target_name, extra_rules=[path])


def _only_openblas(ctx: SynthesisContext) -> SynthesisContext:
    peers = tuple(p for p in ctx.target.peers if p.library == "openblas")
    assert peers, "the target under test names OpenBLAS as a peer"
    return attrs.evolve(ctx, target=attrs.evolve(ctx.target, peers=peers))


def _blas_peers(ctx: SynthesisContext) -> list[Peer]:
    """The target's BLAS peers (``time_peers`` times these; array peers have their own)."""
    return [p for p in ctx.target.peers if p.library in BLAS_PEER_LIBRARIES]


def _program(ctx: SynthesisContext, text: str) -> Program:
    """The function's Program. Peers need no kernel, so the products written other ways
    (which no target's kernels compute) are built without requiring kernels."""
    (func,) = parse_spec_file("<test>", text).funcs
    return build_program(func, ctx, require_kernels=False)


def _peers(program: Program, ctx: SynthesisContext, tmp: Path) -> list[PeerTiming | PeerMissing]:
    inputs = random_inputs(program, ctx)
    return time_peers(
        program,
        ctx,
        inputs,
        reference(program, inputs, ctx),
        tolerance(program, inputs, ctx),
        repeats=1,
        min_batch_s=1e-4,
        workdir=tmp,
    )


def test_matmul_structure_reads_index_notation_not_names(ops_ctx: SynthesisContext) -> None:
    ops = ops_ctx.ruleset.ops
    assert matmul_structure(ops["matmul"]) == ("m", "n", "k")
    assert matmul_structure(ops["mm_swapped"]) == ("n", "m", "k")
    assert matmul_structure(ops["mm_letters"]) == ("p", "r", "q")
    assert matmul_structure(ops["mm_b_t"]) == ("m", "n", "k")
    for name in ("scaled", "ew", "inner", "zero", "move"):
        assert matmul_structure(ops[name]) is None, name


@pytest.mark.parametrize("op", sorted(PRODUCTS))
@pytest.mark.parametrize("layouts", list(itertools.product(LAYOUTS, repeat=3)), ids="-".join)
def test_blas_peer_computes_every_operand_order_and_layout(
    op: str, layouts: tuple[str, str, str], ops_ctx: SynthesisContext, tmp_path: Path
) -> None:
    (s1, s2), so = PRODUCTS[op]
    l1, l2, lo = layouts
    text = (
        f"func f(p: f32[{s1}] {l1}, q: f32[{s2}] {l2}) -> r: f32[{so}] {lo} {{\n"
        f"    r = {op}(p, q)\n}}\n"
    )
    ctx = _only_openblas(ops_ctx)
    program = _program(ctx, text)
    calls = blas_calls(ctx.ruleset.ops[op], program.spec)
    assert [type(c) for c in calls] == [GemmCall]
    (peer,) = _peers(program, ctx, tmp_path)  # the child checks the output against NumPy
    assert isinstance(peer, PeerTiming), peer
    assert peer.routine.endswith(("cblas_sgemm", "cblas_sgemm64_")), peer.routine
    assert not peer.copied


@pytest.mark.parametrize(
    ("shapes", "layouts"),
    [
        (("1, 64", "64, 48", "1, 48"), ("row_major", "row_major", "row_major")),
        (("1, 64", "64, 48", "1, 48"), ("row_major", "col_major", "row_major")),
        (("48, 64", "64, 1", "48, 1"), ("row_major", "row_major", "row_major")),
        (("48, 64", "64, 1", "48, 1"), ("col_major", "row_major", "col_major")),
    ],
    ids=["vm-row", "vm-colB", "mv-row", "mv-colA"],
)
def test_matvec_peer_tries_gemv_and_gemm(
    shapes: tuple[str, str, str], layouts: tuple[str, str, str], ctx: SynthesisContext,
    tmp_path: Path,
) -> None:  # fmt: skip
    (sa, sb, sc), (la, lb, lc) = shapes, layouts
    text = f"func f(a: f32[{sa}] {la}, b: f32[{sb}] {lb}) -> c: f32[{sc}] {lc} {{\n"
    text += "    c = matmul(a, b)\n}\n"
    ctx = _only_openblas(ctx)
    program = _program(ctx, text)
    assert [type(c) for c in blas_calls(ctx.ruleset.ops["matmul"], program.spec)] == [
        GemmCall,
        GemvCall,
    ]
    (peer,) = _peers(program, ctx, tmp_path)
    assert isinstance(peer, PeerTiming)
    assert sorted(s.split("cblas_")[1][:5] for s in peer.tried) == ["sgemm", "sgemv"]
    assert peer.routine in peer.tried
    assert peer.timing.median == min(peer.tried.values())


def test_matvec_structure_reads_index_notation_not_names(
    ctx: SynthesisContext, ops_ctx: SynthesisContext
) -> None:
    ops = ops_ctx.ruleset.ops
    assert matvec_structure(ctx.ruleset.ops["matmul/1.2.1"]) == (1, 0, "n", "k")
    assert matvec_structure(ctx.ruleset.ops["matmul/2.1.1"]) == (0, 1, "m", "k")
    assert matvec_structure(ops["mv_t"]) == (1, 0, "n", "k")
    for name in ("rowsum_scaled", "matmul", "ew", "sum"):
        assert matvec_structure(ops[name]) is None, name


@pytest.mark.parametrize(
    ("text", "trans"),
    [
        ("x: f32[64], w: f32[64, 48] {lay}) -> y: f32[48] {{\n    y = matmul(x, w)", True),
        ("w: f32[48, 64] {lay}, x: f32[64]) -> y: f32[48] {{\n    y = matmul(w, x)", False),
        ("x: f32[64], w: f32[48, 64] {lay}) -> y: f32[48] {{\n    y = mv_t(x, w)", False),
    ],
    ids=["vecmat", "matvec", "mv_t"],
)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vector_products_have_a_gemv_peer(
    text: str, trans: bool, layout: str, ops_ctx: SynthesisContext, tmp_path: Path
) -> None:
    ctx = _only_openblas(ops_ctx)
    program = _program(ctx, "func f(" + text.format(lay=layout) + "\n}\n")
    (call,) = blas_calls(ctx.ruleset.ops[program.spec.op], program.spec)
    assert isinstance(call, GemvCall)
    assert call.trans == (trans != (layout == "col_major"))
    (peer,) = _peers(program, ctx, tmp_path)  # the child checks the output against NumPy
    assert isinstance(peer, PeerTiming), peer
    assert "cblas_sgemv" in peer.routine


def test_dot_structure_reads_index_notation_not_names(
    ctx: SynthesisContext, ops_ctx: SynthesisContext
) -> None:
    ops = ops_ctx.ruleset.ops
    assert dot_structure(ctx.ruleset.ops["matmul/1.1.0"]) == "k"
    assert dot_structure(ops["dot_letters"]) == "q"
    for name in ("square_sum", "matmul", "mv_t", "sum"):
        assert dot_structure(ops[name]) is None, name


@pytest.mark.parametrize(
    "text",
    [
        "x: f32[100], w: f32[100]) -> y: f32[] {\n    y = matmul(x, w)",
        "x: f32[37], w: f32[37]) -> y: f32[] {\n    y = dot_letters(x, w)",
    ],
    ids=["matmul", "dot_letters"],
)
def test_a_dot_product_has_a_dot_peer(text: str, ops_ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _only_openblas(ops_ctx)
    program = _program(ctx, "func f(" + text + "\n}\n")
    (call,) = blas_calls(ctx.ruleset.ops[program.spec.op], program.spec)
    assert isinstance(call, DotCall)
    assert (call.n, call.incx, call.incy) == (program.spec.operands[0].shape[0], 1, 1)
    (peer,) = _peers(program, ctx, tmp_path)  # the child checks the output against NumPy
    assert isinstance(peer, PeerTiming), peer
    assert "cblas_sdot" in peer.routine


def test_no_blas_peer_for_other_ops(ops_ctx: SynthesisContext, tmp_path: Path) -> None:
    for text in (
        "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = ew(a, b)\n}\n",
        "func f(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = scaled(a, b)\n}\n",
        "func f(a: f32[4, 4]) -> c: f32[4, 4] {\n    c = move(a)\n}\n",
        "func f(a: f32[8], b: f32[8]) -> c: f32[] {\n    c = square_sum(a, b)\n}\n",
        "func f(a: f32[8]) -> c: f32[] {\n    c = sum(a)\n}\n",
    ):
        program = _program(ops_ctx, text)
        assert blas_calls(ops_ctx.ruleset.ops[program.spec.op], program.spec) == []
        assert _peers(program, ops_ctx, tmp_path) == []


def test_bf16_peers_run_f32_routines_on_a_row_major_copy(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    text = (
        "func f(x: bf16[1, 64], w: bf16[64, 48] packed_cols(16)) -> y: f32[1, 48] {\n"
        "    y = matmul(x, w)\n}\n"
    )
    program = _program(ctx, text)
    by_name = {p.name: p for p in _peers(program, ctx, tmp_path)}
    for peer in _blas_peers(ctx):
        widened = by_name[f"{peer.library}_f32"]
        if isinstance(widened, PeerTiming):
            assert widened.copied
        assert peer.library in by_name  # timed natively, or missing with a reason
    native = by_name["openblas"]
    assert isinstance(native, PeerMissing)
    assert "sbgemm" in native.reason


def _openblas_path() -> str:
    """The OpenBLAS shared library NumPy loaded in this process."""
    import numpy  # noqa: F401

    found = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "openblas" in os.path.basename(path):
            found.append(path)
    # SciPy's own OpenBLAS may be loaded too (the calibration tests import SciPy).
    for path in found:
        if "numpy" in os.path.dirname(path):
            return path
    if found:
        return found[0]
    pytest.fail("NumPy's OpenBLAS was not found in /proc/self/maps")


def _direct(peer: PeerTiming, env: dict[str, str], exe: Path, n: int) -> float:
    bits = "64" if peer.routine.endswith("64_") else "32"
    out = subprocess.run(
        [str(exe), peer.detail["path"], peer.routine, bits, str(n)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **env},
    )
    return float(out.stdout)


@pytest.fixture(scope="module")
def blas_direct(tmp_path_factory: pytest.TempPathFactory) -> Path:
    exe = tmp_path_factory.mktemp("direct") / "blas_direct"
    src = Path(__file__).with_name("blas_direct.c")
    subprocess.run(["gcc", "-O2", "-o", str(exe), str(src), "-ldl"], check=True)
    return exe


def test_peer_128_is_blas_within_2x_of_a_direct_c_loop(
    ctx: SynthesisContext, blas_direct: Path, tmp_path: Path
) -> None:
    ctx = _only_openblas(ctx)
    program = _program(
        ctx, "func f(a: f32[128, 128], b: f32[128, 128]) -> c: f32[128, 128] {\n"
        "    c = matmul(a, b)\n}\n"
    )  # fmt: skip
    inputs = random_inputs(program, ctx)
    (peer,) = time_peers(
        program, ctx, inputs, reference(program, inputs, ctx), tolerance(program, inputs, ctx),
        repeats=5, min_batch_s=0.05, workdir=tmp_path,
    )  # fmt: skip
    assert isinstance(peer, PeerTiming)
    assert peer.detail["path"] == _openblas_path()
    assert "sgemm" in peer.routine
    (openblas,) = ctx.target.peers
    direct = _direct(peer, dict(openblas.env), blas_direct, 128)
    assert 0.5 < peer.timing.median / direct < 2.0, (peer.timing.median, direct)


def _bench_json(target_name: str, spec: Path, tmp_path: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "morello", "bench", "--target", target_name, str(spec), "--json",
         "--db", str(tmp_path / "memo.sqlite3")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def test_bench_json_openblas_within_15_percent_of_a_direct_c_loop(
    target_name: str, ctx: SynthesisContext, blas_direct: Path, tmp_path: Path
) -> None:
    env = dict(next(p for p in ctx.target.peers if p.library == "openblas").env)
    # The machine is shared: a neighbour (another test worker) can slow either side of one
    # comparison by a third. A benchmark that times the peer differently (another routine,
    # another thread count, the call's overhead) is off in every attempt, so the comparison is
    # repeated, each attempt timing the direct loop just before and just after bench, and one
    # attempt whose bench figure lies within 15% of that bracket passes (a run of CI read
    # 1.42, 0.82 and 0.85 against a direct loop timed only after bench). The same holds for
    # our time over the FMA peak bench measures beside it (a neighbour slowing the peak loop
    # read 1.39): a peak counted wrong (half the flops) is above 1.2 in every attempt.
    seen = []
    peer = None
    for _ in range(5):
        before = None
        if peer is not None:  # (the routine is known from the first attempt on)
            before = statistics.median(_direct(peer, env, blas_direct, 64) for _ in range(3))
        row = _bench_json(target_name, ROOT / "examples" / "matmul_64.lark", tmp_path)
        openblas = row["peers"]["openblas"]
        assert openblas["detail"]["threads"] == "1"
        peer = PeerTiming(
            "openblas", "openblas", "f32", openblas["routine"], None, {}, openblas["detail"], False
        )  # type: ignore[arg-type]
        after = statistics.median(_direct(peer, env, blas_direct, 64) for _ in range(3))
        low, high = min(before or after, after), max(before or after, after)
        seen.append((openblas["seconds"], before, after, row["fraction_of_limit"]))
        if 0.85 * low < openblas["seconds"] < 1.15 * high and 0 < row["fraction_of_limit"] < 1.2:
            break
    else:
        pytest.fail(
            "bench is more than 15% outside the direct C loop's times around it, or our time is "
            "above 1.2 of the FMA peak, in every attempt (peer s, direct s before and after, "
            f"fraction): {seen}"
        )
    # The rest of the row: the array peers too, the limits, the ratio to each peer and the best.
    for named in ctx.target.peers:
        if named.library in ARRAY_PEER_LIBRARIES:
            assert named.library in row["peers"] or named.library in row["peers_missing"]
    if "numpy" in row["peers"]:
        assert row["peers"]["numpy"]["routine"] == "numpy sequence: matmul"
    for name, timed in row["peers"].items():
        assert row["ratios"][name] == pytest.approx(timed["seconds"] / row["seconds"])
    best = row["best_peer"]
    assert row["ratio"] == pytest.approx(row["peers"][best]["seconds"] / row["seconds"])
    assert row["bound"] == "compute"
    assert 0 < row["fraction_of_limit"] < 1.2
    assert row["peak_gflops"] > 0 and row["read_gbps"] > 0


def _mkl_installed() -> bool:
    return bool(
        glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*"))
        or ctypes.util.find_library("mkl_rt")
    )


@pytest.mark.skipif(not _mkl_installed(), reason="Intel MKL is not installed (morello[peers])")
def test_bench_reports_mkl_held_to_the_target_settings(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    mkl = [p for p in ctx.target.peers if p.library == "mkl"]
    if not mkl:
        pytest.skip(f"target {ctx.target.name} names no MKL peer")
    ctx = attrs.evolve(ctx, target=attrs.evolve(ctx.target, peers=tuple(mkl)))
    program = _program(
        ctx, "func f(a: f32[64, 64], b: f32[64, 64]) -> c: f32[64, 64] {\n"
        "    c = matmul(a, b)\n}\n"
    )  # fmt: skip
    (peer,) = _peers(program, ctx, tmp_path)
    assert isinstance(peer, PeerTiming), peer
    assert peer.routine == "cblas_sgemm"
    assert peer.detail["ran"] == "SGEMM"
    assert peer.detail.get("threading") == "sequential", peer.detail
    isa = dict(mkl[0].env).get("MKL_ENABLE_INSTRUCTIONS")
    if isa is not None and "GenuineIntel" in (host_features("vendor_id") or ()):
        assert isa in peer.detail["isa"]
    elif isa is not None:
        # On other vendors' CPUs (an AMD EPYC here) MKL's log names no instruction set,
        # only its generic code path, so the limit cannot be read back from it.
        assert peer.detail["isa"] in (isa, "Intel(R) Architecture processors"), peer.detail


def test_missing_mkl_is_a_reason_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from morello.codegen import peers

    monkeypatch.setattr(peers.glob, "glob", lambda _pattern: [])
    monkeypatch.setattr(peers.ctypes.util, "find_library", lambda _name: None)
    assert peers._load_mkl() == (
        "Intel MKL is not installed (pip install 'morello[peers]' installs it)"
    )


def test_integer_product_has_no_blas_routine(ctx: SynthesisContext, tmp_path: Path) -> None:
    program = _program(
        ctx, "func f(a: s32[4, 4], b: s32[4, 4]) -> c: s32[4, 4] {\n    c = matmul(a, b)\n}\n"
    )
    found = _peers(program, ctx, tmp_path)
    assert [p.name for p in found] == [p.library for p in _blas_peers(ctx)]
    for peer in found:
        assert isinstance(peer, PeerMissing)
        assert peer.reason == "BLAS has no s32 product into s32"


@pytest.mark.runs_code
def test_bench_times_ours_and_every_peer_routine_in_the_same_rounds(
    ctx: SynthesisContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench starts every peer (checked), then times one batch of ours and one of each
    peer routine per round, so a change in the machine's speed falls on all alike."""
    from morello.codegen import bench
    from morello.codegen.compile import compile_shared
    from morello.codegen.header import lower_to_c
    from morello.codegen.timing import PRELUDE
    from morello.search.solve import synthesize

    program = _program(
        ctx, "func f(a: f32[1, 64], b: f32[64, 32]) -> c: f32[1, 32] {\n    c = matmul(a, b)\n}\n"
    )
    impl, _ = synthesize(program.spec, ctx, {})
    source = lower_to_c("u", [(program, impl)], ctx).c_text
    harness = bench.timing_harness(program, ctx)
    lib = compile_shared(PRELUDE + source + "\n" + harness, ctx.target, tmp_path)
    calls: list[int] = []  # which batch ran, in order
    real = bench.measure_interleaved

    def recording(
        batches: Sequence[Callable[[int], float]], repeats: int, min_batch_s: float
    ) -> list[Timing]:
        def spy(i: int, batch: Callable[[int], float]) -> Callable[[int], float]:
            def run(iters: int) -> float:
                calls.append(i)
                return batch(iters)

            return run

        return real([spy(i, b) for i, b in enumerate(batches)], repeats, min_batch_s)

    monkeypatch.setattr(bench, "measure_interleaved", recording)
    placed, peers = bench._time_with_peers(lib, program, ctx, 3, 1e-3, tmp_path)
    assert len(placed) == bench.PLACEMENTS  # ours on each buffer placement
    timed = [p for p in peers if isinstance(p, PeerTiming)]
    assert any(p.library == "openblas" for p in timed)
    routines = sum(len(p.tried) for p in timed)  # openblas tries gemm and gemv here
    assert routines > len(timed)
    # After each batch's sizing, three rounds of ours on every placement, then every
    # routine, in that order.
    each = len(placed) + routines
    assert calls[-3 * each :] == list(range(each)) * 3
    for t in [*placed, *(p.timing for p in timed)]:
        assert 0 < t.low <= t.median <= t.high


def test_a_peer_child_that_dies_is_reported_with_its_stderr(tmp_path: Path) -> None:
    """A child that replies, then dies while timing: the error quotes its exit and stderr."""
    from morello.codegen.peers import PeerChild

    (tmp_path / "dying_peer.py").write_text(
        "import sys\n"
        'print(\'{"ready": "x"}\', flush=True)\n'
        "sys.stdin.readline()\n"
        "sys.stderr.write('the library crashed\\n')\n"
        "sys.exit(3)\n",
        encoding="utf-8",
    )
    request = tmp_path / "req.json"
    request.write_text("{}", encoding="utf-8")
    peer = Peer("openblas", {"PYTHONPATH": str(tmp_path)})
    with PeerChild(peer, request, "dying_peer") as child:
        assert child.reply == {"ready": "x"}
        with pytest.raises(RuntimeError, match=r"(?s)peer openblas failed \(exit 3\).*crashed"):
            child.batch("x")(1)


def test_bench_places_buffers_at_fixed_offsets_within_a_page(ctx: SynthesisContext) -> None:
    """Generated code's speed can depend on where its buffers lie within a page (4K
    aliasing), so bench times it on several placements, the same in every run."""
    from morello.codegen import bench

    program = _program(
        ctx, "func f(a: f32[8, 64], b: f32[64, 32]) -> c: f32[8, 32] {\n    c = matmul(a, b)\n}\n"
    )
    seen = set()
    for where in range(bench.PLACEMENTS):
        offsets = [bench.placement(where, i) for i in range(3)]
        assert all(o % 64 == 0 and 0 <= o < 4096 for o in offsets)
        assert offsets == [bench.placement(where, i) for i in range(3)]  # deterministic
        seen.add(tuple(offsets))
        bufs, ptrs = bench.timing_buffers(program, ctx, where)
        assert [b.ctypes.data % 4096 for b in bufs] == offsets
        assert [p.value for p in ptrs] == [b.ctypes.data for b in bufs]
    assert len(seen) == bench.PLACEMENTS
