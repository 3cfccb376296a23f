"""``training.executor: ray``: each search a Ray task, on this machine (Ray started by the first
epoch, stopped when training ends) or on the cluster at ``training.ray_address`` (``train.py
--ray-address``; or RAY_ADDRESS).  Ray is an optional extra: ``pip install -e '.[ray]'``.

Each version of the weights is put in Ray's object store once; a task gets a reference to it and
reads it only when its worker process does not have that version yet, so a worker builds the
network once per epoch however many searches it runs.  A cluster's nodes need this project
installed (the same version), as on the machine that trains.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from gnn.networks import Network
from knossos.errors import KsUsageError
from training.search_jobs import Outcome, SearchJob, WorkerCache, pack_weights

#: Where to get Ray, for the one-line error without it.
INSTALL = "pip install -e '.[ray]'"


def import_ray() -> Any:
    """The ``ray`` module; a one-line error naming the extra to install where it is missing."""
    try:
        import ray
    except ImportError:
        raise KsUsageError(f"training.executor: ray needs Ray, which is not installed ({INSTALL})") from None
    return ray


class RayExecutor:
    def __init__(self, threads: int = 1, address: str | None = None) -> None:
        self.threads = threads
        self.address = address
        self._ray = import_ray()
        self._started = False  # whether this executor started Ray (and so stops it)
        self._task: Any = None
        self._shared: tuple[str, Any] | None = None  # the digest of the weights last put, and its reference

    def map(self, network: Network | None, jobs: Sequence[SearchJob]) -> Iterator[Outcome]:
        if not jobs:
            return
        task = self._start()
        digest, ref = self._share(network) if network is not None else (None, None)
        # the reference goes inside a list, so that Ray does not fetch the weights for every task
        refs = [task.remote(job, self.threads, digest, [ref]) for job in jobs]
        try:
            for r in refs:
                yield self._ray.get(r)
        except BaseException:  # stopped early (an error, Ctrl-C): the searches not collected are not needed
            for r in refs:
                self._ray.cancel(r)
            raise

    def close(self) -> None:
        self._shared, self._task = None, None
        if self._started:
            self._ray.shutdown()
            self._started = False

    def _start(self) -> Any:
        ray = self._ray
        if self._task is None and self.address is not None:
            check_reachable(self.address)
        if not ray.is_initialized():
            here = self.address is None and "RAY_ADDRESS" not in os.environ  # a new Ray on this machine
            # whose workers import this code, even where it is not installed (python train.py in a checkout)
            runtime_env = {"env_vars": {"PYTHONPATH": _pythonpath()}} if here else None
            try:
                ray.init(address=self.address, runtime_env=runtime_env, logging_level=logging.WARNING)
            except Exception as err:  # Ray raises many kinds (ConnectionError, ValueError, RuntimeError, ...)
                where = f"at {self.address}" if self.address else "on this machine"
                first = (str(err).strip().splitlines() or [type(err).__name__])[0]
                raise KsUsageError(f"training.executor: ray: cannot start or reach Ray {where}: {first}") from None
            self._started = True
        if self._task is None:
            self._task = ray.remote(num_cpus=1)(_search_task)
        return self._task

    def _share(self, network: Network) -> tuple[str, Any]:
        digest, blob = pack_weights(network)
        if self._shared is None or self._shared[0] != digest:
            self._shared = (digest, self._ray.put(blob))
        return self._shared


def check_reachable(address: str) -> None:
    """A one-line error at once where ``host:port`` (or ``ray://host:port``) takes no connection
    (Ray itself retries for minutes); other forms (``auto``) are left to Ray."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=10).close()
    except OSError as err:
        raise KsUsageError(f"training.ray_address: cannot reach Ray at {address}: {err.strerror or err}") from None


def _pythonpath() -> str:
    """PYTHONPATH with the folder of this code's packages first."""
    root = str(Path(__file__).resolve().parent.parent)
    return os.pathsep.join([root, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])


#: A Ray worker process's network.
_CACHE = WorkerCache()


def _search_task(job: SearchJob, threads: int, digest: str | None, weights: list[Any]) -> Outcome:
    def load() -> bytes:
        import ray

        blob: bytes = ray.get(weights[0])
        return blob

    return _CACHE.run(job, threads, digest, load)
