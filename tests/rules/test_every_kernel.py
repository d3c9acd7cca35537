"""Every kernel self-test: each kernel the CPU can run is synthesized, compiled and checked.

For each kernel of the target's rule set (skipped, or failed under ``MORELLO_REQUIRE_ISA=1``,
when the CPU lacks its ``requires``), ``morello.codegen.kernel_check`` (what ``python -m
morello kernels --check`` runs):

* its own pattern, instantiated as a Spec, must be matched by the kernel;
* a root Spec in main memory, with the kernel's op served by that kernel alone, must use it
  in its Impl, and the compiled C must match NumPy. A wrong template fails here and not
  three layers up.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from morello.codegen.kernel_check import check_kernel, leaf_spec, matches_own_pattern
from morello.context import SynthesisContext, make_context


def _target_name(config: pytest.Config) -> str:
    return config.getoption("--target") or os.environ.get("MORELLO_TEST_TARGET", "zen1")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "kernel_name" in metafunc.fixturenames:
        ruleset = make_context(_target_name(metafunc.config)).ruleset
        params = [
            pytest.param(k.name, marks=pytest.mark.runs_code(*k.requires), id=k.name)
            for k in ruleset.kernels
        ]
        metafunc.parametrize("kernel_name", params)


def test_kernel_matches_its_own_pattern(ctx: SynthesisContext, kernel_name: str) -> None:
    kernel = ctx.ruleset.kernel(kernel_name)
    assert matches_own_pattern(kernel, ctx), (
        f"{kernel_name} does not match its own pattern {leaf_spec(kernel, ctx).describe()}"
    )


def test_kernel_compiles_and_matches_numpy(
    ctx: SynthesisContext, kernel_name: str, tmp_path: Path
) -> None:
    report = check_kernel(ctx.ruleset.kernel(kernel_name), ctx, tmp_path)
    assert report.outcome == "passed", f"{report.location}: {report.detail}"
