"""Lexical engines side by side on scaled corpora (benchmarks/corpus.py): bm25s (rebuilt whole, as the
passage index did), SQLite FTS5 and Tantivy, fed the same tokens (medkg's BM25 tokenizer), so only the
engine differs. For each size: build time, time to add 10k passages to the big index, disk, and, in a
fresh process, open time, query p50/p95 over the PubMedQA questions and peak RSS.

    python -m benchmarks.lexical --sizes 100000,1000000 [--engines bm25s,fts5,tantivy] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from functools import cache
from pathlib import Path

ADD = 10_000
K = 50  # the candidates TextIndex.search asks of each ranking


@cache
def _tokens() -> list[str]:
    """The real passages' BM25 tokens, joined by spaces (tokenized once; copies share them)."""
    import Stemmer

    from benchmarks.corpus import real_passages
    from kg.text_index import bm25_tokenize

    texts = [t for _, t in real_passages()]
    return [" ".join(toks) for toks in bm25_tokenize(texts, Stemmer.Stemmer("english"), return_ids=False)]


def _rows(n: int, start: int = 0) -> Iterable[tuple[int, str, str]]:
    from benchmarks.corpus import scaled

    tokens = _tokens()
    for i, pid, _ in scaled(n, start):
        yield i, pid, tokens[i % len(tokens)]


def _query_tokens() -> list[list[str]]:
    import Stemmer

    from benchmarks.corpus import questions
    from kg.text_index import bm25_tokenize

    return [q for q in bm25_tokenize(questions(), Stemmer.Stemmer("english"), return_ids=False) if q]


