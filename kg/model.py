"""The data model shared by every store, loader and API: entities, relations, paths, write summaries."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kg.curie import normalize_curie

__all__ = [
    "SAME_AS",
    "DOCUMENT",
    "PASSAGE",
    "TEXT_CATEGORIES",
    "IMAGE",
    "IMAGING_STUDY",
    "RECORD_CATEGORIES",
    "RECORD_TYPES",
    "NOT_VOCABULARY",
    "HAS_PASSAGE",
    "MENTIONS",
    "CO_MENTIONED",
    "HAS_MESH_TERM",
    "Entity",
    "Relation",
    "Neighbour",
    "Subgraph",
    "GraphPath",
    "GraphStats",
    "WriteSummary",
    "Direction",
    "name_key",
    "utc_now",
    "format_time",
]

SAME_AS = "SAME_AS"
# Text in the graph: a Document (PMID:123) HAS_PASSAGE Passages (PMID:123#s4) that MENTION entities.
DOCUMENT, PASSAGE = "Document", "Passage"
TEXT_CATEGORIES = frozenset({DOCUMENT, PASSAGE})
HAS_PASSAGE, MENTIONS, CO_MENTIONED, HAS_MESH_TERM = "HAS_PASSAGE", "MENTIONS", "CO_MENTIONED", "HAS_MESH_TERM"
# Patients' records: an indexed Image (IMG:...) in its ImagingStudy (STUDY:...), with its modality, body
# part and report. Statements about one patient's study, not knowledge about the world: never linked
# in text, never facts of an answer.
IMAGE, IMAGING_STUDY = "Image", "ImagingStudy"
RECORD_CATEGORIES = frozenset({IMAGE, IMAGING_STUDY})
HAS_IMAGE, HAS_MODALITY, DEPICTS, HAS_REPORT = "HAS_IMAGE", "HAS_MODALITY", "DEPICTS", "HAS_REPORT"
RECORD_TYPES = frozenset({HAS_IMAGE, HAS_MODALITY, DEPICTS, HAS_REPORT})
# What a text is never linked to: text itself and records
NOT_VOCABULARY = TEXT_CATEGORIES | RECORD_CATEGORIES
Direction = Literal["out", "in", "both"]

_REL_TYPE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_CATEGORY = re.compile(r"^[A-Z][A-Za-z0-9]{0,63}$")
_WS = re.compile(r"\s+")


def utc_now() -> datetime:
    return datetime.now(UTC)


def format_time(value: datetime) -> str:
    """Timestamps are stored as fixed-width ISO-8601 UTC strings, so they sort as text in any store."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def name_key(text: str) -> str:
    """The lookup key of a name or synonym: case-folded, white space collapsed."""
    return _WS.sub(" ", text).strip().casefold()


def _dedupe(values: list[str]) -> list[str]:
    seen: dict[str, None] = {}
    for value in values:
        value = value.strip()
        if value and value not in seen:
            seen[value] = None
    return list(seen)


class Entity(BaseModel):
    """A node of the knowledge graph, identified by a CURIE."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    category: str = "Concept"
    synonyms: list[str] = Field(default_factory=list)
    description: str | None = None
    xrefs: list[str] = Field(default_factory=list)
    sources: list[str] = Field(default_factory=list)
    obsolete: bool = False
    created_at: datetime | None = None

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return normalize_curie(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        value = _WS.sub(" ", value).strip()
        if not value:
            raise ValueError("name must not be empty")
        return value

    @field_validator("category")
    @classmethod
    def _category(cls, value: str) -> str:
        if not _CATEGORY.match(value):
            raise ValueError(f"category {value!r} must be CamelCase letters/digits, e.g. Disease")
        return value

    @field_validator("synonyms", "sources")
    @classmethod
    def _lists(cls, value: list[str]) -> list[str]:
        return _dedupe(value)

    @field_validator("xrefs")
    @classmethod
    def _xrefs(cls, value: list[str]) -> list[str]:
        return _dedupe([normalize_curie(x) for x in value])

    @field_validator("description")
    @classmethod
    def _description(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    def merged_with(self, newer: Entity) -> Entity:
        """This stored entity updated by a newer statement of it: scalar fields take the newer
        non-empty value, lists are unions (stored order first), ``created_at`` is kept. A name the
        newer statement replaces stays a synonym (two sources that name a disease differently both
        stay findable by the linker and by name search), unless it differs only in case or was the
        id standing in for a name."""
        name = newer.name or self.name
        former = [self.name] if self.name.casefold() not in (name.casefold(), self.id.casefold()) else []
        return Entity(
            id=self.id,
            name=name,
            category=newer.category if newer.category != "Concept" else self.category,
            synonyms=[*self.synonyms, *former, *newer.synonyms],
            description=newer.description or self.description,
            xrefs=[*self.xrefs, *newer.xrefs],
            sources=[*self.sources, *newer.sources],
            obsolete=self.obsolete or newer.obsolete,
            created_at=self.created_at or newer.created_at,
        )

    def same_content(self, other: Entity) -> bool:
        return self.model_dump(exclude={"created_at"}) == other.model_dump(exclude={"created_at"})


class Relation(BaseModel):
    """A directed, typed, bi-temporal edge. ``valid_to`` is ``None`` while the fact is current."""

    model_config = ConfigDict(frozen=True)

    subject: str
    type: str
    object: str
    source: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    negated: bool = False
    valid_from: datetime | None = None
    valid_to: datetime | None = None

    @field_validator("subject", "object")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        return normalize_curie(value)

    @field_validator("type")
    @classmethod
    def _type(cls, value: str) -> str:
        if not _REL_TYPE.match(value):
            raise ValueError(f"relation type {value!r} must be UPPER_SNAKE, e.g. HAS_PHENOTYPE")
        return value

    @field_validator("source")
    @classmethod
    def _source(cls, value: str) -> str:
        if "|" in value:  # the key's separator: "c|d" would make two facts one key
            raise ValueError(f"a relation's source cannot hold '|': {value!r}")
        return value.strip()

    @property
    def key(self) -> str:
        """Identity of the fact: one current edge per (subject, type, object, source)."""
        return f"{self.subject}|{self.type}|{self.object}|{self.source}"

    @property
    def is_current(self) -> bool:
        return self.valid_to is None


class Neighbour(BaseModel):
    entity: Entity
    relation: Relation
    direction: Literal["out", "in"]


class Subgraph(BaseModel):
    entities: list[Entity]
    relations: list[Relation]


class GraphPath(BaseModel):
    """A simple path: ``nodes[i]`` and ``nodes[i+1]`` are joined by ``relations[i]`` (either direction)."""

    nodes: list[str]
    relations: list[Relation]

    @property
    def cost(self) -> int:
        """Hops that count toward the bound: every hop but ``SAME_AS``."""
        return sum(1 for r in self.relations if r.type != SAME_AS)

    @property
    def length(self) -> int:
        return len(self.relations)


class GraphStats(BaseModel):
    backend: str
    entities: int
    relations: int
    invalidated_relations: int
    categories: dict[str, int]
    relation_types: dict[str, int]


class WriteSummary(BaseModel):
    """What an upsert did; ``skipped`` maps a reason to how many records it applied to."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    invalidated: int = 0
    skipped: dict[str, int] = Field(default_factory=dict)

    def __iadd__(self, other: WriteSummary) -> WriteSummary:
        self.added += other.added
        self.updated += other.updated
        self.unchanged += other.unchanged
        self.invalidated += other.invalidated
        for reason, n in other.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
        return self
