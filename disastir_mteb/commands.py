"""The ``disastir-mteb`` subcommands: each takes the parsed arguments, calls one module and prints the outcome.

They also set the process up (offline when the Hub cannot be reached, ``--data``, ``--quiet``) before anything
heavy is imported.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from disastir_mteb.util.errors import InvalidInput, MissingInput
from disastir_mteb.util.install_hint import require_extra

if TYPE_CHECKING:
    from disastir_mteb.results.completed_view import CompletedView
    from disastir_mteb.runner.run import Evaluation
    from disastir_mteb.util.timings import Timings

__all__ = ["compare", "demo", "export", "judge", "leaderboard", "report", "run", "sample",
           "seed", "stats", "submit", "tasks", "upstream"]

def _quiet() -> None:
    """``--quiet`` also silences the progress bars of datasets, transformers and the Hub client."""
    import datasets
    import huggingface_hub
    import transformers

    datasets.disable_progress_bars()
    huggingface_hub.utils.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def demo(args: argparse.Namespace) -> int:
    """``disastir-mteb demo``: the bundled model on the bundled sample, all 48 tasks, grid, report and timings."""
    from disastir_mteb.demo import run_demo

    timings_file = _timings_file(args.timings_json)
    if args.quiet:
        _quiet()
    run_demo(output_folder=args.output_folder, scale=args.scale, show_progress=not args.quiet,
             report=None if args.no_report else args.report,
             timings=None if timings_file is None else (lambda timings: _write_timings(timings_file, timings)))
    return 0


def run(args: argparse.Namespace) -> int:
    """``disastir-mteb run``: evaluate a model on the tasks, corpus encoded once, results in mteb's layout.

    Timed from here, so the libraries it imports count as ``startup``; ``--timings-json`` is checked first of all.
    """
    from disastir_mteb.runner.run_request import EmbeddingServersOptions, prepare_run
    from disastir_mteb.util.timings import run_clock
    from disastir_mteb.vocabulary.ann_params import ANN_OPTIONS
    from disastir_mteb.vocabulary.run_settings import RunSettings

    timings_file = _timings_file(args.timings_json)
    _ann_options_need_ann(args)
    if args.embeddings_url:  # the servers' client, before the data, mteb or a server is touched
        require_extra("openai", extra="servers", needed_by="--embeddings-url")
    with run_clock():
        # bad input is answered before mteb or torch is imported: option combinations, settings, names, folders
        if args.embeddings_revision and not args.embeddings_url:
            raise InvalidInput("--embeddings-revision pins a served model: pass it with --embeddings-url.")
        if args.model_revision and args.embeddings_url:
            raise InvalidInput("--model-revision names a model this process loads; a served model's revision is "
                               "--embeddings-revision.")
        ann_params = {option.field: getattr(args, option.dest) for option in ANN_OPTIONS
                      if getattr(args, option.dest) is not None}
        settings = RunSettings.from_options(  # every option checked here, before a library or a model loads
            search=args.search, ann_preset=args.ann_preset, ann_params=ann_params, instructions=args.instructions,
            template=args.template, instruct_passages=args.instruct_passages, batch_size=args.batch_size,
            precision=args.precision, devices=args.devices or "auto", tokenize_threads=args.tokenize_threads,
            cache_dir=False if args.no_cache else args.cache_dir, progress=not args.quiet,
            model_revision=args.model_revision)
        served = None if not args.embeddings_url else EmbeddingServersOptions(
            args.embeddings_url, revision=args.embeddings_revision, concurrency=args.embeddings_concurrency,
            key_env=args.api_key_env)
        names, source = prepare_run(args.model, args.tasks, args.benchmarks, split=args.split, data=args.data,
                                    devlite=args.devlite, extra_judgements=args.extra_judgements,
                                    keep_joins=not args.no_cache, served=served, as_options=True)
        if args.quiet:
            _quiet()
        from disastir_mteb.runner.run import run_evaluation  # after the checks: it imports mteb

        evaluation = run_evaluation(args.model, list(names.tasks), benchmarks=names.benchmarks, split=args.split,
                                    settings=settings, data=source, served=served,
                                    output_folder=args.output_folder, overwrite=args.overwrite,
                                    show_progress=not args.quiet, on_task_done=_task_line)
        _summarise(evaluation)
    print(evaluation.timings.to_text())
    if timings_file is not None:
        _write_timings(timings_file, evaluation.timings)
    return 0


def _ann_options_need_ann(args: argparse.Namespace) -> None:
    """``--ann-preset`` and every USearch option refused without ``--search ann``: exact search would ignore them.

    Raises:
        ValueError: naming each such option given, and what to add.
    """
    from disastir_mteb.vocabulary.ann_params import ANN_OPTIONS
    from disastir_mteb.vocabulary.run_settings import ANN

    given = [f"{flag} {value}" for flag, value in [("--ann-preset", args.ann_preset),
                                                   *((o.flag, getattr(args, o.dest)) for o in ANN_OPTIONS)]
             if value is not None]
    if given and args.search != ANN:
        raise InvalidInput(f"{', '.join(given)} {'apply' if len(given) > 1 else 'applies'} to --search ann, but the "
                           f"search is {args.search}: add --search ann, or leave {'them' if len(given) > 1 else 'it'} "
                           "out.")


def _timings_file(path: str | None) -> Path | None:
    """``--timings-json FILE`` checked before the run, by creating and removing a file in its folder (made if missing).

    Raises:
        ValueError: the path is a folder, lies under a file, or its folder cannot be written.
    """
    import tempfile

    if path is None:
        return None
    target = Path(path).expanduser()
    if target.is_dir():
        raise InvalidInput(f"--timings-json {path} is a folder; name a file, e.g. {target / 'timings.json'}.")
    existing = next(folder for folder in [target.parent, *target.parent.parents] if folder.exists())
    if not existing.is_dir():
        raise InvalidInput(f"--timings-json {path} cannot be written: {existing} is a file, not a folder; name a file "
                           "in a folder.")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as error:
        raise InvalidInput(f"--timings-json {path} cannot be written: {existing}: {error.strerror or error}; name a "
                           "file in a folder you can write to.") from None
    return target


def _write_timings(path: Path, timings: Timings) -> None:
    """Write the run's timings as JSON, atomically, and say where."""
    from disastir_mteb.util.atomic import write_json_atomic

    try:
        write_json_atomic(path, timings.as_dict())
    except OSError as error:  # after the run: its results are written, only the timings are not
        raise OSError(error.errno, f"the run's results are written, but its timings could not be ({error.strerror}): "
                      "--timings-json names a path that became unwritable during the run; the table above holds "
                      "the same figures", str(path)) from None
    print(f"Timings written to {path.resolve()}.")


