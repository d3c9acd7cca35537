"""Array peers: any op or graph run as NumPy and JAX code, checked, then timed like ours.

* ``bench --json`` on a small graph reports the NumPy sequence (and JAX's ``jax.jit`` when
  installed) with positive times, the array calls it made and a ratio to each peer.
* Each peer runs under the target's settings and says so: one thread (CPU time about wall
  time), NumPy's BLAS and SIMD as the environment holds them, JAX's version and XLA flags.
* A wrong output is ``CheckFailed``, not a figure; JAX not installed, or an op over integers,
  is a peer missing with its reason.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import attrs
import numpy as np
import pytest

from morello.codegen.array_peers import time_array_peers
from morello.codegen.harness import random_inputs, reference, tolerance
from morello.codegen.peers import PeerMissing, PeerTiming
from morello.context import SynthesisContext
from morello.errors import CheckFailed
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.target import ARRAY_PEER_LIBRARIES, Peer

pytestmark = pytest.mark.times_code

HAS_JAX = importlib.util.find_spec("jax") is not None
NO_JAX = "JAX is not installed (pip install 'morello[jax]')"

DENSE = """\
func dense(x: f32[8, 16], w: f32[16, 16], b: f32[16]) -> y: f32[8, 16] {
    y = relu(add(matmul(x, w), b))
}
"""
SOFTMAX = "func f(x: f32[4, 32]) -> y: f32[4, 32] {\n    y = softmax(x)\n}\n"


def _program(ctx: SynthesisContext, text: str, require_kernels: bool = True) -> Program:
    (func,) = parse_spec_file("<test>", text).funcs
    return build_program(func, ctx, require_kernels=require_kernels)


def _with_peers(ctx: SynthesisContext, *libraries: str) -> SynthesisContext:
    peers = tuple(p for p in ctx.target.peers if p.library in libraries)
    if not peers:
        pytest.skip(f"target {ctx.target.name} names no {' or '.join(libraries)} peer")
    return attrs.evolve(ctx, target=attrs.evolve(ctx.target, peers=peers))


def _time(
    program: Program, ctx: SynthesisContext, tmp: Path, want: np.ndarray | None = None
) -> list[PeerTiming | PeerMissing]:
    inputs = random_inputs(program, ctx)
    return time_array_peers(
        program,
        ctx,
        inputs,
        reference(program, inputs, ctx) if want is None else want,
        tolerance(program, inputs, ctx),
        repeats=3,
        min_batch_s=1e-3,
        workdir=tmp,
    )


def test_bench_json_reports_array_peers_of_a_graph(
    target_name: str, ctx: SynthesisContext, tmp_path: Path
) -> None:
    spec = tmp_path / "dense.lark"
    spec.write_text(DENSE, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "morello", "bench", "--target", target_name, str(spec), "--json",
         "--db", str(tmp_path / "memo.sqlite3"), "--repeats", "3", "--min-batch", "0.005"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    row = json.loads(out.stdout)
    named = [p.library for p in ctx.target.peers if p.library in ARRAY_PEER_LIBRARIES]
    assert "numpy" in named, "the target under test names NumPy as a peer"
    assert "openblas" not in row["peers"]  # a graph is no BLAS routine
    numpy = row["peers"]["numpy"]
    assert numpy["routine"] == "numpy sequence: matmul, add, relu"
    assert numpy["detail"]["calls"] == "matmul, add, maximum"
    if "jax" in named and HAS_JAX:
        assert row["peers"]["jax"]["routine"] == "jax.jit"
    elif "jax" in named:
        assert "not installed" in row["peers_missing"]["jax"]
    for name, peer in row["peers"].items():
        assert 0 < peer["seconds_low"] <= peer["seconds"] <= peer["seconds_high"], name
        assert peer["gflops"] > 0
        assert row["ratios"][name] == pytest.approx(peer["seconds"] / row["seconds"])
    best = min(row["peers"], key=lambda n: row["peers"][n]["seconds"])
    assert row["best_peer"] == best
    assert row["ratio"] == row["ratios"][best]


def test_numpy_peer_runs_under_the_target_settings(ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _with_peers(ctx, "numpy")
    (peer,) = _time(_program(ctx, DENSE), ctx, tmp_path)
    assert isinstance(peer, PeerTiming), peer
    assert peer.timing.median > 0
    env = dict(ctx.target.peers[0].env)
    for key, value in env.items():
        assert peer.detail[key] == value
    if "OPENBLAS_NUM_THREADS" in env:
        assert peer.detail["blas_threads"] == env["OPENBLAS_NUM_THREADS"]
    if "OPENBLAS_CORETYPE" in env:
        assert peer.detail["blas_core"].lower() == env["OPENBLAS_CORETYPE"].lower()
    for feature in env.get("NPY_DISABLE_CPU_FEATURES", "").split():
        assert feature not in peer.detail["simd"].split()
    assert float(peer.detail["cpu_per_wall"]) < 1.5


@pytest.mark.skipif(not HAS_JAX, reason=NO_JAX)
def test_jax_peer_jits_the_graph_on_one_thread(ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _with_peers(ctx, "jax")
    (peer,) = _time(_program(ctx, SOFTMAX), ctx, tmp_path)
    assert isinstance(peer, PeerTiming), peer
    assert peer.routine == "jax.jit"
    assert peer.detail["jax"] and peer.detail["device"].startswith("cpu")
    for key, value in ctx.target.peers[0].env:
        assert peer.detail[key] == value  # the XLA flags it ran with, for the record
    assert peer.detail["calls"] == "max, subtract, exp, sum, divide"
    assert float(peer.detail["cpu_per_wall"]) < 1.5


def test_missing_jax_is_a_reason_not_an_error(ctx: SynthesisContext, tmp_path: Path) -> None:
    stub = tmp_path / "stub" / "jax"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('no jax here')\n", encoding="utf-8")
    target = attrs.evolve(ctx.target, peers=(Peer("jax", {"PYTHONPATH": str(stub.parent)}),))
    ctx = attrs.evolve(ctx, target=target)
    (peer,) = _time(_program(ctx, SOFTMAX), ctx, tmp_path)
    assert peer == PeerMissing(
        "jax", "JAX is not installed (pip install 'morello[jax]' installs it)"
    )


def test_a_wrong_output_is_check_failed(ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _with_peers(ctx, "numpy")
    program = _program(ctx, SOFTMAX)
    with pytest.raises(CheckFailed, match="peer numpy: max abs error"):
        _time(program, ctx, tmp_path, want=np.zeros(program.spec.output.shape))


def test_integer_ops_have_no_array_peer(ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _with_peers(ctx, *ARRAY_PEER_LIBRARIES)
    program = _program(  # no target has s32 kernels; the peers are asked all the same
        ctx,
        "func f(a: s32[4, 4], b: s32[4, 4]) -> c: s32[4, 4] {\n    c = matmul(a, b)\n}\n",
        require_kernels=False,
    )
    found = _time(program, ctx, tmp_path)
    assert [p.name for p in found] == [p.library for p in ctx.target.peers]
    for peer in found:
        assert isinstance(peer, PeerMissing)
        assert peer.reason == "array peers compute in f32 or f64, not s32 into s32"


def test_bf16_inputs_run_as_f32_arrays(ctx: SynthesisContext, tmp_path: Path) -> None:
    ctx = _with_peers(ctx, "numpy")
    program = _program(
        ctx, "func f(x: bf16[2, 64], w: bf16[64, 48]) -> y: f32[2, 48] {\n    y = matmul(x, w)\n}\n"
    )
    (peer,) = _time(program, ctx, tmp_path)  # checked against the reference of bf16 values
    assert isinstance(peer, PeerTiming), peer
    assert (peer.name, peer.dtype) == ("numpy_f32", "f32")
