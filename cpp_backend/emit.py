"""C++17 from Knossos programs: one C++ function per def, over the runtime in ``runtime.h``.

:func:`emit_program` gives a self-contained translation unit: the runtime header (inlined, so that a
written ``.cpp`` needs nothing else), a declaration of every emitted def, then their definitions.

Code is in A-normal form: every non-trivial subexpression is computed into a ``const`` temporary in
evaluation order, so deep expressions (let chains thousands deep) become flat runs of statements; the
walk over an expression runs on an explicit stack of generators (:mod:`knossos.trampoline`), like
the interpreter's, so Python's recursion limit is never reached.  What each construct becomes:

=========================  ===============================================================================
``let``                    the variable names the right-hand side's temporary (no copy)
``if``, ``and``, ``or``    a result variable assigned inside ``if (...) {...} else {...}`` (lazy)
``build``                  a dense vector filled by a ``for`` loop; ``(build n (lam i c))`` with ``c`` a
                           constant or a variable other than ``i`` is ``ks::const_vec`` (lazy, no
                           allocation per element: reverse-mode code writes zero vectors like that),
                           and a zero written as loops over a vector of vectors' shape is
                           ``ks::zero_like`` of it (:mod:`cpp_backend.zeros`);
                           ``(build n (lam k (sumbuild m (lam j e))))`` with ``e`` a Float is computed
                           row-wise, also where the sum is an operand of the element (see Loops)
``sumbuild``               a loop accumulating into a dense copy of the first iteration's value, the
                           others added in place (``ks::add_inplace``), with the arena reset after each
                           later iteration when the body may allocate; Float/Integer accumulate in a scalar.
                           A body with loops in it is added part by part (not in exact order): a
                           ``build`` element by element, a ``sumbuild`` term by term, a ``deltaVec`` at
                           its index, a ``tuple`` or an ``if`` part by part, through the lets that bind
                           the parts, so that a reverse pass's one-hot and per-iteration cotangents cost
                           O(1) per element, not a full-size value; the first iteration assigns the
                           parts instead (a run-time flag), so that the body is written once
``sum``                    ``ks::sum`` (same accumulation)
``lam`` / application      a ``std::function`` holding a ``[=]`` lambda / a call of it
``tuple``, ``get$i$n``     ``std::tuple<...>(...)``, ``std::get<i-1>``
``index``, ``size``        ``ks::index`` (range-checked, works on lazy vectors), ``ks::size``
``constVec``, ``deltaVec`` ``ks::const_vec``, ``ks::delta_vec`` (lazy)
``add sub mul div neg``    C++ operators on Floats; checked ``ks::add_i`` etc. on Integers; ``ks::add`` etc.
                           (element-wise, broadcasting) on vectors and tuples
``max abs exp log tanh     ``ks::max_f``/``ks::max_i``, ``std::fabs``/``ks::abs_i``, ``ks::math::exp``...
sqrt pow to_float``        ``static_cast<double>``
comparisons                ``ks::eq``, ``ks::lt``... (C++ comparisons, as functions so that ``(eq x x)``
                           is no compiler warning)
``assert``                 ``if (!c) ks::fail("assertion failed")``
calls                      defs: the mangled C++ function; edefs and prelude functions: the C++ meaning
                           of :mod:`knossos.natives` (:data:`NATIVE_CPP`)
=========================  ===============================================================================

Loops.  What every iteration of a ``build`` or ``sumbuild`` computes alike (a subexpression that
the body evaluates whatever the branches, not depending on the loop variable nor on anything bound
inside the body) is computed once, before the loop, inside ``if (n > 0)`` (so that no error arises
that the loop would not raise); ``(index i v)`` of the loop variable ``i`` and such a ``v`` has its
range checked once there (``ks::check_range``) and reads ``v.get(i)`` in the loop, which the C++
compiler can vectorise.  ``(build n (lam k (sumbuild m (lam j e))))`` with ``e`` a Float that
depends on ``k`` and allocates nothing, and that reads no ``(index j v)`` with ``v`` depending on
``k`` (a column walk), is computed with the ``j`` loop outside the ``k`` loop: each element starts
at +0.0 and adds the terms in the order of ``j``, as the sum of the program does, so the result is
the same to the bit; the ``k`` loop then reads rows and vectorises (a matrix product written as
dot products runs as the row-by-row loop one would write by hand).  Where such a sum is not the
element itself but one that every element evaluates (``(add (mul alpha (sumbuild ...)) ...)``, GEMM
once its temporaries are fused, about 8 times slower element by element), the sums of all ``k`` go
first, row-wise, into a vector, and the element loop reads them from it.  Where that build is itself
the element of an outer build over ``i`` and the term depends on ``i`` (a matrix product), the row
sums of a panel of rows are computed together by a register-blocked loop nest (see
``_FunctionEmitter._block_rows``: the same additions in the same order per element).  Products written
otherwise (an operand read down a column, a sum of vectors, one-hots accumulated over a batch) are
first rewritten into that shape by :mod:`cpp_backend.products` (transposed copies, which keep every sum
to the bit; interchanges of a sum of vectors with its builds, which are not done under
``KS_EXACT_ORDER``: a sum of terms all -0.0 becomes +0.0).  Errors: the same calls fail, possibly with
another of their errors first.

Identifiers.  No text of the input ever reaches the C++ source: a def ``f`` becomes ``ks_`` followed by
:func:`escape_name` of ``f`` (ASCII letters but ``Z``, digits and single underscores kept, every other
character ``c`` written ``Z<hex code of c>Z``: ``rev$conv1d`` is ``ks_revZ24Zconv1d``), which is
injective, never a keyword and never contains ``__``; parameters are ``p<k>_<escape>``, other
variables ``v<n>_<escape>``, size variables ``z<k>_<escape>``, temporaries ``t<n>``, and nothing
else the code declares has one of these forms.  Literals are written from their values: Floats as
exact hexadecimal literals (``0x1.8p+1``), Integers as ``std::int64_t(...LL)``, Bools as
``true``/``false``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Iterable
from pathlib import Path

from cpp_backend.block_terms import inline_term_lets
from cpp_backend.index_lets import inline_index_lets, strided
from cpp_backend.pch import RUNTIME_BEGIN, RUNTIME_END
from cpp_backend.products import canonical_products
from cpp_backend.zeros import zero_shaped
from knossos import trampoline
from knossos.arith import INT_MIN
from knossos.callee import Callee, CalleeKind
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.ops import BINDERS, Op
from knossos.program import Def, Program, SizeTree, TupleSizes, VecSizes
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type, tuple_of, vec
from knossos.walk import distinct_nodes

RUNTIME_HEADER = Path(__file__).resolve().parent / "runtime.h"

#: Indentation stops growing here, so that very deep programs stay linear in size.
MAX_INDENT = 40

_KEPT = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYabcdefghijklmnopqrstuvwxyz0123456789")  # not 'Z': it escapes


def escape_name(name: str) -> str:
    """``name`` as ``[A-Za-z0-9_]`` text to follow a prefix ending in ``_``.

    ASCII letters other than ``Z`` and digits are kept, and so is ``_`` unless the text so far ends
    in ``_``; every other character ``c`` is written ``Z<lower-case hex of ord(c)>Z``.  Escapes are
    self-delimiting and everything else stands for itself, so the name can be read back: the map is
    injective.  The result never contains ``__`` (so, after the prefix, the identifier is not one
    reserved to the implementation) and is never a keyword.
    """
    out: list[str] = []
    previous = "_"
    for c in name:
        if c in _KEPT or (c == "_" and previous != "_"):
            out.append(c)
            previous = c
        else:
            out.append(f"Z{ord(c):x}Z")
            previous = "Z"
    return "".join(out)


def unescape_name(text: str) -> str:
    """The inverse of :func:`escape_name`."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "Z":
            end = text.index("Z", i + 1)
            out.append(chr(int(text[i + 1 : end], 16)))
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def def_symbol(name: str) -> str:
    """The C++ function of the def ``name``."""
    return "ks_" + escape_name(name)


@functools.cache
def runtime_source() -> str:
    """The text of ``runtime.h``."""
    return RUNTIME_HEADER.read_text(encoding="utf-8")


# -- types -----------------------------------------------------------------------------------------
_type_cache: dict[Type, str] = {}


