"""``train.py CONFIG.yaml``: train a value function (Algorithm 1), with checkpoints and TensorBoard."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from knossos.cli import ArgumentParser, internal_error
from knossos.errors import KsError, KsUsageError, one_line
from search.spec import ctrl_c_stops_searches

if TYPE_CHECKING:  # imported when a run starts: --help needs no torch
    from torch.utils.tensorboard import SummaryWriter
    from torch.utils.tensorboard.writer import FileWriter

    from training.config import TrainConfig
    from training.metrics import EpochMetrics

_REPO = Path(__file__).resolve().parent.parent
#: The scalars TensorBoard's HParams dashboard shows beside a run's hyperparameters.
HPARAM_METRICS = ("train/loss", "test/total_cost", "test/mean_ratio_to_start", "test/reached_best_known")
#: The most parallel runs (--repetitions) or threads per run: more is no machine's.
MAX_PROCESSES = 256


def build_parser(prog: str = "train.py") -> argparse.ArgumentParser:
    p = ArgumentParser(prog=prog, description=__doc__)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """train.py's arguments (also ``knossos train``'s)."""
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


def main(argv: Sequence[str] | None = None) -> int:
    return run_reporting_errors(build_parser().parse_args(argv), "train.py")


def run_reporting_errors(args: argparse.Namespace, prog: str) -> int:
    """:func:`run_command`, every error a one-line message under ``prog``'s name and an exit status."""
    try:
        return run_command(args)
    except KsError as err:
        print(err.render(prog), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; the last finished epoch is checkpointed (resume with --resume)", file=sys.stderr)
        return 130
    except OSError as err:  # the run folder cannot be written (a full disk, no permission): no bug of ours
        where = f"{err.filename}: " if err.filename else ""
        print(one_line(f"{prog}: error: {where}{err.strerror or err}"), file=sys.stderr)
        return 1
    except Exception as err:
        return internal_error(prog, err)


def run_command(args: argparse.Namespace) -> int:
    from training.config import MAX_SEED, load_config

    ray = [f"training.ray_address={json.dumps(args.ray_address)}"] if args.ray_address is not None else []
    labels = {item: f"--ray-address {args.ray_address}" for item in ray}
    config = load_config(args.config, [*args.overrides, *ray], labels)
    if not 1 <= args.repetitions <= MAX_PROCESSES:
        raise KsUsageError(
            f"--repetitions must be at least 1 and at most {MAX_PROCESSES} (one process each), not {args.repetitions}"
        )
    if config.training.seed + args.repetitions - 1 > MAX_SEED:
        raise KsUsageError(
            f"--repetitions {args.repetitions} from training.seed {config.training.seed} would need seeds "
            f"above {MAX_SEED}, the largest"
        )
    if config.training.executor == "ray":
        from training.ray_executor import check_reachable, import_ray

        import_ray()  # without Ray, a one-line error before anything is written
        if config.training.ray_address is not None:
            check_reachable(config.training.ray_address)  # as is an address that takes no connection
    if args.repetitions > 1 and config.training.executor != "local":
        raise KsUsageError("--repetitions runs each seed in a process of its own: use it with training.executor: local")
    out: Path = args.out or _REPO / "runs" / config.name
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
        test = last.test
        total = float("nan") if test is None else test.total_cost
        reached = None if test is None else test.reached_best_known
        print(
            f"{folder}: epoch {last.epoch}, loss {last.loss:.4g}, test total cost {total:g}"
            + (f", best-known reached on {reached}" if reached is not None else "")
        )
    return 0


def _train_in_worker(config: TrainConfig, folder: Path, threads: int) -> EpochMetrics:
    import torch

    torch.set_num_threads(threads)
    return train_one(config, folder, show_progress=False)


def train_one(config: TrainConfig, folder: Path, show_progress: bool) -> EpochMetrics:
    from tqdm import tqdm

    from training.trainer import Trainer

    def progress(what: str, done: int, total: int) -> None:
        bar.set_postfix_str(f"{what} {done + 1}/{total}")

    # reads the data and the rules first: a config refused here leaves no run folder behind
    trainer = Trainer(config, folder, progress)
    resumed = trainer.resume()
    folder.mkdir(parents=True, exist_ok=True)
    bar = tqdm(total=config.training.epochs, unit="epoch", file=sys.stderr, disable=not show_progress or None)
    if resumed:
        bar.update(trainer.epoch)
    with _quiet_writer_threads():
        board = TensorBoardLog(folder / "tensorboard", purge_step=trainer.epoch + 1)
        if trainer.epoch == 0:  # a resumed run has them in its first events file
            board.write(lambda writer: write_hyperparameters(writer, config))

        def log(metrics: EpochMetrics) -> None:
            board.write(lambda writer: log_metrics(writer, metrics))
            bar.update(1)

        try:
            with ctrl_c_stops_searches():  # Ctrl-C stops the run, never cuts one search short
                history = trainer.train(log)
            # the HParams session ended well
            board.write(lambda writer: events_of(writer).add_summary(hparams_summaries(config)[2]))
        finally:
            board.close()
            bar.close()
    return history[-1]


def log_metrics(writer: SummaryWriter, metrics: EpochMetrics) -> None:
    """An epoch's numbers in the TensorBoard log, flushed."""
    step = metrics.epoch
    writer.add_scalar("train/loss", metrics.loss, step)
    writer.add_scalar("train/samples", metrics.samples, step)
    writer.add_scalar("train/evaluations", metrics.train_evaluations, step)
    writer.add_scalar("seconds", metrics.seconds, step)
    for name, m in (("train", metrics.train), ("test", metrics.test)):
        if m is None:
            continue
        writer.add_scalar(f"{name}/total_cost", m.total_cost, step)
        writer.add_scalar(f"{name}/mean_ratio_to_start", m.mean_ratio_to_start, step)
        writer.add_scalar(f"{name}/evaluations", m.evaluations, step)
        if m.mean_ratio_to_best_known is not None:
            writer.add_scalar(f"{name}/mean_ratio_to_best_known", m.mean_ratio_to_best_known, step)
            writer.add_scalar(f"{name}/reached_best_known", m.reached_best_known, step)
        for i, c in enumerate(m.best_costs):
            writer.add_scalar(f"{name}/best_cost/{i}", c, step)
    writer.flush()


class TensorBoardLog:
    """A run's TensorBoard writer, whose failures do not stop the run: the log is for watching it,
    and the checkpoints and metrics.jsonl hold its results.  The first write that fails (a full
    disk, a folder without write permission) is a one-line warning, and nothing more is logged."""

    def __init__(self, folder: Path, purge_step: int) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.folder = folder
        self.writer: SummaryWriter | None = None
        try:
            self.writer = SummaryWriter(log_dir=str(folder), purge_step=purge_step)
        except OSError as err:
            self._failed(err)

    def write(self, action: Callable[[SummaryWriter], object]) -> None:
        """``action(writer)``, unless writing has failed before; a failure (OSError) is warned of."""
        if self.writer is None:
            return
        try:
            action(self.writer)
        except OSError as err:
            self._failed(err)

    def close(self) -> None:
        self.write(lambda writer: writer.close())
        self.writer = None

    def _failed(self, err: OSError) -> None:
        print(
            one_line(
                f"train.py: warning: {self.folder}: cannot write the TensorBoard log ({err.strerror or err}); "
                "training goes on without it"
            ),
            file=sys.stderr,
        )
        writer, self.writer = self.writer, None
        if writer is not None:
            with contextlib.suppress(OSError):  # it fails again as it flushes what it holds
                writer.close()


@contextlib.contextmanager
def _quiet_writer_threads() -> Iterator[None]:
    """TensorBoard writes from a thread of its own, whose failure Python prints as a traceback; the
    writer raises the same error again at its next write or flush (in :class:`TensorBoardLog`,
    which says it in one line), so the thread's own report of an OSError is dropped."""
    previous = threading.excepthook

    def hook(args: threading.ExceptHookArgs) -> None:
        if isinstance(args.exc_value, OSError) and type(args.thread).__module__.startswith("tensorboard."):
            return
        previous(args)

    threading.excepthook = hook
    try:
        yield
    finally:
        threading.excepthook = previous


def hyperparameters(config: TrainConfig) -> dict[str, bool | int | float | str]:
    """The config's keys, dotted (``search.depth``), as TensorBoard takes hyperparameters: numbers,
    booleans and text (a list as its text); keys without a value (None) are left out."""
    from training.config import flatten_keys

    out: dict[str, bool | int | float | str] = {}
    for key, value in flatten_keys(config.to_dict()).items():
        if value is not None:
            out[key] = value if isinstance(value, bool | int | float | str) else str(value)
    return out


def hparams_summaries(config: TrainConfig) -> tuple[Any, Any, Any]:
    """TensorBoard's HParams summaries of a run of ``config``: the experiment (which hyperparameters
    and metrics), the session's start (the values) and its end (finished)."""
    from torch.utils.tensorboard.summary import hparams

    return hparams(hyperparameters(config), dict.fromkeys(HPARAM_METRICS, 0.0))  # type: ignore[no-untyped-call,no-any-return]


def write_hyperparameters(writer: SummaryWriter, config: TrainConfig) -> None:
    """The run's config in its TensorBoard log, once: for the HParams dashboard (in the run's own
    events file: ``SummaryWriter.add_hparams`` would start another run in a subfolder) and as a
    table of the Text dashboard."""
    experiment, start, _ = hparams_summaries(config)
    events = events_of(writer)
    events.add_summary(experiment)
    events.add_summary(start)
    rows = "".join(f"\n|{key}|{value}|" for key, value in hyperparameters(config).items())
    writer.add_text("hyperparameters", "|key|value|\n|-|-|" + rows)


def events_of(writer: SummaryWriter) -> FileWriter:
    """The writer of ``writer``'s events file (made with it; torch types the attribute as None)."""
    return cast("FileWriter", writer.file_writer)
