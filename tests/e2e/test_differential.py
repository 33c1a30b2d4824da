"""`POST /v1/differential` and `medkg differential` end to end on a real embedded store."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kg.model import Entity, Relation
from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container
from tests.support.cli import run

OBSOLETE = "HP:0002123"  # stands for HP:0001250 (REPLACED_BY)
TERMS = {"HP:0000001": None, "HP:0000118": "HP:0000001", "HP:0001250": "HP:0000118", "HP:0000252": "HP:0000118"}


def build(data_dir: Path) -> Container:
    c = Container(load_settings(data_dir=data_dir, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2))
    c.graph.upsert_entities(
        [
            Entity(id="HP:0000001", name="All", category="Phenotype"),
            Entity(id="HP:0000118", name="Phenotypic abnormality", category="Phenotype"),
            Entity(id="HP:0001250", name="Seizure", category="Phenotype", synonyms=["Epileptic seizure"]),
            Entity(id="HP:0000252", name="Microcephaly", category="Phenotype"),
            Entity(id=OBSOLETE, name="Seizures (an obsolete id)", category="Phenotype", obsolete=True),
            Entity(id="OMIM:100001", name="Seizures with microcephaly", category="Disease"),
            Entity(id="OMIM:100002", name="Isolated microcephaly", category="Disease"),
            Entity(id="NCBIGene:79648", name="MCPH1", category="Gene"),
        ]
    )
    c.graph.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in TERMS.items() if p]
        + [
            Relation(subject=OBSOLETE, type="REPLACED_BY", object="HP:0001250", source="hp"),
            Relation(subject="OMIM:100001", type="HAS_PHENOTYPE", object="HP:0001250", evidence={"pmids": ["PMID:1"]}),
            Relation(subject="OMIM:100001", type="HAS_PHENOTYPE", object="HP:0000252"),
            Relation(subject="OMIM:100002", type="HAS_PHENOTYPE", object="HP:0000252"),
            Relation(subject="NCBIGene:79648", type="ASSOCIATED_WITH", object="OMIM:100002"),
        ]
    )
    return c


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(container=build(tmp_path))) as c:
        yield c


def test_differential_over_http(client: TestClient) -> None:
    r = client.post("/v1/differential", json={"terms": ["HP:0001250", "HP:0000252"], "top_k": 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [d["disease"] for d in body["diseases"]] == ["OMIM:100001", "OMIM:100002"]
    top = body["diseases"][0]
    assert top["name"] == "Seizures with microcephaly" and top["pmids"] == ["PMID:1"]
    assert {m["observed"] for m in top["matches"]} == {"HP:0001250", "HP:0000252"}
    assert body["term_names"] == {"HP:0000252": "Microcephaly", "HP:0001250": "Seizure"}  # for display
    # the likelihood ratio of each observed term; their product is the case's
    assert [(t["term"], t["status"]) for t in top["likelihood_ratios"]] == [
        ("HP:0001250", "observed"),
        ("HP:0000252", "observed"),
    ]
    product = top["likelihood_ratios"][0]["lr"] * top["likelihood_ratios"][1]["lr"]
    assert top["log10_lr"] == pytest.approx(math.log10(product), abs=1e-3) and top["log10_lr"] > 0
    assert top["log10_lr"] > body["diseases"][1]["log10_lr"] and "baseline" in top
    # three views; the terms embedded as the entity index embeds them (it is empty here: embedded at build)
    assert body["views"] == ["likelihood_ratio", "resnik", "embedding"]
    assert [(m["observed"], m["disease_term"]) for m in top["semantic_matches"]] == [
        ("HP:0001250", "HP:0001250"),
        ("HP:0000252", "HP:0000252"),
    ]
    assert all(m["cosine"] == pytest.approx(1.0, abs=1e-3) for m in top["semantic_matches"])
    assert top["embedding"] == pytest.approx(1.0, abs=1e-3) and top["embedding"] > body["diseases"][1]["embedding"]
    text = client.post("/v1/differential", json={"text": "child with epileptic seizures and microcephaly"}).json()
    assert set(text["from_text"]) == {"HP:0001250", "HP:0000252"}
    assert text["diseases"][0]["disease"] == "OMIM:100001" and text["excluded_from_text"] == []
    # a negated phenotype in the text is excluded, not observed
    negated = client.post("/v1/differential", json={"text": "child with microcephaly, no epileptic seizures"}).json()
    assert (negated["from_text"], negated["excluded_from_text"]) == (["HP:0000252"], ["HP:0001250"])
    assert negated["observed"] == ["HP:0000252"] and negated["excluded"] == ["HP:0001250"]
    assert negated["term_names"]["HP:0001250"] == "Seizure"
    both = client.post(
        "/v1/differential", json={"text": "seizures were absent", "terms": ["HP:0000252"], "excluded": ["HP:0001250"]}
    ).json()
    assert both["excluded"] == ["HP:0001250"]  # given and negated: once
    # excluded terms the graph does not know are named as ignored, not echoed as counted
    unknown = client.post(
        "/v1/differential", json={"terms": ["HP:0000252"], "excluded": ["HP:9999999", OBSOLETE, "HP:0001250"]}
    ).json()
    assert unknown["excluded"] == ["HP:0001250"] and unknown["unknown_terms"] == ["HP:9999999"]
    assert unknown["replaced_terms"] == {OBSOLETE: ["HP:0001250"]}
    old = client.post("/v1/differential", json={"terms": [OBSOLETE, "HP:0000252"], "top_k": 2}).json()
    assert old["observed"] == ["HP:0001250", "HP:0000252"] and old["replaced_terms"] == {OBSOLETE: ["HP:0001250"]}
    assert [d["score"] for d in old["diseases"]] == [d["score"] for d in body["diseases"]]
    assert body["replaced_terms"] == {}
    # candidate genes: only their diseases, each with the score it has among all; unknown genes named
    gene = client.post(
        "/v1/differential", json={"terms": ["HP:0001250", "HP:0000252"], "genes": ["mcph1", "NOSUCHGENE"]}
    ).json()
    assert [d["disease"] for d in gene["diseases"]] == ["OMIM:100002"]
    assert gene["diseases"][0]["score"] == body["diseases"][1]["score"] and gene["diseases"][0]["genes"] == ["MCPH1"]
    assert gene["genes"] == ["mcph1"] and gene["unknown_genes"] == ["NOSUCHGENE"] and body["genes"] == []
    # a well-formed case with nothing to rank by is answered: no diseases, and why
    none = client.post("/v1/differential", json={"terms": ["HP:0000252"], "genes": ["NOSUCHGENE"]})
    assert none.status_code == 200 and none.json()["diseases"] == [], none.text
    assert none.json()["reason"] == "no disease in the graph is associated with NOSUCHGENE"
    assert body["reason"] is None
    only = client.post("/v1/differential", json={"terms": ["HP:0000252"], "namespaces": ["ORPHA"]}).json()
    assert only["diseases"] == []
    # a term that is not an HPO CURIE is refused by the schema; one the graph does not know is named
    nonsense = client.post("/v1/differential", json={"terms": ["nonsense"]})
    assert nonsense.status_code == 422 and "terms" in nonsense.text
    assert (
        client.post("/v1/differential", json={"excluded": ["OMIM:154700"], "terms": ["HP:0000252"]}).status_code == 422
    )
    unknown_only = client.post("/v1/differential", json={"terms": ["HP:9999999"]}).json()
    assert unknown_only["diseases"] == [] and unknown_only["unknown_terms"] == ["HP:9999999"]
    assert unknown_only["reason"].startswith("no observed HPO term that the graph knows")
    spellings = ["hp:0000252", "HPO:0000252", "HP_0000252", "http://purl.obolibrary.org/obo/HP_0000252"]
    for spelled_term in spellings:
        read = client.post("/v1/differential", json={"terms": [spelled_term]}).json()
        assert read["observed"] == ["HP:0000252"] and read["diseases"], (spelled_term, read)
    # a term both observed and excluded, or the root: named as not counted, never echoed as counted
    conflict = client.post(
        "/v1/differential", json={"terms": ["HP:0001250", "HP:0000118"], "excluded": ["HP:0001250", "HP:0000252"]}
    ).json()
    assert conflict["observed"] == ["HP:0001250"] and conflict["excluded"] == ["HP:0000252"]
    assert set(conflict["ignored_terms"]) == {"HP:0001250", "HP:0000118"}
    # a NUL pasted into the text hides no mention; a gene given in several spellings is one gene
    nul = client.post("/v1/differential", json={"text": "seizures\x00 microcephaly"}).json()
    assert set(nul["from_text"]) == {"HP:0001250", "HP:0000252"}
    spelled = client.post("/v1/differential", json={"terms": ["HP:0000252"], "genes": ["MCPH1", "mcph1", " MCPH1 "]})
    assert spelled.json()["genes"] == ["MCPH1"]
    root = client.post("/v1/differential", json={"terms": ["HP:0000118"]})
    assert root.status_code == 200 and "HP:0000118: not a phenotypic abnormality" in root.json()["reason"]
    for garbled in (b"{not json", b'{"terms": ["\xff\xfe"]}'):  # not JSON; bytes that are not UTF-8 text
        r = client.post("/v1/differential", content=garbled, headers={"content-type": "application/json"})
        assert r.status_code == 422 and "JSON" in r.text, r.text  # FastAPI answers 400 for the second


def test_differential_cli(tmp_path: Path) -> None:
    build(tmp_path / "data").close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    r = run(["differential", "HP:0001250", "HP:0000252", "--top", "1", "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert [d["disease"] for d in data["diseases"]] == ["OMIM:100001"]
    assert {"log10_lr", "likelihood_ratios", "baseline"} <= data["diseases"][0].keys()
    assert data["term_names"] == {"HP:0000252": "Microcephaly", "HP:0001250": "Seizure"}
    table = run(["differential", "HP:0001250", "--exclude", "HP:0000252"], env, tmp_path)
    assert table.returncode == 0 and "Seizures with microcephaly" in table.stdout
    assert "Seizure (HP:0001250) ~ Seizure (HP:0001250)" in table.stdout  # matched pairs by name
    assert (tmp_path / "data" / "indexes" / "phenotypes.pkl").exists()  # cached for the next call
    old = run(["differential", OBSOLETE, "HP:0000252", "--top", "1"], env, tmp_path)
    assert old.returncode == 0 and f"{OBSOLETE} is obsolete, counted as HP:0001250" in old.stderr
    assert "Seizures with microcephaly" in old.stdout
    ignored = json.loads(run(["differential", "HP:0001250", "--exclude", "HP:9999999", "--json"], env, tmp_path).stdout)
    assert (ignored["excluded"], ignored["unknown_terms"]) == ([], ["HP:9999999"])
    bad = run(["differential", "HP:9999999"], env, tmp_path)
    assert bad.returncode == 2 and "none of the terms" in bad.stderr
    gene = run(["differential", "HP:0001250", "HP:0000252", "--gene", "MCPH1", "--json"], env, tmp_path)
    assert gene.returncode == 0, gene.stderr
    assert [d["disease"] for d in json.loads(gene.stdout)["diseases"]] == ["OMIM:100002"]
    unknown = run(["differential", "HP:0001250", "--gene", "NOSUCHGENE"], env, tmp_path)
    assert unknown.returncode == 2 and "no disease in the graph is associated with NOSUCHGENE" in unknown.stderr
    # a description instead of (or besides) terms; what it negates is excluded
    text = run(["differential", "--text", "Microcephaly; seizures were absent.", "--json"], env, tmp_path)
    assert text.returncode == 0, text.stderr
    described = json.loads(text.stdout)
    assert (described["observed"], described["excluded"]) == (["HP:0000252"], ["HP:0001250"])
    assert (described["from_text"], described["excluded_from_text"]) == (["HP:0000252"], ["HP:0001250"])
    shown = run(["differential", "HP:0000252", "--text", "no epileptic seizures"], env, tmp_path)
    assert shown.returncode == 0 and "negated in the text, excluded: Seizure (HP:0001250)" in shown.stderr
    nothing = run(["differential"], env, tmp_path)
    assert nothing.returncode == 2 and "give observed HPO terms (HP:...), --text or --phenopacket" in nothing.stderr
    none_linked = run(["differential", "--text", "no epileptic seizures"], env, tmp_path)
    assert none_linked.returncode == 2 and "none linked from the text" in none_linked.stderr


def test_namespaces_in_any_spelling_over_http(client: TestClient) -> None:
    case = {"terms": ["HP:0000252"]}
    omim = client.post("/v1/differential", json={**case, "namespaces": ["OMIM"]}).json()["diseases"]
    assert {d["disease"] for d in omim} == {"OMIM:100001", "OMIM:100002"}
    for spelling in (["omim"], ["MIM"], ["omim:", "OMIM"]):
        r = client.post("/v1/differential", json={**case, "namespaces": spelling})
        assert r.status_code == 200 and r.json()["diseases"] == omim, (spelling, r.text)
    assert client.post("/v1/differential", json={**case, "namespaces": ["orphanet"]}).json()["diseases"] == []
    for wrong in (["FOO"], ["OMIM", "HP"]):
        r = client.post("/v1/differential", json={**case, "namespaces": wrong})
        assert r.status_code == 422 and "unknown disease namespace" in r.text, r.text
    # seizure shares nothing with OMIM:100002 (microcephaly) below the roots: no "match", never -0.0
    both = client.post("/v1/differential", json={"terms": ["HP:0001250", "HP:0000252"]}).json()["diseases"]
    assert [(m["observed"], m["disease_term"]) for m in both[1]["matches"]] == [("HP:0000252", "HP:0000252")]


def test_differential_cli_namespaces(tmp_path: Path) -> None:
    build(tmp_path / "data").close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    lower = run(["differential", "HP:0000252", "--namespace", "omim", "--json"], env, tmp_path)
    assert lower.returncode == 0, lower.stderr
    assert {d["disease"] for d in json.loads(lower.stdout)["diseases"]} == {"OMIM:100001", "OMIM:100002"}
    wrong = run(["differential", "HP:0000252", "--namespace", "FOO"], env, tmp_path)
    assert wrong.returncode == 2 and "unknown disease namespace 'FOO'" in wrong.stderr
    assert "Traceback" not in wrong.stderr
    empty = run(["differential", "HP:0000252", "--namespace", "Orphanet"], env, tmp_path)
    assert empty.returncode == 0 and "no disease ranked in ORPHA" in empty.stdout, empty.stdout
    table = run(["differential", "HP:0001250", "HP:0000252"], env, tmp_path)
    assert table.returncode == 0 and "Seizure (HP:0001250) ~ Microcephaly" not in table.stdout
    assert "-0.0" not in table.stdout


def test_eval_phenopackets_command(tmp_path: Path) -> None:
    build(tmp_path / "data").close()
    cases = tmp_path / "cases.jsonl"
    cases.write_text(
        json.dumps({"id": "a", "observed": ["HP:0001250", "HP:0000252"], "excluded": [], "diseases": ["OMIM:100001"]})
        + "\n"
        + json.dumps({"id": "b", "observed": ["HP:0000252"], "excluded": [], "diseases": ["OMIM:999999"]})
        + "\n"
        + json.dumps({"id": "c", "observed": ["HP:0000252"], "diseases": ["OMIM:100002"], "genes": ["MCPH1"]})
        + "\n"
    )
    evals = tmp_path / "evals"
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_EVAL_DIR": str(evals)}  # no --out: where /eval looks
    r = run(["eval", "phenopackets", str(cases), "--text"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "2 of 3 cases evaluated; 1 with a disease not in the graph" in r.stdout
    assert "medkg" in r.stdout and "1.000" in r.stdout  # both mappable cases in the top 10
    assert "medkg minus each baseline, in points" in r.stdout and "Resnik BMA: top1 +0.0" in r.stdout
    figures = json.loads((evals / "cases.differential.json").read_text())  # what the page /eval plots
    assert figures["file"] == "cases.jsonl" and figures["finished_at"]
    assert (figures["cases"], figures["evaluated"], figures["unmapped_disease"]) == (3, 2, 1)
    top1 = figures["medkg"]["top1"] - figures["baseline_resnik_bma"]["top1"]
    assert figures["medkg_minus"]["baseline_resnik_bma"]["top1"]["points"] == round(100 * top1, 1)
    # written as text ("Epileptic seizure and microcephaly.") and linked back: every term, the same ranks
    as_text = figures["as_text"]["synonyms"]
    assert (as_text["observed"], as_text["observed_found"], as_text["observed_negated"]) == (3, 3, 0)
    assert {k: as_text[k] for k in ("top1", "top10")} == {k: figures["medkg"][k] for k in ("top1", "top10")}
    assert "written as text (names) and linked back: 3/3 observed terms found (0 read as negated)" in r.stdout
    assert "given the causal gene (1 cases; 0 whose diagnosis the graph does not associate with it" in r.stdout
    plotted = run(["eval", "plot"], env, tmp_path)  # the configured folder, too
    assert plotted.returncode == 0 and (evals / "report.html").is_file(), plotted.stderr


def test_a_load_that_changes_frequencies_in_place_refreshes_the_phenotype_index(tmp_path: Path) -> None:
    """A new release that only corrects annotation frequencies leaves the graph's counts as they were,
    which is all the cache's stamp looks at: the load itself must drop the cached index."""
    from service.ingestion import load_source

    def release(frequency: str) -> list[Entity | Relation]:
        disease = Entity(id="OMIM:100003", name="Microcephaly, sometimes", category="Disease")
        relation = Relation(
            subject=disease.id, type="HAS_PHENOTYPE", object="HP:0000252", evidence={"frequency": [frequency]}
        )
        return [disease, relation.model_copy(update={"source": "hpo-test"})]

    c = build(tmp_path)
    try:
        load_source(c, release("1/10"), "hpo-test", embed=False, progress=False)
        before = {d.disease: d.log10_lr for d in c.phenotype_index.rank(["HP:0000252"], top_k=5)}
        assert (tmp_path / "indexes" / "phenotypes.pkl").exists()
        report = load_source(c, release("9/10"), "hpo-test", embed=False, progress=False).summary
        assert report.relations.updated == 1 and report.relations.added == 0
        after = {d.disease: d.log10_lr for d in c.phenotype_index.rank(["HP:0000252"], top_k=5)}
        assert after["OMIM:100003"] > before["OMIM:100003"]
    finally:
        c.close()
    with build(tmp_path) as again:  # and a later process does not read the old cache either
        assert {d.disease: d.log10_lr for d in again.phenotype_index.rank(["HP:0000252"], top_k=5)} == after


