"""Bad command lines: each ends in one sentence naming the option or name, before any model is loaded."""

from __future__ import annotations

import pytest

from disastir_mteb.cli import main

RUN = ["run", "-m", "bundled", "--data", "sample", "--quiet", "--no-cache"]

CASES = [
    # (arguments, exit code, the sentence's telling part)
    (["-t", "DisastIR-QA-Foo"], 2, "Unknown DisastIR task 'DisastIR-QA-Foo'. Did you mean DisastIR-QA-"),
    (["--search", "annn"], 2, "argument --search: invalid choice: 'annn' (choose from 'exact', 'ann')"),
    (["--search", "ann", "--ann-k", "0"], 2, "AnnParams.k=0 must be an integer >= 1"),
    (["--search", "ann", "--ann-k", "-3"], 2, "AnnParams.k=-3 must be an integer >= 1"),
    (["--ann-k", "5"], 2, "ANN parameters ['k'] were given for search='exact'; add search='ann'."),
    (["--search", "ann", "--ann-preset", "fast"], 2, "'fast'"),
    (["--batch-size", "0"], 2, "argument --batch-size: must be an integer >= 1, not 0"),
    (["--batch-size", "many"], 2, "argument --batch-size: must be an integer >= 1, not 'many'"),
    (["--tokenize-threads", "-1"], 2, "argument --tokenize-threads: must be an integer >= 0, not -1"),
    (["--precision", "fp8"], 2, "argument --precision: invalid choice: 'fp8'"),
    (["--instructions", "shouting"], 2, "shouting"),
]


def _run(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exited:  # argparse's own one-line error
        return int(exited.code or 0)


@pytest.mark.parametrize(("extra", "code", "sentence"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bad_run_options_are_one_sentence(extra: list[str], code: int, sentence: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([*RUN, *extra]) == code
    err = capsys.readouterr().err.strip().splitlines()
    last = err[-1]
    assert sentence in last, err
    assert last.startswith("disastir-mteb run")  # names the command; argparse adds a usage block above it
    assert "Traceback" not in "\n".join(err)


@pytest.mark.parametrize(("option", "value", "sentence"), [
    ("--intents", "Foo", "Unknown DisastIR intent 'Foo'; expected one of"),
    ("--categories", "Bioo", "Unknown DisastIR category 'Bioo'; expected an abbreviation"),
])
def test_unknown_intent_or_category(option: str, value: str, sentence: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", option, value]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("disastir-mteb tasks: ") and sentence in err[0]