def _task_line(task_result: object, seconds: float) -> None:
    """One line per task as it finishes, above the task bar."""
    from tqdm.auto import tqdm

    score = task_result.get_score()  # type: ignore[attr-defined]
    tqdm.write(f"{task_result.task_name:<24} ndcg@10 {100 * score:6.2f}  ({seconds:.1f} s)")  # type: ignore[attr-defined]


def _summarise(evaluation: Evaluation) -> None:
    """``run``'s grid per query set and its one-paragraph summary."""
    from disastir_mteb.results.grid import built_grids, grids_by_split
    from disastir_mteb.vocabulary.taxonomy import Split, benchmark_name

    for split, grid in grids_by_split(evaluation.result.task_results).items():  # the full set's as it always was
        print(grid.to_text("NDCG@10 x100" if split is Split.full else f"{benchmark_name(split)} NDCG@10 x100"))
    for name, grid in built_grids(evaluation.result.task_results).items():
        print(grid.to_text(f"{name} NDCG@10 x100"))
    print("\n".join(evaluation.summary()))


def _data_of_results(sets: list, data: str | None, command: str, *, tasks: list[str] | None = None) -> Path | None:
    """The data folder the result sets' runs read (None: the Hub's pinned revision), said in one line.

    ``--data`` (else ``DISASTIR_DATA_DIR``) wins; else the folder their result files record, checked unchanged, so a
    run made with ``--data`` need not be told again. The line goes to stdout for ``judge``, else to stderr.
    """
    from disastir_mteb.data.layout import DATA_DIR_ENV
    from disastir_mteb.results.data_used import choose_data
    from disastir_mteb.runner.data_source import data_source

    chosen = data_source(data, as_options=True).folder
    named = f"--data {data}" if data else (f"{DATA_DIR_ENV}={chosen}" if chosen else None)
    choice = choose_data(sets, chosen=chosen, chosen_as=named, tasks=tasks)
    if command == "judge":  # beside the job's plan and summary
        print(choice.line[0].upper() + choice.line[1:])
    else:  # beside the notes on the sets read, never inside the report
        print(f"disastir-mteb {command}: {choice.line}", file=sys.stderr)
    return choice.folder


