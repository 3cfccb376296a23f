"""Expression nodes: immutable, interned, and equal exactly when alpha-equivalent.

Every node is built once.  Building a node whose op, data and children are those of a live node
returns that node, and so does building an *alpha-variant* of a live node (the same expression up to
the names of bound variables).  Hence ``a is b`` is the equality test, ``==`` is identity, and
``hash`` is a cached integer that is the same in every process.

Each node caches what search asks for over and over: its :attr:`~Expr.type` (nodes are type-checked
as they are built, so an ill-typed node cannot exist), its :attr:`~Expr.cost` under the reference
cost model, its node count :attr:`~Expr.size` and its free variable names :attr:`~Expr.free`.
Nothing here recurses on the depth of an expression.

Alpha-equivalence.  The hash of a binder ``(let (x e) b)`` hashes ``b`` with each free occurrence of
``x`` replaced by its de Bruijn index; subterms in which no bound variable occurs free reuse their own
cached hash, and hashes of subterms under a binding environment are memoised per node, so building a
node costs time proportional to the paths that lead to occurrences of its bound variable, not to its
size.  Hash equality is confirmed by a structural comparison before a node is shared.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Final, Union

from knossos.callee import Callee
from knossos.cost import COST_RULES
from knossos.errors import KsTypeError
from knossos.ops import BINDERS, Op
from knossos.stable_hash import stable_hash
from knossos.types import BOOL, FLOAT, INTEGER, Type
from knossos.typing_rules import TYPE_RULES

Value = Union[bool, int, float]
Env = tuple[tuple[str, int], ...]  # bound names with their de Bruijn index, sorted by index

_EMPTY: Final[frozenset[str]] = frozenset()
_BOUND_TAG: Final = 0x5EED


class Expr:
    """An interned expression node.  Build nodes with the functions of this module."""

    __slots__ = ("__weakref__", "_memo", "args", "cost", "data", "free", "h", "op", "size", "type")

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
    h: int
    _memo: dict[Env, int] | None

    def __hash__(self) -> int:
        return self.h

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


# Exact table: (op, data key, ids of children) -> weak ref to the node.  Children are kept alive by
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


def live_nodes() -> int:
    """How many interned nodes are alive (for benchmarks and leak tests)."""
    return len(_table)


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
    allows the class change).
    """

    __slots__ = ()
    __setattr__ = object.__setattr__  # type: ignore[assignment]


def _new(op: Op, args: tuple[Expr, ...], data: Any, t: Type, cost: float, free: frozenset[str], h: int) -> Expr:
    node = object.__new__(_Fresh)
    node.op = op
    node.args = args
    node.data = data
    node.type = t
    node.cost = cost
    size = 1
    for a in args:
        size += a.size
    node.size = size
    node.free = free
    node.h = h
    node._memo = None
    node.__class__ = Expr  # type: ignore[assignment]
    return node


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
    n = len(args)
    if n == 2:
        key: tuple[object, ...] = (op, data, id(args[0]), id(args[1]))
    elif n == 1:
        key = (op, data, id(args[0]))
    else:
        key = (op, data, *map(id, args))
    ref = _table.get(key)
    if ref is not None:
        found: Expr | None = ref()
        if found is not None:
            return found
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    if n == 2:
        a, b = args
        h = hash((op, 0 if data is None else _data_hash(op, data, t), a.h, b.h))
        fa, fb = a.free, b.free
        free = fa if (not fb or fb is fa or fb <= fa) else (fb if not fa or fa <= fb else fa | fb)
    else:
        h = hash((op, 0 if data is None else _data_hash(op, data, t), *[a.h for a in args]))
        free = _union_free(args)
    node = _new(op, args, data, t, cost, free, h)
    ref = _Ref(node, _forget)
    ref.key = key
    _table[key] = ref
    return node


def _make_binder(op: Op, args: tuple[Expr, ...], data: Any) -> Expr:
    var_index, scope_index = BINDERS[op]
    bound = args[var_index]
    if bound.op is not Op.VAR:
        raise KsTypeError(f"a {op.name.lower()} must bind a variable")
    key = (op, None, *map(id, args))
    found = _lookup(key)
    if found is not None:
        return found
    t = TYPE_RULES[op](args, data)
    cost = COST_RULES[op](args, data, t)
    name = bound.data
    free = _EMPTY
    for i, a in enumerate(args):
        if i == var_index:
            continue
        f = a.free
        if i == scope_index and name in f:
            f = f - {name}
        if f:
            free = f if not free else free | f
    h = _hash_binder(op, args, ())
    node = _new(op, args, None, t, cost, free, h)
    slot = 0
    while True:
        akey = (h, slot)
        ref = _alpha_table.get(akey)
        other: Expr | None = ref() if ref is not None else None
        if other is None:
            ref = _Ref(node, _forget_alpha)
            ref.key = akey
            _alpha_table[akey] = ref
            break
        if alpha_equal(other, node):
            return other
        slot += 1  # a genuine hash collision between different expressions
    _register(node, key)
    return node


# -- hashing modulo alpha ------------------------------------------------------------------------
def _restrict(env: Env, free: frozenset[str]) -> Env:
    return tuple(p for p in env if p[0] in free)


def _shift(env: Env, name: str) -> Env:
    return ((name, 0), *((n, i + 1) for n, i in env if n != name))


