"""Reverse mode on A-normal form: the cotangents of a block's variables, given its result's.

The block's bindings are computed first, as written; then they are visited last to first, and each
binding whose variable has a cotangent passes its parts on to its operands (:mod:`.primitives`).  A
variable used several times collects the parts in a chain of lets, ``d$x_2 = add d$x_1 part``, so
the reverse pass is as long as the forward one.

A loop ``v = build n (lam i B)`` gives the variables that ``B`` uses from outside their cotangents
as one ``sumbuild n (lam i ...)`` over ``B`` and its reverse pass, seeded with ``index i d$v``
(``d$v`` itself for a sumbuild); a branch gives them from an ``if`` over the reverse passes of the
two branches, each completing the other's with zeros.  Each block is so computed once forward and
once more inside its reverse pass: simple, and linear in the size of the program for a given depth
of nesting.  Making it fast is the optimiser's job.
"""

from __future__ import annotations

from collections.abc import Callable

from autodiff.anf import Bind, Block, Branch, Loop, Names, has_float, is_atom
from autodiff.primitives import as_op, known_callee, reverse_op
from autodiff.tangent import Shapes
from knossos import expr as E
from knossos.callee import Callee
from knossos.expr import Expr
from knossos.ops import Op

#: The derivative of the target of a call (the call, and where it is written in the source).
CallDerivative = Callable[[Expr, "Expr | None"], Callee]


def wants(atom: Expr) -> bool:
    """Whether an operand takes a cotangent: a variable with Floats in its value."""
    return atom.op is Op.VAR and has_float(atom.type)


class Reverse:
    def __init__(self, names: Names, derivative: CallDerivative) -> None:
        self.names = names
        self.shapes = Shapes(names)
        self.derivative = derivative
        #: Every variable that was given a cotangent, by name (names are unique in a def).
        self.vars: dict[str, Expr] = {}

    def block(self, b: Block, seed: Expr) -> tuple[Block, dict[str, Expr]]:
        """``b``'s bindings, then its reverse pass from the cotangent ``seed`` of its result; and the
        cotangent (an atom) of every variable, bound in ``b`` or outside it, that has one."""
        out = Block(list(b.binds))
        cot: dict[str, Expr] = {}
        assert b.result is not None
        if wants(b.result):
            self.give(out, cot, b.result, seed if is_atom(seed) else self.names.bind(out, seed, "d$r"))
        for bind in reversed(b.binds):
            dv = cot.get(bind.var.data)
            if dv is not None:
                self._bind(out, cot, bind, dv)
        return out, cot

    def give(self, out: Block, cot: dict[str, Expr], atom: Expr, part: Expr) -> None:
        """Add ``part`` to the cotangent of ``atom`` (nothing for a literal or a value without Floats)."""
        if not wants(atom):
            return
        name = atom.data
        self.vars[name] = atom
        prev = cot.get(name)
        if prev is None:
            cot[name] = part if is_atom(part) else self.names.bind(out, part, f"d${name}")
        else:
            cot[name] = self.names.bind(out, E.op(Op.ADD, prev, part), f"d${name}")

    def _bind(self, out: Block, cot: dict[str, Expr], bind: Bind, dv: Expr) -> None:
        value = bind.value
        if isinstance(value, Loop):
            self._loop(out, cot, value, dv)
        elif isinstance(value, Branch):
            self._branch(out, cot, value, dv)
        elif value.op is Op.CALL and not known_callee(value.data):
            self._call(out, cot, value, dv, bind.source)
        else:
            e = as_op(value) if value.op is Op.CALL else value
            for atom, part in reverse_op(e, bind.var, dv, wants, self.shapes):
                self.give(out, cot, atom, part)

    def _call(self, out: Block, cot: dict[str, Expr], call: Expr, dv: Expr, source: Expr | None) -> None:
        args = call.args
        if not any(wants(a) for a in args):
            return
        rev = self.derivative(call, source)
        parts = self.names.bind(out, E.call(rev, *args, dv), f"d${call.data.name}")
        for k, a in enumerate(args):
            if wants(a):
                self.give(out, cot, a, parts if len(args) == 1 else E.get(k + 1, len(args), parts))

    def _outer(self, inner: Block, cot: dict[str, Expr], bound: set[str]) -> set[str]:
        """The variables from outside ``inner`` that its reverse pass gave a cotangent."""
        return set(cot) - bound - {b.var.data for b in inner.binds}

    def _collect(self, out: Block, cot: dict[str, Expr], names: list[str], parts: Expr) -> None:
        for k, name in enumerate(names):
            self.give(out, cot, self.vars[name], parts if len(names) == 1 else E.get(k + 1, len(names), parts))

    def _result(self, cot: dict[str, Expr], names: list[str]) -> Expr:
        parts = [cot[n] if n in cot else self.shapes.zero_like(self.vars[n]) for n in names]
        return parts[0] if len(parts) == 1 else E.tuple_(*parts)

    def _loop(self, out: Block, cot: dict[str, Expr], loop: Loop, dv: Expr) -> None:
        seed = E.op(Op.INDEX, loop.index, dv) if loop.op is Op.BUILD else dv
        inner, inner_cot = self.block(loop.body, seed)
        names = sorted(self._outer(loop.body, inner_cot, {loop.index.data}))
        if not names:
            return
        inner.result = self._result(inner_cot, names)
        parts = self.names.bind(out, Loop(Op.SUMBUILD, loop.n, loop.index, inner), "d$loop")
        self._collect(out, cot, names, parts)

    def _branch(self, out: Block, cot: dict[str, Expr], branch: Branch, dv: Expr) -> None:
        then, then_cot = self.block(branch.then, dv)
        other, other_cot = self.block(branch.other, dv)
        names = sorted(self._outer(branch.then, then_cot, set()) | self._outer(branch.other, other_cot, set()))
        if not names:
            return
        then.result = self._result(then_cot, names)
        other.result = self._result(other_cot, names)
        parts = self.names.bind(out, Branch(branch.cond, then, other), "d$if")
        self._collect(out, cot, names, parts)
