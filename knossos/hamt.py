"""A persistent hash trie from names to pairs of integers (a hash array mapped trie).

:mod:`knossos.alpha` keeps each node's positions of its free variables in one: a node shares its
largest child's trie and adds or removes only a few entries, each change copying one path of at
most 13 small tuples, so a let chain's tries take space and time linear (times a logarithm) in its
length where per-node dictionaries would take its square.

A trie is ``None`` (empty) or a branch ``(bitmap, entries)``: entry ``k`` is for the ``k``-th set
bit of ``bitmap``, the bit taken from five bits of the name's hash at this level, and is a leaf
``(name, hash, p, n)`` or a branch one level down.  Past the hash's 64 bits a branch with bitmap -1
holds the leaves of names whose hashes are equal, in a list searched in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Union

HamtLeaf = tuple[str, int, int, int]
_Branch = tuple[int, tuple[Union["_Branch", HamtLeaf], ...]]
_Trie = Union[_Branch, None]

_MASK64: Final = (1 << 64) - 1
_LAST_SHIFT: Final = 60  # the last level that has hash bits (bits 60..63)


def key_hash(name: str) -> int:
    return hash(name) & _MASK64


def lookup(trie: _Trie, name: str, h: int) -> HamtLeaf | None:
    """The leaf of ``name`` (whose :func:`key_hash` is ``h``), or None."""
    shift = 0
    node = trie
    while node is not None:
        bitmap, entries = node
        if bitmap < 0:
            for leaf in entries:
                if leaf[0] == name:
                    return leaf  # type: ignore[return-value]
            return None
        bit = 1 << ((h >> shift) & 31)
        if not bitmap & bit:
            return None
        entry = entries[(bitmap & (bit - 1)).bit_count()]
        if len(entry) == 4:
            return entry if entry[0] == name else None  # type: ignore[return-value]
        node = entry  # type: ignore[assignment]
        shift += 5
    return None


def put(trie: _Trie, leaf: HamtLeaf, shift: int = 0) -> _Branch:
    """``trie`` with ``leaf`` in it (in place of the leaf of the same name, if any)."""
    name, h = leaf[0], leaf[1]
    if trie is None:
        return (1 << ((h >> shift) & 31), (leaf,)) if shift <= _LAST_SHIFT else (-1, (leaf,))
    bitmap, entries = trie
    if bitmap < 0:
        kept = tuple(e for e in entries if e[0] != name)
        return (-1, (*kept, leaf))
    bit = 1 << ((h >> shift) & 31)
    i = (bitmap & (bit - 1)).bit_count()
    if not bitmap & bit:
        return (bitmap | bit, (*entries[:i], leaf, *entries[i:]))
    entry = entries[i]
    if len(entry) == 4:
        if entry[0] == name:
            new: _Branch | HamtLeaf = leaf
        else:  # two names meet here: a branch one level down holds both
            new = put(put(None, entry, shift + 5), leaf, shift + 5)  # type: ignore[arg-type]
    else:
        new = put(entry, leaf, shift + 5)  # type: ignore[arg-type]
    return (bitmap, (*entries[:i], new, *entries[i + 1 :]))


def remove(trie: _Trie, name: str, h: int, shift: int = 0) -> _Trie:
    """``trie`` without ``name`` (the same trie if it has none)."""
    if trie is None:
        return None
    bitmap, entries = trie
    if bitmap < 0:
        kept = tuple(e for e in entries if e[0] != name)
        return (-1, kept) if kept else None
    bit = 1 << ((h >> shift) & 31)
    if not bitmap & bit:
        return trie
    i = (bitmap & (bit - 1)).bit_count()
    entry = entries[i]
    if len(entry) == 4:
        if entry[0] != name:
            return trie
        if bitmap == bit:
            return None
        return (bitmap & ~bit, (*entries[:i], *entries[i + 1 :]))
    new = remove(entry, name, h, shift + 5)  # type: ignore[arg-type]
    if new is entry:
        return trie
    if new is None:
        return (bitmap & ~bit, (*entries[:i], *entries[i + 1 :])) if bitmap != bit else None
    return (bitmap, (*entries[:i], new, *entries[i + 1 :]))


def iter_leaves(trie: _Trie) -> Iterator[HamtLeaf]:
    """Every leaf, in no particular order."""
    if trie is None:
        return
    stack = [trie[1]]
    while stack:
        for entry in stack.pop():
            if len(entry) == 4:
                yield entry  # type: ignore[misc]
            else:
                stack.append(entry[1])  # type: ignore[arg-type]
