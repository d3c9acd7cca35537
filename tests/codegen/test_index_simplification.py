"""A packed layout's ``/`` and ``%`` in the generated C go where the loops show them exact.

An element of a packed buffer sits at ``(coord / block) * stride + (coord % block)``. Where
the coordinate is a multiple of the block plus a rest that stays within ``[0, block)`` for
every value of the loops open around it, the two are the multiple's quotient and the rest,
and the C says so (``Lin.floordiv``, ``Lin.mod`` with ``Emitter.for_loop``'s bounds): a k
loop of 256 steps inside a block of 256 indexes ``4 * k + 1024 * t + 262144 * kb``, not
``4 * ((256 * kb + k) % 256) + ...``, which gcc keeps in the loop.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from morello.codegen.c import Emitter, Lin
from morello.codegen.compile import compile_shared
from morello.codegen.harness import check
from morello.codegen.header import lower_to_c
from morello.codegen.names import Names
from morello.context import SynthesisContext
from morello.lang.spec_file import build_program, parse_spec_file
from morello.search.solve import synthesize


def _value(expr: Lin, env: dict[str, int]) -> int:
    """``expr`` at the variables' values (C's ``/`` of non-negative values is ``//``)."""
    return int(eval(expr.render().replace(" / ", " // "), {}, dict(env)))


def _in_loops(loops: list[tuple[str, int, int]], body: object) -> None:
    """Run ``body`` inside ``for_loop``s of ``loops`` (name, start, stop), outermost first."""
    em = Emitter(None, Names())  # type: ignore[arg-type]

    def nest(i: int) -> None:
        if i == len(loops):
            body()  # type: ignore[operator]
            return
        name, start, stop = loops[i]
        em.for_loop(name, start, stop, lambda: nest(i + 1))

    nest(0)


@settings(max_examples=300, deadline=None)
@given(
    coefs=st.lists(st.integers(-40, 300), min_size=1, max_size=3),
    trips=st.lists(st.integers(1, 9), min_size=3, max_size=3),
    starts=st.lists(st.integers(0, 2), min_size=3, max_size=3),
    const=st.integers(0, 600),
    k=st.sampled_from([2, 3, 4, 8, 16, 24, 256]),
)
def test_quotient_and_rest_are_exact_for_every_value_of_the_loops(
    coefs: list[int], trips: list[int], starts: list[int], const: int, k: int
) -> None:
    names = [f"i{n}" for n in range(len(coefs))]
    loops = [(v, starts[n], starts[n] + trips[n]) for n, v in enumerate(names)]
    low = sum(c * (lo if c > 0 else hi - 1) for c, (_, lo, hi) in zip(coefs, loops, strict=True))
    expr = Lin(const - min(low, 0), tuple(zip(names, coefs, strict=True)))  # never negative
    got: list[tuple[Lin, Lin]] = []
    _in_loops(loops, lambda: got.append((expr.floordiv(k), expr.mod(k))))
    ((quotient, rest),) = got
    for values in itertools.product(*(range(lo, hi) for _, lo, hi in loops)):
        env = dict(zip(names, values, strict=True))
        whole = _value(expr, env)
        assert _value(quotient, env) == whole // k, (expr, k, env, quotient.render())
        assert _value(rest, env) == whole % k, (expr, k, env, rest.render())


def test_a_rest_within_the_block_drops_the_division() -> None:
    kb, k = Lin.var("kb"), Lin.var("k")
    coord = kb.scale(256) + k
    got: list[str] = []
    _in_loops(
        [("kb", 0, 4), ("k", 0, 256)],
        lambda: got.extend([coord.floordiv(256).render(), coord.mod(256).render()]),
    )
    assert got == ["kb", "k"]
    # Past its loop, k's range is unknown again: nothing is dropped.
    assert coord.mod(256).render() == "((256 * kb + k) % 256)"
    # A constant rest needs no loop: (96 * i + 8) % 16 is 8 whatever i is.
    assert (Lin.var("i").scale(96) + 8).mod(16).render() == "8"
    assert (Lin.var("i").scale(96) + 24).floordiv(16).render() == "6 * i + 1"


def test_a_rest_that_may_cross_the_block_keeps_it() -> None:
    coord = Lin.var("t").scale(4) + Lin.var("r")
    got: list[str] = []
    _in_loops([("t", 0, 8), ("r", 0, 5)], lambda: got.append(coord.mod(4).render()))
    assert got == ["((4 * t + r) % 4)"]  # r reaches 4


@pytest.mark.runs_code
def test_a_product_over_packed_rows_indexes_without_division(
    ctx: SynthesisContext, tmp_path: Path
) -> None:
    # On zen1, before the loops' bounds were used, three of a's reads kept ((4 * i + r) % 4).
    text = (
        "func f(a: f32[32, 64] packed_rows(4), b: f32[64, 48]) -> c: f32[32, 48] {\n"
        "    c = matmul(a, b)\n}\n"
    )
    (func,) = parse_spec_file("<test>", text).funcs
    prog = build_program(func, ctx)
    impl, _ = synthesize(prog.spec, ctx, {})
    source = lower_to_c("packed", [(prog, impl)], ctx)
    body = source.c_text[source.c_text.index("{") :]
    assert not re.search(r"\ba\[[^]]*[/%]", body), body
    check(compile_shared(source.c_text, ctx.target, tmp_path), prog, ctx)
