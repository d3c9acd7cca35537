"""Progress bars: on a terminal, a synthesis that runs for more than a second shows one."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

pytestmark = pytest.mark.target("zen1")


def _run_on_a_terminal(argv: list[str]) -> tuple[int, str]:
    """Run ``argv`` with a 100-column terminal as stdout and stderr; its exit code and output.

    The child is started by ``subprocess`` (no ``os.fork`` in this process, which a library
    another test imported here, such as JAX, warns against: its threads do not survive one).
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # the terminal closes when the child exits
            break
        if not chunk:
            break
        out += chunk
    code = proc.wait()
    os.close(master)
    return code, out.decode(errors="replace")


def test_a_long_synthesis_on_a_terminal_shows_specs_solved(tmp_path: Path) -> None:
    spec = tmp_path / "mm.lark"
    spec.write_text(
        "func mm_24(a: f32[24, 24], b: f32[24, 24]) -> c: f32[24, 24] { c = matmul(a, b) }\n"
    )
    argv = [sys.executable, "-m", "morello", "-t", "zen1", str(spec), "--no-db", "-o"]
    code, out = _run_on_a_terminal([*argv, str(tmp_path / "mm")])
    assert code == 0, out
    assert "synthesizing mm_24: " in out and " Specs solved [" in out, out[-500:]


def test_a_short_synthesis_or_no_terminal_shows_none(tmp_path: Path) -> None:
    spec = tmp_path / "mm.lark"
    spec.write_text("func mm_2(a: f32[2, 2], b: f32[2, 2]) -> c: f32[2, 2] { c = matmul(a, b) }\n")
    argv = [sys.executable, "-m", "morello", "-t", "zen1", str(spec), "--no-db", "-o"]
    code, out = _run_on_a_terminal([*argv, str(tmp_path / "mm")])
    assert code == 0, out
    assert "Specs solved" not in out
