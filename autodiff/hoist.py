"""Loop-invariant bindings moved out of their loops, before the reverse pass is made.

``(build n (lam i (sumbuild m (lam j (mul (index j (index i W)) (index j x))))))`` reads the row
``(index i W)`` in every iteration of the ``j`` loop.  Left there, the reverse pass of the ``j`` loop
gives ``W`` a part in each of its iterations; moved out to the ``i`` loop's body, the ``j`` loop reads
the row at its own index, and its cotangent is a gather (:mod:`autodiff.reverse`) whose rows the ``i``
loop gathers in turn.  The emitted C++ computes loop invariants once anyway; what this changes is the
shape of the derivative.

Bindings that cannot fail move as they are: Float arithmetic and comparisons, ``size``, ``get``,
``tuple``, ``to_float``, and ``(index i v)`` where ``i`` is the index of an enclosing loop over
``(size v)``.  Invariant calls, reads, loops and branches with Floats in their value move under
``(if (gt n 0) value placeholder)``, since a loop of no iterations evaluates nothing: then
``(index i (scal alpha x))`` in a loop over ``i`` calls ``scal`` once outside, and its reverse pass
calls ``rev$scal`` once with the gathered cotangent instead of once per element with a one-hot.
A read that the enclosing blocks made already (the row whose size is the loop's, ``(size (index c
(index o w)))``) cannot fail and moves as it is: under a guard its reverse pass would be a one-hot of
the whole matrix per iteration, as a plain read it is a gather of rows.
Out of a loop whose size is a positive literal (the front end's loops), every invariant binding moves
as it is: the loop runs, so it would have been evaluated there anyway.

A call of a def in a loop ``k`` nested in a loop ``i`` whose arguments depend on ``k`` but not on
``i`` (gmm's ``makeQ`` of each component, in the loop over the points) is computed once per ``k``
in a tape ``build`` before the loop over ``i`` (guarded so), and read from it: the reverse pass calls
its derivative once per ``k`` with the cotangent summed over ``i``, not once per ``(i, k)``, and
does not compute the def again in each cotangent's loop.

Out of a branch move the bindings that cannot fail and cost a constant: reads ``(index i v)`` where
``i`` is an enclosing loop's index known to cover ``v`` (:class:`autodiff.extents.Extents`), and
Integer arithmetic on literals and the indices of loops of literal sizes (which cannot overflow).  A
concatenation ``(if (lt i c) (index i (index r a)) (index (sub i c) (index r b)))`` then reads its
pieces' rows and computes ``(sub i c)`` outside the branch, and its reverse pass gives ``a`` and
``b`` element records that leave the branch (zero Floats in the other arm), not a full-size zero of
``a`` in one arm and of ``b`` in the other per element.
"""

from __future__ import annotations

from autodiff.anf import Bind, Block, Branch, Loop, Names, has_float, rename, value_expr
from autodiff.extents import Extents
from knossos import expr as E
from knossos.expr import Expr, distinct_nodes
from knossos.op_table import FLOAT_OPS, ROW
from knossos.ops import BINDERS, Op
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type, vec

#: Invariant values that may fail (or that a loop of no iterations must not evaluate), moved out
#: under ``(if (gt n 0) ...)``: calls and reads of vectors (with loops and branches).
_GUARDED = frozenset({Op.CALL, Op.INDEX})

#: Ops that never fail when their operands are scalars (Floats: IEEE; comparisons: any scalar).
_SCALAR = FLOAT_OPS
_COMPARE = frozenset(ROW) - FLOAT_OPS
_ANY = frozenset({Op.CONST, Op.VAR, Op.SIZE, Op.GET, Op.TUPLE})
#: Values of at most this many nodes have their reads recorded (a loop's size, a one-op binding).
_RECORDED_MAX = 64


