"""Free-name sets: frozensets while small, a persistent hash set (:class:`FreeSet`) once large.

Every node keeps the names of its free variables (:attr:`knossos.node.Expr.free`), and a parent's
are its children's united, a binder's its scope's less the bound name.  As frozensets each node
would own a copy: in the backward pass of a long let chain, where thousands of nested lets each see
thousands of names, the copies take the square of the chain's length.  A set of more than
:data:`LARGE` names is therefore a :class:`FreeSet`, a hash array mapped trie that shares all but
the changed paths with the set it was made from, so a chain's sets take space linear in its length
(times a logarithm).  Small sets, which search reads all the time, stay frozensets.

A :class:`FreeSet` answers what a frozenset does (``in``, iteration, ``len``, comparisons,
``isdisjoint`` and the set operators, with frozensets on either side); operations give a frozenset
again when the result is small.  Use :func:`join` to unite free sets: ``a | b`` of two frozensets is
a frozenset of any size.

A trie is a tuple ``(bitmap, *entries)``: entry ``k`` is for the ``k``-th set bit of ``bitmap`` (the
bit taken from five bits of the name's hash at this level) and is a name or a trie one level down.
Past the hash's 64 bits, a trie with bitmap -1 lists the names whose hashes are equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Set
from typing import Final, Union

#: Sets of more names than this are :class:`FreeSet`\\ s, of this many or fewer frozensets.
LARGE: Final = 64

_Trie = tuple[Union[int, str, "_Trie"], ...]

_MASK64: Final = (1 << 64) - 1
_LAST_SHIFT: Final = 60  # the last level that has hash bits (bits 60..63)


def _hash(name: str) -> int:
    return hash(name) & _MASK64


def _contains(trie: _Trie, name: str, h: int, shift: int = 0) -> bool:
    while True:
        bitmap: int = trie[0]  # type: ignore[assignment]
        if bitmap < 0:
            return name in trie[1:]
        bit = 1 << ((h >> shift) & 31)
        if not bitmap & bit:
            return False
        entry = trie[1 + (bitmap & (bit - 1)).bit_count()]
        if type(entry) is str:
            return entry == name
        trie = entry  # type: ignore[assignment]
        shift += 5


def _put(trie: _Trie | None, name: str, h: int, shift: int = 0) -> _Trie:
    """``trie`` with ``name`` in it: the same trie if it has it already."""
    if trie is None:
        return (1 << ((h >> shift) & 31), name) if shift <= _LAST_SHIFT else (-1, name)
    bitmap: int = trie[0]  # type: ignore[assignment]
    if bitmap < 0:
        return trie if name in trie[1:] else (*trie, name)
    bit = 1 << ((h >> shift) & 31)
    i = 1 + (bitmap & (bit - 1)).bit_count()
    if not bitmap & bit:
        return (bitmap | bit, *trie[1:i], name, *trie[i:])
    entry = trie[i]
    if type(entry) is str:
        if entry == name:
            return trie
        new = _put(_put(None, entry, _hash(entry), shift + 5), name, h, shift + 5)  # both, one level down
    else:
        new = _put(entry, name, h, shift + 5)  # type: ignore[arg-type]
        if new is entry:
            return trie
    return (bitmap, *trie[1:i], new, *trie[i + 1 :])


def _remove(trie: _Trie, name: str, h: int, shift: int = 0) -> _Trie | None:
    """``trie`` without ``name`` (the same trie if it has none; None if nothing is left)."""
    bitmap: int = trie[0]  # type: ignore[assignment]
    if bitmap < 0:
        if name not in trie[1:]:
            return trie
        kept = tuple(e for e in trie[1:] if e != name)
        return (-1, *kept) if kept else None
    bit = 1 << ((h >> shift) & 31)
    if not bitmap & bit:
        return trie
    i = 1 + (bitmap & (bit - 1)).bit_count()
    entry = trie[i]
    if type(entry) is str:
        new: _Trie | str | None = None if entry == name else entry
    else:
        new = _remove(entry, name, h, shift + 5)  # type: ignore[arg-type]
        if new is not None and len(new) == 2 and type(new[1]) is str:
            new = new[1]  # a lone name moves up
    if new is entry:
        return trie
    if new is None:
        return None if bitmap == bit else (bitmap & ~bit, *trie[1:i], *trie[i + 1 :])
    return (bitmap, *trie[1:i], new, *trie[i + 1 :])


def _names(trie: _Trie) -> Iterator[str]:
    stack = [trie]
    while stack:
        for entry in stack.pop()[1:]:
            if type(entry) is str:
                yield entry
            else:
                stack.append(entry)  # type: ignore[arg-type]


def _within(a: _Trie | str, b: _Trie | str, shift: int) -> bool:
    """Whether every name of ``a`` is in ``b`` (both at level ``shift``); shared parts are skipped."""
    if a is b:
        return True
    if type(a) is str:
        return a == b if type(b) is str else _contains(b, a, _hash(a), shift)  # type: ignore[arg-type]
    if type(b) is str or a[0] == -1 or b[0] == -1:  # type: ignore[index]
        return all(_within(n, b, shift) for n in _names(a))  # type: ignore[arg-type]
    ba: int = a[0]  # type: ignore[assignment,index]
    bb: int = b[0]  # type: ignore[assignment,index]
    if ba & ~bb:
        return False
    i = 1
    while ba:
        bit = ba & -ba
        j = 1 + (bb & (bit - 1)).bit_count()
        if not _within(a[i], b[j], shift + 5):  # type: ignore[arg-type,index]
            return False
        ba ^= bit
        i += 1
    return True


class FreeSet(Set[str]):
    """An immutable set of more than :data:`LARGE` names that shares structure with the sets it was
    made from (see the module docstring).  Build one with :func:`free_set`."""

    __slots__ = ("_hash_value", "_len", "_trie")

    _trie: _Trie
    _len: int
    _hash_value: int | None

    def __init__(self, names: Iterable[str] = ()) -> None:
        trie: _Trie = (0,)
        n = 0
        for name in names:
            new = _put(trie, name, _hash(name))
            n += new is not trie
            trie = new
        self._trie = trie
        self._len = n
        self._hash_value = None

    @classmethod
    def _of(cls, trie: _Trie | None, n: int) -> FreeNames:
        """The ``n`` names of ``trie``: a frozenset if few."""
        if trie is None or n <= LARGE:
            return frozenset(_names(trie)) if trie is not None else EMPTY
        s = object.__new__(cls)
        s._trie, s._len, s._hash_value = trie, n, None
        return s

    def __contains__(self, name: object) -> bool:
        return type(name) is str and _contains(self._trie, name, _hash(name))

    def __iter__(self) -> Iterator[str]:
        return _names(self._trie)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return True  # never empty

    def __hash__(self) -> int:  # a frozenset of the same names is equal, so it hashes alike
        if self._hash_value is None:
            self._hash_value = hash(frozenset(self))
        return self._hash_value

    def __repr__(self) -> str:
        return f"FreeSet({sorted(self)!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (FreeSet, (tuple(self),))

    # -- comparisons ---------------------------------------------------------------------------
    def __le__(self, other: Set[object]) -> bool:
        if isinstance(other, FreeSet):
            return self._len <= other._len and _within(self._trie, other._trie, 0)
        return isinstance(other, Set) and self._len <= len(other) and all(n in other for n in self)

    def __ge__(self, other: Set[object]) -> bool:
        if isinstance(other, FreeSet):
            return other.__le__(self)
        return isinstance(other, Set) and len(other) <= self._len and all(n in self for n in other)

    def __lt__(self, other: Set[object]) -> bool:
        return self.__le__(other) and self._len != len(other)

    def __gt__(self, other: Set[object]) -> bool:
        return self.__ge__(other) and self._len != len(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Set):
            return NotImplemented
        return self._len == len(other) and self.__le__(other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def issubset(self, other: Iterable[str]) -> bool:
        return self.__le__(other if isinstance(other, Set) else frozenset(other))

    def issuperset(self, other: Iterable[str]) -> bool:
        return all(n in self for n in other)

    def isdisjoint(self, other: Iterable[object]) -> bool:
        if isinstance(other, Set) and len(other) > self._len:
            return not any(n in other for n in self)
        return not any(n in self for n in other)

    # -- operations ----------------------------------------------------------------------------
    def __or__(self, other: Iterable[str]) -> FreeNames:  # type: ignore[override]
        if isinstance(other, FreeSet) and other._len > self._len:
            return other.__or__(self)
        trie, n = self._trie, self._len
        for name in other:
            new = _put(trie, name, _hash(name))
            n += new is not trie
            trie = new
        return self if trie is self._trie else FreeSet._of(trie, n)

    __ror__ = __or__

    def union(self, *others: Iterable[str]) -> FreeNames:
        result: FreeNames = self
        for other in others:
            result = result | (other if isinstance(other, Set) else frozenset(other))
        return result

    def __sub__(self, other: Iterable[object]) -> FreeNames:  # type: ignore[override]
        if isinstance(other, Set) and len(other) * 8 >= self._len:  # most go: keep the rest
            return free_set(n for n in self if n not in other)
        trie: _Trie | None = self._trie
        n = self._len
        for name in other:
            if type(name) is str and trie is not None:
                new = _remove(trie, name, _hash(name))
                n -= new is not trie
                trie = new
        return self if trie is self._trie else FreeSet._of(trie, n)

    def difference(self, *others: Iterable[object]) -> FreeNames:
        result: FreeNames = self
        for other in others:
            result = result - other  # type: ignore[operator]
        return result

    def __rsub__(self, other: Iterable[str]) -> FreeNames:
        return free_set(n for n in other if n not in self)

    def __and__(self, other: Iterable[object]) -> FreeNames:  # type: ignore[override]
        if isinstance(other, Set) and len(other) <= self._len:
            return free_set(n for n in other if n in self)  # type: ignore[misc]
        return free_set(n for n in self if n in other)

    __rand__ = __and__

    def intersection(self, *others: Iterable[object]) -> FreeNames:
        result: FreeNames = self
        for other in others:
            result = result & (other if isinstance(other, Set) else frozenset(other))  # type: ignore[operator]
        return result

    def __xor__(self, other: Iterable[str]) -> FreeNames:  # type: ignore[override]
        o = other if isinstance(other, Set) else frozenset(other)
        return (self - o) | (o - self)  # type: ignore[operator]

    __rxor__ = __xor__


FreeNames = Union[frozenset[str], FreeSet]


EMPTY: Final[frozenset[str]] = frozenset()


def free_set(names: Iterable[str]) -> FreeNames:
    """``names`` as a free-name set: a frozenset of at most :data:`LARGE` names, else a :class:`FreeSet`."""
    small = frozenset(names)
    return FreeSet(small) if len(small) > LARGE else small


def join(a: FreeNames, b: FreeNames) -> FreeNames:
    """The names of ``a`` and ``b`` (``a`` or ``b`` itself when one holds the other)."""
    if not b or b is a:
        return a
    if not a:
        return b
    united = a | b
    if type(united) is frozenset and len(united) > LARGE:
        return FreeSet(united)
    return united


def footprint(sets: Iterable[FreeNames]) -> int:
    """How many entries ``sets`` hold together: a frozenset's names, and the entries of the tries
    of the :class:`FreeSet`\\ s with each trie counted once however many sets share it."""
    total = 0
    seen: set[int] = set()
    for s in sets:
        if id(s) in seen:
            continue
        seen.add(id(s))
        if not isinstance(s, FreeSet):
            total += len(s)
            continue
        stack = [s._trie]
        while stack:
            trie = stack.pop()
            if id(trie) in seen:
                continue
            seen.add(id(trie))
            total += len(trie) - 1
            stack.extend(e for e in trie[1:] if type(e) is not str)  # type: ignore[misc]
    return total
