"""Rows of an edge list that state and deny one fact are reported (the later row is the one kept)."""

from __future__ import annotations

from pathlib import Path

from ingest.edges import edge_items, load_mapping
from ingest.report import Problem
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
