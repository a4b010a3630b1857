"""A built benchmark's report, ``report.md`` beside ``report.json``.

What each stage kept and dropped, what each task holds (as the paper's Tables 1, 14 and 15 do for DisastIR), and
what the build cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["LIMITS", "render_report"]

#: What a built benchmark is and is not, said in every report.
LIMITS = ("A built benchmark ranks retrievers on your documents; its absolute scores are not DisastIR's and are not "
          "comparable with them (its queries and grades come from language models, and its pool from the models "
          "named above). Models outside the pool may be under-rated: judge their unjudged top 10 with "
          "`disastir-mteb judge` before comparing them.")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join("" if value is None else f"{value:,}" if isinstance(value, int) and
                                not isinstance(value, bool) else str(value) for value in row) + " |" for row in rows]
    return lines


def _words(row: Mapping[str, Any]) -> str:
    return "" if row["query_words_mean"] is None else f"{row['query_words_mean']} / {row['query_words_median']}"


def _share(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def render_report(name: str, report: Mapping[str, Any]) -> str:
    """The Markdown report of ``report.json``'s content."""
    stages, tasks, cost = report["stages"], report["tasks"], report.get("cost", {})
    lines = [f"# {name}: a built benchmark", "", LIMITS, "", "## Stages", ""]
    lines += _table(["stage", "counts"], [[stage, ", ".join(f"{key}: {value}" for key, value in counts.items())]
                                          for stage, counts in stages.items()])
    grades = sorted({grade for task in tasks.values() for grade in task["grades"]}, key=float)
    lines += ["", "## Tasks", "", "Grades are the judge's (the mean of three prompts, floored for this count); the "
              "shortfall is the queries asked for and not kept.", ""]
    lines += _table(["task", "queries", "shortfall", "pairs", *(f"grade {g}" for g in grades),
                     "top grade generated", "query words (mean / median)"],
                    [[task, row["queries"], row["shortfall"], row["pairs"], *(row["grades"].get(g, 0) for g in grades),
                      _share(row["generated_share_of_top_grade"]),
                      _words(row)] for task, row in tasks.items()])
    if cost:
        money = f"${cost['dollars']:,.2f}" if cost.get("dollars") is not None else "(no --price given)"
        lines += ["", "## Cost", ""]
        lines += _table(["requests", "prompt tokens", "answer tokens", "dollars"],
                        [[cost["requests"], cost["prompt_tokens"], cost["completion_tokens"], money]])
    return "\n".join(lines) + "\n"
