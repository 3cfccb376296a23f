"""The reverse-mode rules (rules/gradients.py) on the code ksc's reverse mode writes, and the cost
model that makes a search prefer their gathers (knossos/alloc_cost.py).

Each rule's meaning on random expressions, its one-line golden rewrites and its domain are checked
with every other rule's (test_rules_properties.py, test_rules_golden.py); here: golden rewrites on
the shapes of ``rev$conv1d`` (sums over the primal's loops of tuples of one-hot contributions,
let-bound indices like ``noi = ni + kn/2 - kni``, zeros written as nested builds), the index
arithmetic the one-hot rules invert, and that plain pseudo-beam search with ``gradient_rules`` under
``alloc_cost`` turns every scatter of ``rev$conv1d`` into a gather while each step keeps the
interpreter's value.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from knossos import expr as E
from knossos.alloc_cost import AllocCost, alloc_cost
from knossos.expr import Expr, preorder
from knossos.interpreter import Interpreter
from knossos.ops import Op
from knossos.parser import Parser, load_program
from knossos.reader import read_forms
from knossos.types import BOOL, FLOAT, INTEGER, vec
from knossos.values import isclose
from rules.actions import Action, actions, apply
from rules.baseline import simplify_def
from rules.gradients import GRADIENT_RULES, Affine, affine_in, solve
from rules.sets import all_rules, get_rule_set, gradient_rules, ml_rules, ml_rules_no_bind
from search.pseudo_beam import pseudo_beam
from search.spec import SearchSpec

from conftest import random_value

PROGRAMS = Path(__file__).resolve().parent.parent / "ksdata" / "programs"
GRADIENT_RULE_NAMES = {r.name for r in GRADIENT_RULES}

#: Free variables of the texts below, named as in ``rev$conv1d``.
FREE = {
    "kernels": vec(vec(vec(FLOAT))),
    "image": vec(vec(FLOAT)),
    "row": vec(FLOAT),
    "x": FLOAT,
    "ki": INTEGER,
    "li": INTEGER,
    "ni": INTEGER,
    "kni": INTEGER,
    "kn": INTEGER,
    "n": INTEGER,
    "outside_image": BOOL,
}


def _envs() -> list[dict[str, Any]]:
    rng = random.Random(11)
    base = {
        "kernels": [[[rng.uniform(-1.0, 1.0) for _ in range(3)] for _ in range(3)] for _ in range(2)],
        "image": [[rng.uniform(-1.0, 1.0) for _ in range(3)] for _ in range(3)],
        "row": [rng.uniform(-1.0, 1.0) for _ in range(3)],
        "x": rng.uniform(0.5, 2.0),
        "ki": 1,
        "li": 2,
        "ni": 1,
        "kni": 0,
        "kn": 3,
        "n": 3,
    }
    return [{**base, "outside_image": False}, {**base, "outside_image": True, "ni": 2, "kni": 2}]


ENVS = _envs()


def parse(text: str) -> Expr:
    parser = Parser("<gradients>")
    for name, t in FREE.items():
        parser.scope.bind(E.var(name, t))
    (form,) = read_forms(text, "<gradients>")
    return parser.convert(form)


def evaluate(e: Expr) -> list[Any]:
    interpreter = Interpreter(max_steps=10**6)
    return [interpreter.eval_expr(e, {k: v for k, v in env.items() if k in e.free}) for env in ENVS]


#: (rule, what ksc's reverse mode writes, the rewrite) on the shapes of rev$conv1d.
REVERSE_MODE: list[tuple[str, str, str]] = [
    # a sum over a loop of the primal of a tuple of contributions, a let per iteration
    (
        "sumbuild_tuple_split",
        "(sumbuild n (lam (ni : Integer) (let (a_12 (index ni row)) (tuple (deltaVec n ni a_12) (mul a_12 x)))))",
        "(tuple (sumbuild n (lam (ni : Integer) (let (a_12 (index ni row)) (deltaVec n ni a_12))))"
        " (sumbuild n (lam (ni : Integer) (let (a_12 (index ni row)) (mul a_12 x)))))",
    ),
    # ... added to the zero gradient, one of them behind the test for the image's border
    (
        "sumbuild_tuple_split",
        "(sumbuild n (lam (ni : Integer) (add (if outside_image (tuple (constVec n 0.0) 0.0)"
        " (tuple (deltaVec n ni x) (index ni row))) (tuple (constVec n 0.0) x))))",
        "(tuple (sumbuild n (lam (ni : Integer) (add (if outside_image (constVec n 0.0) (deltaVec n ni x))"
        " (constVec n 0.0)))) (sumbuild n (lam (ni : Integer) (add (if outside_image 0.0 (index ni row)) x))))",
    ),
    (
        "let_into_deltavec",
        "(let (t4271 (index li row)) (deltaVec n kni (mul t4271 x)))",
        "(deltaVec n kni (let (t4271 (index li row)) (mul t4271 x)))",
    ),
    (
        "sumbuild_let_out",
        "(sumbuild (size image) (lam (li : Integer) (let (t4266 (index ki kernels)) (sum (index li t4266)))))",
        "(let (t4266 (index ki kernels)) (sumbuild (size image) (lam (li : Integer) (sum (index li t4266)))))",
    ),
    (
        "build_let_out",
        "(build (size image) (lam (primDindex$i : Integer) (let (t4293 (size (index li image)))"
        " (if (eq primDindex$i li) (deltaVec t4293 ni x) (build t4293 (lam (i : Integer) 0.0))))))",
        "(let (t4293 (size (index li image))) (build (size image) (lam (primDindex$i : Integer)"
        " (if (eq primDindex$i li) (deltaVec t4293 ni x) (build t4293 (lam (i : Integer) 0.0))))))",
    ),
    # the sum over the kernel's positions goes inside, where the image's index inverts
    (
        "sumbuild_swap",
        "(sumbuild (size kernels) (lam (ki : Integer) (sumbuild kn (lam (kni : Integer)"
        " (deltaVec n (sub (add ni (div kn 2)) kni) (index kni (index li (index ki kernels))))))))",
        "(sumbuild kn (lam (kni : Integer) (sumbuild (size kernels) (lam (ki : Integer)"
        " (deltaVec n (sub (add ni (div kn 2)) kni) (index kni (index li (index ki kernels))))))))",
    ),
    # the kernel's gradient: one-hot at the loop's own index, of the kernel row's size
    (
        "sumbuild_of_onehot",
        "(sumbuild kn (lam (kni : Integer) (deltaVec (size (index li (index ki kernels))) kni (mul (index kni row) x))))",
        "(build (size (index li (index ki kernels))) (lam (kni : Integer) (mul (index kni row) x)))",
    ),
    # the image's gradient where the image's border zeros it, zeros written as nested builds
    (
        "if_zero_inward",
        "(if outside_image (build (size image) (lam (i : Integer) (build (size (index i image))"
        " (lam (i_20 : Integer) 0.0)))) (deltaVec (size image) li (deltaVec (size (index li image)) ni"
        " (mul (index kni row) x))))",
        "(deltaVec (size image) li (deltaVec (size (index li image)) ni (if outside_image 0.0 (mul (index kni row) x))))",
    ),
    # the image's gradient: one-hot at noi = ni + kn/2 - kni, inverted for kni
    (
        "sumbuild_of_shifted_onehot",
        "(sumbuild kn (lam (kni : Integer) (deltaVec n (sub (add ni (div kn 2)) kni) (index kni (index li (index ki kernels))))))",
        "(build n (lam (y : Integer) (let (kni (neg (sub y (add ni (div kn 2))))) (if (and (gte kni 0) (lt kni kn))"
        " (index kni (index li (index ki kernels))) 0.0))))",
    ),
    # ... and once gathered, an element of it summed over the kernel's positions
    (
        "sumbuild_of_if_eq",
        "(sumbuild kn (lam (kni : Integer) (if (eq (sub (add ni (div kn 2)) kni) li) (index kni row) 0.0)))",
        "(let (kni (neg (sub li (add ni (div kn 2))))) (if (and (gte kni 0) (lt kni kn)) (index kni row) 0.0))",
    ),
    (
        "sumbuild_of_let_build",
        "(sumbuild n (lam (ni : Integer) (let (noi (sub (add ni (div kn 2)) kni)) (build (size image) (lam (li : Integer)"
        " (if (or (lt noi 0) (gte noi n)) 0.0 (mul (index noi (index li image)) (index ni row))))))))",
        "(build (size image) (lam (li : Integer) (sumbuild n (lam (ni : Integer) (let (noi (sub (add ni (div kn 2)) kni))"
        " (if (or (lt noi 0) (gte noi n)) 0.0 (mul (index noi (index li image)) (index ni row))))))))",
    ),
    (
        "let_substitute",
        "(let (noi (sub (add ni (div kn 2)) kni)) (if (or (lt noi 0) (gte noi n)) 0.0 (index noi row)))",
        "(if (or (lt (sub (add ni (div kn 2)) kni) 0) (gte (sub (add ni (div kn 2)) kni) n)) 0.0"
        " (index (sub (add ni (div kn 2)) kni) row))",
    ),
]


def test_every_gradient_rule_has_a_reverse_mode_case() -> None:
    assert {rule for rule, _, _ in REVERSE_MODE} == GRADIENT_RULE_NAMES


@pytest.mark.parametrize(("rule", "before", "after"), REVERSE_MODE, ids=[r for r, _, _ in REVERSE_MODE])
def test_reverse_mode_golden(rule: str, before: str, after: str) -> None:
    e = parse(before)
    (action,) = [a for a in actions(e, all_rules) if a.rule.name == rule]
    out = apply(e, action)
    expected = parse(after)
    assert out is expected, f"{rule} on {e}:\n  got      {out}\n  expected {expected}"
    for value, got in zip(evaluate(e), evaluate(out), strict=True):
        assert isclose(value, got, 1e-12, 1e-12), f"{rule}: {value} became {got}"


# -- the sets ---------------------------------------------------------------------------------------
def test_sets() -> None:
    assert len(ml_rules) == 63 and len(ml_rules_no_bind) == 59
    assert not GRADIENT_RULE_NAMES & {r.name for r in ml_rules}
    assert {r.name for r in all_rules} >= GRADIENT_RULE_NAMES
    names = {r.name for r in gradient_rules}
    assert names >= GRADIENT_RULE_NAMES | {"add_zero_vec", "build_of_delta", "let_recover", "sumbuild_of_build"}
    # no reordering of arithmetic, no lifting ifs out, no new lets: none shortens these sequences
    assert not names & {
        "commute_add",
        "commute_mul",
        "assoc_add_add",
        "lift_if",
        "new_bind",
        "lift_bind",
        "div_by_self",
    }
    assert get_rule_set("gradient_rules") is gradient_rules


# -- index arithmetic -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "sign", "offset"),
    [
        ("kni", 1, None),
        ("(add kni 1)", 1, "1"),
        ("(add 1 kni)", 1, "1"),
        ("(sub kni n)", 1, "(neg n)"),
        ("(sub n kni)", -1, "n"),
        ("(neg kni)", -1, None),
        ("(sub (add ni (div kn 2)) kni)", -1, "(add ni (div kn 2))"),
        ("(neg (sub kni 2))", -1, "(neg (neg 2))"),
        ("(add (sub n kni) ni)", -1, "(add n ni)"),
    ],
)
def test_affine_in(text: str, sign: int, offset: str | None) -> None:
    assert affine_in(parse(text), "kni") == Affine(sign, None if offset is None else parse(offset))


@pytest.mark.parametrize(
    "text",
    [
        "ni",  # no kni
        "(mul kni 2)",
        "(add kni kni)",
        "(sub kni kni)",
        "(div kni 2)",
        "(size (index kni image))",
    ],
)
def test_affine_in_refuses(text: str) -> None:
    assert affine_in(parse(text), "kni") is None


@pytest.mark.parametrize(
    "text", ["kni", "(add kni 1)", "(sub n kni)", "(neg kni)", "(sub (add ni (div kn 2)) kni)", "(neg (sub kni 2))"]
)
def test_solve_inverts_theparse(text: str) -> None:
    index = parse(text)
    form = affine_in(index, "kni")
    assert form is not None
    interpreter = Interpreter()
    env = {"n": 5, "ni": 2, "kn": 3}
    for target in range(-4, 5):
        solved = interpreter.eval_expr(solve(form, E.const(target)), dict(env))
        assert interpreter.eval_expr(index, {**env, "kni": solved}) == target


# -- the cost model ------------------------------------------------------------------------------------
def test_alloc_cost_charges_a_scatter_its_stores() -> None:
    # a sum of one-hot vectors against the build that gathers the same elements: the reference
    # charges the scatter a flat 2.0 per deltaVec and calls the two about equal; every term of the
    # scatter stores a whole vector, which alloc_cost charges
    element = "(sumbuild n (lam (j : Integer) (mul (index j row) (to_float i))))"
    scatter = parse(f"(sumbuild n (lam (i : Integer) (deltaVec n i {element})))")
    gather = parse(f"(build n (lam (i : Integer) {element}))")
    assert scatter.cost < 1.25 * gather.cost
    assert alloc_cost(scatter) > 1.5 * alloc_cost(gather)
    extra_scatter, extra_gather = alloc_cost(scatter) - scatter.cost, alloc_cost(gather) - gather.cost
    assert extra_gather > 0 and extra_scatter > 10 * extra_gather


def test_alloc_cost_prefers_the_gather_of_a_shifted_onehot_sum() -> None:
    scatter = parse("(sumbuild kn (lam (kni : Integer) (deltaVec n (sub ni kni) (index kni row))))")
    (action,) = [a for a in actions(scatter, gradient_rules) if a.rule.name == "sumbuild_of_shifted_onehot"]
    gather = apply(scatter, action)
    assert alloc_cost(gather) < alloc_cost(scatter) / 4
    assert alloc_cost(scatter) - alloc_cost(gather) > scatter.cost - gather.cost


@pytest.mark.parametrize(
    "text",
    [
        "(add (mul x x) (exp x))",
        "(let (a (index ni row)) (if outside_image 0.0 (mul a x)))",
        "(sumbuild (size row) (lam (i : Integer) (mul (index i row) (index i row))))",
        "(sumbuild n (lam (i : Integer) (sumbuild kn (lam (j : Integer) (to_float (add i j))))))",
        "(tuple x (sum (index 0 image)))",
    ],
)
def test_alloc_cost_is_the_reference_on_scalar_code(text: str) -> None:
    e = parse(text)
    assert alloc_cost(e) == pytest.approx(e.cost, rel=1e-12)


def test_alloc_cost_is_the_reference_on_the_scalar_defs_of_the_programs() -> None:
    checked = 0
    for name in ("binding_simplify_defs_tuples.kso", "blas_test.kso"):
        for d in load_program(PROGRAMS / name).defs.values():
            body = getattr(d, "body", None)
            if body is None or any(not node.type.is_scalar for node in preorder(body) if node.op is not Op.VAR):
                continue
            assert alloc_cost(body) == pytest.approx(body.cost, rel=1e-12), d.name
            checked += 1
    assert checked >= 20


def test_alloc_cost_reads_loop_sizes_where_told() -> None:
    sized = AllocCost({"image": (4, 128), "kernels": (2, 3)})
    assert sized.trip_count(parse("(size image)")) == 4
    assert sized.trip_count(parse("(size (index li image))")) == 128
    assert sized.trip_count(parse("(size (index 1 kernels))")) == 3
    assert sized.trip_count(parse("(size row)")) == 16  # not told
    assert sized.trip_count(parse("(size (index 0 (index 0 kernels)))")) == 16  # deeper than told
    assert sized.trip_count(parse("n")) == 16
    assert sized.trip_count(E.const(5)) == alloc_cost.trip_count(E.const(5)) == 5
    loop = parse("(build (size (index 0 image)) (lam (i : Integer) (mul x (to_float i))))")
    assert sized(loop) > alloc_cost(loop)


# -- search on rev$conv1d ----------------------------------------------------------------------------
def loop_depth(e: Expr) -> int:
    """The deepest nesting of builds and sumbuilds in ``e``: a loop's body runs inside it, its size does not."""
    depth: dict[Expr, int] = {}
    stack: list[tuple[Expr, bool]] = [(e, False)]
    while stack:
        node, ready = stack.pop()
        if node in depth:
            continue
        if not ready:
            stack.append((node, True))
            stack.extend((a, False) for a in node.args if a not in depth)
            continue
        inner = [depth[a] for a in node.args]
        if node.op is Op.BUILD or node.op is Op.SUMBUILD:
            depth[node] = max(inner[0], 1 + inner[2])
        else:
            depth[node] = max(inner, default=0)
    return depth[e]


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("(mul x x)", 0),
        ("(build n (lam (i : Integer) x))", 1),
        ("(build (sumbuild n (lam (i : Integer) i)) (lam (i : Integer) x))", 1),  # the size is outside
        ("(sumbuild n (lam (i : Integer) (let (r (build n (lam (j : Integer) x))) (sum r))))", 2),
        ("(tuple (build n (lam (i : Integer) (build n (lam (j : Integer) x)))) (build n (lam (i : Integer) x)))", 2),
    ],
)
def test_loop_depth(text: str, depth: int) -> None:
    assert loop_depth(parse(text)) == depth


