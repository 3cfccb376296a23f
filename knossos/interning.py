"""Interning: every node is built once, and an alpha-variant of a live node is that node.

Building a node whose op, data and children are those of a live node returns that node, and so does
building an *alpha-variant* of a live node (the same expression up to the names of bound variables,
found by the hashes of :mod:`knossos.alpha`).  Hence ``a is b`` is the equality test, ``==`` is
identity, and ``hash`` is a cached integer that is the same in every process.  Nodes are
type-checked and costed as they are built.  The tables hold nodes weakly: a node leaves its table
when it dies.  :mod:`knossos.rebuild` (and its C loop) build nodes through the same tables.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Final

from knossos.alpha import PRIME, alpha_equal, binder_layout, binder_layouts, edge, name_weight, position_in
from knossos.callee import Callee
from knossos.cost import COST_RULES
from knossos.errors import KsTypeError
from knossos.freeset import EMPTY, FreeNames, join
from knossos.node import Expr, LiteralValue, Position
from knossos.ops import BINDERS, Op
from knossos.stable_hash import stable_hash
from knossos.types import BOOL, FLOAT, INTEGER, Type
from knossos.typing_rules import TYPE_RULES


class Ref(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that remembers its table key (cheaper than weakref.KeyedRef)."""

    __slots__ = ("key",)
    key: object


# Exact table of the nodes that bind nothing: (op, data key, ids of children) -> weak ref to the node.  Children are kept alive by
# the node, so their ids cannot be reused while the entry exists; the entry dies with the node.
intern_table: dict[object, Ref] = {}
# Binders by alpha-hash: (hash, slot) -> weak ref, to find alpha-variants.  The nodes of one hash
# (expressions that differ only where the hash cannot see, such as two programs' defs of one name
# and signature) take the slots 0, 1, 2, ... with no gap: a lookup stops at the first missing slot,
# so when a node dies the last slot of its chain moves into its place (forget_alpha).
alpha_table: dict[object, Ref] = {}


def forget(ref: Ref) -> None:
    if intern_table.get(ref.key) is ref:
        del intern_table[ref.key]


def forget_alpha(ref: Ref) -> None:
    key: tuple[int, int] = ref.key  # type: ignore[assignment]
    if alpha_table.get(key) is not ref:
        return
    h, slot = key
    last = slot
    while (h, last + 1) in alpha_table:
        last += 1
    if last == slot:
        del alpha_table[key]
        return
    moved = alpha_table.pop((h, last))  # no gap: the chain's last entry takes the freed slot
    moved.key = key
    alpha_table[key] = moved


#: The code of the weakref callbacks above: an exception raised in them (Ctrl-C) cannot propagate,
#: so the applications' SIGINT handler waits until they have returned (app/startup.py).
TABLE_CALLBACKS: Final = frozenset({forget.__code__, forget_alpha.__code__})


def live_nodes() -> int:
    """How many interned nodes are alive (for benchmarks and leak tests)."""
    return len(intern_table) + len(alpha_table)


def _data_key(op: Op, data: Any, t: Type | None) -> object:
    if op is Op.CONST:
        value = data
        # 1, 1.0 and True are equal in Python, and 0.0 == -0.0: key on the type and exact bits.
        return (t, value.hex() if isinstance(value, float) else value)
    if op is Op.VAR:
        return (data, t)
    return data


def data_hash(op: Op, data: Any, t: Type) -> int:
    if op is Op.CONST:
        return hash((t.h, data))
    if op is Op.VAR:
        return hash((stable_hash(data), t.h))
    if op is Op.CALL:
        return int(data.h)
    if op is Op.GET:
        return hash(data)
    return 0


def exact_key(op: Op, data: Any, args: tuple[Expr, ...]) -> tuple[object, ...]:
    """The identity of a node that binds nothing in the exact table: its op, its data (a literal's or
    variable's by :func:`_data_key`) and its children, by id.  knossos/_climb.c builds the same tuple."""
    return (op, data, *map(id, args))


def shape_hash(op: Op, data: Any, t: Type, args: tuple[Expr, ...]) -> int:
    """The shape hash of a node that binds nothing (a variable's is its type's alone): its op, its
    data's hash and its children's shapes.  knossos/_climb.c hashes the same tuple."""
    return hash((op, 0 if data is None else data_hash(op, data, t), *[a.shape_hash for a in args]))


def _lookup(key: tuple[object, ...]) -> Expr | None:
    ref = intern_table.get(key)
    if ref is not None:
        node: Expr | None = ref()
        return node
    return None


