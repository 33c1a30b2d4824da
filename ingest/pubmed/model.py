"""One bibliographic record, whatever format it came in (PubMed XML, MEDLINE text, JSON documents)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, field_validator

_NOT_AVAILABLE = re.compile(r"^\[\s*not available\s*\]\.?$", re.IGNORECASE)


def first_title(*candidates: str) -> str:
    """The first real title among ``candidates`` (article title, vernacular title, book title): PubMed's
    placeholder "[Not Available]." gives way to the next one, and stays only when no other is given."""
    given = [c for c in candidates if c]
    return next((c for c in given if not _NOT_AVAILABLE.match(c.strip())), given[0] if given else "")


class Section(BaseModel):
    """One part of an abstract: a labelled section of a structured abstract, or the whole text."""

    label: str | None = None  # "BACKGROUND", "METHODS", ... (the Label attribute), None if unstructured
    category: str | None = None  # NlmCategory, e.g. "OBJECTIVE"
    text: str


class Author(BaseModel):
    last_name: str | None = None
    fore_name: str | None = None
    initials: str | None = None
    collective: str | None = None  # CollectiveName, for group authors
    affiliations: list[str] = Field(default_factory=list)
    orcid: str | None = None

    @property
    def display(self) -> str:
        """ "Smith JA" (or the collective name)."""
        if self.collective:
            return self.collective
        return " ".join(p for p in (self.last_name, self.initials or self.fore_name) if p)


class MeshHeading(BaseModel):
    # Descriptor UI, e.g. "D008382" (becomes the entity MESH:D008382). None where the source carries names only
    # (MEDLINE text, PubMedQA, old XML exports): consumers skip headings without a UI.
    ui: str | None = None
    name: str  # descriptor name, e.g. "Marfan Syndrome"
    major: bool = False  # MajorTopicYN on the descriptor or any qualifier
    qualifiers: list[str] = Field(default_factory=list)  # qualifier names, e.g. ["genetics"]


class Article(BaseModel):
    """A PubMed record. ``pmid`` is the bare number as a string ("31675180")."""

    pmid: str
    kind: Literal["article", "book"] = "article"
    title: str = ""
    sections: list[Section] = Field(default_factory=list)
    journal: str | None = None
    year: int | None = None
    authors: list[Author] = Field(default_factory=list)
    mesh: list[MeshHeading] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)
    doi: str | None = None
    publication_types: list[str] = Field(default_factory=list)
    language: str | None = None
    retracted: bool = False  # a retracted publication (publication type or a RetractionIn comment)
    retraction_of: list[str] = Field(default_factory=list)  # PMIDs this notice retracts (RetractionOf)
    # Where it came from, for error messages and provenance: "path/to/file.xml:1234" (line of its start).
    origin: str | None = None

    @field_validator("pmid")
    @classmethod
    def _pmid(cls, value: str) -> str:
        value = value.strip()
        if not value.isdigit():
            raise ValueError(f"PMID must be numeric, got {value!r}")
        return str(int(value))

    @property
    def abstract(self) -> str:
        return "\n".join(s.text for s in self.sections)


class Deletion(BaseModel):
    """A ``DeleteCitation`` block of an update file: these PMIDs are withdrawn from PubMed."""

    pmids: list[str]
    origin: str | None = None
