"""QA benchmark runs end to end on a tiny data dir (the QA fixture graph and abstracts of
tests/e2e/api/test_qa.py): the offline mode through ``medkg eval`` (JSONL, Markdown, resume), the
offline true/false and yes/no/maybe rules, and the LLM modes against a local OpenAI-compatible
server (JSON answers, a free-text answer, an unreadable one, an HTTP 500, a server refusing the JSON
schema) in process and through a medkg server (``--url``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from eval.answering import EvalError, OfflineAnswering, RemoteAnswering
from eval.datasets import Item
from eval.qa_bench import RunConfig, open_container, run, run_cli
from kg.settings import Settings, load_settings
from service.api.app import create_app
from service.cli import app as cli_app
from service.container import Container
from tests.support.llm_server import FakeLLMServer, Reply
from tests.support.qa_store import build_qa_store

# Each item's right option is what the fixture graph / abstracts support.
MCQ = [
    {
        "realidx": "drug-epilepsy",
        "question": "Which drug is used to treat epilepsy?",
        "options": {"A": "Losartan", "B": "Valproic acid", "C": "FBN1", "D": "Myopia"},
        "answer_idx": "B",
    },
    {
        "realidx": "marfan-dx",
        "question": "A tall young man has arachnodactyly, ectopia lentis and an aortic root aneurysm. "
        "What is the most likely diagnosis?",
        "options": {"A": "epilepsy", "B": "Congenital hypotonia", "C": "Marfan syndrome", "D": "Seizure"},
        "answer_idx": "C",
    },
    {
        "realidx": "marfan-gene",
        "question": "Which gene is associated with Marfan syndrome?",
        "options": {"A": "Lamotrigine", "B": "Seizure", "C": "Microcephaly", "D": "FBN1"},
        "answer_idx": "D",
    },
    {
        "realidx": "losartan-trial",
        "question": "Which drug slowed the rate of aortic root dilatation in children with Marfan syndrome?",
        "options": {"A": "Lamotrigine", "B": "Valproic acid", "C": "Losartan", "D": "Hypotonia"},
        "answer_idx": "C",
    },
]


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory, text_embedder) -> Settings:  # noqa: ANN001
    data = tmp_path_factory.mktemp("eval-qa") / "data"
    s = load_settings(data_dir=data, ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2, llm_base_url=None)
    with Container(s) as c:
        c.__dict__["text_embedder"] = text_embedder
        build_qa_store(c)
    return s


@pytest.fixture(scope="module")
def reader(settings: Settings, text_embedder) -> Iterator[Container]:  # noqa: ANN001
    """The data dir opened as an evaluation opens it (read-only store)."""
    with open_container(settings) as c:
        c.__dict__["text_embedder"] = text_embedder
        yield c


def _items() -> list[Item]:
    return [
        Item(id=m["realidx"], dataset="medqa", kind="mcq", question=m["question"], options=m["options"],
             answer=m["answer_idx"], subject="step1" if i % 2 else "step2&3")
        for i, m in enumerate(MCQ)
    ]  # fmt: skip


def test_offline_mode_through_the_cli_writes_jsonl_markdown_and_resumes(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    questions = tmp_path / "mcq.jsonl"
    questions.write_text("".join(json.dumps(m) + "\n" for m in MCQ) + "{not json\n", encoding="utf-8")
    out = tmp_path / "out"
    monkeypatch.setenv("MEDKG_DATA_DIR", str(settings.data_dir))
    monkeypatch.setenv("MEDKG_LADYBUG_BUFFER_POOL_MB", "256")
    monkeypatch.setenv("MEDKG_LADYBUG_MAX_DB_SIZE_GB", "2")
    r = CliRunner().invoke(cli_app, ["eval", "medqa", str(questions), "--mode", "offline", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "line 5: not JSON" in r.output  # the malformed line is reported, the others run
    assert "medqa offline: accuracy 100.0%" in r.output

    records = [json.loads(line) for line in (out / "medqa-offline.jsonl").read_text().splitlines()]
    assert [(r["id"], r["predicted"]) for r in records] == [(m["realidx"], m["answer_idx"]) for m in MCQ]
    first = records[0]
    assert first["correct"] and first["parsed"] and first["question"] == MCQ[0]["question"]
    assert "KG:DRUGBANK:DB00313-TREATS-DOID:1826" in first["evidence_ids"]
    assert "KG:DRUGBANK:DB00313-TREATS-DOID:1826" in first["cited"]
    assert first["option_scores"]["B"]["graph"] > first["option_scores"]["A"]["graph"]
    assert first["decided_by"] == "evidence" and first["latency_s"] > 0
    metrics = json.loads((out / "medqa-offline.metrics.json").read_text())
    assert metrics["accuracy"] == 1.0 and metrics["n"] == 4 and metrics["parse_rate"] == 1.0
    summary = (out / "summary.md").read_text()
    assert "| medqa | offline |" in summary and "GPT-4 + MedRAG | 82.80%" in summary

    # resume: an errored record and a half-written line are asked again, the rest is kept
    lines = (out / "medqa-offline.jsonl").read_text().splitlines()
    errored = {**json.loads(lines[1]), "error": "boom", "predicted": None, "correct": False}
    (out / "medqa-offline.jsonl").write_text("\n".join([lines[0], json.dumps(errored), lines[2], lines[3]]) + '\n{"id')
    r = CliRunner().invoke(cli_app, ["eval", "medqa", str(questions), "--out", str(out)])
    assert r.exit_code == 0, r.output
    again = [json.loads(line) for line in (out / "medqa-offline.jsonl").read_text().splitlines()]
    assert sorted(r["id"] for r in again) == sorted(m["realidx"] for m in MCQ)
    assert [r["latency_s"] for r in again if r["id"] == "drug-epilepsy"] == [first["latency_s"]]  # not re-asked
    assert json.loads((out / "medqa-offline.metrics.json").read_text())["resumed"] == 3

    # a resumed run with another configuration is refused; offline over --url is refused clearly
    r = CliRunner().invoke(cli_app, ["eval", "medqa", str(questions), "--out", str(out), "--k", "3"])
    assert r.exit_code == 2 and "another configuration" in r.output
    r = CliRunner().invoke(cli_app, ["eval", "medqa", str(questions), "--url", "http://127.0.0.1:9", "--out", str(out)])
    assert r.exit_code == 2 and "kg-rag only" in r.output


def test_offline_true_false_and_yes_no_maybe_rules(reader: Container, tmp_path: Path) -> None:
    offline = OfflineAnswering(reader.retriever)
    statements = [
        ("valproic acid treats epilepsy", "True"),
        ("Marfan syndrome is not associated with Gene FBN1", "False"),
        ("lamotrigine treats Marfan syndrome", "False"),
    ]
    true_false = {"True": "True", "False": "False"}
    items = [
        Item(id=f"tf{i}", dataset="kgrag-tf", kind="truefalse", question=text, options=true_false, answer=label)
        for i, (text, label) in enumerate(statements)
    ]
    yes_no = {"yes": "yes", "no": "no", "maybe": "maybe"}
    items += [
        Item(id="pq-yes", dataset="pubmedqa", kind="yesno", question="Does losartan slow aortic root dilatation?",
             options=yes_no, answer="yes",
             context="RESULTS: Losartan significantly reduced the rate of aortic root dilatation in children."),
        Item(id="pq-no", dataset="pubmedqa", kind="yesno", question="Does losartan slow aortic root dilatation?",
             options=yes_no, answer="no",
             context="RESULTS: Losartan did not reduce the rate of aortic root dilatation; rates were similar."),
        Item(id="pq-maybe", dataset="pubmedqa", kind="yesno", question="Does losartan slow aortic root dilatation?",
             options=yes_no, answer="maybe", context="METHODS: We recruited 40 volunteers from a rowing club."),
        # no context (reasoning-free): the retrieved passages are read
        Item(id="pq-retrieved", dataset="pubmedqa", kind="yesno", options=yes_no, answer="yes",
             question="Does losartan slow the rate of aortic root dilatation in children with Marfan syndrome?"),
    ]  # fmt: skip
    config = RunConfig(benchmark="kgrag-tf", mode="offline", file="handmade")
    result = run(items, offline, tmp_path, config, progress=False)
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "kgrag-tf-offline.jsonl").read_text().splitlines())}
    assert {i: r["predicted"] for i, r in records.items()} == {i.id: i.answer for i in items}
    assert records["tf0"]["cited"] == ["KG:DRUGBANK:DB00313-TREATS-DOID:1826"]
    assert records["pq-retrieved"]["cited"][0].startswith("PMID:24102121#") and not records["pq-yes"]["evidence_ids"]
    assert result["accuracy"] == 1.0


# ---- LLM modes -----------------------------------------------------------------------------------
@pytest.fixture()
def llm_reader(reader: Container) -> Iterator[tuple[Container, FakeLLMServer]]:
    with FakeLLMServer() as llm:
        s = reader.settings.model_copy(
            update={"llm_base_url": llm.base_url, "llm_model": "fake-model", "llm_timeout_s": 5.0, "llm_max_retries": 0}
        )
        c = Container(s, graph=reader.graph)
        for shared in ("text_embedder", "entity_index", "text_index", "nlp", "linker", "retriever"):
            c.__dict__[shared] = getattr(reader, shared)
        yield c, llm


def _run_llm(c: Container, mode: str, out: Path, json_schema: bool = True) -> tuple[dict, list[dict]]:
    questions = out.parent / "q.jsonl"
    questions.write_text("".join(json.dumps(m) + "\n" for m in MCQ), encoding="utf-8")
    result = run_cli("medqa", questions, mode=mode, out=out, progress=False, json_schema=json_schema, container=c)
    return result, [json.loads(line) for line in (out / f"medqa-{mode}.jsonl").read_text().splitlines()]


def test_llm_modes_count_parsed_unparsed_and_errors(
    llm_reader: tuple[Container, FakeLLMServer], tmp_path: Path
) -> None:
    c, llm = llm_reader
    llm.enqueue(
        Reply.json({"explanation": "Valproate is an antiepileptic.", "answer": "B"}),
        Reply("The patient has Marfan syndrome. The answer is (C)."),
        Reply("I would need more information."),
        Reply.error(500),
    )
    result, records = _run_llm(c, "closed-book", tmp_path / "closed")
    assert [(r["predicted"], r["parsed"], bool(r["error"])) for r in records] == [
        ("B", True, False),
        ("C", True, False),
        (None, False, False),
        (None, False, True),
    ]
    assert "HTTP 500" in records[3]["error"] and records[2]["raw"] == "I would need more information."
    assert result["accuracy"] == 0.5 and result["unparsed"] == 1 and result["errors"] == 1
    assert result["parse_rate"] == pytest.approx(2 / 3, abs=1e-3) and result["model"] == "fake-model"
    first = llm.requests[0].body
    assert first["response_format"]["json_schema"]["schema"]["properties"]["answer"]["enum"] == ["A", "B", "C", "D"]
    assert "Evidence" not in first["messages"][-1]["content"] and "B. Valproic acid" in first["messages"][-1]["content"]
    assert records[0]["tokens_source"] == "estimated" and records[0]["prompt_tokens"] > 20  # the fake reports 0
    assert "| medqa | closed-book | fake-model | 4 |" in (tmp_path / "closed" / "summary.md").read_text()


def test_rag_and_kg_rag_send_their_evidence(llm_reader: tuple[Container, FakeLLMServer], tmp_path: Path) -> None:
    c, llm = llm_reader
    llm.handler = lambda body: {"explanation": "see [KG:DRUGBANK:DB00313-TREATS-DOID:1826]", "answer": "B"}
    _, rag = _run_llm(c, "rag", tmp_path / "rag")
    prompt = llm.requests[0].body["messages"][-1]["content"]
    assert "[PMID:" in prompt and "[KG:" not in prompt
    assert rag[0]["evidence_ids"] and all(i.startswith("PMID:") for r in rag for i in r["evidence_ids"])
    n = len(llm.requests)
    _, kg = _run_llm(c, "kg-rag", tmp_path / "kg")
    prompt = llm.requests[n].body["messages"][-1]["content"]
    assert "[KG:DRUGBANK:DB00313-TREATS-DOID:1826]" in prompt
    assert kg[0]["cited"] == ["KG:DRUGBANK:DB00313-TREATS-DOID:1826"] and kg[0]["evidence_tokens"] > 0


def test_a_server_without_json_schema_is_read_as_free_text(
    llm_reader: tuple[Container, FakeLLMServer], tmp_path: Path
) -> None:
    c, llm = llm_reader
    llm.enqueue(Reply.error(400, "response_format json_schema is not supported"), Reply("**B**"))
    llm.handler = lambda body: "The correct option is C"
    result, records = _run_llm(c, "closed-book", tmp_path / "nofmt")
    assert [r["predicted"] for r in records] == ["B", "C", "C", "C"]
    assert "response_format" not in llm.requests[-1].body and result["json_schema_fallback"]


def test_kg_rag_through_a_medkg_server(llm_reader: tuple[Container, FakeLLMServer], tmp_path: Path) -> None:
    c, llm = llm_reader
    fact = "KG:DRUGBANK:DB00313-TREATS-DOID:1826"
    llm.handler = lambda body: {
        "answer": f"Valproic acid treats epilepsy [{fact}]. The answer is (B).",
        "citations": [fact],
        "confidence": 0.9,
        "insufficient_evidence": False,
    }
    with TestClient(create_app(container=c)) as client:
        config = RunConfig(benchmark="medqa", mode="kg-rag", file="handmade", url="http://testserver")
        result = run(_items()[:1], RemoteAnswering(client), tmp_path, config, progress=False)
        with pytest.raises(EvalError, match="kg-rag only"):
            run_cli("medqa", tmp_path / "x.jsonl", mode="offline", url="http://testserver", client=client)
        for shared in ("text_index", "sessions"):  # the app closes its container's; these are the module's
            c.__dict__.pop(shared, None)
    record = json.loads((tmp_path / "medqa-kg-rag-remote.jsonl").read_text())
    assert record["predicted"] == "B" and record["correct"] and record["cited"] == [fact]
    assert "Options:\nA. Losartan" in llm.requests[-1].body["messages"][-1]["content"]
    assert result["accuracy"] == 1.0


def test_pubmedqa_retrieval_subcommand(tmp_path: Path) -> None:
    entries = {
        "11111111": ("Does losartan slow aortic root dilatation?", "Losartan slowed aortic root dilatation in Marfan."),
        "22222222": ("Is valproate effective in epilepsy?", "Valproic acid controlled generalized seizures well."),
        "33333333": ("Do statins lower LDL cholesterol?", "Statin therapy lowered LDL cholesterol by a third."),
    }
    pqa = tmp_path / "pqa.json"
    pqa.write_text(
        json.dumps({p: {"QUESTION": q, "CONTEXTS": [c], "LABELS": ["RESULTS"], "final_decision": "yes"}
                    for p, (q, c) in entries.items()})
    )  # fmt: skip
    r = CliRunner().invoke(
        cli_app, ["eval", "pubmedqa-retrieval", str(pqa), "--distractors", "", "--out", str(tmp_path / "out")]
    )
    assert r.exit_code == 0, r.output
    result = json.loads((tmp_path / "out" / "pubmedqa-retrieval.json").read_text())
    assert set(result) == {"bm25", "dense", "hybrid", "hybrid, floor 0.25"}
    assert result["hybrid"]["recall@1"] == 1.0 and "Recall@1" in r.output
