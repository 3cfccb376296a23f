"""knossos rules / actions / rewrite / simplify: output formats and one-line errors."""

from __future__ import annotations

import json

import pytest

from knossos.cli import main
from knossos.parser import load_program, parse_program
from rules.sets import RULE_SETS

from conftest import PROGRAMS

BLAS = str(PROGRAMS / "blas_test.kso")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_rules_listing(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "rules")
    assert code == 0 and "ml_rules (63 rules)" in out and "simplify_rules (35 rules)" in out
    code, out, _ = run(capsys, "rules", "--set", "binding_rules", "--json")
    listed = json.loads(out)["binding_rules"]
    assert [r["name"] for r in listed] == [
        "new_bind",
        "lift_bind",
        "cse_bind",
        "inline_let",
        "delete_let",
        "let_recover",
    ]
    assert all({"name", "lhs", "rhs", "conditions", "domain"} <= set(r) for r in listed)


def test_rule_set_sizes_and_names() -> None:
    sizes = {name: len(s) for name, s in RULE_SETS.items()}
    assert sizes["simplify_rules"] == 35 and sizes["binding_rules"] == 6 and sizes["ml_rules"] == 63
    assert sizes["ml_rules_no_bind"] == 59
    assert "new_bind" not in RULE_SETS["ml_rules_no_bind"] and "inline_call" in RULE_SETS["ml_rules"]
    for s in RULE_SETS.values():
        names = [r.name for r in s]
        assert len(names) == len(set(names))


def test_actions_json_costs_match_rewrite(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "actions", BLAS, "--def", "axpy", "--rules", "ml_rules_no_bind", "--json")
    found = json.loads(out)
    assert code == 0 and found and all(set(a) == {"node", "rule", "cost"} for a in found)
    first = found[0]
    code, out, _ = run(
        capsys,
        "rewrite",
        BLAS,
        "--def",
        "axpy",
        "--rules",
        "ml_rules_no_bind",
        "--apply",
        f"{first['node']}:{first['rule']}",
        "--json",
    )
    result = json.loads(out)
    assert result["cost"] == first["cost"] == result["steps"][0]["cost"]
    assert result["steps"][0]["node"] == first["node"] and "(" in result["expr"]


def test_rewrite_prints_the_def(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "rewrite", BLAS, "--def", "axpy", "--rules", "ml_rules_no_bind", "--apply", "6:inline_call"
    )
    assert code == 0 and out.startswith("(def axpy (Vec Float)")
    rewritten = parse_program(out, "out.ks").defs["axpy"]
    assert "scal" not in out.split("(def axpy", 1)[1]
    assert rewritten.ret_type is load_program(PROGRAMS / "blas_test.kso").defs["axpy"].ret_type


def test_simplify(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simplify", BLAS, "--def", "gemm_climbed_inner_prod", "--json")
    costs = json.loads(out)["defs"]["gemm_climbed_inner_prod"]
    assert code == 0 and costs["cost"] < costs["start_cost"] / 100
    code, out, _ = run(capsys, "simplify", "--expr", "(let (a (add x 0.0)) (mul a 1.0))")
    assert out.strip() == "x"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["actions", BLAS, "--def", "axpy", "--rules", "nope"], "unknown rule set 'nope'"),
        (["rewrite", BLAS, "--def", "axpy", "--apply", "999:inline_let"], "node 999 is out of range"),
        (["rewrite", BLAS, "--def", "axpy", "--apply", "0:commute_add"], "rule commute_add does not apply at node 0"),
        (["rewrite", BLAS, "--def", "axpy", "--apply", "0:no_such_rule"], "unknown rule 'no_such_rule'"),
        (["rewrite", BLAS, "--def", "axpy", "--apply", "zero:delete_let"], "bad rewrite 'zero:delete_let'"),
        (["rewrite", BLAS, "--def", "axpy"], "give at least one --apply"),
        (["actions", BLAS], "give the def to work on"),
        (["actions", BLAS, "--def", "nope"], "no def named 'nope'"),
        (["simplify", "--expr", "(add x"], "never closed"),
        (["rules", "--set", "nope"], "unknown rule set"),
    ],
)
def test_bad_input_is_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    code, out, err = run(capsys, *argv)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and ": error: " in err and message in err and "Traceback" not in err
