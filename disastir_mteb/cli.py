"""The ``disastir-mteb`` command: argument parsing only; the subcommands are in :mod:`disastir_mteb.commands`."""

from __future__ import annotations

import argparse
import errno
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import NoReturn

from disastir_mteb import commands
from disastir_mteb.building.stages import CONCURRENCY as BUILD_CONCURRENCY
from disastir_mteb.building.stages import STAGES
from disastir_mteb.endpoints.pool import DEFAULT_EMBEDDING_CONCURRENCY, DEFAULT_KEY_ENV
from disastir_mteb.endpoints.urls import check_base_url
from disastir_mteb.judging.settings import JudgeSettings
from disastir_mteb.judging.store import JUDGEMENT_STORE_NAME
from disastir_mteb.leaderboard.browser import SCREENSHOT_WIDTH
from disastir_mteb.results.metrics import MAIN_METRIC
from disastir_mteb.util.errors import DisastirError, InvalidInput
from disastir_mteb.vocabulary.ann_params import ANN_OPTIONS, DEFAULT_PRESET
from disastir_mteb.vocabulary.instructions import INSTRUCTION_SETS, TEMPLATES
from disastir_mteb.vocabulary.run_settings import ANN
from disastir_mteb.vocabulary.settings import (
    BUILT_IN_MODELS,
    DEFAULT_BATCH_SIZE,
    DEFAULT_OUTPUT_FOLDER,
    EXACT,
    PRECISIONS,
)
from disastir_mteb.vocabulary.taxonomy import canonical_benchmark_name, canonical_task_name

__all__ = ["main"]

def _at_least(lowest: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``lowest`` (argparse names the option in its one-line error)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lowest}, not {text!r}") from None
        if value < lowest:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lowest}, not {value}")
        return value

    return parse


def _seconds(text: str) -> float:
    """An argparse type: a positive, finite number of seconds (0, a negative number or nan would never end a wait)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number of seconds, not {text!r}")
    return value


#: Where the commands that read results find their data without --data (disastir_mteb.results.data_used).
_RUNS_DATA = ("default: DISASTIR_DATA_DIR, else the folder the runs read as their result files record it, checked to "
              "hold the same files, else the Hub; checked against the result files either way")


def _judgement_options(parser: argparse.ArgumentParser) -> None:
    """``--judgements STORE`` and what picks them: the completed NDCG@10 of ``report`` and ``compare``."""
    parser.add_argument("--judgements", default=None, metavar="STORE",
                        help="a judgement store (disastir-mteb judge --store): show the completed NDCG@10 (published "
                             "judgements plus the store's, where none was published) beside the official one; a "
                             "per-study estimate, never a leaderboard number")
    parser.add_argument("--judge-model", default=None,
                        help="with --judgements: only this judge model's judgements (needed when two judged one pair)")
    parser.add_argument("--prompt-version", default=None,
                        help="with --judgements: only judgements of this prompt version")
    parser.add_argument("--completed-grade", choices=["hard", "expected"], default="hard",
                        help="with --judgements: the grade each judgement adds: hard (default: the methods' vote, as "
                             "the authors grade) or expected (the expected grade of the judge's grade "
                             "probabilities, where the server gave logprobs); the report says which")
    parser.add_argument("--data", help="with --judgements: the data the runs read, a folder in the published layout "
                                       f"or 'sample' ({_RUNS_DATA})")


def _judge_server_options(parser: argparse.ArgumentParser) -> None:
    """The judge model, its servers, its store and when to ask before sending: ``judge`` and ``judge-study`` alike."""
    parser.add_argument("--model", required=True, help="the judge model as the server names it (e.g. gpt-4o-mini)")
    parser.add_argument("--base-url", action="append", default=[], dest="base_url",
                        help="an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1 for vLLM; "
                             "https://api.openai.com/v1 for OpenAI); repeat it to share the work between servers")
    parser.add_argument("--store", default=None,
                        help=f"the judgement store (default: {JUDGEMENT_STORE_NAME} in the cache folder, "
                             "DISASTIR_CACHE_DIR); every answer is kept there, so a killed job resumes and nothing is "
                             "asked twice")
    _sending_options(parser, concurrency=JudgeSettings.concurrency)


def _sending_options(parser: argparse.ArgumentParser, *, concurrency: int) -> None:
    """How requests go to chat servers and when to ask first: the judge's commands and ``build`` alike."""
    parser.add_argument("--concurrency", type=_at_least(1), default=concurrency,
                        help=f"requests in flight per server (default {concurrency})")
    parser.add_argument("--timeout", type=_seconds, default=JudgeSettings.timeout,
                        help=f"seconds a try waits for the server's answer to begin, and then for all of it "
                             f"(default {JudgeSettings.timeout:g})")
    parser.add_argument("--api-key-env", default=DEFAULT_KEY_ENV,
                        help=f"the environment variable holding the key (default {DEFAULT_KEY_ENV}); never a file "
                             "or an option, so it stays out of shell history and logs")
    parser.add_argument("--price", default=None, metavar="IN,OUT",
                        help="US dollars per million input and output tokens, for the cost estimate (e.g. 0.15,0.60)")
    parser.add_argument("--confirm-above", type=_at_least(0), default=JudgeSettings.confirm_above, metavar="REQUESTS",
                        help=f"ask before sending more requests than this (default {JudgeSettings.confirm_above}); "
                             "without a terminal the "
                             "job stops instead of asking, unless --yes")
    parser.add_argument("--yes", action="store_true", help="never ask: go ahead whatever the estimate")


