"""The reference interpreter agrees with numpy on real programs from ``ksdata/programs``.

Each numpy expression below is derived from the program text, not from the def's name: in the
BLAS training templates ``(index i (index j m))`` is ``m[j][i]``, so e.g. ``transpose`` there is
the identity on square matrices and several defs only accept square inputs.  Non-square shapes
are used wherever they can tell a transposition apart.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest

from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import load_program
from knossos.program import Program
from knossos.values import to_numpy

PROGRAMS = Path(__file__).parent.parent / "ksdata" / "programs"
RTOL, ATOL = 1e-9, 1e-12


@cache
def _program(name: str) -> Program:
    return load_program(PROGRAMS / name)


def _call(file: str, def_name: str, *args: object) -> object:
    return to_numpy(Interpreter().call(_program(file).defs[def_name], list(args)))


def _close(actual: object, expected: object) -> None:
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------------------------------
# 1. GEMM (blas_test.kso): alpha * a @ b + beta * c, and its hand-optimised variants
# ------------------------------------------------------------------------------------------
GEMM_DEFS = [
    "gemm",
    "gemm_all_fns_inlined",
    "gemm_climbed_mat_y",
    "gemm_no_inner_prod",
    "gemm_no_maty",
    "gemm_climbed_inner_prod",
    "gemm_half_inlined",
]
GEMM_SHAPES = [(2, 2, 2), (3, 4, 5), (5, 4, 3), (1, 3, 2), (4, 1, 3)]  # (rows, inner, cols) of a @ b


@pytest.mark.parametrize("def_name", GEMM_DEFS)
@pytest.mark.parametrize("shape", GEMM_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gemm_matches_numpy(def_name: str, shape: tuple[int, int, int]) -> None:
    rows, inner, cols = shape
    rng = np.random.default_rng(1000 + 100 * rows + 10 * inner + cols)
    a, b = rng.standard_normal((rows, inner)), rng.standard_normal((inner, cols))
    c = rng.standard_normal((rows, cols))
    alpha, beta = float(rng.standard_normal()), float(rng.standard_normal())
    result = _call("blas_test.kso", def_name, alpha, a, b, beta, c)
    assert result.shape == (rows, cols)
    _close(result, alpha * a @ b + beta * c)


def test_gemm_transposed_operand_is_not_accepted_silently() -> None:
    """A 3x4 times 5x4 product has no valid meaning: the interpreter must not return a value."""
    rng = np.random.default_rng(7)
    a, b, c = rng.standard_normal((3, 4)), rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    with pytest.raises(KsEvalError, match="out of range"):
        _call("blas_test.kso", "gemm", 1.0, a, b, 1.0, c)


# ------------------------------------------------------------------------------------------
# 2. The 11 BLAS training primitives (blas_template.kso), as the program text defines them
# ------------------------------------------------------------------------------------------
TEMPLATE = "blas_template.kso"


def test_template_has_exactly_the_eleven_primitives() -> None:
    assert sorted(_program(TEMPLATE).defs) == sorted(
        [
            "float_matrix_multiply",
            "matrix_matrix_multiply",
            "vector_vector_add",
            "matrix_matrix_add",
            "outer_product",
            "transpose",
            "scal",
            "axpy",
            "dot",
            "rscl",
            "rot",
        ]
    )


@pytest.mark.parametrize("n", [1, 2, 4])
def test_float_matrix_multiply(n: int) -> None:
    # build n (i) build m (j) (mul alpha (index i (index j mat_x)))  ->  alpha * x[j][i]
    rng = np.random.default_rng(n)
    x, alpha = rng.standard_normal((n, n)), float(rng.standard_normal())
    _close(_call(TEMPLATE, "float_matrix_multiply", alpha, x), alpha * x.T)


@pytest.mark.parametrize("shape", [(3, 4), (4, 3)])
def test_float_matrix_multiply_rejects_non_square(shape: tuple[int, int]) -> None:
    x = np.random.default_rng(3).standard_normal(shape)
    with pytest.raises(KsEvalError, match="out of range"):
        _call(TEMPLATE, "float_matrix_multiply", 2.0, x)


# result[i][k] = sum_{j < size y} x[j][i] * y[k][j], i < size x, k < size y[0]:
# y must be square (m x m), x needs at least m rows and at least (size x) columns.
@pytest.mark.parametrize(
    ("x_shape", "m"),
    [((1, 1), 1), ((3, 3), 3), ((4, 4), 2), ((3, 4), 2), ((3, 5), 3)],
    ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v),
)
def test_matrix_matrix_multiply(x_shape: tuple[int, int], m: int) -> None:
    rng = np.random.default_rng(10 * x_shape[0] + x_shape[1] + 100 * m)
    x, y = rng.standard_normal(x_shape), rng.standard_normal((m, m))
    n = x_shape[0]
    expected = np.einsum("ji,kj->ik", x[:m, :n], y)  # == x[:m, :n].T @ y.T
    result = _call(TEMPLATE, "matrix_matrix_multiply", x, y)
    assert result.shape == (n, m)
    _close(result, expected)
    if x_shape == (3, 3):  # on square inputs it is (y @ x) transposed, not x @ y
        _close(result, (y @ x).T)
        assert not np.allclose(result, x @ y)


def test_matrix_matrix_multiply_rejects_textbook_shapes() -> None:
    rng = np.random.default_rng(11)
    with pytest.raises(KsEvalError, match="out of range"):
        _call(TEMPLATE, "matrix_matrix_multiply", rng.standard_normal((3, 4)), rng.standard_normal((4, 5)))


@pytest.mark.parametrize("n", [1, 4, 7])
def test_vector_vector_add(n: int) -> None:
    rng = np.random.default_rng(20 + n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    _close(_call(TEMPLATE, "vector_vector_add", x, y), x + y)


@pytest.mark.parametrize("n", [1, 2, 4])
def test_matrix_matrix_add(n: int) -> None:
    # build n (i) build m (j) (add (index i (index j mat_x)) (index i (index j mat_y)))
    rng = np.random.default_rng(30 + n)
    x, y = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    _close(_call(TEMPLATE, "matrix_matrix_add", x, y), x.T + y.T)


def test_matrix_matrix_add_only_reads_the_leading_block_of_mat_y() -> None:
    rng = np.random.default_rng(35)
    x, y = rng.standard_normal((3, 3)), rng.standard_normal((4, 5))
    _close(_call(TEMPLATE, "matrix_matrix_add", x, y), x.T + y[:3, :3].T)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2)])
def test_matrix_matrix_add_rejects_non_square(shape: tuple[int, int]) -> None:
    rng = np.random.default_rng(36)
    x, y = rng.standard_normal(shape), rng.standard_normal(shape)
    with pytest.raises(KsEvalError, match="out of range"):
        _call(TEMPLATE, "matrix_matrix_add", x, y)


@pytest.mark.parametrize(("n", "m"), [(1, 1), (2, 5), (4, 3)])
def test_outer_product(n: int, m: int) -> None:
    rng = np.random.default_rng(40 + 10 * n + m)
    x, y = rng.standard_normal(n), rng.standard_normal(m)
    result = _call(TEMPLATE, "outer_product", x, y)
    assert result.shape == (n, m)
    _close(result, np.outer(x, y))


@pytest.mark.parametrize("n", [1, 2, 4])
def test_transpose_is_the_identity_on_square_matrices(n: int) -> None:
    # build m (i) build n (j) (index j (index i mat_x))  ->  x[i][j]: no transposition at all
    x = np.random.default_rng(50 + n).standard_normal((n, n))
    _close(_call(TEMPLATE, "transpose", x), x)


@pytest.mark.parametrize("shape", [(2, 3), (3, 2)])
def test_transpose_rejects_non_square(shape: tuple[int, int]) -> None:
    x = np.random.default_rng(55).standard_normal(shape)
    with pytest.raises(KsEvalError, match="out of range"):
        _call(TEMPLATE, "transpose", x)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_scal(n: int) -> None:
    rng = np.random.default_rng(60 + n)
    x, a = rng.standard_normal(n), float(rng.standard_normal())
    _close(_call(TEMPLATE, "scal", a, x), a * x)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_axpy(n: int) -> None:
    rng = np.random.default_rng(70 + n)
    x, y, alpha = rng.standard_normal(n), rng.standard_normal(n), float(rng.standard_normal())
    _close(_call(TEMPLATE, "axpy", alpha, x, y), alpha * x + y)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_dot(n: int) -> None:
    rng = np.random.default_rng(80 + n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    result = _call(TEMPLATE, "dot", x, y)
    assert isinstance(result, float)
    _close(result, x @ y)


@pytest.mark.parametrize("n", [1, 4, 7])
def test_rscl(n: int) -> None:
    x = np.random.default_rng(90 + n).uniform(0.5, 2.0, n)  # sum well away from zero
    _close(_call(TEMPLATE, "rscl", x), x / x.sum())


@pytest.mark.parametrize("n", [1, 4, 7])
def test_rot(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    c, s = float(rng.standard_normal()), float(rng.standard_normal())
    result = _call(TEMPLATE, "rot", x, y, c, s)
    assert isinstance(result, tuple)
    assert len(result) == 2
    _close(result[0], c * x + s * y)
    _close(result[1], -s * x + c * y)


# ------------------------------------------------------------------------------------------
# 3. rev$conv1d (conv1d_rev_test.kso) against a numpy vector-Jacobian product
# ------------------------------------------------------------------------------------------
def _shift(n: int, kn: int) -> np.ndarray:
    """S[ni, kni, m] = 1 where m == ni + kn // 2 - kni lies inside the image (zero padding elsewhere)."""
    s = np.zeros((n, kn, n))
    for ni in range(n):
        for kni in range(kn):
            noi = ni + kn // 2 - kni
            if 0 <= noi < n:
                s[ni, kni, noi] = 1.0
    return s


