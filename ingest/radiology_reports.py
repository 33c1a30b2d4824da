"""Radiology report collections (the IU chest X-ray CSV, Open-i) into the graph, the passage indexes and a
report table. A report becomes what a PubMed abstract becomes (document, passages, mentions), so
search, QA and citations treat both alike.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sqlite3
import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field, field_validator

from ingest.batches import batched_load
from ingest.pubmed.model import Article, Section
from ingest.pubmed.passages import MAX_WORDS, ArticleText, article_text, split_passages
from ingest.summary import IngestSummary, Problem
from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker, Mention
from kg.model import DOCUMENT, HAS_PASSAGE, MENTIONS, PASSAGE, Entity, Relation
from kg.negation import negated as is_negated
from kg.sql import in_chunks
from kg.text_index import DocumentRecord, PassageRecord, TextIndex

if TYPE_CHECKING:
    from spacy.language import Language

__all__ = [
    "HAS_FINDING",
    "IU_XRAY",
    "SECTIONS",
    "RadiologyReport",
    "ReportCollection",
    "ReportFormatError",
    "ReportLoadResult",
    "ReportLoader",
    "ReportProblem",
    "ReportStore",
    "read_iu_projections",
    "read_iu_reports",
    "report_store_for",
]

HAS_FINDING = "HAS_FINDING"
SECTIONS = ("INDICATION", "COMPARISON", "FINDINGS", "IMPRESSION")
REQUIRED_COLUMNS = ("uid", "findings", "impression")
OPTIONAL_COLUMNS = ("mesh", "problems", "image", "indication", "comparison")
PROJECTION_COLUMNS = ("uid", "filename", "projection")
NO_FINDING_TERMS = frozenset({"normal", "no indexing"})  # MeSH-column values that name no finding
REPORT_STORE_FILE = "reports.sqlite"
_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_FINGERPRINT_VERSION = "1"


# ---- records --------------------------------------------------------------------------------------
class ReportProblem(Problem):
    """A report row that could not be read (file and line); the rest of the file still loads."""


class ReportFormatError(InvalidInput):
    """A file that is not a report (or projection) table at all: required columns are missing."""


class RadiologyReport(BaseModel):
    """One report as its collection states it. Empty cells are None; the collection's own
    de-identification placeholders ("XXXX") are kept as they are."""

    uid: str
    indication: str | None = None
    comparison: str | None = None
    findings: str | None = None
    impression: str | None = None
    mesh: list[str] = Field(default_factory=list)  # "Cardiomegaly/borderline", ..., or ["normal"]
    problems: list[str] = Field(default_factory=list)
    image_description: str | None = None  # the "image" column: how the study was taken
    images: list[tuple[str, str | None]] = Field(default_factory=list)  # (file name, projection)
    origin: str | None = None  # "path/to/file.csv:12", for messages; not part of the content

    @field_validator("uid")
    @classmethod
    def _uid(cls, value: str) -> str:
        value = value.strip()
        if not _UID.match(value):
            raise ValueError(f"uid must be letters, digits, '.', '_' or '-', got {value!r}")
        return value

    @field_validator("indication", "comparison", "findings", "impression", "image_description")
    @classmethod
    def _text(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return " ".join(value.split()) or None

    @field_validator("mesh", "problems")
    @classmethod
    def _terms(cls, value: list[str]) -> list[str]:
        return [" ".join(v.split()) for v in value if v and v.strip()]

    def sections(self) -> dict[str, str]:
        """The non-empty labelled sections, in report order."""
        texts = (self.indication, self.comparison, self.findings, self.impression)
        return {label: text for label, text in zip(SECTIONS, texts, strict=True) if text}


@dataclass(frozen=True)
class ReportCollection:
    """Where reports come from: the id prefix, the edges' source and how a report is cited."""

    prefix: str = "IUXR"
    source: str = "iu_xray"
    name: str = "Indiana University chest X-ray collection (Open-i)"
    title: str = "Chest X-ray report"

    def doc_id(self, uid: str) -> str:
        return f"{self.prefix}:{uid}"

    def citation(self, report: RadiologyReport) -> str:
        return f"{self.name}, report {report.uid}."

    def document_name(self, report: RadiologyReport, max_chars: int = 60) -> str:
        name = f"{self.title} {report.uid}"
        if report.indication:
            return f"{name}: {_shorten(report.indication.rstrip('.'), max_chars)}"
        return name


