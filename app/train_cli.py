"""``train.py CONFIG.yaml``: train a value function (Algorithm 1), with checkpoints and TensorBoard."""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from knossos.cli import ArgumentParser, internal_error
from knossos.errors import KsError, KsUsageError
from search.spec import ctrl_c_stops_searches

ROOT = Path(__file__).resolve().parent.parent
#: The most parallel runs (--repetitions) or threads per run: more is no machine's.
MAX_PROCESSES = 256


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="train.py", description=__doc__)
    p.add_argument("config", metavar="CONFIG.yaml")
    p.add_argument("--out", type=Path, help="run folder (default runs/<config name>)")
    p.add_argument("--resume", action="store_true", help="carry on from the run folder's checkpoint")
    p.add_argument("--repetitions", type=int, default=1, metavar="N", help="N seeds in parallel processes")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with training.executor: ray, the Ray cluster to run the searches on (default: Ray started here)",
    )
    p.add_argument(
        "--threads", type=int, default=1, help="torch threads per run (1: expression graphs are small; default)"
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except KsError as err:
        print(err.render("train.py"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("train.py: interrupted; the last finished epoch is checkpointed (resume with --resume)", file=sys.stderr)
        return 130
    except Exception as err:
        return internal_error("train.py", err)


def run(args: argparse.Namespace) -> int:
    from gnn.config import load_config

    ray = [f"training.ray_address={json.dumps(args.ray_address)}"] if args.ray_address is not None else []
    config = load_config(args.config, [*args.overrides, *ray])
    if not 1 <= args.repetitions <= MAX_PROCESSES:
        raise KsUsageError(
            f"--repetitions must be at least 1 and at most {MAX_PROCESSES} (one process each), not {args.repetitions}"
        )
    if config.training.executor == "ray":
        from gnn.ray_executor import import_ray

        import_ray()  # without Ray, a one-line error before anything is written
    if args.repetitions > 1 and config.training.executor != "local":
        raise KsUsageError("--repetitions runs each seed in a process of its own: use it with training.executor: local")
    out: Path = args.out or ROOT / "runs" / config.name
    folders = (
        [out] if args.repetitions == 1 else [out / f"seed{config.training.seed + k}" for k in range(args.repetitions)]
    )
    for folder in folders:
        if (folder / "checkpoint.pt").exists() and not args.resume:
            raise KsUsageError(f"{folder} already has a run; add --resume to continue it, or pick another --out")
    jobs = [
        (dataclasses.replace(config, training=dataclasses.replace(config.training, seed=config.training.seed + k)), f)
        for k, f in enumerate(folders)
    ]
    if not 1 <= args.threads <= MAX_PROCESSES:
        raise KsUsageError(f"--threads must be at least 1 and at most {MAX_PROCESSES}, not {args.threads}")
    if len(jobs) == 1:
        import torch

        torch.set_num_threads(args.threads)
        summary = [train_one(*jobs[0], show_progress=not args.quiet)]
    else:
        threads = max(1, min(args.threads, (os.cpu_count() or 1) // len(jobs)))
        with multiprocessing.get_context("spawn").Pool(len(jobs)) as pool:
            summary = pool.starmap(_train_in_worker, [(c, f, threads) for c, f in jobs])
    for folder, last in zip(folders, summary, strict=True):
        test = last.get("test", {})
        print(
            f"{folder}: epoch {last['epoch']}, loss {last['loss']:.4g}, test total cost {test.get('total_cost', float('nan')):g}"
            + (f", best-known reached on {test['reached_best_known']}" if "reached_best_known" in test else "")
        )
    return 0


def _train_in_worker(config: Any, folder: Path, threads: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(threads)
    return train_one(config, folder, show_progress=False)


def train_one(config: Any, folder: Path, show_progress: bool) -> dict[str, Any]:
    from torch.utils.tensorboard import SummaryWriter
    from tqdm import tqdm

    from gnn.training import Trainer

    folder.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=config.training.epochs, unit="epoch", file=sys.stderr, disable=not show_progress or None)

    def progress(what: str, done: int, total: int) -> None:
        bar.set_postfix_str(f"{what} {done + 1}/{total}")

    trainer = Trainer(config, folder, progress)
    if trainer.resume():
        bar.update(trainer.epoch)
    writer = SummaryWriter(log_dir=str(folder / "tensorboard"), purge_step=trainer.epoch + 1)

    def log(metrics: dict[str, Any]) -> None:
        step = metrics["epoch"]
        writer.add_scalar("train/loss", metrics["loss"], step)
        writer.add_scalar("train/samples", metrics["samples"], step)
        writer.add_scalar("train/evaluations", metrics["train_evaluations"], step)
        writer.add_scalar("seconds", metrics["seconds"], step)
        for name in ("train", "test"):
            m = metrics.get(name)
            if m is None:
                continue
            writer.add_scalar(f"{name}/total_cost", m["total_cost"], step)
            writer.add_scalar(f"{name}/mean_ratio_to_start", m["mean_ratio_to_start"], step)
            writer.add_scalar(f"{name}/evaluations", m["evaluations"], step)
            if "mean_ratio_to_best_known" in m:
                writer.add_scalar(f"{name}/mean_ratio_to_best_known", m["mean_ratio_to_best_known"], step)
                writer.add_scalar(f"{name}/reached_best_known", m["reached_best_known"], step)
            for i, c in enumerate(m["best_costs"]):
                writer.add_scalar(f"{name}/best_cost/{i}", c, step)
        writer.flush()
        bar.update(1)

    try:
        with ctrl_c_stops_searches():  # Ctrl-C stops the run, never cuts one search short
            history = trainer.train(log)
    finally:
        writer.close()
        bar.close()
    return history[-1]
