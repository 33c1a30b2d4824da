"""A finding named where the question asks for what only a condition has: "what helps with panic
attacks" links HPO's Panic attack, a phenotype no drug treats in the graph, while PharmacotherapyDB
records the drugs of the Disease Ontology's panic disorder. The condition whose name is nearest in
meaning to the finding's joins its mention, and the answer says so ("panic attacks" read as panic
disorder): a reading offered in the open, never a silent substitution.

Only for a mention that links no disease, only when no fact gathered for the question answers it
(the retriever asks after gathering, so a question that is answered pays nothing), and only at a
cosine of names (the finding's name against the condition's name and synonyms) of
:data:`CONDITION_MIN` or more: "restless legs" -> restless legs syndrome (0.93), "patchy
alopecia" -> alopecia areata (0.82), while "fever" -> allergic rhinitis (0.64, through "hay fever") and
"headache" -> migraine (0.77) are not read so.

A question that describes a condition in its own words ("wheezing attacks and a tight chest") and
links none is compared, whole, with the conditions holding the asked facts: the nearest, when clearly
nearest, is read when the graph corroborates it (a finding the question names is a feature of the
condition, of a subtype of it or of an entry the same as one: asthma has the symptom wheezing), and
only suggested otherwise ("Did you mean narcolepsy?").

A question that names two findings or more and asks what treats them ("treatment for a child with a
high fever for days, red eyes, a strawberry tongue and peeling fingers") is read as the disease the
differential ranks first for them, when that disease (or an entry the same as it, by cross-reference
or by name) holds the asked facts; never as one ranked lower: a first-ranked disease without them
leaves the question unread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.model import SAME_AS
from kg.question_intent import Asked
from kg.retrieval.facts import FEATURE_TYPES

__all__ = [
    "CONDITION",
    "CONDITION_MIN",
    "ConditionReading",
    "Suggestion",
    "corroborating_feature",
    "holding_condition",
    "nearest_condition",
    "suggested_condition",
]

#: the least cosine between a finding's name and a condition's name (or synonym) for one to be read as
#: the other
CONDITION_MIN = 0.8
CANDIDATES = 10  # the entity index's nearest entities to the finding, of which the conditions are tried
CONDITION = "Disease"
#: a question that describes a condition in its own words ("falling asleep during the day") is compared
#: with each condition holding the asked facts (its entity vector: name and definition), when they are at
#: most POOL_MAX; the nearest is suggested when SUGGEST_MARGIN nearer than the next. Suggested, never
#: answered for: the same comparison puts migraine first for "headache" and narcolepsy for "insomnia".
POOL_MAX = 2000
SUGGEST_MARGIN = 0.1
#: a suggestion's corroboration reads the features of the condition, its direct subtypes and the entries
#: the same as these (at most HEADS_MAX of them), and a finding corroborates a feature it is, or is an
#: ancestor of within FEATURE_HOPS IS_A steps ("Tics" for Tourette's "Motor tics")
HEADS_MAX = 300
FEATURE_HOPS = 2


@dataclass(frozen=True)
class ConditionReading:
    """``finding`` (an entity the question linked) read as ``condition``, which holds the asked facts."""

    finding: str
    finding_name: str
    condition: str
    name: str
    cosine: float
    #: a reading of the whole question (a suggestion corroborated): the condition's feature it names
    feature: str | None = None
    #: a reading of the findings the question names (the disease ranked first for them): their names
    ranked_for: tuple[str, ...] = ()


class Suggestion(NamedTuple):
    """The condition nearest to a question's words, ``cosine`` to them."""

    id: str
    name: str
    cosine: float


def _holds(graph: BaseGraphStore, entity_id: str, asked: Sequence[Asked]) -> bool:
    """Whether the entity has a current fact of one of the asked relation types."""
    return bool(graph.neighbours(entity_id, rel_types=sorted({a.type for a in asked}), limit=1))


