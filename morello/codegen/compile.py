"""Runs the target's C compiler; a failure becomes a CompileError naming the kept log."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from morello.errors import CompileError
from morello.target import Target


def compile_shared(
    c_text: str, target: Target, workdir: Path | None = None, name: str = "morello_unit"
) -> Path:
    """Compile ``c_text`` into a shared library with the target's compiler and flags.

    Returns the library path. On failure the source and the compiler log stay in the build
    folder, which the error names.
    """
    cc = target.compiler.cc
    if shutil.which(cc) is None:
        raise CompileError(f"C compiler {cc!r} of target {target.name} was not found on PATH")
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="morello-"))
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name}.c"
    lib = folder / f"lib{name}.so"
    log = folder / f"{name}.log"
    src.write_text(c_text, encoding="utf-8")
    cmd = [
        cc,
        *target.compiler.flags,
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
