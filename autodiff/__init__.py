"""Automatic differentiation as a source transformation: ``fwd$f`` and ``rev$f`` for a def ``f``.

    from autodiff import grad_program
    with_gradients = grad_program(load_program("f.ks"), defs=["f"], mode="rev")

See :mod:`autodiff.derivatives` for the conventions and docs/autodiff.md for the method.
"""

from autodiff.anf import NotDifferentiable
from autodiff.derivatives import (
    Differentiator,
    Mode,
    derivative_defs,
    grad_program,
    with_derivatives,
    without_derivatives,
)
from autodiff.tangent import tangent_type

__all__ = [
    "Differentiator",
    "Mode",
    "NotDifferentiable",
    "derivative_defs",
    "grad_program",
    "tangent_type",
    "with_derivatives",
    "without_derivatives",
]
