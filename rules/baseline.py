"""The baseline: a hand-written, deterministic simplifier in the style of ksc's optimiser.

This is what the paper compares against ("ksc") and what "baseline" means in the plots and the
wall-clock benchmarks.  :func:`simplify` rewrites an expression to a fixed point of:

* **let inlining** -- a let whose variable is used once, and not inside a ``build``/``sumbuild``/
  ``lam`` body nested in the let's scope (that would recompute the value per iteration), is inlined;
  a let bound to a literal or a variable ("trivial value") is inlined at every occurrence; a let whose
  variable is unused is deleted (its value is never computed);
* **let CSE** (``cse_bind`` and its generalisation) -- ``(let (x e) ... (let (y e) b))`` becomes
  ``(let (x e) ... b[y := x])`` when both ``e`` denote the same value (the same free variables bound
  by the same binders) and ``x`` is not shadowed in between;
* **local rules** (:data:`LOCAL_RULES`, rewritten to a fixed point at each rebuilt node) -- ``index_of_build``, ``size_of_build``, ``select_of_tuple``, ``sum`` of a
  ``build`` of scalars -> ``sumbuild`` (``mk_sumbuild``; for vector elements it would cost more),
  constant folding (arithmetic, comparisons, ``neg``, ``to_float``, ``and``/``or`` of a literal),
  ``x+0``, ``0+x``, ``x-0``, ``x*1``, ``1*x``, ``x/1``, ``x*0`` and ``0*x`` (scalar results only; exact
  for finite x, as the rule ``mul_zero`` says),
  ``if true``/``if false``;
* **general CSE** -- a non-trivial subexpression that occurs more than once with its free variables
  bound by the same binders is bound once by a let at the nearest common ancestor of its occurrences,
  when it is evaluated there on every path (never hoisted out of an ``if`` branch, loop body or lambda
  that might not run) and the cost strictly drops.

Everything is capture-avoiding: a pass carries a substitution from original variable names to output
expressions and renames a binder whenever it would capture a free variable of a pending value; a
renamed binder is always built together with its renamed scope (interning is modulo alpha).

**Termination.**  Let ``ops`` be the number of nodes that are not variables, literals or lets, and
``lets`` the number of lets; every elementary step strictly decreases ``Φ = 2·ops + lets``: inlining,
deleting or CSE-ing a let removes a let (and deletes no op it would have to add back); each local rule
removes at least one op node and adds at most one let (``index_of_build`` removes the ``index`` and the
``build``: -4+1); hoisting ``k >= 2`` copies of an expression with ``p >= 1`` ops removes ``(k-1)·p``
ops and adds one let.  A round (one pass of the simplifier, or one hoist) that changes the expression
therefore lowers ``Φ`` by at least one, so there are at most ``Φ`` rounds.  :func:`simplify` checks
that ``Φ`` drops on every round and stops with :class:`BaselineError` if it ever does not or if the
round budget runs out (neither can happen unless there is a bug).

**Cost.**  No step increases the reference cost (``Expr.cost``).  Every cost rule is non-decreasing
in its children's costs with slope at most 1 outside loop bodies (``if`` has slope 1 in the dearer
branch and 0.0001 in the cheaper one), so moving a let's value to its single occurrence outside any
loop body adds at most the value's cost while the let and its value (0.1 + cost) disappear; local
rules lower the cost of the node they rewrite; a hoist is only made when it lowers the cost.

Everything is iterative (explicit stacks), so expressions thousands of levels deep are fine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from typing import Any, Final

from knossos import expr as E
from knossos import trampoline
from knossos.expr import Expr, names_in
from knossos.ops import BINDERS, Op
from knossos.program import Def, Program
from knossos.substitution import fresh_name, substitute
from knossos.types import Kind
from rules.folds import fold
from rules.rule import Rule, builds, condition, rule
from rules.rule_set import RuleSet, rewrite_to_fixed_point
from rules.sets import ml_rules

__all__ = ["BaselineError", "measure", "simplify", "simplify_def", "simplify_program"]


class BaselineError(RuntimeError):
    """The simplifier failed to make progress as its termination argument says it must (a bug)."""


# -- local rules: a rule set, rewritten to a fixed point at each rebuilt node -------------------------
_LEAVES: Final = (Op.VAR, Op.CONST)
_LOOPS: Final = frozenset({Op.BUILD, Op.SUMBUILD, Op.LAM})


def _ml(name: str) -> Rule:
    return ml_rules.rule(name)


#: The local rules, by op in the order they are tried: the rows of the rule sets where there is one,
#: the baseline's own rows (the mirror images of add_zero, mul_one, ..., the other folds) where not.
#: Each removes at least one op node and adds at most one let (see Termination).
LOCAL_RULES: Final = RuleSet(
    "baseline_local",
    [
        _ml("cprop_add"),
        rule("add_zero_right", "(add ?a 0)", "?a"),
        _ml("add_zero"),
        _ml("cprop_sub"),
        _ml("sub_zero"),
        _ml("cprop_mul"),
        _ml("mul_zero"),
        rule("mul_zero_right", "(mul ?a 0)", "0", domain="a is finite (inf * 0 is NaN); up to the sign of zero"),
        rule("mul_one_right", "(mul ?a 1)", "?a"),
        _ml("mul_one"),
        _ml("cprop_div"),
        _ml("div_one"),
        _ml("cprop_eq"),
        fold(Op.NE),
        _ml("cprop_gt"),
        _ml("cprop_gteq"),
        fold(Op.LT),
        fold(Op.LTE),
        _ml("if_true"),
        _ml("if_false"),
        _ml("index_of_build"),
        _ml("size_of_build"),
        _ml("select_of_tuple"),
        # sum costs 15 whatever the element type, sumbuild 15 per element: only scalars get cheaper
        rule(
            "mk_sumbuild_of_scalars",
            "(sum (build ?n (lam ?x ?e)))",
            "(sumbuild ?n (lam ?x ?e))",
            condition("scalar", lambda e: e.type.elements16 == 1, "?e"),
        ),
        _ml("delete_let"),
        rule(
            "inline_trivial_let",
            "(let (?x ?v) ?b)",
            builds("?b[?x := ?v]", lambda site, b: substitute(b["b"], b["x"].data, b["v"])),
            condition("variable_or_literal", lambda v: v.op in _LEAVES, "?v"),
        ),
        fold(Op.NEG),
        fold(Op.TO_FLOAT),
        # the right operand is only evaluated when the left does not decide
        rule("and_true", "(and true ?b)", "?b"),
        rule("and_false", "(and false ?b)", "false"),
        rule("or_true", "(or true ?b)", "true"),
        rule("or_false", "(or false ?b)", "?b"),
    ],
)


def _local(node: Expr) -> Expr:
    """Local rules at the root of ``node`` until none applies (each lowers Φ, so this ends)."""
    return rewrite_to_fixed_point(node, LOCAL_RULES)


# -- occurrence analysis ------------------------------------------------------------------------------
@dataclasses.dataclass
class _LetInfo:
    count: int = 0  # free occurrences of the variable in the body (and in those of lets CSE-d onto it)
    under_loop: bool = False  # some occurrence is in a build/sumbuild/lam body inside the let's scope
    #: For a let whose value is that of an enclosing let: (its position, its variable's name).
    alias: tuple[int, str] | None = None


_ScopeEntry = tuple[int, int, bool]  # (binder position, loop depth inside its scope, binder is a let)


def _analyse(root: Expr) -> dict[int, _LetInfo]:
    """Occurrence counts of every let (by pre-order position) and the lets that repeat an outer value."""
    info: dict[int, _LetInfo] = {}
    scope: dict[str, _ScopeEntry] = {}
    avail: dict[tuple[Expr, tuple[int, ...]], tuple[int, str]] = {}
    missing = object()
    # frames: ("v", node, pos, depth) visit; ("s", name, entry) set scope; ("r", name, saved) restore;
    # ("a", key, value) set avail; ("u", key, saved) restore avail
    stack: list[tuple[Any, ...]] = [("v", root, 0, 0)]
    while stack:
        frame = stack.pop()
        kind = frame[0]
        if kind == "s":
            scope[frame[1]] = frame[2]
            continue
        if kind == "r":
            _restore(scope, frame[1], frame[2], missing)
            continue
        if kind == "a":
            avail[frame[1]] = frame[2]
            continue
        if kind == "u":
            _restore(avail, frame[1], frame[2], missing)
            continue
        _, node, pos, depth = frame
        op = node.op
        if op is Op.VAR:
            entry = scope.get(node.data)
            if entry is not None and entry[2]:
                let_info = info[entry[0]]
                let_info.count += 1
                if depth > entry[1]:
                    let_info.under_loop = True
            continue
        if op is Op.CONST:
            continue
        if op is Op.LET:
            var, rhs, body = node.args
            name = var.data
            body_pos = pos + 2 + rhs.size
            let_info = _LetInfo()
            info[pos] = let_info
            key = None if rhs.op in _LEAVES else _value_key(rhs, scope)
            found = None if key is None else avail.get(key)
            if found is not None and scope.get(found[1], (-1,))[0] == found[0]:
                # (let (x e) ... (let (y e) b)): y is x; e is not walked, it will not be kept
                let_info.alias = found
                stack.append(("r", name, scope.get(name, missing)))
                stack.append(("v", body, body_pos, depth))
                stack.append(("s", name, scope[found[1]]))
                continue
            stack.append(("r", name, scope.get(name, missing)))
            if key is not None:
                stack.append(("u", key, avail.get(key, missing)))
            stack.append(("v", body, body_pos, depth))
            stack.append(("s", name, (pos, depth, True)))
            if key is not None:
                stack.append(("a", key, (pos, name)))
            stack.append(("v", rhs, pos + 2, depth))
            continue
        binder = BINDERS.get(op)
        child_pos = pos + 1 + node.size - 1  # walk the children from the last one
        for i in range(len(node.args) - 1, -1, -1):
            child = node.args[i]
            child_pos -= child.size
            if binder is None:
                stack.append(("v", child, child_pos, depth))
            elif i == binder[1]:
                name = node.args[binder[0]].data
                inner = depth + 1 if op in _LOOPS else depth
                stack.append(("r", name, scope.get(name, missing)))
                stack.append(("v", child, child_pos, inner))
                stack.append(("s", name, (pos, inner, False)))
            elif i != binder[0]:
                stack.append(("v", child, child_pos, depth))
    return info


def _value_key(e: Expr, scope: dict[str, _ScopeEntry]) -> tuple[Expr, tuple[int, ...]]:
    """``e`` with the binder of each of its free variables: equal keys are equal values."""
    return (e, tuple(scope[n][0] if n in scope else -1 for n in sorted(e.free)))


def _restore(table: dict[Any, Any], key: object, saved: object, missing: object) -> None:
    if saved is missing:
        table.pop(key, None)
    else:
        table[key] = saved


# -- one simplification pass --------------------------------------------------------------------------
_Step = Generator[tuple[Expr, int], Expr, Expr]
_MISSING: Final = object()


class _Pass:
    """One top-down pass: inlines lets by substitution, deletes dead ones, applies local rules bottom-up."""

    def __init__(self, root: Expr) -> None:
        self.root = root
        self.info = _analyse(root)
        #: original variable name -> its output expression (absent: the name itself)
        self.env: dict[str, Expr] = {}
        #: how many pending values of ``env`` have each name free (binders of these names are renamed)
        self.danger: dict[str, int] = {}
        self.taken: set[str] = names_in(root)

    def run(self) -> Expr:
        result: Expr = trampoline.run_steps(self._start, (self.root, 0))
        return result

    # environment ----------------------------------------------------------------------------------
    def _set(self, name: str, value: Expr | None) -> tuple[str, object]:
        """Map ``name`` to ``value`` (``None``: to itself); returns what restores the old mapping."""
        saved: object = self.env.get(name, _MISSING)
        if isinstance(saved, Expr):
            self._count(saved, -1)
        if value is None:
            self.env.pop(name, None)
        else:
            self.env[name] = value
            self._count(value, 1)
        return name, saved

    def _restore(self, token: tuple[str, object]) -> None:
        name, saved = token
        current = self.env.get(name)
        if current is not None:
            self._count(current, -1)
        if isinstance(saved, Expr):
            self.env[name] = saved
            self._count(saved, 1)
        else:
            self.env.pop(name, None)

    def _count(self, value: Expr, delta: int) -> None:
        danger = self.danger
        for n in value.free:
            danger[n] = danger.get(n, 0) + delta

    def _bind(self, var: Expr) -> tuple[Expr, tuple[str, object]]:
        """Enter the scope of a binder of ``var``: its output variable (renamed if it would capture)."""
        name = var.data
        if self.danger.get(name, 0) > 0:
            new_name = fresh_name([self.taken], base=name.rstrip("0123456789") or "var")
            self.taken.add(new_name)
            new_var = E.var(new_name, var.type)
            return new_var, self._set(name, new_var)
        return var, self._set(name, None)

    # the walk --------------------------------------------------------------------------------------
    def _start(self, item: tuple[Expr, int]) -> Expr | _Step:
        node, pos = item
        op = node.op
        if op is Op.VAR:
            return self.env.get(node.data, node)
        if op is Op.CONST:
            return node
        if op is Op.LET:
            return self._let(node, pos)
        if op in BINDERS:
            return self._binder(node, pos)
        return self._op(node, pos)

    def _op(self, node: Expr, pos: int) -> _Step:
        args: list[Expr] = []
        child_pos = pos + 1
        env = self.env
        for a in node.args:
            if a.op is Op.VAR:
                args.append(env.get(a.data, a))
            elif a.op is Op.CONST:
                args.append(a)
            else:
                args.append((yield a, child_pos))
            child_pos += a.size
        return _local(node.replace_args(tuple(args)))

    def _binder(self, node: Expr, pos: int) -> _Step:
        var_i, scope_i = BINDERS[node.op]
        args = list(node.args)
        child_pos = pos + 1
        for i, a in enumerate(node.args):
            if i == scope_i:
                args[var_i], token = self._bind(node.args[var_i])
                args[i] = yield a, child_pos
                self._restore(token)
            elif i != var_i:
                args[i] = yield a, child_pos
            child_pos += a.size
        return _local(node.replace_args(tuple(args)))

    def _let(self, node: Expr, pos: int) -> _Step:
        var, rhs, body = node.args
        info = self.info[pos]
        body_pos = pos + 2 + rhs.size
        if info.alias is not None:  # the value of an enclosing let: use its variable
            _, outer = info.alias
            token = self._set(var.data, self.env.get(outer, E.var(outer, var.type)))
            result = yield body, body_pos
            self._restore(token)
            return result
        if info.count == 0:  # dead: the value is never computed
            _, token = self._bind(var)
            result = yield body, body_pos
            self._restore(token)
            return result
        new_rhs = yield rhs, pos + 2
        if new_rhs.op in _LEAVES or (info.count == 1 and not info.under_loop):
            token = self._set(var.data, new_rhs)
            result = yield body, body_pos
            self._restore(token)
            return result
        new_var, token = self._bind(var)
        new_body = yield body, body_pos
        self._restore(token)
        return _local(E.let(new_var, new_rhs, new_body))


# -- general common subexpression elimination ----------------------------------------------------------
def _occurrences(root: Expr) -> dict[tuple[Expr, tuple[int, ...]], list[int]]:
    """Positions of every non-trivial subexpression, grouped by value (node and binders of its free names)."""
    groups: dict[tuple[Expr, tuple[int, ...]], list[int]] = {}
    scope: dict[str, _ScopeEntry] = {}
    missing = object()
    stack: list[tuple[Any, ...]] = [("v", root, 0)]
    while stack:
        frame = stack.pop()
        if frame[0] == "s":
            scope[frame[1]] = frame[2]
            continue
        if frame[0] == "r":
            _restore(scope, frame[1], frame[2], missing)
            continue
        _, node, pos = frame
        op = node.op
        if op in _LEAVES:
            continue
        if op is not Op.LET and op is not Op.LAM and node.type.kind is not Kind.LAM:
            groups.setdefault(_value_key(node, scope), []).append(pos)
        binder = BINDERS.get(op)
        child_pos = pos + node.size
        for i in range(len(node.args) - 1, -1, -1):
            child = node.args[i]
            child_pos -= child.size
            if binder is not None and i == binder[1]:
                name = node.args[binder[0]].data
                stack.append(("r", name, scope.get(name, missing)))
                stack.append(("v", child, child_pos))
                stack.append(("s", name, (pos, 0, False)))
            elif binder is None or i != binder[0]:
                stack.append(("v", child, child_pos))
    return groups


def _always_evaluated(lca_pos: int, paths: list[list[tuple[Expr, int, int]]], targets: set[int]) -> bool:
    """Whether evaluating the node at ``lca_pos`` always evaluates one of the ``targets`` below it."""
    nodes: dict[int, Expr] = {}
    towards: dict[int, dict[int, int]] = {}  # position -> child index -> child position on a path
    for path in paths:
        steps = [(n, p, i) for n, p, i in path if p >= lca_pos]
        for k, (n, p, i) in enumerate(steps):
            child = steps[k + 1][1] if k + 1 < len(steps) else None
            nodes[p] = n
            towards.setdefault(p, {})[i] = child if child is not None else -1
    must: dict[int, bool] = {t: True for t in targets}
    for p in sorted(nodes, reverse=True):  # children have larger numbers than their parents
        n = nodes[p]
        kids = towards[p]

        def hit(i: int, kids: dict[int, int] = kids) -> bool:
            c = kids.get(i)
            return c is not None and (c == -1 or must.get(c, False))

        op = n.op
        if op is Op.IF:
            must[p] = hit(0) or (hit(1) and hit(2))
        elif op is Op.AND or op is Op.OR or op is Op.BUILD or op is Op.SUMBUILD:
            must[p] = hit(0)
        elif op is Op.LAM:
            must[p] = False
        else:
            must[p] = any(hit(i) for i in kids)
    return must.get(lca_pos, False)


def _cse_step(root: Expr) -> Expr | None:
    """Bind one repeated subexpression by a let at its occurrences' nearest common ancestor, or None."""
    groups = _occurrences(root)
    candidates = sorted(
        ((key[0], positions) for key, positions in groups.items() if len(positions) > 1),
        key=lambda c: (-c[0].size, c[1][0]),
    )
    taken: set[str] | None = None
    for e, positions in candidates:
        paths = [E.path_to(root, p)[0] for p in positions]
        found = _lowest_common(paths)
        if found is None:
            continue
        lca, lca_pos = found
        if not _always_evaluated(lca_pos, paths, set(positions)):
            continue
        if taken is None:
            taken = names_in(root)
        v = E.var(fresh_name([taken]), e.type)
        replaced = lca
        for p in sorted(positions, reverse=True):  # later positions first: earlier ones do not move
            replaced = E.replace_at(replaced, p - lca_pos, v)
        hoisted = E.let(v, e, replaced)
        if hoisted.cost < lca.cost:
            return E.replace_at(root, lca_pos, hoisted)
    return None


