"""The generated library called from C and C++ programs, the way an inference engine uses it.

``examples/gemma_matvec.lark`` is synthesized through the command line into a .c and .h pair;
``tests/c/gemma_matvec_caller.c`` includes the header, links the C and checks every output
against its own double-precision reference, alone and from two threads at once;
``tests/c/gemma_matvec_caller.cpp`` does the same from C++. The object must define only the
function: no ``main``, no global or static data.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from morello.context import SynthesisContext

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gemma_matvec.lark"
CALLERS = ROOT / "tests" / "c"

pytestmark = [pytest.mark.target("zen1"), pytest.mark.runs_code]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gemma") / "gemma_matvec.c"
    subprocess.run(
        [sys.executable, "-m", "morello", "--target", "zen1", str(EXAMPLE), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.with_suffix(".h").exists()
    return out


def _compile_object(generated: Path, ctx: SynthesisContext) -> Path:
    obj = generated.with_suffix(".o")
    cc = ctx.target.compiler
    subprocess.run(
        [cc.cc, *cc.flags, "-std=c11", "-Wall", "-Werror", "-c", str(generated), "-o", str(obj)],
        check=True,
    )
    return obj


def test_object_defines_only_the_function(generated: Path, ctx: SynthesisContext) -> None:
    obj = _compile_object(generated, ctx)
    if shutil.which("nm") is None:
        pytest.skip("nm is not installed")
    out = subprocess.run(["nm", str(obj)], check=True, capture_output=True, text=True).stdout
    defined = [line.split() for line in out.splitlines() if len(line.split()) == 3]
    assert [(kind, name) for _, kind, name in defined] == [("T", "gemma_matvec")]


def test_c_caller_checks_every_output(generated: Path, ctx: SynthesisContext) -> None:
    obj = _compile_object(generated, ctx)
    exe = generated.parent / "caller_c"
    cc = ctx.target.compiler.cc
    subprocess.run(
        [cc, "-O2", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{generated.parent}",
         str(CALLERS / "gemma_matvec_caller.c"), str(obj), "-o", str(exe), "-lm", "-pthread"],
        check=True,
    )  # fmt: skip
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "match the reference, alone and from 2 threads" in run.stdout


def test_cplusplus_caller(generated: Path, ctx: SynthesisContext) -> None:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    obj = _compile_object(generated, ctx)
    exe = generated.parent / "caller_cpp"
    subprocess.run(
        [cxx, "-O2", "-std=c++17", "-Wall", "-Wextra", "-Werror", f"-I{generated.parent}",
         str(CALLERS / "gemma_matvec_caller.cpp"), str(obj), "-o", str(exe)],
        check=True,
    )  # fmt: skip
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
