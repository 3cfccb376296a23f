"""By default an optimisation keeps every value an Integer program computes (issue 44, item 7).

Factoring ``a*b + a*c`` into ``a*(b + c)`` computes ``b + c``, which the program never did: on
``a, b, c = 0, INT_MAX, 1`` the value 0 becomes an Integer overflow.  The rules that may overflow an
Integer where the original did not (``Rule.int_overflow``) leave Integer arithmetic alone unless the
rule set opts in with ``unsafe-int:``; Floats keep them.  Through optimize.py (the default pipeline,
a named set, the e-graph) and ``app.compiled.optimise_def`` (what ``compile_optimised`` runs).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.compiled import optimise_def
from app.optimize_cli import main
from knossos.arith import INT_MAX
from knossos.cli import main as knossos_main
from knossos.errors import KsEvalError
from knossos.interpreter import Interpreter
from knossos.parser import load_program, parse_program
from knossos.printer import format_expr

from conftest import run_cli

FACTORED = "(mul a (add b c))"
INPUTS = [0, INT_MAX, 1]


def program(type_name: str) -> str:
    params = " ".join(f"({v} : {type_name})" for v in "abc")
    return f"(def f {type_name} ({params}) (add (mul a b) (mul a c)))\n"


def optimised_body(capsys: pytest.CaptureFixture[str], tmp_path: Path, type_name: str, *argv: str) -> str:
    """``f``'s body as optimize.py FILE -o OUT writes it (and OUT's f evaluated on INPUTS if Integer)."""
    source, out = tmp_path / "f.ks", tmp_path / "out.ks"
    source.write_text(program(type_name))
    code, _, err = run_cli(main, capsys, str(source), *argv, "--quiet", "-o", str(out), "--force")
    assert code == 0, err
    return format_expr(load_program(out).defs["f"].body)


@pytest.mark.parametrize(
    "argv",
    [(), ("--rules", "ml_rules", "--model", "none"), ("--rules", "all_rules", "--search", "egraph")],
    ids=["default pipeline", "ml_rules", "egraph all_rules"],
)
def test_the_default_optimisation_keeps_an_integer_programs_value(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...]
) -> None:
    body = optimised_body(capsys, tmp_path, "Integer", *argv)
    assert body != FACTORED
    written = load_program(tmp_path / "out.ks")
    assert Interpreter().call(written.defs["f"], INPUTS) == 0
    # Floats are another matter: factoring them is the documented rounding tolerance, and it still happens
    assert optimised_body(capsys, tmp_path, "Float", *argv) == FACTORED


@pytest.mark.parametrize("rules", ["unsafe-int:ml_rules", "unsafe-int:all_rules"])
def test_with_the_opt_in_the_integer_rewrite_happens(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, rules: str
) -> None:
    search = ("--search", "egraph") if rules.endswith("all_rules") else ("--model", "none")
    assert optimised_body(capsys, tmp_path, "Integer", "--rules", rules, *search) == FACTORED
    written = load_program(tmp_path / "out.ks")
    with pytest.raises(KsEvalError, match="Integer overflow"):
        Interpreter().call(written.defs["f"], INPUTS)


def test_compile_defs_optimisation_keeps_integers_unless_asked() -> None:
    """``compile_optimised(path, name, SET)`` optimises with :func:`optimise_def`, which reads SET as --rules does."""
    prog = parse_program(program("Integer"))
    kept = optimise_def(prog, prog.defs["f"], "ml_rules", budget=300)
    assert format_expr(kept.body) != FACTORED and Interpreter().call(kept, INPUTS) == 0
    opted = optimise_def(prog, prog.defs["f"], "unsafe-int:ml_rules", budget=300)
    assert format_expr(opted.body) == FACTORED


def test_knossos_rules_shows_the_guard_and_the_opt_in(capsys: pytest.CaptureFixture[str]) -> None:
    listed = {}
    for name in ("ml_rules", "unsafe-int:ml_rules"):
        code, out, _ = run_cli(knossos_main, capsys, "rules", "--set", name, "--json")
        assert code == 0
        listed[name] = {r["name"]: r for r in json.loads(out)[name]}
    default, unsafe = listed["ml_rules"]["add_of_muls"], listed["unsafe-int:ml_rules"]["add_of_muls"]
    assert default["int_overflow"] and unsafe["int_overflow"]
    assert "no_integers(?a)" in default["conditions"] and "no_integers(?a)" not in unsafe["conditions"]
    assert not listed["ml_rules"]["commute_add"]["int_overflow"]


def test_optimize_help_names_the_opt_in(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(main, capsys, "--help")
    assert code == 0
    assert "unsafe-int:SET" in " ".join(out.split()) and "strict:SET" in out
