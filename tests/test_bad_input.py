"""Bad input on the command line: one line on stderr, ``FILE[:LINE:COL]: error: ...``, exit status 1.

Every case runs ``knossos.cli.main`` in-process (with ``capsys``); a few also run ``python -m knossos``
in a real process to show that no traceback escapes.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from knossos.cli import main
from knossos.types import MAX_TYPE_DEPTH

ROOT = Path(__file__).resolve().parent.parent


# -- helpers ---------------------------------------------------------------------------------------
def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``knossos ARGV...`` in-process: (exit status, stdout, stderr)."""
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def assert_one_error_line(
    status: int,
    out: str,
    err: str,
    file: str,
    line: int | None = None,
    col: int | None = None,
    message: str | None = None,
) -> str:
    """The CLI failed cleanly: status 1, one stderr line naming ``file`` (and the position, if given)."""
    assert "Traceback" not in err and "Traceback" not in out
    assert "internal error" not in err
    assert status == 1, (status, err)
    assert err.endswith("\n") and err.count("\n") == 1, f"not exactly one line: {err!r}"
    text = err.rstrip("\n")
    assert text.startswith(file), f"{text!r} does not start with {file!r}"
    assert "error:" in text
    rest = text[len(file) :]
    if line is not None:
        assert rest.startswith(f":{line}:{col}: error: "), f"expected {file}:{line}:{col}: in {text!r}"
    else:
        assert rest.startswith(": error: "), f"expected no position in {text!r}"
    if message is not None:
        assert message in text, f"{message!r} not in {text!r}"
    return text


# -- syntax and type errors, with positions --------------------------------------------------------
POSITIONAL = [
    # (id, text, line, col, part of the message)
    (
        "missing-close-paren",
        "(def f Float ((x : Float))\n  (add x (mul x 2.0))\n",
        1,
        1,
        "never closed",
    ),
    (
        "missing-inner-close-paren",
        "(def f Float ((x : Float))\n  (add x (mul x 2.0)\n",
        2,
        3,
        "'(' opened at line 2, column 3 is never closed",
    ),
    (
        "extra-close-paren",
        "(def f Float ((x : Float))\n  (add x 1.0)))\n",
        2,
        15,
        "')' without a matching '('",
    ),
    ("unknown-function", "(def f Float ((x : Float))\n  (frob x 1.0))\n", 2, 4, "unknown function 'frob'"),
    ("unknown-operator-head", "(def f Float ((x : Float))\n  (1.0 x))\n", 2, 4, "expected an operator"),
    ("wrong-arity", "(def f Float ((x : Float))\n  (add x))\n", 2, 3, "'add' takes 2 argument(s), not 1"),
    (
        "ill-typed-let",
        "(def f Float ((x : Float))\n  (let (x 1) (add x 1.0)))\n",
        2,
        14,
        "'add' cannot combine Integer and Float",
    ),
    ("undefined-variable", "(def f Float ((x : Float))\n  (add z 1.0))\n", 2, 8, "undefined variable 'z'"),
    ("bad-literal-1.2.3", "(def f Float ((x : Float))\n  (add x 1.2.3))\n", 2, 10, "bad literal '1.2.3'"),
    ("bad-literal-12abc", "(def f Integer ((n : Integer))\n  (add n 12abc))\n", 2, 10, "bad literal '12abc'"),
    (
        "get-index-out-of-range",
        "(def f Float ((t : Tuple Float Float))\n  (get$3$2 t))\n",
        2,
        4,
        "get$3$2: the index must be between 1 and 2",
    ),
    (
        "wrong-return-type",
        "(def f Integer ((x : Float))\n  (add x 1.0))\n",
        2,
        3,
        "declared to return Integer",
    ),
    ("unknown-type", "(def f Float ((x : Flaot)) x)\n", 1, 20, "unknown type 'Flaot'"),
    ("top-level-junk", "(def f Float ((x : Float)) x)\n(add 1.0 2.0)\n", 2, 1, "expected (def ...) or (edef ...)"),
    ("unexpected-character", '(def f Float ((x : Float)) "x")\n', 1, 28, "unexpected character"),
    ("unclosed-block-comment", "(def f Float ((x : Float)) x)\n#| no end\n", 2, 1, "never closed"),
    ("duplicate-def", "(def f Float ((x : Float)) x)\n(def f Float ((x : Float)) x)\n", 2, 6, "already defined"),
]


