"""Row conversion shared by the adapters: both stores keep the same flat property set for an entity
and a relation, and read it back into the model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kg.model import Entity, Relation, format_time, name_key

__all__ = [
    "BRIEF_ENTITY_COLUMNS",
    "entity_to_row",
    "key_rows",
    "relation_to_row",
    "row_to_entity",
    "row_to_relation",
    "same_statement",
]

# A neighbour's columns in the bulk edge reads (``BaseGraphStore.edge_rows``): what analytics of many edges
# need of the entity at the other end, without its text.
BRIEF_ENTITY_COLUMNS = ("id", "name", "category")


def entity_to_row(entity: Entity, now: str) -> dict[str, Any]:
    return {
        "id": entity.id,
        "name": entity.name,
        "name_key": name_key(entity.name),
        "category": entity.category,
        "synonyms": list(entity.synonyms),
        "synonym_keys": sorted({name_key(s) for s in entity.synonyms}),
        "description": entity.description,
        "xrefs": list(entity.xrefs),
        "sources": list(entity.sources),
        "obsolete": entity.obsolete,
        "created_at": format_time(entity.created_at) if entity.created_at else now,
    }


def row_to_entity(row: dict[str, Any]) -> Entity:
    return Entity.model_validate(
        {
            "id": row["id"],
            "name": row["name"],
            "category": row.get("category") or "Concept",
            "synonyms": row.get("synonyms") or [],
            "description": row.get("description"),
            "xrefs": row.get("xrefs") or [],
            "sources": row.get("sources") or [],
            "obsolete": bool(row.get("obsolete")),
            "created_at": row.get("created_at"),
        }
    )


def relation_to_row(rel: Relation, now: str) -> dict[str, Any]:
    return {
        "key": rel.key,
        "type": rel.type,
        "subject": rel.subject,
        "object": rel.object,
        "source": rel.source,
        "evidence": json.dumps(rel.evidence, sort_keys=True, ensure_ascii=False, default=str),
        "confidence": rel.confidence,
        "negated": rel.negated,
        "valid_from": format_time(rel.valid_from) if rel.valid_from else now,
        "valid_to": format_time(rel.valid_to) if rel.valid_to else None,
    }


def row_to_relation(row: dict[str, Any]) -> Relation:
    evidence = row.get("evidence")
    return Relation.model_validate(
        {
            "subject": row["subject"],
            "type": row["type"],
            "object": row["object"],
            "source": row.get("source") or "",
            "evidence": json.loads(evidence) if evidence else {},
            "confidence": row.get("confidence"),
            "negated": bool(row.get("negated")),
            "valid_from": row.get("valid_from"),
            "valid_to": row.get("valid_to"),
        }
    )


def key_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, str]]:
    """The identity of relation rows (subject, object, key): what key-based statements match on."""
    return [{"subject": r["subject"], "object": r["object"], "key": r["key"]} for r in rows]


def same_statement(stored: dict[str, Any], incoming: dict[str, Any]) -> bool:
    """Two relation rows of one key say the same (timestamps aside)."""
    return (
        (stored.get("evidence") or "{}") == incoming["evidence"]
        and stored.get("confidence") == incoming["confidence"]
        and bool(stored.get("negated")) == incoming["negated"]
    )
