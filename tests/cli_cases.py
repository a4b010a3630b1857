"""Many short ``disastir-mteb`` command lines in one fresh interpreter, each with what it said and imported.

The checks that a command refuses bad input before importing anything heavy need an interpreter that has not
imported it yet; one interpreter serves a whole table of such cases, where one each cost an interpreter's start.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

__all__ = ["CaseOutcome", "run_in_one_interpreter"]

_RUNNER = """
import contextlib, io, json, sys
from disastir_mteb import cli

heavy, outcomes = json.loads(sys.argv[1]), []
for argv in json.loads(sys.argv[2]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as exited:
            code = exited.code
    outcomes.append({"code": code, "stdout": out.getvalue(), "stderr": err.getvalue(),
                     "imported": sorted(name for name in heavy if name in sys.modules)})
print(json.dumps(outcomes))
"""


class CaseOutcome(TypedDict):
    """One command line's exit code, its stdout and stderr, and which of the heavy modules were imported after it."""

    code: int
    stdout: str
    stderr: str
    imported: list[str]


def run_in_one_interpreter(cases: list[list[str]], *, heavy: tuple[str, ...], cwd: Path) -> list[CaseOutcome]:
    """``cli.main(argv)`` for each of ``cases`` in turn, in one fresh interpreter started in ``cwd``.

    The interpreter itself says nothing on stderr (no warning at import, nothing outside a command); a heavy
    module imported by one case is listed for it and for every case after it.
    """
    done = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(heavy), json.dumps(cases)], cwd=cwd,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    outcomes: list[CaseOutcome] = json.loads(done.stdout)
    assert len(outcomes) == len(cases)
    return outcomes
