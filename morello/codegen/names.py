"""Deterministic C names: handed out in first-use order, never from ids or hashes."""

from __future__ import annotations

import re


class Names:
    """A counter-based name source for one generated function."""

    def __init__(self, reserved: set[str] | None = None) -> None:
        self._next: dict[str, int] = {}
        self._reserved = set(reserved or ())

    def fresh(self, prefix: str) -> str:
        """A new name ``prefix<N>`` not used before in this function."""
        while True:
            n = self._next.get(prefix, 0)
            self._next[prefix] = n + 1
            name = f"{prefix}{n}"
            if name not in self._reserved:
                self._reserved.add(name)
                return name


_C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Bool _Complex _Imaginary".split()
)


def is_c_identifier(name: str) -> bool:
    """Whether ``name`` can be used as a C identifier."""
    return bool(_C_IDENT.match(name)) and name not in C_KEYWORDS
