"""The C++ side of compiled callables (:mod:`cpp_backend.callable`): one ``extern "C"`` entry point per
def that runs it on arguments given as leaf pointers and array shapes, and one that copies the result
into the caller's buffers (see :func:`entry_source`).

A value crosses as its leaves (:class:`Leaf`): scalars, arrays of numbers, or the driver's text
format for anything else; tuples are split into their parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cpp_backend.cpp_text import cpp_type, def_symbol
from cpp_backend.emit import emit_program
from knossos.program import Def, Program
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type

DTYPES = {FLOAT: np.dtype(np.float64), INTEGER: np.dtype(np.int64), BOOL: np.dtype(np.bool_)}
KIND_NAME = {FLOAT: "Float", INTEGER: "Integer", BOOL: "Bool"}


@dataclass(frozen=True)
class Leaf:
    """One part of a value that crosses on its own: a scalar, an array of numbers of ``rank``
    dimensions (``elem`` its numbers' type), or text (the driver's format)."""

    kind: str  # "scalar" | "array" | "text"
    type: Type
    rank: int = 0
    elem: Type | None = None
    path: str = ""  # where it is in the value, for messages: "", ".1", ".2.1"


def _array_shape(t: Type) -> tuple[int, Type] | None:
    """``(k, number type)`` for a vector nested k deep of Floats, Integers or Bools."""
    rank = 0
    while t.kind is Kind.VEC:
        rank += 1
        t = t.elem
    return (rank, t) if rank and t in DTYPES else None


def leaves(t: Type, path: str = "") -> list[Leaf]:
    """The parts of a value of type ``t`` that cross on their own, in order (tuples split)."""
    if t in DTYPES:
        return [Leaf("scalar", t, path=path)]
    if t.kind is Kind.TUPLE:
        return [leaf for k, c in enumerate(t.children) for leaf in leaves(c, f"{path}.{k + 1}")]
    shape = _array_shape(t)
    if shape is not None:
        return [Leaf("array", t, shape[0], shape[1], path)]
    return [Leaf("text", t, path=path)]


# -- the C++ side -----------------------------------------------------------------------------------
_ENTRY_HELPERS = r"""
// ---- Python entry points (cpp_backend.callable) ----
#include <cstring>
// Shared objects are compiled with -fvisibility=hidden (cpp_backend.compile): only the entry points are
// exported, so every library keeps its own runtime (its arena above all) instead of sharing one
// process-wide through GNU unique symbols.
#define KS_PY_EXPORT __attribute__((visibility("default")))
namespace ks {
template <class T>
struct leaf_of {
    using type = T;
    static constexpr int depth = 0;
};
template <class E>
struct leaf_of<Vec<E>> {
    using type = typename leaf_of<E>::type;
    static constexpr int depth = leaf_of<E>::depth + 1;
};

// A C-contiguous array of numbers (dims: its shape) as nested vectors over its memory; Bools are
// copied (rows of 1-byte elements would not be aligned for the vectors' tag bits).
template <class T>
T array_value(const void* data, const std::int64_t* dims) {
    using E = elem_t<T>;
    using Leaf = typename leaf_of<T>::type;
    if constexpr (is_vec<E>::value) {
        std::int64_t inner = 1;
        for (int k = 1; k < leaf_of<T>::depth; ++k) inner *= dims[k];
        // Empty rows are all the same value: one lazy constant, not a row per element of the outer
        // dimension (a (10^8, 0) array would otherwise take 1.6 GB of row headers).
        if (inner == 0) return const_vec<E>(dims[0], array_value<E>(data, dims + 1));
        T v = make_vec<E>(dims[0]);
        for (std::int64_t i = 0; i < dims[0]; ++i)
            v.data[i] = array_value<E>(static_cast<const Leaf*>(data) + i * inner, dims + 1);
        return v;
    } else if constexpr (std::is_same<E, bool>::value) {
        T v = make_vec<bool>(dims[0]);
        for (std::int64_t i = 0; i < dims[0]; ++i) v.data[i] = static_cast<const bool*>(data)[i];
        return v;
    } else {
        T v;
        v.data = dims[0] > 0 ? const_cast<E*>(static_cast<const E*>(data)) : nullptr;
        v.n = dims[0];
        return v;
    }
}

// The shape of nested vectors (false where rows differ in length).
template <class T>
bool array_shape(const T& v, std::int64_t* dims, bool first) {
    if constexpr (is_vec<T>::value) {
        if (first) {
            dims[0] = v.n;
        } else if (dims[0] != v.n) {
            return false;
        }
        using E = elem_t<T>;
        if constexpr (is_vec<E>::value) {
            if (v.n == 0) {
                for (int k = 1; k < leaf_of<T>::depth; ++k) dims[k] = first ? 0 : dims[k];
                return true;
            }
            for (std::int64_t i = 0; i < v.n; ++i)
                if (!array_shape(v.get(i), dims + 1, first && i == 0)) return false;
        }
        return true;
    } else {
        return true;
    }
}

template <class T, class Leaf>
Leaf* copy_array(const T& v, Leaf* out) {
    using E = elem_t<T>;
    if constexpr (is_vec<E>::value) {
        for (std::int64_t i = 0; i < v.n; ++i) out = copy_array(v.get(i), out);
        return out;
    } else {
        if (v.plain()) {
            if (v.n > 0) std::memcpy(out, v.data, static_cast<std::size_t>(v.n) * sizeof(E));
        } else {
            for (std::int64_t i = 0; i < v.n; ++i) out[i] = v.get(i);
        }
        return out + v.n;
    }
}

inline void copy_error(const char* what, char* err, std::int64_t len) {
    if (len <= 0) return;
    std::strncpy(err, what, static_cast<std::size_t>(len - 1));
    err[len - 1] = 0;
}

// One call's state, from ks_py_call_k to ks_py_fetch_k: thread-local, as the arena is, so that calls
// from several threads (through one CompiledDef or several of one library) each have their own.
struct PyCall {
    Arena::Mark mark{};
    bool live = false;
    std::vector<std::string> texts;
};

// A call's settings, for the calling thread only and for the call only: the number of threads of
// parallel loops (OpenMP's setting is the thread's, shared by every library it calls, so the previous
// one is put back) and the arena's budget (the arena is this library's and this thread's).
class PySettings {
    int saved_threads_ = 0;