IU_XRAY = ReportCollection()


def _shorten(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars + 1].rsplit(" ", 1)[0] if " " in text[:max_chars] else text[:max_chars]
    return cut.rstrip(" ,;:") + "..."


# ---- reading the IU CSV layout --------------------------------------------------------------------
def _header(path: Path, header: list[str] | None, required: Sequence[str], what: str) -> dict[str, int]:
    if not header:
        raise ReportFormatError(f"{path}: empty file, expected a {what} table with columns {list(required)}")
    columns: dict[str, int] = {}
    for i, name in enumerate(header):
        columns.setdefault(name.strip().casefold(), i)
    missing = [c for c in required if c not in columns]
    if missing:
        raise ReportFormatError(
            f"{path}: not a {what} table: missing column(s) {missing}; the file has columns {header}"
        )
    return columns


def read_iu_projections(path: Path) -> dict[str, list[tuple[str, str | None]]]:
    """``indiana_projections.csv`` (uid, filename, projection): uid -> [(file name, projection)]."""
    path = Path(path)
    images: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        reader = csv.reader(f)
        columns = _header(path, next(reader, None), PROJECTION_COLUMNS, "projections")
        for row in reader:
            cells = {c: (row[i].strip() if i < len(row) else "") for c, i in columns.items()}
            if cells["uid"] and cells["filename"]:
                images[cells["uid"]].append((cells["filename"], cells["projection"] or None))
    return dict(images)


def read_iu_reports(csv_path: Path, projections: Path | None = None) -> Iterator[RadiologyReport | ReportProblem]:
    """Reports of an IU X-ray CSV (uid, MeSH, Problems, image, indication, comparison, findings,
    impression; only uid, findings and impression are required, column names in any case), each with
    its images from ``projections`` when given. A row that cannot be a report (no uid, neither
    findings nor impression, a repeated uid, a wrong number of cells) is a :class:`ReportProblem`
    naming the file and line; the other rows still load. A file without the required columns raises
    :class:`ReportFormatError` at once, naming the file and the columns it has."""
    csv_path = Path(csv_path)
    with csv_path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        header = next(csv.reader(f), None)
    columns = _header(csv_path, header, REQUIRED_COLUMNS, "report")
    images = read_iu_projections(projections) if projections is not None else {}
    return _iter_reports(csv_path, columns, len(header or []), images)


def _iter_reports(
    path: Path, columns: dict[str, int], width: int, images: dict[str, list[tuple[str, str | None]]]
) -> Iterator[RadiologyReport | ReportProblem]:
    seen: dict[str, int] = {}
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        reader = csv.reader(f)
        next(reader, None)
        line = reader.line_num + 1  # where the next record starts (a quoted cell may span lines)
        for row in reader:
            start, line = line, reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != width:
                yield ReportProblem(file=str(path), line=start, message=f"{len(row)} cells, the header has {width}")
                continue
            cells = {c: (row[i].strip() or None) for c, i in columns.items()}
            uid = cells.get("uid")
            if uid is None:
                yield ReportProblem(file=str(path), line=start, message="no uid")
                continue
            if uid in seen:
                yield ReportProblem(
                    file=str(path), line=start, message=f"uid {uid} repeated (first at line {seen[uid]}); skipped"
                )
                continue
            seen[uid] = start
            if cells.get("findings") is None and cells.get("impression") is None:
                yield ReportProblem(
                    file=str(path), line=start, message=f"report {uid} has neither findings nor impression"
                )
                continue
            try:
                yield RadiologyReport(
                    uid=uid,
                    indication=cells.get("indication"),
                    comparison=cells.get("comparison"),
                    findings=cells.get("findings"),
                    impression=cells.get("impression"),
                    mesh=(cells.get("mesh") or "").split(";"),
                    problems=(cells.get("problems") or "").split(";"),
                    image_description=cells.get("image"),
                    images=images.get(uid, []),
                    origin=f"{path}:{start}",
                )
            except ValueError as exc:  # pydantic's ValidationError is a ValueError
                errors = exc.errors() if hasattr(exc, "errors") else [{"msg": str(exc)}]
                reason = "; ".join(str(e["msg"]).removeprefix("Value error, ") for e in errors)
                yield ReportProblem(file=str(path), line=start, message=f"report {uid!r}: {reason}")


