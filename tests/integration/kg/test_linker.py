"""Entity linking on a real store: lexicon (names, synonyms, case/plural), local abbreviations,
the entity vector index for near misses, held-out synonyms."""

from __future__ import annotations

from pathlib import Path

import pytest

from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.linker import EntityLinker, Lexicon, Mention
from kg.model import Entity
from kg.nlp import build_pipeline

ENTITIES = [
    Entity(id="DOID:14323", name="Marfan syndrome", category="Disease", sources=["do"]),
    Entity(id="OMIM:154700", name="Marfan syndrome", category="Disease", sources=["hpo"], synonyms=["MFS"]),
    Entity(id="HP:0002616", name="Aortic root aneurysm", category="Phenotype", synonyms=["Aortic root dilatation"]),
    Entity(id="HP:0001250", name="Seizure", category="Phenotype", synonyms=["Epileptic seizure"]),
    Entity(id="HP:0001658", name="Myocardial infarction", category="Phenotype", synonyms=["Heart attack"]),
    Entity(id="DOID:3393", name="coronary artery disease", category="Disease"),
    Entity(id="NCBIGene:790", name="CAD", category="Gene", synonyms=["carbamoyl-phosphate synthetase 2"]),
    Entity(id="HP:0000001", name="All", category="Phenotype"),  # ontology root: never linked
    Entity(id="DOID:1612", name="breast cancer", category="Disease"),
    Entity(id="DOID:162", name="cancer", category="Disease"),
    Entity(id="DOID:9352", name="type 2 diabetes mellitus", category="Disease", synonyms=["T2DM"]),
    Entity(id="DRUGBANK:DB00331", name="Metformin", category="Drug"),
    Entity(id="HP:0001513", name="Obesity", category="Phenotype", description="Accumulation of excess body fat."),
    Entity(id="PMID:1", name="A document title about cancer", category="Document"),  # text is never a term
]


@pytest.fixture
def linked_store(store: BaseGraphStore) -> BaseGraphStore:
    store.upsert_entities(ENTITIES)
    return store


def test_lexicon_links_names_synonyms_case_and_plurals(linked_store: BaseGraphStore) -> None:
    nlp = build_pipeline()
    lexicon = Lexicon.build(linked_store, nlp)
    assert lexicon.ids_for(lexicon.key("Marfan Syndrome")) == ("DOID:14323", "OMIM:154700")
    assert lexicon.key("All") is None and lexicon.key("a document title about cancer") not in lexicon.names
    linker = EntityLinker(nlp, lexicon)
    text = "Two SEIZURES and epileptic seizures occurred; Breast cancers were treated with metformin."
    found = {(m.text, m.ids) for m in linker.link_text(text)}
    assert ("SEIZURES", ("HP:0001250",)) in found
    assert ("epileptic seizures", ("HP:0001250",)) in found
    # The longest match wins: "Breast cancers" is breast cancer, not cancer.
    assert ("Breast cancers", ("DOID:1612",)) in found
    assert not any(ids == ("DOID:162",) for _, ids in found)
    assert ("metformin", ("DRUGBANK:DB00331",)) in found
    mentions = linker.link_text(text)
    for m in mentions:
        assert text[m.start : m.end] == m.text and m.method == "lexicon"


