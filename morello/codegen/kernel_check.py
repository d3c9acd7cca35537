"""A target's kernels checked one at a time: ``python -m morello kernels --check``.

A kernel is a leaf the search trusts: its pattern says which Specs it computes and its C
template how. A wrong template is otherwise found three layers up, in the program of some
spec file, or never. Each kernel is checked alone:

* its own pattern, instantiated as a Spec (dim variables and ``*`` set to 1, operands at the
  first level each alternative lists), must be matched by the kernel, so a pattern cannot
  describe Specs the kernel never sees;
* a root Spec in the first (main-memory) level is synthesized with the kernel's op served by
  that kernel alone (its rivals, the other kernels of the same op and accumulation, removed),
  the kernel must appear in the Impl, and the compiled C must match NumPy on three inputs.

Kernels of an identity op (moves) cannot be roots: the move rewrite brings operands of other
ops into faster levels and a move Spec is only ever a prologue or epilogue of that. They are
reached through the roots of the other kernels, scaled up until data reuse makes the search
stage operands through the kernel; the first root whose Impl uses it is compiled and checked.
Nothing here names a kernel, op or level: everything comes from the rule set. The test suite
runs this for every kernel of the target under test (``tests/rules/test_every_kernel.py``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import attrs

from morello.context import SynthesisContext
from morello.dtypes import dtype
from morello.errors import MorelloError, NoImplementationError
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.layout import layout_by_name
from morello.nodes import KernelAction
from morello.nodes.reside import not_resident
from morello.rules.index_notation import base_name
from morello.rules.kernels import PLACEHOLDER, Kernel
from morello.search.expand import spec_actions
from morello.search.solve import synthesize
from morello.spec import Spec, TensorSpec

#: Sizes given to a root's unit index sizes when looking for a root that stages data through
#: a move kernel (reuse grows with the tile, so a larger root eventually keeps operands close).
SCALES = (1, 2, 4, 8)
#: The size of an index the pattern leaves to a dim variable (`f32[1, n]`): such a kernel
#: loops over it itself, and 93 = 64 + 16 + 13 = 2 x 32 + 3 x 8 + 5 (doubled where reduced:
#: 186 = 2 x 64 + 3 x 16 + 10 = 5 x 32 + 3 x 8 + 2) reaches each of its blocks, steps and
#: tail (a root of 2 would test only the tail).
VARIABLE_SIZE = 93
#: Input seeds each kernel's root is checked on.
SEEDS = (0, 1, 2)


class KernelCheckError(MorelloError):
    """A kernel failed its check: it misses its own pattern, no root reaches it, its C does
    not compile or does not match NumPy."""


@attrs.frozen
class KernelReport:
    """The outcome of one kernel's check: ``passed``, ``failed`` or ``skipped`` (this
    machine cannot run its code), with a line saying how."""

    kernel: str
    location: str
    outcome: str
    detail: str


def declared_at(kernel: Kernel) -> str:
    """Where ``kernel`` is declared: file:line:col, the file relative to the working folder
    when it is inside it (its rule set's name if it has no location)."""
    if kernel.loc is None:
        return kernel.rule_set
    path = Path(kernel.loc.path)
    with contextlib.suppress(ValueError):
        path = path.resolve().relative_to(Path.cwd())
    return f"{path}:{kernel.loc.line}:{kernel.loc.column}"


# ---- building Specs from patterns --------------------------------------------------------


def pattern_shapes(kernel: Kernel) -> list[tuple[int, ...]]:
    """Operand shapes of the smallest Spec the pattern allows (dim variables and ``*`` = 1)."""
    return [tuple(d if isinstance(d, int) else 1 for d in pat.dims) for pat in kernel.operands]


def root_shapes(kernel: Kernel, ctx: SynthesisContext, scale: int) -> list[tuple[int, ...]]:
    """Operand shapes of a root Spec around the pattern.

    Index sizes of 1 become ``scale``, an index of a dim variable ``VARIABLE_SIZE``, and
    reduction indices are doubled so that an accumulating kernel runs at least twice into
    the same output (an accumulation that overwrote instead, or subtracted, would otherwise
    go unnoticed).
    """
    opdef = ctx.ruleset.ops[kernel.op]
    sizes: dict[str, int] = {}
    for pat, acc in zip(kernel.operands, opdef.operands, strict=True):
        for d, ix in zip(pat.dims, acc.indices, strict=True):
            if isinstance(d, int):
                sizes[ix] = d
            elif d != "*":
                sizes[ix] = VARIABLE_SIZE
    for ix in opdef.index_vars:
        sizes[ix] = sizes.get(ix, 1)
        if sizes[ix] == 1:
            sizes[ix] = scale
        if ix in opdef.reduction_vars:
            sizes[ix] *= 2
    return [opdef.operand_shape(i, sizes) for i in range(len(opdef.operands))]


def pattern_layout_name(kernel: Kernel, operand: int) -> str:
    """The first layout family the pattern names for an operand (row-major by default)."""
    pat = kernel.operands[operand]
    return pat.layouts[0] if pat.layouts else "row_major"


def leaf_spec(kernel: Kernel, ctx: SynthesisContext) -> Spec:
    """The pattern itself as a Spec: each operand at its first listed level (not resident
    in a cache that holds whole Specs, as the pattern says)."""
    operands = []
    for i, (pat, shape) in enumerate(zip(kernel.operands, pattern_shapes(kernel), strict=True)):
        layout = layout_by_name(pattern_layout_name(kernel, i), len(shape))
        assert layout is not None
        canon = layout.canonical(shape)
        assert canon is not None
        level = ctx.target.level(pat.levels[0]) if pat.levels else ctx.target.levels[0]
        operands.append(TensorSpec(shape, dtype(pat.dtype), level, canon, pat.vector_size))
    return not_resident(
        Spec(kernel.op, tuple(operands), kernel.accum, ctx.target.max_limits()), ctx
    )


def matches_own_pattern(kernel: Kernel, ctx: SynthesisContext) -> bool:
    """Whether ``kernel`` is among the actions of the Spec its own pattern describes."""
    return any(
        isinstance(a, KernelAction) and a.kernel == kernel.name
        for a in spec_actions(leaf_spec(kernel, ctx), ctx)
    )


def root_spec_text(kernel: Kernel, ctx: SynthesisContext, name: str, scale: int) -> str:
    """A spec-file function applying the kernel's op to main-memory operands of its shapes.

    A spec file gives an op's inputs one dtype, so where the kernel's inputs differ
    (``sub_rows`` of a bf16 row by an f32 value) they all take the first one's here;
    ``root_program`` then gives each its own.
    """
    opdef = ctx.ruleset.ops[kernel.op]
    shapes = root_shapes(kernel, ctx, scale)
    types = []
    for i, (pat, shape) in enumerate(zip(kernel.operands, shapes, strict=True)):
        layout = pattern_layout_name(kernel, i)
        dt = pat.dtype if i == len(opdef.inputs) else kernel.operands[0].dtype
        types.append(f"{dt}[{', '.join(map(str, shape))}] {layout}")
    params = ", ".join(
        f"{acc.tensor}: {t}" for acc, t in zip(opdef.inputs, types[:-1], strict=True)
    )
    out = f"{opdef.output.tensor}_out"
    args = ", ".join(acc.tensor for acc in opdef.inputs)
    call = f"{base_name(kernel.op)}({args})"
    return f"func {name}({params}) -> {out}: {types[-1]} {{\n    {out} = {call}\n}}\n"


def root_program(kernel: Kernel, ctx: SynthesisContext, name: str, scale: int) -> Program:
    """The checked program of ``root_spec_text``, each operand of the kernel's own dtype."""
    text = root_spec_text(kernel, ctx, name, scale)
    dtypes = [dtype(pat.dtype) for pat in kernel.operands]
    if len(set(dtypes[:-1])) == 1:
        return build_program(parse_spec_file(f"{name}.lark", text).funcs[0], ctx)
    # An op of inputs of one dtype may have no implementation: checked only, then retyped.
    program = build_program(
        parse_spec_file(f"{name}.lark", text).funcs[0], ctx, require_kernels=False
    )
    retyped = dict(zip(program.operand_params, dtypes, strict=True))
    spec = attrs.evolve(
        program.spec,
        operands=tuple(
            attrs.evolve(ts, dtype=dt) for ts, dt in zip(program.spec.operands, dtypes, strict=True)
        ),
    )
    params = tuple((p, attrs.evolve(ts, dtype=retyped[p])) for p, ts in program.params)
    return attrs.evolve(program, spec=spec, params=params)  # the result had its dtype


def only_kernel_for_its_op(ctx: SynthesisContext, kernel: Kernel) -> SynthesisContext:
    """``ctx`` without the other kernels of ``kernel``'s op and accumulation."""
    kept = tuple(
        k
        for k in ctx.ruleset.kernels
        if k.name == kernel.name or (k.op, k.accum) != (kernel.op, kernel.accum)
    )
    return attrs.evolve(ctx, ruleset=attrs.evolve(ctx.ruleset, kernels=kept))


def kernels_in(impl: Impl) -> list[str]:
    """Names of the kernels an Impl calls, in pre-order."""
    return [n.action.kernel for n in impl.walk() if isinstance(n.action, KernelAction)]


def find_root(kernel: Kernel, ctx: SynthesisContext) -> tuple[SynthesisContext, Program, Impl]:
    """A root Spec, and the restricted context, whose Impl uses ``kernel``.

    Raises:
        KernelCheckError: no root tried reaches the kernel (each named, with what it used).
    """
    opdef = ctx.ruleset.ops[kernel.op]
    if opdef.is_identity:
        # Hosts with inputs first: data then flows through the move (a store of a constant
        # op's output would not notice a store that writes the wrong value).
        hosts = sorted(
            (k for k in ctx.ruleset.kernels if not ctx.ruleset.ops[k.op].is_identity),
            key=lambda k: -len(ctx.ruleset.ops[k.op].inputs),
        )
        # The move's own op first (a copy between memories), then the hosts.
        candidates = [(kernel, 1)] + [(host, s) for s in SCALES for host in hosts]
    else:
        candidates = [(kernel, 1)]
    tried = []
    for host, scale in candidates:
        sub_ctx = only_kernel_for_its_op(ctx, host)
        name = f"self_test_{kernel.name}"
        program = root_program(host, sub_ctx, name, scale)
        try:
            impl, _ = synthesize(program.spec, sub_ctx, {})
        except NoImplementationError:
            tried.append(f"{program.spec.describe()}: no implementation")
            # A copy kernel that reads no L2 copies what is not resident there.
            try:
                impl, _ = synthesize(not_resident(program.spec, sub_ctx), sub_ctx, {})
            except NoImplementationError:
                continue
        if kernel.name in kernels_in(impl):
            return sub_ctx, program, impl
        tried.append(f"{program.spec.describe()}: uses {', '.join(kernels_in(impl))}")
    raise KernelCheckError(
        f"no root Spec reaches kernel {kernel.name}; tried "
        + "; ".join(tried[:3])
        + (f" and {len(tried) - 3} more" if len(tried) > 3 else "")
    )


# ---- the check ---------------------------------------------------------------------------


def check_kernel(kernel: Kernel, ctx: SynthesisContext, workdir: Path) -> KernelReport:
    """Check ``kernel`` (see the module's docstring), compiling in ``workdir``. A failure is
    a report, not an exception; an exception is a fault of the check itself."""
    from morello.codegen import harness  # NumPy: only where code runs
    from morello.codegen.compile import compile_shared
    from morello.codegen.header import lower_to_c
    from morello.codegen.runner import cannot_run

    def report(outcome: str, detail: str) -> KernelReport:
        return KernelReport(kernel.name, declared_at(kernel), outcome, detail)

    if not matches_own_pattern(kernel, ctx):
        spec = leaf_spec(kernel, ctx)
        return report("failed", f"does not match its own pattern {spec.describe()}")
    why = cannot_run(ctx.target, kernel.requires)
    if why:
        return report("skipped", f"pattern matched; its code cannot run here: {why}")
    try:
        sub_ctx, program, impl = find_root(kernel, ctx)
        source = lower_to_c(program.name, [(program, impl)], sub_ctx)
        for line in kernel.c_lines:
            # Every fixed piece of the template (the text between placeholders) is in the C.
            for piece in PLACEHOLDER.sub("\0", line).split("\0"):
                if piece.strip() not in source.c_text:
                    raise KernelCheckError(f"its template's {piece.strip()!r} is not in the C")
        lib = compile_shared(source.c_text, sub_ctx.target, workdir, program.name)
        worst = 0.0
        for seed in SEEDS:
            result = harness.check(lib, program, sub_ctx, seed=seed)  # raises on a mismatch
            worst = max(worst, result.max_abs_error)
    except MorelloError as exc:
        message = exc.message.splitlines()[0] if exc.message else type(exc).__name__
        return report("failed", message if exc.loc is None else f"{exc.loc}: {message}")
    return report(
        "passed",
        f"{program.spec.describe()} matches NumPy on {len(SEEDS)} inputs "
        f"(max abs error {worst:.3g})",
    )
