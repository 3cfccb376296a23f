"""Expression nodes: immutable, interned, and equal exactly when alpha-equivalent.

Every node is built once.  Building a node whose op, data and children are those of a live node
returns that node, and so does building an *alpha-variant* of a live node (the same expression up to
the names of bound variables).  Hence ``a is b`` is the equality test, ``==`` is identity, and
``hash`` is a cached integer that is the same in every process.

Each node caches what search asks for over and over: its :attr:`~Expr.type` (nodes are type-checked
as they are built, so an ill-typed node cannot exist), its :attr:`~Expr.cost` under the reference
cost model, its node count :attr:`~Expr.size` and its free variable names :attr:`~Expr.free`.
Nothing here recurses on the depth of an expression.

Alpha-equivalence.  A node's hash combines a *shape* hash, which ignores variable names (a binder
adds to it where its variable occurs in its scope), with a *weight* of its free variables: the sum,
modulo a prime, of each free variable's name weight times the *position* of its occurrences.  A
position composes one affine map per edge (two multipliers per op and child index) from the node
down to each occurrence; composition does not commute, so different places give different numbers.
Being linear in the children, weights take constant time per node, and a binder's weight is its
scope's weight minus the bound variable's term, so bound names leave no trace.  The positions of a
bound variable are found lazily and memoised per node; after a rewrite, the rebuilt ancestors carry
their positions over with a linear update instead of walking the new path.  Hash equality is
confirmed by a structural comparison before a binder is shared with an alpha-variant.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final, Union

from knossos.callee import Callee
from knossos.cost import COST_RULES, LET_COST  # noqa: F401  (LET_COST: read by knossos/_climb.c)
from knossos.errors import KsTypeError
from knossos.ops import BINDERS, Op
from knossos.stable_hash import stable_hash
from knossos.types import BOOL, FLOAT, INTEGER, Type
from knossos.typing_rules import TYPE_RULES

Value = Union[bool, int, float]
Position = tuple[int, int]  # (position polynomial, number of occurrences), modulo the prime

_EMPTY: Final[frozenset[str]] = frozenset()
_PRIME: Final = (1 << 61) - 1  # arithmetic of the weights


class Expr:
    """An interned expression node.  Build nodes with the functions of this module."""

    __slots__ = (
        "__weakref__",
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
    #: Names of the free variables.
    free: frozenset[str]
    #: The hash, ``hash((shape_hash, free_weight))``: equal for alpha-variants, the same in every process.
    alpha_hash: int
    #: The hash of the shape, variable names left out (a binder's records where its variable occurs).
    shape_hash: int
    #: Sum over the free variables of name weight times position, modulo the prime (module docstring).
    free_weight: int
    #: Sum over the free variables of name weight times number of occurrences, modulo the prime.
    occurrence_weight: int
    #: Memo of (position, number of occurrences) of free variables, by name (see the module docstring).
    _positions: dict[str, Position] | None

    def __hash__(self) -> int:
        return self.alpha_hash

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("expressions are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("expressions are immutable")

    def __reduce__(self) -> tuple[object, ...]:
        from knossos.serialize import expr_from_wire, expr_to_wire

        return (expr_from_wire, (expr_to_wire(self),))

    def __str__(self) -> str:
        from knossos.printer import format_expr

        return format_expr(self)

    def __repr__(self) -> str:
        from knossos.printer import format_expr

        text = format_expr(self, width=10**9)
        return f"Expr({text if len(text) <= 200 else text[:197] + '...'})"

    # -- convenient views --------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The name of a variable."""
        assert self.op is Op.VAR
        return str(self.data)

    @property
    def value(self) -> Value:
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
        return make(self.op, args, self.data)


_set = object.__setattr__


