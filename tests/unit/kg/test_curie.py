import pytest

from kg.curie import CurieError, curie_prefix, normalize_curie, try_normalize_curie


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("MIM:154700", "OMIM:154700"),
        ("OMIM:154700", "OMIM:154700"),
        ("OMIM:#154700", "OMIM:154700"),
        ("MIM:PS267700", "OMIMPS:267700"),
        ("ORDO:558", "ORPHA:558"),
        ("Orphanet:558", "ORPHA:558"),
        ("ORPHA:558", "ORPHA:558"),
        ("Orphanet_558", "ORPHA:558"),
        ("http://www.orpha.net/ORDO/Orphanet_558", "ORPHA:558"),
        ("Gene::4313", "NCBIGene:4313"),
        ("NCBIGene:4313", "NCBIGene:4313"),
        ("EntrezGene:4313", "NCBIGene:4313"),
        ("Disease::DOID:14330", "DOID:14330"),
        ("Compound::DB00945", "DRUGBANK:DB00945"),
        ("Symptom::D000370", "MESH:D000370"),
        ("Side Effect::C0000737", "UMLS:C0000737"),
        ("Anatomy::UBERON:0000002", "UBERON:0000002"),
        ("DB00945", "DRUGBANK:DB00945"),
        ("db00945", "DRUGBANK:DB00945"),
        ("DrugBank:DB00945", "DRUGBANK:DB00945"),
        ("MSH:D008382", "MESH:D008382"),
        ("MESH:D008382", "MESH:D008382"),
        ("mesh:d008382", "MESH:D008382"),
        ("UMLS_CUI:C0024796", "UMLS:C0024796"),
        ("UMLS:c0024796", "UMLS:C0024796"),
        ("HP:0001250", "HP:0001250"),
        ("hp:0001250", "HP:0001250"),
        ("http://purl.obolibrary.org/obo/HP_0001250", "HP:0001250"),
        ("http://purl.obolibrary.org/obo/MONDO_0007915", "MONDO:0007915"),
        ("  DOID:14330 ", "DOID:14330"),
        ("PMID:31675180", "PMID:31675180"),
        ("pubmed:31675180", "PMID:31675180"),
        ("DECIPHER:1", "DECIPHER:1"),
        ("SNOMEDCT_US:22298006", "SNOMEDCT:22298006"),
        ("SNOMEDCT_US_2025_09_01:22298006", "SNOMEDCT:22298006"),  # versioned prefixes (DO's xrefs)
        ("SNOMEDCT_2010_1_31:22298006", "SNOMEDCT:22298006"),
        ("SNOMED_CT:22298006", "SNOMEDCT:22298006"),
        ("Orphanet:ORPHA2608", "ORPHA:2608"),
        ("ORPHA:ORPHA2608", "ORPHA:2608"),
        ("ICD-10:I21.9", "ICD10CM:I21.9"),
    ],
)
def test_every_source_spelling_becomes_one_curie(raw: str, expected: str) -> None:
    assert normalize_curie(raw) == expected


def test_normalising_is_idempotent() -> None:
    for raw in ("MIM:154700", "Gene::4313", "DB00945", "UMLS_CUI:C0024796", "Orphanet_558", "GO:GO:GO:0008150"):
        once = normalize_curie(raw)
        assert normalize_curie(once) == once
    assert normalize_curie("GO:GO:GO:0008150") == "GO:0008150"  # a repeated prefix, however often


def test_default_prefix_applies_to_bare_ids() -> None:
    assert normalize_curie("4313", default_prefix="NCBIGene") == "NCBIGene:4313"
    assert normalize_curie("154700", default_prefix="MIM") == "OMIM:154700"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("", "empty identifier"),
        ("   ", "empty identifier"),
        ("4313", "has no prefix"),
        ("OMIM:abc", "numeric"),
        ("HP:", "empty local part"),
        ("Gene::", "nothing after"),
        ("Widget::42", "unknown kind"),
        ("HP:00 01", "white space"),
        ("9X:1", "invalid CURIE prefix"),
        # the upper-cased namespaces are checked for their form (real slips from the shared data files)
        ("DRUGBANK:DB 00843", "not a DRUGBANK id"),
        ("DRUGBANK:NOTADB!", "not a DRUGBANK id"),
        ("Compound::DBxxxxx", "not a DRUGBANK id"),
        ("UMLS:0189573", "not a UMLS id"),
        ("UMLS_CUI:C002067", "not a UMLS id"),
        ("MESH:D0083 82", "not a MESH id"),
        ("NDFRT:N00001", "not a NDFRT id"),
        ("OMIM:１５４７００", "numeric"),  # full-width digits would be another key for OMIM:154700
        ("MESH:D001|D002", "one id per value"),  # '|' separates a relation key's parts
    ],
)
def test_bad_identifiers_raise_a_clear_error(raw: str, fragment: str) -> None:
    with pytest.raises(CurieError, match=fragment):
        normalize_curie(raw)
    assert try_normalize_curie(raw) is None


def test_non_string_is_refused() -> None:
    with pytest.raises(CurieError, match="must be a string"):
        normalize_curie(4313)  # type: ignore[arg-type]


def test_prefix_of_normalised_curie() -> None:
    assert curie_prefix(normalize_curie("MIM:154700")) == "OMIM"