# ---- the report table -----------------------------------------------------------------------------
_REPORT_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    doc_id TEXT PRIMARY KEY,
    uid TEXT NOT NULL,
    indication TEXT,
    comparison TEXT,
    findings TEXT,
    impression TEXT,
    image_description TEXT,
    mesh TEXT NOT NULL,
    problems TEXT NOT NULL,
    images TEXT NOT NULL
);
"""
_REPORT_COLUMNS = "doc_id, uid, indication, comparison, findings, impression, image_description, mesh, problems, images"


class ReportStore:
    """The loaded reports, section by section, keyed by document id (``IUXR:2``): a small SQLite
    table (``reports.sqlite`` next to the text index), safe to share between threads."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.path, check_same_thread=False)
        self._db.executescript(_REPORT_SCHEMA)

    @staticmethod
    def _row(doc_id: str, r: RadiologyReport) -> tuple:
        return (
            doc_id, r.uid, r.indication, r.comparison, r.findings, r.impression, r.image_description,
            json.dumps(r.mesh), json.dumps(r.problems), json.dumps([list(i) for i in r.images]),
        )  # fmt: skip

    @staticmethod
    def _report(row: Sequence) -> RadiologyReport:
        return RadiologyReport(
            uid=row[1], indication=row[2], comparison=row[3], findings=row[4], impression=row[5],
            image_description=row[6], mesh=json.loads(row[7]), problems=json.loads(row[8]),
            images=[tuple(i) for i in json.loads(row[9])],
        )  # fmt: skip

    def put(self, items: Iterable[tuple[str, RadiologyReport]]) -> int:
        """Store (or replace) reports under their document ids; returns how many were written."""
        rows = [self._row(doc_id, r) for doc_id, r in items]
        with self._lock:
            self._db.executemany(
                f"INSERT OR REPLACE INTO reports({_REPORT_COLUMNS}) VALUES ({','.join('?' * 10)})", rows
            )
            self._db.commit()
        return len(rows)

    def get(self, doc_id: str) -> RadiologyReport | None:
        return self.get_many([doc_id]).get(doc_id)

    def get_many(self, doc_ids: Iterable[str]) -> dict[str, RadiologyReport]:
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, RadiologyReport] = {}
        with self._lock:
            for chunk, marks in in_chunks(ids):
                for row in self._db.execute(f"SELECT {_REPORT_COLUMNS} FROM reports WHERE doc_id IN ({marks})", chunk):
                    out[row[0]] = self._report(row)
        return out

    def has(self, doc_ids: Iterable[str]) -> set[str]:
        ids = list(dict.fromkeys(doc_ids))
        found: set[str] = set()
        with self._lock:
            for chunk, marks in in_chunks(ids):
                found |= {
                    r[0] for r in self._db.execute(f"SELECT doc_id FROM reports WHERE doc_id IN ({marks})", chunk)
                }
        return found

    def sections(self, doc_id: str) -> dict[str, str]:
        """``{"INDICATION": ..., "FINDINGS": ..., "IMPRESSION": ...}`` (the non-empty ones), or {}."""
        report = self.get(doc_id)
        return report.sections() if report is not None else {}

    def ids(self, prefix: str = "") -> list[str]:
        """The stored document ids that start with ``prefix``, sorted (no report is read)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT doc_id FROM reports WHERE substr(doc_id, 1, ?) = ? ORDER BY doc_id", (len(prefix), prefix)
            ).fetchall()
        return [r[0] for r in rows]

    def iter(self, batch: int = 1000) -> Iterator[tuple[str, RadiologyReport]]:
        """Every stored report in document-id order (read in pages, so writes may interleave)."""
        after = ""
        while True:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT {_REPORT_COLUMNS} FROM reports WHERE doc_id > ? ORDER BY doc_id LIMIT ?", (after, batch)
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield row[0], self._report(row)
            after = rows[-1][0]

    def delete(self, doc_ids: Iterable[str]) -> int:
        ids = list(doc_ids)
        n = 0
        with self._lock:
            for chunk, marks in in_chunks(ids):
                n += self._db.execute(f"DELETE FROM reports WHERE doc_id IN ({marks})", chunk).rowcount
            self._db.commit()
        return n

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM reports").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def report_store_for(text_index: TextIndex) -> ReportStore:
    """The report table that belongs with ``text_index`` (``<index dir>/reports.sqlite``)."""
    return ReportStore(text_index.directory / REPORT_STORE_FILE)


# ---- loading ----------------------------------------------------------------------------------------
class ReportLoadResult(IngestSummary):
    """What a report load did (``entities`` / ``relations`` are the graph writes)."""

    reports_read: int = 0
    documents_added: int = 0
    documents_changed: int = 0
    documents_unchanged: int = 0
    passages: int = 0  # passages written (of added and changed reports)
    passages_retired: int = 0
    documents_retired: int = 0  # reports no longer in a collection loaded whole (``replace``)
    mentions: int = 0  # MENTIONS edges written
    mentions_negated: int = 0
    findings_linked: int = 0  # HAS_FINDING edges written
    findings_unlinked: int = 0  # MeSH-column terms (not "normal") the linker did not link

    @property
    def reports_per_second(self) -> float:
        return round(self.reports_read / self.seconds, 1) if self.seconds else 0.0


@dataclass(frozen=True)
class _Link:
    ids: tuple[str, ...]
    text: str
    method: str
    score: float
    exact: bool  # the match covers the whole heading


@dataclass
class _Prepared:
    report: RadiologyReport
    doc_id: str
    fingerprint: str
    text: ArticleText
    mentions: list[Mention] = field(default_factory=list)


class ReportLoader:
    """Loads reports: ``Document`` ``IUXR:<uid>`` -HAS_PASSAGE-> ``Passage`` -MENTIONS-> entity (passages
    from the labelled sections through the PubMed passage splitter, so ids and spans mean the same),
    ``Document -HAS_FINDING->`` the linked main headings of the MeSH column, the passages into the text
    index with a ``DocumentRecord``, and the report into the ``ReportStore``. Unchanged reports are
    skipped by their content fingerprint, written last; a changed one replaces its passages and edges.

    No ``CO_MENTIONED`` edges for reports: most co-occurrences in a report are of findings listed as
    absent, and the fact renderer reads CO_MENTIONED sentence ids as PubMed ids."""

    def __init__(
        self,
        store: BaseGraphStore,
        text_index: TextIndex,
        nlp: Language,
        linker: EntityLinker | None = None,
        progress: bool = True,
        batch_size: int = 256,
        *,
        collection: ReportCollection = IU_XRAY,
        reports: ReportStore | None = None,
        max_words: int = MAX_WORDS,
        checkpoint_every: int = 5000,
    ) -> None:
        self.store = store
        self.text_index = text_index
        self.nlp = nlp
        self.linker = linker
        self.progress = progress
        self.batch_size = batch_size
        self.collection = collection
        self._owns_reports = reports is None
        self.reports = reports if reports is not None else report_store_for(text_index)
        self.max_words = max_words
        self.checkpoint_every = checkpoint_every
        self._heading_links: dict[str, list[_Link]] = {}

    @property
    def source(self) -> str:
        return self.collection.source

    def close(self) -> None:
        """Close the report table it opened (the store, the index and a given table are the caller's)."""
        if self._owns_reports:
            self.reports.close()

    def fingerprint(self, report: RadiologyReport) -> str:
        payload = report.model_dump_json(exclude={"origin"})
        payload += f"|{self.max_words}|{self.collection.prefix}|{_FINGERPRINT_VERSION}"
        return hashlib.sha1(payload.encode()).hexdigest()

    # ---- driver ------------------------------------------------------------------------------
    def load(self, reports: Iterable[RadiologyReport | ReportProblem], *, replace: bool = False) -> ReportLoadResult:
        """Load reports (the changed and new ones); ``replace``: they are the whole collection, and its
        reports not among them are retired once they are loaded (none if the file had problems)."""
        result = ReportLoadResult(source=self.source)
        started = time.perf_counter()
        pending: list[tuple[DocumentRecord, RadiologyReport]] = []
        seen: set[str] = set()
        with batched_load(
            self.store,
            lambda batch: pending.extend(self._load_batch(batch, result)),
            lambda: self._commit(pending, result),
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
            progress=self.progress,
            desc=f"ingest {self.source}",
            unit=" reports",
        ) as batches:
            for record in reports:
                batches.tick()
                if isinstance(record, Problem):
                    result.problem(record)
                    continue
                result.reports_read += 1
                seen.add(self.collection.doc_id(record.uid))
                batches.add(record)
        if replace and result.problem_count:  # a row it could not read may be a report it still holds
            result.note("--replace: nothing retired, the file had problems (fix them and load it again)")
        elif replace:
            self._retire_documents(seen, result)
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def _retire_documents(self, kept: set[str], result: ReportLoadResult) -> None:
        """Retire the collection's reports not in ``kept``: the document and its passages obsolete, their
        edges ended, out of the passage index and the report table, the citation record marked deleted.
        A report that comes back is loaded anew."""
        prefix = f"{self.collection.prefix}:"
        gone = sorted((set(self.reports.ids(prefix)) | set(self.text_index.iter_document_ids(prefix))) - kept)
        if not gone:
            return
        passages = [p for d in gone for p in self.text_index.document_passages(d)]
        # every current edge of theirs: passages, mentions, findings, the report links of its images
        ended = [n.relation for node in [*gone, *passages] for n in self.store.neighbours(node, limit=100_000)]
        retired = self.store.get_entities([*gone, *passages])
        self.store.upsert_entities(e.model_copy(update={"obsolete": True}) for e in retired.values())
        if ended:
            result.relations.invalidated += self.store.invalidate_relations(ended)
        self.store.checkpoint()
        self.text_index.remove(passages)
        self.text_index.commit()
        self.text_index.mark_documents(gone, deleted=True)
        self.reports.delete(gone)
        result.passages_retired += len(passages)
        result.documents_retired += len(gone)

    def relink(self, *, force: bool = False) -> ReportLoadResult:
        """Link the stored reports of this collection again with the current linker (after an ontology
        load, or a change of the linking rules): each goes through the load path again, whose passages
        are unchanged (nothing is embedded) while MENTIONS and HAS_FINDING edges the new links do not
        state end and new ones are added. Reports already linked by a linker of the same signature are
        skipped (all of them with ``force``); resumable as a load is."""
        if self.linker is None:
            raise ValueError("relinking needs a linker")
        result = ReportLoadResult(source=f"relink {self.source}")
        started = time.perf_counter()
        pending: list[tuple[DocumentRecord, RadiologyReport]] = []
        prefix = f"{self.collection.prefix}:"
        with batched_load(
            self.store,
            lambda batch: pending.extend(self._load_batch(batch, result, relink=True, force=force)),
            lambda: self._commit(pending, result),
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
            progress=self.progress,
            desc=f"relink {self.source}",
            unit=" reports",
        ) as batches:
            for doc_id, report in self.reports.iter():
                if doc_id.startswith(prefix):
                    batches.tick()
                    result.reports_read += 1
                    batches.add(report)
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def _commit(self, pending: list[tuple[DocumentRecord, RadiologyReport]], result: ReportLoadResult) -> None:
        t0 = time.perf_counter()
        self.store.checkpoint()  # graph writes durable, then the indexes and the report table,
        self.text_index.commit()
        self.reports.put((doc.id, report) for doc, report in pending)
        self.text_index.put_documents(doc for doc, _ in pending)  # then the fingerprints
        pending.clear()
        result.timed("index commit", time.perf_counter() - t0)

    # ---- one batch ---------------------------------------------------------------------------
    def _load_batch(
        self, batch: Sequence[RadiologyReport], result: ReportLoadResult, *, relink: bool = False, force: bool = False
    ) -> list[tuple[DocumentRecord, RadiologyReport]]:
        """Load the reports that changed (``relink``: those not linked by the current linker; all of
        them with ``force``)."""
        unique = list({r.uid: r for r in batch}.values())
        if len(unique) < len(batch):
            result.note("duplicate uids in a batch (last kept)", len(batch) - len(unique))
        empty = [r for r in unique if not r.sections()]
        for r in empty:
            result.problem(ReportProblem(file=r.origin or self.collection.doc_id(r.uid), message="report has no text"))
        unique = [r for r in unique if r.sections()]
        ids = {r.uid: self.collection.doc_id(r.uid) for r in unique}
        prints = {r.uid: self.fingerprint(r) for r in unique}
        known = self.text_index.get_documents(ids.values())
        in_graph = self.store.existing(ids.values())
        stored = self.reports.has(ids.values())
        signature = self.linker.signature if self.linker is not None else None
        todo = []
        for r in unique:
            doc_id = ids[r.uid]
            doc = known.get(doc_id)
            loaded = doc is not None and doc.fingerprint == prints[r.uid] and doc_id in in_graph and doc_id in stored
            if relink and loaded and (force or doc.linked_with != signature):
                todo.append(r)
            elif relink:
                result.count("reports already linked by this linker" if loaded else "reports not loaded (skipped)")
            elif loaded:
                result.documents_unchanged += 1
            else:
                todo.append(r)
        if not todo:
            return []
        t0 = time.perf_counter()
        texts = [article_text(_as_article(r)) for r in todo]
        docs = list(self.nlp.pipe(texts, batch_size=64))
        prepared = [
            _Prepared(r, ids[r.uid], prints[r.uid], split_passages(ids[r.uid], doc, self.max_words))
            for r, doc in zip(todo, docs, strict=True)
        ]
        result.timed("sentences", time.perf_counter() - t0)
        findings: dict[str, list[Relation]] = {}
        if self.linker is not None:
            t0 = time.perf_counter()
            for item, mentions in zip(prepared, self.linker.link_docs(docs), strict=True):
                item.mentions = mentions
            findings = self._finding_edges(prepared, result)
            result.timed("linking", time.perf_counter() - t0)
        changed = [p for p in prepared if p.doc_id in known or p.doc_id in in_graph]
        if relink:
            result.count("reports relinked", len(changed))
        else:
            result.documents_changed += len(changed)
            result.documents_added += len(prepared) - len(changed)
        self._write_graph(prepared, findings, changed, result)
        t0 = time.perf_counter()
        added = self.text_index.add(
            PassageRecord(p.id, item.doc_id, p.text) for item in prepared for p in item.text.passages
        )
        result.count("passages embedded", added.embedded)
        result.timed("embeddings", time.perf_counter() - t0)
        return [(self._document_record(p), p.report) for p in prepared]

    def _document_record(self, item: _Prepared) -> DocumentRecord:
        return DocumentRecord(
            id=item.doc_id,
            fingerprint=item.fingerprint,
            title=self.collection.document_name(item.report),
            journal=self.collection.name,
            year=None,
            linked_with=self.linker.signature if self.linker is not None else None,
        )

    # ---- MeSH-column findings ----------------------------------------------------------------
    def _finding_edges(self, prepared: Sequence[_Prepared], result: ReportLoadResult) -> dict[str, list[Relation]]:
        """HAS_FINDING edges per document, from the MeSH column's main headings."""
        headings = {_split_term(t)[0] for item in prepared for t in item.report.mesh}
        self._link_headings([h for h in headings if h.casefold() not in NO_FINDING_TERMS])
        out: dict[str, list[Relation]] = {}
        for item in prepared:
            grouped: dict[str, list[tuple[str, list[str], _Link]]] = defaultdict(list)
            for term in item.report.mesh:
                heading, qualifiers = _split_term(term)
                if heading.casefold() in NO_FINDING_TERMS:
                    continue
                links = self._heading_links.get(heading, [])
                if not links:
                    result.findings_unlinked += 1
                for link in links:
                    for entity_id in link.ids:
                        grouped[entity_id].append((term, qualifiers, link))
            edges = []
            for entity_id, found in grouped.items():
                best = max((link for _, _, link in found), key=lambda x: (x.exact, x.score))
                qualifiers = list(dict.fromkeys(q for _, qs, _ in found for q in qs))
                evidence = {
                    "terms": list(dict.fromkeys(t for t, _, _ in found)),
                    "qualifiers": qualifiers,
                    "text": best.text,
                    "method": best.method,
                    "exact": best.exact,
                }
                edges.append(
                    Relation(subject=item.doc_id, type=HAS_FINDING, object=entity_id, source=self.source,
                             evidence=evidence, confidence=min(1.0, best.score))
                )  # fmt: skip
            out[item.doc_id] = edges
        return out

    def _link_headings(self, headings: Iterable[str]) -> None:
        """Link each new heading once per loader: as written, then turned round if inverted
        ("Aorta, Thoracic" -> "Thoracic Aorta"); a match covering the whole heading wins."""
        assert self.linker is not None
        todo = [h for h in dict.fromkeys(headings) if h not in self._heading_links]
        if not todo:
            return
        candidates = {h: _heading_forms(h) for h in todo}
        texts = list(dict.fromkeys(t for forms in candidates.values() for t in forms))
        mentions = dict(zip(texts, self.linker.link_docs(list(self.nlp.pipe(texts))), strict=True))
        for heading, forms in candidates.items():
            chosen: list[_Link] = []
            for text in forms:
                whole = [m for m in mentions[text] if m.start == 0 and m.end >= len(text.rstrip(" ."))]
                if whole:
                    chosen = [_Link(m.ids, m.text, m.method, m.score, True) for m in whole]
                    break
            if not chosen:
                partial = next((mentions[t] for t in forms if mentions[t]), [])
                chosen = [_Link(m.ids, m.text, m.method, m.score, False) for m in partial]
            self._heading_links[heading] = chosen

    # ---- graph -------------------------------------------------------------------------------
    def _write_graph(
        self,
        prepared: Sequence[_Prepared],
        findings: dict[str, list[Relation]],
        changed: Sequence[_Prepared],
        result: ReportLoadResult,
    ) -> None:
        t0 = time.perf_counter()
        source = self.source
        entities: list[Entity] = []
        relations: list[Relation] = []
        mention_edges: list[Relation] = []
        for item in prepared:
            report, doc_id = item.report, item.doc_id
            entities.append(
                Entity(id=doc_id, name=self.collection.document_name(report), category=DOCUMENT,
                       description=self.collection.citation(report), sources=[source])
            )  # fmt: skip
            for order, passage in enumerate(item.text.passages):
                name = passage.text if len(passage.text) <= 80 else passage.text[:77].rstrip() + "..."
                entities.append(
                    Entity(id=passage.id, name=name, category=PASSAGE, description=passage.text, sources=[source])
                )
                relations.append(
                    Relation(subject=doc_id, type=HAS_PASSAGE, object=passage.id, source=source,
                             evidence={"order": order, "sentences": [passage.sentences[0], passage.sentences[-1]]})
                )  # fmt: skip
            mention_edges.extend(self._mention_edges(item))
        finding_edges = [e for item in prepared for e in findings.get(item.doc_id, [])]
        if changed:
            self._retire_stale(changed, {e.key for e in mention_edges + finding_edges}, result)
        # its own documents and passages take their statement as it is now (a passage back is not obsolete)
        result.entities += self.store.upsert_entities(entities, replacing={source})
        result.relations += self.store.upsert_relations(relations + mention_edges + finding_edges)
        result.passages += sum(len(p.text.passages) for p in prepared)
        result.mentions += len(mention_edges)
        result.mentions_negated += sum(1 for e in mention_edges if e.evidence.get("negated"))
        result.findings_linked += len(finding_edges)
        result.timed("write graph", time.perf_counter() - t0)

    def _mention_edges(self, item: _Prepared) -> list[Relation]:
        """One MENTIONS edge per (passage, entity): spans relative to the passage, the best surface
        text, how it was linked, its score, and ``negated`` when every mention is negated (reports
        mention far more findings as absent than as present)."""
        grouped: dict[tuple[str, str], list[tuple[Mention, bool]]] = defaultdict(list)
        text = item.text.text
        for mention in item.mentions:
            passage = item.text.passage_at(mention.start)
            sentence = item.text.sentence_at(mention.start)
            if passage is None or sentence is None:
                continue
            negated = is_negated(text[sentence.start : mention.start], text[mention.end : sentence.end])
            for entity_id in mention.ids:
                grouped[(passage.id, entity_id)].append((mention, negated))
        passages = {p.id: p for p in item.text.passages}
        edges = []
        for (passage_id, entity_id), found in grouped.items():
            passage = passages[passage_id]
            spans = sorted({(m.start - passage.start, m.end - passage.start) for m, _ in found})
            best = max((m for m, _ in found), key=lambda m: m.score)
            evidence = {"spans": [list(s) for s in spans], "text": best.text, "method": best.method}
            if all(neg for _, neg in found):
                evidence["negated"] = True
            edges.append(
                Relation(subject=passage_id, type=MENTIONS, object=entity_id, source=self.source, evidence=evidence,
                         confidence=min(1.0, best.score))
            )  # fmt: skip
        return edges

    def _retire_stale(self, changed: Sequence[_Prepared], new_keys: set[str], result: ReportLoadResult) -> None:
        """For changed reports: retire passages that no longer exist (obsolete, edges ended, out of
        the indexes) and end the MENTIONS / HAS_FINDING edges the new text does not state."""
        stale_passages: list[str] = []
        ended: list[Relation] = []
        for item in changed:
            current = {p.id for p in item.text.passages}
            stored = set(self.text_index.document_passages(item.doc_id))
            stale_passages += sorted(stored - current)
            if self.linker is None:  # no links stated now: the kept passages' edges are left as they are
                continue
            for pid in sorted(stored & current):
                for n in self.store.neighbours(pid, rel_types=[MENTIONS], direction="out", limit=100_000):
                    if n.relation.source == self.source and n.relation.key not in new_keys:
                        ended.append(n.relation)
            for n in self.store.neighbours(item.doc_id, rel_types=[HAS_FINDING], direction="out", limit=100_000):
                if n.relation.source == self.source and n.relation.key not in new_keys:
                    ended.append(n.relation)
        for pid in stale_passages:
            ended += [n.relation for n in self.store.neighbours(pid, rel_types=[MENTIONS, HAS_PASSAGE], limit=100_000)]
        if stale_passages:
            stored_passages = self.store.get_entities(stale_passages)
            self.store.upsert_entities(e.model_copy(update={"obsolete": True}) for e in stored_passages.values())
            self.text_index.remove(stale_passages)
            result.passages_retired += len(stale_passages)
        if ended:
            result.relations.invalidated += self.store.invalidate_relations(ended)


def _as_article(report: RadiologyReport) -> Article:
    """The report as the passage splitter's input: no title, one labelled section per part. (The
    splitter reads only the title and the sections; the pmid is a placeholder it never sees.)"""
    return Article(pmid="0", sections=[Section(label=label, text=text) for label, text in report.sections().items()])


def _split_term(term: str) -> tuple[str, list[str]]:
    """ "Cardiomegaly/borderline" -> ("Cardiomegaly", ["borderline"])."""
    heading, *qualifiers = (part.strip() for part in term.split("/"))
    return heading, [q for q in qualifiers if q]


def _heading_forms(heading: str) -> list[str]:
    """The heading as written, and turned round if it is an inverted MeSH heading."""
    forms = [heading]
    if "," in heading:
        parts = [p.strip() for p in heading.split(",") if p.strip()]
        forms.append(" ".join(reversed(parts)))
    return forms