def intern_node(node: Expr, key: tuple[object, ...]) -> None:
    ref = Ref(node, forget)
    ref.key = key
    intern_table[key] = ref


class _Fresh(Expr):
    """The same layout as Expr without the immutability guard, used only while filling a new node.

    Setting nine slots through ``object.__setattr__`` costs several times more than plain stores;
    a node is built as a ``_Fresh``, filled, and then becomes an ``Expr`` (same layout, so CPython
    allows the class change).  Both hooks are reset: setting and deleting share one C slot, so a
    Python ``__delattr__`` left over from Expr would send every store through a method lookup
    (five times slower).
    """

    __slots__ = ()
    __setattr__ = object.__setattr__  # type: ignore[assignment]
    __delattr__ = object.__delattr__  # type: ignore[assignment]


def new_node(
    op: Op,
    args: tuple[Expr, ...],
    data: Any,
    t: Type,
    cost: float,
    free: FreeNames,
    s: int,
    w: int,
    c: int,
    size: int,
    h: int,
) -> Expr:
    """A new node; ``size`` (1 + the children's sizes) and ``h`` (``hash((s, w))``) come from the
    caller, which usually has them at hand (a rebuilt ancestor's size is the old one's plus a change)."""
    node = object.__new__(_Fresh)
    node.op = op
    node.args = args
    node.data = data
    node.type = t
    node.cost = cost
    node.size = size
    node.free = free
    node.shape_hash = s
    node.free_weight = w
    node.occurrence_weight = c
    node.alpha_hash = h
    node._positions = None
    node._position_map = None
    node.__class__ = Expr  # type: ignore[assignment]
    return node


def union_free(args: tuple[Expr, ...]) -> FreeNames:
    free: FreeNames = EMPTY
    for a in args:
        f = a.free
        if f and f is not free:
            free = f if not free else (free if f <= free else join(free, f))
    return free


def make(op: Op, args: tuple[Expr, ...], data: Any = None) -> Expr:
    """Build (or find) the node ``op`` over ``args``.  Raises KsTypeError if it is ill-typed.

    ``CONST`` and ``VAR`` nodes are built with :func:`const` and :func:`var`, not here.
    """
    if op in BINDERS:
        return _make_binder(op, args, data)
    key = exact_key(op, data, args)
    ref = intern_table.get(key)
    if ref is not None:
        found: Expr | None = ref()
        if found is not None:
            return found
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    s = shape_hash(op, data, t, args)
    if len(args) == 2:
        a, b = args
        (ra, sa), (rb, sb) = edge(op, 0), edge(op, 1)
        w = (ra * a.free_weight + sa * a.occurrence_weight + rb * b.free_weight + sb * b.occurrence_weight) % PRIME
        c = (a.occurrence_weight + b.occurrence_weight) % PRIME
        fa, fb = a.free, b.free
        free = fa if (not fb or fb is fa or fb <= fa) else (fb if not fa or fa <= fb else join(fa, fb))
        size = 1 + a.size + b.size
    else:
        w = c = 0
        for i, a in enumerate(args):
            r, sh = edge(op, i)
            w += r * a.free_weight + sh * a.occurrence_weight
            c += a.occurrence_weight
        w, c = w % PRIME, c % PRIME
        free = union_free(args)
        size = 1 + sum(a.size for a in args)
    node = new_node(op, args, data, t, cost, free, s, w, c, size, hash((s, w)))
    intern_node(node, key)
    return node


def _make_binder(op: Op, args: tuple[Expr, ...], data: Any) -> Expr:
    bound = args[BINDERS[op][0]]
    if bound.op is not Op.VAR:
        raise KsTypeError(f"a {op.name.lower()} must bind a variable")
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    size = 1 + sum(a.size for a in args)
    return intern_binder(op, args, t, cost, None, position_in(args[BINDERS[op][1]], bound.data), size)


