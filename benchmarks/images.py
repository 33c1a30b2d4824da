"""Image benchmark: DICOM files decoded and embedded per second, and image search latency over an index of
at least ``--vectors`` vectors (real images plus synthetic variants), against a numpy brute-force baseline.

Input: ../shared/data/dicom and the pydicom-data wheel. Usage: ``python -m benchmarks.images --help``.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import os
import resource
import secrets
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import faiss
import numpy as np
from pydicom.filereader import read_file_meta_info
from pydicom.uid import (
    UID,
    DeflatedExplicitVRLittleEndian,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000TransferSyntaxes,
    JPEGLSTransferSyntaxes,
    JPEGTransferSyntaxes,
    MPEGTransferSyntaxes,
    RLETransferSyntaxes,
)

from benchmarks.common import write_results
from multimodal.deid import Pseudonymizer
from multimodal.dicom import DicomError, DicomImage, read_dicom
from multimodal.encoders import DescriptorEncoder, ImageEncoder, build_image_encoder
from multimodal.image_index import ImageIndex

DEFAULT_SOURCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dicom"
BATCH = 64  # images per encode call (ImageIndex.add embeds in batches of 64 too)
CHUNK = 64  # synthetic variants made, then added, at a time (bounds memory)
K = 10
_UNCOMPRESSED = {ImplicitVRLittleEndian, ExplicitVRLittleEndian, ExplicitVRBigEndian}


# ---- input -------------------------------------------------------------------------------------
def wheel_folder() -> Path | None:
    """data_store/data/ of the pydicom-data wheel, or None when it is not installed."""
    spec = importlib.util.find_spec("data_store")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return folder if folder.is_dir() else None


def dicom_files(folders: Sequence[Path]) -> list[Path]:
    """Every file under ``folders`` but text (DICOM files often have no extension)."""
    return [
        p
        for folder in folders
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.suffix.lower() not in (".md", ".txt", ".json", ".py")
    ]


def syntax_group(path: Path) -> str:
    """The file's transfer-syntax group, from its file meta information."""
    try:
        ts = read_file_meta_info(path).get("TransferSyntaxUID")
    except Exception:
        return "no file meta"
    if ts is None:
        return "no file meta"
    ts = UID(str(ts))
    if ts in _UNCOMPRESSED:
        return "uncompressed"
    if ts == DeflatedExplicitVRLittleEndian:
        return "deflated"
    if ts in JPEG2000TransferSyntaxes:
        return "JPEG 2000"
    if ts in JPEGLSTransferSyntaxes:
        return "JPEG-LS"
    if ts in JPEGTransferSyntaxes:
        return "JPEG (baseline/extended/lossless)"
    if ts in RLETransferSyntaxes:
        return "RLE"
    if ts in MPEGTransferSyntaxes:
        return "MPEG (video)"
    return "other"


# ---- measurements ------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def percentiles(ms: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(ms, dtype=np.float64)
    return {"p50": float(np.percentile(arr, 50)), "p95": float(np.percentile(arr, 95)), "max": float(arr.max())}


def decode_pass(files: list[Path], pseudonymizer: Pseudonymizer) -> tuple[list[float], list[DicomImage | DicomError]]:
    """Seconds per file and the result of each file."""
    times: list[float] = []
    results: list[DicomImage | DicomError] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pydicom warns about the odd values of its test files
        for path in files:
            t0 = time.perf_counter()
            try:
                result: DicomImage | DicomError = read_dicom(path, pseudonymizer)
            except DicomError as exc:
                result = exc
            times.append(time.perf_counter() - t0)
            results.append(result)
    return times, results


