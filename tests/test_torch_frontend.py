"""frontends.torch: each supported op translated and evaluated by the reference interpreter
on random inputs, against torch (relative 1e-9); broadcasting; the printed program parses back;
errors for unsupported ops, dynamic shapes and other dtypes name the op and the user's line."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from frontends.torch import translate  # noqa: E402
from knossos.errors import KsUsageError  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.parser import parse_program  # noqa: E402
from knossos.printer import format_program  # noqa: E402
from knossos.program import Program  # noqa: E402

Shape = tuple[int, ...]


def examples(shapes: list[Shape], seed: int = 0, positive: bool = False) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    out = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    return [t.abs() + 0.5 for t in out] if positive else out


def close(got: Any, want: Any, rel: float = 1e-9) -> None:
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    assert np.allclose(got, want, rtol=rel, atol=rel * scale), np.max(np.abs(got - want))


def only_def(program: Program) -> Any:
    (d,) = program.defs.values()
    return d


def check(fn: Callable[..., Any], shapes: list[Shape], positive: bool = False) -> Program:
    """Translate ``fn`` at these shapes; evaluate it on other random inputs; compare with torch."""
    program = translate(fn, *examples(shapes, 0, positive))
    d = only_def(program)
    again = parse_program(format_program(program), "t.ks")  # what `knossos import` writes parses back
    assert again.defs[d.name].body is d.body
    for seed in (1, 2):
        args = examples(shapes, seed, positive)
        want = fn(*args)
        got = call_def(d, *(a.numpy() if a.dim() else float(a) for a in args))
        if isinstance(want, tuple):
            for g, w in zip(got, want, strict=True):
                close(g, w.numpy())
        else:
            close(got, want.numpy())
    return program


def ops_in(program: Program) -> set[Op]:
    from knossos.expr import preorder

    return {e.op for e in preorder(only_def(program).body)}


# -- every supported op --------------------------------------------------------------------------------
CASES: dict[str, tuple[Callable[..., Any], list[Shape]]] = {
    "mm": (lambda a, b: torch.mm(a, b), [(3, 4), (4, 5)]),
    "matmul 2x2": (lambda a, b: a @ b, [(3, 4), (4, 5)]),
    "matmul vec@mat": (lambda x, w: x @ w, [(4,), (4, 5)]),
    "matmul mat@vec (mv)": (lambda w, x: w @ x, [(3, 4), (4,)]),
    "mv": (lambda w, x: torch.mv(w, x), [(3, 4), (4,)]),
    "matmul vec@vec": (lambda a, b: a @ b, [(4,), (4,)]),
    "matmul batched (bmm)": (lambda a, b: a @ b, [(2, 3, 4), (2, 4, 5)]),
    "matmul batch@mat": (lambda a, b: a @ b, [(2, 3, 4), (4, 5)]),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), [(5,), (3, 4), (4, 5)]),
    "addmm alpha beta": (lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0), [(3, 5), (3, 4), (4, 5)]),
    "linear": (lambda x, w, b: F.linear(x, w, b), [(3, 4), (5, 4), (5,)]),
    "linear 1-d input": (lambda x, w, b: F.linear(x, w, b), [(4,), (5, 4), (5,)]),
    "linear no bias": (lambda x, w: F.linear(x, w), [(2, 3, 4), (5, 4)]),
    "add": (lambda a, b: a + b, [(3, 4), (3, 4)]),
    "add alpha": (lambda a, b: torch.add(a, b, alpha=3.0), [(3, 4), (3, 4)]),
    "sub": (lambda a, b: a - b, [(3, 4), (3, 4)]),
    "mul": (lambda a, b: a * b, [(3, 4), (3, 4)]),
    "div": (lambda a, b: a / b, [(3, 4), (3, 4)]),
    "square": (lambda a: a * a, [(3, 4)]),
    "scalar operands": (lambda a: (2.0 * a - 1) / 3 + 0.5, [(3, 4)]),
    "rsub": (lambda a: 1.0 - a, [(3,)]),
    "neg": (lambda a: -a, [(3, 4)]),
    "exp": (lambda a: torch.exp(a), [(3, 4)]),
    "tanh": (lambda a: torch.tanh(a), [(3, 4)]),
    "sigmoid": (lambda a: torch.sigmoid(a), [(3, 4)]),
    "relu": (lambda a: torch.relu(a), [(3, 4)]),
    "F.relu": (lambda a: F.relu(a), [(3, 4)]),
    "pow 2": (lambda a: a**2, [(3, 4)]),
    "pow 3": (lambda a: a**3, [(3, 4)]),
    "maximum": (lambda a, b: torch.maximum(a, b), [(3, 4), (4,)]),
    "minimum": (lambda a, b: torch.minimum(a, b), [(3, 4), (4,)]),
    "where": (lambda a, b: torch.where(a > b, a, b * 2.0), [(3, 4), (3, 4)]),
    "sum all": (lambda a: a.sum(), [(3, 4)]),
    "sum dim": (lambda a: a.sum(1), [(3, 4)]),
    "sum dims keepdim": (lambda a: a.sum((0, 2), keepdim=True), [(2, 3, 4)]),
    "sum negative dim": (lambda a: torch.sum(a, -1), [(2, 3, 4)]),
    "mean all": (lambda a: a.mean(), [(3, 4)]),
    "mean dim": (lambda a: a.mean(dim=0), [(3, 4)]),
    "mean dims keepdim": (lambda a: a.mean((1, 2), keepdim=True), [(2, 3, 4)]),
    "amax dim": (lambda a: torch.amax(a, 1), [(3, 4)]),
    "amax all": (lambda a: torch.amax(a), [(3, 4)]),
    "amax keepdim": (lambda a: torch.amax(a, (0, 2), keepdim=True), [(2, 3, 4)]),
    "max (values)": (lambda a: a.max(), [(3, 4)]),
    "softmax last": (lambda a: F.softmax(a, dim=-1), [(3, 4)]),
    "softmax first": (lambda a: torch.softmax(a, 0), [(3, 4)]),
    "log_softmax": (lambda a: F.log_softmax(a, dim=1), [(2, 3, 4)]),
    "log_softmax 1-d": (lambda a: F.log_softmax(a, dim=0), [(5,)]),
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b), [(2, 3, 8), (4, 3, 3), (4,)]),
    "conv1d no bias": (lambda x, w: F.conv1d(x, w), [(1, 2, 6), (3, 2, 2)]),
    "conv1d stride padding dilation": (
        lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2, dilation=2),
        [(2, 3, 9), (4, 3, 3), (4,)],
    ),
    "conv1d groups": (lambda x, w, b: F.conv1d(x, w, b, groups=2, padding=1), [(1, 4, 7), (6, 2, 3), (6,)]),
    "conv1d unbatched": (lambda x, w: F.conv1d(x, w), [(3, 8), (4, 3, 3)]),
    "conv2d": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [(1, 2, 5, 4), (3, 2, 3, 3), (3,)]),
    "reshape merge": (lambda a: a.reshape(6, 4), [(2, 3, 4)]),
    "reshape split": (lambda a: a.reshape(2, 3, 2) * 2.0, [(3, 4)]),
    "reshape regroup": (lambda a: a.reshape(4, 3).exp(), [(3, 4)]),
    "view -1": (lambda a: a.view(-1).exp(), [(3, 4)]),
    "flatten": (lambda a: torch.flatten(a, 1), [(2, 3, 4)]),
    "transpose": (lambda a: a.transpose(0, 1).exp(), [(3, 4)]),
    "t": (lambda a: a.t() * 1.0, [(3, 4)]),
    "permute": (lambda a: a.permute(2, 0, 1).tanh(), [(2, 3, 4)]),
    "expand": (lambda a: a.expand(3, 4) * 1.0, [(1, 4)]),
    "expand new dims": (lambda a: a.expand(2, 3, 4) + 0.0, [(4,)]),
    "unsqueeze": (lambda a: a.unsqueeze(1) * 2.0, [(3, 4)]),
    "squeeze": (lambda a: a.squeeze(1) * 2.0, [(3, 1, 4)]),
    "slice": (lambda a: a[:, 1:3] * 2.0, [(3, 4)]),
    "slice step": (lambda a: a[::2] * 2.0, [(5, 4)]),
    "select": (lambda a: a[1] * 2.0, [(3, 4)]),
    "select negative": (lambda a: a[:, -1] * 2.0, [(3, 4)]),
    "contiguous clone": (lambda a: a.t().contiguous().clone() * 2.0, [(3, 4)]),
    "constant tensor": (lambda a: a * torch.tensor([1.0, 2.0, 3.0, -4.0], dtype=torch.float64), [(3, 4)]),
    "constant matrix": (lambda a: a + torch.tensor([[1.0, 2.0], [3.0, 5.0]], dtype=torch.float64), [(2, 2)]),
    "zeros ones full": (
        lambda a: a + torch.ones(4, dtype=torch.float64) * torch.full((3, 1), 2.5, dtype=torch.float64),
        [(3, 4)],
    ),
    "zeros_like ones_like": (lambda a: a + torch.zeros_like(a) + torch.ones_like(a) * 2.0, [(3, 4)]),
    "chunk": (lambda a: a.chunk(3, 1)[1] * 2.0, [(3, 6)]),
    "chunk uneven, all pieces": (lambda a: sum(p.sum() for p in torch.chunk(a, 3, dim=0)), [(5, 2)]),
    "split": (lambda a: a.split(2, dim=1)[2] + 1.0, [(3, 6)]),
    "split sizes": (lambda a: torch.split(a, [1, 3], dim=-1)[1].exp(), [(2, 4)]),
    "unbind": (lambda a: a.unbind(0)[1] + a.unbind(0)[2], [(3, 4)]),
    "max dim values": (lambda a: torch.max(a, 0).values * 1.0, [(3, 4)]),
    "min dim keepdim values": (lambda a: a.min(dim=1, keepdim=True)[0] + a, [(3, 4)]),
    "var": (lambda a: a.var(1), [(3, 4)]),
    "var all, no correction": (lambda a: torch.var(a, correction=0), [(3, 4)]),
    "var_mean": (lambda a: torch.var_mean(a, dim=0, keepdim=True), [(3, 4)]),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), [(3, 4), (4,), (4,)]),
    "layer_norm 2-d, no affine": (lambda x: F.layer_norm(x, (3, 4), eps=1e-3), [(2, 3, 4)]),
    "batch_norm eval": (
        lambda x, w, b: F.batch_norm(
            x, torch.full((3,), 0.5, dtype=torch.float64), torch.full((3,), 2.0, dtype=torch.float64), w, b
        ),
        [(2, 3, 4), (3,), (3,)],
    ),
    "0-d argument": (lambda s, a: s * a, [(), (3,)]),
    "returns a tuple": (lambda a, b: (a + b, a * b), [(3,), (3,)]),
}

POSITIVE_CASES: dict[str, tuple[Callable[..., Any], list[Shape]]] = {
    "log": (lambda a: torch.log(a), [(3, 4)]),
    "sqrt": (lambda a: torch.sqrt(a), [(3, 4)]),
    "rsqrt": (lambda a: torch.rsqrt(a), [(3, 4)]),
    "pow 0.5": (lambda a: a**0.5, [(3, 4)]),
    "reciprocal": (lambda a: torch.reciprocal(a), [(3, 4)]),
    "pow tensor": (lambda a, b: torch.pow(a, b), [(3, 4), (4,)]),
}


@pytest.mark.parametrize("case", CASES)
def test_op(case: str) -> None:
    fn, shapes = CASES[case]
    check(fn, shapes)


@pytest.mark.parametrize("case", POSITIVE_CASES)
def test_op_on_positive_inputs(case: str) -> None:
    fn, shapes = POSITIVE_CASES[case]
    check(fn, shapes, positive=True)


BROADCASTS = [
    [(3, 4), (4,)],
    [(3, 4), (3, 1)],
    [(3, 1, 4), (2, 4)],
    [(1,), (3, 4)],
    [(), (3, 4)],
    [(2, 1, 4), (1, 3, 1)],
]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_broadcasting(op: str, shapes: list[Shape]) -> None:
    f = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[op]
    check(lambda a, b: f(a, b), shapes)
    check(lambda a, b: f(torch.exp(b), a), shapes)  # a computed operand, broadcast


def test_ops_are_loops_not_calls() -> None:
    """Each op becomes build/sumbuild/index code, never a call of an edef."""
    program = check(lambda w, x, b: torch.tanh(F.linear(x, w, b)), [(5, 4), (3, 4), (5,)])
    seen = ops_in(program)
    assert {Op.BUILD, Op.SUMBUILD, Op.INDEX} <= seen
    assert Op.CALL not in seen and not program.edefs


def test_parameters_in_order_with_their_names() -> None:
    def f(W, b, x):
        return W @ x + b

    d = only_def(translate(f, *examples([(5, 4), (5,), (4,)])))
    assert d.name == "f"
    assert [(p.name, str(p.type)) for p in d.params] == [
        ("W", "(Vec (Vec Float))"),
        ("b", "(Vec Float)"),
        ("x", "(Vec Float)"),
    ]


def test_keyword_names_are_renamed() -> None:
    def sum(index, x):  # names that are Knossos keywords
        return index * x

    d = only_def(translate(sum, *examples([(3,), (3,)])))
    assert d.name == "sum_" and [p.name for p in d.params] == ["index_", "x"]


def test_python_numbers_are_float_parameters() -> None:
    def f(x, s):
        return x * s

    d = only_def(translate(f, examples([(3,)])[0], 2.0))
    assert str(d.params[1].type) == "Float"
    close(call_def(d, np.array([1.0, 2.0, 3.0]), 0.5), [0.5, 1.0, 1.5])


def test_elementwise_chains_fuse_into_one_loop() -> None:
    """exp, mul and tanh of one input: one build, no let."""
    program = check(lambda a: torch.tanh(torch.exp(a) * 2.0), [(3, 4)])
    body = only_def(program).body
    assert body.op is Op.BUILD and Op.LET not in ops_in(program)


def test_a_value_used_twice_is_computed_once() -> None:
    program = check(lambda a: torch.exp(a) + torch.exp(a).sum(), [(3,)])
    assert only_def(program).body.op is Op.LET


# -- errors ----------------------------------------------------------------------------------------------
def uses_sort(x):
    y = x * 2.0
    z = torch.cumsum(y, 0)
    return z.sum()


def data_dependent(x):
    return x[x > 0].sum()


def test_unsupported_op_names_op_and_line() -> None:
    with pytest.raises(KsUsageError) as info:
        translate(uses_sort, *examples([(4,)]))
    err = info.value
    line = uses_sort.__code__.co_firstlineno + 2
    assert err.file == __file__ and err.pos is not None and err.pos.line == line
    text = err.render()
    assert "\n" not in text
    assert "unsupported op aten.cumsum.default" in text
    assert "z = torch.cumsum(y, 0)" in text


def test_dynamic_shape_is_an_error() -> None:
    with pytest.raises(KsUsageError, match="dynamic shape") as info:
        translate(data_dependent, *examples([(5,)]))
    assert "x[x > 0]" in info.value.render()


@pytest.mark.parametrize(
    ("arg", "message"),
    [
        (torch.ones(3, dtype=torch.float16), "float64, float32 or int64 tensor, not torch.float16"),
        (torch.ones(3, dtype=torch.bool), "float64, float32 or int64 tensor, not torch.bool"),
        ("x", "not str"),
    ],
)
def test_bad_arguments(arg: Any, message: str) -> None:
    with pytest.raises(KsUsageError, match=message):
        translate(lambda a: a * 2.0, arg)


def test_a_module_is_refused() -> None:
    with pytest.raises(KsUsageError, match="plain function"):
        translate(torch.nn.Linear(2, 3), *examples([(2,)]))


def branches(x):
    if x.sum() > 0:  # data-dependent control flow: the examples' values would decide it
        return x
    return -x


def test_data_dependent_control_flow_is_an_error_naming_the_line() -> None:
    with pytest.raises(KsUsageError, match="reads a tensor's value") as info:
        translate(branches, *examples([(3,)]))
    text = info.value.render()
    assert "\n" not in text and "if x.sum() > 0" in text
    with pytest.raises(KsUsageError, match=r"torch\.export failed") as info:
        translate(branches, *examples([(3,)]), tracer="export")
    assert "\n" not in info.value.render()


def test_a_failing_function_names_its_line() -> None:
    def mismatch(a, b):
        return a + b  # shapes (3,) and (4,) do not broadcast

    with pytest.raises(KsUsageError, match="failed on its examples: RuntimeError") as info:
        translate(mismatch, *examples([(3,), (4,)]))
    assert "return a + b" in info.value.render()


def adds_in_place(a, b):
    c = a * 2.0
    c.add_(b)  # on a fresh tensor: the same as c = c + b
    return c.exp()


def adds_to_a_view(a, b):
    c = a * 2.0
    c[0].add_(b[0])  # changes c through a view of it
    return c.exp()


def test_in_place_ops() -> None:
    check(adds_in_place, [(3,), (3,)])
    with pytest.raises(KsUsageError, match=r"in-place op aten\.add_\.Tensor on a tensor that other tensors share"):
        translate(adds_to_a_view, *examples([(3,), (3,)]))


@pytest.mark.parametrize("case", [*CASES, *POSITIVE_CASES])
def test_the_dispatch_tracer_gives_export_s_program(case: str) -> None:
    """The default tracer is a faster way to torch.export's decomposed graph: the same def."""
    fn, shapes = {**CASES, **POSITIVE_CASES}[case]
    args = examples(shapes, 0, positive=case in POSITIVE_CASES)
    assert only_def(translate(fn, *args)).body is only_def(translate(fn, *args, tracer="export")).body


