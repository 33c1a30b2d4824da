"""Benchmark loaders: the real development files in ../shared/data (counts, fields) and malformed
records in small files (reported with file and line or id, skipped; the rest load)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from eval.datasets import DatasetError, Item, load, load_mirage
from tests.conftest import shared


@pytest.mark.parametrize(
    ("benchmark", "parts", "count", "subjects"),
    [
        ("medqa", ("medqa_usmle", "medqa_usmle_dev.jsonl"), 255, {"step1": 138, "step2&3": 117}),
        ("medmcqa", ("medmcqa", "medmcqa_dev.jsonl"), 596, {}),
        ("mmlu", ("mmlu_med", "mmlu_med_dev.jsonl"), 230, {"anatomy": 35, "medical_genetics": 26}),
    ],
)
def test_multiple_choice_dev_files(benchmark: str, parts: tuple[str, str], count: int, subjects: dict) -> None:
    result = load(benchmark, shared(*parts))
    assert len(result.items) == count and result.issues == []
    seen = Counter(i.subject for i in result.items)
    assert all(seen[s] == n for s, n in subjects.items())
    assert all(i.kind == "mcq" and set(i.options) == set("ABCD") and i.dataset == benchmark for i in result.items)
    assert len({i.id for i in result.items}) == count
    if benchmark == "medqa":
        first = result.items[0]
        assert first.id == "19" and first.answer == "D" and first.options["B"] == "Ethanol intoxication"


def test_pubmedqa_dev_file_with_and_without_context() -> None:
    path = shared("pubmedqa", "pqal_dev.json")
    result = load("pubmedqa", path)
    assert len(result.items) == 200 and not result.issues
    assert Counter(i.answer for i in result.items) == {"yes": 105, "no": 72, "maybe": 23}
    item = next(i for i in result.items if i.id == "25432938")
    assert item.kind == "yesno" and item.options == {"yes": "yes", "no": "no", "maybe": "maybe"}
    assert item.context and item.context.startswith("BACKGROUND: The objective")
    assert "Findings suggest" not in item.context  # LONG_ANSWER (the authors' conclusion) is never read
    assert all(i.context is None for i in load("pubmedqa", path, with_context=False).items)


def test_kg_rag_dev_files() -> None:
    mcq = load("kgrag-mcq", shared("kg_rag_benchmark", "mcq_questions_dev.csv"))
    assert len(mcq.items) == 71
    # upstream lists the right gene twice in three rows: repaired (listed once), reported, loaded
    assert [(i.where, i.skipped) for i in mcq.issues] == [("line 21", False), ("line 32", False), ("line 71", False)]
    first = mcq.items[0]
    assert (
        first.question == "Out of the given list, which Gene is associated with psoriasis and myelodysplastic syndrome?"
    )
    assert (
        first.options == {"A": "NOD2", "B": "CHEK2", "C": "HLA-B", "D": "GCKR", "E": "PKNOX2"} and first.answer == "C"
    )
    tf = load("kgrag-tf", shared("kg_rag_benchmark", "true_false_questions_dev.csv"))
    assert len(tf.items) == 55 and not tf.issues
    assert Counter(i.answer for i in tf.items) == {"True": 36, "False": 19}
    assert tf.items[0].id == "kgrag_tf:1" and tf.items[0].question == "metronidazole treats crohn's disease"


def test_malformed_jsonl_lines_are_reported_and_skipped(tmp_path: Path) -> None:
    good = {"realidx": 1, "question": "Q?", "options": {"A": "x", "B": "y"}, "answer_idx": "B", "meta_info": "step1"}
    lines = [
        json.dumps(good),
        "{not json",
        json.dumps({**good, "realidx": 2, "answer_idx": "E"}),
        json.dumps({**good, "realidx": 3, "question": "  "}),
        json.dumps({k: v for k, v in {**good, "realidx": 4}.items() if k != "options"}),
        json.dumps({**good}),  # duplicate id
        "",
        json.dumps({**good, "realidx": 5, "answer_idx": None, "answer": "y"}),  # the answer named by its text
        "[1, 2]",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = load("medqa", path)
    assert [(i.id, i.answer, i.subject) for i in result.items] == [("1", "B", "step1"), ("5", "B", "step1")]
    where = {i.where: i.reason for i in result.issues}
    assert set(where) == {"line 2", "line 3", "line 4", "line 5", "line 6", "line 9"}
    assert "not JSON" in where["line 2"] and "'E' is not one of the options" in where["line 3"]
    assert "empty" in where["line 4"] and "options" in where["line 5"] and "duplicate id '1'" in where["line 6"]
    assert all(i.file == str(path) and i.skipped for i in result.issues)
    assert str(result.issues[0]).startswith(f"{path}: line 2: not JSON")


def test_a_record_with_more_options_than_letters_is_skipped(tmp_path: Path) -> None:
    good = {"realidx": 1, "question": "Q?", "options": ["x", "y"], "answer_idx": "B"}
    lines = [
        json.dumps(good),
        json.dumps({**good, "realidx": 2, "options": [f"option {i}" for i in range(11)]}),
        json.dumps({**good, "realidx": 3}),
    ]
    path = tmp_path / "eleven.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = load("medqa", path)
    assert [i.id for i in result.items] == ["1", "3"]
    assert [(i.where, i.skipped) for i in result.issues] == [("line 2", True)]
    assert "11 options: at most 10" in result.issues[0].reason


def test_malformed_pubmedqa_and_csv_records(tmp_path: Path) -> None:
    pqa = tmp_path / "pqa.json"
    pqa.write_text(
        json.dumps(
            {
                "1": {"QUESTION": "Does it?", "CONTEXTS": ["It did."], "LABELS": ["RESULTS"], "final_decision": "yes"},
                "2": {"QUESTION": "Does it?", "CONTEXTS": ["x"], "final_decision": "perhaps"},
                "3": {"CONTEXTS": ["x"], "final_decision": "no"},
            }
        )
    )  # fmt: skip
    result = load("pubmedqa", pqa)
    assert [i.id for i in result.items] == ["1"] and result.items[0].context == "RESULTS: It did."
    assert [(i.where, "perhaps" in i.reason or "QUESTION" in i.reason) for i in result.issues] == [
        ("id 2", True),
        ("id 3", True),
    ]
    csv_path = tmp_path / "mcq.csv"
    csv_path.write_text(
        "correct_node,options_combined,text\n"
        'FBN1,"FBN1, TP53",Which gene is associated with Marfan syndrome. Given list is: FBN1, TP53\n'
        'KIT,"FBN1, TP53",Which gene is associated with mastocytosis. Given list is: FBN1, TP53\n',
        encoding="utf-8",
    )
    result = load("kgrag-mcq", csv_path)
    assert [i.question for i in result.items] == ["Which gene is associated with Marfan syndrome?"]
    assert [(i.where, "'KIT' is not one of the options" in i.reason) for i in result.issues] == [("line 3", True)]
    tf = tmp_path / "tf.csv"
    tf.write_text(",text,label\n1,aspirin treats pain,True\n2,x is y,maybe\n", encoding="utf-8")
    result = load("kgrag-tf", tf)
    assert [i.answer for i in result.items] == ["True"] and result.issues[0].where == "line 3"


def test_mirage_benchmark_layout(tmp_path: Path) -> None:
    path = tmp_path / "benchmark.json"
    path.write_text(
        json.dumps(
            {
                "medqa": {
                    "0000": {"question": "Q1?", "options": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer": "C"},
                    "0001": {"question": "Q2?", "options": {"A": "a", "B": "b"}, "answer": "Z"},
                },
                "pubmedqa": {"p1": {"question": "Q?", "options": {"A": "yes", "B": "no", "C": "maybe"}, "answer": "B"}},
            }
        )
    )  # fmt: skip
    medqa = load("medqa", path)  # the layout is recognised, the benchmark's dataset chosen
    assert [(i.id, i.dataset, i.answer) for i in medqa.items] == [("0000", "medqa", "C")]
    assert medqa.issues[0].where == "medqa id 0001" and "'Z'" in medqa.issues[0].reason
    pubmedqa = load("pubmedqa", path).items[0]
    assert pubmedqa.kind == "yesno" and pubmedqa.answer == "no" and set(pubmedqa.options) == {"yes", "no", "maybe"}
    assert len(load_mirage(path).items) == 2
    with pytest.raises(DatasetError, match="no dataset"):
        load_mirage(path, ["bioasq"])


def test_unreadable_files_raise_clearly(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        load("medqa", tmp_path / "missing.jsonl")
    (tmp_path / "broken.json").write_text("{oops")
    with pytest.raises(DatasetError, match="not JSON"):
        load("pubmedqa", tmp_path / "broken.json")
    with pytest.raises(DatasetError, match="unknown benchmark"):
        load("bioasq", tmp_path / "broken.json")


def test_an_answerer_sees_no_answer_key() -> None:
    item = Item(id="1", dataset="medqa", kind="mcq", question="Q?", options={"A": "x", "B": "y"}, answer="B")
    assert "answer" not in item.public().model_dump()
    with pytest.raises(ValueError, match="not one of the options"):
        Item(id="1", dataset="medqa", kind="mcq", question="Q?", options={"A": "x", "B": "y"}, answer="C")
