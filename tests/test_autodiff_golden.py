"""autodiff construct by construct: golden derivatives, finite differences on small defs that
use each construct, the one-line errors, and the ``knossos grad`` command."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_autodiff import check_finite_differences

from autodiff import derivative_defs, grad_program, tangent_type
from knossos.cli import main
from knossos.errors import KsError
from knossos.parser import load_program, parse_program
from knossos.printer import format_def, format_program
from knossos.types import FLOAT, INTEGER, tuple_of, vec

from conftest import run_cli

GOLDEN_SOURCE = """
(def f Float ((x : Float) (y : Float)) (let (z (mul x y)) (add (log z) z)))
(def g (Vec Float) ((v : Vec Float)) (build (size v) (lam (i : Integer) (exp (index i v)))))
(def h Float ((x : Float) (n : Integer)) (if (gt x 0.0) (mul x (to_float n)) (neg x)))
(def k Float ((t : Tuple Float Integer)) (mul (get$1$2 t) (to_float (get$2$2 t))))
"""

GOLDEN = {
    # let: z's two uses collect in one chain; the product rule gives each factor the other
    "rev$f": """
        (def rev$f (Tuple Float Float) ((x : Float) (y : Float) (d$r : Float))
          (let ((z (mul x y))
                (d$z (add d$r (div d$r z)))
                (d$x (mul d$z y))
                (d$y (mul d$z x)))
            (tuple d$x d$y)))
    """,
    # build and index: the element i of v read in iteration i, its cotangent a gather (a build), no
    # deltaVec; exp's value read back from the forward loop, not computed again
    "rev$g": """
        (def rev$g (Vec Float) ((v : (Vec Float)) (d$r : (Vec Float)))
          (let ((t (size v))
                (t_3 (build t (lam (i : Integer) (let (t_1 (index i v)) (let (t_2 (exp t_1)) t_2)))))
                (d$v (build t (lam (i : Integer)
                       (let ((t_2 (index i t_3))
                             (d$r_1 (index i d$r))
                             (d$t_1 (mul d$r_1 t_2)))
                         d$t_1)))))
            d$v))
    """,
    # if: one branch's reverse pass or the other's; an Integer parameter's cotangent is (tuple)
    "rev$h": """
        (def rev$h (Tuple Float (Tuple)) ((x : Float) (n : Integer) (d$r : Float))
          (let ((t (gt x 0.0))
                (d$if (if t
                          (let (t_1 (to_float n)) (let (d$x (mul d$r t_1)) d$x))
                          (let (d$x_1 (neg d$r)) d$x_1))))
            (tuple d$if (tuple))))
    """,
    # tuple and get: a tuple's tangent has (Tuple) for its Integer
    "fwd$k": """
        (def fwd$k Float ((t : (Tuple Float Integer)) (d$t : (Tuple Float (Tuple))))
          (let ((d$t_1 (get$1$2 d$t))
                (t_2 (get$2$2 t))
                (t_3 (to_float t_2))
                (d$t_4 (mul d$t_1 t_3)))
            d$t_4))
    """,
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_golden(name: str) -> None:
    program = parse_program(GOLDEN_SOURCE)
    mode, _, primal = name.partition("$")
    made = derivative_defs(program, [primal], mode).new[-1]
    assert format_def(made) == textwrap.dedent(GOLDEN[name]).strip()


def test_tangent_types_follow_ksc() -> None:
    assert tangent_type(FLOAT) is FLOAT
    assert tangent_type(INTEGER) is tuple_of()
    assert tangent_type(vec(tuple_of(FLOAT, INTEGER))) is vec(tuple_of(FLOAT, tuple_of()))


#: One def per construct (and a few of their mixtures); each is checked against finite differences.
CONSTRUCTS = """
(edef tanh Float (Float))
(edef cosh Float (Float))
(edef pow Float (Float Float))
(edef abs Float (Float))
(def let_shadow Float ((x : Float)) (let (y (mul x x)) (let (y (add y x)) (mul y y))))
(def multi_let Float ((x : Float) (y : Float)) (let ((a (div x y)) (b (sub a y))) (mul a b)))
(def branches (Vec Float) ((v : Vec Float) (c : Float))
  (build (size v) (lam (i : Integer) (if (and (gt (index i v) c) (lt i 2)) (mul c (index i v)) (add c 1.0)))))
