"""MEDLINE text records (PubMed "Format: PubMed", .nbib, .medline), read with ``Bio.Medline.parse``; the
order of the author lines, which Bio.Medline flattens, is tracked here as the lines stream past, to
give each affiliation and ORCID to its author and each record its starting line.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from Bio import Medline
from pydantic import ValidationError

from ingest.pubmed.model import Article, Author, MeshHeading, Section, first_title
from ingest.summary import Problem

__all__ = ["parse_medline", "split_structured_abstract"]

_AUTHOR_TAGS = ("FAU", "AU", "CN", "AD", "AUID")
_YEAR = re.compile(r"\b(1[5-9]\d\d|2\d\d\d)\b")
_DOI = re.compile(r"^\s*(\S+)\s*\[doi\]\s*$", re.IGNORECASE)
_PMID_REF = re.compile(r"PMID:\s*(\d+)")
_ORCID = re.compile(r"(\d{4}-\d{4}-\d{4}-\d{3}[\dX])", re.IGNORECASE)
# "LABEL: " at the start of the text or after the end of a sentence; labels are upper case ("RESULTS",
# "MATERIALS AND METHODS", "SUPPLEMENTARY INFORMATION", "AIMS/HYPOTHESIS").
_LABEL = re.compile(r"(?:^|(?<=[.!?)\]]\s))([A-Z][A-Z0-9]*(?:[ /&,-]+[A-Z0-9]+)*):\s")


@dataclass
class _Pending:
    line: int
    tags: list[str] = field(default_factory=list)  # author-related tags in file order


class _LineTracker:
    """The stream's lines, noting where each record starts and its author tags in order. A line of
    whitespace only is a blank line, the end of a record (Bio.Medline would read "  " as a tag and
    merge two records), except a line of six spaces or more inside a record with a continuation line
    right after it: a blank line inside a field, as Bio.Medline reads it."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self.records: deque[_Pending] = deque()
        self.orphans: deque[int] = deque()  # continuation lines before any tag of a record (dropped)
        self._open: _Pending | None = None

    def __iter__(self) -> Iterator[str]:
        held: list[str] = []  # lines of whitespace only, waiting for the line after them
        for number, line in enumerate(self._stream, start=1):
            if not line.strip():
                held.append(line)
                continue
            continuation = line.startswith("      ")
            if held:
                if continuation and self._open is not None and all(h.startswith("      ") for h in held):
                    yield from held
                else:
                    yield from self._end_record()
                held = []
            if continuation and self._open is None:
                # Bio.Medline would add it to a field of a record that has none yet (KeyError) and stop.
                self.orphans.append(number)
                continue
            if not continuation:
                if self._open is None:
                    self._open = _Pending(line=number)
                tag = line[:4].rstrip()
                if tag in _AUTHOR_TAGS:
                    self._open.tags.append(tag)
            yield line
        yield from self._end_record()

    def _end_record(self) -> Iterator[str]:
        if self._open is not None:
            self.records.append(self._open)
            self._open = None
        yield "\n"  # Bio.Medline's blank line


def parse_medline(stream: IO[str], origin: str) -> Iterator[Article | Problem]:
    """Articles of a MEDLINE text stream; a record that fails validation becomes a Problem, the rest loads."""
    tracker = _LineTracker(stream)
    records = Medline.parse(tracker)
    while True:
        try:
            record = next(records)
        except StopIteration:
            for number in tracker.orphans:
                yield Problem(file=origin, line=number, message="continuation line outside a record: skipped")
            return
        except Exception as exc:  # Bio.Medline fails on a continuation line before any tag
            yield Problem(file=origin, line=None, message=f"unreadable MEDLINE text, reading stopped: {exc!r}")
            return
        while tracker.orphans:
            number = tracker.orphans.popleft()
            yield Problem(file=origin, line=number, message="continuation line outside a record: skipped")
        pending = tracker.records.popleft() if tracker.records else _Pending(line=0)
        line = pending.line or None
        try:
            yield _article(record, pending.tags, f"{origin}:{line}")
        except Exception as exc:  # any record that cannot be converted is reported, and reading goes on
            pmid = str(record.get("PMID", "")).strip()
            what = f"PMID {pmid}" if pmid else "record"
            yield Problem(file=origin, line=line, message=f"{what}: {_brief(exc)}")


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors())
    return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"


def _clean(text: Any) -> str:
    if isinstance(text, list):
        text = " ".join(str(t) for t in text)
    return " ".join(str(text or "").split())


def _values(record: dict[str, Any], tag: str) -> list[str]:
    """The values of a tag, one per line, cleaned; empty ones kept (they stand for their line)."""
    value = record.get(tag) or []
    return [_clean(v) for v in ([value] if isinstance(value, str) else value)]


def _list(record: dict[str, Any], tag: str) -> list[str]:
    return [v for v in _values(record, tag) if v]


