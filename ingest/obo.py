"""A streaming OBO 1.2/1.4 reader and its mapping to entities and relations. Written here rather than taken
from pronto/obonet because a malformed stanza must be reported with its file and line and skipped while
the rest loads; those libraries stop at the first syntax error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ingest.sources import open_text
from ingest.summary import Problem
from ingest.writer import Complete
from kg.curie import CurieError, normalize_curie
from kg.model import Entity, Relation

__all__ = ["OboTerm", "OboHeader", "read_obo", "obo_items", "CATEGORY_BY_PREFIX", "relation_type_name"]

# Default entity category of an ontology's terms, by id prefix.
CATEGORY_BY_PREFIX = {
    "DOID": "Disease",
    "MONDO": "Disease",
    "ORPHA": "Disease",
    "HP": "Phenotype",
    "SYMP": "Symptom",
    "UBERON": "Anatomy",
    "GO": "BiologicalProcess",
    "CHEBI": "Chemical",
    "CL": "CellType",
}
LINKING_SCOPES = ("EXACT", "RELATED")
#: A synonym of this type (HPO's ``layperson``: "Small head" BROAD layperson for Microcephaly) is how
#: patients name the term: kept whatever its scope, so questions in everyday words link.
LAY_SYNONYM_TYPE = "layperson"

_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"\s*(.*)$')
_SYNONYM_SCOPE = re.compile(r"^(EXACT|RELATED|NARROW|BROAD)\b")


@dataclass
class OboHeader:
    format_version: str | None = None
    data_version: str | None = None
    ontology: str | None = None


@dataclass
class OboTerm:
    id: str
    line: int
    name: str | None = None
    definition: str | None = None
    synonyms: list[tuple[str, str]] = field(default_factory=list)  # (text, scope)
    xrefs: list[str] = field(default_factory=list)
    alt_ids: list[str] = field(default_factory=list)
    is_a: list[str] = field(default_factory=list)
    relationships: list[tuple[str, str]] = field(default_factory=list)  # (type, target)
    obsolete: bool = False
    replaced_by: list[str] = field(default_factory=list)
    consider: list[str] = field(default_factory=list)
    namespace: str | None = None


def _strip_comment(value: str) -> str:
    """Drop a trailing ``! comment`` outside quotes, and trailing ``{modifiers}`` (set off by whitespace:
    ``tris{2-aminoethyl}`` is a name, not a name and a modifier) of an unquoted value."""
    in_quote = escaped = False
    for i, ch in enumerate(value):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            in_quote = not in_quote
        elif ch == "!" and not in_quote and (i == 0 or value[i - 1].isspace()):
            value = value[:i]
            break
    value = value.strip()
    if value.endswith("}") and not value.startswith('"'):
        start = value.rfind("{")
        if start > 0 and value[start - 1].isspace():
            value = value[:start].strip()
    return value


_ESCAPES = {"n": "\n", "t": "\t", "W": " "}  # OBO's escapes; any other escaped character is itself


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)


def _unquote(value: str) -> tuple[str, str] | None:
    m = _QUOTED.match(value)
    if not m:
        return None
    return _unescape(m.group(1)), m.group(2)


def _stanza_header(line: str) -> str | None:
    """``[Term]`` of a stanza line (stripped), also with a trailing ``! comment``; None for another line."""
    head = line.split("!", 1)[0].strip() if line.startswith("[") else ""
    return head if head.startswith("[") and head.endswith("]") else None


def read_obo(path: str | Path) -> tuple[OboHeader, Iterator[OboTerm | Problem]]:
    """Return the header and an iterator of problems and terms (``[Term]`` stanzas), read as it goes.
    A term whose stanzas are several (OBO allows it) is one term, its tags gathered from all of them:
    so problems come as they are found, and the terms once the file is read."""
    path = Path(path)
    handle = open_text(path)
    header = OboHeader()
    lines = iter(enumerate(handle, start=1))
    pending: tuple[int, str] | None = None
    lineno = 0
    broken: Problem | None = None
    try:
        for lineno, raw in lines:
            line = raw.strip()
            if line.startswith("["):
                pending = (lineno, _stanza_header(line) or line)
                break
            if ":" in line:
                tag, _, value = line.partition(":")
                value = value.strip()
                if tag == "format-version":
                    header.format_version = value
                elif tag == "data-version":
                    header.data_version = value
                elif tag == "ontology":
                    header.ontology = value
    except (OSError, EOFError) as exc:  # a truncated or damaged gzip file
        broken = _unreadable(path, lineno, exc)

    def stanzas() -> Iterator[OboTerm | Problem]:
        try:
            if broken is not None:
                yield broken
                return
            if pending is None:
                return
            start, kind = pending
            tags: list[tuple[int, str, str]] = []
            terms: dict[str, OboTerm] = {}  # by id, in the order of their first stanzas

            def finish() -> Iterator[Problem]:
                if kind != "[Term]":
                    return
                ids = [(lineno, value) for lineno, tag, value in tags if tag == "id"]
                if not ids:
                    yield Problem(file=str(path), line=start, message="[Term] stanza without an id: skipped")
                    return
                for lineno, other in ids[1:]:
                    yield Problem(file=str(path), line=lineno, message=f"{ids[0][1]}: a second id {other!r}: ignored")
                term = terms.get(ids[0][1])
                if term is not None:  # OBO allows it (the stanzas are one term), but it is usually a slip
                    message = f"{term.id}: a second stanza of the term (the first at line {term.line}): merged"
                    yield Problem(file=str(path), line=start, message=message)
                else:
                    term = terms[ids[0][1]] = OboTerm(id=ids[0][1], line=start)
                for lineno, tag, value in tags:
                    problem = _apply(term, tag, value) if tag != "id" else None
                    if problem:
                        yield Problem(file=str(path), line=lineno, message=f"{term.id}: {problem}")

            lineno = start
            try:
                for lineno, raw in lines:
                    line = raw.strip()
                    if not line or line.startswith("!"):
                        continue
                    if stanza := _stanza_header(line):
                        yield from finish()
                        kind, start, tags = stanza, lineno, []
                        continue
                    if kind != "[Term]":
                        continue
                    tag, sep, value = line.partition(":")
                    if not sep or not tag or " " in tag:
                        message = f"malformed line (expected 'tag: value'): {line[:80]!r}"
                        yield Problem(file=str(path), line=lineno, message=message)
                        continue
                    tags.append((lineno, tag, _strip_comment(value.strip())))
            except (OSError, EOFError) as exc:  # a truncated or damaged gzip file: the stanza being read is dropped
                yield _unreadable(path, lineno, exc)
                yield from terms.values()
                return
            yield from finish()
            yield from terms.values()
        finally:
            handle.close()

    return header, stanzas()


def _unreadable(path: Path, lineno: int, exc: BaseException) -> Problem:
    return Problem(file=str(path), line=lineno + 1, message=f"unreadable after this line, reading stopped: {exc}")


def _apply(term: OboTerm, tag: str, value: str) -> str | None:
    """Set one tag on ``term``; return a problem description for a value that cannot be read."""
    if tag == "name":
        if term.name is not None and term.name != _unescape(value):
            return f"a second name {value!r}: ignored"
        term.name = _unescape(value)
    elif tag == "def":
        parsed = _unquote(value)
        if parsed is None:
            return "def is not a quoted string: ignored"
        if term.definition is not None and term.definition != parsed[0]:
            return "a second def: ignored"
        term.definition = parsed[0]
    elif tag == "synonym":
        parsed = _unquote(value)
        if parsed is None:
            return "synonym is not a quoted string: ignored"
        text, rest = parsed
        m = _SYNONYM_SCOPE.match(rest)
        scope = m.group(1) if m else "RELATED"
        lay = m is not None and rest[m.end() :].split(" [", 1)[0].split() == [LAY_SYNONYM_TYPE]
        term.synonyms.append((text, "LAYPERSON" if lay else scope))
    elif tag == "xref":
        term.xrefs.append(value.split(" ", 1)[0])
    elif tag == "alt_id":
        term.alt_ids.append(value)
    elif tag == "is_a":
        term.is_a.append(value.split(" ", 1)[0])
    elif tag == "relationship":
        parts = value.split()
        if len(parts) < 2:
            return f"relationship without a target: {value!r}"
        term.relationships.append((parts[0], parts[1]))
    elif tag == "is_obsolete":
        term.obsolete = term.obsolete or value.lower() == "true"
    elif tag == "replaced_by":
        term.replaced_by.append(value)
    elif tag == "consider":
        term.consider.append(value)
    elif tag == "namespace":
        term.namespace = value
    return None


def relation_type_name(name: str) -> str:
    """``part_of`` -> ``PART_OF``; ``RO:0002200`` -> ``RO_0002200``."""
    cleaned = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()
    return cleaned if cleaned and cleaned[0].isalpha() else f"REL_{cleaned}"


def release_of(data_version: str) -> tuple[str, str | None]:
    """The release a ``data-version`` header names, and the subset file it is of (None for the whole
    ontology): ``hp/releases/2025-01-16`` -> ``("2025-01-16", None)``,
    ``doid/releases/2026-07-31/subsets/DO_rare_slim.obo`` -> ``("2026-07-31", "DO_rare_slim")``;
    without a date, the last path segment."""
    date = re.search(r"\d{4}-\d{2}-\d{2}", data_version)
    if date is None:
        return data_version.rstrip("/").rsplit("/", 1)[-1], None
    subset = re.search(r"/subsets/([^/]+?)(?:\.obo)?$", data_version)
    return date.group(0), subset.group(1) if subset else None


def source_of(name: str, data_version: str | None) -> tuple[str, str | None]:
    """The source of an OBO file's edges and, for a dated release, the family of its releases:
    ``doid`` + ``doid/releases/2016-06-24`` -> ``("doid:2016-06-24", "doid:")``; a subset is a
    family of its own, ``("doid/DO_rare_slim:2026-07-31", "doid/DO_rare_slim:")``. A name that holds a
    ``:`` already is the source as given."""
    if not data_version or ":" in name:
        return name, None
    release, subset = release_of(data_version)
    family = f"{name}/{subset}:" if subset else f"{name}:"
    return family + release, family if re.fullmatch(r"\d{4}-\d{2}-\d{2}", release) else None


def obo_items(
    path: str | Path,
    source: str,
    category: str | None = None,
    prefix: str | None = None,
    categorize: dict[str, str] | None = None,
    replace: bool = False,
) -> Iterator[Entity | Relation | Complete | Problem | tuple[str, int]]:
    """Entities, relations, problems and ``("terms", 1)``-style counts for one OBO file: a term's
    definition is its description, EXACT, RELATED and layperson synonyms its synonyms, xrefs and alt ids its xrefs
    (obsolete terms kept, flagged); ``is_a`` becomes ``IS_A``, a typed ``relationship:`` its UPPER_SNAKE
    type, ``replaced_by`` ``REPLACED_BY``.

    ``prefix`` keeps only terms of that prefix (others are counted as foreign); ``category`` names the
    entities' category (default: by prefix, else ``Concept``); ``categorize`` overrides it per id.
    ``source`` gets the file's release appended when it has one (``source_of``). ``replace``: the file
    is the whole of that source, and the edges of it the file no longer states end, with those of
    the older releases of the same file (``Complete``).
    """
    header, stream = read_obo(path)
    src, family = source_of(source, header.data_version)
    if replace:
        yield Complete(src, family)
    wanted = prefix.upper() if prefix else None
    relations: list[Relation] = []
    for item in stream:
        if isinstance(item, Problem):
            yield item
            continue
        term = item
        try:
            curie = normalize_curie(term.id)
        except CurieError as exc:
            yield Problem(file=str(path), line=term.line, message=f"term id: {exc}")
            continue
        term_prefix = curie.split(":", 1)[0]
        if wanted and term_prefix != wanted:
            yield ("foreign terms skipped", 1)
            continue
        yield ("terms", 1)
        xrefs: list[str] = []
        for x in [*term.xrefs, *term.alt_ids]:
            try:
                xrefs.append(normalize_curie(x))
            except CurieError:
                yield ("unreadable xrefs ignored", 1)
        try:
            entity = Entity(
                id=curie,
                name=term.name or curie,
                category=(categorize or {}).get(curie) or category or CATEGORY_BY_PREFIX.get(term_prefix, "Concept"),
                synonyms=[text for text, scope in term.synonyms if scope in (*LINKING_SCOPES, "LAYPERSON")],
                description=term.definition,
                xrefs=[x for x in xrefs if x != curie],
                sources=[src],
                obsolete=term.obsolete,
            )
        except ValidationError as exc:
            yield Problem(file=str(path), line=term.line, message=f"{curie}: {exc.errors()[0]['msg']}")
            continue
        yield entity
        if term.obsolete:
            yield ("obsolete terms", 1)
        edges = [("IS_A", t) for t in term.is_a]
        edges += [(relation_type_name(rt), t) for rt, t in term.relationships]
        edges += [("REPLACED_BY", t) for t in term.replaced_by]
        for rel_type, target in edges:
            try:
                relations.append(Relation(subject=curie, type=rel_type, object=target, source=src))
            except ValidationError as exc:
                yield Problem(
                    file=str(path), line=term.line, message=f"{curie} {rel_type} {target}: {exc.errors()[0]['msg']}"
                )
    # Relations after all terms, so that every endpoint of this file is already an entity.
    yield from relations
