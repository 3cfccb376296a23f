"""Learning-curve experiments (the paper's Figures 5 and 6): test cost against training epoch.

An experiment trains one or more *agents* (a train.py config with some overrides: the GGNN, the
NoGNN ablation, ...) for several seeds with ``training.keep_weights``, and records the total best
cost the test search reaches on the test set after every epoch, at one or more evaluation budgets:
the first budget comes from train.py's own per-epoch test evaluation, the others from evaluating
the kept weights afterwards (every ``eval_every`` epochs and the last).  Baselines that do not
learn (greedy best-first, random search, A* with the zero value function) are run once per budget
(per seed where they are random), and reference costs (the start cost, the best-known cost, the
ksc-style baseline simplifier's) are recorded as lines.

Rows of the results file (``kind`` is agent, baseline or reference):
  {"kind": "agent", "agent": "ggnn", "seed": 0, "epoch": 3, "budget": 300, "costs": [...], "total": ...}
  {"kind": "baseline", "agent": "random", "seed": 1, "epoch": null, "budget": 300, ...}
  {"kind": "reference", "agent": "initial", "seed": null, "epoch": null, "budget": null, ...}
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.common import RUNS, metrics_so_far, run_train
from ksbench.results import QUICK, RESULTS, ROOT, ResultsFile

KEY = ("kind", "agent", "seed", "epoch", "budget")


@dataclass(frozen=True)
class Agent:
    name: str
    label: str
    #: train.py --set overrides that make this agent (on top of the experiment's).
    overrides: tuple[str, ...] = ()
    #: The training run's folder name (agents that differ only in the test search share one run).
    run: str | None = None
    #: Test with this search (from the kept weights) instead of the config's test algorithm.
    test_search: str | None = None

    @property
    def run_name(self) -> str:
        return self.run or self.name


@dataclass(frozen=True)
class Baseline:
    name: str
    label: str
    #: A search of search.registry, with the zero value function.
    search: str
    #: Whether it is random (then it runs once per seed).
    seeded: bool = False
    #: Whether it prunes commutations that enable nothing (search/symmetry.py).
    prune_commutes: bool = False
    #: Whether it prunes uphill inlines that open nothing (search/idle_inlines.py).
    prune_inlines: bool = False
    #: Its depth (None: the config's).
    depth: int | None = None


@dataclass(frozen=True)
class CurveExperiment:
    figure: str
    title: str
    config: str
    agents: tuple[Agent, ...]
    baselines: tuple[Baseline, ...]
    #: Test budgets (evaluations per search); the first is evaluated every epoch by train.py.
    budgets: tuple[int, ...]
    repetitions: int
    #: Overrides for every training run (on top of the config).
    overrides: tuple[str, ...] = ()
    #: Evaluate the budgets after the first every this many epochs (and the last).
    eval_every: int = 5
    #: Record the ksc-style baseline simplifier's cost (programs).
    ksc_baseline: bool = False
    #: Settings of --quick: a tiny version of everything that runs in well under a minute.
    quick_overrides: tuple[str, ...] = ()
    quick_budgets: tuple[int, ...] = (20, 40)
    #: What was reduced to fit this machine, for the README and the plot's caption.
    reduced: str = ""
    #: Train in another figure's runs folder (the same runs serve both figures).
    runs_of: str | None = None
    #: Plot the costs on a log scale.
    log_scale: bool = False

    def quick(self) -> CurveExperiment:
        return dataclasses.replace(
            self,
            budgets=self.quick_budgets,
            repetitions=1,
            eval_every=1,
            overrides=(*self.overrides, *self.quick_overrides),
            reduced="--quick: a tiny version to check that the pipeline runs, not a result",
        )


def results_path(exp: CurveExperiment, quick: bool, out: Path | None = None) -> Path:
    return (out or (QUICK if quick else RESULTS) / exp.figure) / "results.jsonl"


def runs_folder(exp: CurveExperiment, quick: bool, out: Path | None = None) -> Path:
    if out is not None:
        return out / "runs"
    figure = exp.runs_of or exp.figure
    return (QUICK / figure / "runs") if quick else (RUNS / figure)


# -- running -----------------------------------------------------------------------------------------
def run(
    exp: CurveExperiment, quick: bool, quiet: bool, out: Path | None = None, train: bool = True, jobs: int = 1
) -> Path:
    """Measure everything the results file does not have yet; returns the results file.

    ``out``: a folder for the results file and the training runs instead of the usual places.
    ``train=False``: record what the training runs have done so far without training further
    (for committing partial curves while a run goes on elsewhere).  ``jobs``: training runs to
    carry out at once (each is a train.py process with one thread).
    """
    from ksdata.loader import load_targets
    from training.config import load_config

    if quick:
        exp = exp.quick()
    results = ResultsFile(results_path(exp, quick, out), KEY)
    config = load_config(ROOT / exp.config, list(exp.overrides))
    targets = load_targets(config.data.test, "data.test")
    started = time.perf_counter()
    _references(exp, results, targets, config.search.cost)
    for baseline in exp.baselines:
        for budget in exp.budgets:
            for seed in range(exp.repetitions if baseline.seeded else 1):
                if not results.has(kind="baseline", agent=baseline.name, seed=seed, epoch=None, budget=budget):
                    costs = _search_all(
                        config,
                        targets,
                        baseline.search,
                        budget,
                        None,
                        seed,
                        (baseline.prune_commutes, baseline.prune_inlines),
                        baseline.depth,
                    )
                    results.add(_row("baseline", baseline.name, seed, None, budget, costs))
                    _say(quiet, f"{exp.figure}: {baseline.name} (budget {budget}, seed {seed}): {sum(costs):g}")
    runs = runs_folder(exp, quick, out)
    in_parallel = train and jobs > 1
    if in_parallel:
        _train_in_parallel(exp, runs, quiet, jobs)
    for agent in exp.agents:
        for seed in range(exp.repetitions):  # after training in parallel, only what the runs hold
            _train_agent(exp, config, targets, results, agent, seed, runs, quiet, train and not in_parallel)
    _say(quiet, f"{exp.figure}: done in {time.perf_counter() - started:.0f} s; results in {results.path}")
    return results.path


def _references(exp: CurveExperiment, results: ResultsFile, targets: Sequence[Any], cost_model: str) -> None:
    """The reference lines, in the config's cost model (best-known costs are the reference model's)."""
    from knossos.cost_models import get_cost_model

    cost = get_cost_model(cost_model)
    lines = {"initial": [cost(t.expr) for t in targets]}
    if all(t.best_known is not None for t in targets) and cost_model == "reference":
        lines["best_known"] = [t.best_known for t in targets]
    if exp.ksc_baseline:
        from rules.baseline import simplify

        lines["ksc_baseline"] = [cost(simplify(t.expr)) for t in targets]
    for name, costs in lines.items():
        if not results.has(kind="reference", agent=name, seed=None, epoch=None, budget=None):
            results.add(_row("reference", name, None, None, None, costs))


def _train_agent(
    exp: CurveExperiment,
    config: Any,
    targets: Sequence[Any],
    results: ResultsFile,
    agent: Agent,
    seed: int,
    runs: Path,
    quiet: bool,
    train: bool,
) -> None:
    from training.trainer import weights_path

    first = exp.budgets[0]
    out = runs / f"{agent.run_name}_seed{seed}"
    overrides = _train_overrides(exp, agent, seed)
    if train:
        _say(quiet, f"{exp.figure}: training {agent.run_name}, seed {seed} in {out}")
        metrics = run_train(exp.config, out, overrides, quiet=quiet)
    else:
        metrics = metrics_so_far(out)
        if not metrics:
            return
    last = metrics[-1].epoch
    from_weights = list(exp.budgets)
    if agent.test_search is None:  # train.py's own test evaluation gives the first budget, every epoch
        from_weights.remove(first)
        for m in metrics:
            if m.test is not None and not results.has(
                kind="agent", agent=agent.name, seed=seed, epoch=m.epoch, budget=first
            ):
                results.add(_row("agent", agent.name, seed, m.epoch, first, list(m.test.best_costs)))
    from training.config import load_config

    trained = load_config(ROOT / exp.config, overrides)
    search = agent.test_search or trained.search.test_algorithm
    for budget in from_weights:
        for epoch in range(1, last + 1):
            if (epoch % exp.eval_every and epoch != last) or results.has(
                kind="agent", agent=agent.name, seed=seed, epoch=epoch, budget=budget
            ):
                continue
            pruning = (trained.search.prune_commutes, trained.search.prune_inlines)
            costs = _search_all(trained, targets, search, budget, weights_path(out, epoch), seed, pruning)
            results.add(_row("agent", agent.name, seed, epoch, budget, costs))
            _say(quiet, f"{exp.figure}: {agent.name} seed {seed} epoch {epoch} at budget {budget}: {sum(costs):g}")


def _train_overrides(exp: CurveExperiment, agent: Agent, seed: int) -> list[str]:
    """train.py --set overrides of one agent's run for one seed."""
    return [
        *exp.overrides,
        *agent.overrides,
        f"training.seed={seed}",
        "training.keep_weights=true",
        f"search.test_budget={exp.budgets[0]}",
    ]


