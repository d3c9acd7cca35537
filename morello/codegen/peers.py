"""The peers of a benchmark: BLAS libraries called from a C loop, timed like generated code.

For a Spec that a BLAS routine computes (see ``blas.py``), each library the target names as a
peer (``Target.peers``) runs in a child process whose environment holds the target's
settings for it (threads, instruction sets), since most such settings are read when the
library loads. The child finds the library (``openblas``: the copy NumPy ships; ``mkl``:
Intel MKL's single dynamic library, installed by the ``mkl`` wheel), calls each routine
once and checks its output against the NumPy reference, replies, and then times batches of
it on request, with the same C loop, batching and 64-byte-aligned buffers as the generated
function (``timing.py``; ``PeerChild`` is the protocol): ``bench`` takes one batch of the
generated function and one of every peer routine in each round, so that the machine's
changes of speed during the run fall on all of them alike. Each peer keeps the faster of
its routines (gemm, or gemv where an output extent is 1; dot for two vectors) and says which
one ran and what the library reports of itself (OpenBLAS's kernel family and threads, MKL's
instruction set and threads from its verbose log).

Inputs are the bytes the generated code reads where the layout is a strided matrix, and a
row-major copy of the same values otherwise (packed layouts). A dtype with a BLAS routine of
its own is run natively (f32, f64, bf16 products into f32); a narrower float dtype is also
run through the f32 routines on the same values, as a peer named ``<library>_f32``.

Knows no target; the libraries it can load are the ``BLAS_PEER_LIBRARIES`` of ``target.py``
(the target's other peers are array peers, ``array_peers.py``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import glob
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs
import numpy as np

from morello.codegen.blas import (
    NO_TRANS,
    ROW_MAJOR,
    TRANS,
    BlasCall,
    DotCall,
    GemmCall,
    Operand,
    blas_calls,
    blas_layout,
)
from morello.codegen.compile import compile_shared, scratch_folder
from morello.codegen.harness import aligned_empty, buffer_offsets, compare, to_buffer
from morello.codegen.timing import PRELUDE, Timing, measure_interleaved, timed_loop
from morello.context import SynthesisContext
from morello.dtypes import dtype
from morello.errors import CheckFailed
from morello.lang.spec_file import Program
from morello.rules.index_notation import OpDef
from morello.spec import TensorSpec
from morello.target import BLAS_PEER_LIBRARIES, Peer

#: Per routine and element type: the C type of alpha and beta, and the routine's CBLAS name
#: (the bf16 product has a name per library). A library's symbols may add a prefix and a
#: suffix (NumPy's OpenBLAS: ``scipy_cblas_sgemm64_``, with 64-bit ints).
_ROUTINES: dict[tuple[str, str], tuple[str, str | dict[str, str]]] = {
    ("gemm", "f32"): ("float", "cblas_sgemm"),
    ("gemm", "f64"): ("double", "cblas_dgemm"),
    ("gemm", "bf16"): ("float", {"openblas": "cblas_sbgemm", "mkl": "cblas_gemm_bf16bf16f32"}),
    ("gemv", "f32"): ("float", "cblas_sgemv"),
    ("gemv", "f64"): ("double", "cblas_dgemv"),
    ("dot", "f32"): ("float", "cblas_sdot"),
    ("dot", "f64"): ("double", "cblas_ddot"),
}
#: The output element type of the routines over each input element type.
_OUTPUT = {"f32": "f32", "f64": "f64", "bf16": "f32"}


@attrs.frozen
class PeerTiming:
    """One peer's figure: the faster routine that ran, and what the library says of itself.

    ``dtype`` is the element type of the inputs it read (the Spec's, or f32 for a widened
    peer); ``copied`` whether it read a row-major copy of a packed operand.
    """

    name: str
    library: str
    dtype: str
    routine: str
    timing: Timing
    tried: Mapping[str, float]
    detail: Mapping[str, str]
    copied: bool


@attrs.frozen
class PeerMissing:
    """A peer that could not be timed, and why (not installed, no such routine, ...)."""

    name: str
    reason: str


@attrs.frozen(eq=False)
class ReadyPeer:
    """A peer whose routines ran and passed their check, ready to be timed.

    ``batches`` holds, per routine of ``routines``, ``batch(iters)``: seconds per call over
    ``iters`` calls, run in the peer's child process, so that the caller can time them
    interleaved with its own code (``timing.measure_interleaved``). ``timed`` makes the
    PeerTiming from their timings once the child is closed.
    """

    name: str
    library: str
    dtype: str
    routines: tuple[str, ...]
    batches: tuple[Callable[[int], float], ...]
    detail: Mapping[str, str]
    copied: bool
    child: PeerChild

    def timed(self, timings: Sequence[Timing]) -> PeerTiming:
        """The PeerTiming of the faster routine, given each routine's timing in order."""
        best = min(range(len(timings)), key=lambda i: timings[i].median)
        return PeerTiming(
            name=self.name,
            library=self.library,
            dtype=self.dtype,
            routine=self.routines[best],
            timing=timings[best],
            tried={r: t.median for r, t in zip(self.routines, timings, strict=True)},
            detail={**self.detail, **self.child.final},
            copied=self.copied,
        )


