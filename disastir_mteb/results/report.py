"""Reports on DisastIR result sets: tables, published numbers beside ours, figures, Markdown/CSV/HTML.

For each set, the 6 x 8 table of one metric with the paper's means of means and, where the model is in the
published tables of the same query set, the published numbers beside ours. The content is built once as blocks
and rendered to each format (:mod:`~disastir_mteb.results.report_format`), so the formats cannot drift apart.
Scores on generated data say so at the top and in every figure title: a sample number must never pass for a
DisastIR result.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path

from disastir_mteb.results.completed_view import CompletedView, completed_blocks
from disastir_mteb.results.grid import ScoreGrid
from disastir_mteb.results.metrics import MAIN_METRIC, Metric, get_metric
from disastir_mteb.results.provenance import NOT_RECORDED, provenance_of
from disastir_mteb.results.published import SOURCES, PublishedScores, published_for
from disastir_mteb.results.report_figures import (
    SYNTHETIC_NOTICE,
    bars_tag,
    benchmark_names,
    check_figure_options,
    heatmap_names,
    legend_labels,
    published_ticks,
    tagged,
    write_figures,
)
from disastir_mteb.results.report_format import (
    Block,
    Heading,
    Image,
    Notice,
    Paragraph,
    Table,
    render_html,
    render_markdown,
    render_text,
)
from disastir_mteb.results.result_sets import ResultSet, not_rescored
from disastir_mteb.results.table2_standing import standing_blocks
from disastir_mteb.util.atomic import write_text_atomic
from disastir_mteb.util.errors import InvalidInput, MissingPackage
from disastir_mteb.vocabulary.task_record import DATA_KEY
from disastir_mteb.vocabulary.taxonomy import (
    CATEGORIES,
    INTENTS,
    Intent,
    Split,
    get_spec,
    task_name,
)

__all__ = ["FORMATS", "build_report", "provenance_blocks", "report_text", "write_report"]

FORMATS = ("md", "csv", "html")


#: What a Test or DevLite set's heading adds, and the paragraph under it.
SPLIT_HEADINGS = {Split.test: "Test: 9,120 queries", Split.devlite: "DevLite: 480 queries, 10 per task"}
_SPLIT_NOTES = {
    Split.test: "Query set DisastIR-Test: the 9,120 queries outside DevLite (190 per task) over DisastIR's corpus, "
                "as in DMRetriever's Table 2; not comparable with full DisastIR runs or the DisastIR paper's numbers.",
    Split.devlite: "Query set DisastIR-DevLite: 480 queries (10 per task) over its own 9,316-passage corpus, the "
                   "DMRetriever authors' development set; no numbers are published per model. Its model rankings "
                   "agree with the full set's (the authors report Kendall's tau 0.90 overall, 0.73-0.91 per intent); "
                   "`disastir-mteb compare` measures it for DevLite and full runs of your models.",
}


def _x100(value: float | None) -> str:
    return f"{100 * value:.2f}" if value is not None else "–"


def _signed(value: float | None) -> str:
    return f"{100 * value:+.2f}" if value is not None else "–"


def _raw_setting(result: ResultSet) -> str:
    """The settings as mteb files them (``disastir_search=ann-hnsw-...``), for the record."""
    return ", ".join(f"{k}={v}" for k, v in sorted(result.experiment.items()))


def provenance_blocks(sets: Sequence[ResultSet]) -> list[Block]:
    """The "Provenance" section: one row per set, and a line naming which tasks hold which value where they differ."""
    found = [(result, provenance_of(result)) for result in sets]
    labels = [label.lower() for label, _ in found[0][1].fields()]
    blocks: list[Block] = [
        Heading("Provenance"),
        Paragraph("What each set's scores depend on besides the model, as its files record it (the plugin writes "
                  "its version, data and gain into every task file; instructions, search and precision are the "
                  f"run's settings). \"{NOT_RECORDED}\": files from before the record, or a run that does not keep "
                  "it; nothing is guessed."),
        Table(["model", *labels], [[_model_cell(result), *(value for _, value in record.fields())]
                                   for result, record in found])]
    for result, record in found:
        if conflicts := record.conflicts():
            blocks.append(Paragraph(f"{result.display_label}: its tasks disagree. {'. '.join(conflicts)}."))
    return blocks


def _model_cell(result: ResultSet) -> str:
    """The model, with its query set when that is not the full set: ``org/model (DisastIR-Test)``."""
    return result.model if result.is_disastir else f"{result.model} ({result.benchmark})"


def grid_table(grid: ScoreGrid, metric: Metric = MAIN_METRIC) -> Table:
    """The 6 x 8 table of ``metric`` (a built benchmark's: its intents and categories), means last."""
    categories = grid.categories()
    rows = [[intent.value, *(_x100(grid.cell(intent, c)) for c in categories), _x100(grid.intent_mean(intent))]
            for intent in grid.intents()]
    rows.append(["Mean", *(_x100(grid.category_mean(c)) for c in categories), _x100(grid.overall())])
    return Table([f"{metric.name} x100", *(c.value for c in categories), "Mean"], rows)


def _published_blocks(result: ResultSet, records: list[PublishedScores]) -> list[Block]:
    grid = result.grid
    ours = {**{i: grid.intent_mean(i) for i in INTENTS}, None: grid.overall()}
    groups: list[Intent | None] = [*INTENTS, None]
    rows = [["this run", *(_x100(ours[g]) for g in groups), "–"]]
    for record in records:
        theirs = {**record.intents, None: record.overall}
        rows.append([SOURCES[record.source], *(_x100(theirs.get(g)) for g in groups), _x100(record.ann_overall)])
        rows.append([f"this run − {record.source}",
                     *(_signed(ours[g] - theirs[g]) if ours[g] is not None and theirs.get(g) is not None else "–"
                       for g in groups), "–"])
    about = ("The authors' numbers for this model (x100) and this run minus them. Differences are expected "
             "when the instruction setting, the query set (DMRetriever's Table 2 uses DisastIR-Test) or the "
             "data (the bundled sample is synthetic) differ.")
    if result.split is Split.test:
        about = ("DMRetriever's Table 2 numbers for this model on DisastIR-Test (x100) and this run minus them. "
                 "Differences are expected when the instruction setting (Table 2: dmretriever instructions, colon "
                 "template), the precision or the data (the bundled sample is synthetic) differ.")
    blocks: list[Block] = [
        Heading("Published numbers", 3),
        Paragraph(about),
        Table(["source", *(i.value for i in INTENTS), "Avg", "ANN Avg"], rows)]
    appendix = next((r for r in records if r.tasks), None)
    if appendix is not None and appendix.tasks is not None:
        difference = {name: grid.scores[name] - appendix.tasks[name] for name in grid.scores if name in appendix.tasks}
        table = grid_table(ScoreGrid(difference))
        table.rows[:] = [[row[0], *(cell if cell == "–" else f"{float(cell):+.2f}" for cell in row[1:])]
                         for row in table.rows]
        blocks += [Paragraph(f"Per task, this run minus {SOURCES[appendix.source]}:"), table]
    return blocks


def build_report(sets: Sequence[ResultSet], *, figures: bool = True, title: str | None = None,
                 figure_format: str = "png", metric: str | Metric = MAIN_METRIC,
                 completed: Mapping[Path, CompletedView] | None = None) -> list[Block]:
    """The report's blocks for ``sets``; figure blocks name the files :func:`write_report` draws.

    ``completed`` maps a set's folder to its judge-completed NDCG@10, shown in its section as an estimate.

    Raises:
        ValueError: no result sets, an unknown metric, or one a set's task files lack.
    """
    if not sets:
        raise InvalidInput("No result sets to report on.")
    metric = get_metric(metric)
    grids = {id(result): result.grid_of(metric) for result in sets}
    if title is None:
        title = ("DisastIR report" + ("" if all(r.is_disastir for r in sets) else f": {benchmark_names(sets)}")
                 if any(r.built is None for r in sets) else f"{benchmark_names(sets)} report (built benchmark)")
    synthetic = [r for r in sets if r.synthetic]
    mixed = 0 < len(synthetic) < len(sets)

    def marked(text: str, result: ResultSet) -> str:  # the notice covers all sets; mark them only when mixed
        return tagged(text, result) if mixed else text

    blocks: list[Block] = [Heading(title, 1)]
    if synthetic:
        which = f" ({len(synthetic)} of {len(sets)} result sets, marked below)" if mixed else ""
        blocks.append(Notice(SYNTHETIC_NOTICE.removesuffix(".") + which + "."))
    blocks.append(Paragraph(f"{len(sets)} result set(s). {metric.name} x100; intent = mean of its 8 categories, "
                            "category = mean of its 6 intents, overall = mean of the 6 intents (the paper's "
                            "aggregation). '–' marks a task that was not evaluated and every mean that would need it."))
    if built := sorted({r.built for r in sets if r.built is not None}):
        blocks.append(Paragraph(f"Built benchmark{'s' if len(built) > 1 else ''} {', '.join(built)}: not DisastIR's "
                                "data, and never set beside its published numbers; its means are over the intents "
                                "and categories it has tasks of."))
    if not metric.is_main:
        blocks.append(Paragraph(f"The authors publish {MAIN_METRIC.name} only: no published numbers are set beside "
                                f"{metric.name}."))
    if unchecked := not_rescored([(result, result.scores) for result in sets], metric):
        blocks.append(Paragraph(unchecked))
    blocks += [
        Heading("Overview"),
        Table(["model", "setting", *(i.value for i in INTENTS), "Avg", "tasks"],
              [[r.model, marked(r.setting, r), *(_x100(grids[id(r)].intent_mean(i)) for i in INTENTS),
                _x100(grids[id(r)].overall()), f"{len(r.scores)}/{r.task_count}"] for r in sets])]
    if figures:
        ticks = " (black ticks: published)" if metric.is_main and published_ticks(legend_labels(sets)) else ""
        blocks.append(Image(f"intents.{figure_format}",
                            f"Per-intent {metric.name} of every result set{ticks}{bars_tag(sets)}."))
    blocks += provenance_blocks(sets)
    for result, heatmap_file in zip(sets, heatmap_names(sets), strict=True):
        raw = f" Settings as mteb files them: `{_raw_setting(result)}`." if result.experiment else ""
        heading = result.display_label + (f" ({SPLIT_HEADINGS[result.split]})" if result.split in SPLIT_HEADINGS
                                          else "")
        blocks += [Heading(marked(heading, result)),
                   Paragraph(f"Revision {result.revision}; {len(result.scores)} of {result.task_count} tasks; results "
                             f"in `{result.folder}`.{raw}")]
        if result.split in _SPLIT_NOTES:
            blocks.append(Paragraph(_SPLIT_NOTES[result.split]))
        if figures:
            blocks.append(Image(f"{heatmap_file}.{figure_format}",
                                tagged(f"{metric.name} of {result.display_label}", result) + "."))
        blocks.append(grid_table(grids[id(result)], metric))
        missing = [result.file_task(task_name(i, c)) for i in INTENTS for c in CATEGORIES
                   if task_name(i, c) not in result.scores and result.built is None]
        if missing:
            blocks.append(Paragraph(f"Missing ({len(missing)}): {', '.join(missing)}."))
        if metric.is_main and result.built is None:  # the authors publish the main score only, of DisastIR's data
            records = published_for(result.model, result.split)  # the same query set only
            blocks += _published_blocks(result, records) if records else []
            blocks += standing_blocks(result)  # a Test run among Table 2's models
        view = (completed or {}).get(result.folder)
        if view is not None:
            blocks += completed_blocks(view)
    return blocks


def report_text(sets: Sequence[ResultSet], *, metric: str | Metric = MAIN_METRIC,
                completed: Mapping[Path, CompletedView] | None = None, summary: bool = False) -> str:
    """What ``disastir-mteb report`` prints: the tables of :func:`build_report`; with ``summary``, up to the overview.

    Raises:
        ValueError: as :func:`build_report`.
    """
    blocks = build_report(sets, figures=False, metric=metric, completed=completed)
    if summary:
        overview = next(number for number, block in enumerate(blocks)
                        if isinstance(block, Heading) and block.text == "Overview")
        blocks = blocks[:overview + 2]  # the heading and its table
    return render_text(blocks)


def _csv(sets: Sequence[ResultSet], metric: Metric) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["model", "revision", "setting", "experiment", "search", "data", "synthetic", "task", "intent",
                     "category", metric.key])
    for result in sets:
        for name, score in sorted(result.scores_of(metric).items()):
            spec = get_spec(name)
            ours, recorded = (result.task_data(name) or {}).get("source"), result.task_record(name).get(DATA_KEY, "")
            source = ours or recorded if result.split is Split.full else recorded or ours  # a split task's own record
            if source and not source.startswith("hf:") and Path(source).is_absolute():
                source = f"local folder {Path(source).name}"  # a table people share: not this machine's paths
            synthetic = result.task_synthetic(name)
            writer.writerow([result.model, result.revision, result.setting, _raw_setting(result), result.search,
                             source, "" if synthetic is None else str(synthetic).lower(),  # "": not recorded
                             result.file_task(name), spec.intent.value, spec.category.value, f"{score:.5f}"])
    return buffer.getvalue()


