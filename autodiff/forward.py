"""Forward mode on A-normal form: each binding is followed by the binding of its tangent.

A loop's tangent is a loop of the same size over the block and its forward pass; a branch's an
``if`` over the branches' forward passes.  A tangent that is zero whatever the inputs is not
written at all (``None``) until something needs it as a value.
"""

from __future__ import annotations

from collections.abc import Callable

from autodiff.anf import AnfValue, Bind, Block, Branch, Loop, Names, has_float, is_atom
from autodiff.primitives import as_op, forward_op, known_callee
from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.callee import Callee
from knossos.expr import Expr
from knossos.ops import Op

_CallDerivative = Callable[[Expr, "Expr | None"], Callee]


class Forward:
    def __init__(self, names: Names, derivative: _CallDerivative, tangents: dict[str, Expr]) -> None:
        self.names = names
        self.shapes = Shapes(names)
        self.derivative = derivative
        #: The tangent (an atom) of every variable that has a nonzero one, by name (unique in a def).
        self.tangents = tangents

    def tangent(self, atom: Expr) -> Expr | None:
        return self.tangents.get(atom.data) if atom.op is Op.VAR else None

    def block(self, b: Block) -> tuple[Block, Expr | None]:
        """``b`` with the tangent of each binding after it; and the tangent of its result (None: zero)."""
        out = Block()
        for bind in b.binds:
            out.binds.append(bind)
            t = self._bind(bind)
            if t is not None:
                name = bind.var.data
                self.tangents[name] = t if isinstance(t, Expr) and is_atom(t) else self.names.bind(out, t, f"d${name}")
        assert b.result is not None
        return out, self.tangent(b.result)

    def _bind(self, bind: Bind) -> AnfValue | None:
        value = bind.value
        if not has_float(bind.var.type):
            return None
        if isinstance(value, Loop):
            inner, t = self.block(value.body)
            if t is None:
                return None
            inner.result = t
            return Loop(value.op, value.n, value.index, inner)
        if isinstance(value, Branch):
            then, t1 = self.block(value.then)
            other, t2 = self.block(value.other)
            if t1 is None and t2 is None:
                return None
            assert value.then.result is not None and value.other.result is not None
            then.result = t1 if t1 is not None else self.shapes.zero_like(value.then.result)
            other.result = t2 if t2 is not None else self.shapes.zero_like(value.other.result)
            return Branch(value.cond, then, other)
        if value.op is Op.CALL and not known_callee(value.data):
            return self._call(value, bind.source)
        e = as_op(value) if value.op is Op.CALL else value
        return forward_op(e, bind.var, self.tangent, self.shapes)

    def _call(self, call: Expr, source: Expr | None) -> Expr | None:
        tangents = [self.tangent(a) for a in call.args]
        if all(t is None for t in tangents):
            return None
        fwd = self.derivative(call, source)
        given = [t if t is not None else self.shapes.zero_like(a) for t, a in zip(tangents, call.args, strict=True)]
        return E.call(fwd, *call.args, *given)