def _train_in_parallel(exp: CurveExperiment, runs: Path, quiet: bool, jobs: int) -> None:
    """Carry every training run of ``exp`` to its last epoch, ``jobs`` train.py processes at once
    (agents that share a run, as fig9's, train it once)."""
    from concurrent.futures import ThreadPoolExecutor

    todo: dict[Path, list[str]] = {}
    for agent in exp.agents:
        for seed in range(exp.repetitions):
            todo.setdefault(runs / f"{agent.run_name}_seed{seed}", _train_overrides(exp, agent, seed))
    _say(quiet, f"{exp.figure}: training {len(todo)} runs, {jobs} at a time")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        done = [pool.submit(run_train, exp.config, out, overrides, True) for out, overrides in todo.items()]
        for future in done:
            future.result()  # a failed run ends the experiment with train.py's one-line error


def _search_all(
    config: Any,
    targets: Sequence[Any],
    search: str,
    budget: int,
    weights: Path | None,
    seed: int,
    pruning: tuple[bool, bool] = (False, False),
    depth: int | None = None,
) -> list[float]:
    """The best cost ``search`` reaches on each target (zero value function unless ``weights``), at
    the config's depth unless ``depth``, in the config's cost model; ``pruning``: whether it prunes
    commutations and idle inlines."""
    from app.models import load_value_function
    from knossos.perf import fewer_gc_pauses
    from search.plan import run

    value = load_value_function(str(weights) if weights else "none", config.search.precision)
    plan = config.plan.overridden(
        algorithm=search, depth=depth, budget=budget, seed=seed, prune_commutes=pruning[0], prune_inlines=pruning[1]
    )
    with fewer_gc_pauses():
        return [float(run(t.expr, plan, value).best_cost) for t in targets]


