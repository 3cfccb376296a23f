"""Constant folding of the value ops: ``(op c1 c2)`` of literals becomes the literal it computes.

Each op's fold rule is named in its row of :mod:`knossos.op_table` and computes with the row's
meaning, the interpreter's: the value is what run time computes.  An error there (an Integer
division by zero, an Integer overflow) and a Float that is not finite are left to run time.
"""

from __future__ import annotations

import math

from knossos.errors import KsEvalError
from knossos.op_table import ROW
from knossos.ops import Op
from knossos.types import INTEGER
from rules.rule import FoldRule, Site


class FoldValueOp(FoldRule):
    """The fold rule of one value op (its row's ``fold``)."""

    def __init__(self, op: Op) -> None:
        row = ROW[op]
        if row.fold is None:
            raise ValueError(f"'{row.name}' has no fold rule in its row")
        self.name = row.fold
        self.heads = frozenset({op})
        self.row = row
        holes = ["c"] if row.arity == 1 else [f"c{k + 1}" for k in range(row.arity)]
        self.lhs_text = f"({row.name} {' '.join(holes)})"
        self.rhs_text = "the value"
        self.conditions_text = (*(f"is_constant({h})" for h in holes), "the value is finite and in range")

    def match(self, site: Site) -> bool | int | float | None:
        args = site.node.args
        if any(a.op is not Op.CONST or not a.type.is_scalar for a in args):
            return None
        row = self.row
        meaning = row.integer_meaning if args[0].type is INTEGER and row.integer_meaning else row.meaning
        try:
            value = meaning(*(a.data for a in args))
        except KsEvalError:
            return None
        if isinstance(value, float) and not math.isfinite(value):
            return None
        return value  # type: ignore[no-any-return]


def fold(op: Op) -> FoldValueOp:
    """``op``'s fold rule."""
    return FoldValueOp(op)
