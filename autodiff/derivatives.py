"""``fwd$f`` and ``rev$f`` for the defs of a program: the conventions, and the defs they call.

For a def ``f`` with parameters ``x1 ... xn`` and result type ``R`` (the conventions of ksc and of
the dataset's programs):

* ``fwd$f`` takes ``x1 ... xn`` and then a tangent ``d$xi`` of each, and returns the tangent of the
  result (a value of ``tangent_type(R)``);
* ``rev$f`` takes ``x1 ... xn`` and then ``d$r``, a cotangent of the result, and returns the
  cotangent of the one parameter, or a tuple of the parameters' cotangents when there are several.

An Integer or a Bool has the empty tuple ``(Tuple)`` for a tangent.  A def that calls a def ``g``
gets ``fwd$g``/``rev$g`` made too, before it; a call of an edef ``g`` needs a ``fwd$g``/``rev$g``
of the program with the conventional signature, unless ``g`` is a function whose derivative is
known (:mod:`.primitives`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable

from autodiff.anf import Block, Converter, Env, Names, NotDifferentiable, has_float, to_expr
from autodiff.forward import Forward
from autodiff.hoist import hoist
from autodiff.reverse import CallDerivative, Reverse
from autodiff.tangent import Shapes, tangent_type
from knossos import expr as E
from knossos.callee import Callee, CalleeKind
from knossos.errors import KsError, KsTypeError
from knossos.expr import Expr, names_in
from knossos.ops import Op
from knossos.program import Def, Param, Program, def_callee
from knossos.types import INTEGER, Kind, Type, tuple_of


class Mode(enum.Enum):
    FWD = "fwd"
    REV = "rev"

    def name_of(self, name: str) -> str:
        return f"{self.value}${name}"


def signature(mode: Mode, params: tuple[Type, ...], ret: Type) -> tuple[tuple[Type, ...], Type]:
    """The parameter and result types of ``mode``'s derivative of a function of this type."""
    if mode is Mode.FWD:
        return (*params, *(tangent_type(t) for t in params)), tangent_type(ret)
    cotangents = [tangent_type(t) for t in params]
    return (*params, tangent_type(ret)), (cotangents[0] if len(cotangents) == 1 else tuple_of(*cotangents))


