"""Rows of an edge list that state and deny one fact are reported (the later row is the one kept)."""

from __future__ import annotations

from pathlib import Path

from ingest.edges import edge_items, load_mapping
from ingest.summary import Problem
from kg.model import Relation

HEADER = "doid_id\tdrugbank_id\tdisease\tdrug\tcategory\tn_curators\tn_resources\n"


def test_a_fact_stated_and_denied_in_one_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "indications.tsv"
    path.write_text(
        HEADER
        + "DOID:10652\tDB00843\tAlzheimer's disease\tDonepezil\tDM\t2\t1\n"
        + "DOID:10652\tDB00843\tAlzheimer's disease\tDonepezil\tDM\t3\t1\n"  # the same fact again: fine
        + "DOID:10652\tDB00843\tAlzheimer's disease\tDonepezil\tNOT\t1\t1\n"
    )
    found = list(edge_items(path, load_mapping("pharmacotherapydb")))
    problems = [(p.line, p.message) for p in found if isinstance(p, Problem)]
    assert problems == [(4, "DRUGBANK:DB00843 TREATS DOID:10652 denied here, stated at line 2: this row is kept")]
    assert [r.negated for r in found if isinstance(r, Relation)] == [False, False, True]


def test_padded_header_names_trailing_tabs_and_blank_lines_are_read_as_meant(tmp_path: Path) -> None:
    path = tmp_path / "indications.tsv"
    path.write_text(
        HEADER.replace("\t", " \t").replace("\n", "\t\n")  # "doid_id \t...n_resources\t"
        + "DOID:10652\tDB00843\tAlzheimer's disease\tDonepezil\tDM\t2\t1\t\n"  # a trailing tab
        + "   \n\t\n"  # white space only: nothing to read, nothing to report
        + "DOID:10652\tDB00674\tAlzheimer's disease\tGalantamine\tSYM\t1\t4\n"
        + "DOID:10652\tDB00675\tAlzheimer's disease\tx\tSYM\t1\t4\textra\n"  # a real extra field still is one
    )
    found = list(edge_items(path, load_mapping("pharmacotherapydb")))
    assert [(p.line, p.message) for p in found if isinstance(p, Problem)] == [
        (6, "wrong number of columns: row skipped")
    ]
    relations = [r for r in found if isinstance(r, Relation)]
    assert [(r.subject, r.type, r.evidence) for r in relations] == [
        ("DRUGBANK:DB00843", "TREATS", {"category": "DM", "n_curators": "2", "n_resources": "1"}),
        ("DRUGBANK:DB00674", "PALLIATES", {"category": "SYM", "n_curators": "1", "n_resources": "4"}),
    ]
