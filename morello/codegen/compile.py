"""Runs the target's C compiler; a failure becomes a CompileError naming the kept log."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from morello.codegen.runner import compiler_missing
from morello.errors import CompileError
from morello.target import Target


def needs_openmp(c_text: str) -> bool:
    """Whether ``c_text`` holds a parallel loop, which the compiler must be told to honour
    (it would otherwise ignore the pragma and run the loop on one thread)."""
    return "#pragma omp" in c_text


def compile_shared(
    c_text: str, target: Target, workdir: Path | None = None, name: str = "morello_unit"
) -> Path:
    """Compile ``c_text`` into a shared library with the target's compiler and flags (and its
    OpenMP flags when the C has a parallel loop).

    Returns the library path. On failure the source and the compiler log stay in the build
    folder, which the error names.
    """
    missing = compiler_missing(target)
    if missing:
        raise CompileError(missing)
    cc = target.compiler.cc
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="morello-"))
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name}.c"
    lib = folder / f"lib{name}.so"
    log = folder / f"{name}.log"
    src.write_text(c_text, encoding="utf-8")
    openmp = target.compiler.openmp_flags if needs_openmp(c_text) else ()
    cmd = [
        cc,
        *target.compiler.flags,
        *openmp,
        "-std=c11",
        "-shared",
        "-fPIC",
        "-o",
        str(lib),
        str(src),
        "-lm",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    log.write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr, encoding="utf-8")
    if proc.returncode != 0:
        raise CompileError(f"the C compiler rejected generated code; see {log}")
    return lib
