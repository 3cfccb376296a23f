"""The function emitter's core: A-normal form over an explicit stack, the lazy and binding
constructs, the loop driver (plain, parallel, hoisted invariants) and the C++ of the strict ops."""

from __future__ import annotations

from collections.abc import Callable

from cpp_backend.cpp_text import c_string, cpp_type, def_symbol, escape_name, literal
from cpp_backend.index_lets import strided
from cpp_backend.loop_facts import (
    ELEMENTWISE,
    SPECULATE_MOST,
    cannot_fail,
    has_loop,
    literal_sum,
    loop_invariants,
    native_cannot_fail,
    speculable,
)
from cpp_backend.native_cpp import NATIVE_CPP, native_template
from knossos import trampoline
from knossos.callee import Callee, CalleeKind
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.op_table import ROW, ROWS, OpKind
from knossos.ops import BINDERS, Op
from knossos.types import BOOL, FLOAT, INTEGER, Type

#: Indentation stops growing here, so that very deep programs stay linear in size.
MAX_INDENT = 40


ALLOCATING = frozenset({Op.BUILD, Op.CONSTVEC, Op.DELTAVEC, Op.CALL, Op.LAM, Op.APPLY})


#: A step of the emitter's walk (knossos.trampoline): yields a child, is sent its C++ atom.
EmitStep = trampoline.Step[Expr, str]


def is_identifier(atom: str) -> bool:
    return atom.replace("_", "a").isalnum() and not atom[0].isdigit()


#: A parallel loop runs on threads from this many iterations if its body has loops (or calls),
#: from PARALLEL_MIN_FLAT if it has none.
PARALLEL_MIN_NESTED = 64


PARALLEL_MIN_FLAT = 1 << 15


def parallel_condition(n: str, innermost: bool) -> str:
    return f"{n} >= {PARALLEL_MIN_FLAT if innermost else PARALLEL_MIN_NESTED}"


Hoisted = dict[int, tuple[Expr, str, tuple[tuple[str, str | None], ...]]]


SCALARS = (FLOAT, INTEGER, BOOL)


def free_scalars(e: Expr) -> list[tuple[str, Type]]:
    """The free variables of ``e`` that are Floats, Integers or Bools, with their types, by name."""
    found = ((name, _free_type(e, name)) for name in e.free)
    return sorted((name, ty) for name, ty in found if ty in SCALARS)


def _free_type(e: Expr, name: str) -> Type:
    """The type of the free variable ``name`` of ``e``: that of an occurrence reached without entering
    a binder of ``name`` (a node of that name inside one is another variable: autodiff's rev$ binds a
    Float ``t_1`` inside a loop that reads the Integer ``t_1`` outside it)."""
    node = e
    while node.op is not Op.VAR:
        binder = BINDERS.get(node.op)
        node = next(
            child
            for k, child in enumerate(node.args)
            if name in child.free
            and not (binder and (k == binder[0] or (k == binder[1] and node.args[binder[0]].data == name)))
        )
    return node.type


#: The constructs whose operands are not all computed first, by the method that writes each.
LAZY_METHODS: dict[Op, str] = {
    Op.IF: "_if",
    Op.AND: "_logic",
    Op.OR: "_logic",
    Op.ASSERT: "_assert",
    Op.LET: "_let",
    Op.LAM: "_lam",
    Op.BUILD: "_build",
    Op.SUMBUILD: "_sumbuild",
}

assert set(BINDERS) <= set(LAZY_METHODS)