def time_ready(
    ready: Sequence[ReadyPeer | PeerMissing], repeats: int, min_batch_s: float
) -> list[PeerTiming | PeerMissing]:
    """Time the ready peers of ``ready``, their batches interleaved, and close their
    children; the missing ones are passed through."""
    peers = [p for p in ready if isinstance(p, ReadyPeer)]
    timings = measure_interleaved([b for p in peers for b in p.batches], repeats, min_batch_s)
    for child in {id(p.child): p.child for p in peers}.values():
        child.close()
    return timed_peers(ready, timings)


def timed_peers(
    ready: Sequence[ReadyPeer | PeerMissing], timings: Sequence[Timing]
) -> list[PeerTiming | PeerMissing]:
    """``ready`` with each ReadyPeer replaced by its PeerTiming, given the timings of their
    batches in order (after their children are closed)."""
    out: list[PeerTiming | PeerMissing] = []
    at = 0
    for p in ready:
        if isinstance(p, ReadyPeer):
            out.append(p.timed(timings[at : at + len(p.batches)]))
            at += len(p.batches)
        else:
            out.append(p)
    return out


# ---- the C harness ------------------------------------------------------------------------


def harness_source() -> str:
    """C source of a ``time_<routine>_<dtype>_<int>`` function per routine and int width.

    Each takes the routine's address and its arguments and calls it ``iters`` times in the
    loop of ``timing.timed_loop``; ints are 32-bit (LP64 interfaces) or 64-bit (ILP64).
    """
    parts = [PRELUDE, "#include <stdint.h>\n"]
    for (routine, dt), (scalar, _) in _ROUTINES.items():
        for bits in (32, 64):
            it = f"int{bits}_t"
            returns = "void"
            if routine == "gemm":
                sig = (
                    f"int, int, int, {it}, {it}, {it}, {scalar}, const void *, {it}, "
                    f"const void *, {it}, {scalar}, void *, {it}"
                )
                params = [
                    "void (*fn)(void)", "int ta", "int tb", "int64_t m", "int64_t n",
                    "int64_t k", "const void *a", "int64_t lda", "const void *b",
                    "int64_t ldb", "void *c", "int64_t ldc",
                ]  # fmt: skip
                call = (
                    f"f({ROW_MAJOR}, ta, tb, ({it})m, ({it})n, ({it})k, 1, a, ({it})lda, "
                    f"b, ({it})ldb, 0, c, ({it})ldc);"
                )
            elif routine == "dot":
                # The dot product returns its scalar; the loop stores it as the output.
                sig = f"{it}, const void *, {it}, const void *, {it}"
                params = [
                    "void (*fn)(void)", "int64_t n", "const void *x", "int64_t incx",
                    "const void *y", "int64_t incy", "void *out",
                ]  # fmt: skip
                call = f"*({scalar} *)out = f(({it})n, x, ({it})incx, y, ({it})incy);"
                returns = scalar
            else:
                sig = (
                    f"int, int, {it}, {it}, {scalar}, const void *, {it}, const void *, "
                    f"{it}, {scalar}, void *, {it}"
                )
                params = [
                    "void (*fn)(void)", "int ta", "int64_t rows", "int64_t cols",
                    "const void *a", "int64_t lda", "const void *x", "int64_t incx",
                    "void *y", "int64_t incy",
                ]  # fmt: skip
                call = (
                    f"f({ROW_MAJOR}, ta, ({it})rows, ({it})cols, 1, a, ({it})lda, x, "
                    f"({it})incx, 0, y, ({it})incy);"
                )
            name = f"time_{routine}_{dt}_i{bits}"
            parts.append(f"typedef {returns} (*{name}_fn)({sig});\n")
            parts.append(timed_loop(name, params, [f"{name}_fn f = ({name}_fn)fn;", call]))
    return "\n".join(parts)


