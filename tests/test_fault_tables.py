"""docs/faults/ counts its cases: every row has an outcome, none is 'silent wrong', the index agrees."""

from __future__ import annotations

import re
from pathlib import Path

FAULTS = Path(__file__).resolve().parents[1] / "docs" / "faults"
OUTCOMES = ("clear error", "survived", "silent wrong")


def _outcomes(table: Path) -> list[str]:
    """The outcome cell of every row of the table's case table (the one headed Case | Outcome | ...)."""
    found, inside = [], False
    for line in table.read_text(encoding="utf-8").splitlines():
        if line.startswith("| Case | Outcome |"):
            inside = True
            continue
        if inside and not line.startswith("|"):
            break
        if inside and not line.startswith("|---"):
            cells = [cell.strip() for cell in line.strip("|").split(" | ")]
            found.append(cells[1] if len(cells) > 2 else "")
    return found


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
