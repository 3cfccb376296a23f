"""The cost models by name (knossos/cost_models.py) and how optimize.py takes them: --cost, --size,
and a model that brings its own (the shipped `gradients`)."""

from __future__ import annotations

import json

import pytest

from app.models import load_model
from app.optimize_cli import main
from knossos import expr as E
from knossos.alloc_cost import AllocCost, alloc_cost
from knossos.cost_models import COST_MODELS, get_cost_model
from knossos.errors import KsUsageError
from knossos.expr import Expr, preorder
from knossos.ops import Op
from knossos.parser import Parser, load_program, parse_expr, parse_program
from knossos.reader import read_forms
from knossos.types import FLOAT, INTEGER, vec
from rules.actions import actions, apply
from rules.sets import get_rule_set
from search.plan import Plan

from conftest import PROGRAMS

CONV = str(PROGRAMS / "conv1d_rev_test.kso")


#: The free variables of the expressions typed() parses.
FREE = {"x": vec(FLOAT), "w": vec(vec(FLOAT)), "i": INTEGER, "n": INTEGER, "x0": FLOAT}


def typed(text: str) -> Expr:
    """``text`` with the free variables of FREE."""
    parser = Parser("<alloc>")
    for name, t in FREE.items():
        parser.scope.bind(E.var(name, t))
    (form,) = read_forms(text, "<alloc>")
    return parser.convert(form)


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
    # as written, every loop's size is let-bound (16 each), but the zero rows of the image's gradient,
    # (build (size (index i image)) (lam ... 0.0)), are 128 long, and are stored as such
    row_of_image = [E.op(Op.SIZE, E.op(Op.INDEX, E.var(v, INTEGER), image)) for v in ("i", "i_20")]
    zero_row = next(n for n in preorder(d.body) if n.op is Op.BUILD and n.args[0] in row_of_image)
    assert sized.length(zero_row) == 128 and alloc_cost.length(zero_row) == 16
    assert sized(d.body) > alloc_cost(d.body)


@pytest.mark.parametrize(
    ("text", "length"),
    [
        ("(deltaVec 100 i 1.0)", 100),
        ("(deltaVec (size x) i 1.0)", 256),
        ("(deltaVec (size w) i (index i w))", 256 * 64),
        ("(deltaVec (size w) i (build (size x) (lam (j : Integer) 1.0)))", 256 * 256),
        ("(deltaVec n i 1.0)", 16),  # n is not a recognised size
        ("(deltaVec n i (build 3 (lam (j : Integer) 1.0)))", 16 * 3),  # 16 per level not recognised
        ("(constVec (size (index 0 w)) 2.0)", 64),
        ("(constVec 5 (constVec (size x) 2.0))", 5 * 256),
        ("(build (size x) (lam (j : Integer) (to_float j)))", 256),
        ("(build 7 (lam (j : Integer) (deltaVec (size x) j 1.0)))", 7 * 256),
        ("(let (v x) (build (size v) (lam (j : Integer) 1.0)))", 16),  # a let-bound vector: 16
        ("(sumbuild 4 (lam (j : Integer) (deltaVec (size x) j 1.0)))", 256),
        ("(mul 2.0 (deltaVec (size x) i 1.0))", 256),
        ("(add x (deltaVec (size x) i 1.0))", 256),
        # a let's value along its spine of lets, tuples and ifs, with the lengths of what it binds
        ("(let (v (constVec 9 1.0)) v)", 9),
        ("(let ((v (constVec 9 1.0)) (u v)) (tuple u (if (gt x0 0.0) v (constVec 9 2.0))))", 9 + 9),
        ("(let (v (deltaVec (size w) i (deltaVec (size x) i 1.0))) (tuple v (deltaVec 3 i 1.0)))", 256 * 256 + 3),
        ("(tuple (let (x (constVec 9 1.0)) x) x)", 9 + 256),  # the second x is the parameter
        ("(build 2 (lam (j : Integer) (let (v (constVec 9 1.0)) (add v v))))", 2 * 16),  # not on the spine: 16
        ("(index 3 w)", 64),
        ("w", 256 * 64),
        ("(sum x)", 1),
    ],
)
def test_the_alloc_model_counts_the_lengths_it_recognises(text: str, length: int) -> None:
    sized = AllocCost({"x": 256, "w": (256, 64)})
    assert sized.length(typed(text)) == length


