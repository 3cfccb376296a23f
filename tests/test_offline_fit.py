"""The offline pipeline of the default model: searches written to a dataset file, fitted pass by pass."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from app.models import load_value_function
from experiments.default_model import candidates, dataset, export_offline, fit_offline
from knossos.parser import parse_expr
from knossos.printer import format_expr

ROOT = Path(__file__).resolve().parent.parent


def rows(path: Path) -> list[dict[str, object]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def test_dataset_writes_one_row_per_search_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "d.jsonl.gz"
    dataset.main(
        [str(out), "--set", "bindgen_test", "--first", "2", "--budget", "40", "--samples", "30", "--workers", "1"]
    )
    first = rows(out)
    assert sorted(r["index"] for r in first) == [0, 1]
    for r in first:
        assert 0 < len(r["samples"]) <= 30
        for expr, steps_left, target, shorter in r["samples"]:
            assert isinstance(expr, str) and 1 <= steps_left <= 10 and target >= 0
            assert len(shorter) < steps_left
    dataset.main(
        [str(out), "--set", "bindgen_test", "--first", "3", "--budget", "40", "--samples", "30", "--workers", "1"]
    )
    again = rows(out)
    assert again[:2] == first  # the two done are kept, not searched again
    assert sorted(r["index"] for r in again) == [0, 1, 2]


def test_a_cut_off_dataset_keeps_what_was_written(tmp_path: Path) -> None:
    out = tmp_path / "d.jsonl.gz"
    dataset.main(
        [str(out), "--set", "bindgen_test", "--first", "2", "--budget", "40", "--samples", "10", "--workers", "1"]
    )
    whole = rows(out)
    cut = gzip.compress(b'{"index": 2, "samples": [["(add x 1.0)", 1')
    out.write_bytes(out.read_bytes() + cut[: len(cut) // 2])  # a writer killed mid-member
    assert dataset.done_indices(out) == {0, 1}
    dataset.main(
        [str(out), "--set", "bindgen_test", "--first", "3", "--budget", "40", "--samples", "10", "--workers", "1"]
    )
    again = rows(out)  # readable to the end: the cut-off member was dropped before appending
    assert again[:2] == whole and [r["index"] for r in again[2:]] == [2]


def test_merged_samples_keep_the_best_target_per_expression(tmp_path: Path) -> None:
    out = tmp_path / "d.jsonl.gz"
    dataset.main(
        [str(out), "--set", "bindgen_test", "--first", "2", "--budget", "60", "--samples", "50", "--workers", "1"]
    )
    merged = fit_offline.read_data([out, out], exclude=set()).samples
    assert len({s.expr for s in merged}) == len(merged)  # one sample per expression, however often it was seen
    raw = {}
    for r in rows(out):
        for expr, _, target, _ in r["samples"]:
            raw[expr] = max(raw.get(expr, 0.0), target)
    for s in merged:
        assert s.target >= raw[format_expr(s.expr)] - 1e-9
    assert not fit_offline.read_data([out], exclude={"bindgen_test[0]", "bindgen_test[1]"}).samples


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fit_offline_writes_weights_and_metrics_and_resumes(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl.gz"
    dataset.main(
        [
            str(data),
            "--set",
            "simplify_expressions",
            "--first",
            "2",
            "--budget",
            "40",
            "--samples",
            "20",
            "--workers",
            "1",
        ]
    )
    run = tmp_path / "run"
    argv = [str(run), str(data), "--scales", "0.5", "--validation", "20", "--validation-count", "2", "--hold-out", "2"]
    argv += ["--set", "model.hidden=40"]
    fit_offline.main([*argv, "--passes", "1"])
    assert (run / "weights" / "epoch_001.pt").is_file()
    fit_offline.main([*argv, "--passes", "2", "--cosine"])  # resumes at pass 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == [1, 2]
    assert set(metrics[1]["validation"]) == {"validation 0.5", "train_tail 0.5"}
    value = load_value_function(str(run / "weights" / "epoch_002.pt"))
    assert value.values([parse_expr("(add x 1.0)")[0]], 10).shape == (1, 11)


def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "d.jsonl.gz")
    run = str(tmp_path / "run")
    cases = [
        (dataset.main, [out, "--model", "no_such_model"], "no model file 'no_such_model'"),
        (dataset.main, [out, "--set", "no_such_set"], "no arithmetic set 'no_such_set'"),
        (dataset.main, [out, "--budget", "0"], "must be at least 1"),
        (fit_offline.main, [run, str(tmp_path / "missing.jsonl.gz")], "no such file"),
        (fit_offline.main, [run, out, "--scales", "0.5,nan"], "value scale"),
        (fit_offline.main, [run, out, "--passes", "-1"], "must be at least 1"),
        (export_offline.main, [run, str(tmp_path / "m.pt"), "--epoch", "1", "--scale", "-1"], "value scale"),
        (export_offline.main, [run, str(tmp_path / "m.pt"), "--epoch", "1", "--scale", "0.5"], "no weights"),
    ]
    (tmp_path / "d.jsonl.gz").write_bytes(b"")  # exists, for the cases that get past the file check
    for main, argv, message in cases:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        text = str(exit_.value.code) if isinstance(exit_.value.code, str) else capsys.readouterr().err
        last = text.strip().splitlines()[-1]  # argparse prints its usage first
        assert exit_.value.code != 0 and "error: " in last and message in last, (argv, text)
        assert "Traceback" not in text
    assert not (tmp_path / "run").exists()


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_a_run_refuses_to_resume_on_other_data(tmp_path: Path) -> None:
    data, other = tmp_path / "d.jsonl.gz", tmp_path / "e.jsonl.gz"
    for path in (data, other):
        dataset.main([str(path), "--set", "simplify_expressions", "--first", "2", "--budget", "30", "--workers", "1"])
    run = tmp_path / "run"
    argv = ["--scales", "0.5", "--validation", "10", "--validation-count", "1", "--hold-out", "1"]
    argv += ["--set", "model.hidden=40", "--passes", "1"]
    fit_offline.main([str(run), str(data), *argv])
    with pytest.raises(SystemExit, match="fitted to other data"):
        fit_offline.main([str(run), str(other), *argv])
    provenance = json.loads((run / fit_offline.PROVENANCE).read_text())
    assert [f["file"] for f in provenance["data"]] == ["d.jsonl.gz"] and provenance["data"][0]["searches"] == 2


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fit_offline_with_the_sibling_ranking_loss(tmp_path: Path) -> None:
    data, plain = tmp_path / "g.jsonl.gz", tmp_path / "d.jsonl.gz"
    common = ["--set", "generated_train", "--first", "3", "--budget", "100", "--samples", "20", "--workers", "1"]
    dataset.main([str(data), *common, "--groups"])
    dataset.main([str(plain), *common])
    assert all("groups" in r for r in rows(data)) and not any("groups" in r for r in rows(plain))
    assert fit_offline.read_data([data], exclude=set()).groups  # some child is worse than another somewhere
    argv = ["--scales", "0.5", "--validation", "10", "--validation-count", "1", "--hold-out", "1"]
    argv += ["--set", "model.hidden=40", "--passes", "1", "--rank-weight", "1", "--lr", "1e-4"]
    fit_offline.main([str(tmp_path / "run"), str(data), *argv])
    metrics = json.loads((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()[0])
    assert metrics["rank_loss"] > 0 and metrics["groups"] > 0
    provenance = json.loads((tmp_path / "run" / fit_offline.PROVENANCE).read_text())
    assert provenance["rank_weight"] == 1 and provenance["lr"] == 1e-4
    with pytest.raises(SystemExit, match="needs data files with sibling groups"):
        fit_offline.main([str(tmp_path / "other"), str(plain), *argv])


def test_candidates_average_weights_or_values() -> None:
    model = str(ROOT / "gnn" / "models" / "default.pt")
    exprs = [parse_expr("(add (mul x 1.0) (div y y))")[0], parse_expr("(mul x x)")[0]]
    one = candidates.candidate_value(model, 0.5).values(exprs, 10)
    averaged = candidates.candidate_value(f"{model}+{model}", 0.5).values(exprs, 10)
    ensemble = candidates.candidate_value(f"{model},{model}", 0.5)
    assert isinstance(ensemble, candidates.Ensemble) and len(ensemble.members) == 2
    assert one.shape == (2, 11)
    assert averaged == pytest.approx(one, abs=1e-6) and ensemble.values(exprs, 10) == pytest.approx(one, abs=1e-6)
    with pytest.raises(SystemExit, match="no such file"):
        candidates.candidate_value(f"{model},missing.pt", 0.5)


def test_candidates_rows_name_their_search_and_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(candidates, "OUT", tmp_path / "c.jsonl")
    model = str(ROOT / "gnn" / "models" / "default.pt")
    common = [model, "--on", "validation", "--budget", "20", "--scales", "0.2"]
    candidates.main([*common, "--search", "lazy-astar", "--batches", "1,4"])
    candidates.main(common)
    candidates.main([*common, "--search", "lazy-astar", "--batches", "4"])  # already there: skipped
    got = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert [(r["search"], r.get("batch")) for r in got] == [("lazy-astar", 1), ("lazy-astar", 4), ("astar", None)]
    assert all(r["expressions"] == 60 and r["hits"] == 0 and r["total_cost"] > 0 for r in got)
