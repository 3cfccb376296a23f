"""What the C++ emitter knows of a loop body before writing it: what every iteration computes
alike, reads at strided indices, whether it may fail, loop or allocate."""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.index_lets import strided
from knossos.callee import Callee, CalleeKind
from knossos.expr import Expr
from knossos.op_table import FUNCTION, ROWS, OpKind
from knossos.ops import Op
from knossos.types import FLOAT

# -- expressions -----------------------------------------------------------------------------------
_COMPARE = frozenset(row.op for row in ROWS if row.kind is OpKind.COMPARISON)


ELEMENTWISE = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG, Op.SUM, Op.SUMBUILD})


# -- loops -----------------------------------------------------------------------------------------
def strict_children(node: Expr) -> list[Expr]:
    """The children that evaluating ``node`` (not a ``let``) evaluates whatever the values (or fails)."""
    op, args = node.op, node.args
    if op in (Op.IF, Op.AND, Op.OR, Op.BUILD, Op.SUMBUILD):
        return [args[0]]  # branches and loop bodies may not run
    if op in (Op.LAM, Op.CONST, Op.VAR):
        return []
    return list(args)


def walk_evaluated(body: Expr, bound: dict[str, int], visit: Callable[[Expr], bool]) -> None:
    """Call ``visit`` on what evaluating ``body`` evaluates whatever the values (through lets and
    strict operands, not into branches or loop bodies), in evaluation order, looking inside a node
    only where ``visit`` says so.  ``bound`` counts, at each visit, the bindings of each variable by
    the lets of ``body`` in scope there (it starts with the caller's counts and is updated in place)."""
    stack: list[Expr | tuple[str, int]] = [body]  # (name, +1 or -1): entering or leaving a let's body
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            bound[item[0]] = bound.get(item[0], 0) + item[1]
            continue
        if not visit(item):
            continue
        if item.op is Op.LET:
            name = item.args[0].data
            stack += [(name, -1), item.args[2], (name, 1), item.args[1]]
        else:
            stack.extend(reversed(strict_children(item)))


def literal_sum(e: Expr) -> float | None:
    """The value of two Float literals added or subtracted (a derivative's exponent ``(sub 3.0 1.0)``):
    left in place by :func:`loop_invariants` (g++ folds it), so that :func:`_pow_cpp` sees it."""
    if e.op not in (Op.ADD, Op.SUB) or not all(x.op is Op.CONST and type(x.data) is float for x in e.args):
        return None
    x, y = (x.data for x in e.args)
    return float(x + y if e.op is Op.ADD else x - y)


def loop_invariants(
    body: Expr, var: str, varying: frozenset[str], done: Expr | None = None
) -> tuple[list[Expr], list[Expr]]:
    """What a loop over ``var`` whose iterations evaluate ``body`` can do once, before the first.

    ``varying`` are the variables that change between iterations (``var`` among them); ``done``, a
    subexpression computed before the loop already (a row-wise sum), is not looked into.  Returns the
    largest subexpressions that every iteration evaluates and that depend neither on those nor on
    a variable bound inside ``body``, in evaluation order (each iteration would compute the same
    value); and the ``(index var v)`` that every iteration evaluates with such a ``v`` (the loop
    reads ``v`` at every index in [0, n), so one check of the range serves them all), or reads
    ``v`` at ``s var + c`` (:func:`strided`: one check that ``v`` reaches ``s (n - 1) + c``).
    """
    hoisted: dict[int, Expr] = {}
    ranged: dict[int, Expr] = {}
    bound = dict.fromkeys(varying, 1)  # variable -> how many bindings inside the loop are in scope

    def invariant(e: Expr) -> bool:
        return not any(bound.get(x) for x in e.free)

    def visit(item: Expr) -> bool:
        if item.op is Op.CONST or item.op is Op.VAR or item is done or literal_sum(item) is not None:
            return False
        if invariant(item):
            hoisted.setdefault(id(item), item)
            return False
        if item.op is Op.INDEX and bound[var] == 1:  # ``var`` is the loop's
            i, v = item.args
            if strided(i, var) is not None and invariant(v):
                ranged.setdefault(id(item), item)
        return True

    walk_evaluated(body, bound, visit)
    return list(hoisted.values()), list(ranged.values())


