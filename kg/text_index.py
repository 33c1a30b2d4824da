"""The passage indexes: dense (FAISS) and lexical (BM25, Tantivy), fused by reciprocal rank, over a
SQLite table that is the corpus of record (id, document, text, embedded text, retraction flag) and the
citation records of the documents."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

import bm25s
import numpy as np
import Stemmer

from kg.embedders import TextEmbedder
from kg.errors import InvalidInput
from kg.index_generation import Generations
from kg.lexical_index import LexicalIndex, LexicalIndexError
from kg.sql import in_chunks
from kg.vector_index import DEFAULT_FLAT_MAX, VectorIndex, VectorIndexError

__all__ = ["DocumentRecord", "Embedded", "PassageRecord", "SearchHit", "TextIndex", "RRF_K"]

RRF_K = 60
# BM25 tokens: every run of word characters, one character long included, so "hepatitis B" and
# "hepatitis C", "vitamin D", "type 1 diabetes" and "type 2", "IL-6" keep the token that tells them
# apart; lower-cased, English stop words ("a", "of", "the") dropped, stemmed. Shared with the fact rerank.
BM25_TOKEN_PATTERN = r"(?u)\b\w+\b"
# The tokenizer the lexical index was written with (meta 'lexical_tokenizer'): another version is
# written again whole on open. 1: bm25s's default pattern (two characters or more); 2: BM25_TOKEN_PATTERN.
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
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
-- passages whose lexical entry is not yet written: filled in the transaction that changes a passage,
-- emptied once the lexical index has committed them (so a crash in between writes them again)
CREATE TABLE IF NOT EXISTS lexical_pending (id TEXT PRIMARY KEY);
-- passages deleted whose vectors the dense index has not yet saved as removed: filled in the
-- transaction that deletes them, applied when the vectors are opened, emptied once they are saved
CREATE TABLE IF NOT EXISTS dense_removed (id TEXT PRIMARY KEY);
"""
_DOCUMENT_COLUMNS = "id, fingerprint, title, journal, year, authors, doi, retracted, deleted, linked_with"


@dataclass(frozen=True)
class PassageRecord:
    id: str  # PMID:123#s4
    doc_id: str  # PMID:123
    text: str  # what is shown and cited
    embed_text: str | None = None  # what is embedded (e.g. the title, then the text); default: text
    retracted: bool = False


class Embedded(NamedTuple):
    """A passage's vector made elsewhere (a distributed load's workers), by the embedder whose
    signature is ``signature``: stored as it is when that is what the text index's fingerprints ask."""

    vector: np.ndarray
    signature: str


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
    embedded: int = 0  # vectors stored (made here or given)
    given: int = 0  # of these, vectors given by the caller (not embedded here)
    seconds: float = 0.0


