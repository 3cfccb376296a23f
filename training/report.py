"""``python -m training.report RUN [RUN ...]``: a per-epoch table of training runs (from their metrics.jsonl).

For each epoch: the training loss, and on the test set the total best cost, how many expressions
reached the reference's best-known cost, and the mean ratio to the start cost.  Several runs (e.g.
the seeds of ``--repetitions``) are shown side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

from knossos.errors import KsError, KsUsageError
from training.metrics import EpochMetrics, read_metrics

#: Under the table: what its columns mean.
LEGEND = (
    "loss: training loss of the fit; total: summed best cost over the test set; reached: test expressions "
    "at the reference's best-known cost, of all; cost/start: mean best cost over start cost (lower is better)"
)


def table(runs: list[Path]) -> str:
    histories = [read_metrics(r) for r in runs]
    epochs = max((len(h) for h in histories), default=0)
    cells = [[_cells(h[i]) if i < len(h) else None for h in histories] for i in range(epochs)]
    # each run's columns as wide as their widest cell, so that "reached" can say "5/8"
    widths = [
        [
            max([len(name), *(len(c[j]) for c in (row[k] for row in cells) if c is not None)])
            for j, name in enumerate(COLUMNS)
        ]
        for k in range(len(runs))
    ]
    head = "epoch" + "".join(
        f" | {r.name[:22]:>22} " + " ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, ws, strict=True))
        for r, ws in zip(runs, widths, strict=True)
    )
    out = [head]
    for i, row in enumerate(cells):
        line = f"{i + 1:>5}"
        for ws, c in zip(widths, row, strict=True):
            values = c if c is not None else ["" for _ in COLUMNS]
            line += f" | {'':>22} " + " ".join(f"{v:>{w}}" for v, w in zip(values, ws, strict=True))
        out.append(line)
    out.append(LEGEND)
    return "\n".join(out)


COLUMNS = ("loss", "total", "reached", "cost/start")


def _cells(m: EpochMetrics) -> list[str]:
    t = m.test
    if t is None:
        return [f"{m.loss:.4f}", "-", "-", "-"]
    reached = "-" if t.reached_best_known is None else f"{t.reached_best_known}/{len(t.best_costs)}"
    return [f"{m.loss:.4f}", f"{t.total_cost:.1f}", reached, f"{t.mean_ratio_to_start:.3f}"]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        if not args:
            raise KsUsageError("usage: python -m training.report RUN [RUN ...]")
        print(table([Path(a) for a in args]))
    except KsError as err:
        print(err.render("training.report"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
