"""``python -m gnn.report RUN [RUN ...]``: a per-epoch table of training runs (from their metrics.jsonl).

For each epoch: the training loss, and on the test set the total best cost, how many expressions
reached the reference's best-known cost, and the mean ratio to the start cost.  Several runs (e.g.
the seeds of ``--repetitions``) are shown side by side.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gnn.metrics import read_metrics
from knossos.errors import KsError, KsUsageError


def table(runs: list[Path]) -> str:
    histories = [read_metrics(r) for r in runs]
    epochs = max((len(h) for h in histories), default=0)
    head = "epoch" + "".join(f" | {r.name[:22]:>22} loss  total reached ratio" for r in runs)
    out = [head]
    for i in range(epochs):
        row = f"{i + 1:>5}"
        for h in histories:
            if i >= len(h):
                row += " |" + " " * 47
                continue
            m = h[i]
            t = m.test
            if t is None:
                row += f" | {'':>22} {m.loss:.4f} {'-':>6} {'-':>7} {'-':>5}"
            else:
                reached = "-" if t.reached_best_known is None else t.reached_best_known
                row += f" | {'':>22} {m.loss:.4f} {t.total_cost:>6.1f} {reached!s:>7} {t.mean_ratio_to_start:.3f}"
        out.append(row)
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    try:
        if not args:
            raise KsUsageError("usage: python -m gnn.report RUN [RUN ...]")
        print(table([Path(a) for a in args]))
    except KsError as err:
        print(err.render("gnn.report"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
