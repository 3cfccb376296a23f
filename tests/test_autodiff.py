"""autodiff on every program file: central finite differences of the reference interpreter
against the generated fwd$ and rev$ defs, the dataset's rev$ defs remade, and every generated program
printed and read back."""

from __future__ import annotations

import random
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from autodiff import NotDifferentiable, derivative_defs, grad_program, without_derivatives
from knossos.interpreter import Interpreter
from knossos.parser import load_program, parse_program
from knossos.printer import format_def, format_program
from knossos.program import Def, Program
from knossos.types import Kind, Type
from knossos.values import isclose

from conftest import PROGRAM_FILES, PROGRAMS, ROOT

FILES = [*PROGRAM_FILES, *sorted((ROOT / "examples").glob("*.ks"))]
MODES = ("fwd", "rev")

#: Defs whose derivatives cannot be made, and why: second derivatives through the edefs of lgamma's
#: and mul$Mat$Vec's derivatives, and gmm_test's dotv and mul$Mat$Vec, which have no fwd$ there.
NOT_DIFFERENTIABLE = {
    ("gmm_test.kso", "sqnorm", "fwd"): "edef 'dotv' has no derivative (declare 'fwd$dotv')",
    ("gmm_test.kso", "rev$log_wishart_prior", "fwd"): "edef 'dotv' has no derivative",
    ("gmm_test.kso", "rev$gmm_knossos_gmm_objective", "fwd"): "edef 'mul$Mat$Vec' has no derivative",
    ("gmm_test.kso", "rev$gmm_knossos_gmm_objective", "rev"): "edef 'rev$mul$Mat$Vec' has no derivative",
}
for _file in ("gmm_train.kso", "gradients_train.kso"):
    NOT_DIFFERENTIABLE.update(
        {
            (_file, "fwd$log_gamma_distrib", "fwd"): "edef 'fwd$lgamma' has no derivative (declare 'fwd$fwd$lgamma')",
            (_file, "fwd$log_gamma_distrib", "rev"): "edef 'fwd$lgamma' has no derivative",
            (_file, "fwd$log_wishart_prior", "rev"): "edef 'fwd$lgamma' has no derivative",
            (_file, "fwd$gmm_knossos_gmm_objective", "rev"): "edef 'fwd$lgamma' has no derivative",
            (_file, "rev$log_gamma_distrib", "fwd"): "edef 'rev$lgamma' has no derivative",
            (_file, "rev$log_gamma_distrib", "rev"): "edef 'rev$lgamma' has no derivative",
        }
    )


@cache
def program(path: Path) -> Program:
    return load_program(path)


def cases() -> list[Any]:
    return [pytest.param(f, d.name, id=f"{f.name}:{d.name}") for f in FILES for d in program(f).targets]


# -- values of any type, and the linear algebra of tangents --------------------------------------
def value(t: Type, rng: random.Random) -> Any:
    """A random argument: Floats in [0.5, 1.5] (inside every def's domain here), Integers 1-3, vectors of 3."""
    if t.kind is Kind.FLOAT:
        return rng.uniform(0.5, 1.5)
    if t.kind is Kind.INTEGER:
        return rng.randint(1, 3)
    if t.kind is Kind.BOOL:
        return rng.random() < 0.5
    if t.kind is Kind.VEC:
        return [value(t.elem, rng) for _ in range(3)]
    return tuple(value(c, rng) for c in t.children)


def tangent(t: Type, x: Any, rng: random.Random) -> Any:
    """A random tangent at ``x`` (the empty tuple for an Integer or a Bool)."""
    if t.kind is Kind.FLOAT:
        return rng.uniform(-1.0, 1.0)
    if t.kind is Kind.VEC:
        return [tangent(t.elem, v, rng) for v in x]
    if t.kind is Kind.TUPLE:
        return tuple(tangent(c, v, rng) for c, v in zip(t.children, x, strict=True))
    return ()


def step(t: Type, x: Any, h: float, v: Any) -> Any:
    """``x + h v``."""
    if t.kind is Kind.FLOAT:
        return x + h * v
    if t.kind is Kind.VEC:
        return [step(t.elem, a, h, b) for a, b in zip(x, v, strict=True)]
    if t.kind is Kind.TUPLE:
        return tuple(step(c, a, h, b) for c, a, b in zip(t.children, x, v, strict=True))
    return x


