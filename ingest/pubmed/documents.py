"""Articles from JSON documents: a JSON object PMID -> record, a JSON list of records, or JSON Lines, in
the PubMedQA layout or as plain :class:`Article` fields. Each record is validated on its own: a bad one
becomes a :class:`Problem` with its line (and key), the rest loads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import IO, Any

from pydantic import ValidationError

from ingest.pubmed.model import Article, Author, MeshHeading, Section
from ingest.summary import Problem

__all__ = ["parse_documents", "looks_like_jsonl", "is_record"]

RECORD_KEYS = frozenset({"pmid", "title", "abstract", "sections", "contexts", "question"})
# Any field of a record: an object whose first key is one of these is a record, not PMID -> record.
FIELD_KEYS = RECORD_KEYS | {"labels", "meshes", "year", "journal", "mesh", "keywords", "doi", "authors", "kind"}
_YEAR = re.compile(r"\b(1[5-9]\d\d|2\d\d\d)\b")
_WS = " \t\r\n"
_DECODER = json.JSONDecoder()


def is_record(obj: Any) -> bool:
    """A single record (as opposed to an object PMID -> record)."""
    return isinstance(obj, dict) and any(str(k).lower() in RECORD_KEYS for k in obj)


def looks_like_jsonl(first: str, second: str | None) -> bool:
    """From a file's first two non-blank lines: one JSON value per line (JSONL), or one JSON document."""
    first = first.strip()
    if not first.startswith("{"):
        return False
    try:
        obj = json.loads(first)
    except ValueError:
        # A broken first record of a JSONL file, or the first line of a pretty-printed object.
        return second is not None and second.lstrip().startswith("{")
    return second is not None or is_record(obj)


def parse_documents(stream: IO[str], origin: str, jsonl: bool | None = None) -> Iterator[Article | Problem]:
    """Articles of a JSON or JSONL stream; ``jsonl=None`` tells them apart from the first lines."""
    lines = iter(stream)
    head: list[tuple[int, str]] = []
    number = 0
    for line in lines:
        number += 1
        if line.strip():
            head.append((number, line))
            if len(head) == 2:
                break
    if not head:
        return
    if jsonl is None:
        jsonl = looks_like_jsonl(head[0][1], head[1][1] if len(head) > 1 else None)
    if jsonl:
        rest = ((n, line) for n, line in enumerate(lines, start=number + 1))
        yield from _jsonl(chain(head, rest), origin)
    else:
        text = "\n" * (head[0][0] - 1) + "".join(line for _, line in head) + "".join(lines)
        yield from _json(text, origin)


def _jsonl(numbered: Iterable[tuple[int, str]], origin: str) -> Iterator[Article | Problem]:
    for number, line in numbered:
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield Problem(file=origin, line=number, message=f"not valid JSON: {exc.msg} (column {exc.colno})")
            continue
        if isinstance(obj, dict) and not is_record(obj):  # a line holding an object PMID -> record
            for key, value in obj.items():
                yield _convert(value, origin, number, key)
        else:
            yield _convert(obj, origin, number, None)


def _json(text: str, origin: str) -> Iterator[Article | Problem]:
    """Top-level values one at a time (``raw_decode``), so each record knows the line it starts on."""
    pos = _skip(text, 0)
    try:
        if _first_key(text, pos) in FIELD_KEYS:  # one record alone
            value, end = _DECODER.raw_decode(text, pos)
            yield _convert(value, origin, _line(text, pos), None)
        else:
            end = len(text)
            for key, start, value, after in _members(text, pos):
                end = after
                yield _convert(value, origin, _line(text, start), key)
        end = _skip(text, end)
        if end < len(text):
            raise json.JSONDecodeError("extra data after the JSON document (JSON Lines?)", text, end)
    except json.JSONDecodeError as exc:
        yield Problem(file=origin, line=exc.lineno, message=f"not valid JSON, reading stopped: {exc}")


def _first_key(text: str, pos: int) -> str | None:
    if not text.startswith("{", pos):
        return None
    try:
        key = _DECODER.raw_decode(text, _skip(text, pos + 1))[0]
    except json.JSONDecodeError:
        return None
    return key.lower() if isinstance(key, str) else None


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _members(text: str, pos: int) -> Iterator[tuple[str | None, int, Any, int]]:
    """(key or None, start offset, value, end offset) of each member of a top-level object or list element."""
    if pos >= len(text):
        return
    if text[pos] not in "{[":
        raise json.JSONDecodeError("expected a JSON object or list", text, pos)
    closing = "}" if text[pos] == "{" else "]"
    pos = _skip(text, pos + 1)
    if pos < len(text) and text[pos] == closing:
        return
    while True:
        key = None
        if closing == "}":
            key, pos = _DECODER.raw_decode(text, pos)
            if not isinstance(key, str):
                raise json.JSONDecodeError("expected a string key", text, pos)
            pos = _skip(text, pos)
            if pos >= len(text) or text[pos] != ":":
                raise json.JSONDecodeError("expected ':'", text, pos)
            pos = _skip(text, pos + 1)
        start = pos
        value, pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if pos < len(text) and text[pos] == closing:
            yield key, start, value, pos + 1
            return
        yield key, start, value, pos
        if pos < len(text) and text[pos] == ",":
            pos = _skip(text, pos + 1)
        else:
            raise json.JSONDecodeError(f"expected ',' or '{closing}'", text, pos)


