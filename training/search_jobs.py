"""One training or evaluation search as a job that any process can run: what it needs (the job, the
run's plan, the value network's weights), and what it sends back.

The weights travel as one blob per version (:func:`pack_weights`), named by its digest, so that a
worker builds the network once per version (:class:`WorkerCache`) however many searches it runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from gnn.model_file import network_from
from gnn.networks import Network, value_function
from gnn.sample import Sample
from knossos.expr import Expr
from knossos.serialize import Wire, exprs_from_wire, exprs_to_wire
from search.plan import Plan, run
from search.spec import ctrl_c_stops_searches
from search.value import ValueFunction, ZeroValue
from training.config import TargetScheme
from training.samples import split_samples


@dataclass(frozen=True)
class SearchJob:
    """One search: its start and its plan (the run's, with the job's own search, budget and MCTS's
    seed, drawn by the trainer)."""

    expr: Expr
    plan: Plan
    #: The target scheme whose samples to send back (config ``training.targets``); None: none
    #: (an evaluation, which needs only the cost).
    targets: TargetScheme | None = None


@dataclass
class Outcome:
    """What a search sends back: all its samples, unsampled (the trainer draws from them)."""

    best_cost: float
    evaluations: int
    expanded: list[Sample] = field(default_factory=list)
    passed_over: list[Sample] = field(default_factory=list)

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled with the samples' expressions as one wire form: a search's states share most of
        their nodes, so this is several times smaller and faster than one per sample."""
        samples = self.expanded + self.passed_over
        wire, roots = exprs_to_wire([s.expr for s in samples])
        rows = [(s.steps_left, s.target, s.shorter) for s in samples]
        return (_outcome, (self.best_cost, self.evaluations, len(self.expanded), wire, roots, rows))


def _outcome(
    best_cost: float,
    evaluations: int,
    n_expanded: int,
    wire: Wire,
    roots: list[int],
    rows: list[tuple[int, float, tuple[float, ...]]],
) -> Outcome:
    samples = [Sample(e, *row) for e, row in zip(exprs_from_wire(wire, roots), rows, strict=True)]
    return Outcome(best_cost, evaluations, samples[:n_expanded], samples[n_expanded:])


def run_search(job: SearchJob, network: Network | None) -> Outcome:
    """Run ``job`` with ``network`` as the value function (None: the zero value function)."""
    s = job.plan.search
    value: ValueFunction = ZeroValue()
    if network is not None:  # one per search: a search does not change the network
        value = value_function(network, precision=s.precision, scale=s.value_scale)
    result = run(job.expr, job.plan, value)
    expanded, passed_over = split_samples(result, job.targets) if job.targets is not None else ([], [])
    return Outcome(result.best_cost, result.evaluations, expanded, passed_over)


def pack_weights(network: Network) -> tuple[str, bytes]:
    """The network's settings and weights as bytes, and their digest (the version's name)."""
    buffer = io.BytesIO()
    state = {"model_config": dataclasses.asdict(network.config), "model": network.state_dict()}
    torch.save(state, buffer)
    blob = buffer.getvalue()
    return hashlib.sha256(blob).hexdigest(), blob


def unpack_weights(blob: bytes) -> Network:
    state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
    return network_from(state, "the trainer's weights")


class WorkerCache:
    """A worker's network of the latest weights it was sent."""

    def __init__(self) -> None:
        self.digest: str | None = None
        self.network: Network | None = None

    def run(self, job: SearchJob, threads: int, digest: str | None, load: Callable[[], bytes]) -> Outcome:
        """``job`` on ``threads`` torch threads (the trainer's: the network's arithmetic is
        then the same bits) with the weights named ``digest`` (None: unguided), read by ``load`` (from
        where they were left for the workers: a file, Ray's object store) only when this worker does
        not have them yet."""
        torch.set_num_threads(threads)
        if digest is not None and digest != self.digest:
            self.network, self.digest = None, None  # the old one is freed before the new one is built
            self.network, self.digest = unpack_weights(load()), digest
        with ctrl_c_stops_searches():  # never a search cut short: its targets would change silently
            return run_search(job, self.network if digest is not None else None)
