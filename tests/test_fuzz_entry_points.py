"""Adversarial arguments for every entry point, and byte-level mutations of real programs.

Each entry point (``knossos`` and its subcommands, ``optimize.py``, ``python -m training.export``,
``train.py``'s config overrides) gets random combinations of its options with odd values: numbers
with hundreds of digits, NaN and infinities, negatives, empty text, odd Unicode, paths that are
folders, missing, empty or binary.  Whatever happens must be an answer (status 0) or one error line
(status 1, or 2 for argparse), never an internal error, a traceback, or a hang.

Real programs mutated byte by byte (flips, insertions, deletions, duplicated spans) go through
``knossos check`` in-process, and those that still parse through every rewrite of a rule set, whose
ancestors the C extension (knossos/_climb.c) rebuilds: the same nodes as the Python loop, and no
error but the project's own.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from knossos import expr as E
from knossos import rebuild
from knossos.cli import main as knossos_main
from knossos.errors import KsError
from knossos.parser import parse_program
from rules.actions import children
from rules.sets import get_rule_set

from conftest import PROGRAM_FILES, ROOT

SCALE = max(1, int(os.environ.get("KNOSSOS_FUZZ_SCALE", "1")))


def fuzz(examples: int) -> settings:
    """CI's examples are the same every run (a failure there is a bug, never luck); with
    KNOSSOS_FUZZ_SCALE above 1 they are more, and drawn afresh each run."""
    return settings(
        max_examples=examples * SCALE,
        derandomize=SCALE == 1,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
    )


#: Values that have broken command lines: huge and tiny numbers, non-numbers, odd text.
ODD = [
    "0",
    "-1",
    "1",
    "2",
    "0.5",
    "-0.0",
    "nan",
    "NaN",
    "inf",
    "-inf",
    "1e999",
    "1e-300",
    "9" * 90,
    "9" * 400,
    "-" + "9" * 30,
    "0x10",
    "1_000",
    "",
    " ",
    "=",
    "x=",
    "=5",
    "n=" + "9" * 90,
    "x=" + "9" * 400,
    "x=3x" + "9" * 30,
    "x=1e400",
    "x=-3",
    "n=256,512",
    "n=0",
    "\u00e9\u00df\u2603",
    "\U0001f600",
    "a\tb",
    "(add x 1.0)",
    "((((",
    "-",
    "--",
]
#: Expressions for --expr: fine, broken, huge literals, deep.
EXPRS = [
    "(add x 1.0)",
    "(div (add (mul 2.0 (add x y)) (add x y)) (mul x 2.0))",
    "(add x",
    "(add x 1e999)",
    "(add 1 " + "9" * 400 + ")",
    "(exp " * 300 + "x" + ")" * 300,
    "(sum (constVec 1000000000000 x))",
    "(build 3 (lam (i : Integer) x))",
    "",
]


@cache
def paths(root: Path) -> list[str]:
    """Inputs of every kind: a real program, a missing file, a folder, an empty file, binary bytes,
    text that is not Knossos, and a file too odd to read as a model."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "empty.ks").write_bytes(b"")
    (root / "binary.ks").write_bytes(bytes(range(256)))
    (root / "text.ks").write_text("hello (((")
    (root / "folder").mkdir(exist_ok=True)
    return [
        str(ROOT / "examples" / "bindgen_test_8.ks"),
        str(ROOT / "ksdata" / "programs" / "blas_test.kso"),
        str(root / "missing.ks"),
        str(root / "folder"),
        str(root / "empty.ks"),
        str(root / "binary.ks"),
        str(root / "text.ks"),
    ]


def odd(extra: list[str] | None = None) -> st.SearchStrategy[str]:
    return st.sampled_from(ODD + (extra or [])) | st.text(max_size=8)