def test_the_alloc_model_charges_the_stores_at_the_recognised_lengths() -> None:
    sized = AllocCost({"x": 256})
    onehot = typed("(deltaVec (size x) 3 1.0)")
    build = typed("(build (size x) (lam (j : Integer) 1.0))")
    scatter = typed("(sumbuild 10 (lam (j : Integer) (deltaVec (size x) j 1.0)))")
    assert sized(onehot) == 2.0 + 1.0 + 256  # the reference's malloc and size, a store per element
    assert sized(build) == 2.0 + 1.0 + 256  # a store per element, 256 trips of a free body
    # 10 one-hot vectors of 256, 9 adds of 256 into the accumulator and its 10 stores of 256
    assert sized(scatter) == 10 * (2.0 + 1.0 + 256) + 9 * 256 + 10 * 256


def test_the_gradients_model_brings_its_settings() -> None:
    value = load_model("gradients")
    assert value.settings is not None and value.rules == "gradient_rules"
    s = value.settings
    assert (s.cost, s.algorithm, s.depth, s.budget) == ("alloc", "pseudo-beam", 150, 150000)
    plan = Plan().of_model(value)
    assert plan.search.prune_commutes and plan.search.prune_inlines and plan.spec().cost is alloc_cost


#: The gradients model's rev$dense_relu of bench_grad_gemm.py (60 s at N = 256, under the alloc cost
#: before it counted real lengths: experiments/results/gradients/grad_gemm.jsonl): dx sums one one-hot
#: vector per column, (sumbuild t_2 (lam j (deltaVec (size x) j ...))), inside the loop over rows.
DENSE_RELU_REV = """
    (def rev$dense_relu (Tuple (Vec (Vec Float)) (Vec Float) (Vec Float))
         ((w : (Vec (Vec Float))) (x : (Vec Float)) (b : (Vec Float)) (d$r : (Vec Float)))
      (let ((t (size w))
            (d$loop_1 (let (t_2 (size x))
                        (sumbuild t (lam (i : Integer)
                          (let ((t_8 (add (index i b)
                                          (sumbuild t_2 (lam (j : Integer)
                                            (mul (index j (index i w)) (index j x))))))
                                (d$loop (tuple (let (t_3 (index i w))
                                                 (deltaVec (size w)
                                                           i
                                                           (build (size t_3) (lam (j : Integer)
                                                             (mul (if (lt 0.0 t_8) (index i d$r) 0.0)
                                                                (index j x))))))
                                               (let (t_3 (index i w))
                                                 (sumbuild t_2 (lam (j : Integer)
                                                   (deltaVec (size x)
                                                             j
                                                             (mul (if (lt 0.0 t_8) (index i d$r) 0.0)
                                                                (index j t_3)))))))))
                            (tuple (deltaVec (size b) i (if (lt 0.0 t_8) (index i d$r) 0.0))
                                   (get$1$2 d$loop)
                                   (get$2$2 d$loop))))))))
        (tuple (get$2$3 d$loop_1) (get$3$3 d$loop_1) (get$1$3 d$loop_1))))
"""


def test_the_alloc_model_ranks_the_gather_of_dense_relus_dx_cheaper() -> None:
    # One sumbuild_of_onehot step makes the sum of one-hot vectors a build: compiled, 406 us -> 74.5 us
    # at N = 256.  Charged the build's 256 stores but each one-hot vector (and the accumulator) 16, the
    # step cost more (31,201 -> 41,745); at the real lengths of both it costs less.
    d = parse_program(DENSE_RELU_REV).defs["rev$dense_relu"]
    sized = AllocCost({"w": (256, 256), "x": 256, "b": 256, "d$r": 256})
    (action,) = [a for a in actions(d.body, get_rule_set("gradient_rules")) if a.rule.name == "sumbuild_of_onehot"]
    gather = apply(d.body, action)
    assert not any(n.op is Op.SUMBUILD and n.args[2].op is Op.DELTAVEC for n in preorder(gather))
    assert sized(gather) < 0.6 * sized(d.body)  # 0.53: the relu select is a jump in both
