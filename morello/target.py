"""Targets as data: memory levels, vector types, compiler, cost coefficients.

Nothing here names a particular machine; targets are built by plugins (see hookspecs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import attrs

from morello.layout import layout_by_name

if TYPE_CHECKING:
    from morello.dtypes import Dtype

#: Roles of memory levels, which rule files meant for several targets name instead of levels:
#: addressed memory (buffers), a cache, scalar registers, vector registers.
LEVEL_ROLES = ("memory", "cache", "registers", "vector_registers")


def _positive(_inst: object, attr: attrs.Attribute[int], value: int) -> None:
    if value <= 0:
        raise ValueError(f"{attr.name} must be positive, got {value}")


@attrs.frozen(kw_only=True, cache_hash=True)
class MemoryLevel:
    """One level of the memory hierarchy. A TensorSpec holds its level as this object;
    ``str()`` gives the name. Levels compare by value, never by identity: a Spec that
    crossed processes holds an equal copy.

    Attributes:
        name: short uppercase name used in spec and rule files (``@L1``).
        capacity: bytes, or registers when ``unit == "registers"``.
        unit: ``"bytes"`` (limits are counted in cache lines) or ``"registers"``.
        line_bytes: cache-line size used for cost and capacity accounting.
        addressed: False for a cache level: moving data there creates no buffer, only the
            knowledge that the data is resident.
        ways: associativity of a cache level (0: not modelled). A tile of several runs is
            assumed to have a power-of-two stride, so that its runs fall into the same sets;
            a tile whose runs need more ways than the cache has is not kept there (it would
            evict itself), see ``spec.cache_ways``.
        packs: layout families (``row_major``, ``packed_cols(8)``, ...) into which a move
            into this cache level may also *pack* an operand it only reads: copy it into a
            new contiguous buffer, small enough to stay in this cache, which fits where a
            strided tile would alias (see ``ways``). Empty: the level only caches.
        vector_bytes: register widths, for vector register files; empty otherwise.
        moves_to: names of the levels the move rewrite may bring data into from here.
        role: what the level is, for rule files that are not written for one target
            (``@registers|cache`` in a portable kernel): one of LEVEL_ROLES. By default
            ``memory`` for an addressed level counted in bytes and for a cache that holds
            whole Specs (``whole_specs``: what is resident there is buffers in memory, read
            at the cache's price), ``cache`` for other levels without addresses,
            ``vector_registers`` for registers with vector widths and ``registers`` for
            other registers. A target with two caches may give the outer one another role
            (or ``""``, none) so that portable kernels read only the inner.
        shares: register levels whose registers this level's values occupy too. On x86 an
            f32 scalar lives in the low lane of an xmm register, so scalar and vector
            registers are one file of 16 (32 with AVX-512), and so are NEON's: a move into
            either level takes its registers from both (``Target.sharing``). Register
            levels of separate files (x86 integer registers) share nothing. Levels that
            share have one capacity (one file, one size).
        folds: a move into this level of at most this many registers takes none from the
            levels it ``shares`` with: the kernels that read such a value fold its load into
            their own instruction (x86's ``vbroadcastss`` from memory), so it lives only in
            the scratch register those kernels already declare. A larger tile is loaded
            once and held across its uses (gcc hoists the loads, and the broadcasts with
            them), so it occupies the shared file. 0: every move takes from it. The rule
            is ``Target.sharing``'s, so it covers every allocation at the level, a block's
            temporaries too: limits and peaks must agree. An input moved in that small is
            priced as its lines only, not its copy kernel's instruction (``MoveAction``):
            the load is the reading kernel's own.
        whole_specs: a cache (not addressed) that the hardware fills implicitly, such as
            an L2 behind the L1: the search never moves one operand into it; instead a
            Spec whose operands from the levels moving into it fit there all at once is
            *resident* (the ``reside`` schema, ``morello.nodes.reside``), and its reads
            after the first are priced at this level.
        packs_only: a cache that holds only packed copies: a move into it always copies
            the tile into a new contiguous buffer (one of ``packs``), never views it in
            place, and only a tile that no packing level it ``moves_to`` could hold. Such a
            level gives buffers larger than the inner caches (a strip of B too big for the
            L1, packed for the L2) without doubling every cached view the search tries.
        per_buffer: the capacity bounds each buffer at this level on its own, not all of
            them together: main memory, where a large buffer comes from the heap. A buffer
            placed here only has to fit; it lowers no limit, and a Spec's peak here is its
            largest buffer. Counted together, every buffer a Spec holds while its children
            run would halve what the power-of-two limits leave, so a graph's chain of
            intermediates held in memory would run out after about 25 of them although each
            is small (``spec.subtract_limits``, ``spec.add_peak``).
    """

    name: str
    capacity: int = attrs.field(validator=_positive)
    unit: str = "bytes"
    line_bytes: int = 64
    addressed: bool = True
    ways: int = 0
    packs: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    vector_bytes: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    moves_to: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    shares: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    folds: int = 0
    whole_specs: bool = False
    packs_only: bool = False
    per_buffer: bool = False
    # Last: its default reads the fields above.
    role: str = attrs.field(default=attrs.Factory(lambda lv: lv.default_role(), takes_self=True))

    @role.validator
    def _known_role(self, _attr: attrs.Attribute[str], value: str) -> None:
        if value and value not in LEVEL_ROLES:
            raise ValueError(
                f"level {self.name}: unknown role {value!r} (known: {', '.join(LEVEL_ROLES)})"
            )

    def default_role(self) -> str:
        """The role a level has unless its target says otherwise (see ``role``)."""
        if self.counts_registers:
            return "vector_registers" if self.vector_bytes else "registers"
        return "memory" if self.holds_buffers else "cache"

    def __str__(self) -> str:
        return self.name

    @property
    def holds_buffers(self) -> bool:
        """Whether what lives at this (byte-counted) level is buffers in memory: an addressed
        level, or a cache holding whole Specs, whose resident data is main memory's buffers
        read at the cache's price. Such a level is ``memory`` to rule files (roles, ``into``)."""
        return self.addressed or self.whole_specs

    @property
    def counts_registers(self) -> bool:
        """Whether capacity and limits are counted in registers."""
        return self.unit == "registers"

    @property
    def sets(self) -> int:
        """Sets of a set-associative cache level (0 when ``ways`` is not modelled)."""
        if not self.ways:
            return 0
        return max(1, self.capacity // (self.line_bytes * self.ways))

    @property
    def limit_units(self) -> int:
        """The full capacity in limit units (registers or cache lines)."""
        if self.counts_registers:
            return self.capacity
        return self.capacity // self.line_bytes


@attrs.frozen
class VectorType:
    """A SIMD register type the target's C compiler understands.

    ``pin`` (optional) is a C statement with ``{v}`` for a variable of this type that makes
    the compiler hold the variable in a register from that point on, e.g. GCC's
    ``__asm__("" : "+x"({v}));`` on x86. A move into vector registers whose body reads the
    values more than once (a row of B that a register tile's rows all multiply) is pinned
    after its loads: without it GCC may fold the load into every instruction that reads the
    value, so a tile the cost model prices at one load per vector makes one per use
    (BENCHMARKS.md, "A row of B loaded once"). Empty: no pin.
    """

    dtype: str
    lanes: int
    c_type: str
    pin: str = attrs.field(default="")

    @pin.validator
    def _check_pin(self, _attr: attrs.Attribute[str], value: str) -> None:
        if value and "{v}" not in value:
            raise ValueError(f"vector type {self.c_type}: pin {value!r} does not name {{v}}")


@attrs.frozen
class Compiler:
    """How to compile generated C for this target.

    Attributes:
        cc: the C compiler command (a cross compiler for a target of another architecture).
        flags: flags for every compilation (optimization, instruction sets).
        openmp_flags: added to ``flags`` for C that holds a parallel loop (an OpenMP
            pragma); without them the compiler would ignore the pragma and run the loop on
            one thread.
        package: where to get ``cc`` when it is missing (e.g. a Debian package), for the
            message that says so; empty when there is nothing to suggest.
    """

    cc: str = "cc"
    flags: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    openmp_flags: tuple[str, ...] = attrs.field(default=("-fopenmp",), converter=tuple)
    package: str = ""


@attrs.frozen
class Platform:
    """Where a target's code runs, and how to tell whether this machine can run it.

    Code runs *natively*, loaded into the Python process, on a machine of the same
    architecture whose CPU has the features the code's kernels require (read from the
    ``features_field`` line of /proc/cpuinfo: ``flags`` on x86, ``Features`` on ARM). On a
    machine of another architecture it runs *emulated*: compiled into a small executable
    that reads its inputs from files and writes its output to one, run by the ``emulator``
    command (which provides every feature of the emulated CPU). No timing is meaningful
    under emulation, so ``bench`` refuses it.

    Attributes:
        arch: the machine name (``platform.machine()``) of CPUs that run the code natively.
        features_field: the /proc/cpuinfo field listing the CPU's features.
        emulator: command prefix that runs one of the target's executables on another
            architecture, e.g. ``("qemu-aarch64", "-L", "/usr/aarch64-linux-gnu")``; empty:
            the code runs natively only.
        emulator_package: where to get the emulator when it is missing (message only).
    """

    arch: str = "x86_64"
    features_field: str = "flags"
    emulator: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    emulator_package: str = ""


@attrs.frozen
class CostCoefficients:
    """Named cost coefficients of the affine cost model.

    ``level_hit`` is the cost of touching one cache line at each level (by level name);
    ``named`` holds the coefficients that kernel rules refer to (``cost fma``).

    ``stream_hit`` (optional, by level name) prices memory-level parallelism: entry ``r - 1``
    is the cost per line of a tile read as ``r`` contiguous runs of at least
    ``stream_lines`` lines each, which the hardware prefetchers follow as ``r`` concurrent
    streams (one stream rarely saturates the memory bus, a few do). Shorter runs, or more
    runs than the tuple covers, are a strided walk: twice ``level_hit`` per line, as at a
    level without the entry. One short run alone is priced as a stream, but a loop that
    reads one such run per trip, each from another row, pays for its lines again: a walk
    the prefetchers never follow (``morello.nodes.loop``).

    ``chain_latency`` (optional, by level name) is the latency of one accumulation into a
    register of that level. A loop over a reduction index whose output stays in registers
    is a dependency chain per register: each of its iterations waits that long, shared by
    the output's independent registers, so several accumulators hide the latency and one
    does not.

    ``stream_restart`` (optional, by level name) is the cost of starting a stream again: a
    loop whose step reads an operand at that level in fewer runs than the loop's whole tile
    of it (the loop walks across the runs, not along them) starts each of the step's runs
    anew on every trip, and pays this per run of at least ``stream_lines`` lines that
    ``stream_hit`` prices as a stream. A loop whose step has as many runs as its tile
    continues them, and pays nothing. Only operands the loop's Spec uses at most
    ``stream_reuse`` times an element are charged.

    ``stream_reuse`` is that bound, for restarts and for the strided walks of a loop that
    reads one short run per trip alike: 1 (the default), operands read once (each element
    used by one point of the Spec's iteration space, as a matvec's weights); more, operands
    reused so little that they still come from main memory's side (a 4- or 8-row matmul's
    B, each element used by one or two register tiles). Operands reused more come mostly
    from caches, where a restart's latency and a walk's strides hide.

    ``stream_burst`` (optional, by level name) is the most lines a reader may take from one
    run of a tile before it moves to the next run and still keep the tile's runs concurrent
    streams. A loop whose trips each read one longer run of an operand its Spec reads once,
    from a cache above that level (a tile the cache holds on its way from the level: a
    matvec's register tile, wider than the burst, takes its rows one at a time), keeps one
    stream in flight at a time: it pays for those lines the difference between one stream's
    price and the tile's (``morello.nodes.loop``). Absent: bursts are not modelled.

    ``fork_join`` is the cost of starting a parallel loop's threads and waiting for the last
    of them, paid once per run of the loop (see ``morello.nodes.parallel``).

    ``resources`` (optional) names the execution resources that run side by side (FMA units,
    load ports, the store port), each with the price it charges per use of a named
    coefficient or per line touched at a level: ``{"load": {"vector_load": 1, "L1": 0}}``.
    A kernel's terms priced by a resource leave the additive sum, and the work inside a
    register tile costs its busiest resource (``morello.cost``). Empty: purely additive.
    A resource named ``chain`` (its prices empty) is the wait on accumulator chains: a
    reduction loop over register accumulators uses it for ``chain_latency`` per trip,
    whatever the number of accumulators, so a step costs at least the latency of the
    accumulations it depends on instead of adding a share of it (``morello.nodes.loop``).
    """

    level_hit: Mapping[str, int] = attrs.field(converter=lambda m: dict(sorted(m.items())))
    named: Mapping[str, int] = attrs.field(converter=lambda m: dict(sorted(m.items())))
    stream_hit: Mapping[str, tuple[int, ...]] = attrs.field(
        factory=dict, converter=lambda m: {k: tuple(v) for k, v in sorted(m.items())}
    )
    stream_lines: int = 1
    stream_reuse: int = attrs.field(default=1)
    chain_latency: Mapping[str, int] = attrs.field(
        factory=dict, converter=lambda m: dict(sorted(m.items()))
    )
    stream_restart: Mapping[str, int] = attrs.field(
        factory=dict, converter=lambda m: dict(sorted(m.items()))
    )
    stream_burst: Mapping[str, int] = attrs.field(
        factory=dict, converter=lambda m: dict(sorted(m.items()))
    )
    fork_join: int = 0
    resources: Mapping[str, Mapping[str, int]] = attrs.field(
        factory=dict, converter=lambda m: {k: dict(sorted(v.items())) for k, v in m.items()}
    )

    @stream_burst.validator
    def _check_stream_burst(self, _attr: attrs.Attribute[Any], value: Mapping[str, int]) -> None:
        for level, lines in value.items():
            if level not in self.stream_hit:
                raise ValueError(f"stream_burst names {level!r}, which stream_hit does not price")
            if not isinstance(lines, int) or lines < 1:
                raise ValueError(f"stream_burst.{level} is {lines!r}, not a positive integer")

    @stream_reuse.validator
    def _check_stream_reuse(self, _attr: attrs.Attribute[Any], value: int) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"stream_reuse is {value!r}, not a positive integer")

    @resources.validator
    def _check_resources(self, _attr: attrs.Attribute[Any], value: Mapping[str, Any]) -> None:
        for name, prices in value.items():
            for term, price in prices.items():
                if term not in self.named and term not in self.level_hit:
                    raise ValueError(
                        f"resource {name!r} prices {term!r}, which is neither a named "
                        "coefficient nor a level"
                    )
                if not isinstance(price, int) or price < 0:
                    raise ValueError(f"resource {name!r}: price of {term!r} is {price!r}")

    def __hash__(self) -> int:
        return hash(
            (
                tuple(self.level_hit.items()),
                tuple(self.named.items()),
                tuple(self.stream_hit.items()),
                self.stream_lines,
                self.stream_reuse,
                tuple(self.chain_latency.items()),
                tuple(self.stream_restart.items()),
                tuple(self.stream_burst.items()),
                self.fork_join,
                tuple((k, tuple(v.items())) for k, v in self.resources.items()),
            )
        )

    def streams(self, level: str, runs: int, run_lines: int) -> bool:
        """Whether ``runs`` runs of ``run_lines`` lines at ``level`` are read as streams."""
        return runs <= len(self.stream_hit.get(level, ())) and (
            runs == 1 or run_lines >= self.stream_lines
        )

    def line_cost(self, level: str, runs: int, run_lines: int) -> int:
        """Cost per line at ``level`` of a tile of ``runs`` contiguous runs of ``run_lines``."""
        if self.streams(level, runs, run_lines):
            return self.stream_hit[level][runs - 1]
        hit = self.level_hit[level]
        return hit if runs == 1 else STRIDED * hit


#: A line of a strided tile (several runs, not read as streams) costs this many times the
#: level's ``level_hit`` (``CostCoefficients.line_cost``); ``calibration.fit`` keeps every
#: stream price at most this.
STRIDED: Final = 2


#: The libraries a benchmark peer may name: BLAS libraries, whose routines compute a matrix
#: product (how each is found: ``codegen/peers.py``), and array libraries, which compute any
#: op or graph from its index notation (``codegen/array_peers.py``).
BLAS_PEER_LIBRARIES = ("openblas", "mkl")
ARRAY_PEER_LIBRARIES = ("numpy", "jax")
PEER_LIBRARIES = BLAS_PEER_LIBRARIES + ARRAY_PEER_LIBRARIES


def _peer_library(_inst: object, _attr: attrs.Attribute[str], value: str) -> None:
    if value not in PEER_LIBRARIES:
        raise ValueError(f"unknown peer library {value!r} (known: {', '.join(PEER_LIBRARIES)})")


@attrs.frozen
class Peer:
    """A library that ``bench`` times generated code against, with the target's settings.

    Attributes:
        library: a BLAS library, ``openblas`` (the copy NumPy ships, always present) or
            ``mkl`` (Intel MKL, present when the ``mkl`` wheel is installed, e.g.
            ``pip install 'morello[peers]'``); or an array library running the op as array
            code, ``numpy`` (the sequence of its ops, its matrix products in NumPy's BLAS)
            or ``jax`` (the whole op compiled by ``jax.jit``, present when JAX is installed,
            e.g. ``pip install 'morello[jax]'``).
        env: environment variables the library reads when it loads (threads, instruction
            sets, compiler flags); the peer runs in a child process with them set.
        skip: routines the target's CPU could not run as the library would on it, by
            ``<routine>_<dtype>`` (``gemm_bf16``, ``gemv_f32``), each with the reason that
            ``bench`` reports instead of a time (e.g. a bf16 product on a CPU without bf16
            instructions, which a library may compute by a slow reference path).
    """

    library: str = attrs.field(validator=_peer_library)
    env: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=lambda env: tuple(sorted(dict(env).items()))
    )
    skip: tuple[tuple[str, str], ...] = attrs.field(
        default=(), converter=lambda skip: tuple(sorted(dict(skip).items()))
    )


@attrs.frozen(kw_only=True, cache_hash=True)
class Target:
    """A hardware target, as registered by a plugin.

    Attributes:
        name: the ``--target`` name.
        description: one line for ``--list-targets``.
        levels: memory levels, slowest first; the first is where spec parameters live.
        vector_types: SIMD types available for register-resident vectors.
        layouts: layout families the move rewrite may choose for new buffers.
        rule_sets: names of the rule files (without ``.rules``) this target enables.
        isa: CPU features the target has, named as its ``platform.features_field`` names
            them; rule files whose ``requires`` asks for more are skipped, and the features
            the chosen kernels require are checked before the code runs.
        compiler: compiler and flags producing code that runs on the target.
        platform: the architecture the code runs on, how to detect its features, and the
            emulator that runs it elsewhere.
        processors: cores available to parallel loops: the most threads a parallel loop
            may run on (``SynthesisContext.threads``, ``--threads``, is at most this).
        peers: the libraries ``bench`` times generated code against, each with the
            settings that hold it to what this target's CPU would run.
    """

    name: str
    description: str = ""
    levels: tuple[MemoryLevel, ...] = attrs.field(converter=tuple)
    vector_types: tuple[VectorType, ...] = attrs.field(default=(), converter=tuple)
    layouts: tuple[str, ...] = attrs.field(default=("row_major",), converter=tuple)
    rule_sets: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    isa: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    compiler: Compiler = attrs.field(factory=Compiler)
    platform: Platform = attrs.field(factory=Platform)
    processors: int = 1
    peers: tuple[Peer, ...] = attrs.field(default=(), converter=tuple)
    #: Indices of the levels that hold whole Specs (``MemoryLevel.whole_specs``), derived.
    whole_specs_levels: tuple[int, ...] = attrs.field(init=False, eq=False, repr=False)
    #: Position of each level by name, derived (``level_index``, on the search's hot path).
    _positions: dict[str, int] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        whole = tuple(i for i, lv in enumerate(self.levels) if lv.whole_specs)
        object.__setattr__(self, "whole_specs_levels", whole)
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise ValueError(f"target {self.name!r} declares a memory level twice")
        object.__setattr__(self, "_positions", {n: i for i, n in enumerate(names)})
        for lv in self.levels:
            if lv.ways < 0:
                raise ValueError(f"level {lv.name}: ways must not be negative, got {lv.ways}")
            if lv.folds < 0:
                raise ValueError(f"level {lv.name}: folds must not be negative, got {lv.folds}")
            if lv.whole_specs and (lv.addressed or lv.counts_registers or lv.packs):
                raise ValueError(
                    f"level {lv.name} holds whole Specs but is addressed, registers or packs: "
                    "only a cache that the hardware fills implicitly does"
                )
            if lv.packs_only and (lv.addressed or not lv.packs):
                # (A level that holds whole Specs and packs was refused just above.)
                raise ValueError(
                    f"level {lv.name} holds only packed copies but is addressed or packs into "
                    "no layout: only a cache that packs does"
                )
            if lv.per_buffer and (not lv.addressed or lv.counts_registers):
                raise ValueError(
                    f"level {lv.name} bounds each buffer on its own but is a cache or "
                    "registers: only an addressed level counted in bytes does"
                )
            if lv.packs and lv.addressed:
                raise ValueError(
                    f"level {lv.name} packs but is addressed: only a cache level packs "
                    "(moves into an addressed level always make new buffers)"
                )
            for name in lv.packs:
                if layout_by_name(name, 2) is None:
                    raise ValueError(f"level {lv.name} packs into unknown layout {name!r}")
            for dest in lv.moves_to:
                if dest not in names:
                    raise ValueError(f"level {lv.name} moves to unknown level {dest!r}")
            for other in lv.shares:
                if other not in names or other == lv.name:
                    raise ValueError(
                        f"level {lv.name} shares registers with unknown level {other!r}"
                    )
                if not (lv.counts_registers and self.level(other).counts_registers):
                    raise ValueError(
                        f"level {lv.name} shares with {other}: only register levels share"
                    )
                if lv.capacity != self.level(other).capacity:
                    raise ValueError(
                        f"level {lv.name} shares with {other} but their capacities differ "
                        f"({lv.capacity} and {self.level(other).capacity}): one file has one size"
                    )

    def sharing(self, level_idx: int, units: int) -> tuple[int, ...]:
        """The level at ``level_idx`` and the levels it shares registers with (indices):
        the limits a move of ``units`` into it lowers, and the peaks it raises (only its
        own for a move small enough to fold, see ``MemoryLevel.folds``)."""
        lv = self.levels[level_idx]
        names = lv.shares
        if not names or units <= lv.folds:
            return (level_idx,)
        return (level_idx, *(self._positions[n] for n in names))

    def level(self, name: str) -> MemoryLevel:
        """The level named ``name``; KeyError if absent."""
        return self.levels[self._positions[name]]

    def level_index(self, level: str | MemoryLevel) -> int:
        """Position in ``levels`` of ``level`` (a level of this target, or its name)."""
        return self._positions[level if isinstance(level, str) else level.name]

    def vector_type(self, dtype: str | Dtype, lanes: int) -> VectorType | None:
        """The vector type holding ``lanes`` elements of ``dtype`` (a Dtype or its name)."""
        name = str(dtype)
        for vt in self.vector_types:
            if vt.dtype == name and vt.lanes == lanes:
                return vt
        return None

    def max_limits(self) -> tuple[int, ...]:
        """Memory limits of a root Spec: every level's capacity, snapped down to a power of two.

        All limits are powers of two (see ``spec.subtract_limits``).
        """
        return tuple(1 << (lv.limit_units.bit_length() - 1) for lv in self.levels)
