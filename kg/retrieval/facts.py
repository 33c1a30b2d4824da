"""Knowledge-graph evidence for a question: the facts around its linked entities and the bounded
paths between them, ranked against the question (semantic triple ranking, then a BM25 rerank) at a
cost a 100 ms answer can afford. Facts of the relation types the question asks for
(:mod:`kg.question_intent`) answer it: they come first, in order of clinical weight (on a path between
the question's entities, then annotation frequency, then specificity), and an entity that has none
lends them from its subtypes, stated as such.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import Stemmer

from kg.annotation_terms import describe_evidence_codes, describe_frequencies, describe_onsets
from kg.curie import source_url
from kg.differential import frequency_weight
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex, embedding_text
from kg.graph.base import BaseGraphStore
from kg.model import HAS_MESH_TERM, HAS_PASSAGE, MENTIONS, RECORD_TYPES, SAME_AS, Entity, GraphPath, Relation
from kg.question_intent import Asked
from kg.retrieval.evidence import EvidenceItem, fact_citation_id
from kg.text_index import bm25_tokenize

__all__ = ["GraphEvidence", "ScoredFact", "relation_phrase", "negate_phrase", "render_fact", "NON_FACT_TYPES"]

# Edges that are not facts about the world: text structure and bookkeeping, and patients' records
# (HAS_FINDING: a radiology report's indexed findings; an image's study, modality, body part, report).
NON_FACT_TYPES = frozenset({MENTIONS, HAS_PASSAGE, HAS_MESH_TERM, SAME_AS, "REPLACED_BY", "HAS_FINDING", *RECORD_TYPES})

# type -> (forward phrase, inverse phrase). Other types read as their words ("HAS_SYMPTOM" -> "has symptom").
_PHRASES: dict[str, tuple[str, str]] = {
    "HAS_PHENOTYPE": ("has phenotype", "is a phenotype of"),
    "HAS_INHERITANCE": ("is inherited as", "is the mode of inheritance of"),
    "HAS_CLINICAL_COURSE": ("has clinical course", "is the clinical course of"),
    "HAS_MODIFIER": ("has clinical modifier", "is a clinical modifier of"),
    "HAS_PAST_MEDICAL_HISTORY": ("has past medical history", "is past medical history in"),
    "HAS_SYMPTOM": ("has symptom", "is a symptom of"),
    "TREATS": ("treats", "is treated by"),
    "PALLIATES": ("palliates", "is palliated by"),
    "IS_A": ("is a", "has the subtype"),
    "ASSOCIATED_WITH": ("is associated with", "is associated with"),
    "CO_MENTIONED": ("is mentioned in the literature together with", "is mentioned in the literature together with"),
    "SAME_AS": ("is the same concept as", "is the same concept as"),
}


def relation_phrase(rel_type: str, inverse: bool = False) -> str:
    forward, backward = _PHRASES.get(rel_type, (rel_type.lower().replace("_", " "), ""))
    if inverse:
        return backward or f"is the object of '{forward}' for"
    return forward


def negate_phrase(phrase: str) -> str:
    if phrase.startswith("has "):
        return "does not have " + phrase[4:]
    if phrase.startswith("is "):
        return "is not " + phrase[3:]
    return "is recorded as NOT: " + phrase


def _evidence_note(rel: Relation) -> str:
    ev = rel.evidence
    notes = []
    if ev.get("frequency"):
        notes.append(f"frequency {describe_frequencies(ev['frequency'])}")
    if ev.get("onset"):
        notes.append(describe_onsets(ev["onset"]))
    if ev.get("evidence_codes"):
        notes.append(f"evidence: {describe_evidence_codes(ev['evidence_codes'])}")
    if rel.type == "CO_MENTIONED" and ev.get("count"):
        notes.append(f"{ev['count']} sentences")
    if rel.source:
        notes.append(f"source {rel.source}")
    pmids = _pmids(rel)
    if pmids:
        notes.append(", ".join(pmids[:3]))
    return f" ({'; '.join(notes)})" if notes else ""


def _pmids(rel: Relation) -> list[str]:
    pmids = [str(p) for p in rel.evidence.get("pmids") or []]
    if not pmids and rel.type == "CO_MENTIONED":
        pmids = list(dict.fromkeys(str(s).split("#", 1)[0] for s in rel.evidence.get("sentences") or []))
    return [p if p.startswith("PMID:") else f"PMID:{p}" for p in pmids]


def render_fact(rel: Relation, names: dict[str, str], with_evidence: bool = True) -> str:
    """ "Marfan syndrome has phenotype Arachnodactyly (frequency ...; source hpo; PMID:...)"."""
    phrase = relation_phrase(rel.type)
    if rel.negated:
        phrase = negate_phrase(phrase)
    text = f"{names.get(rel.subject, rel.subject)} {phrase} {names.get(rel.object, rel.object)}"
    return text + (_evidence_note(rel) if with_evidence else "")


#: Relation types whose other end is a clinical feature, ordered by frequency and specificity.
FEATURE_TYPES = frozenset({"HAS_PHENOTYPE", "HAS_SYMPTOM"})


def _other_end(rel: Relation, seed: str) -> str:
    return rel.subject if rel.object == seed else rel.object


def _answers(rel: Relation, seed: str, other: Entity, asked: Sequence[Asked], named: set[str]) -> bool:
    """Whether ``rel`` (found around ``seed``, ``other`` at its other end) is of a type the question asks
    for, with the category asked of the other end and ``seed`` at the end asked of it. A NOT annotation
    answers only when the question names both ends ("does metformin treat liver cancer?"); otherwise it
    is no answer to "what treats X?"."""
    if rel.negated and other.id not in named:
        return False
    end = "subject" if rel.subject == seed else "object"
    return any(
        rel.type == a.type and (a.other is None or other.category == a.other) and a.named_is in (None, end)
        for a in asked
    )


def _frequencies(rel: Relation) -> list[str]:
    values = rel.evidence.get("frequency") or []
    return [values] if isinstance(values, str) else [str(v) for v in values]


def _frequency_class(weight: float | None) -> int:
    """HPO's frequency classes in order of weight: very frequent (80-99%, obligate), frequent (30-79%),
    not stated, occasional (5-29%), very rare (1-4%), excluded."""
    if weight is None:
        return 2
    return 0 if weight >= 0.8 else 1 if weight >= 0.3 else 3 if weight >= 0.05 else 4 if weight > 0 else 5


def _frequency_shift(rel: Relation) -> float:
    """-0.5..+0.5: how much more often than not an annotated feature is seen (0 without a frequency),
    so "characteristic" features (very frequent) rank above occasional ones."""
    values = _frequencies(rel)
    return frequency_weight(values) - 0.5 if values else 0.0


@dataclass
class ScoredFact:
    relation: Relation
    seed: str  # the linked entity (or its SAME_AS equivalent) the fact was found around
    cosine: float = 0.0
    bm25: float = 0.0
    score: float = 0.0  # fused rank score (higher is better)
    on_path: bool = False
    answers: bool = False  # of a relation type the question asks for, about the seed (or its subtype)

    @property
    def id(self) -> str:
        r = self.relation  # a NOT annotation is its own fact: KG:OMIM:1-NOT_HAS_PHENOTYPE-HP:2
        return fact_citation_id(r.subject, f"NOT_{r.type}" if r.negated else r.type, r.object)


@dataclass
class GraphRetrieval:
    facts: list[ScoredFact]
    paths: list[GraphPath]
    entities: dict[str, Entity]
    timings: dict[str, float] = field(default_factory=dict)


class GraphEvidence:
    def __init__(
        self,
        graph: BaseGraphStore,
        entity_index: EntityIndex,
        embedder: TextEmbedder,
        per_entity: int = 400,
        focused_types: int = 2,
        rerank_depth: int = 40,
        types_ttl_s: float = 60.0,
        frequency_prior: float = 0.1,
        path_candidates: int = 500,
        subtypes: int = 30,
    ) -> None:
        self.subtypes = subtypes
        self.frequency_prior = frequency_prior
        self.path_candidates = path_candidates
        self.graph = graph
        self.entity_index = entity_index
        self.embedder = embedder
        self.per_entity = per_entity
        self.focused_types = focused_types
        self.rerank_depth = rerank_depth
        self.types_ttl_s = types_ttl_s
        self._types: tuple[float, list[str]] | None = None
        self._phrase_vectors: dict[str, np.ndarray] = {}
        self._name_vectors: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self._stemmer = Stemmer.Stemmer("english")

    # ---- what to fetch ---------------------------------------------------------------------
    def fact_types(self) -> list[str]:
        """The relation types of the graph that state facts (cached for ``types_ttl_s``)."""
        with self._lock:
            if self._types is None or time.monotonic() - self._types[0] > self.types_ttl_s:
                types = sorted(t for t in self.graph.stats().relation_types if t not in NON_FACT_TYPES)
                self._types = (time.monotonic(), types)
            return self._types[1]

    def _phrase_vector(self, rel_type: str) -> np.ndarray:
        vec = self._phrase_vectors.get(rel_type)
        if vec is None:
            vec = self.embedder.encode([relation_phrase(rel_type)])[0]
            self._phrase_vectors[rel_type] = vec
        return vec

    def _entity_vectors(self, entities: dict[str, Entity]) -> dict[str, np.ndarray]:
        vectors: dict[str, np.ndarray] = {}
        missing: list[str] = []
        stored = self.entity_index.index.vectors_of(entities)  # one look-up for all (one each: 50 ms a question)
        for eid in entities:
            vec = stored[eid] if eid in stored else self._name_vectors.get(eid)
            if vec is None:
                missing.append(eid)
            else:
                vectors[eid] = vec
        if missing:  # not in the entity index (loaded with --no-embed): embed its text once per process
            encoded = self.embedder.encode_memoised([embedding_text(entities[e]) for e in missing])
            for eid, vec in zip(missing, encoded, strict=True):
                vectors[eid] = self._name_vectors[eid] = vec
        return vectors

    def _gather(
        self, seeds: Sequence[str], qvec: np.ndarray, asked: Sequence[Asked] = ()
    ) -> tuple[dict[str, ScoredFact], dict[str, Entity]]:
        """The facts around ``seeds``, up to ``per_entity`` edges each; those of the types the question
        asks for (``asked``) answer it. From a hub, the asked types (else those the question is closest
        to) are fetched on their own too, so "What drugs treat epilepsy?" sees every ``TREATS`` edge of
        epilepsy. A ``SAME_AS`` hop from a seed is free: an equivalent's facts count as the seed's. When
        no seed has an edge of an asked type, the seeds' subtypes lend theirs ("diabetes mellitus" has no
        ``TREATS`` edge, "type 2 diabetes mellitus" has)."""
        types = self.fact_types()
        if not types:
            return {}, {}
        facts: dict[str, ScoredFact] = {}
        entities: dict[str, Entity] = {}
        asked_types = list(dict.fromkeys(a.type for a in asked if a.type in types))
        ranked_types = sorted(types, key=lambda t: -float(self._phrase_vector(t) @ qvec))
        queue = list(dict.fromkeys(seeds))
        named = set(queue)
        expanded: set[str] = set()
        while queue:
            seed = queue.pop(0)
            if seed in expanded:
                continue
            expanded.add(seed)
            found = self.graph.neighbours(seed, rel_types=[*types, SAME_AS], limit=self.per_entity)
            if len(found) >= self.per_entity:  # a hub: make sure the types the question asks about are in
                focused = asked_types or ranked_types[: self.focused_types]
                found += self.graph.neighbours(seed, rel_types=focused, limit=self.per_entity // 2)
            for n in found:
                entities.setdefault(n.entity.id, n.entity)
                rel = n.relation
                if rel.type == SAME_AS:
                    # a free hop, one from a named entity: its equivalent's facts count as its own (not
                    # the equivalents of that equivalent: a Disease Ontology class xrefs every OMIM entry
                    # of a phenotypic series, and two hops would make them all one disease)
                    if (
                        seed in named
                        and n.entity.id not in expanded
                        and len(expanded) + len(queue) < 3 * len(seeds) + 3
                    ):
                        queue.append(n.entity.id)
                    continue
                fact = ScoredFact(relation=rel, seed=seed, answers=_answers(rel, seed, n.entity, asked, named))
                facts.setdefault(fact.id, fact)
        if asked_types and not any(f.answers for f in facts.values()):
            self._gather_subtypes(sorted(named), asked, asked_types, facts, entities, named)
        return facts, entities

    def _gather_subtypes(
        self,
        seeds: Sequence[str],
        asked: Sequence[Asked],
        asked_types: list[str],
        facts: dict[str, ScoredFact],
        entities: dict[str, Entity],
        named: set[str],
    ) -> None:
        """The asked-for edges of the seeds' direct subtypes, each with the ``IS_A`` fact that says whose
        subtype it is (both answer: the answer names the subtype it speaks of)."""
        for seed in seeds:
            children = [
                n
                for n in self.graph.neighbours(seed, rel_types=["IS_A"], direction="in", limit=self.subtypes)
                if n.relation.object == seed
            ]
            of_child = self.graph.neighbours_of(
                [c.entity.id for c in children], rel_types=asked_types, limit=self.per_entity // 4
            )
            for child in children:
                found = of_child[child.entity.id]
                answering = [n for n in found if _answers(n.relation, child.entity.id, n.entity, asked, named)]
                if not answering:
                    continue
                entities.setdefault(child.entity.id, child.entity)
                link = ScoredFact(relation=child.relation, seed=seed, answers=True, on_path=True)
                facts[link.id] = link  # gathered around the seed already, as a fact that only informs
                for n in answering:
                    entities.setdefault(n.entity.id, n.entity)
                    fact = ScoredFact(relation=n.relation, seed=child.entity.id, answers=True)
                    facts.setdefault(fact.id, fact)

    # ---- ranking ---------------------------------------------------------------------------
    def _tokens(self, texts: list[str]) -> list[list[str]]:
        return bm25_tokenize(texts, self._stemmer, return_ids=False)

    def _bm25(self, query: str, texts: list[str], k1: float = 1.2, b: float = 0.75) -> list[float]:
        """BM25 of ``query`` against the small candidate set ``texts`` (its own statistics)."""
        docs = self._tokens(texts)
        q = set(self._tokens([query])[0])
        if not q or not docs:
            return [0.0] * len(texts)
        avg = sum(len(d) for d in docs) / len(docs) or 1.0
        df = {t: sum(1 for d in docs if t in d) for t in q}
        scores = []
        for d in docs:
            s = 0.0
            for t in q:
                tf = d.count(t)
                if tf:
                    idf = math.log(1 + (len(docs) - df[t] + 0.5) / (df[t] + 0.5))
                    s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
            scores.append(s)
        return scores

    def rank(
        self, question: str, qvec: np.ndarray, facts: list[ScoredFact], entities: dict[str, Entity]
    ) -> list[ScoredFact]:
        """Facts by the cosine of the question to each fact, then the best ``rerank_depth`` reranked by
        reciprocal-rank fusion of that order and BM25 over the rendered facts (the question's exact words:
        drug names, "treat", numbers)."""
        if not facts:
            return []
        # A fact's vector is composed from vectors already held (both entities' and the relation phrase's,
        # summed and normalised): no model call per fact, so a hub with thousands of edges costs one matrix
        # product.
        vectors = self._entity_vectors(entities)
        composed = np.stack(
            [
                vectors[f.relation.subject] + vectors[f.relation.object] + self._phrase_vector(f.relation.type)
                for f in facts
            ]
        )
        composed /= np.maximum(np.linalg.norm(composed, axis=1, keepdims=True), 1e-12)
        cosines = composed @ qvec
        for f, c in zip(facts, cosines, strict=True):
            f.cosine = float(c) + self.frequency_prior * _frequency_shift(f.relation)
        by_cosine = sorted(facts, key=lambda f: (-f.cosine, f.id))
        head, tail = by_cosine[: self.rerank_depth], by_cosine[self.rerank_depth :]
        names = {e.id: e.name for e in entities.values()}
        bm25 = self._bm25(question, [render_fact(f.relation, names, with_evidence=False) for f in head])
        bm25_rank = {id(f): r for r, (f, _) in enumerate(sorted(zip(head, bm25, strict=True), key=lambda x: -x[1]))}
        for r, (f, s) in enumerate(zip(head, bm25, strict=True)):
            f.bm25 = s
            f.score = 1 / (60 + r + 1) + (1 / (60 + bm25_rank[id(f)] + 1) if s > 0 else 0.0)
        head.sort(key=lambda f: (-f.score, -f.cosine, f.id))
        for f in tail:
            f.score = 1 / (60 + self.rerank_depth + 1)
        ranked = head + tail
        answering = [f for f in ranked if f.answers]
        if not answering:
            return ranked
        return self._by_clinical_weight(answering) + [f for f in ranked if not f.answers]

    def _by_clinical_weight(self, facts: list[ScoredFact]) -> list[ScoredFact]:
        """Answering facts: those on a path between the question's entities first; then features by how
        often they are seen (HPO's frequency classes: very frequent, frequent, unknown, occasional, very
        rare; the mean over the curated records that state the feature, an Orphanet class and OMIM's n/m
        alike), how many records state it, and how specific it is (the fewer edges a phenotype has, the
        more it tells a disease apart); other facts in ranked order."""
        by_feature: dict[str, list[ScoredFact]] = {}
        for f in facts:
            if f.relation.type in FEATURE_TYPES:
                by_feature.setdefault(_other_end(f.relation, f.seed), []).append(f)
        degrees = self.graph.degrees(by_feature) if by_feature else {}
        weight: dict[str, tuple[int, int, int]] = {}
        for feature, stated in by_feature.items():
            known = [frequency_weight(_frequencies(f.relation)) for f in stated if _frequencies(f.relation)]
            weight[feature] = (
                _frequency_class(sum(known) / len(known) if known else None),
                -len(stated),
                degrees[feature],
            )
        order = {id(f): i for i, f in enumerate(facts)}

        def key(f: ScoredFact) -> tuple[bool, tuple[int, int, int], int]:
            feature = _other_end(f.relation, f.seed) if f.relation.type in FEATURE_TYPES else None
            return (not f.on_path, weight.get(feature, (0, 0, 0)) if feature else (0, 0, 0), order[id(f)])

        return sorted(facts, key=key)

    # ---- paths -------------------------------------------------------------------------------
    def paths(
        self, groups: Sequence[Sequence[str]], max_hops: int, limit: int = 3, max_pairs: int = 6
    ) -> list[GraphPath]:
        """Bounded paths between entities of different mentions (one id per mention: the first)."""
        heads = [g[0] for g in groups if g]
        found: list[GraphPath] = []
        pairs = [(a, b) for i, a in enumerate(heads) for b in heads[i + 1 :] if a != b][:max_pairs]
        seen: set[tuple[str, ...]] = set()
        degrees = self.graph.degrees({x for pair in pairs for x in pair}) if pairs else {}
        for a, b in pairs:
            for p in self.graph.paths(
                a,
                b,
                max_hops=max_hops,
                limit=limit,
                free_same_as=1,
                candidate_cap=self.path_candidates,
                degrees=degrees,
            ):
                key = tuple(r.key for r in p.relations)
                if p.cost > 0 and key not in seen:  # two names of one concept (SAME_AS only) is no connection
                    seen.add(key)
                    found.append(p)
        return found

    def retrieve(
        self,
        question: str,
        qvec: np.ndarray,
        groups: Sequence[Sequence[str]],
        max_hops: int = 2,
        asked: Sequence[Asked] = (),
    ) -> GraphRetrieval:
        """``asked``: the relation types the question asks for (:func:`kg.question_intent.asked_relations`)."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        seeds = list(dict.fromkeys(s for g in groups for s in g))
        gathered, entities = self._gather(seeds, qvec, asked)
        timings["graph_facts"] = time.perf_counter() - t
        t = time.perf_counter()
        paths = self.paths(groups, max_hops) if max_hops > 0 and len(groups) > 1 else []
        timings["graph_paths"] = time.perf_counter() - t
        t = time.perf_counter()
        missing = {n for p in paths for n in p.nodes} - entities.keys()
        seed_entities = self.graph.get_entities(missing | (set(seeds) - entities.keys()))
        entities.update(seed_entities)
        on_path: dict[str, ScoredFact] = {}  # an edge two paths share is one fact
        for p in paths:
            for rel in p.relations:
                if rel.type in NON_FACT_TYPES:
                    continue
                f = ScoredFact(relation=rel, seed=p.nodes[0], on_path=True)
                found = gathered.pop(f.id, None)
                # an edge of the asked type answers when it touches an entity the question names, not
                # when it runs between two others in the middle of a path
                if found is not None:
                    f.answers = found.answers
                elif touching := [end for end in (rel.subject, rel.object) if end in seeds]:
                    other = entities.get(rel.object if touching[0] == rel.subject else rel.subject)
                    f.answers = other is not None and _answers(rel, touching[0], other, asked, set(seeds))
                on_path.setdefault(f.id, f)
        ranked = self.rank(question, qvec, [*on_path.values(), *gathered.values()], entities)
        timings["graph_rank"] = time.perf_counter() - t
        return GraphRetrieval(facts=ranked, paths=paths, entities=entities, timings=timings)

    @staticmethod
    def evidence(
        fact: ScoredFact, entities: Mapping[str, Entity], names: Mapping[str, str] | None = None
    ) -> EvidenceItem:
        """The fact as evidence; ``names``: the entities' names, when the caller has them for many facts."""
        rel = fact.relation
        names = {e.id: e.name for e in entities.values()} if names is None else names
        pmids = _pmids(rel)
        url = source_url(pmids[0]) if pmids else source_url(rel.subject)
        meta: dict[str, Any] = {
            "subject": rel.subject,
            "type": rel.type,
            "object": rel.object,
            "subject_name": names.get(rel.subject),
            "object_name": names.get(rel.object),
            "negated": rel.negated,
            "source": rel.source,
            "pmids": pmids,
            "seed": fact.seed,
            "on_path": fact.on_path,
            "answers": fact.answers,
            "cosine": round(fact.cosine, 4),
        }
        return EvidenceItem(
            id=fact.id,
            kind="kg",
            text=render_fact(rel, names),
            title=render_fact(rel, names, with_evidence=False),
            url=url,
            score=fact.cosine,
            meta=meta,
        )
