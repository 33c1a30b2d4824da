"""The passage store at growing sizes: copies of the real passages of ../shared/data under new ids, with
perturbed copies of their real embeddings (so that embedding time does not hide the index costs). For
each size: seconds per checkpoint of 10k added passages, the growth's build time, disk, hybrid search
p50/p95 (100 PubMedQA questions, after an untimed pass with the other 100) and recall@10 of the dense
index against exact search (all 200) in one process, and the cold start and RSS of `medkg serve` on
the store; the checkpoint and p95 also as ratios to the first size's.

    python -m benchmarks.scale --sizes 10000,100000,1000000 [--json] [--dir DIR] [--no-serve] [--real N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import faiss
import numpy as np

from benchmarks.corpus import questions, real_passages, scaled
from kg.embedders import build_embedder
from kg.embedding_paths import cpu_features
from kg.settings import load_settings
from kg.text_index import PassageRecord, TextIndex
from kg.vector_index import DEFAULT_FLAT_MAX

CHECKPOINT = 10_000  # passages per checkpoint, as a PubMed load commits (ingest/pubmed/load.py)
BUILD_COMMIT = 500_000  # passages per commit while growing to the next size (not timed per checkpoint)
# The perturbation's norm relative to a unit vector: a copy's cosine to its original is about 0.86, as
# between related passages of different articles, and no two copies coincide. (At 0.05 every copy was a
# near-duplicate at cosine 0.999: the exact top 10 among thousands of copies of one passage was decided
# by noise, and recall against it measured nothing an index could get right.)
NOISE = 0.6


class CopiedEmbedder:
    """Stands in for the configured embedder: a passage's vector is its real embedding plus seeded noise
    (each call draws anew), a question's its real embedding; the model's name and signature are the
    real embedder's, so `medkg serve` opens the store with the real model for queries."""

    def __init__(self, real, texts: list[str], queries: list[str], seed: int = 0) -> None:
        self.model_name, self.signature, self.dimension = real.model_name, real.signature, real.dimension
        print(f"embedding {len(texts):,} real passages and {len(queries)} questions once ...", flush=True)
        vectors = real.encode(list(texts) + list(queries))
        self._known = {t: v for t, v in zip(list(texts) + list(queries), vectors, strict=True)}
        self._queries = set(queries)
        self._rng = np.random.default_rng(seed)

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.stack([self._known[t] for t in texts]).astype(np.float32)
        passages = np.array([t not in self._queries for t in texts])
        if passages.any():
            noise = self._rng.standard_normal((int(passages.sum()), out.shape[1])).astype(np.float32)
            out[passages] += NOISE * noise / np.sqrt(out.shape[1])
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    encode_memoised = encode  # no memo: every passage is embedded, as the benchmark times it


def _grow(
    index: TextIndex, start: int, stop: int, commit_every: int = CHECKPOINT, real_max: int | None = None
) -> list[float]:
    """Add passages ``start`` to ``stop`` in batches of 10k, committing every ``commit_every``; the
    seconds of each commit period, per 10k passages."""
    periods: list[float] = []
    t0, since = time.perf_counter(), 0
    for first in range(start, stop, CHECKPOINT):
        n = min(CHECKPOINT, stop - first)
        copies = scaled(n, first, real_max=real_max)
        records = [PassageRecord(pid, pid.split("#")[0], text) for _, pid, text in copies]
        index.add(records, batch=1024)
        since += n
        if since >= commit_every or first + n >= stop:
            index.commit()
            periods.append((time.perf_counter() - t0) * CHECKPOINT / since)
            t0, since = time.perf_counter(), 0
    return periods


def _disk_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6, 1)