class Differentiator:
    """Makes derivatives of the defs of ``program``, each once, with those they call.

    With ``reuse`` (the default), a ``fwd$f``/``rev$f`` that the program already has is used as the
    derivative of the def ``f`` when its signature is the conventional one (one with another
    signature is an error): :attr:`new` then holds only what the program lacks, and may be added to
    it.  Without, every derivative of a def is made anew (for checking them against the program's).
    """

    def __init__(self, program: Program, reuse: bool = True) -> None:
        self.program = program
        self.reuse = reuse
        #: The derivatives made, callees before callers.
        self.new: list[Def] = []
        #: The program's own derivatives of defs that were used.
        self.reused: list[str] = []
        self._done: dict[tuple[Mode, str], Callee] = {}

    def derivative(self, mode: Mode, name: str) -> Callee:
        """The callee of ``mode``'s derivative of the def ``name``, made if need be."""
        key = (mode, name)
        found = self._done.get(key)
        if found is not None:
            return found
        d = self.program.defs[name]
        own = self._own(mode, name, name) if self.reuse else None
        if own is not None:
            self.reused.append(own.name)
            callee = own
        else:
            made = self._make(mode, d)
            callee = def_callee(made)
            self.new.append(made)
        self._done[key] = callee
        return callee

    def _own(self, mode: Mode, name: str, who: str) -> Callee | None:
        """The program's derivative of ``name``, if it has one (of the conventional signature); ``who``
        is the def being differentiated, for errors."""
        target = self.program.callees[name]
        own = self.program.callees.get(mode.name_of(name))
        if own is None:
            return None
        params, ret = signature(mode, target.param_types, target.ret_type)
        if own.param_types != params or own.ret_type is not ret:
            item = self.program.defs.get(own.name) or self.program.edefs.get(own.name)
            where = item.pos if item is not None else None
            wanted = " ".join(str(t) for t in params)
            raise NotDifferentiable(
                f"cannot differentiate '{who}': the program's '{own.name}' is not the {mode.value} mode of '{name}' "
                f"(it should take {wanted} and return {ret})",
                where,
            )
        return own

    def _call_derivative(self, mode: Mode, caller: Def) -> CallDerivative:
        def find(call: Expr, source: Expr | None) -> Callee:
            callee: Callee = call.data
            if callee.kind is CalleeKind.DEF:
                return self.derivative(mode, callee.name)
            own = self._own(mode, callee.name, caller.name) if callee.kind is CalleeKind.EDEF else None
            if own is None:
                pos = self.program.positions.get(source) if source is not None else None
                raise NotDifferentiable(
                    f"cannot differentiate '{caller.name}': {callee.kind.value} '{callee.name}' has no derivative "
                    f"(declare '{mode.name_of(callee.name)}')",
                    pos or caller.pos,
                )
            return own

        return find

    # -- one def ---------------------------------------------------------------------------------
    def _make(self, mode: Mode, d: Def) -> Def:
        self._check(d)
        reserved = names_in(d.body) | {p.name for p in d.params} | set(d.size_vars)
        names = Names(reserved)
        env: Env = {}
        for p in d.params:
            env[p.name] = E.var(names.take(p.name), p.type)
        for s in d.size_vars:
            env[s] = E.var(names.take(s), INTEGER)
        taken = set(reserved)
        try:
            block = Converter(names, self.program.positions, d.name, d.pos).convert(d.body, env)
            find = self._call_derivative(mode, d)
            if mode is Mode.REV:
                return self._reverse(d, names, hoist(block, names), taken, find)
            return self._forward(d, names, block, taken, find)
        except KsTypeError as err:  # an op whose derivative does not type (mixed Integer/Float tuples)
            raise NotDifferentiable(f"cannot differentiate '{d.name}': {err.message}", d.pos) from None
        except RecursionError:
            raise NotDifferentiable(f"cannot differentiate '{d.name}': it is nested too deeply", d.pos) from None

    def _check(self, d: Def) -> None:
        for p in d.params:
            if Kind.LAM in p.type.leaves:
                raise NotDifferentiable(f"cannot differentiate '{d.name}': parameter '{p.name}' is a function", p.pos)
        if Kind.LAM in d.ret_type.leaves:
            raise NotDifferentiable(f"cannot differentiate '{d.name}': it returns a function", d.pos)
        if has_float(d.ret_type) and not any(has_float(p.type) for p in d.params):
            to_float = next((n for n in E.preorder(d.body) if n.op is Op.TO_FLOAT), None)
            how = "only from Integers (through to_float)" if to_float is not None else "from no Float parameter"
            pos = self.program.positions.get(to_float) if to_float is not None else None
            raise NotDifferentiable(
                f"cannot differentiate '{d.name}': its Float result is computed {how}; "
                "it has no Float parameter to differentiate by",
                pos or d.pos,
            )

    def _reverse(self, d: Def, names: Names, block: Block, taken: set[str], find: CallDerivative) -> Def:
        ret_tangent = tangent_type(d.ret_type)
        seed = E.var(names.take(_fresh_param("d$r", taken)), ret_tangent)
        rev = Reverse(names, find)
        out, cot = rev.def_block(block, seed)
        rev.flush(out, cot, lambda _: True)  # the parameters' element records, as one-hot vectors
        shapes = Shapes(names)
        totals = {p.name: rev.total(out, cot, p.name) for p in d.params}
        parts = [t if (t := totals[p.name]) is not None else shapes.zero_like(E.var(p.name, p.type)) for p in d.params]
        out.result = parts[0] if len(parts) == 1 else E.tuple_(*parts)
        _, ret = signature(Mode.REV, tuple(p.type for p in d.params), d.ret_type)
        params = (*d.params, Param(seed.data, ret_tangent))
        return Def(Mode.REV.name_of(d.name), ret, params, to_expr(out))

    def _forward(self, d: Def, names: Names, block: Block, taken: set[str], find: CallDerivative) -> Def:
        tangent_params: list[Param] = []
        tangents: dict[str, Expr] = {}
        for p in d.params:
            t = Param(names.take(_fresh_param(f"d${p.name}", taken)), tangent_type(p.type))
            tangent_params.append(t)
            if has_float(p.type):
                tangents[p.name] = E.var(t.name, t.type)
        fwd = Forward(names, find, tangents)
        out, result = fwd.block(block)
        assert block.result is not None
        out.result = result if result is not None else Shapes(names).zero_like(block.result)
        return Def(Mode.FWD.name_of(d.name), tangent_type(d.ret_type), (*d.params, *tangent_params), to_expr(out))


