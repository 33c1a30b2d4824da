"""``medkg ingest pubmed|docs|entrez`` and ``medkg search`` as a user runs them: the console script in a
subprocess, an embedded Ladybug store in a temp data dir, the real offline embedding model, real PubMed records.

Each CLI run costs seconds (the embedding model loads in every process), so the ingests are module fixtures that
several tests read.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import shared
from tests.support.cli import run
from tests.support.entrez_server import EutilsServer, load_corpus, serve

QUERY = "marfan syndrome aortic dilation"
_RECORD = re.compile(rb"<PubmedArticle>.*?</PubmedArticle>", re.DOTALL)
_PMID = re.compile(rb"<PMID[^>]*>(\d+)</PMID>")  # the first in a record is its own (MedlineCitation/PMID)


def env_for(data: Path, **more: str) -> dict[str, str]:
    return {"MEDKG_DATA_DIR": str(data), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", **more}


def said(r: subprocess.CompletedProcess[str]) -> str:
    """Everything the command printed, whitespace-normalised (rich wraps long lines at 80 columns here)."""
    return " ".join((r.stdout + r.stderr).split())


def unwrapped(r: subprocess.CompletedProcess[str]) -> str:
    """Everything the command printed, line breaks removed (a long path is folded, not wrapped at a space)."""
    return (r.stdout + r.stderr).replace("\n", "")


def number(pattern: str, text: str) -> int:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in: {text[-3000:]}"
    return int(match.group(1).replace(",", ""))


def added(text: str, row: str) -> int:
    """The 'added' column of the ingest summary table's row (entities or relations)."""
    return number(rf"\b{row}\W+(\d[\d,]*)\W+\d[\d,]*\W+\d[\d,]*", text)


def index_counts(text: str) -> tuple[int, int]:
    """(documents, passages) of the 'text index: ...' line."""
    match = re.search(r"text index: (\d[\d,]*) documents, (\d[\d,]*) passages", text)
    assert match, f"no text index line in: {text[-3000:]}"
    return int(match.group(1).replace(",", "")), int(match.group(2).replace(",", ""))


def pmids_of(xml: bytes) -> set[str]:
    """PMIDs of the complete PubmedArticle records in an XML text."""
    found = set()
    for record in _RECORD.finditer(xml):
        match = _PMID.search(record.group(0))
        assert match is not None
        found.add(match.group(1).decode())
    return found


# -- medkg ingest pubmed ---------------------------------------------------------------------------------------


@dataclass
class PubmedIngest:
    env: dict[str, str]
    cwd: Path
    args: list[str]
    first: subprocess.CompletedProcess[str]
    truncated: Path
    break_line: int  # the last line of the truncated copy, where the XML breaks off
    not_pubmed: Path
    expected_pmids: set[str]  # of every complete record in the files given