def _row(
    kind: str, agent: str, seed: int | None, epoch: int | None, budget: int | None, costs: list[Any]
) -> dict[str, Any]:
    costs = [float(c) for c in costs]
    return {
        "kind": kind,
        "agent": agent,
        "seed": seed,
        "epoch": epoch,
        "budget": budget,
        "costs": costs,
        "total": round(sum(costs), 6),
    }


def _say(quiet: bool, message: str) -> None:
    if not quiet:
        print(message, file=sys.stderr, flush=True)


def unique_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per key, the last written (two processes may have recorded the same measurement)."""
    return list({tuple(r.get(f) for f in KEY): r for r in rows}.values())


# -- command lines -------------------------------------------------------------------------------------
def run_main(exp: CurveExperiment, argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=f"Run {exp.figure}: {exp.title}")
    ap.add_argument("--quick", action="store_true", help="a tiny version (CI), results under runs/quick/")
    ap.add_argument("--quiet", action="store_true", help="no progress output")
    ap.add_argument("--repetitions", type=int, default=exp.repetitions, help=f"seeds ({exp.repetitions})")
    ap.add_argument("--out", type=Path, help="folder for the results and training runs (default: the usual places)")
    ap.add_argument(
        "--no-train",
        action="store_true",
        help="record what the training runs have done so far, without training further",
    )
    ap.add_argument("--jobs", type=int, default=1, help="training runs at once, one thread each (1)")
    args = ap.parse_args(argv)
    if args.repetitions < 1:
        ap.error("--repetitions must be at least 1")
    if args.jobs < 1:
        ap.error("--jobs must be at least 1")
    from knossos.errors import KsError

    try:
        run(
            dataclasses.replace(exp, repetitions=args.repetitions),
            args.quick,
            args.quiet,
            args.out,
            not args.no_train,
            args.jobs,
        )
    except KsError as err:
        raise SystemExit(str(err)) from None
    except KeyboardInterrupt:
        raise SystemExit(f"{exp.figure}: interrupted; rerun to carry on (results so far are kept)") from None
