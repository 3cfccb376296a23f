"""An e-graph of Knossos expressions: union-find, hash-consing, congruence closure (egg's design).

An *e-node* is ``(op, data, children)``: an op, its payload and the ids of its children's
e-classes.  A leaf's payload is the leaf itself (an interned constant or variable), so equal
leaves are one e-node.  Every e-class knows its type (rules keep types, so all its members share
one), one member as an expression (``term``, from which new e-nodes get their type) and, where one
of its members is a literal, that literal: the constant analysis that constant folding runs on.

Unions are cheap and leave the hash-cons stale; :meth:`EGraph.rebuild` restores the invariants
(canonical e-nodes, congruent e-nodes in one e-class, constants folded upwards), as egg does.
Nothing here recurses on the depth of an expression.  Adding an expression and rebuilding look at
an optional ``stop`` (the search's time and memory limits) every :data:`_CHECK_EVERY` steps and raise
:class:`search.limits.LimitReached` once it says a limit is reached (the e-graph is then left as it
is, not rebuilt: its caller gives it up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from knossos import expr as E
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.op_table import NAMES
from knossos.ops import Op
from knossos.types import Type
from search.limits import Stop, check_stop

ENode = tuple[Op, Any, tuple[int, ...]]
#: Look at ``stop`` after this many nodes added or e-classes repaired.
_CHECK_EVERY = 1024


def node_term(node: ENode, kids: tuple[Expr, ...]) -> Expr:
    """The expression of ``node`` with ``kids`` for its children: a leaf's payload is its expression
    (a variable or constant); any other node is built, one without children too (``(tuple)``)."""
    op, data, _ = node
    return data if op is Op.VAR or op is Op.CONST else E.make(op, kids, data)  # type: ignore[no-any-return]


#: Computes the literal an e-node over literal children folds to (None: it does not fold).
Fold = Callable[[Expr], Expr | None]

#: Binders the e-graph cannot hold (a let is inlined as its expression is added).
UNSUPPORTED = frozenset({Op.LAM, Op.BUILD, Op.SUMBUILD})


@dataclass
class EClass:
    nodes: list[ENode]
    #: (e-node, its e-class) of every e-node that has this e-class as a child (maybe stale).
    parents: list[tuple[ENode, int]]
    type: Type
    #: A member as an expression.
    term: Expr
    #: A literal member, if any.
    const: Expr | None = None
    #: The members by op, as of the last rebuild (what matching reads).
    by_op: dict[Op, list[ENode]] = field(default_factory=dict)


@dataclass
class EGraph:
    #: Folds for e-nodes whose children are all literals, by op.
    folds: dict[Op, list[Fold]] = field(default_factory=dict)
    parent: list[int] = field(default_factory=list)
    classes: dict[int, EClass] = field(default_factory=dict)
    memo: dict[ENode, int] = field(default_factory=dict)
    #: E-classes merged since the last rebuild.
    pending: list[int] = field(default_factory=list)
    #: Unions found by folding, done at the next rebuild.
    pending_unions: list[tuple[int, int]] = field(default_factory=list)
    #: Unions that changed something since this was last reset.
    merges: int = 0
    #: What each op over literal children folded to (None: no fold applies), by (op, data, literals).
    folded: dict[tuple[Any, ...], Expr | None] = field(default_factory=dict)

    # -- union-find -----------------------------------------------------------------------------
    def find(self, i: int) -> int:
        parent = self.parent
        root = parent[i]
        if root == i:  # most ids are canonical: answer those without a loop
            return i
        while parent[root] != root:
            root = parent[root]
        while parent[i] != root:  # path compression
            parent[i], i = root, parent[i]
        return root

    def canonical(self, node: ENode) -> ENode:
        op, data, children = node
        if not children:
            return node
        find = self.find
        if len(children) == 2:  # most e-nodes: no generator
            a, b = children
            return (op, data, (find(a), find(b)))
        return (op, data, tuple([find(c) for c in children]))

    @property
    def size(self) -> int:
        """Number of e-nodes."""
        return len(self.memo)

    # -- adding ---------------------------------------------------------------------------------
    def add(self, node: ENode) -> int:
        """The e-class of ``node`` (its children canonical or not), made if it is new."""
        node = self.canonical(node)
        found = self.memo.get(node)
        if found is not None:
            return self.find(found)
        op, _, children = node
        term = node_term(node, tuple(self.classes[c].term for c in children))
        i = len(self.parent)
        self.parent.append(i)
        self.classes[i] = EClass([node], [], term.type, term, term if op is Op.CONST else None)
        self.memo[node] = i
        for c in set(children):
            self.classes[c].parents.append((node, i))
        self._fold(node, i)
        return i

    def add_leaf(self, leaf: Expr) -> int:
        return self.add((leaf.op, leaf, ()))

    def add_expr(self, root: Expr, stop: Stop | None = None) -> int:
        """The e-class of ``root``, its lets inlined (a let-bound variable is its value's e-class).

        Raises a one-line KsUsageError for a binder the e-graph cannot hold (lam, build, sumbuild).
        """
        # frames: (expression, let-bound names -> e-class, ids of the children done so far)
        done: list[int] = []
        stack: list[tuple[Expr, dict[str, int], list[int] | None]] = [(root, {}, None)]
        steps = 0
        while stack:
            steps += 1
            if steps % _CHECK_EVERY == 0:
                check_stop(stop)
            e, env, kids = stack.pop()
            if e.op in UNSUPPORTED:
                raise KsUsageError(
                    f"the e-graph search cannot hold a {NAMES[e.op]} (bound variables other than a let's); "
                    "use another search"
                )
            if e.op is Op.VAR:
                done.append(env[e.data] if e.data in env else self.add_leaf(e))
            elif e.op is Op.CONST:
                done.append(self.add_leaf(e))
            elif e.op is Op.LET:  # the value in env, then the body in env + the bound name
                if kids is None:
                    stack.append((e, env, []))
                    stack.append((e.args[1], env, None))
                else:
                    value = done.pop()
                    stack.append((e.args[2], {**env, e.args[0].data: value}, None))
            elif kids is None:
                stack.append((e, env, []))
                stack.extend((a, env, None) for a in reversed(e.args))
            else:
                n = len(e.args)
                children = tuple(done[len(done) - n :])
                del done[len(done) - n :]
                done.append(self.add((e.op, e.data, children)))
        (top,) = done
        return top

    def _fold(self, node: ENode, i: int) -> None:
        op, data, children = node
        folds = self.folds.get(op)
        if not folds or not children:
            return
        classes, find = self.classes, self.find
        consts: list[Expr] = []
        for c in children:
            const = classes[find(c)].const
            if const is None:  # most e-nodes: a child with no literal
                return
            consts.append(const)
        key = (op, data, *consts)  # literals are interned: the same key is the same fold
        if key in self.folded:
            value = self.folded[key]
        else:
            literal_node = E.make(op, tuple(consts), data)
            value = next((v for fold in folds if (v := fold(literal_node)) is not None), None)
            self.folded[key] = value
        if value is not None:
            self.pending_unions.append((i, self.add_leaf(value)))

    # -- merging --------------------------------------------------------------------------------
    def union(self, a: int, b: int) -> bool:
        """Merge the e-classes of ``a`` and ``b``; False if they were one already."""
        a, b = self.find(a), self.find(b)
        if a == b:
            return False
        ca, cb = self.classes[a], self.classes[b]
        if ca.type is not cb.type:
            raise AssertionError(f"a rewrite changed a type: {ca.term} ({ca.type}) = {cb.term} ({cb.type})")
        if len(ca.parents) < len(cb.parents):
            a, b, ca, cb = b, a, cb, ca
        self.parent[b] = a
        ca.nodes.extend(cb.nodes)
        ca.parents.extend(cb.parents)
        if (ca.const is None) != (cb.const is None):  # one side is newly constant: its parents may fold
            const = ca.const if ca.const is not None else cb.const
            assert const is not None
            ca.const = ca.term = const
            for node, p in ca.parents:
                self._fold(node, p)
        del self.classes[b]
        self.pending.append(a)
        self.merges += 1
        return True

    def rebuild(self, stop: Stop | None = None) -> None:
        """Restore congruence: canonical e-nodes, congruent e-nodes merged, folds done."""
        steps = 0
        while self.pending or self.pending_unions:
            for a, b in self.pending_unions:
                self.union(a, b)
            self.pending_unions.clear()
            todo = {self.find(i) for i in self.pending}
            self.pending.clear()
            for i in todo:
                steps += 1
                if steps % _CHECK_EVERY == 0:
                    check_stop(stop)
                self._repair(self.find(i))
        for c in self.classes.values():
            steps += 1
            if steps % _CHECK_EVERY == 0:
                check_stop(stop)
            c.nodes = list(dict.fromkeys(self.canonical(n) for n in c.nodes))
            c.by_op = {}
            for n in c.nodes:
                c.by_op.setdefault(n[0], []).append(n)

    def _repair(self, i: int) -> None:
        eclass = self.classes[i]
        parents, eclass.parents = eclass.parents, []
        for node, _ in parents:
            self.memo.pop(node, None)
        unique: dict[ENode, int] = {}
        for node, p in parents:
            node = self.canonical(node)
            other = unique.get(node, self.memo.get(node))
            if other is not None:
                self.union(other, p)
            unique[node] = self.memo[node] = self.find(p)
        self.classes[self.find(i)].parents.extend(unique.items())
