"""The phenopacket schema derived from the ``phenopackets`` package: it takes every real case of
../shared/data/phenopackets written as a phenopacket, and what it takes reads back as the same case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kg.differential.phenopacket import phenopacket_schema, read_phenopacket
from tests.support.phenopackets import as_phenopacket

CASES = Path(__file__).resolve().parents[4] / "shared" / "data" / "phenopackets" / "dev.jsonl"


@pytest.mark.skipif(not CASES.exists(), reason="../shared/data/phenopackets is absent")
def test_every_real_case_reads_back_as_itself() -> None:
    lines = CASES.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        case = json.loads(line)
        packet = read_phenopacket(as_phenopacket(case, by_variant=n % 2 == 0))
        assert packet.id == case["id"] and packet.pmids == case["pmids"]
        assert packet.observed == list(dict.fromkeys(case["observed"]))
        assert set(packet.excluded) == set(case["excluded"]) - set(case["observed"])
        assert packet.genes == list(dict.fromkeys(case["genes"])) and packet.diseases == case["diseases"]
    assert len(lines) == 1040


def test_the_schema_is_the_protobuf_json_mapping() -> None:
    schema = phenopacket_schema()
    feature = schema["properties"]["phenotypicFeatures"]["items"]["properties"]
    assert set(feature) == {"description", "type", "excluded", "severity", "modifiers", "onset", "resolution",
                            "evidence"}  # fmt: skip
    assert feature["excluded"] == {"type": "boolean"}
    status = schema["properties"]["interpretations"]["items"]["properties"]["progressStatus"]
    assert status["enum"] == ["UNKNOWN_PROGRESS", "IN_PROGRESS", "COMPLETED", "SOLVED", "UNSOLVED"]
    onset = feature["onset"]["properties"]
    assert onset["timestamp"] == {"type": "string", "format": "date-time"}
    assert onset["age"]["properties"] == {"iso8601duration": {"type": "string"}}
    sex = schema["properties"]["subject"]["properties"]["sex"]
    assert sex["enum"] == ["UNKNOWN_SEX", "FEMALE", "MALE", "OTHER_SEX"]
    assert schema["properties"]["metaData"]["properties"]["created"] == {"type": "string", "format": "date-time"}
    call = schema["properties"]["interpretations"]["items"]["properties"]["diagnosis"]["properties"]
    # 64-bit integers within JSON's safe range; VRS variations any object, neither checked nor parsed
    descriptor = call["genomicInterpretations"]["items"]["properties"]["variantInterpretation"]["properties"][
        "variationDescriptor"
    ]["properties"]
    assert descriptor["vcfRecord"]["properties"]["pos"] == {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}
    assert descriptor["variation"] == {"type": "object", "x-unread": True}
    oneof = call["genomicInterpretations"]["items"]["allOf"]
    assert [o["x-oneof"] for o in oneof] == [["gene", "variantInterpretation"]]
