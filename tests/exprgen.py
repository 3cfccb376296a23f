"""Random well-typed Knossos expressions for the rule tests.

Expressions are generated *by type*: ``Gen.expr(ty, scope, depth)`` writes the text of an expression
of type ``ty`` whose free variables are in ``scope``, so every generated text type-checks.  The text
is the body of ``(def target TYPE ((x : Float) (y : Float)) BODY)`` in a small program that also
defines a few functions for it to call (:data:`PRELUDE_DEFS`).

Types (by code): ``F`` Float, ``I`` Integer, ``B`` Bool, ``V`` (Vec Float), ``T`` (Tuple Float Float),
``TI`` (Tuple Float Integer).  Covered: literals, variables, let (names drawn from a small pool, so
lets shadow each other, build indices and the free ``x``/``y``), build, sumbuild, if, comparisons,
and/or, index/size/sum/constVec/deltaVec, tuple/get$i$n, add/sub/mul/div/neg, exp/log, to_float and
calls.  Vector sizes are small literals 0 to 3 (mostly 3, so that vectors combine; 0 now and then, so
that the rules' ``n >= 1`` domains are exercised), sometimes an Integer expression.

Besides the plain productions the generator has *shapes*: productions that build the left-hand side
of a particular rule out of random parts (``(sub E E)``, ``(sumbuild n (lam i (deltaVec n i e)))``,
``(add (mul A B) (mul A C))``, ...), and it re-uses already generated expressions of the same scope,
so that rules needing two equal subexpressions (cse_bind, eq_self, if_both_same, ...) fire.

The choices come from a :class:`Chooser`: :func:`expressions` is a Hypothesis strategy (choices are
drawn, so examples shrink towards the first production, the simplest), and :func:`sample` is the
same generator driven by ``random.Random(seed)``, for deterministic samples.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from hypothesis import strategies as st

from knossos.expr import Expr
from knossos.parser import parse_program
from knossos.program import Program

T = TypeVar("T")

TYPE_TEXT = {
    "F": "Float",
    "I": "Integer",
    "B": "Bool",
    "V": "(Vec Float)",
    "T": "(Tuple Float Float)",
    "TI": "(Tuple Float Integer)",
}
TYPES = tuple(TYPE_TEXT)

#: Functions the generated bodies call (parameter names collide with the generator's names on
#: purpose, so that inline_call must rename; ``norm2`` has a sized parameter).
PRELUDE_DEFS = """\
(def sq Float ((a : Float)) (mul a a))
(def axpy (Vec Float) ((a : Float) (u : Vec Float) (w : Vec Float)) (add (mul a u) w))
(def norm2 Float ((u : Vec n Float)) (sumbuild n (lam (k : Integer) (mul (index k u) (index k u)))))
(def pair (Tuple Float Float) ((a : Float) (b : Float)) (tuple (add a b) (sub a (mul b 2.0))))
(def half Integer ((i : Integer)) (div i 2))
"""

#: Names for let-bound variables and indices: few, so that binders shadow each other, the free
#: variables and the parameters of PRELUDE_DEFS.
LET_NAMES = ("a", "b", "u", "x", "y", "i")
INDEX_NAMES = ("i", "j", "k", "a")

FLOAT_LITERALS = ("1.0", "2.0", "0.5", "-1.0", "0.0", "1.5", "-2.5", "3.0")
INT_LITERALS = ("1", "2", "0", "3")
SIZE_LITERALS = ("3", "3", "3", "3", "1", "2", "0")


class Chooser:
    """Where the random choices come from."""

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def choice(self, items: Sequence[T]) -> T:
        return items[self.integer(0, len(items) - 1)]

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent


class RandomChooser(Chooser):
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)


class DrawChooser(Chooser):
    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw

    def integer(self, lo: int, hi: int) -> int:
        return int(self.draw(st.integers(lo, hi)))


@dataclass
class Scope:
    """Variables in scope (name -> type code) and expressions already generated in this scope."""

    types: dict[str, str]
    #: (type, text, free names) of expressions generated here, for re-use.
    pool: list[tuple[str, str, frozenset[str]]] = field(default_factory=list)

    def bind(self, name: str, ty: str) -> Scope:
        inherited = [p for p in self.pool if name not in p[2]]
        return Scope({**self.types, name: ty}, inherited)


@dataclass(frozen=True)
class G:
    """A generated expression: its text and the names of the variables it uses."""

    text: str
    free: frozenset[str] = frozenset()


def _op(name: str, *parts: G) -> G:
    return G(f"({name} {' '.join(p.text for p in parts)})", frozenset().union(*(p.free for p in parts)))


class Gen:
    def __init__(self, chooser: Chooser, calls: bool = True) -> None:
        self.c = chooser
        self.calls = calls

    # -- entry points --------------------------------------------------------------------------
    def expr(self, ty: str, scope: Scope, depth: int) -> G:
        """An expression of type ``ty`` in ``scope`` of nesting depth at most about ``depth``."""
        c = self.c
        if depth <= 0 or c.chance(15):
            g = self.leaf(ty, scope)
        else:
            if scope.pool and c.chance(12):
                same = [p for p in scope.pool if p[0] == ty]
                if same:
                    _, text, free = c.choice(same)
                    return G(text, free)
            options = self.productions(ty, scope, depth - 1)
            g = c.choice(options)()
        scope.pool.append((ty, g.text, g.free))
        return g

    def leaf(self, ty: str, scope: Scope) -> G:
        c = self.c
        names = sorted(n for n, t in scope.types.items() if t == ty)
        if names and c.chance(60):
            n = c.choice(names)
            return G(n, frozenset({n}))
        if ty == "F":
            return G(c.choice(FLOAT_LITERALS))
        if ty == "I":
            return G(c.choice(INT_LITERALS))
        if ty == "B":
            return G(c.choice(("true", "false")))
        if ty == "V":
            n = c.choice(SIZE_LITERALS)
            return G(f"(constVec {n} {c.choice(FLOAT_LITERALS)})")
        if ty == "T":
            return G(f"(tuple {c.choice(FLOAT_LITERALS)} {c.choice(FLOAT_LITERALS)})")
        assert ty == "TI"
        return G(f"(tuple {c.choice(FLOAT_LITERALS)} {c.choice(INT_LITERALS)})")

    # -- helpers -----------------------------------------------------------------------------------
    def size(self, scope: Scope, depth: int) -> G:
        """A vector size: mostly a small literal, sometimes any Integer expression."""
        if self.c.chance(85):
            return G(self.c.choice(SIZE_LITERALS))
        return self.expr("I", scope, min(depth, 1))

    def index(self, scope: Scope, depth: int) -> G:
        """A position in a vector: an index variable in scope, a literal 0-2, or any Integer."""
        c = self.c
        names = sorted(n for n, t in scope.types.items() if t == "I")
        roll = c.integer(0, 9)
        if names and roll < 5:
            n = c.choice(names)
            return G(n, frozenset({n}))
        if roll < 9:
            return G(c.choice(("0", "1", "2")))
        return self.expr("I", scope, min(depth, 1))

    def let(self, ty: str, scope: Scope, d: int) -> G:
        c = self.c
        name = c.choice(LET_NAMES)
        rhs_ty = c.choice(TYPES)
        rhs = self.expr(rhs_ty, scope, d)
        inner = scope.bind(name, rhs_ty)
        if c.chance(25):  # (let (a e) a) or a second let of the same value (cse_bind)
            if rhs_ty == ty and c.chance(50):
                body = G(name, frozenset({name}))
            elif name not in rhs.free:
                name2 = c.choice(LET_NAMES)
                body2 = self.expr(ty, inner.bind(name2, rhs_ty), d)
                body = G(f"(let ({name2} {rhs.text}) {body2.text})", rhs.free | (body2.free - {name2}))
            else:
                body = self.expr(ty, inner, d)
        else:
            body = self.expr(ty, inner, d)
        return G(f"(let ({name} {rhs.text}) {body.text})", rhs.free | (body.free - {name}))

    def binder(self, what: str, body_ty: str, scope: Scope, d: int, n: G | None = None) -> G:
        name = self.c.choice(INDEX_NAMES)
        n = n or self.size(scope, d)
        body = self.expr(body_ty, scope.bind(name, "I"), d)
        if body_ty == "F" and self.c.chance(40):  # use the index
            body = G(f"({self.c.choice(('add', 'mul'))} (to_float {name}) {body.text})", body.free | {name})
        return G(f"({what} {n.text} (lam ({name} : Integer) {body.text}))", n.free | (body.free - {name}))

    def iff(self, ty: str, scope: Scope, d: int) -> G:
        cond = self.expr("B", scope, d)
        a = self.expr(ty, scope, d)
        b = a if self.c.chance(10) else self.expr(ty, scope, d)
        return _op("if", cond, a, b)

    def twice(self, name: str, ty: str, scope: Scope, d: int) -> G:
        """``(name E E)``: the same expression twice."""
        e = self.expr(ty, scope, d)
        return _op(name, e, e)

    # -- productions ---------------------------------------------------------------------------
    def productions(self, ty: str, scope: Scope, d: int) -> list[Callable[[], G]]:
        e = self.expr
        s = scope

        def op(name: str, *types: str) -> Callable[[], G]:
            return lambda: _op(name, *(e(t, s, d) for t in types))

        common: list[Callable[[], G]] = [
            lambda: self.let(ty, s, d),
            lambda: self.let(ty, s, d),
            lambda: self.iff(ty, s, d),
        ]
        if ty == "F":
            return [
                op("add", "F", "F"),
                op("sub", "F", "F"),
                op("mul", "F", "F"),
                op("div", "F", "F"),
                op("exp", "F"),
                op("log", "F"),
                op("neg", "F"),
                op("to_float", "I"),
                lambda: _op("index", self.index(s, d), e("V", s, d)),
                op("sum", "V"),
                lambda: self.binder("sumbuild", "F", s, d),
                op("get$1$2", "T"),
                op("get$2$2", "T"),
                op("get$1$2", "TI"),
                *common,
                *(self.call_productions(ty, s, d) if self.calls else []),
                *self.float_shapes(s, d),
            ]
        if ty == "I":
            return [
                op("add", "I", "I"),
                op("sub", "I", "I"),
                op("mul", "I", "I"),
                op("div", "I", "I"),
                op("size", "V"),
                lambda: self.binder("sumbuild", "I", s, d),
                op("get$2$2", "TI"),
                lambda: self.twice("div", "I", s, d),
                lambda: _op("size", self.binder("build", self.c.choice(TYPES), s, d)),
                *common,
                *([op("half", "I")] if self.calls else []),
            ]
        if ty == "B":
            return [
                op("gt", "F", "F"),
                op("gte", "F", "F"),
                op("lt", "F", "F"),
                op("eq", "F", "F"),
                op("eq", "I", "I"),
                op("gt", "I", "I"),
                op("gte", "I", "I"),
                op("and", "B", "B"),
                op("or", "B", "B"),
                lambda: self.twice("eq", self.c.choice(("F", "I", "B")), s, d),
                lambda: _op("if", e("B", s, d), G("true"), G("false")),
                lambda: _op(self.c.choice(("eq", "gt", "gte")), self.leaf("F", s), self.leaf("F", s)),
                lambda: _op(self.c.choice(("eq", "gt", "gte")), self.leaf("I", s), self.leaf("I", s)),
                *common,
            ]
        if ty == "V":
            return [
                lambda: self.binder("build", "F", s, d),
                lambda: self.binder("build", "F", s, d),
                lambda: _op("constVec", self.size(s, d), e("F", s, d)),
                lambda: _op("deltaVec", self.size(s, d), self.index(s, d), e("F", s, d)),
                op("add", "V", "V"),
                op("sub", "V", "V"),
                op("mul", "F", "V"),
                op("mul", "V", "F"),
                op("mul", "V", "V"),
                op("div", "V", "F"),
                op("add", "V", "F"),
                lambda: self.binder("sumbuild", "V", s, d),
                *common,
                *([op("axpy", "F", "V", "V")] if self.calls else []),
                *self.vector_shapes(s, d),
            ]
        if ty == "T":
            return [
                op("tuple", "F", "F"),
                op("tuple", "F", "F"),
                op("add", "T", "T"),
                op("mul", "T", "F"),
                op("sub", "T", "T"),
                lambda: self.binder("sumbuild", "T", s, d),
                lambda: self.binder("sumbuild", "T", s, d, G(self.c.choice(SIZE_LITERALS))),
                *common,
                *([op("pair", "F", "F")] if self.calls else []),
            ]
        assert ty == "TI"
        return [
            op("tuple", "F", "I"),
            op("add", "TI", "TI"),
            lambda: self.binder("sumbuild", "TI", s, d),
            *common,
        ]

    def call_productions(self, ty: str, s: Scope, d: int) -> list[Callable[[], G]]:
        e = self.expr
        return [
            lambda: _op("sq", e("F", s, d)),
            lambda: _op("norm2", e("V", s, d)),
        ]

    def float_shapes(self, s: Scope, d: int) -> list[Callable[[], G]]:
        """Left-hand sides of the arithmetic, log/exp and vector rules with random parts."""
        c, e = self.c, self.expr

        def lit(text: str) -> G:
            return G(text)

        def shape() -> G:
            k = c.integer(0, 23)
            a, b = e("F", s, d), e("F", s, d)
            if k == 0:
                return _op("mul", lit(c.choice(("0.0", "1.0"))), a)
            if k == 1:
                return _op("add", lit("0.0"), a)
            if k == 2:
                return _op(c.choice(("sub", "div")), a, lit(c.choice(("0.0", "1.0"))))
            if k == 3:
                return _op("add", a, _op("mul", b, lit("-1.0")))
            if k == 4:
                return _op(c.choice(("sub", "div")), a, a)
            if k in (5, 6):
                x = e("F", s, d)
                return _op(c.choice(("add", "sub")), _op("mul", x, a), _op("mul", x, b))
            if k in (7, 8):
                x = e("F", s, d)
                return _op(c.choice(("add", "sub")), _op("div", a, x), _op("div", b, x))
            if k == 9:
                return _op("log", _op("exp", a))
            if k == 10:
                return _op("exp", _op("log", a))
            if k == 11:
                return _op("add", _op("log", a), _op("log", b))
            if k == 12:
                return _op("mul", _op("exp", a), _op("exp", b))
            if k == 13:
                return _op(c.choice(("log", "exp")), lit(c.choice(FLOAT_LITERALS)))
            if k == 14:
                # (index i (build n (lam j body)))
                return _op("index", self.index(s, d), self.binder("build", "F", s, d))
            if k == 15:
                return _op("sum", self.binder("build", "F", s, d))
            if k == 16:
                return _op(c.choice(("add", "sub", "mul", "div")), lit(c.choice(FLOAT_LITERALS)), lit("2.0"))
            if k == 17:
                x = e("F", s, d)
                outer, inner = c.choice((("mul", "mul"), ("div", "mul"), ("mul", "div"), ("div", "div")))
                return _op(outer, _op(inner, a, b), x) if c.chance(50) else _op(outer, a, _op(inner, b, x))
            if k == 18:
                x = e("F", s, d)
                outer, inner = c.choice((("add", "add"), ("sub", "add"), ("add", "sub"), ("sub", "sub")))
                return _op(outer, _op(inner, a, b), x) if c.chance(50) else _op(outer, a, _op(inner, b, x))
            if k == 19:  # sumbuild_invariant when the body does not use i
                body = e("F", s.bind("i", "I"), d)
                return _op(
                    "sumbuild", lit(c.choice(SIZE_LITERALS)), G(f"(lam (i : Integer) {body.text})", body.free - {"i"})
                )
            if k == 20:
                return _op("get$1$2", _op("tuple", a, b))
            if k == 21:
                return _op("log", _op("mul", a, b))
            if k == 22:
                return _op("exp", _op("add", a, b))
            return _op(c.choice(("mul", "div")), _op(c.choice(("add", "sub")), a, b), e("F", s, d))

        return [shape, shape, shape]

    def vector_shapes(self, s: Scope, d: int) -> list[Callable[[], G]]:
        """sumbuild/deltaVec shapes of the vector rules."""
        c, e = self.c, self.expr

        def shape() -> G:
            k = c.integer(0, 4)
            n = G(c.choice(SIZE_LITERALS))
            i = c.choice(INDEX_NAMES)
            inner = s.bind(i, "I")
            if k == 0:  # sumbuild_of_deltavec
                body = e("F", inner, d)
                return G(
                    f"(sumbuild {n.text} (lam ({i} : Integer) (deltaVec {n.text} {i} {body.text})))", body.free - {i}
                )
            if k == 1:  # sumbuild_other_deltavec
                pos, body = self.index(inner, d), e("F", inner, d)
                return G(
                    f"(sumbuild {n.text} (lam ({i} : Integer) (deltaVec 3 {pos.text} {body.text})))",
                    (pos.free | body.free) - {i},
                )
            if k == 2:  # sumbuild_of_build
                j = i if c.chance(30) else c.choice(INDEX_NAMES)
                body = e("F", inner.bind(j, "I"), d)
                if c.chance(60):
                    body = G(f"(add (to_float {j}) {body.text})", body.free | {j})
                return G(
                    f"(sumbuild {n.text} (lam ({i} : Integer) (build 3 (lam ({j} : Integer) {body.text}))))",
                    body.free - {i, j},
                )
            if k == 3:  # sum_of_deltavecs
                pos, a, b = self.index(s, d), e("F", s, d), e("F", s, d)
                return _op("add", _op("deltaVec", n, pos, a), _op("deltaVec", n, pos, b))
            # sumbuild_of_zero_vec
            return G(f"(sumbuild {n.text} (lam ({i} : Integer) (constVec 3 0.0)))")

        return [shape, shape, shape]


@dataclass(frozen=True)
class Example:
    """A generated def: the program text, its return type code and the parsed program."""

    text: str
    ret: str
    program: Program

    @property
    def body(self) -> Expr:
        return self.program.defs["target"].body


def program_text(ret: str, body: str) -> str:
    return f"{PRELUDE_DEFS}(def target {TYPE_TEXT[ret]} ((x : Float) (y : Float))\n  {body})\n"


def example(ret: str, body: str) -> Example:
    """A hand-written body as an :class:`Example`."""
    text = program_text(ret, body)
    return Example(text, ret, parse_program(text, "<example>"))


def generate(chooser: Chooser, max_depth: int = 4, calls: bool = True) -> Example:
    gen = Gen(chooser, calls)
    ret = chooser.choice(("F", "F", "F", "V", "T", "B", "I", "TI"))
    depth = chooser.integer(2, max_depth)
    body = gen.expr(ret, Scope({"x": "F", "y": "F"}), depth)
    return example(ret, body.text)


@st.composite
def expressions(draw: st.DrawFn, max_depth: int = 4) -> Example:
    """A Hypothesis strategy of generated defs (see :func:`generate`)."""
    return generate(DrawChooser(draw), max_depth)


def sample(seed: int, max_depth: int = 4) -> Example:
    """The generated def of a seed (deterministic)."""
    return generate(RandomChooser(random.Random(seed)), max_depth)
