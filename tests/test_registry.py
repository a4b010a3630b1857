from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import mteb
import pytest

from disastir_mteb import registration as registry
from disastir_mteb.vocabulary.taxonomy import TASK_NAMES


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env}, cwd="/")


def test_register_is_idempotent() -> None:
    get_tasks_module = sys.modules["mteb.get_tasks"]
    before = len(get_tasks_module.TASK_LIST)
    registry.register()
    registry.register()
    assert len(get_tasks_module.TASK_LIST) == before
    names = [cls.metadata.name for cls in get_tasks_module.TASK_LIST if cls.metadata.name.startswith("DisastIR-")]
    assert len(names) == len(set(names)) == 3 * 48  # the 48 full tasks, then DisastIR-Test-* and DisastIR-DevLite-*
    assert names[:48] == list(TASK_NAMES)


def test_mteb_public_lookups_see_the_tasks() -> None:
    assert mteb.get_task("DisastIR-NLI-Soc").metadata.name == "DisastIR-NLI-Soc"
    assert [t.metadata.name for t in mteb.get_tasks(tasks=["DisastIR-QA-Bio", "DisastIR-STS-Tech"])] == [
        "DisastIR-QA-Bio", "DisastIR-STS-Tech"]
    assert {t.metadata.name for t in mteb.get_tasks(task_types=["Retrieval"])} >= set(TASK_NAMES)
    assert len(mteb.get_benchmark("DisastIR").tasks) == 48
    with pytest.raises(KeyError, match="DisastIR-QA-Bio"):
        mteb.get_task("DisastIR-QA-Bioo")


def test_autoload_registers_without_importing_the_plugin() -> None:
    proc = _python("""
        import sys, mteb
        print(len(mteb.get_benchmark('DisastIR').tasks), mteb.get_task('DisastIR-QA-Bio').metadata.name)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["48", "DisastIR-QA-Bio"]


def test_autoload_hook_imports_nothing_heavy_at_start() -> None:
    proc = _python("import sys; print([m for m in ('mteb', 'torch', 'disastir_mteb', 'numpy') if m in sys.modules])")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert "_disastir_mteb_autoload" in _python("import sys; print(list(sys.modules))").stdout


def test_a_broken_plugin_warns_and_mteb_still_works(tmp_path: Path) -> None:
    shadow = tmp_path / "disastir_mteb"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise RuntimeError('simulated breakage')\n")
    proc = _python("""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            import mteb
        print(len(mteb.get_tasks(tasks=['SciFact'])), any('simulated breakage' in str(w.message) for w in caught))
    """, PYTHONPATH=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["1", "True"]


def test_mteb_cli_lists_and_runs_benchmark_names() -> None:
    """``python -m mteb available-tasks ...`` then ``available-benchmarks``, in one fresh interpreter."""
    proc = _python("""
        import runpy, sys
        for argv in (["available-tasks", "--tasks", "DisastIR-QA-Bio", "DisastIR-NLI-Soc"], ["available-benchmarks"]):
            sys.argv = ["mteb", *argv]
            try:
                runpy.run_module("mteb", run_name="__main__", alter_sys=True)
            except SystemExit as exited:
                assert not exited.code, exited.code
            print("-- next command --", flush=True)
    """)
    assert proc.returncode == 0, proc.stderr
    tasks, benchmarks, _ = proc.stdout.split("-- next command --")
    assert "DisastIR-QA-Bio" in tasks and "DisastIR-NLI-Soc" in tasks
    assert "DisastIR-STS" in benchmarks


@pytest.mark.parametrize("first", [
    "import disastir_mteb.tasks.retrieval",
    "import disastir_mteb.models.dmretriever",
    "from disastir_mteb.models.adapter import with_instructions",
    "import disastir_mteb.tasks",
    "import disastir_mteb.search.shared_corpus",
    "import disastir_mteb.tasks.benchmarks",
])
def test_registration_is_complete_whichever_module_first_imports_mteb(first: str) -> None:
    """A plugin module importing mteb first fires the hook: registration still finds every module whole."""
    proc = _python(f"""
        import sys, warnings
        warnings.simplefilter("error", RuntimeWarning)
        {first}
        assert "mteb" in sys.modules
        from disastir_mteb import registration as registry
        import mteb
        print(registry.is_registered(), mteb.get_task("DisastIR-QA-Bio").metadata.name,
              mteb.get_model_meta("DMIR01/DMRetriever-33M").name)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "DisastIR-QA-Bio", "DMIR01/DMRetriever-33M"]
    assert "could not register" not in proc.stderr


def test_a_benchmark_mteb_ships_itself_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    """Once DisastIR is upstreamed, mteb's own benchmark wins over the plugin's, with one warning."""
    import types

    from mteb import Benchmark

    upstream = Benchmark(name="DisastIR", tasks=mteb.get_tasks(tasks=["DisastIR-QA-Bio"]), description="mteb's own")
    module = types.SimpleNamespace(_build_registry=lambda: {"DisastIR": upstream})
    registry.wrap_benchmark_registry(module)
    with caplog.at_level("WARNING", logger="disastir_mteb.registration"):
        built = module._build_registry()
    assert built["DisastIR"] is upstream
    assert len(built["DisastIR-QA"].tasks) == 8  # the plugin's others are still added
    assert "keeping mteb's own" in caplog.text


def test_with_the_autoload_off_nothing_registers_until_the_plugin_is_imported() -> None:
    """``DISASTIR_MTEB_AUTOLOAD=0``: nothing registers on ``import mteb``, but ``import disastir_mteb`` then does."""
    proc = _python("""
        import mteb
        try:
            mteb.get_task('DisastIR-QA-Bio')
        except KeyError:
            print('absent')
        import disastir_mteb
        print(mteb.get_task('DisastIR-QA-Bio').metadata.name, mteb.get_model_meta('DMIR01/DMRetriever-33M').name)
    """, DISASTIR_MTEB_AUTOLOAD="0")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["absent", "DisastIR-QA-Bio", "DMIR01/DMRetriever-33M"]