def cpp_type(t: Type) -> str:
    """The C++ type of values of ``t``."""
    found = _type_cache.get(t)
    if found is not None:
        return found
    if t is FLOAT:
        text = "double"
    elif t is INTEGER:
        text = "std::int64_t"
    elif t is BOOL:
        text = "bool"
    elif t.kind is Kind.VEC:
        if Kind.LAM in t.elem.leaves:
            raise KsUsageError(f"the C++ backend does not support vectors of functions ({t})")
        text = f"ks::Vec<{cpp_type(t.elem)}>"
    elif t.kind is Kind.TUPLE:
        text = f"std::tuple<{', '.join(cpp_type(c) for c in t.children)}>"
    else:
        text = f"std::function<{cpp_type(t.lam_ret)}(const {cpp_type(t.lam_arg)}&)>"
    _type_cache[t] = text
    return text


def _param_decl(t: Type, name: str) -> str:
    return f"{cpp_type(t)} {name}" if t.is_scalar else f"const {cpp_type(t)}& {name}"


def c_string(text: str) -> str:
    """A C++ string literal of ``text`` (every character outside a small safe set escaped in octal)."""
    out = []
    for b in text.encode("utf-8"):
        c = chr(b)
        out.append(c if c.isascii() and (c.isalnum() or c in " ()") else f"\\{b:03o}")
    return '"' + "".join(out) + '"'


# -- literals --------------------------------------------------------------------------------------
def float_literal(x: float) -> str:
    """An exact C++ literal of a finite double."""
    text = float(x).hex()  # e.g. 0x1.8000000000000p+1
    return f"({text})" if text.startswith("-") else text


def int_literal(v: int) -> str:
    if v == INT_MIN:
        return f"(std::int64_t({v + 1}LL) - 1)"
    return f"std::int64_t({v}LL)"


def literal(node: Expr) -> str:
    if node.type is BOOL:
        return "true" if node.data else "false"
    if node.type is INTEGER:
        return int_literal(int(node.data))
    return float_literal(float(node.data))


# -- edefs and prelude functions -----------------------------------------------------------------------
_F, _I, _B = FLOAT, INTEGER, BOOL
_VF = vec(FLOAT)
_VVF = vec(_VF)

#: name -> [(parameter types, return type, C++ expression with {0}, {1}... for the arguments)]: the
#: C++ meaning of each function of :data:`knossos.natives.NATIVES`, for the signatures it supports.
NATIVE_CPP: dict[str, list[tuple[tuple[Type, ...], Type, str]]] = {
    "abs": [((_F,), _F, "std::fabs({0})"), ((_I,), _I, "ks::abs_i({0})")],
    "max": [((_F, _F), _F, "ks::max_f({0}, {1})"), ((_I, _I), _I, "ks::max_i({0}, {1})")],
    "pow": [((_F, _F), _F, "ks::math::pow({0}, {1})")],
    "tanh": [((_F,), _F, "ks::math::tanh({0})")],
    "cosh": [((_F,), _F, "std::cosh({0})")],
    "exp": [((_F,), _F, "ks::math::exp({0})")],
    "log": [((_F,), _F, "ks::math::log({0})")],
    "erf": [((_F,), _F, "ks::math::erf({0})")],
    "log1p": [((_F,), _F, "ks::math::log1p({0})")],
    "expm1": [((_F,), _F, "ks::math::expm1({0})")],
    "sin": [((_F,), _F, "ks::math::sin({0})")],
    "cos": [((_F,), _F, "ks::math::cos({0})")],
    "lgamma": [((_F,), _F, "ks::lgamma_f({0})")],
    "stop_gradient": [((_F,), _F, "({0})")],
    "fwd$lgamma": [((_F, _F), _F, "(ks::digamma({0}) * {1})")],
    "rev$lgamma": [((_F, _F), _F, "(ks::digamma({0}) * {1})")],
    "dotv": [((_VF, _VF), _F, "ks::dotv({0}, {1})")],
    "mul$Mat$Vec": [((_VVF, _VF), _VF, "ks::mul_mat_vec({0}, {1})")],
    "rev$mul$Mat$Vec": [((_VVF, _VF, _VF), tuple_of(_VVF, _VF), "ks::rev_mul_mat_vec({0}, {1}, {2})")],
    "add$ii": [((_I, _I), _I, "ks::add_i({0}, {1})")],
    "add$ff": [((_F, _F), _F, "({0} + {1})")],
    "add$vfvf": [((_VF, _VF), _VF, "ks::add({0}, {1})")],
    "sub$ii": [((_I, _I), _I, "ks::sub_i({0}, {1})")],
    "sub$ff": [((_F, _F), _F, "({0} - {1})")],
    "mul$ii": [((_I, _I), _I, "ks::mul_i({0}, {1})")],
    "mul$ff": [((_F, _F), _F, "({0} * {1})")],
    "div$ii": [((_I, _I), _I, "ks::div_i({0}, {1})")],
    "div$ff": [((_F, _F), _F, "({0} / {1})")],
    "exp$f": [((_F,), _F, "ks::math::exp({0})")],
    "log$f": [((_F,), _F, "ks::math::log({0})")],
    "eq$ii": [((_I, _I), _B, "ks::eq({0}, {1})")],
    "eq$ff": [((_F, _F), _B, "ks::eq({0}, {1})")],
    "gt$ii": [((_I, _I), _B, "ks::gt({0}, {1})")],
    "gt$ff": [((_F, _F), _B, "ks::gt({0}, {1})")],
    "gte$ii": [((_I, _I), _B, "ks::gte({0}, {1})")],
    "gte$ff": [((_F, _F), _B, "ks::gte({0}, {1})")],
    "$ranhashdoub": [((_I,), _F, "ks::ranhashdoub({0})")],
}


def native_template(callee: Callee) -> str:
    """The C++ expression template of an edef or prelude function, or a KsUsageError."""
    for params, ret, template in NATIVE_CPP.get(callee.name, []):
        if params == callee.param_types and ret is callee.ret_type:
            return template
    sig = " ".join(str(t) for t in callee.param_types)
    raise KsUsageError(
        f"the C++ backend has no implementation of edef '{callee.name}' taking ({sig}) and returning {callee.ret_type}"
    )


# -- expressions -----------------------------------------------------------------------------------
_ARITH_SYMBOL = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/"}
_ARITH_NAME = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul", Op.DIV: "div"}
_COMPARE = {Op.EQ: "eq", Op.NE: "ne", Op.GT: "gt", Op.GTE: "gte", Op.LT: "lt", Op.LTE: "lte"}
_FLOAT_FN = {Op.EXP: "ks::math::exp", Op.LOG: "ks::math::log", Op.TANH: "ks::math::tanh", Op.SQRT: "std::sqrt"}
_ALLOCATING = frozenset({Op.BUILD, Op.CONSTVEC, Op.DELTAVEC, Op.CALL, Op.LAM, Op.APPLY})
_ELEMENTWISE = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG, Op.SUM, Op.SUMBUILD})

Step = Generator[Expr, str, str]


def _is_identifier(atom: str) -> bool:
    return atom.replace("_", "a").isalnum() and not atom[0].isdigit()


# -- loops -----------------------------------------------------------------------------------------
def _strict_children(node: Expr) -> list[Expr]:
    """The children that evaluating ``node`` (not a ``let``) evaluates whatever the values (or fails)."""
    op, args = node.op, node.args
    if op in (Op.IF, Op.AND, Op.OR, Op.BUILD, Op.SUMBUILD):
        return [args[0]]  # branches and loop bodies may not run
    if op in (Op.LAM, Op.CONST, Op.VAR):
        return []
    return list(args)


def _walk_evaluated(body: Expr, bound: dict[str, int], visit: Callable[[Expr], bool]) -> None:
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
            stack.extend(reversed(_strict_children(item)))


def _literal_sum(e: Expr) -> float | None:
    """The value of two Float literals added or subtracted (a derivative's exponent ``(sub 3.0 1.0)``):
    left in place by :func:`_loop_invariants` (g++ folds it), so that :func:`_pow_cpp` sees it."""
    if e.op not in (Op.ADD, Op.SUB) or not all(x.op is Op.CONST and type(x.data) is float for x in e.args):
        return None
    x, y = (x.data for x in e.args)
    return float(x + y if e.op is Op.ADD else x - y)


