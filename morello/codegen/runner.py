"""Whether and how this machine runs a target's code: natively through ctypes, or emulated.

The target says where its code runs (``Target.platform``: architecture, the /proc/cpuinfo field
listing CPU features, an emulator); this module compares that with the machine it is on and
calls compiled functions accordingly. Native: the shared library is loaded into this process
and the function called on the buffers in place. Emulated: a small driver executable for the
target (compiled once per target and process) loads the library, reads each buffer from a
file, calls the function and writes the output buffer back, run under the emulator. Knows no
target or architecture by name.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import platform
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import attrs
import numpy as np

from morello.errors import CompileError, MorelloError
from morello.target import Target

#: Most pointer arguments a generated function may take under emulation (the driver's
#: dispatch covers each arity up to this).
MAX_ARITY = 16


@attrs.frozen
class HowToRun:
    """How this machine runs a target's code: ``native``, ``emulated``, or not at all
    (``mode`` None, ``reason`` says why)."""

    mode: Literal["native", "emulated"] | None
    reason: str = ""

    @property
    def can_run(self) -> bool:
        """Whether the code can run here at all."""
        return self.mode is not None


def host_arch() -> str:
    """This machine's architecture, as ``platform.machine()`` names it (``x86_64``)."""
    return platform.machine()


@functools.cache
def host_features(field: str) -> frozenset[str] | None:
    """The CPU features /proc/cpuinfo lists in ``field`` (``flags``, ``Features``); None when
    the file or the field cannot be read."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == field:
            return frozenset(value.split())
    return None


def native_arch(target: Target) -> bool:
    """Whether this machine has the architecture ``target``'s code runs on natively (its
    features aside); otherwise the code runs emulated, if at all."""
    return host_arch() == target.platform.arch


def how_to_run(target: Target, features: Sequence[str] = ()) -> HowToRun:
    """Whether this machine can run code for ``target`` that needs CPU ``features``, and how.

    Features are checked only for native runs; an emulator provides the emulated CPU's.
    """
    plat = target.platform
    if native_arch(target):
        have = host_features(plat.features_field)
        lacking = [f for f in features if have is not None and f not in have]
        if lacking:
            return HowToRun(None, f"this CPU lacks {', '.join(lacking)}")
        return HowToRun("native")
    if not plat.emulator:
        return HowToRun(
            None, f"target {target.name} runs on {plat.arch}, this machine is {host_arch()}"
        )
    if shutil.which(plat.emulator[0]) is None:
        hint = f" (install {plat.emulator_package})" if plat.emulator_package else ""
        return HowToRun(
            None,
            f"target {target.name} runs on {plat.arch} and its emulator "
            f"{plat.emulator[0]!r} was not found{hint}",
        )
    return HowToRun("emulated", f"under {plat.emulator[0]}")


def compiler_missing(target: Target) -> str | None:
    """Why the target's C compiler cannot be used here (None when it is on PATH)."""
    cc = target.compiler.cc
    if shutil.which(cc) is not None:
        return None
    hint = f" (install {target.compiler.package})" if target.compiler.package else ""
    return f"C compiler {cc!r} of target {target.name} was not found on PATH{hint}"


def cannot_run(target: Target, features: Sequence[str] = ()) -> str | None:
    """Why code for ``target`` needing ``features`` cannot be compiled and run here, or None."""
    how = how_to_run(target, features)
    if not how.can_run:
        return how.reason
    return compiler_missing(target)


def call(lib: Path, name: str, buffers: Sequence[np.ndarray], target: Target) -> None:
    """Call function ``name`` of compiled library ``lib`` with pointers to ``buffers``.

    The last buffer is the output; it is updated in place (natively the function writes it;
    emulated, it is read back from the driver's file). Every buffer must be C-contiguous.

    Raises:
        MorelloError: the code cannot run here, or the emulated run failed.
    """
    how = how_to_run(target)
    if how.mode == "native":
        fn = getattr(ctypes.CDLL(str(lib)), name)
        fn.restype = None
        fn(*(b.ctypes.data_as(ctypes.c_void_p) for b in buffers))
        return
    if how.mode is None:
        raise MorelloError(f"cannot run code for target {target.name} here: {how.reason}")
    _call_emulated(lib, name, buffers, target)


