"""The library functions the torch front end calls (erf, log1p, expm1, sin, cos): the interpreter's
values at edge inputs as C's, their derivatives in both modes, and the compiled C++ equal to the
interpreter."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autodiff import grad_program
from knossos.interpreter import call_def
from knossos.natives import NATIVES
from knossos.parser import parse_program

SOURCE = """
(edef erf Float (Float))
(edef log1p Float (Float))
(edef expm1 Float (Float))
(edef sin Float (Float))
(edef cos Float (Float))
(def f Float ((x : Float))
  (add (erf x) (add (log1p x) (add (expm1 x) (add (sin x) (cos x))))))
"""


def slope(x: float) -> float:
    return 2 / math.sqrt(math.pi) * math.exp(-x * x) + 1 / (1 + x) + math.exp(x) + math.cos(x) - math.sin(x)


@pytest.mark.parametrize(
    ("name", "x", "want"),
    [
        ("log1p", -1.0, -math.inf),
        ("log1p", -2.0, math.nan),
        ("log1p", math.inf, math.inf),
        ("expm1", 1000.0, math.inf),
        ("expm1", -math.inf, -1.0),
        ("erf", math.inf, 1.0),
        ("erf", -0.0, -0.0),
        ("sin", math.inf, math.nan),
        ("cos", -math.inf, math.nan),
        ("sin", -0.0, -0.0),
    ],
)
def test_a_native_is_c_s_at_edge_values(name: str, x: float, want: float) -> None:
    got = NATIVES[name](x)
    assert (math.isnan(got) and math.isnan(want)) or (got == want and math.copysign(1, got) == math.copysign(1, want))


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_derivatives_of_the_natives(mode: str) -> None:
    program = grad_program(parse_program(SOURCE, "f.ks"), defs=["f"], mode=mode)
    d = program.defs[f"{mode}$f"]
    for x in (-0.7, 0.0, 0.3, 2.5):
        assert call_def(d, x, 1.0) == pytest.approx(slope(x), rel=1e-12)


def test_the_compiled_natives_are_the_interpreter_s() -> None:
    cpp_backend = pytest.importorskip("cpp_backend")
    program = parse_program(SOURCE, "f.ks")
    compiled = cpp_backend.compile_def(program, "f", exact_order=True)
    xs = np.array([-0.9, -0.5, 0.0, 0.25, 1.5, 3.0])
    got = [compiled(float(x)) for x in xs]
    want = [call_def(program.defs["f"], float(x)) for x in xs]
    assert np.allclose(got, want, rtol=1e-15, atol=0)


STOPPED = """
(edef stop_gradient Float (Float))
(def g Float ((x : Float)) (mul x (stop_gradient (mul 3.0 x))))
"""


@pytest.mark.parametrize("mode", ["fwd", "rev"])
def test_stop_gradient_is_the_identity_with_derivative_zero(mode: str) -> None:
    """g(x) = x * stop(3x) = 3x^2, but its derivative holds the stopped factor: 3x, not 6x; compiled alike."""
    source = parse_program(STOPPED, "g.ks")
    program = grad_program(source, defs=["g"], mode=mode)
    for x in (-0.7, 0.0, 2.5):
        assert call_def(source.defs["g"], x) == 3 * x * x
        assert call_def(program.defs[f"{mode}$g"], x, 1.0) == pytest.approx(3 * x, rel=1e-15)
    compiled = pytest.importorskip("cpp_backend").compile_def(program, f"{mode}$g", exact_order=True)
    assert compiled(2.5, 1.0) == call_def(program.defs[f"{mode}$g"], 2.5, 1.0)
