"""The code base stays clean: ruff (lint and format), mypy --strict on the core packages, and the
packages' layers (import-linter's contracts in pyproject.toml; no private name imported across modules)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

#: Where a module may import a private name of another: the C extension, loaded by the module it serves.
PRIVATE_IMPORTS_ALLOWED = {("knossos.expr", "knossos", "_climb")}


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


def test_no_private_names_across_modules() -> None:
    """What one module uses of another is public: ``from X import _name`` is for tests only."""
    found = []
    for folder in ("knossos", "rules", "search", "gnn", "app", "experiments", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            module = _module_name(path)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.level or node.module == "__future__":
                    continue
                for alias in node.names:
                    private = alias.name.startswith("_") and not alias.name.startswith("__")
                    if private and (module, node.module, alias.name) not in PRIVATE_IMPORTS_ALLOWED:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import {alias.name}")
    assert not found, "\n".join(found)