def test_unknown_tracer() -> None:
    with pytest.raises(KsUsageError, match="unknown tracer 'jit'"):
        translate(lambda a: a, *examples([(3,)]), tracer="jit")


def test_other_dtypes_are_an_error() -> None:
    with pytest.raises(KsUsageError, match=r"aten._to_copy.default gives a tensor of dtype torch.float16"):
        translate(lambda a: a.half() * 2.0, *examples([(3,)]))


# -- speed ---------------------------------------------------------------------------------------------
def twenty_ops(w1, b1, w2, b2, x, y):
    h = torch.tanh(F.linear(x, w1, b1))  # permute, addmm, tanh
    h2 = torch.relu(h * 2.0 - 1.0)  # mul, sub, relu
    out = F.linear(h2, w2, b2)  # permute, addmm
    p = F.log_softmax(out, dim=-1)  # _log_softmax
    q = torch.sigmoid(out).mean()  # sigmoid, mean
    r = (out - y).pow(2).sum(1).mean()  # sub, pow, sum, mean
    s = torch.exp(-h).sum() / 10.0  # neg, exp, sum, div
    return -(p * y).sum() + q + r + s  # mul, sum, neg, add, add, add


def test_translation_time_of_a_20_op_function_is_measured() -> None:
    """Measured, not asserted (the figure depends on the machine): see docs/torch.md."""
    args = examples([(16, 8), (16,), (4, 16), (4,), (2, 8), (2, 4)])
    start = time.perf_counter()
    program = translate(twenty_ops, *args)
    seconds = time.perf_counter() - start
    print(f"translated a 20-op function in {seconds:.2f} s (torch already imported)")
    d = only_def(program)
    close(call_def(d, *(a.numpy() for a in args)), twenty_ops(*args).numpy())


