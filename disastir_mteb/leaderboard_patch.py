"""The one place the DisastIR leaderboard touches mteb's leaderboard app where mteb offers no setting.

``mteb.leaderboard.get_leaderboard_app(cache, rebuild, cache_repo_id)`` takes results and nothing
else. What it shows is fixed by module state of mteb 2.26, touched here and nowhere else:

1. **Menu.** The benchmark buttons come only from ``GP_BENCHMARK_ENTRIES`` and ``R_BENCHMARK_ENTRIES``
   (names bound in ``mteb.leaderboard.app``); the app also precomputes every benchmark in them, and a
   benchmark without results breaks that. The DisastIR menu replaces them while the app is built
   and served.
2. **First page.** ``DEFAULT_BENCHMARK_NAME`` (bound in ``mteb.leaderboard.app`` and
   ``...benchmark_selector``) is what opens, and what a link without ``?benchmark_name=`` opens.
3. **Model registry.** Rows appear only for names in ``MODEL_REGISTRY`` (an inner join); published rows
   and runs with settings have names of their own, registered for the app's lifetime. The caches mteb
   builds from the registry and per benchmark are cleared on entry and exit.
4. **Table styling.** mteb 2.26's summary styling rounds every column but a fixed list and fails on
   its own text column ``_experiment_id``. The rows carry their setting in their name (see
   :mod:`disastir_mteb.results.leaderboard_rows`), so the column is dropped before styling. The
   tables also get the height to show every row (mteb's is 500 px, about 8 rows).

Everything is restored on exit. :func:`missing` lists what a newer mteb no longer has; the canary test
fails on it, and :func:`patched` warns and skips that step instead of breaking.
"""

from __future__ import annotations

import functools
import importlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

__all__ = ["EXPERIMENT_COLUMN", "REQUIRED", "ROW_PIXELS", "missing", "patched"]

EXPERIMENT_COLUMN = "_experiment_id"
ROW_PIXELS = 64
"""Height allowed per table row (two-line model names included)."""

#: module -> the names used from it. The canary test checks each.
REQUIRED: Mapping[str, tuple[str, ...]] = {
    "mteb.leaderboard.app": ("GP_BENCHMARK_ENTRIES", "R_BENCHMARK_ENTRIES", "DEFAULT_BENCHMARK_NAME",
                             "get_leaderboard_app", "_cache_on_benchmark_select"),
    "mteb.leaderboard.benchmark_selector": ("DEFAULT_BENCHMARK_NAME",),
    "mteb.leaderboard.table": ("_apply_summary_table_styling", "_apply_per_task_table_styling"),
    "mteb.benchmarks._leaderboard_menu": ("MenuEntry",),
    "mteb.models.model_implementations": ("MODEL_REGISTRY",),
    "mteb.benchmarks._create_table": ("_static_model_meta", "_meta_df_no_zs", "_meta_df_with_zs",
                                      "_training_datasets_cached", "_zero_shot_pct_cached", "_EXPERIMENT_ID_COL"),
}

_CACHED = ("_static_model_meta", "_meta_df_no_zs", "_meta_df_with_zs", "_training_datasets_cached",
           "_zero_shot_pct_cached")


def missing() -> list[str]:
    """``module.name`` for each name of :data:`REQUIRED` the installed mteb lacks (empty when all are there)."""
    lost = []
    for module_name, names in REQUIRED.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            lost.append(module_name)
            continue
        lost += [f"{module_name}.{name}" for name in names if not hasattr(module, name)]
    return lost


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


def _without_experiment_column(style: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(style)
    def styled(frame: Any) -> Any:
        table = style(frame.drop(columns=[EXPERIMENT_COLUMN], errors="ignore"))
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


@contextmanager
def patched(menu: Sequence[Any], default: str, metas: Sequence[Any]) -> Iterator[None]:
    """Mteb's leaderboard app showing ``menu`` (MenuEntry objects), opening on ``default``, knowing ``metas``.

    A step whose mteb names are gone is skipped with one warning naming them (see :func:`missing`).
    """
    lost = missing()
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
        for name in ("_apply_summary_table_styling", "_apply_per_task_table_styling"):
            if hasattr(table, name):
                stack.enter_context(_set(table, name, _without_experiment_column(getattr(table, name))))
        stack.enter_context(_registered(metas))
        _clear_caches()
        stack.callback(_clear_caches)
        yield