def options(table: dict[str, st.SearchStrategy[str] | None]) -> st.SearchStrategy[list[str]]:
    """A random selection of ``table``'s options (None: a flag), each with a drawn value, shuffled."""

    def one(name: str) -> st.SearchStrategy[list[str]]:
        value = table[name]
        return st.just([name]) if value is None else value.map(lambda v: [name, v])

    return st.lists(st.sampled_from(sorted(table)).flatmap(one), max_size=4).map(
        lambda chosen: [token for option in chosen for token in option]
    )


def call(entry: Callable[[list[str]], int], argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = entry(argv)
        except SystemExit as stop:  # argparse
            code = stop.code if isinstance(stop.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, out: str, err: str, argv: list[str], most_lines: int = 1) -> None:
    """An answer, or one error line (``knossos check``: one per file): never an internal error or a traceback."""
    assert "Traceback" not in err and "internal error" not in err, (argv, err)
    assert code in (0, 1, 2), (argv, code, err)
    if code != 0:
        lines = [line for line in err.split("\n") if line.strip()]  # a line ends at a newline, not at \x1e
        assert 1 <= len(lines) <= most_lines and all("error: " in line for line in lines), (argv, err)


# -- knossos ----------------------------------------------------------------------------------------
def knossos_argv(files: list[str]) -> st.SearchStrategy[list[str]]:
    file = st.sampled_from(files)
    expr = st.sampled_from(EXPRS)
    common: dict[str, st.SearchStrategy[str] | None] = {"--expr": expr}
    per_command: dict[str, dict[str, st.SearchStrategy[str] | None]] = {
        "check": {},
        "print": {"--width": odd(["80", "8"])},
        "cost": {"--def": odd(["gemm", "f"]), "--json": None, "--size": odd(["n=4", "x=3x3"])},
        "eval": {
            "--args": odd(["[1.0]", "[]", "[1e999]", '{"x": 2.0}', "[" * 50]),
            "--max-steps": odd(["1000"]),
            "--max-elements": odd(["1000"]),
        },
        "rules": {"--set": odd(["binding_rules", "ml_rules"]), "--json": None},
        "actions": {"--def": odd(["f", "gemm"]), "--rules": odd(["binding_rules"]), "--json": None},
        "rewrite": {"--def": odd(["f"]), "--rules": odd(["binding_rules"]), "--apply": odd(["0:commute_mul", "3:x"])},
        "simplify": {"--def": odd(["f", "gemm"]), "--json": None},
    }

    def build(command: str) -> st.SearchStrategy[list[str]]:
        table = {**common, **per_command[command]} if command not in ("rules",) else per_command[command]
        positional = st.just([]) if command == "rules" else st.lists(file, max_size=2)
        extra = st.just([]) if command != "eval" else st.sampled_from([[], ["f"], ["gemm"]])
        return st.tuples(positional, extra, options(table)).map(lambda t: [command, *t[0], *t[1], *t[2]])

    return st.sampled_from(sorted(per_command)).flatmap(build)


@fuzz(150)
@given(data=st.data())
def test_knossos_arguments(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    files = paths(tmp_path_factory.getbasetemp() / "fuzz-inputs")
    argv = data.draw(knossos_argv(files))
    assert_clean(*call(knossos_main, argv), argv, most_lines=max(1, len(argv)) if argv[0] == "check" else 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["cost", "ksdata/programs/blas_test.kso", "--size", "x=" + "9" * 90],
        ["cost", "ksdata/programs/blas_test.kso", "--size", "x=" + "9" * 400],
        ["cost", "ksdata/programs/blas_test.kso", "--def", "outer_product", "--size", "x=" + "9" * 400],
        ["eval", "--expr", "(add x 1.0)", "--args", "[1.0]", "--max-steps", "9" * 400],
    ],
    ids=["90-digit-size", "400-digit-size", "400-digit-size-one-def", "400-digit-steps"],
)
def test_found_internal_errors_stay_fixed(argv: list[str]) -> None:
    """Cases that ended in 'internal error: OverflowError' (the issue's report, and ones found here)."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        assert_clean(*call(knossos_main, argv), argv)
    finally:
        os.chdir(cwd)


# -- optimize.py ------------------------------------------------------------------------------------
def optimize_argv(files: list[str], out: Path) -> st.SearchStrategy[list[str]]:
    table: dict[str, st.SearchStrategy[str] | None] = {
        "--def": odd(["f", "gemm"]),
        "--expr": st.sampled_from(EXPRS),
        "--rules": odd(["binding_rules", "ml_rules+zero_tensor_rules", "nope+"]),
        "--search": odd(["astar", "beam", "mcts", "random", "exhaustive", "two-phase", "greedy"]),
        "--depth": odd(["3", "1000", "1001"]),
        "--budget": odd(["50", "1000000000", "1000000001"]),
        "--seed": odd(["3"]),
        "--model": st.sampled_from(["none", "zero", *files]) | odd(),
        "--precision": odd(["float32", "bfloat16"]),
        "--value-scale": odd(["0.3", "100", "101"]),
        "--seconds": st.sampled_from(["0.2", "1e-9", "0", "-1", "nan", "inf", "1e999", "x"]),
        "--max-states": odd(["500"]),
        "--max-memory": odd(["1", "100000"]),
        "--json": None,
        "-o": st.sampled_from([str(out / "o.ks"), str(out / "no-such-folder" / "o.ks"), str(out), *files]),
        "--in-place": None,
        "--force": None,
    }
    # a time and state limit first, so that valid settings stay quick (a drawn option may replace them)
    guard = ["--quiet", "--seconds", "0.5", "--max-states", "3000"]
    return st.tuples(st.lists(st.sampled_from(files), max_size=1), options(table)).map(lambda t: [*t[0], *guard, *t[1]])


@fuzz(80)
@given(data=st.data())
def test_optimize_arguments(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    from app.optimize_cli import main

    base = tmp_path_factory.getbasetemp()
    files = paths(base / "fuzz-inputs")
    # -o may write only into a scratch folder; the shared inputs must not be overwritten
    out = base / "fuzz-out"
    out.mkdir(exist_ok=True)
    argv = data.draw(optimize_argv(files[2:], out))
    before = {p: Path(p).read_bytes() for p in files if Path(p).is_file()}
    assert_clean(*call(main, argv), argv)
    assert {p: Path(p).read_bytes() for p in before} == before, "an input was changed"


# -- python -m training.export ---------------------------------------------------------------------------
@fuzz(40)
@given(data=st.data())
def test_export_arguments(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    from gnn.model_file import DEFAULT_MODEL
    from training.export import main

    base = tmp_path_factory.getbasetemp()
    files = [*paths(base / "fuzz-inputs"), str(DEFAULT_MODEL)]
    out = base / "fuzz-export"
    out.mkdir(exist_ok=True)
    sources = st.sampled_from(files)
    argv = data.draw(
        st.tuples(
            sources,
            st.sampled_from([str(out / "m.pt"), str(out), str(out / "no" / "m.pt")]),
            options({"--average-with": sources, "--value-scale": odd(["0.3", "100", "101"])}),
        ).map(lambda t: [t[0], t[1], *t[2]])
    )
    before = Path(DEFAULT_MODEL).read_bytes()
    assert_clean(*call(main, argv), argv)
    assert Path(DEFAULT_MODEL).read_bytes() == before


# -- train.py: config overrides ---------------------------------------------------------------------
KEYS = [
    "name",
    "rules",
    "search.depth",
    "search.budget",
    "search.algorithm",
    "search.value_scale",
    "search.precision",
    "model.steps",
    "model.hidden",
    "model.dropout",
    "training.epochs",
    "training.lr",
    "training.targets",
    "training.replay_best",
    "training.executor",
    "training.workers",
    "training.ray_address",
    "data.train.set",
    "data.train",
    "data",
    "search",
    "nope.key",
    "",
]


@fuzz(150)
@given(st.lists(st.tuples(st.sampled_from(KEYS) | st.text(max_size=6), odd(["true", "[1, 2]", "{a: 1}"])), max_size=4))
def test_train_config_overrides(overrides: list[tuple[str, str]]) -> None:
    """Every --set KEY=VALUE either loads or is one KsUsageError line (checked before any training)."""
    from training.config import load_config

    try:
        load_config(ROOT / "configs" / "bootstrap.yaml", [f"{k}={v}" for k, v in overrides])
    except KsError as err:
        assert "\n" not in err.render()


# -- byte-level mutations of real programs ----------------------------------------------------------
@cache
def program_bytes() -> list[bytes]:
    return [p.read_bytes() for p in PROGRAM_FILES] + [(ROOT / "examples" / "bindgen_test_8.ks").read_bytes()]


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(program_bytes())))
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    for _ in range(draw(st.integers(1, 8))):
        kind = rng.randrange(5)
        i = rng.randrange(len(data) + 1)
        if kind == 0 and i < len(data):
            data[i] ^= 1 << rng.randrange(8)  # flip a bit
        elif kind == 1:
            data[i:i] = bytes([rng.randrange(256)])  # insert a byte
        elif kind == 2:
            del data[i : i + rng.randrange(1, 16)]  # delete a run
        elif kind == 3:
            j = rng.randrange(len(data) + 1)
            data[i:i] = data[min(i, j) : max(i, j)][:200]  # duplicate a span
        else:
            data[i:i] = rng.choice([b"(", b")", b"\x00", b"\xff", b"#|", b";", b"1e999", b"\xc3"])
    return bytes(data)


@fuzz(200)
@given(mutated_bytes())
def test_check_on_mutated_bytes(tmp_path_factory: pytest.TempPathFactory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("bytes") / "mutated.ks"
    path.write_bytes(data)
    argv = ["check", str(path)]
    code, out, err = call(knossos_main, argv)
    assert code in (0, 1), (code, err)
    assert_clean(code, out, err, argv)
    if code == 1:
        assert err.startswith(str(path)) and out == ""


C_LOOP_BUILT = E.compiled_rebuild()
RULES = get_rule_set("all_rules")


@pytest.mark.skipif(not C_LOOP_BUILT, reason="the C extension (knossos/_climb.c) is not built here")
@fuzz(60)
@given(mutated_bytes())
def test_rewrites_of_mutated_programs_through_the_c_rebuild(data: bytes) -> None:
    """Every rewrite of every def of a mutated program that still parses: the C loop rebuilds the
    same (interned) nodes as the Python loop, and raises nothing but KsError."""
    try:
        program = parse_program(data.decode("utf-8"), "mutated.ks")
    except (KsError, UnicodeDecodeError):
        return
    for d in program.targets[:4]:
        try:
            fast = children(d.body, RULES)[:60]
        except KsError:
            continue
        rebuild._climb = rebuild._climb_python
        try:
            slow = children(d.body, RULES)[:60]
        finally:
            rebuild._climb = rebuild._load_climb()
        assert [(a.node, a.rule.name) for a, _ in fast] == [(a.node, a.rule.name) for a, _ in slow]
        assert all(x is y for (_, x), (_, y) in zip(fast, slow, strict=True)), d.name


def test_a_bug_is_one_line_with_status_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should a bug escape (here planted in the search), optimize.py says so in one line, not a traceback."""
    import app.optimize_cli
    import search.plan

    def broken(*_: object) -> None:
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(search.plan, "get_search", lambda name: broken)
    monkeypatch.delenv("KNOSSOS_DEBUG", raising=False)
    code, out, err = call(app.optimize_cli.main, ["--expr", "(add x 1.0)", "--quiet"])
    assert code == 3 and out == ""
    assert err == "optimize.py: internal error: ZeroDivisionError: planted (set KNOSSOS_DEBUG=1 for details)\n"