def dot(t: Type, a: Any, b: Any) -> float:
    """``<a, b>`` of two tangents (or two values, Floats only) of type ``t``."""
    if t.kind is Kind.FLOAT:
        return float(a * b)
    if t.kind is Kind.VEC:
        return sum(dot(t.elem, x, y) for x, y in zip(a, b, strict=True))
    if t.kind is Kind.TUPLE:
        return sum(dot(c, x, y) for c, x, y in zip(t.children, a, b, strict=True))
    return 0.0


def check_finite_differences(d: Def, fwd: Def, rev: Def, seed: int, trials: int = 2) -> None:
    """``<fwd$f(x, v), dr>`` and ``<rev$f(x, dr), v>`` against ``(f(x + eps v) - f(x - eps v)) . dr / (2 eps)``."""
    rng = random.Random(seed)
    run = Interpreter()
    eps = 1e-6
    for _ in range(trials):
        xs = [value(p.type, rng) for p in d.params]
        vs = [tangent(p.type, x, rng) for p, x in zip(d.params, xs, strict=True)]
        dr = tangent(d.ret_type, run.call(d, xs), rng)
        plus = run.call(d, [step(p.type, x, eps, v) for p, x, v in zip(d.params, xs, vs, strict=True)])
        minus = run.call(d, [step(p.type, x, -eps, v) for p, x, v in zip(d.params, xs, vs, strict=True)])
        numeric = (dot(d.ret_type, plus, dr) - dot(d.ret_type, minus, dr)) / (2 * eps)
        forward = dot(d.ret_type, run.call(fwd, [*xs, *vs]), dr)
        cotangents = run.call(rev, [*xs, dr])
        if len(d.params) == 1:
            cotangents = (cotangents,)
        reverse = sum(dot(p.type, c, v) for p, c, v in zip(d.params, cotangents, vs, strict=True))
        tolerance = 1e-5 * max(1.0, abs(numeric))
        assert abs(forward - numeric) <= tolerance, (d.name, "fwd", forward, numeric)
        assert abs(reverse - numeric) <= tolerance, (d.name, "rev", reverse, numeric)
        assert abs(forward - reverse) <= 1e-9 * max(1.0, abs(forward)), (d.name, forward, reverse)


def check_compiled_rev(program: Program, name: str, rev: Def, seed: int) -> None:
    """``rev`` (the interpreter's rev$ of ``name``) and the compiled rev$ of ``name`` in ``program``
    give the same bits on random arguments and a random cotangent (sums in exact order)."""
    from cpp_backend.driver import run_def

    rng = random.Random(seed)
    f = program.defs[name]
    args = [value(t.type, rng) for t in f.params]
    args.append(tangent(f.ret_type, Interpreter().call(f, args), rng))
    want = Interpreter().call(rev, args)
    have = run_def(grad_program(program, [name], "rev"), f"rev${name}", args, exact_order=True)
    assert isclose(want, have, 0.0, 0.0), (name, want, have)


@pytest.mark.parametrize(("path", "name"), cases())
def test_derivatives_match_finite_differences(path: Path, name: str) -> None:
    """Every def of every program file: both modes made anew (not the program's own rev$/fwd$) agree
    with central finite differences; or the def fails with its one-line error.  (How long making a
    derivative takes is measured by benchmarks/bench_grad_let_chain.py, not asserted here.)"""
    prog = program(path)
    made = {}
    for mode in MODES:
        expected = NOT_DIFFERENTIABLE.get((path.name, name, mode))
        try:
            maker = derivative_defs(prog, [name], mode, reuse=False)
        except NotDifferentiable as err:
            assert expected is not None and expected in err.message, err.message
            line = err.located(file=str(path)).render()
            assert "\n" not in line and line.startswith(f"{path}:") and err.pos is not None
            continue
        assert expected is None, f"{name} ({mode}) differentiates now: update NOT_DIFFERENTIABLE"
        made[mode] = maker.new[-1]
        assert made[mode].name == f"{mode}${name}"
    if len(made) == 2:
        check_finite_differences(prog.defs[name], made["fwd"], made["rev"], seed=len(name))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_generated_programs_read_back(path: Path) -> None:
    """The program with every derivative added prints, parses and type-checks back to the same defs."""
    base = without_derivatives(program(path))
    names = [d.name for d in base.targets if not any((path.name, d.name, m) in NOT_DIFFERENTIABLE for m in MODES)]
    added = grad_program(base, names, "both")
    assert len(added.defs) > len(base.defs)
    back = parse_program(format_program(added))
    assert list(back.defs) == list(added.defs)
    for n, d in added.defs.items():
        assert format_def(back.defs[n]) == format_def(d), n
        assert back.defs[n].ret_type is d.ret_type and [p.type for p in back.defs[n].params] == [
            p.type for p in d.params
        ]


