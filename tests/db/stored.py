"""Waiting on a memo-table file that another process is filling (the kill tests)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

from morello.db.sqlite import file_stats


def wait_until_stored(
    db: Path, more_than: int, proc: subprocess.Popen[Any], seconds: float = 120
) -> None:
    """Return once ``db`` holds more than ``more_than`` solved Specs, ``proc`` has ended, or
    ``seconds`` have passed: a count, not a fixed sleep, since a loaded machine is slow."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
        try:
            if file_stats(db)["solved"] > more_than:
                return
        except Exception:  # the file may not exist yet, or be mid-write
            continue
