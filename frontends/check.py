"""Every translation is checked: the def, evaluated by the reference interpreter on fresh inputs,
must equal what torch computes on them.

The fresh inputs have the examples' shapes and dtype, and values drawn uniformly between each
example's smallest and largest element (so an example kept positive, for ``log`` or ``sqrt``, stays
positive); an example whose elements are all equal (a 0-d one, ``ones``) is scaled by factors drawn
from [0.5, 1.5] (drawn from [-1, 1] where it is zero).  A result agrees when it has torch's shape,
its NaNs and infinities where torch's are, and every other element within :data:`AGREE_TOLERANCE` times the
largest magnitude of the result (translations reorder sums, so exact equality is not expected; a
constant baked in is off by the size of the values).  The interpreter runs under a budget of
:data:`CHECK_INTERPRETER_STEPS` evaluated nodes (about ten seconds): a def too big to check at its shapes is refused,
with a hint to import it at smaller shapes or to skip the check.
"""

from __future__ import annotations

import contextlib
import re
import sys
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from frontends.dispatch import results
from knossos.errors import KsError, KsEvalError, KsUsageError
from knossos.expr import Expr
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.program import Program
from knossos.values import to_numpy

#: Largest difference allowed, relative to the largest magnitude of the result.
AGREE_TOLERANCE = 1e-6
#: The same where torch computes in float32 (an argument, a constant or a step of the function is
#: float32): the translation computes in double, and float32 keeps about 7 digits, fewer after sums.
FLOAT32_TOLERANCE = 1e-4
#: The most nodes the interpreter evaluates for the check (about a million a second here: a few
#: seconds).  A def estimated above it is refused at once (:func:`estimated_steps`).
CHECK_INTERPRETER_STEPS = 4_000_000
_BUDGET = re.compile(r"evaluation took more than|past its budget")
#: The seed of the fresh inputs.
SEED = 20261128


