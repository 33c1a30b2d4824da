"""medkg over the Model Context Protocol, end to end with the official SDK's own client: a real `medkg mcp`
process over stdio, and a real `medkg serve` over streamable HTTP (/mcp) with the HTTP API's keys and limits.
Real store, indexes and models; the studies are pydicom-data's."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pydicom
import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from kg.settings import load_settings
from service.container import Container
from tests.support.live_server import medkg_serve
from tests.support.phenopackets import as_phenopacket
from tests.support.qa_store import build_qa_store
from tests.support.studies import load_studies, study_file

MEDKG = str(Path(sys.executable).parent / "medkg")
TOOLS = {"ask", "differential", "get_entity", "find_entities", "neighbours", "paths", "search_passages",
         "draft_report"}  # fmt: skip
KEY = "mcp-test-key-0123456789"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The QA store with radiology reports and studies, their images indexed."""
    tmp = tmp_path_factory.mktemp("mcp")
    with Container(load_settings(data_dir=tmp / "data", ladybug_buffer_pool_mb=256)) as c:
        build_qa_store(c)
        load_studies(c, tmp / "studies")
    return tmp / "data"


def _env(data: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "MEDKG_DATA_DIR": str(data), "MEDKG_LLM_BASE_URL": "", "HF_HUB_OFFLINE": "1",
            "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", **extra}  # fmt: skip


def _image_id(data: Path, name: str) -> str:
    with Container(load_settings(data_dir=data, ladybug_buffer_pool_mb=64)) as c:
        sop = pydicom.dcmread(study_file(name), stop_before_pixels=True).SOPInstanceUID
        return c.pseudonymizer.image_id(str(sop))


async def _call(session: ClientSession, tool: str, **arguments: Any) -> Any:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def _error(session: ClientSession, tool: str, **arguments: Any) -> str:
    result = await session.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    return result.content[0].text


async def _every_tool(session: ClientSession, knee: str) -> None:
    init = await session.initialize()
    assert init.server_info.name == "medkg" and "cites an evidence id" in (init.instructions or "")
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():  # typed both ways, and read-only
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None, tool.name
        assert tool.annotations is not None and tool.annotations.read_only_hint, tool.name
        assert tool.description and "\n" not in tool.description and "  " not in tool.description, tool.name
    assert tools["differential"].input_schema["properties"]["top_k"]["maximum"] == 500  # the API's bounds
    answer = await _call(session, "ask", question="Which phenotypes are characteristic of Marfan syndrome?")
    cited = {c["id"] for c in answer["citations"]}
    assert "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166" in cited and "[" in answer["answer"]
    ranked = await _call(session, "differential", terms=["HP:0001250", "HP:0000252"], top_k=2)
    assert ranked["diseases"][0]["disease"] == "OMIM:100001"
    aged = await _call(session, "differential", terms=["HP:0001250"], sex="female", age_years=3)
    assert aged["patient"] == {"sex": "female", "age_years": 3.0}
    packet = as_phenopacket({"id": "p", "observed": ["HP:0001252"], "diseases": ["OMIM:100002"], "genes": ["TBCK"]})
    by_packet = await _call(session, "differential", phenopacket=packet)
    assert by_packet["genes"] == ["TBCK"] and [d["disease"] for d in by_packet["diseases"]] == ["OMIM:100002"]
    packet["phenotypicFeatures"][0]["type"]["id"] = "seizure"
    assert "phenopacket.phenotypicFeatures[0].type.id: 'seizure' is not an HPO term" in await _error(
        session, "differential", phenopacket=packet
    )
    assert "top_k" in await _error(session, "differential", terms=["HP:0001250"], top_k=501)
    marfan = await _call(session, "get_entity", entity_id="OMIM:154700")
    assert marfan["name"] == "Marfan syndrome"
    assert "no entity 'OMIM:999999'" in await _error(session, "get_entity", entity_id="OMIM:999999")
    found = await _call(session, "find_entities", name="lens dislocation")
    assert [e["id"] for e in found["result"]] == ["HP:0001083"]
    around = await _call(session, "neighbours", entity_id="OMIM:154700", relation_types=["HAS_PHENOTYPE"])
    assert {n["entity"]["id"] for n in around["result"]} == {"HP:0001166", "HP:0001083", "HP:0002616", "HP:0000545"}
    found_paths = await _call(session, "paths", source="DRUGBANK:DB00678", target="HP:0001166")
    assert found_paths["result"] and found_paths["result"][0]["nodes"][0]["id"] == "DRUGBANK:DB00678"
    hits = await _call(session, "search_passages", query="fibrillin aortic root", k=3)
    assert hits["result"] and all(h["id"].startswith(("PMID:", "IUXR:")) for h in hits["result"])
    draft = await _call(session, "draft_report", image_id=knee, indication="Leg pain after a fall.")
    assert draft["study"]["image_id"] == knee and draft["technique"].startswith("Computed Radiography")
    assert "no indexed image 'IMG:2.25.1'" in await _error(session, "draft_report", image_id="IMG:2.25.1")


