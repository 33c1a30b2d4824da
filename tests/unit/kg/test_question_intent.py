"""Which relation types a question asks for, and whether it asks what/which/how."""

import pytest

from kg.question_intent import Asked, asked_relations, asks_what


@pytest.mark.parametrize(
    ("question", "types"),
    [
        ("what medicine helps high blood pressure", {"TREATS", "PALLIATES"}),
        ("pills for sugar diabetes", {"TREATS", "PALLIATES"}),
        ("Is metformin used for type 2 diabetes?", {"TREATS", "PALLIATES"}),
        ("What is the first-line therapy of absence epilepsy?", {"TREATS", "PALLIATES"}),
        ("features of Marfan syndrome", {"HAS_PHENOTYPE", "HAS_SYMPTOM"}),
        ("What are the signs of Noonan syndrome?", {"HAS_PHENOTYPE", "HAS_SYMPTOM"}),
        ("Is Marfan syndrome inherited?", {"HAS_INHERITANCE"}),
        ("Does cystic fibrosis run in families?", {"HAS_INHERITANCE"}),
        ("Which gene is mutated in Marfan syndrome?", {"ASSOCIATED_WITH"}),
        ("What are the subtypes of diabetes mellitus?", {"IS_A"}),
        ("What dietary factors increase the risk of nasopharyngeal carcinoma?", set()),
        ("What is the capital of France?", set()),
        ("Is TET2 mentioned together with diabetes mellitus?", {"CO_MENTIONED"}),
        ("At what age does Huntington disease start?", {"HAS_CLINICAL_COURSE"}),
        ("When does cystic fibrosis usually begin?", {"HAS_CLINICAL_COURSE"}),
        ("What is the typical age of onset of Duchenne muscular dystrophy?", {"HAS_CLINICAL_COURSE"}),
        ("How does Rett syndrome progress?", {"HAS_CLINICAL_COURSE"}),
        ("Does smoking increase the risk of bladder cancer?", set()),
        ("Is Duchenne muscular dystrophy X-linked?", {"HAS_INHERITANCE"}),
        ("Is achondroplasia autosomal dominant?", {"HAS_INHERITANCE"}),
        ("Is cystic fibrosis dominant or recessive?", {"HAS_INHERITANCE"}),
        ("what do they give for an underactive thyroid", {"TREATS", "PALLIATES"}),
        ("what eases gout pain", {"TREATS", "PALLIATES"}),
        ("Does chronic inflammation give rise to cancer?", set()),
        ("what do people take for hay fever", {"TREATS", "PALLIATES"}),
        ("what can I put on my baby's itchy eczema", {"TREATS", "PALLIATES"}),
        ("what do they use for tooth decay", {"TREATS", "PALLIATES"}),
        ("what can stop the creepy crawly feeling in my legs at night", {"TREATS", "PALLIATES"}),
        ("When should I stop warfarin before surgery?", set()),
        # helping to tell, diagnose or predict is no treatment; telling one kind from others asks for no subtypes
        ("Can the serum bilirubin level help to tell cardioembolic stroke from other kinds of stroke?", set()),
        ("Does D-dimer help diagnose acute appendicitis?", set()),
        ("what helps to ease a migraine", {"TREATS", "PALLIATES"}),
        ("Which other types of diabetes are there?", {"IS_A"}),
        ("what is there for morning stiffness in the hands", {"TREATS", "PALLIATES"}),
        ("is there anything for hay fever", {"TREATS", "PALLIATES"}),
        ("Is there evidence for a link between smoking and bladder cancer?", set()),
    ],
)
def test_the_relation_types_a_question_asks_for(question: str, types: set[str]) -> None:
    assert {a.type for a in asked_relations(question)} == types


def test_a_gene_question_asks_for_genes_at_the_other_end() -> None:
    assert asked_relations("Which genes cause Rett syndrome?") == (Asked("ASSOCIATED_WITH", "Gene"),)


def test_features_are_asked_of_the_named_entity_as_the_subject() -> None:
    """ "symptoms of asthma": asthma's phenotypes, not the diseases that have asthma as one."""
    assert {a.named_is for a in asked_relations("What are the symptoms of asthma?")} == {"subject"}
    assert {a.named_is for a in asked_relations("Which drugs treat asthma?")} == {None}
    # and the diseases that have a feature name it as the object
    assert {(a.type, a.named_is) for a in asked_relations("Which diseases have seizures?")} == {
        ("HAS_PHENOTYPE", "object"),
        ("HAS_SYMPTOM", "object"),
    }


@pytest.mark.parametrize(
    ("question", "what"),
    [
        ("Which drugs treat epilepsy?", True),
        ("How is Marfan syndrome inherited?", True),
        ("List the features of Marfan syndrome", True),
        ("Is metformin mentioned together with TET2?", False),
        ("Does valproate treat epilepsy?", False),
    ],
)
def test_what_which_how_questions(question: str, what: bool) -> None:
    assert asks_what(question) is what