(def tuples (Tuple Float (Vec Float)) ((p : Tuple Float (Vec Float)) (s : Float))
  (let (q (tuple (mul s (get$1$2 p)) (get$2$2 p))) (tuple (get$1$2 q) (mul (get$1$2 q) (get$2$2 q)))))
(def sums Float ((m : Vec (Vec Float)))
  (sumbuild (size m) (lam (i : Integer) (sum (build (size (index i m)) (lam (j : Integer) (mul (index j (index i m)) (index i (index j m)))))))))
(def vector_arith (Vec Float) ((a : Vec Float) (b : Vec Float) (s : Float))
  (div (sub (mul a b) (mul s a)) (add b (neg s))))
(def broadcast (Vec (Vec Float)) ((m : Vec (Vec Float)) (s : Float)) (add s (mul m s)))
(def math Float ((x : Float) (y : Float))
  (add (add (exp (log x)) (tanh y)) (add (add (cosh x) (pow x y)) (add (abs (sub x y)) (max x y)))))
(def prelude Float ((x : Float) (y : Float)) (mul$ff (add$ff x y) (div$ff (exp$f x) (log$f y))))
(def vec_prelude (Vec Float) ((a : Vec Float) (b : Vec Float)) (add$vfvf a b))
(def vectors (Vec Float) ((x : Float) (v : Vec Float))
  (add (deltaVec (size v) 1 x) (add (constVec (size v) (mul x x)) v)))
(def sized Float ((v : Vec n Float)) (sumbuild n (lam (i : Integer) (mul (to_float i) (index i v)))))
(def lams Float ((x : Float))
  (let (f (lam (y : Float) (mul y x))) (add (f x) ((lam (z : Float) (f (mul z z))) 2.0))))
(def asserts Float ((x : Float)) (assert (gt x 0.0) (mul x x)))
(def calls Float ((x : Float) (y : Float)) (add (math x y) (multi_let y x)))
(def int_vec Float ((is : Vec Integer) (v : Vec Float)) (index (sub (index 0 is) 1) v))
(def const_result Float ((x : Float)) 3.0)
(def int_result Integer ((x : Float) (n : Integer)) (add n 1))
(def bools Bool ((x : Float)) (gt x 1.0))
"""


@pytest.mark.parametrize("name", [d.name for d in parse_program(CONSTRUCTS).targets])
def test_construct(name: str) -> None:
    program = parse_program(CONSTRUCTS)
    made = {d.name: d for d in derivative_defs(program, [name], "both").new}
    check_finite_differences(program.defs[name], made[f"fwd${name}"], made[f"rev${name}"], seed=3, trials=3)
    assert parse_program(format_program(grad_program(program, [name]))).defs[f"rev${name}"]


# -- errors --------------------------------------------------------------------------------------
BAD = [
    ("(edef g Float (Float))\n(def f Float ((x : Float)) (mul 2.0 (g x)))", 2, 37, "edef 'g' has no derivative"),
    (
        "(def f Float ((n : Integer))\n  (mul 2.0 (to_float n)))",
        2,
        12,
        "computed only from Integers (through to_float)",
    ),
    ("(def f Float () 1.0)", 1, 1, "from no Float parameter"),
    ("(def f Float ((g : Lam Float Float)) (g 1.0))", 1, 15, "parameter 'g' is a function"),
    ("(def f (Lam Float Float) ((x : Float)) (lam (y : Float) (mul x y)))", 1, 1, "returns a function"),
    (
        "(def rev$f Float ((x : Float)) x)\n(def f Float ((x : Float)) x)",
        1,
        1,
        "the program's 'rev$f' is not the rev mode of 'f'",
    ),
    (
        "(edef g Float (Float))\n(def rev$g Float ((x : Float))  x)\n(def f Float ((x : Float)) (g x))",
        2,
        1,
        "not the rev mode of 'g'",
    ),
]


@pytest.mark.parametrize(("source", "line", "col", "message"), BAD)
def test_errors_are_one_line_with_a_position(
    source: str, line: int, col: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.ks"
    path.write_text(source + "\n")
    out = tmp_path / "out.ks"
    code, stdout, stderr = run_cli(main, capsys, "grad", str(path), "--mode", "rev", "-o", str(out))
    assert code == 1 and stdout == "" and not out.exists()
    assert stderr == f"{path}:{line}:{col}: error: cannot differentiate 'f': {stderr.split(': ', 3)[3]}"
    assert message in stderr and stderr.count("\n") == 1


def test_edef_with_declared_derivatives() -> None:
    """An edef's rev$/fwd$ of the program (of the conventional signature) are called."""
    program = parse_program(
        """
        (edef g Float (Float))
        (edef fwd$g Float (Float Float))
        (edef rev$g Float (Float Float))
        (def f Float ((x : Float)) (mul x (g x)))
        """
    )
    text = format_program(grad_program(program))
    assert "(rev$g x " in text and "(fwd$g x " in text


