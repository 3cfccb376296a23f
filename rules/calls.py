"""Inlining a call of a def: ``(f a1 ... ak)`` -> ``(let ((p1 a1) ... (pk ak)) body-of-f)``."""

from __future__ import annotations

from functools import lru_cache

from knossos import expr as E
from knossos.callee import CalleeKind
from knossos.expr import Expr, names_in
from knossos.ops import Op
from knossos.program import Def, VecSizes
from knossos.substitution import fresh_name, substitute
from knossos.types import INTEGER
from rules.rule import Rewrite, Rule, Site


class InlineCall(Rule):
    """Replace a call of a def by its body, its parameters bound by lets to the arguments.

    Parameters are renamed where an argument mentions a variable of the same name (the lets would
    otherwise capture it); size variables of sized parameters are bound to the sizes of the arguments.
    """

    name = "inline_call"
    strict = True
    heads = frozenset({Op.CALL})
    lhs_text = "(f a1 ... ak)"
    rhs_text = "(let ((p1 a1) ... (pk ak)) body_f)"
    conditions_text = ("f is a def (not an edef)",)

    def match(self, site: Site) -> bool | None:
        callee = site.node.data
        return (callee.kind is CalleeKind.DEF and _outer_sizes_only(callee.definition)) or None

    def rewrite(self, site: Site, found: bool) -> Rewrite:
        call = site.node
        d: Def = call.data.definition
        return site.number, inline(d, call.args)


def inline(d: Def, args: tuple[Expr, ...]) -> Expr:
    """The body of ``d`` with its parameters bound to ``args`` by lets."""
    body = d.body
    taken = set().union(*(a.free for a in args)) if args else set()
    taken |= _names_in_body(body)
    params: list[Expr] = []
    for k, p in enumerate(d.params):
        v = E.var(p.name, p.type)
        if any(p.name in a.free for a in args[k + 1 :]):  # its let would capture a later argument's variable
            new = E.var(fresh_name([taken], base=p.name), p.type)
            taken.add(new.data)
            body = substitute(body, p.name, new)
            v = new
        params.append(v)
    # size variables: n = (size p) for the first parameter that names n at its outermost level
    for size_name in _size_vars_in_order(d):
        source = next(
            v
            for p, v in zip(d.params, params, strict=True)
            if isinstance(p.sizes, VecSizes) and p.sizes.name == size_name
        )
        n = E.var(size_name, INTEGER)
        body = E.let(n, E.make(Op.SIZE, (source,)), body)
    for v, a in reversed(list(zip(params, args, strict=True))):
        body = E.let(v, a, body)
    return body


@lru_cache(maxsize=256)
def _names_in_body(body: Expr) -> frozenset[str]:
    """Every name in a def's body: asked at every inlining of it, and the body does not change."""
    return frozenset(names_in(body))


def _size_vars_in_order(d: Def) -> list[str]:
    """Size variables named at the outer level of a parameter's type, in order."""
    out: list[str] = []
    for p in d.params:
        if isinstance(p.sizes, VecSizes) and p.sizes.name is not None and p.sizes.name not in out:
            out.append(p.sizes.name)
    return out


def _outer_sizes_only(d: Def) -> bool:
    """Inlining binds each size variable to the size of a parameter; inner sizes have no such value."""
    return set(_size_vars_in_order(d)) == set(d.size_vars)


INLINE_CALL = InlineCall()
