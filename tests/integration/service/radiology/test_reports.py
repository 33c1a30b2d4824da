"""Radiology reports (IU chest X-ray, Open-i) into Documents, Passages, MENTIONS and HAS_FINDING edges,
the passage indexes and the report table: the real shared development file, on both backends."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from ingest.radiology_reports import (
    HAS_FINDING,
    RadiologyReport,
    ReportFormatError,
    ReportLoader,
    ReportProblem,
    ReportStore,
    read_iu_reports,
)
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker, Lexicon
from kg.model import HAS_PASSAGE, MENTIONS
from kg.nlp import build_pipeline
from kg.text_index import TextIndex
from tests.conftest import shared
from tests.support.studies import RADIOLOGY_ONTOLOGY

HEADER = "uid,MeSH,Problems,image,indication,comparison,findings,impression\n"


def dev_reports() -> tuple[Path, Path]:
    return shared("iu_xray_reports", "indiana_reports_dev.csv"), shared("iu_xray_reports", "indiana_projections.csv")


def loader_for(store: BaseGraphStore, tmp_path: Path, embedder, **kw) -> ReportLoader:
    nlp = build_pipeline()
    linker = EntityLinker(nlp, Lexicon.build(store, nlp))
    return ReportLoader(store, TextIndex(tmp_path / "idx", embedder), nlp, linker, progress=False, **kw)


def test_reading_the_shared_development_file() -> None:
    reports_csv, projections = dev_reports()
    records = list(read_iu_reports(reports_csv, projections))
    reports = [r for r in records if isinstance(r, RadiologyReport)]
    problems = [r for r in records if isinstance(r, ReportProblem)]
    # 756 rows; three have neither findings nor impression (uids 1293, 1761, 3782).
    assert len(records) == 756 and len(reports) == 753 and len(problems) == 3
    assert all("neither findings nor impression" in p.message and p.line for p in problems)
    assert {p.message.split()[1] for p in problems} == {"1293", "1761", "3782"}
    first = reports[0]
    assert first.uid == "2" and first.mesh == ["Cardiomegaly/borderline", "Pulmonary Artery/enlarged"]
    assert first.problems == ["Cardiomegaly", "Pulmonary Artery"]
    assert first.findings.startswith("Borderline cardiomegaly. Midline sternotomy XXXX.")  # placeholders kept
    assert first.image_description == "Chest, 2 views, frontal and lateral"
    assert sorted(first.images) == [("2_IM-0652-1001.dcm.png", "Frontal"), ("2_IM-0652-2001.dcm.png", "Lateral")]
    assert reports[1].mesh == ["normal"] and reports[1].comparison == "XXXX, XXXX"
    assert sum(1 for r in reports if r.comparison is None) > 50  # empty cells are None
    assert sum(1 for r in reports if r.images) == 753 and sum(len(r.images) for r in reports) == 1465


def test_malformed_files_give_clear_errors_and_problems(store: BaseGraphStore, tmp_path: Path, text_embedder) -> None:
    missing = tmp_path / "no_impression.csv"
    missing.write_text("uid,MeSH,findings\n1,normal,Clear lungs.\n")
    with pytest.raises(ReportFormatError) as err:
        read_iu_reports(missing)
    assert str(missing) in str(err.value) and "impression" in str(err.value) and "'MeSH'" in str(err.value)

    bad = tmp_path / "bad.csv"
    bad.write_text(
        HEADER
        + '10,Pneumothorax/right,Pneumothorax,PA,"Chest pain,\nshortness of breath",None.,Small right pneumothorax.,'
        "Right pneumothorax.\n"  # lines 2-3 (a quoted cell over two lines)
        + "11,normal,normal,PA,Cough,,,\n"  # line 4: neither findings nor impression
        + "12,normal,normal,PA,Cough,None.,No pneumothorax.\n"  # line 5: a cell short
        + "10,normal,normal,PA,Cough,None.,Clear.,Normal.\n"  # line 6: uid repeated
        + "bad uid,normal,normal,PA,Cough,None.,Clear.,Normal.\n"  # line 7
        + "13,Cardiomegaly,Cardiomegaly,PA,,,,Cardiomegaly.\n"  # impression only: loads
    )
    records = list(read_iu_reports(bad))
    problems = {p.line: p.message for p in records if isinstance(p, ReportProblem)}
    assert problems == {
        4: "report 11 has neither findings nor impression",
        5: "7 cells, the header has 8",
        6: "uid 10 repeated (first at line 2); skipped",
        7: "report 'bad uid': uid must be letters, digits, '.', '_' or '-', got 'bad uid'",
    }
    assert all(str(bad) in str(p) for p in records if isinstance(p, ReportProblem))
    reports = {r.uid: r for r in records if isinstance(r, RadiologyReport)}
    assert reports["10"].indication == "Chest pain, shortness of breath" and reports["13"].findings is None

    store.upsert_entities(RADIOLOGY_ONTOLOGY)
    result = loader_for(store, tmp_path, text_embedder).load(records)
    assert result.problem_count == 4 and result.reports_read == 2 and result.documents_added == 2
    assert store.get_entity("IUXR:13").category == "Document"


def test_reports_load_as_documents_passages_mentions_and_findings(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    reports_csv, projections = dev_reports()
    reports = list(itertools.islice(read_iu_reports(reports_csv, projections), 50))
    assert all(isinstance(r, RadiologyReport) for r in reports)
    store.upsert_entities(RADIOLOGY_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder)
    result = loader.load(reports)
    assert result.documents_added == 50 and result.problem_count == 0
    assert result.passages >= 50 and result.mentions > 20 and result.findings_linked >= 5
    assert 0 < result.mentions_negated < result.mentions

    doc = store.get_entity("IUXR:2")
    assert doc.category == "Document" and doc.name == "Chest X-ray report 2: Preop bariatric surgery"
    assert doc.description == "Indiana University chest X-ray collection (Open-i), report 2." and doc.sources == [
        "iu_xray"
    ]
    passages = [n.entity for n in store.neighbours("IUXR:2", rel_types=[HAS_PASSAGE], direction="out")]
    assert [p.id for p in passages] == ["IUXR:2#s0"] and passages[0].category == "Passage"
    text = passages[0].description
    assert text.startswith(
        "INDICATION: Preop bariatric surgery.\nCOMPARISON: None.\nFINDINGS: Borderline cardiomegaly."
    )
    assert "\nIMPRESSION: No acute pulmonary findings." in text
    mentions = {n.entity.id: n.relation for n in store.neighbours("IUXR:2#s0", rel_types=[MENTIONS], direction="out")}
    assert set(mentions) == {"HP:0001640"} and mentions["HP:0001640"].source == "iu_xray"
    start, end = mentions["HP:0001640"].evidence["spans"][0]
    assert text[start:end] == "cardiomegaly" and "negated" not in mentions["HP:0001640"].evidence

    findings = {n.entity.id: n.relation for n in store.neighbours("IUXR:2", rel_types=[HAS_FINDING], direction="out")}
    assert set(findings) == {"HP:0001640"}  # "Pulmonary Artery/enlarged" is not in this small graph
    assert findings["HP:0001640"].evidence["qualifiers"] == ["borderline"]
    assert findings["HP:0001640"].evidence["terms"] == ["Cardiomegaly/borderline"]
    # An inverted MeSH heading links turned round ("Aorta, Thoracic" -> thoracic aorta), not just "aorta".
    aorta = store.neighbours("IUXR:19", rel_types=[HAS_FINDING], direction="out")
    assert [(n.entity.id, n.relation.evidence["exact"]) for n in aorta] == [("UBERON:0001515", True)]
    assert store.neighbours("IUXR:6", rel_types=[HAS_FINDING], direction="out") == []  # "normal"
    # "No pneumothorax or large pleural effusion.": both mentioned, both negated.
    negated = {n.entity.id: n.relation.evidence.get("negated") for n in store.neighbours("IUXR:6#s0", [MENTIONS])}
    assert negated == {"HP:0002107": True, "HP:0002202": True}

    hits = loader.text_index.search("enlarged heart cardiomegaly", k=3)
    assert hits and all(h.doc_id.startswith("IUXR:") and h.id.startswith(h.doc_id + "#s") for h in hits)
    # the top hit is an enlarged heart, named so or described ("heart is mildly enlarged": the int8 embedding
    # path ranks that report first), and the word itself is among the hits
    assert hits[0].title.startswith("Chest X-ray report")
    assert any(w in hits[0].text.lower() for w in ("cardiomegaly", "enlarged"))
    assert any("cardiomegaly" in h.text.lower() for h in hits)

    table = ReportStore(tmp_path / "idx" / "reports.sqlite")
    assert len(table) == 50 and table.get("IUXR:2").impression == "No acute pulmonary findings."
    assert table.get("IUXR:2").images == reports[0].images and table.get("IUXR:2").mesh == reports[0].mesh
    assert table.sections("IUXR:6")["IMPRESSION"] == "No acute cardiopulmonary findings."
    assert [doc_id for doc_id, _ in table.iter(batch=7)] == sorted(f"IUXR:{r.uid}" for r in reports)
    assert table.ids("IUXR:") == table.ids() == sorted(f"IUXR:{r.uid}" for r in reports)
    assert table.ids("IUXR:1") == sorted(f"IUXR:{r.uid}" for r in reports if r.uid.startswith("1"))
    assert table.ids("OTHER:") == []

    # Loading the same reports again changes nothing.
    before = store.stats()
    again = loader.load(reports)
    assert again.documents_unchanged == 50 and again.documents_added == again.documents_changed == 0
    assert again.relations.added == again.relations.updated == 0 and store.stats() == before
    assert len(loader.text_index) == result.passages and len(table) == 50


def test_a_changed_report_replaces_its_passages_and_edges(store: BaseGraphStore, tmp_path: Path, text_embedder) -> None:
    store.upsert_entities(RADIOLOGY_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder, max_words=8)
    long = RadiologyReport(
        uid="7",
        indication="Shortness of breath.",
        findings="Moderate cardiomegaly. Small left pleural effusion with adjacent atelectasis. No pneumothorax.",
        impression="Cardiomegaly and small left pleural effusion.",
        mesh=["Cardiomegaly/moderate", "Pleural Effusion/left/small"],
    )
    loader.load([long])
    before = loader.text_index.document_passages("IUXR:7")
    assert len(before) >= 3

    fixed = long.model_copy(
        update={"findings": "Moderate cardiomegaly.", "impression": "Cardiomegaly.", "mesh": ["Cardiomegaly/moderate"]}
    )
    result = loader.load([fixed])
    assert result.documents_changed == 1 and result.passages_retired == len(before) - result.passages
    after = loader.text_index.document_passages("IUXR:7")
    assert set(after) < set(before)
    gone = sorted(set(before) - set(after))
    assert all(store.get_entity(p).obsolete for p in gone)
    assert all(store.neighbours(p, rel_types=[MENTIONS, HAS_PASSAGE]) == [] for p in gone)
    findings = store.neighbours("IUXR:7", rel_types=[HAS_FINDING], direction="out")
    assert [n.entity.id for n in findings] == ["HP:0001640"]  # the effusion finding ended
    ended = [r for r in store.relations(subject="IUXR:7", type=HAS_FINDING) if r.valid_to is not None]
    assert [r.object for r in ended] == ["HP:0002202"]
    mentioned = {n.entity.id for p in after for n in store.neighbours(p, rel_types=[MENTIONS], direction="out")}
    assert mentioned == {"HP:0001640"}
    assert loader.reports.get("IUXR:7").impression == "Cardiomegaly."

    # The first wording again: its passages come back current, not obsolete, and the shorter wording
    # leaves no synonyms behind.
    loader.load([long])
    assert loader.text_index.document_passages("IUXR:7") == before
    for passage in before:
        entity = store.get_entity(passage)
        assert not entity.obsolete and entity.synonyms == [], passage
        assert [n.entity.id for n in store.neighbours(passage, rel_types=[HAS_PASSAGE], direction="in")] == ["IUXR:7"]
    assert store.get_entity("IUXR:7").synonyms == []


def test_a_collection_loaded_whole_retires_the_reports_it_no_longer_has(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    store.upsert_entities(RADIOLOGY_ONTOLOGY)
    loader = loader_for(store, tmp_path, text_embedder)
    seven = RadiologyReport(uid="7", indication="Cough.", findings="Moderate cardiomegaly.", mesh=["Cardiomegaly"])
    eight = RadiologyReport(uid="8", indication="Chest pain.", findings="Small pleural effusion. No pneumothorax.")
    loader.load([seven, eight])
    passages = loader.text_index.document_passages("IUXR:8")
    assert passages and store.neighbours("IUXR:8", [HAS_PASSAGE])

    # a file with a problem retires nothing: the row it could not read may be report 8
    broken = loader.load([seven, ReportProblem(file="r.csv", line=3, message="bad row")], replace=True)
    assert broken.documents_retired == 0 and loader.reports.get("IUXR:8") is not None
    assert "--replace: nothing retired, the file had problems (fix them and load it again)" in broken.notes

    result = loader.load([seven], replace=True)
    assert (result.documents_unchanged, result.documents_retired, result.passages_retired) == (1, 1, len(passages))
    assert store.get_entity("IUXR:8").obsolete and all(store.get_entity(p).obsolete for p in passages)
    assert store.neighbours("IUXR:8") == [] and all(store.neighbours(p) == [] for p in passages)
    assert any(r.valid_to for r in store.relations(subject=passages[0], type=MENTIONS))  # ended, kept
    assert loader.text_index.document_passages("IUXR:8") == [] and loader.reports.get("IUXR:8") is None
    assert all(h.doc_id != "IUXR:8" for h in loader.text_index.search("pleural effusion", k=5, floor=-1.0))
    assert not store.get_entity("IUXR:7").obsolete and loader.reports.get("IUXR:7") is not None

    back = loader.load([seven, eight])  # the report comes back: loaded anew
    assert back.documents_changed == 1
    assert not store.get_entity("IUXR:8").obsolete and loader.text_index.document_passages("IUXR:8") == passages
    assert not any(store.get_entity(p).obsolete for p in passages) and loader.reports.get("IUXR:8") is not None


def _generator(store: BaseGraphStore, tmp_path: Path, embedder, reports: list[RadiologyReport]):  # noqa: ANN202
    from service.radiology.generator import ReportGenerator

    store.upsert_entities(RADIOLOGY_ONTOLOGY)
    loader = loader_for(store, tmp_path, embedder)
    assert loader.load(reports).documents_added == len(reports)
    return ReportGenerator(loader.text_index, ReportStore(tmp_path / "idx" / "reports.sqlite"))


def test_priors_with_nothing_a_draft_may_take_give_an_insufficient_draft(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    reports = [  # similar priors, but no findings and only placeholder impressions
        RadiologyReport(uid="1", indication="Chest pain.", findings=None, impression="Stable XXXX."),
        RadiologyReport(uid="2", indication="Chest pain.", findings="XXXX is normal.", impression="No acute XXXX."),
        RadiologyReport(uid="3", indication="Chest pain.", findings="ComparisXXXX shows XXXX.", impression="XXXX."),
    ]
    generator = _generator(store, tmp_path, text_embedder, reports)
    draft = generator.generate("Chest pain.", mode="extractive")
    assert {p.doc_id for p in draft.priors} == {"IUXR:1", "IUXR:2", "IUXR:3"}
    assert draft.insufficient_evidence and draft.confidence == 0.0 and draft.impression == ""
    assert draft.findings.startswith("Insufficient evidence") and draft.citations == []
    # with the reader's findings only the impression is drafted: the findings are theirs, as given
    read = generator.generate("Chest pain.", findings="Heart enlarged [2 views].", mode="extractive")
    assert read.insufficient_evidence and read.findings == "Heart enlarged [2 views]." and read.dropped_citations == []
    assert read.impression.startswith("Insufficient evidence: no similar prior report has findings or an impression")


def test_placeholders_glued_to_a_word_keep_a_sentence_out_of_a_draft(
    store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    from service.radiology.generator import usable_impression

    assert not usable_impression("Stable XXXXyo.") and not usable_impression("No change since 5XXXX.")
    assert usable_impression("No acute cardiopulmonary abnormality. Box, Xray.")
    reports = [
        RadiologyReport(
            uid=str(n),
            indication="Chest pain.",
            findings="The lungs are clear. Unchanged since comparisXXXX.",
            impression=f"Stable since XXXX{n}yo." if n < 3 else "No acute disease.",
        )
        for n in (1, 2, 3)
    ]
    draft = _generator(store, tmp_path, text_embedder, reports).generate("Chest pain.", mode="extractive")
    assert "XXXX" not in draft.findings + draft.impression and "The lungs are clear." in draft.findings
    assert draft.impression.startswith("No acute disease. [IUXR:3#") and not draft.insufficient_evidence


def test_the_studys_own_findings_choose_the_impression(store: BaseGraphStore, tmp_path: Path, text_embedder) -> None:
    """Priors alike by indication mostly read normal; when the study's findings are given, the impression
    is that of the priors whose findings read like them, not the normal majority's."""
    normal = "Lungs clear. Normal cardiomediastinal silhouette."
    reports = [
        RadiologyReport(uid="1", indication="Shortness of breath.", findings=normal, impression="No acute disease."),
        RadiologyReport(uid="2", indication="Shortness of breath.", findings=normal, impression="No acute disease."),
        RadiologyReport(
            uid="3",
            indication="Shortness of breath.",
            findings="The heart is enlarged. Small left pleural effusion. No pneumothorax.",
            impression="Cardiomegaly with a small left pleural effusion.",
        ),
    ]
    generator = _generator(store, tmp_path, text_embedder, reports)
    unknown = generator.generate("Shortness of breath.", mode="extractive")
    assert unknown.impression.startswith("No acute disease.")
    given = generator.generate(
        "Shortness of breath.",
        findings="The heart is enlarged. There is a small left pleural effusion.",
        mode="extractive",
    )
    assert given.impression.startswith("Cardiomegaly with a small left pleural effusion. [IUXR:3#")
    assert given.findings == "The heart is enlarged. There is a small left pleural effusion."  # the reader's
    assert not given.insufficient_evidence and "[IUXR:" in unknown.findings  # without them: drafted from priors
    assert {p.doc_id for p in given.priors} == {"IUXR:1", "IUXR:2", "IUXR:3"}
