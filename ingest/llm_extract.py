"""Typed triple extraction from text through an LLM, and its merge into the graph: :class:`TripleExtractor`
asks an OpenAI-compatible server (:class:`~kg.llm.ChatClient`) for a passage's entities and relations under
a strict JSON schema and validates the reply; :func:`merge_extraction` writes them into the graph.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema, field_validator
from pydantic.json_schema import SkipJsonSchema

from kg.curie import try_normalize_curie
from kg.entity_index import EntityIndex, embedding_text
from kg.graph.base import BaseGraphStore
from kg.llm import ChatClient, LLMError, json_schema_format, unfenced
from kg.model import Entity, Relation, WriteSummary, name_key

__all__ = [
    "ENTITY_TYPES",
    "RELATION_TYPES",
    "SYSTEM_PROMPT",
    "DroppedRelation",
    "ExtractedEntity",
    "ExtractedRelation",
    "Extraction",
    "ExtractionError",
    "MergeResult",
    "ResolvedEntity",
    "TripleExtractor",
    "extraction_schema",
    "merge_extraction",
    "slug_id",
]

ENTITY_TYPES: tuple[str, ...] = (
    "Disease", "Phenotype", "Symptom", "Drug", "Chemical", "Gene", "Protein", "Procedure", "Anatomy", "Pathway",
)  # fmt: skip
# SAME_AS is deliberately absent: retrieval treats it as a free hop, so only curated xrefs may assert it.
RELATION_TYPES: tuple[str, ...] = (
    "TREATS", "PALLIATES", "PREVENTS", "CAUSES", "INCREASES_RISK_OF", "CONTRAINDICATED_IN", "INTERACTS_WITH",
    "TARGETS", "HAS_PHENOTYPE", "HAS_SYMPTOM", "ASSOCIATED_WITH", "LOCATED_IN", "DIAGNOSES", "IS_A", "PART_OF",
)  # fmt: skip

SYSTEM_PROMPT = """\
You extract a biomedical knowledge graph from one passage of text. Answer with JSON only.

entities: every disease, phenotype, symptom, drug, chemical, gene, protein, procedure, anatomical
structure or pathway that takes part in a relation you extract.
- name: as written in the passage (spell out an abbreviation the passage defines).
- type: one of {entity_types}.
- description: one sentence saying what the entity is, written from the passage's context.
- id: a CURIE such as DOID:9352, HP:0001250, DRUGBANK:DB00331, NCBIGene:4313 or MESH:D003924, only
  if you are certain of it; otherwise null.

relations: facts the passage itself states (not background knowledge), between listed entities.
- subject, object: entity names exactly as listed in entities.
- type: one of {relation_types}.
- negated: true when the passage says the relation does NOT hold ("X does not cause Y",
  "no association between X and Y"); otherwise false.