def _loop_invariants(
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
        if item.op is Op.CONST or item.op is Op.VAR or item is done or _literal_sum(item) is not None:
            return False
        if invariant(item):
            hoisted.setdefault(id(item), item)
            return False
        if item.op is Op.INDEX and bound[var] == 1:  # ``var`` is the loop's
            i, v = item.args
            if strided(i, var) is not None and invariant(v):
                ranged.setdefault(id(item), item)
        return True

    _walk_evaluated(body, bound, visit)
    return list(hoisted.values()), list(ranged.values())


def _copied(var: str, body: Expr) -> Expr | None:
    """``v`` where ``body`` is ``(index var v)`` (or ``(let (x (index var v)) x)``), ``v`` free of ``var``."""
    if body.op is Op.LET and body.args[2] is body.args[0]:
        body = body.args[1]
    if body.op is Op.INDEX and body.args[0].op is Op.VAR and body.args[0].data == var and var not in body.args[1].free:
        return body.args[1]
    return None


def _walks_column(e: Expr, j: str, k: str) -> bool:
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


_LOOPS = frozenset({Op.BUILD, Op.SUMBUILD, Op.SUM, Op.CALL, Op.APPLY, Op.LAM})

#: A parallel loop runs on threads from this many iterations if its body has loops (or calls),
#: from PARALLEL_MIN_FLAT if it has none.
PARALLEL_MIN_NESTED = 64
PARALLEL_MIN_FLAT = 1 << 15

#: A matrix product's rows are summed this many at a time, over tiles of this many columns, with the
#: BLOCK_ROWS x BLOCK_COLS partial sums in registers (see _FunctionEmitter._block_rows).
BLOCK_ROWS = 8
BLOCK_COLS = 16
BLOCK_PANEL = 256  # rows computed together, so that each packed column tile serves them all


def _has_loop(body: Expr, done: Expr | None = None) -> bool:
    """Whether evaluating ``body`` may run a loop or a call (``done`` not looked into); C's functions
    of Floats (exp, tanh...) are neither."""
    seen: set[int] = set()
    stack = [body]
    while stack:
        node = stack.pop()
        if id(node) in seen or node is done:
            continue
        seen.add(id(node))
        if node.op in _LOOPS and not (node.op is Op.CALL and node.type is FLOAT and _native_cannot_fail(node)):
            return True
        if node.op in _ELEMENTWISE and not node.type.is_scalar:
            return True
        stack.extend(node.args)
    return False


_CANNOT_FAIL_FLOAT = frozenset(
    {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.NEG, Op.MAX, Op.ABS, Op.EXP, Op.LOG, Op.TANH, Op.SQRT, Op.POW, Op.TO_FLOAT}
)


#: Natives of Floats that return a Float and never fail (C's functions: NaN or an infinity, no error).
_CANNOT_FAIL_NATIVES = frozenset(
    {"abs", "max", "pow", "tanh", "cosh", "exp", "log", "erf", "log1p", "expm1", "sin", "cos", "exp$f", "log$f"}
    | {"add$ff", "sub$ff", "mul$ff", "div$ff"}
)
#: A Float ``if`` whose branches cannot fail and are this small (nodes) computes both and selects one:
#: g++ vectorises a loop with a select, not one with a branch around a call of exp (PyTorch's softplus,
#: a loss's clamps, a ReLU's reverse).
SPECULATE_MOST = 24


def _native_cannot_fail(node: Expr) -> bool:
    callee: Callee = node.data
    return callee.kind is not CalleeKind.DEF and callee.name in _CANNOT_FAIL_NATIVES


def _speculable(node: Expr) -> bool:
    """Whether the Float ``if`` ``node`` may compute both branches and select: neither can fail and
    both are small."""
    if node.type is not FLOAT:
        return False
    branches = node.args[1:]
    return sum(b.size for b in branches) <= SPECULATE_MOST and all(_cannot_fail(b, set()) for b in branches)


def _cannot_fail(body: Expr, ranged: set[int]) -> bool:
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
            or (op is Op.CALL and node.type is FLOAT and _native_cannot_fail(node))
        )
        if not safe:
            return False
        stack.extend(node.args)
    return True


def _parallel_condition(n: str, innermost: bool) -> str:
    return f"{n} >= {PARALLEL_MIN_FLAT if innermost else PARALLEL_MIN_NESTED}"


_Hoisted = dict[int, tuple[Expr, str, tuple[tuple[str, str | None], ...]]]


def _only_read(e: Expr, v: Expr, k: str) -> bool:
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