def write_report(sets: Sequence[ResultSet], out: str | Path, *, formats: Sequence[str] = ("md",),
                 figure_formats: Sequence[str] | None = None, figure_titles: bool = True,
                 colour_scale: str = "data", metric: str | Metric = MAIN_METRIC,
                 completed: Mapping[Path, CompletedView] | None = None) -> list[Path]:
    """Write the report files (``report.md``, ``report.html``, ``scores.csv``) and figures into ``out``.

    Args:
        sets: the result sets.
        out: the folder to write into.
        formats: report files among :data:`FORMATS`.
        figure_formats: among ``png``, ``pdf``, ``svg``; default PNG for ``md`` and ``html`` where matplotlib is
            installed, else no figures. The reports embed the first of PNG and SVG asked (with PDF alone, a PNG too).
        figure_titles: False leaves the titles out (a paper's caption says it); the files' metadata keep them.
        colour_scale: the heatmaps' colours, as :func:`~disastir_mteb.results.plots.heatmap`'s.
        metric: mteb's key of the metric reported.
        completed: as :func:`build_report`'s, in the report files only.

    Returns:
        The files written.

    Raises:
        ValueError: an unknown format, figure format, colour scale or metric, a metric a set's task files lack, or
            no result sets; nothing is written then.
        ImportError: ``figure_formats`` given without matplotlib (the ``plots`` extra); nothing is written then.
    """
    from disastir_mteb.results.plots import figures_unavailable

    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise InvalidInput(f"Unknown report format(s) {unknown}; valid: {', '.join(FORMATS)}.")
    check_figure_options(figure_formats or (), colour_scale)
    missing = figures_unavailable() if figure_formats or any(f in ("md", "html") for f in formats) else None
    if figure_formats and missing is not None:
        raise MissingPackage(missing)
    out = Path(out)
    written: list[Path] = []
    embedded = any(f in ("md", "html") for f in formats) and missing is None  # no figures to embed without it
    kinds = list(dict.fromkeys(figure_formats or (["png"] if embedded else [])))
    shown = next((kind for kind in kinds if kind in ("png", "svg")), "png")
    if embedded and shown not in kinds:
        kinds.insert(0, shown)
    metric = get_metric(metric)
    blocks = build_report(sets, figures=embedded, figure_format=shown, metric=metric, completed=completed)
    if kinds:
        written += write_figures(sets, out, kinds=kinds, titles=figure_titles, colour_scale=colour_scale,
                                 metric=metric)
    renderers = {"md": ("report.md", lambda: render_markdown(blocks)),
                 "html": ("report.html", lambda: render_html(blocks)),
                 "csv": ("scores.csv", lambda: _csv(sets, metric))}
    for name in formats:
        file, render = renderers[name]
        written.append(write_text_atomic(out / file, render()))
    return written
