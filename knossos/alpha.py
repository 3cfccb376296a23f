"""Alpha-hashing: the hash arithmetic that makes alpha-equivalent nodes hash alike.

A node's hash combines a *shape* hash, which ignores variable names (a binder adds to it where its
variable occurs in its scope), with a *weight* of its free variables: the sum, modulo a prime, of
each free variable's name weight times the *position* of its occurrences.  A position composes one
affine map per edge (two multipliers per op and child index) from the node down to each occurrence;
composition does not commute, so different places give different numbers.  Being linear in the
children, weights take constant time per node, and a binder's weight is its scope's weight minus the
bound variable's term, so bound names leave no trace.  The positions of a bound variable are found
lazily and memoised per node and name (its ``_positions`` slot): in a small node by walking down to
the occurrences, in a large one from its *position map*, every free variable's position in a trie
shared with its largest child (its ``_position_map`` slot), so that binding the n variables of a
long let chain costs n, not n**2 (the walks would go down the rest of the chain each time).  After a
rewrite, :mod:`knossos.rebuild` carries the positions of the rebuilt ancestors over with a linear
update instead of asking again.  Hash equality is confirmed by :func:`alpha_equal` before :mod:`knossos.interning` shares a
binder with an alpha-variant.  Nothing here recurses on the depth of an expression without a bound.
"""

from __future__ import annotations

from typing import Final

from knossos import hamt
from knossos.node import Expr, Position, PositionMap
from knossos.ops import BINDERS, Op
from knossos.stable_hash import stable_hash

PRIME: Final = (1 << 61) - 1  # arithmetic of the weights

_set = object.__setattr__  # the memo slot of an (immutable) node

edges: dict[tuple[Op, int], tuple[int, int]] = {}


def edge(op: Op, index: int) -> tuple[int, int]:
    """The affine map ``p -> r * p + s`` of the edge from an ``op`` node to its child ``index``."""
    key = (op, index)
    m = edges.get(key)
    if m is None:
        m = (hash((0x6D75, int(op), index)) % (PRIME - 1) + 1, hash((0x6164, int(op), index)) % (PRIME - 1) + 1)
        edges[key] = m
    return m


binder_layouts: dict[Op, tuple[int, int, int, int, int, int, int]] = {}


def binder_layout(op: Op) -> tuple[int, int, int, int, int, int, int]:
    """(variable, scope and other child index or -1, then the scope's and the other's edge maps)."""
    layout = binder_layouts.get(op)
    if layout is None:
        var_index, scope_index = BINDERS[op]
        others = [i for i in range(3 if op is not Op.LAM else 2) if i not in (var_index, scope_index)]
        outside = others[0] if others else -1
        ro, so = edge(op, outside) if outside >= 0 else (0, 0)
        layout = (var_index, scope_index, outside, *edge(op, scope_index), ro, so)
        binder_layouts[op] = layout
    return layout


def name_weight(name: str) -> int:
    return stable_hash(name) % (PRIME - 1) + 1


def position_in(root: Expr, name: str) -> Position:
    """(position, number of occurrences) of the free ``name`` in ``root``; (0, 0) if it has none.

    Memoised per node and name.  Summed over the free names with their name weights they give
    ``root.free_weight`` and ``root.occurrence_weight``.  A small node walks down to the
    occurrences; a large one reads its position map, so that binding each variable of a long let
    chain does not walk the rest of the chain again (which made building one quadratic).
    """
    if name not in root.free:
        return _NOWHERE
    if root.op is Op.VAR:
        return _HERE
    if root.size <= WALK_MAX_SIZE and root._position_map is None:
        return _position_near(root, name)
    memo = root._positions
    if memo is not None:
        found = memo.get(name)
        if found is not None:
            return found
    result = position_from_map(position_map(root), name)
    if memo is None:  # memoised as the walk does: the C loop of knossos.rebuild reads it first
        _set(root, "_positions", {name: result})
    else:
        memo[name] = result
    return result


def occurrences(root: Expr, name: str) -> int:
    """How many times the variable ``name`` occurs free in ``root`` (memoised per node)."""
    return position_in(root, name)[1]


_NOWHERE: Final = (0, 0)
_HERE: Final = (1, 1)
#: Nodes up to this size find a variable by walking to it (recursion no deeper than this); larger
#: ones read their position maps.
WALK_MAX_SIZE: Final = 128