@pytest.fixture(scope="module")
def pubmed_ingest(tmp_path_factory: pytest.TempPathFactory) -> PubmedIngest:
    """A directory of real PubMed XML files, a real 15-record export cut off in its 4th record, and an
    eSearchResult, ingested in one run."""
    directory = shared("pubmed_xml", "ncbiutils")
    export = shared("pubmed_xml", "user_exports", "mokztk_pubmed_result.xml").read_bytes()
    not_pubmed = shared("pubmed_xml", "biopython_entrez", "esearch1.xml")
    tmp = tmp_path_factory.mktemp("pubmed")
    records = list(_RECORD.finditer(export))
    assert len(records) == 15
    fourth = records[3]
    cut = export[: fourth.start() + (fourth.end() - fourth.start()) // 2]
    truncated = tmp / "export_truncated.xml"
    truncated.write_bytes(cut)
    expected = pmids_of(cut)
    assert len(expected) == 3
    for path in sorted(directory.glob("*.xml")):
        expected |= pmids_of(path.read_bytes())
    env = env_for(tmp / "data")
    args = ["ingest", "pubmed", str(directory), str(truncated), str(not_pubmed), "--no-progress"]
    first = run(args, env, tmp)
    return PubmedIngest(env, tmp, args, first, truncated, cut.count(b"\n") + 1, not_pubmed, expected)


def test_pubmed_truncated_file_is_reported_with_its_line_and_the_rest_loads(pubmed_ingest: PubmedIngest) -> None:
    ing = pubmed_ingest
    assert ing.first.returncode == 0, ing.first.stderr[-3000:]
    assert "Traceback" not in ing.first.stderr
    out = said(ing.first)
    assert f"{ing.truncated}:{ing.break_line}: malformed XML, reading stopped" in out
    assert "2 problem(s), skipped; the rest loaded:" in out  # the truncated file and the eSearchResult
    documents, passages = index_counts(out)
    assert documents == len(ing.expected_pmids) and passages >= documents
    assert number(r"(\d[\d,]*) passages embedded", out) == passages
    assert added(out, "entities") > 0 and added(out, "relations") > 0

    again = run(ing.args, ing.env, ing.cwd)
    assert again.returncode == 0, again.stderr[-3000:]
    out2 = said(again)
    assert (added(out2, "entities"), added(out2, "relations")) == (0, 0)
    assert number(r"(\d[\d,]*) articles unchanged", out2) == documents
    assert "passages embedded" not in out2
    assert index_counts(out2) == (documents, passages)
    assert f"{ing.truncated}:{ing.break_line}: malformed XML" in out2  # still reported, still nothing else lost


def test_pubmed_file_that_is_not_pubmed_is_skipped(pubmed_ingest: PubmedIngest) -> None:
    ing = pubmed_ingest
    assert ing.first.returncode == 0
    out = said(ing.first)
    assert f"{ing.not_pubmed}: an eSearchResult, not PubMed records; skipped" in out
    assert index_counts(out)[0] == len(ing.expected_pmids)  # every other file loaded


def test_pubmed_missing_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-file.xml"
    real = shared("pubmed_xml", "ncbiutils")
    r = run(["ingest", "pubmed", str(real), str(missing), "--no-progress"], env_for(tmp_path / "data"), tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: {missing}: no such file or directory"], r.stderr
    assert r.stdout == ""


# -- medkg ingest docs, then medkg search --------------------------------------------------------------------

MARFAN_PMID = "990000001"  # a test record, not a real PubMed article
JSONL_LINES = [
    json.dumps(
        {
            "pmid": MARFAN_PMID,
            "title": "Aortic root dilation in Marfan syndrome (test record)",
            "abstract": "In Marfan syndrome the aortic root dilates with age. "
            "Beta blockers and losartan slow the rate of aortic dilation in these patients.",
            "year": 2014,
        }
    ),
    '{"pmid": "990000002", "title": "broken line", "abstract": "this line is cut',
    "",
    json.dumps({"pmid": "990000003", "title": "Fever in children (test record)", "abstract": "Fever is common."}),
]


@dataclass
class DocsIngest:
    env: dict[str, str]
    cwd: Path
    pqal: subprocess.CompletedProcess[str]
    jsonl_file: Path
    jsonl: subprocess.CompletedProcess[str]


@pytest.fixture(scope="module")
def docs_ingest(tmp_path_factory: pytest.TempPathFactory) -> DocsIngest:
    """PubMedQA's 200 dev abstracts, then a JSONL file with a broken line, into one data dir."""
    pqal = shared("pubmedqa", "pqal_dev.json")
    tmp = tmp_path_factory.mktemp("docs")
    env = env_for(tmp / "data")
    first = run(["ingest", "docs", str(pqal), "--no-progress"], env, tmp)
    jsonl_file = tmp / "extra.jsonl"
    jsonl_file.write_text("\n".join(JSONL_LINES) + "\n")
    second = run(["ingest", "docs", str(jsonl_file), "--no-link", "--no-progress"], env, tmp)
    return DocsIngest(env, tmp, first, jsonl_file, second)


def test_docs_pubmedqa_loads_200_documents(docs_ingest: DocsIngest) -> None:
    r = docs_ingest.pqal
    assert r.returncode == 0, r.stderr[-3000:]
    out = said(r)
    assert number(r"(\d[\d,]*) articles read", out) == 200
    documents, passages = index_counts(out)
    assert documents == 200 and passages >= 200
    assert "problem(s)" not in out and "Traceback" not in r.stderr


def test_docs_jsonl_broken_line_is_reported_and_the_others_load(docs_ingest: DocsIngest) -> None:
    r = docs_ingest.jsonl
    assert r.returncode == 0, r.stderr[-3000:]
    out = said(r)
    assert f"{docs_ingest.jsonl_file}:2: not valid JSON" in out
    assert "1 problem(s), skipped; the rest loaded:" in out
    assert number(r"(\d[\d,]*) articles read", out) == 2
    assert index_counts(out)[0] == 202


def search(docs: DocsIngest, *args: str) -> list[dict[str, object]]:
    r = run(["search", QUERY, "--json", *args], docs.env, docs.cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    hits = json.loads(r.stdout)
    assert hits, f"no hits for {args}"
    for hit in hits:
        assert re.fullmatch(r"PMID:\d+#s\d+", hit["id"]), hit
        assert re.fullmatch(r"PMID:\d+", hit["doc_id"]) and hit["id"].startswith(hit["doc_id"] + "#"), hit
        assert isinstance(hit["text"], str) and hit["text"].strip(), hit
        assert isinstance(hit["title"], str) and hit["title"].strip(), hit
    return hits


def test_search_hybrid_bm25_and_dense(docs_ingest: DocsIngest) -> None:
    marfan = f"PMID:{MARFAN_PMID}"
    hybrid = search(docs_ingest, "-k", "5")
    assert len(hybrid) <= 5
    assert hybrid[0]["doc_id"] == marfan and hybrid[0]["title"].startswith("Aortic root dilation in Marfan")
    assert all(h["dense"] is not None and h["dense"] >= 0.25 for h in hybrid)  # the default floor

    bm25 = search(docs_ingest, "--mode", "bm25")
    assert bm25[0]["doc_id"] == marfan
    assert all(h["bm25_rank"] is not None and h["dense_rank"] is None for h in bm25)
    assert [h["bm25_rank"] for h in bm25] == sorted(h["bm25_rank"] for h in bm25)

    dense = search(docs_ingest, "--mode", "dense", "-k", "3")
    assert len(dense) == 3 and dense[0]["doc_id"] == marfan
    assert all(h["dense_rank"] is not None and h["bm25_rank"] is None for h in dense)
    assert [h["dense"] for h in dense] == sorted((h["dense"] for h in dense), reverse=True)


def test_search_bad_mode_exits_2(tmp_path: Path) -> None:
    r = run(["search", QUERY, "--mode", "nope"], env_for(tmp_path / "data"), tmp_path)
    assert r.returncode == 2
    assert "--mode must be hybrid, bm25 or dense (got 'nope')" in said(r)
    assert "Traceback" not in r.stderr


def test_search_on_an_empty_data_dir_hints_to_ingest(tmp_path: Path) -> None:
    r = run(["search", QUERY], env_for(tmp_path / "data"), tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "no passage matches (is anything ingested? `medkg ingest pubmed PATH`)" in said(r)


# -- medkg ingest entrez against a local E-utilities stand-in ----------------------------------------------


@pytest.fixture(scope="module")
def eutils_server() -> Iterator[EutilsServer]:
    shared("pubmed_xml", "biopython_entrez", "esearch1.xml")
    with serve(load_corpus()) as server:
        yield server


def test_entrez_query_loads_resumes_and_reports(eutils_server: EutilsServer, tmp_path: Path) -> None:
    eutils = eutils_server.fresh()
    hits = sorted(eutils.corpus.records)[:8]
    eutils.search_ids = hits
    env = env_for(tmp_path / "data", MEDKG_ENTREZ_BASE_URL=eutils.base_url, MEDKG_ENTREZ_EMAIL="medkg-test@example.org")
    # --no-link: entity linking is the same code path as `ingest pubmed`; here it would only cost time
    args = ["ingest", "entrez", "--query", "biopython", "--max", "5", "--no-link", "--no-progress"]

    r = run(args, env, tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = said(r)
    assert number(r"(\d[\d,]*) articles read", out) == 5
    assert index_counts(out)[0] == 5
    assert [c.params["term"] for c in eutils.esearches()] == ["biopython"]
    assert sorted(i for c in eutils.efetches() for i in c.ids) == hits[:5]
    assert all(c.params["email"] == "medkg-test@example.org" for c in eutils.calls)
    printed = re.search(r"checkpoint: (\S+\.jsonl)", unwrapped(r))
    assert printed, out
    checkpoint = Path(printed.group(1))
    assert checkpoint.is_file() and checkpoint.parent == tmp_path / "data" / "entrez"

    eutils.calls.clear()
    again = run(args, env, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    out2 = said(again)
    assert eutils.efetches() == [] and eutils.esearches() == []  # the checkpoint holds the search and the records
    assert (added(out2, "entities"), added(out2, "relations")) == (0, 0)
    assert index_counts(out2)[0] == 5
    assert f"checkpoint: {checkpoint}" in unwrapped(again)

    eutils.calls.clear()
    missing = run(["ingest", "entrez", "--pmids", "1,2", "--no-link", "--no-progress"], env, tmp_path)
    assert missing.returncode == 0, missing.stderr[-3000:]
    assert "entrez efetch: 2 PMIDs not returned: 1, 2" in said(missing)
    assert [c.ids for c in eutils.efetches()] == [["1", "2"]]
    assert index_counts(said(missing))[0] == 5


def test_entrez_query_and_pmids_together_exit_2(tmp_path: Path) -> None:
    r = run(["ingest", "entrez", "--query", "x", "--pmids", "1"], env_for(tmp_path / "data"), tmp_path)
    assert r.returncode == 2
    assert "give exactly one of --query or --pmids" in said(r) and "Traceback" not in r.stderr


# -- medkg relink ----------------------------------------------------------------------------------------------

RELINK_DOCS = [
    {"pmid": "990000011", "title": "Marfan syndrome in adults", "abstract": "Ectopia lentis is common in Marfan "
     "syndrome. Aortic root dilatation was seen in most patients with Marfan syndrome."},
    {"pmid": "990000012", "title": "Lens surgery", "abstract": "We report ectopia lentis in two siblings."},
]  # fmt: skip
RELINK_OBO = """format-version: 1.2

[Term]
id: DOID:14323
name: Marfan syndrome

[Term]
id: HP:0001083
name: Ectopia lentis
"""


def test_relink_after_an_ontology_load_links_what_was_loaded_before(tmp_path: Path) -> None:
    """Abstracts loaded into an empty graph link to nothing; after the ontology comes, the ingest says
    so and `medkg relink` links them; a second run has nothing to do."""
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps(d) + "\n" for d in RELINK_DOCS))
    obo = tmp_path / "tiny.obo"
    obo.write_text(RELINK_OBO)
    env = env_for(tmp_path / "data")
    loaded = run(["ingest", "docs", str(docs), "--no-progress"], env, tmp_path)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert number(r"(\d[\d,]*) mentions", said(loaded)) == 0
    ontology = run(["ingest", "obo", str(obo), "--no-embed", "--no-progress"], env, tmp_path)
    assert ontology.returncode == 0, ontology.stderr[-3000:]
    assert "the 2 documents loaded before were linked with the entities the graph held then" in said(ontology)
    first = run(["relink", "--no-progress"], env, tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    out = said(first)
    assert number(r"(\d+) documents relinked", out) == 2
    # one edge per passage and entity: Marfan syndrome and ectopia lentis in the first, ectopia lentis in the second
    assert number(r"(\d+) mentions added", out) == 3
    assert added(out, "relations") >= 3 + 1  # the mentions and the Marfan-ectopia lentis co-mention
    second = run(["relink", "--no-progress"], env, tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert number(r"(\d+) documents already linked by this linker", said(second)) == 2
    entity = run(["neighbours", "HP:0001083", "--type", "MENTIONS"], env, tmp_path)
    assert entity.returncode == 0, entity.stderr[-3000:]
    assert set(re.findall(r"PMID:(\d+)#s\d+", entity.stdout)) == {"990000011", "990000012"}
