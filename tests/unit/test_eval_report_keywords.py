"""The report evaluation's keyword F1 reads negation: "no pneumothorax" is not "pneumothorax"."""

from eval.report_generation import heading_vocabulary, keywords
from kg.text_metrics import keyword_f1

VOCABULARY = heading_vocabulary([["Pneumothorax"], ["Pleural Effusion/right"], ["Cardiomegaly/mild"], ["normal"]])


def test_keywords_carry_their_polarity() -> None:
    assert keywords("No pneumothorax or pleural effusion.", VOCABULARY) == {"no pneumothorax", "no pleural effusion"}
    found = keywords("Large right pleural effusion and pneumothorax.", VOCABULARY)
    assert found == {"pleural effusion", "pneumothorax"}
    assert keywords("Mild cardiomegaly. No pneumothorax.", VOCABULARY) == {"cardiomegaly", "no pneumothorax"}
    assert keywords("Normal chest.", VOCABULARY) == set()  # "normal" is no finding


def test_opposite_findings_do_not_agree() -> None:
    reference = keywords("No pneumothorax or pleural effusion.", VOCABULARY)
    assert keyword_f1(keywords("Large right pleural effusion and pneumothorax.", VOCABULARY), reference) == 0.0
    assert keyword_f1(keywords("No pleural effusion or pneumothorax.", VOCABULARY), reference) == 1.0
