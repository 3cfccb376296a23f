"""``knossos import FILE.py --function NAME --shapes ...``: the program, -o's rules, one-line errors and
nothing written on failure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from frontends.cli import parse_shapes, parse_specs  # noqa: E402
from knossos.cli import main  # noqa: E402
from knossos.errors import KsUsageError  # noqa: E402
from knossos.interpreter import call_def  # noqa: E402
from knossos.parser import load_program  # noqa: E402

MODEL = """\
import torch
import torch.nn.functional as F


def layer(W, b, x):
    return torch.tanh(x @ W.T + b)


def loss(W, b, x, scale: float, offset=0.5):
    return (layer(W, b, x) * scale).sum() + offset


def bad(x):
    y = x * 2.0
    return torch.cumsum(y, 0).sum()
"""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_import_prints_a_program_that_computes_the_function(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(model), "--function", "loss", "--shapes", "W=3x2,b=3,x=2")
    assert code == 0 and not err
    assert out.startswith("; knossos import model.py --function loss --shapes 'W=3x2,b=3,x=2'\n")
    out_file = model.parent / "loss.ks"
    out_file.write_text(out)
    d = load_program(str(out_file)).defs["loss"]
    assert [p.name for p in d.params] == ["W", "b", "x", "scale", "offset"]
    rng = np.random.default_rng(0)
    W, b, x = rng.standard_normal((3, 2)), rng.standard_normal(3), rng.standard_normal(2)
    want = float(np.sum(np.tanh(x @ W.T + b) * 2.0) + 0.25)
    assert abs(call_def(d, W, b, x, 2.0, 0.25) - want) < 1e-12


def test_import_writes_o_and_keeps_the_rules_of_o(model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = model.parent / "out.ks"
    argv = [str(model), "--function", "loss", "--shapes", "W=3x2,b=3,x=2,scale=", "-o", str(out)]
    assert run(capsys, *argv) == (0, "", "")
    assert "(def loss Float" in out.read_text()
    code, _, err = run(capsys, *argv)
    assert code == 1 and "the file exists; add --force" in err
    assert run(capsys, *argv, "--force")[0] == 0
    code, _, err = run(capsys, str(model), "--function", "loss", "--shapes", "W=3x2,b=3,x=2", "-o", str(model))
    assert code == 1 and "names the input file" in err
    assert model.read_text() == MODEL


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--function", "bad", "--shapes", "x=4"],
            "model.py:15:5: error: unsupported op aten.cumsum.default in `return torch.cumsum(y, 0).sum()`",
        ),
        (["--function", "nope", "--shapes", "x=4"], "no function named 'nope' (its functions: bad, layer, loss)"),
        (["--function", "loss", "--shapes", "W=3x2,b=3,q=2"], "--shapes names q, not parameters"),
        (["--function", "loss", "--shapes", "W=3x2,b=3"], "no shape for the parameter 'x'"),
        (["--function", "loss", "--shapes", "W=3y2"], "bad --shapes item 'W=3y2'"),
        (["--function", "loss", "--shapes", "W=3x2,W=2"], "gives 'W' twice"),
        (["--function", "layer", "--shapes", "W=3x2,b=4,x=2"], "the function failed on its examples: RuntimeError"),
    ],
)
def test_errors_are_one_line_and_nothing_is_written(
    model: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    out = model.parent / "out.ks"
    code, stdout, err = run(capsys, str(model), *argv, "-o", str(out))
    assert code == 1 and not stdout
    assert message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_a_file_that_fails_to_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import torch\nraise ValueError('no')\n")
    code, _, err = run(capsys, str(broken), "--function", "f")
    assert code == 1 and "importing it failed: ValueError: no" in err
    code, _, err = run(capsys, str(tmp_path / "missing.py"), "--function", "f")
    assert code == 1 and "no such file" in err


def test_parse_specs_reads_dtypes() -> None:
    assert parse_specs("x=4:float32, idx = 2x3 : int < 50,y=") == {
        "x": ((4,), "float32"),
        "idx": ((2, 3), "int<50"),
        "y": ((), "float64"),
    }
    for bad in ("x=4:int", "x=4:float16", "x=4:int<0"):
        with pytest.raises(KsUsageError, match="--shapes"):
            parse_specs(bad)


LM = """import torch
import torch.nn.functional as F


def lm_loss(idx, targets, wte, w):
    logits = F.embedding(idx, wte) @ w
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
"""


def test_import_takes_integer_and_float32_tensors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lm.py"
    path.write_text(LM)
    shapes = "idx=2x3:int<7,targets=2x3:int<5,wte=7x4:float32,w=4x5:float32"
    code, out, err = run(capsys, str(path), "--function", "lm_loss", "--shapes", shapes)
    assert code == 0 and not err and out.startswith(f"; knossos import lm.py --function lm_loss --shapes '{shapes}'")
    (tmp_path / "lm.ks").write_text(out)
    d = load_program(str(tmp_path / "lm.ks")).defs["lm_loss"]
    assert [str(p.type) for p in d.params][:3] == ["(Vec (Vec Integer))"] * 2 + ["(Vec (Vec Float))"]
    code, out, err = run(capsys, str(path), "--function", "lm_loss", "--shapes", shapes.replace("int<7", "int<9"))
    assert code == 1 and err.count("\n") == 1 and "lm.py:6:5: error: the function failed on its examples" in err


def test_parse_shapes() -> None:
    assert parse_shapes("W=64x32, b=64,x=32,s=,t=()") == {"W": (64, 32), "b": (64,), "x": (32,), "s": (), "t": ()}
