"""No example value is baked into a translation (issue 44): every result of an op with several
results is traced (chunk, split, layer_norm, max along a dim) or refused by name (sort, topk...); a
tensor made from the inputs outside torch's ops is refused; every translation is evaluated on fresh
inputs against torch, and one that disagrees is refused, by ``translate`` and by ``knossos import``;
``print`` and ``sys.exit`` in the traced code do not reach the command's output or end it silently."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from frontends import aten, aten_ops  # noqa: E402
from frontends import check as check_module  # noqa: E402
from frontends.check import fresh_inputs  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos import expr as E  # noqa: E402
from knossos.cli import main  # noqa: E402
from knossos.errors import KsUsageError  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.ops import Op  # noqa: E402
from knossos.parser import load_program  # noqa: E402

# It prints on import (to stderr under `knossos import`: each error below is the second line of stderr).
CELLS = """\
import sys

print("importing cells")

import numpy as np
import torch
import torch.nn.functional as F


def lstm_cell(x, h, c, w_ih, w_hh, b_ih, b_hh):
    gates = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c2 = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c2)


def gru_cell(x, h, w_ih, w_hh, b_ih, b_hh):
    r_i, z_i, n_i = F.linear(x, w_ih, b_ih).chunk(3, 1)
    r_h, z_h, n_h = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = torch.sigmoid(r_i + r_h)
    z = torch.sigmoid(z_i + z_h)
    n = torch.tanh(n_i + r * n_h)
    return (1 - z) * n + z * h


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def sorted_values(x):
    return torch.sort(x).values * 2.0


def via_numpy(x):
    y = torch.from_numpy(x.detach().numpy() * 2)
    return y + x


def chatty(x):
    print("tracing", x.shape)
    return x * 2.0


def quits(x):
    sys.exit(3)
