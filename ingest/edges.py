"""TSV/CSV edge and node lists into entities and relations through a small declarative mapping (YAML;
the format is described on :class:`Mapping`, the bundled ones are ingest/mappings/*.yaml).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ingest.sources import open_text
from ingest.summary import Problem
from ingest.writer import Complete, Item
from kg.curie import CurieError, normalize_curie
from kg.errors import InvalidInput
from kg.model import Entity, Relation

__all__ = ["Mapping", "load_mapping", "edge_items", "bundled_mappings"]


class MappingError(InvalidInput):
    """A mapping file that cannot be used; the message names the file and the field."""


class Value(BaseModel):
    """``{column: C}`` (optionally ``map`` from raw to value, ``prefix`` for bare ids, ``split`` to make a
    list) or ``{value: V}``."""

    model_config = ConfigDict(extra="forbid")
    column: str | None = None
    value: str | None = None
    map: dict[str, str] | None = None
    prefix: str | None = None
    split: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Value:
        if (self.column is None) == (self.value is None):
            raise ValueError("give exactly one of 'column' or 'value'")
        return self

    def raw(self, row: dict[str, str]) -> str | None:
        if self.value is not None:
            return self.value
        text = (row.get(self.column or "") or "").strip()
        if self.map is not None:
            return self.map.get(text)
        return text or None

    def values(self, row: dict[str, str]) -> list[str]:
        text = self.raw(row)
        if text is None:
            return []
        return [v.strip() for v in text.split(self.split)] if self.split else [text]


class NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Value | None = None  # absent for an edge's endpoint node (the endpoint id is used)
    name: Value
    category: Value = Field(default_factory=lambda: Value(value="Concept"))
    synonyms: Value | None = None
    description: Value | None = None
    xrefs: Value | None = None


class EdgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    subject: Value
    object: Value
    type: Value
    negated: Value | None = None
    subject_node: NodeSpec | None = None
    object_node: NodeSpec | None = None
    evidence: list[str] = Field(default_factory=list)


class Mapping(BaseModel):
    """The columns that make entities (``nodes``) and relations (``edges``)::

        name: pharmacotherapydb
        source: pharmacotherapydb:1.0
        delimiter: "\\t"
        edges:
          - subject: {column: drugbank_id}              # ids go through the CURIE normaliser
            object: {column: doid_id}
            type: {column: category, map: {DM: TREATS, SYM: PALLIATES, NOT: TREATS}}
            negated: {column: category, map: {NOT: "true"}}
            subject_node: {name: {column: drug}, category: {value: Drug}}   # create/merge endpoint entities
            object_node: {name: {column: disease}, category: {value: Disease}}
            evidence: [category, n_curators, n_resources]

    ``{file}`` in ``source`` stands for the file's name (``source_for``), for a mapping of several files
    each the whole of a source of its own (``doid-reports/{file}``). ``former_sources``: names the source
    had before; a ``--replace`` load also ends their current edges, but leaves their entity statements."""

    model_config = ConfigDict(extra="forbid")
    name: str
    source: str
    former_sources: list[str] = Field(default_factory=list)
    description: str | None = None
    delimiter: str = "\t"
    nodes: list[NodeSpec] = Field(default_factory=list)
    edges: list[EdgeSpec] = Field(default_factory=list)

    def source_for(self, path: str | Path) -> str:
        """The source of the statements read from ``path``: ``source`` with ``{file}`` replaced by the
        file's name without its suffixes (``MESHinDO.tsv.gz`` -> ``MESHinDO``)."""
        return self.source.replace("{file}", Path(path).name.split(".", 1)[0])


def bundled_mappings() -> dict[str, Path]:
    folder = resources.files("ingest") / "mappings"
    return {Path(str(p)).stem: Path(str(p)) for p in folder.iterdir() if str(p).endswith(".yaml")}