def _completed_views(sets: list, args: argparse.Namespace) -> dict[Path, CompletedView] | None:
    """``--judgements STORE``: each full-set result set's completed NDCG@10 as plain numbers, or None without it.

    Computed here because the results layer never imports the judge; each judge's agreement goes beside its scores.
    """
    if not args.judgements:
        given = [flag for flag, value in (("--judge-model", args.judge_model),
                                          ("--prompt-version", args.prompt_version)) if value]
        if given:
            raise InvalidInput(f"{' and '.join(given)} pick judgements of a store: pass it with --judgements STORE.")
        return None
    from disastir_mteb.judging.completed import completed_views

    return completed_views(args.judgements, sets, judge_model=args.judge_model, prompt_version=args.prompt_version,
                           grade=args.completed_grade,
                           data_of=lambda full: _data_of_results(full, args.data, args.command))


def _say_unchecked(notes: list[str | None], command: str) -> None:
    """Each set's line on per-query files not re-scored against their data (data not at hand), on stderr, once."""
    for note in dict.fromkeys(note for note in notes if note):
        print(f"disastir-mteb {command}: {note}", file=sys.stderr)


def compare(args: argparse.Namespace) -> int:
    """``disastir-mteb compare``: two result sets side by side, or model rankings across query sets.

    Sets on different query sets give Kendall's tau between the model rankings; sets on one query set are paired and
    compared. One folder: its exact runs against its ANN runs, else its plain runs against its experiments.
    """
    from disastir_mteb.results.compare import pair_sets, pairing_text
    from disastir_mteb.results.pairing import choose_sides
    from disastir_mteb.results.result_sets import collect_result_sets

    def sets(path: str) -> list:
        found = collect_result_sets(path)
        if not found:
            raise MissingInput(f"{path} holds no DisastIR result files (DisastIR-*.json).")
        _say_unchecked([s.unchecked for s in found], "compare")
        return found

    sides = choose_sides(args.results, sets, metric=args.metric)
    if sides.agreements:
        print("\n\n".join(agreement.to_text() for agreement in sides.agreements))
        return 0
    if sides.aside:
        print(sides.aside, file=sys.stderr)
    completed = _completed_views([*sides.first, *sides.second], args)
    texts = []
    for split in sides.shared:  # one query set (always so before DisastIR-Test and DevLite): exactly the output it was
        pairing = pair_sets([s for s in sides.first if s.query_set == split],
                            [s for s in sides.second if s.query_set == split])
        text = pairing_text(pairing, metric=args.metric, completed=completed)
        texts.append(text if len(sides.shared) == 1 else f"{pairing.pairs[0][0].benchmark}:\n{text}")
    print("\n\n".join(texts))
    return 0


def report(args: argparse.Namespace) -> int:
    """``disastir-mteb report``: tables, published numbers and figures for any result sets."""
    from disastir_mteb.results.report import report_text, write_report
    from disastir_mteb.results.result_sets import collect_result_sets

    sets = [result for path in args.results for result in collect_result_sets(path)]  # every query set
    if args.model:
        sets = [s for s in sets if any(m.lower() in s.model.lower() for m in args.model)]
    if not sets:
        wanted = f" for model(s) {', '.join(args.model)}" if args.model else ""
        raise MissingInput(f"No DisastIR result sets{wanted} under {', '.join(args.results)}.")
    figures = {"--figure-format": args.figure_format, "--no-figure-title": args.no_figure_title,
               "--colour-scale": args.colour_scale != "data"}
    if not args.out and any(figures.values()):
        flags = [flag for flag, given in figures.items() if given]
        raise InvalidInput(f"{' and '.join(flags)} {'shape' if len(flags) > 1 else 'shapes'} the figures written with "
                           "--out; pass --out DIR.")
    _say_unchecked([s.unchecked for s in sets], "report")
    completed = _completed_views(sets, args)
    print(report_text(sets, metric=args.metric, completed=completed, summary=bool(args.out)), end="")
    if args.out:  # the terminal gets the overview; the whole report is in the files
        from disastir_mteb.results.plots import figures_unavailable

        formats = args.format or ["md", "csv"]
        written = write_report(sets, args.out, formats=formats, figure_formats=args.figure_format,
                               figure_titles=not args.no_figure_title, colour_scale=args.colour_scale,
                               metric=args.metric, completed=completed)
        heatmaps = sum(p.name.startswith("heatmap-") for p in written)
        print(f"\nThe whole report (each set's grid, provenance, published numbers, missing tasks)"
              f"{' and its figures' if heatmaps else ''}: {len(written)} file(s) in {Path(args.out).resolve()}: "
              f"{', '.join(sorted({p.name for p in written if not p.name.startswith('heatmap-')}))} "
              f"and {heatmaps} heatmap file(s).")
        if not heatmaps and {"md", "html"} & set(formats) and (missing := figures_unavailable()) is not None:
            print(f"disastir-mteb report: written without figures. {missing}", file=sys.stderr)
    return 0