def _conv1d_inputs(rng: random.Random) -> dict[str, Any]:
    """Inputs of rev$conv1d with a size of its own for every dimension (2 kernels, 3 channels,
    width 3, 5 positions)."""

    def floats(k: int) -> list[float]:
        return [rng.uniform(0.5, 2.0) for _ in range(k)]

    return {
        "kernels": [[floats(3) for _ in range(3)] for _ in range(2)],
        "image": [floats(5) for _ in range(3)],
        "d$r": [floats(5) for _ in range(2)],
    }


def test_pseudo_beam_turns_the_scatters_of_conv1d_into_gathers() -> None:
    program = load_program(PROGRAMS / "conv1d_rev_test.kso")
    d = program.defs["rev$conv1d"]
    start = simplify_def(d).body
    rules = get_rule_set("gradient_rules")
    spec = SearchSpec(rules, 150, 50000, cost=alloc_cost, prune_commutes=True, prune_inlines=True)
    result = pseudo_beam(start, spec)
    best = result.best
    assert any(node.op is Op.DELTAVEC for node in preorder(start))
    assert not [node for node in preorder(best) if node.op is Op.DELTAVEC]
    assert loop_depth(start) > 4 >= loop_depth(best)
    assert result.best_cost < alloc_cost(start) / 100
    assert {s.rule for s in result.steps} & GRADIENT_RULE_NAMES

    rng = random.Random(7)
    envs = [{p.name: random_value(p.type, rng) for p in d.params}, _conv1d_inputs(rng)]
    interpreter = Interpreter(max_steps=10**8)
    expected = [interpreter.eval_expr(d.body, dict(env)) for env in envs]
    e = start
    for step in result.steps:  # every intermediate program computes the same gradient
        e = apply(e, Action(step.node, rules.rule(step.rule)))
        for env, value in zip(envs, expected, strict=True):
            assert isclose(value, interpreter.eval_expr(e, dict(env)), 1e-9, 1e-12), f"after {step}"
    assert e is best
