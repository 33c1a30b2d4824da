"""The passage indexes: dense (FAISS) and lexical (BM25, ``bm25s``), fused by reciprocal rank, over a
small SQLite table that is the corpus of record (id, document, text, embedded text, retraction flag)
and the citation records of the documents.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import bm25s
import numpy as np
import Stemmer

from kg.embedders import TextEmbedder
from kg.errors import InvalidInput
from kg.sql import in_chunks
from kg.vector_index import VectorIndex, VectorIndexError

__all__ = ["DocumentRecord", "PassageRecord", "SearchHit", "TextIndex", "RRF_K"]

RRF_K = 60
# BM25 tokens: every run of word characters, one character long included, so "hepatitis B" and
# "hepatitis C", "vitamin D", "type 1 diabetes" and "type 2", "IL-6" keep the token that tells them
# apart; lower-cased, English stop words ("a", "of", "the") dropped, stemmed. Shared with the fact rerank.
BM25_TOKEN_PATTERN = r"(?u)\b\w+\b"
# Part of the stamp of the saved BM25 files: files built by another tokenizer are rebuilt on open.
# 1: bm25s's default pattern (two characters or more); 2: BM25_TOKEN_PATTERN.
BM25_TOKENIZER_VERSION = 2


def bm25_tokenize(texts: list[str], stemmer: Stemmer.Stemmer, return_ids: bool = True):  # noqa: ANN201
    """The BM25 tokenizer of passages, queries and the fact rerank (bm25s ``Tokenized``, or the
    token lists with ``return_ids=False``)."""
    return bm25s.tokenize(
        texts,
        stopwords="en",
        stemmer=stemmer,
        token_pattern=BM25_TOKEN_PATTERN,
        return_ids=return_ids,
        show_progress=False,
    )


logger = logging.getLogger(__name__)
SearchMode = Literal["hybrid", "bm25", "dense"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS passages (
    id TEXT PRIMARY KEY,
    doc_id TEXT NOT NULL,
    text TEXT NOT NULL,
    embed_text TEXT NOT NULL,
    retracted INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id);
CREATE TABLE IF NOT EXISTS retractions (doc_id TEXT PRIMARY KEY, notice TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL,
    title TEXT NOT NULL,
    journal TEXT,
    year INTEGER,
    authors TEXT NOT NULL,
    doi TEXT,
    retracted INTEGER NOT NULL DEFAULT 0,
    deleted INTEGER NOT NULL DEFAULT 0,
    linked_with TEXT
);
-- generation: bumped in the transaction of every change to passage texts, so that the BM25 files
-- (stamped with the generation they were built from) are known stale after a crash too
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""
_DOCUMENT_COLUMNS = "id, fingerprint, title, journal, year, authors, doi, retracted, deleted, linked_with"


@dataclass(frozen=True)
class PassageRecord:
    id: str  # PMID:123#s4
    doc_id: str  # PMID:123
    text: str  # what is shown and cited
    embed_text: str | None = None  # what is embedded (e.g. the title, then the text); default: text
    retracted: bool = False


@dataclass(frozen=True)
class DocumentRecord:
    """What a citation shows; ``fingerprint`` is the content hash of the record last indexed,
    ``linked_with`` the signature of the linker that linked its passages (None: not linked)."""

    id: str  # PMID:123
    fingerprint: str
    title: str
    journal: str | None = None
    year: int | None = None
    authors: tuple[str, ...] = ()
    doi: str | None = None
    retracted: bool = False
    deleted: bool = False
    linked_with: str | None = None


@dataclass(frozen=True)
class SearchHit:
    id: str
    doc_id: str
    text: str
    title: str | None
    year: int | None
    score: float  # fused score (RRF), or the single ranking's score
    dense: float | None  # cosine similarity to the query
    bm25: float | None
    dense_rank: int | None
    bm25_rank: int | None
    retracted: bool


@dataclass
class ReindexResult:
    passages: int = 0  # in the passage table
    embedded: int = 0  # this run (the others already had a current vector)
    removed: int = 0  # vectors of passages no longer stored
    set_aside: list[Path] = field(default_factory=list)  # damaged index files, renamed
    seconds: float = 0.0


@dataclass
class AddResult:
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    embedded: int = 0
    seconds: float = 0.0


class TextIndex:
    """Passages in ``directory``: adding embeds only what is new or changed (a vector's fingerprint covers
    the embedded text and the model), so re-adding a document costs nothing; removal is by passage or
    document id."""

    def __init__(self, directory: Path, embedder: TextEmbedder, name: str = "passages") -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.name = name
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.directory / f"{name}.sqlite", check_same_thread=False)
        try:
            self._db.executescript(_SCHEMA)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise VectorIndexError(f"{self.directory / name}.sqlite is damaged ({exc}). {self.rebuild_hint()}") from exc
        self._vectors: VectorIndex | None = None
        self._bm25: bm25s.BM25 | None = None
        self._bm25_ids: list[str] = []
        self._bm25_empty_stamp: str | None = None  # the table stamp whose passages have no BM25 token
        self._stemmer = Stemmer.Stemmer("english")
        self._dirty = False

    def _migrate(self) -> None:
        """Tables written by an older medkg gain the columns added since (``ALTER TABLE ... ADD``)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(documents)")}
        if "linked_with" not in columns:
            self._db.execute("ALTER TABLE documents ADD COLUMN linked_with TEXT")
            self._db.commit()

    # ---- storage -----------------------------------------------------------------------------
    @property
    def vectors(self) -> VectorIndex:
        if self._vectors is None:
            try:
                vectors = VectorIndex.open(
                    self.directory, self.name, self.embedder.dimension, model=self.embedder.model_name
                )
            except VectorIndexError as exc:
                raise VectorIndexError(f"{exc}. {self.rebuild_hint()}") from exc
            # Passages are deleted from the table first: a process that stopped before saving the
            # vectors left theirs behind. They go (in memory; the next save writes it).
            rows = {r[0] for r in self._db.execute("SELECT id FROM passages")}
            if ghosts := [i for i in vectors.ids() if i not in rows]:
                logger.warning("%d vectors of passages no longer stored in %s: dropped", len(ghosts), self.directory)
                vectors.remove(ghosts)
            self._vectors = vectors
        return self._vectors

    def rebuild_hint(self) -> str:
        base = self.directory / self.name
        return (
            f"The passage index cannot be used: stop the server and run `medkg reindex --only passages` (it sets "
            f"{base}.faiss and {base}.ids.json aside and embeds every passage of {base}.sqlite again). If "
            f"{base}.sqlite itself is damaged, move it away and run the loads of the literature again (`medkg ingest "
            "pubmed|docs|entrez ...`, `medkg ingest reports ...`: the graph stays as it is), or restore a backup "
            "(`medkg restore FILE.tar.gz`)"
        )

    def load(self) -> None:
        """Open the dense and the lexical index now rather than at the first search (start-up): a damaged
        FAISS or id-map file raises :class:`VectorIndexError` naming it; damaged BM25 files are rebuilt."""
        with self._lock:
            self.vectors  # noqa: B018
            self._load_bm25()

    def _fingerprint(self, text: str) -> str:
        return hashlib.sha1(f"{self.embedder.signature}\n{text}".encode()).hexdigest()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM passages").fetchone()[0]

    def get(self, ids: Sequence[str]) -> dict[str, PassageRecord]:
        with self._lock:
            out: dict[str, PassageRecord] = {}
            for chunk, marks in in_chunks(ids):
                for row in self._db.execute(
                    f"SELECT id, doc_id, text, embed_text, retracted FROM passages WHERE id IN ({marks})", chunk
                ):
                    out[row[0]] = PassageRecord(row[0], row[1], row[2], row[3], bool(row[4]))
            return out

    def put_documents(self, docs: Iterable[DocumentRecord]) -> None:
        with self._lock:
            self._db.executemany(
                f"INSERT OR REPLACE INTO documents({_DOCUMENT_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [
                    (d.id, d.fingerprint, d.title, d.journal, d.year, json.dumps(list(d.authors)), d.doi)
                    + (int(d.retracted), int(d.deleted), d.linked_with)
                    for d in docs
                ],
            )
            self._db.commit()

    def get_documents(self, ids: Iterable[str]) -> dict[str, DocumentRecord]:
        ids = list(dict.fromkeys(ids))
        out: dict[str, DocumentRecord] = {}
        with self._lock:
            for chunk, marks in in_chunks(ids):
                query = f"SELECT {_DOCUMENT_COLUMNS} FROM documents WHERE id IN ({marks})"
                for r in self._db.execute(query, chunk):
                    authors = tuple(json.loads(r[5]))
                    out[r[0]] = DocumentRecord(
                        r[0], r[1], r[2], r[3], r[4], authors, r[6], bool(r[7]), bool(r[8]), r[9]
                    )
        return out

    def mark_documents(self, ids: Iterable[str], *, retracted: bool | None = None, deleted: bool | None = None) -> int:
        """Flag documents (and their passages, for retraction); returns how many documents changed."""
        n = 0
        with self._lock:
            for doc_id in ids:
                if retracted is not None:
                    n += self._db.execute(
                        "UPDATE documents SET retracted = ? WHERE id = ? AND retracted != ?",
                        (int(retracted), doc_id, int(retracted)),
                    ).rowcount
                    self._db.execute("UPDATE passages SET retracted = ? WHERE doc_id = ?", (int(retracted), doc_id))
                if deleted is not None:
                    n += self._db.execute(
                        "UPDATE documents SET deleted = ? WHERE id = ? AND deleted != ?",
                        (int(deleted), doc_id, int(deleted)),
                    ).rowcount
            self._db.commit()
        return n

    def record_retractions(self, doc_ids: Iterable[str], notice: str) -> None:
        """Remember that ``notice`` retracts these documents, loaded yet or not."""
        with self._lock:
            self._db.executemany("INSERT OR IGNORE INTO retractions VALUES (?, ?)", [(d, notice) for d in doc_ids])
            self._db.commit()

    def retracted(self, doc_ids: Iterable[str]) -> set[str]:
        """The documents among ``doc_ids`` that some loaded notice retracts."""
        ids = list(dict.fromkeys(doc_ids))
        found: set[str] = set()
        with self._lock:
            for chunk, marks in in_chunks(ids):
                found |= {
                    r[0] for r in self._db.execute(f"SELECT doc_id FROM retractions WHERE doc_id IN ({marks})", chunk)
                }
        return found

    def document_count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM documents WHERE deleted = 0").fetchone()[0]

    def iter_document_ids(self, prefix: str = "", page: int = 10_000) -> Iterator[str]:
        """Ids of the documents not deleted whose id starts with ``prefix``, in id order (read in
        pages, so writes may interleave)."""
        after = prefix
        while True:
            with self._lock:
                rows = self._db.execute(
                    "SELECT id FROM documents WHERE deleted = 0 AND id > ? AND substr(id, 1, ?) = ? "
                    "ORDER BY id LIMIT ?",
                    (after, len(prefix), prefix, page),
                ).fetchall()
            if not rows:
                return
            yield from (r[0] for r in rows)
            after = rows[-1][0]

    def document_passages(self, doc_id: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM passages WHERE doc_id = ? ORDER BY id", (doc_id,))]

    # ---- writes ------------------------------------------------------------------------------
    def add(self, records: Iterable[PassageRecord], batch: int = 256) -> AddResult:
        """Store and embed passages; what is already there unchanged costs nothing. Call ``commit``."""
        started = time.perf_counter()
        result = AddResult()
        records = list({r.id: r for r in records}.values())
        stored = self.get([r.id for r in records])
        todo: list[PassageRecord] = []
        with self._lock:
            for rec in records:
                old = stored.get(rec.id)
                embed_text = rec.embed_text or rec.text
                same = old is not None and (old.text, old.embed_text, old.retracted) == (
                    rec.text,
                    embed_text,
                    rec.retracted,
                )
                if same:
                    result.unchanged += 1
                else:
                    if old is None:
                        result.added += 1
                    else:
                        result.changed += 1
                    self._db.execute(
                        "INSERT OR REPLACE INTO passages(id, doc_id, text, embed_text, retracted) VALUES (?,?,?,?,?)",
                        (rec.id, rec.doc_id, rec.text, embed_text, int(rec.retracted)),
                    )
                    self._dirty = True
                todo.append(rec)
            if self._dirty:
                self._bump_generation()
            self._db.commit()
        # Embedding is decided by the vectors' own fingerprints, so an interrupted run re-embeds
        # exactly what did not reach the saved index.
        ids = [r.id for r in todo]
        texts = [r.embed_text or r.text for r in todo]
        prints = [self._fingerprint(t) for t in texts]
        need = self.vectors.needs_update(ids, prints)
        for start in range(0, len(need), batch):
            chunk = need[start : start + batch]
            vectors = self.embedder.encode([texts[i] for i in chunk])
            result.embedded += self.vectors.upsert([ids[i] for i in chunk], vectors, [prints[i] for i in chunk])
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def reindex(
        self, progress: bool = True, page: int = 4096, batch: int = 256, checkpoint: int = 20_000
    ) -> ReindexResult:
        """Give every stored passage a current vector, from the passage table alone: a damaged index
        is set aside (renamed) and built again; a missing or stale vector (an interrupted load, another
        embedder) is embedded; vectors of passages no longer stored are dropped; BM25 is rebuilt.
        The vectors are saved every ``checkpoint`` embeddings, so an interrupted run resumes where it
        stopped."""
        from tqdm import tqdm

        started = time.perf_counter()
        result = ReindexResult()
        try:
            vectors = self.vectors
        except VectorIndexError:
            result.set_aside = VectorIndex.set_aside(self.directory, self.name)
            self._vectors = None
            vectors = self.vectors
        seen: set[str] = set()
        since_save = 0
        total = len(self)
        after = ""
        with tqdm(total=total, desc="embed passages", unit=" passages", disable=not progress, mininterval=0.5) as bar:
            while True:
                with self._lock:
                    rows = self._db.execute(
                        "SELECT id, embed_text FROM passages WHERE id > ? ORDER BY id LIMIT ?", (after, page)
                    ).fetchall()
                if not rows:
                    break
                after = rows[-1][0]
                ids, texts = [r[0] for r in rows], [r[1] for r in rows]
                prints = [self._fingerprint(t) for t in texts]
                seen.update(ids)
                need = vectors.needs_update(ids, prints)
                bar.update(len(ids) - len(need))
                for start in range(0, len(need), batch):
                    chunk = need[start : start + batch]
                    encoded = self.embedder.encode([texts[i] for i in chunk])
                    result.embedded += vectors.upsert([ids[i] for i in chunk], encoded, [prints[i] for i in chunk])
                    since_save += len(chunk)
                    bar.update(len(chunk))
                    if since_save >= checkpoint:
                        vectors.save()
                        since_save = 0
        result.passages = len(seen)
        result.removed = vectors.remove([i for i in vectors.ids() if i not in seen])
        vectors.fit_kind()
        with self._lock:
            self._dirty = True  # BM25 from the table again
        self.commit()
        result.seconds = round(time.perf_counter() - started, 2)
        return result

    def remove(self, ids: Iterable[str]) -> int:
        ids = list(ids)
        with self._lock:
            n = 0
            for chunk, marks in in_chunks(ids):
                n += self._db.execute(f"DELETE FROM passages WHERE id IN ({marks})", chunk).rowcount
            if n:
                self._bump_generation()
            self._db.commit()
            self._dirty = self._dirty or n > 0
        self.vectors.remove(ids)
        return n

    def remove_documents(self, doc_ids: Iterable[str]) -> int:
        ids = [p for d in doc_ids for p in self.document_passages(d)]
        return self.remove(ids) if ids else 0

    # BM25 has no incremental update: rebuilt from the table when it changed (20k passages: well under a second).
    def commit(self) -> None:
        """Persist the vectors and rebuild BM25 if the corpus changed (also after a crash: the
        table's stamp is compared with the one the BM25 files were built from)."""
        with self._lock:
            if self._vectors is not None:  # untouched vectors need no save (nor the model loaded)
                self._vectors.fit_kind()  # past flat_max passages an IVF index, below it exact again
                self._vectors.save()
            if self._dirty or self._bm25_stamp() != self._table_stamp():
                self._build_bm25()
            self._dirty = False

    # ---- BM25 --------------------------------------------------------------------------------
    @property
    def _bm25_dir(self) -> Path:
        return self.directory / f"{self.name}.bm25"

    def _bump_generation(self) -> None:
        """Count a change to the passage texts, in the caller's transaction."""
        self._db.execute(
            "INSERT INTO meta(key, value) VALUES ('generation', 1) ON CONFLICT(key) DO UPDATE SET value = value + 1"
        )

    def _table_stamp(self) -> str:
        """What the BM25 files must have been built from: the table's generation and size (a change
        of one passage's text to another of the same length counts too, crash or not) and the
        tokenizer's version (files of an older tokenizer are rebuilt once)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        count = self._db.execute("SELECT count(*) FROM passages").fetchone()[0]
        return f"generation {row[0] if row else 0}, {count} passages, tokenizer {BM25_TOKENIZER_VERSION}"

    def _bm25_stamp(self) -> str | None:
        path = self._bm25_dir / "medkg.json"
        try:
            return json.loads(path.read_text())["stamp"] if path.exists() else None
        except (OSError, ValueError, KeyError, TypeError):  # damaged: the BM25 files are rebuilt, never trusted
            return None

    def _tokenize(self, texts: list[str]):  # noqa: ANN202 - bm25s.tokenization.Tokenized
        return bm25_tokenize(texts, self._stemmer)

    def _build_bm25(self) -> None:
        rows = self._db.execute("SELECT id, text FROM passages ORDER BY id").fetchall()
        self._bm25_ids = [r[0] for r in rows]
        if not rows:
            self._bm25 = None
            return
        tokens = self._tokenize([r[1] for r in rows])
        stamp = self._table_stamp()
        target = self._bm25_dir
        target.mkdir(parents=True, exist_ok=True)
        retriever = None
        if tokens.vocab:
            retriever = bm25s.BM25()
            retriever.index(tokens, show_progress=False)
            retriever.save(str(target), show_progress=False)
        # No passage has a token (stop words only): no BM25 index, bm25_search finds nothing; the
        # stamp is still written so that it is not rebuilt on every search, and a later change is.
        tmp = target / "medkg.json.tmp"
        tmp.write_text(json.dumps({"stamp": stamp, "ids": self._bm25_ids, "empty": retriever is None}))
        os.replace(tmp, target / "medkg.json")
        self._bm25 = retriever
        self._bm25_empty_stamp = stamp if retriever is None else None

    def _load_bm25(self) -> bm25s.BM25 | None:
        if self._bm25 is None and len(self):
            stamp = self._table_stamp()
            if stamp == self._bm25_empty_stamp:
                return None
            if self._bm25_stamp() != stamp:
                self._build_bm25()
            else:
                try:
                    meta = json.loads((self._bm25_dir / "medkg.json").read_text())
                    if meta.get("empty") is True:
                        self._bm25_empty_stamp = stamp
                        return None
                    retriever = bm25s.BM25.load(str(self._bm25_dir))
                    ids = meta["ids"]
                    if not isinstance(ids, list) or len(ids) != len(self) or len(ids) != retriever.scores["num_docs"]:
                        raise ValueError(f"{len(ids)} ids for {len(self)} passages")
                except Exception as exc:  # noqa: BLE001 - derived files: rebuilt from the table, never trusted
                    logger.warning("BM25 index in %s is damaged (%s): rebuilding it", self._bm25_dir, exc)
                    self._build_bm25()
                else:
                    self._bm25, self._bm25_ids = retriever, ids
        return self._bm25

    # ---- search ------------------------------------------------------------------------------
    def bm25_search(self, query: str, k: int) -> list[tuple[str, float]]:
        with self._lock:
            retriever = self._load_bm25()
            if retriever is None:
                return []
            tokens = self._tokenize([query])
            if not tokens.vocab:
                return []
            docs, scores = retriever.retrieve(tokens, k=min(k, len(self._bm25_ids)), show_progress=False)
            return [(self._bm25_ids[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def dense_search(self, query: str, k: int, vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        if not len(self.vectors):
            return []
        vector = self.embedder.encode([query])[0] if vector is None else vector
        return self.vectors.search(vector, k)[0]

    def _fuse(
        self,
        dense: list[tuple[str, float]],
        lexical: list[tuple[str, float]],
        mode: SearchMode,
        vector: np.ndarray | None,
        floor: float,
        exclude_retracted: bool,
    ) -> tuple[list[str], dict[str, float], dict[str, float], dict[str, PassageRecord]]:
        """The candidates of both lists in fused order (RRF in ``hybrid``), those under the cosine ``floor``
        (``hybrid``), gone or (``exclude_retracted``) retracted left out; with their fused scores, cosines to
        the query and records."""
        if mode == "bm25":
            fused = dict(lexical)
        elif mode == "dense":
            fused = dict(dense)
        else:
            fused = {}
            for ranked in (dense, lexical):
                for rank, (pid, _) in enumerate(ranked, start=1):
                    fused[pid] = fused.get(pid, 0.0) + 1.0 / (RRF_K + rank)
        cosines = dict(dense)
        if vector is not None:
            for pid in fused.keys() - cosines.keys():
                stored = self.vectors.vector(pid)
                if stored is not None:
                    cosines[pid] = float(stored @ vector)
        order = sorted(fused, key=lambda p: (-fused[p], p))
        if mode == "hybrid":
            order = [p for p in order if cosines.get(p, -1.0) >= floor]
        records = self.get(order)
        # a vector whose passage is gone counts for nothing; nor, when asked, a retracted passage
        order = [p for p in order if p in records and not (exclude_retracted and records[p].retracted)]
        return order, fused, cosines, records

    def search(
        self,
        query: str,
        k: int = 10,
        mode: SearchMode = "hybrid",
        floor: float = 0.25,
        candidates: int = 50,
        vector: np.ndarray | None = None,
        exclude_retracted: bool = False,
    ) -> list[SearchHit]:
        """The ``k`` best passages for ``query``. ``hybrid`` fuses BM25 and dense ranks (RRF) and keeps
        only passages whose cosine to the query is at least ``floor`` (a keyword hit on an unrelated
        passage does not become evidence). ``vector``: the query's
        embedding when the caller has it already. ``exclude_retracted``: passages of retracted
        articles are left out before the cut to ``k`` (an answer's evidence), not shown flagged."""
        if k <= 0:
            raise InvalidInput("k must be positive")
        if not len(self):
            return []
        if mode == "bm25":
            vector = None
        elif vector is None:
            vector = self.embedder.encode([query])[0]
        n = max(candidates, k)
        while True:
            dense = self.dense_search(query, n, vector) if mode != "bm25" else []
            lexical = self.bm25_search(query, n) if mode != "dense" else []
            order, fused, cosines, records = self._fuse(dense, lexical, mode, vector, floor, exclude_retracted)
            # Retracted or gone passages (and, in hybrid, the floor) can leave fewer than k of the first n
            # candidates. Look further only where more may qualify: a list cut at n; in hybrid, one passes
            # the floor only if its cosine does, so only while the n-th dense candidate still does.
            if mode == "hybrid":
                more = len(dense) >= n and dense[-1][1] >= floor
            else:
                more = len(dense if mode == "dense" else lexical) >= n
            if len(order) >= k or not more or n >= len(self):
                break
            n = min(4 * n, len(self))
        order = order[:k]
        dense_rank = {pid: (i + 1, s) for i, (pid, s) in enumerate(dense)}
        bm25_rank = {pid: (i + 1, s) for i, (pid, s) in enumerate(lexical)}
        documents = self.get_documents(r.doc_id for r in records.values())
        hits = []
        for pid in order:
            rec = records.get(pid)
            if rec is None:
                continue
            hits.append(
                SearchHit(
                    id=pid,
                    doc_id=rec.doc_id,
                    text=rec.text,
                    title=documents[rec.doc_id].title if rec.doc_id in documents else None,
                    year=documents[rec.doc_id].year if rec.doc_id in documents else None,
                    score=round(fused[pid], 6),
                    dense=round(cosines[pid], 4) if pid in cosines else None,
                    bm25=round(bm25_rank[pid][1], 4) if pid in bm25_rank else None,
                    dense_rank=dense_rank[pid][0] if pid in dense_rank else None,
                    bm25_rank=bm25_rank[pid][0] if pid in bm25_rank else None,
                    retracted=rec.retracted,
                )
            )
        return hits

    def close(self) -> None:
        with self._lock:
            self._db.close()
