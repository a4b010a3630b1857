"""The one place the DisastIR leaderboard touches mteb's leaderboard app where mteb offers no setting.

``get_leaderboard_app`` takes results and nothing else; while :func:`patched` is active:

1. the menu (``GP_BENCHMARK_ENTRIES``, ``R_BENCHMARK_ENTRIES``) is the DisastIR one;
2. ``DEFAULT_BENCHMARK_NAME`` opens DisastIR;
3. ``MODEL_REGISTRY`` knows the rows' names (rows are an inner join on it), its caches cleared on entry and exit;
4. the tables drop ``_experiment_id`` (mteb's styling fails on it) and show every row;
5. ``__cg__`` group columns are renamed ``Mean (Intent: QAdoc)`` before mteb's humaniser mangles them;
6. mteb's leaderboard logs go where the caller's logging sends them, its analytics and tqdm bar silenced;
7. the scores follow the model column, its facts after them, so scores are in view at a laptop's width.

:func:`replace_blurb` and :func:`offline_footer` change the built app. A name a newer mteb lacks skips its step
with a warning (:func:`missing`); names checked on ``CHECKED_ON`` (:mod:`disastir_mteb.util.mteb_internals`). The
arguments that would replace this module are proposed in ``docs/upstream/leaderboard.md``.
"""

from __future__ import annotations

import functools
import importlib
import logging
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from disastir_mteb.util.patching import missing_names

__all__ = ["EXPERIMENT_COLUMN", "FOOTER_ID", "MTEB_BLURB_START", "REQUIRED", "ROW_PIXELS", "group_header", "missing",
           "offline_footer", "patched", "replace_blurb", "scores_first"]

EXPERIMENT_COLUMN = "_experiment_id"
ROW_PIXELS = 64
"""Height allowed per table row (two-line model names included)."""
MTEB_BLURB_START = "## Embedding Leaderboard"
"""How the Markdown of mteb's opening blurb starts (mteb 2.26: "This leaderboard compares 100+ text and image ...")."""
FOOTER_ID = "ack_markdown"
"""The ``elem_id`` of mteb's footer Markdown (its sponsors' acknowledgement)."""
_FACTS_AFTER = ("Release Date",)
"""Columns of model facts mteb puts after the scores already; they stay last."""

#: module -> the names used from it. The canary test checks each.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "mteb.leaderboard.app": ("GP_BENCHMARK_ENTRIES", "R_BENCHMARK_ENTRIES", "DEFAULT_BENCHMARK_NAME",
                             "get_leaderboard_app", "_cache_on_benchmark_select"),
    "mteb.leaderboard.benchmark_selector": ("DEFAULT_BENCHMARK_NAME",),
    "mteb.leaderboard.table": ("_apply_summary_table_styling", "_apply_per_task_table_styling"),
    "mteb.models.model_implementations": ("MODEL_REGISTRY",),
    "mteb.results.benchmark_results": ("tqdm",),
    "mteb.benchmarks._create_table": ("_static_model_meta", "_meta_df_no_zs", "_meta_df_with_zs",
                                      "_training_datasets_cached", "_zero_shot_pct_cached", "_EXPERIMENT_ID_COL",
                                      "_CUSTOM_GROUP_COL_PREFIX", "_STANDARD_META_COLS"),
}
_QUIET = ("mteb.leaderboard.event_logger",)
"""Loggers raised to ERROR while the app lives: mteb's hosted-leaderboard analytics, which warn offline."""

_CACHED = ("_static_model_meta", "_meta_df_no_zs", "_meta_df_with_zs", "_training_datasets_cached",
           "_zero_shot_pct_cached")


def missing() -> list[str]:
    """``module.name`` for each name of :data:`REQUIRED` the installed mteb lacks (empty when all are there)."""
    return missing_names(REQUIRED)


