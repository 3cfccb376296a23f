"""Loops over a flattened index split into nested loops.

A reduction over a reshaped view (GroupNorm's statistics over a group of channels and positions) is
lowered as one sum over the flat index ``v`` < c·k that reads its source at ``v / k`` and ``v mod k``
(written ``(sub v (mul (div v k) k))``): its reads have computed indices, which the backend cannot
walk along rows and whose cotangents reverse mode scatters element by element.  Where ``v`` occurs
only in those two forms, the sum is written ``(sumbuild c (lam a (sumbuild k (lam b ...))))`` with
``a`` and ``b`` for them: the same terms, added in another association (the translation decides
its order of addition anyway: torch's is its own, and the check compares within a tolerance).

The same holds for a tensor materialised in a flattened shape: a transformer's MLP views its batch
``(b, t, c)`` as rows ``(b·t, c)`` for a matrix product (GPT-2's Conv1D, ``x.view(-1, c)``), and an
element-wise op on that view (gelu) is built as ``(let (h (build b·t (lam v ...))) ...)`` reading
its source at ``v / t`` and ``v mod t``, and read in turn at ``(add (mul i t) j)`` by the view back.
Such computed reads hide plain row reads from the backend's products and make reverse mode scatter
each row's cotangent into a whole-tensor one.  Where ``v`` occurs only in those two forms and ``h``
is only read with ``index``, the build is nested, ``(build b (lam a (build t (lam c ...))))``, and
each read ``(index e h)`` becomes ``(index (e mod t) (index (e / t) h))``: the same elements, which
:func:`knossos.index_ranges.simplify_indices` then reads plainly (``(div (add (mul i t) j) t)`` is
``i``).

A nested tensor's readers may then loop over a flattened index used only as a quotient and a
remainder in turn (attention's scores, softmax and weighted sum over batch·heads, each let read by
the next): :func:`nest_flat_loops` simplifies and splits until nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable

from frontends.tensor import imod, index_div
from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.index_ranges import simplify_indices
from knossos.ops import Op
from knossos.types import INTEGER

#: Rounds of :func:`nest_flat_loops` at most (each nests the readers of what the last one nested).
_ROUNDS = 16


def nest_flat_loops(root: Expr) -> Expr:
    """``root`` with its index arithmetic simplified and its loops over flattened indices nested, again
    until neither changes (see the module's docstring)."""
    e = simplify_indices(root)
    for _ in range(_ROUNDS):
        split = simplify_indices(split_flat_loops(e))
        if split is e:
            break
        e = split
    return e


def split_flat_loops(root: Expr) -> Expr:
    """``root`` with each sum, and each let-bound build, over a flattened index nested (see the
    module's docstring)."""
    taken = names_in(root)
    try:
        return _Splitter(taken).walk(root)
    except RecursionError:
        return root


def _quotient(e: Expr, v: str) -> int | None:
    """``k`` where ``e`` is ``(div v k)``, ``k`` a literal > 1."""
    if e.op is Op.DIV and e.args[0].op is Op.VAR and e.args[0].data == v and e.args[1].op is Op.CONST:
        k = e.args[1].data
        return k if isinstance(k, int) and not isinstance(k, bool) and k > 1 else None
    return None


def _remainder(e: Expr, v: str) -> int | None:
    """``k`` where ``e`` is ``(sub v (mul (div v k) k))``."""
    if e.op is Op.SUB and e.args[0].op is Op.VAR and e.args[0].data == v and e.args[1].op is Op.MUL:
        q, k = e.args[1].args
        kq = _quotient(q, v)
        if kq is not None and k.op is Op.CONST and k.data == kq:
            return kq
    return None


class _Splitter:
    def __init__(self, taken: set[str]) -> None:
        self.taken = taken

    def fresh(self, base: str) -> Expr:
        n = 0
        while f"{base}_{n}" in self.taken:
            n += 1
        self.taken.add(f"{base}_{n}")
        return E.var(f"{base}_{n}", INTEGER)

    def walk(self, e: Expr) -> Expr:
        if not e.args:
            return e
        out = e.replace_args(tuple(self.walk(a) for a in e.args))  # (a variable walks to itself)
        if out.op is Op.SUMBUILD and out.args[0].op is Op.CONST:
            return self.split(out, E.sumbuild) or out
        if out.op is Op.LET and out.args[1].op is Op.BUILD and out.args[1].args[0].op is Op.CONST:
            return self.split_let(out) or out
        return out

    def split(self, e: Expr, make: Callable[[Expr, Expr, Expr], Expr]) -> Expr | None:
        """The loop ``e`` (a build or sumbuild of literal size) over ``v`` < c·k, used only as ``v / k``
        and ``v mod k``, as ``make(c, a, make(k, b, ...))``; None where it is used otherwise."""
        n, var, body = e.args
        v = var.data
        ks: set[int] = set()
        if not self.uses(body, v, ks) or len(ks) != 1:
            return None
        (k,) = ks
        if not isinstance(n.data, int) or n.data % k or n.data < k:
            return None
        hi, lo = self.fresh(f"{v}_hi"), self.fresh(f"{v}_lo")
        inner = self.replace(body, v, k, hi, lo)
        return make(E.const(n.data // k), hi, make(E.const(k), lo, inner))

    def split_let(self, e: Expr) -> Expr | None:
        """``(let (h (build c·k ...)) body)`` with the build nested and ``body``'s reads of ``h``
        split, where the build splits and ``body`` only reads ``h`` with ``index``."""
        var, rhs, body = e.args
        if not _only_indexed(body, var.data):
            return None
        nested = self.split(rhs, E.build)
        if nested is None:
            return None
        k = nested.args[2].args[0].data
        assert isinstance(k, int)
        new = E.var(var.data, nested.type)
        return E.let(new, nested, _reindexed(body, var.data, new, k))

    def uses(self, e: Expr, v: str, ks: set[int]) -> bool:
        """Whether ``v`` occurs in ``e`` only as ``(div v k)`` or its remainder (the ``k`` into ``ks``)."""
        for form in (_remainder, _quotient):
            k = form(e, v)
            if k is not None:
                ks.add(k)
                return True
        if e.op is Op.VAR:
            return bool(e.data != v)
        if e.is_binder and e.bound_var.data == v:
            return False  # (rebound: left alone)
        return all(self.uses(a, v, ks) for a in e.args)

    def replace(self, e: Expr, v: str, k: int, hi: Expr, lo: Expr) -> Expr:
        if _remainder(e, v) == k:
            return lo
        if _quotient(e, v) == k:
            return hi
        if not e.args or v not in e.free:
            return e
        return e.replace_args(tuple(self.replace(a, v, k, hi, lo) for a in e.args))


def _only_indexed(e: Expr, name: str) -> bool:
    """Whether every free occurrence of ``name`` in ``e`` is the vector that an ``index`` reads."""
    if name not in e.free:
        return True
    if e.op is Op.VAR:
        return False
    if e.op is Op.INDEX and e.args[1].op is Op.VAR and e.args[1].data == name:
        return _only_indexed(e.args[0], name)
    if e.is_binder and e.bound_var.data == name:
        return False  # (rebound: refused rather than told apart from the outer one)
    return all(_only_indexed(a, name) for a in e.args)


def _reindexed(e: Expr, name: str, new: Expr, k: int) -> Expr:
    """``e`` with each ``(index i name)`` read as ``(index (i mod k) (index (i / k) new))``."""
    if name not in e.free:
        return e
    if e.op is Op.INDEX and e.args[1].op is Op.VAR and e.args[1].data == name:
        i = _reindexed(e.args[0], name, new, k)
        return E.op(Op.INDEX, imod(i, k), E.op(Op.INDEX, index_div(i, k), new))
    return e.replace_args(tuple(_reindexed(a, name, new, k) for a in e.args))


__all__ = ["nest_flat_loops", "split_flat_loops"]
