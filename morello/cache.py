"""Files Morello keeps in the user's cache folder to start faster: parsed grammars and rule files.

The folder is ``$XDG_CACHE_HOME/morello`` (``~/.cache/morello`` when unset), where the memo
table's default file lives too. Every entry is a pickle of ``(key, value)``: it is used only
when its key equals the one asked for (a hash of everything the value was made from, this
Morello's code and the Python version), written atomically (a temporary file, then
``os.replace``), and a missing, unreadable, damaged or stale entry is simply rebuilt. The
cache never fails a run: where the folder cannot be written, nothing is kept.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Final

from morello import __version__

_FOLDER: Final = "morello"


def cache_dir() -> Path | None:
    """``$XDG_CACHE_HOME/morello`` (``~/.cache/morello`` when unset); None without a home."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:  # no HOME and no password entry
            return None
    return Path(base) / _FOLDER


@functools.cache
def code_fingerprint() -> str:
    """A hash of this Morello's version, its modules' source and the Python version, so an
    entry made by other code (an edited checkout, another release) is not reused."""
    h = hashlib.sha256(f"{__version__}\0{sys.version_info[:2]}\0".encode())
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(b"?")
    return h.hexdigest()


def entry_key(*parts: str | bytes) -> str:
    """The key of an entry made from ``parts`` by this code."""
    h = hashlib.sha256(code_fingerprint().encode())
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(len(data).to_bytes(8, "little") + data)
    return h.hexdigest()


def entry_path(kind: str, name: str) -> Path | None:
    """Where the entry ``name`` of ``kind`` (``grammars``, ``rules``) lives; None without a
    cache folder. ``name`` is hashed, so any text (a file's path) will do."""
    folder = cache_dir()
    if folder is None:
        return None
    return folder / kind / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".pickle")


def read_entry(path: Path | None, key: str) -> object | None:
    """The value stored at ``path`` under ``key``; None if there is none (or another key's, or
    the file is unreadable or damaged)."""
    if path is None:
        return None
    try:
        with path.open("rb") as f:
            stored = pickle.load(f)
    except Exception:  # missing, unreadable, truncated, or of classes that changed
        return None
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
        return None
    return stored[1]


def write_entry(path: Path | None, key: str, value: object) -> None:
    """Store ``value`` at ``path`` under ``key``, atomically; silently nothing if the folder
    cannot be written (or ``value`` cannot be pickled)."""
    if path is None:
        return
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            pickle.dump((key, value), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except Exception:  # a folder that cannot be written, a full disk, a value that won't pickle
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
