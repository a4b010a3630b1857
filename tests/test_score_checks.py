"""Result files that contradict themselves are refused in one sentence by every reader: report, compare, the
leaderboard and submit.

A real hashing-encoder run (exact and ANN, three tasks, per-query files beside the task files) is copied and
one file edited per case; every reader goes through ``load_result_set``
(:mod:`disastir_mteb.results.score_checks`, :mod:`disastir_mteb.results.rescoring`), so each must refuse it
naming the file and what contradicts what (the metric and its range, the per-query mean, the task name, the
splits, the re-scored top 10), and the command that reruns the task; submit writes nothing.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sentences import says

from disastir_mteb import cli
from disastir_mteb.leaderboard.rows import result_rows
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import metric_range
from disastir_mteb.results.per_query import per_query_file, read_per_query
from disastir_mteb.results.result_sets import collect_result_sets, load_result_set
from disastir_mteb.results.score_checks import TOLERANCE
from disastir_mteb.runner.run import evaluate

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
EDITED = "DisastIR-QA-Bio"
#: what every sentence of an edited task file ends by saying to do: the command that reruns the task
RERUN = (f"disastir-mteb run -m disastir-mteb/hashing-encoder -t {EDITED} --overwrite",)


@pytest.fixture(scope="module")
def runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An exact and an ANN run of three tasks in one output folder, as the runner writes them."""
    from disastir_mteb.tasks import retrieval as task_module

    out = tmp_path_factory.mktemp("scores")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        task_module.forget_data_files()
        try:
            for search in ("exact", "ann"):
                evaluate(HashingEncoder(), TASKS, search=search, cache_dir=out / "cache", output_folder=out / "results",
                         show_progress=False)
        finally:
            task_module.forget_data_files()
    return out / "results"