# ---- the parent: requests and results -----------------------------------------------------


def time_peers(
    program: Program,
    ctx: SynthesisContext,
    inputs: Mapping[str, np.ndarray],
    want: np.ndarray,
    allowed: np.ndarray,
    repeats: int,
    min_batch_s: float,
    workdir: Path | None = None,
) -> list[PeerTiming | PeerMissing]:
    """Time every BLAS peer the target names on ``program``'s Spec, their routines
    interleaved; see ``open_peers`` and the module docstring.

    Raises:
        CheckFailed: a peer's output is wrong (a bug in the call, not in the library).
    """
    with open_peers(program, ctx, inputs, want, allowed, workdir) as ready:
        return time_ready(ready, repeats, min_batch_s)


@contextlib.contextmanager
def open_peers(
    program: Program,
    ctx: SynthesisContext,
    inputs: Mapping[str, np.ndarray],
    want: np.ndarray,
    allowed: np.ndarray,
    workdir: Path | None = None,
) -> Iterator[list[ReadyPeer | PeerMissing]]:
    """Every BLAS peer the target names on ``program``'s Spec, checked and ready to time
    (its child process runs until the context ends); see the module docstring.

    ``inputs`` are the logical input arrays by parameter name; ``want`` and ``allowed`` the
    reference output and its per-element tolerance, against which each routine is checked
    before it may be timed. Yields nothing for a Spec no BLAS routine computes.

    Raises:
        CheckFailed: a peer's output is wrong (a bug in the call, not in the library).
    """
    spec = program.spec
    opdef = ctx.ruleset.ops[spec.op]
    calls = blas_calls(opdef, spec) if isinstance(opdef, OpDef) else []  # a graph: none
    if not calls:
        yield []
        return
    with scratch_folder("morello-peers-", workdir) as folder, contextlib.ExitStack() as stack:
        harness = compile_shared(harness_source(), ctx.target, folder, name="peers")
        logical = [inputs[n] for n in program.operand_params[:-1]]
        np.save(folder / "want.npy", want)
        np.save(folder / "allowed.npy", allowed)
        jobs = _jobs(ctx, spec.operands, logical, calls, folder)
        # An element type BLAS has no routine for is missing whether or not a library is
        # installed: say so without asking one.
        out_dt = spec.output.dtype.name
        asked = [j for j in jobs if j["calls"]]
        results: list[ReadyPeer | PeerMissing] = []
        for peer in ctx.target.peers:
            if peer.library not in BLAS_PEER_LIBRARIES:
                continue  # an array peer (array_peers.py)
            replies = iter(_ask_blas(peer, harness, asked, folder, stack) if asked else [])
            results.extend(
                next(replies)
                if j["calls"]
                else PeerMissing(
                    _peer_name(peer, j), f"BLAS has no {j['dtype']} product into {out_dt}"
                )
                for j in jobs
            )
        yield results