"""

CELL_SHAPES = {
    "lstm_cell": "x=2x3,h=2x4,c=2x4,w_ih=16x3,w_hh=16x4,b_ih=16,b_hh=16",
    "gru_cell": "x=2x3,h=2x4,w_ih=12x3,w_hh=12x4,b_ih=12,b_hh=12",
    "layer_norm": "x=3x5,w=5,b=5",
}


@pytest.fixture
def cells(tmp_path: Path) -> Path:
    path = tmp_path / "cells.py"
    path.write_text(CELLS)
    return path


def line_of(code: str) -> str:
    """``LINE:COL`` of ``code`` in CELLS (the first column of its text)."""
    for k, line in enumerate(CELLS.splitlines(), 1):
        if line.strip() == code:
            return f"{k}:{len(line) - len(line.lstrip()) + 1}"
    raise AssertionError(code)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def examples(shapes: list[tuple[int, ...]], seed: int = 0) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


# -- ops with several results ---------------------------------------------------------------------------
@pytest.mark.parametrize("function", CELL_SHAPES)
def test_import_of_cells_and_layer_norm_computes_them_on_new_inputs(
    cells: Path, capsys: pytest.CaptureFixture[str], function: str
) -> None:
    """The GRU and LSTM cells (chunk) and LayerNorm (native_layer_norm) equal torch on inputs that are
    not the traced examples; they were off by 1.2-2.0 relative when their results became constants."""
    out = cells.parent / f"{function}.ks"
    code, stdout, err = run(
        capsys, str(cells), "--function", function, "--shapes", CELL_SHAPES[function], "-o", str(out)
    )
    assert (code, stdout, err) == (0, "", "importing cells\n")
    d = load_program(str(out)).defs[function]
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(CELLS, str(cells), "exec"), namespace)
    shapes = [tuple(int(n) for n in item.split("=")[1].split("x")) for item in CELL_SHAPES[function].split(",")]
    for seed in (5, 6):
        args = examples(shapes, seed)
        want = namespace[function](*args).numpy()
        got = np.asarray(call_def(d, *(a.numpy() for a in args)))
        assert np.max(np.abs(got - want)) < 1e-12 * max(1.0, float(np.max(np.abs(want))))


REFUSED = {
    "sort": (lambda x: torch.sort(x.repeat(1, 5)).values, "aten.sort.default with a sort of 20 elements"),
    "msort": (lambda x: torch.msort(x.repeat(6, 1)), "aten.sort.default with a sort of 18 elements"),
    "topk unsorted": (lambda x: torch.topk(x, 2, sorted=False).values, "aten.topk.default with sorted=False"),
    "cummax": (lambda x: torch.cummax(x, 1).values, "aten.cummax.default"),
    "kthvalue": (lambda x: torch.kthvalue(x, 2).values, "aten.kthvalue.default"),
    "argmax of all": (lambda x: torch.argmax(x) * 1.0, "aten.argmax.default with an argmax over all elements"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_several_results_without_a_lowering_are_refused_naming_the_op_and_line(case: str) -> None:
    fn, message = REFUSED[case]
    with pytest.raises(KsUsageError) as info:
        translate(fn, *examples([(3, 4)]))
    text = info.value.render()
    assert message in text and "\n" not in text
    assert info.value.file == __file__ and f'"{case}"' in text  # the line of the lambda in REFUSED


def test_import_refuses_sort_with_one_line_and_writes_nothing(cells: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = cells.parent / "out.ks"
    code, stdout, err = run(capsys, str(cells), "--function", "sorted_values", "--shapes", "x=3x20", "-o", str(out))
    assert code == 1 and not stdout and not out.exists()
    line = line_of("return torch.sort(x).values * 2.0")
    assert err.count("\n") == 2 and f"cells.py:{line}: error: aten.sort.default with a sort of 20 elements" in err
    assert run(capsys, str(cells), "--function", "sorted_values", "--shapes", "x=3x4", "-o", str(out))[0] == 0


# -- constants made from the inputs ---------------------------------------------------------------------
def doubled_through_numpy(x):
    y = torch.from_numpy(x.detach().numpy() * 2)
    return torch.tanh(y) + x


WEIGHT = torch.linspace(-1.0, 1.0, 4, dtype=torch.float64)


def reads_a_global(x):
    return x * WEIGHT + torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64)


def test_a_tensor_made_from_the_inputs_through_numpy_is_refused_where_it_is_read() -> None:
    with pytest.raises(KsUsageError, match=re.escape(f"{TAKEN_OUT} (Tensor.numpy)")) as info:
        translate(doubled_through_numpy, *examples([(4,)]))
    assert info.value.pos is not None and info.value.pos.line == doubled_through_numpy.__code__.co_firstlineno + 1


def test_a_global_read_through_numpy_is_a_constant() -> None:
    d = translate(lambda x: x + torch.from_numpy(WEIGHT.numpy() * 2), *examples([(4,)])).defs["f"]
    assert np.allclose(call_def(d, np.zeros(4)), 2 * WEIGHT.numpy(), rtol=0, atol=1e-15)


def test_the_second_trace_refuses_a_changing_constant_where_it_is_read() -> None:
    """What leaves torch unseen (here memory read through data_ptr) is caught by the second trace."""
    import ctypes

    def through_memory(x):
        copy = np.ctypeslib.as_array(ctypes.cast(x.data_ptr(), ctypes.POINTER(ctypes.c_double)), (4,)).copy()
        y = torch.from_numpy(copy)
        return x + y

    with pytest.raises(KsUsageError, match="a constant tensor changes when the function is traced again") as info:
        translate(through_memory, *examples([(4,)]))
    assert info.value.pos is not None and info.value.pos.line == through_memory.__code__.co_firstlineno + 3


TAKEN_OUT = "the function takes the values of a tensor computed from its arguments out of torch"
MADE_OUTSIDE = {
    "tolist": (lambda x: torch.tensor(x.tolist(), dtype=torch.float64) + x, f"{TAKEN_OUT} (Tensor.tolist)"),
    "as_tensor of numpy": (lambda x: torch.as_tensor(x.numpy() + 1) * x, f"{TAKEN_OUT} (Tensor.numpy)"),
    "np.asarray": (lambda x: torch.from_numpy(np.asarray(x) * 2) + x, f"{TAKEN_OUT} (Tensor.__array__)"),
    "a numpy number": (lambda x: x * x.numpy()[0], f"{TAKEN_OUT} (Tensor.numpy)"),
    "a branch": (lambda x: x * 2.0 if x.numpy().sum() > 0 else x * 3.0, f"{TAKEN_OUT} (Tensor.numpy)"),
    "random numpy": (
        lambda x: x + torch.from_numpy(np.random.rand(3)),
        "a constant tensor changes when the function is traced again on other inputs (it is random",
    ),
}


@pytest.mark.parametrize("case", MADE_OUTSIDE)
def test_values_made_outside_torch_s_ops_are_refused_naming_the_line(case: str) -> None:
    fn, message = MADE_OUTSIDE[case]
    with pytest.raises(KsUsageError, match=re.escape(message)) as info:
        translate(fn, *examples([(3,)]), check=False)
    assert info.value.file == __file__ and info.value.pos is not None
    assert info.value.pos.line == fn.__code__.co_firstlineno and "\n" not in info.value.render()


def test_constants_that_do_not_depend_on_the_inputs_are_kept() -> None:
    (x,) = examples([(3, 4)], 3)
    d = translate(reads_a_global, *examples([(3, 4)])).defs["reads_a_global"]
    assert np.allclose(call_def(d, x.numpy()), reads_a_global(x).numpy(), rtol=1e-12, atol=0)


def test_import_refuses_numpy_made_constants(cells: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = run(capsys, str(cells), "--function", "via_numpy", "--shapes", "x=4")
    assert code == 1 and not stdout and err.count("\n") == 2
    assert f"cells.py:{line_of('y = torch.from_numpy(x.detach().numpy() * 2)')}: error: {TAKEN_OUT}" in err


# -- the check ------------------------------------------------------------------------------------------
@pytest.fixture
def wrong_exp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrong lowering, as a bug would make one: exp as tanh."""
    monkeypatch.setitem(
        aten_ops.VALUE_OP_LOWERINGS, "exp.default", lambda c: aten.unary(c.args[0], lambda e: E.op(Op.TANH, e))
    )


