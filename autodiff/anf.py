"""A-normal form: the shape of a def body that both modes of automatic differentiation work on.

A :class:`Block` is a list of bindings and a result *atom* (a variable or a literal).  A binding's
value is one op over atoms, a loop (``build``/``sumbuild`` over a block) or a branch (``if`` over
two blocks).  Every intermediate value then has a name, so a derivative refers to it in constant
size and the transformations stay linear in the size of the program: shared lets are never copied.

The conversion also
* gives every binder a name of its own in the def (a shadowing ``let`` gets a fresh one), so that
  cotangents can be kept by name;
* keeps whole any subexpression whose value has no Float in it (an index computation, a comparison):
  it has no derivative, and it stays as written;
* inlines functions: ``((lam (x : S) b) a)`` and applications of a let-bound ``lam`` become lets.

It runs on the explicit stack of :mod:`knossos.trampoline`, so deep expressions convert.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Union

from knossos import expr as E
from knossos import trampoline
from knossos.errors import KsError, KsTypeError, Pos
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.types import INTEGER, Kind, Type, vec


def has_float(t: Type) -> bool:
    """Whether values of type ``t`` have a Float in them (else their derivative is always zero)."""
    return Kind.FLOAT in t.leaves


@dataclass
class Loop:
    """``build``/``sumbuild`` ``n`` ``(lam (index : Integer) body)``."""

    op: Op
    n: Expr
    index: Expr
    body: Block

    @property
    def type(self) -> Type:
        assert self.body.result is not None
        t = self.body.result.type
        return vec(t) if self.op is Op.BUILD else t


@dataclass
class Branch:
    """``if cond then other``, the branches evaluated lazily."""

    cond: Expr
    then: Block
    other: Block
    #: A loop-invariant value moved out of its loop under the test that the loop runs
    #: (:mod:`autodiff.hoist`): its variable is read only where ``cond`` holds.
    guard: bool = False

    @property
    def type(self) -> Type:
        assert self.then.result is not None
        return self.then.result.type


AnfValue = Union[Expr, Loop, Branch]


@dataclass
class Bind:
    """``let var = value``; ``source`` is the expression of the def it comes from (for error positions)."""

    var: Expr
    value: AnfValue
    source: Expr | None = None


@dataclass
class Block:
    binds: list[Bind] = field(default_factory=list)
    result: Expr | None = None


def is_atom(e: Expr) -> bool:
    return e.op is Op.VAR or e.op is Op.CONST


class Names:
    """Fresh variable names for one generated def.

    A binder keeps its name from the source where that name is not yet bound in the output; every
    other name is ``base`` or ``base_k`` and avoids every name of the source, so it can capture nothing.
    """

    def __init__(self, reserved: Iterable[str]) -> None:
        self._reserved = set(reserved)
        self._taken: set[str] = set()
        self._counters: dict[str, int] = {}

    def take(self, name: str) -> str:
        """Mark ``name`` as bound in the output (a parameter)."""
        self._taken.add(name)
        self._reserved.add(name)
        return name

    def keep(self, name: str) -> str:
        """``name`` if it is still free in the output, else a fresh variant of it."""
        if name not in self._taken:
            self._taken.add(name)
            return name
        return self.fresh(name)

    def fresh(self, base: str) -> str:
        """``base`` itself if it is new, else the first free ``base_k``."""
        if base not in self._reserved and base not in self._taken:
            self._taken.add(base)
            return base
        k = self._counters.get(base, 0)
        while True:
            k += 1
            name = f"{base}_{k}"
            if name not in self._reserved and name not in self._taken:
                break
        self._counters[base] = k
        self._taken.add(name)
        return name

    def bind(self, block: Block, value: AnfValue, base: str, source: Expr | None = None) -> Expr:
        """Append ``let NAME = value`` to ``block`` (NAME fresh from ``base``); returns the variable."""
        v = E.var(self.fresh(base), value.type)
        block.binds.append(Bind(v, value, source))
        return v


class NotDifferentiable(KsError):
    """A def that has no derivative, with the position of the reason."""


@dataclass(frozen=True)
class Closure:
    """A ``lam`` bound by a let, with the variables it sees, for inlining where it is applied."""

    lam: Expr
    env: dict[str, Expr | Closure]


_MISSING = object()
Env = dict[str, Union[Expr, Closure]]
Item = tuple[Expr, Block, Union[str, None]]


class Converter:
    """Converts one def body to A-normal form (see the module docstring)."""

    def __init__(self, names: Names, where: dict[Expr, Pos], def_name: str, def_pos: Pos | None) -> None:
        self.names = names
        self.where = where
        self.def_name = def_name
        self.def_pos = def_pos
        self.env: Env = {}
        # Value numbering: an op over the same atoms, bound in a block still open (this one or one
        # around it, before), is that binding's variable.  Two reads of one row then share a name, and
        # their cotangents add up as one (Mish's x * tanh(softplus(x)) reads x twice): one loop of its
        # gradient, not two and their sum.
        self._numbered: dict[tuple[Op, tuple[Expr, ...], object], tuple[Expr, int]] = {}
        self._open: set[int] = set()

    def error(self, message: str, node: Expr | None) -> NotDifferentiable:
        pos = self.where.get(node) if node is not None else None
        return NotDifferentiable(f"cannot differentiate '{self.def_name}': {message}", pos or self.def_pos)

    def convert(self, body: Expr, env: Env) -> Block:
        self.env = env
        block = Block()
        self._open.add(id(block))
        block.result = trampoline.run_steps(self._start, (body, block, None))
        self._open.discard(id(block))
        return block

    def _child(self) -> Block:
        """A block of a loop's body or of a branch: open until :meth:`_close`."""
        block = Block()
        self._open.add(id(block))
        return block

    def _close(self, *blocks: Block) -> None:
        for b in blocks:
            self._open.discard(id(b))

    def _numbered_bind(self, block: Block, value: Expr, hint: str | None, source: Expr | None) -> Expr:
        """``value`` (one op over atoms) bound in ``block``, or the variable an earlier binding of the
        same value that is in scope has (ops are pure: the same atoms give the same value or error)."""
        key = (value.op, value.args, value.data)
        try:
            found = self._numbered.get(key)
        except TypeError:  # data that cannot be hashed: not numbered
            return self._bind(block, value, hint, source)
        if found is not None and found[1] in self._open:
            return found[0]
        v = self._bind(block, value, hint, source)
        self._numbered[key] = (v, id(block))
        return v

    # -- the driver's steps -----------------------------------------------------------------
    def _start(self, item: Item) -> object:
        e, block, hint = item
        op = e.op
        if op is Op.CONST:
            return e
        if op is Op.VAR:
            return self._atom(e)
        if self._opaque(e):
            value = self._rename(e)
            return value if is_atom(value) else self._numbered_bind(block, value, hint, e)
        if op is Op.LET:
            return self._let(e, block, hint)
        if op is Op.BUILD or op is Op.SUMBUILD:
            return self._loop(e, block, hint)
        if op is Op.IF:
            return self._if(e, block, hint)
        if op is Op.AND or op is Op.OR:
            return self._logic(e, block, hint)
        if op is Op.APPLY:
            return self._apply(e, block, hint)
        if op is Op.LAM:
            raise self.error("a function value (lam) is used other than by applying it", e)
        return self._primitive(e, block, hint)

    def _bind(self, block: Block, value: AnfValue, hint: str | None, source: Expr | None) -> Expr:
        v = E.var(self.names.keep(hint) if hint else self.names.fresh("t"), value.type)
        block.binds.append(Bind(v, value, source))
        return v

    def _atom(self, v: Expr) -> Expr:
        found = self.env.get(v.data)
        if isinstance(found, Closure):
            raise self.error(f"the function '{v.data}' is used other than by applying it", v)
        assert found is not None, v.data
        return found

    def _opaque(self, e: Expr) -> bool:
        """A value without Floats, which does not mention a let-bound function: kept as written."""
        t = e.type
        if has_float(t) or Kind.LAM in t.leaves or e.op is Op.APPLY:
            return False
        return not any(isinstance(self.env.get(n), Closure) for n in e.free)

    def _rename(self, e: Expr) -> Expr:
        mapping = {}
        for n in e.free:
            to = self.env[n]
            assert isinstance(to, Expr)
            if not (to.op is Op.VAR and to.data == n):
                mapping[n] = to
        return rename(e, mapping) if mapping else e

    def _push(self, name: str, value: Expr | Closure) -> object:
        old = self.env.get(name, _MISSING)
        self.env[name] = value
        return old

    def _pop(self, name: str, old: object) -> None:
        if old is _MISSING:
            del self.env[name]
        else:
            self.env[name] = old  # type: ignore[assignment]

    def _let(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        saved: list[tuple[str, object]] = []
        while e.op is Op.LET:  # a chain of lets in one step: deep chains stay flat
            var, rhs, body = e.args
            value: Expr | Closure
            if rhs.op is Op.LAM:
                value = Closure(rhs, dict(self.env))
            else:
                value = yield (rhs, block, var.data)
            saved.append((var.data, self._push(var.data, value)))
            e = body
        result = yield (e, block, hint)
        for name, old in reversed(saved):
            self._pop(name, old)
        return result

    def _loop(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        n_expr, index, body = e.args
        n = yield (n_expr, block, None)
        inner = self._child()
        i = E.var(self.names.keep(index.data), INTEGER)
        old = self._push(index.data, i)
        inner.result = yield (body, inner, None)
        self._pop(index.data, old)
        self._close(inner)
        return self._bind(block, Loop(e.op, n, i, inner), hint, e)

    def _if(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        cond = yield (e.args[0], block, None)
        then = self._child()
        then.result = yield (e.args[1], then, None)
        self._close(then)
        other = self._child()
        other.result = yield (e.args[2], other, None)
        self._close(other)
        return self._bind(block, Branch(cond, then, other), hint, e)

    def _logic(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        """``and``/``or`` evaluate their right operand lazily: as an ``if``."""
        left = yield (e.args[0], block, None)
        lazy = self._child()
        lazy.result = yield (e.args[1], lazy, None)
        self._close(lazy)
        fixed = Block([], E.const(e.op is Op.OR))
        then, other = (lazy, fixed) if e.op is Op.AND else (fixed, lazy)
        return self._bind(block, Branch(left, then, other), hint, e)

    def _apply(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        function, arg = e.args
        a = yield (arg, block, None)
        if function.op is Op.LAM:
            lam, env = function, dict(self.env)
        elif function.op is Op.VAR and isinstance(self.env.get(function.data), Closure):
            closure = self.env[function.data]
            assert isinstance(closure, Closure)
            lam, env = closure.lam, dict(closure.env)
        else:
            raise self.error("only a lam, or a variable bound to one by a let, can be applied", e)
        param, body = lam.args
        outer = self.env
        env[param.data] = a
        self.env = env
        result = yield (body, block, hint)
        self.env = outer
        return result

    def _primitive(self, e: Expr, block: Block, hint: str | None) -> trampoline.Step:
        args = []
        for a in e.args:
            args.append((yield (a, block, None)))
        try:
            value = E.make(e.op, tuple(args), e.data)
        except KsTypeError as err:  # pragma: no cover  (the types are those of the source)
            raise self.error(err.message, e) from None
        return self._numbered_bind(block, value, hint, e)


def rename(root: Expr, mapping: dict[str, Expr]) -> Expr:
    """``root`` with its free variables replaced by the atoms of ``mapping`` (iterative).

    The atoms' names are fresh (never bound in ``root``), so nothing can be captured; a binder of a
    mapped name hides it in its scope.
    """
    work: list[tuple[Expr, dict[str, Expr], bool]] = [(root, mapping, False)]
    values: list[Expr] = []
    while work:
        node, m, ready = work.pop()
        if ready:
            count = len(node.args)
            args = tuple(values[len(values) - count :])
            del values[len(values) - count :]
            values.append(node.replace_args(args))
            continue
        if not (node.free & m.keys()):
            values.append(node)
            continue
        if node.op is Op.VAR:
            values.append(m[node.data])
            continue
        work.append((node, m, True))
        binder = BINDERS.get(node.op)
        for k in range(len(node.args) - 1, -1, -1):
            child_map = m
            if binder is not None and k == binder[0]:
                child_map = {}
            elif binder is not None and k == binder[1]:
                bound = node.args[binder[0]].data
                if bound in m:
                    child_map = {n: v for n, v in m.items() if n != bound}
            work.append((node.args[k], child_map, False))
    return values[0]


def to_expr(block: Block) -> Expr:
    """The expression of a block; bindings that nothing uses are left out."""
    assert block.result is not None
    body = block.result
    for b in reversed(block.binds):
        if b.var.data in body.free:
            body = E.let(b.var, value_expr(b.value), body)
    return body


def value_expr(value: AnfValue) -> Expr:
    if isinstance(value, Loop):
        return E.make(value.op, (value.n, value.index, to_expr(value.body)))
    if isinstance(value, Branch):
        return E.op(Op.IF, value.cond, to_expr(value.then), to_expr(value.other))
    return value