class _FunctionEmitter:
    """Writes the statements of one def's body."""

    def __init__(self, env: dict[str, str], depth: int = 1, *, exact_order: bool = False) -> None:
        self.lines: list[str] = []
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
        result: str = trampoline.run(self._start, root)
        return result

    def may_allocate(self, root: Expr) -> bool:
        """Whether evaluating ``root`` may allocate arena memory (conservative, iterative, memoised)."""
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
            own = node.op in _ALLOCATING or (node.op in _ELEMENTWISE and not node.type.is_scalar)
            memo[id(node)] = own or any(memo[id(a)] for a in node.args)
        return memo[id(root)]

    # -- the walk --------------------------------------------------------------------------------
    def _start(self, node: Expr) -> str | Step:
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
        method = _LAZY.get(op)
        if method is not None:
            return method(self, node)
        return self._strict(node)

    def _bindings(self, node: Expr) -> tuple[tuple[str, str | None], ...]:
        return tuple((x, self.env.get(x)) for x in sorted(node.free))

    def _strict(self, node: Expr) -> Step:
        atoms: list[str] = []
        for a in node.args:
            atoms.append((yield a))
        return self.bind(node.type, self._strict_expr(node, atoms))

    def _strict_expr(self, node: Expr, a: list[str]) -> str:
        try:
            write = _STRICT_CPP[node.op]
        except KeyError:  # pragma: no cover
            raise KsUsageError(f"the C++ backend cannot emit {node.op.name}") from None
        return write(self, node, a)

    # -- lazy and binding constructs ---------------------------------------------------------------
    def _if(self, node: Expr) -> Step:
        cond = yield node.args[0]
        if _speculable(node):
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

    def _logic(self, node: Expr) -> Step:
        left = yield node.args[0]
        if node.args[1].size <= SPECULATE_MOST and _cannot_fail(node.args[1], set()):
            # both sides computed, as a select's: a loop with (or (lt x 0.0) (ne x x)) stays branch-free
            right = yield node.args[1]
            return self.bind(BOOL, f"({left} {'&' if node.op is Op.AND else '|'} {right})")
        result = self.fresh()
        self.line(f"bool {result} = {left};")
        self.line(f"if ({'' if node.op is Op.AND else '!'}{result}) {{")
        yield from self._assign_indented(result, node.args[1])
        self.line("}")
        return result

    def _assign_indented(self, result: str, child: Expr) -> Step:
        """``result = child;`` inside a block the caller opens and closes (a lazy branch)."""
        self.depth += 1
        value = yield child
        self.line(f"{result} = {value};")
        self.depth -= 1
        return result

    def _assert(self, node: Expr) -> Step:
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

    def _in_scope(self, name: str, atom: str, body: Expr) -> Step:
        """Emit ``body`` with the variable ``name`` bound to the C++ expression ``atom``."""
        saved = self._push(name, atom)
        value = yield body
        self._pop(name, saved)
        return value

    def _let(self, node: Expr) -> Step:
        var, rhs, body = node.args
        if self.loop_depth == 0 and rhs.op in (Op.BUILD, Op.SUMBUILD) and _has_loop(rhs.args[2]):
            value = yield from self._outlined(rhs)
        else:
            value = yield rhs
        if var.data not in body.free and _is_identifier(value):
            self.line(f"(void){value};")
        result = yield from self._in_scope(var.data, value, body)
        return result

    def _outlined(self, rhs: Expr) -> Step:
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
        scalars = _free_scalars(rhs)
        self._hoisted = {k: v for k, v in self._hoisted.items() if v[0].type not in _SCALARS}
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

    def _lam(self, node: Expr) -> Step:
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

    def _build(self, node: Expr) -> Step:
        size, var, body = node.args
        n = yield size
        self.line(f'ks::check_size({n}, "build");')
        elem = cpp_type(body.type)
        zero = zero_shaped(node)
        if zero is not None:  # a reverse pass's zero cotangent: read lazily, as every element zero
            value = yield zero
            return self.bind(node.type, f"ks::zero_like({value})")
        if body.op in (Op.CONST, Op.VAR) and var.data not in body.free:
            value = yield body
            return self.bind(node.type, f"ks::const_vec<{elem}>({n}, {value})")
        copied = _copied(var.data, body)
        if copied is not None:  # a copy of v (a gather of a cotangent): v itself where it has n elements
            value = yield copied
            return self.bind(node.type, f"ks::prefix_copy({n}, {value})")
        result = self.fresh()
        self.line(f"const {cpp_type(node.type)} {result} = ks::make_vec<{elem}>({n});")
        sums = self._row_sum(node)
        if sums is body:
            yield from self._rows_or_block(id(node), n, result, var.data, sums)
            return result
        sums_by_row = None
        if sums is not None:  # the sums first, row-wise, into a vector the element loop then reads
            sums_by_row = self.fresh()
            self.line(f"const ks::Vec<double> {sums_by_row} = ks::make_vec<double>({n});")
            yield from self._rows_or_block(id(node), n, sums_by_row, var.data, sums)
        i = self.fresh_var(var.data)
        blocked = self._blockable(node)
        if blocked is not None:  # rows' sums BLOCK_ROWS at a time (see _block_rows)
            count, blk, width = self.fresh("r"), self.fresh("blk"), self.fresh("w")
            panels = self.fresh("pk")
            self.line(f"std::int64_t {count} = 0;")
            self.line(f"ks::Vec<double> {blk};")
            self.line(f"std::int64_t {width} = 0;")
            self.line(f"ks::Vec<double> {panels};  // packed once, for every panel of rows")

        def store() -> Step:
            saved = self._push(var.data, i)
            if blocked is not None:
                yield from self._block_rows(n, i, var.data, blocked[1], (count, blk, width, panels), blocked[0])
                self._row_blocks[id(body)] = (f"{i} % {BLOCK_PANEL} < {count}", blk, f"({i} % {BLOCK_PANEL}) * {width}")
            if sums is not None:
                value = self.bind(FLOAT, f"{sums_by_row}.data[{i}]")
                self._hoisted[id(sums)] = (sums, value, self._bindings(sums))
            value = yield body
            self._row_blocks.pop(id(body), None)
            self._pop(var.data, saved)
            self.line(f"{result}.data[{i}] = {value};")
            return value

        yield from self._loop(
            n,
            i,
            var.data,
            body,
            frozenset({var.data}),
            store,
            done=sums,
            parallel=body.type.is_scalar,
            independent=True,
        )
        return result

    def _loop(
        self,
        n: str,
        i: str,
        var: str,
        body: Expr,
        varying: frozenset[str],
        emit: Callable[[], Step],
        nonempty: bool = False,
        done: Expr | None = None,
        *,
        parallel: bool = False,
        independent: bool = False,
        reduce: str | None = None,
        split: bool = False,
    ) -> Step:
        """``for`` ``i`` in [0, ``n``) around ``emit()``, which evaluates ``body`` with ``var`` bound to ``i``
        (and ``varying``, ``var`` among them, changing between iterations); what every iteration would
        compute alike is computed once before the loop (see :func:`_loop_invariants`; ``done`` is
        not looked into), inside ``if (n > 0)`` unless ``nonempty`` says the loop runs.

        An innermost loop that reads vectors of numbers at its index is emitted twice: for dense
        vectors, read through raw pointers (so that g++ vectorises it; ``reduce``, the Float
        accumulator of a sum, with ``KS_SIMD_SUM``: reassociated unless exact order), and for any
        vectors; ``independent``: iterations touch nothing in common but ``reduce``, so that the fast
        version may be marked ``omp simd``.  With ``parallel`` (independent iterations producing
        scalars, or a Float sum into ``reduce``) a loop that no other loop of the def encloses runs on threads when it is large
        (see :func:`_parallel_condition`); the OpenMP region is entered only then, the loop emitted
        twice under ``if`` (``split``: this is the parallel copy)."""
        if parallel and self.loop_depth == 0 and not split:
            # An OpenMP region costs about a microsecond to enter even when its `if` clause is false (a
            # def called in another's loop pays it at every call): the region only when it would run
            # on threads, the plain loop otherwise.
            cond = _parallel_condition(n, not _has_loop(body, done))
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
        hoisted, ranged = _loop_invariants(body, var, varying, done)
        saved = dict(self._hoisted), set(self._in_range), set(self._strided)
        guard = bool(hoisted or ranged) and not nonempty
        if guard:
            self.line(f"if ({n} > 0) {{")
            self.depth += 1
        for h in hoisted:
            atom = yield h
            self._hoisted[id(h)] = (h, atom, self._bindings(h))
        dense: dict[str, Type] = {}  # vectors of numbers read at the loop index -> element type
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
            if x.type in (FLOAT, INTEGER) and _is_identifier(v):
                dense[v] = x.type
        parallel = parallel and self.loop_depth == 0
        innermost = not _has_loop(body, done)
        cond = _parallel_condition(n, innermost)
        self.loop_depth += 1
        if dense and innermost:
            plain = " && ".join(f"{v}.plain()" for v in dense)
            self.line(f"if ({plain}) {{")
            self.depth += 1
            saved_dense = dict(self._dense)
            for v, t in dense.items():
                ptr = self.fresh("d")
                self.line(f"const {cpp_type(t)}* __restrict {ptr} = {v}.data;")
                self._dense[(i, v)] = ptr
            simd = independent and _cannot_fail(body, {id(x) for x in ranged})
            if parallel and simd:
                self.line(f"KS_PAR_SUM({reduce}, {cond})" if reduce else f"KS_PAR_FOR_SIMD({cond})")
                yield from self._plain_for(n, i, emit)
            elif parallel:
                yield from self._parallel_for(n, i, body, emit, cond, reduce)
            else:
                if simd:
                    self.line(f"KS_SIMD_SUM({reduce})" if reduce else "KS_SIMD")
                yield from self._plain_for(n, i, emit)
            self._dense = saved_dense
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
        if parallel:
            yield from self._parallel_for(n, i, body, emit, cond, reduce)
        else:
            yield from self._plain_for(n, i, emit)
        if dense and innermost:
            self.depth -= 1
            self.line("}")
        self.loop_depth -= 1
        if guard:
            self.depth -= 1
            self.line("}")
        self._hoisted, self._in_range, self._strided = saved
        return i

    def _plain_for(self, n: str, i: str, emit: Callable[[], Step]) -> Step:
        self.line(f"for (std::int64_t {i} = 0; {i} < {n}; ++{i}) {{")
        self.depth += 1
        yield from emit()
        self.depth -= 1
        self.line("}")
        return i

    def _parallel_for(
        self, n: str, i: str, body: Expr, emit: Callable[[], Step], cond: str, reduce: str | None
    ) -> Step:
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

    def _row_sum(self, node: Expr) -> Expr | None:
        """The ``(sumbuild m (lam j e))`` of ``(build n (lam k body))`` that is better computed for
        every ``k`` at once with ``j`` outside (see Loops): one that ``body`` evaluates whatever the
        values (``body`` itself, or inside arithmetic and lets around it), ``e`` a Float depending on
        ``k``, allocating nothing, walking no column, and depending on nothing ``body`` binds."""
        _, var, body = node.args
        k = var.data
        bound: dict[str, int] = {}  # variables bound inside body -> how many of its lets are in scope
        found: list[Expr] = []

        def visit(item: Expr) -> bool:
            if found:
                return False
            if (
                item.op is Op.SUMBUILD
                and item.type is FLOAT
                and self._sums_rows(item, k)
                and not any(bound.get(x) for x in item.free)
            ):
                found.append(item)
                return False
            return True

        _walk_evaluated(body, bound, visit)
        return found[0] if found else None

    def _sums_rows(self, sums: Expr, k: str) -> bool:
        size, j, e = sums.args
        return (
            k != j.data
            and k not in size.free
            and k in e.free
            and not self.may_allocate(e)
            and not _walks_column(e, j.data, k)
        )

    def _sum_rows(self, n: str, result: str, k: str, sums: Expr) -> Step:
        """``result[k] = (sumbuild m (lam j e))`` for ``k`` in [0, ``n``), written as ``result[k] += e``
        in a ``k`` loop inside the ``j`` loop: the same additions in the same order per element."""
        size, j, e = sums.args
        self.line(f"if ({n} > 0) {{")
        self.depth += 1
        m = yield size  # the same for every k
        self.line(f'ks::check_size({m}, "sumbuild");')
        kk = self.fresh_var(k)
        self.line(f"for (std::int64_t {kk} = 0; {kk} < {n}; ++{kk}) {result}.data[{kk}] = 0.0;")
        jj = self.fresh_var(j.data)

        def add_term() -> Step:
            value = yield from self._in_scope(k, kk, e)
            self.line(f"{result}.data[{kk}] += {value};")
            return value

        def row() -> Step:
            saved = self._push(j.data, jj)
            yield from self._loop(n, kk, k, e, frozenset({k}), add_term, nonempty=True, independent=True)
            self._pop(j.data, saved)
            return jj

        yield from self._loop(m, jj, j.data, e, frozenset({j.data, k}), row)
        self.depth -= 1
        self.line("}")
        return result

    def _rows_or_block(self, key: int, n: str, result: str, k: str, sums: Expr) -> Step:
        """``result[k]`` = the row sums of :meth:`_sum_rows`, copied from the block that an enclosing
        blocked loop nest computed for this build (``key``) where it did."""
        block = self._row_blocks.get(key)
        if block is None:
            yield from self._sum_rows(n, result, k, sums)
            return result
        ok, blk, offset = block
        self.line(f"if ({ok}) {{")
        self.line(f"    std::copy_n({blk}.data + {offset}, {n}, {result}.data);")
        self.line("} else {")
        self.depth += 1
        yield from self._sum_rows(n, result, k, sums)
        self.depth -= 1
        self.line("}")
        return result

    def _blockable(self, node: Expr) -> tuple[Expr, Expr] | None:
        """For ``(build n (lam i (build m (lam k body))))`` whose inner build is computed with row sums
        ``(sumbuild p (lam j e))`` (:meth:`_row_sum`) and whose ``e`` depends on ``i`` (a matrix
        product): the inner build and that sum, which :meth:`_block_rows` computes for several ``i``
        at once; otherwise None."""
        _, var, inner = node.args
        if inner.op is not Op.BUILD:
            return None
        sums = self._row_sum(inner)
        if sums is None:
            return None
        i, m, k = var.data, inner.args[0], inner.args[1].data
        p, j, e = sums.args
        if len({i, j.data, k}) < 3 or i in m.free or i in p.free or i not in e.free or _has_loop(e):
            return None
        return inner, sums

    def _hoist(self, exprs: list[Expr]) -> Step:
        for h in exprs:
            atom = yield h
            self._hoisted[id(h)] = (h, atom, self._bindings(h))
        return ""

    def _block_rows(self, n: str, i: str, ivar: str, sums: Expr, block: tuple[str, str, str, str], inner: Expr) -> Step:
        """At every ``i`` that is a multiple of BLOCK_PANEL, the row sums of :meth:`_row_sum` for the
        next ``count`` rows (BLOCK_PANEL, or fewer at the end, a multiple of BLOCK_ROWS) into ``blk``
        (row after row, ``w`` columns each); the rows past ``count`` compute their own.

        A register-blocked loop nest (a matrix product's tiling): the elements of the vectors that ``e``
        reads at the column index and that depend on the term ``j`` only (the right-hand matrix's rows)
        are copied once, by the first panel, into ``pk``: a contiguous ``p`` x BLOCK_COLS panel per tile
        of BLOCK_COLS columns (:meth:`_pack`: each row read once, in order; copying a tile's columns
        from every row again for every panel of rows cost a sixth of a Llama MLP gradient's nests).
        Every tile has BLOCK_COLS columns (the last ends at ``m``, overlapping the one before, and
        stores only its new columns; ``m`` < BLOCK_COLS: row-wise), so the nest is written once.
        Then for each tile and each BLOCK_ROWS rows, BLOCK_ROWS x BLOCK_COLS accumulators stay in
        registers while ``j`` runs over the terms, so each element read serves BLOCK_ROWS rows.  Every
        accumulator starts at +0.0 and adds its terms in the order of ``j``, as the row-wise loop does,
        so the sums are the same to the bit (under exact order; otherwise a product term is one fused
        multiply-add, ``KS_MADD``, where the CPU has it).  The vectors read through pointers are checked
        dense and long enough first (``ks::require_dense``); anything that fails or is not dense (an
        error, a lazy vector) throws, and every row of the panel then computes its sums as before, in
        its own iteration, so errors are those of the row-wise code."""
        count, blk, width, panels = block
        rows, cols, panel = BLOCK_ROWS, BLOCK_COLS, BLOCK_PANEL
        m_expr, k = inner.args[0], inner.args[1].data
        p_expr, jv, e = sums.args
        e = inline_term_lets(e)  # (mul x y) and B's reads written out: a fused multiply-add, packed panels
        j = jv.data
        saved_hoisted, saved_dense, saved_reads = dict(self._hoisted), dict(self._dense), dict(self._reads)
        per_row, row_ranged = _loop_invariants(e, j, frozenset({j, k}))  # depend on i (or nothing)
        per_row_term, ranged = _loop_invariants(e, k, frozenset({k}))  # on i and j
        dense = [x for x in ranged if x.type in (FLOAT, INTEGER)]
        packed = [
            x for x in dense if j in x.args[1].free and ivar not in x.args[1].free and _only_read(e, x.args[1], k)
        ]
        direct = [x for x in dense if x not in packed]
        row_dense = [x for x in row_ranged if x.type in (FLOAT, INTEGER)]  # (index j v), v per row
        skip = {id(x) for x in (*per_row, *per_row_term, *dense)}
        simd = _cannot_fail(e, skip)

        self.line(f"if ({i} % {panel} == 0) {{")
        self.depth += 1
        self.line(f"{count} = 0;")
        self.line(f"if ({n} - {i} >= {rows}) try {{")
        self.depth += 1
        m = yield m_expr
        p = yield p_expr
        self.line(f'ks::check_size({p}, "sumbuild");')
        self.line(
            f"if ({m} < {cols} || {m} > (std::int64_t(1) << 40) || {p} < 1 || {p} > (std::int64_t(1) << 40) / {m})"
            " throw ks::Fallback();"  # (the packed copy has m * p elements; every tile has BLOCK_COLS columns)
        )
        rows_here = self.fresh("r")
        self.line(f"const std::int64_t {rows_here} = std::min<std::int64_t>({panel}, {n} - {i}) / {rows} * {rows};")
        self.line(f"{width} = {m};")
        self.line(f"{blk} = ks::make_vec<double>({rows_here} * {m});")
        base = dict(self._hoisted)
        tiles = self.fresh("nt")
        self.line(f"const std::int64_t {tiles} = ({m} + {cols} - 1) / {cols};")
        if packed:
            yield from self._pack(packed, panels, (m, p, j, tiles), base)
        packs = [self.fresh("pack") for _ in packed]
        kb = self.fresh("c")
        self.line(f"for (std::int64_t {kb} = 0; {kb} < {m}; {kb} += {cols}) {{")
        self.depth += 1
        tile = self.fresh("n")  # the last tile ends at m, overlapping the one before (written once)
        self.line(f"const std::int64_t {tile} = std::min<std::int64_t>({kb}, {m} - {cols});")
        for q, pack in enumerate(packs):  # this tile's columns of the rows that every row reads: p x cols
            self.line(
                f"const double* __restrict {pack} = {panels}.data + ({q} * {tiles} + {kb} / {cols}) * {p} * {cols};"
            )
        rb = self.fresh("rb")
        self.line(f"for (std::int64_t {rb} = 0; {rb} < {rows_here}; {rb} += {rows}) {{")
        self.depth += 1
        row_atoms = []
        row_states = []
        for r in range(rows):
            row_atoms.append(self.fresh_var(ivar))
            self.line(f"const std::int64_t {row_atoms[r]} = {i} + {rb} + {r};")
        row_vectors: list[list[str]] = []
        for r in range(rows):
            self._hoisted = dict(base)
            saved_i = self._push(ivar, row_atoms[r])
            yield from self._hoist(per_row)
            vs = []
            for x in row_dense:
                vs.append((yield x.args[1]))
                self.line(f"ks::require_dense({p}, {vs[-1]});")
            for x in direct:
                if j not in x.args[1].free:
                    v = yield x.args[1]
                    self.line(f"ks::require_dense({m}, {v});")
            row_vectors.append(vs)
            self._pop(ivar, saved_i)
            row_states.append(self._hoisted)
        row_info = (row_atoms, row_states, base, row_vectors)
        pack_of = [(x.args[1], pack) for x, pack in zip(packed, packs, strict=True)]
        if any(j in x.args[1].free for x in direct):  # vectors per row and term: checked first
            yield from self._block_terms(
                p, j, ivar, row_info, per_row_term, direct, pack_of, lambda r, vs, jj: self._require(m, vs)
            )
        acc = self.fresh("acc")
        self.line(f"double {acc}[{rows}][{cols}] = {{}};")

        def accumulate(r: int, vectors: list[str], jj: str, bound: str) -> Step:
            u, ku = self.fresh("u"), self.fresh_var(k)
            for x, v in zip(direct, vectors, strict=True):
                if _is_identifier(v):
                    ptr = self.fresh("d")
                    self.line(f"const {cpp_type(x.type)}* __restrict {ptr} = {v}.data;")
                    self._dense[(ku, v)] = ptr
            for pack in packs:
                self._reads[(ku, pack)] = f"{pack}[{jj} * {cols} + {u}]"
            if simd:
                self.line("KS_SIMD")
            self.line(f"for (std::int64_t {u} = 0; {u} < {bound}; ++{u}) {{")
            self.depth += 1
            self.line(f"[[maybe_unused]] const std::int64_t {ku} = {tile} + {u};")
            saved_k = self._push(k, ku)
            cell = f"{acc}[{r}][{u}]"
            if e.op is Op.MUL and e.args[0].type is FLOAT and e.args[1].type is FLOAT:
                left = yield e.args[0]
                right = yield e.args[1]
                self.line(f"{cell} = KS_MADD({cell}, {left}, {right});")
            else:
                value = yield e
                self.line(f"{cell} += {value};")
            self._pop(k, saved_k)
            self.depth -= 1
            self.line("}")
            return ""

        # a whole tile always (a constant trip count, the accumulators in registers): the code once
        yield from self._block_terms(
            p, j, ivar, row_info, per_row_term, direct, pack_of, functools.partial(accumulate, bound=str(cols))
        )
        for r in range(rows):  # a column's sum is the same whichever tile computes it: stored once
            self.line(
                f"for (std::int64_t u = {kb} - {tile}; u < {cols}; ++u)"
                f" {blk}.data[({rb} + {r}) * {m} + {tile} + u] = {acc}[{r}][u];"
            )
        self.depth -= 1
        self.line("}")
        self.depth -= 1
        self.line("}")
        self.line(f"{count} = {rows_here};")
        self.depth -= 1
        self.line("} catch (...) {")
        self.line(f"    {count} = 0;  // the rows compute their own sums, failing as they would")
        self.line("}")
        self.depth -= 1
        self.line("}")
        self._hoisted, self._dense, self._reads = saved_hoisted, saved_dense, saved_reads
        return count

    def _pack(self, packed: list[Expr], panels: str, sizes: tuple[str, str, str, str], base: _Hoisted) -> Step:
        """Unless an earlier panel of rows did (they all read the same), copy the vectors of ``packed``
        (``(index k v)`` with ``v`` depending on the term ``j`` only: the right-hand matrix's rows) into
        ``panels``: for each vector and each tile of BLOCK_COLS columns, its ``p`` x BLOCK_COLS
        elements (the last tile's end at ``m``), contiguous.  Each row is read once, in order; the copy is kept only when complete
        (a panel that fails leaves it for the next)."""
        m, p, j, tiles = sizes
        cols = BLOCK_COLS
        self.line(f"if ({panels}.n == 0) {{")
        self.depth += 1
        fill = self.fresh("pack")
        self.line(f"const ks::Vec<double> {fill} = ks::make_vec<double>({len(packed)} * {tiles} * {p} * {cols});")
        jj = self.fresh_var(j)
        self.line(f"for (std::int64_t {jj} = 0; {jj} < {p}; ++{jj}) {{")
        self.depth += 1
        saved_j = self._push(j, jj)
        self._hoisted = dict(base)
        for q, x in enumerate(packed):
            v = yield x.args[1]
            self.line(f"ks::require_dense({m}, {v});")
            self.line(f"for (std::int64_t c = 0; c < {m}; c += {cols}) {{")
            self.line(
                f"    double* __restrict to = {fill}.data + (({q} * {tiles} + c / {cols}) * {p} + {jj}) * {cols};"
            )
            self.line(f"    const double* __restrict from = {v}.data + std::min<std::int64_t>(c, {m} - {cols});")
            self.line(f"    for (std::int64_t u = 0; u < {cols}; ++u) to[u] = from[u];")
            self.line("}")
        self._pop(j, saved_j)
        self.depth -= 1
        self.line("}")
        self.line(f"{panels} = {fill};")
        self.depth -= 1
        self.line("}")
        return panels

    def _require(self, m: str, vectors: list[str]) -> Step:
        for v in vectors:
            self.line(f"ks::require_dense({m}, {v});")
        return ""
        yield  # a generator

    def _block_terms(
        self,
        p: str,
        j: str,
        ivar: str,
        rows: tuple[list[str], list[_Hoisted], _Hoisted, list[list[str]]],
        per_row_term: list[Expr],
        direct: list[Expr],
        packed: list[tuple[Expr, str]],
        body: Callable[[int, list[str], str], Step],
    ) -> Step:
        """``for j`` in [0, ``p``): for each row (``rows``: its index atom, what was computed for it, what
        was computed before, its vectors checked to be read at ``j``), what depends on the row and ``j`` (the vectors of ``packed`` are their
        panels, not computed), the vectors of ``direct``, then ``body(r, vectors, j's atom)``."""
        row_atoms, row_states, base, row_vectors = rows
        jj = self.fresh_var(j)
        self.line(f"for (std::int64_t {jj} = 0; {jj} < {p}; ++{jj}) {{")
        self.depth += 1
        saved_j = self._push(j, jj)
        saved_dense, saved_reads = dict(self._dense), dict(self._reads)
        for r, row in enumerate(row_atoms):
            self._hoisted = {**base, **row_states[r]}
            saved_i = self._push(ivar, row)
            for v, pack in packed:
                self._hoisted[id(v)] = (v, pack, self._bindings(v))
            for vec_atom in row_vectors[r]:  # checked dense and long enough for every term
                if _is_identifier(vec_atom):
                    self._reads[(jj, vec_atom)] = f"{vec_atom}.data[{jj}]"
            yield from self._hoist(per_row_term)
            vectors = []
            for x in direct:
                vectors.append((yield x.args[1]))
            yield from body(r, vectors, jj)
            self._pop(ivar, saved_i)
            self._dense, self._reads = dict(saved_dense), dict(saved_reads)
        self._pop(j, saved_j)
        self.depth -= 1
        self.line("}")
        return jj

    def _sumbuild(self, node: Expr) -> Step:
        size, var, body = node.args
        t = node.type
        n = yield size
        self.line(f'ks::check_size({n}, "sumbuild");')
        acc = self.fresh()
        self.line(f"{cpp_type(t)} {acc}{{}};")
        scalar = t is FLOAT or t is INTEGER
        skipped = self.fresh("s")
        if not scalar:
            self.line(f"if ({n} == 0) {acc} = ks::zero_of<{cpp_type(t)}>({c_string(str(t))});")
            self.line(f"bool {skipped} = false;")
        i = self.fresh_var(var.data)
        reset = self.may_allocate(body)
        mark = self.fresh("m")

        # A body with loops in it adds its parts straight into the accumulator (no full-size value of the
        # iteration made and then added; the first iteration assigns them, flagged at run time, so that
        # the body is written once): see _accumulate.  Not in exact order, whose sums of parts would
        # associate otherwise.
        direct = not scalar and not self.exact_order and _has_loop(body)

        def accumulate() -> Step:
            if reset:
                self.line(f"const ks::Arena::Mark {mark} = ks::arena().mark();")
            if direct:
                first = self.fresh("f")
                self.line(f"const bool {first} = {i} == 0;")
                saved = self._push(var.data, i)
                yield from self._accumulate(acc, body, skipped, {}, first)
                self._pop(var.data, saved)
                if reset:  # the first iteration's memory is the accumulator's: release only after later ones
                    self.line(f"if (!{first}) ks::arena().reset({mark});")
                return acc
            value = yield from self._in_scope(var.data, i, body)
            release = f" ks::arena().reset({mark});" if reset else ""
            if t is FLOAT:
                self.line(f"{acc} += {value};{release}")
            elif t is INTEGER:
                self.line(f"{acc} = ks::add_i({acc}, {value});{release}")
            else:
                # the first iteration's memory is the accumulator's: release only after later ones
                self.line(f"if ({i} == 0) {{")
                self.line(f"    {acc} = ks::copy_dense({value});")
                self.line("} else {")
                self.line(f"    ks::add_inplace({acc}, {value}, {skipped});{release}")
                self.line("}")
            return value

        reduce = acc if t is FLOAT else None
        yield from self._loop(
            n,
            i,
            var.data,
            body,
            frozenset({var.data}),
            accumulate,
            parallel=t is FLOAT,
            independent=t is FLOAT,
            reduce=reduce,
        )
        if not scalar:
            self.line(f"if ({skipped}) ks::normalise_zeros({acc});")
        return acc

    # -- adding a value into an accumulator, part by part ------------------------------------------
    def _accumulate(self, dest: str, e: Expr, skipped: str, deferred: dict[str, Expr], first: str | None) -> Step:
        """``dest += e`` for a dense ``dest`` (a sumbuild's accumulator or a part of it), without making
        ``e``'s value where it is a loop: a ``build`` adds each element into its element of ``dest``, a
        ``sumbuild`` each term into ``dest``, a ``deltaVec`` its element into one element, a ``tuple``
        each part, an ``if`` its branch; a ``let`` whose variable is a part of the result (used nowhere else) is added where
        that part is (``deferred``).  Float sums are reassociated (never under exact order, where
        the caller does not come here); the same sizes are checked as ``ks::add_inplace`` checks.

        Where the C++ Bool ``first`` holds (None: never), ``dest`` is the accumulator's first value
        instead: each part is assigned as ``ks::copy_dense`` of the value would make it, a build's
        vector allocated, an inner sum started as its value starts (+0.0, or its first term), so that
        one body serves every iteration."""
        op = e.op
        found = self._hoisted.get(id(e))
        if found is not None and found[2] == self._bindings(e):
            op = Op.CONST  # computed before the loop: added as a value
        elif op is Op.BUILD and self._blockable(e) is not None:
            # a matrix product (a batch's part of dW summed over the batch): made by the blocked nest as
            # a value, then added; taken apart here it would be scalar loops walking a column
            op = Op.CONST
        if op is Op.LET:
            var, rhs, body = e.args
            if _deferrable(var.data, rhs, body):
                yield from self._accumulate(dest, body, skipped, {**deferred, var.data: rhs}, first)
                return dest
            value = yield rhs
            if var.data not in body.free and _is_identifier(value):
                self.line(f"(void){value};")
            saved = self._push(var.data, value)
            yield from self._accumulate(dest, body, skipped, deferred, first)
            self._pop(var.data, saved)
            return dest
        if op is Op.VAR and e.data in deferred:
            yield from self._accumulate(dest, deferred[e.data], skipped, {}, first)
            return dest
        if op is Op.TUPLE:
            for slot, piece in enumerate(e.args):
                yield from self._accumulate(f"std::get<{slot}>({dest})", piece, skipped, deferred, first)
            return dest
        loop = op is Op.BUILD or op is Op.SUMBUILD
        if loop and e.args[1].data in e.args[2].free and zero_shaped(e) is None:  # a zero: added lazily
            yield from self._accumulate_loop(dest, e, skipped, first)
            return dest
        if op is Op.IF:
            cond = yield e.args[0]
            self.line(f"if ({cond}) {{")
            self.depth += 1
            yield from self._accumulate(dest, e.args[1], skipped, {}, first)
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            yield from self._accumulate(dest, e.args[2], skipped, {}, first)
            self.depth -= 1
            self.line("}")
            return dest
        if op is Op.DELTAVEC:
            n = yield e.args[0]
            k = yield e.args[1]
            value = yield e.args[2]
            if first is not None:
                delta = f"ks::delta_vec<{cpp_type(e.type.elem)}>({n}, {k}, {value})"
                self.line(f"if ({first}) {dest} = ks::copy_dense({delta}); else {{")
                self.depth += 1
            self.line(f"if ({dest}.n != {n}) ks::size_mismatch({dest}.n, {n});")
            inside = f"static_cast<std::uint64_t>({k}) < static_cast<std::uint64_t>({n})"
            self.line(f"if ({inside}) {{")
            self.depth += 1
            self._add_into(f"{dest}.data[{k}]", e.type.elem, value, skipped, None)
            self.depth -= 1
            self.line("}")
            self.line(f"if ({n} > 1 || !({inside})) {skipped} = true;")
            if first is not None:
                self.depth -= 1
                self.line("}")
            return dest
        value = yield e
        self._add_into(dest, e.type, value, skipped, first)
        return dest

    def _accumulate_loop(self, dest: str, e: Expr, skipped: str, first: str | None) -> Step:
        """:meth:`_accumulate` of a ``build`` (element by element) or a ``sumbuild`` (term by term)."""
        size, var, body = e.args
        n = yield size
        build = e.op is Op.BUILD
        t = cpp_type(e.type)
        self.line(f'ks::check_size({n}, "{"build" if build else "sumbuild"}");')
        own = None  # a vector sum's skipped zeros where dest is its first value: they are its own
        if build:
            check = f"if ({dest}.n != {n}) ks::size_mismatch({dest}.n, {n});"
            if first is None:
                self.line(check)
            else:
                self.line(f"if ({first}) {dest} = ks::make_vec<{cpp_type(e.type.elem)}>({n}); else {check}")
        elif e.type.is_scalar:
            if first is not None:  # the value starts at +0.0 (or 0) and adds every term in order
                self.line(f"if ({first}) {dest} = {t}{{}};")
                self.line(f"else if ({n} == 0) {skipped} = true;")
            else:
                self.line(f"if ({n} == 0) {skipped} = true;")  # the sum of nothing is +0.0
        else:
            zero = f"ks::zero_of<{t}>({c_string(str(e.type))})"
            if first is None:
                self.line(f"if ({n} == 0) (void){zero};")
            else:
                self.line(f"if ({n} == 0) {{ if ({first}) {dest} = {zero}; else (void){zero}; }}")
                own = self.fresh("s")
                self.line(f"bool {own} = false;")
        i = self.fresh_var(var.data)
        reset = self.may_allocate(body)
        mark = self.fresh("m")
        part = f"{dest}.data[{i}]" if build else dest

        def each() -> Step:
            if reset:
                self.line(f"const ks::Arena::Mark {mark} = ks::arena().mark();")
            inner = first if build else None
            if own is not None:  # the first term is the first value
                inner = self.fresh("f")
                self.line(f"const bool {inner} = {first} && {i} == 0;")
            saved = self._push(var.data, i)
            yield from self._accumulate(part, body, own or skipped, {}, inner)
            self._pop(var.data, saved)
            if reset and first is not None:  # the first value's memory is the accumulator's
                self.line(f"if (!{first}) ks::arena().reset({mark});")
            elif reset:
                self.line(f"ks::arena().reset({mark});")
            return dest

        yield from self._loop(n, i, var.data, body, frozenset({var.data}), each)
        if own is not None:  # zeros skipped in dest's own terms: as the sum's value would be normalised
            self.line(f"if ({own}) {{ if ({first}) ks::normalise_zeros({dest}); else {skipped} = true; }}")
        return dest

    def _add_into(self, dest: str, t: Type, value: str, skipped: str, first: str | None) -> None:
        if first is not None and t is FLOAT:
            # a select, which g++ vectorises (LayerNorm's dgamma: 1.3x slower as an if-else); only the
            # chosen operand is evaluated, so the first iteration never reads the fresh element
            self.line(f"{dest} = {first} ? {value} : {dest} + {value};")
            return
        if first is not None and t.is_scalar:
            self.line(f"if ({first}) {dest} = {value}; else")
            self.depth += 1
        elif first is not None:
            self.line(f"if ({first}) {dest} = ks::copy_dense({value}); else")
            self.depth += 1
        if t is FLOAT:
            self.line(f"{dest} += {value};")
        elif t is INTEGER:
            self.line(f"{dest} = ks::add_i({dest}, {value});")
        else:
            self.line(f"ks::add_inplace({dest}, {value}, {skipped});")
        if first is not None:
            self.depth -= 1