def _ask_blas(
    peer: Peer,
    harness: Path,
    jobs: Sequence[dict[str, Any]],
    folder: Path,
    stack: contextlib.ExitStack,
) -> list[ReadyPeer | PeerMissing]:
    """Each job's routines in one library (a child process that loads it, closed with
    ``stack``), checked and ready to time."""
    request = {
        "library": peer.library,
        "harness": str(harness),
        "jobs": jobs,
        "want": str(folder / "want.npy"),
        "allowed": str(folder / "allowed.npy"),
        "verbose_log": str(folder / f"{peer.library}-verbose.log"),
        "skip": dict(peer.skip),
    }
    req_path = folder / f"{peer.library}-request.json"
    req_path.write_text(json.dumps(request), encoding="utf-8")
    child = stack.enter_context(PeerChild(peer, req_path, __name__))
    reply = child.reply
    if "unavailable" in reply:
        return [PeerMissing(_peer_name(peer, j), reply["unavailable"]) for j in jobs]
    results: list[ReadyPeer | PeerMissing] = []
    for job, out in zip(jobs, reply["jobs"], strict=True):
        name = _peer_name(peer, job)
        ran = [c for c in out["calls"] if "ready" in c]
        bad = [c for c in out["calls"] if "check_failed" in c]
        if bad:
            raise CheckFailed(f"peer {name}: {bad[0]['symbol']}: {bad[0]['check_failed']}")
        if not ran:
            results.append(PeerMissing(name, "; ".join(c["skipped"] for c in out["calls"])))
            continue
        detail = dict(reply["detail"])
        for c in ran:
            detail.update(c.get("detail", {}))
        results.append(
            ReadyPeer(
                name=name,
                library=peer.library,
                dtype=job["dtype"],
                routines=tuple(c["symbol"] for c in ran),
                batches=tuple(child.batch(c["ready"]) for c in ran),
                detail=detail,
                copied=job["copied"],
                child=child,
            )
        )
    return results


def _peer_name(peer: Peer, job: Mapping[str, Any]) -> str:
    return peer.library if job["native"] else f"{peer.library}_{job['dtype']}"


def _jobs(
    ctx: SynthesisContext,
    operands: Sequence[TensorSpec],
    logical: Sequence[np.ndarray],
    calls: Sequence[BlasCall],
    folder: Path,
) -> list[dict[str, Any]]:
    """One job per element type: the Spec's own, and f32 for a narrower float input type."""
    in_dt = operands[0].dtype.name
    out_dt = operands[-1].dtype.name
    kinds = [in_dt]
    if in_dt != "f32" and operands[0].dtype.logical_dtype() == np.float32:
        kinds.append("f32")
    jobs = []
    for dt in kinds:
        fits = _OUTPUT.get(dt) == out_dt
        job_calls = [c for c in calls if (c.routine, dt) in _ROUTINES and fits]
        paths, copied = [], False
        for i, ts in enumerate(operands):
            lay = blas_layout(ts)
            copied = copied or lay != ts.layout
            store = attrs.evolve(
                ts, layout=lay, dtype=dtype(dt) if i < len(operands) - 1 else ts.dtype
            )
            path = folder / f"{dt}-{i}.npy"
            if i < len(operands) - 1:
                np.save(path, to_buffer(logical[i], store))
            else:
                np.save(path, buffer_offsets(store))
            paths.append(str(path))
        jobs.append(
            {
                "dtype": dt,
                "native": dt == in_dt,
                "copied": copied,
                "inputs": paths[:-1],
                "offsets": paths[-1],
                "out_dtype": out_dt,
                "out_count": operands[-1].volume,
                "calls": [_call_json(c, dt) for c in job_calls],
            }
        )
    return jobs


