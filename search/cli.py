"""``optimize.py``: search for a cheaper rewrite of a def or a bare expression."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from knossos.cli import _ArgumentParser, find_def, load_source
from knossos.errors import KsError, KsUsageError
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_def, format_expr
from knossos.program import Def, Program
from rules.sets import RULE_SETS, get_rule_set
from search.models import load_value_function
from search.registry import SEARCHES, get_search
from search.result import SearchResult
from search.spec import SearchSpec


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    p = _ArgumentParser(prog="optimize.py", description=__doc__)
    p.add_argument("file", nargs="?", metavar="FILE", help="a Knossos program (.ks/.kso)")
    p.add_argument("--def", dest="def_name", metavar="NAME", help="the def to optimise (needed if FILE has several)")
    p.add_argument("--expr", metavar="'(...)'", help="a bare expression instead of FILE (free variables are Floats)")
    p.add_argument("--rules", default="ml_rules", metavar="SET", help=f"rule set ({', '.join(RULE_SETS)})")
    p.add_argument("--search", default="astar", metavar="NAME", help=f"search ({', '.join(SEARCHES)})")
    p.add_argument("--depth", type=_positive, default=10, metavar="H", help="most rewrites in a sequence (10)")
    p.add_argument(
        "--budget",
        type=_positive,
        default=5000,
        metavar="N",
        help="value-function evaluations (5000); exhaustive: most distinct expressions",
    )
    p.add_argument("--seed", type=int, default=0, help="for random, mcts (0)")
    p.add_argument("--model", default="none", metavar="CKPT", help="value function: none, or a train.py checkpoint")
    p.add_argument("--seconds", type=float, default=None, metavar="S", help="time limit (exhaustive)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with fewer_gc_pauses():
            return run(args)
    except KsError as err:
        print(err.render("optimize.py"), file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0


def run(args: argparse.Namespace) -> int:
    search = get_search(args.search)
    rules = get_rule_set(args.rules)
    value = load_value_function(args.model)
    if args.expr is not None and args.def_name:
        raise KsUsageError("give either FILE --def NAME or --expr, not both")
    src = load_source(args)
    d: Def | None = None
    if src.expr is not None:
        start = src.expr
    else:
        assert src.program is not None
        d = _pick_def(src.program, args.def_name, src.label)
        start = d.body
    bar = _progress_bar(args.budget, disabled=args.quiet)
    spec = SearchSpec(
        rules=rules,
        depth=args.depth,
        budget=args.budget,
        value=value,
        seed=args.seed,
        seconds=args.seconds,
        progress=bar.update if bar is not None else None,
    )
    try:
        result = search(start, spec)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        print(json.dumps(result.to_json()))
    else:
        _print_human(result, d)
    return 0


def _pick_def(program: Program, name: str | None, label: str) -> Def:
    if name:
        return find_def(program, name, label)
    targets = program.targets
    if len(targets) == 1:
        return targets[0]
    names = ", ".join(t.name for t in targets[:8]) + (" ..." if len(targets) > 8 else "")
    raise KsUsageError(f"the file has {len(targets)} defs to optimise; pick one with --def NAME ({names})", None, label)


class _Bar:
    def __init__(self, budget: int) -> None:
        from tqdm import tqdm

        self._bar = tqdm(total=budget, unit="eval", file=sys.stderr, leave=False, mininterval=0.5, disable=None)
        self._done = 0

    def update(self, evaluations: int, best_cost: float) -> None:
        step = min(evaluations, self._bar.total) - self._done
        if step > 0:
            self._bar.update(step)
            self._done += step
        self._bar.set_postfix(best=f"{best_cost:g}", refresh=False)

    def close(self) -> None:
        self._bar.close()


def _progress_bar(budget: int, disabled: bool) -> _Bar | None:
    return None if disabled else _Bar(budget)


def _print_human(result: SearchResult, d: Def | None) -> None:
    drop = result.start_cost - result.best_cost
    print(
        f"cost {result.start_cost:g} -> {result.best_cost:g} (-{drop:g}) in {len(result.steps)} steps; "
        f"{result.evaluations} evaluations, {result.expanded} expanded, {result.seconds:.2f} s"
    )
    for note in result.notes:
        print(f"note: {note}")
    if result.interrupted:
        print("note: interrupted; this is the best found so far")
    for i, s in enumerate(result.steps, 1):
        print(f"  {i:>3}. {s.node:>5}:{s.rule:<24} cost {s.cost:g}")
    if d is not None:
        print(format_def(Def(d.name, d.ret_type, d.params, result.best, d.ret_sizes)))
    else:
        print(format_expr(result.best))