def fresh_inputs(examples: tuple[torch.Tensor, ...], seed: int = SEED) -> tuple[torch.Tensor, ...]:
    """Inputs of the examples' shapes with other values (see the module's docstring)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for t in examples:
        if not t.dtype.is_floating_point:  # indices: other values in the examples' range
            lo_i, hi_i = (int(t.min()), int(t.max())) if t.numel() else (0, 0)
            out.append(torch.randint(lo_i, hi_i + 1, t.shape, generator=g, dtype=t.dtype))
            continue
        u = torch.rand(t.shape, generator=g, dtype=t.dtype)
        lo, hi = (float(t.min()), float(t.max())) if t.numel() else (0.0, 0.0)
        if hi > lo and np.isfinite(lo) and np.isfinite(hi):
            out.append(lo + (hi - lo) * u)
        else:
            out.append(torch.where(t == 0, 2 * u - 1, t * (0.5 + u)))
    return tuple(out)


#: Compiles a program's def to a callable on the interpreter's arguments (numpy arrays, numbers):
#: ``cpp_backend.compile_def`` with ``exact_order``, given by a layer that may import the backend.
Compiler = Callable[[Program, str], Callable[..., Any]]


def check_def(
    program: Program,
    name: str,
    fn: Callable[..., Any],
    inputs: tuple[torch.Tensor, ...],
    error: Callable[[str, str], KsError],
    tolerance: float = AGREE_TOLERANCE,
    compiler: Compiler | None = None,
) -> None:
    """Raise ``error(message, stack)`` unless the def ``name`` equals ``fn`` on ``inputs``
    (``stack``: where in the function the message is about, or empty) within ``tolerance`` (see
    :func:`disagreement`).  A def too big for the interpreter is compiled by ``compiler`` and
    checked compiled, or refused where there is none."""
    d = program.defs[name]
    estimate = estimated_steps(d.body)
    big = estimate is None or estimate > CHECK_INTERPRETER_STEPS
    if big and compiler is None and estimate is not None:
        raise _too_big(f"about {estimate:,}")
    want = _run_torch(fn, inputs, error)
    args = [t.numpy() if t.dim() else t.item() for t in inputs]
    try:
        if big and compiler is not None:
            steps = f"about {estimate:,}" if estimate is not None else "an unknown number of"
            print(
                f"knossos import: checking the translation compiled to C++ ({steps} interpreter steps is too "
                f"many for the interpreter's {CHECK_INTERPRETER_STEPS:,})",
                file=sys.stderr,
            )
            got = compiler(program, name)(*args)
        else:
            got = Interpreter(max_steps=CHECK_INTERPRETER_STEPS).call(d, args)
    except KsEvalError as err:
        if _BUDGET.search(str(err)):
            raise _too_big(f"more than {CHECK_INTERPRETER_STEPS:,}") from None
        raise error(f"the translation fails on other inputs of the same shapes: {err}", "") from None
    gots = list(got) if len(want) > 1 else [got]
    for k, (g, w) in enumerate(zip(gots, want, strict=True)):
        problem = disagreement(np.asarray(to_numpy(g), dtype=np.float64), w, tolerance)
        if problem:
            which = f"result {k + 1}" if len(want) > 1 else "the result"
            raise error(
                f"the translation disagrees with torch on other inputs of the same shapes ({which}: {problem}); "
                "please report it (--no-check, check=False skip this check)",
                "",
            )


def _too_big(steps: str) -> KsUsageError:
    return KsUsageError(
        f"checking the translation would take the interpreter {steps} steps at these shapes (at most "
        f"{CHECK_INTERPRETER_STEPS:,}): translate at smaller shapes to check it, or skip the check (--no-check, check=False)"
    )


def estimated_steps(root: Expr) -> int | None:
    """The nodes the interpreter evaluates for ``root``: each node once per iteration of the loops
    around it (loop sizes are literals in a translation), both branches of an ``if`` counted as the
    larger; None where a loop's size is not a literal.  Shared subexpressions are walked once."""
    counts: dict[Expr, int | None] = {}
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, ready = stack.pop()
        if node in counts:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if a not in counts)
            continue
        parts = [counts[a] for a in node.args]
        if any(p is None for p in parts):
            counts[node] = None
        elif node.op in (Op.BUILD, Op.SUMBUILD):
            size = node.args[0]
            n = size.data if size.op is Op.CONST and isinstance(size.data, int) else None
            counts[node] = None if n is None else 1 + parts[0] + n * (1 + parts[2])  # type: ignore[operator]
        elif node.op is Op.IF:
            counts[node] = 1 + parts[0] + max(parts[1], parts[2])  # type: ignore[operator, type-var]
        else:  # a variable or a literal is no step of its own
            counts[node] = 1 + sum(parts) if node.args else 0  # type: ignore[arg-type]
    return counts[root]


def disagreement(got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], tolerance: float = AGREE_TOLERANCE) -> str:
    """How ``got`` differs from ``want`` beyond ``tolerance`` times the largest magnitude, or ``""``."""
    if want.size == 0 and got.size == 0:
        return ""  # an empty vector of vectors has no inner sizes to compare
    if got.shape != want.shape:
        return f"shape {got.shape}, torch's {want.shape}"
    finite = np.isfinite(want)
    same_special = np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(
        got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)]
    )
    if not same_special or not np.all(np.isfinite(got[finite])):
        return "NaNs or infinities where torch has none, or the other way round"
    if not finite.any():
        return ""
    diff = float(np.max(np.abs(got[finite] - want[finite])))
    scale = max(float(np.max(np.abs(want[finite]))), float(np.max(np.abs(got[finite]))))
    if diff > tolerance * scale:
        return f"a difference of {diff:.3g}, at most {tolerance:g} x {scale:.3g} allowed"
    return ""


def _run_torch(
    fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], error: Callable[[str, str], KsError]
) -> list[np.ndarray[Any, Any]]:
    try:
        with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
            out = fn(*(t.clone() for t in inputs))
    except SystemExit as err:
        raise error(f"the function called sys.exit({err.code!r}) on other inputs", _stack(err)) from None
    except Exception as err:
        raise error(
            f"the function failed on other inputs of the same shapes: {type(err).__name__}: {_first(err)}", _stack(err)
        ) from None
    items = results(out)
    return [t.detach().to(torch.float64).numpy() for t in items]


def _first(err: BaseException) -> str:
    text = str(err).strip()
    return (text.splitlines()[0] if text else "")[:300]


def _stack(err: BaseException) -> str:
    return "".join(traceback.format_exception(err))