@pytest.mark.parametrize(
    ("text", "line", "col", "message"), [c[1:] for c in POSITIONAL], ids=[c[0] for c in POSITIONAL]
)
def test_positional_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, line: int, col: int, message: str
) -> None:
    path = write(tmp_path, "bad.ks", text)
    for command in (["check"], ["print"], ["cost"], ["cost", "--json"]):
        status, out, err = run_cli(capsys, *command, path)
        assert_one_error_line(status, out, err, path, line, col, message)
        assert out == ""


def test_check_reports_each_bad_file_and_still_checks_the_good_ones(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = write(tmp_path, "good.ks", "(def f Float ((x : Float)) (add x 1.0))\n")
    bad1 = write(tmp_path, "bad1.ks", "(def f Float ((x : Float)) (add x)\n")
    bad2 = write(tmp_path, "bad2.ks", "(def f Float ((x : Float)) (add x 1.0)))\n")
    status, out, err = main(["check", bad1, good, bad2]), *capsys.readouterr()
    assert status == 1
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"{bad1}:1:1: error: ")
    assert lines[1].startswith(f"{bad2}:1:40: error: ")
    assert out == f"{good}: ok: 1 defs, 0 edefs, 3 nodes\n"


# -- files that are not programs -------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    ["", "   \n\n\t  \n", "; only a comment\n", "#| block |#\n"],
    ids=["empty", "blank", "line-comment", "block-comment"],
)
def test_empty_file(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "empty.ks", text)
    for command in ("check", "print", "cost"):
        status, out, err = run_cli(capsys, command, path)
        assert_one_error_line(status, out, err, path, message="no definitions")


def test_binary_garbage(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = bytes(random.Random(1234).randrange(256) for _ in range(4096)) + b"\x00(def"
    path = write(tmp_path, "garbage.ks", data)
    for command in ("check", "print", "cost"):
        status, out, err = run_cli(capsys, command, path)
        assert_one_error_line(status, out, err, path, message="binary file")


def test_not_utf8(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "latin1.ks", "(def f Float ((x : Float)) x) ; caf\xe9\n".encode("latin-1"))
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, message="not UTF-8")


def test_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path / "no_such_file.ks")
    for command in ("check", "print", "cost"):
        status, out, err = run_cli(capsys, command, path)
        assert_one_error_line(status, out, err, path, message="no such file")
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", "[1.0]")
    assert_one_error_line(status, out, err, path, message="no such file")


def test_directory_instead_of_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path)
    for command in ("check", "print", "cost"):
        status, out, err = run_cli(capsys, command, path)
        assert_one_error_line(status, out, err, path, message="directory")


# -- deep nesting ----------------------------------------------------------------------------------
DEPTH = 100_000


def test_deeply_nested_parentheses_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "deep.ks", "(" * DEPTH + ")" * DEPTH + "\n")
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 1, "expected (def ...) or (edef ...)")


def test_deeply_nested_parentheses_unbalanced(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "deep.ks", "(" * DEPTH + ")" * (DEPTH - 1))
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 1, "never closed")
    path = write(tmp_path, "deep2.ks", "(" * DEPTH + ")" * (DEPTH + 1))
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 2 * DEPTH + 1, "without a matching")