def _call_json(call: BlasCall, dt: str) -> dict[str, Any]:
    """The call as the harness takes it: after the routine's address, its C arguments in
    order, each ``["enum", v]`` (int), ``["int", v]`` (int64) or ``["buffer", i]`` (operand
    ``i`` of the Spec: an input, or the output when last)."""

    def trans(t: bool) -> list[Any]:
        return ["enum", TRANS if t else NO_TRANS]

    def n(v: int) -> list[Any]:
        return ["int", v]

    def buf(op: Operand) -> list[Any]:
        return ["buffer", op.index]

    if isinstance(call, GemmCall):
        args = [
            trans(call.trans_a), trans(call.trans_b), n(call.m), n(call.n), n(call.k),
            buf(call.a), n(call.lda), buf(call.b), n(call.ldb), buf(call.c), n(call.ldc),
        ]  # fmt: skip
    elif isinstance(call, DotCall):
        args = [n(call.n), buf(call.x), n(call.incx), buf(call.y), n(call.incy), buf(call.out)]
    else:
        args = [
            trans(call.trans), n(call.rows), n(call.cols), buf(call.a), n(call.lda),
            buf(call.x), n(call.incx), buf(call.y), n(call.incy),
        ]  # fmt: skip
    return {"routine": call.routine, "dtype": dt, "args": args}