def _fresh_param(base: str, taken: set[str]) -> str:
    """``base``, or ``d$base``, ``d$d$base``... : the first not in ``taken`` (which it joins)."""
    name = base
    while name in taken:
        name = "d$" + name
    taken.add(name)
    return name


MODES = {"fwd": (Mode.FWD,), "rev": (Mode.REV,), "both": (Mode.FWD, Mode.REV)}


def derivative_defs(
    program: Program, defs: Iterable[str] | None = None, mode: str = "both", reuse: bool = True
) -> Differentiator:
    """Make ``mode``'s derivatives ("fwd", "rev" or "both") of ``defs`` (default: every def but the
    ``cost$`` declarations) and of the defs they call; the :class:`Differentiator` holds them."""
    if mode not in MODES:
        raise KsError(f"unknown mode '{mode}': use fwd, rev or both")
    names = [d.name for d in program.targets] if defs is None else list(defs)
    for n in names:
        if n not in program.defs:
            raise KsError(f"no def named '{n}'")
    maker = Differentiator(program, reuse)
    for n in names:
        for m in MODES[mode]:
            maker.derivative(m, n)
    return maker


def grad_program(program: Program, defs: Iterable[str] | None = None, mode: str = "both") -> Program:
    """``program`` with the derivatives of ``defs`` added after its own defs (see :func:`derivative_defs`)."""
    return with_derivatives(program, derivative_defs(program, defs, mode))


def with_derivatives(program: Program, maker: Differentiator) -> Program:
    """``program`` with the derivatives ``maker`` made for it added after its own defs."""
    out = Program()
    for item in program.items:
        out.add(item, program.callees[item.name])
    for d in maker.new:
        out.add(d, def_callee(d))
    out.positions = program.positions
    return out


def without_derivatives(program: Program, *, orphans: bool = False) -> Program:
    """``program`` without its ``fwd$``/``rev$`` defs of its defs, to make them anew (a derivative that
    one of the defs kept calls is kept too).  With ``orphans``, also without the derivatives of
    functions the program neither defines nor declares (ksc's ``rev$logsumexp`` in gmm_test.kso, its
    primal inlined away): they cannot be made anew, and kept they would keep the old derivatives of
    the defs they call, which the new ones would then not replace."""
    derived = {m.name_of(n) for m in Mode for n in program.defs}
    if orphans:
        primals = {item.name for item in program.items}
        derived |= {
            item.name
            for item in program.items
            for m in Mode
            if item.name.startswith(m.name_of("")) and item.name[len(m.name_of("")) :] not in primals
        }
    keep = {item.name for item in program.items if item.name not in derived}
    stack = [n for n in keep if n in program.defs]
    while stack:
        for callee in program.defs[stack.pop()].direct_callees():
            if callee.kind is CalleeKind.DEF and callee.name not in keep:
                keep.add(callee.name)
                stack.append(callee.name)
    out = Program()
    for item in program.items:
        if item.name in keep:
            out.add(item, program.callees[item.name])
    out.positions = program.positions
    return out
