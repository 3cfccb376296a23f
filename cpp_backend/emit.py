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
                           of :mod:`knossos.natives` (:data:`cpp_backend.native_cpp.NATIVE_CPP`)
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
``RowProducts._block_rows`` in :mod:`cpp_backend.emit_rows`: the same additions in the same order per element).  Products written
otherwise (an operand read down a column, a sum of vectors, one-hots accumulated over a batch) are
first rewritten into that shape by :mod:`cpp_backend.products` (transposed copies, which keep every sum
to the bit; interchanges of a sum of vectors with its builds, which are not done under
``KS_EXACT_ORDER``: a sum of terms all -0.0 becomes +0.0).  Errors: the same calls fail, possibly with
another of their errors first.

Identifiers and literals: :mod:`cpp_backend.cpp_text`; edefs and prelude functions:
:mod:`cpp_backend.native_cpp`.
"""

from __future__ import annotations

from collections.abc import Iterable

from cpp_backend.cpp_text import cpp_type, def_symbol, escape_name, param_decl, runtime_source
from cpp_backend.emit_sums import LoopConstructs
from cpp_backend.index_lets import inline_index_lets
from cpp_backend.pch import RUNTIME_BEGIN, RUNTIME_END
from cpp_backend.product_pass import canonical_products
from knossos.errors import KsUsageError
from knossos.expr import Expr
from knossos.program import Def, Program, SizeTree, TupleSizes, VecSizes


class FunctionEmitter(LoopConstructs):
    """Writes the statements of one def's body (the parts: :mod:`cpp_backend.emitter_core`,
    :mod:`cpp_backend.emit_rows`, :mod:`cpp_backend.emit_sums`)."""


# -- defs ------------------------------------------------------------------------------------------
def _signature(d: Def) -> str:
    params = ", ".join(param_decl(p.type, f"p{k}_{escape_name(p.name)}") for k, p in enumerate(d.params))
    return f"{cpp_type(d.ret_type)} {def_symbol(d.name)}({params})"


def _size_bindings(d: Def, em: FunctionEmitter) -> None:
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


def _emitted_body(d: Def, exact_order: bool) -> Expr:
    """What is emitted of ``d``'s body: its products first put in the blocked nest's shape
    (:func:`cpp_backend.product_pass.canonical_products`; ``exact_order``: only where every sum stays
    the same to the bit), its index lets inlined."""
    return inline_index_lets(canonical_products(d.body, exact_order=exact_order))


def emit_def(
    d: Def, *, exact_order: bool = False, quiet: frozenset[str] = frozenset(), body: Expr | None = None
) -> str:
    """The C++ definition of one def; ``quiet``: defs whose calls allocate nothing (:func:`quiet_defs`);
    ``body``: its :func:`_emitted_body` where the caller has it."""
    env = {p.name: f"p{k}_{escape_name(p.name)}" for k, p in enumerate(d.params)}
    em = FunctionEmitter(env, exact_order=exact_order, quiet=quiet)
    _size_bindings(d, em)
    result = em.body(_emitted_body(d, exact_order) if body is None else body)
    em.line(f"return {result};")
    return "\n".join([_signature(d) + " {", *em.lines, "}"])


def quiet_defs(bodies: dict[str, Expr]) -> frozenset[str]:
    """The defs of ``bodies`` (name -> emitted body) whose calls allocate no arena memory: no vector
    made, and calls only of such defs (a scalar helper such as rev$max_), so that a loop calling
    them needs no arena mark and reset per iteration.  (A recursive def is never among them.)"""
    quiet: frozenset[str] = frozenset()
    while True:
        more = {n for n, b in bodies.items() if n not in quiet and not FunctionEmitter({}, quiet=quiet).may_allocate(b)}
        if not more:
            return quiet
        quiet |= more


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
    bodies = {d.name: _emitted_body(d, exact_order) for d in chosen}
    quiet = quiet_defs(bodies)
    parts += [emit_def(d, exact_order=exact_order, quiet=quiet, body=bodies[d.name]) + "\n" for d in chosen]
    return "\n".join(parts)


__all__ = ["emit_def", "emit_program", "selected_defs"]
