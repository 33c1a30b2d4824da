"""A streaming reader for PubMed XML: efetch and "save as XML" exports, annual baseline and update files,
every DTD from 2012 on; memory stays flat however large the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import IO

from lxml import etree
from pydantic import ValidationError

from ingest.pubmed.model import Article, Author, Deletion, MeshHeading, Section, first_title
from ingest.summary import Problem

__all__ = ["parse_pubmed_xml", "RECORD_TAGS", "SET_TAGS"]

RECORD_TAGS = ("PubmedArticle", "PubmedBookArticle", "DeleteCitation", "DeleteDocument")
SET_TAGS = ("PubmedArticleSet", "PubmedBookArticleSet")
RETRACTED_TYPE = "retracted publication"
RETRACTED_IN = ("RetractionIn", "RetractedandRepublishedIn")  # comments that say this record is retracted

_YEAR = re.compile(r"\b(1[5-9]\d\d|2\d\d\d)\b")
_ORCID = re.compile(r"(\d{4}-?\d{4}-?\d{4}-?\d{3}[\dX])", re.IGNORECASE)
_DOI_PREFIX = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)

Element = etree._Element
_AUTHOR_FIELDS = {
    "LastName": "last_name",
    "ForeName": "fore_name",
    "Initials": "initials",
    "CollectiveName": "collective",
}


def parse_pubmed_xml(stream: IO[bytes], origin: str) -> Iterator[Article | Deletion | Problem]:
    """Records of a PubMed XML stream (bytes; the XML declaration names the encoding), in file order.

    ``origin`` names the file in problems and in ``Article.origin`` ("origin:line", the line of the record's
    start tag). A record that fails validation is reported and skipped; a malformed or truncated file ends
    with one Problem at the line of the break, after every complete record before it. Nothing raises.
    """
    # lxml: about twice as fast as the standard library's parser here, and every element knows its sourceline.
    parser = etree.XMLPullParser(
        events=("start", "end"),
        tag=(*SET_TAGS, *RECORD_TAGS),
        remove_comments=True,
        remove_pis=True,
        resolve_entities=False,  # entity references stay references: nothing expands, nothing is fetched
        no_network=True,
        load_dtd=False,
        huge_tree=True,  # long text nodes (libxml2's entity amplification limit still applies)
    )
    fed: list[Element | None] = [None]  # the root, once the whole stream parsed; [] when it had no bytes
    events = _pull_events(stream, parser, fed)
    seen = 0
    checked = False
    try:
        for event, elem in events:
            if not checked:  # the DOCTYPE has been read when the first element starts
                checked = True
                declared = _declared_entities(elem)
                if declared:
                    yield Problem(
                        file=origin,
                        line=elem.sourceline,
                        message=f"refused: the DOCTYPE declares XML entities ({', '.join(declared)}); PubMed XML "
                        "never does, and entities can expand without bound or read local files and URLs (XXE)",
                    )
                    return
            if event != "end" or elem.tag not in RECORD_TAGS:
                continue
            seen += 1
            yield _record(elem, origin)
            # Free the record and everything before it: the tree never holds more than one record (memory
            # stays flat on a 4 GB file).
            elem.clear(keep_tail=False)
            parent = elem.getparent()
            if parent is not None:
                while elem.getprevious() is not None:
                    del parent[0]
    except etree.XMLSyntaxError as exc:
        line, message = exc.lineno or None, exc.msg
        if not line:  # some errors (an undefined entity) surface as "no element found" at line 0: take the first
            first = next((e for e in exc.error_log if e.level >= etree.ErrorLevels.ERROR), None)
            if first is not None:
                line, message = first.line or None, first.message
        yield Problem(file=origin, line=line, message=f"malformed XML, reading stopped: {message}")
        return
    except (OSError, EOFError) as exc:  # the stream itself failed, e.g. a truncated gzip file
        yield Problem(file=origin, line=None, message=f"unreadable stream, reading stopped: {exc}")
        return
    if not seen:
        root = fed[0] if fed else None
        if root is None:
            yield Problem(file=origin, line=None, message="empty file, no PubMed records")
        elif etree.QName(root).localname not in SET_TAGS:
            yield Problem(file=origin, line=root.sourceline, message=f"root <{root.tag}> is not a PubMed article set")


def _pull_events(stream: IO[bytes], parser: etree.XMLPullParser, fed: list) -> Iterator[tuple[str, Element]]:
    """The parser's events, fed the stream in 64 KiB chunks. The events parsed before a syntax error in
    the stream come out before it is raised (lxml 6.2's ``iterparse`` raises first, losing the complete
    records of the chunk that holds the break). ``fed`` gets the root once the stream is parsed, or is
    emptied if the stream had no bytes."""
    empty = True
    while chunk := stream.read(1 << 16):
        empty = False
        try:
            parser.feed(chunk)
        except etree.XMLSyntaxError:
            yield from parser.read_events()
            raise
        yield from parser.read_events()
    if empty:
        fed.clear()
        return
    # A stream that ends inside a record raises here; the events left then are of the elements the
    # parser closed on giving up (the cut record among them), so none is read.
    fed[0] = parser.close()
    yield from parser.read_events()


def _declared_entities(elem: Element) -> list[str]:
    """Names of the entities the document's internal DTD subset declares (at most five)."""
    dtd = elem.getroottree().docinfo.internalDTD
    if dtd is None:
        return []
    return [str(e.name) for e in dtd.iterentities()][:5]


