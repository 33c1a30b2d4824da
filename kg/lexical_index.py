"""The passages' lexical (BM25) index: a Tantivy index beside the passage table that grows in place.
A change writes only the passages it touched (segments, merged by Tantivy), so a checkpoint costs what
it adds, not the corpus; benchmarks/lexical.py measured it against bm25s and SQLite FTS5."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import tantivy

logger = logging.getLogger(__name__)

__all__ = ["LexicalIndex", "LexicalIndexError"]

WRITER_HEAP = 64_000_000  # bytes Tantivy buffers before it writes a segment on its own
FOOTER_MAGIC = 1337  # Tantivy's file footer: <body><json {"version", "crc": crc32(body)}><u32 len><u32 magic>
VERIFIED = "medkg-verified.json"  # files whose footer checksum held: name -> [size, mtime_ns]
# A query term whose IDF is under this share of the query's summed IDF does not search (a stop word
# found by the corpus itself: "patient" in 41% of the passages, idf 0.9 against 3-9 for the others):
# its BM25 weight moves a score by at most that share, and reading its postings was most of a
# query's time at 10M passages. Such terms only rescore the candidates the others found (search).
# 0 searches with every term.
MIN_TERM_SHARE = 0.05
RESCORED = 2  # candidates found without the light terms, per passage asked for


class LexicalIndexError(RuntimeError):
    """The lexical index's files cannot be opened or searched."""


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    # Passages arrive as medkg's BM25 tokens joined by spaces (kg.text_index.bm25_tokenize), so the
    # analysis is the one of the queries and of the fact rerank; Tantivy only splits on whitespace.
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace")
    return builder.build()