# -- the command ---------------------------------------------------------------------------------
SMALL = "(def dense (Vec Float) ((w : Vec (Vec Float)) (x : Vec Float))\n" + (
    "  (build (size w) (lam (i : Integer) (max 0.0 (sumbuild (size x) (lam (j : Integer)"
    " (mul (index j (index i w)) (index j x))))))))\n"
)


def test_grad_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "dense.ks"
    src.write_text(SMALL)
    code, out, err = run_cli(main, capsys, "grad", str(src), "--mode", "rev")
    assert code == 0 and err == ""
    assert [d.name for d in parse_program(out).targets] == ["dense", "rev$dense"]
    code, out, _ = run_cli(main, capsys, "grad", str(src))
    assert [d.name for d in parse_program(out).targets] == ["dense", "fwd$dense", "rev$dense"]
    target = tmp_path / "out.ks"
    assert run_cli(main, capsys, "grad", str(src), "--def", "dense", "-o", str(target))[0] == 0
    assert load_program(target).defs["rev$dense"].ret_type is load_program(target).defs["rev$dense"].ret_type
    code, _, err = run_cli(main, capsys, "grad", str(src), "-o", str(target))
    assert code == 1 and "the file exists; add --force" in err
    assert run_cli(main, capsys, "grad", str(src), "--mode", "fwd", "-o", str(target), "--force")[0] == 0
    assert "rev$dense" not in load_program(target).defs and "fwd$dense" in load_program(target).defs
    code, _, err = run_cli(main, capsys, "grad", str(src), "-o", str(src), "--force")
    assert code == 1 and "names the input file" in err and src.read_text() == SMALL
    code, _, err = run_cli(main, capsys, "grad", str(src), "--def", "dens")
    assert code == 1 and "did you mean 'dense'" in err
    code, _, err = run_cli(main, capsys, "grad", str(src), "-o", str(tmp_path / "no" / "out.ks"))
    assert code == 1 and "folder does not exist" in err


def test_grad_keeps_the_programs_own_derivatives(capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import PROGRAMS

    code, out, err = run_cli(
        main, capsys, "grad", str(PROGRAMS / "conv1d_rev_template.kso"), "--def", "conv1d", "--mode", "rev"
    )
    assert code == 0 and "keeping the program's own 'rev$conv1d'" in err
    assert out == format_program(load_program(PROGRAMS / "conv1d_rev_template.kso"))


def test_unknown_def_in_python() -> None:
    with pytest.raises(KsError, match="no def named 'nope'"):
        derivative_defs(parse_program(SMALL), ["nope"])