def _deferrable(name: str, rhs: Expr, body: Expr) -> bool:
    """Whether ``let name = rhs`` in an accumulation may be added where ``body`` (lets, then a tuple
    of parts or one part) has ``name`` as a part: its only use, no let between rebinding a variable
    of ``rhs``, and ``rhs`` a loop, a branch, a deltaVec or a tuple (what is worth not making)."""
    if rhs.op not in (Op.BUILD, Op.SUMBUILD, Op.LET, Op.IF, Op.DELTAVEC, Op.TUPLE):
        return False
    node = body
    while node.op is Op.LET:
        var, value, node = node.args
        if name in value.free or var.data in rhs.free or var.data == name:
            return False
    parts = node.args if node.op is Op.TUPLE else (node,)
    uses = sum(1 for p in parts if p.op is Op.VAR and p.data == name)
    return uses == 1 and not any(name in p.free for p in parts if not (p.op is Op.VAR and p.data == name))


_LAZY = {
    Op.IF: _FunctionEmitter._if,
    Op.AND: _FunctionEmitter._logic,
    Op.OR: _FunctionEmitter._logic,
    Op.ASSERT: _FunctionEmitter._assert,
    Op.LET: _FunctionEmitter._let,
    Op.LAM: _FunctionEmitter._lam,
    Op.BUILD: _FunctionEmitter._build,
    Op.SUMBUILD: _FunctionEmitter._sumbuild,
}