def _convert(obj: Any, origin: str, line: int, key: str | None) -> Article | Problem:
    what = f"record {key!r}" if key is not None else "record"
    if not isinstance(obj, dict):
        return Problem(file=origin, line=line, message=f"{what}: expected a JSON object, got {type(obj).__name__}")
    try:
        return _article({str(k).lower(): v for k, v in obj.items()}, key, f"{origin}:{line}")
    except Exception as exc:  # any record that cannot be converted is reported, and reading goes on
        return Problem(file=origin, line=line, message=f"{what}: {_brief(exc)}")


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors())
    return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"


def _article(rec: dict[str, Any], key: str | None, where: str) -> Article:
    """One record (keys already lower-cased). PubMedQA's: CONTEXTS with their LABELS become labelled
    sections, MESHES headings by name, YEAR the year, no title; its question and answer fields are not
    kept, so the corpus does not hold the benchmark's answers. Plain: the Article fields, ``abstract`` a
    string or a list, ``mesh``/``authors`` strings or objects, ``year`` a number or a string."""
    pmid = rec.get("pmid", key)
    if pmid is None:
        raise ValueError("no PMID (neither a 'pmid' field nor a PMID key)")
    if "contexts" in rec:  # PubMedQA
        contexts, labels = rec.get("contexts") or [], rec.get("labels") or []
        if not isinstance(contexts, list):
            raise ValueError("CONTEXTS must be a list")
        labels = list(labels) + [None] * (len(contexts) - len(labels))
        sections = [
            Section(label=lb or None, text=_clean(c)) for c, lb in zip(contexts, labels, strict=False) if _clean(c)
        ]
        return Article(
            pmid=str(pmid),
            sections=sections,
            year=_year(rec.get("year")),
            mesh=[_mesh(m) for m in rec.get("meshes") or []],
            origin=where,
        )
    sections = _sections(rec["sections"]) if rec.get("sections") else _sections(rec.get("abstract"))
    fields = {
        name: rec[name]
        for name in ("kind", "journal", "doi", "language", "retracted", "publication_types")
        if rec.get(name) is not None
    }
    if rec.get("retraction_of"):
        fields["retraction_of"] = [str(p) for p in _as_list(rec["retraction_of"])]
    return Article(
        pmid=str(pmid),
        title=_clean(rec.get("title")),
        sections=sections,
        year=_year(rec.get("year")),
        authors=[_author(a) for a in _as_list(rec.get("authors"))],
        mesh=[_mesh(m) for m in _as_list(rec.get("mesh"))],
        keywords=[k for k in (_clean(k) for k in _as_list(rec.get("keywords"))) if k],
        origin=where,
        **fields,
    )


def _clean(text: Any) -> str:
    if text is None:
        return ""
    if not isinstance(text, str):
        raise ValueError(f"expected text, got {type(text).__name__}")
    return " ".join(text.split())


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _year(value: Any) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _YEAR.search(str(value))
    if not match:
        raise ValueError(f"year: no year in {value!r}")
    return int(match.group(1))


def _sections(value: Any) -> list[Section]:
    sections = []
    for part in _as_list(value):
        if isinstance(part, str):
            if _clean(part):
                sections.append(Section(text=_clean(part)))
        elif isinstance(part, dict):
            part = {str(k).lower(): v for k, v in part.items()}
            if _clean(part.get("text")):
                sections.append(
                    Section(
                        label=part.get("label") or None,
                        category=part.get("category") or None,
                        text=_clean(part["text"]),
                    )
                )
        else:
            raise ValueError(f"abstract: expected text or sections, got {type(part).__name__}")
    return sections


def _mesh(value: Any) -> MeshHeading:
    if isinstance(value, dict):
        return MeshHeading(**value)
    name = _clean(value)
    if not name:
        raise ValueError("empty MeSH heading")
    return MeshHeading(name=name)


def _author(value: Any) -> Author:
    if isinstance(value, dict):
        return Author(**value)
    name = _clean(value)
    last, comma, fore = name.partition(",")
    if comma:
        return Author(last_name=last.strip(), fore_name=fore.strip() or None)
    last, _, initials = name.rpartition(" ")
    if last and initials.isalpha() and initials.isupper() and len(initials) <= 4:
        return Author(last_name=last, initials=initials)
    return Author(last_name=name)