def submit(args: argparse.Namespace) -> int:
    """``disastir-mteb submit``: copy result sets into a results-repository layout and check them."""
    from disastir_mteb.submission.submit import submit, validate_submission

    if args.check:
        problems = validate_submission(args.out)
        for problem in problems:
            print(problem)
        errors = sum(problem.severity == "error" for problem in problems)
        print(f"{args.out}: {errors} error(s), {len(problems) - errors} warning(s).")
        return 1 if errors else 0
    if not args.results:
        raise InvalidInput("submit needs a results folder (or --check to validate OUT only).")
    report = submit(args.results, args.out, model=args.model, overwrite=args.overwrite)
    _say_unchecked(list(report.notes), "submit")
    print(report.to_text())
    return 0 if report.ok else 1


def export(args: argparse.Namespace) -> int:
    """``disastir-mteb export``: the tasks as BEIR folders or an mteb-native dataset."""
    import time

    from disastir_mteb.exports import export_beir, export_mteb
    from disastir_mteb.runner.data_source import data_source

    source = data_source(args.data, as_options=True)
    if args.quiet:
        _quiet()
    say = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    started = time.perf_counter()
    judge_options = [flag for flag, value in (("--judgements", args.judgements), ("--judge-model", args.judge_model),
                                              ("--prompt-version", args.prompt_version),
                                              ("--round-grades", args.round_grades)) if value]
    if args.format != "qrels-with-added" and judge_options:
        raise InvalidInput(f"{', '.join(judge_options)} apply to --format qrels-with-added.")
    if args.format == "qrels-with-added":
        from disastir_mteb.judging.qrels_export import export_store

        if not args.judgements or not Path(args.judgements).is_file():
            missing = f" ({args.judgements} is not a file)" if args.judgements else ""
            raise InvalidInput("--format qrels-with-added needs --judgements STORE, a judgement store written by "
                               f"disastir-mteb judge{missing}.")
        if args.gain is not None:
            raise InvalidInput("--gain applies to --format beir; qrels_with_added holds the grades themselves.")
        written = export_store(args.judgements, args.out, judge_model=args.judge_model,
                               prompt_version=args.prompt_version, data=source, tasks=args.tasks,
                               rounded=args.round_grades, overwrite=args.overwrite)
        print(written.describe())
        print(f"Wrote the completed judgements to {written.folder.resolve()} in {time.perf_counter() - started:.1f} s; "
              f"a run reads them only when asked: disastir-mteb run ... --extra-judgements {written.folder.resolve()}"
              + ("." if args.round_grades else " (it takes integers: export with --round-grades)."))
        return 0
    if args.format == "beir":
        folders = export_beir(args.out, args.tasks, gain=args.gain, overwrite=args.overwrite, progress=say,
                              data=source)
        what = f"{len(folders)} BEIR task folder(s)"
    else:
        if args.gain is not None:
            raise InvalidInput("--gain applies to --format beir; the mteb export stores the exponential gain "
                               "in 'score' and the raw grade in 'grade'.")
        export_mteb(args.out, args.tasks, overwrite=args.overwrite, progress=say, data=source)
        what = "an mteb-native Hugging Face dataset"
    print(f"Wrote {what} to {Path(args.out).resolve()} in {time.perf_counter() - started:.1f} s.")
    return 0


