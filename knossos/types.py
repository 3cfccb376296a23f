"""Knossos types: ``Integer``, ``Float``, ``Bool``, ``(Vec T)``, ``(Tuple T...)`` and ``(Lam S T)``.

Types are interned: each distinct type exists once, so ``is`` is type equality and hashing is
O(1).  Build them with :data:`INTEGER`, :data:`FLOAT`, :data:`BOOL`, :func:`vec`, :func:`tuple_of`
and :func:`lam_type`.  The sizes of the paper's sized vectors ``(Vec n T)`` are not part of a type; a
def's signature keeps them (see :mod:`knossos.program`).
"""

from __future__ import annotations

import enum
from typing import ClassVar

from knossos.errors import KsTypeError

#: Deepest nesting of a type.  Values, their JSON form and element counts are walked recursively over
#: a type's structure, so types (unlike expressions) have a depth limit; real programs stay far below.
MAX_TYPE_DEPTH = 32


class Kind(enum.IntEnum):
    INTEGER = 1
    FLOAT = 2
    BOOL = 3
    VEC = 4
    TUPLE = 5
    LAM = 6


class Type:
    """An interned Knossos type.  Compare with ``is`` (``==`` is identity too)."""

    __slots__ = (
        "_text",
        "children",
        "depth",
        "elements16",
        "h",
        "is_number",
        "is_numeric_structure",
        "is_scalar",
        "kind",
        "leaves",
    )

    _table: ClassVar[dict[tuple[Kind, tuple[Type, ...]], Type]] = {}

    kind: Kind
    children: tuple[Type, ...]
    h: int
    leaves: frozenset[Kind]
    elements16: int
    #: 1 for scalars, 1 + the deepest child otherwise.
    depth: int
    _text: str
    #: Integer, Float or Bool.
    is_scalar: bool
    #: Integer or Float.
    is_number: bool
    #: Numbers, and vectors and tuples of numbers (all the types that arithmetic works on).
    is_numeric_structure: bool

    def __new__(cls, kind: Kind, children: tuple[Type, ...] = ()) -> Type:
        key = (kind, children)
        found = cls._table.get(key)
        if found is not None:
            return found
        depth = 1 + max((c.depth for c in children), default=0)
        if depth > MAX_TYPE_DEPTH:
            raise KsTypeError(f"a type nested more than {MAX_TYPE_DEPTH} levels deep")
        self = super().__new__(cls)
        self.depth = depth
        self.kind = kind
        self.children = children
        self.h = hash((int(kind), *(c.h for c in children)))
        self._text = ""
        self.leaves = _leaves(kind, children)
        # from the children's cached counts: deeply nested types must not recurse
        if kind is Kind.VEC:
            self.elements16 = 16 * children[0].elements16
        elif kind is Kind.TUPLE:
            self.elements16 = sum(c.elements16 for c in children)
        else:
            self.elements16 = 1
        self.is_scalar = kind in _SCALARS
        self.is_number = kind is Kind.INTEGER or kind is Kind.FLOAT
        self.is_numeric_structure = bool(self.leaves) and self.leaves <= _NUMBER_KINDS
        cls._table[key] = self
        return self

    def __reduce__(self) -> tuple[object, ...]:
        # Pickling (multiprocessing, checkpoints) must come back through the intern table.
        return (Type, (self.kind, self.children))

    def __hash__(self) -> int:
        return self.h

    # -- structure ---------------------------------------------------------------------------
    @property
    def elem(self) -> Type:
        """Element type of a ``Vec``."""
        assert self.kind is Kind.VEC
        return self.children[0]

    @property
    def lam_arg(self) -> Type:
        assert self.kind is Kind.LAM
        return self.children[0]

    @property
    def lam_ret(self) -> Type:
        assert self.kind is Kind.LAM
        return self.children[1]

    def num_elements(self, vector_size: int = 16) -> int:
        """Scalars in a value of this type when every vector has ``vector_size`` elements."""
        if vector_size == 16:
            return self.elements16
        counts: dict[int, int] = {}
        for t in _postorder(self):
            if t.kind is Kind.VEC:
                counts[id(t)] = vector_size * counts[id(t.children[0])]
            elif t.kind is Kind.TUPLE:
                counts[id(t)] = sum(counts[id(c)] for c in t.children)
            else:
                counts[id(t)] = 1
        return counts[id(self)]

    @property
    def vec_rank(self) -> int:
        """Number of nested ``Vec`` levels at the top of this type."""
        rank, t = 0, self
        while t.kind is Kind.VEC:
            rank, t = rank + 1, t.children[0]
        return rank

    # -- text --------------------------------------------------------------------------------
    def __str__(self) -> str:
        if not self._text:
            for t in _postorder(self):  # children first, so each renders from cached parts
                if not t._text:
                    t._text = _render(t)
        return self._text

    def __repr__(self) -> str:
        return f"Type({self})"


_SCALARS = frozenset({Kind.INTEGER, Kind.FLOAT, Kind.BOOL})
_NUMBER_KINDS = frozenset({Kind.INTEGER, Kind.FLOAT})


def _leaves(kind: Kind, children: tuple[Type, ...]) -> frozenset[Kind]:
    """The scalar kinds at the leaves of a type (empty if a ``Lam`` is inside)."""
    if kind in _SCALARS:
        return frozenset({kind})
    if kind is Kind.LAM:
        return frozenset({Kind.LAM})
    out: frozenset[Kind] = frozenset()
    for c in children:
        out = out | c.leaves
    return out


def _render(t: Type) -> str:
    if t.kind is Kind.INTEGER:
        return "Integer"
    if t.kind is Kind.FLOAT:
        return "Float"
    if t.kind is Kind.BOOL:
        return "Bool"
    head = {Kind.VEC: "Vec", Kind.TUPLE: "Tuple", Kind.LAM: "Lam"}[t.kind]
    return "(" + " ".join([head, *(c._text for c in t.children)]) + ")"


def _postorder(root: Type) -> list[Type]:
    """The distinct types inside ``root``, children before parents (iterative)."""
    out: list[Type] = []
    seen: set[int] = set()
    stack: list[tuple[Type, bool]] = [(root, False)]
    while stack:
        t, expanded = stack.pop()
        if id(t) in seen:
            continue
        if expanded:
            seen.add(id(t))
            out.append(t)
        else:
            stack.append((t, True))
            stack.extend((c, False) for c in t.children if id(c) not in seen)
    return out


INTEGER = Type(Kind.INTEGER)
FLOAT = Type(Kind.FLOAT)
BOOL = Type(Kind.BOOL)


def vec(elem: Type) -> Type:
    return Type(Kind.VEC, (elem,))


def tuple_of(*elems: Type) -> Type:
    return Type(Kind.TUPLE, tuple(elems))


def lam_type(arg: Type, ret: Type) -> Type:
    return Type(Kind.LAM, (arg, ret))
