"""The code base stays clean: ruff (lint and format), mypy --strict on the core packages, and the
packages' layers (import-linter's contracts in pyproject.toml; no private name of one module used in another)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import PACKAGES, ROOT

#: Where a module may import a private name of another (none: knossos.rebuild loads the C extension by name).
PRIVATE_IMPORTS_ALLOWED: set[tuple[str, str, str]] = set()


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_check() -> None:
    done = _run("ruff", "check", "--output-format", "concise", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format() -> None:
    done = _run("ruff", "format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy() -> None:
    done = _run("mypy")
    assert done.returncode == 0, done.stdout + done.stderr


def test_layers() -> None:
    """experiments > app > gnn > search > rules > knossos: no package imports one above it, lazily or not."""
    lint_imports = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert lint_imports is not None, "lint-imports is missing: pip install -e '.[dev]' installs import-linter"
    done = subprocess.run([lint_imports, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " 0 broken" in done.stdout, done.stdout


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(name: str) -> bool:
    """Whether ``name`` (dotted) is a module or package of this repository."""
    path = ROOT.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(path: Path, module: str) -> list[str]:
    """In ``path``, the source of ``module``: ``from X import _name``, and ``M._name`` where ``M`` is
    another module of this repository (``import a.b as M``, ``from a import b as M``, ``import a``
    then ``a.b._name``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
    found = []
    modules: dict[str, str] = {}  # local name -> the module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module not in (None, "__future__"):
            for alias in node.names:
                if _private(alias.name) and (module, node.module, alias.name) not in PRIVATE_IMPORTS_ALLOWED:
                    found.append(f"{where}:{node.lineno}: from {node.module} import {alias.name}")
                if _is_module(f"{node.module}.{alias.name}"):
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        base = ast.unparse(node.value).split(".")
        if base[0] not in modules:
            continue
        owner = ".".join([modules[base[0]], *base[1:]])
        if owner != module and _is_module(owner) and (module, owner, node.attr) not in PRIVATE_IMPORTS_ALLOWED:
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)} (a private name of {owner})")
    return found


def test_no_private_names_across_modules() -> None:
    """What one module uses of another is public: ``from X import _name`` and ``X._name`` are for tests only."""
    found = []
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += _private_uses(path, _module_name(path))
    assert not found, "\n".join(found)


def test_the_private_names_check_sees_module_attributes(tmp_path: Path) -> None:
    """The check finds ``E._name`` and ``knossos.expr._name`` as well as ``from ... import _name``."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import knossos.expr\n"
        "from knossos import expr as E\n"
        "from knossos.expr import _exact_key\n"
        "print(E._table, knossos.expr._alpha_table, E.make)\n",
        encoding="utf-8",
    )
    found = _private_uses(probe, "app.probe")
    assert [line.split(": ", 1)[1] for line in found] == [
        "from knossos.expr import _exact_key",
        "E._table (a private name of knossos.expr)",
        "knossos.expr._alpha_table (a private name of knossos.expr)",
    ]


#: Names every command-line module defines, by the protocol of its caller (``knossos.cli`` and the
#: ``knossos.commands`` entry points call ``register``/``build_parser``/``main`` of each): one name,
#: one meaning, in several modules.
PROTOCOL_NAMES = frozenset({"main", "build_parser", "add_arguments", "register", "run_command", "run_reporting_errors"})


#: The library: the packages but the scripts (each benchmark and experiment has its own ``main``, ``run``...).
LIBRARY = tuple(p for p in PACKAGES if p not in ("benchmarks", "experiments"))


def _public_names(path: Path) -> set[str]:
    """The public names bound at the top of the module at ``path`` (functions, classes, assignments)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def test_each_public_name_is_defined_once() -> None:
    """A public name means one thing in the library: two modules that each define ``Value`` or
    ``substitute`` are either one idea written twice or two ideas that need names of their own."""
    where: dict[str, list[str]] = {}
    for folder in LIBRARY:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for name in _public_names(path) - PROTOCOL_NAMES:
                where.setdefault(name, []).append(_module_name(path))
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, "\n".join(f"{name}: {', '.join(modules)}" for name, modules in sorted(twice.items()))