def _go_ahead(plan_text: str, requests: int, settings: Any) -> bool:
    """Whether to send ``requests`` requests: yes under --confirm-above or --yes; else ask a terminal, never wait.

    ``settings`` has ``yes`` and ``confirm_above`` (the judge's and the build's settings alike).
    """
    import os

    if settings.yes or requests <= settings.confirm_above:
        return True
    if not sys.stdin.isatty() or os.environ.get("CI"):
        raise InvalidInput(f"{requests:,} requests is more than --confirm-above {settings.confirm_above:,}, and "
                           "there is "
                           "no terminal to ask: rerun with --yes to go ahead (or raise --confirm-above).")
    answer = input(f"{plan_text}\nSend {requests:,} requests? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def judge(args: argparse.Namespace) -> int:
    """``disastir-mteb judge``: the result sets' unjudged top-10 pairs, judged with the authors' protocol.

    Result sets without per-query rankings (plain ``mteb run``) have no holes to find: one sentence and exit 2.
    """
    from disastir_mteb.judging.holes import rankings_held, result_sets_of
    from disastir_mteb.judging.holes_job import judge_holes
    from disastir_mteb.judging.settings import JudgeSettings
    from disastir_mteb.judging.store import default_store_path

    if not (args.batch_requests or args.batch_results) and not args.base_url:
        raise InvalidInput("Name a server with --base-url (e.g. http://127.0.0.1:8000/v1), or write Batch API files "
                           "with --batch-requests FILE.")
    settings = JudgeSettings.from_options(args)  # the one value the holes job and the agreement check share
    result_sets = result_sets_of(args.results)
    considered, without = rankings_held(result_sets, args.tasks)
    if not considered:
        held = sorted({task for result_set in result_sets for task in result_set.scores})
        shown = ", ".join(held[:6]) + (", ..." if len(held) > 6 else "")
        raise InvalidInput(f"None of --tasks {' '.join(args.tasks or [])} is a task of the result sets under "
                           f"{', '.join(args.results)} (they hold {shown}).")
    no_rankings = (f"{', '.join(args.results)} hold{'s' if len(args.results) == 1 else ''} no per-query rankings "
                   f"({len(without)} task(s), e.g. {without[0]}), so there are no holes to judge: the top 10 of each "
                   "query is written by disastir-mteb run (beside each task file, in disastir_per_query/), not by "
                   "plain mteb run; run the model with disastir-mteb run -m MODEL, then judge its results."
                   if len(without) == considered else None)
    if no_rankings and not args.agreement:
        raise InvalidInput(no_rankings)
    data = _data_of_results(result_sets, args.data, "judge", tasks=args.tasks)
    store_path = Path(args.store) if args.store else default_store_path()
    code = judge_holes(result_sets, settings=settings, store_path=store_path, data=data,
                       go_ahead=lambda text, requests: _go_ahead(text, requests, settings),
                       without_rankings=without, considered=considered, agreement=args.agreement,
                       fill_anyway=args.fill_anyway, batch_requests=args.batch_requests,
                       batch_results=args.batch_results, quiet=args.quiet,
                       warn=lambda line: print(line, file=sys.stderr))
    if no_rankings:
        print(f"disastir-mteb judge: {no_rankings}", file=sys.stderr)
    return code


def judge_study(args: argparse.Namespace) -> int:
    """``disastir-mteb judge-study``: the leave-one-run-out pool study (:mod:`disastir_mteb.judging.pool_study`)."""
    from disastir_mteb.judging.holes import result_sets_of
    from disastir_mteb.judging.pool_study import run_study
    from disastir_mteb.judging.settings import JudgeSettings
    from disastir_mteb.judging.store import JudgementStore, default_store_path

    if not args.base_url:
        raise InvalidInput("Name a judge server with --base-url (e.g. http://127.0.0.1:8080/v1).")
    settings = JudgeSettings.from_options(args)
    result_sets = result_sets_of(args.results)
    data = _data_of_results(result_sets, args.data, "judge", tasks=args.tasks)
    with JudgementStore(Path(args.store) if args.store else default_store_path()) as store:
        study = run_study(result_sets, store=store, settings=settings, data_dir=data, grade=args.completed_grade,
                          go_ahead=lambda text, requests: _go_ahead(text, requests, settings), json_path=args.json)
    return 0 if study is not None else 1


def leaderboard(args: argparse.Namespace) -> int:
    """``disastir-mteb leaderboard``: mteb's leaderboard app over the result folders, offline."""
    from disastir_mteb.leaderboard.app import serve

    results = args.results
    if results == ["results"] and not Path("results").exists() and not args.no_published:  # the default, not there yet
        results = []
        print("No ./results folder: showing the published models only (run `disastir-mteb demo` to add a run).",
              file=sys.stderr)
    serve(results, host=args.host, port=args.port, published=not args.no_published, screenshot_to=args.screenshot,
          screenshot_width=args.screenshot_width)
    return 0


def upstream(args: argparse.Namespace) -> int:
    """``disastir-mteb upstream``: the mteb-side files of DisastIR, written into an mteb checkout."""
    from disastir_mteb.exports.upstream import write_upstream

    result = write_upstream(args.mteb, revision=args.revision, dataset_path=args.dataset, stats_dir=args.stats)
    print(result.to_text())
    return 0


def sample(args: argparse.Namespace) -> int:
    """``disastir-mteb sample``: write the synthetic dataset in the published layout."""
    import time

    from disastir_mteb.sample.generator import write_sample

    started = time.perf_counter()
    out = write_sample(args.out, scale=args.scale, seed=args.seed, overwrite=args.overwrite,
                       progress=None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True)))
    print(f"Wrote the {args.scale} synthetic DisastIR sample to {out} in {time.perf_counter() - started:.1f} s.")
    if getattr(args, "devlite", None):  # a DisastIR-DevLite folder split from it (benchmark.sample_devlite)
        from disastir_mteb.data.devlite_layout import DEVLITE_DIR_ENV
        from disastir_mteb.data.layout import DATA_DIR_ENV
        from disastir_mteb.sample.devlite import write_devlite_sample

        devlite = write_devlite_sample(out, args.devlite_out or f"{out}-devlite", layout=args.devlite, seed=args.seed,
                                       overwrite=args.overwrite)
        print(f"Wrote its DevLite folder ({args.devlite} layout) to {devlite}; use {DATA_DIR_ENV}={out} "
              f"{DEVLITE_DIR_ENV}={devlite}.")
    return 0


