"""The tables of the READMEs and docs/ are what experiments.summary makes of the committed results
files: the numbers there are measured ones, and they go stale only with a failing test."""

from __future__ import annotations

from experiments.summary import MARKER, README, READMES, TABLES, rewrite


def test_every_table_is_marked_and_up_to_date() -> None:
    marked = []
    for readme in READMES:
        text = readme.read_text()
        marked += [m["figure"] for m in MARKER.finditer(text)]
        assert rewrite(text) == text, f"{readme.name}: run: python -m experiments.summary --write"
    assert sorted(marked) == sorted(TABLES)  # each table is in exactly one README


def test_a_table_reflects_its_results() -> None:
    text = README.read_text()
    body = next(m["body"] for m in MARKER.finditer(text) if m["figure"] == "fig7_walltime")
    assert "| gemm | n=1024 |" in body


def test_the_training_tables_are_the_runs_reports() -> None:
    for readme in READMES:
        for m in MARKER.finditer(readme.read_text()):
            if m["figure"] == "training_arith":
                assert "arith_h64_b300_seed2" in m["body"]
                assert "   30 |" in m["body"]  # all 30 epochs
                return
    raise AssertionError("no training_arith table")