def decode(files: list[Path], pseudonymizer: Pseudonymizer, passes: int) -> tuple[dict, list[DicomImage]]:
    """Every file through ``read_dicom`` (read, de-identify, decode, LUTs), best of ``passes`` passes (the
    files are in the page cache after the first): files/s, MB/s, and per transfer-syntax group; errors by kind."""
    sizes = [p.stat().st_size for p in files]
    groups = [syntax_group(p) for p in files]
    best: list[float] | None = None
    results: list[DicomImage | DicomError] = []
    for i in range(passes):
        times, got = decode_pass(files, pseudonymizer)
        if i == 0:
            results = got  # every pass gives the same images (same key): keep one pass's
        if best is None or sum(times) < sum(best):
            best = times
        del got
    assert best is not None
    seconds = sum(best)
    images = [r for r in results if isinstance(r, DicomImage)]
    errors = Counter(r.kind for r in results if isinstance(r, DicomError))
    by_group: dict[str, dict] = {}
    for t, size, group, r in zip(best, sizes, groups, results, strict=True):
        g = by_group.setdefault(group, {"files": 0, "images": 0, "errors": 0, "mb": 0.0, "seconds": 0.0})
        g["files"] += 1
        g["images" if isinstance(r, DicomImage) else "errors"] += 1
        g["mb"] += size / 1e6
        g["seconds"] += t
    for g in by_group.values():
        g["ms_per_file"] = 1000 * g["seconds"] / g["files"]
        g["mb_per_s"] = g["mb"] / g["seconds"]
    ok_seconds = sum(t for t, r in zip(best, results, strict=True) if isinstance(r, DicomImage))
    return {
        "files": len(files),
        "mb": sum(sizes) / 1e6,
        "images": len(images),
        "unique_images": len({img.image_id for img in images}),
        "errors": dict(errors),
        "passes": passes,
        "seconds": seconds,
        "files_per_s": len(files) / seconds,
        "mb_per_s": sum(sizes) / 1e6 / seconds,
        "images_seconds": ok_seconds,  # the decoded files only: the embedding baseline
        "images_per_s": len(images) / ok_seconds if ok_seconds else 0.0,
        "groups": dict(sorted(by_group.items(), key=lambda kv: -kv[1]["files"])),
    }, images


def embed(encoder: ImageEncoder, pixels: list[np.ndarray], repeat: int = 3) -> dict:
    """Best of ``repeat`` passes of ``encoder`` over ``pixels`` in batches of 64 (the baseline is the
    decode alone: the share of time embedding adds to it)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for start in range(0, len(pixels), BATCH):
            encoder.encode(pixels[start : start + BATCH])
        best = min(best, time.perf_counter() - t0)
    return {
        "encoder": encoder.name,
        "dimension": encoder.dimension,
        "images": len(pixels),
        "batch": BATCH,
        "seconds": best,
        "images_per_s": len(pixels) / best,
    }


# ---- synthetic variants ------------------------------------------------------------------------
class Augmenter:
    """Random crop, flips, np.rot90, gamma and Gaussian noise (the noise is a random window of one
    precomputed field, so making 10,000 variants costs seconds, not minutes)."""

    def __init__(self, seed: int, field_side: int = 2048) -> None:
        self.rng = np.random.default_rng(seed)
        self.field = self.rng.standard_normal((field_side, field_side), dtype=np.float32)

    def noise(self, h: int, w: int) -> np.ndarray:
        fh, fw = self.field.shape
        if h > fh or w > fw:
            return self.rng.standard_normal((h, w), dtype=np.float32)
        y, x = int(self.rng.integers(0, fh - h + 1)), int(self.rng.integers(0, fw - w + 1))
        return self.field[y : y + h, x : x + w]

    def __call__(self, pixels: np.ndarray) -> np.ndarray:
        rng = self.rng
        h, w = pixels.shape[:2]
        ch, cw = max(min(h, 8), int(h * rng.uniform(0.6, 1.0))), max(min(w, 8), int(w * rng.uniform(0.6, 1.0)))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        out = pixels[y : y + ch, x : x + cw]
        if rng.random() < 0.5:
            out = out[:, ::-1]
        if rng.random() < 0.2:
            out = out[::-1]
        out = np.rot90(out, int(rng.choice(4, p=[0.55, 0.15, 0.15, 0.15])), axes=(0, 1))
        out = np.power(out, np.float32(np.exp(rng.uniform(np.log(0.7), np.log(1.4)))), dtype=np.float32)
        noise = self.noise(*out.shape[:2]) * np.float32(rng.uniform(0.0, 0.03))
        out += noise[..., None] if out.ndim == 3 else noise
        return np.clip(out, 0.0, 1.0, out=out)


def variant(base: DicomImage, pixels: np.ndarray, n: int, tag: str, pseudonymizer: Pseudonymizer) -> DicomImage:
    """``base`` with new pixels under fresh pseudonymised ids and its own digest."""
    name = f"{tag}:{n}:{base.image_id}"
    return dataclasses.replace(
        base,
        image_id=pseudonymizer.image_id(name),
        study_id=pseudonymizer.study_id(name),
        series_id=pseudonymizer.series_id(name),
        sha256=hashlib.sha256(f"{base.sha256}\n{name}".encode()).hexdigest(),
        rows=int(pixels.shape[0]),
        columns=int(pixels.shape[1]),
        frames=1,
        pixels=np.ascontiguousarray(pixels, dtype=np.float32),
    )


def variants(
    real: list[DicomImage], count: int, augment: Augmenter, pseudonymizer: Pseudonymizer, tag: str
) -> Iterator[DicomImage]:
    """``count`` variants of the real images in turn (crop 60-100% a side, flips, rot90, gamma 0.7-1.4,
    noise sigma up to 0.03), each under fresh pseudonymised ids."""
    for n in range(count):
        base = real[n % len(real)]
        yield variant(base, augment(base.pixels), n, tag, pseudonymizer)


# ---- index and search --------------------------------------------------------------------------
def build_index(
    index: ImageIndex, real: list[DicomImage], target: int, augment: Augmenter, pseudonymizer: Pseudonymizer
) -> dict:
    """Fill ``index`` with the real images, then variants until it holds ``target`` vectors, made in chunks of
    64 (not timed); ``add`` and ``commit`` are timed. Rebuilt only when its kind is not the one VectorIndex
    chooses at that size."""
    add_s = augment_s = 0.0
    t0 = time.perf_counter()
    added = index.add(real).added
    add_s += time.perf_counter() - t0
    synthetic = max(0, target - len(index))
    made = variants(real, synthetic, augment, pseudonymizer, "synthetic")
    while True:
        t0 = time.perf_counter()
        chunk = [img for _, img in zip(range(CHUNK), made, strict=False)]
        augment_s += time.perf_counter() - t0
        if not chunk:
            break
        t0 = time.perf_counter()
        added += index.add(chunk).added
        add_s += time.perf_counter() - t0
        del chunk
    vectors = index.vectors
    rebuild_s = 0.0
    t0 = time.perf_counter()
    if vectors.fit_kind():  # the kind its size calls for (the quantizer trained past flat_max)
        rebuild_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    index.commit()
    commit_s = time.perf_counter() - t0
    return {
        "vectors": len(vectors),
        "rows": len(index),
        "real": len({img.image_id for img in real}),
        "synthetic": synthetic,
        "added": added,
        "kind": vectors.kind,
        "flat_max": vectors.flat_max,
        "nprobe": vectors.stats()["nprobe"],
        "augment_s": augment_s,
        "add_s": add_s,
        "add_images_per_s": added / add_s,
        "rebuild_s": rebuild_s,
        "commit_s": commit_s,
        "files_mb": sum(p.stat().st_size for p in index.directory.iterdir() if p.is_file()) / 1e6,
    }


def brute_force(matrix: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices and scores of the ``k`` best rows, best first."""
    scores = matrix @ query
    top = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
    order = top[np.argsort(-scores[top])]
    return order, scores