def test_a_load_that_renames_a_gene_refreshes_the_phenotype_index(tmp_path: Path) -> None:
    """An entity updated in place (a gene's new symbol) changes no count either: the load drops the
    cached index, so the ranking names the gene as the graph now does."""
    from service.ingestion import load_source

    c = build(tmp_path)
    try:
        assert {d.disease: d.genes for d in c.phenotype_index.rank(["HP:0000252"], top_k=5)}["OMIM:100002"] == ["MCPH1"]
        renamed = Entity(id="NCBIGene:79648", name="MCPH1-NEW", category="Gene")
        report = load_source(c, [renamed], "hgnc-test", embed=False, progress=False).summary
        assert report.entities.updated == 1 and report.relations.updated == 0
        genes = {d.disease: d.genes for d in c.phenotype_index.rank(["HP:0000252"], top_k=5)}
        assert genes["OMIM:100002"] == ["MCPH1-NEW"]
    finally:
        c.close()


def test_the_phenotype_index_takes_its_term_vectors_from_the_entity_index(tmp_path: Path) -> None:
    """Built by the service, the index reads each HPO term's vector from the entity index (nothing is
    embedded again once `medkg ingest` has embedded the entities), keeps them in its cache, and a
    term renamed by a load (an entity updated in place) is read again, from its new text."""
    import numpy as np

    from service.ingestion import load_source

    c = build(tmp_path)
    try:
        c.entity_index.update(c.graph, progress=False)
        index = c.phenotype_index
        assert index.vector_model == c.text_embedder.signature and "embedding" in index.views()
        seizure = index.term_vectors[index.term_index["HP:0001250"]]
        assert np.allclose(seizure, c.entity_index.index.vector("HP:0001250"))
        renamed = Entity(id="HP:0001250", name="Seizure", category="Phenotype", description="A fit of the brain.")
        load_source(c, [renamed], "hpo-test", embed=True, progress=False)
        again = c.phenotype_index
        changed = again.term_vectors[again.term_index["HP:0001250"]]
        assert not np.allclose(changed, seizure) and np.allclose(changed, c.entity_index.index.vector("HP:0001250"))
    finally:
        c.close()
    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2)
    with Container(settings) as later:  # a later process reads the cache, vectors included
        cached = later._cached_phenotype_index()
        assert cached is not None and np.allclose(cached.term_vectors[cached.term_index["HP:0001250"]], changed)