def stats(args: argparse.Namespace) -> int:
    """``disastir-mteb stats``: descriptive statistics, the paper's or recomputed from the data."""
    from disastir_mteb.tasks.statistics import compute_statistics, paper_statistics
    from disastir_mteb.util.atomic import write_json_atomic
    from disastir_mteb.vocabulary.taxonomy import TASK_NAMES

    out = Path(args.out)
    if args.paper:
        shipped = paper_statistics()
        for name, stats in shipped.items():
            write_json_atomic(out / f"{name}.json", stats)
        print(f"Wrote the published statistics of {len(shipped)} tasks (full, Test, DevLite; each number's source "
              f"under 'provenance') to {out}.")
        return 0
    names = args.tasks or list(TASK_NAMES)
    written = compute_statistics(names, out)
    print(f"Wrote mteb descriptive statistics of {len(written)} task(s) to {out}.")
    return 0


def tasks(args: argparse.Namespace) -> int:
    """``disastir-mteb tasks``: the task names by intent and category; a built benchmark's with --data."""
    import disastir_mteb

    if args.data:
        from disastir_mteb.data.layout import find_task_files
        from disastir_mteb.tasks.built import read_built
        from disastir_mteb.vocabulary.taxonomy import parse_category, parse_intent

        built = read_built(args.data)
        intents = {parse_intent(name) for name in args.intents or []}
        categories = {parse_category(name) for name in args.categories or []}
        specs = find_task_files(built.folder).built_specs
        for spec, task in zip(specs, built.task_classes.values(), strict=True):
            if (not intents or spec.intent in intents) and (not categories or spec.category in categories):
                print(f"{task.metadata.name:<22} {task.metadata.prompt['query']}")  # type: ignore[index]
        return 0
    for task in disastir_mteb.get_tasks(args.intents or None, args.categories or None):
        print(f"{task.metadata.name:<22} {task.metadata.prompt['query']}")  # type: ignore[index]
    return 0


def seed(args: argparse.Namespace) -> int:
    """``disastir-mteb seed-model-cache``: put the bundled MiniLM into a Hugging Face cache folder."""
    from disastir_mteb.data.layout import DATA_DIR_ENV
    from disastir_mteb.models.bundled import BUNDLED_MODEL, seed_hf_cache

    snapshot = seed_hf_cache(args.hub_cache)
    print(f"Seeded {BUNDLED_MODEL} into {snapshot}; run mteb with HF_HUB_CACHE={args.hub_cache} HF_HUB_OFFLINE=1, "
          f"and {DATA_DIR_ENV}=<data folder> unless the dataset is in that cache (`disastir-mteb sample --out DIR` "
          f"writes synthetic data to try with).")
    return 0