assert set(BINDERS) <= set(_LAZY)

# -- strict ops: the C++ of an op over its arguments' atoms ------------------------------------------
CppWriter = Callable[[_FunctionEmitter, Expr, list[str]], str]


def _arith_cpp(em: _FunctionEmitter, node: Expr, a: list[str]) -> str:
    op = node.op
    lt, rt = node.args[0].type, node.args[1].type
    if lt is FLOAT and rt is FLOAT:
        return f"({a[0]} {_ARITH_SYMBOL[op]} {a[1]})"
    if lt is INTEGER and rt is INTEGER:
        return f"ks::{_ARITH_NAME[op]}_i({a[0]}, {a[1]})"
    return f"ks::{_ARITH_NAME[op]}({a[0]}, {a[1]})"


def _neg_cpp(em: _FunctionEmitter, node: Expr, a: list[str]) -> str:
    if node.type is FLOAT:
        return f"(-{a[0]})"
    return f"ks::neg_i({a[0]})" if node.type is INTEGER else f"ks::neg({a[0]})"


def _whole_exponent(e: Expr) -> int | None:
    """The value of a constant exponent 2, 3 or 4 (a literal, or :func:`_literal_sum`), else None."""
    value = e.data if e.op is Op.CONST else _literal_sum(e)
    return int(value) if type(value) is float and value in (2.0, 3.0, 4.0) else None