def _timings_option(parser: argparse.ArgumentParser) -> None:
    """``--timings-json FILE``: where the run's time went, as JSON (the table is printed either way)."""
    parser.add_argument("--timings-json", default=None, metavar="FILE",
                        help="also write the table of where the time went as JSON: {\"phases\": {name: seconds}, "
                             "\"total\": seconds, \"passages_encoded\": n, \"queries_encoded\": n, \"device\": "
                             "..., \"peak_rss_bytes\": n} (the phases add up to the total)")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("disastir-mteb")
    except PackageNotFoundError:  # a source tree on sys.path, not installed
        return "unknown (not installed)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are one sentence, without the whole usage; ``--help`` still prints it."""

    #: the commands' parsers by name (set on the top parser): an unknown option is said by its command's parser
    commands: Mapping[str, argparse.ArgumentParser] = MappingProxyType({})

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """argparse's, except that unrecognized arguments are said by the command's parser (its name, its help)."""
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            self.commands.get(getattr(parsed, "command", ""), self).error(
                f"unrecognized arguments: {' '.join(unknown)}")
        return parsed

    def error(self, message: str) -> NoReturn:
        """Print ``disastir-mteb COMMAND: <message> (see disastir-mteb COMMAND --help).`` and exit 2."""
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help).\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``disastir-mteb``."""
    parser = _Parser(prog="disastir-mteb", description="DisastIR benchmark tools for mteb.")
    parser.add_argument("--version", action="version", version=f"disastir-mteb {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="Evaluate the bundled small model on the sample data (offline), print "
                                       "the grid, write a report with its heatmap.")
    demo.add_argument("--output-folder", default=DEFAULT_OUTPUT_FOLDER,
                      help=f"mteb results folder (default: ./{DEFAULT_OUTPUT_FOLDER})")
    demo.add_argument("--scale", default="small", choices=["small", "full"], help="sample size (default: small)")
    demo.add_argument("--report", default="report", help="folder for the report and heatmap (default: ./report)")
    demo.add_argument("--no-report", action="store_true", help="print the grid only")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    _timings_option(demo)
    demo.set_defaults(func=commands.demo)

    run = sub.add_parser("run", help="Evaluate a model on DisastIR tasks (corpus encoded once), optionally with "
                                     "per-intent instructions; exact or USearch ANN search.")
    run.add_argument("-m", "--model", required=True,
                     help="a model name for mteb.get_model (HF cache or Hub), a local model folder, or one of "
                          + "; ".join(f"'{name}': {what}" for name, what in BUILT_IN_MODELS.items()))
    run.add_argument("-t", "--tasks", nargs="*", help="task names (default: all 48 of the split; with a built "
                                                      "benchmark as --data, all its tasks)")
    run.add_argument("-b", "--benchmarks", nargs="*",
                     help="benchmark names, e.g. DisastIR, DisastIR-QA, DisastIR-Test or DisastIR-DevLite (or a built "
                          "benchmark's, with its folder as --data)")
    run.add_argument("--split", default=None, choices=["full", "test", "devlite"],
                     help="query set: full (the 9,600 queries; default), test (DisastIR-Test: 9,120 queries, "
                          "DMRetriever's Table 2) or devlite (DisastIR-DevLite: 480 queries over its own corpus); "
                          "full-set names from -t/-b become the split's. Without it, -t/-b names select their own "
                          "split; each corpus is encoded once")
    run.add_argument("--instructions", default=None,
                     help=f"{' | '.join(INSTRUCTION_SETS)} (default: the model as it is, like `mteb run`)")
    run.add_argument("--template", default=None,
                     help=f"{' | '.join(TEMPLATES)} | a format string with {{instruction}} and {{query}} "
                          "(default: the set's published template)")
    run.add_argument("--instruct-passages", action="store_true", help="also instruct passages (the authors never do)")
    run.add_argument("--search", default=EXACT, choices=[EXACT, ANN],
                     help="exact (default) or ann: USearch HNSW, one index for all tasks, results filed apart")
    run.add_argument("--ann-preset", default=None,
                     help=f"with --search ann, like each USearch option below (refused without it): {DEFAULT_PRESET} "
                          "(the default; the DisastIR setting: ip, f32, M=16, efC=128, ef=64, k=10; one thread, "
                          "repeatable) | exact | f16 | i8 | b1 (quantised, exact rescoring)")
    for option in ANN_OPTIONS:
        run.add_argument(option.flag, type=option.kind, default=None, help=option.help)
    run.add_argument("--data", help="a folder in the published layout (a built benchmark's too: its tasks are named "
                                    "after it), or 'sample' for the bundled sample (default: DISASTIR_DATA_DIR or the "
                                    "Hub)")
    run.add_argument("--devlite", help="a DisastIR-DevLite folder, for --split test/devlite (default: "
                                       "DISASTIR_DEVLITE_DIR or the Hub; with --data sample, the sample's)")
    run.add_argument("--extra-judgements", default=None, metavar="FOLDER",
                     help="also read the integer grades of a qrels_with_added folder (the judge's export, rounded) "
                          "where the published qrels have none; the result files say so and submit refuses them: "
                          "a per-study estimate, not an official score (default: the published judgements alone)")
    run.add_argument("--output-folder", default=DEFAULT_OUTPUT_FOLDER,
                     help="mteb results cache (default: ./results); files land in DIR/results/<org>__<model>/"
                          "<revision>/, as with mteb run")
    run.add_argument("--cache-dir", default=None,
                     help="where embeddings persist (default: DISASTIR_CACHE_DIR or ~/.cache/disastir_mteb)")
    run.add_argument("--no-cache", action="store_true", help="keep embeddings in memory only (nothing persisted)")
    run.add_argument("--devices", nargs="*", default=None,
                     help="spread corpus encoding over devices, e.g. cuda:0 cuda:1 (default: every visible GPU "
                          "when there are two or more; one process otherwise)")
    run.add_argument("--batch-size", type=_at_least(1), default=None,
                     help=f"texts per forward pass (default {DEFAULT_BATCH_SIZE}, mteb's); passages go longest first, "
                          "in the batches of one SentenceTransformer.encode call over the corpus")
    run.add_argument("--precision", default=None, choices=list(PRECISIONS),
                     help="cast the model's weights before encoding (default: the model's own, fp32 for the "
                          "DisastIR baselines; DMRetriever's evaluation used fp16); other than the model's own, "
                          "results are filed under their own experiment")
    run.add_argument("--tokenize-threads", type=_at_least(0), default=None,
                     help="threads tokenising passages ahead of the model (default: 1 on a CPU, all cores but one "
                          "up to 8 on a GPU; 0 = on the encoding thread)")
    run.add_argument("--model-revision", default=None, metavar="REV",
                     help="file the results under this revision (default: the model's own, else the fingerprint of "
                          "its files or weights)")
    run.add_argument("--embeddings-url", action="append", default=[], dest="embeddings_url", metavar="URL",
                     help="encode on an OpenAI-compatible /v1/embeddings server serving -m NAME (vLLM --runner "
                          "pooling, text-embeddings-inference, a hosted API), e.g. http://gpu0:8000/v1; repeat it "
                          "to share the corpus between servers")
    run.add_argument("--embeddings-revision", default=None, metavar="REV",
                     help="with --embeddings-url: pin the served model's revision in the embedding store and the "
                          "results (default: a digest of what the servers report of the model)")
    run.add_argument("--embeddings-concurrency", type=_at_least(1), default=DEFAULT_EMBEDDING_CONCURRENCY,
                     help=f"with --embeddings-url: requests in flight per server (default "
                          f"{DEFAULT_EMBEDDING_CONCURRENCY})")
    run.add_argument("--api-key-env", default=DEFAULT_KEY_ENV,
                     help=f"with --embeddings-url: the environment variable holding the servers' key (default "
                          f"{DEFAULT_KEY_ENV}; unset: none is sent)")
    run.add_argument("--overwrite", action="store_true", help="rerun tasks that already have results")
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    _timings_option(run)
    run.set_defaults(func=commands.run)

    compare = sub.add_parser("compare", help="Exact vs ANN (the paper's Table 3 columns) or any two result sets: "
                                              "per-intent NDCG@10, drop %%, recall@10, paired tests; with several "
                                              "models, one row each and Kendall's tau between the rankings. "
                                              "DevLite and full runs of several models: Kendall's tau between "
                                              "their model rankings, overall and per intent.")
    compare.add_argument("results", nargs="+",
                         help="A B (result folders; A is the reference, e.g. exact), one folder holding exact "
                              "and ANN runs, or DevLite and full runs (one folder holding both, or one each)")
    compare.add_argument("--metric", default=MAIN_METRIC.key,
                         help=f"the metric compared, as mteb's result files name it (default {MAIN_METRIC.key}; e.g. "
                              "recall_at_100, map_at_10, mrr_at_10); the paired tests need per-query files, which "
                              f"hold {MAIN_METRIC.key} only")
    _judgement_options(compare)
    compare.set_defaults(func=commands.compare)

    report = sub.add_parser("report", help="Tables, published numbers beside ours, heatmaps and bar charts for "
                                            "result folders (one or several models, exact and ANN).")
    report.add_argument("results", nargs="+", help="mteb result folders (any level: output, model, revision)")
    report.add_argument("--out", help="folder for report.md / report.html / scores.csv and the figures")
    report.add_argument("--model", nargs="*", help="keep result sets whose model name contains one of these")
    report.add_argument("--format", nargs="*", choices=["md", "csv", "html"],
                        help="files to write into --out (default: md csv)")
    report.add_argument("--figure-format", nargs="+", choices=["png", "pdf", "svg"], default=None,
                        help="formats of the heatmaps and bar chart, several allowed, e.g. pdf svg for a paper "
                             "(default: png, for md and html; those embed png or svg, so a png comes with pdf alone)")
    report.add_argument("--no-figure-title", action="store_true",
                        help="figures without titles (the caption goes in the paper; the files' metadata keep them)")
    report.add_argument("--colour-scale", "--color-scale", dest="colour_scale", default="data",
                        choices=["data", "0-100"],
                        help="heatmap colours: data (default: fitted to each grid's lowest and highest score) or "
                             "0-100 (fixed, so heatmaps of several models compare by eye); the colour bar says which")
    report.add_argument("--metric", default=MAIN_METRIC.key,
                        help=f"the metric reported, as mteb's result files name it (default {MAIN_METRIC.key}, the "
                             "main score; e.g. recall_at_100, map_at_10, mrr_at_10, precision_at_5); the authors "
                             f"publish {MAIN_METRIC.key} only")
    _judgement_options(report)
    report.set_defaults(func=commands.report)

    judge = sub.add_parser("judge", help="Judge the unjudged top-10 passages of result sets with the DisastIR "
                                          "authors' protocol (three prompts per intent, their vote) through any "
                                          "OpenAI-compatible chat server; resumable, kept in an SQLite store. The "
                                          "completed scores are a per-study estimate beside the official ones, never "
                                          "in their place.")
    judge.add_argument("results", nargs="+", help="mteb result folders (any level) whose top-10 holes are judged")
    _judge_server_options(judge)
    judge.add_argument("--agreement", type=_at_least(1), default=None, metavar="N",
                       help="first judge N pairs that have published grades (stratified by intent and grade) and "
                            "print Cohen's kappa against them, beside the paper's 0.77 against people (and the "
                            "calibration of the grade probabilities where the server gives logprobs); below the band "
                            "the job stops there, before filling any hole, unless --fill-anyway")
    judge.add_argument("--fill-anyway", action="store_true",
                       help="with --agreement: fill the holes even when the judge is below the agreement band")
    judge.add_argument("--batch-requests", default=None, metavar="FILE",
                       help="write OpenAI Batch API requests for the next round to FILE instead of calling a server")
    judge.add_argument("--batch-results", default=None, metavar="FILE",
                       help="read a Batch API output file into the store first (then --batch-requests writes the "
                            "next round)")
    judge.add_argument("-t", "--tasks", nargs="*", help="only these tasks (default: every task of the result sets)")
    judge.add_argument("--data", help="the data the runs read: a folder in the published layout, or 'sample' "
                                      f"({_RUNS_DATA})")
    judge.add_argument("--quiet", action="store_true", help="no progress bar")
    judge.set_defaults(func=commands.judge)

    study = sub.add_parser("judge-study", help="Does the judge recover the ranking? For each of three or more runs, "
                                               "hide the published grades of the judged pairs only it retrieved, "
                                               "score every run officially, with those holes and with the holes "
                                               "judged, and print each run's NDCG@10 and Kendall's tau across runs "
                                               "(the leave-one-run-out pool study of TREC).")
    study.add_argument("results", nargs="+", help="three or more result sets (folders at any level) on the same data")
    _judge_server_options(study)
    study.add_argument("--completed-grade", choices=["hard", "expected"], default="hard",
                       help="fill the holes with the judge's hard grade (default) or its expected grade")
    study.add_argument("--json", default=None, metavar="FILE", help="also write the study as JSON to FILE")
    study.add_argument("-t", "--tasks", nargs="*", help="only these tasks (default: every task all runs have)")
    study.add_argument("--data", help=f"the data the runs read: a folder, or 'sample' ({_RUNS_DATA})")
    study.add_argument("--quiet", action="store_true", help="no progress bar")
    study.set_defaults(func=commands.judge_study)

    board = sub.add_parser("leaderboard", help="Serve mteb's leaderboard app offline with DisastIR in its menu: your "
                                               "result sets beside the DisastIR paper's 30 models (marked published).")
    board.add_argument("results", nargs="*", default=[DEFAULT_OUTPUT_FOLDER],
                       help="mteb result folders, any level (default: ./results, where demo and run write)")
    board.add_argument("--host", default="127.0.0.1", help="serve on (default: 127.0.0.1, this machine only)")
    board.add_argument("--port", type=_at_least(1), default=7860, help="port (default: 7860, as mteb leaderboard)")
    board.add_argument("--no-published", action="store_true", help="only your result sets, not the paper's models")
    board.add_argument("--screenshot", metavar="PNG",
                       help="save a screenshot of the page with headless Chromium and stop, instead of serving")
    board.add_argument("--screenshot-width", metavar="PX", type=_at_least(320), default=SCREENSHOT_WIDTH,
                       help=f"the browser window's width for --screenshot (default: {SCREENSHOT_WIDTH}, a laptop's)")
    board.set_defaults(func=commands.leaderboard)

    submit = sub.add_parser("submit", help="Copy result sets into the embeddings-benchmark/results layout (plain runs "
                                            "and experiments/<name>/) and validate it like that repository's tests and "
                                            "workflows (exit 1 on errors).")
    submit.add_argument("results", nargs="?", help="mteb results folder (output, model or revision level)")
    submit.add_argument("--out", required=True, help="target: a clone of embeddings-benchmark/results (or a new "
                                                     "folder), named apart from the results folder")
    submit.add_argument("--model", help="the model to submit when the folder holds several (org/name)")
    submit.add_argument("--overwrite", action="store_true", help="replace differing task files already in --out")
    submit.add_argument("--check", action="store_true", help="only validate --out (no copying)")
    submit.set_defaults(func=commands.submit)

    export = sub.add_parser("export", help="Write the tasks as BEIR folders or as an mteb-native Hugging Face "
                                            "dataset (for upstreaming).")
    export.add_argument("--format", required=True, choices=["beir", "mteb", "qrels-with-added"],
                        help="beir, mteb, or qrels-with-added: the published judgements plus a judgement store's, in "
                             "the authors' qrels_with_added/{Intent}_{event}_qrels.json layout (needs --judgements)")
    export.add_argument("--out", required=True, help="target folder (absent or empty; --overwrite replaces an "
                                                     "earlier export as a whole)")
    export.add_argument("-t", "--tasks", nargs="*", help="task names (default: all 48)")
    export.add_argument("--data", help="a folder in the published layout, or 'sample' (default: DISASTIR_DATA_DIR "
                                       "or the Hub)")
    export.add_argument("--gain", choices=["exponential", "linear"],
                        help="BEIR qrels scores: exponential 2^g-1 (default, the authors' NDCG with pytrec_eval) "
                             "or linear (the raw grade)")
    export.add_argument("--judgements", default=None, metavar="STORE",
                        help="qrels-with-added: the judgement store (disastir-mteb judge --store)")
    export.add_argument("--judge-model", default=None,
                        help="qrels-with-added: only this judge model's judgements (needed when two judged one pair)")
    export.add_argument("--prompt-version", default=None,
                        help="qrels-with-added: only judgements of this prompt version")
    export.add_argument("--round-grades", action="store_true",
                        help="qrels-with-added: round each added grade half up (a mean vote such as 1.67), as "
                             "run --extra-judgements needs integers; default: as judged")
    export.add_argument("--overwrite", action="store_true")
    export.add_argument("--quiet", action="store_true")
    export.set_defaults(func=commands.export)

    upstream = sub.add_parser("upstream", help="Write the DisastIR tasks, benchmark and statistics into a local mteb "
                                                "checkout, as a pull request to mteb needs them.")
    upstream.add_argument("--mteb", required=True, help="the root of a clone of embeddings-benchmark/mteb")
    upstream.add_argument("--revision", help="full commit hash of the mteb-format dataset on the Hub (default: "
                                             "task_metadata/dataset.json; a TODO placeholder until it is pushed)")
    upstream.add_argument("--dataset", help="Hub repository of that dataset (default: mteb/DisastIR)")
    upstream.add_argument("--stats", help="folder of <task>.json from `disastir-mteb stats --out` (default: the "
                                          "statistics the plugin ships, the paper's figures)")
    upstream.set_defaults(func=commands.upstream)

    sample = sub.add_parser("sample", help="Write a synthetic dataset in the published DisastIR layout.")
    sample.add_argument("--out", required=True, help="target folder (must be absent or empty)")
    sample.add_argument("--scale", default="small", choices=["small", "full"])
    sample.add_argument("--seed", type=int, default=0)
    sample.add_argument("--overwrite", action="store_true")
    sample.add_argument("--quiet", action="store_true")
    sample.add_argument("--devlite", choices=["eval-code", "card"], default=None,
                        help="also write a DisastIR-DevLite folder split from it, in the layout of DMRetriever's "
                             "evaluation code or of the earlier dataset card (for DISASTIR_DEVLITE_DIR)")
    sample.add_argument("--devlite-out", default=None, help="where the DevLite folder goes (default: OUT-devlite)")
    sample.set_defaults(func=commands.sample)

    stats = sub.add_parser("stats", help="Recompute mteb's descriptive statistics on the data the tasks load.")
    stats.add_argument("--out", required=True, help="folder for one <task>.json per task")
    stats.add_argument("-t", "--tasks", nargs="*", help="task names (default: all 48)")
    stats.add_argument("--paper", action="store_true", help="write the paper's figures instead (what ships)")
    stats.set_defaults(func=commands.stats)

    tasks = sub.add_parser("tasks", help="List the DisastIR tasks and their instructions (a built benchmark's with "
                                         "--data).")
    tasks.add_argument("--intents", nargs="*")
    tasks.add_argument("--categories", nargs="*")
    tasks.add_argument("--data", default=None, metavar="BENCH",
                       help="a built benchmark's folder: list its tasks (those that have queries)")
    tasks.set_defaults(func=commands.tasks)

    build = sub.add_parser("build", help="Build a benchmark from your own documents the way the DisastIR authors "
                                         "built theirs: passages, queries per intent written by a chat model in the "
                                         "authors' two stages, a pool of retrievers' top 10s, the authors' judge, "
                                         "AIR-Bench's quality control; written in the published layout, run as mteb "
                                         "tasks named NAME-Intent-Category. Resumable: every answer is kept.")
    build.add_argument("docs", help="the folder of documents (.txt, .md, .pdf; .jsonl or .csv with one text per row), "
                                    "one sub-folder per category or event type")
    build.add_argument("--out", required=True, help="the benchmark's folder (written at the end, in one rename)")
    build.add_argument("--name", required=True, help="the benchmark's name: its tasks are NAME-QA-MH, ...")
    build.add_argument("--model", required=True, help="the generation model as the server names it")
    build.add_argument("--base-url", action="append", default=[], dest="base_url",
                       help="an OpenAI-compatible chat server for the generation model; repeat it to share the work "
                            "(or --batch-requests instead)")
    build.add_argument("--judge-model", default=None, help="the judge model (default: the generation model)")
    build.add_argument("--judge-base-url", action="append", default=[], dest="judge_base_url",
                       help="the judge's servers (default: --base-url)")
    build.add_argument("--pool-models", default="disastir-mteb/hashing-encoder",
                       help="comma-separated models whose top 10s (exact and ANN) are judged; the first also "
                            "embeds passages and counts tokens (default: disastir-mteb/hashing-encoder, a lexical "
                            "model that needs no download)")
    build.add_argument("--queries-per-task", type=_at_least(1), default=50, metavar="N",
                       help="queries kept per intent and category (default 50)")
    build.add_argument("--intents", default="QA,Twitter,FC,NLI,STS,QAdoc",
                       help="comma-separated intents (default: all six)")
    build.add_argument("--categories", default="folder", metavar="folder|events|one:CATEGORY",
                       help="each passage's category: its sub-folder's name (default), the nearest of the 301 event "
                            "types, or one for all (one:MH)")
    build.add_argument("--licence", default=None, help="the licence of every source (default: the nearest LICENCE "
                                                         "or LICENSE file above each)")
    build.add_argument("--redact", action="store_true", help="mask e-mail addresses, phone numbers, URLs and "
                                                              "@handles before anything is sent to a server")
    build.add_argument("--seed", type=int, default=0, help="the plan's seed: seed passages and prompt slots")
    build.add_argument("--until", choices=STAGES, default="write", help="stop after this stage")
    build.add_argument("--anchor-queries", default=None, metavar="FILE",
                       help="the organisation's own questions (JSONL or CSV: query, passage, intent, category), "
                            "pooled and judged with the generated ones and written as OUT-anchor, the reference for "
                            "build-study")
    build.add_argument("--no-quality-control", action="store_true",
                       help="keep queries whose own passages the judge grades below relevant (AIR-Bench's step off)")
    build.add_argument("--min-logprob", type=float, default=None,
                       help="drop queries written with a mean log-probability below this (where the server gives "
                            "logprobs)")
    build.add_argument("--max-file-mb", type=float, default=25.0, help="the largest source read (default 25 MB)")
    build.add_argument("--store", default=None, help="the build store (default: OUT.build.sqlite beside the "
                                                     "benchmark); every answer is kept there")
    build.add_argument("--batch-requests", default=None, metavar="FILE",
                       help="no server: write each round's requests (summaries, information needs, queries, the "
                            "judge's steps) to FILE as OpenAI Batch API input and stop; rerun with --batch-results")
    build.add_argument("--batch-results", default=None, metavar="FILE",
                       help="with --batch-requests: read the last round's Batch API output file into the build store "
                            "first")
    _sending_options(build, concurrency=BUILD_CONCURRENCY)
    build.add_argument("--quiet", action="store_true", help="no progress bars")
    build.set_defaults(func=commands.build)

    build_study = sub.add_parser("build-study", help="Does a built benchmark rank models as a reference does? Runs "
                                                     "each model on both and prints Kendall's tau and Spearman between "
                                                     "the two rankings with a bootstrap interval, beside the papers' "
                                                     "0.93 (DisastIR) and 0.82 / 0.70 (AIR-Bench with / without its "
                                                     "quality control).")
    build_study.add_argument("--reference", required=True,
                             help="the reference benchmark: a folder in the published layout (DisastIR's, the sample, "
                                  "or one built from anchor queries)")
    build_study.add_argument("--built", required=True, help="the built benchmark's folder")
    build_study.add_argument("--models", required=True, help="comma-separated models to rank (three or more)")
    build_study.add_argument("--resamples", type=_at_least(1), default=1000, help="bootstrap resamples (default 1000)")
    build_study.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    build_study.add_argument("--output-folder", default=None,
                             help="where the runs' results go (default: a temporary folder)")
    build_study.add_argument("--json", default=None, metavar="FILE", help="also write the study as JSON to FILE")
    build_study.add_argument("--quiet", action="store_true", help="no progress bars")
    build_study.set_defaults(func=commands.build_study)

    seed = sub.add_parser("seed-model-cache", help="Put the bundled all-MiniLM-L6-v2 into a Hugging Face hub cache.")
    seed.add_argument("hub_cache", help="folder to use as HF_HUB_CACHE")
    seed.set_defaults(func=commands.seed)
    parser.commands = MappingProxyType(sub.choices)
    return parser


_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
# where each command writes (option, argparse name), for the one sentence a full disk ends in: the file the
# error names, else this folder (a plain write() names no file); commands absent here write nothing of theirs
_OUTPUT_OPTION = {"run": ("--output-folder", "output_folder"), "demo": ("--output-folder", "output_folder"),
                  "report": ("--out", "out"), "submit": ("--out", "out"), "export": ("--out", "out"),
                  "sample": ("--out", "out"), "stats": ("--out", "out"), "judge": ("--store", "store"),
                  "judge-study": ("--store", "store"), "build": ("--out", "out")}


def _check_output_folder(args: argparse.Namespace) -> None:
    """A command's output folder named by a file: one sentence before anything runs (not ``File exists`` after)."""
    option, name = _OUTPUT_OPTION.get(args.command, (None, None))
    value = getattr(args, name, None) if name else None
    if option is None or option == "--store" or value is None:
        return
    if Path(value).exists() and not Path(value).is_dir():
        raise InvalidInput(f"{option} {value} is a file, not a folder: name a folder (it is created when missing), or "
                           "move the file away.")


