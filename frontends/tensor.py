"""Tensors as Knossos code: a shape and a function from an index to the element's expression.

A tensor of shape ``(n0, ..., nk)`` is a ``(Vec (Vec ... Float))`` nested k + 1 deep, a 0-d tensor a
Float.  :class:`Tensor` is *lazy*: ``at(i0, ..., ik)`` builds the expression of one element, so that
element-wise ops and views compose into one loop body instead of one loop each.  A :class:`LetBlock`
gathers the ``let`` bindings of the tensors it materialises (``(build n0 (lam i0 ...))``) and wraps a
result in them.  Index arithmetic folds constants as it goes, so a view of a view costs no more than
the index expression it needs.  Nothing here imports torch: :mod:`frontends.aten` says what
each ATen op is in these terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import Op
from knossos.types import BOOL, FLOAT, INTEGER, Type, vec

Index = tuple[Expr, ...]


@dataclass(frozen=True)
class Tensor:
    """``shape`` and ``at(index) -> element``; ``cheap`` when reading an element costs only index
    arithmetic (a variable or a literal read through a view), so that reading it many times is fine.
    ``sums``: an element's expression has a sum (a product's or a reduction's).  ``source``: for a
    view that reads each element of a tensor once (a reshape, a permute), that tensor (itself no such
    view) and the index map; :meth:`LetBlock.materialise` may compute it in its own layout instead."""

    shape: tuple[int, ...]
    at: Callable[[Index], Expr]
    cheap: bool
    elem: Type = FLOAT
    sums: bool = False
    source: tuple[Tensor, Callable[[Index], Index]] | None = None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def tensor_type(rank: int, elem: Type = FLOAT) -> Type:
    """``(Vec ... elem)`` nested ``rank`` deep (``elem`` itself for rank 0)."""
    t = elem
    for _ in range(rank):
        t = vec(t)
    return t


def from_var(v: Expr, shape: tuple[int, ...], elem: Type = FLOAT) -> Tensor:
    """The tensor held in the variable ``v`` (read with ``index``, outermost dimension first)."""

    def at(idx: Index) -> Expr:
        out = v
        for i in idx:
            out = E.op(Op.INDEX, i, out)
        return out

    return Tensor(shape, at, cheap=True, elem=elem)


def flit(value: float) -> Expr:
    """A Float: a literal where it is finite; an infinity or NaN as the division that makes it
    (``(div -1.0 0.0)`` is -inf), since the language's Float literals are finite (the rules do not
    fold a division whose result is not)."""
    x = float(value)
    if math.isfinite(x):
        return E.const(x)
    top = 0.0 if math.isnan(x) else math.copysign(1.0, x)
    return E.op(Op.DIV, E.const(top), E.const(0.0))


def literal_of(value: float | int | bool, elem: Type = FLOAT) -> Expr:
    """``value`` as a literal of the element type ``elem`` (Float, Integer or Bool)."""
    if elem is BOOL:
        return E.const(bool(value))
    if elem is INTEGER:
        return E.const(int(value))
    return flit(float(value))


def scalar(value: float | int | bool, elem: Type = FLOAT) -> Tensor:
    """A literal as a 0-d tensor."""
    c = literal_of(value, elem)
    return Tensor((), lambda idx: c, cheap=True, elem=elem)


def filled(shape: tuple[int, ...], value: float | int | bool, elem: Type = FLOAT) -> Tensor:
    c = literal_of(value, elem)
    return Tensor(shape, lambda idx: c, cheap=True, elem=elem)


def convert(e: Expr, src: Type, dst: Type) -> Expr:
    """An element of type ``src`` as one of ``dst`` (as torch converts: True is 1, a number is True
    unless 0); a Float is not made an Integer here (torch truncates; no op of the language does)."""
    if src is dst:
        return e
    if dst is BOOL:
        zero = E.const(0) if src is INTEGER else E.const(0.0)
        return E.op(Op.NE, e, zero)
    if src is BOOL:
        return E.op(Op.IF, e, literal_of(1, dst), literal_of(0, dst))
    if src is INTEGER and dst is FLOAT:
        return E.op(Op.TO_FLOAT, e)
    raise ValueError(f"a {src} element as a {dst}")


def converted(t: Tensor, elem: Type) -> Tensor:
    """``t`` with elements of type ``elem``."""
    if t.elem is elem:
        return t
    src = t.elem
    convert(E.const(0 if src is INTEGER else (False if src is BOOL else 0.0)), src, elem)  # fails now, not later
    return Tensor(t.shape, lambda idx: convert(t.at(idx), src, elem), cheap=False, elem=elem)


# -- index arithmetic (Integers, constants folded) ---------------------------------------------------
def ic(n: int) -> Expr:
    return E.const(int(n))


def _int_value(e: Expr) -> int | None:
    return e.data if e.op is Op.CONST and e.type is INTEGER else None


def iadd(a: Expr, b: Expr) -> Expr:
    x, y = _int_value(a), _int_value(b)
    if x is not None and y is not None:
        return ic(x + y)
    if x == 0:
        return b
    if y == 0:
        return a
    if y is not None and y < 0:
        return E.op(Op.SUB, a, ic(-y))
    return E.op(Op.ADD, a, b)


def imul(a: Expr, k: int) -> Expr:
    x = _int_value(a)
    if x is not None:
        return ic(x * k)
    if k == 0:
        return ic(0)
    return a if k == 1 else E.op(Op.MUL, a, ic(k))


def index_div(a: Expr, k: int) -> Expr:
    """``a / k`` for ``a >= 0`` (Integer division truncates, as in C++)."""
    x = _int_value(a)
    if x is not None:
        return ic(x // k)
    return a if k == 1 else E.op(Op.DIV, a, ic(k))


def imod(a: Expr, k: int) -> Expr:
    """``a mod k`` for ``a >= 0``: the language has no mod, so ``a - (a / k) * k``."""
    x = _int_value(a)
    if x is not None:
        return ic(x % k)
    if k == 1:
        return ic(0)
    return E.op(Op.SUB, a, E.op(Op.MUL, E.op(Op.DIV, a, ic(k)), ic(k)))


def index_in_range(i: Expr, n: int) -> Expr | None:
    """``0 <= i < n`` as a Bool expression, or None where it holds for every value ``i`` can take
    (a literal in range)."""
    x = _int_value(i)
    if x is not None:
        return None if 0 <= x < n else E.const(False)
    return E.op(Op.AND, E.op(Op.GTE, i, ic(0)), E.op(Op.LT, i, ic(n)))


def clamped(i: Expr, n: int) -> Expr:
    """``i`` moved into ``0 <= i < n``: a padded read's position, read before the test of
    :func:`index_in_range` decides its use (a read inside a branch would make reverse mode build a
    whole-input cotangent for every element read)."""
    return E.op(Op.MAX, ic(0), E.op(Op.IF, E.op(Op.LT, i, ic(n)), i, ic(n - 1)))


# -- bindings ----------------------------------------------------------------------------------------
class FreshNames:
    """Fresh variable names: ``PREFIX_N``, never one of ``taken``."""

    def __init__(self, taken: Sequence[str] = ()) -> None:
        self.taken = set(taken)
        self.count = 0

    def __call__(self, prefix: str) -> str:
        while True:
            self.count += 1
            name = f"{prefix}_{self.count}"
            if name not in self.taken:
                self.taken.add(name)
                return name


class LetBlock:
    """A chain of ``let`` bindings under construction, and the fresh names used in it."""

    def __init__(self, names: FreshNames) -> None:
        self.names = names
        self.bindings: list[tuple[Expr, Expr]] = []

    def index_var(self) -> Expr:
        return E.var(self.names("i"), INTEGER)

    def whole(self, t: Tensor) -> Expr:
        """The expression of the whole tensor: nested builds of its elements (the element if 0-d)."""
        idx = tuple(self.index_var() for _ in t.shape)
        body = t.at(idx)
        for i, n in zip(reversed(idx), reversed(t.shape), strict=True):
            body = E.build(ic(n), i, body)
        return body

    def bind(self, rhs: Expr, prefix: str = "t") -> Expr:
        v = E.var(self.names(prefix), rhs.type)
        self.bindings.append((v, rhs))
        return v

    def materialise(self, t: Tensor, prefix: str = "t") -> Tensor:
        """``t`` computed once into a let-bound variable, read from it after; a view of a computed
        tensor that is best computed in its own layout (:func:`own_layout_first`), that tensor, read
        through the view (copied where the view merges dimensions)."""
        if t.source is not None and not t.source[0].cheap:
            base, in_index = t.source
            first = own_layout_first(base, in_index, t.rank)
            if first is not None:
                read = view(self.cheap(base, prefix), t.shape, in_index)
                return self.materialise(read, prefix) if first == "copy" else read
        return from_var(self.bind(self.whole(t), prefix), t.shape, t.elem)

    def cheap(self, t: Tensor, prefix: str = "t") -> Tensor:
        """``t`` itself where reading it is cheap, else materialised: for ops that read an element
        more than once."""
        return t if t.cheap else self.materialise(t, prefix)

    def wrap(self, body: Expr) -> Expr:
        for v, rhs in reversed(self.bindings):
            body = E.let(v, rhs, body)
        return body

    def share(self, e: Expr, use: Callable[[Expr], Expr]) -> Expr:
        """``use(e)`` where ``use`` may repeat its argument: a let inside the element when ``e`` is not
        a variable or literal."""
        if e.op in (Op.VAR, Op.CONST):
            return use(e)
        v = E.var(self.names("e"), e.type)
        return E.let(v, e, use(v))


# -- views: index maps -------------------------------------------------------------------------------
def view(t: Tensor, shape: tuple[int, ...], in_index: Callable[[Index], Index], onto: bool = False) -> Tensor:
    """A tensor of ``shape`` whose element at an index is ``t``'s at ``in_index(index)``.  ``onto``: the
    view reads each element of ``t`` once (a reshape, a permute, an expand that repeats nothing)."""
    at: Callable[[Index], Expr] = lambda idx: t.at(in_index(idx))  # noqa: E731
    source = None
    if onto:
        base, inner = t.source if t.source is not None else (t, lambda idx: idx)
        source = (base, lambda idx: inner(in_index(idx)))
    return Tensor(shape, at, cheap=t.cheap, elem=t.elem, sums=t.sums, source=source)


def own_layout_first(base: Tensor, in_index: Callable[[Index], Index], rank: int) -> str | None:
    """How a view of rank ``rank`` that reads the computed tensor ``base`` once through ``in_index``
    is best materialised, where not as written (None):

    - ``"read"``: the view's innermost index does not index ``base``'s innermost dimension (a
      transpose, ``k.transpose(2, 3)``).  A build of the view would read ``base``'s operands down
      their columns, element by element, whose reverse pass gives each a one-hot into their
      cotangent; ``base`` is computed in its own layout and read through the view, so that a product
      over the moved dimension (``q k^T``) reads it along its rows (the C++ backend's blocked
      products) and its reverse pass is a plain product.
    - ``"copy"``: the view merges its innermost dimension (its index map divides it) of a tensor whose elements are
      sums (attention's weighted sum of values, its heads merged: ``o.transpose(1, 2).reshape(b,
      t, -1)``).  A build of the view would compute each sum with its operands read at quotients and
      remainders, a one-hot in the reverse pass per term; ``base`` is computed in its own layout and
      copied into the view's, one computed read per element.

    A merge of element-wise results is left as written: :mod:`frontends.flat_loops` nests its loops."""
    idx = tuple(E.var(f"view$probe{k}", INTEGER) for k in range(rank))
    coords = in_index(idx)
    if base.sums and rank and any(n.op is Op.DIV and idx[-1].data in n.free for c in coords for n in E.preorder(c)):
        return "copy"
    if rank and coords and coords[-1].op is Op.VAR and coords[-1] is not idx[-1]:
        return "read"
    return None


def reshape_index(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Callable[[Index], Index]:
    """The index map of a row-major reshape: dimensions of size 1 are dropped or read at 0, the others
    grouped into runs of equal product; within a run of several dimensions, the output index is
    flattened and split again (Integer division and remainder)."""
    in_dims = [k for k, n in enumerate(in_shape) if n != 1]
    out_dims = [k for k, n in enumerate(out_shape) if n != 1]
    groups: list[tuple[list[int], list[int]]] = []
    a = b = 0
    while a < len(in_dims) or b < len(out_dims):
        gi, go = [in_dims[a]], [out_dims[b]]
        pi, po = in_shape[in_dims[a]], out_shape[out_dims[b]]
        a, b = a + 1, b + 1
        while pi != po:
            if pi < po:
                gi.append(in_dims[a])
                pi *= in_shape[in_dims[a]]
                a += 1
            else:
                go.append(out_dims[b])
                po *= out_shape[out_dims[b]]
                b += 1
        groups.append((gi, go))

    def in_index(idx: Index) -> Index:
        out = [ic(0)] * len(in_shape)
        for gi, go in groups:
            if len(gi) == 1 and len(go) == 1:
                out[gi[0]] = idx[go[0]]
                continue
            flat = ic(0)
            for k in go:
                flat = iadd(imul(flat, out_shape[k]), idx[k])
            stride = 1
            for pos, k in enumerate(reversed(gi)):
                part = index_div(flat, stride)
                out[k] = part if pos == len(gi) - 1 else imod(part, in_shape[k])
                stride *= in_shape[k]
        return tuple(out)

    return in_index


def broadcast_index(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Callable[[Index], Index]:
    """Numpy broadcasting: the trailing dimensions line up; a dimension of size 1 is read at 0."""
    lead = len(out_shape) - len(shape)

    def in_index(idx: Index) -> Index:
        return tuple(ic(0) if n == 1 and out_shape[lead + k] != 1 else idx[lead + k] for k, n in enumerate(shape))

    return in_index


def broadcasts(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> bool:
    """Whether reading ``shape`` broadcast to ``out_shape`` reads some element more than once."""
    n = 1
    for d in shape:
        n *= d
    m = 1
    for d in out_shape:
        m *= d
    return m > n