class EmitterCore:
    """Writes the statements of one def's body: the walk, lets, branches and loops (the rows and
    sums that :class:`cpp_backend.emit.FunctionEmitter` adds come in through :data:`LAZY_METHODS`)."""

    def __init__(
        self, env: dict[str, str], depth: int = 1, *, exact_order: bool = False, quiet: frozenset[str] = frozenset()
    ) -> None:
        self.lines: list[str] = []
        # defs whose calls allocate no arena memory (emit.quiet_defs): a loop calling only them needs no reset
        self.quiet = quiet
        self.depth = depth
        self.env = env
        # Float sums in index order (decided here, not by KS_EXACT_ORDER: one form of each sum is written)
        self.exact_order = exact_order
        self.counter = 0
        self._allocates: dict[int, bool] = {}
        # computed before an enclosing loop: id -> (node, atom, the atoms of its free variables then)
        self._hoisted: dict[int, tuple[Expr, str, tuple[tuple[str, str | None], ...]]] = {}
        # (index atom, vector atom) whose range an enclosing loop has checked
        self._in_range: set[tuple[str, str]] = set()
        # (index atom, vector atom) -> a pointer to the vector's dense elements (a loop's fast version)
        self._dense: dict[tuple[str, str], str] = {}
        # (loop index atom, vector atom, s, c): reads at s i + c whose range an enclosing loop checked
        self._strided: set[tuple[str, str, int, int]] = set()
        # loops around the code being emitted (parallel loops are outermost)
        self.loop_depth = 0
        # id of a build whose row sums a blocked loop nest computed: (ok flag, block, row offset)
        self._row_blocks: dict[int, tuple[str, str, str]] = {}
        # (index atom, vector atom) -> the C++ of that element (a blocked loop nest's reads)
        self._reads: dict[tuple[str, str], str] = {}

    def line(self, text: str) -> None:
        self.lines.append("    " * min(self.depth, MAX_INDENT) + text)

    def fresh(self, prefix: str = "t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def fresh_var(self, name: str) -> str:
        self.counter += 1
        return f"v{self.counter}_{escape_name(name)}"

    def bind(self, t: Type, expr: str) -> str:
        """A temporary holding ``expr`` of type ``t``."""
        name = self.fresh()
        self.line(f"const {cpp_type(t)} {name} = {expr};")
        return name

    def body(self, root: Expr) -> str:
        """Emit the statements computing ``root``; returns the C++ atom (name or literal) of its value."""
        result: str = trampoline.run_steps(self._start, root)
        return result

    def may_allocate(self, root: Expr) -> bool:
        """Whether evaluating ``root`` may allocate arena memory (conservative, iterative, memoised): a
        vector made, or a call (but of a def in ``quiet``, or of C's functions of Floats)."""
        memo = self._allocates
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in memo:
                continue
            if not ready:
                stack.append((node, True))
                stack.extend((a, False) for a in node.args if id(a) not in memo)
                continue
            op = node.op
            own = (op in ALLOCATING and not (op is Op.CALL and self._quiet_call(node))) or (
                op in ELEMENTWISE and not node.type.is_scalar
            )
            memo[id(node)] = own or any(memo[id(a)] for a in node.args)
        return memo[id(root)]

    def _quiet_call(self, node: Expr) -> bool:
        callee: Callee = node.data
        if callee.kind is CalleeKind.DEF:
            return callee.name in self.quiet
        return node.type is FLOAT and native_cannot_fail(node)

    def _start(self, node: Expr) -> str | EmitStep:
        op = node.op
        if op is Op.CONST:
            return literal(node)
        if op is Op.VAR:
            try:
                return self.env[node.data]
            except KeyError:
                raise KsUsageError(f"variable '{node.data}' is not bound") from None
        found = self._hoisted.get(id(node))
        if found is not None and found[2] == self._bindings(node):
            return found[1]  # computed before the loop, where its variables meant the same
        method = LAZY_METHODS.get(op)
        if method is not None:
            step: str | EmitStep = getattr(self, method)(node)
            return step
        return self._strict(node)

    def _bindings(self, node: Expr) -> tuple[tuple[str, str | None], ...]:
        return tuple((x, self.env.get(x)) for x in sorted(node.free))

    def _strict(self, node: Expr) -> EmitStep:
        atoms: list[str] = []
        for a in node.args:
            atoms.append((yield a))
        return self.bind(node.type, self._strict_expr(node, atoms))

    def _strict_expr(self, node: Expr, a: list[str]) -> str:
        try:
            write = STRICT_CPP[node.op]
        except KeyError:  # pragma: no cover
            raise KsUsageError(f"the C++ backend cannot emit {node.op.name}") from None
        return write(self, node, a)

    def _if(self, node: Expr) -> EmitStep:
        cond = yield node.args[0]
        if speculable(node):
            then = yield node.args[1]
            other = yield node.args[2]
            return self.bind(node.type, f"({cond} ? {then} : {other})")
        result = self.fresh()
        self.line(f"{cpp_type(node.type)} {result}{{}};")
        self.line(f"if ({cond}) {{")
        yield from self._assign_indented(result, node.args[1])
        self.line("} else {")
        yield from self._assign_indented(result, node.args[2])
        self.line("}")
        return result

    def _logic(self, node: Expr) -> EmitStep:
        left = yield node.args[0]
        if node.args[1].size <= SPECULATE_MOST and cannot_fail(node.args[1], set()):
            # both sides computed, as a select's: a loop with (or (lt x 0.0) (ne x x)) stays branch-free
            right = yield node.args[1]
            return self.bind(BOOL, value_op_template(node).format(left, right))
        result = self.fresh()
        self.line(f"bool {result} = {left};")
        self.line(f"if ({'' if node.op is Op.AND else '!'}{result}) {{")
        yield from self._assign_indented(result, node.args[1])
        self.line("}")
        return result

    def _assign_indented(self, result: str, child: Expr) -> EmitStep:
        """``result = child;`` inside a block the caller opens and closes (a lazy branch)."""
        self.depth += 1
        value = yield child
        self.line(f"{result} = {value};")
        self.depth -= 1
        return result

    def _assert(self, node: Expr) -> EmitStep:
        cond = yield node.args[0]
        self.line(f'if (!({cond})) ks::fail("assertion failed");')
        return (yield node.args[1])

    def _push(self, name: str, atom: str) -> str | None:
        """Bind the variable ``name`` to the C++ expression ``atom``; returns what to give :meth:`_pop`."""
        saved = self.env.get(name)
        self.env[name] = atom
        return saved

    def _pop(self, name: str, saved: str | None) -> None:
        if saved is None:
            del self.env[name]
        else:
            self.env[name] = saved

    def _in_scope(self, name: str, atom: str, body: Expr) -> EmitStep:
        """Emit ``body`` with the variable ``name`` bound to the C++ expression ``atom``."""
        saved = self._push(name, atom)
        value = yield body
        self._pop(name, saved)
        return value

    def _let(self, node: Expr) -> EmitStep:
        var, rhs, body = node.args
        if self.loop_depth == 0 and rhs.op in (Op.BUILD, Op.SUMBUILD) and has_loop(rhs.args[2]):
            value = yield from self._outlined(rhs)
        else:
            value = yield rhs
        if var.data not in body.free and is_identifier(value):
            self.line(f"(void){value};")
        result = yield from self._in_scope(var.data, value, body)
        return result

    def _outlined(self, rhs: Expr) -> EmitStep:
        """``rhs`` (a loop nest outside any loop) computed in a lambda that g++ keeps a function of its
        own: its optimisation and code generation, superlinear in a function's size (data-flow of
        live registers), then work on one nest at a time rather than on the whole def (Llama attention's
        gradient: 10.9 -> 7.7 g++ seconds).  Nothing computed inside is reused after it (out of scope)."""
        saved = (dict(self._hoisted), set(self._in_range), dict(self._dense), set(self._strided), dict(self._reads))
        result = self.fresh()
        t = cpp_type(rhs.type)
        self.line(f"const {t} {result} = [&]() __attribute__((noinline)) -> {t} {{")
        self.depth += 1
        # A scalar captured by reference is memory that every store in the nest may alias: g++ reloads
        # it after each store and leaves the loop unvectorised (BCEWithLogitsLoss's gradient 0.26x ->
        # 1.6x eager).  A local copy is a register.
        scalars = free_scalars(rhs)
        self._hoisted = {k: v for k, v in self._hoisted.items() if v[0].type not in SCALARS}
        outer = {name: self._push(name, self._local_copy(name, ty)) for name, ty in scalars}
        value = yield rhs
        for name, atom in outer.items():
            self._pop(name, atom)
        self.line(f"return {value};")
        self.depth -= 1
        self.line("}();")
        self._hoisted, self._in_range, self._dense, self._strided, self._reads = saved
        return result

    def _local_copy(self, name: str, ty: Type) -> str:
        """A local ``const`` copy of the scalar variable ``name`` (see :meth:`_outlined`)."""
        copy = self.fresh()
        self.line(f"const {cpp_type(ty)} {copy} = {self.env[name]};")
        return copy

    def _lam(self, node: Expr) -> EmitStep:
        var, body = node.args
        result = self.fresh("f")
        param = self.fresh_var(var.data)
        t = node.type
        self.line(
            f"const {cpp_type(t)} {result} = [=](const {cpp_type(t.lam_arg)}& {param}) -> {cpp_type(t.lam_ret)} {{"
        )
        self.depth += 1
        value = yield from self._in_scope(var.data, param, body)
        self.line(f"return {value};")
        self.depth -= 1
        self.line("};")
        return result

    def _loop(
        self,
        n: str,
        i: str,
        var: str,
        body: Expr,
        varying: frozenset[str],
        emit: Callable[[], EmitStep],
        nonempty: bool = False,
        done: Expr | None = None,
        *,
        parallel: bool = False,
        independent: bool = False,
        reduce: str | None = None,
        split: bool = False,
    ) -> EmitStep:
        """``for`` ``i`` in [0, ``n``) around ``emit()``, which evaluates ``body`` with ``var`` bound to ``i``
        (and ``varying``, ``var`` among them, changing between iterations); what every iteration would
        compute alike is computed once before the loop (see :func:`loop_invariants`; ``done`` is
        not looked into), inside ``if (n > 0)`` unless ``nonempty`` says the loop runs.

        A loop reads the vectors of numbers it reads at its index through raw pointers, taken before
        it by ``ks::DenseRead`` (a lazy vector's elements copied there, once): the dense/lazy test
        is made once per loop, not per element, and g++ vectorises an innermost loop (``reduce``, the
        Float accumulator of a sum, with ``KS_SIMD_SUM``: reassociated unless exact order);
        ``independent``: iterations touch nothing in common but ``reduce``, so that an innermost loop
        may be marked ``omp simd``.  With ``parallel`` (independent iterations producing
        scalars, or a Float sum into ``reduce``) a loop that no other loop of the def encloses runs on threads when it is large
        (see :func:`parallel_condition`); the OpenMP region is entered only then, the loop emitted
        twice under ``if`` (``split``: this is the parallel copy)."""
        if parallel and self.loop_depth == 0 and not split:
            # An OpenMP region costs about a microsecond to enter even when its `if` clause is false (a
            # def called in another's loop pays it at every call): the region only when it would run
            # on threads, the plain loop otherwise.
            cond = parallel_condition(n, not has_loop(body, done))
            self.line(f"if ({cond}) {{")
            self.depth += 1
            args = (n, i, var, body, varying, emit, nonempty, done)
            yield from self._loop(*args, parallel=True, independent=independent, reduce=reduce, split=True)
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            yield from self._loop(*args, parallel=False, independent=independent, reduce=reduce)
            self.depth -= 1
            self.line("}")
            return i
        hoisted, ranged = loop_invariants(body, var, varying, done)
        saved = dict(self._hoisted), set(self._in_range), set(self._strided)
        guard = bool(hoisted or ranged) and not nonempty
        if guard:
            self.line(f"if ({n} > 0) {{")
            self.depth += 1
        for h in hoisted:
            atom = yield h
            self._hoisted[id(h)] = (h, atom, self._bindings(h))
        dense: dict[str, tuple[Type, dict[int, int]]] = {}  # number vectors read at s i + c -> (type, {s: max c})
        for x in ranged:
            v = yield x.args[1]
            step = strided(x.args[0], var)
            assert step is not None
            if step == (1, 0) and (i, v) not in self._in_range:
                self.line(f"ks::check_range({n}, {v});")
                self._in_range.add((i, v))
            elif step != (1, 0) and (i, v, *step) not in self._strided:
                s, c = step  # (the loop runs: n > 0)
                self.line(f"ks::check_strided({n}, std::int64_t({s}LL), std::int64_t({c}LL), {v});")
                self._strided.add((i, v, s, c))
            if x.type in (FLOAT, INTEGER) and is_identifier(v):
                s, c = step
                reads = dense.setdefault(v, (x.type, {}))[1]
                reads[s] = max(c, reads.get(s, c))
        parallel = parallel and self.loop_depth == 0
        innermost = not has_loop(body, done)
        cond = parallel_condition(n, innermost)
        self.loop_depth += 1
        # Loop versioning without a second loop: each vector's dense/lazy test is done here, once, and
        # the loop reads through pointers (a lazy vector's elements copied first, by ks::DenseRead).
        saved_dense = dict(self._dense)
        copies: list[str] = []
        for v, (t, extents) in dense.items():
            ptr = self.fresh("d")
            copies.append(self.fresh("r"))
            self.line(f"const ks::DenseRead<{cpp_type(t)}> {copies[-1]}({_extent(n, extents)}, {v});")
            self.line(f"const {cpp_type(t)}* __restrict {ptr} = {copies[-1]}.data();")
            self._dense[(i, v)] = ptr
        simd = dense and innermost and independent and cannot_fail(body, {id(x) for x in ranged})
        if parallel and simd:
            self.line(f"KS_PAR_SUM({reduce}, {cond})" if reduce else f"KS_PAR_FOR_SIMD({cond})")
            yield from self._plain_for(n, i, emit)
        elif parallel:
            yield from self._parallel_for(n, i, body, emit, cond, reduce)
        else:
            if simd:
                self.line(f"KS_SIMD_SUM({reduce})" if reduce else "KS_SIMD")
            yield from self._plain_for(n, i, emit)
        for copy in reversed(copies):
            self.line(f"{copy}.release();")
        self._dense = saved_dense
        self.loop_depth -= 1
        if guard:
            self.depth -= 1
            self.line("}")
        self._hoisted, self._in_range, self._strided = saved
        return i

    def _plain_for(self, n: str, i: str, emit: Callable[[], EmitStep]) -> EmitStep:
        self.line(f"for (std::int64_t {i} = 0; {i} < {n}; ++{i}) {{")
        self.depth += 1
        yield from emit()
        self.depth -= 1
        self.line("}")
        return i

    def _parallel_for(
        self, n: str, i: str, body: Expr, emit: Callable[[], EmitStep], cond: str, reduce: str | None
    ) -> EmitStep:
        """A loop on threads (when ``cond`` holds) whose iterations may fail or allocate: each thread's
        arena is released after each iteration, and the error of the first failing iteration is
        rethrown after the loop."""
        errors, limit = self.fresh("e"), self.fresh("l")
        allocates = self.may_allocate(body)
        self.line(f"ks::ParallelErrors {errors};")
        if allocates:
            self.line(f"const std::size_t {limit} = ks::arena().limit();")
        self.line(f"KS_PAR_SUM_SERIAL({reduce}, {cond})" if reduce else f"KS_PAR_FOR({cond})")
        self.line(f"for (std::int64_t {i} = 0; {i} < {n}; ++{i}) {{")
        self.depth += 1
        self.line(f"if ({errors}.skip({i})) continue;")
        self.line("try {")
        self.depth += 1
        if allocates:
            self.line(f"const ks::IterationScope {self.fresh('g')}({limit});")
        yield from emit()
        self.depth -= 1
        self.line("} catch (...) {")
        self.line(f"    {errors}.record({i}, std::current_exception());")
        self.line("}")
        self.depth -= 1
        self.line("}")
        self.line(f"{errors}.rethrow();")
        return i


def _extent(n: str, reads: dict[int, int]) -> str:
    """The C++ of how many elements a loop of ``n`` (> 0) iterations reads of a vector that it reads at
    ``s i + c`` for each ``s: c`` of ``reads`` (the largest ``c`` of each ``s``): the largest ``s (n - 1) + c + 1``."""
    texts = [n if (s, c) == (1, 0) else f"{s}LL * ({n} - 1) + {c + 1}LL" for s, c in sorted(reads.items())]
    text = texts[0]
    for e in texts[1:]:
        text = f"std::max<std::int64_t>({text}, {e})"
    return text


# -- strict ops: the C++ of an op over its arguments' atoms ------------------------------------------
CppWriter = Callable[[EmitterCore, Expr, list[str]], str]


def value_op_template(node: Expr) -> str:
    """The C++ template of a value op (op_table) for its operands' types."""
    cpp = ROW[node.op].cpp
    types = [a.type for a in node.args]
    if not all(t.is_scalar for t in types):
        template = cpp.structure
    elif FLOAT in types:
        template = cpp.float
    else:
        template = cpp.integer if INTEGER in types else cpp.boolean
    assert template is not None, f"{node.op.name} has no C++ for operands {types}"  # the type rules allow none
    return template


def _value_op_cpp(em: EmitterCore, node: Expr, a: list[str]) -> str:
    return value_op_template(node).format(*a)


def _whole_exponent(e: Expr) -> int | None:
    """The value of a constant exponent 2, 3 or 4 (a literal, or :func:`literal_sum`), else None."""
    value = e.data if e.op is Op.CONST else literal_sum(e)
    return int(value) if type(value) is float and value in (2.0, 3.0, 4.0) else None


def _pow_cpp(em: EmitterCore, node: Expr, a: list[str]) -> str:
    # x^2..x^4 as products (GPT-2's gelu cubes every element; a call of pow costs ~20 multiplications).
    # Products round up to twice where C's pow rounds once, so not under exact order (bit-identical
    # to the interpreter's math.pow there).
    n = None if em.exact_order else _whole_exponent(node.args[1])
    if n is not None:
        return f"ks::pow_whole<{n}>({a[0]})"
    template = ROW[Op.POW].cpp.float  # (also the edef'd pow's: C's)
    assert template is not None
    return template.format(*a)


def _index_cpp(em: EmitterCore, node: Expr, a: list[str]) -> str:
    read = em._reads.get((a[0], a[1]))
    if read is not None:  # a blocked loop nest's element, checked before
        return read
    ptr = em._dense.get((a[0], a[1]))
    if ptr is not None:  # the fast version of a loop: dense elements, range checked
        return f"{ptr}[{a[0]}]"
    if (a[0], a[1]) in em._in_range:  # an enclosing loop checked the range once
        return f"{a[1]}.get({a[0]})"
    index = node.args[0]
    if em._strided and index.op in (Op.MUL, Op.ADD) and len(index.free) == 1:
        (var,) = index.free
        loop = em.env.get(var)
        step = strided(index, var)
        if loop is not None and step is not None and (loop, a[1], *step) in em._strided:  # s i + c, checked
            ptr = em._dense.get((loop, a[1]))
            return f"{ptr}[{a[0]}]" if ptr is not None else f"{a[1]}.get({a[0]})"
    return f"ks::index({a[0]}, {a[1]})"


def _call_cpp(em: EmitterCore, node: Expr, a: list[str]) -> str:
    callee: Callee = node.data
    if callee.kind is CalleeKind.DEF:
        return f"{def_symbol(callee.name)}({', '.join(a)})"
    template = native_template(callee)
    if template == NATIVE_CPP["pow"][0][2]:  # the edef'd pow is C's, as Op.POW's
        return _pow_cpp(em, node, a)
    return template.format(*a)


#: Ops whose arguments are all computed first (the others are in :data:`_LAZY`): op -> its C++.
STRICT_CPP: dict[Op, CppWriter] = {
    **{row.op: _value_op_cpp for row in ROWS if row.kind is not OpKind.LOGIC},
    Op.POW: _pow_cpp,
    Op.INDEX: _index_cpp,
    Op.SIZE: lambda em, node, a: f"ks::size({a[0]})",
    Op.SUM: lambda em, node, a: f"ks::sum({a[0]}, {c_string(str(node.type))})",
    Op.CONSTVEC: lambda em, node, a: f"ks::const_vec<{cpp_type(node.type.elem)}>({a[0]}, {a[1]})",
    Op.DELTAVEC: lambda em, node, a: f"ks::delta_vec<{cpp_type(node.type.elem)}>({a[0]}, {a[1]}, {a[2]})",
    Op.TUPLE: lambda em, node, a: f"{cpp_type(node.type)}({', '.join(a)})",
    Op.GET: lambda em, node, a: f"std::get<{node.data[0] - 1}>({a[0]})",
    Op.APPLY: lambda em, node, a: f"{a[0]}({a[1]})",
    Op.CALL: _call_cpp,
}
