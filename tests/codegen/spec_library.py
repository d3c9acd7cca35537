"""Test helper: synthesize every function of a spec file and compile them into one library.

Shared by the compile-and-compare tests, which batch many small functions per library so the
C compiler runs a few times rather than once per case.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from morello.codegen.compile import compile_shared
from morello.codegen.header import lower_to_c
from morello.context import SynthesisContext
from morello.impl import Impl
from morello.lang.spec_file import Program, build_program, parse_spec_file
from morello.search.solve import Solution, synthesize
from morello.spec import Spec

Built = tuple[Path, Program, Impl]


def compile_spec_text(
    unit: str,
    text: str,
    ctx: SynthesisContext,
    memo: dict[Spec, Solution | None],
    workdir: Path,
) -> dict[str, tuple[Path, Program, Impl]]:
    """Library path, Program and Impl of each function of ``text``, by function name.

    Syntheses share ``memo``; the library is built under ``workdir / unit``.
    """
    spec_file = parse_spec_file(f"<{unit}>", text)
    solved = []
    for func in spec_file.funcs:
        program = build_program(func, ctx)
        impl, _ = synthesize(program.spec, ctx, memo)
        solved.append((program, impl))
    source = lower_to_c(unit, solved, ctx)
    lib = compile_shared(source.c_text, ctx.target, workdir / unit, unit)
    return {program.name: (lib, program, impl) for program, impl in solved}


class Libraries:
    """Libraries compiled on demand, their syntheses sharing one memo dict."""

    def __init__(self, ctx: SynthesisContext, workdir: Path) -> None:
        self.ctx = ctx
        self.workdir = workdir
        self.memo: dict[Spec, Solution | None] = {}
        self.built: dict[str, Built] = {}

    def function(self, name: str, unit: str, text: Callable[[], str]) -> Built:
        """Function ``name``, building library ``unit`` from ``text()`` if it is not built yet."""
        if name not in self.built:
            self.built.update(compile_spec_text(unit, text(), self.ctx, self.memo, self.workdir))
        return self.built[name]