def test_every_tool_over_stdio(data_dir: Path) -> None:
    knee = _image_id(data_dir, "RG3_J2KI.dcm")
    params = StdioServerParameters(command=MEDKG, args=["mcp"], env=_env(data_dir))

    async def main() -> None:
        with (data_dir.parent / "mcp-stdio.log").open("w") as log:
            async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
                await _every_tool(session, knee)

    anyio.run(main)


@pytest.fixture(scope="module")
def served(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    env = _env(data_dir, MEDKG_API_KEYS=KEY, MEDKG_RATE_LIMIT_PER_MINUTE="600", MEDKG_MAX_REQUEST_BYTES="200000")
    with medkg_serve(env, tmp_path_factory.mktemp("served") / "serve.log") as url:
        yield url


def test_every_tool_over_streamable_http_with_a_key(served: str, data_dir: Path) -> None:
    knee = _image_id(data_dir, "RG3_J2KI.dcm")

    async def main() -> None:
        for header in ({"Authorization": f"Bearer {KEY}"}, {"X-API-Key": KEY}):
            async with httpx2.AsyncClient(headers=header, timeout=120) as http:
                async with streamable_http_client(f"{served}/mcp", http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        if "Authorization" in header:
                            await _every_tool(session, knee)
                        else:
                            await session.initialize()
                            assert (await _call(session, "get_entity", entity_id="HP:0001083"))["name"]

    anyio.run(main)


def test_the_http_api_layers_guard_mcp(served: str) -> None:
    """No key: 401, as on /v1; a body over MEDKG_MAX_REQUEST_BYTES: 413; each call draws on the rate limit."""
    import httpx

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    assert httpx.post(f"{served}/mcp", json=call, headers=headers).status_code == 401
    keyed = {**headers, "X-API-Key": KEY}
    listed = httpx.post(f"{served}/mcp", json=call, headers=keyed)
    assert listed.status_code == 200 and {t["name"] for t in listed.json()["result"]["tools"]} == TOOLS
    big = {**call, "method": "tools/call", "params": {"name": "ask", "arguments": {"question": "x" * 300_000}}}
    assert httpx.post(f"{served}/mcp", content=json.dumps(big), headers=keyed).status_code == 413

    async def refused() -> None:
        async with httpx2.AsyncClient(timeout=30) as http:  # the SDK's client, without a key
            async with streamable_http_client(f"{served}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()

    with pytest.raises(BaseException) as caught:  # an ExceptionGroup holding the SDK's MCPError
        anyio.run(refused)
    assert caught.group_contains(MCPError) if isinstance(caught.value, BaseExceptionGroup) else (
        isinstance(caught.value, MCPError))  # fmt: skip
    # the ask tool's answers are counted with /v1/qa's
    question = {"question": "Which drugs treat epilepsy?"}
    ask = {**call, "method": "tools/call", "params": {"name": "ask", "arguments": question}}
    assert httpx.post(f"{served}/mcp", json=ask, headers=keyed, timeout=120).json()["result"]["isError"] is False
    metrics = httpx.get(f"{served}/metrics", headers={"X-API-Key": KEY}).text
    assert 'route="/mcp"' in metrics
    answered = re.search(r'medkg_qa_answers_total\{abstained="false",mode="extractive"\} ([0-9.]+)', metrics)
    assert answered and float(answered.group(1)) >= 1 and "medkg_qa_stage_duration_seconds_count" in metrics
