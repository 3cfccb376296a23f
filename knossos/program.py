"""Programs: an ordered list of defs and edefs.

A def's body is an expression whose free variables are its parameters (and the size variables of
its sized vector parameters).  Calls inside it point at :class:`~knossos.callee.Callee` objects,
so a body carries everything needed to type and cost it.

Costs of whole defs follow the reference, which optimised each def as
``(let (f1 (lam ...)) ... (let (f (lam ...)) f))`` over the def and the defs it calls: each of those
defs adds a ``let`` (0.1), and a def of several parameters unpacks its argument tuple with one
``let`` per parameter.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Union

from knossos.callee import Callee, CalleeKind, interned_callee
from knossos.cost import LET_COST
from knossos.errors import Pos
from knossos.node import Expr
from knossos.ops import Op
from knossos.types import Type


@dataclass(frozen=True)
class VecSizes:
    """The size variable of a sized vector type ``(Vec n T)`` (``None`` if unnamed) and its element's."""

    name: str | None
    elem: SizeTree


@dataclass(frozen=True)
class TupleSizes:
    """The size variables inside each part of a tuple type."""

    parts: tuple[SizeTree, ...]


#: Where a type names vector sizes, mirroring the type; ``None`` where no size is named.
SizeTree = Union[VecSizes, TupleSizes, None]

COST_PREFIX = "cost$"


@dataclass(frozen=True)
class Param:
    name: str
    type: Type
    sizes: SizeTree = None
    pos: Pos | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Def:
    name: str
    ret_type: Type
    params: tuple[Param, ...]
    body: Expr
    ret_sizes: SizeTree = None
    pos: Pos | None = field(default=None, compare=False)

    @property
    def unpack_cost(self) -> float:
        """The reference passes several parameters as a tuple and unpacks it with a let each."""
        return LET_COST * len(self.params) if len(self.params) > 1 else 0.0

    @property
    def call_cost(self) -> float:
        """Cost of running this def once (what a call to it adds besides the call overhead)."""
        return self.body.cost + self.unpack_cost

    @property
    def size_vars(self) -> tuple[str, ...]:
        """Names of the size variables its sized vector parameters bind, in order."""
        names: list[str] = []
        for p in self.params:
            for n in size_names(p.sizes):
                if n not in names:
                    names.append(n)
        return tuple(names)

    def direct_callees(self) -> list[Callee]:
        """The defs and edefs this def calls, each once, in order of first call."""
        seen: set[int] = set()
        out: list[Callee] = []
        stack = [self.body]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if node.op is Op.CALL and node.data not in out:
                out.append(node.data)
            stack.extend(reversed(node.args))
        return out


def def_callee(d: Def) -> Callee:
    """The callee of a def: equal defs (same name, signature and body) share one."""
    key = (CalleeKind.DEF, d.name, d.ret_type, d.params, id(d.body))
    return interned_callee(
        key, lambda: Callee(d.name, CalleeKind.DEF, tuple(p.type for p in d.params), d.ret_type, d.call_cost, d)
    )


@dataclass(frozen=True)
class Edef:
    name: str
    ret_type: Type
    param_types: tuple[Type, ...]
    pos: Pos | None = field(default=None, compare=False)


def size_names(tree: SizeTree) -> Iterator[str]:
    """Every size variable named in a size tree, outermost first."""
    stack = [tree]
    while stack:
        t = stack.pop()
        if isinstance(t, VecSizes):
            if t.name is not None:
                yield t.name
            stack.append(t.elem)
        elif isinstance(t, TupleSizes):
            stack.extend(reversed(t.parts))


@dataclass
class Program:
    """Defs and edefs in the order of the source file."""

    items: list[Def | Edef] = field(default_factory=list)
    defs: dict[str, Def] = field(default_factory=dict)
    edefs: dict[str, Edef] = field(default_factory=dict)
    #: The callee object of every def and edef, by name.
    callees: dict[str, Callee] = field(default_factory=dict)
    #: Where each (interned) expression of a parsed program is first written, for run-time errors.
    positions: dict[Expr, Pos] = field(default_factory=dict, compare=False, repr=False)

    def add(self, item: Def | Edef, callee: Callee) -> None:
        self.items.append(item)
        if isinstance(item, Def):
            self.defs[item.name] = item
        else:
            self.edefs[item.name] = item
        self.callees[item.name] = callee

    @property
    def targets(self) -> list[Def]:
        """The defs to optimise and cost: all but the ``cost$`` declarations."""
        return [d for d in self.defs.values() if not d.name.startswith(COST_PREFIX)]

    def closure(self, name: str) -> list[Def]:
        """The def ``name`` and every def it calls, directly or not, in file order."""
        wanted: set[str] = set()
        stack = [name]
        while stack:
            n = stack.pop()
            if n in wanted:
                continue
            wanted.add(n)
            for c in self.defs[n].direct_callees():
                if c.kind is CalleeKind.DEF:
                    stack.append(c.name)
        return [d for d in self.defs.values() if d.name in wanted]

    def def_cost(self, name: str) -> float:
        """Cost of a def as the reference measured it (see the module docstring)."""
        d = self.defs[name]
        return LET_COST * len(self.closure(name)) + d.call_cost

    def node_count(self) -> int:
        return sum(d.body.size for d in self.defs.values())

    def with_def(self, d: Def) -> Program:
        """This program with ``d`` in place of the def of the same name (calls still go by name)."""
        out = Program()
        for item in self.items:
            out.add(d if isinstance(item, Def) and item.name == d.name else item, self.callees[item.name])
        return out
