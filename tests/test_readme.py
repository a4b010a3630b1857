"""The README is an entrance: short, the two commands CI and newcomers run, links that lead into the site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len(README.splitlines()) <= 250


def test_the_two_commands_are_at_the_top() -> None:
    first = README[:README.index("## Installation")]
    assert "make demo" in first and "make test" in first


def test_every_relative_link_of_the_readme_leads_to_a_file() -> None:
    links = [link.split("#")[0] for link in re.findall(r"\]\(([^)]+)\)", README) if "://" not in link]
    assert links, "the README links into the site"
    assert [link for link in links if not (ROOT / link).exists()] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_of_a_build_machine(page: Path) -> None:
    """Paths of the machines this project is built on mean nothing to a reader."""
    text = page.read_text(encoding="utf-8")
    assert re.findall(r"(?<![\w.])/(?:work|opt|tmp|root|home)/\S*", text) == []


def test_the_readme_repeats_no_fault_count() -> None:
    """The counts live in docs/faults/README.md, which tests/test_fault_tables.py keeps right."""
    assert not re.search(r"\d+ cases", README)


def test_the_readmes_offline_python_example_runs_as_written(tmp_path: Path, cache_dir: Path) -> None:
    """The first Python block of the README, in a fresh interpreter in an empty folder: it says where it wrote."""
    import os
    import subprocess
    import sys

    section = README[README.index("## From Python"):]
    start = section.index("```python\n") + len("```python\n")
    block = section[start:section.index("```\n", start)]
    environment = {**os.environ, "DISASTIR_CACHE_DIR": str(cache_dir), "HF_HUB_OFFLINE": "1"}
    environment.pop("DISASTIR_DATA_DIR", None)
    done = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    folder = Path(done.stdout.splitlines()[0])
    assert folder.is_relative_to(tmp_path / "results" / "results") and len(list(folder.glob("DisastIR-*.json"))) == 2
    said = [line for line in done.stderr.splitlines() if "task result(s) in" in line]
    assert len(said) == 1 and said[0].startswith(f"2 task result(s) in {folder}")
    assert "Synthetic data: scores exercise the pipeline" in said[0]
    assert re.fullmatch(r"DisastIR-QA-Bio \d+\.\d\d", done.stdout.splitlines()[1])