def test_orphan_derivatives_go_so_that_the_defs_derivatives_are_made_anew() -> None:
    """gmm_test.kso's ksc derivatives of functions it no longer has (rev$logsumexp, ...) call its
    rev$exp$VecR: kept, they keep it, and it is reused; with ``orphans`` they go, and rev$exp$VecR is
    made anew.  rev$dotv, the derivative of a declared edef, stays either way."""
    full = program(PROGRAMS / "gmm_test.kso")
    kept = without_derivatives(full)
    assert "rev$exp$VecR" in kept.defs and "rev$logsumexp" in kept.defs
    assert "rev$exp$VecR" not in {d.name for d in derivative_defs(kept, ["exp$VecR"], "rev").new}
    base = without_derivatives(full, orphans=True)
    assert [n for n in base.defs if n.startswith(("rev$", "fwd$"))] == ["rev$dotv"]
    assert "rev$exp$VecR" in {d.name for d in derivative_defs(base, ["exp$VecR"], "rev").new}


@pytest.mark.parametrize("name", ["conv1d", "matrix_multiply", "matrix_multiply_transpose", "maxpool", "max_"])
def test_dataset_reverse_mode_remade(name: str) -> None:
    """rev$ of the template's defs, made from the defs alone, equals ksc's rev$ defs on random inputs."""
    full = program(PROGRAMS / "conv1d_rev_template.kso")
    made = {d.name: d for d in derivative_defs(without_derivatives(full), [name], "rev").new}[f"rev${name}"]
    theirs = full.defs[f"rev${name}"]
    assert [p.type for p in made.params] == [p.type for p in theirs.params] and made.ret_type is theirs.ret_type
    rng = random.Random(7)
    run = Interpreter()
    for k, rows, kn, n in [(2, 3, 3, 5), (3, 2, 5, 4), (1, 1, 1, 6)]:
        if name == "conv1d":
            args: list[Any] = [
                [[[rng.uniform(-1, 1) for _ in range(kn)] for _ in range(rows)] for _ in range(k)],
                [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(rows)],
                [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(k)],
            ]
        else:
            d = full.defs[name]
            args = [value(p.type, rng) for p in d.params]
            if name in ("matrix_multiply", "matrix_multiply_transpose"):
                w = [[rng.uniform(-1, 1) for _ in range(n)] for _ in range(k)]
                args = [w, [rng.uniform(-1, 1) for _ in range(n if name == "matrix_multiply" else k)]]
            out = run.call(d, args)
            args.append(tangent(d.ret_type, out, rng))
        assert isclose(run.call(made, args), run.call(theirs, args), rel=1e-9, abs_tol=1e-12)


def test_program_derivatives_are_kept() -> None:
    """grad_program adds what the program lacks: rev$conv1d is ksc's, kept; fwd$ and rev$ of rev$conv1d are new."""
    full = program(PROGRAMS / "conv1d_rev_template.kso")
    maker = derivative_defs(full, ["conv1d", "rev$conv1d"], "both")
    assert "rev$conv1d" in maker.reused and "fwd$conv1d" in maker.reused
    assert [d.name for d in maker.new] == ["fwd$rev$conv1d", "rev$rev$conv1d"]


def test_sqrt_differentiates_in_both_modes() -> None:
    """sqrt (the op the PyTorch front end added): d sqrt(x) = dx / (2 sqrt(x)), against finite differences."""
    prog = parse_program(
        "(def f Float ((x : Float) (v : Vec Float)) (mul (sqrt x) (sumbuild (size v) (lam (i : Integer) (sqrt (index i v))))))",
        "sqrt.ks",
    )
    fwd = derivative_defs(prog, ["f"], "fwd", reuse=False).new[-1]
    rev = derivative_defs(prog, ["f"], "rev", reuse=False).new[-1]
    check_finite_differences(prog.defs["f"], fwd, rev, seed=3, trials=3)
