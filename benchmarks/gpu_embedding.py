"""Passage embedding throughput on one device (``MEDKG_EMBEDDING_DEVICE``): the configured model on the
real passages of ../shared/data (or a JSON Lines file of ``{"text": ...}``), copied up to ``--passages``,
in the precision the device gets (bfloat16 on a GPU that has it, else float16; the CPU's own), batches
sorted by length. Prints passages/s, the float32-to-chosen precision agreement on a sample, and the
hours 100M passages (PubMed's ~36M abstracts) would take.

    python -m benchmarks.gpu_embedding --device cuda --passages 200000 --batch 512
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import write_results

PUBMED_PASSAGES = 100_000_000
GOAL_PER_S = 20_000  # PubMed's passages in under 1.5 h


def _texts(path: Path | None) -> list[str]:
    if path is not None:
        return [json.loads(line)["text"] for line in path.read_text().splitlines() if line.strip()]
    from benchmarks.corpus import real_passages

    return [text for _, text in real_passages()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("--passages", type=int, default=200_000, help="passages embedded (real ones, repeated)")
    ap.add_argument("--batch", type=int, default=None, help="texts per forward pass (default: the device's)")
    ap.add_argument("--texts", type=Path, default=None, help="JSON Lines of {'text': ...} instead of ../shared")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)

    from kg.embedders import build_embedder
    from kg.settings import load_settings

    settings = load_settings(embedding_device=args.device, embedding_batch_size=args.batch)
    embedder = build_embedder(settings)
    real = _texts(args.texts)
    if not real:
        print("no passages to embed", file=sys.stderr)
        return 2
    texts = [real[i % len(real)] for i in range(args.passages)]
    embedder.encode(texts[: embedder.batch_size])  # load and warm up before the clock starts
    chunk = max(embedder.batch_size * 64, 8192)  # what a Ray embedding actor is handed at a time
    t0 = time.perf_counter()
    for start in range(0, len(texts), chunk):
        embedder.encode(texts[start : start + chunk])
    if args.device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    rate = len(texts) / seconds
    sample = real[:2000]
    exact = build_embedder(load_settings(embedding_device=args.device, embedding_dtype="float32"))
    cosine = np.sum(embedder.encode(sample) * exact.encode(sample), axis=1)
    results = {
        "device": args.device, "model": embedder.model_name, "path": str(embedder.path),
        "batch": embedder.batch_size, "passages": len(texts), "seconds": seconds, "passages_per_s": rate,
        "hours_for_100M": PUBMED_PASSAGES / rate / 3600, "cosine_to_float32_mean": float(cosine.mean()),
        "cosine_to_float32_min": float(cosine.min()), "goal_per_s": GOAL_PER_S,
    }  # fmt: skip
    if args.device.startswith("cuda"):
        import torch

        results["gpu"] = torch.cuda.get_device_name(0)
    print(
        f"{results.get('gpu', args.device)}: {embedder.model_name} ({embedder.path}, batch {embedder.batch_size}): "
        f"{rate:,.0f} passages/s over {len(texts):,}; 100M passages in {results['hours_for_100M']:.2f} h "
        f"(goal >= {GOAL_PER_S:,}/s: {'met' if rate >= GOAL_PER_S else 'NOT met'}); cosine to float32 "
        f"mean {results['cosine_to_float32_mean']:.4f}, min {results['cosine_to_float32_min']:.4f}",
        flush=True,
    )
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