def test_qualifiers_alone_are_words_not_mentions(linked_store: BaseGraphStore) -> None:
    """HPO's one-word modifiers and course terms ("Left", "Focal", "Stable") are adjectives in running
    text; as part of a longer name, and with several words, they still link."""
    linked_store.upsert_entities(
        [
            Entity(id="HP:0012835", name="Left", category="ClinicalModifier"),
            Entity(id="HP:0030650", name="Focal", category="ClinicalModifier"),
            Entity(id="HP:0040282", name="Frequent", category="Frequency"),
            Entity(id="HP:0031915", name="Stable", category="ClinicalCourse"),
            Entity(id="HP:0003826", name="Stillbirth", category="ClinicalCourse"),
            Entity(id="HP:0012832", name="Bilateral", category="ClinicalModifier", synonyms=["Both sides"]),
            Entity(id="HP:0007359", name="Focal-onset seizure", category="Phenotype", synonyms=["Focal seizures"]),
        ]
    )
    lexicon = Lexicon.build(linked_store, build_pipeline())
    assert [lexicon.key(t) for t in ("Methods", "Middle Aged", "Risk Factors", "Recurrent")] == [None] * 4
    linker = EntityLinker(lexicon.nlp, lexicon)
    text = "Frequent focal seizures on the left stayed stable; a stillbirth; seizures on both sides."
    found = {(m.text, m.ids) for m in linker.link_text(text)}
    assert found == {
        ("focal seizures", ("HP:0007359",)),
        ("stillbirth", ("HP:0003826",)),  # a course term that is a finding, not a qualifier
        ("seizures", ("HP:0001250",)),
        ("both sides", ("HP:0012832",)),
    }


def test_local_abbreviation_overrides_the_global_meaning(linked_store: BaseGraphStore) -> None:
    nlp = build_pipeline()
    linker = EntityLinker(nlp, Lexicon.build(linked_store, nlp))
    defined = linker.link_text("Patients with coronary artery disease (CAD) were followed. CAD progressed in 3.")
    cad = [m for m in defined if m.text == "CAD"]
    assert len(cad) == 2 and all(m.ids == ("DOID:3393",) and m.method == "abbreviation" for m in cad)
    assert [m.sentence for m in cad] == [0, 1]
    plain = linker.link_text("The CAD gene was sequenced; cad is not matched in lower case.")
    assert [(m.text, m.ids) for m in plain] == [("CAD", ("NCBIGene:790",))]


