"""A medkg graph written as the CSV files of ``neo4j-admin database import full``: the fast way to fill an
empty Neo4j with a large graph built on the embedded store (ontologies and literature loads, by Ray or
not), instead of medkg's batched Cypher writes; benchmarks/neo4j_import.py measures both. The files hold
every entity (``Entity`` plus its category as labels) and every edge with its history, with the
properties the Neo4j adapter writes, so the imported graph reads back as the one it came from."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kg.graph.base import BaseGraphStore
from kg.progress import progress_bar

__all__ = ["ImportFiles", "ImportFilesError", "write_import_files"]

# Unit separator between array elements (and labels): a character no ontology text holds; a value that
# does is refused, naming it, rather than split.
ARRAY_DELIMITER = "\x1f"
# (row key, header, kind): kinds are str, strs (an array of strings), bool and float
ENTITY_COLUMNS = [
    ("id", "id:ID(Entity)", "str"),
    ("name", "name", "str"),
    ("name_key", "name_key", "str"),
    ("category", "category", "str"),
    ("synonyms", "synonyms:string[]", "strs"),
    ("synonym_keys", "synonym_keys:string[]", "strs"),
    ("description", "description", "str"),
    ("xrefs", "xrefs:string[]", "strs"),
    ("sources", "sources:string[]", "strs"),
    ("obsolete", "obsolete:boolean", "bool"),
    ("created_at", "created_at", "str"),
    ("labels", ":LABEL", "strs"),
]
RELATION_COLUMNS = [
    ("subject", ":START_ID(Entity)", "str"),
    ("object", ":END_ID(Entity)", "str"),
    ("type", ":TYPE", "str"),
    ("key", "key", "str"),
    ("current", "current:boolean", "bool"),
    ("source", "source", "str"),
    ("evidence", "evidence", "str"),
    ("confidence", "confidence:double", "float"),
    ("negated", "negated:boolean", "bool"),
    ("valid_from", "valid_from", "str"),
    ("valid_to", "valid_to", "str"),
]


class ImportFilesError(ValueError):
    """The graph holds a value the import files cannot carry."""


@dataclass
class ImportFiles:
    """What ``write_import_files`` wrote, and the ``neo4j-admin`` command that imports it."""

    files: dict[str, Path]
    entities: int = 0
    relations: int = 0
    multiline: bool = False  # a value spans lines: neo4j-admin must be told (it then parses in one thread)
    seconds: float = 0.0

    def command(self, database: str = "neo4j") -> list[str]:
        """``neo4j-admin database import full`` of these files into ``database`` (which must be stopped;
        an existing store of that name is replaced)."""
        return [
            "neo4j-admin",
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
    names = {"entities": directory / "entities.csv", "relations": directory / "relations.csv"}
    result = ImportFiles(files=names)
    started = time.perf_counter()
    parts = {kind: path.with_name(path.name + ".part") for kind, path in names.items()}
    total = store.entity_count()
    try:
        with (
            parts["entities"].open("w", encoding="utf-8", newline="") as entities,
            parts["relations"].open("w", encoding="utf-8", newline="") as relations,
            progress_bar(total=total, desc="export", unit=" entities", disable=not progress) as bar,
        ):
            entities.write(",".join(h for _, h, _ in ENTITY_COLUMNS) + "\n")
            relations.write(",".join(h for _, h, _ in RELATION_COLUMNS) + "\n")
            for entity_rows, relation_rows in store.dump(page):
                for row in entity_rows:
                    category = row.get("category") or "Concept"
                    labels = ["Entity"] if category == "Entity" else ["Entity", category]
                    entities.write(_line({**row, "labels": labels}, ENTITY_COLUMNS, result))
                for row in relation_rows:
                    relations.write(_line({**row, "current": row.get("valid_to") is None}, RELATION_COLUMNS, result))
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
    result.seconds = time.perf_counter() - started
    return result


def _line(row: dict[str, Any], columns: list[tuple[str, str, str]], result: ImportFiles) -> str:
    """One CSV line: a value in double quotes (inner quotes doubled), a missing one (or an empty array)
    left empty, which neo4j-admin reads as no property."""
    cells = []
    for name, _, kind in columns:
        value = row.get(name)
        if value is None or (kind == "strs" and not value):
            cells.append("")
        elif kind == "bool":
            cells.append("true" if value else "false")
        elif kind == "float":
            cells.append(repr(float(value)))
        else:
            text = _array(value, row) if kind == "strs" else str(value)
            cells.append('"' + text.replace('"', '""') + '"')
    line = ",".join(cells)
    if not result.multiline and ("\n" in line or "\r" in line):
        result.multiline = True
    return line + "\n"


def _array(values: list[Any], row: dict[str, Any]) -> str:
    texts = [str(v) for v in values]
    for text in texts:
        if ARRAY_DELIMITER in text:
            where = row.get("id") or row.get("key")
            raise ImportFilesError(f"{where}: {text!r} holds U+001F, the files' array delimiter")
    return ARRAY_DELIMITER.join(texts)
