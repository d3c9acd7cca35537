"""Deterministic C names: handed out in first-use order, never from ids or hashes."""

from __future__ import annotations

import re

_ELEMENT_SUFFIX = re.compile(r"_[0-9]+$")

#: C's keywords (C11 and C23, those not beginning with an underscore) and NULL: no function or
#: parameter may be so named (the spec file's check pass says so).
C_KEYWORDS = frozenset(
    """alignas alignof auto bool break case char const constexpr continue default do double else
    enum extern false float for goto if inline int long nullptr register restrict return
    short signed sizeof static static_assert struct switch thread_local true typedef typeof
    typeof_unqual union unsigned void volatile while NULL""".split()  # noqa: SIM905 (a list of words)
)

#: C++'s keywords and alternative tokens that C lacks: the header is included from C++ too.
CXX_KEYWORDS = frozenset(
    """and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept
    const_cast consteval constinit co_await co_return co_yield decltype delete dynamic_cast
    explicit export friend mutable namespace new noexcept not not_eq operator or or_eq private
    protected public reinterpret_cast requires static_cast template this throw try typeid
    typename using virtual wchar_t xor xor_eq""".split()  # noqa: SIM905 (a list of words)
)


def respelled(name: str, suffix: str, taken: set[str]) -> str:
    """``name + suffix``, or ``name + suffix + "1"``, ``... "2"``, the first not in ``taken``
    (which it joins): another spelling of a name that cannot be used as it is."""
    new, k = name + suffix, 0
    while new in taken:
        k += 1
        new = f"{name}{suffix}{k}"
    taken.add(new)
    return new


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
