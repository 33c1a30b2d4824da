"""A live ``medkg serve`` on loopback (its own data dir, API keys on) and Debian's Chromium driven
headless through its chromedriver (no browser download). In CI (``CI=true``) a missing Chromium
fails the run instead of skipping, so the browser tests always run there.

Screenshots go to ``$MEDKG_TEST_ARTIFACTS`` (default ``test-artifacts/``)/browser/."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pydicom
import pytest

from ingest.radiology_reports import RadiologyReport, ReportLoader
from kg.settings import load_settings
from multimodal.load import load_images
from service.container import Container
from tests.conftest import IN_CI
from tests.support.live_server import MEDKG, medkg_serve
from tests.support.qa_store import build_qa_store
from tests.support.studies import STUDIES, study_file, study_reports

API_KEY = "browser-test-key-0123456789"
REPO = Path(__file__).resolve().parents[2]
CHROMIUM = [os.environ.get("MEDKG_CHROMIUM", ""), "/usr/bin/chromium", "/usr/bin/chromium-browser"]
CHROMEDRIVER = [os.environ.get("MEDKG_CHROMEDRIVER", ""), "/usr/bin/chromedriver"]
DIFFERENTIAL_CASES = [  # observed terms and diagnosis of three cases, so that /eval plots a differential run
    (["HP:0001250", "HP:0000252"], "OMIM:100001"),
    (["HP:0001166", "HP:0001083"], "OMIM:154700"),
    (["HP:0001252"], "OMIM:100002"),
]
TF_QUESTIONS = [  # a tiny KG-RAG true/false set, so that /eval has a real run to plot
    ("Valproic acid treats epilepsy", "True"),
    ("Lamotrigine treats epilepsy", "True"),
    ("Losartan treats Marfan syndrome", "True"),
    ("Arachnodactyly is a phenotype of Marfan syndrome", "True"),
]


def artifacts() -> Path:
    out = Path(os.environ.get("MEDKG_TEST_ARTIFACTS", REPO / "test-artifacts")) / "browser"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _first(paths: list[str]) -> str | None:
    return next((p for p in paths if p and Path(p).exists()), None)


@pytest.fixture(scope="session")
def studies_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    studies = tmp_path_factory.mktemp("studies")
    for name in STUDIES:
        shutil.copy(study_file(name), studies / name)
    return studies


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory, studies_dir: Path) -> Iterator[str]:
    """The URL of a running ``medkg serve`` over a small real data dir: the QA graph and abstracts of
    tests/e2e/api/test_qa.py, radiology reports paired with pydicom's sample studies and with two prior
    studies of the kinds the pages upload, and offline evaluation runs."""
    tmp = tmp_path_factory.mktemp("web")
    data, evals = tmp / "data", tmp / "eval"
    settings = load_settings(data_dir=data, api_keys=None, llm_base_url=None, rate_limit_per_minute=0)
    with Container(settings) as c:
        build_qa_store(c)
        leg = RadiologyReport(
            uid="200", indication="Ankle pain after a twisting injury.",
            findings="Well-corticated ossific fragment at the tip of the lateral malleolus. No acute fracture.",
            impression="No acute fracture. Old avulsion injury of the lateral malleolus.",
        )  # fmt: skip
        loader = ReportLoader(c.graph, c.text_index, c.nlp, c.linker, progress=False, reports=c.reports)
        loader.load([*study_reports(), leg])
        pairing = {name.removesuffix(".dcm"): f"IUXR:{i}" for i, name in enumerate(STUDIES, 1)}
        loaded = load_images(c.graph, c.image_index, c.pseudonymizer, [studies_dir], pairing.get, progress=False)
        assert loaded.images == len(STUDIES) and loaded.reports_linked == len(STUDIES)
        # other patients' chest and leg films, with their reports: priors of the kinds the pages upload
        priors = tmp / "priors"
        priors.mkdir()
        for name, stem in (("RG1_J2KI.dcm", "chest-prior"), ("RG3_J2KI.dcm", "leg-prior")):
            ds = pydicom.dcmread(studies_dir / name)
            ds.StudyInstanceUID, ds.SeriesInstanceUID = pydicom.uid.generate_uid(), pydicom.uid.generate_uid()
            ds.SOPInstanceUID = ds.file_meta.MediaStorageSOPInstanceUID = pydicom.uid.generate_uid()
            ds.save_as(priors / f"{stem}.dcm")
        pairing = {"chest-prior": "IUXR:101", "leg-prior": "IUXR:200"}
        more = load_images(c.graph, c.image_index, c.pseudonymizer, [priors], pairing.get, progress=False)
        assert more.images == 2 and more.reports_linked == 2
    questions = tmp / "tf.csv"
    with questions.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label"])
        writer.writerows(TF_QUESTIONS)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    env = {**base_env, "MEDKG_DATA_DIR": str(data), "MEDKG_EVAL_DIR": str(evals), "HF_HUB_OFFLINE": "1"}
    ran = subprocess.run(
        [MEDKG, "eval", "kgrag-tf", str(questions), "--out", str(evals)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    cases = tmp / "published.jsonl"  # and a differential diagnosis run
    cases.write_text(
        "".join(
            json.dumps({"id": i, "observed": observed, "diseases": [disease]}) + "\n"
            for i, (observed, disease) in enumerate(DIFFERENTIAL_CASES)
        )
    )
    ran = subprocess.run(
        [MEDKG, "eval", "phenopackets", str(cases), "--out", str(evals)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    env = {**env, "MEDKG_API_KEYS": API_KEY, "MEDKG_RATE_LIMIT_PER_MINUTE": "0"}
    with medkg_serve(env, tmp / "serve.log") as url:
        yield url


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Headless Chromium (Debian's) through chromedriver, 1366x900 (a laptop)."""
    binary, driver = _first(CHROMIUM), _first(CHROMEDRIVER)
    if binary is None or driver is None:
        message = "Chromium and chromedriver are not installed: `apt-get install chromium chromium-driver`"
        if IN_CI:
            pytest.fail("CI must run the browser tests, but " + message)
        pytest.skip(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1366,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    chrome.set_page_load_timeout(60)
    yield chrome
    chrome.quit()
