"""Integer index arithmetic simplified with the ranges that loops give their variables.

A row-major reshape reads its source at ``flat / k`` and ``flat - (flat / k) * k``, where ``flat``
is the reader's index flattened; a reshape and its inverse (a view of a batch as rows for a matrix
product, then back) compose to ``(div (add (mul i 128) j) 128)``, which is ``i`` when ``0 <= j <
128`` and ``i >= 0``.  Such reads hide from the backend's patterns and from reverse mode that they
are plain row reads (their cotangents become scatters instead of gathers).  Here every Integer
``div`` and ``sub`` is simplified where the ranges of its operands, from the sizes of the builds
and sums that bind their variables (literal or of known range), make the identity exact:

- ``(div (add (mul x c) y) c)`` is ``x`` where ``x >= 0`` and ``0 <= y < c`` (Integer division
  truncates: both sides are non-negative, so it floors);
- ``(div a c)`` is 0 where ``0 <= a < c``;
- ``(sub (add p y) p)`` is ``y``, and ``(add p (sub y p))`` is ``y`` (a quotient times its divisor
  plus the remainder: Integers of known, small ranges, so nothing overflows);
- ``a / 1`` and ``a - 0`` are ``a``, and ``a * 0`` is 0 where ``a`` is of known range;
- mixed strides, where a view splits or merges dimensions of another size (attention's heads: a
  ``(b, t, h·d)`` tensor read as ``(b·h, t, d)``), with ``x >= 0`` and ``0 <= y``:
  ``(div (add (mul x c) y) d)`` is ``(div x r)`` where ``d = c·r`` and ``y < c``, and
  ``(add (mul x s) (div y d))`` where ``c = s·d``; the remainder ``(sub X (mul (div X d) d))`` of such
  an ``X`` is ``(add (mul (x mod r) c) y)`` (``y < c``), and ``y mod d`` where ``d`` divides ``c``;
  ``X`` where ``0 <= X < d``.

Only values whose ranges are known and far from the 64-bit limits are touched, so no rewrite
changes what overflows.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import INTEGER

#: A range (lowest, highest) of an Integer; None where it is not known.
Range = tuple[int, int] | None
#: Ranges beyond this magnitude are treated as unknown (far from overflow).
_LIMIT = 1 << 40


def _known(lo: int, hi: int) -> Range:
    return (lo, hi) if -_LIMIT <= lo <= hi <= _LIMIT else None


def simplify_indices(root: Expr) -> Expr:
    """``root`` with its Integer index arithmetic simplified (see the module's docstring); ``root``
    itself where it is too deep to walk."""
    try:
        return _Simplifier().walk(root, {})
    except RecursionError:
        return root


class _Simplifier:
    def range_of(self, e: Expr, env: dict[str, Range]) -> Range:
        if e.type is not INTEGER:
            return None
        if e.op is Op.CONST:
            return _known(e.data, e.data)
        if e.op is Op.VAR:
            return env.get(e.data)
        if e.op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV) and len(e.args) == 2:
            a, b = (self.range_of(x, env) for x in e.args)
            if a is None or b is None:
                return None
            if e.op is Op.ADD:
                return _known(a[0] + b[0], a[1] + b[1])
            if e.op is Op.SUB:
                return _known(a[0] - b[1], a[1] - b[0])
            if e.op is Op.MUL:
                products = [x * y for x in a for y in b]
                return _known(min(products), max(products))
            if b[0] == b[1] and b[0] > 0 and a[0] >= 0:
                return _known(a[0] // b[0], a[1] // b[0])
        if e.op is Op.SIZE:
            return (0, _LIMIT)
        return None

    def walk(self, e: Expr, env: dict[str, Range]) -> Expr:
        lets: list[tuple[Expr, Expr]] = []
        scope = dict(env)
        while e.op is Op.LET:  # a chain of lets without recursion
            var, rhs, body = e.args
            rhs = self.walk(rhs, scope)
            lets.append((var, rhs))
            scope[var.data] = self.range_of(rhs, scope)
            e = body
        out = self.node(e, scope)
        for var, rhs in reversed(lets):
            out = E.let(var, rhs, out)
        return out

    def node(self, e: Expr, env: dict[str, Range]) -> Expr:
        if not e.args:
            return e
        if e.op in (Op.BUILD, Op.SUMBUILD):
            n, var, body = e.args
            n = self.walk(n, env)
            size = self.range_of(n, env)
            inner = {**env, var.data: (0, size[1] - 1) if size is not None and size[1] >= 1 else None}
            return e.replace_args((n, var, self.walk(body, inner)))
        if e.is_binder:  # a lam (or another binder): its variable's range is not known
            bound = e.bound_var.data
            inner = {**env, bound: None}
            return e.replace_args(tuple(a if a is e.bound_var else self.walk(a, inner) for a in e.args))
        rem = _remainder_of(e)
        if rem is not None:  # before its operands: their quotient would no longer read as one
            x, d = rem
            out = self.remainder(self.walk(x, env), d, env)
            if out is not None:
                return out
        out = e.replace_args(tuple(self.walk(a, env) for a in e.args))
        if out.type is INTEGER and out.op in (Op.DIV, Op.SUB) and len(out.args) == 2:
            return self.integer(out, env)
        if out.type is INTEGER and out.op is Op.ADD and len(out.args) == 2:
            return self.cancelled(out, env)
        zero = out.type is INTEGER and out.op is Op.MUL and any(a.op is Op.CONST and a.data == 0 for a in out.args)
        if zero and all(self.range_of(a, env) is not None for a in out.args):
            return E.const(0)  # (a term of known range cannot fail)
        return out

    def integer(self, e: Expr, env: dict[str, Range]) -> Expr:
        a, b = e.args
        if b.op is Op.CONST and b.data == (1 if e.op is Op.DIV else 0):
            return a  # a / 1, a - 0
        if e.op is Op.DIV:
            c = b.data if b.op is Op.CONST else None
            if not isinstance(c, int) or c <= 0:
                return e
            whole = self.range_of(a, env)
            if whole is not None and whole[0] >= 0 and whole[1] < c:
                return E.const(0)
            for x, k, y in self.strided(a, env):
                ry = self.range_of(y, env)
                assert ry is not None
                if k % c == 0 and (k > c or ry[1] < c):  # (x·s·c + y) / c = x·s + y / c
                    return _plus(_times(x, k // c), self.integer(E.op(Op.DIV, y, b), env))
                if c % k == 0 and ry[1] < k:  # x·k + y = (x / r)·c + (x mod r)·k + y, c = k·r
                    return self.integer(E.op(Op.DIV, x, E.const(c // k)), env)
            return e
        # (sub (add p y) p) is y, (sub (add y p) p) too, where both are of known range
        if a.op is Op.ADD and self.range_of(a, env) is not None and self.range_of(b, env) is not None:
            if a.args[0] is b:
                return a.args[1]
            if a.args[1] is b:
                return a.args[0]
        return e

    def strided(self, a: Expr, env: dict[str, Range]) -> list[tuple[Expr, int, Expr]]:
        """``a`` as ``x·k + y`` (``x``, literal ``k`` > 0, ``y``) with ``x >= 0`` and ``y >= 0`` of known
        ranges: ``(add (mul x k) y)`` in any order, or ``(mul x k)`` (``y`` = 0)."""
        out: list[tuple[Expr, int, Expr]] = []
        terms = [(a.args[0], a.args[1]), (a.args[1], a.args[0])] if a.op is Op.ADD else [(a, E.const(0))]
        for xk, y in terms:
            if xk.op is not Op.MUL:
                continue
            for x, k in ((xk.args[0], xk.args[1]), (xk.args[1], xk.args[0])):
                if k.op is not Op.CONST or not isinstance(k.data, int) or k.data <= 0:
                    continue
                rx, ry = self.range_of(x, env), self.range_of(y, env)
                if rx is not None and ry is not None and rx[0] >= 0 and ry[0] >= 0:
                    out.append((x, k.data, y))
        return out

    def remainder(self, a: Expr, d: int, env: dict[str, Range]) -> Expr | None:
        """``a mod d`` (``a`` simplified) without a quotient of ``a``, or None where no rule applies."""
        whole = self.range_of(a, env)
        if whole is not None and whole[0] >= 0 and whole[1] < d:
            return a
        for x, k, y in self.strided(a, env):
            ry = self.range_of(y, env)
            assert ry is not None
            if k % d == 0:  # x·k is a multiple of d
                return self.remainder(y, d, env) or _mod(y, d)
            if d % k == 0 and ry[1] < k:  # (x·k + y) mod (k·r) = (x mod r)·k + y
                rx = self.remainder(x, d // k, env) or _mod(x, d // k)
                return _plus(_times(rx, k), y)
        return None

    def cancelled(self, e: Expr, env: dict[str, Range]) -> Expr:
        """``(add p (sub y p))`` and ``(add (sub y p) p)`` as ``y``, where all are of known range."""
        a, b = e.args
        for p, d in ((a, b), (b, a)):
            known = self.range_of(e, env) is not None
            if d.op is Op.SUB and d.args[1] is p and known and self.range_of(d.args[0], env) is not None:
                return d.args[0]
        return e


def _remainder_of(e: Expr) -> tuple[Expr, int] | None:
    """``(a, d)`` where ``e`` is ``(sub a (mul (div a d) d))``, ``a mod d`` for ``a >= 0``, ``d`` > 0."""
    if e.op is not Op.SUB or e.type is not INTEGER or e.args[1].op is not Op.MUL:
        return None
    a, (q, d) = e.args[0], e.args[1].args
    ok = d.op is Op.CONST and isinstance(d.data, int) and d.data > 0
    if ok and q.op is Op.DIV and q.args[0] is a and q.args[1] is d:
        return a, d.data
    return None


def _mod(a: Expr, d: int) -> Expr:
    if d == 1:
        return E.const(0)
    k = E.const(d)
    return E.op(Op.SUB, a, E.op(Op.MUL, E.op(Op.DIV, a, k), k))


def _times(x: Expr, k: int) -> Expr:
    return x if k == 1 else E.op(Op.MUL, x, E.const(k))


def _plus(x: Expr, y: Expr) -> Expr:
    return x if y.op is Op.CONST and y.data == 0 else E.op(Op.ADD, x, y)


__all__ = ["simplify_indices"]