def load_mapping(name_or_path: str | Path) -> Mapping:
    """A bundled mapping by name (``medkg ingest edges --mapping pharmacotherapydb``) or a YAML file."""
    path = Path(name_or_path)
    if not path.exists():
        bundled = bundled_mappings()
        if str(name_or_path) not in bundled:
            raise MappingError(
                f"no mapping file {name_or_path!r} and no bundled mapping of that name "
                f"(bundled: {', '.join(sorted(bundled))})"
            )
        path = bundled[str(name_or_path)]
    try:
        return Mapping.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")))
    except yaml.YAMLError as exc:
        raise MappingError(f"{path}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MappingError(f"{path}: {where}: {first['msg']}") from None


def _entity(spec: NodeSpec, entity_id: str, row: dict[str, str], source: str) -> Entity:
    name = spec.name.raw(row) or entity_id
    return Entity(
        id=entity_id,
        name=name,
        category=spec.category.raw(row) or "Concept",
        synonyms=spec.synonyms.values(row) if spec.synonyms else [],
        description=spec.description.raw(row) if spec.description else None,
        xrefs=[x for x in (spec.xrefs.values(row) if spec.xrefs else []) if x],
        sources=[source],
    )


def _curie(value: Value, row: dict[str, str]) -> str | None:
    raw = value.raw(row)
    return normalize_curie(raw, default_prefix=value.prefix) if raw else None


def edge_items(path: str | Path, mapping: Mapping, replace: bool = False) -> Iterator[Item]:
    """Entities and relations for every row of ``path``; relations come after all entities.
    ``replace``: the file is the whole of its source (``Mapping.source_for``), and the edges of it the
    file no longer states end (``Complete``), as do the current edges of the ``former_sources``."""
    path = Path(path)
    source = mapping.source_for(path)
    relations: list[Relation] = []
    first_line: dict[str, tuple[int, bool]] = {}  # relation key -> the line that first stated it, negated?
    if replace:
        yield Complete(source)
        for former in mapping.former_sources:
            yield Complete(former, entities=False)
    with open_text(path) as handle:
        rows = _read_rows(handle, mapping.delimiter, path)
        fieldnames: list[str] = []
        for first in rows:
            if isinstance(first, Problem):
                raise MappingError(f"{path}: the header cannot be read: {first.message}")
            fieldnames = _trim([f.strip() for f in first[1]])  # "name \t" and a trailing tab are "name"
            break
        needed = {v.column for spec in [*mapping.nodes, *mapping.edges] for v in _values(spec) if v.column}
        needed |= {c for e in mapping.edges for c in e.evidence}
        missing = needed - set(fieldnames)
        if missing:
            raise MappingError(
                f"{path}: columns {sorted(missing)} named by mapping {mapping.name!r} are not in the "
                f"header {fieldnames or None}"
            )
        for item in rows:
            if isinstance(item, Problem):
                yield item
                continue
            lineno, values = item
            if not any(v.strip() for v in values):  # a line of white space: nothing to read
                continue
            if len(values) > len(fieldnames):  # empty fields after the last column: a trailing tab
                values = values[: len(fieldnames)] + _trim(values[len(fieldnames) :])
            if len(values) != len(fieldnames):
                yield Problem(file=str(path), line=lineno, message="wrong number of columns: row skipped")
                continue
            row = dict(zip(fieldnames, values, strict=True))
            yield ("rows", 1)
            try:
                for spec in mapping.nodes:
                    entity_id = _curie(spec.id, row) if spec.id else None
                    if entity_id:
                        yield _entity(spec, entity_id, row, source)
                for spec in mapping.edges:
                    subject, obj, rel_type = _curie(spec.subject, row), _curie(spec.object, row), spec.type.raw(row)
                    if not (subject and obj and rel_type):
                        yield ("rows without an edge (empty id or unmapped type)", 1)
                        continue
                    if spec.subject_node:
                        yield _entity(spec.subject_node, subject, row, source)
                    if spec.object_node:
                        yield _entity(spec.object_node, obj, row, source)
                    negated = (spec.negated.raw(row) or "").lower() in ("true", "1", "yes") if spec.negated else False
                    evidence = {c: row[c] for c in spec.evidence if row.get(c)}
                    relation = Relation(
                        subject=subject, type=rel_type, object=obj, source=source, evidence=evidence,
                        negated=negated,
                    )  # fmt: skip
                    # a mapping that can deny a fact: one fact stated and denied, the later row is the one kept
                    earlier = first_line.setdefault(relation.key, (lineno, negated)) if spec.negated else None
                    if earlier is not None and earlier[1] != negated:
                        said, before = ("denied", "stated") if negated else ("stated", "denied")
                        message = (
                            f"{subject} {rel_type} {obj} {said} here, {before} at line {earlier[0]}: this row is kept"
                        )
                        yield Problem(file=str(path), line=lineno, message=message)
                    relations.append(relation)
            except (CurieError, ValidationError) as exc:
                message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
                yield Problem(file=str(path), line=lineno, message=message)
    yield from relations


class _Lines:
    """A text file's lines, remembering the ones the csv reader took for the row it is reading."""

    def __init__(self, handle: Iterator[str]) -> None:
        self._handle = handle
        self.count = 0
        self.taken: list[str] = []

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._handle)
        self.count += 1
        self.taken.append(line)
        return line

    def take(self) -> tuple[int, list[str]]:
        """The first line number and the lines of the row just read."""
        lines, self.taken = self.taken, []
        return self.count - len(lines) + 1, lines


def _read_rows(handle: Iterator[str], delimiter: str, path: Path) -> Iterator[tuple[int, list[str]] | Problem]:
    """(line, fields) of each non-empty row, the header first. A quoted field may span lines, but a row
    that cannot be parsed (a field over the csv module's size limit, a NUL byte) or that spans lines
    with the wrong number of fields (a stray quote that swallowed the lines after it) is read again
    line by line: a bad line is reported, and never costs the lines after it."""
    lines = _Lines(handle)
    reader = csv.reader(lines, delimiter=delimiter)
    width: int | None = None
    while True:
        error: csv.Error | None = None
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            row, error = [], exc
        except (OSError, EOFError) as exc:  # a truncated or damaged gzip file: what was read stays
            message = f"unreadable after this line, reading stopped: {exc}"
            yield Problem(file=str(path), line=lines.count - len(lines.taken) + 1, message=message)
            return
        start, taken = lines.take()
        if error is None and (len(taken) <= 1 or width is None or len(row) == width):
            if row:
                width = len(row) if width is None else width
                yield start, row
            continue
        for number, line in enumerate(taken, start=start):
            try:
                fields = next(csv.reader([line], delimiter=delimiter), [])
            except csv.Error as exc:
                yield Problem(file=str(path), line=number, message=f"unreadable row ({exc}): skipped")
                continue
            if fields:
                width = len(fields) if width is None else width
                yield number, fields


def _trim(fields: list[str]) -> list[str]:
    """``fields`` without the empty (or white space) fields at its end."""
    end = len(fields)
    while end and not fields[end - 1].strip():
        end -= 1
    return fields[:end]


def _values(spec: NodeSpec | EdgeSpec) -> list[Value]:
    found: list[Value] = []
    for field in spec.__class__.model_fields:
        value = getattr(spec, field)
        if isinstance(value, Value):
            found.append(value)
        elif isinstance(value, NodeSpec):
            found.extend(_values(value))
    return found