class Bm25s:
    """bm25s as the passage index used it: the whole index built again from every passage on a change."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def build(self, rows: Iterable[tuple[int, str, str]]) -> None:
        import bm25s

        rows = list(rows)
        ids, docs = [r[1] for r in rows], [r[2].split() for r in rows]
        retriever = bm25s.BM25()
        retriever.index(docs, show_progress=False)
        retriever.save(str(self.path), show_progress=False)
        (self.path / "ids.json").write_text(json.dumps(ids))
        self._n = len(ids)

    def add(self, n_total: int, rows: Iterable[tuple[int, str, str]]) -> None:
        self.build(_rows(n_total + ADD))  # no incremental update: everything again

    def open(self) -> None:
        import bm25s

        self.retriever = bm25s.BM25.load(str(self.path), mmap=True)
        self.ids = json.loads((self.path / "ids.json").read_text())

    def search(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        vocab = self.retriever.vocab_dict
        query = [t for t in tokens if t in vocab]
        if not query:
            return []
        docs, scores = self.retriever.retrieve([query], k=k, show_progress=False)
        return [(self.ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]


class Fts5:
    """SQLite FTS5 in the passage table's own kind of database: rows added in transactions, segments
    merged by FTS5's automerge, ``bm25()`` over corpus-wide statistics."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path / "fts.sqlite")
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("CREATE TABLE IF NOT EXISTS ids(rowid INTEGER PRIMARY KEY, id TEXT UNIQUE)")
        self.db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, tokenize='unicode61', detail=full)")

    def _insert(self, rows: Iterable[tuple[int, str, str]], batch: int = 10_000) -> None:
        chunk: list[tuple[int, str, str]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == batch:
                self._write(chunk)
                chunk = []
        if chunk:
            self._write(chunk)

    def _write(self, chunk: list[tuple[int, str, str]]) -> None:
        with self.db:
            self.db.executemany("INSERT INTO ids(rowid, id) VALUES (?, ?)", [(i, p) for i, p, _ in chunk])
            self.db.executemany("INSERT INTO fts(rowid, body) VALUES (?, ?)", [(i, t) for i, _, t in chunk])

    def build(self, rows: Iterable[tuple[int, str, str]]) -> None:
        self._insert(rows)

    def add(self, n_total: int, rows: Iterable[tuple[int, str, str]]) -> None:
        self._insert(rows)

    def open(self) -> None:
        pass

    def search(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        match = " OR ".join(f'"{t}"' for t in dict.fromkeys(tokens))
        rows = self.db.execute(
            "SELECT ids.id, -bm25(fts) FROM fts JOIN ids ON ids.rowid = fts.rowid WHERE fts MATCH ? "
            "ORDER BY bm25(fts) LIMIT ?",
            (match, k),
        ).fetchall()
        return [(r[0], float(r[1])) for r in rows]


class Tantivy:
    """Tantivy: segments written per commit and merged in the background, deletions by term, BM25 with
    block-max WAND for the top k."""

    def __init__(self, path: Path) -> None:
        import tantivy

        self.tantivy = tantivy
        path.mkdir(parents=True, exist_ok=True)
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw")
        builder.add_text_field("body", stored=False, tokenizer_name="whitespace")
        self.schema = builder.build()
        self.index = tantivy.Index(self.schema, path=str(path), reuse=True)
        self.path = path

    def _insert(self, rows: Iterable[tuple[int, str, str]]) -> None:
        writer = self.index.writer(heap_size=200_000_000, num_threads=1)
        for _, pid, tokens in rows:
            writer.add_document(self.tantivy.Document(id=pid, body=tokens))
        writer.commit()
        writer.wait_merging_threads()

    def build(self, rows: Iterable[tuple[int, str, str]]) -> None:
        self._insert(rows)

    def add(self, n_total: int, rows: Iterable[tuple[int, str, str]]) -> None:
        self._insert(rows)

    def open(self) -> None:
        self.index.reload()
        self.searcher = self.index.searcher()

    def search(self, tokens: list[str], k: int) -> list[tuple[str, float]]:
        t = self.tantivy
        clauses = [(t.Occur.Should, t.Query.term_query(self.schema, "body", tok)) for tok in dict.fromkeys(tokens)]
        hits = self.searcher.search(t.Query.boolean_query(clauses), k).hits
        return [(self.searcher.doc(address)["id"][0], float(score)) for score, address in hits]


ENGINES = {"bm25s": Bm25s, "fts5": Fts5, "tantivy": Tantivy}


def _disk_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6, 1)


def _rss_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def build_worker(engine: str, n: int, path: Path) -> dict:
    _tokens()  # tokenized before the clock starts
    e = ENGINES[engine](path)
    t0 = time.perf_counter()
    e.build(_rows(n))
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    e.add(n, _rows(ADD, start=n))
    add_s = time.perf_counter() - t0
    return {"build_s": round(build_s, 2), "add_10k_s": round(add_s, 3), "build_rss_mb": _rss_mb()}


def query_worker(engine: str, path: Path, limit: int) -> dict:
    queries = _query_tokens()[:limit]
    base = _rss_mb()
    t0 = time.perf_counter()
    e = ENGINES[engine](path)
    e.open()
    e.search(queries[0], K)
    open_s = time.perf_counter() - t0
    times = []
    for q in queries:
        t0 = time.perf_counter()
        e.search(q, K)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "open_s": round(open_s, 3),
        "query_p50_ms": round(statistics.median(times), 2),
        "query_p95_ms": round(times[int(0.95 * (len(times) - 1))], 2),
        "query_rss_mb": round(_rss_mb() - base, 1),
    }


def _child(*args: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.lexical", *args], capture_output=True, text=True)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--engines", default="bm25s,fts5,tantivy")
    parser.add_argument("--dir", type=Path, default=None, help="Where the indexes are built (default: a temp dir).")
    parser.add_argument("--json", action="store_true", help="One JSON object per engine and size.")
    parser.add_argument("--worker", nargs=3, metavar=("ENGINE", "N", "DIR"), help=argparse.SUPPRESS)
    parser.add_argument("--queries", type=int, default=200, help="PubMedQA questions timed (at most 200).")
    parser.add_argument("--query-worker", nargs=2, metavar=("ENGINE", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(build_worker(args.worker[0], int(args.worker[1]), Path(args.worker[2]))))
        return 0
    if args.query_worker:
        print(json.dumps(query_worker(args.query_worker[0], Path(args.query_worker[1]), args.queries)))
        return 0
    root = Path(args.dir or tempfile.mkdtemp(prefix="medkg-lexical-"))
    for n in (int(s) for s in args.sizes.split(",")):
        for engine in args.engines.split(","):
            path = root / f"{engine}-{n}"
            shutil.rmtree(path, ignore_errors=True)
            row = {"engine": engine, "passages": n}
            row |= _child("--worker", engine, str(n), str(path))
            if "error" not in row:
                row["disk_mb"] = _disk_mb(path)
                row |= _child("--query-worker", engine, str(path), "--queries", str(args.queries))
            print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)
            shutil.rmtree(path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
