"""Real layers' compiled gradients against PyTorch (benchmarks/bench_layers.py's rows, issue 45 item 4):
the tables of docs/layers.md and the README."""

from __future__ import annotations

import math
import statistics
from typing import Any

from experiments.figures import Figure
from experiments.tables import results_rows

#: The issue's targets: each optimised gradient at most this many times eager's time, ...
MOST_VS_EAGER = 2.0
#: ... the median at most this, ...
MEDIAN_VS_EAGER = 1.0
#: ... and at most these seconds of optimisation and of compilation per layer; gradients within ERROR.
MOST_OPTIMISE_S, MOST_COMPILE_S, ERROR = 30.0, 5.0, 1e-8

NO_RESULTS = "_No results yet: run benchmarks/bench_layers.py._\n"


def _rows() -> list[dict[str, Any]]:
    return [r for r in results_rows("layers") if r["size"] == "realistic"]


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _x(ratio: float) -> str:
    return f"{ratio:.3g}x"


def _shapes(row: dict[str, Any]) -> str:
    return ", ".join("x".join(map(str, s)) or "scalar" for s in row["shapes"])


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The geometric means and medians, and the layers that miss each of the issue's targets."""
    opt = [r["optimised_s"] / r["eager_s"] for r in rows]
    written = [r["written_s"] / r["eager_s"] for r in rows]
    lines = [
        f"{len(rows)} layers (revision {', '.join(dict.fromkeys(r['revision'][:7] for r in rows))}, "
        f"{rows[0]['date'][:10]}, optimize.py "
        f"--seconds {rows[0]['seconds_limit']:g}). Compiled gradient / PyTorch eager, optimised: geometric mean "
        f"**{_x(_geomean(opt))}**, median **{_x(statistics.median(opt))}**; as written: geometric mean "
        f"{_x(_geomean(written))}, median {_x(statistics.median(written))}."
    ]
    compiled = [r for r in rows if "torch_compile_s" in r]
    if compiled:
        tc = [r["torch_compile_s"] / r["eager_s"] for r in compiled]
        vs = [r["optimised_s"] / r["torch_compile_s"] for r in compiled]
        lines[0] += (
            f" torch.compile / eager: geometric mean {_x(_geomean(tc))}, median {_x(statistics.median(tc))}; "
            f"optimised / torch.compile: geometric mean **{_x(_geomean(vs))}**, median {_x(statistics.median(vs))}."
        )
    misses = {
        f"over {MOST_VS_EAGER:g}x eager": [r for r in rows if r["optimised_s"] / r["eager_s"] > MOST_VS_EAGER],
        f"over {MOST_OPTIMISE_S:g} s of optimisation": [r for r in rows if r["optimise_s"] > MOST_OPTIMISE_S],
        f"over {MOST_COMPILE_S:g} s of compilation": [r for r in rows if r["compile_optimised_s"] > MOST_COMPILE_S],
        f"gradient over {ERROR:g} from torch.autograd": [
            r for r in rows if max(r["error_written"], r["error_optimised"]) > ERROR
        ],
    }
    lines += ["", "Targets missed:"]
    for what, missed in misses.items():
        names = ", ".join(r["layer"] for r in missed) if missed else "none"
        lines.append(f"- {what}: {len(missed)} of {len(rows)} ({names})")
    lines.append(f"- median at most {MEDIAN_VS_EAGER:g}x eager: {'met' if statistics.median(opt) <= 1 else 'missed'}")
    if compiled:
        met = _geomean([r["optimised_s"] for r in compiled]) <= _geomean([r["torch_compile_s"] for r in compiled])
        lines.append(f"- geometric mean no slower than torch.compile: {'met' if met else 'missed'}")
    return lines


def layers_table() -> str:
    """Per layer: times against eager and torch.compile, optimisation and compile seconds, end to end
    against torch.compile's first call, agreement with torch.autograd; then the summary."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)

    rows = _rows()
    if not rows:
        return NO_RESULTS
    lines = [
        "| layer | code (repository: path) | argument shapes | PyTorch eager | compiled gradient as written "
        "| optimised | torch.compile | optimisation | g++ (as written / optimised) | end to end / "
        "torch.compile's first call | largest relative error |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        tc = (
            f"{format_seconds(r['torch_compile_s'])} ({_x(r['torch_compile_s'] / r['eager_s'])})"
            if "torch_compile_s" in r
            else "-"
        )
        first = f"{r['torch_compile_first_s']:.1f} s" if "torch_compile_first_s" in r else "-"
        cells = [
            r["layer"],
            f"{r['repo']}: `{r['path']}` `{r['symbol']}`",
            _shapes(r),
            format_seconds(r["eager_s"]),
            f"{format_seconds(r['written_s'])} ({_x(r['written_s'] / r['eager_s'])})",
            f"{format_seconds(r['optimised_s'])} (**{_x(r['optimised_s'] / r['eager_s'])}**)",
            tc,
            f"{r['optimise_s']:.1f} s",
            f"{r['compile_written_s']:.1f} s / {r['compile_optimised_s']:.1f} s",
            f"{r['end_to_end_s']:.1f} s / {first}",
            f"{max(r['error_written'], r['error_optimised']):.1e}",
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join([*summary(rows), "", *lines]) + "\n"


def layers_brief_table() -> str:
    """The README's view: one row, the optimised gradients and torch.compile against eager over every layer."""
    rows = _rows()
    if not rows:
        return NO_RESULTS
    opt = [r["optimised_s"] / r["eager_s"] for r in rows]
    tcs = [r["torch_compile_s"] / r["eager_s"] for r in rows if "torch_compile_s" in r]
    tc_mean = f"{_x(_geomean(tcs))} ({_x(statistics.median(tcs))})" if tcs else "-"
    return (
        "\n".join(
            [
                "| layers | compiled gradient / eager: geometric mean (median), range | torch.compile / eager |",
                "|---|---|---|",
                f"| {len(rows)} | {_x(_geomean(opt))} ({_x(statistics.median(opt))}), {_x(min(opt))}-{_x(max(opt))} | {tc_mean} |",
            ]
        )
        + "\n"
    )


FIGURE = Figure(
    "layers",
    "Real layers' compiled gradients against PyTorch eager and torch.compile (benchmarks/bench_layers.py)",
    {"layers": layers_table, "layers_brief": layers_brief_table},
)
