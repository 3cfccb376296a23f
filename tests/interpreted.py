"""What tests of compiled code compare with: random nested lists of Floats, and the reference
interpreter's result (or its error) for each call."""

from __future__ import annotations

import random

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