def _child_envs(node_op: Op, args: tuple[Expr, ...], env: Env) -> list[Env | None]:
    """The environment of each child (``None`` for a binding occurrence), restricted to its free names."""
    binder = BINDERS.get(node_op)
    if binder is None:
        if len(env) == 1:
            name = env[0][0]
            return [env if name in a.free else () for a in args]
        return [_restrict(env, a.free) if env else () for a in args]
    var_index, scope_index = binder
    out: list[Env | None] = []
    for i, a in enumerate(args):
        if i == var_index:
            out.append(None)
        elif i == scope_index:
            out.append(_restrict(_shift(env, args[var_index].data), a.free))
        else:
            out.append(_restrict(env, a.free) if env else ())
    return out


def _combine(op: Op, args: tuple[Expr, ...], data: Any, t: Type, child_hashes: list[int]) -> int:
    if op in BINDERS:
        bound = args[BINDERS[op][0]]
        return hash((op, bound.type.h, *child_hashes))
    return hash((op, _data_hash(op, data, t), *child_hashes))


def _hash_binder(op: Op, args: tuple[Expr, ...], env: Env) -> int:
    """Hash of a binder node at the top (``env == ()``), its bound variable anonymised."""
    var_index, scope_index = BINDERS[op]
    bound = args[var_index]
    hashes: list[int] = []
    for i, a in enumerate(args):
        if i == var_index:
            continue
        if i == scope_index and bound.data in a.free:
            hashes.append(_hash_under(a, ((bound.data, 0),)))
        else:
            hashes.append(a.h)
    return hash((op, bound.type.h, *hashes))


def _hash_under(root: Expr, env: Env) -> int:
    """Hash of ``root`` with the variables of ``env`` replaced by their de Bruijn indices.

    Memoised per node; iterative, so deep expressions are fine.
    """
    if root.op is Op.VAR:
        return _var_hash_under(root, env)
    stack: list[tuple[Expr, Env]] = [(root, env)]
    while stack:
        node, nenv = stack[-1]
        memo = node._memo
        if (memo is not None and nenv in memo) or _hash_if_children_ready(node, nenv) is not None:
            stack.pop()
            continue
        for a, cenv in zip(node.args, _child_envs(node.op, node.args, nenv), strict=True):
            if cenv and a.op is not Op.VAR and (a._memo is None or cenv not in a._memo):
                stack.append((a, cenv))
    return root._memo[env]  # type: ignore[index]


def _hash_if_children_ready(node: Expr, env: Env) -> int | None:
    """Hash ``node`` under ``env`` at once if no child needs work of its own; else ``None``."""
    hashes: list[int] = []
    for a, cenv in zip(node.args, _child_envs(node.op, node.args, env), strict=True):
        if cenv is None:
            continue
        if not cenv:
            hashes.append(a.h)
        elif a.op is Op.VAR:
            hashes.append(_var_hash_under(a, cenv))
        else:
            memo = a._memo
            if memo is None or cenv not in memo:
                return None
            hashes.append(memo[cenv])
    h = _combine(node.op, node.args, node.data, node.type, hashes)
    if node._memo is None:
        _set(node, "_memo", {env: h})
    else:
        node._memo[env] = h
    return h


def _var_hash_under(v: Expr, env: Env) -> int:
    for name, index in env:
        if name == v.data:
            return hash((_BOUND_TAG, index, v.type.h))
    return v.h


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
    key = (Op.CONST, _data_key(Op.CONST, value, t))
    found = _lookup(key)
    if found is not None:
        return found
    h = hash((Op.CONST, _data_hash(Op.CONST, value, t)))
    node = _new(Op.CONST, (), value, t, 0.0, _EMPTY, h)
    _register(node, key)
    return node


def var(name: str, t: Type) -> Expr:
    """An occurrence (or binding occurrence) of the variable ``name`` of type ``t``."""
    key = (Op.VAR, name, t)
    found = _lookup(key)
    if found is not None:
        return found
    h = hash((Op.VAR, _data_hash(Op.VAR, name, t)))
    node = _new(Op.VAR, (), name, t, 0.0, frozenset((name,)), h)
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


def node_at(root: Expr, number: int) -> Expr:
    """The node with pre-order number ``number``."""
    if not 0 <= number < root.size:
        raise IndexError(f"node {number} is out of range (the expression has {root.size} nodes)")
    node = root
    while number:
        number -= 1  # step into the children
        for child in node.args:
            if number < child.size:
                node = child
                break
            number -= child.size
    return node


def replace_at(root: Expr, number: int, new: Expr | Callable[[Expr], Expr]) -> Expr:
    """``root`` with node ``number`` replaced by ``new`` (or by ``new(old)``); ancestors are rebuilt."""
    if not 0 <= number < root.size:
        raise IndexError(f"node {number} is out of range (the expression has {root.size} nodes)")
    path: list[tuple[Expr, int]] = []
    node = root
    while number:
        number -= 1
        for i, child in enumerate(node.args):
            if number < child.size:
                path.append((node, i))
                node = child
                break
            number -= child.size
    result = new(node) if callable(new) else new
    for parent, i in reversed(path):
        args = parent.args
        result = parent.replace_args((*args[:i], result, *args[i + 1 :]))
    return result