def _interrupted(args: argparse.Namespace) -> str:
    """The one line Ctrl-C ends a command with: what is kept and how to go on (``run`` and ``demo`` resume)."""
    if args.command in ("judge", "judge-study", "build"):
        return (f"disastir-mteb {args.command}: interrupted; run the same command again to resume: every answer "
                "received is kept in the store, and only what is missing is asked.")
    if args.command not in ("run", "demo"):
        return f"disastir-mteb {args.command}: interrupted."
    kept = ("the results of finished tasks are kept (with --no-cache the passages are encoded again)"
            if getattr(args, "no_cache", False) else "the results of finished tasks and the embedding cache are kept")
    return f"disastir-mteb {args.command}: interrupted; run the same command again to resume: {kept}."


def _disk_full(error: OSError, args: argparse.Namespace) -> str:
    """A full disk in one sentence: the file (or the command's output folder), and what to do."""
    option, name = _OUTPUT_OPTION.get(args.command, ("", ""))
    path = error.filename or (getattr(args, name, None) if name else None)
    where = f"{path}: " if path else ""
    to = f" ({option})" if option else ""
    resumes = ", which resumes: finished tasks are kept" if args.command in ("run", "demo") else ""
    return (f"{where}{error.strerror or 'No space left on device'}; free space on that disk or write to another "
            f"one{to}, then run the same command again{resumes}.")


