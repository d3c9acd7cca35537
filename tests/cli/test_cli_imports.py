"""Start-up: synthesizing a spec imports only what synthesis needs.

NumPy, networkx, JAX, Dask and the modules that compile, run, check or time code are imported
by the commands that need them (``--check``, ``bench``, ``precompute``), not by printing C,
writing it, or printing the Impl and statistics. A fresh interpreter runs the command line
in-process and then lists the modules it holds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_SPEC = "func mm(a: f32[4, 4], b: f32[4, 4]) -> c: f32[4, 4] {\n    c = matmul(a, b)\n}\n"

_DRIVER = """\
import sys
import morello.cli
args = sys.argv[1:]
for extra in (["-o", args.pop()], ["--impl", "--stats"], []):
    assert morello.cli.main([*args, *extra]) == 0, extra
print("MODULES", *sorted(sys.modules))
"""

_NOT_IMPORTED = [
    "numpy",
    "networkx",
    "jax",
    "dask",
    "distributed",
    "morello.codegen.bench",
    "morello.codegen.peers",
    "morello.codegen.array_peers",
    "morello.codegen.harness",
    "morello.codegen.runner",
    "morello.codegen.compile",
    "morello.codegen.limits",
]


def test_cli_synthesis_imports_no_numpy_networkx_or_runners(
    tmp_path: Path, target_name: str
) -> None:
    spec = tmp_path / "mm.lark"
    spec.write_text(_SPEC, encoding="utf-8")
    argv = ["--target", target_name, str(spec), "--no-db", str(tmp_path / "out" / "mm")]
    result = subprocess.run(
        [sys.executable, "-c", _DRIVER, *argv], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "out" / "mm.c").is_file()
    (line,) = [ln for ln in result.stdout.splitlines() if ln.startswith("MODULES ")]
    modules = set(line.split()[1:])
    assert "morello.search.solve" in modules
    imported = [
        m for m in _NOT_IMPORTED if m in modules or any(n.startswith(m + ".") for n in modules)
    ]
    assert imported == [], f"synthesis imported {imported}"