class LexicalIndex:
    """BM25 over passage tokens in ``directory``, keyed by passage id. ``write`` replaces or deletes
    entries and commits them atomically (Tantivy's meta.json is the commit point): a process killed
    before the commit leaves the previous state, and the caller's log of what is pending says what to
    write again."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._schema = _schema()
        self._lock = threading.RLock()
        self._index: tantivy.Index | None = None
        self._searcher: tantivy.Searcher | None = None

    # ---- files -------------------------------------------------------------------------------
    def exists(self) -> bool:
        return (self.directory / "meta.json").is_file()

    def _open(self) -> tantivy.Index:
        if self._index is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self.verify()
            try:
                self._index = tantivy.Index(self._schema, path=str(self.directory), reuse=True)
            except (ValueError, OSError) as exc:
                raise LexicalIndexError(f"{self.directory} cannot be opened by Tantivy: {exc}") from exc
        return self._index

    def verify(self) -> int:
        """Check the footer checksum (CRC-32) of every index file not verified before in its present size
        and modification time (segment files never change once written, so each is read once); raises
        LexicalIndexError for a damaged one. Tantivy itself reads files lazily and may return wrong
        results from a flipped byte rather than fail. Returns how many files were read."""
        cache_path = self.directory / VERIFIED
        try:
            cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
            if not isinstance(cache, dict):
                cache = {}
        except (OSError, ValueError):
            cache = {}
        checked, read = {}, 0
        for path in sorted(self.directory.iterdir()):
            if not path.is_file() or path.suffix in (".json", ".lock", ".tmp") or path.name.startswith("."):
                continue
            stat = path.stat()
            key = [stat.st_size, stat.st_mtime_ns]
            if cache.get(path.name) != key:
                _check_footer(path)
                read += 1
            checked[path.name] = key
        if read or checked.keys() != cache.keys():
            try:
                tmp = cache_path.with_name(f"{cache_path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(checked))
                os.replace(tmp, cache_path)
            except OSError:  # a read-only copy verifies again next time
                pass
        return read

    def set_aside(self) -> Path | None:
        """Rename the index folder to ``...damaged-<time>`` (kept, not deleted); returns the new path."""
        with self._lock:
            self._index = self._searcher = None
            if not self.directory.exists():
                return None
            target = self.directory.with_name(f"{self.directory.name}.damaged-{time.strftime('%Y%m%dT%H%M%S')}")
            self.directory.rename(target)
            return target

    def clear(self) -> None:
        with self._lock:
            self._index = self._searcher = None
            shutil.rmtree(self.directory, ignore_errors=True)

    # ---- writes ------------------------------------------------------------------------------
    def write(self, ids: Iterable[str], tokens_of: Callable[[list[str]], dict[str, str]], page: int = 10_000) -> int:
        """Bring the entries of ``ids`` up to date in one commit: each is deleted, then added again with
        ``tokens_of(chunk)[id]`` where the passage still exists (absent from the dict: it is gone).
        Returns how many entries were written."""
        written = 0
        with self._lock:
            index = self._open()
            try:
                writer = index.writer(heap_size=WRITER_HEAP, num_threads=1)
            except ValueError as exc:
                raise LexicalIndexError(f"{self.directory} cannot be written: {exc}") from exc
            for chunk in _chunks(ids, page):
                tokens = tokens_of(chunk)
                for pid in chunk:
                    writer.delete_documents_by_term("id", pid)
                    if pid in tokens:
                        writer.add_document(tantivy.Document(id=pid, body=tokens[pid]))
                        written += 1
            writer.commit()
            writer.wait_merging_threads()  # merges end here, and with them the writer's lock
            self._searcher = None
        return written

    def compact(self) -> None:
        """Delete the files of segments that merges replaced (Tantivy merges segments itself at commits)."""
        with self._lock:
            if not self.exists():
                return
            try:
                writer = self._open().writer(heap_size=WRITER_HEAP, num_threads=1)
                writer.garbage_collect_files()
                writer.wait_merging_threads()
            except ValueError as exc:
                raise LexicalIndexError(f"{self.directory} cannot be written: {exc}") from exc

    def refresh(self) -> None:
        """See the last commit (another process's): new files are checked, the searcher made anew."""
        with self._lock:
            if self._index is not None:
                self.verify()
            self._searcher = None

    # ---- search ------------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            return self._reader().num_docs if self.exists() else 0

    def _reader(self) -> tantivy.Searcher:
        if self._searcher is None:
            index = self._open()
            index.reload()
            self._searcher = index.searcher()
        return self._searcher

    def search(self, tokens: list[str], k: int, min_term_share: float | None = None) -> list[tuple[str, float]]:
        """The ``k`` best passages for the query ``tokens`` by BM25 (any token may match). The terms whose
        IDF is under ``min_term_share`` of the query's (default MIN_TERM_SHARE) only rescore: the others
        find RESCORED x ``k`` candidates, which are then scored by every term (exact BM25 for them)."""
        if not tokens or k <= 0 or not self.exists():
            return []
        try:
            with self._lock:  # the searcher is shared; a search itself runs unlocked, without the GIL
                searcher = self._reader()
            terms = list(dict.fromkeys(tokens))
            share = MIN_TERM_SHARE if min_term_share is None else min_term_share
            weighty = _weighty_terms(searcher, terms, share)
            if len(weighty) == len(terms):
                return self._top(searcher, self._any_of(terms), k)
            candidates = [pid for pid, _ in self._top(searcher, self._any_of(weighty), RESCORED * k)]
            if not candidates:
                return []
            among = tantivy.Query.const_score_query(tantivy.Query.term_set_query(self._schema, "id", candidates), 0.0)
            query = tantivy.Query.boolean_query(
                [(tantivy.Occur.Must, among), (tantivy.Occur.Should, self._any_of(terms))]
            )
            return self._top(searcher, query, k)
        except LexicalIndexError:
            raise
        except BaseException as exc:  # a Rust panic on a damaged file arrives as pyo3's PanicException
            if not _tantivy_failure(exc):
                raise
            raise LexicalIndexError(f"{self.directory} cannot be searched: {exc}") from exc

    def _any_of(self, terms: list[str]) -> tantivy.Query:
        return tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(self._schema, "body", t)) for t in terms]
        )

    @staticmethod
    def _top(searcher: tantivy.Searcher, query: tantivy.Query, k: int) -> list[tuple[str, float]]:
        # count=False: no count of every match, so block-max WAND may skip (15% off p95 at 10M passages)
        hits = searcher.search(query, k, count=False).hits
        return [(searcher.doc(address)["id"][0], float(score)) for score, address in hits if score > 0]


def _weighty_terms(searcher: tantivy.Searcher, terms: list[str], min_share: float) -> list[str]:
    """``terms`` less those whose IDF (BM25's, over the whole index) is under ``min_share`` of their sum;
    all of them when that would leave none."""
    if min_share <= 0 or len(terms) < 2:
        return terms
    n = searcher.num_docs
    idf = {t: math.log(1 + (max(0, n - (df := searcher.doc_freq("body", t))) + 0.5) / (df + 0.5)) for t in terms}
    floor = min_share * sum(idf.values())
    return [t for t in terms if idf[t] >= floor] or terms


def _tantivy_failure(exc: BaseException) -> bool:
    return isinstance(exc, ValueError | OSError) or type(exc).__name__ == "PanicException"


def _check_footer(path: Path) -> None:
    data = path.read_bytes()
    try:
        size, magic = struct.unpack("<II", data[-8:])
        if magic != FOOTER_MAGIC or size + 8 > len(data):
            raise ValueError("no Tantivy footer")
        crc = json.loads(data[len(data) - 8 - size : -8])["crc"]
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise LexicalIndexError(f"{path} is damaged: {exc}") from exc
    if zlib.crc32(memoryview(data)[: len(data) - 8 - size]) != crc:
        raise LexicalIndexError(f"{path} is damaged: its checksum does not match")


def _chunks(ids: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for pid in ids:
        chunk.append(pid)
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