def _pow_cpp(em: _FunctionEmitter, node: Expr, a: list[str]) -> str:
    # x^2..x^4 as products (GPT-2's gelu cubes every element; a call of pow costs ~20 multiplications).
    # Products round up to twice where C's pow rounds once, so not under exact order (bit-identical
    # to the interpreter's math.pow there).
    n = None if em.exact_order else _whole_exponent(node.args[1])
    return f"ks::pow_whole<{n}>({a[0]})" if n is not None else f"ks::math::pow({a[0]}, {a[1]})"


def _index_cpp(em: _FunctionEmitter, node: Expr, a: list[str]) -> str:
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


def _call_cpp(em: _FunctionEmitter, node: Expr, a: list[str]) -> str:
    callee: Callee = node.data
    if callee.kind is CalleeKind.DEF:
        return f"{def_symbol(callee.name)}({', '.join(a)})"
    template = native_template(callee)
    if template == NATIVE_CPP["pow"][0][2]:  # the edef'd pow is C's, as Op.POW's
        return _pow_cpp(em, node, a)
    return template.format(*a)


def _compare_cpp(name: str) -> CppWriter:
    return lambda em, node, a: f"ks::{name}({a[0]}, {a[1]})"


def _float_fn_cpp(fn: str) -> CppWriter:
    return lambda em, node, a: f"{fn}({a[0]})"


