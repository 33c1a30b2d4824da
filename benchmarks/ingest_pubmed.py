"""PubMed ingest benchmark: the streaming XML parser alone (speed, and memory flat in the file's size),
and the whole load (parse, passages, entity linking, embeddings, indexes, graph writes) into a fresh
store, against the bare embedder on the same passages. Input: copies of ../shared/data/pubmed_xml.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import gzip
import multiprocessing
import os
import re
import resource
import shutil
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks.common import neo4j_from_settings, write_results
from ingest.pubmed.model import Article
from ingest.pubmed.readers import Record, detect_format, expand_paths, iter_records

if TYPE_CHECKING:
    from service.container import Container

DEFAULT_SOURCE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "pubmed_xml"
PMID_STEP = 100_000_000  # added to every PMID once per copy (real PMIDs are below 40,000,000)
STAGES = ("sentences", "linking", "write graph", "embeddings", "index commit")

_PMID = re.compile(rb"(<PMID\b[^>]*>)(\s*)(\d+)")
_ARTICLE_START = re.compile(rb"<Pubmed(?:Book)?Article[\s>]")
_SET_START = re.compile(rb"<PubmedArticleSet\b[^>]*>")
_SET_END = b"</PubmedArticleSet>"


# ---- synthetic copies ----------------------------------------------------------------------------
def source_files(root: Path) -> list[Path]:
    """The PubMed XML files under ``root`` (eSearch/eLink/PMC responses, MEDLINE text, lists skipped)."""
    return [p for p in expand_paths([root]) if detect_format(p) == "pubmed-xml"]


def shift_pmids(data: bytes, offset: int) -> bytes:
    if not offset:
        return data
    return _PMID.sub(lambda m: m[1] + m[2] + str(int(m[3]) + offset).encode(), data)


def write_copies(files: list[Path], root: Path, min_articles: int, out: Path) -> tuple[list[Path], int]:
    """Copies of ``files`` (PMIDs shifted per copy, so each copy's records are new documents) under ``out``
    until they hold ``min_articles``."""
    raw = {f: f.read_bytes() for f in files}
    counts = {f: len(_ARTICLE_START.findall(data)) for f, data in raw.items()}
    if not sum(counts.values()):
        raise ValueError(f"no PubMed articles in {root}")
    paths: list[Path] = []
    total, k = 0, 0
    while total < min_articles:
        for f in files:
            if total >= min_articles:
                break
            path = out / f"copy{k:03d}" / f.relative_to(root)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(shift_pmids(raw[f], k * PMID_STEP))
            paths.append(path)
            total += counts[f]
        k += 1
    return paths, total


def gzip_copies(paths: list[Path], src: Path, out: Path) -> list[Path]:
    gz = []
    for p in paths:
        target = out / p.relative_to(src).with_name(p.name + ".gz")
        target.parent.mkdir(parents=True, exist_ok=True)
        with p.open("rb") as fin, gzip.open(target, "wb", compresslevel=6) as fout:
            shutil.copyfileobj(fin, fout)
        gz.append(target)
    return gz


def write_one_set(files: list[Path], n_articles: int, path: Path) -> tuple[int, int]:
    """One PubmedArticleSet of at least ``n_articles`` articles (the files' records, copied with shifted
    PMIDs), written as it is built; returns (articles, bytes)."""
    bodies = []
    for f in files:
        data = f.read_bytes()
        start = _SET_START.search(data)
        end = data.rfind(_SET_END)
        if start and end > start.end():
            body = data[start.end() : end]
            bodies.append((body, len(_ARTICLE_START.findall(body))))
    total, k = 0, 0
    with path.open("wb") as out:
        out.write(b'<?xml version="1.0" encoding="utf-8"?>\n<PubmedArticleSet>\n')
        while total < n_articles:
            for body, n in bodies:
                out.write(shift_pmids(body, k * PMID_STEP))
                total += n
            k += 1
        out.write(_SET_END + b"\n")
    return total, path.stat().st_size


# ---- measurements --------------------------------------------------------------------------------
def peak_rss_mb() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 2**20 if sys.platform == "darwin" else rss / 1024  # bytes on macOS, KiB on Linux


def parse_pass(paths: list[Path]) -> dict[str, float]:
    t0 = time.perf_counter()
    articles = abstracts = 0
    for rec in iter_records(paths):
        if isinstance(rec, Article):
            articles += 1
            abstracts += bool(rec.sections)
    seconds = time.perf_counter() - t0
    return {"articles": articles, "abstracts": abstracts, "seconds": seconds, "abstracts_per_s": abstracts / seconds}


def parse_best(paths: list[Path], repeat: int = 3) -> dict[str, float]:
    """Articles with an abstract per second through ``iter_records``, best of ``repeat`` passes."""
    return min((parse_pass(paths) for _ in range(repeat)), key=lambda r: r["seconds"])


def parse_memory(path: str) -> dict[str, float]:
    """Run in a fresh process: parse one file, keeping nothing; Python heap peak and RSS high-water."""
    rss_before = peak_rss_mb()
    tracemalloc.start()
    result = parse_pass([Path(path)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {**result, "tracemalloc_peak_mb": peak / 2**20, "rss_peak_mb": peak_rss_mb(), "rss_before_mb": rss_before}


def in_fresh_process(path: Path) -> dict[str, float]:
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        return pool.submit(parse_memory, str(path)).result()


def first_articles(paths: list[Path], limit: int, counts: dict[str, int]) -> Iterator[Record]:
    """Every record of ``paths`` (problems and deletions too) until ``limit`` articles have gone by."""
    counts.update(articles=0, abstracts=0)
    for rec in iter_records(paths):
        if isinstance(rec, Article):
            if counts["articles"] >= limit:
                return
            counts["articles"] += 1
            counts["abstracts"] += bool(rec.sections)
        yield rec


def end_to_end(c: Container, paths: list[Path], limit: int, hpo: bool) -> dict:
    """HPO first (the linker's lexicon then holds its names), then the first ``limit`` articles through
    ``PubmedLoader`` as ``medkg ingest pubmed`` builds it: abstracts/s and per-stage timings; then the
    same load again, everything unchanged."""
    from ingest.hpo import hpo_items
    from ingest.pubmed.load import PubmedLoader
    from ingest.writer import ingest

    result: dict = {"backend": c.graph.backend}
    if hpo:
        t0 = time.perf_counter()
        report = ingest(c.graph, hpo_items(), "hpo", progress=False)
        result["hpo_load_s"] = time.perf_counter() - t0
        result["hpo_entities"] = report.entities.added
        result["hpo_relations"] = report.relations.added
    c.text_embedder.encode(["warm-up: the model is loaded before the clock starts"])
    t0 = time.perf_counter()
    linker = c.linker
    result["lexicon_build_s"] = time.perf_counter() - t0
    result["lexicon_terms"] = len(linker.lexicon)
    loader = PubmedLoader(c.graph, c.text_index, c.nlp, linker, max_words=c.settings.passage_max_words, progress=False)
    counts: dict[str, int] = {}
    t0 = time.perf_counter()
    report = loader.load(first_articles(paths, limit, counts))
    seconds = time.perf_counter() - t0
    result.update(
        articles=counts["articles"],
        abstracts=counts["abstracts"],
        seconds=seconds,
        abstracts_per_s=counts["abstracts"] / seconds,
        articles_per_s=counts["articles"] / seconds,
        passages=report.read.get("passages", 0),
        passages_embedded=report.read.get("passages embedded", 0),
        mentions=report.read.get("mentions", 0),
        relations_written=report.relations.added + report.relations.updated,
        problems=report.problem_count,
        timings=dict(report.timings),
    )
    result["passages_per_s"] = result["passages_embedded"] / seconds
    t0 = time.perf_counter()
    again = loader.load(first_articles(paths, limit, counts))
    result["rerun_s"] = time.perf_counter() - t0
    result["rerun_unchanged"] = again.read.get("articles unchanged", 0)
    result["rerun_passages_embedded"] = again.read.get("passages embedded", 0)
    result["rss_peak_mb"] = peak_rss_mb()
    return result


def embedder_baseline(c: Container, paths: list[Path], max_passages: int = 1024) -> dict[str, float]:
    """The bare embedder on the load's own passage texts (what the index embeds), batches of 256: the
    floor of an ingest's cost, so the load's passages/s over it is the share of its speed kept."""
    ids: list[str] = []
    for rec in iter_records(paths):
        if isinstance(rec, Article):
            ids += c.text_index.document_passages(f"PMID:{rec.pmid}")
            if len(ids) >= max_passages:
                break
    stored = c.text_index.get(ids[:max_passages])
    texts = [r.embed_text or r.text for r in stored.values()]
    t0 = time.perf_counter()
    for start in range(0, len(texts), 256):
        c.text_embedder.encode(texts[start : start + 256])
    seconds = time.perf_counter() - t0
    return {"passages": len(texts), "seconds": seconds, "passages_per_s": len(texts) / seconds}


# ---- output --------------------------------------------------------------------------------------
def print_end_to_end(r: dict) -> None:
    name = r["backend"]
    if "hpo_load_s" in r:
        print(
            f"{name:>8}: HPO loaded first: {r['hpo_entities']:,} entities, {r['hpo_relations']:,} relations "
            f"in {r['hpo_load_s']:.1f} s",
            flush=True,
        )
    print(f"{name:>8}: linker lexicon {r['lexicon_terms']:,} terms (built in {r['lexicon_build_s']:.1f} s)")
    print(
        f"{name:>8}: end to end {r['abstracts_per_s']:,.1f} abstracts/s ({r['abstracts']:,} abstracts, "
        f"{r['articles']:,} articles, {r['articles_per_s']:,.1f} articles/s) in {r['seconds']:.1f} s; "
        f"{r['passages_embedded']:,} passages ({r['passages_per_s']:,.1f}/s), {r['mentions']:,} mentions, "
        f"{r['relations_written']:,} relations written",
        flush=True,
    )
    timed = 0.0
    for stage in STAGES:
        t = r["timings"].get(stage, 0.0)
        timed += t
        print(f"{'':>8}    {stage:<14} {t:7.1f} s  {100 * t / r['seconds']:5.1f}%")
    rest = max(0.0, r["seconds"] - timed)
    print(f"{'':>8}    {'other':<14} {rest:7.1f} s  {100 * rest / r['seconds']:5.1f}%  (XML parse, passages, lookups)")
    again = f", {r['rerun_passages_embedded']:,} passages re-embedded" if r["rerun_passages_embedded"] else ""
    print(
        f"{'':>8}  re-run, everything unchanged: {r['rerun_s']:.1f} s ({r['rerun_unchanged']:,} articles "
        f"unchanged{again})",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5000, help="articles loaded end to end (and copied at least)")
    ap.add_argument("--no-hpo", dest="hpo", action="store_false", help="skip loading HPO (an empty lexicon)")
    ap.add_argument("--flat-records", type=int, default=50_000, help="articles in the parser memory check's file")
    ap.add_argument("--neo4j", action="store_true", help="also load end to end into Neo4j (MEDKG_NEO4J_*)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of PubMed XML files")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)

    if not args.source.is_dir():
        print(f"{args.source}: no such folder (real PubMed XML from ../shared/data/pubmed_xml)", file=sys.stderr)
        return 2
    files = source_files(args.source)
    results: dict = {"records": args.records, "hpo": args.hpo, "cpus": os.cpu_count(), "load_avg": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="medkg-bench-") as tmp_name:
        tmp = Path(tmp_name)
        paths, n_copied = write_copies(files, args.source, args.records, tmp / "xml")
        gz_paths = gzip_copies(paths, tmp / "xml", tmp / "gz")
        size_mb = sum(p.stat().st_size for p in paths) / 1e6
        gz_mb = sum(p.stat().st_size for p in gz_paths) / 1e6
        print(
            f"input: {len(files)} PubMed XML files in {args.source} copied to {len(paths)} files, "
            f"{n_copied:,} articles ({size_mb:.1f} MB; gzip {gz_mb:.1f} MB)",
            flush=True,
        )

        plain, gz = parse_best(paths), parse_best(gz_paths)
        results["parse"] = {"plain": plain, "gzip": gz}
        for label, r in (("plain", plain), ("gzip", gz)):
            print(
                f"parse only ({label:>5}): {r['abstracts_per_s']:,.0f} abstracts/s "
                f"({r['abstracts']:,} abstracts of {r['articles']:,} articles in {r['seconds']:.2f} s, best of 3)",
                flush=True,
            )
        print(f"  gzip/plain time: {gz['seconds'] / plain['seconds']:.2f}x")

        memory = {}
        for label, n in (("one copy", 1), ("large", args.flat_records)):
            path = tmp / f"set-{label.replace(' ', '-')}.xml"
            _, size = write_one_set(files, n, path)
            memory[label] = {**in_fresh_process(path), "file_mb": size / 1e6}
            path.unlink()
        results["parse_memory"] = memory
        print("streaming parser memory (one PubmedArticleSet file, parsed in a fresh process):")
        for m in memory.values():
            print(
                f"  {m['articles']:>7,} articles ({m['file_mb']:7.1f} MB file): tracemalloc peak "
                f"{m['tracemalloc_peak_mb']:5.1f} MiB, RSS high-water {m['rss_peak_mb']:6.1f} MiB "
                f"({m['rss_before_mb']:.1f} MiB before parsing)",
                flush=True,
            )
        results["rss_after_parse_mb"] = peak_rss_mb()
        print(f"peak RSS of this process after the parse-only part: {results['rss_after_parse_mb']:,.0f} MiB")

        from kg.settings import GraphBackend, load_settings
        from service.container import Container

        runs = []
        # vector_memo_mb=0: every passage is embedded, as the benchmark times it (no vectors of an earlier run)
        with Container(load_settings(data_dir=tmp / "data", graph_backend=GraphBackend.ladybug, vector_memo_mb=0)) as c:
            runs.append(end_to_end(c, paths, args.records, args.hpo))
            print_end_to_end(runs[-1])
            print(f"{'':>8}  peak RSS: {runs[-1]['rss_peak_mb']:,.0f} MiB", flush=True)
            base = embedder_baseline(c, paths)
            results["baseline_embedder"] = base
            lady = runs[-1]
            print(
                f"baseline: bare embedder on {base['passages']:,} of these passages: "
                f"{base['passages_per_s']:,.1f} passages/s (dtype {c.text_embedder.dtype})"
            )
            per_abstract = lady["passages_embedded"] / max(lady["abstracts"], 1)
            print(
                f"ratio end-to-end/bare embedder (passages/s): {lady['passages_per_s'] / base['passages_per_s']:.2f}x "
                f"(embedder-only ceiling {base['passages_per_s'] / per_abstract:,.1f} abstracts/s at "
                f"{per_abstract:.2f} passages per abstract); parse only is "
                f"{plain['abstracts_per_s'] / lady['abstracts_per_s']:,.0f}x faster than end to end",
                flush=True,
            )
            embedder, nlp = c.text_embedder, c.nlp
        if args.neo4j:
            store = neo4j_from_settings(load_settings())
            if store is not None:
                c = Container(load_settings(data_dir=tmp / "data-neo4j", graph_backend=GraphBackend.ladybug))
                c.graph, c.text_embedder, c.nlp = store, embedder, nlp  # the cached parts, set by hand
                try:
                    runs.append(end_to_end(c, paths, args.records, args.hpo))
                    print_end_to_end(runs[-1])
                    store.clear()
                finally:
                    c.close()
                neo = runs[-1]
                write = lady["timings"].get("write graph", 0.0) / max(neo["timings"].get("write graph", 0.0), 1e-9)
                print(
                    "ratio ladybug/neo4j: "
                    f"end-to-end abstracts/s {lady['abstracts_per_s'] / neo['abstracts_per_s']:.2f}x, "
                    f"write graph time {write:.2f}x, re-run time {lady['rerun_s'] / neo['rerun_s']:.2f}x",
                    flush=True,
                )
        results["end_to_end"] = runs
    results["rss_peak_mb"] = peak_rss_mb()
    print(f"peak RSS of this process: {results['rss_peak_mb']:,.0f} MiB (ru_maxrss)")
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