def _record(elem: Element, origin: str) -> Article | Deletion | Problem:
    line = elem.sourceline
    where = f"{origin}:{line}"
    try:
        if elem.tag in ("DeleteCitation", "DeleteDocument"):
            return Deletion(pmids=[_pmid(p) for p in elem.iter("PMID")], origin=where)
        if elem.tag == "PubmedBookArticle":
            return _book(elem, where)
        return _article(elem, where)
    except Exception as exc:  # any record that cannot be converted is reported, and reading goes on
        pmid = elem.findtext(".//PMID")
        what = f"PMID {pmid.strip()}" if pmid and pmid.strip() else f"<{elem.tag}>"
        return Problem(file=origin, line=line, message=f"{what}: {_brief(exc)}")


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors())
    return str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"


def _pmid(elem: Element | None) -> str:
    text = (elem.text or "").strip() if elem is not None else ""
    if not text.isdigit():
        raise ValueError(f"PMID must be numeric, got {text!r}")
    return str(int(text))


def _article(elem: Element, where: str) -> Article:
    citation = elem.find("MedlineCitation")
    if citation is None:
        raise ValueError("no MedlineCitation")
    art = citation.find("Article")
    if art is None:
        raise ValueError("no Article")
    journal = art.find("Journal")
    pub_types = _texts(art.iterfind("PublicationTypeList/PublicationType"))
    comments = citation.findall("CommentsCorrectionsList/CommentsCorrections")
    authors = _authors(art.find("AuthorList"))
    article_affiliation = _text(art.find("Affiliation"))  # DTDs before 2014: the first author's affiliation
    if article_affiliation and authors and not authors[0].affiliations:
        authors[0].affiliations.append(article_affiliation)
    title = first_title(_text(art.find("ArticleTitle")), _text(art.find("VernacularTitle")))
    return Article(
        pmid=_pmid(citation.find("PMID")),
        title=title,
        sections=_sections(art.find("Abstract")),
        journal=_journal(journal, citation),
        year=_article_year(journal, art, citation),
        authors=authors,
        mesh=_mesh(citation.find("MeshHeadingList")),
        keywords=_keywords(citation),
        doi=_doi(elem.find("PubmedData/ArticleIdList"), art),
        publication_types=pub_types,
        language=_language(art),
        retracted=_retracted(pub_types, comments),
        retraction_of=_retraction_of(comments),
        origin=where,
    )


def _book(elem: Element, where: str) -> Article:
    doc = elem.find("BookDocument")
    if doc is None:
        raise ValueError("no BookDocument")
    book = doc.find("Book")
    book_title = _text(book.find("BookTitle")) if book is not None else ""
    title = first_title(_text(doc.find("ArticleTitle")), _text(doc.find("VernacularTitle")), book_title)
    pub_types = _texts(doc.iterfind("PublicationType"))
    comments = doc.findall("CommentsCorrectionsList/CommentsCorrections")
    year = None
    if book is not None:
        year = _date_year(book.find("PubDate")) or _date_year(book.find("BeginningDate"))
    year = year or _date_year(doc.find("ContributionDate"))
    ids = doc.find("ArticleIdList")
    if ids is None or _doi(ids, None) is None:
        ids = elem.find("PubmedBookData/ArticleIdList")
    authors: list[Author] = []
    for author_list in doc.iterfind("AuthorList"):
        if author_list.get("Type", "authors") == "authors":
            authors.extend(_authors(author_list))
    return Article(
        pmid=_pmid(doc.find("PMID")),
        kind="book",
        title=title,
        sections=_sections(doc.find("Abstract")),
        journal=book_title if book_title and title != book_title else None,  # the book is the container
        year=year,
        authors=authors,
        mesh=_mesh(doc.find("MeshHeadingList")),
        keywords=_keywords(doc),
        doi=_doi(ids, doc),
        publication_types=pub_types,
        language=_language(doc),
        retracted=_retracted(pub_types, comments),
        retraction_of=_retraction_of(comments),
        origin=where,
    )


def _text(elem: Element | None) -> str:
    """All text inside ``elem`` (children's text and tails too), whitespace collapsed."""
    if elem is None:
        return ""
    if len(elem) == 0:
        return " ".join((elem.text or "").split())
    return " ".join("".join(elem.itertext()).split())


def _texts(elems: Iterator[Element]) -> list[str]:
    out: list[str] = []
    for e in elems:
        t = _text(e)
        if t and t not in out:
            out.append(t)
    return out