- confidence: 0 to 1, how firmly the passage states the fact (hedged or speculative: below 0.5).
"""

# Categories that may name one concept across sources (an LLM's "Disease" is often an HPO "Phenotype").
_COMPATIBLE: tuple[frozenset[str], ...] = (
    frozenset({"Disease", "Phenotype", "Symptom", "SideEffect", "Finding"}),
    frozenset({"Drug", "Chemical", "Compound"}),
    frozenset({"Gene", "Protein"}),
)
_NON_ALNUM = re.compile(r"[^A-Za-z0-9]+")


class ExtractionError(LLMError):
    """The LLM gave no usable extraction for a passage; the caller reports the passage and continues."""

    def __init__(self, message: str, passage_id: str, status: int = 502) -> None:
        super().__init__(f"passage {passage_id}: {message}", status)
        self.passage_id = passage_id


# ---- what the LLM returns ----------------------------------------------------------------------


class ExtractedEntity(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str = Field(description="The entity as named in the passage.")
    type: str = Field(description="Its category, CamelCase, e.g. Disease, Drug, Gene.")
    description: str = Field(default="", description="One sentence on what it is, from the passage's context.")
    id: str | None = Field(default=None, description="A CURIE if certain (e.g. DOID:9352), else null.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = " ".join(value.split())
        if not value:
            raise ValueError("entity name must not be empty")
        return value

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        words = [w for w in _NON_ALNUM.split(value) if w]
        camel = "".join(w[0].upper() + (w[1:].lower() if w.isupper() else w[1:]) for w in words)
        return camel if camel[:1].isalpha() else "Concept"

    @field_validator("description")
    @classmethod
    def _description(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("id")
    @classmethod
    def _id(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        return try_normalize_curie(value) if value else None


class ExtractedRelation(BaseModel):
    model_config = ConfigDict(extra="ignore")

    subject: str = Field(description="Entity name exactly as listed in entities.")
    type: str = Field(description="Relation type, UPPER_SNAKE.")
    object: str = Field(description="Entity name exactly as listed in entities.")
    negated: bool = Field(default=False, description="True when the passage says the relation does not hold.")
    confidence: Annotated[
        float | None,
        WithJsonSchema({"type": "number", "minimum": 0, "maximum": 1, "description": "0 to 1."}),
    ] = None

    @field_validator("subject", "object")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return " ".join(value.split())

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        """Sanitised to UPPER_SNAKE ("treats" -> TREATS); the vocabulary is checked by the extractor."""
        return _NON_ALNUM.sub("_", value).strip("_").upper()

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, value: Any) -> Any:
        return min(max(value, 0.0), 1.0) if isinstance(value, int | float) and not isinstance(value, bool) else value


class DroppedRelation(BaseModel):
    subject: str
    type: str
    object: str
    reason: str


class Extraction(BaseModel):
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relations: list[ExtractedRelation] = Field(default_factory=list)
    # Filled in by the extractor, never asked of the LLM:
    dropped: SkipJsonSchema[list[DroppedRelation]] = Field(default_factory=list)
    model: SkipJsonSchema[str | None] = None


def _strict(node: Any) -> Any:
    """OpenAI strict mode: every property required, no extra properties, no defaults or titles."""
    if isinstance(node, list):
        return [_strict(v) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("title", "default"):
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _strict(schema) for name, schema in value.items()}
        else:
            out[key] = _strict(value)
    if out.get("type") == "object" and "properties" in out:
        out["required"] = list(out["properties"])
        out["additionalProperties"] = False
    return out


def extraction_schema(
    entity_types: Sequence[str] = ENTITY_TYPES, relation_types: Sequence[str] = RELATION_TYPES
) -> dict[str, Any]:
    """The strict JSON schema of :class:`Extraction`, with the type vocabularies as enums."""
    schema = _strict(Extraction.model_json_schema())
    schema["$defs"]["ExtractedEntity"]["properties"]["type"]["enum"] = list(entity_types)
    schema["$defs"]["ExtractedRelation"]["properties"]["type"]["enum"] = list(relation_types)
    return schema


# ---- the extractor -----------------------------------------------------------------------------


class TripleExtractor:
    """Entities and relations of a passage from an OpenAI-compatible chat-completions server, constrained
    by a strict JSON schema built from the pydantic models above; relation types are checked against a
    fixed vocabulary, and relations whose endpoints are not among the extracted entities are dropped
    and reported."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        *,
        entity_types: Sequence[str] = ENTITY_TYPES,
        relation_types: Sequence[str] = RELATION_TYPES,
    ) -> None:
        self.model = model
        self.chat = ChatClient(base_url, model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
        self.relation_types = frozenset(relation_types)
        self.entity_types = frozenset(entity_types)
        self.system_prompt = SYSTEM_PROMPT.format(
            entity_types=", ".join(entity_types), relation_types=", ".join(relation_types)
        )
        self.response_format = json_schema_format("extraction", extraction_schema(entity_types, relation_types))

    def extract(self, text: str, passage_id: str) -> Extraction:
        """The passage's entities and relations; raises :class:`ExtractionError` when there are none to be had."""
        if not text.strip():
            return Extraction(model=self.model)
        messages = [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": text}]
        try:
            content = self.chat.complete(messages, self.response_format).content
        except LLMError as exc:
            raise ExtractionError(str(exc), passage_id, exc.status) from exc
        return self.parse(content, passage_id)

    def parse(self, content: str, passage_id: str) -> Extraction:
        """Validate a reply: unknown relation types, entities of a type not asked for (the schema's enum
        is all that holds a server to the types, and many ignore it) and relations between unlisted
        entities are dropped, the relations with a reason."""
        try:
            raw = Extraction.model_validate_json(unfenced(content))
        except ValidationError as exc:
            if any(e["type"] == "json_invalid" for e in exc.errors()):
                raise ExtractionError(f"the LLM reply is not valid JSON: {content[:200]!r}", passage_id) from None
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors(include_url=False)[:5]
            )
            message = f"the LLM reply does not match the extraction schema: {problems}"
            raise ExtractionError(message, passage_id) from None
        entities: dict[str, ExtractedEntity] = {}
        off_type: dict[str, str] = {}  # name key -> a type not asked for
        for entity in raw.entities:
            if entity.type in self.entity_types:
                entities.setdefault(name_key(entity.name), entity)
            else:
                off_type.setdefault(name_key(entity.name), entity.type)
        relations, dropped = [], []
        for rel in raw.relations:
            reason = None
            ends = (("subject", rel.subject), ("object", rel.object))
            wrong = [(role, name) for role, name in ends if name_key(name) in off_type.keys() - entities.keys()]
            if rel.type not in self.relation_types:
                reason = f"unknown relation type {rel.type!r}"
            elif wrong:
                role, name = wrong[0]
                reason = f"{role} {name!r} is of type {off_type[name_key(name)]!r}, not one of the entity types"
            elif name_key(rel.subject) not in entities:
                reason = f"subject {rel.subject!r} is not among the extracted entities"
            elif name_key(rel.object) not in entities:
                reason = f"object {rel.object!r} is not among the extracted entities"
            if reason:
                dropped.append(DroppedRelation(subject=rel.subject, type=rel.type, object=rel.object, reason=reason))
            else:
                relations.append(rel)
        return Extraction(entities=list(entities.values()), relations=relations, dropped=dropped, model=self.model)


# ---- the merge ---------------------------------------------------------------------------------


Rule = Literal["id", "name", "synonym", "embedding", "slug", "new"]


class ResolvedEntity(BaseModel):
    """How an extracted entity was resolved: ``new`` = added; the others name the rule that reused one."""

    name: str
    type: str
    id: str
    rule: Rule
    score: float | None = None


class MergeResult(BaseModel):
    passage_id: str
    entities: list[ResolvedEntity] = Field(default_factory=list)
    relations: WriteSummary = Field(default_factory=WriteSummary)
    dropped: list[DroppedRelation] = Field(default_factory=list)

    @property
    def reused(self) -> dict[str, int]:
        """How many extracted entities each rule resolved to an existing entity."""
        counts: dict[str, int] = {}
        for entity in self.entities:
            if entity.rule != "new":
                counts[entity.rule] = counts.get(entity.rule, 0) + 1
        return counts

    @property
    def entities_added(self) -> list[str]:
        return [e.id for e in self.entities if e.rule == "new"]


def slug_id(name: str) -> str:
    """``MEDKG:<slug>``: lowercase ASCII, runs of other characters as one ``-``."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    return "MEDKG:" + (_NON_ALNUM.sub("-", ascii_name.lower()).strip("-") or "unnamed")


def _compatible(a: str, b: str) -> bool:
    return a == b or "Concept" in (a, b) or any(a in group and b in group for group in _COMPATIBLE)


def _resolve(
    store: BaseGraphStore,
    entity: ExtractedEntity,
    index: EntityIndex | None,
    similarity: float,
    added: dict[str, Entity],
) -> ResolvedEntity:
    def found(entity_id: str, rule: Rule, score: float | None = None) -> ResolvedEntity:
        return ResolvedEntity(name=entity.name, type=entity.type, id=entity_id, rule=rule, score=score)

    if entity.id and (stored := store.get_entity(entity.id)) and _compatible(entity.type, stored.category):
        return found(stored.id, "id")
    matches = store.find_entities(entity.name)
    for candidate in sorted(matches, key=lambda e: (e.category != entity.type, e.id)):
        if _compatible(entity.type, candidate.category):
            return found(candidate.id, "name" if name_key(candidate.name) == name_key(entity.name) else "synonym")
    if index is not None:
        probe = Entity(id="MEDKG:probe", name=entity.name, category=entity.type, description=entity.description or None)
        hits = [(i, s) for i, s in index.search(embedding_text(probe), k=5) if s >= similarity]
        stored_hits = store.get_entities(i for i, _ in hits)
        for entity_id, score in hits:
            if entity_id in stored_hits and _compatible(entity.type, stored_hits[entity_id].category):
                return found(entity_id, "embedding", round(float(score), 4))
    entity_id = slug_id(entity.name)
    existing = added.get(entity_id) or store.get_entity(entity_id)
    if existing is not None:
        if _compatible(entity.type, existing.category):
            return found(entity_id, "slug")
        entity_id = f"{entity_id}-{entity.type.lower()}"  # one name, two kinds of thing
    return found(entity_id, "new")


def merge_extraction(
    store: BaseGraphStore,
    extraction: Extraction,
    passage_id: str,
    *,
    entity_index: EntityIndex | None = None,
    similarity: float = 0.85,
    source: str = "llm-extraction",
    model_name: str | None = None,
) -> MergeResult:
    """Write one passage's extraction into the graph (Mem0^g style): each extracted entity is resolved to
    an existing graph entity (exact id, exact name/synonym, then the entity vector index above a
    similarity floor) or added as ``MEDKG:<slug>``; each relation is added, restated (its evidence
    passages merged in place) or, when its ``negated`` flag contradicts the current edge, written as a
    new edge while the store invalidates the old one. Nothing is ever deleted. New entities are not
    embedded here: run ``entity_index.update(store)`` after a batch of passages."""
    result = MergeResult(passage_id=passage_id, dropped=list(extraction.dropped))
    model_name = model_name or extraction.model or "unknown"
    added: dict[str, Entity] = {}
    ids: dict[str, str] = {}
    for extracted in extraction.entities:
        resolved = _resolve(store, extracted, entity_index, similarity, added)
        if resolved.rule == "new":
            added[resolved.id] = Entity(
                id=resolved.id,
                name=extracted.name,
                category=extracted.type,
                description=extracted.description or None,
                sources=[source],
            )
        result.entities.append(resolved)
        ids.setdefault(name_key(extracted.name), resolved.id)

    def drop(rel: ExtractedRelation, reason: str) -> None:
        result.dropped.append(DroppedRelation(subject=rel.subject, type=rel.type, object=rel.object, reason=reason))

    statements: dict[tuple[str, str, str], ExtractedRelation] = {}
    contradictory: set[tuple[str, str, str]] = set()
    for rel in extraction.relations:
        subject, object_ = ids.get(name_key(rel.subject)), ids.get(name_key(rel.object))
        if subject is None or object_ is None:
            drop(rel, "an endpoint is not among the extracted entities")
        elif subject == object_:
            drop(rel, f"subject and object both resolve to {subject}")
        elif (key := (subject, rel.type, object_)) in statements and statements[key].negated != rel.negated:
            contradictory.add(key)
            drop(rel, "the passage states this fact both ways")
        elif key not in statements or (rel.confidence or 0) > (statements[key].confidence or 0):
            statements[key] = rel

    relations = []
    for (subject, rel_type, object_), rel in statements.items():
        if (subject, rel_type, object_) in contradictory:
            drop(rel, "the passage states this fact both ways")
            continue
        passages, confidence = [passage_id], rel.confidence
        current = [
            r
            for r in store.relations(subject=subject, object=object_, type=rel_type, include_invalid=False)
            if r.source == source
        ]
        if current and current[0].negated == rel.negated:  # restated: merge the evidence
            passages = list(dict.fromkeys([*current[0].evidence.get("passages", []), passage_id]))
            if current[0].confidence is not None:
                confidence = max(current[0].confidence, confidence or 0.0)
        try:
            relations.append(
                Relation(
                    subject=subject,
                    type=rel_type,
                    object=object_,
                    source=source,
                    evidence={"passages": passages, "model": model_name},
                    confidence=confidence,
                    negated=rel.negated,
                )
            )
        except ValidationError as exc:
            drop(rel, f"invalid relation: {exc.errors()[0]['msg']}")
    with store.batch():
        if added:
            store.upsert_entities(added.values())
        if relations:
            result.relations = store.upsert_relations(relations)
    return result
