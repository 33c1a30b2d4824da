"""One entry point for every PubMed record format (PubMed XML, MEDLINE text, JSON, JSON Lines): find the
files, tell their format from their content (never the file name), read. Another file (an eSearchResult,
a PMC article set, a list of PMIDs) yields one :class:`Problem` saying what it is, and is skipped.
"""

from __future__ import annotations

import glob
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Literal

from ingest.pubmed.documents import looks_like_jsonl, parse_documents
from ingest.pubmed.medline import parse_medline
from ingest.pubmed.model import Article, Deletion
from ingest.pubmed.xml import RECORD_TAGS, SET_TAGS, parse_pubmed_xml
from ingest.sources import open_binary, open_text
from ingest.summary import Problem

__all__ = ["Format", "Record", "SUFFIXES", "expand_paths", "detect_format", "read_records", "iter_records"]

Format = Literal["pubmed-xml", "medline", "json", "jsonl"]
Record = Article | Deletion | Problem

# Names taken when a directory is walked (each also with ".gz"); files named outright are always read.
SUFFIXES = (".xml", ".txt", ".medline", ".nbib", ".json", ".jsonl")
SNIFF_BYTES = 16384

_XML_ROOT = re.compile(r"<([A-Za-z_][\w.:-]*)")
_XML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_MEDLINE_START = re.compile(r"^PMID- *\d")


def expand_paths(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, matched by glob patterns (``**`` recurses), or found under directories (recursively,
    record files by their suffix, hidden entries skipped); sorted, without duplicates.

    Raises FileNotFoundError naming a path that does not exist or a pattern that matches nothing.
    """
    found: set[Path] = set()
    for raw in paths:
        text = str(raw)
        if any(c in text for c in "*?["):
            matches = sorted(glob.glob(text, recursive=True))
            if not matches:
                raise FileNotFoundError(f"{text}: no file matches this pattern")
            for match in matches:
                found.update(_walk(Path(match)))
        else:
            path = Path(text)
            if not path.exists():
                raise FileNotFoundError(f"{text}: no such file or directory")
            found.update(_walk(path))
    return sorted(found)


def _walk(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    files = []
    for child in path.rglob("*"):
        relative = child.relative_to(path).parts
        if child.is_file() and not any(part.startswith(".") for part in relative) and _is_record_name(child.name):
            files.append(child)
    return files


def _is_record_name(name: str) -> bool:
    name = name.lower().removesuffix(".gz")
    return name.endswith(SUFFIXES)


def detect_format(path: str | Path) -> Format | None:
    """The file's format from its first few KB (decompressed when gzip), or None when it holds no PubMed
    records: XML (root ``PubmedArticleSet``/``PubmedBookArticleSet``, or a bare ``PubmedArticle``), MEDLINE
    (first line ``PMID- ``), JSON (``{``/``[``) or JSON Lines."""
    return _sniff(Path(path))[0]


def _sniff(path: Path) -> tuple[Format | None, str]:
    """(format, what the file is); for a file that is not read, "what" says why."""
    with open_binary(path) as stream:
        raw = stream.read(SNIFF_BYTES)
    head = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    text = head.lstrip()
    if not text:
        return None, "an empty file"
    if text.startswith("<"):
        match = _XML_ROOT.search(_XML_COMMENT.sub("", text))
        root = match.group(1) if match else None
        if root is None:
            return None, "XML without a root element in its first KB, not PubMed records"
        if root.rpartition(":")[2] in SET_TAGS + RECORD_TAGS:
            return "pubmed-xml", root
        return None, f"{'an' if root[0].lower() in 'aeiou' else 'a'} {root}, not PubMed records"
    if text.startswith("["):
        return "json", "JSON"
    if text.startswith("{"):
        lines = [line for line in text.splitlines(keepends=True) if line.strip()]
        first_complete = len(lines) > 1 or len(raw) < SNIFF_BYTES or head.endswith("\n")
        if not first_complete:  # one line longer than the sniffed head
            jsonl = path.name.lower().removesuffix(".gz").endswith(".jsonl")
        else:
            jsonl = looks_like_jsonl(lines[0], lines[1] if len(lines) > 1 else None)
        return ("jsonl", "JSON Lines") if jsonl else ("json", "JSON")
    if _MEDLINE_START.match(text):
        return "medline", "MEDLINE text"
    return None, "not PubMed XML, MEDLINE text or JSON"


def read_records(path: str | Path) -> Iterator[Record]:
    """The records of one file, whatever its format; problems are yielded, never raised."""
    path = Path(path)
    origin = str(path)
    try:
        fmt, what = _sniff(path)
        if fmt is None:
            yield Problem(file=origin, message=f"{what}; skipped")
        elif fmt == "pubmed-xml":
            with open_binary(path) as binary:
                yield from parse_pubmed_xml(binary, origin)
        else:
            with open_text(path) as text:
                if fmt == "medline":
                    yield from parse_medline(text, origin)
                else:  # json or jsonl: the reader tells them apart again from whole lines
                    yield from parse_documents(text, origin)
    except (OSError, EOFError) as exc:  # a damaged or truncated gzip stream, an unreadable file, one gone
        yield Problem(file=origin, message=f"unreadable, reading stopped: {exc}")


def iter_records(paths: Iterable[str | Path]) -> Iterator[Record]:
    """The records of every file that :func:`expand_paths` finds, file after file."""
    for path in expand_paths(paths):
        yield from read_records(path)
