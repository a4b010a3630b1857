"""What identifying a model by its content costs: a folder's files cold and warm, an in-memory model's weights.

Run: python benchmarks/model_identity.py [--gib 1] [--repeat 3]

- The bundled all-MiniLM-L6-v2 folder: its digest with no memo (every file read), then twice with the memo the
  store keeps (a warm start: no file read), each with the bytes read.
- The same model in memory (``SentenceTransformer``): the digest of its parameters, buffers and tokenizer.
- Per GiB: a folder holding one ``--gib`` GiB weight file (written here, so read from the page cache: a cold disk adds
  its read time), and an in-memory ``torch.nn.Module`` of ``--gib`` GiB of float32 parameters.

Each figure is the median of ``--repeat`` runs in this process, printed as soon as it is measured, with the machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from disastir_mteb.models.bundled import bundled_model_path
from disastir_mteb.models.content import ModelContent, folder_content, object_content


def timed(repeat: int, work: Callable[[], ModelContent | None]) -> tuple[float, Any]:
    """The median seconds of ``repeat`` calls of ``work``, and its last answer."""
    seconds, answer = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = work()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), answer


def say(what: str, seconds: float, content: ModelContent | None) -> None:
    """One figure's line, printed at once."""
    read = f", {content.bytes_read / 2**20:,.1f} MiB read" if content is not None else ""
    print(f"{what:<58} {seconds * 1000:9.1f} ms{read}", flush=True)


def main() -> None:
    """Measure and print each figure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="size of the synthetic weights (default 1 GiB)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import torch
    from sentence_transformers import SentenceTransformer

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}, torch {torch.__version__}", flush=True)
    folder = bundled_model_path()
    with tempfile.TemporaryDirectory() as scratch:
        memo = Path(scratch) / "memo"
        say("MiniLM folder, no memo (every file read)", *timed(args.repeat, lambda: folder_content(folder)))
        folder_content(folder, memo)
        say("MiniLM folder, warm memo (a warm start)", *timed(args.repeat, lambda: folder_content(folder, memo)))
        model = SentenceTransformer(str(folder), device="cpu")
        say("MiniLM in memory: parameters, buffers, tokenizer", *timed(args.repeat, lambda: object_content(model)))

        size = int(args.gib * 2**30)
        big = Path(scratch) / "big"
        big.mkdir()
        with open(big / "model.safetensors", "wb") as handle:
            block = os.urandom(1 << 24)
            for _ in range(size // len(block)):
                handle.write(block)
        say(f"{args.gib:g} GiB folder, no memo (page cache)", *timed(args.repeat, lambda: folder_content(big)))
        folder_content(big, memo)
        say(f"{args.gib:g} GiB folder, warm memo", *timed(args.repeat, lambda: folder_content(big, memo)))
        rows = size // 4 // 4096
        module = torch.nn.Linear(4096, rows, bias=False)
        say(f"{args.gib:g} GiB in memory (float32 parameters)", *timed(args.repeat, lambda: object_content(module)))


if __name__ == "__main__":
    main()
