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


#: The structural ops written ``(name arg...)`` with a fixed number of arguments, by their name in
#: the text (the value ops' names are in :mod:`knossos.op_table`).
STRUCTURE: dict[str, tuple[Op, int]] = {
    "index": (Op.INDEX, 2),
    "size": (Op.SIZE, 1),
    "sum": (Op.SUM, 1),
    "constVec": (Op.CONSTVEC, 2),
    "deltaVec": (Op.DELTAVEC, 3),
    "if": (Op.IF, 3),
    "assert": (Op.ASSERT, 2),
}

#: For binding ops: (index of the bound VAR child, index of the child it scopes over).
BINDERS: dict[Op, tuple[int, int]] = {
    Op.LET: (0, 2),
    Op.LAM: (0, 1),
    Op.BUILD: (1, 2),
    Op.SUMBUILD: (1, 2),
}
