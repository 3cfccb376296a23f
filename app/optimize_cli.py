"""``optimize.py``: search for a cheaper rewrite of a def or a bare expression.

With FILE --def NAME the result can also be written out: the whole program with the optimised def
(``-o OUT.ks``), its C++ (``--emit-cpp OUT.cpp``), and wall-clock times of the def as written, after
the ksc-style baseline simplifier and as optimised (``--bench n=256,512``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.models import load_value_function
from app.product_guard import keep_blocked_products
from app.search_options import add_search_option, given_settings
from cpp_backend.bench import CHECK_SIZE, Size, Variant, bench, format_seconds
from cpp_backend.driver import check_threads, serializable
from cpp_backend.emit import emit_program
from knossos.alloc_cost import AllocCost
from knossos.atomic import atomic_write_text
from knossos.cli import ArgumentParser, find_def, internal_error, load_source, same_file, whole_number
from knossos.errors import KsError, KsUsageError
from knossos.expr import Expr, path_to
from knossos.ops import Op
from knossos.perf import fewer_gc_pauses
from knossos.printer import format_def, format_expr, format_program
from knossos.program import Def, Param, Program
from knossos.sized_cost import check_size_levels, parse_sizes
from knossos.splice import replace_def
from knossos.types import INTEGER, Kind, Type
from rules.baseline import simplify_def
from rules.sets import RULE_SETS, get_rule_set
from search.limits import DEFAULT_MAX_STATES, MAX_BUDGET
from search.plan import choose_plan
from search.plan import run as optimise
from search.registry import get_search
from search.result import SearchResult
from search.settings import SearchSettings
from search.state import State, expr_of


def _amount(text: str) -> float:
    """An argparse type: a finite number greater than 0 (seconds, MiB)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number greater than 0, not {text}")
    return value


def build_parser(prog: str = "optimize.py") -> argparse.ArgumentParser:
    p = ArgumentParser(prog=prog, description=__doc__)
    add_arguments(p)
    return p


def add_arguments(p: argparse.ArgumentParser) -> None:
    """optimize.py's arguments (also ``knossos optimize``'s)."""
    p.add_argument("file", nargs="?", metavar="FILE", help="a Knossos program (.ks/.kso)")
    p.add_argument("--def", dest="def_name", metavar="NAME", help="the def to optimise (needed if FILE has several)")
    p.add_argument("--expr", metavar="'(...)'", help="a bare expression instead of FILE (free variables are Floats)")
    p.add_argument(
        "--rules",
        default=None,
        metavar="SET",
        help=f"rule set ({', '.join(RULE_SETS)}; ml_rules, gradient_rules for reverse-mode code with no --model, "
        "or the one the model was trained with); join "
        "several with +; strict:SET keeps only the rules that change no value on any input; by default no "
        "rewrite may overflow an Integer the program did not, unsafe-int:SET lets the rules that regroup "
        "arithmetic (add_of_muls, assoc_add_add, ...) rewrite Integer arithmetic too (docs/rules.md)",
    )
    add_search_option(p, "cost")
    p.add_argument(
        "--size",
        action="append",
        default=[],
        metavar="NAME=N[xM...]",
        help="with --cost alloc: a parameter's lengths at each nesting level (image=16x128), so that loops "
        "over its sizes count as that many iterations (others count 16); repeat for several",
    )
    for setting in ("algorithm", "depth", "prune_commutes", "prune_inlines", "budget"):
        add_search_option(p, setting)
    p.add_argument("--seed", type=int, default=0, help="for random, mcts (0)")
    p.add_argument(
        "--model",
        default=None,
        metavar="CKPT",
        help="value function: none, a shipped model's name (default, ggnn, ...: gnn/models/), or a checkpoint file "
        "(without it: none, and the search is saturation around plain search, see --search)",
    )
    add_search_option(p, "precision")
    add_search_option(p, "value_scale")
    p.add_argument(
        "--seconds",
        type=_amount,
        default=None,
        metavar="S",
        help="time limit: stop with the best found so far (none; reverse-mode code with no --model: 20)",
    )
    p.add_argument(
        "--max-states",
        type=whole_number(MAX_BUDGET),
        default=DEFAULT_MAX_STATES,
        metavar="N",
        help=f"stop with the best found so far at N distinct expressions explored ({DEFAULT_MAX_STATES}: about 2 GiB)",
    )
    p.add_argument(
        "--max-memory",
        type=_amount,
        default=None,
        metavar="MIB",
        help="stop with the best found so far when the process uses more memory (default: half the machine's)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--no-tidy",
        action="store_true",
        help="keep the search's result as found (by default identity, variable and dead lets are removed "
        "by steps of let_recover, delete_let and inline_let, which follow the search's)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar, and no progress lines for --bench")
    out = p.add_argument_group("outputs (FILE --def NAME only, not --expr)")
    out.add_argument(
        "-o",
        dest="out",
        metavar="OUT.ks",
        help="write the whole program, with the optimised def in place of the original (atomically; the "
        "rest of FILE, comments included, as written; comments inside the def are kept above it); never over "
        "FILE itself unless --in-place, and over another existing file only with --force",
    )
    out.add_argument(
        "--in-place", action="store_true", help="write the optimised program over FILE (-o FILE; its comments are kept)"
    )
    out.add_argument("--force", action="store_true", help="let -o and --emit-cpp overwrite an existing file")
    out.add_argument(
        "--emit-cpp", metavar="OUT.cpp", help="write the optimised def and the defs it calls as C++17 (no main)"
    )
    out.add_argument(
        "--bench",
        metavar="NAME=N1,N2,...",
        help="compile the def as written, after the baseline simplifier and as optimised (g++ -O3), and time "
        "each at every size N: min and median seconds per call over at least 0.2 s, on the same "
        "pseudo-random inputs; every vector is N long (a size variable or Integer parameter NAME is N too). "
        "Each is checked against the interpreter at size 4 ('verified') and against the def as written "
        "('agrees'). With --json: a list under \"bench\"",
    )
    out.add_argument(
        "--exact-order",
        action="store_true",
        help="--emit-cpp and --bench: Float sums add in index order, bit-identical to the interpreter (checked to "
        "the bit); by default compiled sums may be vectorised and split across threads (checked within the "
        "tolerance of docs/cpp.md)",
    )
    out.add_argument(
        "--threads",
        type=whole_number(1024),
        default=None,
        metavar="N",
        help="--bench: threads for parallel loops (default: the machine's cores)",
    )