   public:
    PySettings(int threads, unsigned long long budget_bytes) {
#if defined(_OPENMP)
        saved_threads_ = omp_get_max_threads();
#endif
        set_threads(threads);
        arena().set_limit(static_cast<std::size_t>(budget_bytes));
    }
    PySettings(const PySettings&) = delete;
    PySettings& operator=(const PySettings&) = delete;
    ~PySettings() { set_threads(saved_threads_); }
};
}  // namespace ks
"""


def _input_expr(t: Type, leaves: list[Leaf], pos: list[int], dims: list[int]) -> str:
    """The C++ expression reading the argument of type ``t`` from the leaves at ``pos[0]``..."""
    if t.kind is Kind.TUPLE and t not in DTYPES:
        parts = [_input_expr(c, leaves, pos, dims) for c in t.children]
        return f"{cpp_type(t)}({', '.join(parts)})"
    leaf = leaves[pos[0]]
    k = pos[0]
    pos[0] += 1
    if leaf.kind == "scalar":
        return f"*static_cast<const {cpp_type(t)}*>(in[{k}])"
    if leaf.kind == "array":
        offset = dims[0]
        dims[0] += leaf.rank
        return f"ks::array_value<{cpp_type(t)}>(in[{k}], in_dims + {offset})"
    return f"[&] {{ ks::Reader r(std::string(static_cast<const char*>(in[{k}]))); return ks::read_value<{cpp_type(t)}>(r); }}()"


def _output_parts(t: Type, value: str, path: list[str]) -> list[str]:
    """C++ expressions of the leaves of the result ``value`` of type ``t``, in leaf order."""
    if t.kind is Kind.TUPLE and t not in DTYPES:
        out: list[str] = []
        for k, c in enumerate(t.children):
            out += _output_parts(c, f"std::get<{k}>({value})", path)
        return out
    return [value]


def entry_source(d: Def, k: int) -> str:
    """The ``extern "C"`` functions of the def ``d`` (entry number ``k``): ``ks_py_call_k`` runs it
    (arguments as leaf pointers and array shapes; result shapes out) and keeps the result until
    ``ks_py_fetch_k`` copies it into the caller's buffers and releases the call's memory."""
    in_leaves = [leaf for p in d.params for leaf in leaves(p.type)]
    pos, dims = [0], [0]
    args = [_input_expr(p.type, in_leaves, pos, dims) for p in d.params]
    out_leaves = leaves(d.ret_type)
    parts = _output_parts(d.ret_type, "(*r)", [])
    ret = cpp_type(d.ret_type)
    shape_lines, fetch_lines = [], []
    out_dim = 0
    for j, (leaf, expr) in enumerate(zip(out_leaves, parts, strict=True)):
        if leaf.kind == "scalar":
            fetch_lines.append(f"    *static_cast<{cpp_type(leaf.type)}*>(out[{j}]) = {expr};")
        elif leaf.kind == "array":
            assert leaf.elem is not None
            shape_lines.append(
                f"        if (!ks::array_shape({expr}, out_dims + {out_dim}, true)) {{ out_dims[{out_dim}] = -1; "
                f"call.texts[{j}].clear(); ks::write_result(call.texts[{j}], {expr}); }}"
            )
            fetch_lines.append(
                f"    if (out[{j}] != nullptr) ks::copy_array({expr}, static_cast<{cpp_type(leaf.elem)}*>(out[{j}]));"
            )
            out_dim += leaf.rank
        else:
            shape_lines.append(f"        call.texts[{j}].clear(); ks::write_result(call.texts[{j}], {expr});")
    texts = "\n".join(f"    text_out[{j}] = call.texts[{j}].c_str();" for j in range(len(out_leaves)))
    call_args = ", ".join(args)
    return f"""