def _clear_caches() -> None:
    create_table = importlib.import_module("mteb.benchmarks._create_table")
    for name in _CACHED:
        getattr(getattr(create_table, name, None), "cache_clear", lambda: None)()
    cached = getattr(importlib.import_module("mteb.leaderboard.app"), "_cache_on_benchmark_select", None)
    cache = getattr(cached, "cache", None)
    if cache is not None:
        cache.clear()


@contextmanager
def _set(module: Any, name: str, value: Any) -> Iterator[None]:
    had = hasattr(module, name)
    old = getattr(module, name, None)
    setattr(module, name, value)
    try:
        yield
    finally:
        if had:
            setattr(module, name, old)
        else:
            delattr(module, name)


def group_header(column: str, prefix: str = "__cg__") -> str:
    """The header of a ``CustomGrouping`` column: ``__cg__Intent::QA`` -> ``Mean (Intent: QA)``; others unchanged."""
    if not column.startswith(prefix) or "::" not in column:
        return column
    grouping, label = column.removeprefix(prefix).split("::", 1)
    return f"Mean ({grouping}: {label})"


def scores_first(columns: Sequence[str], facts: Sequence[str]) -> list[str]:
    """``columns`` reordered: those up to ``Model``, then every score, then the model ``facts`` (module point 7).

    Examples:
        >>> scores_first(["Rank", "Model", "Zero-shot", "Mean (Task)", "Release Date"], ["Zero-shot", "Release Date"])
        ['Rank', 'Model', 'Mean (Task)', 'Zero-shot', 'Release Date']
    """
    if "Model" not in columns:
        return list(columns)
    lead = list(columns[:list(columns).index("Model") + 1])
    fact_columns = [column for column in columns if column in facts and column not in lead]
    return lead + [column for column in columns if column not in lead and column not in fact_columns] + fact_columns


def _styled_table(style: Callable[[Any], Any], *, summary: bool) -> Callable[[Any], Any]:
    create_table = importlib.import_module("mteb.benchmarks._create_table")
    prefix = getattr(create_table, "_CUSTOM_GROUP_COL_PREFIX", "__cg__")
    facts = (*getattr(create_table, "_STANDARD_META_COLS", ()), *_FACTS_AFTER)

    @functools.wraps(style)
    def styled(frame: Any) -> Any:
        frame = frame.drop(columns=[EXPERIMENT_COLUMN], errors="ignore")
        if summary:
            frame = frame[scores_first(list(frame.columns), facts)]
        table = style(frame.rename(columns={c: group_header(c, prefix) for c in frame.columns}))
        # Every row in view (the page scrolls, not the table): a browser renders only the rows in view,
        # and a user's run ranked below the 30 published models would otherwise be out of sight.
        height = ROW_PIXELS * (len(frame) + 2)
        if hasattr(table, "max_height"):
            table.max_height = height
            getattr(table, "constructor_args", {})["max_height"] = height  # what a callback's update sends
        return table
    return styled


@contextmanager
def _registered(metas: Sequence[Any]) -> Iterator[None]:
    registry: dict[str, Any] = importlib.import_module("mteb.models.model_implementations").MODEL_REGISTRY
    added = [meta for meta in metas if meta.name not in registry]
    registry.update({meta.name: meta for meta in added})
    try:
        yield
    finally:
        for meta in added:
            registry.pop(meta.name, None)


