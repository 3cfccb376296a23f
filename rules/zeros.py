"""Zero-tensor rules: dropping additions of all-zero vectors and turning one-hot builds into deltaVecs.

Not in the paper's tables.  Reverse-mode code (``rev$conv1d``) writes every zero gradient as a
dense ``(build n (lam i 0.0))``, nested to the shape of the input, and adds these zeros to the real
contributions inside its innermost loop; none of the paper's rules removes an addition of a zero
*vector* (``add_zero`` is scalar, ``sumbuild_of_zero_vec`` knows only ``constVec`` zeros), so no
search over them can either.  These two rules do what ksc's optimiser does for its own zeros
(``x + 0 = x``; ``if i == j then e else 0`` inside a build becomes a deltaVec), for zeros written
as builds and passed through lets.  They are the ``zero_tensor_rules`` set, kept out of the
paper's sets (``ml_rules`` and the rest are as the reference has them).

Whether a subexpression is zero is read off its structure (:func:`is_zero`): a literal 0, or a
constVec, deltaVec, build, tuple, if (both branches) or let (its body) of zeros, or a variable
bound by an enclosing let whose value is.  The value's shape is not checked (sizes are runtime
values), which is what the domains say.
"""

from __future__ import annotations

from knossos import expr as E
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from rules.pattern import Bindings
from rules.rule import Condition, Rewrite, Rule, Site, builds, condition, not_free, rule

#: The structural forms whose value is zero when their parts named here are (None: every child).
ZERO_FORMS: dict[Op, tuple[int, ...] | None] = {
    Op.CONSTVEC: (1,),
    Op.DELTAVEC: (2,),
    Op.BUILD: (2,),
    Op.LET: (2,),
    Op.IF: (1, 2),
    Op.TUPLE: None,
}
#: Only constVecs of a zero (``sumbuild_of_zero_vec``'s zero vectors).
CONSTVEC_ZERO: dict[Op, tuple[int, ...] | None] = {Op.CONSTVEC: (1,)}
#: Nothing but a literal zero (the baseline's ``x+0``, ``div_by_self``'s ``a`` that is not zero).
LITERAL_ZERO: dict[Op, tuple[int, ...] | None] = {}


def is_zero(e: Expr, site: Site | None = None, through: dict[Op, tuple[int, ...] | None] = ZERO_FORMS) -> bool:
    """Whether ``e`` (a part of the node at ``site``) evaluates to zeros (or fails), whatever the inputs:
    the one "is this zero?" test of the rules.

    A literal 0 is zero, and so is a form of ``through`` whose named parts are.  A variable is looked
    through when a let of ``site.scope`` binds it, or a let inside ``e`` whose value uses no name bound
    inside ``e`` (never another binder inside ``e``); in a let's value, only a let numbered below that
    let is (one in scope at the site but numbered above it lies in its body, where it shadows the name
    the value means).  Without a site no variable of the scope is looked through.
    """
    # (subexpression, what the names bound inside e around it are bound to (a let's value, or None
    # for any other binder), binders numbered below this are visible)
    Local = dict[str, Expr | None]
    stack: list[tuple[Expr, Local, int | None]] = [(e, {}, None if site is None else site.number + 1)]
    while stack:
        node, local, below = stack.pop()
        op = node.op
        if op is Op.CONST:
            if not (node.type.is_number and node.data == 0):
                return False
        elif op is Op.VAR:
            if node.data in local:  # bound inside e: a let's value is looked through, in its own scope
                value = local[node.data]
                if value is None:
                    return False
                stack.append((value, {}, None))
                continue
            found = None if site is None else site.scope.get(node.data)
            if found is None or found[0].op is not Op.LET or below is None or found[1] >= below:
                return False
            stack.append((found[0].args[1], {}, found[1]))
        elif op in through:
            inner = local
            binder = BINDERS.get(op)
            if binder is not None:
                bound = node.args[binder[0]].data
                # a let's value is looked through only where no outer name it uses can be shadowed
                value = node.args[1] if op is Op.LET and not node.args[1].free & local.keys() else None
                inner = {**local, bound: value}
            parts = through[op]
            stack.extend((node.args[i], inner, below) for i in (range(len(node.args)) if parts is None else parts))
        else:
            return False
    return True


class AddZeroVec(Rule):
    """``(add a z)`` or ``(add z a)`` -> ``a`` for an all-zero vector or tuple ``z``."""

    name = "add_zero_vec"
    heads = frozenset({Op.ADD})
    lhs_text = "(add a z), (add z a)"
    rhs_text = "a"
    conditions_text = (
        "z is all zeros (see rules/zeros.py)",
        "a has the add's type, which is a vector or tuple (add_zero does numbers)",
    )
    domain = "z has a's shape and evaluating it does not fail"
    strict = True  # outside the domain the original fails; a + 0 is a, the sign of a zero aside

    def match(self, site: Site) -> Expr | None:
        """The operand kept."""
        node = site.node
        if node.type.is_number:
            return None
        a, b = node.args
        if b.type is node.type and is_zero(a, site):
            return b
        if a.type is node.type and is_zero(b, site):
            return a
        return None

    def rewrite(self, site: Site, found: Expr) -> Rewrite:
        return site.number, found


def all_zeros(hole: str) -> Condition:
    """The expression matched by ``hole`` is all zeros (:func:`is_zero`, looking through the lets in scope)."""
    return condition("all_zeros", lambda site, z: is_zero(z, site), hole, at_site=True)


def delta_index(left: Expr, right: Expr, x: Expr) -> Expr | None:
    """The side of ``(eq left right)`` that is not the variable ``x`` when the other is, and does not use ``x``."""
    if left.op is Op.VAR and left.data == x.data:
        i = right
    elif right.op is Op.VAR and right.data == x.data:
        i = left
    else:
        return None
    return None if x.data in i.free else i


def _delta(site: Site, b: Bindings) -> Expr:
    i = delta_index(b["left"], b["right"], b["x"])
    assert i is not None
    return E.op(Op.DELTAVEC, b["n"], i, b["a"])


BUILD_OF_DELTA = rule(
    "build_of_delta",
    "(build ?n (lam ?x (if (eq ?left ?right) ?a ?z)))",
    builds("(deltaVec ?n i ?a), i the side of the eq that is not ?x", _delta),
    not_free("?x", "?a"),
    condition("one_side_is", lambda left, right, x: delta_index(left, right, x) is not None, "?left", "?right", "?x"),
    not_free("?x", "?z"),
    all_zeros("?z"),
    domain="0 <= i < n, z has a's shape, and evaluating a does not fail",
)

ZERO_TENSOR_RULES: list[Rule] = [AddZeroVec(), BUILD_OF_DELTA]
