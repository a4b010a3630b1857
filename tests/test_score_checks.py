"""Impossible scores are refused in one sentence by every reader: report, compare, the leaderboard and submit.

A real hashing-encoder run (exact and ANN, three tasks, per-query files beside the task files) is copied and
one task file edited per case; every reader goes through ``load_result_set``
(:mod:`disastir_mteb.results.score_checks`), so each must refuse it naming the file, the metric, the value and
its range (or the per-query mean), and the command that reruns the task.
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

from disastir_mteb import cli
from disastir_mteb.leaderboard.rows import result_rows
from disastir_mteb.models.hashing_encoder import HashingEncoder
from disastir_mteb.results.metrics import metric_range
from disastir_mteb.results.per_query import per_query_file, read_per_query
from disastir_mteb.results.result_sets import load_result_set
from disastir_mteb.results.score_checks import TOLERANCE
from disastir_mteb.runner.run import evaluate

TASKS = ["DisastIR-QA-Bio", "DisastIR-FC-Geo", "DisastIR-STS-Tech"]
EDITED = "DisastIR-QA-Bio"
RERUN = (r"; the file was edited or damaged: rerun the task \(disastir-mteb run -m disastir-mteb/hashing-encoder "
         rf"-t {EDITED} --overwrite, with the run's other options\)\.$")


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


CASES = {
    "edited to 7.5": (_set(ndcg_at_10=7.5, main_score=7.5),
                      r"ndcg_at_10 is 7\.5 \(valid: \[0, 1\]\); main_score is 7\.5 \(valid: \[0, 1\]\)"),
    "NaN": (_set(ndcg_at_10=math.nan, main_score=math.nan),
            r"ndcg_at_10 is NaN \(valid: \[0, 1\]\); main_score is NaN \(valid: \[0, 1\]\)"),
    "infinite": (_set(map_at_10=math.inf), r"map_at_10 is inf \(valid: \[0, 1\]\)"),
    "negative recall": (_set(recall_at_10=-0.2), r"recall_at_10 is -0\.2 \(valid: \[0, 1\]\)"),
    "nAUC above 1": (_set(nauc_ndcg_at_10_max=1.5), r"nauc_ndcg_at_10_max is 1\.5 \(valid: at most 1 or NaN\)"),
    "not a number": (_set(ndcg_at_10="0.7"), r"ndcg_at_10 is '0\.7', not a number \(valid: \[0, 1\]\)"),
    "main score unlike ndcg_at_10": (lambda block: block.update(main_score=block["ndcg_at_10"] / 2),
                                     r"holds main_score .* but ndcg_at_10 .*, and DisastIR's main score is ndcg_at_10 "
                                     r"\(they must agree within 1e-05\)"),
    "unlike its per-query file": (_off_by(0.01), rf"holds ndcg_at_10 .*, but the mean NDCG@10 of the \d+ queries in "
                                                 rf".*disastir_per_query/{EDITED}_per_query\.json is 0\.\d{{6}} \(they "
                                                 r"must agree within 1e-05, mteb's rounding\)"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_impossible_score_is_refused_by_every_reader(case: str, runs: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    change, what = CASES[case]
    copy, exact = _copy(runs, tmp_path)
    path = _edit(exact, change)
    sentence = rf"^{re.escape(str(path))}( holds an impossible score: {what}| {what})" + RERUN

    with pytest.raises(ValueError, match=sentence):
        load_result_set(exact)
    with pytest.raises(ValueError, match=sentence):
        result_rows([copy])  # what the leaderboard page shows
    out = tmp_path / "mteb-results"
    for command in (["report", str(copy)], ["compare", str(copy)], ["submit", str(copy), "--out", str(out)]):
        assert cli.main(command) == 2, command  # before: report showed 750.00, submit "ready for a pull request"
        printed = capsys.readouterr()
        assert printed.out == "", command
        assert len(printed.err.splitlines()) == 1 and printed.err.startswith(f"disastir-mteb {command[0]}: {path}")
    assert not out.exists()  # submit wrote nothing


def test_what_runs_produce_is_accepted(runs: Path, tmp_path: Path) -> None:
    """Negative and NaN nAUC, bounds, metrics the check does not know, mteb's rounding, unreadable per-query files."""
    assert metric_range("ndcg_at_10") == (0.0, 1.0, False) and metric_range("hit_rate_at_100") == (0.0, 1.0, False)
    assert metric_range("nauc_mrr_at_10_diff1") == (-math.inf, 1.0, True) and metric_range("evaluation_time") is None
    _, exact = _copy(runs, tmp_path)
    _edit(exact, _set(nauc_ndcg_at_10_max=-0.7, nauc_map_at_10_std=math.nan, map_at_1=0.0, precision_at_1=1.0,
                      some_later_metric=42.0))
    assert load_result_set(exact).scores[EDITED] == json.loads((exact / f"{EDITED}.json").read_text())["scores"][
        "test"][0]["main_score"]

    mean = read_per_query(per_query_file(exact, EDITED)).mean
    for inside, delta in ((True, 0.9 * TOLERANCE), (False, 1.1 * TOLERANCE)):
        _edit(exact, _set(ndcg_at_10=mean + delta, main_score=mean + delta))  # mteb rounds to 5 decimals: +-5e-6
        if inside:
            load_result_set(exact)
        else:
            with pytest.raises(ValueError, match="must agree within 1e-05"):
                load_result_set(exact)
    per_query_file(exact, EDITED).write_text("{", encoding="utf-8")  # unreadable: no claim either way (as before)
    assert EDITED in load_result_set(exact).scores


def test_several_impossible_files_are_counted_in_the_one_sentence(runs: Path, tmp_path: Path) -> None:
    _, exact = _copy(runs, tmp_path)
    _edit(exact, _set(ndcg_at_10=7.5, main_score=7.5))
    other = exact / "DisastIR-STS-Tech.json"
    data = json.loads(other.read_text(encoding="utf-8"))
    data["scores"]["test"][0]["hit_rate_at_10"] = 2.0
    other.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError, match=r"DisastIR-QA-Bio\.json holds an impossible score: .* \(1 more file\(s\) of "
                                         r"this set too: DisastIR-STS-Tech\.json\); the file was edited or damaged: "
                                         r"rerun the tasks \(disastir-mteb run -m disastir-mteb/hashing-encoder -t "
                                         r"DisastIR-QA-Bio DisastIR-STS-Tech --overwrite"):
        load_result_set(exact)
