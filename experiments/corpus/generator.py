"""Random arithmetic expressions to train and test value functions on, beyond the paper's sets.

The paper's arithmetic sets (bindgen, binding_simplify) are a few dozen Float expressions over ``x``
and ``y`` built from ``add sub mul div log`` and the constants 1, 2 and 3, whose savings come from a
few shapes (Table 5): a subexpression repeated (common-subexpression elimination with ``let``),
nested divisions, sums of fractions over one denominator, common factors, ``a / (a + 1)`` with ``a``
itself a fraction.  :class:`CorpusGenerator` writes random expressions of the same vocabulary that
are built from those shapes, over one to three variables (``x``, ``y``, ``z``), 8 to 40 nodes each.

Each expression first draws a few *motifs* (small subexpressions such as ``(div 1.0 x)`` or
``(add x y)``) and uses them as leaves most of the time, so that the same subexpression occurs
several times; the shapes then combine leaves and smaller generated parts.  Every expression is
parsed (so it is well-typed: all Float) and interned, so duplicates (and alpha-variants, though
there are no binders here) are recognised by identity.  Generation is driven by ``random.Random(seed)``
alone: the same seed gives the same list on every machine.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from knossos.expr import Expr
from knossos.parser import parse_expr

VARIABLES = ("x", "y", "z")
CONSTANTS = ("1.0", "2.0", "3.0")
BINARY = ("add", "sub", "mul", "div")
#: Node counts of a generated expression (``Expr.size``).
MIN_NODES, MAX_NODES = 8, 40


@dataclass(frozen=True)
class CorpusSettings:
    #: Expressions to generate.
    count: int
    #: The seed of the generator.
    seed: int
    min_nodes: int = MIN_NODES
    max_nodes: int = MAX_NODES


def _op(name: str, *parts: str) -> str:
    return f"({name} {' '.join(parts)})"


class CorpusGenerator:
    """Writes random expressions (as text) from the shapes of the paper's arithmetic sets."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.variables: tuple[str, ...] = ("x",)
        self.motifs: list[str] = []
        # (weight, shape): a shape writes an expression from parts of at most ``depth`` levels
        self.shapes: list[tuple[int, Callable[[int], str]]] = [
            (8, self._binary),
            (3, self._nested_division),
            (3, self._sum_of_fractions),
            (3, self._common_factor),
            (2, self._over_one_plus),
            (2, self._cancellation),
            (1, self._scaled),
            (1, self._log),
        ]

    # -- one expression --------------------------------------------------------------------------
    def expression(self) -> str:
        """A fresh expression: new variables and motifs, then a shape at the root."""
        rng = self.rng
        self.variables = VARIABLES[: rng.choice((1, 2, 2, 3))]
        self.motifs = [self._motif() for _ in range(rng.randint(1, 3))]
        return self._shape(rng.randint(2, 4))

    def _motif(self) -> str:
        """A small subexpression that the expression will repeat."""
        rng = self.rng
        v = rng.choice(self.variables)
        w = rng.choice(self.variables)
        c = rng.choice(CONSTANTS)
        forms = (
            _op("div", "1.0", v),
            _op("add", v, w if w != v else c),
            _op("mul", v, w if w != v else c),
            _op("sub", v, "1.0"),
            _op("add", v, "1.0"),
            _op("log", v),
            _op("div", v, _op("sub", w, "1.0")),
            _op("div", "1.0", _op("add", v, "1.0")),
            _op("mul", v, v),
            _op("div", v, w if w != v else c),
        )
        return rng.choice(forms)

    def _leaf(self) -> str:
        r = self.rng.random()
        if r < 0.45:
            return self.rng.choice(self.motifs)
        if r < 0.8:
            return self.rng.choice(self.variables)
        return self.rng.choice(CONSTANTS)

    def _part(self, depth: int) -> str:
        """A leaf, or (with depth left) a shape one level lower."""
        if depth <= 0 or self.rng.random() < 0.3:
            return self._leaf()
        return self._shape(depth - 1)

    def _shape(self, depth: int) -> str:
        weights = [w for w, _ in self.shapes]
        _, shape = self.rng.choices(self.shapes, weights)[0]
        return shape(depth)

    # -- the shapes (Table 5's savings) ----------------------------------------------------------
    def _binary(self, depth: int) -> str:
        return _op(self.rng.choice(BINARY), self._part(depth), self._part(depth))

    def _nested_division(self, depth: int) -> str:
        a, b, c = self._part(depth), self._part(depth), self._part(depth)
        return self.rng.choice((_op("div", _op("div", a, b), c), _op("div", a, _op("div", b, c))))

    def _sum_of_fractions(self, depth: int) -> str:
        a, b, d = self._part(depth), self._part(depth), self._part(depth)
        return _op(self.rng.choice(("add", "sub")), _op("div", a, d), _op("div", b, d))

    def _common_factor(self, depth: int) -> str:
        a, b, c = self._part(depth), self._part(depth), self._part(depth)
        left = _op("mul", a, b) if self.rng.random() < 0.5 else _op("mul", b, a)
        right = _op("mul", a, c) if self.rng.random() < 0.5 else _op("mul", c, a)
        return _op(self.rng.choice(("add", "sub")), left, right)

    def _over_one_plus(self, depth: int) -> str:
        a = self._part(depth)
        one_plus = _op("add", "1.0", a) if self.rng.random() < 0.5 else _op("add", a, "1.0")
        return _op("div", a, one_plus)

    def _cancellation(self, depth: int) -> str:
        a, b = self._part(depth), self._part(depth)
        return self.rng.choice((_op("div", _op("mul", a, b), a), _op("mul", _op("div", a, b), b)))

    def _scaled(self, depth: int) -> str:
        a, c = self._part(depth), self.rng.choice(CONSTANTS)
        return self.rng.choice((_op("mul", a, c), _op("mul", c, a), _op("div", a, c)))

    def _log(self, depth: int) -> str:
        return _op("log", self._part(depth))


def generate(settings: CorpusSettings, exclude: Iterable[Expr] = ()) -> list[Expr]:
    """``settings.count`` distinct expressions of ``min_nodes..max_nodes`` nodes with at least one
    variable, none in ``exclude``."""
    rng = random.Random(settings.seed)
    generator = CorpusGenerator(rng)
    seen: set[Expr] = set(exclude)
    out: list[Expr] = []
    attempts = 0
    while len(out) < settings.count:
        attempts += 1
        if attempts > 100 * settings.count + 1000:
            raise RuntimeError(
                f"could not generate {settings.count} distinct expressions ({len(out)} after {attempts})"
            )
        e, _ = parse_expr(generator.expression())
        if settings.min_nodes <= e.size <= settings.max_nodes and e.free and e not in seen:
            seen.add(e)
            out.append(e)
    return out
