"""The reference (RLO) cost model, node by node.

The cost of a node is its own cost plus its children's, with every vector assumed to have
``ASSUMED_VECTOR_SIZE`` elements (see ``ksdata/README.md``).  Ops the reference rewrote
into others before costing are charged as what they became there: ``neg x`` as ``sub 0.0 x``,
``lt``/``lte`` as ``gt``/``gte``, ``or``/``and`` as an ``if``.  Calls are charged as the reference's
``apply`` of a function to a tuple of its arguments.  Each rule returns the node's *total* cost.
The size-aware variant, where real vector sizes are known, is :mod:`knossos.sized_cost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from knossos.op_table import ROWS, OpKind
from knossos.ops import Op
from knossos.types import Type

if TYPE_CHECKING:
    from knossos.callee import Callee
    from knossos.node import Expr

ASSUMED_VECTOR_SIZE = 16
MALLOC_COST = 2.0  # build, constVec, deltaVec and any element-wise op on a vector
LET_COST = 0.1  # also per element of a tuple
APPLY_COST = 2.0  # overhead of calling a def or edef
DEFAULT_EDEF_COST = 7.0  # an edef without a cost$ def
IF_SELECTION_COST = 1.0
IF_EPSILON = 0.0001  # weight of the cheaper branch of an if

#: Own cost of ops charged "constant + children" (a value op's is in its row of op_table).
#: Arithmetic is scaled by element count below.
OWN_COST: dict[Op, float] = {
    **{row.op: row.cost for row in ROWS},
    Op.INDEX: 1.0,
    Op.SIZE: 1.0,
    Op.SUM: ASSUMED_VECTOR_SIZE - 1.0,
    Op.CONSTVEC: MALLOC_COST,
    Op.DELTAVEC: MALLOC_COST,
    Op.ASSERT: 1.0,
    Op.GET: 0.0,
}

CostRule = Callable[[tuple["Expr", ...], Any, Type], float]


def elementwise_cost(op_cost: float, left: Type, right: Type, vector_size: int = ASSUMED_VECTOR_SIZE) -> float:
    """Own cost of an element-wise op: per element of the larger operand, plus a malloc for vectors."""
    left_n = left.num_elements(vector_size)
    right_n = right.num_elements(vector_size)
    return op_cost * max(left_n, right_n) + (MALLOC_COST if left_n > 1 or right_n > 1 else 0.0)


def if_cost(cond: float, then: float, other: float) -> float:
    """The dearer branch counts in full, the cheaper one with a small weight."""
    return IF_SELECTION_COST + cond + max(then, other) + IF_EPSILON * min(then, other)


def call_overhead(nargs: int) -> float:
    """The reference calls a function on a tuple of its arguments when there are several."""
    return APPLY_COST + (LET_COST * nargs if nargs > 1 else 0.0)


def _children(args: tuple[Expr, ...]) -> float:
    total = 0.0
    for a in args:
        total += a.cost
    return total


def _flat(own: float) -> CostRule:
    return lambda args, data, t: own + _children(args)


def _arith(op: Op) -> CostRule:
    own = OWN_COST[op]

    def rule(args: tuple[Expr, ...], data: Any, t: Type) -> float:
        if len(args) == 1:  # neg: the reference wrote it as (sub 0.0 x)
            return elementwise_cost(own, args[0].type, args[0].type) + args[0].cost
        a, b = args
        if a.type.elements16 == 1 and b.type.elements16 == 1:
            return own + a.cost + b.cost
        return elementwise_cost(own, a.type, b.type) + a.cost + b.cost

    return rule


def _leaf(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return 0.0


def _if(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return if_cost(args[0].cost, args[1].cost, args[2].cost)


def _tuple(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return LET_COST * len(args) + _children(args)


def _let(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return LET_COST + args[1].cost + args[2].cost


def _lam(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return args[1].cost


def _build(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return MALLOC_COST + args[0].cost + ASSUMED_VECTOR_SIZE * args[2].cost


def _sumbuild(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    adds = (ASSUMED_VECTOR_SIZE - 1) * args[2].type.elements16
    return adds + args[0].cost + ASSUMED_VECTOR_SIZE * args[2].cost


def _call(args: tuple[Expr, ...], data: Callee, t: Type) -> float:
    return call_overhead(len(args)) + data.body_cost + _children(args)


def _apply(args: tuple[Expr, ...], data: Any, t: Type) -> float:
    return APPLY_COST + args[0].cost + args[1].cost


#: How much a node's cost grows per unit of one child's cost, for the (op, child index) pairs where
#: that is not 1.  Given the children's types, which a rewrite keeps, every rule above is affine in
#: each child's cost, except in the branches of an ``if`` (:func:`if_cost`): what lets a search cost a
#: rewrite deep in a program without rebuilding the program (:mod:`rules.lazy_children`).
CHILD_WEIGHT: dict[tuple[Op, int], float] = {
    (Op.BUILD, 1): 0.0,
    (Op.BUILD, 2): ASSUMED_VECTOR_SIZE,
    (Op.SUMBUILD, 1): 0.0,
    (Op.SUMBUILD, 2): ASSUMED_VECTOR_SIZE,
    (Op.LET, 0): 0.0,
    (Op.LAM, 0): 0.0,
}


COST_RULES: dict[Op, CostRule] = {op: _flat(own) for op, own in OWN_COST.items()}
COST_RULES.update({row.op: _arith(row.op) for row in ROWS if row.kind in (OpKind.ARITHMETIC, OpKind.NEGATION)})
COST_RULES.update(
    {
        Op.CONST: _leaf,
        Op.VAR: _leaf,
        Op.IF: _if,
        Op.TUPLE: _tuple,
        Op.LET: _let,
        Op.LAM: _lam,
        Op.BUILD: _build,
        Op.SUMBUILD: _sumbuild,
        Op.CALL: _call,
        Op.APPLY: _apply,
    }
)