class _LastResort(logging.Handler):
    """WARNING and above to stderr when no logging is configured; its presence keeps mteb from adding one for INFO."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        """Hand the record to ``logging.lastResort`` unless the root logger has handlers (they get it anyway)."""
        if not logging.getLogger().handlers and logging.lastResort is not None:
            logging.lastResort.handle(record)


@contextmanager
def _quiet_logging() -> Iterator[None]:
    """Send mteb's leaderboard logs only where the caller's logging sends them (module point 6); restored on exit."""
    board = logging.getLogger("mteb.leaderboard")
    quiet = [logging.getLogger(name) for name in _QUIET]
    saved = board.level, [logger.level for logger in quiet]
    handler = _LastResort()
    board.addHandler(handler)
    for logger in quiet:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        board.removeHandler(handler)
        board.setLevel(saved[0])
        for logger, level in zip(quiet, saved[1], strict=True):
            logger.setLevel(level)


def replace_blurb(app: Any, markdown: str, *, title: str | None = None) -> bool:
    """Put ``markdown`` in place of mteb's opening blurb in the built ``app`` (and ``title`` on the browser tab).

    Call it before the app's Blocks context is entered again (leaving it rebuilds the page's config).

    Returns:
        False, with one warning, when mteb's blurb is not found (a newer mteb): the page keeps it.
    """
    import gradio

    if title is not None:
        app.title = title
    for block in app.blocks.values():
        if isinstance(block, gradio.Markdown) and str(block.value).lstrip().startswith(MTEB_BLURB_START):
            block.value = markdown
            return True
    warnings.warn(f"mteb's leaderboard app has no Markdown starting {MTEB_BLURB_START!r} any more; the DisastIR "
                  "page keeps mteb's own blurb. Please report this to disastir-mteb.", stacklevel=2)
    return False


def offline_footer(app: Any) -> bool:
    """Drop the images (logos fetched from the web) from mteb's footer in the built ``app``; False if it has none."""
    import gradio

    for block in app.blocks.values():
        if isinstance(block, gradio.Markdown) and getattr(block, "elem_id", None) == FOOTER_ID:
            text = re.sub(r"<img\b[^>]*>", "", str(block.value))
            block.value = re.sub(r"<div[^>]*>\s*(<a[^>]*>\s*</a>\s*)*</div>", "", text)  # the emptied logo row
            return True
    return False


@contextmanager
def patched(menu: Sequence[Any], default: str, metas: Sequence[Any]) -> Iterator[None]:
    """Mteb's leaderboard app showing ``menu`` (MenuEntry objects), opening on ``default``, knowing ``metas``."""
    with _quiet_logging(), _patched(menu, default, metas):
        yield


@contextmanager
def _patched(menu: Sequence[Any], default: str, metas: Sequence[Any]) -> Iterator[None]:
    lost = missing()  # imports mteb.leaderboard.app, whose event logger warns at import: after _quiet_logging
    if lost:
        import mteb

        warnings.warn(f"mteb {getattr(mteb, '__version__', '?')} changed its leaderboard app ({', '.join(lost)}); "
                      "the DisastIR leaderboard may lack its menu entry or rows. Please report this to disastir-mteb.",
                      stacklevel=3)
    app = importlib.import_module("mteb.leaderboard.app")
    selector = importlib.import_module("mteb.leaderboard.benchmark_selector")
    table = importlib.import_module("mteb.leaderboard.table")
    with ExitStack() as stack:
        if not {"mteb.leaderboard.app.GP_BENCHMARK_ENTRIES", "mteb.leaderboard.app.R_BENCHMARK_ENTRIES"} & set(lost):
            stack.enter_context(_set(app, "GP_BENCHMARK_ENTRIES", list(menu)))
            stack.enter_context(_set(app, "R_BENCHMARK_ENTRIES", []))
        for module in (app, selector):
            if hasattr(module, "DEFAULT_BENCHMARK_NAME"):
                stack.enter_context(_set(module, "DEFAULT_BENCHMARK_NAME", default))
        results = importlib.import_module("mteb.results.benchmark_results")
        if hasattr(results, "tqdm"):
            stack.enter_context(_set(results, "tqdm", functools.partial(results.tqdm, disable=True)))
        for name in ("_apply_summary_table_styling", "_apply_per_task_table_styling"):
            if hasattr(table, name):
                stack.enter_context(_set(table, name, _styled_table(getattr(table, name), summary="summary" in name)))
        stack.enter_context(_registered(metas))
        _clear_caches()
        stack.callback(_clear_caches)
        yield
