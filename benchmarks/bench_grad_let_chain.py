"""Time and memory of ``knossos grad`` on let chains that reuse the parameter, against their length.
Run:  python benchmarks/bench_grad_let_chain.py [--sizes 500,1000,2000,5000,10000] [--mode rev] [--timeout 600] [--out FILE]
Program, ``n`` lets (issue 44): ``(def f Float ((x : Float)) (let (a1 (mul x x)) (let (a2 (mul a1 x))
... a_n)))``.  Reverse mode needs every ``a_k`` again in its backward pass, so each ``a_k`` is live
from its let to near the end of the derivative: interning binds each over a scope in which it occurs
far down (the position maps of knossos/alpha.py find it without walking there), and each of the
backward pass's lets sees up to n free names (knossos/freeset.py shares them with its scope's).
Each size is one fresh ``knossos grad --mode MODE FILE -o OUT`` process under ``/usr/bin/time -v``
(its wall seconds and peak resident memory), killed after --timeout seconds.
Printed: per size, wall seconds, peak resident MiB, the lines of the derivative written, and the
seconds and MiB per thousand lets (flat when they grow linearly).  Output: one JSON line per size in
experiments/results/robustness/grad_let_chain.jsonl (--out to choose), rewritten atomically after
every size, with the code revision and the machine.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from ksbench.harness import machine, write_rows
from ksbench.results import revision

ROOT = Path(__file__).resolve().parents[1]
TIME = "/usr/bin/time"


def write_program(n: int, folder: Path) -> Path:
    body = f"a{n}"
    for k in range(n, 0, -1):
        body = f"(let (a{k} (mul {'x' if k == 1 else f'a{k - 1}'} x)) {body})"
    path = folder / f"lets{n}.ks"
    path.write_text(f"(def f Float ((x : Float)) {body})\n")
    return path


def _seconds(clock: str) -> float:
    """``/usr/bin/time``'s ``[h:]m:ss.cc`` as seconds."""
    total = 0.0
    for part in clock.split(":"):
        total = total * 60 + float(part)
    return total


def measure(n: int, mode: str, timeout: float, folder: Path) -> dict[str, object]:
    program, out = write_program(n, folder), folder / f"grad{n}.ks"
    argv = [TIME, "-v", sys.executable, "-m", "knossos.cli", "grad", "--mode", mode, str(program), "-o", str(out)]
    argv += ["--force"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {
            "lets": n,
            "mode": mode,
            "wall_s": None,
            "peak_mib": None,
            "lines": None,
            "note": f"killed at {timeout:g} s",
        }
    if done.returncode != 0:
        raise SystemExit(f"lets{n}: knossos grad failed: {done.stderr.strip().splitlines()[-3:]}")
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr)
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    assert wall is not None and peak is not None, done.stderr
    with out.open() as f:
        lines = sum(1 for _ in f)
    out.unlink()
    return {
        "lets": n,
        "mode": mode,
        "wall_s": round(_seconds(wall.group(1)), 2),
        "peak_mib": int(peak.group(1)) // 1024,
        "lines": lines,
        "note": "",
    }


def sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=sizes, default=[500, 1000, 2000, 5000, 10000])
    ap.add_argument("--mode", choices=("rev", "fwd", "both"), default="rev")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds before a size's process is killed")
    ap.add_argument("--out", type=Path, default=ROOT / "experiments/results/robustness/grad_let_chain.jsonl")
    args = ap.parse_args()
    if not Path(TIME).exists():
        raise SystemExit(f"{TIME} is needed (GNU time, for the peak resident memory)")
    stamp = {"revision": revision(), "machine": machine()}
    rows: list[dict[str, object]] = []
    print(
        f"{'lets':>6} {'mode':<4} {'wall s':>7} {'peak MiB':>8} {'lines':>7} {'s/1k lets':>9} {'MiB/1k lets':>11}  note"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            row = {**measure(n, args.mode, args.timeout, Path(tmp)), **stamp}
            rows.append(row)
            wall, peak = row["wall_s"], row["peak_mib"]
            per_s = f"{wall / n * 1000:.2f}" if isinstance(wall, float) else "-"
            per_mib = f"{peak / n * 1000:.0f}" if isinstance(peak, int) else "-"
            print(
                f"{n:>6} {args.mode:<4} {wall if wall is not None else '-':>7} {peak if peak is not None else '-':>8}"
                f" {row['lines'] if row['lines'] is not None else '-':>7} {per_s:>9} {per_mib:>11}  {row['note'] or '-'}",
                flush=True,
            )
            write_rows(args.out, rows)


if __name__ == "__main__":
    main()