class Hoister:
    def __init__(self, names: Names) -> None:
        self.names = names
        #: The one-op values of the bindings seen, by variable name (names are unique in a def).
        self.values: dict[str, Expr] = {}
        #: Loop indices known to be in range of a vector: index name -> the vector variable.
        self.ranges: dict[str, Expr] = {}
        #: The sizes of the enclosing loops, by their index's name.
        self.loops: dict[str, Expr] = {}
        self.extents = Extents()
        #: The variables of the bindings :meth:`_guarded` made (read only where their loop ran).
        self.guarded: set[str] = set()
        #: The reads evaluated so far in each enclosing block, innermost last (:meth:`_evaluated`).
        self.reads: list[set[Expr]] = [set()]
        #: Each bound variable's value with the variables that stand for reads replaced by the reads.
        self.resolved: dict[str, Expr] = {}

    def block(self, b: Block) -> None:
        """Move the invariant bindings of every loop in ``b`` (nested ones first) out of it, in place."""
        binds: list[Bind] = []
        self.reads.append(set())
        for bind in b.binds:
            value = bind.value
            if isinstance(value, Loop):
                binds += self._loop(value)
            elif isinstance(value, Branch):
                self.block(value.then)
                self.block(value.other)
                binds += self._out_of_arm(value.then) + self._out_of_arm(value.other)
            else:
                self.values[bind.var.data] = value
                self._record(bind.var, value)
            binds.append(bind)
        self.reads.pop()
        b.binds = binds

    def _resolve(self, e: Expr) -> Expr:
        """``e`` with each variable bound to a read (``(index i v)``) replaced by that read, resolved."""
        if e.op is Op.VAR:
            return self.resolved.get(e.data, e)
        if not e.args or e.op in BINDERS:
            return e
        return e.replace_args(tuple(self._resolve(a) for a in e.args))

    def _record(self, var: Expr, value: Expr) -> None:
        """Note the reads that evaluating ``value`` (bound to ``var`` in the current block) makes."""
        if value.size > _RECORDED_MAX or any(x.op in BINDERS for x in distinct_nodes(value)):
            return
        full = self._resolve(value)
        if full.op is Op.INDEX:
            self.resolved[var.data] = full
        self.reads[-1].update(x for x in distinct_nodes(full) if x.op is Op.INDEX)

    def _evaluated(self, value: Expr) -> bool:
        """Whether ``value`` is a read that the enclosing blocks made already, before the loop being
        hoisted from: the row a loop's size was taken of, ``(size (index c (index o w)))``, read again
        inside the loop as ``(index c t)``, ``t`` = ``(index o w)``.  It did not fail there, so out of
        the loop it needs no guard (and its reverse pass is a gather, not a one-hot under a branch)."""
        if value.op is not Op.INDEX:
            return False
        full = self._resolve(value)
        return any(full in reads for reads in self.reads)

    def _loop(self, loop: Loop) -> list[Bind]:
        """The bindings moved out of ``loop``'s body (which keeps the others)."""
        n = loop.n
        size = self.values.get(n.data) if n.op is Op.VAR else None
        if size is not None and size.op is Op.SIZE and size.args[0].op is Op.VAR:
            self.ranges[loop.index.data] = size.args[0]
        self.loops[loop.index.data] = n
        self.block(loop.body)
        local = {loop.index.data}
        kept: list[Bind] = []
        moved: list[Bind] = []
        for bind in loop.body.binds:
            value = bind.value
            free = value.free if isinstance(value, Expr) else value_expr(value).free
            lifted = self._lifted_guard(bind, loop, kept) if free & local else None
            if lifted is not None:
                moved += lifted
            elif free & local:
                kept.append(bind)
                local.add(bind.var.data)
            elif _runs(n) or (isinstance(value, Expr) and (self._safe(value) or self._evaluated(value))):
                moved.append(bind)
            elif has_float(bind.var.type) and (not isinstance(value, Expr) or value.op in _GUARDED):
                moved.append(self._guarded(bind, loop.n))
            else:
                kept.append(bind)
                local.add(bind.var.data)
        loop.body.binds = kept
        # after the invariants moved (a loop's size): a tape's def runs for each k only where loop runs
        return moved + [t if _runs(n) else self._guarded(t, n) for t in self._tapes(loop)]

    def _tapes(self, loop: Loop) -> list[Bind]:
        """Calls of defs in the body of a loop ``k`` directly in ``loop``'s body (so run in each of its
        iterations) whose arguments depend on ``k`` but not on ``loop``: each computed once per ``k``,
        in a tape ``build`` before ``loop``, and read from it (gmm's ``makeQ`` of component ``k``, in
        a loop over the points ``i``).  The reverse pass then calls the derivative once per ``k``
        with the cotangent summed over ``loop``, where it called it (and the def, in each
        cotangent's loop) once per iteration of both."""
        outer = {loop.index.data} | {b.var.data for b in loop.body.binds}
        tapes: list[Bind] = []
        for bind in loop.body.binds:
            inner = bind.value
            if not isinstance(inner, Loop) or inner.n.free & outer:
                continue
            binds = inner.body.binds
            bound = {b.var.data for b in binds}
            invariant: set[str] = set()  # the variables of inner's body that depend on no name of loop's
            for b in binds:
                free = b.value.free if isinstance(b.value, Expr) else value_expr(b.value).free
                if not free & outer and not free & (bound - invariant):
                    invariant.add(b.var.data)
            for k, b in enumerate(binds):
                value = b.value
                if b.var.data not in invariant or not isinstance(value, Expr) or value.op is not Op.CALL:
                    continue
                if not has_float(b.var.type) or not value.free & ({inner.index.data} | invariant):
                    continue  # (a call invariant in k too: moved out of inner already, or guarded)
                chain = [b]  # b and the bindings it needs, last first: Exprs only, renamed below
                needed = set(value.free)
                for d in reversed(binds[:k]):
                    if d.var.data in needed:
                        chain.append(d)
                        needed |= value_expr(d.value).free
                if not all(isinstance(d.value, Expr) for d in chain):
                    continue
                mapping = {d.var.data: E.var(self.names.fresh(d.var.data), d.var.type) for d in chain}
                mapping[inner.index.data] = E.var(self.names.fresh(inner.index.data), INTEGER)
                body = Block([Bind(mapping[d.var.data], rename(value_expr(d.value), mapping)) for d in reversed(chain)])
                body.result = mapping[b.var.data]
                tape = E.var(self.names.fresh(f"{b.var.data}$tape"), vec(b.var.type))
                tapes.append(Bind(tape, Loop(Op.BUILD, inner.n, mapping[inner.index.data], body), b.source))
                binds[k] = Bind(b.var, E.op(Op.INDEX, inner.index, tape), b.source)
        return tapes

    def _lifted_guard(self, bind: Bind, loop: Loop, kept: list[Bind]) -> list[Bind] | None:
        """An invariant value guarded by a size computed in the loop, ``x = (if (gt m 0) V P)`` (moved
        out of an inner loop of ``m`` iterations by :meth:`_guarded`), as ``x`` out of ``loop`` too,
        evaluated if some iteration's ``m`` is positive: ``(if (gt (sumbuild n (lam i (if (gt m 0) 1
        0))) 0) V P)``, where ``m``'s bindings in ``kept`` cannot fail and have no loop (a row's size).
        Where ``m`` is 0 nothing reads ``x`` (only the inner loop and what moved out with it under the
        same guard did), so the one value serves every iteration: a call of a def in a loop nest over
        a matrix's rows and columns is made once, and its derivative called once, not once per row."""
        value = bind.value
        if bind.var.data not in self.guarded:  # (a branch of the def's may be read where m is 0)
            return None
        assert isinstance(value, Branch) and len(value.then.binds) == 1
        cond, inner = value.cond, value.then.binds[0]
        if cond.args[0].op is not Op.VAR:
            return None
        local = {loop.index.data} | {b.var.data for b in kept}
        inner_free = inner.value.free if isinstance(inner.value, Expr) else value_expr(inner.value).free
        if inner_free & local:
            return None
        needed = {cond.args[0].data}
        chain: list[tuple[Expr, Expr]] = []  # (variable, value), last first
        for b in reversed(kept):
            if b.var.data not in needed:
                continue
            if not isinstance(b.value, Expr) or not self._safe(b.value):
                return None
            chain.append((b.var, b.value))
            needed |= set(b.value.free)
        mapping = {v.data: E.var(self.names.fresh(v.data), v.type) for v, _ in chain}
        mapping[loop.index.data] = E.var(self.names.fresh(loop.index.data), INTEGER)
        count = Block([Bind(mapping[v.data], rename(e, mapping)) for v, e in reversed(chain)])
        one = Block([], E.const(1))
        zero = Block([], E.const(0))
        count.result = self.names.bind(count, Branch(rename(cond, mapping), one, zero), "t")
        runs = E.var(self.names.fresh("t"), INTEGER)
        total = Bind(runs, Loop(Op.SUMBUILD, loop.n, mapping[loop.index.data], count))
        guard = Branch(E.op(Op.GT, runs, E.const(0)), value.then, value.other, guard=True)
        return [total, Bind(bind.var, guard, bind.source)]

    def _out_of_arm(self, arm: Block) -> list[Bind]:
        """The bindings moved out of a branch's ``arm`` (which keeps the others): see the docstring."""
        local: set[str] = set()
        kept: list[Bind] = []
        moved: list[Bind] = []
        for bind in arm.binds:
            value = bind.value
            if isinstance(value, Expr) and not (value.free & local) and self._constant_cost(value):
                moved.append(bind)
                self.values[bind.var.data] = value
            else:
                kept.append(bind)
                local.add(bind.var.data)
        arm.binds = kept
        return moved

    def _constant_cost(self, e: Expr) -> bool:
        """Whether ``e`` (one op on atoms) cannot fail and costs a constant: a read at an enclosing
        loop's index covering the vector, or Integer arithmetic on literals and indices of loops of
        literal sizes."""
        if e.op is Op.INDEX:
            k, v = e.args
            n = self.loops.get(k.data) if k.op is Op.VAR else None
            return n is not None and v.op is Op.VAR and self.extents.covers(n, v)
        if e.op in (Op.ADD, Op.SUB, Op.MUL) and e.type is INTEGER:
            return all(a.op is Op.CONST or (a.op is Op.VAR and _runs(self.loops.get(a.data, a))) for a in e.args)
        return False

    def _guarded(self, bind: Bind, n: Expr) -> Bind:
        """``bind`` out of a loop of ``n`` iterations, evaluated only if the loop runs: ``(if (gt n 0)
        value placeholder)``, the placeholder a value of its type that nothing reads."""
        inner = E.var(self.names.fresh(bind.var.data), bind.var.type)
        then = Block([Bind(inner, bind.value, bind.source)], inner)
        other = Block([], self._placeholder(bind.var.type))
        self.guarded.add(bind.var.data)
        return Bind(bind.var, Branch(E.op(Op.GT, n, E.const(0)), then, other, guard=True), bind.source)

    def _placeholder(self, t: Type) -> Expr:
        if t.kind is Kind.VEC:
            return E.build(E.const(0), E.var(self.names.fresh("i"), INTEGER), self._placeholder(t.elem))
        if t.kind is Kind.TUPLE:
            return E.tuple_(*(self._placeholder(c) for c in t.children))
        if t is INTEGER:
            return E.const(0)
        if t is BOOL:
            return E.const(False)
        return E.const(0.0)

    def _safe(self, e: Expr) -> bool:
        """Whether evaluating ``e`` cannot fail (see the module docstring)."""
        stack = [e]
        while stack:
            node = stack.pop()
            op = node.op
            if op in _ANY:
                pass
            elif op in _SCALAR or op in _COMPARE:
                if not all(a.type.is_scalar for a in node.args):
                    return False
                if op in _SCALAR and node.type is not FLOAT:
                    return False  # Integer arithmetic can overflow
            elif op is Op.INDEX:
                k, v = node.args
                known = self.ranges.get(k.data) if k.op is Op.VAR else None
                if known is None or v.op is not Op.VAR or known.data != v.data:
                    return False
            else:
                return False
            stack.extend(node.args)
        return True


def _runs(n: Expr) -> bool:
    """Whether a loop of ``n`` iterations surely runs: then its invariants are evaluated anyway, and any
    moves as it is (Integer index arithmetic too, ``(add i 16)``, which a read of a row needs to move)."""
    return n.op is Op.CONST and n.type is INTEGER and n.data > 0


def hoist(b: Block, names: Names) -> Block:
    """``b`` with its loops' invariant bindings moved out (in place; returned for convenience)."""
    hoister = Hoister(names)
    hoister.extents.record(b)
    hoister.block(b)
    return b
