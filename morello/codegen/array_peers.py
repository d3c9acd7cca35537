"""The array peers of a benchmark: the op as NumPy and JAX code, timed like generated code.

Any op or graph of ops has array peers, since ``array_code.py`` turns index notation into
array code. Each array library the target names as a peer (``Target.peers``) runs in a child
process whose environment holds the target's settings for it (threads, instruction sets,
compiler flags), since such settings are read when the library loads:

* ``numpy``: the op's statements in sequence on float arrays, as a user of NumPy writes them
  (its matrix products are NumPy's BLAS, its elementwise functions NumPy's own loops);
* ``jax``: the whole op compiled by ``jax.jit`` (XLA), one call per run, waited for with
  ``block_until_ready``; missing, with the reason, where JAX is not installed.

The child builds the function, runs it once on the same input values as the generated code
and checks its output against the NumPy reference with the same tolerance (a mismatch is
``CheckFailed``, not a figure), then times batches of calls from Python on request (the call
overhead a user of the library pays is part of its time), which ``bench`` interleaves with
the generated function's and the other peers' (``peers.PeerChild``). It reports the
library's version, the settings it ran under, the array functions the op called, and the CPU
time per wall time while timing (about 1 for one thread).

Inputs are the logical arrays in the float type the op computes in: the Spec's own (f32,
f64), or f32 for a narrower float (bf16 values read as f32, a peer named ``<library>_f32``).

Knows no target; the libraries it runs are the ``ARRAY_PEER_LIBRARIES`` of ``target.py``.
"""

from __future__ import annotations

import contextlib
import json
import pickle
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from morello.codegen.array_code import array_function
from morello.codegen.compile import scratch_folder
from morello.codegen.harness import aligned_empty, compare
from morello.codegen.peers import (
    PeerChild,
    PeerMissing,
    PeerTiming,
    ReadyPeer,
    numpy_blas_detail,
    reply_line,
    serve,
    time_ready,
)
from morello.context import SynthesisContext
from morello.errors import CheckFailed
from morello.lang.spec_file import Program
from morello.layout import row_major
from morello.rules.graph import GraphOp
from morello.rules.index_notation import base_name
from morello.target import ARRAY_PEER_LIBRARIES

#: The float types array peers compute in, by the Spec's output dtype.
_COMPUTE = {"f32": "f32", "f64": "f64"}


def time_array_peers(
    program: Program,
    ctx: SynthesisContext,
    inputs: Mapping[str, np.ndarray],
    want: np.ndarray,
    allowed: np.ndarray,
    repeats: int,
    min_batch_s: float,
    workdir: Path | None = None,
) -> list[PeerTiming | PeerMissing]:
    """Time every array peer the target names on ``program``'s Spec, interleaved; see
    ``open_array_peers`` and the module docstring.

    Raises:
        CheckFailed: a peer's output is wrong.
    """
    with open_array_peers(program, ctx, inputs, want, allowed, workdir) as ready:
        return time_ready(ready, repeats, min_batch_s)


@contextlib.contextmanager
def open_array_peers(
    program: Program,
    ctx: SynthesisContext,
    inputs: Mapping[str, np.ndarray],
    want: np.ndarray,
    allowed: np.ndarray,
    workdir: Path | None = None,
) -> Iterator[list[ReadyPeer | PeerMissing]]:
    """Every array peer the target names on ``program``'s Spec, checked and ready to time
    (its child process runs until the context ends); see the module docstring.

    ``inputs`` are the logical input arrays by parameter name; ``want`` and ``allowed`` the
    reference output and its per-element tolerance, against which each peer is checked
    before it may be timed.

    Raises:
        CheckFailed: a peer's output is wrong.
    """
    peers = [p for p in ctx.target.peers if p.library in ARRAY_PEER_LIBRARIES]
    if not peers:
        yield []
        return
    spec = program.spec
    ins = spec.operands[:-1]
    in_dt = (ins[0] if ins else spec.output).dtype.name
    compute = _compute_dtype(program, ctx)
    if compute is None:
        why = f"array peers compute in f32 or f64, not {in_dt} into {spec.output.dtype.name}"
        yield [PeerMissing(p.library, why) for p in peers]
        return
    with scratch_folder("morello-peers-", workdir) as folder, contextlib.ExitStack() as stack:
        op = ctx.ruleset.ops[spec.op]
        base = _write_operands(program, ctx, inputs, want, allowed, compute, folder)
        copied = any(t.layout != row_major(len(t.shape)).canonical(t.shape) for t in ins)
        results: list[ReadyPeer | PeerMissing] = []
        for peer in peers:
            name = peer.library if compute == in_dt else f"{peer.library}_{compute}"
            req_path = folder / f"{peer.library}-request.json"
            request = {**base, "library": peer.library, "env": dict(peer.env)}
            req_path.write_text(json.dumps(request), encoding="utf-8")
            child = stack.enter_context(PeerChild(peer, req_path, __name__))
            reply = child.reply
            if "unavailable" in reply:
                results.append(PeerMissing(name, reply["unavailable"]))
                continue
            if "check_failed" in reply:
                raise CheckFailed(f"peer {name}: {reply['check_failed']}")
            routine = _routine(peer.library, op)
            results.append(
                ReadyPeer(
                    name=name,
                    library=peer.library,
                    dtype=compute,
                    routines=(routine,),
                    batches=(child.batch(reply["ready"]),),
                    detail=reply["detail"],
                    copied=copied,
                    child=child,
                )
            )
        yield results


