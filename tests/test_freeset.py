"""Free-name sets: a FreeSet answers as the frozenset of its names does, small results are frozensets
again, and sets made from one another share their tries (issue 44: a let chain's free sets took the
square of its length)."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from knossos.freeset import LARGE, FreeSet, footprint, free_set, join

NAMES = [f"v{k}" for k in range(3 * LARGE)]
name_sets = st.frozensets(st.sampled_from(NAMES), max_size=2 * LARGE)


def canonical(s: object) -> bool:
    """At most LARGE names: a frozenset; more: a FreeSet."""
    return isinstance(s, FreeSet) == (len(s) > LARGE) and isinstance(s, FreeSet | frozenset)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(name_sets, name_sets)
def test_a_free_set_answers_as_the_frozenset_of_its_names(a: frozenset[str], b: frozenset[str]) -> None:
    fa, fb = free_set(a), free_set(b)
    assert canonical(fa) and canonical(fb)
    assert len(fa) == len(a) and set(fa) == a and hash(fa) == hash(a) and fa == a
    assert all((n in fa) == (n in a) for n in NAMES) and 3 not in fa
    for x, y in ((fa, fb), (fa, b), (a, fb)):  # a FreeSet on either side, or both
        for got, want in ((x | y, a | b), (x - y, a - b), (x & y, a & b), (x ^ y, a ^ b)):
            assert got == want and frozenset(got) == want
        assert ((x <= y), (x < y), (x >= y), (x > y), (x == y), (x != y)) == (
            (a <= b),
            (a < b),
            (a >= b),
            (a > b),
            (a == b),
            (a != b),
        )
        assert x.isdisjoint(y) == a.isdisjoint(b)
    united = join(fa, fb)
    assert united == a | b and canonical(united)
    for got in (fa - fb, fa & fb, fa | fb):
        assert canonical(got)
    assert pickle.loads(pickle.dumps(fa)) == a


def test_sets_made_from_one_another_share_their_tries() -> None:
    """A chain of sets, each one name more than the last (as a let chain's free sets are), holds a
    few entries per set, not the square of the chain's length."""
    n = 2000
    sets = [free_set(NAMES[: LARGE + 1])]
    for k in range(n):
        sets.append(join(sets[-1], frozenset({f"w{k}"})))
    sets.append(sets[-1] - {"w7"})
    assert len(sets[-2]) == LARGE + 1 + n and "w7" not in sets[-1] and sets[-1] <= sets[-2]
    assert all(isinstance(s, FreeSet) for s in sets)
    stored = footprint(sets)
    assert stored < 100 * n, stored  # copies would hold n * n / 2 = 2,000,000
    assert footprint([frozenset({"a", "b"}), sets[0], sets[0]]) == 2 + footprint([sets[0]])
