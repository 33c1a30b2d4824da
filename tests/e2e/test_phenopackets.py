"""GA4GH Phenopackets v2 in: `POST /v1/differential` (whole body or under "phenopacket"), `medkg differential
--phenopacket` and the evaluation reading phenopacket-store files, on a real embedded store."""

from __future__ import annotations

import copy
import json
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from service.api.app import create_app
from tests.e2e.test_differential import build
from tests.support.cli import run
from tests.support.phenopackets import as_phenopacket

# seizure and microcephaly, ataxia excluded (an HPO id the graph lacks: reported, not counted), MCPH1 causal
CASE = {
    "id": "case-1",
    "pmids": ["PMID:1"],
    "observed": ["HP:0001250", "HP:0000252"],
    "excluded": ["HP:0001251"],
    "diseases": ["OMIM:100002"],
    "genes": ["MCPH1"],
}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with TestClient(create_app(container=build(tmp_path))) as c:
        yield c


def test_a_phenopacket_is_a_case_whole_or_under_its_key(client: TestClient) -> None:
    packet = as_phenopacket(CASE)
    plain = client.post("/v1/differential", json={"terms": CASE["observed"], "excluded": CASE["excluded"],
                                                 "genes": CASE["genes"]})  # fmt: skip
    assert plain.status_code == 200, plain.text
    for body in (packet, {"phenopacket": packet}):
        r = client.post("/v1/differential", json=body)
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["observed"] == ["HP:0001250", "HP:0000252"] and got["unknown_terms"] == ["HP:0001251"]
        assert got["genes"] == ["MCPH1"]  # from the causal variant's gene context: only its diseases ranked
        assert [d["disease"] for d in got["diseases"]] == ["OMIM:100002"] == [d["disease"] for d in
                                                                              plain.json()["diseases"]]  # fmt: skip
    # a gene call instead of a variant, and the request's own options beside the phenopacket
    gene_call = as_phenopacket({**CASE, "genes": []} | {"genes": ["MCPH1"]}, by_variant=False)
    both = client.post("/v1/differential", json={"phenopacket": gene_call, "top_k": 1, "terms": ["HP:0000252"]})
    assert both.status_code == 200 and both.json()["genes"] == ["MCPH1"] and len(both.json()["diseases"]) == 1
    # without genes every disease is ranked; a REJECTED gene is not a candidate
    rejected = copy.deepcopy(packet)
    rejected["interpretations"][0]["diagnosis"]["genomicInterpretations"][0]["interpretationStatus"] = "REJECTED"
    ranked = client.post("/v1/differential", json=rejected).json()
    assert ranked["genes"] == [] and [d["disease"] for d in ranked["diseases"]] == ["OMIM:100001", "OMIM:100002"]
    # only excluded features: answered, with the reason nothing is ranked
    excluded_only = as_phenopacket({**CASE, "observed": [], "excluded": ["HP:0001250"]})
    nothing = client.post("/v1/differential", json=excluded_only)
    assert nothing.status_code == 200 and nothing.json()["diseases"] == [] and nothing.json()["reason"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["phenotypicFeatures"][1]["type"].update(id="seizure"),
         "phenopacket.phenotypicFeatures[1].type.id: 'seizure' is not an HPO term"),
        (lambda p: p.update(phenotypicFeature=p.pop("phenotypicFeatures")),
         "no field phenotypicFeature in a phenopacket"),
        (lambda p: p["phenotypicFeatures"][0].update(excluded="yes"),
         "phenopacket.phenotypicFeatures[0].excluded: 'yes' is not of type 'boolean'"),
        (lambda p: p.update(phenotypicFeatures=[]),
         "phenopacket.phenotypicFeatures: a phenopacket without phenotypic features gives nothing to rank"),
        (lambda p: p["phenotypicFeatures"][0].update(onset={"timestamp": "2024-02-30T00:00:00Z"}),
         "phenopacket.phenotypicFeatures[0].onset.timestamp: day is out of range for month"),
        (lambda p: p["interpretations"][0].update(progressStatus="DONE"),
         "phenopacket.interpretations[0].progressStatus: 'DONE' is not one of"),
        (lambda p: p["metaData"].update(created="2024-02-30T00:00:00Z"),
         "phenopacket.metaData.created: day is out of range for month"),
        (lambda p: p["subject"].update(sex="M"), "phenopacket.subject.sex: 'M' is not one of"),
        (lambda p: p["subject"].update(anything=1), "phenopacket.subject: no field anything in a phenopacket here"),
        (lambda p: p["metaData"]["externalReferences"][0].update(reference=["x"]),
         "phenopacket.metaData.externalReferences[0].reference: ['x'] is not of type 'string'"),
        (lambda p: p["phenotypicFeatures"][0].pop("type"),
         "phenopacket.phenotypicFeatures[0]: 'type' is a required property"),
        (lambda p: p["interpretations"][0]["diagnosis"]["genomicInterpretations"][0].update(
            gene={"valueId": "HGNC:1", "symbol": "MCPH1"}),
         "genomicInterpretations[0]: give at most one of gene, variantInterpretation"),
    ],
)  # fmt: skip
def test_a_bad_phenopacket_is_refused_naming_the_field(client: TestClient, change, message: str) -> None:
    packet = as_phenopacket(CASE)
    change(packet)
    for body in (packet, {"phenopacket": packet}):
        r = client.post("/v1/differential", json=body)
        assert r.status_code == 422 and message in r.text, r.text


