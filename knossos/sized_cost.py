"""The cost model with real vector sizes.

The reference model assumes every vector has 16 elements.  Wall-clock time depends on the real
sizes, so here the same per-op costs are charged with sizes found by a small abstract interpretation:
integers whose values are known (literals, given sizes, arithmetic on them, ``size`` of a vector of
known size) and vector shapes (from sized parameters ``(Vec n Float)`` or sizes given per parameter,
through ``build``, ``index``, ``let``, calls...).  Wherever a size cannot be known, the reference's
16 is used.  Sizes are given by name: a size variable or Integer parameter (``n=1000``), or a vector
parameter (``x=1000`` or, for a matrix, ``x=1000x500``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Union

from knossos import trampoline
from knossos.arith import INT_MAX, idiv
from knossos.callee import CalleeKind
from knossos.cost import (
    ASSUMED_VECTOR_SIZE,
    LET_COST,
    MALLOC_COST,
    OWN_COST,
    call_overhead,
    if_cost,
)
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.op_table import ARITHMETIC
from knossos.ops import Op
from knossos.program import Def, Program, SizeTree, TupleSizes, VecSizes
from knossos.types import INTEGER, Kind, Type


@dataclass(frozen=True)
class VecShape:
    """A vector of ``length`` (``None``: unknown) elements, each described by ``elem``."""

    length: int | None
    elem: Abstract


Abstract = Union[int, None, VecShape, tuple["Abstract", ...]]
#: Real sizes by name: a parameter's lengths at each nesting level (``image=16x128``: ``(16, 128)``).
Sizes = Mapping[str, int | tuple[int, ...]]
_Env = dict[str, Abstract]
_Walk = trampoline.Step[tuple[Expr, _Env], tuple[float, Abstract]]


def elements(t: Type, a: Abstract, default: int = ASSUMED_VECTOR_SIZE) -> int:
    """Number of scalars in a value of type ``t`` described by ``a``."""
    if t.kind is Kind.VEC:
        length = a.length if isinstance(a, VecShape) and a.length is not None else default
        inner = a.elem if isinstance(a, VecShape) else None
        return length * elements(t.elem, inner, default)
    if t.kind is Kind.TUPLE:
        parts = a if isinstance(a, tuple) else (None,) * len(t.children)
        return sum(elements(c, p, default) for c, p in zip(t.children, parts, strict=True))
    return 1


def shape_from_dims(dims: tuple[int, ...]) -> Abstract:
    out: Abstract = None
    for d in reversed(dims):
        out = VecShape(d, out)
    return out


def _from_sizes(tree: SizeTree, sizes: Sizes) -> Abstract:
    if isinstance(tree, VecSizes):
        length = sizes.get(tree.name) if tree.name is not None else None
        return VecShape(length if isinstance(length, int) else None, _from_sizes(tree.elem, sizes))
    if isinstance(tree, TupleSizes):
        return tuple(_from_sizes(t, sizes) for t in tree.parts)
    return None


def param_env(d: Def, sizes: Sizes) -> _Env:
    """What the given sizes say about the parameters and size variables of ``d``."""
    env: _Env = {}
    for name in d.size_vars:
        value = sizes.get(name)
        env[name] = value if isinstance(value, int) else None
    for p in d.params:
        given = sizes.get(p.name)
        if given is not None and p.type.kind is Kind.VEC:
            dims = (given,) if isinstance(given, int) else tuple(given)
            if len(dims) > p.type.vec_rank:
                raise KsUsageError(f"size {p.name}={'x'.join(map(str, dims))} has more dimensions than {p.type}")
            env[p.name] = shape_from_dims(dims)
        elif given is not None and p.type is INTEGER and isinstance(given, int):
            env[p.name] = given
        elif given is not None:
            raise KsUsageError(f"a size cannot be given for '{p.name}', which is {p.type}")
        else:
            env[p.name] = _from_sizes(p.sizes, sizes)
        _learn_size_names(p.sizes, env[p.name], env)
    return env


def _learn_size_names(tree: SizeTree, shape: Abstract, env: _Env) -> None:
    """A vector given as ``x=10`` whose type is ``(Vec n Float)`` tells that ``n`` is 10."""
    while isinstance(tree, VecSizes) and isinstance(shape, VecShape):
        if tree.name is not None and env.get(tree.name) is None and shape.length is not None:
            env[tree.name] = shape.length
        tree, shape = tree.elem, shape.elem


class SizedCost:
    """Costs expressions with the sizes of an abstract environment."""

    def __init__(self, default: int = ASSUMED_VECTOR_SIZE) -> None:
        self.default = default

    def cost(self, expr: Expr, env: _Env) -> tuple[float, Abstract]:
        result: tuple[float, Abstract] = trampoline.run_steps(lambda item: self._start(*item), (expr, dict(env)))
        return result

    def _length(self, a: Abstract) -> int:
        return a if isinstance(a, int) and a >= 0 else self.default

    def _start(self, node: Expr, env: _Env) -> tuple[float, Abstract] | _Walk:
        if node.op is Op.CONST:
            return 0.0, node.data if node.type is INTEGER else None
        if node.op is Op.VAR:
            return 0.0, env.get(node.data)
        return self._node(node, env)

    def _node(self, node: Expr, env: _Env) -> _Walk:
        op, args = node.op, node.args
        if op is Op.LET:
            var, rhs, body = args
            c_rhs, a_rhs = yield rhs, env
            c_body, a_body = yield body, {**env, var.data: a_rhs}
            return LET_COST + c_rhs + c_body, a_body
        if op in (Op.BUILD, Op.SUMBUILD):
            n, var, body = args
            c_n, a_n = yield n, env
            c_body, a_body = yield body, {**env, var.data: None}
            length = self._length(a_n)
            if op is Op.BUILD:
                return MALLOC_COST + c_n + length * c_body, VecShape(a_n if isinstance(a_n, int) else None, a_body)
            adds = max(length - 1, 0) * elements(body.type, a_body, self.default)
            return adds + c_n + length * c_body, a_body
        if op is Op.IF:
            c_c, _ = yield args[0], env
            c_t, a_t = yield args[1], env
            c_f, a_f = yield args[2], env
            return if_cost(c_c, c_t, c_f), a_t if a_t == a_f else None
        if op is Op.LAM:
            c_body, _ = yield args[1], {**env, args[0].data: None}
            return c_body, None
        costs: list[float] = []
        abstracts: list[Abstract] = []
        for a in args:
            c, ab = yield a, env
            costs.append(c)
            abstracts.append(ab)
        if op is Op.CALL:
            return (yield from self._call(node, costs, abstracts))
        own, result = self._own(node, abstracts)
        return own + sum(costs), result

    def _call(self, node: Expr, costs: list[float], abstracts: list[Abstract]) -> _Walk:
        callee = node.data
        overhead = call_overhead(len(node.args)) + sum(costs)
        if callee.kind is not CalleeKind.DEF:
            return overhead + callee.body_cost, None
        d: Def = callee.definition
        inner: _Env = {p.name: a for p, a in zip(d.params, abstracts, strict=True)}
        for name in d.size_vars:
            inner.setdefault(name, None)
        c_body, a_body = yield d.body, inner
        return overhead + d.unpack_cost + c_body, a_body

    def _own(self, node: Expr, a: list[Abstract]) -> tuple[float, Abstract]:
        return _OWN[node.op](self, node, a)


# -- the own cost and result of every op but the structural ones, over its arguments' abstractions ----
OwnRule = Callable[[SizedCost, Expr, list[Abstract]], tuple[float, Abstract]]

#: Ops that :meth:`SizedCost._node` costs itself (they bind, branch, loop or call); every other op
#: but a literal or variable has a rule in :data:`_OWN`.
STRUCTURAL: Final = frozenset({Op.LET, Op.BUILD, Op.SUMBUILD, Op.IF, Op.LAM, Op.CALL})


def _own_arith(sc: SizedCost, node: Expr, a: list[Abstract]) -> tuple[float, Abstract]:
    op, args = node.op, node.args
    sizes = [elements(x.type, ab, sc.default) for x, ab in zip(args, a, strict=True)]
    biggest = max(sizes)
    own = OWN_COST[op] * biggest + (MALLOC_COST if biggest > 1 else 0.0)
    return own, _arith_abstract(op, node.type, args, a)


def _own_sum(sc: SizedCost, node: Expr, a: list[Abstract]) -> tuple[float, Abstract]:
    length = sc._length(a[0].length if isinstance(a[0], VecShape) else None)
    elem = a[0].elem if isinstance(a[0], VecShape) else None
    return float(max(length - 1, 0)), elem  # the reference charges one add per element, whatever its type


def _own_get(sc: SizedCost, node: Expr, a: list[Abstract]) -> tuple[float, Abstract]:
    return 0.0, a[0][node.data[0] - 1] if isinstance(a[0], tuple) else None


def _own_flat(sc: SizedCost, node: Expr, a: list[Abstract]) -> tuple[float, Abstract]:
    return OWN_COST[node.op], None


_OWN: dict[Op, OwnRule] = {
    **dict.fromkeys(OWN_COST, _own_flat),
    **dict.fromkeys((*ARITHMETIC, Op.NEG), _own_arith),
    Op.SIZE: lambda sc, node, a: (OWN_COST[Op.SIZE], a[0].length if isinstance(a[0], VecShape) else None),
    Op.INDEX: lambda sc, node, a: (OWN_COST[Op.INDEX], a[1].elem if isinstance(a[1], VecShape) else None),
    Op.SUM: _own_sum,
    Op.CONSTVEC: lambda sc, node, a: (MALLOC_COST, VecShape(a[0] if isinstance(a[0], int) else None, a[1])),
    Op.DELTAVEC: lambda sc, node, a: (MALLOC_COST, VecShape(a[0] if isinstance(a[0], int) else None, a[2])),
    Op.TUPLE: lambda sc, node, a: (LET_COST * len(node.args), tuple(a)),
    Op.GET: _own_get,
    Op.ASSERT: lambda sc, node, a: (OWN_COST[Op.ASSERT], a[1]),
    Op.APPLY: lambda sc, node, a: (2.0, None),
}

assert not STRUCTURAL & set(_OWN)


def _arith_abstract(op: Op, t: Type, args: tuple[Expr, ...], a: list[Abstract]) -> Abstract:
    """What is known about the result of an arithmetic op."""
    if t is INTEGER:
        return _integer_arith(op, a)
    if t.is_scalar:
        return None
    for operand, known in zip(args, a, strict=True):
        if operand.type is t and known is not None:
            return known  # element-wise: the result has the shape of the structured operand
    return None


def _integer_arith(op: Op, a: list[Abstract]) -> int | None:
    if op is Op.NEG:
        return -a[0] if isinstance(a[0], int) else None
    x, y = a
    if not (isinstance(x, int) and isinstance(y, int)):
        return None
    if op is Op.ADD:
        return x + y
    if op is Op.SUB:
        return x - y
    if op is Op.MUL:
        return x * y
    return idiv(x, y) if y != 0 else None


def sized_def_cost(program: Program, name: str, sizes: Sizes, default: int = ASSUMED_VECTOR_SIZE) -> float:
    """Cost of a def when its vectors have the given sizes (others: ``default``)."""
    d = program.defs[name]
    body_cost, _ = SizedCost(default).cost(d.body, param_env(d, sizes))
    return LET_COST * len(program.closure(name)) + d.unpack_cost + body_cost


def parse_sizes(specs: list[str]) -> dict[str, int | tuple[int, ...]]:
    """``["n=1000", "x=10x20"]`` -> ``{"n": 1000, "x": (10, 20)}``; one-line errors otherwise."""
    out: dict[str, int | tuple[int, ...]] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        try:
            dims = tuple(int(v) for v in value.lower().split("x"))
        except ValueError:
            dims = ()
        if not sep or not name or not dims or any(d < 0 for d in dims):
            raise KsUsageError(f"bad size '{_short(spec)}': expected NAME=N or NAME=NxM with non-negative integers")
        if any(d > INT_MAX for d in dims):  # sizes are Integers, which are 64-bit
            raise KsUsageError(f"bad size '{_short(spec)}': a size is at most {INT_MAX} (Integers are 64-bit)")
        out[name] = dims[0] if len(dims) == 1 else dims
    return out


def check_size_levels(sizes: Mapping[str, int | tuple[int, ...]], levels: Mapping[str, int], file: str | None) -> None:
    """A one-line error when a size of :func:`parse_sizes` gives a parameter more lengths than it has
    levels of vectors (``levels``: each parameter's :attr:`Type.vec_rank`; a scalar takes one length,
    its own value); the extra lengths would be ignored silently."""
    for name, dims in sizes.items():
        given = len(dims) if isinstance(dims, tuple) else 1
        if name in levels and given > max(levels[name], 1):
            raise KsUsageError(
                f"--size {name}: {given} lengths for a parameter with {levels[name]} level(s) of vectors", None, file
            )


def _short(text: str, most: int = 60) -> str:
    """``text``, cut to ``most`` characters for an error line."""
    return text if len(text) <= most else text[: most - 3] + "..."
