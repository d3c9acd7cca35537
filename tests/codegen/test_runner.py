"""Where a target's code runs: native, emulated, or not here, with the reason (runner.py)."""

from __future__ import annotations

from pathlib import Path

import attrs
import numpy as np
import pytest

from morello import MemoryLevel, Target
from morello.codegen import runner
from morello.codegen.bench import require_native
from morello.codegen.compile import compile_shared
from morello.errors import CompileError, MorelloError
from morello.plugins import Plugins
from morello.target import Compiler, Platform

_LEVELS = (MemoryLevel(name="GL", capacity=1 << 20), MemoryLevel(name="RF", capacity=4))

AXPY = """\
void axpy(const float *x, const float *y, float *out) {
    for (int i = 0; i < 8; i++) out[i] = 2.0f * x[i] + y[i];
}
"""


def _target(**platform: object) -> Target:
    return Target(name="t", levels=_LEVELS, platform=Platform(**platform))  # type: ignore[arg-type]


def test_runner_same_arch_is_native() -> None:
    assert runner.how_to_run(_target(arch=runner.host_arch())).mode == "native"


def test_runner_lacking_feature_is_named() -> None:
    how = runner.how_to_run(_target(arch=runner.host_arch()), ["no_such_feature_x"])
    assert how.mode is None
    assert how.reason == "this CPU lacks no_such_feature_x"


def test_runner_feature_field_is_the_targets() -> None:
    # Features are read from the field the target names; a field /proc/cpuinfo does not have
    # means nothing can be said, so nothing is refused.
    how = runner.how_to_run(_target(arch=runner.host_arch(), features_field="Nope"), ["x"])
    assert how.mode == "native"


def test_runner_other_arch_without_emulator_cannot_run() -> None:
    how = runner.how_to_run(_target(arch="riscv64"))
    assert how.mode is None
    assert how.reason == f"target t runs on riscv64, this machine is {runner.host_arch()}"


def test_runner_missing_emulator_names_its_package() -> None:
    target = _target(arch="riscv64", emulator=("qemu-nothing-here",), emulator_package="pkg-x")
    how = runner.how_to_run(target)
    assert how.mode is None
    assert "emulator 'qemu-nothing-here' was not found (install pkg-x)" in how.reason


def test_runner_missing_compiler_names_its_package(tmp_path: Path) -> None:
    target = Target(
        name="t", levels=_LEVELS, compiler=Compiler(cc="no-such-cc-q", package="pkg-cc")
    )
    want = "C compiler 'no-such-cc-q' of target t was not found on PATH (install pkg-cc)"
    assert runner.cannot_run(target) == want
    with pytest.raises(CompileError, match=r"\(install pkg-cc\)"):
        compile_shared(AXPY, target, tmp_path)


def test_runner_native_call_writes_output(tmp_path: Path) -> None:
    target = Target(name="t", levels=_LEVELS, platform=Platform(arch=runner.host_arch()))
    lib = compile_shared(AXPY, target, tmp_path)
    x, y = np.arange(8, dtype=np.float32), np.ones(8, dtype=np.float32)
    out = np.zeros(8, dtype=np.float32)
    runner.call(lib, "axpy", [x, y, out], target)
    assert out.tolist() == (2 * x + y).tolist()


def _neoverse() -> Target:
    return Plugins().target("neoverse_n1")


def _emulated_or_skip() -> Target:
    target = _neoverse()
    if runner.host_arch() == target.platform.arch:
        pytest.skip("this machine is AArch64: neoverse_n1 code runs natively here")
    why = runner.cannot_run(target)
    if why:
        pytest.skip(why)
    return target


def test_runner_emulated_call_round_trips_buffers(tmp_path: Path) -> None:
    target = _emulated_or_skip()
    assert runner.how_to_run(target).mode == "emulated"
    lib = compile_shared(AXPY, target, tmp_path)
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    y = np.full(8, 0.5, dtype=np.float32)
    out = np.full(8, np.nan, dtype=np.float32)
    runner.call(lib, "axpy", [x, y, out], target)
    assert out.tolist() == (2 * x + y).tolist()


def test_runner_emulated_unknown_function_is_an_error(tmp_path: Path) -> None:
    target = _emulated_or_skip()
    lib = compile_shared(AXPY, target, tmp_path)
    buf = np.zeros(8, dtype=np.float32)
    with pytest.raises(MorelloError, match=r"nope failed under qemu-aarch64 \(exit 3\)"):
        runner.call(lib, "nope", [buf, buf, buf], target)


def test_bench_refuses_a_target_of_another_architecture() -> None:
    target = _neoverse()
    if runner.host_arch() == target.platform.arch:
        target = attrs.evolve(target, platform=attrs.evolve(target.platform, arch="riscv64"))
    with pytest.raises(MorelloError, match="no speed is claimed under emulation"):
        require_native(target)