def test_deeply_nested_empty_lists_in_a_def(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "(def f Float ((x : Float)) " + "(" * DEPTH + ")" * DEPTH + ")\n"
    path = write(tmp_path, "deep.ks", text)
    status, out, err = run_cli(capsys, "check", path)
    # a list in function position is converted as a function expression ((lam ...) x): the innermost () is the error
    assert_one_error_line(status, out, err, path, 1, 28 + DEPTH - 1, "empty form ()")


def test_deeply_nested_valid_def_is_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "(def f Float ((x : Float)) " + "(add x " * DEPTH + "x" + ")" * DEPTH + ")\n"
    path = write(tmp_path, "deep.ks", text)
    status, out, err = run_cli(capsys, "check", path)
    assert (status, err) == (0, "")
    assert out == f"{path}: ok: 1 defs, 0 edefs, {2 * DEPTH + 1} nodes\n"


def test_deeply_nested_error_is_located(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = "(def f Float ((x : Float))\n" + "(add x " * DEPTH + "z" + ")" * DEPTH + ")\n"
    path = write(tmp_path, "deep.ks", text)
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 2, 7 * DEPTH + 1, "undefined variable 'z'")


# -- cost --def ------------------------------------------------------------------------------------
PROGRAM = "(def f Float ((x : Float) (v : Vec Float)) (add x (index 0 v)))\n"


def test_cost_unknown_def(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    status, out, err = run_cli(capsys, "cost", path, "--def", "g")
    assert_one_error_line(status, out, err, path, message="no def named 'g'")
    status, out, err = run_cli(capsys, "cost", path, "--def", "ff", "--json")
    assert_one_error_line(status, out, err, path, message="did you mean 'f'?")
    status, out, err = run_cli(capsys, "eval", path, "g", "--args", "[1.0, [1.0]]")
    assert_one_error_line(status, out, err, path, message="no def named 'g'")


# -- eval: arguments -------------------------------------------------------------------------------
def test_eval_works(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The baseline the failing cases below are compared with."""
    path = write(tmp_path, "p.ks", PROGRAM)
    assert run_cli(capsys, "eval", path, "f", "--args", "[1.0, [2.0]]") == (0, "3.0\n", "")


def test_eval_bad_json_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = write(tmp_path, "args.json", "[1.0,\n [2.0,]]\n")
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    assert_one_error_line(status, out, err, args, 2, 7, "bad JSON")


def test_eval_bad_inline_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", "[1.0, [2.0]")
    assert_one_error_line(status, out, err, "<args>", 1, 12, "bad JSON")
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", "[1.0,\n [2.0")
    assert_one_error_line(status, out, err, "<args>", 2, 6, "bad JSON")


def test_eval_missing_args_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = str(tmp_path / "nope.json")
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    assert_one_error_line(status, out, err, args, message="no such file")


def test_eval_deeply_nested_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = write(tmp_path, "deep.json", "[" * DEPTH + "]" * DEPTH)
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    assert_one_error_line(status, out, err, args, message="nested too deeply")


def test_eval_wrong_number_of_args(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    for raw in ([1.0], [1.0, [2.0], 3.0], []):
        args = write(tmp_path, "args.json", json.dumps(raw))
        status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
        assert_one_error_line(status, out, err, args, message=f"'f' takes 2 argument(s), the list has {len(raw)}")


def test_eval_args_not_a_list(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = write(tmp_path, "args.json", '{"x": 1.0}')
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    assert_one_error_line(status, out, err, args, message="must be a JSON list")


@pytest.mark.parametrize("inline", ["[1.0,\n [2.0],\n 3.0]", '{\n"x": 1.0}'], ids=["count", "not-a-list"])
def test_eval_inline_args_error_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path, inline: str) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", inline)
    assert_one_error_line(status, out, err, "<args>")


WRONG_TYPES = [
    ('["a", [1.0]]', "argument 'x' must be a Float"),
    ("[[1.0], 1.0]", "argument 'x' must be a Float"),
    ("[true, [1.0]]", "argument 'x' must be a Float"),
    ("[1.0, 2.0]", "argument 'v' must be a vector"),
    ("[1.0, [true]]", "argument 'v'[0] must be a Float"),
    ('[1.0, {"tuple": [1.0]}]', "argument 'v' must be a vector"),
]


@pytest.mark.parametrize(("raw", "message"), WRONG_TYPES)
def test_eval_wrong_argument_type(capsys: pytest.CaptureFixture[str], tmp_path: Path, raw: str, message: str) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = write(tmp_path, "args.json", raw)
    status, out, err = main(["eval", path, "f", "--args", args]), *capsys.readouterr()
    assert "Traceback" not in err and status == 1 and out == ""
    assert err.count("\n") == 1 and ": error: " in err and message in err


# The same two eval-time cases as the brief's, failing only on the "names the file" requirement.
EVAL_TIME = [
    ("index-out-of-range", "(def f Float ((v : Vec Float)) (index 5 v))\n", "[[1.0]]", "index 5 is out of range"),
    ("failing-assert", "(def f Float ((x : Float)) (assert (gt x 0.0) x))\n", "[-1.0]", "assertion failed"),
    ("integer-division-by-zero", "(def f Integer ((n : Integer)) (div 1 n))\n", "[0]", "division by zero"),
    (
        "negative-build",
        "(def f (Vec Float) ((n : Integer)) (build n (lam (i : Integer) 1.0)))\n",
        "[-1]",
        "negative size",
    ),
]


@pytest.mark.parametrize(("text", "raw", "message"), [c[1:] for c in EVAL_TIME], ids=[c[0] for c in EVAL_TIME])
def test_eval_time_error(capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, raw: str, message: str) -> None:
    path = write(tmp_path, "p.ks", text)
    status, out, err = main(["eval", path, "f", "--args", raw]), *capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err
    assert status == 1 and out == ""
    assert err.count("\n") == 1 and ": error: " in err and message in err


def test_eval_step_limit(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", "(def f Float ((n : Integer)) (sumbuild n (lam (i : Integer) 1.0)))\n")
    status, _, err = main(["eval", path, "f", "--args", "[1000]", "--max-steps", "10"]), *capsys.readouterr()
    assert status == 1 and err.count("\n") == 1 and "more than 10 steps" in err


@pytest.mark.parametrize(("raw", "message"), WRONG_TYPES[:2])
def test_eval_wrong_argument_type_names_a_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, raw: str, message: str
) -> None:
    path = write(tmp_path, "p.ks", PROGRAM)
    args = write(tmp_path, "args.json", raw)
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    named = path if err.startswith(path) else args
    assert_one_error_line(status, out, err, named, message=message)


#: Where each EVAL_TIME error happens: the expression that failed (the index, the assert, the division, the build).
EVAL_TIME_AT = [(1, 32), (1, 28), (1, 32), (1, 36)]


@pytest.mark.parametrize(
    ("text", "raw", "message", "at"),
    [(*c[1:], at) for c, at in zip(EVAL_TIME, EVAL_TIME_AT, strict=True)],
    ids=[c[0] for c in EVAL_TIME],
)
def test_eval_time_error_names_the_file_and_expression(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, raw: str, message: str, at: tuple[int, int]
) -> None:
    path = write(tmp_path, "p.ks", text)
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", raw)
    assert_one_error_line(status, out, err, path, *at, message=message)


# -- --expr ----------------------------------------------------------------------------------------
EXPR_SYNTAX = [
    ("(add x", 1, 1, "never closed"),
    ("(add x 1.0))", 1, 12, "without a matching"),
    ("(add x 1.2.3)", 1, 8, "bad literal"),
    ("(frob x)", 1, 2, "unknown function 'frob'"),
    ("(add x)", 1, 1, "'add' takes 2 argument(s)"),
    ("(let (y 1) (add y 1.0))", 1, 12, "cannot combine Integer and Float"),
    ("(add x\n   (mul x 1.0.0))", 2, 11, "bad literal"),
]


@pytest.mark.parametrize(("expr", "line", "col", "message"), EXPR_SYNTAX)
def test_expr_errors(capsys: pytest.CaptureFixture[str], expr: str, line: int, col: int, message: str) -> None:
    for argv in (
        ["check", "--expr", expr],
        ["print", "--expr", expr],
        ["cost", "--expr", expr],
        ["eval", "--expr", expr, "--args", "[1.0]"],
    ):
        status, out, err = run_cli(capsys, *argv)
        assert_one_error_line(status, out, err, "<expr>", line, col, message)


@pytest.mark.parametrize("expr", ["", "   ", "x y", "(add x 1.0) (add x 2.0)"])
def test_expr_not_one_expression(capsys: pytest.CaptureFixture[str], expr: str) -> None:
    status, out, err = run_cli(capsys, "check", "--expr", expr)
    assert_one_error_line(status, out, err, "<expr>", message="expected one expression")


def test_expr_eval_wrong_free_variables(capsys: pytest.CaptureFixture[str]) -> None:
    status, _, err = run_cli(capsys, "eval", "--expr", "(add x y)", "--args", "[1.0]")
    assert status == 1 and err.count("\n") == 1 and "2 free variable(s)" in err
    status, _, err = run_cli(capsys, "eval", "--expr", "(add x y)", "--args", '{"x": 1.0, "z": 2.0}')
    assert status == 1 and err.count("\n") == 1 and "missing ['y']" in err


# -- library bugs found by these tests -------------------------------------------------------------
BIG_INT = "1" * 5000


def test_huge_integer_literal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "big.ks", f"(def f Integer ((n : Integer)) (add n {BIG_INT}))\n")
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 39)


def test_huge_integer_in_args(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", "(def f Integer ((n : Integer)) n)\n")
    args = write(tmp_path, "args.json", f"[{BIG_INT}]")
    status, out, err = run_cli(capsys, "eval", path, "f", "--args", args)
    assert_one_error_line(status, out, err, args)


def test_to_float_overflow(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", "(def f Float ((n : Integer)) (to_float n))\n")
    args = write(tmp_path, "args.json", f"[{'9' * 400}]")
    status, _, err = main(["eval", path, "f", "--args", args]), *capsys.readouterr()
    assert status == 1 and err.count("\n") == 1 and "internal error" not in err


def test_infinite_float_literal_is_located(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "inf.ks", "(def f Float ((x : Float))\n  (add x 1e999))\n")
    for command in ("check", "print", "cost"):
        status, out, err = run_cli(capsys, command, path)
        assert_one_error_line(status, out, err, path, 2, 10, "finite")


def test_infinite_float_literal_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "inf.ks", "(def f Float ((x : Float))\n  (add x 1e999))\n")
    status, _, err = run_cli(capsys, "check", path)
    assert status == 1 and err.count("\n") == 1 and "finite" in err and "Traceback" not in err


@pytest.mark.parametrize("depth", [1000, 5000])
def test_deeply_nested_tuple_expression(capsys: pytest.CaptureFixture[str], depth: int) -> None:
    """Types are limited to MAX_TYPE_DEPTH levels: deeper nesting is a clean error, not a RecursionError."""
    expr = "(tuple " * depth + "x" + ")" * depth
    status, out, err = run_cli(capsys, "check", "--expr", expr)
    # reported at the tuple whose type first goes over the limit, the MAX_TYPE_DEPTH-th from the inside
    col = (depth - MAX_TYPE_DEPTH) * len("(tuple ") + 1
    assert_one_error_line(status, out, err, "<expr>", 1, col, f"nested more than {MAX_TYPE_DEPTH} levels")
    unwrapped = "(get$1$1 (tuple " * depth + "x" + "))" * depth  # deep expression, shallow types: fine
    assert run_cli(capsys, "eval", "--expr", unwrapped, "--args", "[2.5]") == (0, "2.5\n", "")


def test_tuple_types_up_to_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    depth = MAX_TYPE_DEPTH - 1
    expr = "(tuple " * depth + "x" + ")" * depth
    status, out, err = run_cli(capsys, "eval", "--expr", expr, "--args", "[2.5]")
    assert (status, err) == (0, "")
    assert out.strip() == '{"tuple": [' * depth + "2.5" + "]}" * depth


def test_eval_result_deeply_nested(capsys: pytest.CaptureFixture[str]) -> None:
    expr = "(tuple " * 1000 + "x" + ")" * 1000
    status, _, err = run_cli(capsys, "eval", "--expr", expr, "--args", "[2.5]")
    assert status == 1 and "internal error" not in err and err.count("\n") == 1


def test_deep_type_in_type_error_message(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    depth = MAX_TYPE_DEPTH - 1
    path = write(tmp_path, "t.ks", "(def f Float ((x : Float)) " + "(tuple " * depth + "x" + ")" * depth + ")\n")
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 28, "declared to return Float")


def test_deeply_nested_vector_arithmetic(capsys: pytest.CaptureFixture[str]) -> None:
    nested = "(build 1 (lam (i : Integer) " * 256 + "x" + "))" * 256
    status, _, err = run_cli(capsys, "check", "--expr", f"(let (b {nested}) (add b b))")
    assert status == 1 and "internal error" not in err and "nested more than" in err


def test_bad_literal_with_escaped_newline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = write(tmp_path, "nl.ks", "(def f Float ((x : Float)) (add x 1\\\n.0))\n")
    status, out, err = run_cli(capsys, "check", path)
    assert_one_error_line(status, out, err, path, 1, 35, "bad literal")


@pytest.mark.parametrize("width", ["0", "-5", "1", "5"])
def test_print_tiny_width(capsys: pytest.CaptureFixture[str], tmp_path: Path, width: str) -> None:
    """A width smaller than a name used to crash the printer (KeyError on a variable)."""
    path = write(tmp_path, "p.ks", PROGRAM)
    status, out, err = run_cli(capsys, "print", path, "--width", width)
    assert "internal error" not in err and "Traceback" not in err
    assert status in (0, 1)
    if status == 0:
        again = write(tmp_path, "again.ks", out)
        assert run_cli(capsys, "check", again)[0] == 0


# -- a real process: nothing but the one line ------------------------------------------------------
def run_process(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KNOSSOS_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "knossos", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
        check=False,
    )


def test_process_syntax_error_and_binary_file(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.ks", "(def f Float ((x : Float))\n  (add x 1.2.3))\n")
    garbage = write(tmp_path, "garbage.ks", bytes(random.Random(7).randrange(256) for _ in range(1000)) + b"\x00")
    missing = str(tmp_path / "missing.ks")
    proc = run_process("check", bad, garbage, missing, str(tmp_path))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"{bad}:2:10: error: bad literal '1.2.3'",
        f"{garbage}: error: this is a binary file, not Knossos text",
        f"{missing}: error: no such file",
        f"{tmp_path}: error: is a directory, not a file",
    ]


def test_process_eval_error(tmp_path: Path) -> None:
    path = write(tmp_path, "p.ks", "(def f Float ((v : Vec Float)) (index 5 v))\n")
    proc = run_process("eval", path, "f", "--args", "[[1.0]]")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    assert "error: index 5 is out of range for a vector of size 1" in proc.stderr


def test_process_expr_syntax_error() -> None:
    proc = run_process("eval", "--expr", "(add x (mul x 2.0)", "--args", "[1.0]")
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr + proc.stdout
    assert proc.stderr.splitlines() == [
        "<expr>:1:1: error: unbalanced parentheses: '(' opened at line 1, column 1 is never closed"
    ]
