"""Kernels that bound a dim variable (``where n <= 15``) and render a lane mask (``{mask(n)}``).

A bound limits the extents a kernel matches; ``{mask(n)}`` renders the integer with the low
``n`` bits set, for masked loads and stores of a tail. Wrong uses are errors at their place.
Compiled tails (AVX-512 masks) are checked against NumPy in tests/targets/test_spr.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from morello.dtypes import dtype
from morello.errors import RuleError
from morello.lang import parse_rule_file
from morello.layout import row_major
from morello.rules.kernels import Kernel, lane_mask
from morello.spec import Spec, TensorSpec
from morello.target import MemoryLevel


def _tail(where: str) -> str:
    return (
        "kernel tail:\n"
        "    c: f32[1, n] @L1 contiguous = relu(a: f32[1, n] @L1 contiguous)\n"
        f"{where}"
        "    cost n * scalar_op\n"
        '    c "store({&c}, {mask(n)}, load({mask(n)}, {&a}), {n});"\n'
    )


def _parse(tmp_path: Path, text: str) -> Kernel:
    path = tmp_path / "k.rules"
    path.write_text(text)
    (kernel,) = parse_rule_file(path).kernels
    return kernel


L1 = MemoryLevel(name="L1", capacity=32 * 1024, addressed=False)


def _row(n: int) -> TensorSpec:
    return TensorSpec((1, n), dtype("f32"), L1, row_major(2))


def _relu(n: int) -> Spec:
    return Spec("relu", (_row(n), _row(n)), False, (0, 0, 0, 0), True)


@pytest.mark.parametrize(
    ("where", "bounds"),
    [("    where n <= 15\n", ("n", 1, 15)), ("    where 3 <= n <= 7\n", ("n", 3, 7))],
)
def test_a_bound_limits_the_extents_a_kernel_matches(
    tmp_path: Path, where: str, bounds: tuple[str, int, int]
) -> None:
    kernel = _parse(tmp_path, _tail(where))
    assert kernel.bounds == (bounds,)
    _, lo, hi = bounds
    for n in range(1, 20):
        got = kernel.match(_relu(n), lambda _name, _ts: True)
        assert (got == {"n": n}) == (lo <= n <= hi), n


def test_a_mask_renders_the_low_bits_of_the_bound_extent(tmp_path: Path) -> None:
    kernel = _parse(tmp_path, _tail("    where n <= 15\n"))
    line = kernel.render({"a": ("a[0]", "&a[0]"), "c": ("c[0]", "&c[0]")}, {"n": 5})
    assert line == ["store(&c[0], 0x1fu, load(0x1fu, &a[0]), 5);"]


def test_lane_masks_up_to_64_bits() -> None:
    assert [lane_mask(n) for n in (0, 1, 15, 16, 32, 33, 64)] == [
        "0x0u",
        "0x1u",
        "0x7fffu",
        "0xffffu",
        "0xffffffffu",
        "0x1ffffffffull",
        "0xffffffffffffffffull",
    ]
    with pytest.raises(ValueError, match=r"0\.\.64 bits, not 65"):
        lane_mask(65)


@pytest.mark.parametrize(
    ("where", "message"),
    [
        (
            "",
            "{path}:4:20: error: kernel tail: {mask(n)} needs a bound on 'n' of at most 64 "
            "lanes (add 'where n <= N' before the cost)",
        ),
        (
            "    where n <= 65\n",
            "{path}:5:20: error: kernel tail: {mask(n)} needs a bound on 'n' of at most 64 "
            "lanes (add 'where n <= N' before the cost)",
        ),
        (
            "    where m <= 15\n",
            "{path}:3:11: error: kernel tail: 'where' bounds 'm', which is not a dim variable "
            "of the pattern (dim variables: n)",
        ),
        ("    where n <= 4, n <= 8\n", "{path}:3:19: error: kernel tail: 'n' is bounded twice"),
        (
            "    where 9 <= n <= 8\n",
            "{path}:3:11: error: kernel tail: empty or non-positive bound 9 <= n <= 8",
        ),
        (
            "    where 0 <= n <= 8\n",
            "{path}:3:11: error: kernel tail: empty or non-positive bound 0 <= n <= 8",
        ),
    ],
)
def test_bad_bounds_and_masks_are_errors_at_their_place(
    tmp_path: Path, where: str, message: str
) -> None:
    path = tmp_path / "k.rules"
    path.write_text(_tail(where))
    with pytest.raises(RuleError) as info:
        parse_rule_file(path)
    assert str(info.value).splitlines()[0] == message.replace("{path}", str(path))


def test_a_mask_of_an_operand_is_an_error(tmp_path: Path) -> None:
    text = _tail("    where n <= 15\n").replace("{mask(n)}, {&a}", "{mask(a)}, {&a}")
    path = tmp_path / "k.rules"
    path.write_text(text)
    with pytest.raises(RuleError) as info:
        parse_rule_file(path)
    assert str(info.value).splitlines()[0] == (
        f"{path}:5:36: error: kernel tail: {{mask(a)}} names 'a', which is not a dim variable "
        "of the pattern"
    )