def nearest_condition(
    graph: BaseGraphStore,
    entity_index: EntityIndex,
    embedder: TextEmbedder,
    finding_id: str,
    finding_name: str,
    asked: Sequence[Asked],
) -> ConditionReading | None:
    """The condition that holds an asked fact and whose name or a synonym is nearest to
    ``finding_name``, when at :data:`CONDITION_MIN` or more."""
    hits = [i for i, _ in entity_index.search(finding_name, k=CANDIDATES) if i != finding_id]
    conditions = [e for i, e in graph.get_entities(hits).items() if e.category == CONDITION and _holds(graph, i, asked)]
    if not conditions:
        return None
    names = [(e, n) for e in conditions for n in (e.name, *e.synonyms)]
    vectors = np.asarray(embedder.encode([finding_name, *(n for _, n in names)]), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    cosines = vectors[1:] @ vectors[0]
    best = int(np.argmax(cosines))
    if cosines[best] < CONDITION_MIN:
        return None
    condition = names[best][0]
    return ConditionReading(finding_id, finding_name, condition.id, condition.name, round(float(cosines[best]), 4))


def suggested_condition(
    graph: BaseGraphStore, entity_index: EntityIndex, embedder: TextEmbedder, question: str, asked: Sequence[Asked]
) -> Suggestion | None:
    """The condition holding an asked fact nearest to the question's words, when it is clearly the
    nearest."""
    types = sorted({a.type for a in asked})
    pool = graph.holders(types, "object") | graph.holders(types, "subject") if types else set()
    if not pool or len(pool) > POOL_MAX:
        return None
    conditions = [e for e in graph.get_entities(pool).values() if e.category == CONDITION]
    if len(conditions) < 2:
        return None
    vectors, _ = entity_index.vectors(list(conditions))
    query = np.asarray(embedder.encode([question]), dtype=np.float32)[0]
    cosines = vectors @ (query / np.linalg.norm(query))
    first, second = np.argsort(-cosines)[:2]
    if cosines[first] - cosines[second] < SUGGEST_MARGIN:
        return None
    return Suggestion(conditions[first].id, conditions[first].name, round(float(cosines[first]), 4))


def holding_condition(graph: BaseGraphStore, disease_ids: Sequence[str], asked: Sequence[Asked]) -> str | None:
    """The first of ``disease_ids``, or of the entries the same as one of them (``SAME_AS``), that is a
    condition holding an asked fact: the Disease Ontology's entry of a disease, with its drugs, for the
    OMIM or Orphanet entry ranked for a patient's findings."""
    same = [row["id"] for _, _, row in graph.edge_rows(list(disease_ids), [SAME_AS], direction="both")]
    candidates = list(dict.fromkeys([*disease_ids, *same]))
    entities = graph.get_entities(candidates)
    for i in candidates:
        if i in entities and entities[i].category == CONDITION and _holds(graph, i, asked):
            return i
    return None


def corroborating_feature(graph: BaseGraphStore, condition_id: str, findings: Sequence[str]) -> tuple[str, str] | None:
    """``(finding id, feature name)``: the first of ``findings`` that is a feature (``HAS_PHENOTYPE``,
    ``HAS_SYMPTOM``) of the condition, of one of its direct subtypes or of an entry the same as one of
    these, or an ancestor of such a feature within :data:`FEATURE_HOPS` steps."""
    if not findings:
        return None
    heads = {condition_id} | {child["id"] for _, _, child in graph.edge_rows([condition_id], ["IS_A"], direction="in")}
    heads |= {other["id"] for _, _, other in graph.edge_rows(sorted(heads), [SAME_AS], direction="both")}
    if len(heads) > HEADS_MAX:
        return None
    features = {row["id"]: row["name"] for _, _, row in graph.edge_rows(sorted(heads), sorted(FEATURE_TYPES))}
    named = {f: f for f in features}  # each term reached -> the feature it was reached from
    frontier = set(features)
    for _ in range(FEATURE_HOPS):
        step = {}
        for term, _, parent in graph.edge_rows(sorted(frontier), ["IS_A"]):
            if parent["id"] not in named:
                step[parent["id"]] = named[term]
        named.update(step)
        frontier = set(step)
    for finding in findings:
        if finding in named:
            return finding, features[named[finding]]
    return None