@pytest.mark.usefixtures("wrong_exp")
def test_a_wrong_translation_is_refused_and_check_false_skips_the_check() -> None:
    args = examples([(3,)])
    with pytest.raises(KsUsageError, match="the translation disagrees with torch on other inputs") as info:
        translate(lambda a: torch.exp(a) + 1.0, *args)
    assert "\n" not in info.value.render()
    assert "exp" not in str(translate(lambda a: torch.exp(a), *args, check=False).defs)


@pytest.mark.usefixtures("wrong_exp")
def test_import_refuses_a_wrong_translation_unless_no_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef f(x):\n    return torch.exp(x).sum()\n")
    out = tmp_path / "f.ks"
    code, stdout, err = run(capsys, str(path), "--function", "f", "--shapes", "x=5", "-o", str(out))
    assert code == 1 and not stdout and not out.exists()
    assert err.count("\n") == 1 and "the translation disagrees with torch" in err and err.startswith(str(path))
    assert run(capsys, str(path), "--function", "f", "--shapes", "x=5", "-o", str(out), "--no-check") == (0, "", "")
    assert out.exists()


def test_a_def_too_big_to_check_is_refused_at_once_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_module, "CHECK_INTERPRETER_STEPS", 50)
    args = examples([(4, 4), (4, 4)])
    hint = r"at these shapes \(at most 50\): translate at smaller shapes to check it, or skip the check \(--no-check"
    with pytest.raises(KsUsageError, match=r"would take the interpreter about [0-9,]+ steps " + hint):
        translate(lambda a, b: a @ b, *args)
    translate(lambda a, b: a @ b, *args, check=False)
    monkeypatch.setattr(check_module, "estimated_steps", lambda root: None)  # the interpreter's own limit
    with pytest.raises(KsUsageError, match=r"would take the interpreter more than 50 steps " + hint):
        translate(lambda a, b: a @ b, *args)