class PeerChild:
    """A peer's child process, ``python -m module req_path`` in the peer's environment.

    It loads its library, runs and checks what the request asks, and replies with one JSON
    line (``reply``); then it times batches on request (``batch``), one JSON line each, so
    that the parent can interleave them with its own, until ``close`` (or the end of a
    ``with`` block) tells it to quit, when it may reply with more details (``final``).
    Its stderr goes to a file next to the request, quoted when it fails.
    """

    def __init__(self, peer: Peer, req_path: Path, module: str) -> None:
        self.library = peer.library
        self.req_path = req_path
        self.final: dict[str, str] = {}
        self._err_path = req_path.with_suffix(".stderr")
        self._err: IO[str] = open(self._err_path, "w", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, str(req_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env={**os.environ, **dict(peer.env)},
        )
        try:
            self.reply = self._read()
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> PeerChild:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def batch(self, key: str) -> Callable[[int], float]:
        """``batch(iters)``: seconds per call over ``iters`` calls of what the child named
        ``key`` in its reply."""

        def run(iters: int) -> float:
            self._send({"batch": key, "iters": iters})
            return float(self._read()["seconds"])

        return run

    def close(self) -> None:
        """Tell the child to quit and wait for it; keep what it says last in ``final``."""
        if self.proc.poll() is None:
            try:
                self._send({"quit": True})
                self.final = dict(self._read().get("detail", {}))
            except (OSError, RuntimeError, ValueError):
                self.proc.kill()
            self.proc.wait()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._err.close()

    def _send(self, message: Mapping[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def _read(self) -> dict[str, Any]:
        """The child's next JSON line.

        Raises:
            RuntimeError: the child ended instead (its stderr is in the message).
        """
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            self._err.flush()
            stderr = self._err_path.read_text(encoding="utf-8", errors="replace")
            raise RuntimeError(
                f"peer {self.library} failed (exit {code}); request {self.req_path}:\n" + stderr
            )
        reply: dict[str, Any] = json.loads(line)
        return reply


def serve(
    batches: Mapping[str, Callable[[int], float]],
    final: Callable[[], Mapping[str, str]] = dict,
) -> None:
    """The child's side of ``PeerChild``, after its first reply: run ``batches[key](iters)``
    for each request and reply with the seconds per call; at ``quit``, reply with
    ``final()`` and return."""
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("quit"):
            reply_line({"detail": dict(final())})
            return
        reply_line({"seconds": batches[message["batch"]](int(message["iters"]))})


def reply_line(message: Mapping[str, Any]) -> None:
    """One JSON line to the parent."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


# ---- the child: load a library, check and time its routines -------------------------------


@attrs.frozen
class _Library:
    handle: ctypes.CDLL
    path: str
    prefix: str
    suffix: str
    int_bits: int
    detail: dict[str, str]


def _load_openblas() -> _Library | str:
    """The OpenBLAS that NumPy loaded (found in this process's memory map)."""
    import numpy  # noqa: F401  (loads its BLAS)

    paths: list[str] = []
    try:
        for line in Path("/proc/self/maps").read_text(encoding="utf-8").splitlines():
            path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
            if "openblas" in os.path.basename(path) and path not in paths:
                paths.append(path)
    except OSError:
        pass
    if not paths:
        return "NumPy's BLAS is not an OpenBLAS loaded from a shared library"
    # NumPy's own copy first (numpy.libs), should another OpenBLAS be loaded too (SciPy's).
    paths.sort(key=lambda p: "numpy" not in os.path.dirname(p))
    lib = ctypes.CDLL(paths[0])
    for prefix in ("scipy_", ""):
        for suffix in ("64_", ""):
            if hasattr(lib, f"{prefix}cblas_sgemm{suffix}"):
                detail = _openblas_detail(lib, prefix, suffix)
                bits = 64 if suffix == "64_" else 32
                return _Library(lib, paths[0], prefix, suffix, bits, detail)
    return f"{paths[0]} exports no cblas_sgemm"


def _openblas_detail(lib: ctypes.CDLL, prefix: str, suffix: str) -> dict[str, str]:
    detail = {}
    for key, fn in (("core", "openblas_get_corename"), ("config", "openblas_get_config")):
        f = getattr(lib, f"{prefix}{fn}{suffix}", None)
        if f is not None:
            f.restype = ctypes.c_char_p
            detail[key] = f().decode().strip()
    f = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
    if f is not None:
        f.restype = ctypes.c_int
        detail["threads"] = str(f())
    return detail


def _load_mkl() -> _Library | str:
    """Intel MKL's single dynamic library, from this environment or the loader's path."""
    found = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libmkl_rt.so*")))
    path = found[0] if found else ctypes.util.find_library("mkl_rt")
    if not path:
        return "Intel MKL is not installed (pip install 'morello[peers]' installs it)"
    lib = ctypes.CDLL(path)
    buf = ctypes.create_string_buffer(256)
    lib.MKL_Get_Version_String(buf, len(buf))
    return _Library(lib, path, "", "", 32, {"version": buf.value.decode().strip()})


_LOADERS = {"openblas": _load_openblas, "mkl": _load_mkl}


def numpy_blas_detail() -> dict[str, str]:
    """What NumPy's BLAS says of itself in this process, where it is an OpenBLAS."""
    loaded = _load_openblas()
    return {} if isinstance(loaded, str) else {"path": loaded.path, **loaded.detail}


def _mkl_log(path: str) -> dict[str, str]:
    """What MKL's verbose log says: the instruction set, and the routine and its threads."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    detail: dict[str, str] = {}
    # "... architecture <isa>[ enabled processors], Lnx 2.60GHz lp64 sequential": the banner
    # of a build held to an instruction set names "enabled processors", an unrestricted one
    # only the set.
    m = re.search(r"architecture (.*), \S+ \S+ (\S+) (\S+)\s*$", text, re.M)
    if m:
        detail["isa"] = m.group(1).removesuffix(" enabled processors")
        detail["interface"] = m.group(2)
        detail["threading"] = m.group(3)
    calls = re.findall(r"^MKL_VERBOSE ([A-Z0-9_]+)\(.*?(NThr:\d+)?$", text, re.M)
    if calls:
        detail["ran"] = calls[-1][0]
        if calls[-1][1]:
            detail["threads"] = calls[-1][1].split(":")[1]
    return detail


def _child_main(argv: Sequence[str]) -> int:
    req = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    loaded = _LOADERS[req["library"]]()
    if isinstance(loaded, str):
        reply_line({"unavailable": loaded})
        serve({})
        return 0
    harness = ctypes.CDLL(req["harness"])
    want = np.load(req["want"])
    allowed = np.load(req["allowed"])
    replies = []
    batches: dict[str, Callable[[int], float]] = {}
    keep: list[Any] = []  # buffers the batches point into
    for j, job in enumerate(req["jobs"]):
        bufs = [_aligned(np.load(p)) for p in job["inputs"]]
        offsets = np.load(job["offsets"])
        out_dt = dtype(job["out_dtype"])
        out = aligned_empty(job["out_count"], out_dt.np_dtype())
        keep.append((bufs, out))
        calls = []
        for c, call in enumerate(job["calls"]):
            reply, batch = _child_call(
                loaded, req, harness, call, bufs, out, offsets, want, allowed
            )
            if batch is not None:
                reply["ready"] = f"{j}:{c}"
                batches[reply["ready"]] = batch
            calls.append(reply)
        replies.append({"calls": calls})
    reply_line({"detail": {"path": loaded.path, **loaded.detail}, "jobs": replies})
    serve(batches)
    return 0


def _child_call(
    lib: _Library,
    req: Mapping[str, Any],
    harness: ctypes.CDLL,
    call: Mapping[str, Any],
    bufs: Sequence[np.ndarray],
    out: np.ndarray,
    offsets: np.ndarray,
    want: np.ndarray,
    allowed: np.ndarray,
) -> tuple[dict[str, Any], Callable[[int], float] | None]:
    """Run and check one routine: the reply about it, and its batch if it passed."""
    _, names = _ROUTINES[(call["routine"], call["dtype"])]
    base = names if isinstance(names, str) else names[req["library"]]
    symbol = f"{lib.prefix}{base}{lib.suffix}"
    reason = req["skip"].get(f"{call['routine']}_{call['dtype']}")
    if reason is not None:
        return {"symbol": symbol, "skipped": f"{symbol}: {reason}"}, None
    fn = getattr(lib.handle, symbol, None)
    if fn is None:
        return {"symbol": symbol, "skipped": f"{os.path.basename(lib.path)} has no {symbol}"}, None
    timer = getattr(harness, f"time_{call['routine']}_{call['dtype']}_i{lib.int_bits}")
    timer.restype = ctypes.c_double
    addr = ctypes.cast(fn, ctypes.c_void_p)
    buffers = [*bufs, out]
    args: list[Any] = [addr]
    for kind, value in call["args"]:
        if kind == "enum":
            args.append(ctypes.c_int(value))
        elif kind == "int":
            args.append(ctypes.c_int64(value))
        else:
            args.append(buffers[value].ctypes.data_as(ctypes.c_void_p))
    out[:] = np.nan
    verbose = req["library"] == "mkl"
    if verbose:
        lib.handle.MKL_Verbose_Output_File(req["verbose_log"].encode())
        lib.handle.MKL_Verbose(1)
    timer(*args, ctypes.c_long(1))
    if verbose:
        lib.handle.MKL_Verbose(0)
    got = out[offsets]
    cmp = compare(got, want, allowed)
    reply: dict[str, Any] = {"symbol": symbol}
    if verbose:
        reply["detail"] = _mkl_log(req["verbose_log"])
    if not cmp.ok:
        reply["check_failed"] = (
            f"max abs error {cmp.max_abs_error:.3g} (allowed up to {cmp.max_allowed:.3g}), "
            f"first mismatch at {list(cmp.first_bad or ())}"
        )
        return reply, None

    def batch(iters: int) -> float:
        return float(timer(*args, ctypes.c_long(iters))) / iters

    return reply, batch


def _aligned(arr: np.ndarray) -> np.ndarray:
    buf = aligned_empty(arr.size, arr.dtype)
    buf[:] = arr.ravel()
    return buf


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