# -- gradients of translated code ------------------------------------------------------------------------
def small_mlp(w1, b1, w2, b2, x, y):
    h = torch.tanh(F.linear(x, w1, b1))
    out = F.linear(h, w2, b2)
    return -(F.log_softmax(out, dim=-1) * y).sum() + ((out - y) ** 2).mean() + torch.relu(h).sum()


def test_knossos_grad_of_a_translated_function_equals_torch_autograd() -> None:
    from autodiff import grad_program

    shapes: list[Shape] = [(5, 4), (5,), (3, 5), (3,), (2, 4), (2, 3)]
    program = grad_program(translate(small_mlp, *examples(shapes)), defs=["small_mlp"], mode="rev")
    rev = program.defs["rev$small_mlp"]
    args = [a.requires_grad_() for a in examples(shapes, 1)]
    want = torch.autograd.grad(small_mlp(*args), args)
    got = call_def(rev, *(a.detach().numpy() for a in args), 1.0)
    for g, w in zip(got, want, strict=True):
        close(g, w.numpy())


def test_other_results_and_factories_without_a_lowering_are_one_line_errors() -> None:
    with pytest.raises(KsUsageError, match="the function returns a dict; return tensors"):
        translate(lambda a: {"y": a * 2.0}, *examples([(3,)]))
    with pytest.raises(KsUsageError, match=r"unsupported op aten\.cumsum\.default") as info:
        translate(lambda a: a * torch.arange(3, dtype=torch.float64).cumsum(0), *examples([(3,)]))
    assert "\n" not in info.value.render() and "torch.arange" in info.value.render()
