"""The sizes of a def's vectors that its loops make known before it runs.

``v = build n (lam i B)`` has ``n`` elements, and each element has the sizes of ``B``'s result that
do not depend on ``i`` (nor on anything else bound in ``B``): a literal, or a variable bound outside
the loop.  ``(index k v)`` has the sizes of ``v`` past the first.  A value that :mod:`autodiff.hoist` moved out
of its loop under the test that the loop runs has its first branch's sizes: it is read only there.  A loop over ``n`` where ``n`` is
known to be ``v``'s size reads each element of ``v`` once, so the reverse pass gives ``v`` the plain
gather ``build n (lam i d$elem)``, not one guarded in case the sizes differ (which doubles the code
of every loop it encloses: 2^depth copies of a loop nest's reverse pass, mostly never run).
"""

from __future__ import annotations

from autodiff.anf import Block, Branch, Loop
from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op

#: Known sizes of a vector's leading dimensions (atoms: literals, or variables bound before).
_Dims = tuple[Expr, ...]


class Extents:
    """The known sizes of the vectors of a def's blocks, by variable name (unique in a def)."""

    def __init__(self) -> None:
        self.dims: dict[str, _Dims] = {}
        #: The one-op value of ``t = (size v)`` bindings: ``t``'s name -> ``v``'s name.
        self.size_of: dict[str, str] = {}

    def record(self, b: Block) -> _Dims:
        """Record the sizes of the vectors bound in ``b`` (and in its loops and branches); return those
        of its result."""
        for bind in b.binds:
            name = bind.var.data
            value = bind.value
            if isinstance(value, Loop):
                inner = self.record(value.body)
                if value.op is Op.BUILD:
                    bound = {x.var.data for x in value.body.binds} | {value.index.data}
                    self.dims[name] = (value.n, *_prefix_outside(inner, bound))
                else:
                    self.dims[name] = _prefix_outside(inner, {x.var.data for x in value.body.binds})
            elif isinstance(value, Branch):
                then = self.record(value.then)
                self.record(value.other)
                if value.guard:  # read only where its loop runs: the sizes of its value there
                    self.dims[name] = _prefix_outside(then, {x.var.data for x in value.then.binds})
            elif value.op is Op.INDEX and value.args[1].op is Op.VAR:
                self.dims[name] = self.dims.get(value.args[1].data, ())[1:]
            elif value.op is Op.SIZE and value.args[0].op is Op.VAR:
                self.size_of[name] = value.args[0].data
            elif value.op is Op.VAR:
                self.dims[name] = self.dims.get(value.data, ())
        result = b.result
        return self.dims.get(result.data, ()) if result is not None and result.op is Op.VAR else ()

    def covers(self, n: Expr, v: Expr) -> bool:
        """Whether ``n`` (an atom) is known to be the size of the vector variable ``v``."""
        if n.op is Op.VAR and self.size_of.get(n.data) == v.data:
            return True
        dims = self.dims.get(v.data, ())
        return bool(dims) and dims[0].op is n.op and dims[0].data == n.data

    def size(self, v: Expr) -> Expr:
        """``v``'s size: the known one, or ``(size v)``."""
        dims = self.dims.get(v.data, ())
        return dims[0] if dims else E.op(Op.SIZE, v)


def _prefix_outside(dims: _Dims, bound: set[str]) -> _Dims:
    """The leading sizes of ``dims`` that name nothing in ``bound`` (the same in every iteration)."""
    out: list[Expr] = []
    for d in dims:
        if d.op is Op.VAR and d.data in bound:
            break
        out.append(d)
    return tuple(out)
