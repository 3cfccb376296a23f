"""Rebuilding the ancestors of a rewritten node: the hot loop of every search.

A rewrite replaces one node; its ancestors, from its parent up to the root, are built again over the
new child.  :func:`replace_at` and :func:`replace_on_path` do this through the tables of
:mod:`knossos.interning`, taking from each old ancestor what the new one shares with it.  The loop
runs in C (:mod:`knossos._climb`, built from knossos/_climb.c by ``pip install``) where it was built,
else in Python; both build the same nodes.
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, Final

from knossos import interning
from knossos.alpha import PRIME, binder_layout, binder_layouts, edge, edges, position_in
from knossos.cost import COST_RULES, LET_COST
from knossos.freeset import join
from knossos.interning import (
    exact_key,
    intern_binder,
    intern_node,
    intern_table,
    make,
    new_node,
    shape_hash,
    union_free,
)
from knossos.node import Expr, Position
from knossos.ops import BINDERS, Op
from knossos.walk import path_to


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
        po, no = position_in(old, name)
        pn, nn = position_in(new, name)
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
            position = known if known is not None else position_in(old, name)
            d = deltas.pop(name, None)  # outside this scope, the name is another variable
            if d is not None:
                dp, dn = d
                position = ((position[0] + a * dp + b * dn) % PRIME, (position[1] + dn) % PRIME)
            found = _rebuild_binder(parent, i, old, new, position)
        if deltas:
            r, sh = edges.get((op, i)) or edge(op, i)
            a, b = r * a % PRIME, (r * b + sh) % PRIME
        old, new = parent, found
    return new


def _rebuild_plain(parent: Expr, i: int, old: Expr, new: Expr) -> Expr:
    """``parent``, which binds nothing, over ``new`` in place of its child ``i``, ``old``."""
    op, args, data, t = parent.op, parent.args, parent.data, parent.type
    new_args = (*args[:i], new, *args[i + 1 :])
    key = exact_key(op, data, new_args)
    ref = intern_table.get(key)
    found: Expr | None = ref() if ref is not None else None
    if found is not None:
        return found
    nf, of = new.free, old.free
    free = parent.free if (nf is of or nf == of) else union_free(new_args)
    s = shape_hash(op, data, t, new_args)
    r, sh = edge(op, i)
    w = (
        parent.free_weight
        + r * (new.free_weight - old.free_weight)
        + sh * (new.occurrence_weight - old.occurrence_weight)
    ) % PRIME
    c = (parent.occurrence_weight + new.occurrence_weight - old.occurrence_weight) % PRIME
    cost = COST_RULES[op](new_args, data, t)
    found = new_node(op, new_args, data, t, cost, free, s, w, c, parent.size + new.size - old.size, hash((s, w)))
    intern_node(found, key)
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
        position = position_in(new_args[scope_index], args[var_index].data)
    t = parent.type
    cost = COST_RULES[op](new_args, parent.data, t)
    nf, of = new.free, old.free
    free = parent.free if (nf is of or nf == of) else None
    return intern_binder(op, new_args, t, cost, free, position, parent.size + new.size - old.size)


_CLIMB_VERSION: Final = 6  # CLIMB_VERSION of knossos/_climb.c


def _load_climb() -> Callable[[list[tuple[Expr, int]], Expr, Expr, dict[str, Position] | None], Expr]:
    """The C loop of :mod:`knossos._climb` where it was built (``pip install`` builds it; setting
    ``KNOSSOS_PURE_PYTHON=1`` leaves it out), else :func:`_climb_python`.  Both build the same nodes."""
    if os.environ.get("KNOSSOS_PURE_PYTHON", "") not in ("", "0"):
        return _climb_python
    try:  # by name: a compiled module is not a Python import that the import graph can follow
        compiled = importlib.import_module("knossos._climb")
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
    """Hand the C loop the tables, helpers and slots it needs, under the names its init reads."""
    compiled.init(
        SimpleNamespace(
            Expr=Expr,
            _Ref=interning.Ref,
            _forget_alpha=interning.forget_alpha,
            _alpha_table=interning.alpha_table,
            BINDERS=BINDERS,
            _binder_layouts=binder_layouts,
            _binder_layout=binder_layout,
            _edges=edges,
            _edge=edge,
            COST_RULES=COST_RULES,
            _position=position_in,
            _intern_binder=intern_binder,
            _rebuild_binder=_rebuild_binder,
            _table=intern_table,
            _forget=interning.forget,
            _union_free=union_free,
            _join_free=join,
            _data_hash=interning.data_hash,
            Op=Op,
            LET_COST=LET_COST,
        )
    )


_climb = _load_climb()


def compiled_rebuild() -> bool:
    """Whether the C loop of :mod:`knossos._climb` rebuilds the ancestors of a rewrite (else the Python
    loop does: the extension was not built, or ``KNOSSOS_PURE_PYTHON=1``)."""
    return _climb is not _climb_python
