from pathlib import Path

from ingest.obo import obo_items, read_obo, relation_type_name, release_of, source_of
from ingest.summary import Problem
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
synonym: "being poorly" BROAD layperson [https://orcid.org/0000-0001-5208-3432]
synonym: "sickness" NARROW layperson_like []
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
    # EXACT, RELATED and the words of lay people (any scope); otherwise BROAD and NARROW are no names of it
    assert d1.synonyms == ["illness", "malady", "being poorly"]
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
    assert [(p.line, p.message.split(":")[0]) for p in problems] == [(22, "malformed line (expected 'tag")]
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
        (14, "DOID:1: a second name 'one again': ignored"),
    ]
    assert [e.name for e in found if isinstance(e, Entity)] == ["one", "two"]


def test_a_term_split_over_two_stanzas_is_one_term(tmp_path: Path) -> None:
    path = tmp_path / "split.obo"
    path.write_text(
        'format-version: 1.2\n\n[Term]\nid: DOID:1\nname: disease one\ndef: "A disease." []\n\n'
        "[Term]\nid: DOID:2\nname: two\n\n[Term]\nid: DOID:1\nxref: MESH:D000001\nis_a: DOID:2\n"
    )
    found = list(obo_items(path, source="doid"))
    entities = [e for e in found if isinstance(e, Entity)]
    assert [(e.id, e.name) for e in entities] == [("DOID:1", "disease one"), ("DOID:2", "two")]
    assert entities[0].description == "A disease." and entities[0].xrefs == ["MESH:D000001"]
    assert sum(n for what, n in (i for i in found if isinstance(i, tuple)) if what == "terms") == 2
    assert [(r.subject, r.object) for r in found if isinstance(r, Relation)] == [("DOID:1", "DOID:2")]


def test_values_keep_their_braces_and_escapes(tmp_path: Path) -> None:
    path = tmp_path / "escapes.obo"
    path.write_text(
        "format-version: 1.2\n\n"
        "[Term]\nid: CHEBI:1\nname: tris{2-aminoethyl}amine\n\n"
        "[Term]\nid: CHEBI:2\nname: tris{2-aminoethyl}\n\n"
        '[Term]\nid: CHEBI:3\nname: Rh{null} {source="x"}\ndef: "line one\\nline\\ttwo\\Wthree \\"q\\"" []\n\n'
        "[Term]\nid: CHEBI:4\nname: wow\\! yes ! a comment\n"
    )
    _, stream = read_obo(path)
    terms = {t.id: t for t in stream if not isinstance(t, Problem)}
    assert terms["CHEBI:1"].name == "tris{2-aminoethyl}amine"
    assert terms["CHEBI:2"].name == "tris{2-aminoethyl}"  # a brace set off by no space is no modifier
    assert terms["CHEBI:3"].name == "Rh{null}"
    assert terms["CHEBI:3"].definition == 'line one\nline\ttwo three "q"'
    assert terms["CHEBI:4"].name == "wow! yes"


def test_a_stanza_line_may_carry_a_comment(tmp_path: Path) -> None:
    path = tmp_path / "comment.obo"
    path.write_text(
        "format-version: 1.2\n\n[Term] ! the first\nid: HP:0000001\nname: All\n\n"
        "[Typedef] ! not a term\nid: part_of\nname: part of\n\n[Term] ! another\nid: HP:0000002\nname: x\n"
    )
    _, stream = read_obo(path)
    found = list(stream)
    assert [(t.id, t.name) for t in found] == [("HP:0000001", "All"), ("HP:0000002", "x")]