def test_a_vrs_variation_is_passed_over_and_the_rest_checked(client: TestClient) -> None:
    packet = as_phenopacket(CASE)
    variant = packet["interpretations"][0]["diagnosis"]["genomicInterpretations"][0]["variantInterpretation"]
    variant["variationDescriptor"]["variation"] = {"allele": {"anything": ["not read"]}}  # VRS: not read
    variant["variationDescriptor"]["vcfRecord"] = {"chrom": "chr1", "pos": 156137756, "ref": "C", "alt": "A"}
    packet["subject"] = {"id": "p1", "sex": "FEMALE", "timeAtLastEncounter": {"age": {"iso8601duration": "P3Y"}}}
    r = client.post("/v1/differential", json=packet)
    assert r.status_code == 200 and r.json()["genes"] == ["MCPH1"], r.text
    variant["variationDescriptor"]["vcfRecord"]["pos"] = "not a number"
    refused = client.post("/v1/differential", json=packet)
    assert refused.status_code == 422 and "variationDescriptor.vcfRecord.pos: 'not a number'" in refused.text


def test_the_openapi_document_describes_both_bodies(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["paths"]["/v1/differential"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == {"anyOf": [{"$ref": "#/components/schemas/DifferentialRequest"},
                              {"$ref": "#/components/schemas/Phenopacket"}]}  # fmt: skip
    packet = spec["components"]["schemas"]["Phenopacket"]
    assert packet["required"] == ["phenotypicFeatures"] and packet["additionalProperties"] is False
    assert set(packet["properties"]) >= {"id", "subject", "phenotypicFeatures", "interpretations", "metaData"}


def test_differential_cli_reads_a_phenopacket(tmp_path: Path) -> None:
    build(tmp_path / "data").close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data")}
    file = tmp_path / "case.json"
    file.write_text(json.dumps(as_phenopacket(CASE)))
    r = run(["differential", "--phenopacket", str(file), "--json"], env, tmp_path)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["observed"], got["genes"]) == (["HP:0001250", "HP:0000252"], ["MCPH1"])
    assert [d["disease"] for d in got["diseases"]] == ["OMIM:100002"]
    bad = as_phenopacket(CASE)
    bad["phenotypicFeatures"][0]["type"]["id"] = "OMIM:100001"
    file.write_text(json.dumps(bad))
    refused = run(["differential", "--phenopacket", str(file)], env, tmp_path)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{file}: phenopacket.phenotypicFeatures[0].type.id: 'OMIM:100001' is not an HPO term" in refused.stderr
    file.write_text("{not json")
    garbled = run(["differential", "--phenopacket", str(file)], env, tmp_path)
    assert garbled.returncode == 2 and "not a JSON phenopacket" in garbled.stderr


def test_the_evaluation_reads_phenopacket_store_as_it_is(tmp_path: Path) -> None:
    """A folder laid out as phenopacket-store (notebooks/<cohort>/phenopackets/*.json) and its zip: each
    phenopacket is a case of its cohort; a file that is not one is reported naming the field."""
    from eval.phenopackets import read_cases

    store = tmp_path / "phenopacket-store" / "notebooks"
    cases = [CASE, {**CASE, "id": "case-2", "diseases": ["OMIM:100001"], "genes": []}]
    for case, cohort in zip(cases, ("MCPH1", "OTHER"), strict=True):
        folder = store / cohort / "phenopackets"
        folder.mkdir(parents=True)
        (folder / f"{case['id']}.json").write_text(json.dumps(as_phenopacket(case), indent=2))
    broken = as_phenopacket({**CASE, "id": "broken"})
    broken["phenotypicFeatures"][0]["excluded"] = 3
    (store / "OTHER" / "phenopackets" / "broken.json").write_text(json.dumps(broken))
    archive = tmp_path / "all_phenopackets.zip"
    with zipfile.ZipFile(archive, "w") as z:
        for file in sorted(store.rglob("*.json")):
            z.write(file, file.relative_to(store.parent).as_posix())
    for path in (store, archive):
        read, malformed = read_cases(path)
        assert [(c["id"], c["cohort"], c["diseases"], c["genes"]) for _, c in read] == [
            ("case-1", "MCPH1", ["OMIM:100002"], ["MCPH1"]),
            ("case-2", "OTHER", ["OMIM:100001"], []),
        ]
        assert read[0][1]["observed"] == CASE["observed"] and read[0][1]["pmids"] == ["PMID:1"]
        assert (
            len(malformed) == 1
            and "broken.json: phenopacket.phenotypicFeatures[0].excluded: 3 is not of type 'boolean'" in malformed[0]
        )
    build(tmp_path / "data").close()
    env = {"MEDKG_DATA_DIR": str(tmp_path / "data"), "MEDKG_EVAL_DIR": str(tmp_path / "evals")}
    r = run(["eval", "phenopackets", str(archive)], env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert (
        "2 of 3 cases evaluated; 0 with a disease not in the graph; 1 file not a case" in r.stdout
        and "broken.json: phenopacket.phenotypicFeatures[0]" in r.stdout
    ), r.stdout