# -- interning ---------------------------------------------------------------------------------
class _Ref(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that remembers its table key (cheaper than weakref.KeyedRef)."""

    __slots__ = ("key",)
    key: object


# Exact table of the nodes that bind nothing: (op, data key, ids of children) -> weak ref to the node.  Children are kept alive by
# the node, so their ids cannot be reused while the entry exists; the entry dies with the node.
_table: dict[object, _Ref] = {}
# Binders by alpha-hash: (hash, slot) -> weak ref, to find alpha-variants.
_alpha_table: dict[object, _Ref] = {}


def _forget(ref: _Ref) -> None:
    if _table.get(ref.key) is ref:
        del _table[ref.key]


def _forget_alpha(ref: _Ref) -> None:
    if _alpha_table.get(ref.key) is ref:
        del _alpha_table[ref.key]


#: The code of the weakref callbacks above: an exception raised in them (Ctrl-C) cannot propagate,
#: so the applications' SIGINT handler waits until they have returned (app/startup.py).
TABLE_CALLBACKS: Final = frozenset({_forget.__code__, _forget_alpha.__code__})


def live_nodes() -> int:
    """How many interned nodes are alive (for benchmarks and leak tests)."""
    return len(_table) + len(_alpha_table)


def _data_key(op: Op, data: Any, t: Type | None) -> object:
    if op is Op.CONST:
        value = data
        # 1, 1.0 and True are equal in Python, and 0.0 == -0.0: key on the type and exact bits.
        return (t, value.hex() if isinstance(value, float) else value)
    if op is Op.VAR:
        return (data, t)
    return data


def _data_hash(op: Op, data: Any, t: Type) -> int:
    if op is Op.CONST:
        return hash((t.h, data))
    if op is Op.VAR:
        return hash((stable_hash(data), t.h))
    if op is Op.CALL:
        return int(data.h)
    if op is Op.GET:
        return hash(data)
    return 0


def _exact_key(op: Op, data: Any, args: tuple[Expr, ...]) -> tuple[object, ...]:
    """The identity of a node that binds nothing in the exact table: its op, its data (a literal's or
    variable's by :func:`_data_key`) and its children, by id.  knossos/_climb.c builds the same tuple."""
    return (op, data, *map(id, args))


def _shape_hash(op: Op, data: Any, t: Type, args: tuple[Expr, ...]) -> int:
    """The shape hash of a node that binds nothing (a variable's is its type's alone): its op, its
    data's hash and its children's shapes.  knossos/_climb.c hashes the same tuple."""
    return hash((op, 0 if data is None else _data_hash(op, data, t), *[a.shape_hash for a in args]))


def _lookup(key: tuple[object, ...]) -> Expr | None:
    ref = _table.get(key)
    if ref is not None:
        node: Expr | None = ref()
        return node
    return None


def _register(node: Expr, key: tuple[object, ...]) -> None:
    ref = _Ref(node, _forget)
    ref.key = key
    _table[key] = ref


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


def _new(
    op: Op,
    args: tuple[Expr, ...],
    data: Any,
    t: Type,
    cost: float,
    free: frozenset[str],
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
    node.__class__ = Expr  # type: ignore[assignment]
    return node


_edges: dict[tuple[Op, int], tuple[int, int]] = {}


def _edge(op: Op, index: int) -> tuple[int, int]:
    """The affine map ``p -> r * p + s`` of the edge from an ``op`` node to its child ``index``."""
    key = (op, index)
    m = _edges.get(key)
    if m is None:
        m = (hash((0x6D75, int(op), index)) % (_PRIME - 1) + 1, hash((0x6164, int(op), index)) % (_PRIME - 1) + 1)
        _edges[key] = m
    return m


_binder_layouts: dict[Op, tuple[int, int, int, int, int, int, int]] = {}


def _binder_layout(op: Op) -> tuple[int, int, int, int, int, int, int]:
    """(variable, scope and other child index or -1, then the scope's and the other's edge maps)."""
    layout = _binder_layouts.get(op)
    if layout is None:
        var_index, scope_index = BINDERS[op]
        others = [i for i in range(3 if op is not Op.LAM else 2) if i not in (var_index, scope_index)]
        outside = others[0] if others else -1
        ro, so = _edge(op, outside) if outside >= 0 else (0, 0)
        layout = (var_index, scope_index, outside, *_edge(op, scope_index), ro, so)
        _binder_layouts[op] = layout
    return layout


def _name_weight(name: str) -> int:
    return stable_hash(name) % (_PRIME - 1) + 1


def _union_free(args: tuple[Expr, ...]) -> frozenset[str]:
    free = _EMPTY
    for a in args:
        f = a.free
        if f and f is not free:
            free = f if not free else (free if f <= free else free | f)
    return free


def make(op: Op, args: tuple[Expr, ...], data: Any = None) -> Expr:
    """Build (or find) the node ``op`` over ``args``.  Raises KsTypeError if it is ill-typed.

    ``CONST`` and ``VAR`` nodes are built with :func:`const` and :func:`var`, not here.
    """
    if op in BINDERS:
        return _make_binder(op, args, data)
    key = _exact_key(op, data, args)
    ref = _table.get(key)
    if ref is not None:
        found: Expr | None = ref()
        if found is not None:
            return found
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    s = _shape_hash(op, data, t, args)
    if len(args) == 2:
        a, b = args
        (ra, sa), (rb, sb) = _edge(op, 0), _edge(op, 1)
        w = (ra * a.free_weight + sa * a.occurrence_weight + rb * b.free_weight + sb * b.occurrence_weight) % _PRIME
        c = (a.occurrence_weight + b.occurrence_weight) % _PRIME
        fa, fb = a.free, b.free
        free = fa if (not fb or fb is fa or fb <= fa) else (fb if not fa or fa <= fb else fa | fb)
        size = 1 + a.size + b.size
    else:
        w = c = 0
        for i, a in enumerate(args):
            r, sh = _edge(op, i)
            w += r * a.free_weight + sh * a.occurrence_weight
            c += a.occurrence_weight
        w, c = w % _PRIME, c % _PRIME
        free = _union_free(args)
        size = 1 + sum(a.size for a in args)
    node = _new(op, args, data, t, cost, free, s, w, c, size, hash((s, w)))
    _register(node, key)
    return node


def _make_binder(op: Op, args: tuple[Expr, ...], data: Any) -> Expr:
    bound = args[BINDERS[op][0]]
    if bound.op is not Op.VAR:
        raise KsTypeError(f"a {op.name.lower()} must bind a variable")
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    size = 1 + sum(a.size for a in args)
    return _intern_binder(op, args, t, cost, None, _position(args[BINDERS[op][1]], bound.data), size)


def _intern_binder(
    op: Op,
    args: tuple[Expr, ...],
    t: Type,
    cost: float,
    free: frozenset[str] | None,
    bound_position: Position,
    size: int,
) -> Expr:
    """The binder over ``args``, or the live alpha-variant of it.

    ``bound_position`` is where the bound variable occurs in the scope; ``free`` the node's free
    names when the caller knows them.  Binders are interned by alpha-hash only: a binder over the
    same children has the same hash, so a second table by children would only cost a registration.
    """
    var_index, scope_index, outside_index, r, sh, ro, so = _binder_layouts.get(op) or _binder_layout(op)
    bound = args[var_index]
    scope = args[scope_index]
    position, count = bound_position
    if free is None:
        name = bound.data
        free = scope.free - {name} if name in scope.free else scope.free
        if outside_index >= 0:
            of = args[outside_index].free
            if of:
                free = of if not free else (free if of <= free else free | of)
    # the shape records where the bound variable occurs; the weights drop its terms
    bw = bound.free_weight
    scope_c = (scope.occurrence_weight - bw * count) % _PRIME
    w = r * (scope.free_weight - bw * position) + sh * scope_c
    c = scope_c
    if outside_index >= 0:  # the rhs of a let, the size of a build or sumbuild
        outside = args[outside_index]
        s = hash((op, bound.type.h, position, count, outside.shape_hash, scope.shape_hash))
        w += ro * outside.free_weight + so * outside.occurrence_weight
        c += outside.occurrence_weight
    else:  # lam (var, body)
        s = hash((op, bound.type.h, position, count, scope.shape_hash))
    w %= _PRIME
    h = hash((s, w))
    node: Expr | None = None
    slot = 0
    while True:
        akey = (h, slot)
        ref = _alpha_table.get(akey)
        other: Expr | None = ref() if ref is not None else None
        if other is None:
            break
        if other.op is op and other.args == args:  # the same node rebuilt: common in search
            return other
        if node is None:
            node = _new(op, args, None, t, cost, free, s, w, c % _PRIME, size, h)
        if alpha_equal(other, node):
            return other
        slot += 1  # a genuine hash collision between different expressions
    if node is None:
        node = _new(op, args, None, t, cost, free, s, w, c % _PRIME, size, h)
    ref = _Ref(node, _forget_alpha)
    ref.key = akey
    _alpha_table[akey] = ref
    return node


# -- positions of free variables -----------------------------------------------------------------
def _position(root: Expr, name: str) -> Position:
    """(position, number of occurrences) of the free ``name`` in ``root``; (0, 0) if it has none.

    Memoised per node and name.  Summed over the free names with their name weights they give
    ``root.free_weight`` and ``root.occurrence_weight``.
    """
    if name not in root.free:
        return _NOWHERE
    if root.op is Op.VAR:
        return _HERE
    return _position_near(root, name, 0)


def occurrences(root: Expr, name: str) -> int:
    """How many times the variable ``name`` occurs free in ``root`` (memoised per node)."""
    return _position(root, name)[1]


_NOWHERE: Final = (0, 0)
_HERE: Final = (1, 1)
_RECURSION_BUDGET: Final = 200  # deeper walks continue on an explicit stack


def _position_near(node: Expr, name: str, depth: int) -> Position:
    """``_position`` by plain recursion (several times faster) for the first levels of the walk."""
    memo = node._positions
    if memo is not None:
        found = memo.get(name)
        if found is not None:
            return found
    if depth > _RECURSION_BUDGET:
        return _position_far(node, name)
    binder = BINDERS.get(node.op)
    shadowed = binder is not None and node.args[binder[0]].data == name
    p = n = 0
    for i, a in enumerate(node.args):
        if binder is not None and (i == binder[0] or (shadowed and i == binder[1])):
            continue
        if name in a.free:
            ap, an = _HERE if a.op is Op.VAR else _position_near(a, name, depth + 1)
            r, sh = _edge(node.op, i)
            p += r * ap + sh * an
            n += an
    result = (p % _PRIME, n % _PRIME)
    if memo is None:
        _set(node, "_positions", {name: result})
    else:
        memo[name] = result
    return result


def _position_far(root: Expr, name: str) -> Position:
    """``_position`` on an explicit stack, for walks deeper than the recursion budget."""
    memo = root._positions
    if memo is not None and name in memo:
        return memo[name]
    stack = [root]
    while stack:
        node = stack[-1]
        memo = node._positions
        if memo is not None and name in memo:
            stack.pop()
            continue
        pending = False
        children = _occurrence_children(node, name)
        for _, a in children:
            if a.op is not Op.VAR and (a._positions is None or name not in a._positions):
                stack.append(a)
                pending = True
        if pending:
            continue
        p = n = 0
        for i, a in children:
            ap, an = _HERE if a.op is Op.VAR else a._positions[name]  # type: ignore[index]
            r, sh = _edge(node.op, i)
            p += r * ap + sh * an
            n += an
        if memo is None:
            memo = {}
            _set(node, "_positions", memo)
        memo[name] = (p % _PRIME, n % _PRIME)
        stack.pop()
    return root._positions[name]  # type: ignore[index]


def _occurrence_children(node: Expr, name: str) -> list[tuple[int, Expr]]:
    """The children (with their index) in which ``name`` occurs free as seen from ``node``."""
    binder = BINDERS.get(node.op)
    out = []
    for i, a in enumerate(node.args):
        if binder is not None and (i == binder[0] or (i == binder[1] and node.args[binder[0]].data == name)):
            continue
        if name in a.free:
            out.append((i, a))
    return out


def alpha_equal(a: Expr, b: Expr) -> bool:
    """Structural equality up to the names of bound variables (iterative)."""
    stack: list[tuple[Expr, Expr, dict[str, int], dict[str, int], int]] = [(a, b, {}, {}, 0)]
    while stack:
        x, y, ex, ey, depth = stack.pop()
        if x is y:
            if (ex or ey) and any(ex.get(n) != ey.get(n) for n in x.free):
                return False
            continue
        if x.op is not y.op or x.type is not y.type or len(x.args) != len(y.args):
            return False
        if x.op is Op.VAR:
            lx, ly = ex.get(x.data), ey.get(y.data)
            if lx != ly or (lx is None and x.data != y.data):
                return False
            continue
        if x.op is Op.CONST or x.data != y.data:
            return False
        binder = BINDERS.get(x.op)
        for i, (cx, cy) in enumerate(zip(x.args, y.args, strict=True)):
            if binder is not None and i == binder[0]:
                if cx.type is not cy.type:
                    return False
            elif binder is not None and i == binder[1]:
                vx, vy = x.args[binder[0]].data, y.args[binder[0]].data
                stack.append((cx, cy, {**ex, vx: depth}, {**ey, vy: depth}, depth + 1))
            else:
                stack.append((cx, cy, ex, ey, depth))
    return True


# -- leaves --------------------------------------------------------------------------------------
_CONST_TYPES: dict[type, Type] = {bool: BOOL, int: INTEGER, float: FLOAT}


def const(value: Value) -> Expr:
    """A literal: ``True``/``False`` (Bool), an ``int`` (Integer) or a finite ``float`` (Float)."""
    t = _CONST_TYPES.get(type(value))
    if t is None:
        raise KsTypeError(f"not a Knossos literal: {value!r}")
    if t is FLOAT and not math.isfinite(value):
        raise KsTypeError(f"Float literals must be finite, not {value!r}")
    key = _exact_key(Op.CONST, _data_key(Op.CONST, value, t), ())
    found = _lookup(key)
    if found is not None:
        return found
    s = _shape_hash(Op.CONST, value, t, ())
    node = _new(Op.CONST, (), value, t, 0.0, _EMPTY, s, 0, 0, 1, hash((s, 0)))
    _register(node, key)
    return node


def var(name: str, t: Type) -> Expr:
    """An occurrence (or binding occurrence) of the variable ``name`` of type ``t``."""
    key = _exact_key(Op.VAR, _data_key(Op.VAR, name, t), ())
    found = _lookup(key)
    if found is not None:
        return found
    weight = _name_weight(name)
    s = hash((Op.VAR, t.h))  # variables' names are left out of shapes
    node = _new(Op.VAR, (), name, t, 0.0, frozenset((name,)), s, weight, weight, 1, hash((s, weight)))
    _register(node, key)
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


# -- walking ---------------------------------------------------------------------------------------
def preorder(root: Expr) -> Iterator[Expr]:
    """Every node in pre-order (children left to right); node ``i`` of this walk has number ``i``."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if node.args:
            stack.extend(reversed(node.args))


Ancestors = list[tuple[Expr, int, int]]  # (ancestor, its pre-order number, index of the child on the way)


def names_in(root: Expr) -> set[str]:
    """Every variable name in ``root``, free or bound (shared subtrees walked once)."""
    names: set[str] = set()
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is Op.VAR:
            names.add(node.data)
        stack.extend(node.args)
    return names


def path_to(root: Expr, number: int) -> tuple[Ancestors, Expr]:
    """The node with pre-order number ``number`` and its ancestors from the root down: the one walk
    to a node that :func:`node_at`, :func:`replace_at` and the rules' sites share."""
    if not 0 <= number < root.size:
        raise IndexError(f"node {number} is out of range (the expression has {root.size} nodes)")
    path: Ancestors = []
    node, node_number, remaining = root, 0, number
    while remaining:
        remaining -= 1  # step into the children
        child_number = node_number + 1
        for i, child in enumerate(node.args):
            if remaining < child.size:
                path.append((node, node_number, i))
                node, node_number = child, child_number
                break
            remaining -= child.size
            child_number += child.size
    return path, node


def node_at(root: Expr, number: int) -> Expr:
    """The node with pre-order number ``number``."""
    return path_to(root, number)[1]


def replace_at(root: Expr, number: int, new: Expr | Callable[[Expr], Expr]) -> Expr:
    """``root`` with node ``number`` replaced by ``new`` (or by ``new(old)``); ancestors are rebuilt."""
    path, node = path_to(root, number)
    return replace_on_path([(a, i) for a, _, i in path], node, new(node) if callable(new) else new)


def replace_on_path(path: list[tuple[Expr, int]], old: Expr, new: Expr) -> Expr:
    """The root of ``path`` with ``old`` replaced by ``new``; ``path`` lists the ancestors of ``old``
    from the root down, each with the index of the child on the way (callers that have walked to
    ``old`` already, such as the action enumeration, save the walk of :func:`replace_at`)."""
    if new is old:
        return path[0][0] if path else old
    if new.type is not old.type:  # the ancestors' types may change too: build them in full
        for parent, i in reversed(path):
            new = parent.replace_args((*parent.args[:i], new, *parent.args[i + 1 :]))
        return new
    return _rebuild_path(path, old, new)


def _rebuild_path(path: list[tuple[Expr, int]], old: Expr, new: Expr) -> Expr:
    """The ancestors ``path`` of ``old`` rebuilt over ``new``, a node of the same type.

    This is what every rewrite pays, once per ancestor, so it takes what it can from the old
    ancestors instead of starting afresh: their types (a child of the same type gives the same
    type), their free names when the child's are the same, and their weights and the positions of
    bound variables as the old ones plus a change.  Positions are linear in the children's, so the
    change of a variable's position at an ancestor is the change ``(dp, dn)`` at the rewrite mapped
    by the composed edges, ``dp' = a * dp + b * dn``: one ``(a, b)`` serves every variable.
    """
    # position changes at the rewrite of the variables of the replaced and replacing subtrees
    deltas: dict[str, Position] | None = {}  # None: unknown, ask the new scope
    for name in old.free | new.free:
        po, no = _position(old, name)
        pn, nn = _position(new, name)
        if po != pn or no != nn:
            deltas[name] = (pn - po, nn - no)  # type: ignore[index]
    return _climb(path, old, new, deltas)


def _climb_python(path: list[tuple[Expr, int]], old: Expr, new: Expr, deltas: dict[str, Position] | None) -> Expr:
    """The rebuild of the ancestors, bottom up (:mod:`knossos._climb` does the same in C).

    ``deltas`` maps each free variable of the rewrite whose position there changed to the change.
    """
    a, b = 1, 0  # composed edges from the rewrite up to the current child
    for parent, i in reversed(path):
        op = parent.op
        binder = BINDERS.get(op)
        if binder is None:
            found = _rebuild_plain(parent, i, old, new)
        elif i != binder[1] or deltas is None:
            found = _rebuild_binder(parent, i, old, new, None)
            if i == binder[0]:
                deltas = None
        else:
            name = parent.args[binder[0]].data
            memo = old._positions
            known = memo.get(name) if memo is not None else None  # usually, from earlier rewrites
            position = known if known is not None else _position(old, name)
            d = deltas.pop(name, None)  # outside this scope, the name is another variable
            if d is not None:
                dp, dn = d
                position = ((position[0] + a * dp + b * dn) % _PRIME, (position[1] + dn) % _PRIME)
            found = _rebuild_binder(parent, i, old, new, position)
        if deltas:
            r, sh = _edges.get((op, i)) or _edge(op, i)
            a, b = r * a % _PRIME, (r * b + sh) % _PRIME
        old, new = parent, found
    return new


def _rebuild_plain(parent: Expr, i: int, old: Expr, new: Expr) -> Expr:
    """``parent``, which binds nothing, over ``new`` in place of its child ``i``, ``old``."""
    op, args, data, t = parent.op, parent.args, parent.data, parent.type
    new_args = (*args[:i], new, *args[i + 1 :])
    key = _exact_key(op, data, new_args)
    ref = _table.get(key)
    found: Expr | None = ref() if ref is not None else None
    if found is not None:
        return found
    nf, of = new.free, old.free
    free = parent.free if (nf is of or nf == of) else _union_free(new_args)
    s = _shape_hash(op, data, t, new_args)
    r, sh = _edge(op, i)
    w = (
        parent.free_weight
        + r * (new.free_weight - old.free_weight)
        + sh * (new.occurrence_weight - old.occurrence_weight)
    ) % _PRIME
    c = (parent.occurrence_weight + new.occurrence_weight - old.occurrence_weight) % _PRIME
    cost = COST_RULES[op](new_args, data, t)
    found = _new(op, new_args, data, t, cost, free, s, w, c, parent.size + new.size - old.size, hash((s, w)))
    _register(found, key)
    return found


def _rebuild_binder(parent: Expr, i: int, old: Expr, new: Expr, position: Position | None) -> Expr:
    """The binder ``parent`` over ``new`` in place of its child ``i``, ``old``.

    ``position`` is where its variable occurs in the new scope, when the caller worked it out from
    the change at the rewrite; ``None`` where that change is not known (the child is outside the
    scope, a let's value or a build's size, or a binding occurrence below was rebuilt), and the new
    scope is walked.  The bound variable itself, which no rule rewrites, is built in full.
    """
    op, args = parent.op, parent.args
    var_index, scope_index = BINDERS[op]
    new_args = (*args[:i], new, *args[i + 1 :])
    if i == var_index:
        return make(op, new_args, parent.data)
    if position is None:
        position = _position(new_args[scope_index], args[var_index].data)
    t = parent.type
    cost = COST_RULES[op](new_args, parent.data, t)
    nf, of = new.free, old.free
    free = parent.free if (nf is of or nf == of) else None
    return _intern_binder(op, new_args, t, cost, free, position, parent.size + new.size - old.size)


_CLIMB_VERSION: Final = 3  # CLIMB_VERSION of knossos/_climb.c


def _load_climb() -> Callable[[list[tuple[Expr, int]], Expr, Expr, dict[str, Position] | None], Expr]:
    """The C loop of :mod:`knossos._climb` where it was built (``pip install`` builds it; setting
    ``KNOSSOS_PURE_PYTHON=1`` leaves it out), else :func:`_climb_python`.  Both build the same nodes."""
    if os.environ.get("KNOSSOS_PURE_PYTHON", "") not in ("", "0"):
        return _climb_python
    try:
        from knossos import _climb as compiled  # type: ignore[attr-defined]
    except ImportError:
        return _climb_python
    if getattr(compiled, "VERSION", None) != _CLIMB_VERSION:  # a build of an older knossos/_climb.c
        warnings.warn(
            "knossos._climb is out of date (pip install -e . rebuilds it); using the Python loop", stacklevel=1
        )
        return _climb_python
    _init_climb(compiled)
    return compiled.climb  # type: ignore[no-any-return]


def _init_climb(compiled: Any) -> None:
    """Hand the C loop this module: it reads the tables, helpers and slots it needs by their names."""
    compiled.init(sys.modules[__name__])


_climb = _load_climb()


def compiled_rebuild() -> bool:
    """Whether the C loop of :mod:`knossos._climb` rebuilds the ancestors of a rewrite (else the Python
    loop does: the extension was not built, or ``KNOSSOS_PURE_PYTHON=1``)."""
    return _climb is not _climb_python