def test_vector_index_links_near_misses_and_held_out_synonyms(
    linked_store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    nlp = build_pipeline()
    index = EntityIndex(tmp_path / "indexes", text_embedder)
    index.update(linked_store, progress=False)
    assert "PMID:1" not in index.index  # documents and passages are not entities to link to
    held = {("HP:0001658", "Heart attack")}
    lexicon = Lexicon.build(linked_store, nlp, held_out=held)
    assert lexicon.key("heart attack") not in lexicon.synonyms
    no_vectors = EntityLinker(nlp, lexicon)
    assert no_vectors.link_query("heart attack") == []
    linker = EntityLinker(nlp, lexicon, index, threshold=0.75, query_threshold=0.6)
    found = linker.link_query("heart attack")
    assert [(m.ids, m.method) for m in found] == [(("HP:0001658",), "vector")]
    assert 0.6 <= found[0].score <= 1.0
    # In a question, lexicon hits stay and the uncovered words go to the index.
    mixed = linker.link_query("Does metformin help with excess body fat?")
    assert {m.ids[0] for m in mixed} >= {"DRUGBANK:DB00331", "HP:0001513"}
    # An unmatched long form of a local abbreviation is looked up by meaning in documents too.
    doc_mentions = linker.link_text("We measured excess body fat (EBF) in 40 patients. EBF fell.")
    ebf = [m for m in doc_mentions if m.text == "EBF"]
    assert len(ebf) == 2 and all(m.ids == ("HP:0001513",) for m in ebf)
    assert [m.method for m in doc_mentions if m.text == "excess body fat"] == ["vector"]
    # Nonsense stays unlinked.
    assert linker.link_query("quarterly tax filing deadline") == []


def test_a_local_abbreviation_linked_by_meaning_overrides_the_global_one(
    linked_store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    """ "EBF" is a gene's alias in the lexicon; defined here as "excess body fat" (linked by meaning), each
    "EBF" means obesity only, as a defined abbreviation whose long form is in the lexicon does."""
    linked_store.upsert_entities([Entity(id="NCBIGene:1879", name="EBF1", category="Gene", synonyms=["EBF"])])
    nlp = build_pipeline()
    index = EntityIndex(tmp_path / "indexes", text_embedder)
    index.update(linked_store, progress=False)
    linker = EntityLinker(nlp, Lexicon.build(linked_store, nlp), index, threshold=0.75)
    assert [m.ids for m in linker.link_text("EBF binds DNA.")] == [("NCBIGene:1879",)]  # undefined: the alias
    found = linker.link_text("We measured excess body fat (EBF) in 40 patients. EBF fell.")
    assert [(m.ids, m.method) for m in found if m.text == "EBF"] == [(("HP:0001513",), "abbreviation")] * 2


def test_lexicon_skips_excluded_sources(linked_store: BaseGraphStore) -> None:
    nlp = build_pipeline()
    lexicon = Lexicon.build(linked_store, nlp, exclude_sources={"hpo"})
    assert lexicon.ids_for(lexicon.key("Marfan syndrome")) == ("DOID:14323",)


def test_a_configured_ner_model_has_its_spans_linked(
    linked_store: BaseGraphStore, tmp_path: Path, text_embedder
) -> None:
    """MEDKG_NER_MODEL loads an installed spaCy pipeline (scispacy's en_core_sci_* in production;
    here one the test builds and saves: an entity ruler that marks a phrase no lexicon term covers)."""
    import spacy

    ner = spacy.blank("en")
    ner.add_pipe("entity_ruler").add_patterns([{"label": "ENTITY", "pattern": "excess body fat"}])
    ner.to_disk(tmp_path / "ner-model")
    nlp = build_pipeline(ner_model=str(tmp_path / "ner-model"))
    assert "entity_ruler" in nlp.pipe_names and "medkg_abbreviations" in nlp.pipe_names
    index = EntityIndex(tmp_path / "indexes", text_embedder)
    index.update(linked_store, progress=False)
    linker = EntityLinker(nlp, Lexicon.build(linked_store, nlp), index, threshold=0.75)
    found = linker.link_text("Metformin lowered excess body fat in the trial.")
    assert ("excess body fat", ("HP:0001513",), "ner") in {(m.text, m.ids, m.method) for m in found}
    assert ("Metformin", ("DRUGBANK:DB00331",), "lexicon") in {(m.text, m.ids, m.method) for m in found}
    with pytest.raises(ValueError, match="cannot load the NER model"):
        build_pipeline(ner_model=str(tmp_path / "missing-model"))


SPELLINGS = [
    Entity(id="HP:0001263", name="Global developmental delay", category="Phenotype"),
    Entity(id="HP:0007359", name="Focal-onset seizure", category="Phenotype"),
    Entity(id="DOID:12894", name="Sjögren's syndrome", category="Disease"),
    Entity(id="HP:0000957", name="Café-au-lait spot", category="Phenotype"),
]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("global  developmental delay", "global  developmental delay"),  # two spaces
        ("global\u00a0developmental delay", "global\u00a0developmental delay"),  # a no-break space
        ("a global\u2009developmental delay.", "global\u2009developmental delay"),  # a thin space
        ("focal onset seizures", "focal onset seizures"),  # the hyphenated term written spaced
        ("Sjo\u0308gren's syndrome", "Sjo\u0308gren's syndrome"),  # a combining diaeresis (NFD)
        ("Sjogren's syndrome", "Sjogren's syndrome"),  # no accent
        ("cafe-au-lait spots", "cafe-au-lait spots"),
    ],
)
def test_spelling_variants_link(store: BaseGraphStore, text: str, found: str) -> None:
    store.upsert_entities(SPELLINGS)
    linker = EntityLinker(build_pipeline(), Lexicon.build(store, build_pipeline()))
    [mention] = linker.link_text(text)
    assert mention.text == found and text[mention.start : mention.end] == found


def test_a_line_break_still_ends_a_phrase(store: BaseGraphStore) -> None:
    store.upsert_entities(SPELLINGS)
    linker = EntityLinker(build_pipeline(), Lexicon.build(store, build_pipeline()))
    assert linker.link_text("Global\ndevelopmental delay") == []