#: Ops whose arguments are all computed first (the others are in :data:`_LAZY`): op -> its C++.
_STRICT_CPP: dict[Op, CppWriter] = {
    **dict.fromkeys(_ARITH_SYMBOL, _arith_cpp),
    Op.NEG: _neg_cpp,
    **{op: _compare_cpp(name) for op, name in _COMPARE.items()},
    **{op: _float_fn_cpp(fn) for op, fn in _FLOAT_FN.items()},
    Op.POW: _pow_cpp,
    Op.ABS: lambda em, node, a: f"std::fabs({a[0]})" if node.type is FLOAT else f"ks::abs_i({a[0]})",
    Op.MAX: lambda em, node, a: f"ks::max_{'f' if node.type is FLOAT else 'i'}({a[0]}, {a[1]})",
    Op.TO_FLOAT: lambda em, node, a: f"static_cast<double>({a[0]})",
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

assert not set(_STRICT_CPP) & set(_LAZY)


# -- defs ------------------------------------------------------------------------------------------
def _signature(d: Def) -> str:
    params = ", ".join(_param_decl(p.type, f"p{k}_{escape_name(p.name)}") for k, p in enumerate(d.params))
    return f"{cpp_type(d.ret_type)} {def_symbol(d.name)}({params})"


def _size_bindings(d: Def, em: _FunctionEmitter) -> None:
    """Bind the size variables of sized vector parameters, checking that they agree (as the
    interpreter's ``_bind_sizes`` does)."""
    names = list(d.size_vars)
    if not names:
        return
    slots: dict[str, tuple[str, str]] = {}
    for k, name in enumerate(names):
        slot, have = f"z{k}_{escape_name(name)}", f"z{k}_set"
        em.line(f"std::int64_t {slot} = 0;")
        em.line(f"bool {have} = false;")
        slots[name] = (slot, have)

    def walk(tree: SizeTree, value: str, depth: int) -> None:
        if isinstance(tree, VecSizes):
            if tree.name is not None:
                slot, have = slots[tree.name]
                em.line(f"ks::bind_size({slot}, {have}, ks::size({value}));")
            if tree.elem is not None:
                k = f"k{depth}_{em.fresh('')}"
                em.line(f"for (std::int64_t {k} = 0; {k} < ks::size({value}); ++{k}) {{")
                em.depth += 1
                e = em.fresh("e")
                em.line(f"const auto {e} = {value}.get({k});")
                walk(tree.elem, e, depth + 1)
                em.depth -= 1
                em.line("}")
        elif isinstance(tree, TupleSizes):
            for j, part in enumerate(tree.parts):
                if part is not None:
                    walk(part, f"std::get<{j}>({value})", depth + 1)

    for k, p in enumerate(d.params):
        if p.sizes is not None:
            walk(p.sizes, f"p{k}_{escape_name(p.name)}", 0)
    for name in names:
        slot, have = slots[name]
        if name in d.body.free:
            em.line(f'if (!{have}) ks::fail("a vector size is unknown: its vector is empty");')
        em.env[name] = slot


_SCALARS = (FLOAT, INTEGER, BOOL)


def _free_scalars(e: Expr) -> list[tuple[str, Type]]:
    """The free variables of ``e`` that are Floats, Integers or Bools, with their types, by name."""
    found: dict[str, Type] = {}
    for node in distinct_nodes(e):
        if node.op is Op.VAR and node.data in e.free and node.type in _SCALARS:
            found[node.data] = node.type
    return sorted(found.items())


def emit_def(d: Def, *, exact_order: bool = False) -> str:
    """The C++ definition of one def (its products first put in the blocked nest's shape,
    :func:`cpp_backend.products.canonical_products`; ``exact_order``: only where every sum stays the
    same to the bit)."""
    env = {p.name: f"p{k}_{escape_name(p.name)}" for k, p in enumerate(d.params)}
    em = _FunctionEmitter(env, exact_order=exact_order)
    _size_bindings(d, em)
    result = em.body(inline_index_lets(canonical_products(d.body, exact_order=exact_order)))
    em.line(f"return {result};")
    return "\n".join([_signature(d) + " {", *em.lines, "}"])


def selected_defs(program: Program, defs: Iterable[str] | None = None) -> list[Def]:
    """The defs named (all if ``None``) and every def they call, in program order."""
    if defs is None:
        return list(program.defs.values())
    wanted: set[str] = set()
    for name in defs:
        if name not in program.defs:
            raise KsUsageError(f"no def named '{name}'")
        wanted.update(d.name for d in program.closure(name))
    return [d for d in program.defs.values() if d.name in wanted]


def emit_program(
    program: Program, defs: Iterable[str] | None = None, *, include_runtime: bool = True, exact_order: bool = False
) -> str:
    """C++17 source of the defs of ``program`` (those named in ``defs`` and what they call, or all).

    With ``include_runtime`` (the default) the runtime header is inlined, so the source stands alone;
    otherwise it starts with ``#include "runtime.h"``.  With ``exact_order`` it defines
    ``KS_EXACT_ORDER`` first: Float sums add in index order (bit-identical to the interpreter) even
    when compiled with ``-fopenmp``.  Raises KsUsageError for what the backend does not support (an
    edef with no C++ meaning, vectors of functions).
    """
    chosen = selected_defs(program, defs)
    parts = [
        "// C++17 generated from a Knossos program by cpp_backend.emit; compile with",
        "// g++ -O3 -std=c++17 -ffp-contract=off -march=native -fopenmp (without -fopenmp: one thread, sums in order)",
        "",
    ]
    if exact_order:
        parts += ["#define KS_EXACT_ORDER 1  // Float sums in index order, as the interpreter's", ""]
    if include_runtime:
        inlined = runtime_source().replace("#pragma once\n", "", 1)  # a main file must not say it
        parts += [RUNTIME_BEGIN, inlined, RUNTIME_END, ""]
    else:
        parts += ['#include "runtime.h"', ""]
    parts += [_signature(d) + ";" for d in chosen]
    parts.append("")
    parts += [emit_def(d, exact_order=exact_order) + "\n" for d in chosen]
    return "\n".join(parts)


__all__ = [
    "NATIVE_CPP",
    "c_string",
    "cpp_type",
    "def_symbol",
    "emit_def",
    "emit_program",
    "escape_name",
    "float_literal",
    "int_literal",
    "runtime_source",
    "selected_defs",
    "unescape_name",
]
