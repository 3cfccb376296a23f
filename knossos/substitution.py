"""Capture-avoiding substitution and fresh names.

Rules move expressions across binders; whenever an expression with a free ``x`` would land under a
binder of ``x``, that binder is renamed first.  Everything here is iterative.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from knossos import expr as E
from knossos.expr import Expr, names_in
from knossos.ops import BINDERS, Op


def fresh_name(avoid: Iterable[Set[str]], base: str = "var") -> str:
    """The first of ``var0``, ``var1``, ... that is in none of ``avoid``."""
    sets = list(avoid)
    i = 0
    while any(f"{base}{i}" in s for s in sets):
        i += 1
    return f"{base}{i}"


def substitute(root: Expr, name: str, replacement: Expr) -> Expr:
    """``root`` with every free occurrence of ``name`` replaced by ``replacement``, capture-avoiding.

    A binder inside ``root`` that binds a name free in ``replacement`` (and has ``name`` free in its
    scope) gets a fresh name.  The renamed binder is only ever built together with its final
    children: built alone it would be alpha-equivalent to the original, and interning would hand
    back the original with the old name.
    """
    if name not in root.free:
        return root
    danger = replacement.free
    done: dict[int, Expr] = {}  # id of an original node -> its substituted version
    working: dict[int, list[Expr]] = {}  # id of an original node -> its children, a binder's renamed
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        orig, ready = stack.pop()
        if ready:
            args = working[id(orig)]
            new_args = tuple(done[id(a)] if _affected(orig.op, args, i, name) else a for i, a in enumerate(args))
            done[id(orig)] = orig.replace_args(new_args)
            continue
        if id(orig) in done or id(orig) in working:
            continue
        if orig.op is Op.VAR:
            done[id(orig)] = replacement if orig.data == name else orig
            continue
        args = list(orig.args)
        binder = BINDERS.get(orig.op)
        if binder is not None:
            var_i, scope_i = binder
            old = args[var_i]
            if old.data != name and old.data in danger and name in args[scope_i].free:
                new_var = E.var(fresh_name([names_in(orig), danger, {name}], base=_stem(old.data)), old.type)
                args[var_i] = new_var
                args[scope_i] = substitute(args[scope_i], old.data, new_var)  # new_var is fresh: no renames
        working[id(orig)] = args
        stack.append((orig, True))
        stack.extend((a, False) for i, a in enumerate(args) if _affected(orig.op, args, i, name))
    return done[id(root)]


def _stem(name: str) -> str:
    return name.rstrip("0123456789") or "var"


def _affected(op: Op, args: list[Expr], i: int, name: str) -> bool:
    binder = BINDERS.get(op)
    if binder is not None:
        if i == binder[0]:
            return False
        if i == binder[1] and args[binder[0]].data == name:
            return False
    return name in args[i].free


def replace_occurrence(root: Expr, number: int, value: Expr) -> Expr:
    """``root`` with the variable occurrence numbered ``number`` replaced by ``value``.

    Binders between the root and the occurrence that would capture a free variable of ``value``
    are renamed: the occurrence is first swapped for a fresh placeholder variable, which is then
    substituted capture-avoidingly.
    """
    from knossos.expr import node_at, replace_at

    if not binders_on_path(root, number) & value.free:  # nothing can capture: one rebuild
        return replace_at(root, number, value)
    occurrence = node_at(root, number)
    # no program can name a variable with a control character (the reader refuses them), so this
    # name is fresh without looking at the expression
    placeholder = E.var("\x00inline", occurrence.type)
    return substitute(replace_at(root, number, placeholder), placeholder.data, value)


def binders_on_path(root: Expr, number: int, start: int = 0) -> set[str]:
    """Names bound by the binders whose scope contains node ``number``, from node ``start`` down."""
    names: set[str] = set()
    node, position = root, 0
    while position != number:
        binder = BINDERS.get(node.op)
        position += 1
        for i, child in enumerate(node.args):
            if number < position + child.size:
                if binder is not None and i == binder[1] and position - 1 >= start:
                    names.add(node.args[binder[0]].data)
                node = child
                break
            position += child.size
    return names
