"""A finding named where the question asks for what only a condition has: "what helps with panic
attacks" links HPO's Panic attack, a phenotype no drug treats in the graph, while PharmacotherapyDB
records the drugs of the Disease Ontology's panic disorder. The condition whose name is nearest in
meaning to the finding's joins its mention, and the answer says so ("panic attacks" read as panic
disorder): a reading offered in the open, never a silent substitution.

Only for a mention that links no disease, only when nothing the question links holds a fact of the
asked relation, and only at a cosine of names (the finding's name against the condition's name and
synonyms) of :data:`CONDITION_MIN` or more: "restless legs" -> restless legs syndrome (0.93), "patchy
alopecia" -> alopecia areata (0.82), while "fever" -> allergic rhinitis (0.64, through "hay fever") and
"headache" -> migraine (0.77) are not read so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.question_intent import Asked

__all__ = ["CONDITION", "CONDITION_MIN", "ConditionReading", "holds", "nearest_condition"]

#: the least cosine between a finding's name and a condition's name (or synonym) for one to be read as
#: the other
CONDITION_MIN = 0.8
CANDIDATES = 10  # the entity index's nearest entities to the finding, of which the conditions are tried
CONDITION = "Disease"


@dataclass(frozen=True)
class ConditionReading:
    """``finding`` (an entity the question linked) read as ``condition``, which holds the asked facts."""

    finding: str
    finding_name: str
    condition: str
    name: str
    cosine: float


def holds(graph: BaseGraphStore, entity_id: str, asked: Sequence[Asked]) -> bool:
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
    conditions = [e for i, e in graph.get_entities(hits).items() if e.category == CONDITION and holds(graph, i, asked)]
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