def copy_source(var: str, body: Expr) -> Expr | None:
    """``v`` where ``body`` is ``(index var v)`` (or ``(let (x (index var v)) x)``), ``v`` free of ``var``."""
    if body.op is Op.LET and body.args[2] is body.args[0]:
        body = body.args[1]
    if body.op is Op.INDEX and body.args[0].op is Op.VAR and body.args[0].data == var and var not in body.args[1].free:
        return body.args[1]
    return None


def walks_column(e: Expr, j: str, k: str) -> bool:
    """Whether ``e`` reads some ``(index j v)`` with ``v`` depending on ``k``: with ``k`` the inner
    loop, that is a walk down a column (a heuristic: shadowed names are not told apart)."""
    seen: set[int] = set()
    stack = [e]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op is Op.INDEX:
            i, v = node.args
            if i.op is Op.VAR and i.data == j and k in v.free:
                return True
        stack.extend(node.args)
    return False


LOOP_OPS = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CALL, Op.APPLY, Op.LAM})


def has_loop(body: Expr, done: Expr | None = None) -> bool:
    """Whether evaluating ``body`` may run a loop or a call (``done`` not looked into); C's functions
    of Floats (exp, tanh...) are neither."""
    seen: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if id(node) in seen or node is done:
            continue
        seen.add(id(node))
        if node.op in LOOP_OPS and not (node.op is Op.CALL and node.type is FLOAT and native_cannot_fail(node)):
            return True
        if node.op in ELEMENTWISE and not node.type.is_scalar:
            return True
        stack.extend(node.args)
    return False


#: Value ops with a Float result that never fail (op_table).
_CANNOT_FAIL_FLOAT = frozenset(
    row.op for row in ROWS if row.never_fails and row.kind not in (OpKind.COMPARISON, OpKind.LOGIC)
)


#: Natives of Floats that return a Float and never fail (C's functions: NaN or an infinity, no error).
_CANNOT_FAIL_NATIVES = frozenset(
    {"abs", "max", "pow", "tanh", "exp", "log", "exp$f", "log$f", "add$ff", "sub$ff", "mul$ff", "div$ff", *FUNCTION}
)


#: A Float ``if`` whose branches cannot fail and are this small (nodes) computes both and selects one:
#: g++ vectorises a loop with a select, not one with a branch around a call of exp (PyTorch's softplus,
#: a loss's clamps, a ReLU's reverse).
SPECULATE_MOST = 24


def native_cannot_fail(node: Expr) -> bool:
    callee: Callee = node.data
    return callee.kind is not CalleeKind.DEF and callee.name in _CANNOT_FAIL_NATIVES


def speculable(node: Expr) -> bool:
    """Whether the Float ``if`` ``node`` may compute both branches and select: neither can fail and
    both are small."""
    if node.type is not FLOAT:
        return False
    branches = node.args[1:]
    return sum(b.size for b in branches) <= SPECULATE_MOST and all(cannot_fail(b, set()) for b in branches)


def cannot_fail(body: Expr, ranged: set[int]) -> bool:
    """Whether ``body`` is Float arithmetic, comparisons, branches and lets over reads whose range
    was checked before the loop (``ranged``): nothing in it can raise an error."""
    stack = [body]
    while stack:
        node = stack.pop()
        op = node.op
        if op is Op.INDEX and id(node) in ranged:
            continue  # its operands were computed before the loop
        safe = (
            op in (Op.CONST, Op.VAR, Op.LET, Op.IF, Op.AND, Op.OR)
            or (op in _COMPARE and node.args[0].type.is_scalar)
            or (op in _CANNOT_FAIL_FLOAT and node.type is FLOAT)
            or (op is Op.CALL and node.type is FLOAT and native_cannot_fail(node))
        )
        if not safe:
            return False
        stack.extend(node.args)
    return True


def only_read(e: Expr, v: Expr, k: str) -> bool:
    """Whether ``e`` uses ``v`` (this node) only as ``(index k v)``."""
    stack = [e]
    seen: set[int] = set()
    while stack:
        node = stack.pop()
        if id(node) in seen or node is v:
            continue
        seen.add(id(node))
        for c, a in enumerate(node.args):
            if a is v and not (node.op is Op.INDEX and c == 1 and node.args[0].op is Op.VAR and node.args[0].data == k):
                return False
        stack.extend(node.args)
    return True
