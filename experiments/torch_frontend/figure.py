"""The PyTorch front end's measurements (benchmarks/bench_torch.py's rows): the tables of docs/torch.md
and the README."""

from __future__ import annotations

from experiments.figures import Figure
from experiments.tables import jsonl
from ksbench.results import RESULTS


def torch_table() -> str:
    """benchmarks/bench_torch.py's rows: the translation's seconds in fresh processes, then per MLP size
    the largest relative difference from torch, the search, the alloc cost and the compiled gradient's
    time against PyTorch eager's."""
    from cpp_backend.bench import format_seconds  # not at the top: it loads numpy (see experiments.figures)

    path = RESULTS / "torch" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_torch.py._\n"
    rows = jsonl(path)
    lines = []
    translations = [r for r in rows if r["kind"] == "translate_20_ops"]
    if translations:
        totals = sorted(r["total_s"] for r in translations)
        imports = sorted(r["import_torch_s"] for r in translations)
        lines += [
            f"Translating `twenty_ops` ({translations[0]['nodes']} nodes) in a fresh process, {len(totals)} times: "
            f"{totals[0]:.2f}-{totals[-1]:.2f} s, torch's import ({imports[0]:.2f}-{imports[-1]:.2f} s) included.",
            "",
        ]
    lines += [
        "| batch x inputs x hidden x outputs | largest relative difference | alloc cost as written | "
        "found with the model | found without (plain) | compiled gradient | PyTorch eager | compiled / eager |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["kind"] != "mlp_gradient":
            continue
        size = "x".join(str(r["size"][k]) for k in ("batch", "inputs", "hidden", "outputs"))
        found = {
            name: f"{s['alloc_cost']:.3g} in {s['seconds']:.0f} s" + (" (kept)" if r.get("kept") == name else "")
            for name, s in r.get("searches", {}).items()
        }
        lines.append(
            f"| {size} | {max(r['errors'].values()):.1e} | {r['alloc_cost']['before']:.3g} | "
            f"{found.get('model', '')} | {found.get('plain', '')} | {format_seconds(r['compiled_grad_s'])} | "
            f"{format_seconds(r['eager_grad_s'])} | **{r['compiled_grad_s'] / r['eager_grad_s']:.2f}x** |"
        )
    return "\n".join(lines) + "\n"


def torch_brief_table() -> str:
    """The README's view of benchmarks/bench_torch.py's MLP rows: agreement with torch and the time."""
    path = RESULTS / "torch" / "results.jsonl"
    if not path.is_file():
        return "_No results yet: run benchmarks/bench_torch.py._\n"
    rows = jsonl(path)
    lines = [
        "| MLP: batch x inputs x hidden x outputs | values and gradients vs torch | compiled gradient / PyTorch eager |",
        "|---|---|---|",
    ]
    for r in rows:
        if r["kind"] == "mlp_gradient":
            size = "x".join(str(r["size"][k]) for k in ("batch", "inputs", "hidden", "outputs"))
            ratio = r["compiled_grad_s"] / r["eager_grad_s"]
            lines.append(f"| {size} | {max(r['errors'].values()):.0e} relative | {ratio:.2f}x the time |")
    return "\n".join(lines) + "\n"


FIGURE = Figure(
    "torch_frontend",
    "MLPs translated from PyTorch (benchmarks/bench_torch.py)",
    {"torch": torch_table, "torch_brief": torch_brief_table},
)