def test_linking_from_many_threads_at_once(linked_store: BaseGraphStore) -> None:
    """The API links on a thread pool with one shared pipeline; scispacy's abbreviation detector keeps
    per-document rules in a shared matcher (E109/E175 errors, or another document's abbreviations)."""
    import threading

    linker = EntityLinker(build_pipeline(), Lexicon.build(linked_store, build_pipeline()))
    texts = [
        "Marfan syndrome (MFS) is rare. MFS affects the aorta.",
        "Type 2 diabetes mellitus (T2DM) and obesity. T2DM is treated with metformin.",
    ]
    expected = [{(m.text, m.ids) for m in linker.link_text(t)} for t in texts]
    failures: list[str] = []

    def work(k: int) -> None:
        for _ in range(150):
            try:
                got = {(m.text, m.ids) for m in linker.link_text(texts[k])}
            except Exception as exc:  # noqa: BLE001 - any failure is the finding
                failures.append(repr(exc))
                return
            if got != expected[k]:
                failures.append(f"{texts[k]!r}: {sorted(got)}")
                return

    threads = [threading.Thread(target=work, args=(i % 2,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


# ---- text written in capitals (clinical notes, radiology reports) ---------------------------------
CAPITALS = [
    *ENTITIES,
    Entity(id="HP:0001640", name="Cardiomegaly", category="Phenotype", synonyms=["Enlarged heart"]),
    Entity(id="HP:0002107", name="Pneumothorax", category="Phenotype"),
    Entity(id="HP:0002202", name="Pleural effusion", category="Phenotype"),
    Entity(id="HP:0100598", name="Pulmonary edema", category="Phenotype"),
    Entity(id="HP:0001945", name="Fever", category="Phenotype"),
    Entity(id="HP:0001252", name="Hypotonia", category="Phenotype"),
    Entity(id="UBERON:0001515", name="thoracic aorta", category="Anatomy"),
    Entity(id="HP:0001520", name="Large for gestational age", category="Phenotype"),
    Entity(id="HP:0001631", name="Atrial septal defect", category="Phenotype", synonyms=["ASD"]),
    # abbreviations that are also English words
    Entity(id="CHEBI:16480", name="nitric oxide", category="ChemicalEntity", synonyms=["NO"]),
    Entity(id="HP:0001650", name="Aortic valve stenosis", category="Phenotype", synonyms=["AS"]),
    Entity(id="DOID:7147", name="ankylosing spondylitis", category="Disease", synonyms=["AS"]),
    Entity(id="DOID:9952", name="acute lymphoblastic leukemia", category="Disease", synonyms=["ALL"]),
    Entity(id="DOID:2377", name="multiple sclerosis", category="Disease", synonyms=["MS"]),
    Entity(id="HP:0002204", name="Pulmonary embolism", category="Phenotype", synonyms=["PE"]),
    Entity(id="DOID:3526", name="ischemic stroke", category="Disease", synonyms=["IS"]),
    Entity(id="NCBIGene:3908", name="LARGE1", category="Gene", synonyms=["LARGE"]),
]


@pytest.fixture
def capitals_linker(store: BaseGraphStore) -> EntityLinker:
    store.upsert_entities(CAPITALS)
    nlp = build_pipeline()
    return EntityLinker(nlp, Lexicon.build(store, nlp))


def _found(linker: EntityLinker, text: str) -> list[tuple[int, int, tuple[str, ...], str]]:
    mentions = linker.link_text(text)
    for m in mentions:
        assert text[m.start : m.end] == m.text
    return [(m.start, m.end, m.ids, m.method) for m in mentions]


@pytest.mark.parametrize(
    "text",
    [
        "Hx of Marfan syndrome and coronary artery disease. Type 2 diabetes mellitus, treated with metformin.",
        "A heart attack in 2019; breast cancers; an aortic root aneurysm.",
        "Impression: no acute cardiopulmonary disease. Mild cardiomegaly. Enlarged heart, pulmonary edema.",
        "Tortuous thoracic aorta. Hx of seizures and hypotonia. Fever.",
        "Findings:\nNo pneumothorax or pleural effusion.\nFever and epileptic seizures.",
    ],
)
def test_text_in_capitals_links_as_in_sentence_case(capitals_linker: EntityLinker, text: str) -> None:
    """A note or report written in capitals links what the same text in sentence case links (the same
    spans, the same entities): "HEART ATTACK", "MARFAN SYNDROME", "FEVER" are words, not abbreviations."""
    expected = _found(capitals_linker, text)
    assert expected  # each text names something
    assert _found(capitals_linker, text.upper()) == expected


def test_a_capitals_sentence_in_mixed_case_text_links_as_words(capitals_linker: EntityLinker) -> None:
    """A shouted title or line inside ordinary text reads as words; the rest of the text is unchanged."""
    text = "MARFAN SYNDROME AND A HEART ATTACK\nThe LARGE gene was sequenced; no fever."
    found = {(m.text, m.ids) for m in capitals_linker.link_text(text)}
    assert found == {
        ("MARFAN SYNDROME", ("DOID:14323", "OMIM:154700")),
        ("HEART ATTACK", ("HP:0001658",)),
        ("LARGE", ("NCBIGene:3908",)),  # in mixed-case text, a short all-caps token is an abbreviation
        ("fever", ("HP:0001945",)),
    }


def test_abbreviations_in_capitals_stay_abbreviations(capitals_linker: EntityLinker) -> None:
    """Short all-caps tokens that are abbreviations link as they do in mixed-case text: the global
    meaning ("ASD", "CAD" the gene, "T2DM"), and a local definition overrides it, in capitals too."""
    found = {(m.text, m.ids, m.method) for m in capitals_linker.link_text("HX OF ASD, CAD AND T2DM. NO FEVER.")}
    assert found == {
        ("ASD", ("HP:0001631",), "lexicon"),
        ("CAD", ("NCBIGene:790",), "lexicon"),
        ("T2DM", ("DOID:9352",), "lexicon"),
        ("FEVER", ("HP:0001945",), "lexicon"),
    }
    assert found - {("FEVER", ("HP:0001945",), "lexicon")} == {
        (m.text, m.ids, m.method) for m in capitals_linker.link_text("Hx of ASD, CAD and T2DM.")
    }
    defined = capitals_linker.link_text("HX OF CORONARY ARTERY DISEASE (CAD). CAD PROGRESSED.")
    assert [(m.text, m.ids, m.method) for m in defined] == [
        ("CORONARY ARTERY DISEASE", ("DOID:3393",), "lexicon"),
        ("CAD", ("DOID:3393",), "abbreviation"),
        ("CAD", ("DOID:3393",), "abbreviation"),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "NO PNEUMOTHORAX OR LARGE PLEURAL EFFUSION AS BEFORE.",
        "ALL LINES ARE IN PLACE. IS THERE MS OR PE? NO.",
        "AS NOTED, NO ACUTE DISEASE IS SEEN AND ALL IS STABLE, OR MILD AS BEFORE.",
        "LARGE FOR GESTATIONAL AGE. LARGE HEART.",
    ],
)
def test_words_in_capitals_are_not_abbreviations(capitals_linker: EntityLinker, text: str) -> None:
    """In capitals, "NO" is not nitric oxide, "AS" not aortic stenosis or ankylosing spondylitis, "ALL"
    not acute lymphoblastic leukemia, "IS" not ischemic stroke, "LARGE" (a word of the lexicon's own
    terms) not the gene; the text links what its sentence-case reading links, and no more."""
    found = capitals_linker.link_text(text)
    sentence_case = capitals_linker.link_text(text.lower())
    assert [(m.start, m.end, m.ids) for m in found] == [(m.start, m.end, m.ids) for m in sentence_case]
    spurious = {"CHEBI:16480", "HP:0001650", "DOID:7147", "DOID:9952", "DOID:2377", "HP:0002204", "DOID:3526"}
    assert not spurious & {i for m in found for i in m.ids} and "NCBIGene:3908" not in {i for m in found for i in m.ids}


def test_negation_applies_to_text_in_capitals(capitals_linker: EntityLinker) -> None:
    from kg.negation import negated_mentions

    text = "IMPRESSION: NO PNEUMOTHORAX OR PLEURAL EFFUSION. MILD CARDIOMEGALY.\nNO FEVER. ENLARGED HEART."
    mentions = capitals_linker.link_text(text)
    negations = negated_mentions(text, [(m.start, m.end) for m in mentions])
    assert [(m.text, negative) for m, negative in zip(mentions, negations, strict=True)] == [
        ("PNEUMOTHORAX", True),
        ("PLEURAL EFFUSION", True),
        ("CARDIOMEGALY", False),
        ("FEVER", True),
        ("ENLARGED HEART", False),
    ]


def test_a_query_in_capitals_links_its_words(capitals_linker: EntityLinker) -> None:
    found = capitals_linker.link_query("WHAT CAUSES A HEART ATTACK AND FEVER IN MARFAN SYNDROME?")
    assert {m.ids for m in found} == {("HP:0001658",), ("HP:0001945",), ("DOID:14323", "OMIM:154700")}


def test_a_question_names_unknown_words_and_keeps_misspellings_linked_by_meaning(
    linked_store: BaseGraphStore,
    tmp_path: Path,
    text_embedder,  # noqa: ANN001
) -> None:
    """The real entity index links "metfromin" to Metformin by meaning (kept: spelt like it); a vector
    link of a word spelt like no name of its entity is a guess, dropped, and the word is unknown."""
    nlp = build_pipeline()
    index = EntityIndex(tmp_path / "indexes", text_embedder)
    index.update(linked_store, progress=False)
    linker = EntityLinker(nlp, Lexicon.build(linked_store, nlp), index, threshold=0.75, query_threshold=0.6)
    mentions, unknown = linker.read_question("Is metfromin used for type 2 diabetes mellitus?")
    assert {m.ids for m in mentions} == {("DRUGBANK:DB00331",), ("DOID:9352",)} and unknown == []
    real = linker._link_query

    def with_a_guess(doc):  # noqa: ANN001, ANN202 - what the index answers for a word it cannot know
        start = doc.text.index("zorblaxitol")
        return [*real(doc), Mention(start, start + 11, "zorblaxitol", ("DRUGBANK:DB00331",), "vector", 0.65)]

    linker._link_query = with_a_guess
    mentions, unknown = linker.read_question("What is the dose of zorblaxitol for type 2 diabetes mellitus?")
    assert [m.ids for m in mentions] == [("DOID:9352",)]
    assert [(u.text, u.suggestions) for u in unknown] == [("zorblaxitol", ())]


def test_the_term_matcher_finds_what_spacys_phrase_matcher_finds(tmp_path: Path) -> None:
    """:class:`kg.linker.TermMatcher` against spaCy's PhraseMatcher on the NORM attribute (what linked text
    until 2026-12-06): HPO's names and synonyms over the shared abstracts, as written and in capitals,
    every match the same, overlapping ones and terms that are prefixes of others included."""
    from spacy.matcher import PhraseMatcher
    from spacy.tokens import Doc

    from ingest.pubmed.readers import expand_paths, iter_records
    from kg.graph.ladybug_store import LadybugGraphStore
    from tests.conftest import shared
    from tests.integration.ingest.pubmed.test_load import hpo_terms

    files = expand_paths([shared("pubmed_xml", "ncbiutils"), shared("pubmed_xml", "user_exports")])
    nlp = build_pipeline()
    store = LadybugGraphStore(tmp_path / "graph.lbug", buffer_pool_mb=256, max_db_size_gb=4)
    store.upsert_entities(hpo_terms())
    lexicon = Lexicon.build(store, nlp)
    keys = lexicon.names.keys() | lexicon.synonyms.keys()
    assert len(keys) > 30_000
    reference = PhraseMatcher(nlp.vocab, attr="NORM")
    for key in keys:
        pattern = Doc(nlp.vocab, words=key.split(" "))
        for token in pattern:
            token.norm_ = token.text
        reference.add(key, [pattern])
    matcher = lexicon.matcher()
    assert len(matcher) == len(keys)
    texts = [f"{r.title}\n{r.abstract}" for r in iter_records(files) if getattr(r, "abstract", None)]
    texts += [t.upper() for t in texts[:40]]
    strings = nlp.vocab.strings
    matches = overlapping = 0
    for doc in nlp.pipe(texts):
        expected = sorted((strings[m], s, e) for m, s, e in reference(doc))
        got = sorted(matcher.find([t.norm_ for t in doc]))
        assert got == expected, doc.text[:200]
        matches += len(got)
        spans = sorted((s, e) for _, s, e in got)
        overlapping += sum(1 for a, b in zip(spans, spans[1:], strict=False) if b[0] < a[1])
    assert len(texts) > 400 and matches > 2500 and overlapping > 100
    store.close()


EPONYMS = [
    Entity(id="DOID:14330", name="Parkinson's disease", category="Disease", synonyms=["Parkinson disease"]),
    Entity(id="DOID:12252", name="Cushing's syndrome", category="Disease"),
    Entity(id="ORPHA:96253", name="Cushing disease", category="Disease"),
    Entity(id="DOID:10965", name="spastic diplegia", category="Disease", synonyms=["Little's disease"]),
    Entity(id="OMIM:253300", name="Spinal muscular atrophy, type I", category="Disease"),
]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("what do doctors prescribe for the shakes from parkinsons", [("parkinsons", ("DOID:14330",))]),
        ("When does spinal muscular atrophy type I begin?", [("spinal muscular atrophy type I", ("OMIM:253300",))]),
        # two diseases bear Cushing's name, and "little" is an everyday word: neither is written alone
        ("Her cushings was treated", []),
        ("a little more", []),
    ],
)
def test_eponyms_alone_and_names_without_their_comma_link(store: BaseGraphStore, text: str, ids: list) -> None:
    store.upsert_entities(EPONYMS)
    linker = EntityLinker(build_pipeline(), Lexicon.build(store, build_pipeline()))
    assert [(m.text, m.ids) for m in linker.link_text(text)] == ids