def _article(record: dict[str, Any], author_tags: list[str], where: str) -> Article:
    if "PMID" not in record:
        raise ValueError("no PMID line")
    book_title = _clean(record.get("BTI"))
    title = first_title(_clean(record.get("TI")), _clean(record.get("TT")), book_title)
    pub_types = _list(record, "PT")
    languages = _list(record, "LA")
    year_match = _YEAR.search(_clean(record.get("DP")))
    return Article(
        pmid=_clean(record["PMID"]),
        kind="book" if book_title else "article",
        title=title,
        sections=split_structured_abstract(_clean(record.get("AB"))),
        journal=_clean(record.get("JT")) or _clean(record.get("TA")) or (book_title if book_title != title else None),
        year=int(year_match.group(1)) if year_match else None,
        authors=_authors(record, author_tags),
        mesh=[_mesh(term) for term in _list(record, "MH")],
        keywords=list(dict.fromkeys(_list(record, "OT"))),
        doi=_doi(_list(record, "LID") + _list(record, "AID")),
        publication_types=pub_types,
        language=languages[0].lower() if languages else None,
        retracted=any(t.lower() == "retracted publication" for t in pub_types)
        or bool(_list(record, "RIN") or _list(record, "RRI")),  # retraction in; retracted and republished in
        retraction_of=list(dict.fromkeys(m for r in _list(record, "ROF") for m in _PMID_REF.findall(r))),
        origin=where,
    )


def split_structured_abstract(text: str) -> list[Section]:
    """One section for plain text; labelled sections for "BACKGROUND: ... METHODS: ..." (two labels or more,
    the first at the very start)."""
    if not text:
        return []
    matches = list(_LABEL.finditer(text))
    if len(matches) < 2 or matches[0].start() != 0:
        return [Section(text=text)]
    sections = []
    for match, following in zip(matches, [*matches[1:], None], strict=True):
        body = text[match.end() : following.start() if following else len(text)].strip()
        if body:
            sections.append(Section(label=match.group(1).strip(), text=body))
    return sections or [Section(text=text)]


def _mesh(term: str) -> MeshHeading:
    """A MeSH term "*Name" or "Name/qualifier/*qualifier" -> heading; a "*" anywhere marks a major topic.
    MEDLINE text carries no descriptor UIs, so ``ui`` is None."""
    descriptor, *qualifiers = term.split("/")
    major = "*" in term
    return MeshHeading(
        ui=None,
        name=descriptor.strip().lstrip("*").strip(),
        major=major,
        qualifiers=[q.strip().lstrip("*").strip() for q in qualifiers if q.strip().lstrip("*").strip()],
    )


def _doi(ids: list[str]) -> str | None:
    for value in ids:
        match = _DOI.match(value)
        if match:
            return match.group(1)
    return None


def _split_name(full: str) -> dict[str, str]:
    """Full name "Casbon, James A" -> last and fore name."""
    last, _, fore = full.partition(",")
    return {"last_name": last.strip(), "fore_name": fore.strip()} if fore.strip() else {"last_name": full}


def _split_short(short: str) -> dict[str, str]:
    """Short name "Casbon JA" -> last name and initials."""
    last, _, initials = short.rpartition(" ")
    if last and initials.isupper() and initials.isalpha():
        return {"last_name": last, "initials": initials}
    return {"last_name": short}


def _authors(record: dict[str, Any], tags: list[str]) -> list[Author]:
    """Authors in file order. FAU opens an author, an AU right after it is that author's short form; CN is a
    group author; AD and AUID belong to the author before them (to the first author if none came yet). A
    line with an empty value is skipped (an empty FAU opens no author: its AU does)."""
    values = {tag: _values(record, tag) for tag in _AUTHOR_TAGS}  # one per line, empty ones kept
    used = dict.fromkeys(_AUTHOR_TAGS, 0)
    authors: list[dict[str, Any]] = []
    orphans: list[str] = []  # AD lines before the first author (the old, one-affiliation layout)
    last_tag = ""
    for tag in tags:
        index = used[tag]
        used[tag] += 1
        value = values[tag][index] if index < len(values[tag]) else ""
        if not value:
            last_tag = ""
            continue
        if tag == "FAU":
            authors.append({**_split_name(value), "affiliations": []})
        elif tag == "AU":
            if last_tag == "FAU" and authors:
                authors[-1].setdefault("initials", _split_short(value).get("initials"))
            else:
                authors.append({**_split_short(value), "affiliations": []})
        elif tag == "CN":
            authors.append({"collective": value, "affiliations": []})
        elif tag == "AD":
            if authors:
                authors[-1]["affiliations"].append(value)
            else:
                orphans.append(value)
        elif tag == "AUID" and authors:
            match = _ORCID.search(value)
            if match and "orcid" in value.lower():
                authors[-1]["orcid"] = match.group(1).upper()
        last_tag = tag
    if orphans and authors:
        authors[0]["affiliations"][:0] = orphans
    return [Author(**{k: v for k, v in a.items() if v is not None}) for a in authors]
