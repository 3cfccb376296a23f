"""Expression nodes: the immutable :class:`Expr` and what a node shows of itself.

Each node caches what search asks for over and over: its :attr:`~Expr.type` (nodes are type-checked
as they are built, so an ill-typed node cannot exist), its :attr:`~Expr.cost` under the reference
cost model, its node count :attr:`~Expr.size` and its free variable names :attr:`~Expr.free`, and
the hashes and weights of :mod:`knossos.alpha`.  Nodes are made only by :mod:`knossos.interning`,
which fills the slots; ``a is b`` is the equality test, ``==`` is identity.

This module is the bottom of the expression modules, which all read nodes.  What a node does with
the modules above it (being rebuilt over other children, written as text, pickled) it reaches
through the functions that :func:`connect` hands it: :mod:`knossos.expr` connects them as it loads,
and the ``knossos`` package imports that module first, before any node can be made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

from knossos.freeset import FreeNames
from knossos.ops import BINDERS, Op
from knossos.types import Type

LiteralValue = Union[bool, int, float]
Position = tuple[int, int]  # (position polynomial, number of occurrences), modulo the prime
PositionMap = tuple[Any, int, int, int]  # (a knossos.hamt trie, a, b, 1 / a): see knossos.alpha


class Expr:
    """An interned expression node.  Build nodes with the functions of :mod:`knossos.expr`."""

    __slots__ = (
        "__weakref__",
        "_position_map",
        "_positions",
        "alpha_hash",
        "args",
        "cost",
        "data",
        "free",
        "free_weight",
        "occurrence_weight",
        "op",
        "shape_hash",
        "size",
        "type",
    )

    op: Op
    #: Children.  A binder's bound variable is one of them, see :data:`knossos.ops.BINDERS`.
    args: tuple[Expr, ...]
    #: Per-op payload: a constant's value, a variable's name, ``(i, n)`` of ``get$i$n``, a callee.
    data: Any
    type: Type
    cost: float
    #: Number of nodes, this one included.
    size: int
    #: Names of the free variables: a frozenset, or a :class:`knossos.freeset.FreeSet` (which shares
    #: structure with its children's) when there are many.
    free: FreeNames
    #: The hash, ``hash((shape_hash, free_weight))``: equal for alpha-variants, the same in every process.
    alpha_hash: int
    #: The hash of the shape, variable names left out (a binder's records where its variable occurs).
    shape_hash: int
    #: Sum over the free variables of name weight times position, modulo the prime (:mod:`knossos.alpha`).
    free_weight: int
    #: Sum over the free variables of name weight times number of occurrences, modulo the prime.
    occurrence_weight: int
    #: Memo of (position, number of occurrences) of free variables, by name, kept by :mod:`knossos.alpha`.
    _positions: dict[str, Position] | None
    #: Every free variable's position at once, for large nodes (:mod:`knossos.alpha`): a persistent trie
    #: shared with the largest child, and the linear map ``(a, b)`` from its entries to positions.
    _position_map: PositionMap | None

    def __hash__(self) -> int:
        return self.alpha_hash

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("expressions are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("expressions are immutable")

    def __reduce__(self) -> tuple[object, ...]:
        return (_from_wire, (_to_wire(self),))

    def __str__(self) -> str:
        return _write(self)

    def __repr__(self) -> str:
        text = _write(self, width=10**9)
        return f"Expr({text if len(text) <= 200 else text[:197] + '...'})"

    # -- convenient views --------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name of a variable."""
        assert self.op is Op.VAR
        return str(self.data)

    @property
    def value(self) -> LiteralValue:
        """The value of a constant."""
        assert self.op is Op.CONST
        return self.data  # type: ignore[no-any-return]

    @property
    def is_binder(self) -> bool:
        return self.op in BINDERS

    @property
    def bound_var(self) -> Expr:
        """The binding occurrence of a binder's variable."""
        return self.args[BINDERS[self.op][0]]

    def replace_args(self, args: tuple[Expr, ...]) -> Expr:
        """The same node with other children (the result is interned and type-checked)."""
        if args == self.args:
            return self
        return _make(self.op, args, self.data)


Make = Callable[[Op, tuple[Expr, ...], Any], Expr]
Write = Callable[..., str]

# The functions of the modules above that a node calls; see connect.
_make: Make
_write: Write
_to_wire: Callable[[Expr], object]
_from_wire: Callable[[Any], Expr]


def connect(make: Make, write: Write, to_wire: Callable[[Expr], object], from_wire: Callable[[Any], Expr]) -> None:
    """Hand the nodes what they use of the modules above this one: ``make`` builds a node (for
    :meth:`Expr.replace_args`), ``write`` writes one as text (``str``, ``repr``), and ``to_wire`` and
    ``from_wire`` are the flat form a node is pickled as (``from_wire`` is what the pickle names)."""
    global _make, _write, _to_wire, _from_wire
    _make, _write, _to_wire, _from_wire = make, write, to_wire, from_wire
