"""Reading LLM answers (JSON and free text), the offline yes/no cue counts, and the report's
statistics and Markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.answering import cue_counts, parse_choice
from eval.qa_bench import metrics, render_markdown, wilson

OPTIONS = {"A": "Hypoglycemia", "B": "Ethanol intoxication", "C": "Cannabis intoxication", "D": "Benzodiazepine"}
YNM = {"yes": "yes", "no": "no", "maybe": "maybe"}
TF = {"True": "True", "False": "False"}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('{"explanation": "...", "answer": "C"}', "C"),
        ('```json\n{"answer": "(B) Ethanol intoxication"}\n```', "B"),
        ('{"answer": "Benzodiazepine"}', "D"),
        ('{"answer_choice": "A"}', "A"),
        ("The answer is (C).", "C"),
        ("Answer: D", "D"),
        ("C.", "C"),
        ("**C**", "C"),
        ("(A)", "A"),
        ("B. Ethanol intoxication, because of the smell.", "B"),
        ("After weighing everything, **D. Benzodiazepine** fits best.", "D"),
        ("A is unlikely; B is possible, but the answer is D", "D"),
        # the answer stated, then other options discussed: the statement counts, not the discussion
        ("The answer is (D). Option A is incorrect because of the pupils.", "D"),
        ("Answer: D\n\nExplanation: option B would be unlikely here.", "D"),
        ("D. Benzodiazepine intoxication. Choice A is excluded.", "D"),
        ("The correct answer is D; answer A is a distractor.", "D"),
        ("The correct option is **C**.", "C"),
        ("It is most consistent with benzodiazepine toxicity: Benzodiazepine.", "D"),
        ("Ethanol intoxication or cannabis intoxication", None),  # two options named: not guessed
        ("I cannot decide without more information.", None),
        ('{"answer": "E"}', None),
        ('{"explanation": "no answer field"}', None),
        ("", None),
    ],
)
def test_multiple_choice_replies(reply: str, expected: str | None) -> None:
    assert parse_choice(reply, OPTIONS, "mcq")[0] == expected


def test_json_explanation_is_kept() -> None:
    assert parse_choice('{"explanation": "because", "answer": "B"}', OPTIONS, "mcq") == ("B", "because")


@pytest.mark.parametrize(
    ("reply", "options", "kind", "expected"),
    [
        ('{"answer": "maybe"}', YNM, "yesno", "maybe"),
        ("Yes, the trial showed a benefit.", YNM, "yesno", "yes"),
        ("Based on the abstract, the answer is no.", YNM, "yesno", "no"),
        ("Yes and no.", YNM, "yesno", None),
        ("The study found no difference.", YNM, "yesno", None),  # a word of the text, not an answer
        ("Based on the evidence, yes.", YNM, "yesno", "yes"),
        ('{"answer": true}', TF, "truefalse", "True"),
        ("False. KIT is the driver gene of mastocytosis.", TF, "truefalse", "False"),
        ("The statement is true", TF, "truefalse", "True"),
    ],
)
def test_yes_no_and_true_false_replies(reply: str, options: dict, kind: str, expected: str | None) -> None:
    assert parse_choice(reply, options, kind)[0] == expected


def test_negation_and_finding_cues() -> None:
    assert cue_counts("Losartan significantly reduced the rate of dilatation.") == (0, 2)
    assert cue_counts("Losartan did not significantly reduce the rate of dilatation.") == (1, 0)
    assert cue_counts("Mortality was similar in both groups.") == (1, 0)


def test_wilson_interval() -> None:
    assert wilson(0, 0) == (0.0, 0.0)
    low, high = wilson(5, 10)
    assert low == pytest.approx(0.2366, abs=1e-4) and high == pytest.approx(0.7634, abs=1e-4)
    low, high = wilson(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)


def _record(i: int, correct: bool, **extra: object) -> dict:
    base = {"id": str(i), "answer": "A", "options": {"A": "a", "B": "b", "C": "c", "D": "d"}, "correct": correct,
            "parsed": True, "error": None, "latency_s": float(i), "subject": "anatomy" if i % 2 else "genetics",
            "decided_by": "evidence", "evidence_tokens": 100}  # fmt: skip
    return {**base, **extra}


def test_metrics_and_markdown(tmp_path: Path) -> None:
    records = [_record(i, i < 6) for i in range(1, 9)]
    records.append(_record(9, False, parsed=False, predicted=None))
    records.append(_record(10, False, parsed=False, error="LLM error (502): HTTP 500"))
    records[0]["decided_by"] = "prior"
    m = metrics(records)
    assert (m["n"], m["correct"], m["accuracy"], m["parsed"], m["unparsed"], m["errors"]) == (10, 5, 0.5, 8, 1, 1)
    assert m["parse_rate"] == pytest.approx(8 / 9, abs=1e-4) and m["accuracy_of_parsed"] == pytest.approx(5 / 8)
    assert m["ci95"] == [pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4)]
    assert m["latency_s"]["p50"] == 5.0 and m["latency_s"]["p95"] == 10.0 and m["prior_decided"] == 1
    assert m["per_subject"]["anatomy"]["n"] == 5 and m["baselines"]["chance"] == 0.25
    assert m["baselines"]["majority_accuracy"] == 1.0
    for mode, accuracy in (("offline", 0.5), ("kg-rag", 0.8)):
        run = {**m, "benchmark": "medqa", "mode": mode, "model": None if mode == "offline" else "gpt-x",
               "accuracy": accuracy, "config": {"url": None, "context": True}}  # fmt: skip
        (tmp_path / f"medqa-{mode}.metrics.json").write_text(json.dumps(run))
    text = render_markdown(tmp_path)
    rows = [line for line in text.splitlines() if line.startswith("| medqa |")]
    assert rows[0].startswith("| medqa | offline | - | 10 | **50.0** (23.7-76.3) | 8/9 | 1 | 1 |")
    assert rows[1].startswith("| medqa | kg-rag | gpt-x | 10 | **80.0**")
    assert "| anatomy | 5 | 60.0 | 60.0 |" in text  # per subject, modes side by side
    assert "| medqa | GPT-4, chain of thought | 83.97% |" in text and "GPT-3.5 + MedRAG | 66.61%" in text


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        # a JSON answer after a reasoning block or a preamble is read as JSON, not as free text
        (
            "<think>\nThe BAC is low so ethanol intoxication is unlikely.\n</think>\n"
            '{"explanation": "...", "answer": "D"}',
            "D",
        ),
        ('Here is the JSON:\n{"explanation": "Not ethanol intoxication.", "answer": "D"}', "D"),
        ('Sure! {"explanation": "x", "answer": "D"}', "D"),
        ('Ethanol intoxication? No. Here it is:\n```json\n{"answer": "D"}\n```', "D"),
        # an option's text named only to negate it is no answer
        ("It is not ethanol intoxication.", None),
        ("Ethanol intoxication is unlikely here.", None),
        ("We can rule out ethanol intoxication.", None),
        ('{"answer": "Not ethanol intoxication"}', None),
        ("The findings suggest ethanol intoxication.", "B"),
    ],
)
def test_json_after_preamble_and_negated_option_text(reply: str, expected: str | None) -> None:
    assert parse_choice(reply, OPTIONS, "mcq")[0] == expected


@pytest.mark.parametrize(
    ("reply", "options", "kind"),
    [
        ("This statement is not true.", TF, "truefalse"),
        ("Not true.", TF, "truefalse"),
        ('{"answer": "Not true"}', TF, "truefalse"),
        ("This isn't true.", TF, "truefalse"),
        ("It is not possible to say yes", YNM, "yesno"),
        ("The answer is not yes.", YNM, "yesno"),
    ],
)
def test_negated_key_word_is_unparsed(reply: str, options: dict, kind: str) -> None:
    assert parse_choice(reply, options, kind)[0] is None