class TextIndex:
    """Passages in ``directory``: adding embeds only what is new or changed (a vector's fingerprint covers
    the embedded text and the model), so re-adding a document costs nothing; removal is by passage or
    document id."""

    def __init__(
        self,
        directory: Path,
        embedder: TextEmbedder,
        name: str = "passages",
        flat_max: int = DEFAULT_FLAT_MAX,
        read_only: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder
        self.name = name
        # a reader beside the data dir's writer (an API replica): writes nothing, and opens each
        # generation the writer publishes (kg.index_generation) at its next search
        self.read_only = read_only
        self.generations = Generations(self.directory, name)
        self.flat_max = flat_max  # exact dense search up to this many passages, IVF-PQ above
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.directory / f"{name}.sqlite", check_same_thread=False)
        try:
            self._db.executescript(_SCHEMA)
            if not read_only:
                self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise VectorIndexError(f"{self.directory / name}.sqlite is damaged ({exc}). {self.rebuild_hint()}") from exc
        self._vectors: VectorIndex | None = None
        self._passages: int | None = None  # see __len__
        self._pool: ThreadPoolExecutor | None = None  # runs BM25 beside the dense search (search)
        self.lexical = LexicalIndex(self.directory / f"{name}.tantivy")
        self._stemmer = Stemmer.Stemmer("english")
        if not read_only:
            self._check_lexical()

    def _check_lexical(self) -> None:
        """Queue every passage for the lexical index when its files are missing (a new index, or a data
        dir of a medkg that kept BM25 in bm25s files) or were written by another tokenizer."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'lexical_tokenizer'").fetchone()
        if self.lexical.exists() and row is not None and row[0] == BM25_TOKENIZER_VERSION:
            return
        with self._db:
            if self.lexical.exists():
                self.lexical.clear()
            n = self._db.execute("INSERT OR IGNORE INTO lexical_pending(id) SELECT id FROM passages").rowcount
            self._db.execute(
                "INSERT INTO meta(key, value) VALUES ('lexical_tokenizer', ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (BM25_TOKENIZER_VERSION,),
            )
        if n > 0:
            logger.info("lexical index of %s: %d passages to write from the passage table", self.directory, n)
        shutil.rmtree(self.directory / f"{self.name}.bm25", ignore_errors=True)  # an older medkg's bm25s files

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
                    self.directory,
                    self.name,
                    self.embedder.dimension,
                    model=self.embedder.model_name,
                    flat_max=self.flat_max,
                    read_only=self.read_only,
                )
            except VectorIndexError as exc:
                raise VectorIndexError(f"{exc}. {self.rebuild_hint()}") from exc
            # Passages are deleted from the table first: a process that stopped before saving the
            # vectors left theirs behind. They go (in memory; the next save writes it).
            with self._lock:
                gone = [r[0] for r in self._db.execute("SELECT id FROM dense_removed")]
            if gone and (n := vectors.remove(gone)):
                logger.warning("%d vectors of passages no longer stored in %s: dropped", n, self.directory)
            self._vectors = vectors
        return self._vectors

    def rebuild_hint(self) -> str:
        base = self.directory / self.name
        return (
            f"The passage index cannot be used: stop the server and run `medkg reindex --only passages` (it sets "
            f"{base}.vectors aside and embeds every passage of {base}.sqlite again). If "
            f"{base}.sqlite itself is damaged, move it away and run the loads of the literature again (`medkg ingest "
            "pubmed|docs|entrez ...`, `medkg ingest reports ...`: the graph stays as it is), or restore a backup "
            "(`medkg restore FILE.tar.gz`)"
        )

    def load(self) -> None:
        """Open the dense and the lexical index now rather than at the first search (start-up): a damaged
        FAISS or id-map file raises :class:`VectorIndexError` naming it; damaged BM25 files are rebuilt."""
        with self._lock:
            self.vectors  # noqa: B018
            if not self.read_only:
                self._sync_lexical()

    def _fingerprint(self, text: str, signature: str | None = None) -> str:
        """What a passage's vector stands for: its embedding text and the embedder (``signature``,
        default this index's) that made it."""
        return hashlib.sha1(f"{signature or self.embedder.signature}\n{text}".encode()).hexdigest()

    def __len__(self) -> int:
        """Passages stored: meta 'passages', kept by add and remove in their transactions (a count(*)
        takes 5 s over 10M rows on a cold cache); counted once where an older medkg did not keep it."""
        with self._lock:
            if self._passages is None:
                row = self._db.execute("SELECT value FROM meta WHERE key = 'passages'").fetchone()
                if row is None:
                    row = self._db.execute("SELECT count(*) FROM passages").fetchone()
                    if not self.read_only:
                        self._db.execute("INSERT INTO meta(key, value) VALUES ('passages', ?)", row)
                        self._db.commit()
                self._passages = row[0]
            return self._passages

    def _count_passages(self, change: int) -> None:
        """Add ``change`` to the stored count, in the caller's transaction (which called len() first)."""
        if change:
            self._db.execute("UPDATE meta SET value = value + ? WHERE key = 'passages'", (change,))
            self._passages = (self._passages or 0) + change

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

    def document_texts(self, doc_ids: Iterable[str]) -> dict[str, str]:
        """Each document's passages' text, joined in passage order (an abstract is a few hundred words)."""
        out: dict[str, list[str]] = {}
        with self._lock:
            for chunk, marks in in_chunks(sorted(set(doc_ids))):
                rows = self._db.execute(
                    f"SELECT doc_id, text FROM passages WHERE doc_id IN ({marks}) ORDER BY id", chunk
                )
                for doc_id, text in rows:
                    out.setdefault(doc_id, []).append(text)
        return {d: "\n".join(texts) for d, texts in out.items()}

    def document_passages(self, doc_id: str) -> list[str]:
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT id FROM passages WHERE doc_id = ? ORDER BY id", (doc_id,))]

    # ---- writes ------------------------------------------------------------------------------
    def add(
        self, records: Iterable[PassageRecord], batch: int = 256, vectors: Mapping[str, Embedded] | None = None
    ) -> AddResult:
        """Store and embed passages; what is already there unchanged costs nothing. Call ``commit``.
        ``vectors``: passages' vectors made elsewhere, stored instead of embedding those passages here
        (fingerprinted with the signature of the embedder that made them); a vector of another model
        or dimension is refused (:class:`ValueError`)."""
        self._writable()
        started = time.perf_counter()
        result = AddResult()
        records = list({r.id: r for r in records}.values())
        stored = self.get([r.id for r in records])
        todo: list[PassageRecord] = []
        with self._lock:
            len(self)  # the stored count exists before this transaction changes it
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
                    self._db.execute("INSERT OR IGNORE INTO lexical_pending(id) VALUES (?)", (rec.id,))
                todo.append(rec)
            self._count_passages(result.added)
            self._db.commit()
        # Embedding is decided by the vectors' own fingerprints, so an interrupted run re-embeds
        # exactly what did not reach the saved index.
        ids = [r.id for r in todo]
        texts = [r.embed_text or r.text for r in todo]
        given = {i: vectors[i] for i in ids if vectors and i in vectors}
        prints = [
            self._fingerprint(t, given[i].signature if i in given else None) for i, t in zip(ids, texts, strict=True)
        ]
        need = self.vectors.needs_update(ids, prints)
        if given:
            self._check_given(given.values())
            have = [i for i in need if ids[i] in given]
            need = [i for i in need if ids[i] not in given]
            if have:
                matrix = np.stack([given[ids[i]].vector for i in have]).astype(np.float32, copy=False)
                stored = self.vectors.upsert([ids[i] for i in have], matrix, [prints[i] for i in have])
                result.embedded += stored
                result.given += stored
        for start in range(0, len(need), batch):
            chunk = need[start : start + batch]
            vectors = self.embedder.encode_memoised([texts[i] for i in chunk])
            result.embedded += self.vectors.upsert([ids[i] for i in chunk], vectors, [prints[i] for i in chunk])
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def _check_given(self, given: Iterable[Embedded]) -> None:
        for signature in {e.signature for e in given}:
            if not signature.startswith(self.embedder.model_name):
                raise ValueError(
                    f"passage vectors made by {signature!r} cannot join an index of {self.embedder.model_name!r}"
                )

    def reindex(
        self, progress: bool = True, page: int = 4096, batch: int = 256, checkpoint: int = 20_000
    ) -> ReindexResult:
        """Give every stored passage a current vector, from the passage table alone: a damaged index
        is set aside (renamed) and built again; a missing or stale vector (an interrupted load, another
        embedder) is embedded; vectors of passages no longer stored are dropped; BM25 is rebuilt.
        The vectors are saved every ``checkpoint`` embeddings, so an interrupted run resumes where it
        stopped."""
        from kg.progress import progress_bar

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
        with progress_bar(
            total=total, desc="embed passages", unit=" passages", disable=not progress, mininterval=0.5
        ) as bar:
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
                    encoded = self.embedder.encode_memoised([texts[i] for i in chunk])
                    result.embedded += vectors.upsert([ids[i] for i in chunk], encoded, [prints[i] for i in chunk])
                    since_save += len(chunk)
                    bar.update(len(chunk))
                    if since_save >= checkpoint:
                        vectors.save()
                        since_save = 0
        result.passages = len(seen)
        result.removed = vectors.remove([i for i in vectors.ids() if i not in seen])
        vectors.fit_kind()
        with self._lock:  # the lexical index from the table again
            self.lexical.clear()
            self._db.execute("INSERT OR IGNORE INTO lexical_pending(id) SELECT id FROM passages")
            self._db.commit()
        self.commit()
        result.seconds = round(time.perf_counter() - started, 2)
        return result

    def remove(self, ids: Iterable[str]) -> int:
        self._writable()
        ids = list(ids)
        with self._lock:
            len(self)  # the stored count exists before this transaction changes it
            n = 0
            for chunk, marks in in_chunks(ids):
                n += self._db.execute(f"DELETE FROM passages WHERE id IN ({marks})", chunk).rowcount
                self._db.executemany("INSERT OR IGNORE INTO lexical_pending(id) VALUES (?)", [(i,) for i in chunk])
                self._db.executemany("INSERT OR IGNORE INTO dense_removed(id) VALUES (?)", [(i,) for i in chunk])
            self._count_passages(-n)
            self._db.commit()
        self.vectors.remove(ids)
        return n

    def remove_documents(self, doc_ids: Iterable[str]) -> int:
        ids = [p for d in doc_ids for p in self.document_passages(d)]
        return self.remove(ids) if ids else 0

    def commit(self) -> None:
        """Persist the vectors and write the passages changed since the last commit to the lexical
        index (only those: its cost follows the change, not the corpus)."""
        self._writable()
        with self._lock:
            if self._vectors is not None:  # untouched vectors need no save (nor the model loaded)
                self._vectors.save()
                self._vectors.fit_kind()  # past flat_max passages IVF-PQ, below it exact again
                self._db.execute("DELETE FROM dense_removed")
                self._db.commit()
            self._sync_lexical()
            self.generations.publish()

    def _writable(self) -> None:
        if self.read_only:
            raise VectorIndexError(
                f"{self.directory / self.name} is open read-only here: the data dir's writer changes it"
            )

    def refresh(self) -> bool:
        """In a reader: open the generation a writer published since the last look (the dense and the
        lexical index, the passage count); True if there was one. Searches call it."""
        if not self.read_only or not self.generations.changed():
            return False
        with self._lock:
            self._vectors = None  # reopened at the next use; a search running on the old one finishes on it
            self._passages = None
            self.lexical.refresh()
        return True

    def compact(self) -> dict[str, object]:
        """Write the dense index again without the rows of removed or replaced passages (a quantizer
        trained anew for its size) and let the lexical index drop the files of merged segments."""
        with self._lock:
            self.commit()
            before = self.vectors.stats()
            self.vectors.rebuild()
            self.lexical.compact()
            return {"before": before, "after": self.vectors.stats()}

    # ---- lexical -----------------------------------------------------------------------------
    def _sync_lexical(self) -> None:
        """Write the pending passages to the lexical index, then forget them; a damaged index is set
        aside and written again from the passage table."""
        pending = [r[0] for r in self._db.execute("SELECT id FROM lexical_pending ORDER BY id")]
        if not pending:
            return
        try:
            self.lexical.write(pending, self._lexical_tokens)
        except LexicalIndexError as exc:
            self._rebuild_lexical(exc)
            return
        for chunk, marks in in_chunks(pending):
            self._db.execute(f"DELETE FROM lexical_pending WHERE id IN ({marks})", chunk)
        self._db.commit()

    def _rebuild_lexical(self, why: Exception) -> None:
        moved = self.lexical.set_aside()
        logger.warning(
            "BM25 index in %s is damaged (%s): rebuilding it from the passage table%s",
            self.lexical.directory, why, f" ({moved} kept)" if moved else "",
        )  # fmt: skip
        self._db.execute("INSERT OR IGNORE INTO lexical_pending(id) SELECT id FROM passages")
        self._db.commit()
        self._sync_lexical()

    def _lexical_tokens(self, ids: list[str]) -> dict[str, str]:
        """The BM25 tokens of the passages among ``ids`` that are stored, joined by spaces."""
        rows = []
        for chunk, marks in in_chunks(ids):
            rows += self._db.execute(f"SELECT id, text FROM passages WHERE id IN ({marks})", chunk).fetchall()
        tokens = bm25_tokenize([r[1] for r in rows], self._stemmer, return_ids=False) if rows else []
        return {r[0]: " ".join(t) for r, t in zip(rows, tokens, strict=True)}

    # ---- search ------------------------------------------------------------------------------
    def bm25_search(self, query: str, k: int) -> list[tuple[str, float]]:
        self.refresh()
        if not self.read_only:
            with self._lock:
                self._sync_lexical()  # what a crash or an uncommitted add left pending
        tokens = bm25_tokenize([query], self._stemmer, return_ids=False)[0]
        try:
            return self.lexical.search(tokens, k)  # unlocked: Tantivy searches in parallel, without the GIL
        except LexicalIndexError as exc:
            if self.read_only:
                raise VectorIndexError(f"{exc}. {self.rebuild_hint()}") from exc
            with self._lock:
                self._rebuild_lexical(exc)
            return self.lexical.search(tokens, k)

    def holds_word(self, word: str) -> bool:
        """Whether any passage holds ``word`` (as the BM25 tokenizer reads it: stemmed, lower case)."""
        return bool(len(self) and self.bm25_search(word, 1))

    def dense_search(self, query: str, k: int, vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        self.refresh()
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
        k: int,
    ) -> tuple[list[str], dict[str, float], dict[str, float], dict[str, PassageRecord]]:
        """The candidates of both lists in fused order (RRF in ``hybrid``), those under the cosine ``floor``
        (``hybrid``), gone or (``exclude_retracted``) retracted left out, read in that order a few at a time
        until ``k`` qualify (at 10M passages every record and vector read is a random read of a file
        larger than memory); with their fused scores, cosines to the query and records."""
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
        ranked = sorted(fused, key=lambda p: (-fused[p], p))
        order: list[str] = []
        records: dict[str, PassageRecord] = {}
        step = max(k + k // 2, 8)
        for start in range(0, len(ranked), step):
            chunk = ranked[start : start + step]
            if vector is not None and (missing := set(chunk) - cosines.keys()):
                for pid, stored in self.vectors.vectors_of(missing).items():
                    cosines[pid] = float(stored @ vector)
            if mode == "hybrid":
                chunk = [p for p in chunk if cosines.get(p, -1.0) >= floor]
            found = self.get(chunk)
            records |= found
            # a vector whose passage is gone counts for nothing; nor, when asked, a retracted passage
            order += [p for p in chunk if p in found and not (exclude_retracted and found[p].retracted)]
            if len(order) >= k:
                break
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
        self.refresh()
        if not len(self):
            return []
        n = max(candidates, k)
        while True:
            # BM25 runs in a thread of its own while the query is embedded and the dense index searched:
            # Tantivy releases the GIL, so a hybrid search costs the slower of the two, not their sum.
            lexical_job = self._searcher_pool().submit(self.bm25_search, query, n) if mode != "dense" else None
            if mode == "bm25":
                vector = None
            elif vector is None:
                vector = self.embedder.encode([query])[0]
            dense = self.dense_search(query, n, vector) if mode != "bm25" else []
            lexical = lexical_job.result() if lexical_job is not None else []
            order, fused, cosines, records = self._fuse(dense, lexical, mode, vector, floor, exclude_retracted, k)
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
        documents = self.get_documents(records[p].doc_id for p in order)
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

    def _searcher_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="bm25")
            return self._pool

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None
            if self._vectors is not None:
                self._vectors.close()
            self._db.close()