def _exact_top10(index: TextIndex, queries: np.ndarray) -> list[set[str]]:
    """The exact 10 nearest passages of each query: brute force over every stored vector, streamed."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.empty((len(queries), 0), dtype=object)
    for ids, _, vectors in index.vectors.iter_live(200_000):
        scores = np.concatenate([best_s, queries @ vectors.T], axis=1)
        names = np.concatenate(
            [best_i, np.broadcast_to(np.asarray(ids, dtype=object), (len(queries), len(ids)))], axis=1
        )
        top = np.argpartition(-scores, 10, axis=1)[:, :10] if scores.shape[1] > 10 else np.argsort(-scores, axis=1)
        best_s, best_i = np.take_along_axis(scores, top, 1), np.take_along_axis(names, top, 1)
    return [set(row) for row in best_i]


def _recall_at_10(index: TextIndex, queries: np.ndarray) -> float:
    exact = _exact_top10(index, queries)
    found = sum(
        len({pid for pid, _ in index.dense_search("", 10, vector=q)} & e) for q, e in zip(queries, exact, strict=True)
    )
    return found / (10 * len(queries))


def _serve(data: Path, port: int) -> dict[str, float]:
    """Start `medkg serve` on ``data``; seconds until /readyz says ready, and its RSS then (MB)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    env |= {"MEDKG_DATA_DIR": str(data), "MEDKG_API_PORT": str(port), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", "from service.cli import main; main()", "serve"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        while time.perf_counter() - t0 < 600:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if json.loads(r.read()).get("status") == "ready":
                        break
            except OSError:
                pass
            time.sleep(0.2)
        cold = time.perf_counter() - t0
        rss = int(Path(f"/proc/{proc.pid}/status").read_text().split("VmRSS:")[1].split()[0]) / 1024
        return {"cold_start_s": round(cold, 2), "rss_mb": round(rss, 1)}
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--dir", type=Path, default=None, help="The data dir grown (default: a temp dir).")
    parser.add_argument("--checkpoints", type=int, default=3, help="Checkpoints of 10k timed at each size.")
    parser.add_argument("--no-serve", action="store_true", help="Skip `medkg serve`'s cold start and RSS.")
    parser.add_argument("--port", type=int, default=8777)
    parser.add_argument("--flat-max", type=int, default=DEFAULT_FLAT_MAX, help="Exact dense search up to this size.")
    parser.add_argument("--json", action="store_true", help="One JSON object per size on its own line.")
    parser.add_argument("--real", type=int, help="Copy only the first N real passages (all by default).")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    data = args.dir or Path(tempfile.mkdtemp(prefix="medkg-scale-"))
    settings = load_settings(data_dir=data)
    faiss.omp_set_num_threads(settings.faiss_threads)  # as the service runs it: one query at a time
    asked = questions()
    timed_questions, warm_up = asked[: len(asked) // 2], asked[len(asked) // 2 :]
    embedder = CopiedEmbedder(build_embedder(settings), [t for _, t in real_passages()[: args.real]], asked)
    query_vectors = embedder.encode(asked)
    index = TextIndex(data / "indexes", embedder, flat_max=args.flat_max)  # type: ignore[arg-type]
    cpu = cpu_features()["model"]
    print(f"CPU: {cpu}, {os.cpu_count()} cores; data dir {data}", flush=True)
    first: dict[str, float] | None = None
    done = 0
    for size in sizes:
        t0 = time.perf_counter()
        grown_to = max(done, size - args.checkpoints * CHECKPOINT)
        _grow(index, done, grown_to, BUILD_COMMIT, args.real)  # the growth's build, in large commits
        build_s = time.perf_counter() - t0
        checkpoints = _grow(index, grown_to, size, real_max=args.real)  # then checkpoints of 10k, timed one by one
        done = size
        for q in warm_up:  # untimed: the caches a running service has warm
            index.search(q, k=10, mode="hybrid")
        times = []
        for q in timed_questions:
            t1 = time.perf_counter()
            index.search(q, k=10, mode="hybrid")
            times.append((time.perf_counter() - t1) * 1000)
        times.sort()
        stats = index.vectors.stats()
        row = {
            "passages": len(index),
            "checkpoint_s": round(statistics.median(checkpoints), 3),
            "checkpoint_max_s": round(max(checkpoints), 3),
            "build_s": round(build_s, 1),
            "disk_mb": _disk_mb(data / "indexes"),
            "search_p50_ms": round(statistics.median(times), 2),
            "search_p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
            "recall_at_10": round(_recall_at_10(index, query_vectors), 4),
            "dense_kind": stats["kind"],
            "nlist": stats["nlist"],
            "nprobe": stats["nprobe"],
            "segments": stats["segments"],
        }
        if not args.no_serve:
            index.close()
            row |= _serve(data, args.port)
            index = TextIndex(data / "indexes", embedder, flat_max=args.flat_max)  # type: ignore[arg-type]
        first = first or row
        row["checkpoint_ratio"] = round(row["checkpoint_s"] / first["checkpoint_s"], 2)
        row["search_p95_ratio"] = round(row["search_p95_ms"] / first["search_p95_ms"], 2)
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