INVERTED = [
    Entity(id="DOID:10283", name="prostate cancer", category="Disease"),
    Entity(id="DOID:162", name="cancer", category="Disease"),
    Entity(id="BODYPART:PROSTATE", name="Prostate", category="BodyPart"),
    Entity(id="DOID:363", name="uterine cancer", category="Disease"),
    Entity(id="HP:0000365", name="Hearing impairment", category="Phenotype", synonyms=["Hearing loss"]),
    Entity(id="BODYPART:LEG_MUSCLE", name="Leg muscle", category="BodyPart"),
    # "pancreas" and "pancreatic" tell apart names of two entities: forms of one word
    Entity(
        id="DOID:1793",
        name="pancreatic cancer",
        category="Disease",
        synonyms=["pancreatic neoplasm", "pancreas neoplasm"],
    ),
    Entity(id="DOID:3919", name="pancreatic cyst", category="Disease", synonyms=["pancreas cyst"]),
    Entity(id="HP:0002894", name="Neoplasm of the pancreas", category="Phenotype", synonyms=["Cancer of the pancreas"]),
    # "bone" and "skeletal" do in two entities too, but are no forms of one word
    Entity(id="HP:0000924", name="Abnormality of the skeletal system", synonyms=["Abnormality of the bone system"]),
    Entity(id="HP:0002652", name="Skeletal dysplasia", category="Phenotype", synonyms=["Bone dysplasia"]),
    Entity(id="HP:0011842", name="Skeletal pain", category="Phenotype"),
    Entity(id="DOID:5041", name="esophageal cancer", category="Disease", synonyms=["esophagus cancer"]),
    Entity(id="HP:0012531", name="Pain", category="Phenotype"),
    Entity(id="MESH:D034381", name="Hearing Loss", category="Disease"),  # a name of MeSH, a synonym of HPO's
    Entity(id="DOID:184", name="bone cancer", category="Disease"),
    Entity(id="DOID:2174", name="ocular cancer", category="Disease", synonyms=["eye neoplasm"]),
    Entity(id="HP:0030079", name="Cervix cancer", category="Phenotype"),
    Entity(id="DOID:4362", name="cervical cancer", category="Disease", synonyms=["cervix cancer"]),
]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        # "X of the Y" read as the name "Y X", in place of the names inside it
        ("what drugs are used when a man has cancer of the prostate", [("cancer of the prostate", ("DOID:10283",))]),
        ("he has had loss of hearing since birth", [("loss of hearing", ("HP:0000365",))]),
        # everyday words so read too ("womb cancer": kg/lay_terms.py)
        ("what medicine is used for cancer of the womb", [("cancer of the womb", ("DOID:363",))]),
        # a body part so named is no concept of its own, nor are words that name nothing read so
        ("a tear in a muscle of the leg", []),
        ("what is the cancer of the day", [("cancer", ("DOID:162",))]),
        # Y read as another form of it, or as the clinical word of its everyday word; of one span, the
        # name as written and the name so read both
        (
            "what treatment is there for cancer of the pancreas",
            [("cancer of the pancreas", ("HP:0002894", "DOID:1793"))],
        ),
        ("what is used for cancer of the gullet", [("cancer of the gullet", ("DOID:5041",))]),
        ("pain of the bone", [("pain", ("HP:0012531",))]),
        # "in the Y" too, never "in" without a determiner; a body part's everyday words, its names' word
        ("what is the treatment for cancer in the bones", [("cancer in the bones", ("DOID:184",))]),
        ("is cancer in children curable", [("cancer", ("DOID:162",))]),
        ("what treats a cancer of the eye", [("cancer of the eye", ("DOID:2174",))]),
        (
            "what drugs treat cancer of the neck of the womb",
            [("cancer of the neck of the womb", ("HP:0030079", "DOID:4362"))],
        ),
    ],
)
def test_a_question_reads_x_of_the_y_as_the_name_y_x(store: BaseGraphStore, text: str, ids: list) -> None:
    store.upsert_entities(INVERTED)
    nlp = build_pipeline()
    linker = EntityLinker(nlp, Lexicon.build(store, nlp))
    assert [(m.text, m.ids) for m in linker.link_query(text) if not m.ids[0].startswith("BODYPART:")] == ids


