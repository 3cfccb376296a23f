"""Wall-clock benchmarks of compiled defs: inputs, checks, min and median time per call.

:func:`bench` times several *variants* of one def (the same name and signature, different bodies:
as written, simplified, optimised, or a hand-written C++ function) at several sizes:

* **inputs** (:func:`make_inputs`) are pseudo-random, from a seed, of the def's parameter types:
  Floats uniform in [0.5, 2] (positive, so that sums in different orders differ only by rounding and
  a relative tolerance is meaningful), Integers 1-3 unless a size names them, Bools fair coins.
  Vector lengths come from a :class:`Size`: named sizes (a size variable of a sized vector parameter,
  ``(Vec n Float)``; an Integer parameter; or a vector parameter's shape, ``x=(10, 20)`` for a matrix),
  and a default for every other length.  Nested vectors are rectangular.
* **check** (at a small size: every length and named size capped at ``check_size``, 4 by default): the
  first variant's def is run by the interpreter and every compiled variant must give the same value
  (within the reassociation tolerance of :func:`values_agree`; to the bit with ``exact_order``); a
  variant's ``verified`` says it did.  The interpreter is far too slow
  for benchmark sizes, so it is never run at them.
* **timing** (each size): every variant gets the same inputs; its driver calls the def repeatedly until
  at least ``min_seconds`` (0.2 s) have passed (at least once) and reports the minimum and the median
  time per call; the arena is reset after every call, so memory is not retained between calls.  The
  output of every variant must equal the first variant's (within :func:`values_agree`'s tolerance): ``agrees``.

Every variant is compiled on its own (``g++ -O3 -std=c++17 -march=native``, see
:mod:`cpp_backend.compile`), as the def and the defs it calls plus the driver's ``main()``.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cpp_backend.compile import compile_cpp
from cpp_backend.driver import CompiledProgram, Timing, compile_program, driver_main
from cpp_backend.emit import emit_program
from knossos.errors import KsError, KsEvalError, KsUsageError
from knossos.interpreter import Interpreter
from knossos.program import Def, Program, SizeTree, TupleSizes, VecSizes
from knossos.types import BOOL, FLOAT, INTEGER, Kind, Type
from knossos.values import Value, isclose

#: Seconds each timed measurement repeats its call for (at least).
MIN_SECONDS = 0.2
#: Lengths are capped at this for the check against the interpreter.
CHECK_SIZE = 4
#: Relative tolerance of every comparison (and 1e-12 absolute, for values near zero).
REL_TOL = 1e-9
ABS_TOL = 1e-12
#: The interpreter's step limit for the check (a slow def at the check size fails to verify).
CHECK_MAX_STEPS = 5 * 10**7
FLOAT_RANGE = (0.5, 2.0)

Dims = int | tuple[int, ...]


@dataclass(frozen=True)
class Size:
    """One benchmark size: named sizes and a default for every other vector length.

    ``named`` maps a size variable or an Integer parameter to an int, or a vector parameter to its
    shape (an int for its length, a tuple for the lengths at each nesting level).  ``default`` is the
    length of every vector that nothing names (``None``: such a vector is an error).  ``default_name``
    is what the default is called in labels.
    """

    named: Mapping[str, Dims] = field(default_factory=dict)
    default: int | None = None
    default_name: str = "n"

    def label(self) -> dict[str, int | list[int]]:
        """The size as JSON: ``{"n": 256}``, ``{"image": [8, 1024], ...}``."""
        out: dict[str, int | list[int]] = {k: list(v) if isinstance(v, tuple) else v for k, v in self.named.items()}
        if self.default is not None:
            out.setdefault(self.default_name, self.default)
        return out

    def text(self) -> str:
        """The size as text: ``n=256``, ``image=8x1024 n=3``."""
        return " ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in self.label().items())

    def capped(self, limit: int) -> Size:
        """Every length and named size at most ``limit`` (for the check against the interpreter)."""
        named: dict[str, Dims] = {
            k: tuple(min(x, limit) for x in v) if isinstance(v, tuple) else min(v, limit) for k, v in self.named.items()
        }
        default = None if self.default is None else min(self.default, limit)
        return Size(named, default, self.default_name)


@dataclass(frozen=True)
class Variant:
    """One version of the def: its label and a program holding it under the benchmarked name.

    With ``cpp``, the def's C++ function is that text instead of the emitted one (a hand-written
    version: it must define the function the emitter would, :func:`cpp_backend.cpp_text.def_symbol` of
    the name, with the same signature; the driver's inputs are always dense vectors).
    """

    label: str
    program: Program
    cpp: str | None = None


@dataclass(frozen=True)
class Measurement:
    """The time of one variant at one size."""

    variant: str
    size: dict[str, int | list[int]]
    min_s: float
    median_s: float
    #: Calls timed.
    runs: int
    #: Its output at the check size matched the interpreter's (running the first variant's def).
    verified: bool
    #: Its output at this size equals the first variant's (relative tolerance 1e-9).
    agrees: bool

    def to_json(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "size": self.size,
            "min_s": self.min_s,
            "median_s": self.median_s,
            "verified": self.verified,
            "agrees": self.agrees,
            "runs": self.runs,
        }


# -- inputs ----------------------------------------------------------------------------------------------
class _Inputs:
    def __init__(self, d: Def, size: Size, seed: int) -> None:
        self.d = d
        self.size = size
        self.rng = np.random.default_rng(seed)
        self.lengths: dict[str, int] = {}  # size variables bound so far
        params = {p.name: p for p in d.params}
        size_vars = set(d.size_vars)
        for name, value in size.named.items():
            p = params.get(name)
            if name in size_vars:
                if not isinstance(value, int):
                    raise KsUsageError(f"size '{name}' is a size variable of '{d.name}': give one number")
                self.lengths[name] = value
            elif p is not None and p.type is INTEGER:
                if not isinstance(value, int):
                    raise KsUsageError(f"'{name}' is an Integer parameter of '{d.name}': give one number")
            elif p is not None and p.type.kind is Kind.VEC:
                pass
            else:
                raise KsUsageError(
                    f"size '{name}' is not a size variable, Integer parameter or vector parameter of '{d.name}'"
                )
            if (isinstance(value, int) and value < 0) or (isinstance(value, tuple) and min(value, default=0) < 0):
                raise KsUsageError(f"size '{name}' is negative")
        for p in d.params:  # explicit shapes bind their size variables before any default does
            given = size.named.get(p.name)
            if given is not None and p.type.kind is Kind.VEC:
                self._bind_shape(p.name, p.type, p.sizes, (given,) if isinstance(given, int) else given)

    def _bind_shape(self, where: str, t: Type, tree: SizeTree, dims: tuple[int, ...]) -> None:
        for n in dims:
            if t.kind is not Kind.VEC:
                raise KsUsageError(f"the shape given for '{where}' has more dimensions than its type {t}")
            if isinstance(tree, VecSizes) and tree.name is not None:
                self._bind(tree.name, n)
            tree = tree.elem if isinstance(tree, VecSizes) else None
            t = t.elem

    def _bind(self, name: str, n: int) -> None:
        have = self.lengths.get(name)
        if have is not None and have != n:
            raise KsUsageError(f"size '{name}' would be both {have} and {n}")
        self.lengths[name] = n

    def _length(self, name: str | None, dims: tuple[int, ...] | None, where: str) -> int:
        if dims:
            return dims[0]
        if name is not None and name in self.lengths:
            return self.lengths[name]
        if self.size.default is None:
            what = f"size '{name}'" if name is not None else f"the vectors of '{where}'"
            raise KsUsageError(f"no length given for {what}")
        if name is not None:
            self.lengths[name] = self.size.default
        return self.size.default

    def arguments(self) -> list[object]:
        out: list[object] = []
        for p in self.d.params:
            given = self.size.named.get(p.name)
            if p.type is INTEGER and isinstance(given, int):
                out.append(given)
                continue
            dims = None if given is None else (given,) if isinstance(given, int) else given
            out.append(self.value(p.type, p.sizes, dims, p.name))
        return out

    def value(self, t: Type, tree: SizeTree, dims: tuple[int, ...] | None, where: str) -> object:
        if t is FLOAT:
            return float(self.rng.uniform(*FLOAT_RANGE))
        if t is INTEGER:
            return int(self.rng.integers(1, 4))
        if t is BOOL:
            return bool(self.rng.random() < 0.5)
        if t.kind is Kind.VEC:
            shape: list[int] = []
            u: Type = t
            while u.kind is Kind.VEC:  # the rectangular shape of nested vectors, outermost first
                name = tree.name if isinstance(tree, VecSizes) else None
                shape.append(self._length(name, dims, where))
                tree = tree.elem if isinstance(tree, VecSizes) else None
                dims = dims[1:] if dims and len(dims) > 1 else None
                u = u.elem
                if u is not FLOAT and u.kind is not Kind.VEC:
                    break
            if u is FLOAT:
                values: object = self.rng.uniform(*FLOAT_RANGE, size=shape).tolist()
                return values
            # vectors whose innermost elements are not Floats: element by element
            return self._nested(shape, u, tree, dims, where)
        if t.kind is Kind.TUPLE:
            parts = tree.parts if isinstance(tree, TupleSizes) else (None,) * len(t.children)
            return tuple(self.value(c, s, None, f"{where}.{i + 1}") for i, (c, s) in enumerate(zip(t.children, parts)))
        raise KsUsageError(f"cannot make inputs of type {t} for a benchmark")

    def _nested(self, shape: list[int], elem: Type, tree: SizeTree, dims: tuple[int, ...] | None, where: str) -> object:
        if not shape:
            return self.value(elem, tree, dims, where)
        return [self._nested(shape[1:], elem, tree, dims, where) for _ in range(shape[0])]


def make_inputs(d: Def, size: Size, seed: int = 0) -> list[object]:
    """Deterministic pseudo-random arguments of ``d`` at ``size`` (the same for the same seed)."""
    return _Inputs(d, size, seed).arguments()


# -- comparing ------------------------------------------------------------------------------------------
#: Compiled Float sums may be reassociated (vectorised, split across threads), so a compiled value
#: ``b`` agrees with the interpreter's ``a`` when ``|a - b| <= REL_TOL * max(|a|, |b|, SCALE_FRACTION * M)``,
#: ``M`` the largest finite magnitude in the whole value compared (a sum that cancels to nearly zero
#: keeps the error of its large terms: the tolerance is scaled by the magnitude of the sums' values,
#: not only by its own); infinities must be equal and NaN matches NaN.  With exact order: the same bits.
SCALE_FRACTION = 1e-3


def _magnitude(a: Value) -> float:
    """The largest finite magnitude of the numbers in ``a`` (0 if none)."""
    if isinstance(a, bool):
        return 0.0
    if isinstance(a, float | int):
        return abs(float(a)) if math.isfinite(a) else 0.0
    if isinstance(a, list | tuple):
        try:
            x = np.asarray(a, dtype=float)
        except (ValueError, TypeError, OverflowError):
            return max((_magnitude(p) for p in a), default=0.0)
        finite = np.abs(x[np.isfinite(x)])
        return float(finite.max()) if finite.size else 0.0
    return 0.0


def same_bits(a: Value, b: Value) -> bool:
    """Whether two values are identical to the bit (signs of zeros included; NaN matches NaN)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a.hex() == b.hex()
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(same_bits(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def values_agree(want: Value, have: Value, exact: bool = False) -> bool:
    """Whether a compiled value ``have`` agrees with ``want`` (the interpreter's, or another variant's):
    to the bit with ``exact``, otherwise within the reassociation tolerance (:data:`SCALE_FRACTION`)."""
    if exact:
        return same_bits(want, have)
    return values_close(want, have, abs_tol=max(ABS_TOL, REL_TOL * SCALE_FRACTION * _magnitude(want)))


def values_close(a: Value, b: Value, rel: float = REL_TOL, abs_tol: float = ABS_TOL) -> bool:
    """:func:`knossos.values.isclose`, with numpy for rectangular arrays of numbers (fast for big outputs)."""
    if isinstance(a, list) and isinstance(b, list):
        try:
            x = np.asarray(a, dtype=float)
            y = np.asarray(b, dtype=float)
            arrays = True
        except (ValueError, TypeError, OverflowError):
            arrays = False
        if arrays:
            if x.shape != y.shape:
                return False
            with np.errstate(invalid="ignore", over="ignore"):
                infinite = np.isinf(x) | np.isinf(y)
                close = np.abs(x - y) <= np.maximum(rel * np.maximum(np.abs(x), np.abs(y)), abs_tol)
                ok = np.where(infinite, x == y, close) | (np.isnan(x) & np.isnan(y))
            return bool(ok.all())
    return isclose(a, b, rel, abs_tol)


# -- compiling and timing ----------------------------------------------------------------------------------
def compile_variant(
    variant: Variant,
    def_name: str,
    extra_flags: Sequence[str] = (),
    *,
    exact_order: bool = False,
    threads: int | None = None,
) -> CompiledProgram:
    """The driver of ``def_name`` in ``variant`` (emitted, or the variant's own C++ function)."""
    program = variant.program
    if def_name not in program.defs:
        raise KsUsageError(f"variant '{variant.label}' has no def named '{def_name}'")
    if variant.cpp is None:
        return compile_program(program, [def_name], extra_flags, exact_order=exact_order, threads=threads)
    d = program.defs[def_name]
    source = emit_program(program, []) + "\n" + variant.cpp + "\n" + driver_main([d])
    return CompiledProgram(program, compile_cpp(source, extra_flags, exact_order=exact_order), [d], threads=threads)


def _one(compiled: CompiledProgram, name: str, args: Sequence[object], timing: float | None) -> Value | KsError:
    result: Value | KsError = compiled.run([(name, args)], timing=timing)[0]
    return result


def check(
    reference: Def, compiled: Sequence[CompiledProgram], size: Size, seed: int = 0, exact: bool = False
) -> tuple[list[bool], str | None]:
    """Whether each compiled variant's output at ``size`` equals the interpreter's on ``reference``
    (and why nothing could be verified, when the interpreter failed)."""
    args = make_inputs(reference, size, seed)
    try:
        want = Interpreter(max_steps=CHECK_MAX_STEPS).call(reference, args)
    except KsError as err:
        return [False] * len(compiled), f"the interpreter failed at {size.text()}: {err.message}"
    out = []
    for c in compiled:
        have = _one(c, reference.name, args, None)
        out.append(not isinstance(have, KsError) and values_agree(want, have, exact))
    return out, None


OnReference = Callable[[Size, list[object], Value], None]


def bench(
    variants: Sequence[Variant],
    def_name: str,
    sizes: Sequence[Size],
    *,
    seed: int = 0,
    min_seconds: float = MIN_SECONDS,
    check_size: int = CHECK_SIZE,
    extra_flags: Sequence[str] = (),
    on_reference: OnReference | None = None,
    notes: list[str] | None = None,
    rounds: int = 1,
    exact_order: bool = False,
    threads: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Measurement]:
    """Time every variant of ``def_name`` at every size (see the module docstring); one
    :class:`Measurement` per size and variant, sizes outermost, variants in the order given.

    ``on_reference(size, inputs, output)`` is called with each size's inputs and the first variant's
    output (to time something else on them, or check it).  With ``rounds`` > 1 every size times the
    variants in turn that many times (so that a passing disturbance hits one round, not one variant):
    the minimum is over all rounds, the median is the median of the rounds' medians.  Why a check could not verify anything is
    appended to ``notes``.  A variant that fails (a run-time error in its C++ code) raises KsEvalError.
    ``exact_order``: compile with in-order Float sums and check against the interpreter to the bit
    (otherwise within the tolerance of :func:`values_agree`); ``threads``: for parallel loops.
    ``progress`` is told what is being done (compiling, checking, timing), for a user who waits.
    """
    say = progress or (lambda _: None)
    if not variants:
        raise KsUsageError("nothing to benchmark: no variants")
    if rounds < 1:
        raise KsUsageError(f"rounds must be at least 1, not {rounds}")
    reference = variants[0].program.defs.get(def_name)
    if reference is None:
        raise KsUsageError(f"no def named '{def_name}'")
    compiled = []
    for v in variants:
        say(f"compiling the {v.label} variant")
        compiled.append(compile_variant(v, def_name, extra_flags, exact_order=exact_order, threads=threads))
    verified = [True] * len(variants)
    smalls = {s.capped(check_size).text(): s.capped(check_size) for s in sizes}  # distinct check sizes
    for small in smalls.values():
        say(f"checking every variant against the interpreter at {small.text()}")
        flags, why = check(reference, compiled, small, seed, exact_order)
        verified = [a and b for a, b in zip(verified, flags)]
        if why is not None and notes is not None:
            notes.append(why)
    out: list[Measurement] = []
    for size in sizes:
        args = make_inputs(reference, size, seed)
        timings: list[list[Timing]] = [[] for _ in variants]
        agrees = [True] * len(variants)
        for r in range(rounds):
            first: Value = None
            for k, (v, c) in enumerate(zip(variants, compiled)):
                say(f"timing the {v.label} variant at {size.text()}")
                got = _one(c, def_name, args, min_seconds)
                if isinstance(got, KsError):
                    raise KsEvalError(f"the {v.label} variant of '{def_name}' failed at {size.text()}: {got.message}")
                assert isinstance(got, Timing)
                timings[k].append(got)
                if k == 0:
                    first = got.value
                    if on_reference is not None and r == 0:
                        on_reference(size, args, first)
                else:
                    agrees[k] = agrees[k] and values_agree(first, got.value)
                got = dataclasses.replace(got, value=None)  # outputs can be large: keep only the first's
                timings[k][-1] = got
        for k, v in enumerate(variants):
            ts = timings[k]
            out.append(
                Measurement(
                    v.label,
                    size.label(),
                    min(t.min_s for t in ts),
                    statistics.median(t.median_s for t in ts),
                    sum(t.runs for t in ts),
                    verified[k],
                    agrees[k],
                )
            )
    return out


def time_python(fn: Callable[[], Any], min_seconds: float = MIN_SECONDS) -> tuple[float, float, int, Any]:
    """Call ``fn`` repeatedly for at least ``min_seconds`` (at least once): min and median seconds
    per call, the number of calls and the last result (for numpy and other Python baselines)."""
    times: list[float] = []
    start = time.perf_counter()
    result: Any = None
    while True:
        t0 = time.perf_counter()
        result = fn()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        if t1 - start >= min_seconds:
            break
    times.sort()
    return times[0], times[len(times) // 2], len(times), result


def format_seconds(s: float) -> str:
    """``1.23 ms``, ``45.6 us``, ``2.01 s``: three significant digits."""
    if not math.isfinite(s):
        return str(s)
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s * 1e9:.3g} ns"


__all__ = [
    "CHECK_SIZE",
    "MIN_SECONDS",
    "Measurement",
    "Size",
    "Variant",
    "bench",
    "check",
    "compile_variant",
    "format_seconds",
    "make_inputs",
    "same_bits",
    "time_python",
    "values_agree",
    "values_close",
]
