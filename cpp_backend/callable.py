"""Compiled defs as Python functions: :func:`compile_def` (``cpp_backend.compile_def``).

``compile_def(path, name)`` compiles the def ``name`` of the program in ``path`` (and the defs it
calls) into a shared object and returns a :class:`CompiledDef`, a callable that takes numpy arrays,
Python floats and ints and returns numpy arrays, floats, ints, bools and tuples::

    mv = cpp_backend.compile_def("benchmarks/programs/backend.ks", "matvec")
    y = mv(np.ones((3, 4)), np.arange(4.0))     # array([6., 6., 6.])

The binding is **ctypes** over a C ABI written next to the def (:mod:`cpp_backend.entry`: one
``extern "C"`` function per def, and one that copies the result out; arguments are converted by
:mod:`cpp_backend.arguments`): ctypes is in the standard library, needs no
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
from pathlib import Path
from typing import Any

import numpy as np

from cpp_backend.arguments import as_array, describe, scalar_box
from cpp_backend.compile import compile_cpp
from cpp_backend.driver import check_budget_mib, check_threads, decode_value, encode_value
from cpp_backend.entry import DTYPES, Leaf, entry_source, leaves, library_source
from knossos.errors import KsEvalError, KsUsageError
from knossos.parser import load_program
from knossos.program import Def, Program
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type
from knossos.values import from_python

#: Bytes of the buffer a call's error message is written to.
ERROR_BYTES = 512
_P = ctypes.c_void_p


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
        self._in = [leaves(p.type, "") for p in d.params]
        self._out = leaves(d.ret_type)
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
    def _convert(self, leaf: Leaf, x: object, where: str) -> tuple[object, Any]:
        """(the object to keep alive, its address) for one input leaf; a KsUsageError if it does not fit."""
        if leaf.kind == "scalar":
            box = scalar_box(leaf.type, x, where)
            return box, ctypes.addressof(box)
        if leaf.kind == "array":
            assert leaf.elem is not None
            arr = as_array(leaf, x, where)
            return arr, arr.ctypes.data
        value = from_python(x, leaf.type, where)
        tokens: list[str] = []
        encode_value(value, leaf.type, tokens)
        text = ctypes.create_string_buffer(" ".join(tokens).encode("ascii"))
        return text, ctypes.addressof(text)

    # -- calling --------------------------------------------------------------------------------------
    def __call__(self, *args: object) -> Any:
        d = self.d
        if len(args) != len(d.params):
            raise KsUsageError(f"'{d.name}' takes {len(d.params)} argument(s), not {len(args)}")
        keep: list[object] = []
        ptrs = (_P * max(1, self._n_in))()
        dims = (ctypes.c_int64 * max(1, self._in_dims))()
        k = j = 0
        for p, x, parts_of in zip(d.params, args, self._in):
            one = len(parts_of) == 1 and parts_of[0].path == ""
            parts = [x] if one else self._split(p.type, x, f"argument '{p.name}'")
            for leaf, part in zip(parts_of, parts):
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
        except BaseException:
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
                total += math.prod(shape) * DTYPES[leaf.elem].itemsize
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
                    arr = np.empty(shape, dtype=DTYPES[leaf.elem])
                except (MemoryError, ValueError):
                    raise KsEvalError(f"'{self.d.name}': out of memory for its result of {total:,} bytes") from None
                out_ptrs[m] = arr.ctypes.data
                outs.append(arr)
            else:
                outs.append(("text", (texts[m] or b"").decode("ascii")))
        return outs, out_ptrs

    def _split(self, t: Type, x: object, where: str) -> list[object]:
        """The leaves of a tuple argument, in order."""
        if t.kind is Kind.TUPLE and t not in DTYPES:
            if not isinstance(x, tuple | list) or len(x) != len(t.children):
                raise KsUsageError(f"{where} must be a tuple of {len(t.children)} parts ({t}), not {describe(x)}")
            out: list[object] = []
            for k, (c, part) in enumerate(zip(t.children, x)):
                out += self._split(c, part, f"{where} part {k + 1}")
            return out
        return [x]

    def _finish(self, leaf: Leaf, o: Any) -> Any:
        if leaf.kind == "scalar":
            return o.value
        if isinstance(o, np.ndarray):
            return o
        text = o[1]
        value, _ = decode_value(text.split(), 0, leaf.type)
        return _ragged(value) if leaf.kind == "array" else value

    def _assemble(self, t: Type, values: Any) -> Any:
        if t.kind is Kind.TUPLE and t not in DTYPES:
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
    from the program and the def (``app.compiled.compile_optimised`` takes a rule set or model by name).
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