def _lowest_common(paths: list[list[tuple[Expr, int, int]]]) -> tuple[Expr, int] | None:
    """The deepest common ancestor of the ends of ``paths`` (from :func:`knossos.expr.path_to`), with its position.

    The ends are distinct and none contains another, so the paths agree (node and child taken) up to
    some depth and then leave one node through different children.
    """
    first = paths[0]
    depth = 0
    while all(len(p) > depth for p in paths) and all(p[depth][1:] == first[depth][1:] for p in paths):
        depth += 1
    if not all(len(p) > depth for p in paths):
        return None  # one end is an ancestor of another (cannot happen for equal values)
    return first[depth][0], first[depth][1]


# -- the driver --------------------------------------------------------------------------------------
def measure(e: Expr) -> int:
    """``2·ops + lets``, where ops counts the nodes that are not variables, literals or lets.

    Every step of the simplifier strictly decreases it (see the module docstring).
    """
    ops = lets = 0
    for node in E.preorder(e):
        op = node.op
        if op is Op.LET:
            lets += 1
        elif op is not Op.VAR and op is not Op.CONST:
            ops += 1
    return 2 * ops + lets


def simplify(expr: Expr) -> Expr:
    """``expr`` simplified to a fixed point (deterministic; the cost never increases)."""
    current = expr
    phi = measure(current)
    rounds = phi + 2
    for _ in range(rounds):
        new = _Pass(current).run()
        if new is current:
            hoisted = _cse_step(current)
            if hoisted is None:
                return current
            new = hoisted
        new_phi = measure(new)
        if new_phi >= phi:
            raise BaselineError(
                f"baseline simplifier: a round did not decrease the termination measure ({phi} -> {new_phi})"
            )
        current, phi = new, new_phi
    raise BaselineError(f"baseline simplifier: no fixed point after {rounds} rounds")


def simplify_def(d: Def) -> Def:
    """``d`` with its body simplified."""
    return dataclasses.replace(d, body=simplify(d.body))


def simplify_program(p: Program) -> dict[str, Def]:
    """Every target def of ``p`` (all but ``cost$`` declarations), simplified, by name in file order."""
    return {d.name: simplify_def(d) for d in p.targets}
