"""The shared programs and expression sets: they parse, type-check, print back, and cost as the reference."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from knossos.parser import load_program, parse_expr, parse_program
from knossos.printer import format_expr, format_program
from knossos.program import Program

from conftest import DATA, PROGRAM_FILES, PROGRAMS

_cache: dict[str, Program] = {}


def program(name: str) -> Program:
    if name not in _cache:
        _cache[name] = load_program(PROGRAMS / name)
    return _cache[name]


def reference_start_costs() -> list[tuple[str, str, float]]:
    """(file, def, start cost) from best_known_costs_programs.txt, for the files we have."""
    files = {
        "ksc/blas/blas_test.kso": "blas_test.kso",
        "ksc/blas/blas_combined.kso": "blas_train.kso",  # blas_combined's defs are blas_train's
        "ksc/release/gelu.kso": "gelu.kso",
        "ksc/extra/binding_simplify_defs_tuples.kso": "binding_simplify_defs_tuples.kso",
    }
    out: list[tuple[str, str, float]] = []
    current = None
    for line in (DATA / "best_known_costs_programs.txt").read_text().splitlines():
        if line.startswith("=="):
            current = files.get(line.split()[1])
            continue
        m = re.match(r"\s+(\S+)\s+start=\s*([0-9.]+)", line)
        if m and current:
            # blas_combined also holds add_index_scal, which we have in blas_test
            file = current if m.group(1) in program(current).defs else "blas_test.kso"
            out.append((file, m.group(1), float(m.group(2))))
    return out


def arithmetic_expressions() -> list[tuple[str, str, float]]:
    sets = json.loads((DATA / "arithmetic_sets.json").read_text())["sets"]
    return [(name, e["expr"], e["start_cost"]) for name, s in sets.items() for e in s["expressions"]]


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: p.name)
def test_every_program_parses_and_type_checks(path: Path) -> None:
    p = load_program(path)
    assert p.defs
    for d in p.defs.values():
        assert d.body.type is d.ret_type


def test_reference_start_costs_are_reproduced() -> None:
    cases = reference_start_costs()
    # every start= line: 2 x 49 blas_test, 25 blas_combined, 2 x 5 gelu, 29 binding_simplify_defs_tuples
    assert len(cases) == 162
    wrong = [(f, d, program(f).def_cost(d), c) for f, d, c in cases if abs(program(f).def_cost(d) - c) > 0.05]
    assert not wrong


@pytest.mark.parametrize(("set_name", "text", "start_cost"), arithmetic_expressions())
def test_arithmetic_set_start_costs(set_name: str, text: str, start_cost: float) -> None:
    e, free = parse_expr(text)
    assert e.cost == pytest.approx(start_cost, abs=0.05)
    assert {v.data for v in free} <= {"x", "y"}


@pytest.mark.parametrize("path", PROGRAM_FILES, ids=lambda p: p.name)
def test_print_parse_round_trip(path: Path) -> None:
    p = load_program(path)
    text = format_program(p)
    q = parse_program(text, "printed.ks")
    assert list(q.defs) == list(p.defs) and list(q.edefs) == list(p.edefs)
    for name, d in p.defs.items():
        e = q.defs[name]
        assert e.body is d.body  # interned: identical means equal
        assert (e.params, e.ret_type) == (d.params, d.ret_type)
    assert q.edefs == p.edefs
    assert format_program(q) == text  # printing is a fixed point


@pytest.mark.parametrize(("set_name", "text", "start_cost"), arithmetic_expressions()[:12])
def test_expression_round_trip(set_name: str, text: str, start_cost: float) -> None:
    e, _ = parse_expr(text)
    for width in (20, 100):
        assert parse_expr(format_expr(e, width))[0] is e


def test_printer_respects_width_where_it_can() -> None:
    p = program("blas_test.kso")
    text = format_program(p, width=80)
    long_lines = [line for line in text.splitlines() if len(line) > 80]
    assert len(long_lines) < 0.02 * len(text.splitlines())


def test_sized_vectors_and_comments() -> None:
    text = """
    ; a line comment
    #| a block comment #| nested |# still comment |#
    (def mmul (Vec n (Vec l Float))
         ((x : Vec n (Vec m Float)) (y : Vec m (Vec l Float)))
      (build n (lam (i : Integer) (build l (lam (k : Integer)
        (sumbuild m (lam (j : Integer) (mul (index j (index i x)) (index k (index j y))))))))))
    """
    p = parse_program(text, "sized.ks")
    d = p.defs["mmul"]
    assert d.size_vars == ("n", "m", "l")
    assert d.body.free == {"x", "y", "n", "m", "l"}
    printed = format_program(p)
    assert "(Vec n (Vec m Float))" in printed
    assert parse_program(printed, "again.ks").defs["mmul"] == d
