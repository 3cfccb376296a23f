"""The cost models by name (knossos/cost_models.py) and how optimize.py takes them: --cost, --size,
and a model that brings its own (the shipped `gradients`)."""

from __future__ import annotations

import json

import pytest

from app.models import load_value_function, trained_search
from app.optimize_cli import main
from knossos import expr as E
from knossos.alloc_cost import AllocCost, alloc_cost
from knossos.cost_models import COST_MODELS, get_cost_model
from knossos.errors import KsUsageError
from knossos.ops import Op
from knossos.parser import load_program, parse_expr

from conftest import PROGRAMS

CONV = str(PROGRAMS / "conv1d_rev_test.kso")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_models_by_name() -> None:
    scatter, _ = parse_expr("(sumbuild 16 (lam (i : Integer) (deltaVec 16 i (to_float i))))")
    gather, _ = parse_expr("(build 16 (lam (i : Integer) (to_float i)))")
    reference, alloc = get_cost_model("reference"), get_cost_model("alloc")
    assert reference(scatter) == scatter.cost and alloc is alloc_cost
    assert alloc(scatter) > reference(scatter)  # every element each one-hot term and the sum write
    assert alloc(scatter) / alloc(gather) > reference(scatter) / reference(gather)
    assert set(COST_MODELS) == {"reference", "alloc"}
    with pytest.raises(KsUsageError, match="unknown cost model 'nope' \\(known: reference, alloc\\)"):
        get_cost_model("nope")


def test_optimize_minimises_the_cost_it_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ("--expr", "(sumbuild 3 (lam (i : Integer) (deltaVec 3 i (to_float i))))", "--rules", "gradient_rules")
    code, out, _ = run(capsys, *argv, "--cost", "alloc", "--json")
    report = json.loads(out)
    start, _ = parse_expr(argv[1])
    assert code == 0 and report["cost_model"] == "alloc" and report["rules"] == "gradient_rules"
    assert report["start_cost"] == pytest.approx(alloc_cost(start))
    assert report["best_cost"] < report["start_cost"]  # the scatter became a gather
    code, out, _ = run(capsys, *argv, "--json")
    assert code == 0 and json.loads(out)["cost_model"] == "reference"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--size", "x=3"), "--size is for --cost alloc, not the reference cost model"),
        (("--cost", "alloc", "--size", "y=3"), "--size names y, which the expression being optimised does not use"),
        (("--cost", "alloc", "--size", "x=3y"), "bad size 'x=3y'"),
    ],
)
def test_bad_sizes_are_one_line(capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], message: str) -> None:
    code, out, err = run(capsys, "--expr", "(add x 1.0)", *extra)
    assert code == 1 and out == "" and message in err and err.count("\n") == 1


def test_sizes_set_the_loops_the_alloc_model_counts() -> None:
    d = load_program(CONV).defs["rev$conv1d"]
    image = E.var("image", next(p.type for p in d.params if p.name == "image"))
    sized = AllocCost({"kernels": (8, 8, 5), "image": (8, 128), "d$r": (8, 128)})
    assert sized.trip_count(E.op(Op.SIZE, E.op(Op.INDEX, E.const(0), image))) == 128
    assert sized.trip_count(E.op(Op.SIZE, image)) == 8
    assert alloc_cost.trip_count(E.op(Op.SIZE, image)) == 16  # unsized: the reference's 16
    i = E.var("i", E.const(0).type)
    row_sums = E.build(E.op(Op.SIZE, image), i, E.op(Op.SUM, E.op(Op.INDEX, i, image)))
    assert sized(row_sums) < alloc_cost(row_sums)  # 8 rows, not 16
    assert sized(d.body) == alloc_cost(d.body)  # as written, every loop's size is let-bound: 16 each


def test_the_gradients_model_brings_its_settings() -> None:
    value = load_value_function("gradients")
    assert value.trained_for is not None
    assert {k: value.trained_for[k] for k in ("rules", "cost", "search", "depth", "budget")} == {
        "rules": "gradient_rules",
        "cost": "alloc",
        "search": "pseudo-beam",
        "depth": 150,
        "budget": 150000,
    }
    trained = trained_search("gradients")
    assert trained.prune_commutes and trained.prune_inlines and trained.spec(10).cost is alloc_cost
