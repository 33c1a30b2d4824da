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


class _Report:
    def __init__(self, impression: str, mesh: list[str]) -> None:
        self.impression, self.mesh, self.findings, self.indication = impression, mesh, "Chest.", None


class _Prior:
    def __init__(self, report: _Report) -> None:
        self.report = report


class _SaysNothing:
    """A generator whose impression is always empty; its nearest prior says the opposite of the truth."""

    def priors(self, query: str, k: int, exclude: set[str]) -> list[_Prior]:
        return [_Prior(_Report("Large pleural effusion.", []))]

    def compose_impression(self, priors: list[_Prior], findings: str | None = None) -> str:
        return ""


def test_an_empty_impression_scores_no_keyword_f1() -> None:
    """Keywords are micro-averaged: a report with no keyword on either side adds nothing, so saying
    nothing scores 0, not the share of reports without a finding."""
    from eval.report_generation import CONSTANT_IMPRESSION, evaluate

    reports = [
        ("a", _Report("No acute cardiopulmonary abnormality.", ["normal"])),
        ("b", _Report("Normal chest.", ["normal"])),
        ("c", _Report("No pneumothorax or pleural effusion.", ["Pneumothorax", "Pleural Effusion"])),
    ]
    result = evaluate(_SaysNothing(), reports)
    assert result["medkg"]["keyword_f1"] == 0.0 and result["medkg"]["keyword_precision"] == 0.0
    assert result["nearest_neighbour"]["keyword_precision"] == 0.0  # "pleural effusion" against "no ..."
    assert result["constant"]["rouge_l"] > result["medkg"]["rouge_l"] == 0.0
    assert CONSTANT_IMPRESSION == "No acute cardiopulmonary abnormality."
    assert result["rows"][2]["nn_keywords"] == (0, 1, 2)  # (tp, fp, fn)