def _copy(runs: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the runs and its exact set's folder (the one the cases edit)."""
    copy = tmp_path / "results"
    shutil.copytree(runs, copy)
    [meta] = [path for path in copy.rglob("model_meta.json") if "experiments" not in path.parts]
    return copy, meta.parent


def _edit(folder: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    path = folder / f"{EDITED}.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data["scores"]["test"][0])
    path.write_text(json.dumps(data), encoding="utf-8")  # NaN and Infinity as Python's json writes them
    return path


def _set(**values: Any) -> Callable[[dict[str, Any]], None]:
    return lambda block: block.update(values)


def _off_by(delta: float) -> Callable[[dict[str, Any]], None]:
    """ndcg_at_10 and main_score moved by ``delta`` (towards the middle: both stay in [0, 1])."""
    def change(block: dict[str, Any]) -> None:
        moved = block["ndcg_at_10"] + (delta if block["ndcg_at_10"] < 0.5 else -delta)
        block.update(ndcg_at_10=moved, main_score=moved)
    return change


CASES = {  # case: (the edit, what the sentence names besides the file: the metric, its value, its range)
    "edited to 7.5": (_set(ndcg_at_10=7.5, main_score=7.5), ("ndcg_at_10", "main_score", "7.5", "[0, 1]")),
    "NaN": (_set(ndcg_at_10=math.nan, main_score=math.nan), ("ndcg_at_10", "main_score", "NaN", "[0, 1]")),
    "infinite": (_set(map_at_10=math.inf), ("map_at_10", "inf", "[0, 1]")),
    "negative recall": (_set(recall_at_10=-0.2), ("recall_at_10", "-0.2", "[0, 1]")),
    "nAUC above 1": (_set(nauc_ndcg_at_10_max=1.5), ("nauc_ndcg_at_10_max", "1.5", "at most 1")),
    "not a number": (_set(ndcg_at_10="0.7"), ("ndcg_at_10", "'0.7'", "not a number", "[0, 1]")),
    "main score unlike ndcg_at_10": (lambda block: block.update(main_score=block["ndcg_at_10"] / 2),
                                     ("main_score", "ndcg_at_10", "1e-05")),
    "unlike its per-query file": (_off_by(0.01), ("ndcg_at_10", "PER_QUERY", re.compile(r"0\.\d{6}"), "1e-05")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_impossible_score_is_refused_by_every_reader(case: str, runs: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    change, facts = CASES[case]
    copy, exact = _copy(runs, tmp_path)
    path = _edit(exact, change)
    # before: report showed 750.00, submit "ready for a pull request"
    _every_reader_refuses(copy, exact, (path, *_placed(facts, exact), *RERUN), tmp_path / "mteb-results", capsys)


def _placed(facts: tuple[Any, ...], exact: Path, data: Path | None = None) -> tuple[Any, ...]:
    """``facts`` with the paths of this copy put in: PER_QUERY (the edited task's per-query file), TASK_FILE (its task
    file) and DATA (the data folder the run read)."""
    places = {"PER_QUERY": per_query_file(exact, EDITED), "TASK_FILE": exact / f"{EDITED}.json", "DATA": data}
    return tuple(places[fact] if isinstance(fact, str) and fact in places else fact for fact in facts)


def _refuses(message: str, facts: tuple[Any, ...]) -> None:
    """``message`` is one line holding ``facts``, and names the file it blames (the first path of ``facts``) before
    any other file it names."""
    says(message, *facts)
    paths = [str(fact) for fact in facts if isinstance(fact, Path)]
    assert all(message.index(paths[0]) <= message.index(other) for other in paths), message


def _every_reader_refuses(copy: Path, exact: Path, facts: tuple[Any, ...], out: Path,
                          capsys: pytest.CaptureFixture[str]) -> None:
    """``load_result_set``, the leaderboard's rows, ``report``, ``compare`` and ``submit`` stop with one sentence
    holding ``facts`` (the file first, see :func:`_refuses`): one line on stderr, exit code 2, nothing printed on
    stdout and nothing written by ``submit``."""
    with pytest.raises(ValueError) as refused:
        load_result_set(exact)
    _refuses(str(refused.value), facts)
    with pytest.raises(ValueError) as refused:
        result_rows([copy])  # what the leaderboard page shows
    _refuses(str(refused.value), facts)
    for command in (["report", str(copy)], ["compare", str(copy)], ["submit", str(copy), "--out", str(out)]):
        assert cli.main(command) == 2, command
        printed = capsys.readouterr()
        assert printed.out == "", command
        assert printed.err.startswith(f"disastir-mteb {command[0]}: "), printed.err
        _refuses(printed.err, facts)
    assert not out.exists()  # submit wrote nothing


def test_what_runs_produce_is_accepted(runs: Path, tmp_path: Path) -> None:
    """Negative and NaN nAUC, bounds, metrics the check does not know, mteb's rounding, unreadable per-query files."""
    assert metric_range("ndcg_at_10") == (0.0, 1.0, False) and metric_range("hit_rate_at_100") == (0.0, 1.0, False)
    assert metric_range("nauc_mrr_at_10_diff1") == (-math.inf, 1.0, True) and metric_range("evaluation_time") is None
    _, exact = _copy(runs, tmp_path)
    # the bounds at cut-offs below the top 10 (map_at_1 0, precision_at_1 1) would be re-scored, so deeper ones
    _edit(exact, _set(nauc_ndcg_at_10_max=-0.7, nauc_map_at_10_std=math.nan, map_at_100=0.0, precision_at_20=1.0,
                      some_later_metric=42.0))
    assert load_result_set(exact).scores[EDITED] == json.loads((exact / f"{EDITED}.json").read_text())["scores"][
        "test"][0]["main_score"]

    mean = read_per_query(per_query_file(exact, EDITED)).mean
    for inside, delta in ((True, 0.9 * TOLERANCE), (False, 1.1 * TOLERANCE)):
        moved = mean + delta  # mteb rounds to 5 decimals: +-5e-6
        _edit(exact, _set(ndcg_at_10=moved, main_score=moved, ndcg_at_10_exponential_gain=moved))
        if inside:
            load_result_set(exact)
        else:
            with pytest.raises(ValueError) as refused:
                load_result_set(exact)
            says(str(refused.value), f"ndcg_at_10 {moved!r}", "must agree within 1e-05")
    per_query_file(exact, EDITED).write_text("{", encoding="utf-8")  # unreadable: no claim either way (as before)
    assert EDITED in load_result_set(exact).scores


def test_several_impossible_files_are_counted_in_the_one_sentence(runs: Path, tmp_path: Path) -> None:
    _, exact = _copy(runs, tmp_path)
    _edit(exact, _set(ndcg_at_10=7.5, main_score=7.5))
    other = exact / "DisastIR-STS-Tech.json"
    data = json.loads(other.read_text(encoding="utf-8"))
    data["scores"]["test"][0]["hit_rate_at_10"] = 2.0
    other.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        load_result_set(exact)
    _refuses(str(refused.value), (exact / f"{EDITED}.json", "1 more file(s)", "DisastIR-STS-Tech.json",
                                  "disastir-mteb run -m disastir-mteb/hashing-encoder -t DisastIR-QA-Bio "
                                  "DisastIR-STS-Tech --overwrite"))


# Files that contradict themselves, their per-query files, their data or their folders: each case edits the exact set
# (``exact``; ``data`` is the sample it ran on) and returns the file the sentence names first.
def _json(path: Path, change: Callable[[Any], object]) -> Path:
    """``change`` applied in place to the JSON file at ``path``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _copied_under_another_name(exact: Path, data: Path) -> Path:  # the case: FC-Geo's files as QA-Bio's
    shutil.copy(exact / "DisastIR-FC-Geo.json", exact / f"{EDITED}.json")
    shutil.copy(per_query_file(exact, "DisastIR-FC-Geo"), per_query_file(exact, EDITED))
    return exact / f"{EDITED}.json"


def _copied_without_per_query_files(exact: Path, data: Path) -> Path:  # as plain `mteb run` leaves a set
    shutil.rmtree(per_query_file(exact, EDITED).parent)
    shutil.copy(exact / "DisastIR-FC-Geo.json", exact / f"{EDITED}.json")
    return exact / f"{EDITED}.json"


def _scores(change: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], Path]:
    def edit(exact: Path, data: Path) -> Path:
        return _json(exact / f"{EDITED}.json", lambda content: change(content["scores"]))
    return edit


def _per_query(change: Callable[[dict[str, Any]], None]) -> Callable[[Path, Path], Path]:
    def edit(exact: Path, data: Path) -> Path:
        return _json(per_query_file(exact, EDITED), change)
    return edit


def _task_file_after(edit: Callable[[Path, Path], Path]) -> Callable[[Path, Path], Path]:
    """``edit``, then the task file it contradicts (where the sentence names the task file, not the edited one)."""
    def edited(exact: Path, data: Path) -> Path:
        edit(exact, data)
        return exact / f"{EDITED}.json"
    return edited


def _all_ones(*, variant: bool) -> Callable[[Path, Path], Path]:
    """The issue's edit: ``ndcg_at_10``, ``main_score`` and every per-query NDCG@10 set to 1.0, the rankings left as
    they were; with ``variant``, the gain's variant in the task file too (every number then agrees but the top 10s)."""
    def edit(exact: Path, data: Path) -> Path:
        _edit(exact, _set(ndcg_at_10=1.0, main_score=1.0, **({"ndcg_at_10_exponential_gain": 1.0} if variant else {})))
        _per_query(lambda pq: [query.update(ndcg_at_10=1.0) for query in pq["queries"].values()])(exact, data)
        return per_query_file(exact, EDITED) if variant else exact / f"{EDITED}.json"
    return edit


def _moved_without_per_query_files(exact: Path, data: Path) -> Path:  # as a plain `mteb run` set, edited
    shutil.rmtree(per_query_file(exact, EDITED).parent)
    return _edit(exact, _off_by(0.01))


def _per_query_of_another_task(exact: Path, data: Path) -> Path:
    shutil.copy(per_query_file(exact, "DisastIR-FC-Geo"), per_query_file(exact, EDITED))
    return per_query_file(exact, EDITED)


def _per_query_of_another_task_renamed(exact: Path, data: Path) -> Path:
    """FC-Geo's per-query file under QA-Bio's name and task_name, QA-Bio's score set to its mean: only the data
    says whose queries these are."""
    path = _per_query_of_another_task(exact, data)
    _json(path, lambda pq: pq.update(task_name=EDITED))
    mean = round(read_per_query(path).mean, 5)
    _edit(exact, _set(ndcg_at_10=mean, main_score=mean, ndcg_at_10_exponential_gain=mean))
    return path


def _per_query_of_another_task_renamed_unrecorded(exact: Path, data: Path) -> Path:
    """The same, the per-query file without its ``provenance`` section (a file of a runner before the record): only
    the queries it holds say whose they are."""
    path = _per_query_of_another_task_renamed(exact, data)
    _json(path, lambda pq: pq.pop("provenance"))
    return path


def _other_queries(exact: Path, data: Path) -> Path:
    def rename(pq: dict[str, Any]) -> None:
        pq["queries"]["QA-Bio-q999"] = pq["queries"].pop("QA-Bio-q001")
    return _per_query(rename)(exact, data)


def _passage_not_in_corpus(exact: Path, data: Path) -> Path:
    """An unjudged passage of a top 10 replaced by an id the corpus lacks: every number stays what it was."""
    from disastir_mteb.tasks.retrieval import TASK_CLASSES

    task = TASK_CLASSES[EDITED]()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(data))
        task.load_data()
    judged = task.grades()["QA-Bio-q001"]

    def replace(pq: dict[str, Any]) -> None:
        top10 = pq["queries"]["QA-Bio-q001"]["top10"]
        top10[next(i for i, doc in enumerate(top10) if doc not in judged)] = "not-a-passage"
    return _per_query(replace)(exact, data)


def _repeated_passage(exact: Path, data: Path) -> Path:
    def repeat(pq: dict[str, Any]) -> None:
        top10 = pq["queries"]["QA-Bio-q001"]["top10"]
        top10[-1] = top10[0]
    return _per_query(repeat)(exact, data)


def _meta(change: Callable[[Any], Any] | str) -> Callable[[Path, Path], Path]:
    def edit(exact: Path, data: Path) -> Path:
        path = exact / "model_meta.json"
        if isinstance(change, str):
            path.write_text(change, encoding="utf-8")
            return path
        return _json(path, change)
    return edit


DAMAGED_META = '{\n  "name": "disastir-mteb/hashing-encoder",\n  '  # a model_meta.json cut short
DIGEST = re.compile(r"[0-9a-f]{16}…")  # a digest a run recorded, as sentences show it
CONTRADICTIONS: dict[str, tuple[Callable[[Path, Path], Path], tuple[Any, ...], bool]] = {
    # case: (edit, what the sentence names besides the file (PER_QUERY, TASK_FILE and DATA: see _placed), whether it
    # names the command that reruns the task)
    "copied under another task's name": (
        _copied_under_another_name, ("'DisastIR-FC-Geo'", "task_name", EDITED, "copied or renamed"), True),
    "copied, no per-query files": (
        _copied_without_per_query_files, ("'DisastIR-FC-Geo'", "task_name", EDITED, "copied or renamed"), True),
    "extra split": (
        _scores(lambda scores: scores.update(dev=[{**scores["test"][0], "ndcg_at_10": 7.5, "main_score": 7.5}])),
        ("'dev'", EDITED, "test"), True),
    "second test/default entry": (
        _scores(lambda scores: scores["test"].append({**scores["test"][0], "ndcg_at_10": 0.5, "main_score": 0.5})),
        ("2 entries", "'test'", "'default'", "0.08774", "0.5"), True),
    "another subset": (
        _scores(lambda scores: scores["test"][0].update(hf_subset="fr")), ("'fr'", "'test'", EDITED, "default"),
        True),
    "unknown gain": (_scores(lambda scores: scores["test"][0].update(disastir_gain="cubic")),
                     ("disastir_gain", "'cubic'", "exponential, linear"), True),
    "every NDCG 1.0": (
        _all_ones(variant=False), ("ndcg_at_10 1.0", "ndcg_at_10_exponential_gain 0.087742", "exponential",
                                   "disastir_gain", "1e-05"), True),
    "score moved, no per-query file": (
        _moved_without_per_query_files, ("ndcg_at_10 0.09774", "ndcg_at_10_exponential_gain 0.087742",
                                         "exponential", "disastir_gain", "1e-05"), True),
    "every number 1.0, the gain's variant too": (
        _all_ones(variant=True), ("1.000000", "'QA-Bio-q001'", "DATA", "0.171719", re.compile(r"\d of 8 queries")),
        True),
    "per-query file of another task": (
        _per_query_of_another_task, ("'DisastIR-FC-Geo'", EDITED, "copied or renamed"), True),
    "per-query file of another task, renamed": (  # each records the digest of the data files its task read
        _per_query_of_another_task_renamed, (DIGEST, "TASK_FILE", "disastir_data_digest", "different runs"), True),
    "per-query file of another task, renamed, no provenance recorded": (
        _per_query_of_another_task_renamed_unrecorded,
        (EDITED, "DATA", "8 queries", "'FC-Geo-q001'", "'QA-Bio-q001'"), True),
    "other queries": (
        _other_queries, (EDITED, "DATA", "1 query", "'QA-Bio-q999'", "'QA-Bio-q001'"), True),
    "passage not in the corpus": (
        _passage_not_in_corpus, ("1 passage", "DATA", "'not-a-passage'", "'QA-Bio-q001'"), True),
    "passage twice in a top 10": (
        _repeated_passage, (re.compile(r"'d\d+' twice"), "'QA-Bio-q001'", "1 repeated passage(s)"), True),
    "eleven passages in a top 10": (
        _per_query(lambda pq: pq["queries"]["QA-Bio-q001"]["top10"].append("d000001")),
        ("11 passages", "'QA-Bio-q001'", "1 such query"), True),
    "negative per-query NDCG": (
        _per_query(lambda pq: pq["queries"]["QA-Bio-q001"].update(ndcg_at_10=-0.5)),
        ("NDCG@10", "1 query", "'QA-Bio-q001'", "-0.5", "at least 0"), True),
    "per-query NDCG above 1, mean unlike the task's": (  # above 1 is possible (two copies of a judged text)
        _task_file_after(_per_query(lambda pq: pq["queries"]["QA-Bio-q001"].update(ndcg_at_10=1.5))),
        ("ndcg_at_10 0.08774", "8 queries", "PER_QUERY", re.compile(r"0\.25\d+"), "1e-05"), True),
    "recall_at_10 edited, per-query file beside": (  # the case: only NDCG@10 was re-scored
        _task_file_after(_scores(lambda scores: scores["test"][0].update(recall_at_10=0.5))),
        ("recall_at_10 0.5", "PER_QUERY", "DATA", "0.132440", "2e-05"), True),
    "mrr_at_10 edited, per-query file beside": (
        _task_file_after(_scores(lambda scores: scores["test"][0].update(mrr_at_10=0.5))),
        ("mrr_at_10 0.5", "PER_QUERY", "DATA", "0.191964", "2e-05"), True),
    "ndcg_at_1 edited, per-query file beside": (
        _task_file_after(_scores(lambda scores: scores["test"][0].update(ndcg_at_1=0.5))),
        ("ndcg_at_1 0.5", "PER_QUERY", "DATA", "0.053570", "2e-05"), True),
    "several metrics edited alike": (  # recall and its "unjudged removed" twin, which the task keeps equal
        _task_file_after(_scores(lambda scores: scores["test"][0].update(
            recall_at_10=0.5, recall_at_10_unjudged_removed=0.5, precision_at_10=0.5))),
        ("recall_at_10 0.5", "0.132440", "2e-05", "2 more", "precision_at_10, recall_at_10_unjudged_removed"), True),
    "task file and per-query file of two runs (new entries)": (  # the model fingerprint each records
        lambda exact, data: (_edit(exact, _set(disastir_model="a" * 32)), _per_query(
            lambda pq: pq.update(provenance={"model": {"fingerprint": "b" * 32}}))(exact, data))[1],
        ("b" * 16 + "…", "TASK_FILE", "a" * 16 + "…", "disastir_model", "different runs"), True),
    "per-query file of a run on other data": (
        _per_query(lambda pq: pq["data"]["generator"].update(seed=1)),
        ("'local folder sample-small-seed0-v2 (synthetic sample, scale small, seed 1)'", "TASK_FILE",
         "'local folder sample-small-seed0-v2 (synthetic sample, scale small, seed 0)'", "disastir_data",
         "different runs"), True),
    "model_meta.json cut short": (
        _meta(DAMAGED_META), ("not valid JSON", "line 3 column 3 (char 47)", "restore it", "--overwrite"), False),
    "model_meta.json not an object": (
        _meta("[]"), ("JSON list", "object", "restore it", "--overwrite"), False),
    "model_meta.json of another revision": (
        _meta(lambda meta: meta.update(revision="2")), ("'2'", "'1'", "move the folder back", "restore"), False),
    "model_meta.json of another model": (
        _meta(lambda meta: meta.update(name="org/other")),
        ("'org/other'", "'disastir-mteb__hashing-encoder'", "'org__other'", "move the folder back"), False),
}


@pytest.mark.parametrize("case", list(CONTRADICTIONS))
def test_a_file_contradicting_itself_is_refused_by_every_reader(case: str, runs: Path, sample_data: Path,
                                                                 tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    edit, facts, rerun = CONTRADICTIONS[case]
    copy, exact = _copy(runs, tmp_path)
    path = edit(exact, sample_data)
    facts = (path, *_placed(facts, exact, sample_data), *(RERUN if rerun else ()))
    # before: report showed the number, submit wrote files or said "ready"
    _every_reader_refuses(copy, exact, facts, tmp_path / "mteb-results", capsys)


def test_per_query_files_whose_data_is_not_at_hand_are_said_in_one_line(runs: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Not re-scored, and said: a data folder elsewhere, or holding other data now, the Hub's data, no gain; and where
    the report shows the metric, how many of its tasks it takes from the task files unchecked."""
    copy, exact = _copy(runs, tmp_path)
    elsewhere = tmp_path / "regenerated" / "sample-small-seed0-v2"  # the same name, another generator seed now
    elsewhere.mkdir(parents=True)
    (elsewhere / "DISASTIR_SAMPLE.json").write_text(json.dumps({"synthetic": True, "scale": "small", "seed": 7}))
    hub = "hf:DMIR01/DisastIR@65525d5"

    _json(per_query_file(exact, EDITED), lambda pq: pq["data"].update(source="/nowhere/sample-small-seed0-v2"))
    _json(per_query_file(exact, "DisastIR-FC-Geo"), lambda pq: pq["data"].update(source=str(elsewhere)))
    note = says(load_result_set(exact).unchecked or "", f"{exact}:", "2 of 3 per-query file(s)", "not re-scored",
                f"DisastIR-FC-Geo: their data folder {elsewhere}", "(synthetic sample, scale small, seed 7)",
                "(synthetic sample, scale small, seed 0)", "DisastIR-QA-Bio", "/nowhere/sample-small-seed0-v2",
                "not on this machine", "task files only")
    for metric in ("ndcg_at_10", "recall_at_10"):
        assert cli.main(["report", str(copy), "--metric", metric]) == 0
        printed = capsys.readouterr()
        assert printed.err == f"disastir-mteb report: {note}\n"  # the ANN set was re-scored: nothing said
        assert printed.out.count(f"{metric}: taken from the task files, not re-scored for 2 of 6 tasks of 2 result "
                                 "sets: 2 whose data is not at hand, as said on stderr.") == 1

    for task in TASKS:  # a run on the Hub's data: never downloaded to check it
        _json(per_query_file(exact, task), lambda pq: pq.update(data={"source": hub, "synthetic": False}))
        _json(exact / f"{task}.json", lambda content: content["scores"]["test"][0].update(disastir_data=hub))
    says(load_result_set(exact).unchecked or "", f"{exact}:", "3 of 3 per-query file(s)", "not re-scored",
         "DisastIR-FC-Geo and 2 more", f"({hub})", "never downloaded", "task files only")

    shutil.rmtree(exact)
    shutil.copytree(runs / exact.relative_to(copy), exact)
    _edit(exact, lambda block: block.pop("disastir_gain"))
    says(load_result_set(exact).unchecked or "", f"{exact}:", "1 of 3 per-query file(s)", "not re-scored",
         "DisastIR-QA-Bio", "do not record the gain", "task files only")


def test_a_run_s_own_files_are_all_rescored(runs: Path) -> None:
    """Exact and ANN runs as the runner writes them: every per-query file re-scored against the sample, in agreement."""
    sets = collect_result_sets(runs)
    assert len(sets) == 2 and [result.unchecked for result in sets] == [None, None]
    assert all(len(result.scores) == 3 for result in sets)


# A result set is one provenance (disastir_mteb.results.set_provenance): a file of another model, another setting,
# other data or another gain copied into a set is refused by every reader, naming it and what its siblings record.
@pytest.fixture(scope="module")
def other_runs(sample_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The exact set's tasks run otherwise on the same sample: ``disastir`` instructions, and the linear gain."""
    from disastir_mteb.tasks import retrieval as task_module

    out = tmp_path_factory.mktemp("other-runs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DISASTIR_DATA_DIR", str(sample_data))
        task_module.forget_data_files()
        try:
            evaluate(HashingEncoder(), TASKS, instructions="disastir", cache_dir=False,
                     output_folder=out / "instructions", show_progress=False)
            patch.setenv("DISASTIR_GAIN", "linear")
            evaluate(HashingEncoder(), [EDITED], cache_dir=False, output_folder=out / "linear", show_progress=False)
        finally:
            task_module.forget_data_files()
    [instructed] = {path.parent for path in (out / "instructions").rglob(f"{EDITED}.json")}
    [linear] = {path.parent for path in (out / "linear").rglob(f"{EDITED}.json")}
    return {"instructions": instructed, "linear": linear}


def _copy_in(source: Path, exact: Path, tasks: list[str]) -> None:
    """``tasks``' task files and per-query files of the set at ``source`` copied over the exact set's."""
    for task in tasks:
        shutil.copy(source / f"{task}.json", exact / f"{task}.json")
        shutil.copy(per_query_file(source, task), per_query_file(exact, task))


def _fingerprint(folder: Path, task: str = EDITED) -> str:
    return str((read_per_query(per_query_file(folder, task)).encoding or {})["model_fingerprint"])


def _model(folder: Path, task: str = EDITED) -> str:
    """The model fingerprint a task file records (``disastir_model``)."""
    return str(json.loads((folder / f"{task}.json").read_text(encoding="utf-8"))["scores"]["test"][0]["disastir_model"])


#: Where a per-query file's ``provenance`` section keeps each task-file entry.
_SECTION = {"disastir_model": ("model", "fingerprint"), "disastir_settings": ("settings",),
            "disastir_corpus_digest": ("corpus_digest",), "disastir_data_digest": ("data_digest",),
            "disastir_gain": ("gain",)}


def _write_entries(folder: Path, tasks: list[str], **entries: str) -> None:
    """Provenance entries set in each task file's score block and in its per-query file's ``provenance`` section
    alike, as a run with those inputs writes both: the test's stand-in for another run's files."""
    def section(pq: dict[str, Any]) -> None:
        for key, value in entries.items():
            *parents, leaf = _SECTION[key]
            place = pq["provenance"]
            for parent in parents:
                place = place[parent]
            place[leaf] = json.loads(value) if key == "disastir_settings" else value

    for task in tasks:
        _json(folder / f"{task}.json", lambda content: content["scores"]["test"][0].update(entries))
        _json(per_query_file(folder, task), section)


def _settings(**items: str) -> str:
    """A ``disastir_settings`` value as a run writes it (canonical JSON: RunProvenance.settings_text)."""
    from disastir_mteb.vocabulary.provenance import ModelProvenance, RunProvenance

    plain = {"search": "exact", "instructions": "none", "template": "none", "passages": "raw", "precision": "none",
             "batch_size": "32"}
    model = ModelProvenance("disastir-mteb/hashing-encoder", "1", "f" * 32)
    return RunProvenance(model, {**plain, **items}).settings_text()


def _rerun(*tasks: str) -> tuple[str, ...]:
    """What a sentence about files of another run says to do: remove them, or the command that reruns their tasks."""
    return f"remove {'them' if len(tasks) > 1 else 'it'}", \
        f"disastir-mteb run -m disastir-mteb/hashing-encoder -t {' '.join(tasks)} --overwrite"


def test_a_file_of_another_model_is_refused_by_every_reader(runs: Path, hashing_runs: Callable[..., Path],
                                                            tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: another model's task file and per-query file copied into a set. Before: shown as this model's
    (``report`` its score, ``compare`` a significant drop), exit 0, though its per-query file records another model."""
    copy, exact = _copy(runs, tmp_path)
    [other] = {path.parent for path in hashing_runs(*TASKS).rglob(f"{EDITED}.json")}  # disastir-mteb/hashing-64
    ours, theirs = _model(exact), _model(other)
    assert ours != theirs
    _copy_in(other, exact, [EDITED])
    facts = (exact / f"{EDITED}.json", f"{theirs[:16]}…", "disastir_model", "other 2 files", f"{ours[:16]}…",
             "another model", *_rerun(EDITED))
    _every_reader_refuses(copy, exact, facts, tmp_path / "mteb-results", capsys)

    # files of a runner before the provenance record: the per-query file's store fingerprint still tells
    ours, theirs = _fingerprint(exact, "DisastIR-FC-Geo"), _fingerprint(exact)
    for task in TASKS:
        _json(exact / f"{task}.json", lambda content: content["scores"]["test"][0].pop("disastir_model"))
        _json(per_query_file(exact, task), lambda pq: pq.pop("provenance"))
    with pytest.raises(ValueError) as refused:
        load_result_set(exact)
    _refuses(str(refused.value), (exact / f"{EDITED}.json", f"{theirs[:16]}…", "encoding.model_fingerprint",
                                  "other 2 files", f"{ours[:16]}…", "another model"))


def test_an_instructions_run_copied_over_a_plain_run_is_refused(runs: Path, other_runs: dict[str, Path],
                                                                tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: an ``--instructions disastir`` run's files copied over a plain run's. Its files record the
    setting (``disastir_settings``): one of them among plain ones, or all of them under the plain run's
    ``model_meta.json``, is refused; before, ``report`` showed them as the plain run and ``submit`` said "ready for a
    pull request"."""
    copy, exact = _copy(runs, tmp_path)
    instructed = tmp_path / "instructed"
    shutil.copytree(other_runs["instructions"], instructed)
    _copy_in(instructed, exact, [EDITED])
    one = (exact / f"{EDITED}.json", "instructions 'disastir'", "disastir_settings", "other 2 files", "'none'",
           "other settings", *_rerun(EDITED))
    _every_reader_refuses(copy, exact, one, tmp_path / "mteb-results", capsys)

    _copy_in(instructed, exact, TASKS)  # every file: they agree with each other, not with the set's model_meta.json
    first = exact / "DisastIR-FC-Geo.json"
    every = (first, "instructions 'disastir'", "disastir_settings", exact / "model_meta.json", "instructions 'none'",
             "disastir_instructions", "experiment_kwargs", "2 more files",
             "DisastIR-QA-Bio.json, DisastIR-STS-Tech.json",
             "other settings", *_rerun("DisastIR-FC-Geo", EDITED, "DisastIR-STS-Tech"))
    _every_reader_refuses(copy, exact, every, tmp_path / "mteb-results", capsys)

    # beside the model_meta.json of their own experiment folder, where the runner files them, they are one run
    assert json.loads((instructed / "model_meta.json").read_text())["experiment_kwargs"]["disastir_instructions"] == \
        "disastir"
    assert set(load_result_set(instructed).scores) == set(TASKS)


def test_settings_that_do_not_change_a_ranking_beyond_rounding_are_not_refused(runs: Path, tmp_path: Path) -> None:
    """A set resumed with another batch size is one run (batches move vectors by float rounding only); another
    precision, search or template is another run's file."""
    _, exact = _copy(runs, tmp_path)
    _write_entries(exact, TASKS, disastir_settings=_settings())
    _write_entries(exact, [EDITED], disastir_settings=_settings(batch_size="8"))
    assert set(load_result_set(exact).scores) == set(TASKS)
    for item, value, said in (("precision", "bf16", "'bf16'"), ("search", "ann-hnsw-ip-f32-M16-efC128-ef64-k10-t2",
                                                                 "'ann-hnsw-ip-f32-M16-efC128-ef64-k10-t2'"),
                              ("template", "colon", "'colon'")):
        _write_entries(exact, [EDITED], disastir_settings=_settings(**{item: value}))
        with pytest.raises(ValueError) as refused:
            load_result_set(exact)
        _refuses(str(refused.value), (exact / f"{EDITED}.json", f"{item} {said}", "disastir_settings",
                                      "other 2 files", "other settings", *_rerun(EDITED)))


def test_a_file_of_another_gain_or_corpus_is_refused(runs: Path, other_runs: dict[str, Path], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A task rerun with ``DISASTIR_GAIN=linear`` into a set of exponential ones. Before: shown, the report's
    provenance saying the tasks disagree, exit 0. And, with the new entries, a file recording another corpus."""
    linear = load_result_set(other_runs["linear"])  # alone, its every metric re-scored with its own gain
    assert linear.rescored == (EDITED,) and "ndcg_at_5" in linear.rescored_metrics
    copy, exact = _copy(runs, tmp_path)
    _copy_in(other_runs["linear"], exact, [EDITED])
    gain = (exact / f"{EDITED}.json", "gain 'linear'", "disastir_gain", "other 2 files", "'exponential'",
            "another gain", *_rerun(EDITED))
    _every_reader_refuses(copy, exact, gain, tmp_path / "mteb-results", capsys)

    _, exact = _copy(runs, tmp_path / "corpus")
    _write_entries(exact, TASKS, disastir_corpus_digest="1" * 32)
    _write_entries(exact, ["DisastIR-STS-Tech"], disastir_corpus_digest="2" * 32,
                   disastir_data_digest="3" * 32)  # per task by design: never compared across tasks
    _write_entries(exact, [EDITED], disastir_data_digest="4" * 32)
    with pytest.raises(ValueError) as refused:
        load_result_set(exact)
    _refuses(str(refused.value), (exact / "DisastIR-STS-Tech.json", "2" * 16 + "…", "disastir_corpus_digest",
                                  "other 2 files", "1" * 16 + "…", "another corpus", *_rerun("DisastIR-STS-Tech")))
    _write_entries(exact, ["DisastIR-STS-Tech"], disastir_corpus_digest="1" * 32)
    assert set(load_result_set(exact).scores) == set(TASKS)


def test_every_metric_a_top_10_gives_is_rescored_and_the_others_are_said(runs: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """What a run writes agrees with its top 10s for every metric down to rank 10; deeper ones are said unchecked."""
    cutoffs = "{1,3,5,10}"
    assert sorted(load_result_set(next(runs.rglob("model_meta.json")).parent).rescored_metrics) == sorted(
        [*(f"{family}_at_{k}" for family in ("ndcg", "map", "recall", "precision", "mrr", "hit_rate")
           for k in cutoffs.strip("{}").split(",")), "accuracy", "ndcg_at_10_exponential_gain",
         "ndcg_at_10_linear_gain", "unjudged_at_10", "ndcg_at_10_unjudged_removed", "mrr_at_10_unjudged_removed",
         "recall_at_10_unjudged_removed"])
    for metric, line in (("mrr_at_10", None),
                         ("recall_at_100", "recall_at_100: taken from the task files, not re-scored (a top 10 cannot "
                                           "give it: Recall@100 reads down to rank 100, and the per-query files keep "
                                           "each query's top 10).")):
        for command in ("report", "compare"):
            assert cli.main([command, str(runs), "--metric", metric]) == 0
            printed = capsys.readouterr()
            assert printed.err == ""
            assert ("taken from the task files" not in printed.out if line is None else
                    printed.out.count(line) == 1), (command, metric)
