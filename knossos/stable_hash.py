"""Hashes that are the same in every process.

Python randomises ``hash(str)`` per process, which would make expression hashes, and with them the
order of anything keyed by expressions, differ from run to run.  Names are hashed here instead.
"""

from __future__ import annotations

import hashlib

_cache: dict[str, int] = {}


def stable_hash(name: str) -> int:
    """A 62-bit hash of ``name`` that does not depend on PYTHONHASHSEED."""
    h = _cache.get(name)
    if h is None:
        digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        h = int.from_bytes(digest, "little") >> 2
        _cache[name] = h
    return h
