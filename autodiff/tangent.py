"""Tangent types, and the zeros and sums that derivatives are written with.

As in ksc (and the dataset's ``fwd$``/``rev$`` defs): the tangent of a Float is a Float, of an
Integer or a Bool the empty tuple ``(Tuple)``; vectors and tuples take the tangents of their parts.
"""

from __future__ import annotations

from autodiff.anf import Names, has_float
from knossos import expr as E
from knossos.errors import KsTypeError
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import FLOAT, INTEGER, Kind, Type, tuple_of, vec


def tangent_type(t: Type) -> Type:
    """The type of the tangents (and cotangents) of values of type ``t``."""
    if t.kind is Kind.FLOAT:
        return t
    if t.kind is Kind.VEC:
        return vec(tangent_type(t.elem))
    if t.kind is Kind.TUPLE:
        return tuple_of(*(tangent_type(c) for c in t.children))
    if t.kind is Kind.LAM:
        raise KsTypeError(f"a function ({t}) has no tangent type")
    return tuple_of()


class Shapes:
    """Builds zeros of the shape of a value, and sums of all the numbers of a structure."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def zero_like(self, e: Expr) -> Expr:
        """The zero tangent of the value of ``e``, shaped like it (``e`` is repeated: pass an atom)."""
        t = e.type
        if t.kind is Kind.FLOAT:
            return E.const(0.0)
        if t.kind is Kind.VEC:
            i = E.var(self.names.fresh("i"), INTEGER)
            return E.build(E.op(Op.SIZE, e), i, self.zero_like(E.op(Op.INDEX, i, e)))
        if t.kind is Kind.TUPLE:
            n = len(t.children)
            return E.tuple_(*(self.zero_like(E.get(k + 1, n, e)) for k in range(n)))
        if t.kind is Kind.LAM:
            raise KsTypeError(f"a function ({t}) has no tangent")
        return E.tuple_()

    def total(self, e: Expr) -> Expr:
        """The sum of every Float of the value of ``e`` (a broadcast scalar's cotangent)."""
        t = e.type
        if t is FLOAT:
            return e
        if t.kind is Kind.VEC:
            i = E.var(self.names.fresh("i"), INTEGER)
            return E.sumbuild(E.op(Op.SIZE, e), i, self.total(E.op(Op.INDEX, i, e)))
        assert t.kind is Kind.TUPLE
        n = len(t.children)
        parts = [self.total(E.get(k + 1, n, e)) for k in range(n) if has_float(t.children[k])]
        out = parts[0]
        for p in parts[1:]:
            out = E.op(Op.ADD, out, p)
        return out

    def fit(self, contribution: Expr, target: Type) -> Expr:
        """``contribution`` to an operand of type ``target`` of an op with broadcasting: a scalar
        operand spread over a structure gets the sum of the structure's cotangent."""
        if contribution.type is target or not target.is_scalar:
            return contribution
        return self.total(contribution)