def search(
    index: ImageIndex, real: list[DicomImage], n_queries: int, augment: Augmenter, pseudonymizer: Pseudonymizer
) -> dict:
    """Search alternately by a real image and a perturbed copy: by image, by vector (also on one FAISS
    thread), FAISS alone, and brute force (the baseline). Recall@10 against brute force counts a hit whose
    exact score reaches the 10th best, so ties are not misses.

    Each way of searching in its own loop over the same queries: interleaved, FAISS's OpenMP threads
    (still spinning after a search) and numpy's BLAS threads slow each other down several-fold."""
    vectors = index.vectors
    ids = vectors.ids()
    row = {sid: i for i, sid in enumerate(ids)}
    matrix = np.ascontiguousarray(np.stack([vectors.vector(sid) for sid in ids]), dtype=np.float32)
    unique = list({img.image_id: img for img in real}.values())
    perturbed = variants(unique, (n_queries + 1) // 2, augment, pseudonymizer, "query")
    for img in unique[:5]:  # warm-up: the first calls pay for lazy set-up (threads, SQLite page cache)
        q = index.query_vector(img)
        index.search(img, k=K)
        brute_force(matrix, q, K)

    timing: dict[str, list[float]] = {
        "by_image": [],
        "by_vector": [],
        "by_vector_1_thread": [],
        "faiss": [],
        "brute_force": [],
    }
    by_kind: dict[str, list[float]] = {"real": [], "perturbed": []}
    queries: list[np.ndarray] = []
    for n in range(n_queries):  # by image: a perturbed copy is made here (not timed), one at a time
        kind = "real" if n % 2 == 0 else "perturbed"
        img = unique[(n // 2) % len(unique)] if kind == "real" else next(perturbed)
        t0 = time.perf_counter()
        index.search(img, k=K)
        ms = 1000 * (time.perf_counter() - t0)
        timing["by_image"].append(ms)
        by_kind[kind].append(ms)
        queries.append(index.query_vector(img))  # the stored vector of a real image, a fresh embedding otherwise
    hits: list[list[str]] = []
    for q in queries:
        t0 = time.perf_counter()
        found = index.search(q, k=K)
        timing["by_vector"].append(1000 * (time.perf_counter() - t0))
        hits.append([h.image_id for h in found])
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # one query at a time: FAISS's threads only cost their wake-up
    try:
        for q in queries:
            t0 = time.perf_counter()
            index.search(q, k=K)
            timing["by_vector_1_thread"].append(1000 * (time.perf_counter() - t0))
    finally:
        faiss.omp_set_num_threads(threads)
    for q in queries:
        t0 = time.perf_counter()
        vectors.search(q, K)
        timing["faiss"].append(1000 * (time.perf_counter() - t0))
    recalls: list[float] = []
    for q, found_ids in zip(queries, hits, strict=True):
        t0 = time.perf_counter()
        order, scores = brute_force(matrix, q, K)
        timing["brute_force"].append(1000 * (time.perf_counter() - t0))
        kth = float(scores[order[-1]])
        exact = [float(scores[row[sid]]) for sid in found_ids if sid in row]
        recalls.append(sum(s >= kth - 1e-5 for s in exact) / min(K, len(ids)))
    result = {name: percentiles(ms) for name, ms in timing.items()}
    return {
        "queries": n_queries,
        "k": K,
        "matrix": list(matrix.shape),
        "ms": result,
        "by_image_kind_ms": {kind: percentiles(ms) for kind, ms in by_kind.items() if ms},
        "ratio_p50": result["by_vector"]["p50"] / result["brute_force"]["p50"],
        "ratio_p95": result["by_vector"]["p95"] / result["brute_force"]["p95"],
        "recall_at_10": float(np.mean(recalls)),
        "recall_at_10_min": float(np.min(recalls)),
    }


# ---- output ------------------------------------------------------------------------------------
def print_decode(d: dict) -> None:
    errors = ", ".join(f"{n} {kind}" for kind, n in sorted(d["errors"].items())) or "none"
    print(
        f"decode (read_dicom: read, de-identify, decode, LUTs): {d['files_per_s']:,.1f} files/s, "
        f"{d['mb_per_s']:,.1f} MB/s ({d['files']} files, {d['mb']:.1f} MB in {d['seconds']:.2f} s, "
        f"best of {d['passes']}); {d['images']} images ({d['unique_images']} distinct), errors: {errors}",
        flush=True,
    )
    print(f"  {'transfer syntax':<34} {'files':>5} {'errors':>6} {'MB':>7} {'ms/file':>8} {'MB/s':>7}")
    for name, g in d["groups"].items():
        print(
            f"  {name:<34} {g['files']:>5} {g['errors']:>6} {g['mb']:>7.1f} {g['ms_per_file']:>8.1f} "
            f"{g['mb_per_s']:>7.1f}"
        )


def print_embed(e: dict, base: dict) -> None:
    decode_s = base["images_seconds"]
    share = e["seconds"] / (decode_s + e["seconds"])
    print(
        f"embed ({e['encoder']}, {e['dimension']} dims, batches of {e['batch']}): {e['images_per_s']:,.1f} images/s "
        f"({e['images']} images in {e['seconds']:.3f} s, best of 3)",
        flush=True,
    )
    print(
        f"  baseline: decode alone {base['images_per_s']:,.1f} images/s ({decode_s:.3f} s); decode + embed "
        f"{e['images'] / (decode_s + e['seconds']):,.1f} images/s: embedding adds {100 * e['seconds'] / decode_s:.1f}% "
        f"to the decode time ({100 * share:.1f}% of the combined time)"
    )


def print_index(ix: dict) -> None:
    ivf = f", nprobe {ix['nprobe']}" if ix["nprobe"] else ""
    print(
        f"index: {ix['vectors']:,} vectors ({ix['real']} real images + {ix['synthetic']:,} synthetic variants), "
        f"VectorIndex kind {ix['kind']!r} (flat up to {ix['flat_max']:,}{ivf})",
        flush=True,
    )
    rebuild = f", rebuild {ix['rebuild_s']:.2f} s" if ix["rebuild_s"] else ""
    print(
        f"  add (metadata + embedding): {ix['add_images_per_s']:,.1f} images/s ({ix['added']:,} in {ix['add_s']:.1f} s)"
        f"{rebuild}, commit {ix['commit_s']:.2f} s, {ix['files_mb']:.1f} MB on disk; variants made in "
        f"{ix['augment_s']:.1f} s (not timed)"
    )


def print_search(s: dict) -> None:
    ms = s["ms"]
    print(f"search: {s['queries']} queries (real images and perturbed copies), k={s['k']}, {s['matrix'][0]:,} vectors")
    labels = {
        "by_vector": "ImageIndex.search(vector)",
        "by_vector_1_thread": "  the same, FAISS on 1 thread",
        "by_image": "ImageIndex.search(image)",
        "faiss": "VectorIndex.search (FAISS only)",
        "brute_force": "baseline: numpy brute force",
    }
    for name, label in labels.items():
        p = ms[name]
        print(f"  {label:<33} p50 {p['p50']:7.3f} ms  p95 {p['p95']:7.3f} ms  max {p['max']:7.3f} ms")
    kinds = ", ".join(f"{k} p50 {p['p50']:.3f} / p95 {p['p95']:.3f} ms" for k, p in s["by_image_kind_ms"].items())
    print(f"  by image: {kinds} (a perturbed copy is embedded first)")
    print(
        f"  ratio ImageIndex.search(vector)/brute force: p50 {s['ratio_p50']:.2f}x, p95 {s['ratio_p95']:.2f}x; "
        f"recall@10 against brute force {s['recall_at_10']:.3f} (min {s['recall_at_10_min']:.2f})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vectors", type=int, default=10_000, help="vectors in the index (real + synthetic), at least")
    ap.add_argument("--queries", type=int, default=500, help="search queries (half real, half perturbed)")
    ap.add_argument("--encoder", help="also measure this encoder (transformers model name or local path)")
    ap.add_argument("--device", default="cpu", help="device of --encoder (cpu, cuda, ...)")
    ap.add_argument("--passes", type=int, default=3, help="decode passes (the best one counts)")
    ap.add_argument("--flat-max", type=int, help="VectorIndex flat_max (default 200,000): lower it to get IVF")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of DICOM files")
    ap.add_argument("--seed", type=int, default=0, help="seed of the synthetic variants")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)
    if args.vectors < 1 or args.queries < 1 or args.passes < 1:
        ap.error("--vectors, --queries and --passes must be positive")

    wheel = wheel_folder()
    folders = [f for f in (args.source, wheel) if f is not None and f.is_dir()]
    if args.source not in folders:
        print(f"{args.source}: no such folder (real DICOM files from ../shared/data/dicom)", file=sys.stderr)
        return 2
    if wheel is None:
        print("pydicom-data (package data_store) is not installed: its files are left out", file=sys.stderr)
    files = dicom_files(folders)
    pseudonymizer = Pseudonymizer(secrets.token_bytes(32))
    results: dict = {
        "vectors_target": args.vectors,
        "queries": args.queries,
        "sources": [str(f) for f in folders],
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
        "faiss_omp_threads": faiss.omp_get_max_threads(),
    }
    print(
        f"input: {len(files)} files in {', '.join(str(f) for f in folders)}; {results['cpus']} CPUs, load "
        f"{results['load_avg'][0]:.1f}, FAISS OpenMP threads {results['faiss_omp_threads']}",
        flush=True,
    )

    dec, images = decode(files, pseudonymizer, args.passes)
    results["decode"] = dec
    print_decode(dec)
    if not images:
        print("no file could be decoded", file=sys.stderr)
        return 1
    print(f"  peak RSS: {peak_rss_mb():,.0f} MiB", flush=True)

    pixels = [img.pixels for img in images]
    descriptor = DescriptorEncoder()
    results["embed"] = {"descriptor": embed(descriptor, pixels)}
    print_embed(results["embed"]["descriptor"], dec)
    if args.encoder:
        other = build_image_encoder(args.encoder, device=args.device)
        results["embed"]["other"] = embed(other, pixels)
        print_embed(results["embed"]["other"], dec)
        del other
    print(f"  peak RSS: {peak_rss_mb():,.0f} MiB", flush=True)
    del pixels

    augment = Augmenter(args.seed)
    with tempfile.TemporaryDirectory(prefix="medkg-bench-images-") as tmp:
        index = ImageIndex(Path(tmp), descriptor)
        if args.flat_max:
            from kg.vector_index import VectorIndex

            index.vectors = VectorIndex.open(Path(tmp), index.name, descriptor.dimension, flat_max=args.flat_max)
        try:
            results["index"] = build_index(index, images, args.vectors, augment, pseudonymizer)
            print_index(results["index"])
            print(f"  peak RSS: {peak_rss_mb():,.0f} MiB", flush=True)
            results["search"] = search(index, images, args.queries, augment, pseudonymizer)
            print_search(results["search"])
        finally:
            index.close()
    results["rss_peak_mb"] = peak_rss_mb()
    print(f"peak RSS of this process: {results['rss_peak_mb']:,.0f} MiB (ru_maxrss)")
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
