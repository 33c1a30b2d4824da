"""The retrieval pipeline, each stage timed: link the question, gather and rank graph facts and
paths, search passages, merge everything into one evidence bundle within a token budget."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import Stemmer

from kg.curie import source_url
from kg.differential import PhenotypeIndex
from kg.differential.groups import ENTRIES, ENTRY_DEPTH, DifferentialEntry, disease_classes, group_ranked
from kg.differential.patient import read_patient
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker
from kg.model import CO_MENTIONED, NOT_VOCABULARY, Entity, GraphPath
from kg.negation import by_polarity, negated_mentions
from kg.question_intent import Asked, asked_relations
from kg.retrieval.conditions import (
    CONDITION,
    ConditionReading,
    Suggestion,
    corroborating_feature,
    holding_condition,
    nearest_condition,
    suggested_condition,
)
from kg.retrieval.evidence import EvidenceBundle, EvidenceItem, fact_citation_id, fill_budget
from kg.retrieval.facts import GraphEvidence, GraphRetrieval
from kg.retrieval.joint import Concept, concepts_named, question_concepts
from kg.text_index import SearchHit, TextIndex, bm25_tokenize
from kg.unknown_names import UnknownName

__all__ = ["LinkedEntity", "Links", "Retrieval", "Retriever", "passage_evidence", "asks_for_diagnosis", "facts_lead"]

# A question that lists phenotypes and asks what the patient has goes to the differential ranking; one
# that asks how to treat or test for them does not, whatever else it says ("a child diagnosed with ...").
_DIAGNOSIS_CUE = re.compile(
    r"\b(diagnos\w*|differential|(which|what)( \w+){0,4} (diseases?|disorders?|syndromes?|conditions?)"
    r"|could (this|it|these) be|likely cause|underlying cause|(causing|cause of|causes) (this|these|it|them|the)\b"
    r"|presents? with|presenting with)\b",
    re.IGNORECASE,
)
# a clinical vignette: who the patient is, then what they have ("Boy with ...", "A 3-year-old girl has ...")
_VIGNETTE = re.compile(
    r"^\W*(an? )?((\d+|one|two|three|four|five|six|seven|eight|nine|ten)[- ](years?|months?|weeks?|days?)[- ]old )?"
    r"((teen(age)?|young|middle[- ]aged|elderly|old(er)?|previously healthy|term|preterm|obese|pregnant) )?"
    r"(boy|girl|man|woman|male|female|child|infant|newborn|neonate|toddler|baby|adolescent|teenager|patient|kid"
    r"|adult|person|lady)"
    r"( \w+){0,3} (with|has|had|presents|showing)\b",
    re.IGNORECASE,
)
# a yes/no question after the vignette asks something else of it ("A patient with myelomeningocele: is
# untethering necessary prior to scoliosis correction?")
_YES_NO_QUESTION = re.compile(
    r"(^|[:;.?!,]\s*)(is|are|was|were|does|do|did|should|shall|can|will|would|has|have|must|may)\b[^?:;.!]*\?",
    re.IGNORECASE,
)
_OTHER_INTENT = re.compile(
    r"\b(treat\w*|therap\w*|drugs?|medications?|medicines?|manage\w*|dos(e|es|age|ing)|first[- ]line|prognosis"
    r"|how (is|are|was|were|do you|to)( \w+){0,6} (diagnosed|tested|confirmed|detected|screened)"
    r"|(which|what)( \w+){0,3} (tests?|investigations?|imaging|scans?|work-?up))\b",
    re.IGNORECASE,
)
DIFFERENTIAL_MIN_TERMS = 2


def asks_for_diagnosis(question: str) -> bool:
    """Whether ``question`` asks what the patient has (a diagnosis), not how to treat or test."""
    if _OTHER_INTENT.search(question) is not None:
        return False
    if _DIAGNOSIS_CUE.search(question) is not None:
        return True
    return _VIGNETTE.search(question) is not None and _YES_NO_QUESTION.search(question) is None


@dataclass(frozen=True)
class LinkedEntity:
    id: str
    name: str
    category: str
    mention: str  # the words of the question it was linked from ("" for a session entity)
    method: str  # lexicon | abbreviation | lay | vector | ner | session | condition (kg/retrieval/conditions.py)
    score: float
    negated: bool = False  # the question says the patient does not have it ("no hypotonia")


@dataclass
class Retrieval:
    query: str  # what was searched (the question, expanded by the session when it is a follow-up)
    linked: list[LinkedEntity]
    bundle: EvidenceBundle
    paths: list[GraphPath]
    entities: dict[str, Entity]  # names of everything the bundle and the paths mention
    timings: dict[str, float] = field(default_factory=dict)  # seconds per stage
    # when the question asked for a diagnosis: the entries of the answer (a disease, or one disease's
    # subtypes and descriptions ranked together), each member with its own rank
    differential: list[DifferentialEntry] = field(default_factory=list)
    # names the question uses that medkg knows nothing about, and whether retrieval stopped at them
    unknown: list[UnknownName] = field(default_factory=list)
    stopped: bool = False
    # with ``joint_passages``: the things the question names (two or more) that no passage relates, and
    # how many passages were left out for naming only one of them
    unrelated: list[str] = field(default_factory=list)
    unjoined_passages: int = 0
    # findings read as the condition nearest to them, which holds what the question asks for
    # (kg/retrieval/conditions.py)
    readings: list[ConditionReading] = field(default_factory=list)
    # the condition nearest to the question's words when retrieval compared them (the reading of a
    # description, tried when nothing linked holds what is asked), for the abstention to offer
    suggestion: Suggestion | None = None
    suggestion_tried: bool = False


class Links(NamedTuple):
    """A question's links: entities, their groups (one per mention), names unknown to medkg."""

    linked: list[LinkedEntity]
    groups: list[tuple[str, ...]]
    unknown: list[UnknownName]


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
        phenotypes: Callable[[], PhenotypeIndex] | None = None,
        differential_top: int = ENTRIES,
        differential_depth: int = ENTRY_DEPTH,
    ) -> None:
        """``phenotypes``: gives the phenotype index (built on first use) for questions that list
        phenotypes and ask for a diagnosis; the answer's ``differential_top`` entries gather the diseases
        ranked among the first ``differential_depth``."""
        self.phenotypes = phenotypes
        self.differential_top = differential_top
        self.differential_depth = differential_depth
        self.graph = graph
        self.linker = linker
        self.text_index = text_index
        self.embedder = embedder
        self.search_floor = search_floor
        self.fact_floor = fact_floor
        self.facts_per_passage = facts_per_passage
        self.graph_evidence = GraphEvidence(graph, entity_index, embedder)
        self._stemmer = Stemmer.Stemmer("english")

    def link(self, query: str) -> Links:
        """The question's linked entities, their groups (one per mention), and the names it uses that
        medkg knows nothing about (in no name of the graph, no passage, no everyday English)."""
        mentions, unknown = self.linker.read_question(query, known=self.text_index.holds_word, names=self._names)
        entities = self.graph.get_entities({i for m in mentions for i in m.ids})
        # one concept under the same words in other ontologies joins the mention (HPO's lay synonym
        # "high blood pressure" of Hypertension reaches the Disease Ontology's hypertension and its drugs)
        equivalents = [self.linker.lexicon.namesakes(m.text, m.ids, self._names) for m in mentions]
        entities.update(self.graph.get_entities({i for ids in equivalents for i in ids} - entities.keys()))
        linked: list[LinkedEntity] = []
        groups: list[tuple[str, ...]] = []
        negations = negated_mentions(query, [(m.start, m.end) for m in mentions])
        for m, all_ids, negated in zip(mentions, equivalents, negations, strict=True):
            ids = tuple(i for i in all_ids if i in entities and entities[i].category not in NOT_VOCABULARY)
            if not ids:
                continue
            groups.append(ids)
            linked += [
                LinkedEntity(i, entities[i].name, entities[i].category, m.text, m.method, round(m.score, 4), negated)
                for i in ids
            ]
        return Links(linked, groups, unknown)

    def _things_named(self, query: str, linked: list[LinkedEntity], groups: list[tuple[str, ...]]) -> list[Concept]:
        """The things the question names by a name or synonym, in the question's order."""
        synonyms = {i: e.synonyms for i, e in self.graph.get_entities({e.id for e in linked}).items()}
        concepts = question_concepts(linked, groups, self._terms, synonyms)
        return sorted(concepts, key=lambda c: query.casefold().find(c.label.casefold()))

    def _relating(self, hits: list[SearchHit], concepts: list[Concept]) -> tuple[list[SearchHit], list[SearchHit]]:
        """With two or more things named: the passages of articles (title and whole text: an abstract's
        finding need not repeat what it is about) that name two of them, and the others."""
        if len(concepts) < 2:
            return hits, []
        texts = self.text_index.document_texts(h.doc_id for h in hits)
        titles = {h.doc_id: h.title or "" for h in hits}
        words = {d: self._terms(f"{title} {texts.get(d, '')}") for d, title in titles.items()}
        relating = {h.id for h in hits if concepts_named(words[h.doc_id], concepts) >= 2}
        return [h for h in hits if h.id in relating], [h for h in hits if h.id not in relating]

    def _terms(self, text: str) -> frozenset[str]:
        return frozenset(bm25_tokenize([text], self._stemmer, return_ids=False)[0])

    def _names(self, ids: Iterable[str]) -> dict[str, str]:
        return {i: e.name for i, e in self.graph.get_entities(set(ids)).items()}

    def retrieve(
        self,
        query: str,
        k: int = 8,
        hops: int = 2,
        budget: int = 1500,
        context: Sequence[str] = (),
        extra: Sequence[EvidenceItem] = (),
        links: Links | None = None,
        stop_at_unknown: bool = False,
        joint_passages: bool = False,
    ) -> Retrieval:
        """``k`` passages at most, paths of at most ``hops`` hops between linked entities,
        ``budget`` tokens of evidence; ``context``: entity ids carried from the session; ``extra``:
        evidence found elsewhere (similar imaging studies), which leads each round of the bundle;
        ``links``: what :meth:`link` returned for this very ``query``, when the caller has it.
        ``stop_at_unknown``: a question that names something medkg knows nothing about (``unknown``)
        gets no evidence at all, since evidence about anything else would be read as about it (the QA
        engine asks for this; an exam's answerer, choosing among options, does not). ``joint_passages``:
        a question that names two or more things gets only the passages of articles that name two of
        them (``kg/retrieval/joint.py``; the QA engine asks for this too)."""
        timings: dict[str, float] = {}
        t = time.perf_counter()
        links = links if links is not None else self.link(query)
        linked, groups = list(links.linked), list(links.groups)
        if links.unknown and stop_at_unknown:
            timings["link"] = time.perf_counter() - t
            bundle = EvidenceBundle([], budget)
            return Retrieval(query, linked, bundle, [], {}, timings, unknown=list(links.unknown), stopped=True)
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

        asked = asked_relations(query)
        readings: list[ConditionReading] = []
        tried: list[Suggestion | None] = []  # the suggestion, once compared

        # A phenotype list asking for a diagnosis goes to the differential ranking, whose matched
        # facts say more than paths between the phenotypes (which run through thousands of diseases) or
        # the facts around each phenotype (its diseases, one by one).
        route_differential = self._wants_differential(query, linked)
        if route_differential:  # the ranked diseases and their matched facts are the graph's answer
            t = time.perf_counter()
            seeds = {i for g in groups for i in g}
            graph = GraphRetrieval(facts=[], paths=[], entities=self.graph.get_entities(seeds))
            timings["graph_facts"] = time.perf_counter() - t
        else:
            graph = self.graph_evidence.retrieve(query, qvec, groups, max_hops=hops, asked=asked)
            if asked and not any(f.answers for f in graph.facts):  # nothing linked holds what is asked
                t = time.perf_counter()
                readings = self._read_as_conditions(query, linked, groups, asked, tried)
                timings["conditions"] = time.perf_counter() - t
                if readings:  # the graph's evidence again, with the conditions read
                    graph = self.graph_evidence.retrieve(query, qvec, groups, max_hops=hops, asked=asked)
            timings.update(graph.timings)

        t = time.perf_counter()
        hits = self.text_index.search(query, k=k, floor=self.search_floor, vector=qvec, exclude_retracted=True)
        unjoined: list[SearchHit] = []
        concepts: list[Concept] = []
        if joint_passages and not route_differential:
            concepts = self._things_named(query, linked, groups)
            hits, unjoined = self._relating(hits, concepts)
        timings["text"] = time.perf_counter() - t

        t = time.perf_counter()
        differential, ddx_items = self._differential(query, linked, graph.entities) if route_differential else ([], [])
        if differential:
            timings["differential"] = time.perf_counter() - t

        t = time.perf_counter()
        names = {e.id: e.name for e in graph.entities.values()}
        facts = [
            GraphEvidence.evidence(f, graph.entities, names)
            for f in graph.facts
            if f.on_path or f.answers or f.cosine >= self.fact_floor
        ]
        facts = facts[: 4 * max(k, 1)]
        passages = [passage_evidence(h) for h in hits]
        everything = (*extra, *ddx_items, *facts, *passages)
        counts = self.embedder.count_tokens([i.text for i in everything])
        sized = [
            EvidenceItem(**{**i.__dict__, "tokens": n})  # type: ignore[arg-type]
            for i, n in zip(everything, counts, strict=True)
        ]
        e, a = len(extra), len(extra) + len(ddx_items)
        b = a + len(facts)
        stated = [f for f in sized[a:b] if f.meta["type"] != CO_MENTIONED]
        lists, rounds = [stated, sized[b:]], [self.facts_per_passage, 1]
        if not facts_lead(facts):  # the literature answers first
            lists, rounds = lists[::-1], rounds[::-1]
        # a co-mention says only that two things were written about together: after the passages that say how
        lists, rounds = [*lists, [f for f in sized[a:b] if f.meta["type"] == CO_MENTIONED]], [*rounds, 1]
        if ddx_items:
            lists, rounds = [sized[e:a], *lists], [len(ddx_items), *rounds]
        if extra:
            lists, rounds = [sized[:e], *lists], [1, *rounds]
        bundle = fill_budget(lists, budget, per_round=rounds)
        timings["bundle"] = time.perf_counter() - t
        return Retrieval(
            query=query,
            linked=linked,
            bundle=bundle,
            paths=graph.paths,
            entities=graph.entities,
            timings=timings,
            differential=differential,
            unknown=list(links.unknown),
            unrelated=[c.label for c in concepts] if unjoined and not hits else [],
            unjoined_passages=len(unjoined),
            readings=readings,
            suggestion=tried[0] if tried else None,
            suggestion_tried=bool(tried),
        )

    def suggested_condition(self, query: str, linked: Sequence[LinkedEntity]) -> Suggestion | None:
        """For a question that asks for a relation and names no disease ("what can he take for falling
        asleep during the day"): the condition holding such facts nearest to its words, to suggest."""
        asked = asked_relations(query)
        if not asked or any(e.category == CONDITION and e.method != "vector" for e in linked):
            return None
        ei = self.graph_evidence.entity_index
        found = suggested_condition(self.graph, ei, self.embedder, query, asked)
        return None if found is None or found[0] in {e.id for e in linked} else found

    def _read_as_conditions(
        self,
        query: str,
        linked: list[LinkedEntity],
        groups: list[tuple[str, ...]],
        asked: Sequence[Asked],
        tried: list[Suggestion | None],
    ) -> list[ConditionReading]:
        """For a question whose linked entities hold no fact it asks for (no gathered fact answers):
        each mention that links no disease also links the condition nearest to it that holds one; failing
        that, the condition the whole question describes, when the graph corroborates it (``linked`` and
        ``groups`` gain it; ``tried`` the suggestion compared)."""
        by_id = {e.id: e for e in linked if not e.negated}
        readings: list[ConditionReading] = []
        for n, group in enumerate(groups):
            finding = by_id.get(group[0])
            if (
                finding is None
                or finding.method == "session"
                or any(by_id[i].category == CONDITION for i in group if i in by_id)
            ):
                continue
            ei = self.graph_evidence.entity_index
            reading = nearest_condition(self.graph, ei, self.embedder, finding.id, finding.name, asked)
            if reading is not None and reading.condition not in {r.condition for r in readings}:
                groups[n] = (*group, reading.condition)
                linked.append(self._condition_linked(reading, finding.mention))
                readings.append(reading)
        if not readings and (described := self._read_description(query, linked, groups, tried)):
            readings.append(described)
        if not readings and (ranked := self._read_findings(linked, groups, asked)):
            readings.append(ranked)
        return readings

    def _read_findings(
        self, linked: list[LinkedEntity], groups: list[tuple[str, ...]], asked: Sequence[Asked]
    ) -> ConditionReading | None:
        """The disease the differential ranks first for the phenotypes the question names, read as the
        condition it is (it, its entry's class, an entry the same as one of these or of their name
        holding the asked facts: Orphanet's Kawasaki disease is the Disease Ontology's); none when the
        first holds none."""
        if self.phenotypes is None:
            return None
        terms, excluded = _phenotypes(linked)
        if len(terms) < DIFFERENTIAL_MIN_TERMS:
            return None
        index = self.phenotypes()
        case = index.read_case(terms, excluded)
        if len(case.observed) < DIFFERENTIAL_MIN_TERMS:
            return None
        ranked = index.rank(case.observed, case.excluded, top_k=self.differential_depth)
        entries = group_ranked(ranked, disease_classes(self.graph, (c.disease for c in ranked)), 1)
        if not entries:
            return None
        first = entries[0]
        heads = [*([first.group] if first.group else []), *(c.disease for _, c in first.members)]
        names = self._names(heads)  # and the entries of other ontologies that bear their names
        heads += [i for h in heads for i in self.linker.lexicon.namesakes(names.get(h, h), [h], self._names)]
        condition = holding_condition(self.graph, list(dict.fromkeys(heads)), asked)
        if condition is None:
            return None
        matched = list(dict.fromkeys(q for q, _, similarity in first.lead.matches if similarity > 0))
        finding = next((e for e in linked if e.id in matched and not e.negated), None)
        if finding is None:
            return None
        found = self.graph.get_entities([condition, *matched])
        names = tuple(found[q].name for q in matched if q in found)
        share = round(len(matched) / len(case.observed), 4)  # of the findings, those the disease matched
        reading = ConditionReading(finding.id, finding.name, condition, found[condition].name, share, ranked_for=names)
        n = next(n for n, group in enumerate(groups) if finding.id in group)
        groups[n] = (*groups[n], condition)
        linked.append(self._condition_linked(reading, finding.mention))
        return reading

    def _read_description(
        self, query: str, linked: list[LinkedEntity], groups: list[tuple[str, ...]], tried: list[Suggestion | None]
    ) -> ConditionReading | None:
        """The condition a question describes ("wheezing attacks and a tight chest": asthma), when it
        is the clearly nearest and one of the findings linked is among its features."""
        near = self.suggested_condition(query, linked)
        tried.append(near)
        if near is None:
            return None
        findings = {e.id: e for e in linked if not e.negated and e.category != CONDITION and e.method != "session"}
        found = corroborating_feature(self.graph, near.id, list(findings))
        if found is None:
            return None
        finding = findings[found[0]]
        reading = ConditionReading(finding.id, finding.name, near.id, near.name, near.cosine, feature=found[1])
        n = next((n for n, group in enumerate(groups) if finding.id in group), None)
        if n is None:
            groups.append((finding.id, near.id))
        else:
            groups[n] = (*groups[n], near.id)
        linked.append(self._condition_linked(reading, finding.mention))
        return reading

    @staticmethod
    def _condition_linked(reading: ConditionReading, mention: str) -> LinkedEntity:
        return LinkedEntity(reading.condition, reading.name, CONDITION, mention, "condition", reading.cosine)

    def _wants_differential(self, query: str, linked: list[LinkedEntity]) -> bool:
        if self.phenotypes is None or not asks_for_diagnosis(query):
            return False
        return len(_phenotypes(linked)[0]) >= DIFFERENTIAL_MIN_TERMS

    def _differential(
        self, query: str, linked: list[LinkedEntity], entities: dict[str, Entity]
    ) -> tuple[list[DifferentialEntry], list[EvidenceItem]]:
        """Diseases ranked for the question's phenotypes (those it negates, "no hypotonia", excluded) and
        the patient it describes (sex and age: ``kg/differential/patient.py``),
        gathered into the answer's entries (``kg/differential/groups.py``: one disease's subtypes and
        descriptions together). An entry's evidence is its lead disease's ``HAS_PHENOTYPE`` facts that
        matched (best match first), then each other member's best match. The items come in
        rounds, each entry's first item in entry order, then each one's second...: a reader of the first
        items, or a budget that cuts the last, meets every entry rather than the first one's every match."""
        assert self.phenotypes is not None
        terms, excluded = _phenotypes(linked)
        index = self.phenotypes()
        case = index.read_case(terms, excluded)  # phenotypic abnormalities only ("autosomal dominant" is none)
        observed, excluded = case.observed, case.excluded
        if len(observed) < DIFFERENTIAL_MIN_TERMS:
            return [], []
        # a gene named as such (its symbol as written, "a de novo STXBP1 variant") narrows the ranking
        genes, _ = index.known_genes(e.name for e in linked if e.category == "Gene" and e.mention.strip() == e.name)
        patient = read_patient(query)
        ranked = index.rank(observed, excluded, top_k=self.differential_depth, genes=genes, patient=patient)
        entries = group_ranked(ranked, disease_classes(self.graph, (c.disease for c in ranked)), self.differential_top)
        shown = [c for e in entries for _, c in e.members]
        groups = {e.group for e in entries if e.group}
        missing = {c.disease for c in shown} | {t for c in shown for _, t, _ in c.matches} | {*observed, *excluded}
        entities.update(self.graph.get_entities((missing | groups) - entities.keys()))
        name = {i: e.name for i, e in entities.items()}
        among = f" associated with {', '.join(genes)}" if genes else ""
        per_entry: list[list[EvidenceItem]] = []
        for number, entry in enumerate(entries, 1):
            group = {"ddx_group": entry.group, "ddx_group_name": name.get(entry.group)} if entry.group else {}
            matched: list[list[EvidenceItem]] = []
            for rank, c in entry.members:
                if entry.group:  # one of an entry's several diseases: what unites them says the rest
                    context = f"differential rank {rank}{among}, listed under {name.get(entry.group, entry.group)}"
                else:
                    context = (
                        f"differential rank {rank} of the diseases{among} annotated in HPO for the observed phenotypes"
                    )
                items: list[EvidenceItem] = []
                matched.append(items)
                for q, term, similarity in sorted(c.matches, key=lambda m: -m[2]):
                    if similarity <= 0:
                        continue
                    observed_as = "" if q == term else f" (observed: {name.get(q, q)})"
                    pmids = index.pmids.get((c.disease, term), [])  # those of this annotation, not the disease's
                    items.append(
                        EvidenceItem(
                            id=fact_citation_id(c.disease, "HAS_PHENOTYPE", term),
                            kind="kg",
                            text=f"{name.get(c.disease, c.disease)} has phenotype {name.get(term, term)}{observed_as}; "
                            + context,
                            title=f"{name.get(c.disease, c.disease)} has phenotype {name.get(term, term)}",
                            url=source_url(pmids[0]) if pmids else source_url(c.disease),
                            score=round(float(similarity), 4),
                            meta={
                                "subject": c.disease,
                                "type": "HAS_PHENOTYPE",
                                "object": term,
                                "subject_name": name.get(c.disease),
                                "object_name": name.get(term),
                                "negated": False,
                                "source": "differential",
                                "pmids": pmids[:3],
                                "seed": c.disease,
                                "on_path": False,
                                "ddx_entry": number,  # the entry of the answer (its diseases: ddx_disease_rank)
                                "ddx_disease_rank": rank,
                                "ddx_disease_genes": c.genes[:3],
                                "ddx_score": round(c.score, 4),
                                "ddx_genes": genes,
                                "ddx_excluded": [name.get(t, t) for t in excluded],
                                "ddx_patient": patient.describe(),
                                "observed": q,
                                **group,
                            },
                        )
                    )
            lead, others = (matched[0], matched[1:]) if matched else ([], [])
            per_entry.append([*lead, *(m[0] for m in others if m)])  # the lead's matches, each other's best
        rounds = itertools.zip_longest(*per_entry)
        return entries, [item for round_ in rounds for item in round_ if item is not None]


def facts_lead(facts: Sequence[EvidenceItem]) -> bool:
    """Whether the graph's facts come before the passages: when one answers the question or links its
    entities on a path. A co-mention on a path says only that two things were written about together,
    and a passage that states how comes first (it answers only when the question asks for it: "is X
    mentioned with Y?")."""
    return any(f.meta["answers"] or (f.meta["on_path"] and f.meta["type"] != CO_MENTIONED) for f in facts)


def _phenotypes(linked: list[LinkedEntity]) -> tuple[list[str], list[str]]:
    """The HPO terms a question states and those it negates (a term both stated and negated is stated)."""
    return by_polarity((e.id, e.negated) for e in linked if e.id.startswith("HP:"))
