"""Runs the target's C compiler; a failure becomes a CompileError naming the kept log."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from morello.codegen.runner import compiler_missing
from morello.errors import CompileError
from morello.target import Target

#: Set (to anything) to keep the scratch folders of ``--check``, ``bench`` and ``fidelity``.
KEEP_FILES_ENV = "MORELLO_KEEP_FILES"


@contextlib.contextmanager
def scratch_folder(prefix: str, given: Path | None = None) -> Iterator[Path]:
    """A folder for one command's sources, libraries and data files: ``given`` if not None
    (the caller's, made if missing and never removed), else a new one in the system's
    temporary directory, removed when the block ends normally. It is kept when the block
    raises (a compile error names the files in it) or when ``MORELLO_KEEP_FILES`` is set in
    the environment."""
    if given is not None:
        Path(given).mkdir(parents=True, exist_ok=True)
        yield Path(given)
        return
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    yield folder  # an exception propagates from here and the folder stays
    if not os.environ.get(KEEP_FILES_ENV):
        shutil.rmtree(folder, ignore_errors=True)


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
