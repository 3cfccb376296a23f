"""Compiled defs as Python functions: :func:`compile_def` (``cpp_backend.compile_def``).

``compile_def(path, name)`` compiles the def ``name`` of the program in ``path`` (and the defs it
calls) into a shared object and returns a :class:`CompiledDef`, a callable that takes numpy arrays,
Python floats and ints and returns numpy arrays, floats, ints, bools and tuples::

    mv = cpp_backend.compile_def("benchmarks/programs/backend.ks", "matvec")
    y = mv(np.ones((3, 4)), np.arange(4.0))     # array([6., 6., 6.])

The binding is **ctypes** over a C ABI that the emitter writes next to the def (one ``extern "C"``
function per def, and one that copies the result out): ctypes is in the standard library, needs no
compiler at import time nor Python headers (a CPython extension would need both, and would tie the
compiled object to one Python version), and a call costs a few microseconds, which keeps the
overhead of a call with small arguments under the issue's 20 microseconds; cffi would be another
dependency for the same result.  Arrays cross without copies: a ``(Vec Float)`` parameter reads the
numpy array's memory, a ``(Vec (Vec Float))`` parameter a 2-d array's rows (the runtime's vectors
point into it), and results are copied once, into fresh numpy arrays.

How values map, type by type (tuples: each part as its type says; a tuple result is a Python tuple):

====================================  ============================================================
``Float`` / ``Integer`` / ``Bool``    a Python (or numpy) float / int / bool; returned as such
``Vec`` nested k deep of numbers      a k-dimensional numpy array (float64 for Floats, int64 for
                                      Integers, bool for Bools), C-contiguous (copied if not);
                                      lists convert as ``numpy.asarray`` would.  Results: a
                                      k-dimensional array, or nested lists of arrays where the
                                      rows have different lengths
anything else (vectors of tuples)     what the interpreter takes (lists, tuples), converted via
                                      the driver's text format; results as the interpreter's values
====================================  ============================================================

A wrong number of arguments, a wrong type, rank or element kind (a float array for an Integer
vector, a string, a 1-d array for a matrix) is a one-line :class:`~knossos.errors.KsUsageError`
before anything runs; a run-time error of the def (an index out of range, sizes that disagree) is a
one-line :class:`~knossos.errors.KsEvalError`, and so is a call that would take more memory than its
budget (``budget_mib``, default ``$KNOSSOS_CPP_MAX_MIB`` or 4096, as the C++ driver's): the C++ arena's
allocations and the result arrays each count against it.  Compilation is cached like every other
(:mod:`cpp_backend.compile`).  Calls may come from several Python threads at once, through one
compiled def or several of one def (which share a loaded library): the library keeps each thread's
call apart (its arena and call state are per thread, and each call passes its own threads and
budget, so the budget is per thread); the def itself runs its large loops on ``threads`` threads.
A Float takes a Python or numpy int (rounded to a double, as the interpreter does) or float; a
``longdouble`` only if a double holds it exactly (a one-line error otherwise: rounding it silently
would give a result the caller did not ask for).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cpp_backend.compile import compile_cpp
from cpp_backend.driver import check_budget_mib, check_threads, decode_value, encode_value
from cpp_backend.emit import cpp_type, def_symbol, emit_program
from knossos.errors import KsEvalError, KsUsageError
from knossos.parser import load_program
from knossos.program import Def, Program
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type
from knossos.values import from_python

_DTYPES = {FLOAT: np.dtype(np.float64), INTEGER: np.dtype(np.int64), BOOL: np.dtype(np.bool_)}
_KIND_NAME = {FLOAT: "Float", INTEGER: "Integer", BOOL: "Bool"}
#: Bytes of the buffer a call's error message is written to.
ERROR_BYTES = 512


@dataclass(frozen=True)
class _Leaf:
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
    return (rank, t) if rank and t in _DTYPES else None


def _leaves(t: Type, path: str = "") -> list[_Leaf]:
    if t in _DTYPES:
        return [_Leaf("scalar", t, path=path)]
    if t.kind is Kind.TUPLE:
        return [leaf for k, c in enumerate(t.children) for leaf in _leaves(c, f"{path}.{k + 1}")]
    shape = _array_shape(t)
    if shape is not None:
        return [_Leaf("array", t, shape[0], shape[1], path)]
    return [_Leaf("text", t, path=path)]


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


def _input_expr(t: Type, leaves: list[_Leaf], pos: list[int], dims: list[int]) -> str:
    """The C++ expression reading the argument of type ``t`` from the leaves at ``pos[0]``..."""
    if t.kind is Kind.TUPLE and t not in _DTYPES:
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
    if t.kind is Kind.TUPLE and t not in _DTYPES:
        out: list[str] = []
        for k, c in enumerate(t.children):
            out += _output_parts(c, f"std::get<{k}>({value})", path)
        return out
    return [value]


def entry_source(d: Def, k: int) -> str:
    """The ``extern "C"`` functions of the def ``d`` (entry number ``k``): ``ks_py_call_k`` runs it
    (arguments as leaf pointers and array shapes; result shapes out) and keeps the result until
    ``ks_py_fetch_k`` copies it into the caller's buffers and releases the call's memory."""
    in_leaves = [leaf for p in d.params for leaf in _leaves(p.type)]
    pos, dims = [0], [0]
    args = [_input_expr(p.type, in_leaves, pos, dims) for p in d.params]
    out_leaves = _leaves(d.ret_type)
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
    call.mark = ks::arena().mark();
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


# -- the Python side ----------------------------------------------------------------------------------
_P = ctypes.c_void_p


def _describe(x: object) -> str:
    if isinstance(x, np.ndarray):
        return f"a {x.ndim}-d array of {x.dtype}"
    return f"a {type(x).__name__}"


def _float(x: object, where: str) -> float:
    """A Float argument as a double: Python and numpy ints and floats; a one-line error for anything
    else, an int beyond the Float range, or a long double that a double cannot hold exactly."""
    if isinstance(x, np.floating) and x.dtype.itemsize > 8:
        return float(_doubles(np.asarray(x), where))
    if isinstance(x, bool) or not isinstance(x, float | int):
        raise KsUsageError(f"{where} must be a Float, not {_describe(x)}")
    try:
        return float(x)
    except OverflowError:
        raise KsUsageError(f"{where} is out of the Float range") from None


def _doubles(x: np.ndarray, where: str) -> np.ndarray:
    """A long double array as doubles, refused where a value would change (a Float is a double)."""
    y = x.astype(np.float64)
    same = (y.astype(x.dtype) == x) | np.isnan(x)
    if not bool(np.all(same)):
        raise KsUsageError(f"{where} has a {x.dtype} value that a Float (a 64-bit double) cannot hold exactly")
    return y


def _as_array(leaf: _Leaf, x: object, where: str) -> np.ndarray:
    """``x`` as a C-contiguous array for ``leaf``; a one-line error if it does not fit."""
    assert leaf.elem is not None
    want = _DTYPES[leaf.elem]
    kind = _KIND_NAME[leaf.elem]
    if not isinstance(x, np.ndarray):
        if isinstance(x, str | bytes) or not isinstance(x, list | tuple):
            raise KsUsageError(f"{where} must be a {leaf.rank}-d array of {kind}s, not {_describe(x)}")
        try:
            x = np.asarray(x)
        except ValueError:
            raise KsUsageError(
                f"{where} must be a {leaf.rank}-d array of {kind}s: its rows have different lengths"
            ) from None
    assert isinstance(x, np.ndarray)
    if x.ndim != leaf.rank and not (x.size == 0 and x.ndim == 1 and leaf.rank > 1):
        raise KsUsageError(f"{where} must be a {leaf.rank}-d array of {kind}s ({leaf.type}), not {x.ndim}-d")
    if x.size == 0 and x.ndim != leaf.rank:
        x = x.reshape((0,) * leaf.rank)
    if x.dtype != want and x.size == 0 and x.dtype.kind in "biuf":
        x = x.astype(want)  # no values to check (np.asarray([]) is of float64)
    if x.dtype != want and not (leaf.elem is FLOAT and x.dtype.kind == "f" and x.dtype.itemsize > 8):
        ok = (leaf.elem is FLOAT and x.dtype.kind in "fiu") or (leaf.elem is INTEGER and x.dtype.kind in "iu")
        if not ok or not np.can_cast(x.dtype, want, "same_kind" if leaf.elem is FLOAT else "safe"):
            raise KsUsageError(f"{where} must be an array of {kind}s ({want}), not of {x.dtype}")
        x = x.astype(want)
    if not x.flags.c_contiguous or not x.flags.aligned:
        x = np.ascontiguousarray(x)
    return x


class CompiledDef:
    """A def compiled to C++, called like a Python function (see the module docstring)."""

    def __init__(
        self,
        program: Program,
        d: Def,
        library: Path,
        *,
        threads: int | None = None,
        exact_order: bool = False,
        budget_mib: int | None = None,
    ) -> None:
        self.program = program
        self.d = d
        self.library = library
        self.exact_order = exact_order
        self.threads = check_threads(threads)
        #: The memory a call may take, in MiB: the C++ arena's and the result arrays'.
        self.budget_mib = check_budget_mib(budget_mib)
        # Several CompiledDefs of one library share its loaded copy (and so its globals): the library
        # keeps a call's state per thread and takes each call's settings as arguments, so nothing of
        # one call is seen by another, and calls need no lock.
        self._lib = ctypes.CDLL(str(library))
        self._call = self._lib.ks_py_call_0
        self._call.argtypes = [_P, _P, _P, _P, ctypes.c_char_p, ctypes.c_int64, ctypes.c_int, ctypes.c_ulonglong]
        self._call.restype = ctypes.c_int
        self._fetch = self._lib.ks_py_fetch_0
        self._fetch.argtypes = [_P]
        self._fetch.restype = None
        self._in = [_leaves(p.type, "") for p in d.params]
        self._out = _leaves(d.ret_type)
        self._n_in = sum(len(x) for x in self._in)
        self._in_dims = sum(leaf.rank for x in self._in for leaf in x)
        self._out_dims = sum(leaf.rank for leaf in self._out)
        ends = list(itertools.accumulate(leaf.rank for leaf in self._out))
        self._out_spans = [(end - leaf.rank, end) for leaf, end in zip(self._out, ends)]
        self._local = threading.local()  # a buffer for each thread's error messages

    @property
    def name(self) -> str:
        return self.d.name

    def __repr__(self) -> str:
        return f"<compiled def {self.d.name}>"

    # -- arguments ------------------------------------------------------------------------------------
    def _convert(self, leaf: _Leaf, x: object, where: str) -> tuple[object, Any]:
        """(the object to keep alive, its address) for one input leaf; a KsUsageError if it does not fit."""
        if leaf.kind == "scalar":
            t = leaf.type
            if (isinstance(x, np.ndarray) and x.ndim == 0) or isinstance(x, np.generic):
                x = x.item()
            if t is FLOAT:
                box: Any = ctypes.c_double(_float(x, where))
            elif t is INTEGER:
                if isinstance(x, bool) or not isinstance(x, int):
                    raise KsUsageError(f"{where} must be an Integer, not {_describe(x)}")
                if not -(2**63) <= x < 2**63:
                    raise KsUsageError(f"{where} is out of the 64-bit Integer range")
                box = ctypes.c_int64(x)
            else:
                if not isinstance(x, bool):
                    raise KsUsageError(f"{where} must be a Bool, not {_describe(x)}")
                box = ctypes.c_bool(x)
            return box, ctypes.addressof(box)
        if leaf.kind == "array":
            assert leaf.elem is not None
            arr = self._array(leaf, x, where)
            return arr, arr.ctypes.data
        value = from_python(x, leaf.type, where)
        tokens: list[str] = []
        encode_value(value, leaf.type, tokens)
        text = ctypes.create_string_buffer(" ".join(tokens).encode("ascii"))
        return text, ctypes.addressof(text)

    def _array(self, leaf: _Leaf, x: object, where: str) -> np.ndarray:
        x = _as_array(leaf, x, where)
        if x.dtype.kind == "f" and x.dtype.itemsize > 8 and leaf.elem is FLOAT:
            x = _doubles(x, where)
        return x

    # -- calling --------------------------------------------------------------------------------------
    def __call__(self, *args: object) -> Any:
        d = self.d
        if len(args) != len(d.params):
            raise KsUsageError(f"'{d.name}' takes {len(d.params)} argument(s), not {len(args)}")
        keep: list[object] = []
        ptrs = (_P * max(1, self._n_in))()
        dims = (ctypes.c_int64 * max(1, self._in_dims))()
        k = j = 0
        for p, x, leaves in zip(d.params, args, self._in):
            parts = [x] if len(leaves) == 1 and leaves[0].path == "" else self._split(p.type, x, f"argument '{p.name}'")
            for leaf, part in zip(leaves, parts):
                where = f"argument '{p.name}'" + (f" part {leaf.path[1:]}" if leaf.path else "")
                obj, addr = self._convert(leaf, part, where)
                keep.append(obj)
                ptrs[k] = addr
                k += 1
                if leaf.kind == "array":
                    assert isinstance(obj, np.ndarray)
                    for n in obj.shape:
                        dims[j] = n
                        j += 1
        out_dims = (ctypes.c_int64 * max(1, self._out_dims))()
        texts = (ctypes.c_char_p * max(1, len(self._out)))()
        err = getattr(self._local, "err", None)
        if err is None:  # one per thread: calls from several threads may overlap
            err = self._local.err = ctypes.create_string_buffer(ERROR_BYTES)
        budget = self.budget_mib << 20
        status = self._call(ptrs, dims, out_dims, texts, err, ERROR_BYTES, self.threads, budget)
        if status != 0:
            raise KsEvalError(f"'{d.name}': {err.value.decode('utf-8', 'replace')}")
        try:
            outs, out_ptrs = self._outputs(out_dims, texts)
        except KsEvalError:
            self._fetch(None)  # releases the call's memory
            raise
        self._fetch(out_ptrs)
        values = [self._finish(leaf, o) for leaf, o in zip(self._out, outs)]
        return self._assemble(d.ret_type, iter(values))

    def _outputs(self, out_dims: Any, texts: Any) -> tuple[list[Any], Any]:
        """The buffers the result is copied into (fresh arrays, scalar boxes) or the texts it was written
        as; a KsEvalError if the arrays would take more than the budget (a lazy result such as
        ``(constVec n 1.0)`` costs the C++ side nothing, its array n numbers)."""
        shapes = [tuple(out_dims[a:b]) for a, b in self._out_spans]
        total = 0
        for leaf, shape in zip(self._out, shapes):
            if leaf.kind == "array" and shape[0] >= 0:
                assert leaf.elem is not None
                total += math.prod(shape) * _DTYPES[leaf.elem].itemsize
        if total > self.budget_mib << 20:
            raise KsEvalError(
                f"'{self.d.name}': its result of {total:,} bytes is beyond the memory budget of {self.budget_mib} MiB"
            )
        outs: list[Any] = []
        out_ptrs = (_P * max(1, len(self._out)))()
        for m, (leaf, shape) in enumerate(zip(self._out, shapes)):
            if leaf.kind == "scalar":
                box: Any = {FLOAT: ctypes.c_double, INTEGER: ctypes.c_int64, BOOL: ctypes.c_bool}[leaf.type]()
                out_ptrs[m] = ctypes.addressof(box)
                outs.append(box)
            elif leaf.kind == "array" and shape[0] >= 0:
                assert leaf.elem is not None
                try:
                    arr = np.empty(shape, dtype=_DTYPES[leaf.elem])
                except (MemoryError, ValueError):
                    raise KsEvalError(f"'{self.d.name}': out of memory for its result of {total:,} bytes") from None
                out_ptrs[m] = arr.ctypes.data
                outs.append(arr)
            else:
                outs.append(("text", (texts[m] or b"").decode("ascii")))
        return outs, out_ptrs

    def _split(self, t: Type, x: object, where: str) -> list[object]:
        """The leaves of a tuple argument, in order."""
        if t.kind is Kind.TUPLE and t not in _DTYPES:
            if not isinstance(x, tuple | list) or len(x) != len(t.children):
                raise KsUsageError(f"{where} must be a tuple of {len(t.children)} parts ({t}), not {_describe(x)}")
            out: list[object] = []
            for k, (c, part) in enumerate(zip(t.children, x)):
                out += self._split(c, part, f"{where} part {k + 1}")
            return out
        return [x]

    def _finish(self, leaf: _Leaf, o: Any) -> Any:
        if leaf.kind == "scalar":
            return o.value
        if isinstance(o, np.ndarray):
            return o
        text = o[1]
        value, _ = decode_value(text.split(), 0, leaf.type)
        return _ragged(value) if leaf.kind == "array" else value

    def _assemble(self, t: Type, values: Any) -> Any:
        if t.kind is Kind.TUPLE and t not in _DTYPES:
            return tuple(self._assemble(c, values) for c in t.children)
        return next(values)


def _ragged(value: Any) -> Any:
    """Nested lists of numbers with rows of different lengths: lists down to the rectangular parts, as arrays."""
    try:
        return (
            np.asarray(value)
            if not isinstance(value, list) or not value or not isinstance(value[0], list)
            else _rows(value)
        )
    except ValueError:
        return [_ragged(v) for v in value]


def _rows(value: list[Any]) -> Any:
    lengths = {len(v) if isinstance(v, list) else -1 for v in value}
    if len(lengths) == 1:
        try:
            arr = np.asarray(value)
            if arr.dtype != object:
                return arr
        except ValueError:
            pass
    return [_ragged(v) for v in value]


@functools.lru_cache(maxsize=64)
def _load(path: str, mtime: float) -> Program:
    return load_program(path)


def compile_def(
    path: str | os.PathLike[str] | Program,
    name: str,
    *,
    exact_order: bool = False,
    threads: int | None = None,
    optimize: Callable[[Program, Def], Def] | None = None,
    extra_flags: Sequence[str] = (),
    budget_mib: int | None = None,
) -> CompiledDef:
    """The def ``name`` of the program at ``path`` (or a :class:`Program`) compiled to C++, as a callable.

    ``exact_order``: Float sums add in index order (bit-identical to the interpreter); by default they
    may be vectorised and split across threads (equal up to rounding, docs/cpp.md).  ``threads``: for
    parallel loops (default: the machine's cores).  ``optimize``: a function giving the def to compile
    from the program and the def (``app.compiled.compile_def`` takes a rule set or model by name).
    ``budget_mib``: the memory a call may take (default ``$KNOSSOS_CPP_MAX_MIB``, else 4096), as the
    C++ driver's: beyond it, the call is a one-line KsEvalError naming the budget.
    Compilation is cached (:mod:`cpp_backend.compile`); errors are one-line KsErrors.
    """
    if isinstance(path, Program):
        program = path
    else:
        p = os.fspath(path)
        try:
            mtime = os.stat(p).st_mtime
        except OSError as err:
            raise KsUsageError(f"cannot read the program: {err.strerror}", None, p) from None
        program = _load(p, mtime)
    d = program.defs.get(name)
    if d is None:
        raise KsUsageError(f"no def named '{name}'")
    check_threads(threads)
    check_budget_mib(budget_mib)
    if optimize is not None:
        d = optimize(program, d)
        program = program.with_def(d)
    source = library_source(program, d, exact_order=exact_order)
    library = compile_cpp(source, extra_flags, shared=True, exact_order=exact_order)
    return CompiledDef(program, d, library, threads=threads, exact_order=exact_order, budget_mib=budget_mib)


__all__ = ["CompiledDef", "compile_def", "entry_source", "library_source"]
