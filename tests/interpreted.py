"""What tests of compiled code compare with: random nested lists of Floats, the reference
interpreter's result (or its error) for each call, and the check that compiled results agree."""

from __future__ import annotations

import random

from cpp_backend.bench import values_agree
from knossos.errors import KsError
from knossos.interpreter import Interpreter
from knossos.program import Program


def random_array(shape: tuple[int, ...], rng: random.Random) -> object:
    """A nested list of ``shape`` of Floats of several magnitudes and signs."""
    if len(shape) == 1:
        return [rng.choice([0.5, -1.25, 3.0, 1e-3, -2.0]) * rng.random() for _ in range(shape[0])]
    return [random_array(shape[1:], rng) for _ in range(shape[0])]


def interpreted(program: Program, calls: list[tuple[str, list[object]]]) -> list[object]:
    """The interpreter's value of each (def, arguments) call, or the KsError it raised."""
    out: list[object] = []
    for name, args in calls:
        try:
            out.append(Interpreter().call(program.defs[name], args))
        except KsError as err:
            out.append(err)
    return out


def first_leaf(x: object) -> list[object]:
    """The first innermost list of a nested list (a row to shorten, for a ragged argument)."""
    while isinstance(x, list) and isinstance(x[0], list):
        x = x[0]
    assert isinstance(x, list)
    return x


def assert_agree(calls: list[tuple[str, list[object]]], want: list[object], have: list[object]) -> None:
    """Each call failed on both sides, or its values agree (cpp_backend.bench.values_agree)."""
    for (called, _), w, h in zip(calls, want, have, strict=True):
        if isinstance(w, KsError):
            assert isinstance(h, KsError), (called, h)
        else:
            assert values_agree(w, h), called  # type: ignore[arg-type]