LEAD = [
    Entity(id="MESH:D007854", name="Lead", category="Chemical"),
    Entity(id="DOID:1324", name="lung cancer", category="Disease"),
    Entity(id="HP:0001903", name="Anemia", category="Phenotype"),
]


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("Does smoking lead to lung cancer?", [("lung cancer", ("DOID:1324",))]),
        ("Mutations in this gene leads to anemia", [("anemia", ("HP:0001903",))]),
        ("Anemia in a child exposed to lead", [("Anemia", ("HP:0001903",)), ("lead", ("MESH:D007854",))]),
        ("Lead toxicity to the kidney", [("Lead", ("MESH:D007854",))]),
    ],
)
def test_a_name_that_is_also_a_verb_is_read_as_the_verb_before_to(store: BaseGraphStore, text: str, ids: list) -> None:
    store.upsert_entities(LEAD)
    linker = EntityLinker(build_pipeline(), Lexicon.build(store, build_pipeline()))
    assert [(m.text, m.ids) for m in linker.link_text(text)] == ids


def test_a_verb_so_read_ends_a_content_chunk() -> None:
    """The chunks a question's vector look-up tries: "lead" before "to" is no word of the chunk before it."""
    from kg.linker import _content_chunks

    doc = build_pipeline()("Does an inflamed appendix lead to more complications than lead poisoning?")
    assert [c.text for c in _content_chunks(doc)] == ["inflamed appendix", "complications", "lead poisoning"]
