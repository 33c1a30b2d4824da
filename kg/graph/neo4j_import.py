"""A medkg graph written as the CSV files of ``neo4j-admin database import full``: the fast way to fill an
empty Neo4j with a large graph built on the embedded store (ontologies and literature loads, by Ray or
not), instead of medkg's batched Cypher writes; benchmarks/neo4j_import.py measures both. The files hold
every entity (``Entity`` plus its category as labels) and every edge with its history, with the
properties the Neo4j adapter writes, so the imported graph reads back as the one it came from."""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from kg.graph.base import BaseGraphStore
from kg.progress import progress_bar

__all__ = ["ImportFiles", "ImportFilesError", "write_import_files"]

# Unit separator between array elements (and labels): a character no ontology text holds; a value that
# does is refused, naming it, rather than split.
ARRAY_DELIMITER = "\x1f"
ENTITY_COLUMNS = [
    ("id", "id:ID(Entity)"),
    ("name", "name"),
    ("name_key", "name_key"),
    ("category", "category"),
    ("synonyms", "synonyms:string[]"),
    ("synonym_keys", "synonym_keys:string[]"),
    ("description", "description"),
    ("xrefs", "xrefs:string[]"),
    ("sources", "sources:string[]"),
    ("obsolete", "obsolete:boolean"),
    ("created_at", "created_at"),
]
RELATION_COLUMNS = [
    ("subject", ":START_ID(Entity)"),
    ("object", ":END_ID(Entity)"),
    ("type", ":TYPE"),
    ("key", "key"),
    ("current", "current:boolean"),
    ("source", "source"),
    ("evidence", "evidence"),
    ("confidence", "confidence:double"),
    ("negated", "negated:boolean"),
    ("valid_from", "valid_from"),
    ("valid_to", "valid_to"),
]


class ImportFilesError(ValueError):
    """The graph holds a value the import files cannot carry."""


@dataclass
class ImportFiles:
    """What ``write_import_files`` wrote, and the ``neo4j-admin`` command that imports it."""

    directory: Path
    entities: int = 0
    relations: int = 0
    multiline: bool = False  # a value spans lines: neo4j-admin must be told (it then parses in one thread)
    seconds: float = 0.0
    files: dict[str, Path] = field(default_factory=dict)

    def command(self, database: str = "neo4j", admin: str = "neo4j-admin") -> list[str]:
        """``neo4j-admin database import full`` of these files into ``database`` (which must be stopped;
        an existing store of that name is replaced)."""
        return [
            *shlex.split(admin),
            "database",
            "import",
            "full",
            f"--nodes={self.files['entities']}",
            f"--relationships={self.files['relations']}",
            "--array-delimiter=U+001F",
            f"--multiline-fields={'true' if self.multiline else 'false'}",
            "--overwrite-destination=true",
            database,
        ]


def write_import_files(store: BaseGraphStore, directory: Path, page: int = 5000, progress: bool = True) -> ImportFiles:
    """Write ``entities.csv`` and ``relations.csv`` of ``store``'s whole graph into ``directory``. Each
    file appears under its name only when complete (written as ``.part`` first), so a stopped export
    leaves no file that looks whole; run it again to write them anew."""
    directory.mkdir(parents=True, exist_ok=True)
    result = ImportFiles(directory=directory)
    started = time.perf_counter()
    names = {"entities": directory / "entities.csv", "relations": directory / "relations.csv"}
    parts = {kind: path.with_name(path.name + ".part") for kind, path in names.items()}
    total = store.entity_count()
    try:
        with (
            parts["entities"].open("w", encoding="utf-8", newline="") as entities,
            parts["relations"].open("w", encoding="utf-8", newline="") as relations,
            progress_bar(total=total, desc="export", unit=" entities", disable=not progress) as bar,
        ):
            _write_line(entities, [h for _, h in ENTITY_COLUMNS] + [":LABEL"], result, quote=False)
            _write_line(relations, [h for _, h in RELATION_COLUMNS], result, quote=False)
            for entity_rows, relation_rows in store.dump(page):
                for row in entity_rows:
                    _write_line(entities, _entity_values(row), result)
                for row in relation_rows:
                    _write_line(relations, _relation_values(row), result)
                result.entities += len(entity_rows)
                result.relations += len(relation_rows)
                bar.update(len(entity_rows))
            for stream in (entities, relations):
                stream.flush()
                os.fsync(stream.fileno())
    except BaseException:
        for part in parts.values():
            part.unlink(missing_ok=True)
        raise
    for kind, path in names.items():
        os.replace(parts[kind], path)
    result.files = names
    result.seconds = time.perf_counter() - started
    return result


def _entity_values(row: dict[str, Any]) -> list[Any]:
    category = row.get("category") or "Concept"
    labels = ["Entity"] if category == "Entity" else ["Entity", category]
    return [_value(row.get(column), row) for column, _ in ENTITY_COLUMNS] + [_array(labels, row)]


def _relation_values(row: dict[str, Any]) -> list[Any]:
    row = {**row, "current": row.get("valid_to") is None}
    return [_value(row.get(column), row) for column, _ in RELATION_COLUMNS]


def _value(value: Any, row: dict[str, Any]) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return _array([str(v) for v in value], row) if value else None
    if isinstance(value, float | int):
        return repr(float(value))
    return str(value)


def _array(values: list[str], row: dict[str, Any]) -> str:
    for v in values:
        if ARRAY_DELIMITER in v:
            raise ImportFilesError(f"{row.get('id') or row.get('key')}: {v!r} holds U+001F, the files' array delimiter")
    return ARRAY_DELIMITER.join(values)


def _write_line(stream: TextIO, values: list[str | None], result: ImportFiles, quote: bool = True) -> None:
    """One CSV line: a value in double quotes (inner quotes doubled), a missing one empty (no property)."""
    cells = []
    for v in values:
        if v is None:
            cells.append("")
            continue
        if "\n" in v or "\r" in v:
            result.multiline = True
        cells.append('"' + v.replace('"', '""') + '"' if quote else v)
    stream.write(",".join(cells) + "\n")
