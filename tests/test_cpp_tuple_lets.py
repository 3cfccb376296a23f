"""cpp_backend.tuple_lets: a let of a tuple of scalars that is only taken apart becomes a let per
element taken, through the tests and lets that choose the tuple; anything else is left as it is."""

from __future__ import annotations

import dataclasses

from cpp_backend.tuple_lets import split_tuple_lets
from knossos.expr import distinct_nodes
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import parse_program

PROGRAM = """
(def taken Float ((x : Float) (y : Float))
  (let (d (if (gt x 0.0) (let (a (mul x y)) (tuple a (add a y))) (tuple 0.0 y)))
    (add (get$2$2 d) (mul 2.0 (get$2$2 d)))))
(def whole (Tuple Float Float) ((x : Float))
  (let (d (if (gt x 0.0) (tuple x 1.0) (tuple 0.0 2.0))) d))
(def computed Float ((x : Float) (v : Vec Float))
  (let (d (tuple (index 3 v) x)) (get$2$2 d)))
(def substituted Float ((x : Float) (y : Float))
  (mul 3.0 (get$1$2 (if (gt x 0.0) (tuple (mul x y) (add (mul x x) y)) (tuple 0.0 0.0)))))
(def read_dropped Float ((x : Float) (v : Vec Float))
  (get$2$2 (if (gt x 0.0) (tuple (index 3 v) x) (tuple 0.0 0.0))))
"""


def _split(name: str) -> tuple[object, object]:
    program = parse_program(PROGRAM, "tuples.ks")
    d = program.defs[name]
    return d, dataclasses.replace(d, body=split_tuple_lets(d.body))


def test_a_tuple_only_taken_apart_is_a_let_per_element() -> None:
    d, split = _split("taken")
    assert not any(x.op in (Op.TUPLE, Op.GET) for x in distinct_nodes(split.body))  # type: ignore[attr-defined]
    for x, y in ((1.5, -2.0), (-1.0, 3.0), (0.0, -0.0)):
        assert Interpreter().call(split, [x, y]) == Interpreter().call(d, [x, y])  # type: ignore[arg-type]


def test_a_tuple_used_whole_or_dropping_a_read_is_left() -> None:
    for name in ("whole", "computed"):  # the tuple is the value; an element not taken could fail
        d, split = _split(name)
        assert split.body is d.body  # type: ignore[attr-defined]


def test_an_element_taken_of_a_tuple_s_term_is_that_element_s_term() -> None:
    """A search substitutes the let of the tuple (and of its elements' lets): ``(get$1$2 (if t (tuple a
    b) (tuple 0.0 0.0)))`` is ``(if t a 0.0)`` where the dropped element is Float arithmetic."""
    d, split = _split("substituted")
    assert not any(x.op in (Op.TUPLE, Op.GET) for x in distinct_nodes(split.body))  # type: ignore[attr-defined]
    for x, y in ((1.5, -2.0), (-1.0, 3.0), (0.0, -0.0), (2.0, float("inf"))):
        assert Interpreter().call(split, [x, y]) == Interpreter().call(d, [x, y])  # type: ignore[arg-type]
    d, split = _split("read_dropped")  # dropping (index 3 v) would drop a read that could fail
    assert split.body is d.body  # type: ignore[attr-defined]
