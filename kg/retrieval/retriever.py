"""The retrieval pipeline, each stage timed: link the question, gather and rank graph facts and
paths, search passages, merge everything into one evidence bundle within a token budget."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kg.curie import source_url
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker
from kg.model import TEXT_CATEGORIES, Entity, GraphPath
from kg.retrieval.evidence import EvidenceBundle, EvidenceItem, fill_budget
from kg.retrieval.facts import GraphEvidence
from kg.text_index import SearchHit, TextIndex

__all__ = ["LinkedEntity", "Retrieval", "Retriever", "passage_evidence"]


@dataclass(frozen=True)
class LinkedEntity:
    id: str
    name: str
    category: str
    mention: str  # the words of the question it was linked from ("" for a session entity)
    method: str  # lexicon | abbreviation | vector | ner | session
    score: float


@dataclass
class Retrieval:
    query: str  # what was searched (the question, expanded by the session when it is a follow-up)
    linked: list[LinkedEntity]
    bundle: EvidenceBundle
    paths: list[GraphPath]
    entities: dict[str, Entity]  # names of everything the bundle and the paths mention
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage


def passage_evidence(hit: SearchHit) -> EvidenceItem:
    return EvidenceItem(
        id=hit.id,
        kind="passage",
        text=hit.text,
        title=hit.title,
        url=source_url(hit.doc_id),
        score=hit.dense if hit.dense is not None else 0.0,
        meta={"doc_id": hit.doc_id, "year": hit.year, "bm25": hit.bm25, "fused": hit.score},
    )


class Retriever:
    def __init__(
        self,
        graph: BaseGraphStore,
        linker: EntityLinker,
        entity_index: EntityIndex,
        text_index: TextIndex,
        embedder: TextEmbedder,
        search_floor: float = 0.25,
        fact_floor: float = 0.3,
        facts_per_passage: int = 3,
    ) -> None:
        self.graph = graph
        self.linker = linker
        self.text_index = text_index
        self.embedder = embedder
        self.search_floor = search_floor
        self.fact_floor = fact_floor
        self.facts_per_passage = facts_per_passage
        self.graph_evidence = GraphEvidence(graph, entity_index, embedder)

    def link(self, query: str) -> tuple[list[LinkedEntity], list[tuple[str, ...]]]:
        mentions = self.linker.link_query(query)
        entities = self.graph.get_entities({i for m in mentions for i in m.ids})
        linked: list[LinkedEntity] = []
        groups: list[tuple[str, ...]] = []
        for m in mentions:
            ids = tuple(i for i in m.ids if i in entities and entities[i].category not in TEXT_CATEGORIES)
            if not ids:
                continue
            groups.append(ids)
            linked += [
                LinkedEntity(i, entities[i].name, entities[i].category, m.text, m.method, round(m.score, 4))
                for i in ids
            ]
        return linked, groups

    def retrieve(
        self,
        query: str,
        k: int = 8,
        hops: int = 2,
        budget: int = 1500,
        context: Sequence[str] = (),
    ) -> Retrieval:
        """``k`` passages at most, paths of at most ``hops`` hops between linked entities,
        ``budget`` tokens of evidence; ``context``: entity ids carried from the session."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        linked, groups = self.link(query)
        known = {i for g in groups for i in g}
        carried = [i for i in context if i not in known]
        if carried:
            names = self.graph.get_entities(carried)
            for i in carried:
                if i in names:
                    groups.append((i,))
                    e = names[i]
                    linked.append(LinkedEntity(i, e.name, e.category, "", "session", 1.0))
        timings["link"] = time.perf_counter() - t

        t = time.perf_counter()
        qvec = self.embedder.encode([query])[0]
        timings["embed"] = time.perf_counter() - t

        graph = self.graph_evidence.retrieve(query, qvec, groups, max_hops=hops)
        timings.update(graph.timings)

        t = time.perf_counter()
        hits = [h for h in self.text_index.search(query, k=k, floor=self.search_floor, vector=qvec) if not h.retracted]
        timings["text"] = time.perf_counter() - t

        t = time.perf_counter()
        facts = [
            GraphEvidence.evidence(f, graph.entities) for f in graph.facts if f.on_path or f.cosine >= self.fact_floor
        ]
        facts = facts[: 4 * max(k, 1)]
        passages = [passage_evidence(h) for h in hits]
        counts = self.embedder.count_tokens([i.text for i in (*facts, *passages)])
        sized = [
            EvidenceItem(**{**i.__dict__, "tokens": n})  # type: ignore[arg-type]
            for i, n in zip((*facts, *passages), counts, strict=True)
        ]
        fact_items, passage_items = sized[: len(facts)], sized[len(facts) :]
        bundle = fill_budget([fact_items, passage_items], budget, per_round=[self.facts_per_passage, 1])
        timings["bundle"] = time.perf_counter() - t
        return Retrieval(
            query=query, linked=linked, bundle=bundle, paths=graph.paths, entities=graph.entities, timings=timings
        )
