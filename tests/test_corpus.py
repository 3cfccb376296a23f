"""The generated arithmetic corpus (experiments/corpus/generator.py) and the committed sets made from it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from experiments.corpus.generator import CONSTANTS, MAX_NODES, MIN_NODES, VARIABLES, CorpusSettings, generate
from experiments.corpus.run import HELDOUT_SEED, TRAIN_SEED, VALIDATION_SEED, make_sets, public_expressions, text
from knossos.expr import Expr, preorder
from knossos.ops import Op
from knossos.parser import parse_expr
from knossos.types import FLOAT

from conftest import DATA

ARITHMETIC = {Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.LOG}


@pytest.fixture(scope="module")
def sample() -> list[Expr]:
    return generate(CorpusSettings(300, 7))


@pytest.fixture(scope="module")
def committed() -> dict[str, list[dict[str, object]]]:
    sets = json.loads((DATA / "generated_sets.json").read_text())["sets"]
    return {name: s["expressions"] for name, s in sets.items()}


def test_the_same_seed_gives_the_same_expressions_and_another_seed_others() -> None:
    a = generate(CorpusSettings(50, 3))
    assert generate(CorpusSettings(50, 3)) == a
    assert len(set(a) & set(generate(CorpusSettings(50, 4)))) < 5


def test_expressions_are_well_typed_floats_of_the_papers_vocabulary(sample: list[Expr]) -> None:
    for e in sample:
        assert e.type == FLOAT
        assert MIN_NODES <= e.size <= MAX_NODES
        for node in preorder(e):
            if node.op == Op.VAR:
                assert node.name in VARIABLES
            elif node.op == Op.CONST:
                assert f"{float(node.data):.1f}" in CONSTANTS
            else:
                assert node.op in ARITHMETIC, node.op
        assert parse_expr(text(e))[0] is e  # the one-line text reads back as the same node


def test_expressions_are_distinct_and_avoid_the_excluded(sample: list[Expr]) -> None:
    assert len(set(sample)) == len(sample)
    excluded = sample[:40]
    again = generate(CorpusSettings(300, 7), exclude=excluded)
    assert not set(again) & set(excluded)


def test_the_corpus_has_the_shapes_of_the_papers_sets(sample: list[Expr]) -> None:
    """Repeated subexpressions (what let-binding saves), one to three variables, a spread of sizes."""

    def repeats(e: Expr) -> bool:
        counts = Counter(n for n in preorder(e) if n.size >= 3)
        return any(k > 1 for k in counts.values())

    assert sum(map(repeats, sample)) >= 0.6 * len(sample)
    variables = Counter(len(e.free) for e in sample)
    assert set(variables) == {1, 2, 3}
    assert min(e.size for e in sample) < 12 and max(e.size for e in sample) > 35
    nested = sum(any(n.op == Op.DIV and n.args[0].op == Op.DIV for n in preorder(e)) for e in sample)
    assert nested >= 0.2 * len(sample)


def test_the_committed_sets_are_what_the_generator_makes(committed: dict[str, list[dict[str, object]]]) -> None:
    sizes = {name: len(items) for name, items in committed.items()}
    sets = make_sets(sizes["generated_train"], sizes["generated_heldout"], sizes["generated_validation"])
    for name, exprs in (
        ("generated_heldout", sets.heldout),
        ("generated_validation", sets.validation),
        ("generated_train", sets.train),
    ):
        assert [item["expr"] for item in committed[name]] == [text(e) for e in exprs], name
    assert (TRAIN_SEED, HELDOUT_SEED, VALIDATION_SEED) == (0, 1, 2)


def test_no_test_expression_is_trained_on(committed: dict[str, list[dict[str, object]]]) -> None:
    def exprs(name: str) -> set[Expr]:
        return {parse_expr(str(item["expr"]))[0] for item in committed[name]}

    held, valid, train = exprs("generated_heldout"), exprs("generated_validation"), exprs("generated_train")
    public = set(public_expressions())
    assert len(held) >= 100
    assert not held & (train | valid | public)
    assert not valid & (train | public)
    assert not train & public


def test_every_held_out_expression_has_a_best_cost_no_dearer_than_its_start(
    committed: dict[str, list[dict[str, object]]],
) -> None:
    for item in committed["generated_heldout"]:
        assert float(item["best_known_cost"]) <= float(item["start_cost"])  # type: ignore[arg-type]


def test_the_corpus_script_quick_mode_writes_sets_with_best_costs() -> None:
    from experiments.corpus.run import main
    from ksbench.results import QUICK

    main(["--quick"])
    sets = json.loads((QUICK / "corpus" / "generated_sets.json").read_text())["sets"]
    assert {name: len(s["expressions"]) for name, s in sets.items()} == {
        "generated_heldout": 4,
        "generated_validation": 3,
        "generated_train": 20,
    }
    for item in sets["generated_heldout"]["expressions"]:
        assert item["best_known_cost"] <= item["start_cost"]