def _write_operands(
    program: Program,
    ctx: SynthesisContext,
    inputs: Mapping[str, np.ndarray],
    want: np.ndarray,
    allowed: np.ndarray,
    compute: str,
    folder: Path,
) -> dict[str, Any]:
    """Save the op, its inputs as ``compute`` arrays and the reference in ``folder``; the
    part of a request that says where they are."""
    spec = program.spec
    np_dtype = ctx.dtype(compute).np_dtype()
    paths = []
    for i, name in enumerate(program.operand_params[:-1]):
        paths.append(str(folder / f"array-{i}.npy"))
        np.save(paths[-1], np.asarray(inputs[name], dtype=np_dtype))
    np.save(folder / "want.npy", want)
    np.save(folder / "allowed.npy", allowed)
    (folder / "op.pickle").write_bytes(pickle.dumps(ctx.ruleset.ops[spec.op]))
    return {
        "op": str(folder / "op.pickle"),
        "shapes": [list(t.shape) for t in spec.operands],
        "dtype": np.dtype(np_dtype).name,
        "inputs": paths,
        "want": str(folder / "want.npy"),
        "allowed": str(folder / "allowed.npy"),
    }


def _compute_dtype(program: Program, ctx: SynthesisContext) -> str | None:
    """The float type the peers compute in: the output's, if every input reads as it."""
    compute = _COMPUTE.get(program.spec.output.dtype.name)
    if compute is None:
        return None
    want = ctx.dtype(compute).np_dtype()
    for t in program.spec.operands[:-1]:
        logical = np.dtype(t.dtype.logical_dtype())
        if logical.kind != "f" or logical.itemsize > np.dtype(want).itemsize:
            return None
    return compute


def _routine(library: str, op: Any) -> str:
    """What the peer runs, in words: the sequence of ops, or the compiled whole."""
    if library == "jax":
        return "jax.jit"
    names = [base_name(s.op) for s in op.statements] if isinstance(op, GraphOp) else [op.name]
    return f"{library} sequence: {', '.join(names)}"


# ---- the child: build, check and time the array function ----------------------------------


@attrs.frozen
class _Module:
    """An array library as the child uses it: its module, how arrays enter it, how a
    function is compiled (``jit``, or None to run the Python function on each call) and how
    a result is waited for, and what it reports of itself."""

    xp: Any
    to_array: Callable[[np.ndarray], Any]
    jit: Callable[[Callable[..., Any]], Callable[..., Any]] | None
    wait: Callable[[Any], Any]
    detail: dict[str, str]


def _load_numpy(dtype: str) -> _Module | str:
    detail = {"numpy": np.__version__}
    simd = _numpy_simd()
    if simd:
        detail["simd"] = simd
    detail.update({f"blas_{k}": v for k, v in numpy_blas_detail().items()})

    def to_array(arr: np.ndarray) -> np.ndarray:
        buf = aligned_empty(arr.size, arr.dtype).reshape(arr.shape)
        buf[...] = arr
        return buf

    return _Module(np, to_array, None, lambda out: out, detail)


def _numpy_simd() -> str:
    """The SIMD extensions NumPy dispatches its loops to here, beyond its baseline."""
    try:
        from numpy._core import _multiarray_umath as umath  # type: ignore[attr-defined]
    except ImportError:  # NumPy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    features = getattr(umath, "__cpu_features__", {})
    dispatch = getattr(umath, "__cpu_dispatch__", [])
    baseline = getattr(umath, "__cpu_baseline__", [])
    enabled = [d for d in dispatch if features.get(d)]
    return " ".join(enabled) if enabled else " ".join(baseline)


def _load_jax(dtype: str) -> _Module | str:
    try:
        import jax
        import jax.numpy as jnp
        import jaxlib
    except ImportError:
        return "JAX is not installed (pip install 'morello[jax]' installs it)"
    if dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    device = jax.devices()[0]
    detail = {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "device": f"{device.platform}: {device.device_kind}",
    }

    def wait(out: Any) -> Any:
        return out.block_until_ready()

    return _Module(jnp, jax.device_put, jax.jit, wait, detail)


_LOADERS: dict[str, Callable[[str], _Module | str]] = {"numpy": _load_numpy, "jax": _load_jax}


def _child_main(argv: Sequence[str]) -> int:
    req = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    module = _LOADERS[req["library"]](req["dtype"])
    if isinstance(module, str):
        reply_line({"unavailable": module})
        serve({})
        return 0
    op = pickle.loads(Path(req["op"]).read_bytes())
    dtype = np.dtype(req["dtype"])
    args = [module.to_array(np.load(p).astype(dtype)) for p in req["inputs"]]
    detail = {**module.detail, **{k: v for k, v in sorted(req["env"].items())}}
    program = array_function(op, req["shapes"], module.xp, dtype)
    detail["calls"] = ", ".join(c for c in program.calls if c not in ("reshape", "transpose"))
    fn = program if module.jit is None else module.jit(program)
    got = np.asarray(module.wait(fn(*args)))
    cmp = compare(got, np.load(req["want"]), np.load(req["allowed"]))
    if not cmp.ok:
        reply_line(
            {
                "check_failed": f"max abs error {cmp.max_abs_error:.3g} (allowed up to "
                f"{cmp.max_allowed:.3g}), first mismatch at {list(cmp.first_bad or ())}"
            }
        )
        serve({})
        return 0
    clock = {"cpu": 0.0, "wall": 0.0}

    def batch(iters: int) -> float:
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in range(iters):
            module.wait(fn(*args))
        wall = time.perf_counter() - t0
        clock["cpu"] += time.process_time() - cpu0
        clock["wall"] += wall
        return wall / iters

    def cpu_per_wall() -> dict[str, str]:
        return {"cpu_per_wall": f"{clock['cpu'] / max(clock['wall'], 1e-9):.2f}"}

    reply_line({"ready": "fn", "detail": detail})
    serve({"fn": batch}, cpu_per_wall)
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
