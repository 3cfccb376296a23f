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
    """The realistic rows, the last one of each layer (a rerun of a failed layer appends its new row)."""
    rows = {(r["layer"], r["seconds_limit"]): r for r in results_rows("layers") if r["size"] == "realistic"}
    return list(rows.values())


def _ok(row: dict[str, Any]) -> bool:
    """Whether every step of the row's layer finished (rows from before the caps have no status)."""
    return bool(row.get("status", "ok") == "ok")


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _x(ratio: float) -> str:
    return f"{ratio:.3g}x"


def _flags(seconds: float | None) -> str:
    return "with no flags" if seconds is None else f"--seconds {seconds:g}"


def _shapes(row: dict[str, Any]) -> str:
    return ", ".join("x".join(map(str, s)) or "scalar" for s in row["shapes"])


def summary(rows: list[dict[str, Any]]) -> list[str]:
    """The geometric means and medians over the layers measured to the end, the layers that miss each
    of the issue's targets, and those that a step stopped (which step, and why)."""
    stopped = [r for r in rows if not _ok(r)]
    rows = [r for r in rows if _ok(r)]
    total = len(rows) + len(stopped)
    head = f"{len(rows)} of {total} layers measured to the end" if stopped else f"{len(rows)} layers"
    if not rows:
        return [f"{head}.", "", *_stopped(stopped, total)]
    opt = [r["optimised_s"] / r["eager_s"] for r in rows]
    written = [r["written_s"] / r["eager_s"] for r in rows]
    lines = [
        f"{head} (revision {', '.join(dict.fromkeys(r['revision'][:7] for r in rows))}, "
        f"{rows[0]['date'][:10]}, optimize.py {_flags(rows[0]['seconds_limit'])}). Compiled gradient / PyTorch eager, optimised: geometric mean "
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
    return lines + _stopped(stopped, total)


def _stopped(stopped: list[dict[str, Any]], total: int) -> list[str]:
    if not stopped:
        return []
    names = "; ".join(f"{r['layer']}: {r['status']} ({r['reason']})" for r in stopped)
    return [f"- not measured to the end (a step failed or ran past its cap): {len(stopped)} of {total} ({names})"]


def _time(row: dict[str, Any], key: str, bold: bool = False) -> str:
    """A time per call and its ratio to eager's; "one call" where the gradient was too slow to call again."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)

    if key not in row:
        return "-"
    ratio = _x(row[key] / row["eager_s"]) if "eager_s" in row else ""
    ratio = f"**{ratio}**" if bold and ratio else ratio
    once = ", one call" if row.get("calls", {}).get(key) == 1 else ""
    return f"{format_seconds(row[key])} ({ratio}{once})" if ratio or once else format_seconds(row[key])


def _seconds(row: dict[str, Any], *keys: str) -> str:
    return " / ".join(f"{row[k]:.1f} s" if k in row else "-" for k in keys)


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
        first = f"{r['torch_compile_first_s']:.1f} s" if "torch_compile_first_s" in r else "-"
        if _ok(r):
            agreement = f"{max(r['error_written'], r['error_optimised']):.1e}"
        else:
            agreement = f"not measured: **{r['status']}** ({r['reason']})"
        cells = [
            r["layer"],
            f"{r['repo']}: `{r['path']}` `{r['symbol']}`",
            _shapes(r) if "shapes" in r else "-",
            format_seconds(r["eager_s"]) if "eager_s" in r else "-",
            _time(r, "written_s"),
            _time(r, "optimised_s", bold=True),
            _time(r, "torch_compile_s"),
            _seconds(r, "optimise_s"),
            _seconds(r, "compile_written_s", "compile_optimised_s"),
            f"{_seconds(r, 'end_to_end_s')} / {first}",
            agreement,
        ]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join([*summary(rows), "", *lines]) + "\n"


def layers_brief_table() -> str:
    """The README's view: one row, the optimised gradients and torch.compile against eager over every layer."""
    every = _rows()
    rows = [r for r in every if _ok(r)]
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
                f"| {_count(rows, every)} | {_x(_geomean(opt))} ({_x(statistics.median(opt))}), {_x(min(opt))}-{_x(max(opt))} | {tc_mean} |",
            ]
        )
        + "\n"
    )


def _count(rows: list[dict[str, Any]], every: list[dict[str, Any]]) -> str:
    return (
        str(len(rows))
        if len(rows) == len(every)
        else f"{len(rows)} (of {len(every)}: the others not measured to the end)"
    )


FIGURE = Figure(
    "layers",
    "Real layers' compiled gradients against PyTorch eager and torch.compile (benchmarks/bench_layers.py)",
    {"layers": layers_table, "layers_brief": layers_brief_table},
)