static thread_local ks::PyCall ks_py_state_{k};
static thread_local const {ret}* ks_py_result_{k} = nullptr;
static thread_local std::aligned_storage_t<sizeof({ret}), alignof({ret})> ks_py_store_{k};

extern "C" KS_PY_EXPORT int ks_py_call_{k}(void* const* in, const std::int64_t* in_dims, std::int64_t* out_dims,
                             const char** text_out, char* err, std::int64_t err_len, int threads,
                             unsigned long long budget_bytes) {{
    (void)in;
    (void)in_dims;
    (void)out_dims;
    (void)text_out;
    const ks::PySettings settings(threads, budget_bytes);
    ks::PyCall& call = ks_py_state_{k};
    if (call.live) ks::arena().reset(call.mark);
    ks::arena().shrink_to(static_cast<std::size_t>(budget_bytes));  // after the reset: no chunk in use is freed
    call.mark = ks::arena().mark();
    ks::release_scratch();  // the copies of loops an earlier call left by an error
    call.live = true;
    call.texts.assign({len(out_leaves)}, std::string());
    try {{
        const {ret}* r = new (&ks_py_store_{k}) {ret}({def_symbol(d.name)}({call_args}));
        ks_py_result_{k} = r;
{chr(10).join(shape_lines)}
    }} catch (const std::bad_alloc&) {{
        ks::copy_error("out of memory", err, err_len);
        ks::arena().reset(call.mark);
        call.live = false;
        return 1;
    }} catch (const std::exception& e) {{
        ks::copy_error(ks::one_line(e.what()).c_str(), err, err_len);
        ks::arena().reset(call.mark);
        call.live = false;
        return 1;
    }}
{texts}
    return 0;
}}

// Copies the result into `out` (the caller's buffers), or with `out` null only releases it.
extern "C" KS_PY_EXPORT void ks_py_fetch_{k}(void* const* out) {{
    ks::PyCall& call = ks_py_state_{k};
    const {ret}* r = ks_py_result_{k};
    (void)r;
    if (out != nullptr) {{
{chr(10).join(fetch_lines)}
    }}
    ks::arena().reset(call.mark);
    call.live = false;
}}
"""


def library_source(program: Program, d: Def, *, exact_order: bool = False) -> str:
    """A translation unit with ``d``, the defs it calls, and its Python entry points."""
    return emit_program(program, [d.name], exact_order=exact_order) + _ENTRY_HELPERS + entry_source(d, 0)


__all__ = ["DTYPES", "KIND_NAME", "Leaf", "entry_source", "leaves", "library_source"]
