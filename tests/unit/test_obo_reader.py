from pathlib import Path

from ingest.obo import obo_items, read_obo, relation_type_name, release_of, source_of
from ingest.report import Problem
from kg.model import Entity, Relation

OBO = """format-version: 1.2
data-version: test/releases/2024-01-01
ontology: test

[Term]
id: DOID:1
name: disease
def: "A disease with a \\"quoted\\" word." [url:x]
synonym: "illness" EXACT []
synonym: "malady" RELATED []
synonym: "condition" BROAD []
xref: MIM:154700
xref: UMLS_CUI:C0012634 {source="x"}

[Term]
id: DOID:2
name: child ! a comment
is_a: DOID:1 ! disease
relationship: has_material_basis_in SO:0001 ! variant
this line is broken
alt_id: DOID:20

[Term]
name: no id here
id: DOID:3

[Term]
id: DOID:4
name: old term
is_obsolete: true
replaced_by: DOID:2

[Typedef]
id: part_of
name: part of
"""


def items(tmp_path: Path) -> list:
    path = tmp_path / "t.obo"
    path.write_text(OBO)
    return list(obo_items(path, source="doid"))


def test_terms_synonyms_by_scope_xrefs(tmp_path: Path) -> None:
    found = items(tmp_path)
    entities = {e.id: e for e in found if isinstance(e, Entity)}
    assert set(entities) == {"DOID:1", "DOID:2", "DOID:3", "DOID:4"}
    d1 = entities["DOID:1"]
    assert d1.description == 'A disease with a "quoted" word.'
    assert d1.synonyms == ["illness", "malady"]  # EXACT and RELATED; BROAD is not a name of the term
    assert d1.xrefs == ["OMIM:154700", "UMLS:C0012634"]
    assert d1.category == "Disease" and d1.sources == ["doid:2024-01-01"]
    assert entities["DOID:2"].name == "child" and entities["DOID:2"].xrefs == ["DOID:20"]
    assert entities["DOID:4"].obsolete


def test_relations_and_problems_with_line_numbers(tmp_path: Path) -> None:
    found = items(tmp_path)
    rels = {(r.subject, r.type, r.object) for r in found if isinstance(r, Relation)}
    assert rels == {
        ("DOID:2", "IS_A", "DOID:1"),
        ("DOID:2", "HAS_MATERIAL_BASIS_IN", "SO:0001"),
        ("DOID:4", "REPLACED_BY", "DOID:2"),
    }
    problems = [p for p in found if isinstance(p, Problem)]
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [(20, "malformed line (expected 'tag")]
    assert "this line is broken" in problems[0].message
    # Tags may come in any order: the stanza whose id comes after its name still loads.
    assert any(isinstance(e, Entity) and e.id == "DOID:3" and e.name == "no id here" for e in found)


def test_stanza_without_id_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "t.obo"
    path.write_text("[Term]\nname: nothing\n\n[Term]\nid: HP:0000001\nname: All\n")
    header, stream = read_obo(path)
    out = list(stream)
    assert isinstance(out[0], Problem) and out[0].line == 1 and "without an id" in out[0].message
    assert out[1].id == "HP:0000001"


def test_relation_type_names() -> None:
    assert relation_type_name("part_of") == "PART_OF"
    assert relation_type_name("RO:0002200") == "RO_0002200"
    assert relation_type_name("2x") == "REL_2X"


def test_the_release_a_data_version_names_and_the_source_it_makes() -> None:
    assert release_of("hp/releases/2025-01-16") == ("2025-01-16", None)
    assert release_of("doid/releases/2026-07-31/subsets/DO_rare_slim.obo") == ("2026-07-31", "DO_rare_slim")
    assert release_of("releases/2016-06-24") == ("2016-06-24", None)
    assert release_of("v1.2/") == ("v1.2", None)
    assert source_of("doid", "doid/releases/2016-06-24") == ("doid:2016-06-24", "doid:")
    # a subset is a file of its own: its releases do not supersede the whole ontology's
    subset = source_of("doid", "doid/releases/2026-07-31/subsets/DO_rare_slim.obo")
    assert subset == ("doid/DO_rare_slim:2026-07-31", "doid/DO_rare_slim:")
    assert source_of("go", "v1.2") == ("go:v1.2", None)  # no date: no order of releases
    assert source_of("doid", None) == ("doid", None) and source_of("doid:x", "releases/2016-06-24") == ("doid:x", None)


def test_a_second_stanza_of_a_term_and_a_second_id_are_reported(tmp_path: Path) -> None:
    path = tmp_path / "dup.obo"
    path.write_text(
        "format-version: 1.2\n\n[Term]\nid: DOID:1\nname: one\n\n[Term]\nid: DOID:2\nid: DOID:6\nname: two\n\n"
        "[Term]\nid: DOID:1\nname: one again\n"
    )
    found = list(obo_items(path, source="doid"))
    problems = [(p.line, p.message) for p in found if isinstance(p, Problem)]
    assert problems == [
        (9, "DOID:2: a second id 'DOID:6': ignored"),
        (12, "DOID:1: a second stanza of the term (the first at line 3): merged"),
    ]
    assert [e.name for e in found if isinstance(e, Entity)] == ["one", "two", "one again"]