def _call_emulated(lib: Path, name: str, buffers: Sequence[np.ndarray], target: Target) -> None:
    if len(buffers) > MAX_ARITY:
        raise MorelloError(f"{name} takes {len(buffers)} buffers; emulation handles {MAX_ARITY}")
    driver = emulation_driver(target)
    with tempfile.TemporaryDirectory(prefix="morello-emu-") as tmp:
        args: list[str] = []
        for i, buf in enumerate(buffers):
            path = Path(tmp) / f"arg{i}.bin"
            np.ascontiguousarray(buf).tofile(path)
            args += [str(path), str(buf.nbytes)]
        cmd = [*target.platform.emulator, str(driver), str(Path(lib).resolve()), name, *args]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise MorelloError(
                f"{name} failed under {target.platform.emulator[0]} "
                f"(exit {proc.returncode}): {(proc.stderr or proc.stdout).strip()[-400:]}"
            )
        out = buffers[-1]
        out.view(np.uint8)[:] = np.fromfile(Path(tmp) / f"arg{len(buffers) - 1}.bin", np.uint8)


def _driver_source() -> str:
    cases = []
    for n in range(1, MAX_ARITY + 1):
        params = ", ".join(["void *"] * n)
        args = ", ".join(f"buf[{i}]" for i in range(n))
        cases.append(f"    case {n}: ((void (*)({params}))fn)({args}); break;")
    dispatch = "\n".join(cases)
    return f"""\
/* Runs one function of a shared library on buffers read from files (morello emulation).
   usage: driver LIB FUNCTION FILE BYTES [FILE BYTES]...; the last file is written back. */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {{
    if (argc < 5 || (argc - 3) % 2 != 0) {{
        fprintf(stderr, "usage: %s LIB FUNCTION FILE BYTES...\\n", argv[0]);
        return 2;
    }}
    void *lib = dlopen(argv[1], RTLD_NOW);
    if (!lib) {{ fprintf(stderr, "%s\\n", dlerror()); return 3; }}
    void *fn = dlsym(lib, argv[2]);
    if (!fn) {{ fprintf(stderr, "%s\\n", dlerror()); return 3; }}
    int n = (argc - 3) / 2;
    if (n > {MAX_ARITY}) {{ fprintf(stderr, "too many buffers\\n"); return 2; }}
    void *buf[{MAX_ARITY}];
    size_t size[{MAX_ARITY}];
    for (int i = 0; i < n; i++) {{
        size[i] = (size_t)strtoull(argv[4 + 2 * i], NULL, 10);
        size_t bytes = (size[i] + 63) / 64 * 64;
        buf[i] = aligned_alloc(64, bytes ? bytes : 64);
        FILE *f = fopen(argv[3 + 2 * i], "rb");
        if (!buf[i] || !f || fread(buf[i], 1, size[i], f) != size[i]) {{
            fprintf(stderr, "cannot read %s\\n", argv[3 + 2 * i]);
            return 4;
        }}
        fclose(f);
    }}
    switch (n) {{
{dispatch}
    }}
    FILE *out = fopen(argv[3 + 2 * (n - 1)], "wb");
    if (!out || fwrite(buf[n - 1], 1, size[n - 1], out) != size[n - 1]) {{
        fprintf(stderr, "cannot write %s\\n", argv[3 + 2 * (n - 1)]);
        return 4;
    }}
    fclose(out);
    return 0;
}}
"""


@functools.cache
def emulation_driver(target: Target) -> Path:
    """The driver executable for ``target``, compiled once per process with its compiler."""
    missing = compiler_missing(target)
    if missing:
        raise CompileError(missing)
    folder = Path(tempfile.mkdtemp(prefix=f"morello-driver-{target.name}-"))
    atexit.register(shutil.rmtree, folder, True)  # kept for the process, removed at its exit
    src = folder / "driver.c"
    exe = folder / "driver"
    src.write_text(_driver_source(), encoding="utf-8")
    cmd = [target.compiler.cc, "-O1", "-std=c11", "-o", str(exe), str(src), "-ldl"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise CompileError(f"cannot build the emulation driver: {proc.stderr.strip()[-400:]}")
    return exe
