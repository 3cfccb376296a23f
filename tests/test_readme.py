"""The README stays a short user's guide: CI runs the test command it gives, and every link of it and
of docs/ leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))


def test_ci_runs_the_readmes_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = ci[ci.index(next(line for line in ci if "the README's test command" in line)) + 1]
    assert command.startswith("pip install")
    assert f"    {command}\n" in README.read_text()


def test_readme_is_short() -> None:
    # a guide, not a manual: details go to docs/ (raised from 12 KiB for autodiff, compile_def and
    # PyTorch, then to 14 KiB for the PyTorch op table and measured example)
    assert len(README.read_bytes()) < 14 * 1024


def _anchors(path: Path) -> set[str]:
    headings = [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_every_link_of_the_readme_and_docs_resolves() -> None:
    assert DOCS
    linked = set()
    for page in [README, *DOCS]:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, anchor = target.partition("#")
            found = (page.parent / path).resolve() if path else page
            assert found.exists(), f"{page.name}: {target}"
            if anchor and found.suffix == ".md":
                assert anchor in _anchors(found), f"{page.name}: {target}"
            linked.add(found)
    assert set(DOCS) - linked == set(), "every page of docs/ is linked from the README or another page"