def _sections(abstract: Element | None) -> list[Section]:
    if abstract is None:
        return []
    sections = []
    for part in abstract.iterfind("AbstractText"):
        text = _text(part)
        if text:
            sections.append(
                Section(label=part.get("Label") or None, category=part.get("NlmCategory") or None, text=text)
            )
    return sections


def _journal(journal: Element | None, citation: Element) -> str | None:
    if journal is not None:
        for tag in ("Title", "ISOAbbreviation"):
            name = _text(journal.find(tag))
            if name:
                return name
    return _text(citation.find("MedlineJournalInfo/MedlineTA")) or None


def _date_year(date: Element | None) -> int | None:
    """Year of a PubDate-like element: <Year>, else the first year of <MedlineDate> ("1998 Dec-1999 Jan")."""
    if date is None:
        return None
    for tag in ("Year", "MedlineDate"):
        match = _YEAR.search(date.findtext(tag) or "")
        if match:
            return int(match.group(1))
    return None


def _article_year(journal: Element | None, art: Element, citation: Element) -> int | None:
    pub_date = journal.find("JournalIssue/PubDate") if journal is not None else None
    return (
        _date_year(pub_date)
        or _date_year(art.find("ArticleDate"))
        or _date_year(citation.find("DateCreated"))
        or _date_year(citation.find("DateCompleted"))
    )


def _authors(author_list: Element | None) -> list[Author]:
    if author_list is None:
        return []
    authors = []
    for a in author_list.iterfind("Author"):
        if a.get("ValidYN") == "N":  # a name NLM corrected; the valid form follows
            continue
        fields: dict[str, str] = {}
        affiliations: list[str] = []
        orcid = None
        for child in a:  # one pass over the children: much faster than a find() per field
            tag = child.tag
            if tag == "AffiliationInfo":
                for aff in child.iterfind("Affiliation"):
                    text = _text(aff)
                    if text and text not in affiliations:
                        affiliations.append(text)
            elif tag == "Affiliation":  # DTDs before 2014
                text = _text(child)
                if text and text not in affiliations:
                    affiliations.append(text)
            elif tag == "Identifier":
                if orcid is None and (child.get("Source") or "").upper() == "ORCID" and child.text:
                    match = _ORCID.search(child.text)
                    orcid = _format_orcid(match.group(1)) if match else child.text.strip()
            elif tag in _AUTHOR_FIELDS:
                fields[_AUTHOR_FIELDS[tag]] = _text(child)
        if fields.get("last_name") or fields.get("collective") or fields.get("fore_name"):
            authors.append(Author(**{k: v for k, v in fields.items() if v}, affiliations=affiliations, orcid=orcid))
    return authors


def _format_orcid(raw: str) -> str:
    digits = raw.replace("-", "").upper()
    return "-".join(digits[i : i + 4] for i in range(0, 16, 4))


def _mesh(heading_list: Element | None) -> list[MeshHeading]:
    if heading_list is None:
        return []
    headings = []
    for h in heading_list.iterfind("MeshHeading"):
        descriptor = None
        major = False
        qualifiers: list[str] = []
        for child in h:
            if child.tag == "DescriptorName":
                descriptor = child
            elif child.tag == "QualifierName":
                major = major or child.get("MajorTopicYN") == "Y"
                text = _text(child)
                if text:
                    qualifiers.append(text)
        name = _text(descriptor)
        if descriptor is None or not name:
            continue
        ui = (descriptor.get("UI") or "").strip() or None
        major = major or descriptor.get("MajorTopicYN") == "Y"
        headings.append(MeshHeading(ui=ui, name=name, major=major, qualifiers=qualifiers))
    return headings


def _keywords(container: Element) -> list[str]:
    return _texts(container.iterfind("KeywordList/Keyword"))


def _doi(ids: Element | None, art: Element | None) -> str | None:
    """The DOI from the record's own ArticleIdList (never a reference's), else from ELocationID."""
    if ids is not None:
        for aid in ids.iterfind("ArticleId"):
            if aid.get("IdType") == "doi" and aid.text and aid.text.strip():
                return _DOI_PREFIX.sub("", aid.text.strip())
    if art is not None:
        for loc in art.iterfind("ELocationID"):
            if loc.get("EIdType") == "doi" and loc.get("ValidYN", "Y") == "Y" and loc.text and loc.text.strip():
                return _DOI_PREFIX.sub("", loc.text.strip())
    return None


def _language(container: Element) -> str | None:
    lang = container.findtext("Language")
    return lang.strip().lower() or None if lang else None


def _retracted(pub_types: list[str], comments: list[Element]) -> bool:
    return any(t.lower() == RETRACTED_TYPE for t in pub_types) or any(
        c.get("RefType") in RETRACTED_IN for c in comments
    )


def _retraction_of(comments: list[Element]) -> list[str]:
    pmids: list[str] = []
    for c in comments:
        if c.get("RefType") == "RetractionOf":
            text = (c.findtext("PMID") or "").strip()
            if text.isdigit() and str(int(text)) not in pmids:
                pmids.append(str(int(text)))
    return pmids