# the options naming servers (option, argparse name): checked before anything is sent, loaded or imported
_SERVER_URL_OPTIONS = (("--embeddings-url", "embeddings_url"), ("--base-url", "base_url"))


def _check_server_urls(args: argparse.Namespace) -> None:
    """Every server URL of the command, checked and normalised before mteb loads.

    Raises:
        ValueError: a URL that is not a server's base URL.
    """
    for option, name in _SERVER_URL_OPTIONS:
        urls = getattr(args, name, None)
        if urls:
            setattr(args, name, [check_base_url(url, option) for url in urls])


def _spell_names(args: argparse.Namespace) -> None:
    """``-t`` and ``-b`` names in any case, spelled as DisastIR's are (from the vocabulary); others pass as given."""
    if getattr(args, "tasks", None):
        args.tasks = [canonical_task_name(name) for name in args.tasks]
    if getattr(args, "benchmarks", None):
        args.benchmarks = [canonical_benchmark_name(name) for name in args.benchmarks]


def _lines_in_order() -> None:
    """Line-buffer stdout, as stderr is, so results and progress land in order when stdout is not a terminal."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)  # absent on a stream replaced by a test or a notebook
    if reconfigure is not None:
        reconfigure(line_buffering=True)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``disastir-mteb`` console script.

    Returns:
        0 on success, 2 for an error of the input or the surroundings (a
        :class:`~disastir_mteb.util.errors.DisastirError` or an ``OSError``: one sentence on stderr), 130 after
        Ctrl-C, or what the command returns (``submit``: 1). Any other exception is a bug and keeps its traceback.
    """
    args = build_parser().parse_args(argv)
    _lines_in_order()
    try:
        _check_server_urls(args)
        _spell_names(args)
        _check_output_folder(args)
        if getattr(args, "model", None) is not None and args.command == "run" and not str(args.model).strip():
            raise InvalidInput("-m is empty: name a model (an mteb name such as intfloat/e5-small-v2, a folder, or "
                               "bundled).")
        return int(args.func(args))
    except KeyboardInterrupt:
        if not getattr(args, "quiet", True):
            print(file=sys.stderr)  # a progress bar may hold the line
        print(_interrupted(args), file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C
    except (DisastirError, OSError) as error:  # the user's input or surroundings; anything else is a bug: a traceback
        message: object = error
        if isinstance(error, OSError) and error.filename and error.strerror:  # "[Errno 13] ..." -> path: reason
            message = f"{error.filename}: {error.strerror}"
        if isinstance(error, OSError) and error.errno in _DISK_FULL:
            message = _disk_full(error, args)
        print(f"disastir-mteb {args.command}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
