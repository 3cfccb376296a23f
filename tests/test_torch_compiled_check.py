"""A translation too big for the interpreter is checked compiled (issue 46): ``knossos import``
compiles the def with ``cpp_backend.compile_def`` (exact order) and compares it with torch on fresh
inputs, saying so on stderr; ``translate`` without a compiler refuses it as before.  The budget is
lowered here so that small defs (a few seconds of g++) stand for big ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from app.torch_import import compiled  # noqa: E402
from frontends import aten, aten_ops  # noqa: E402
from frontends import check as check_module  # noqa: E402
from frontends.torch import translate  # noqa: E402
from knossos import expr as E  # noqa: E402
from knossos.cli import main  # noqa: E402
from knossos.errors import KsUsageError  # noqa: E402
from knossos.ops import Op  # noqa: E402

PROGRESS = "checking the translation compiled to C++"


def examples(shapes: list[tuple[int, ...]], seed: int = 0) -> list[Any]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]


def loss(w, x, t):
    return torch.nn.functional.cross_entropy(torch.tanh(x @ w), t) + torch.exp(w).sum()


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(check_module, "CHECK_INTERPRETER_STEPS", 50)


@pytest.mark.slow
@pytest.mark.usefixtures("small_budget")
def test_a_def_over_the_budget_is_checked_compiled(capsys: pytest.CaptureFixture[str]) -> None:
    w, x = examples([(4, 3), (5, 4)])
    t = torch.tensor([0, 2, 1, 1, 0])
    with pytest.raises(KsUsageError, match="would take the interpreter"):
        translate(loss, w, x, t)
    program = translate(loss, w, x, t, compiler=compiled)
    assert PROGRESS in capsys.readouterr().err
    assert "loss" in program.defs


@pytest.mark.usefixtures("small_budget")
def test_a_wrong_translation_is_refused_by_the_compiled_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        aten_ops.VALUE_OP_LOWERINGS, "exp.default", lambda c: aten.unary(c.args[0], lambda e: E.op(Op.TANH, e))
    )
    w, x = examples([(4, 3), (5, 4)])
    with pytest.raises(KsUsageError, match="the translation disagrees with torch on other inputs"):
        translate(loss, w, x, torch.tensor([0, 2, 1, 1, 0]), compiler=compiled)


@pytest.mark.usefixtures("small_budget")
def test_knossos_import_checks_big_translations_compiled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text("import torch\n\n\ndef f(w, x):\n    return torch.tanh(x @ w).sum()\n")
    code = main(["import", str(path), "--function", "f", "--shapes", "w=4x3,x=5x4"])
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("; knossos import m.py")
    assert err.count("\n") == 1 and PROGRESS in err


def test_the_knossos_command_line_does_not_import_torch() -> None:
    """The import command is registered through app.torch_import, which must stay light: torch is
    imported only when the command runs."""
    import subprocess
    import sys

    code = "import sys; from knossos.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
