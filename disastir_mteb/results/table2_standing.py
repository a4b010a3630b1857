"""Where a DisastIR-Test run stands among DMRetriever's Table 2, the only published table on DisastIR-Test.

A run is placed by the average of its six intent means, the authors' averaging; a run that lacks tasks is not.
"""

from __future__ import annotations

from disastir_mteb.results.published import published_source
from disastir_mteb.results.report_format import Block, Heading, Paragraph, Table
from disastir_mteb.results.result_sets import ResultSet
from disastir_mteb.vocabulary.taxonomy import INTENTS, Split

__all__ = ["standing_blocks"]

_SOURCE = "dmretriever-table2"
_MARK = "**this run**"


def _x100(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def standing_blocks(result: ResultSet) -> list[Block]:
    """The standing table of a Test set; nothing for the full set or DevLite."""
    if result.split is not Split.test:
        return []
    blocks: list[Block] = [Heading(f"{result.model.split('/')[-1]} among DMRetriever's Table 2 (DisastIR-Test)", 3)]
    intents = [result.grid.intent_mean(intent) for intent in INTENTS]
    overall = result.grid.overall()
    if overall is None or any(value is None for value in intents):
        return [*blocks, Paragraph(f"Not placed: the run has {len(result.scores)} of the 48 DisastIR-Test tasks, and "
                                   "Table 2 ranks by the mean over all of them.")]
    rows = [(record.overall or 0.0, [f"{hub_id} ({record.name})", *(_x100(record.intents.get(i)) for i in INTENTS),
                                     _x100(record.overall)]) for hub_id, record in published_source(_SOURCE)]
    rows.append((overall, [f"{_MARK} {result.model} — {result.setting}", *(_x100(v) for v in intents),
                           _x100(overall)]))
    rows.sort(key=lambda row: -row[0])
    rank = next(i for i, (_, cells) in enumerate(rows, 1) if cells[0].startswith(_MARK))
    blocks.append(Paragraph(f"Rank {rank} of {len(rows)} by the average (x100). Table 2 runs every model with the "
                            "dmretriever instructions and the colon template; a run with other instructions is placed, "
                            "not compared like for like."))
    blocks.append(Table(["#", "model", *(i.value for i in INTENTS), "avg"],
                        [[str(i), *cells] for i, (_, cells) in enumerate(rows, 1)]))
    return blocks