def _conv1d(kernels: np.ndarray, image: np.ndarray) -> np.ndarray:
    """f[k][n] = sum_{l, kn} kernels[k][l][kn] * image[l][n + KN//2 - kn] (0 outside the image)."""
    return np.einsum("klj,lm,njm->kn", kernels, image, _shift(image.shape[1], kernels.shape[2]))


def _conv1d_vjp(kernels: np.ndarray, image: np.ndarray, dr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = _shift(image.shape[1], kernels.shape[2])
    d_kernels = np.einsum("kn,lm,njm->klj", dr, image, s)
    d_image = np.einsum("kn,klj,njm->lm", dr, kernels, s)
    return d_kernels, d_image


def _finite_difference_vjp(x: np.ndarray, f: object, dr: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Gradient of <dr, f(x)> with respect to x by central differences."""
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[idx] += eps
        down[idx] -= eps
        grad[idx] = (np.sum(dr * f(up)) - np.sum(dr * f(down))) / (2 * eps)  # type: ignore[operator]
    return grad


CONV_SHAPES = [(2, 3, 5, 3), (1, 2, 4, 4), (3, 1, 2, 3), (2, 2, 6, 1), (1, 1, 3, 5)]  # (K, L, N, KN)


def _conv_inputs(shape: tuple[int, int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n_kernels, channels, width, kernel_width = shape
    rng = np.random.default_rng(sum(v * 10**i for i, v in enumerate(shape)))
    kernels = rng.standard_normal((n_kernels, channels, kernel_width))
    return kernels, rng.standard_normal((channels, width)), rng.standard_normal((n_kernels, width))


CONV_IDS = ["K{}L{}N{}KN{}".format(*s) for s in CONV_SHAPES]


@pytest.mark.parametrize("shape", CONV_SHAPES, ids=CONV_IDS)
def test_numpy_conv1d_matches_the_forward_program(shape: tuple[int, int, int, int]) -> None:
    """Pins down the numpy forward used below against conv1d in conv1d_rev_template.kso."""
    kernels, image, _ = _conv_inputs(shape)
    result = _call("conv1d_rev_template.kso", "conv1d", kernels, image)
    assert result.shape == (shape[0], shape[2])
    _close(result, _conv1d(kernels, image))


@pytest.mark.parametrize("shape", CONV_SHAPES, ids=CONV_IDS)
def test_rev_conv1d_matches_numpy_vjp(shape: tuple[int, int, int, int]) -> None:
    kernels, image, dr = _conv_inputs(shape)
    result = _call("conv1d_rev_test.kso", "rev$conv1d", kernels, image, dr)
    assert isinstance(result, tuple)
    assert len(result) == 2
    d_kernels, d_image = result
    assert d_kernels.shape == kernels.shape
    assert d_image.shape == image.shape
    expected_kernels, expected_image = _conv1d_vjp(kernels, image, dr)
    _close(d_kernels, expected_kernels)
    _close(d_image, expected_image)


@pytest.mark.parametrize("shape", CONV_SHAPES, ids=CONV_IDS)
def test_rev_conv1d_matches_finite_differences(shape: tuple[int, int, int, int]) -> None:
    kernels, image, dr = _conv_inputs(shape)
    d_kernels, d_image = _call("conv1d_rev_test.kso", "rev$conv1d", kernels, image, dr)  # type: ignore[misc]
    fd_kernels = _finite_difference_vjp(kernels, lambda k: _conv1d(k, image), dr)
    fd_image = _finite_difference_vjp(image, lambda im: _conv1d(kernels, im), dr)
    np.testing.assert_allclose(d_kernels, fd_kernels, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(d_image, fd_image, rtol=1e-6, atol=1e-8)
    # f is linear in each argument, so <dr, f> = <d_kernels, kernels> = <d_image, image>.
    inner = float(np.sum(dr * _conv1d(kernels, image)))
    np.testing.assert_allclose(np.sum(d_kernels * kernels), inner, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.sum(d_image * image), inner, rtol=1e-9, atol=1e-12)
