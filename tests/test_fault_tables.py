"""docs/faults/ counts its cases: each row has an outcome and names its test, none is silent wrong, the index agrees."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
FAULTS = TESTS.parent / "docs" / "faults"
OUTCOMES = ("clear error", "survived", "silent wrong")
#: A test named in a row's case cell: ``test_name`` or ``test_file.py::test_name``.
_NAMED = re.compile(r"(?:\b(test_\w+\.py)::)?\b(test_[a-z0-9_]+)\b(?!\.py)")


def _rows(table: Path) -> list[list[str]]:
    """The cells of every row of the table's case table (the one headed Case | Outcome | ...)."""
    found, inside = [], False
    for line in table.read_text(encoding="utf-8").splitlines():
        if line.startswith("| Case | Outcome |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not line.startswith("|---"):
            found.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return found


def _outcomes(table: Path) -> list[str]:
    """The outcome cell of every row of the table's case table."""
    return [cells[1] if len(cells) > 2 else "" for cells in _rows(table)]


def _defined_tests() -> dict[str, set[str]]:
    """Test file name -> the test functions it defines."""
    return {path.name: set(re.findall(r"^def (test_\w+)\(", path.read_text(encoding="utf-8"), re.M))
            for path in TESTS.glob("test_*.py")}


def test_every_row_names_a_test_that_exists() -> None:
    """A row is a claim about the code; the test it names is what keeps it true (a renamed test drops out here)."""
    defined = _defined_tests()
    anywhere = set().union(*defined.values())
    unnamed, missing = [], []
    for table in sorted(p for p in FAULTS.glob("*.md") if p.name != "README.md"):
        for cells in _rows(table):
            named = _NAMED.findall(cells[0])
            if not named:
                unnamed.append(f"{table.name}: {cells[0][:70]}")
            for file, test in named:
                if test not in (defined.get(file, set()) if file else anywhere):
                    missing.append(f"{table.name}: {file + '::' if file else ''}{test}")
    assert not missing, "rows naming a test that does not exist:\n" + "\n".join(missing)
    assert not unnamed, "rows naming no test:\n" + "\n".join(unnamed)


def test_every_case_has_an_outcome_and_none_is_silently_wrong() -> None:
    tables = sorted(p for p in FAULTS.glob("*.md") if p.name != "README.md")
    assert tables, "no fault tables"
    for table in tables:
        outcomes = _outcomes(table)
        assert outcomes, f"{table.name} has no 'Case | Outcome | What you get' table"
        assert set(outcomes) <= set(OUTCOMES), f"{table.name}: unknown outcomes {set(outcomes) - set(OUTCOMES)}"
        assert "silent wrong" not in outcomes, f"{table.name} lists a case that is still silently wrong"


def test_the_index_counts_what_the_tables_hold() -> None:
    index = (FAULTS / "README.md").read_text(encoding="utf-8")
    totals = [0, 0, 0, 0]
    for table in sorted(p for p in FAULTS.glob("*.md") if p.name != "README.md"):
        outcomes = _outcomes(table)
        counts = [len(outcomes), *(outcomes.count(o) for o in OUTCOMES)]
        row = re.search(rf"^\| \[{re.escape(table.name)}\]\({re.escape(table.name)}\) \|[^|]*\|"
                        r"\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|\s*(\d+) \|$", index, re.M)
        assert row, f"docs/faults/README.md has no row for {table.name}"
        assert [int(n) for n in row.groups()] == counts, f"{table.name}: the index says {row.groups()}, not {counts}"
        totals = [a + b for a, b in zip(totals, counts, strict=True)]
    total_row = r"^\| \*\*all\*\* \| \| " + r" \| ".join(rf"\*\*{n}\*\*" for n in totals) + r" \|$"
    assert re.search(total_row, index, re.M), f"the index's total row should read {totals}"
