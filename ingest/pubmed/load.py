"""PubMed records into the graph and the passage indexes: documents, passages, linked mentions,
MeSH headings and co-mentions, loaded incrementally and resumably, and relinked when the linker changes.
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from ingest.batches import batched_load
from ingest.pubmed.model import Article, Deletion
from ingest.pubmed.passages import MAX_WORDS, ArticleText, Passage, Sentence, article_text, split_passages
from ingest.summary import IngestSummary, Problem
from kg.graph.base import BaseGraphStore, row_to_relation
from kg.linker import EntityLinker, Mention
from kg.model import (
    CO_MENTIONED,
    DOCUMENT,
    HAS_MESH_TERM,
    HAS_PASSAGE,
    MENTIONS,
    PASSAGE,
    Entity,
    Relation,
)
from kg.text_index import DocumentRecord, Embedded, PassageRecord, TextIndex

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

__all__ = ["PubmedLoader", "PreparedArticle", "SOURCE", "MAX_EVIDENCE", "passage_records", "prepare_articles"]

SOURCE = "pubmed"
MESH_HEADING_SOURCE = "mesh"  # MeSH descriptors named by article headings (name only)
Pairs = dict[tuple[str, str], set[str]]  # (entity, entity) in id order -> the sentence ids they share
MAX_EVIDENCE = 500  # sentence ids kept on one CO_MENTIONED edge (the count keeps growing past it)


@dataclass
class PreparedArticle:
    """An article made ready to load: its fingerprint, its text as sentences and passages, the mentions
    the linker found, and (from a distributed load) the vectors of its passages' embedding texts made
    by the embedder named ``embedded_by``. Everything here depends on the article alone, not on the
    store, so it can be made anywhere (:mod:`ingest.pubmed.distributed`)."""

    article: Article
    fingerprint: str
    text: ArticleText
    mentions: list[Mention] = field(default_factory=list)
    vectors: dict[str, np.ndarray] | None = None  # passage id -> vector
    embedded_by: str | None = None


@dataclass
class _Links:
    """What one document links: its ``MENTIONS`` edges by key and the co-mention pairs they make."""

    edges: dict[str, Relation] = field(default_factory=dict)
    pairs: Pairs = field(default_factory=dict)

    @classmethod
    def of(cls, text: ArticleText, mentions: Sequence[Mention]) -> _Links:
        return cls({e.key: e for e in _mention_edges(text, mentions)}, _co_mention_pairs(text, mentions))

    def same_as(self, other: _Links) -> bool:
        return self.edges.keys() == other.edges.keys() and all(
            e.evidence.get("spans") == other.edges[k].evidence.get("spans") for k, e in self.edges.items()
        )


def _article(item: Article | PreparedArticle) -> Article:
    return item.article if isinstance(item, PreparedArticle) else item


def passage_records(prepared: Iterable[PreparedArticle]) -> list[PassageRecord]:
    """The passages of prepared articles as the text index stores them; each but the first (which holds
    the title) is embedded with the title before it."""
    records = []
    for item in prepared:
        title = item.article.title.strip()
        for i, passage in enumerate(item.text.passages):
            embed = passage.text if i == 0 or not title else f"{title}\n{passage.text}"
            records.append(PassageRecord(passage.id, item.text.doc_id, passage.text, embed, item.article.retracted))
    return records


def prepare_articles(
    articles: Sequence[Article],
    nlp: Language,
    linker: EntityLinker | None,
    max_words: int = MAX_WORDS,
    report: IngestSummary | None = None,
) -> list[PreparedArticle]:
    """Parse, split and link ``articles``: what depends on the article alone, done by the loader for a
    batch, or by the workers of a distributed load (:mod:`ingest.pubmed.distributed`)."""
    report = report if report is not None else IngestSummary(source=SOURCE)
    t0 = time.perf_counter()
    docs = list(nlp.pipe([article_text(a) for a in articles], batch_size=64))
    prepared = [
        PreparedArticle(a, fingerprint(a, max_words), split_passages(f"PMID:{a.pmid}", doc, max_words))
        for a, doc in zip(articles, docs, strict=True)
    ]
    report.timed("sentences", time.perf_counter() - t0)
    if linker is not None:
        t0 = time.perf_counter()
        for item, mentions in zip(prepared, linker.link_docs(docs), strict=True):
            item.mentions = mentions
        report.timed("linking", time.perf_counter() - t0)
    return prepared


def fingerprint(article: Article, max_words: int) -> str:
    payload = article.model_dump_json(exclude={"origin"}) + f"|{max_words}"
    return hashlib.sha1(payload.encode()).hexdigest()


def citation(article: Article) -> str:
    """``Smith JA, Doe B, et al. Title. Journal. 2019. doi:…`` (the Document's description)."""
    authors = [a.display for a in article.authors if a.display]
    names = ", ".join(authors[:3]) + (", et al" if len(authors) > 3 else "")
    parts = [names, article.title.rstrip("."), article.journal, str(article.year) if article.year else None]
    text = ". ".join(p for p in parts if p) + "."
    if article.doi:
        text += f" doi:{article.doi}"
    if article.retracted:
        text = "RETRACTED. " + text
    return text


class PubmedLoader:
    """Writes ``Document`` (``PMID:123``) -HAS_PASSAGE-> ``Passage`` (``PMID:123#s4``) -MENTIONS-> entity
    (spans within the passage, surface text, method, score), ``Document -HAS_MESH_TERM-> MESH:D…``,
    ``CO_MENTIONED`` between entities linked in one sentence (the first ``MAX_EVIDENCE`` sentence ids and
    a count), and the passages into the text index with the citation record. Unchanged articles are
    skipped by a content fingerprint kept with the citation record, written after each checkpoint, so a
    re-run adds nothing and an interrupted load resumes from its last checkpoint."""

    def __init__(
        self,
        store: BaseGraphStore,
        text_index: TextIndex,
        nlp: Language,
        linker: EntityLinker | None = None,
        *,
        extract: Callable[[str, str], object] | None = None,
        max_words: int = MAX_WORDS,
        batch_size: int = 256,
        checkpoint_every: int = 5000,
        progress: bool = True,
    ) -> None:
        self.store = store
        self.text_index = text_index
        self.nlp = nlp
        self.linker = linker
        self.extract = extract  # (passage text, passage id) -> merge result; LLM triple extraction
        self.max_words = max_words
        self.batch_size = batch_size
        self.checkpoint_every = checkpoint_every
        self.progress = progress

    # ---- driver ------------------------------------------------------------------------------
    def load(
        self,
        records: Iterable[Article | PreparedArticle | Deletion | Problem],
        source: str = SOURCE,
        *,
        on_commit: Callable[[], None] | None = None,
    ) -> IngestSummary:
        """Load ``records`` (articles, or articles prepared elsewhere); ``on_commit()`` is called after
        each checkpoint, when every record taken from ``records`` so far is durable (an Entrez fetch
        records its PMIDs as delivered only then)."""
        report = IngestSummary(source=source)
        started = time.perf_counter()
        waiting: dict[str, DocumentRecord] = {}  # citation records written at the next checkpoint

        def commit() -> None:
            self._commit(waiting, report)
            if on_commit is not None:
                on_commit()

        with batched_load(
            self.store,
            lambda batch: self._load_batch(batch, report, waiting),
            commit,
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
            progress=self.progress,
            desc=f"ingest {source}",
            unit=" records",
        ) as batches:
            for record in records:
                batches.tick()
                if isinstance(record, Problem):
                    report.problem(record)
                elif isinstance(record, Deletion):
                    batches.flush()
                    self._delete(record.pmids, report, waiting)
                else:
                    report.count("articles read")
                    batches.add(record)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _commit(self, pending: dict[str, DocumentRecord], report: IngestSummary) -> None:
        t0 = time.perf_counter()
        self.store.checkpoint()  # graph writes durable (Ladybug's bulk mode), then the indexes,
        self.text_index.commit()
        self.text_index.put_documents(pending.values())  # then the fingerprints: a crash before this re-does the batch
        pending.clear()
        report.timed("index commit", time.perf_counter() - t0)

    # ---- one batch ---------------------------------------------------------------------------
    def prepare(self, articles: Sequence[Article], report: IngestSummary | None = None) -> list[PreparedArticle]:
        """Parse, split and link the articles of a batch that need loading (:func:`prepare_articles`)."""
        return prepare_articles(articles, self.nlp, self.linker, self.max_words, report)

    def _load_batch(
        self,
        items: Sequence[Article | PreparedArticle],
        report: IngestSummary,
        waiting: dict[str, DocumentRecord],
    ) -> None:
        """Load a batch of articles (prepared here) or of articles prepared elsewhere; its citation
        records join ``waiting`` (written at the next checkpoint), and those already waiting stand for
        the stored ones."""
        unique = list({_article(x).pmid: x for x in items}.values())
        if len(unique) < len(items):
            report.note("duplicate PMIDs in a batch (last kept)", len(items) - len(unique))
        prints = {
            _article(x).pmid: x.fingerprint if isinstance(x, PreparedArticle) else fingerprint(x, self.max_words)
            for x in unique
        }
        ids = [f"PMID:{pmid}" for pmid in prints]
        known = self.text_index.get_documents(ids)
        known.update((i, waiting[i]) for i in ids if i in waiting)
        in_graph = self.store.existing(ids)
        # A PMID withdrawn by a DeleteCitation stays withdrawn (its graph node keeps `obsolete`).
        deleted = [x for x in unique if (doc := known.get(f"PMID:{_article(x).pmid}")) is not None and doc.deleted]
        if deleted:
            report.note("articles withdrawn earlier by a DeleteCitation (not loaded again)", len(deleted))
        todo = [
            x
            for x in unique
            if not (
                (doc := known.get(f"PMID:{(pmid := _article(x).pmid)}")) is not None
                and (doc.deleted or (doc.fingerprint == prints[pmid] and f"PMID:{pmid}" in in_graph))
            )
        ]
        report.count("articles unchanged", len(unique) - len(todo) - len(deleted))
        if not todo:
            return
        made = iter(self.prepare([x for x in todo if isinstance(x, Article)], report))
        prepared = [x if isinstance(x, PreparedArticle) else next(made) for x in todo]
        # A retraction notice may have arrived before the paper it retracts.
        flagged = self.text_index.retracted(p.text.doc_id for p in prepared if not p.article.retracted)
        for item in prepared:
            if item.text.doc_id in flagged:
                item.article = item.article.model_copy(update={"retracted": True})
        previous = self._stored_links([item.text.doc_id for item in prepared])
        self._retire_changed(prepared, report)
        self._write_graph(prepared, previous, report)
        t0 = time.perf_counter()
        vectors = {
            pid: Embedded(vector, item.embedded_by)
            for item in prepared
            if item.vectors is not None and item.embedded_by is not None
            for pid, vector in item.vectors.items()
        }
        added = self.text_index.add(passage_records(prepared), vectors=vectors)
        report.count("passages embedded", added.embedded)
        if added.given:
            report.count("passage vectors made by the workers", added.given)
        report.timed("embeddings", time.perf_counter() - t0)
        waiting.update((p.text.doc_id, self._document_record(p)) for p in prepared)
        for item in prepared:
            if item.article.retraction_of:
                retracted = [f"PMID:{p}" for p in item.article.retraction_of]
                self.text_index.record_retractions(retracted, item.text.doc_id)
                self._flag_retracted(retracted, report, waiting)
        if self.extract is not None:
            self._extract(prepared, report)

    def _document_record(self, item: PreparedArticle) -> DocumentRecord:
        a = item.article
        return DocumentRecord(
            id=item.text.doc_id,
            fingerprint=item.fingerprint,
            title=a.title or f"PMID {a.pmid}",
            journal=a.journal,
            year=a.year,
            authors=tuple(x.display for x in a.authors if x.display),
            doi=a.doi,
            retracted=a.retracted,
            linked_with=self.linker.signature if self.linker is not None else None,
        )

    def _write_graph(
        self, prepared: Sequence[PreparedArticle], previous: dict[str, _Links], report: IngestSummary
    ) -> None:
        t0 = time.perf_counter()
        entities: list[Entity] = []
        relations: list[Relation] = []
        for item in prepared:
            a, doc_id = item.article, item.text.doc_id
            entities.append(
                Entity(id=doc_id, name=a.title or f"PMID {a.pmid}", category=DOCUMENT, description=citation(a),
                       sources=[SOURCE])
            )  # fmt: skip
            for order, passage in enumerate(item.text.passages):
                name = passage.text if len(passage.text) <= 80 else passage.text[:77].rstrip() + "..."
                entities.append(
                    Entity(id=passage.id, name=name, category=PASSAGE, description=passage.text, sources=[SOURCE])
                )
                relations.append(
                    Relation(subject=doc_id, type=HAS_PASSAGE, object=passage.id, source=SOURCE,
                             evidence={"order": order, "sentences": [passage.sentences[0], passage.sentences[-1]]})
                )  # fmt: skip
            for heading in a.mesh:
                if heading.ui:
                    entities.append(Entity(id=f"MESH:{heading.ui}", name=heading.name, sources=[MESH_HEADING_SOURCE]))
                    evidence = {"major": heading.major, "qualifiers": heading.qualifiers}
                    relations.append(
                        Relation(subject=doc_id, type=HAS_MESH_TERM, object=f"MESH:{heading.ui}", source=SOURCE,
                                 evidence=evidence)
                    )  # fmt: skip
        # its own documents and passages take their statement as it is now (a passage back is not obsolete)
        report.entities += self.store.upsert_entities(entities, replacing={SOURCE})
        report.relations += self.store.upsert_relations(relations)
        now = {item.text.doc_id: _Links.of(item.text, item.mentions) for item in prepared}
        self._replace_links({doc: (previous.get(doc, _Links()), links) for doc, links in now.items()}, report)
        report.count("passages", sum(len(p.text.passages) for p in prepared))
        report.count("mentions", sum(len(p.mentions) for p in prepared))
        report.timed("write graph", time.perf_counter() - t0)

    # ---- retirement: changed, deleted and retracted documents ---------------------------------
    def _retire_changed(self, prepared: Sequence[PreparedArticle], report: IngestSummary) -> None:
        """Retire the stored passages that the documents' new texts no longer have (also those of a
        version loaded earlier in this run, its citation record not written yet)."""
        stale: list[str] = []
        for item in prepared:
            current = {p.id for p in item.text.passages}
            stale += [p for p in self.text_index.document_passages(item.text.doc_id) if p not in current]
        if stale:
            self._retire_passages(stale, report)
            report.count("passages retired", len(stale))

    def _retire_passages(self, passage_ids: Sequence[str], report: IngestSummary) -> None:
        """Obsolete passages: flagged in the graph, their ``HAS_PASSAGE`` edges ended, gone from the
        indexes. What they mention is the caller's (``_replace_links``)."""
        ended = [
            n.relation
            for pid in passage_ids
            for n in self.store.neighbours(pid, rel_types=[HAS_PASSAGE], direction="in")
        ]
        stored = self.store.get_entities(passage_ids)
        self.store.upsert_entities(e.model_copy(update={"obsolete": True}) for e in stored.values())
        report.relations.invalidated += self.store.invalidate_relations(ended)
        self.text_index.remove(passage_ids)

    def _delete(self, pmids: Sequence[str], report: IngestSummary, waiting: dict[str, DocumentRecord]) -> None:
        """Withdraw documents (a ``DeleteCitation``); a citation record still waiting for the
        checkpoint is written deleted, so the deletion is not undone when it is."""
        doc_ids = [f"PMID:{int(p)}" for p in pmids if str(p).strip().isdigit()]
        present = self.store.get_entities(doc_ids)
        report.count("deletions read", len(doc_ids))
        if not present:
            return
        previous = self._stored_links(list(present))
        self._replace_links({doc: (links, _Links()) for doc, links in previous.items()}, report)
        passages = [p for d in present for p in self.text_index.document_passages(d)]
        if passages:
            self._retire_passages(passages, report)
        self.store.upsert_entities(e.model_copy(update={"obsolete": True}) for e in present.values())
        report.count("documents deleted", len(present))
        self.text_index.mark_documents(present, deleted=True)
        for doc_id in present:
            if doc_id in waiting:
                waiting[doc_id] = replace(waiting[doc_id], deleted=True)

    def _flag_retracted(
        self, doc_ids: Sequence[str], report: IngestSummary, waiting: dict[str, DocumentRecord]
    ) -> None:
        """Flag retracted documents: their graph description, passages and citation record (also one
        still waiting for the checkpoint)."""
        present = self.store.get_entities(doc_ids)
        if not present:
            return
        flagged = []
        for entity in present.values():
            description = entity.description or ""
            if not description.startswith("RETRACTED."):
                flagged.append(entity.model_copy(update={"description": f"RETRACTED. {description}".strip()}))
        if flagged:
            report.entities += self.store.upsert_entities(flagged)
        held = [d for d in present if d in waiting]
        changed = self.text_index.mark_documents([d for d in present if d not in waiting], retracted=True)
        self.text_index.mark_documents(held, retracted=True)  # their passages, and a row stored before
        for doc_id in held:
            if not waiting[doc_id].retracted:
                waiting[doc_id] = replace(waiting[doc_id], retracted=True)
                changed += 1
        report.count("documents flagged retracted", changed)

    # ---- re-linking -------------------------------------------------------------------------
    def relink(self, doc_ids: Iterable[str], *, force: bool = False) -> IngestSummary:
        """Link loaded documents again with the current linker (after an ontology load, or a change of
        the linking rules), from their stored passages: MENTIONS edges no longer found end, new ones
        are added, and each document's sentences in CO_MENTIONED evidence follow. A document already
        linked by a linker of the same signature is skipped (all of them with ``force``); the
        signature is stored with the document after the graph checkpoint, so an interrupted run
        resumes where it stopped and a second run changes nothing."""
        if self.linker is None:
            raise ValueError("relinking needs a linker")
        report = IngestSummary(source=f"relink {SOURCE}")
        started = time.perf_counter()
        pending: dict[str, DocumentRecord] = {}
        with batched_load(
            self.store,
            lambda batch: pending.update((d.id, d) for d in self._relink_batch(batch, report, force)),
            lambda: self._commit(pending, report),
            batch_size=self.batch_size,
            checkpoint_every=self.checkpoint_every,
            progress=self.progress,
            desc=f"relink {SOURCE}",
            unit=" documents",
        ) as batches:
            for doc_id in doc_ids:
                batches.tick()
                batches.add(doc_id)
        report.seconds = round(time.perf_counter() - started, 3)
        return report

    def _relink_batch(self, doc_ids: Sequence[str], report: IngestSummary, force: bool) -> list[DocumentRecord]:
        assert self.linker is not None
        signature = self.linker.signature
        known = self.text_index.get_documents(doc_ids)
        report.count("documents read", len(doc_ids))
        report.count("documents not in the passage index", len(set(doc_ids) - known.keys()))
        live = [d for d in known.values() if not d.deleted]
        todo = [d for d in live if force or d.linked_with != signature]
        report.count("documents already linked by this linker", len(live) - len(todo))
        t0 = time.perf_counter()
        texts = self._stored_texts([d.id for d in todo])
        if len(texts) < len(todo):
            report.count("documents without passages", len(todo) - len(texts))
        report.timed("sentences", time.perf_counter() - t0)
        t0 = time.perf_counter()
        linked = self.linker.link_docs([parsed for _, parsed in texts.values()])
        now = {d: _Links.of(text, mentions) for (d, (text, _)), mentions in zip(texts.items(), linked, strict=True)}
        report.timed("linking", time.perf_counter() - t0)
        t0 = time.perf_counter()
        before = self._links_in({d: text for d, (text, _) in texts.items()})
        changes: dict[str, tuple[_Links, _Links]] = {}
        for doc_id, links in now.items():
            had = before[doc_id]
            if had.same_as(links):
                report.count("documents whose links are unchanged")
                continue
            report.count("documents relinked")
            report.count("mentions added", len(links.edges.keys() - had.edges.keys()))
            report.count("mentions ended", len(had.edges.keys() - links.edges.keys()))
            changes[doc_id] = (had, links)
        self._replace_links(changes, report)
        report.timed("write graph", time.perf_counter() - t0)
        return [replace(doc, linked_with=signature) for doc in todo if doc.id in texts]

    # ---- what documents link: MENTIONS edges and CO_MENTIONED evidence --------------------------
    def _stored_texts(self, doc_ids: Sequence[str]) -> dict[str, tuple[ArticleText, Doc]]:
        """Loaded documents' texts rebuilt from their stored passages (``stored_text``) and parsed;
        documents without stored passages are left out."""
        found = []
        for doc_id in doc_ids:
            passages = list(self.text_index.get(self.text_index.document_passages(doc_id)).values())
            if passages:
                found.append((doc_id, sorted(passages, key=lambda p: _first_sentence(p.id))))
        parsed = self.nlp.pipe((" ".join(p.text for p in ps) for _, ps in found), batch_size=64)
        return {d: (stored_text(d, ps, doc), doc) for (d, ps), doc in zip(found, parsed, strict=True)}

    def _stored_links(self, doc_ids: Sequence[str]) -> dict[str, _Links]:
        """What loaded documents link as the graph holds it (``_links_in``), their texts rebuilt from
        the stored passages. Documents without stored passages are left out."""
        return self._links_in({d: text for d, (text, _) in self._stored_texts(doc_ids).items()})

    def _links_in(self, texts: dict[str, ArticleText]) -> dict[str, _Links]:
        """What the documents of ``texts`` (stored texts) link as the graph holds it: the current
        ``MENTIONS`` edges of their passages and the co-mention pairs those make in the text."""
        by_passage: dict[str, dict[str, Relation]] = defaultdict(dict)
        for passage_id, rel_row, _ in self.store.edge_rows([p.id for t in texts.values() for p in t.passages],
                                                           [MENTIONS], "out"):  # fmt: skip
            rel = row_to_relation(rel_row)
            if rel.source == SOURCE:
                by_passage[passage_id][rel.key] = rel
        out = {}
        for doc_id, text in texts.items():
            edges = {k: e for p in text.passages for k, e in by_passage[p.id].items()}
            out[doc_id] = _Links(edges, _co_mention_pairs(text, _stored_mentions(text, edges.values())))
        return out

    def _replace_links(self, documents: dict[str, tuple[_Links, _Links]], report: IngestSummary) -> None:
        """Make what each document links what it links now (``(before, now)`` per document): the
        ``MENTIONS`` edges no longer found end, new and changed ones are written, and its sentences in
        ``CO_MENTIONED`` evidence follow (``_replace_co_mention_evidence``). One rule for a first load
        (nothing before), a changed or reloaded document, a deletion (nothing now) and a relink."""
        ended = [e for had, has in documents.values() for k, e in had.edges.items() if k not in has.edges]
        writes = [
            e
            for had, has in documents.values()
            for k, e in has.edges.items()
            if (old := had.edges.get(k)) is None or (old.evidence, old.confidence) != (e.evidence, e.confidence)
        ]
        if ended:
            report.relations.invalidated += self.store.invalidate_relations(ended)
        if writes:
            report.relations += self.store.upsert_relations(writes)
        self._replace_co_mention_evidence({d: (had.pairs, has.pairs) for d, (had, has) in documents.items()}, report)

    def _replace_co_mention_evidence(self, documents: dict[str, tuple[Pairs, Pairs]], report: IngestSummary) -> None:
        """Make each document's sentences in CO_MENTIONED evidence those of its pairs now: for every
        pair of the document, the sentences it had are taken out and those it has put in, and the count
        follows exactly, sentences past ``MAX_EVIDENCE`` (counted, not listed) included (an edge left
        with none ends). An edge whose list has room again (a document taken out) lists a reloaded
        document's sentences again."""
        wanted: dict[tuple[str, str], dict[str, tuple[set[str], set[str]]]] = defaultdict(dict)
        for doc_id, (before, now) in documents.items():
            for pair in before.keys() | now.keys():
                if (had := before.get(pair, set())) != (has := now.get(pair, set())) or has:
                    wanted[pair][doc_id] = (had, has)
        if not wanted:
            return
        edges = {pair: Relation(subject=pair[0], type=CO_MENTIONED, object=pair[1], source=SOURCE) for pair in wanted}
        stored = self.store.current_relations(edges.values())
        updates, ends = [], []
        for pair, per_doc in wanted.items():
            rel = stored.get(edges[pair].key)
            sentences = list(rel.evidence.get("sentences", [])) if rel else []
            gone = set().union(*(had for had, _ in per_doc.values()))
            gone |= {s for s in sentences if s.partition("#s")[0] in per_doc}  # listed, whatever was read back
            new = set().union(*(has for _, has in per_doc.values()))
            count = (int(rel.evidence.get("count", len(sentences))) - len(gone) if rel else 0) + len(new)
            if count <= 0:
                if rel is not None:
                    ends.append(rel)
                continue
            merged = sorted((set(sentences) - gone) | new, key=_sentence_order)[:MAX_EVIDENCE]
            if rel is not None and merged == sentences and count == rel.evidence.get("count"):
                continue
            base = rel if rel is not None else edges[pair]
            updates.append(base.model_copy(update={"evidence": {"sentences": merged, "count": count}}))
        if ends:
            report.relations.invalidated += self.store.invalidate_relations(ends)
        if updates:
            report.relations += self.store.upsert_relations(updates)

    # ---- LLM triples -------------------------------------------------------------------------
    def _extract(self, prepared: Sequence[PreparedArticle], report: IngestSummary) -> None:
        assert self.extract is not None
        t0 = time.perf_counter()
        for item in prepared:
            for passage in item.text.passages:
                try:
                    self.extract(passage.text, passage.id)
                    report.count("passages sent to the LLM")
                except Exception as exc:  # noqa: BLE001 - one bad reply never stops the load
                    report.problem(Problem(file=item.article.origin or passage.id, message=f"{passage.id}: {exc}"))
        report.timed("llm extraction", time.perf_counter() - t0)


def _mention_edges(text: ArticleText, mentions: Sequence[Mention]) -> list[Relation]:
    """One MENTIONS edge per (passage, entity): spans relative to the passage, the best surface text,
    how it was linked and its score."""
    grouped: dict[tuple[str, str], list[Mention]] = defaultdict(list)
    for mention in mentions:
        passage = text.passage_at(mention.start)
        if passage is None:
            continue
        for entity_id in mention.ids:
            grouped[(passage.id, entity_id)].append(mention)
    edges = []
    passages = {p.id: p for p in text.passages}
    for (passage_id, entity_id), found in grouped.items():
        passage = passages[passage_id]
        spans = sorted({(m.start - passage.start, m.end - passage.start) for m in found})
        best = max(found, key=lambda m: m.score)
        edges.append(
            Relation(
                subject=passage_id,
                type=MENTIONS,
                object=entity_id,
                source=SOURCE,
                evidence={"spans": [list(s) for s in spans], "text": best.text, "method": best.method},
                confidence=min(1.0, best.score),
            )
        )
    return edges


def _stored_mentions(text: ArticleText, edges: Iterable[Relation]) -> list[Mention]:
    """The mentions behind a document's stored ``MENTIONS`` edges, as far as ``_co_mention_pairs``
    needs them: the entities linked at one span came from one mention, whose ids the linker sorts."""
    starts = {p.id: p.start for p in text.passages}
    at_span: dict[tuple[int, int], set[str]] = defaultdict(set)
    for edge in edges:
        if edge.subject in starts:
            for a, b in edge.evidence.get("spans", []):
                at_span[(starts[edge.subject] + a, starts[edge.subject] + b)].add(edge.object)
    return [Mention(a, b, "", tuple(sorted(ids)), "stored") for (a, b), ids in sorted(at_span.items())]


def _co_mention_pairs(text: ArticleText, mentions: Sequence[Mention]) -> Pairs:
    """Sentence ids per pair of entities linked in the same sentence. The several ids of one mention
    (one concept in several sources) are not paired with each other: only the first takes part."""
    by_sentence: dict[int, set[str]] = defaultdict(set)
    for mention in mentions:
        sentence = text.sentence_at(mention.start)
        if sentence is not None:
            by_sentence[sentence.index].add(mention.ids[0])
    pairs: Pairs = defaultdict(set)
    for index, ids in by_sentence.items():
        for pair in itertools.combinations(sorted(ids), 2):
            pairs[pair].add(text.sentence_id(index))
    return pairs


def stored_text(doc_id: str, passages: Sequence[PassageRecord], doc: Doc) -> ArticleText:
    """A loaded document's text rebuilt from its stored passages (joined by one space; ``doc`` is
    that text parsed), with the passage ids and sentence numbers it was loaded with: each passage
    ``…#sK`` numbers the sentences found inside it from K on (at most up to the next passage's first
    sentence), and no sentence crosses a passage boundary. On the PubMed test files the re-parse finds
    the very sentences and abbreviations of the original text, whose section breaks were line breaks."""
    ordered = sorted(passages, key=lambda p: _first_sentence(p.id))
    bounds, offset = [], 0
    for p in ordered:
        bounds.append((offset, offset + len(p.text)))
        offset += len(p.text) + 1
    parsed = []
    for sent in doc.sents:
        stripped = sent.text.strip()
        if stripped:
            start = sent.start_char + (len(sent.text) - len(sent.text.lstrip()))
            parsed.append((start, start + len(stripped)))
    sentences: list[Sentence] = []
    out: list[Passage] = []
    for i, (p, (p_start, p_end)) in enumerate(zip(ordered, bounds, strict=True)):
        first = _first_sentence(p.id)
        last = _first_sentence(ordered[i + 1].id) - 1 if i + 1 < len(ordered) else None
        pieces = [(max(a, p_start), min(b, p_end)) for a, b in parsed if a < p_end and b > p_start]
        numbers = []
        for n, (a, b) in enumerate(pieces or [(p_start, p_end)]):
            index = first + n if last is None else min(first + n, last)
            sentences.append(Sentence(index, a, b))
            numbers.append(index)
        out.append(Passage(p.id, first, tuple(numbers), p_start, p_end, p.text))
    return ArticleText(doc_id, doc.text, sentences, out)


def _first_sentence(passage_id: str) -> int:
    return int(passage_id.rpartition("#s")[2])


def _sentence_order(sentence_id: str) -> tuple[int, int]:
    doc, _, frag = sentence_id.partition("#s")
    return int(doc.split(":")[1]), int(frag or 0)