def intern_binder(
    op: Op,
    args: tuple[Expr, ...],
    t: Type,
    cost: float,
    free: FreeNames | None,
    bound_position: Position,
    size: int,
) -> Expr:
    """The binder over ``args``, or the live alpha-variant of it.

    ``bound_position`` is where the bound variable occurs in the scope; ``free`` the node's free
    names when the caller knows them.  Binders are interned by alpha-hash only: a binder over the
    same children has the same hash, so a second table by children would only cost a registration.
    """
    var_index, scope_index, outside_index, r, sh, ro, so = binder_layouts.get(op) or binder_layout(op)
    bound = args[var_index]
    scope = args[scope_index]
    position, count = bound_position
    if free is None:
        name = bound.data
        free = scope.free - {name} if name in scope.free else scope.free
        if outside_index >= 0:
            of = args[outside_index].free
            if of:
                free = of if not free else (free if of <= free else join(free, of))
    # the shape records where the bound variable occurs; the weights drop its terms
    bw = bound.free_weight
    scope_c = (scope.occurrence_weight - bw * count) % PRIME
    w = r * (scope.free_weight - bw * position) + sh * scope_c
    c = scope_c
    if outside_index >= 0:  # the rhs of a let, the size of a build or sumbuild
        outside = args[outside_index]
        s = hash((op, bound.type.h, position, count, outside.shape_hash, scope.shape_hash))
        w += ro * outside.free_weight + so * outside.occurrence_weight
        c += outside.occurrence_weight
    else:  # lam (var, body)
        s = hash((op, bound.type.h, position, count, scope.shape_hash))
    w %= PRIME
    h = hash((s, w))
    node: Expr | None = None
    slot = 0
    free_slot = -1  # the first slot of a node that died and whose callback has not run yet
    while True:
        akey = (h, slot)
        ref = alpha_table.get(akey)
        if ref is None:  # the end of the chain (it has no gaps)
            break
        other: Expr | None = ref()
        if other is None:
            if free_slot < 0:
                free_slot = slot
            slot += 1
            continue
        if other.op is op and other.args == args:  # the same node rebuilt: common in search
            return other
        if node is None:
            node = new_node(op, args, None, t, cost, free, s, w, c % PRIME, size, h)
        if alpha_equal(other, node):
            return other
        slot += 1  # another expression of the same hash
    if node is None:
        node = new_node(op, args, None, t, cost, free, s, w, c % PRIME, size, h)
    if free_slot >= 0:
        akey = (h, free_slot)
    ref = Ref(node, forget_alpha)
    ref.key = akey
    alpha_table[akey] = ref
    return node


# -- leaves --------------------------------------------------------------------------------------
_CONST_TYPES: dict[type, Type] = {bool: BOOL, int: INTEGER, float: FLOAT}


def const(value: LiteralValue) -> Expr:
    """A literal: ``True``/``False`` (Bool), an ``int`` (Integer) or a finite ``float`` (Float)."""
    t = _CONST_TYPES.get(type(value))
    if t is None:
        raise KsTypeError(f"not a Knossos literal: {value!r}")
    if t is FLOAT and not math.isfinite(value):
        raise KsTypeError(f"Float literals must be finite, not {value!r}")
    key = exact_key(Op.CONST, _data_key(Op.CONST, value, t), ())
    found = _lookup(key)
    if found is not None:
        return found
    s = shape_hash(Op.CONST, value, t, ())
    node = new_node(Op.CONST, (), value, t, 0.0, EMPTY, s, 0, 0, 1, hash((s, 0)))
    intern_node(node, key)
    return node


def var(name: str, t: Type) -> Expr:
    """An occurrence (or binding occurrence) of the variable ``name`` of type ``t``."""
    key = exact_key(Op.VAR, _data_key(Op.VAR, name, t), ())
    found = _lookup(key)
    if found is not None:
        return found
    weight = name_weight(name)
    s = hash((Op.VAR, t.h))  # variables' names are left out of shapes
    node = new_node(Op.VAR, (), name, t, 0.0, frozenset((name,)), s, weight, weight, 1, hash((s, weight)))
    intern_node(node, key)
    return node


# -- builders for every op -------------------------------------------------------------------------
def let(bound: Expr, rhs: Expr, body: Expr) -> Expr:
    return make(Op.LET, (bound, rhs, body))


def lam(bound: Expr, body: Expr) -> Expr:
    return make(Op.LAM, (bound, body))


def build(n: Expr, index: Expr, body: Expr) -> Expr:
    return make(Op.BUILD, (n, index, body))


def sumbuild(n: Expr, index: Expr, body: Expr) -> Expr:
    return make(Op.SUMBUILD, (n, index, body))


def tuple_(*elems: Expr) -> Expr:
    return make(Op.TUPLE, tuple(elems))


def get(index: int, count: int, t: Expr) -> Expr:
    """``get$index$count`` (1-based), the reference's ``select``."""
    if not 1 <= index <= count:
        raise KsTypeError(f"get${index}${count}: the index must be between 1 and {count}")
    return make(Op.GET, (t,), (index, count))


def call(callee: Callee, *args: Expr) -> Expr:
    return make(Op.CALL, tuple(args), callee)


def op(o: Op, *args: Expr) -> Expr:
    """A primitive op node, e.g. ``op(Op.ADD, x, y)``."""
    return make(o, tuple(args))
