"""The AVX2 exp kernel (rules/kernels/x86_avx2_exp.rules, vexp_f32x8) against float64 exp.

The kernel's C template is read with the rule-file parser, rendered into a loop over an array
and compiled into a shared library (gcc -O2 -mavx2 -mfma); NumPy computes the reference in
double precision. Checked: relative error at most REL_BOUND (also stated in the rule file)
on a dense sample of [-104, 89], around the reduction and overflow/underflow boundaries and on
random bit patterns, wherever the true result is a normal float; overflow to +inf; underflow
to 0 or a subnormal; NaN in, NaN out; exp(0) == 1; and a template rendered with src and dst
the same variable gives the same results. The exhaustive sweep over all 2^32 inputs is
benchmarks/exp_accuracy.py.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from morello.lang.rule_file import parse_rule_file
from morello.rules.kernels import Kernel

RULES = Path(__file__).resolve().parents[2] / "rules" / "kernels" / "x86_avx2_exp.rules"
KERNEL = "vexp_f32x8"
#: Largest relative error allowed where the true result is a normal float. The exhaustive
#: sweep measured 7.63e-8 (0.89 ulp); the rule file states this bound as "REL_BOUND = 1.0e-7".
REL_BOUND_TEXT = "1.0e-7"
REL_BOUND = float(REL_BOUND_TEXT)
FLT_MIN = float(np.finfo(np.float32).tiny)
LN2 = float(np.log(2.0))


def _kernel() -> Kernel:
    (kernel,) = [k for k in parse_rule_file(RULES).kernels if k.name == KERNEL]
    return kernel


pytestmark = pytest.mark.runs_code(*_kernel().requires)


def _loop(name: str, body: list[str]) -> str:
    lines = "\n".join(f"        {line}" for line in body)
    return (
        f"void {name}(const float *in, float *out, size_t n) {{\n"
        "    for (size_t i = 0; i + 8 <= n; i += 8) {\n"
        "        __m256 x = _mm256_loadu_ps(in + i);\n"
        "        __m256 y;\n"
        f"{lines}\n"
        "        _mm256_storeu_ps(out + i, y);\n"
        "    }\n"
        "}\n"
    )


class VExp:
    """The compiled kernel: ``vexp(x)`` (src and dst distinct) and ``vexp_inplace(x)``."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib

    def _call(self, fn: str, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float32).ravel()
        n = len(x)
        padded = np.zeros((n + 7) // 8 * 8, dtype=np.float32)
        padded[:n] = x
        out = np.empty_like(padded)
        ptr = ctypes.POINTER(ctypes.c_float)
        getattr(self._lib, fn)(
            padded.ctypes.data_as(ptr), out.ctypes.data_as(ptr), ctypes.c_size_t(len(padded))
        )
        return out[:n]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self._call("vexp", x)

    def inplace(self, x: np.ndarray) -> np.ndarray:
        return self._call("vexp_inplace", x)


@pytest.fixture(scope="module")
def vexp(tmp_path_factory: pytest.TempPathFactory) -> VExp:
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found on PATH")
    kernel = _kernel()
    folder = tmp_path_factory.mktemp("vexp")
    src = folder / "vexp.c"
    src.write_text(
        "".join(f"#include {h}\n" for h in kernel.includes)
        + "#include <stddef.h>\n"
        + _loop("vexp", kernel.render({"src": ("x", "&x"), "dst": ("y", "&y")}))
        + _loop(
            "vexp_inplace", [*kernel.render({"src": ("x", "&x"), "dst": ("x", "&x")}), "y = x;"]
        )
    )
    lib = folder / "libvexp.so"
    cmd = ["gcc", "-O2", "-mavx2", "-mfma", "-shared", "-fPIC", "-o", str(lib), str(src)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stderr}"
    return VExp(ctypes.CDLL(str(lib)))


def _around(centres: np.ndarray, ulps: int) -> np.ndarray:
    """All floats within ``ulps`` steps of each (float32) centre."""
    bits = np.asarray(centres, dtype=np.float32).view(np.int32).astype(np.int64)
    steps = np.arange(-ulps, ulps + 1)
    near = (bits[:, None] + steps[None, :]).ravel()
    return near.astype(np.int32).view(np.float32)


def _sample() -> np.ndarray:
    rng = np.random.default_rng(20240607)
    dense = np.linspace(-104.0, 89.0, 3_000_000).astype(np.float32)
    # Where the reduction switches n (|r| largest), and the overflow / underflow edges.
    halfway = (np.arange(-151, 129) + 0.5) * LN2
    edges = np.array([np.log(np.finfo(np.float32).max), np.log(FLT_MIN), -103.972, 0.0])
    random_bits = rng.integers(0, 2**32, size=1_000_000, dtype=np.uint64).astype(np.uint32)
    small = rng.uniform(-1.0, 1.0, size=200_000) * 2.0 ** rng.integers(-40, 0, size=200_000)
    return np.concatenate(
        [
            dense,
            _around(halfway, 64),
            _around(edges, 4096),
            random_bits.view(np.float32),
            small.astype(np.float32),
        ]
    )


def test_rule_file_states_the_bound() -> None:
    assert f"REL_BOUND = {REL_BOUND_TEXT}" in RULES.read_text(encoding="utf-8")


def test_check_tolerance_covers_the_bound() -> None:
    # --check allows FUNC_ROUNDINGS["exp"] unit roundoffs of its own for each exp.
    from morello.rules.index_notation import FUNC_ROUNDINGS

    assert FUNC_ROUNDINGS["exp"] * 2.0**-24 >= REL_BOUND


def test_accuracy(vexp: VExp) -> None:
    x = _sample()
    x = x[~np.isnan(x)]
    y = vexp(x).astype(np.float64)
    with np.errstate(over="ignore"):
        e = np.exp(x.astype(np.float64))
        ef = e.astype(np.float32)
    normal = (e >= FLT_MIN) & np.isfinite(ef)
    assert normal.sum() > 3_000_000
    rel = np.abs(y[normal] - e[normal]) / e[normal]
    worst = int(np.argmax(rel))
    assert rel[worst] <= REL_BOUND, (
        f"relative error {rel[worst]:.3g} at x = {x[normal][worst]!r} "
        f"(kernel {y[normal][worst]!r}, exp {e[normal][worst]!r})"
    )
    overflow = np.isinf(ef)
    assert np.all(y[overflow] == np.inf), x[overflow][y[overflow] != np.inf][:10]
    tiny = e < FLT_MIN
    bad = ~((y[tiny] >= 0.0) & (y[tiny] <= 2 * FLT_MIN))
    assert not bad.any(), x[tiny][bad][:10]


def test_overflow(vexp: VExp) -> None:
    # 88.72283: the largest float whose exp is finite (the float nearest ln(FLT_MAX) is above).
    largest = np.array([0x42B17217], dtype=np.uint32).view(np.float32)[0]
    assert np.exp(np.float64(largest)) < np.finfo(np.float32).max
    x = np.array([88.8, 89.0, 100.0, 1e30, np.finfo(np.float32).max, np.inf], dtype=np.float32)
    assert np.all(vexp(x) == np.inf)
    y = vexp(np.array([largest], dtype=np.float32))[0]
    assert np.isfinite(y) and abs(y / np.exp(np.float64(largest)) - 1) <= REL_BOUND
    above = np.nextafter(largest, np.float32(np.inf))  # exp rounds to +inf from here on
    assert vexp(np.array([above], dtype=np.float32))[0] == np.inf


def test_underflow(vexp: VExp) -> None:
    x = np.array([-104.0, -110.0, -1000.0, -1e30, -np.finfo(np.float32).max, -np.inf])
    y = vexp(x.astype(np.float32))
    assert np.all(y == 0.0), y
    assert not np.signbit(y).any()
    # Gradual underflow: subnormal results, never above twice the smallest normal.
    x = np.linspace(-103.9, -87.3, 100_000).astype(np.float32)
    y = vexp(x)
    assert np.all((y >= 0.0) & (y <= 2 * FLT_MIN))
    assert np.all(np.diff(y) >= 0.0)


def test_nan(vexp: VExp) -> None:
    patterns = np.array(
        [0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFFFFFFF, 0x7F800001, 0xFF800001, 0x7FBFFFFF],
        dtype=np.uint32,
    )
    y = vexp(patterns.view(np.float32))
    assert np.all(np.isnan(y)), y


def test_exact_values(vexp: VExp) -> None:
    y = vexp(np.array([0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30], dtype=np.float32))
    assert np.all(y == 1.0), y


def test_src_and_dst_may_be_one_variable(vexp: VExp) -> None:
    x = np.linspace(-120.0, 100.0, 100_003).astype(np.float32)
    np.testing.assert_array_equal(vexp.inplace(x), vexp(x))