def test_a_match_by_meaning_alone_is_shown(tmp_path: Path) -> None:
    """Frequent falls and Falls share no ancestor below Phenotypic abnormality (as in HPO): only the
    embedding view sees that they match. The disease annotated with Falls ranks first, and the CLI and
    the API name the match with its cosine."""
    c = Container(load_settings(data_dir=tmp_path / "data", ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2))
    try:
        c.graph.upsert_entities(
            [
                Entity(id="HP:0000001", name="All", category="Phenotype"),
                Entity(id="HP:0000118", name="Phenotypic abnormality", category="Phenotype"),
                Entity(id="HP:0000707", name="Abnormality of the nervous system", category="Phenotype"),
                Entity(id="HP:0002527", name="Falls", category="Phenotype"),
                Entity(id="HP:0000152", name="Abnormality of head or neck", category="Phenotype"),
                Entity(id="HP:0040064", name="Abnormality of limbs", category="Phenotype"),
                Entity(id="HP:0002359", name="Frequent falls", category="Phenotype"),
                Entity(id="HP:0000252", name="Microcephaly", category="Phenotype"),
                Entity(id="OMIM:200001", name="Falling disease", category="Disease"),
                Entity(id="OMIM:200002", name="Small head disease", category="Disease"),
            ]
        )
        parents = {
            "HP:0000118": "HP:0000001",
            "HP:0000707": "HP:0000118",
            "HP:0002527": "HP:0000707",
            "HP:0000152": "HP:0000118",
            "HP:0040064": "HP:0000118",
            "HP:0002359": "HP:0040064",
            "HP:0000252": "HP:0000152",
        }
        c.graph.upsert_relations(
            [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in parents.items()]
            + [
                Relation(subject="OMIM:200001", type="HAS_PHENOTYPE", object="HP:0002527"),
                Relation(subject="OMIM:200002", type="HAS_PHENOTYPE", object="HP:0000252"),
            ]
        )
    finally:
        c.close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    table = run(["differential", "HP:0002359", "--top", "2"], env, tmp_path)
    assert table.returncode == 0, table.stderr
    assert table.stdout.index("Falling disease") < table.stdout.index("Small head disease")
    assert "Frequent falls (HP:0002359) ≈ Falls (HP:0002527)  (cosine 0." in table.stdout
    data = json.loads(run(["differential", "HP:0002359", "--json"], env, tmp_path).stdout)
    top = data["diseases"][0]
    assert top["disease"] == "OMIM:200001" and top["matches"] == []
    assert [m[:2] for m in top["semantic_matches"]] == [["HP:0002359", "HP:0002527"]]
    assert top["semantic_matches"][0][2] > 0.6 and data["views"][-1] == "embedding"