def build(args: argparse.Namespace) -> int:
    """``disastir-mteb build``: a benchmark from the documents in DOCS (:mod:`disastir_mteb.building`)."""
    import tempfile

    from disastir_mteb.building.build import BuildSettings, run_build
    from disastir_mteb.judging.job import Price
    from disastir_mteb.runner.build_pool import RunnerRetrievers
    from disastir_mteb.vocabulary.taxonomy import parse_intent

    for module in ("datasketch", "semchunk"):
        require_extra(module, extra="build", needed_by="disastir-mteb build")
    require_extra("openai", extra="judge", needed_by="disastir-mteb build")
    if args.batch_results and not args.batch_requests:
        raise InvalidInput("--batch-results needs --batch-requests FILE too: a build goes on to its next round of "
                           "requests after reading the last one's answers.")
    if not (args.base_url or args.batch_requests):
        raise InvalidInput("Name the generation model's server with --base-url (e.g. http://127.0.0.1:8000/v1), or "
                           "write Batch API files with --batch-requests FILE.")
    intents = tuple(dict.fromkeys(parse_intent(name.strip()) for name in args.intents.split(",") if name.strip()))
    settings = BuildSettings(
        docs=Path(args.docs), out=Path(args.out), name=args.name, model=args.model, base_urls=tuple(args.base_url),
        judge_model=args.judge_model or args.model, judge_urls=tuple(args.judge_base_url or args.base_url),
        pool_models=tuple(m.strip() for m in args.pool_models.split(",") if m.strip()), intents=intents,
        queries_per_task=args.queries_per_task, categories=args.categories, seed=args.seed, licence=args.licence,
        redact=args.redact, price=Price.parse(args.price) if args.price else None, until=args.until, yes=args.yes,
        quality=not args.no_quality_control, min_logprob=args.min_logprob, max_file_mb=args.max_file_mb,
        concurrency=args.concurrency, timeout=args.timeout, api_key_env=args.api_key_env,
        confirm_above=args.confirm_above, store=Path(args.store) if args.store else None,
        anchors=Path(args.anchor_queries) if args.anchor_queries else None, progress=not args.quiet,
        batch_requests=Path(args.batch_requests) if args.batch_requests else None,
        batch_results=Path(args.batch_results) if args.batch_results else None)
    with tempfile.TemporaryDirectory(prefix="disastir-build-pool-") as results:
        retrievers = RunnerRetrievers(settings.pool_models, results=Path(results), show_progress=not args.quiet)
        out = run_build(settings, retrievers, say=print,
                        confirm=lambda plan, requests: _go_ahead(plan, requests, settings))
    if out is not None:
        print(f"Run it: disastir-mteb run -m MODEL --data {out}   (report: {out / 'report.md'})")
    return 0


def build_study(args: argparse.Namespace) -> int:
    """``disastir-mteb build-study``: two benchmarks' rankings of the same models (``building.study``)."""
    import tempfile

    from disastir_mteb.building.study import rank_agreement
    from disastir_mteb.runner.build_pool import per_query_scores
    from disastir_mteb.util.atomic import write_json_atomic

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if len(models) < 3:
        raise InvalidInput(f"--models names {len(models)} model(s); a ranking study needs three or more.")
    with tempfile.TemporaryDirectory(prefix="disastir-build-study-") as scratch:
        root = Path(args.output_folder) if args.output_folder else Path(scratch)
        scores = {name: {model: per_query_scores(model, Path(folder), root / name, show_progress=not args.quiet)
                         for model in models} for name, folder in (("reference", args.reference),
                                                                   ("built", args.built))}
    study = rank_agreement(scores["reference"], scores["built"], resamples=args.resamples, seed=args.seed)
    print(f"{'model':<40} {'reference':>10} {'built':>10}")
    for model in sorted(study.models, key=lambda name: -study.reference[name]):
        print(f"{model:<40} {study.reference[model]:>10.4f} {study.built[model]:>10.4f}")
    print(study.describe())
    if args.json:
        write_json_atomic(args.json, study.as_dict())
    return 0

