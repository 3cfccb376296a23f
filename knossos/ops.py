"""The node kinds of the Knossos IR.

Every expression node has an :class:`Op`.  Binding forms keep the variable they bind as a child (a
``VAR`` node, the *binding occurrence*), as the reference implementation does, so that graphs and
node numbers see it:

====================  =====================================  ===========================
op                    children                               binds child 0/1 over
====================  =====================================  ===========================
``LET``               ``(var, rhs, body)``                   ``body``
``LAM``               ``(var, body)``                        ``body``
``BUILD``/``SUMBUILD`` ``(n, var, body)``                    ``body``
``CALL``              ``(args...)``, callee in ``data``
``GET``               ``(tuple,)``, 1-based index in ``data``
====================  =====================================  ===========================
"""

from __future__ import annotations

import enum


class Op(enum.IntEnum):
    CONST = 1
    VAR = 2
    LET = 3
    LAM = 4
    BUILD = 5
    SUMBUILD = 6
    IF = 7
    ASSERT = 8
    TUPLE = 9
    GET = 10
    INDEX = 11
    SIZE = 12
    SUM = 13
    CONSTVEC = 14
    DELTAVEC = 15
    CALL = 16
    APPLY = 17
    ADD = 18
    SUB = 19
    MUL = 20
    DIV = 21
    NEG = 22
    EXP = 23
    LOG = 24
    EQ = 25
    NE = 26
    GT = 27
    GTE = 28
    LT = 29
    LTE = 30
    OR = 31
    AND = 32
    TO_FLOAT = 33
    ABS = 34
    MAX = 35
    POW = 36
    TANH = 37
    SQRT = 38


#: Ops written ``(name arg...)`` with a fixed number of arguments, by their name in the text.
PRIMITIVES: dict[str, tuple[Op, int]] = {
    "add": (Op.ADD, 2),
    "sub": (Op.SUB, 2),
    "mul": (Op.MUL, 2),
    "div": (Op.DIV, 2),
    "neg": (Op.NEG, 1),
    "exp": (Op.EXP, 1),
    "log": (Op.LOG, 1),
    "eq": (Op.EQ, 2),
    "ne": (Op.NE, 2),
    "gt": (Op.GT, 2),
    "gte": (Op.GTE, 2),
    "lt": (Op.LT, 2),
    "lte": (Op.LTE, 2),
    "or": (Op.OR, 2),
    "and": (Op.AND, 2),
    "to_float": (Op.TO_FLOAT, 1),
    "abs": (Op.ABS, 1),
    "max": (Op.MAX, 2),
    "pow": (Op.POW, 2),
    "sqrt": (Op.SQRT, 1),
    "tanh": (Op.TANH, 1),
    "index": (Op.INDEX, 2),
    "size": (Op.SIZE, 1),
    "sum": (Op.SUM, 1),
    "constVec": (Op.CONSTVEC, 2),
    "deltaVec": (Op.DELTAVEC, 3),
    "if": (Op.IF, 3),
    "assert": (Op.ASSERT, 2),
}

#: Text name of every op that has one (``CONST``, ``VAR``, ``CALL`` and ``APPLY`` have none).
NAMES: dict[Op, str] = {op: name for name, (op, _) in PRIMITIVES.items()}
NAMES.update(
    {
        Op.LET: "let",
        Op.LAM: "lam",
        Op.BUILD: "build",
        Op.SUMBUILD: "sumbuild",
        Op.TUPLE: "tuple",
        Op.GET: "get",
    }
)

#: Words that cannot be used as variable or function names.
KEYWORDS: frozenset[str] = frozenset(
    [*PRIMITIVES, "let", "lam", "build", "sumbuild", "tuple", "select", "def", "edef", "true", "false"]
)

#: For binding ops: (index of the bound VAR child, index of the child it scopes over).
BINDERS: dict[Op, tuple[int, int]] = {
    Op.LET: (0, 2),
    Op.LAM: (0, 1),
    Op.BUILD: (1, 2),
    Op.SUMBUILD: (1, 2),
}

ARITHMETIC = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV})
COMPARISONS = frozenset({Op.EQ, Op.NE, Op.GT, Op.GTE, Op.LT, Op.LTE})
