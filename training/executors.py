"""Where an epoch's searches run (config ``training.executor``): ``local``, one after another in
this process; ``processes``, a pool of processes on this machine; ``ray``, Ray tasks on this
machine or a cluster (training/ray_executor.py).

Every executor takes the value network and a list of :class:`~training.search_jobs.SearchJob` and
yields the outcomes in the jobs' order.  The others send the network's weights once per version
(once before an epoch's searches, once before its evaluation), never per search; the workers run
with the trainer's torch threads.  Whatever is random was drawn by the trainer before the searches
(MCTS's seeds) or is drawn by it after them in the jobs' order (which samples to fit), so the same
seed gives the same numbers under every executor.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Sequence
from multiprocessing.pool import Pool
from pathlib import Path
from typing import Protocol

import torch

from gnn.networks import Network
from training.config import EXECUTORS, TrainConfig
from training.search_jobs import Outcome, SearchJob, WorkerCache, pack_weights, run_search


class Executor(Protocol):
    def map(self, network: Network | None, jobs: Sequence[SearchJob]) -> Iterator[Outcome]:
        """The outcome of each job, in order, searched with ``network`` (None: the zero value function)."""
        ...

    def close(self) -> None:
        """Stop any workers (the next :meth:`map` starts them again)."""
        ...


def make_executor(config: TrainConfig) -> Executor:
    """The executor ``config.training.executor`` names; a one-line error where it cannot be had.
    Workers run with as many torch threads as this process (the network's arithmetic is then the
    same bits)."""
    threads = torch.get_num_threads()
    kind = config.training.executor
    if kind == "local":
        return LocalExecutor()
    if kind == "processes":
        return ProcessExecutor(threads, config.training.workers)
    if kind == "ray":
        from training.ray_executor import RayExecutor

        return RayExecutor(threads, config.training.ray_address)
    raise ValueError(f"unknown executor {kind!r} (known: {', '.join(EXECUTORS)})")


class LocalExecutor:
    """Each search in this process, with the trainer's own network, when its outcome is asked for."""

    def map(self, network: Network | None, jobs: Sequence[SearchJob]) -> Iterator[Outcome]:
        for job in jobs:
            yield run_search(job, network)

    def close(self) -> None:
        pass


class ProcessExecutor:
    """A pool of ``workers`` processes (0: one per CPU), started at the first :meth:`map` and kept
    until :meth:`close`.  Each version of the weights is written once to a file of a temporary
    folder, which each worker reads once; one search per task, so a long search holds up no other.

    The processes are spawned (started afresh, never forked from a process whose torch has run:
    its thread pools do not survive a fork) and ignore Ctrl-C, which stops the trainer, which stops them.
    """

    def __init__(self, threads: int = 1, workers: int = 0) -> None:
        self.threads = threads
        self.workers = workers or os.cpu_count() or 1
        self._pool: Pool | None = None
        self._folder: Path | None = None
        self._shared: tuple[str, Path] | None = None  # the digest of the weights last written, and where

    def map(self, network: Network | None, jobs: Sequence[SearchJob]) -> Iterator[Outcome]:
        if not jobs:
            return iter(())
        digest, path = self._share(network) if network is not None else (None, None)
        pool = self._start()
        return pool.imap(_search_in_process, [(job, self.threads, digest, path) for job in jobs])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool.join()
            self._pool = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder, self._shared = None, None

    def _start(self) -> Pool:
        if self._pool is None:
            self._pool = multiprocessing.get_context("spawn").Pool(self.workers, initializer=_ignore_ctrl_c)
        return self._pool

    def _share(self, network: Network) -> tuple[str, Path]:
        digest, blob = pack_weights(network)
        if self._shared is not None and self._shared[0] == digest:
            return self._shared
        if self._folder is None:
            self._folder = Path(tempfile.mkdtemp(prefix="knossos-weights-"))
        path = self._folder / f"{digest}.pt"
        path.write_bytes(blob)
        if self._shared is not None:
            self._shared[1].unlink(missing_ok=True)
        self._shared = (digest, path)
        return self._shared


#: A worker process's rule sets and network (one per process: built in the worker, never sent).
_CACHE = WorkerCache()


def _ignore_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _search_in_process(args: tuple[SearchJob, int, str | None, Path | None]) -> Outcome:
    job, threads, digest, path = args
    return _CACHE.run(job, threads, digest, lambda: path.read_bytes() if path is not None else b"")