def test_the_patients_sex_and_age_over_http_and_the_cli(tmp_path: Path) -> None:
    """Sex and age, given, read from the text or from a phenopacket's subject (in that order of trust),
    weigh an X-linked recessive disease: first for a boy, last for a girl, each with the LR and the term
    behind it; the answer says what it counted."""
    c = build(tmp_path / "data")
    c.graph.upsert_entities(
        [Entity(id=t, name=n, category="Phenotype") for t, n in (("HP:0000005", "Mode of inheritance"),
                                                                ("HP:0001419", "X-linked recessive inheritance"))]
    )  # fmt: skip
    c.graph.upsert_relations(
        [
            Relation(subject="HP:0000005", type="IS_A", object="HP:0000001", source="hp"),
            Relation(subject="HP:0001419", type="IS_A", object="HP:0000005", source="hp"),
            Relation(subject="OMIM:100002", type="HAS_PHENOTYPE", object="HP:0001250"),
            Relation(subject="OMIM:100002", type="HAS_INHERITANCE", object="HP:0001419"),
        ]
    )
    c.forget_phenotype_cache()
    with TestClient(create_app(container=c)) as client:

        def ask(body: dict) -> dict:
            r = client.post("/v1/differential", json=body)
            assert r.status_code == 200, r.text
            return r.json()

        case = {"terms": ["HP:0001250", "HP:0000252"]}
        boy = ask({**case, "sex": "male"})
        assert [d["disease"] for d in boy["diseases"]] == ["OMIM:100002", "OMIM:100001"]
        assert {"term": "HP:0001419", "status": "sex", "lr": 1.8} in boy["diseases"][0]["likelihood_ratios"]
        assert boy["patient"] == {"sex": "male", "age_years": None}
        girl = ask({"text": "A 2-year-old girl with seizures and microcephaly"})
        assert girl["patient"] == {"sex": "female", "age_years": 2.0}
        assert [d["disease"] for d in girl["diseases"]] == ["OMIM:100001", "OMIM:100002"]
        assert ask({**case, "sex": "male", "text": "a girl"})["patient"]["sex"] == "male"  # given before read
        packet = {
            "id": "p1",
            "subject": {"id": "s1", "sex": "MALE", "timeAtLastEncounter": {"age": {"iso8601duration": "P6M"}}},
            "phenotypicFeatures": [{"type": {"id": "HP:0001250"}}, {"type": {"id": "HP:0000252"}}],
            "metaData": {"created": "2024-01-01T00:00:00Z", "createdBy": "t", "phenopacketSchemaVersion": "2.0"},
        }
        assert ask(packet)["patient"] == {"sex": "male", "age_years": 0.5}
        assert client.post("/v1/differential", json={**case, "sex": "other"}).status_code == 422
        assert client.post("/v1/differential", json={**case, "age_years": False}).status_code == 422  # no age 0
    c.close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    r = run(["differential", "HP:0001250", "HP:0000252", "--sex", "male", "--age", "4", "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["patient"] == {"sex": "male", "age_years": 4.0} and data["diseases"][0]["disease"] == "OMIM:100002"
    bad = run(["differential", "HP:0001250", "--sex", "unknown"], env, tmp_path)
    assert bad.returncode == 2 and "--sex is male or female" in bad.stderr