def position_map(root: Expr) -> PositionMap:
    """The positions of all of ``root``'s free variables (memoised per node, built bottom up).

    ``(trie, a, b, 1 / a)``: the leaf ``(name, hash, p, n)`` of :mod:`knossos.hamt` stands for the
    position ``(a * p + b * n, n)``.  Positions are linear in the children's, so a node takes its largest
    child's trie as it is, composes its edge into ``(a, b)``, and only adds the other children's
    variables (and removes a bound one): small into large, so a chain costs its length.
    """
    found = root._position_map
    if found is not None:
        return found
    stack = [root]
    while stack:  # children first, on an explicit stack: chains are deep
        node = stack[-1]
        if node._position_map is not None:
            stack.pop()
            continue
        pending = [a for _, a in _map_children(node) if a._position_map is None]
        if pending:
            stack.extend(pending)
            continue
        _set(node, "_position_map", _merged(node))
        stack.pop()
    return root._position_map  # type: ignore[return-value]


def _map_children(node: Expr) -> list[tuple[int, Expr]]:
    """The children (with their index) that have free variables, the bound variable left out."""
    binder = BINDERS.get(node.op)
    return [(i, a) for i, a in enumerate(node.args) if a.free and (binder is None or i != binder[0])]


def _merged(node: Expr) -> PositionMap:
    if node.op is Op.VAR:
        name = node.data
        return (hamt.put(None, (name, hamt.key_hash(name), 1, 1)), 1, 0, 1)
    children = _map_children(node)
    if not children:  # closed
        return (None, 1, 0, 1)
    binder = BINDERS.get(node.op)
    bound, scope_index = (node.args[binder[0]].data, binder[1]) if binder is not None else (None, -1)
    big_index, big = max(children, key=lambda c: len(c[1].free))
    trie, a, b, inverse = big._position_map  # type: ignore[misc]
    r, sh = edge(node.op, big_index)
    a, b, inverse = r * a % PRIME, (r * b + sh) % PRIME, _inverse(r) * inverse % PRIME
    if big_index == scope_index and bound in big.free:
        trie = hamt.remove(trie, bound, hamt.key_hash(bound))  # type: ignore[arg-type]
    for i, child in children:
        if i == big_index:
            continue
        ct, ca, cb, _ = child._position_map  # type: ignore[misc]
        r, sh = edge(node.op, i)
        for name, h, cp, cn in hamt.iter_leaves(ct):
            if i == scope_index and name == bound:
                continue
            p = r * (ca * cp + cb * cn) + sh * cn  # the position seen from node
            n = cn
            leaf = hamt.lookup(trie, name, h)
            if leaf is not None:
                p += a * leaf[2] + b * leaf[3]
                n += leaf[3]
            trie = hamt.put(trie, (name, h, inverse * (p - b * n) % PRIME, n))
    return (trie, a, b, inverse)


inverses: dict[int, int] = {}


def _inverse(r: int) -> int:
    """``1 / r`` modulo the prime, for the few edge multipliers ``r``."""
    found = inverses.get(r)
    if found is None:
        found = inverses[r] = pow(r, -1, PRIME)
    return found


def position_from_map(positions: PositionMap, name: str) -> Position:
    """``name``'s position in the node whose :func:`position_map` is ``positions``; (0, 0) if none."""
    trie, a, b, _ = positions
    leaf = hamt.lookup(trie, name, hamt.key_hash(name))
    if leaf is None:
        return _NOWHERE
    return ((a * leaf[2] + b * leaf[3]) % PRIME, leaf[3] % PRIME)


def _position_near(node: Expr, name: str) -> Position:
    """``position_in`` by walking down to the occurrences (in a node of at most WALK_MAX_SIZE)."""
    memo = node._positions
    if memo is not None:
        found = memo.get(name)
        if found is not None:
            return found
    binder = BINDERS.get(node.op)
    shadowed = binder is not None and node.args[binder[0]].data == name
    p = n = 0
    for i, a in enumerate(node.args):
        if binder is not None and (i == binder[0] or (shadowed and i == binder[1])):
            continue
        if name in a.free:
            ap, an = _HERE if a.op is Op.VAR else _position_near(a, name)
            r, sh = edge(node.op, i)
            p += r * ap + sh * an
            n += an
    result = (p % PRIME, n % PRIME)
    if memo is None:
        _set(node, "_positions", {name: result})
    else:
        memo[name] = result
    return result


def alpha_equal(a: Expr, b: Expr) -> bool:
    """Structural equality up to the names of bound variables (iterative)."""
    stack: list[tuple[Expr, Expr, dict[str, int], dict[str, int], int]] = [(a, b, {}, {}, 0)]
    while stack:
        x, y, ex, ey, depth = stack.pop()
        if x is y:
            if ex or ey:  # the shared node's free names must mean the same on both sides
                free = x.free
                names = free if len(free) <= len(ex) + len(ey) else [n for n in (*ex, *ey) if n in free]
                if any(ex.get(n) != ey.get(n) for n in names):
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
