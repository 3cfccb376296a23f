"""The aten ops that are one value op of the language element-wise, or one function of its library,
lowered from the row in :mod:`knossos.op_table` (its ``torch`` column names them and says how their
operands are taken)."""

from __future__ import annotations

from frontends.aten import Lowering, binary, compare, elementwise, float_unary, signed, to_copy
from frontends.aten_math import bitwise, float_operand, logical, native
from knossos import expr as E
from knossos.expr import Expr
from knossos.op_table import FUNCTIONS, ROWS, FunctionRow, OpRow, TorchStyle
from knossos.types import FLOAT


def _float_binary(row: OpRow) -> Lowering:
    def apply(a: Expr, b: Expr) -> Expr:
        return E.op(row.op, a, b)

    return lambda c: elementwise(c.block, c.shape, [c.args[0], c.args[1]], apply, FLOAT, FLOAT)


def row_lowering(row: OpRow, style: TorchStyle) -> Lowering:
    """How an aten op of this ``style`` becomes ``row``'s op."""
    if style is TorchStyle.BINARY:
        return binary(row.op)
    if style is TorchStyle.FLOAT:
        return float_unary(lambda x: E.op(row.op, x)) if row.arity == 1 else _float_binary(row)
    if style is TorchStyle.SIGNED:
        return signed(row.op)
    if style is TorchStyle.COMPARE:
        return compare(row.op)
    if style is TorchStyle.LOGICAL:
        return logical(row.op)
    if style is TorchStyle.BITWISE:
        return bitwise(row.op)
    return to_copy


def function_lowering(f: FunctionRow) -> Lowering:
    """A call of library function ``f`` on each element, as Floats."""
    return float_operand(lambda x: native(f.name, x))


VALUE_OP_LOWERINGS: dict[str, Lowering] = {
    **{name: row_lowering(row, style) for row in ROWS for name, style in row.torch.items()},
    **{name: function_lowering(f) for f in FUNCTIONS for name in f.torch},
}