def test_the_estimate_of_the_interpreter_s_steps_is_close_above() -> None:
    from knossos.errors import KsEvalError
    from knossos.interpreter import Interpreter

    args = examples([(6, 5), (6,), (3, 6), (2, 5)])
    (d,) = translate(lambda w, b, v, x: (torch.tanh(x @ w.T + b) @ v.T).sum(), *args, check=False).defs.values()
    estimate = check_module.estimated_steps(d.body)
    assert estimate is not None
    Interpreter(max_steps=estimate).call(d, [a.numpy() for a in args])
    with pytest.raises(KsEvalError, match="steps"):
        Interpreter(max_steps=int(estimate / 1.3)).call(d, [a.numpy() for a in args])


def test_fresh_inputs_differ_from_the_examples_within_their_range() -> None:
    positive, zero_d, ones = (
        torch.rand(50, dtype=torch.float64) + 0.5,
        torch.tensor(2.0, dtype=torch.float64),
        torch.ones(3, dtype=torch.float64),
    )
    a, b, c = fresh_inputs((positive, zero_d, ones))
    assert a.shape == positive.shape and not torch.equal(a, positive)
    assert positive.min() <= a.min() and a.max() <= positive.max()
    assert b.shape == () and 1.0 <= float(b) <= 3.0 and float(b) != 2.0
    assert not torch.equal(c, ones) and bool((c > 0).all())


def test_nans_where_torch_has_them_agree() -> None:
    """log of an example with negative elements: NaN in torch and in the interpreter alike, so the
    check passes; a NaN only one side has is a disagreement."""
    (d,) = translate(lambda a: torch.log(a), torch.tensor([-1.0, 2.0, -3.0, 4.0], dtype=torch.float64)).defs.values()
    assert np.isnan(call_def(d, np.array([-1.0, 1.0, 1.0, 1.0]))[0])
    nan, one = np.array([np.nan, 1.0]), np.array([1.0, 1.0])
    assert check_module.disagreement(nan, nan) == ""
    assert "NaNs" in check_module.disagreement(nan, one) and "NaNs" in check_module.disagreement(one, nan)
    assert "difference of 0.001" in check_module.disagreement(one + 1e-3, one)
    assert check_module.disagreement(one + 1e-9, one) == ""


# -- print and sys.exit in the traced code --------------------------------------------------------------
def test_print_in_the_function_goes_to_stderr_not_into_the_program(
    cells: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stdout, err = run(capsys, str(cells), "--function", "chatty", "--shapes", "x=3")
    assert code == 0 and "tracing" not in stdout and "tracing torch.Size([3])" in err
    assert "importing cells" in err and stdout.startswith("; knossos import cells.py")
    program = cells.parent / "chatty.ks"
    program.write_text(stdout)
    assert call_def(load_program(str(program)).defs["chatty"], np.array([1.0, 2.0, 3.0])) == [2.0, 4.0, 6.0]


def test_sys_exit_in_the_function_is_one_error_line(cells: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, stdout, err = run(capsys, str(cells), "--function", "quits", "--shapes", "x=3")
    assert code == 1 and not stdout
    assert (
        err.count("\n") == 2
        and f"cells.py:{line_of('sys.exit(3)')}: error: the function called sys.exit(3) in `sys.exit(3)`" in err
    )


def test_bool_and_tuple_results_are_checked() -> None:
    args = examples([(4,)])
    (d,) = translate(lambda x: (x > 0, x * 2.0), *args).defs.values()
    got = call_def(d, np.array([-1.0, 2.0, 0.0, 3.0]))
    assert list(got[0]) == [False, True, False, True] and list(got[1]) == [-2.0, 4.0, 0.0, 6.0]
