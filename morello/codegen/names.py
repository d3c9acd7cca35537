"""Deterministic C names: handed out in first-use order, never from ids or hashes."""

from __future__ import annotations

import re

_ELEMENT_SUFFIX = re.compile(r"_[0-9]+$")


class Names:
    """A counter-based name source for one generated function.

    A fresh name ``x`` also owns its element names ``x_0``, ``x_1``, ... (register tiles are
    one variable per element or vector), so it is never one whose element names could
    shadow a reserved name such as a parameter called ``v0_3``.
    """

    def __init__(self, reserved: set[str] | None = None) -> None:
        self._next: dict[str, int] = {}
        self._reserved = set(reserved or ())
        self._element_bases = {_ELEMENT_SUFFIX.sub("", r) for r in self._reserved}

    def fresh(self, prefix: str) -> str:
        """A new name ``prefix<N>`` not used before in this function."""
        while True:
            n = self._next.get(prefix, 0)
            self._next[prefix] = n + 1
            name = f"{prefix}{n}"
            if name not in self._reserved and name not in self._element_bases:
                self._reserved.add(name)
                return name

    def state(self) -> tuple[dict[str, int], set[str]]:
        """What ``restore`` needs to hand out the same names again."""
        return dict(self._next), set(self._reserved)

    def restore(self, state: tuple[dict[str, int], set[str]]) -> None:
        """Forget every name handed out since ``state`` was taken."""
        self._next, self._reserved = dict(state[0]), set(state[1])