def check_sizes(sizes: Mapping[str, int | tuple[int, ...]], start: Expr, params: list[Param], file: str) -> None:
    """The --size names are variables that ``start`` (the expression being optimised) uses, given at
    most as many lengths as their types have levels of vectors; a one-line error otherwise."""
    unknown = [name for name in sorted(sizes) if name not in start.free]
    if unknown:
        order = [p.name for p in params if p.name in start.free]
        uses = order + sorted(start.free - set(order))
        raise KsUsageError(
            f"--size names {', '.join(unknown)}, which the expression being optimised does not use "
            f"(it uses: {', '.join(uses) or 'no variables'})"
        )
    check_size_levels(sizes, {p.name: p.type.vec_rank for p in params}, file)


def main(argv: Sequence[str] | None = None) -> int:
    return run_reporting_errors(build_parser().parse_args(argv), "optimize.py")


def run_reporting_errors(args: argparse.Namespace, prog: str) -> int:
    """:func:`run_command`, every error a one-line message under ``prog``'s name and an exit status."""
    try:
        with fewer_gc_pauses():
            return run_command(args)
    except KsError as err:
        print(err.render(prog), file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # outside the search (which returns its best so far): before it, or writing
        print(f"{prog}: interrupted (a file being written is left as it was)", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:
        return internal_error(prog, err)


def run_command(args: argparse.Namespace) -> int:
    if args.search is not None:
        get_search(args.search)  # an unknown name is refused before a model is loaded
    if args.rules is not None:
        get_rule_set(args.rules)
    if args.expr is not None and args.def_name:
        raise KsUsageError("give either FILE --def NAME or --expr, not both")
    src = load_source(args)
    d: Def | None = None
    outputs = _Outputs.from_args(args, src.expr is not None)
    if src.expr is not None:
        start = src.expr
    else:
        assert src.program is not None
        d = _pick_def(src.program, args.def_name, src.label)
        start = d.body
        outputs.check_def(src.program, d)
    model = None if args.model is None else load_value_function(args.model, args.precision, args.value_scale)
    plan = choose_plan(
        start,
        d.name if d is not None else None,
        model,
        rules=args.rules,
        **given_settings(args),
        sizes=parse_sizes(args.size),
        seed=args.seed,
        seconds=args.seconds,
        max_states=args.max_states,
        max_memory_mib=args.max_memory,
        tidy=not args.no_tidy,
    )
    cost = plan.cost()
    if isinstance(cost, AllocCost):
        params = list(d.params) if d is not None else [Param(v.data, v.type) for v in src.free]
        check_sizes(cost.sizes, start, params, src.label)
    bar = _progress_bar(plan.search.budget, disabled=args.quiet)
    try:
        result = optimise(start, plan, model, bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()
    if d is not None:
        result = keep_blocked_products(result, get_rule_set(plan.rules))
    settings = plan.search
    report = {
        "rules": plan.rules,
        "cost_model": settings.cost,
        "search": settings.algorithm,
        "model": args.model if args.model is not None else "none",
        "budget": settings.budget,
        "depth": settings.depth,
        "prune_commutes": settings.prune_commutes,
        "prune_inlines": settings.prune_inlines,
        **result.to_json(),
    }
    messages: list[str] = []
    if d is not None and src.program is not None and outputs.wanted:
        optimised = dataclasses.replace(d, body=result.best)
        messages = outputs.write(src.program, d, optimised, src.text)
        if outputs.bench is not None:
            report["bench"], notes = outputs.run_bench(src.program, d, optimised)
            messages += [f"note: {n}" for n in notes]
            if notes:
                report["bench_notes"] = notes
    if args.json:
        print(json.dumps(report))
    else:
        _print_human(result, d, report, outputs.wanted)
        if "bench" in report:
            assert d is not None
            print(_bench_table(d.name, report["bench"]))  # type: ignore[arg-type]
        for m in messages:
            print(m)
    return 0


# -- outputs: -o, --emit-cpp, --bench ------------------------------------------------------------------
def _check_target(path: str, force: bool, what: str) -> None:
    """A file we may write: its folder exists, it is not there yet unless ``force``, and if it is
    there it is a regular file (never a device, FIFO or socket, whatever ``force`` says)."""
    if not path:
        raise KsUsageError(f"{what} needs a file name, not an empty one")
    target = Path(path)
    if target.is_dir():
        raise KsUsageError(f"{what} names a folder", None, path)
    if target.exists() and not target.is_file():
        raise KsUsageError(f"{what}: not a regular file; refusing to replace it", None, path)
    if not target.resolve().parent.is_dir():
        raise KsUsageError(f"{what}: the folder does not exist", None, path)
    if target.exists() and not force:
        raise KsUsageError(f"{what}: the file exists; add --force to overwrite it", None, path)


def write_atomic(path: str, text: str, force: bool = True) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename, so that the
    file is either the old one or the new one, never half written; an existing file keeps its mode.
    Without ``force`` no file may be at ``path`` when it is written (one that appeared during the
    search is left alone)."""
    try:
        atomic_write_text(path, text, replace=force)
    except FileExistsError:
        raise KsUsageError("the file appeared during the search; add --force to overwrite it", None, path) from None
    except OSError as err:
        raise KsUsageError(f"cannot write: {err.strerror}", None, path) from None


def parse_bench(spec: str) -> tuple[str, list[int]]:
    """``"n=256,512"`` -> ``("n", [256, 512])``; a one-line KsUsageError otherwise."""
    name, sep, values = spec.partition("=")
    name = name.strip()
    bad = KsUsageError(
        f"bad --bench '{spec}': expected NAME=N1,N2,... with one size name and whole numbers >= 1 (e.g. n=256,512)"
    )
    if not sep or not name or any(c in name for c in ",= ") or "=" in values:
        raise bad
    try:
        sizes = [int(v) for v in values.split(",")]
    except ValueError:
        raise bad from None
    if not sizes or any(v < 1 for v in sizes):
        raise bad
    return name, sizes


def _has_vectors(t: Type) -> bool:
    return t.kind is Kind.VEC or any(_has_vectors(c) for c in t.children)


@dataclasses.dataclass
class _Outputs:
    label: str
    out: str | None
    force: bool
    emit_cpp: str | None
    bench: tuple[str, list[int]] | None
    sizes: list[Size] = dataclasses.field(default_factory=list)
    #: Whether -o may replace a file there (--force, or --in-place, whose target is the input).
    replace_out: bool = False
    #: --exact-order and --threads (the C++ of --emit-cpp and --bench).
    exact_order: bool = False
    threads: int | None = None
    #: --quiet: no progress lines for --bench.
    quiet: bool = False

    @property
    def wanted(self) -> bool:
        return self.out is not None or self.emit_cpp is not None or self.bench is not None

    @classmethod
    def from_args(cls, args: argparse.Namespace, is_expr: bool) -> _Outputs:
        """Check the output options before the search, so that mistakes do not wait for it."""
        if is_expr and (args.out or args.in_place or args.emit_cpp or args.bench):
            raise KsUsageError("-o, --in-place, --emit-cpp and --bench need FILE --def NAME, not --expr")
        out: str | None = args.out
        if args.in_place:
            if out is not None and not same_file(out, args.file):
                raise KsUsageError("--in-place writes over FILE; it cannot be combined with -o naming another file")
            out = args.file
        elif out is not None:
            if same_file(out, args.file):
                raise KsUsageError("-o names the input file; add --in-place to overwrite it", None, out)
            _check_target(out, args.force, "-o")
        if args.emit_cpp is not None:
            if same_file(args.emit_cpp, args.file):
                raise KsUsageError("--emit-cpp names the input file; refusing to overwrite it", None, args.emit_cpp)
            if out is not None and same_file(args.emit_cpp, out):
                raise KsUsageError("--emit-cpp and -o name the same file", None, args.emit_cpp)
            _check_target(args.emit_cpp, args.force, "--emit-cpp")
        bench = parse_bench(args.bench) if args.bench is not None else None
        threads = getattr(args, "threads", None)
        if threads is not None:
            check_threads(threads)
        return cls(
            args.file or "<expr>",
            out,
            args.force,
            args.emit_cpp,
            bench,
            replace_out=args.force or args.in_place,
            exact_order=getattr(args, "exact_order", False),
            threads=threads,
            quiet=args.quiet,
        )

    def check_def(self, program: Program, d: Def) -> None:
        """Before the search: the def has a C++ form (for --emit-cpp and --bench), and the --bench size
        name fits it: one of its size variables or Integer parameters, or any name when the def has
        vectors and no size variables (it names the length of every vector)."""
        if self.emit_cpp is not None or self.bench is not None:
            try:
                emit_program(program, [d.name])
            except KsError as err:
                raise err.located(None, self.label) from None
        if self.bench is None:
            return
        if not all(serializable(p.type) for p in d.params) or not serializable(d.ret_type):
            raise KsUsageError(
                f"--bench: '{d.name}' takes or returns functions, which cannot be timed", None, self.label
            )
        name, values = self.bench
        named = name in d.size_vars or any(p.name == name and p.type is INTEGER for p in d.params)
        if not named and d.size_vars:
            raise KsUsageError(
                f"--bench: '{name}' is not a size variable of '{d.name}' (its size variables: "
                f"{', '.join(d.size_vars)})",
                None,
                self.label,
            )
        if not named and not any(_has_vectors(p.type) for p in d.params):
            raise KsUsageError(f"--bench: '{d.name}' has no vector parameter to size", None, self.label)
        biggest = max(values)
        numbers = sum(p.type.num_elements(biggest) for p in d.params)
        if numbers > MAX_BENCH_NUMBERS:
            raise KsUsageError(
                f"--bench: at {name}={biggest} the inputs of '{d.name}' would hold more than {MAX_BENCH_NUMBERS:,} "
                "numbers, the most that are made (2 GiB)",
                None,
                self.label,
            )
        self.sizes = [Size({name: v} if named else {}, v, name) for v in values]

    def write(self, program: Program, original: Def, optimised: Def, text: str | None = None) -> list[str]:
        """Write -o and --emit-cpp; returns what to tell the user.  -o keeps ``text``, the program's
        source, as written but for the def's own form (comments included, see knossos/splice.py)."""
        messages = []
        if self.out is not None:
            moved = 0
            if text is None:
                written = format_program(program.with_def(optimised))
            elif optimised == original:  # nothing to replace: the file as it was, the def's comments too
                written = text
            else:
                assert original.pos is not None  # a def read from text knows where it is
                spliced = replace_def(text, original.pos, format_def(optimised), self.label)
                written, moved = spliced.text, spliced.moved_comments
            write_atomic(self.out, written, self.replace_out)
            messages.append(f"wrote {self.out}: the program with '{original.name}' optimised")
            if moved:
                messages.append(
                    f"note: the {moved} comment(s) inside '{original.name}' cannot follow its rewritten body; "
                    "they are kept above the def"
                )
        if self.emit_cpp is not None:
            try:
                source = emit_program(program.with_def(optimised), [original.name], exact_order=self.exact_order)
            except KsError as err:
                raise err.located(None, self.label) from None
            write_atomic(self.emit_cpp, source, self.force)
            messages.append(f"wrote {self.emit_cpp}: C++17 of '{original.name}' and the defs it calls")
        return messages

    def run_bench(self, program: Program, original: Def, optimised: Def) -> tuple[list[dict[str, object]], list[str]]:
        variants = [
            Variant("original", program),
            Variant("baseline", program.with_def(simplify_def(original))),
            Variant("optimised", program.with_def(optimised)),
        ]
        notes: list[str] = []
        try:
            rows = bench(
                variants,
                original.name,
                self.sizes,
                notes=notes,
                exact_order=self.exact_order,
                threads=self.threads,
                progress=None if self.quiet else _say,
            )
        except KsError as err:
            raise err.located(None, self.label) from None
        return [r.to_json() for r in rows], notes


def _say(message: str) -> None:
    """--bench's progress, on stderr (stdout keeps the result)."""
    print(f"bench: {message} ...", file=sys.stderr, flush=True)


#: The most numbers --bench makes for a def's inputs at one size (2 GiB of doubles).
MAX_BENCH_NUMBERS = 2**28


def _bench_table(name: str, rows: list[dict[str, object]]) -> str:
    """The --bench results as a table: one line per size and variant, speed relative to the baseline."""

    def text(size: object) -> str:
        assert isinstance(size, dict)
        return " ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in size.items())

    lines = [
        f"bench '{name}': seconds per call, min and median over at least 0.2 s; verified: equal to the interpreter "
        f"at size {CHECK_SIZE} and to the original at this size",
        f"{'size':<16} {'variant':<10} {'min':>10} {'median':>10} {'runs':>6} {'vs baseline':>12}  verified",
    ]
    baseline = {text(r["size"]): r["min_s"] for r in rows if r["variant"] == "baseline"}
    for r in rows:
        size = text(r["size"])
        min_s, median_s = r["min_s"], r["median_s"]
        assert isinstance(min_s, float) and isinstance(median_s, float)
        base = baseline.get(size)
        ratio = f"{base / min_s:.2f}x" if isinstance(base, float) and min_s > 0 else "-"
        ok = "yes" if r["verified"] and r["agrees"] else "NO (interpreter)" if not r["verified"] else "NO (differs)"
        lines.append(
            f"{size:<16} {r['variant']!s:<10} {format_seconds(min_s):>10} {format_seconds(median_s):>10} "
            f"{r['runs']!s:>6} {ratio:>12}  {ok}"
        )
    return "\n".join(lines)


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


def _print_human(
    result: SearchResult,
    d: Def | None,
    report: dict[str, object],
    outputs_wanted: bool,
) -> None:
    drop = result.start_cost - result.best_cost
    cost_model = report.get("cost_model", DEFAULT_COST)
    model = "" if cost_model == DEFAULT_COST else f" ({cost_model} cost model)"
    change = f"-{drop:g}" if drop > 0 else "no change"
    ran = f"{report['search']}" + (f", --model {report['model']}" if report.get("model") not in (None, "none") else "")
    print(
        f"cost{model} {result.start_cost:g} -> {result.best_cost:g} ({change}) in {len(result.steps)} steps "
        f"by {ran}; {result.evaluations} evaluations, {result.expanded} expanded, {result.seconds:.2f} s"
    )
    for note in result.notes:
        print(f"note: {note}")
    if result.interrupted:
        print("note: interrupted; this is the best found so far")
    for i, (step, where) in enumerate(zip(result.steps, _rewritten(result), strict=True), 1):
        print(f"  {i:>3}. {step.rule:<24} cost {step.cost:<10g} at node {step.node}: {where}")
    if d is not None and not outputs_wanted and drop > 0:
        print(
            "note: -o OUT.ks writes the program with this def; the cost is the cost model's estimate, "
            "not time: --bench n=... times the def as C++"
        )
    if d is not None:
        print(format_def(Def(d.name, d.ret_type, d.params, result.best, d.ret_sizes)))
    else:
        print(format_expr(result.best))


#: The cost model a run names only when it is another.
DEFAULT_COST = SearchSettings().cost
#: Subexpressions shown in step lines are cut to this many characters.
SNIPPET = 48


def _rewritten(result: SearchResult) -> list[str]:
    """For each step, the subexpression it rewrote (one line, cut short), as the step saw it: the
    search's steps from its graph, then the tidying's (``result.tidied``)."""
    g = result.graph
    searched_best = result.best if result.searched_best is None else result.searched_best
    state: State = g.best if expr_of(g.best) is searched_best else searched_best  # a lazy state on deep programs
    path = g.path(state) if state in g.states else []
    where = [_snippet(path_to(expr_of(before), action.node)[1]) for before, action in path]
    if len(where) < len(result.steps):
        where += [_snippet(node) for node in result.tidied]
    return where if len(where) == len(result.steps) else ["" for _ in result.steps]


def _snippet(node: Expr) -> str:
    if node.size > 200:  # printing it whole would cost more than it says
        head = node.data.name if node.op is Op.CALL else node.op.name.lower()
        return f"({head} ...)"
    text = " ".join(format_expr(node, width=10**6).split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 3] + "..."
