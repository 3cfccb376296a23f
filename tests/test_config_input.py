"""train.py refuses bad config input with one line and status 1, before any run folder is made:
seeds out of range, config files that are not UTF-8, YAML nested deeper than a config can be, keys
given twice, run names that leave runs/; an error in a ``--set`` value names the override, not the
file.  A TensorBoard log that cannot be written is a one-line warning, not a thread's traceback."""

from __future__ import annotations

import errno
import subprocess
import sys
from pathlib import Path

import pytest

from app.train_cli import main
from training.config import MAX_NESTING, MAX_SEED, load_config

from conftest import ROOT, run_cli

GOOD = """\
name: tiny
rules: binding_simplify_rules
data:
  train: {set: binding_simplify_8}
  test: {set: binding_simplify_8}
search:
  depth: 3
  budget: 30
  test_budget: 30
model:
  hidden: 48
  steps: 2
training:
  epochs: 1
  exprs_per_epoch: 2
"""


def config(tmp_path: Path, text: str | bytes = GOOD, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def refused(capsys: pytest.CaptureFixture[str], tmp_path: Path, *argv: str) -> str:
    """train.py's one error line for ``argv`` (after CONFIG), checking it made no run folder."""
    out = tmp_path / "run"
    code, _, err = run_cli(main, capsys, *argv, "--out", str(out), "--quiet")
    assert code == 1, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert not out.exists()
    return err.rstrip("\n")


# -- seeds -----------------------------------------------------------------------------------------------
def test_a_negative_seed_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Was: train.py: internal error: ValueError: expected non-negative integer (numpy's)."""
    line = refused(capsys, tmp_path, str(config(tmp_path)), "--set", "training.seed=-1")
    assert line == f"--set training.seed=-1: error: training.seed: must be at least 0 and at most {MAX_SEED}, not -1"


def test_a_seed_beyond_64_bits_in_the_file_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = config(tmp_path, GOOD.replace("  epochs: 1\n", "  epochs: 1\n  seed: 18446744073709551616\n"))
    line = refused(capsys, tmp_path, str(path))
    assert line == (
        f"{path}: error: training.seed: must be at least 0 and at most {MAX_SEED}, not 18446744073709551616"
    )


def test_the_largest_seed_loads_but_repetitions_may_not_pass_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = config(tmp_path)
    assert load_config(path, [f"training.seed={MAX_SEED}"]).training.seed == MAX_SEED
    line = refused(capsys, tmp_path, str(path), "--set", f"training.seed={MAX_SEED}", "--repetitions", "2")
    assert line == (
        f"train.py: error: --repetitions 2 from training.seed {MAX_SEED} would need seeds above {MAX_SEED}, the largest"
    )


# -- the file's bytes and YAML -----------------------------------------------------------------------------
def test_a_config_that_is_not_utf8_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Was: train.py: internal error: UnicodeDecodeError (a UTF-16 file starts with \\xff\\xfe)."""
    path = config(tmp_path, b"\xff\xfe" + GOOD.encode("utf-16-le"))
    line = refused(capsys, tmp_path, str(path))
    assert line == f"{path}:1:1: error: not UTF-8 text (byte 0xff): a config is UTF-8 YAML"
    path = config(tmp_path, GOOD.replace("depth: 3", "depth: 3 # caf\xe9").encode("latin-1"))
    assert refused(capsys, tmp_path, str(path)).startswith(f"{path}:7:17: error: not UTF-8 text (byte 0xe9)")


def test_a_utf8_config_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    assert load_config(config(tmp_path, b"\xef\xbb\xbf" + GOOD.encode())).name == "tiny"


def test_deeply_nested_yaml_is_one_line(tmp_path: Path) -> None:
    """Was: train.py: internal error: RecursionError (PyYAML's composer recurses once per level)."""
    path = config(tmp_path, GOOD + "x: " + "[" * 10_000 + "]" * 10_000 + "\n")
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "train.py", str(path), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert (
        done.stderr
        == f"{path}:16:{3 + MAX_NESTING}: error: not valid YAML: nested more than {MAX_NESTING} levels deep\n"
    )
    assert not out.exists()


def test_deeply_nested_override_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    line = refused(capsys, tmp_path, str(config(tmp_path)), "--set", f"training.later_defs={deep}")
    assert line == f"--set training.later_defs={deep[:37]}...: error: not valid YAML: nested more than 50 levels deep"


def test_a_key_given_twice_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Was: silently accepted, the last value winning."""
    path = config(tmp_path, GOOD.replace("  budget: 30\n", "  budget: 30\n  depth: 9\n"))
    line = refused(capsys, tmp_path, str(path))
    assert line == f"{path}:9:3: error: not valid YAML: duplicate key 'depth' (first given at line 7)"
    path = config(tmp_path, "name: a\n" + GOOD)
    assert refused(capsys, tmp_path, str(path)) == (
        f"{path}:2:1: error: not valid YAML: duplicate key 'name' (first given at line 1)"
    )
    line = refused(capsys, tmp_path, str(path := config(tmp_path)), "--set", "data.test={set: a, set: b}")
    assert (
        line == "--set data.test={set: a, set: b}: error: not valid YAML: duplicate key 'set' (first given at line 1)"
    )


def test_a_merged_key_may_be_overridden(tmp_path: Path) -> None:
    """YAML's merge key (<<) is no duplicate: the mapping's own key replaces the merged one."""
    text = GOOD.replace(
        "  train: {set: binding_simplify_8}\n  test: {set: binding_simplify_8}\n",
        "  train: &t {set: binding_simplify_8, defs: []}\n  test: {<<: *t, set: bindgen_test}\n",
    )
    assert load_config(config(tmp_path, text)).data.test.set == "bindgen_test"


# -- run names ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../x", "a/b", "..", ".hidden", "a\\\\b", "''", "x" * 256])
def test_a_run_name_must_be_one_plain_folder_name(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    """Was: ``name: ../../x`` trained into runs/../../x, outside runs/."""
    path = config(tmp_path, GOOD.replace("name: tiny", f"name: {name}"))
    line = refused(capsys, tmp_path, str(path))
    assert line.startswith(f"{path}: error: name: "), line
    assert "runs/" in line


def test_a_plain_run_name_with_dots_and_spaces_loads(tmp_path: Path) -> None:
    assert load_config(config(tmp_path, GOOD.replace("name: tiny", "name: 'run 1.b'"))).name == "run 1.b"


# -- no run folder left behind -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("override", "line"),
    [
        ("rules=no_such_rules", "unknown rule set 'no_such_rules'"),
        ("data.train.set=no_such_set", "no_such_set"),
        ("training.later_defs=[nope]", "training.later_defs: 'nope'"),
    ],
)
def test_a_config_refused_when_the_run_starts_leaves_no_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, override: str, line: str
) -> None:
    """Was: the run folder was made first, and left empty when the data or rules were refused."""
    assert line in refused(capsys, tmp_path, str(config(tmp_path)), "--set", override)


# -- where an error is said to be --------------------------------------------------------------------------
def test_set_errors_name_the_override_and_file_errors_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Was: ``c.yaml: error: training.epochs: must be at least 1, not 0`` for ``--set training.epochs=0``."""
    path = config(tmp_path)
    line = refused(capsys, tmp_path, str(path), "--set", "training.epochs=0")
    assert line == "--set training.epochs=0: error: training.epochs: must be at least 1, not 0"
    bad = config(tmp_path, GOOD.replace("epochs: 1", "epochs: 0"), "bad.yaml")
    assert refused(capsys, tmp_path, str(bad)) == f"{bad}: error: training.epochs: must be at least 1, not 0"
    # an override within a section labels the section's errors, the last override of a key wins
    line = refused(capsys, tmp_path, str(path), "--set", "data.train.file=a.kso")
    assert line == "--set data.train.file=a.kso: error: data.train: give exactly one of 'set' or 'file'"
    line = refused(capsys, tmp_path, str(path), "--set", "model.hidden=64", "--set", "model.hidden=8")
    assert line.startswith("--set model.hidden=8: error: model.hidden: must be at least ")
    line = refused(capsys, tmp_path, str(path), "--set", "name.x=1")
    assert line == "--set name.x=1: error: override name.x: 'name' is not a section"
    line = refused(capsys, tmp_path, str(path), "--ray-address", "auto")
    assert line == (
        "--ray-address auto: error: training.ray_address: (train.py --ray-address) is for training.executor: ray, "
        "not local"
    )


# -- write failures ----------------------------------------------------------------------------------------
def no_space_after(monkeypatch: pytest.MonkeyPatch, records: int) -> None:
    """TensorBoard's event files fail to take more than ``records`` records, as on a full disk (the
    writes happen in TensorBoard's writer thread)."""
    from tensorboard.summary.writer import record_writer

    write = record_writer.RecordWriter.write
    written = [0]

    def full(self: record_writer.RecordWriter, data: bytes) -> None:
        written[0] += 1
        if written[0] > records:
            raise OSError(errno.ENOSPC, "No space left on device")
        write(self, data)

    monkeypatch.setattr(record_writer.RecordWriter, "write", full)


@pytest.mark.parametrize("records", [0, 5])
def test_a_tensorboard_log_that_cannot_be_written_is_a_warning(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, records: int
) -> None:
    """Was: "Exception in thread Thread-N" and a traceback from the writer's thread, then
    ``train.py: internal error: OSError``.  The log is for watching a run: the run goes on."""
    no_space_after(monkeypatch, records)
    out = tmp_path / "run"
    code, stdout, err = run_cli(main, capsys, str(config(tmp_path)), "--out", str(out), "--quiet")
    assert code == 0, err
    assert err == (
        f"train.py: warning: {out / 'tensorboard'}: cannot write the TensorBoard log (No space left on device); "
        "training goes on without it\n"
    )
    assert stdout.startswith(f"{out}: epoch 1, loss ")
    assert (out / "checkpoint.pt").is_file() and (out / "metrics.jsonl").is_file()


def test_a_tensorboard_folder_that_is_a_file_is_a_warning(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "tensorboard").write_text("mine")
    code, _, err = run_cli(main, capsys, str(config(tmp_path)), "--out", str(out), "--quiet")
    assert code == 0 and err.count("\n") == 1 and "cannot write the TensorBoard log" in err, err
    assert (out / "tensorboard").read_text() == "mine"


def test_a_checkpoint_that_cannot_be_written_is_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A full disk when the checkpoint is written: one line naming the file, status 1."""
    import training.trainer

    def full(path: Path, state: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(training.trainer, "save_model_file", full)
    out = tmp_path / "run"
    code, _, err = run_cli(main, capsys, str(config(tmp_path)), "--out", str(out), "--quiet")
    assert code == 1
    assert err == f"train.py: error: {out / 'checkpoint.pt'}: No space left on device\n"
