"""The fake OpenAI-compatible server (tests/llm_server.py) against the real ``openai`` client, streaming included."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator

import httpx
import openai
import pytest

from tests.support.llm_server import FakeLLMServer, Reply

MESSAGES = [{"role": "user", "content": "Say something."}]
TEXT = "Metformin lowers fasting glucose in type 2 diabetes."


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
def client(llm: FakeLLMServer) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=llm.base_url, api_key="none", max_retries=0, timeout=10.0) as c:
        yield c


def stream(client: openai.OpenAI, **kwargs: object) -> list[openai.types.chat.ChatCompletionChunk]:
    return list(client.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True, **kwargs))


def content_of(chunks: list[openai.types.chat.ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_non_streamed_completion(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(TEXT, {"answer": 42})
    first = client.chat.completions.create(model="fake-model", messages=MESSAGES)
    second = client.chat.completions.create(model="fake-model", messages=MESSAGES, stream=False)
    assert first.choices[0].message.content == TEXT
    assert first.choices[0].finish_reason == "stop"
    assert json.loads(second.choices[0].message.content or "") == {"answer": 42}
    assert llm.pending == 0


def test_streamed_content_reassembles_to_the_reply(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(Reply(content=TEXT, finish_reason="length"))
    chunks = stream(client)
    assert content_of(chunks) == TEXT
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.model == "fake-model" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    last = chunks[-1].choices[0]
    assert last.finish_reason == "length" and last.delta.content is None
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    assert llm.requests[-1].body["stream"] is True


@pytest.mark.parametrize("chunk_chars", [1, 5, 8, len(TEXT), 1000])
def test_chunk_count_follows_chunk_chars(llm: FakeLLMServer, client: openai.OpenAI, chunk_chars: int) -> None:
    llm.enqueue(Reply(content=TEXT, chunk_chars=chunk_chars))
    chunks = stream(client)
    pieces = [c.choices[0].delta.content for c in chunks[1:-1]]
    assert len(pieces) == math.ceil(len(TEXT) / chunk_chars)  # plus the role chunk and the finish chunk
    assert all(p and len(p) <= chunk_chars for p in pieces)
    assert "".join(pieces) == TEXT  # type: ignore[arg-type]


def test_default_chunk_size_is_eight(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(TEXT)
    assert len(stream(client)) == 2 + math.ceil(len(TEXT) / 8)


def test_empty_content_streams_only_role_and_finish(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(Reply(content=None))
    chunks = stream(client)
    assert len(chunks) == 2 and content_of(chunks) == ""
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_usage_chunk_when_asked(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(TEXT)
    chunks = stream(client, stream_options={"include_usage": True})
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert content_of(chunks) == TEXT


def test_several_streams_on_one_connection(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    texts = [f"reply number {i}: " + TEXT for i in range(3)]
    llm.enqueue(*texts)
    assert [content_of(stream(client)) for _ in texts] == texts
    llm.enqueue("plain")  # the keep-alive connection is still usable for a non-streamed call
    assert client.chat.completions.create(model="fake-model", messages=MESSAGES).choices[0].message.content == "plain"


def test_wire_format_is_server_sent_events(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply(content="abcdef", chunk_chars=4))
    response = httpx.post(f"{llm.base_url}/chat/completions", json={"model": "m", "messages": [], "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    data = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert [d["choices"][0]["delta"] for d in data] == [
        {"role": "assistant", "content": ""},
        {"content": "abcd"},
        {"content": "ef"},
        {},
    ]


def test_error_reply_with_stream_raises_api_status_error(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    llm.enqueue(Reply.error(503, "overloaded"))
    with pytest.raises(openai.APIStatusError) as info:
        stream(client)
    assert info.value.status_code == 503
    assert "overloaded" in str(info.value)
    assert llm.pending == 0


def test_raw_body_is_sent_as_is_even_when_streaming(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply.raw("not json at all"))
    response = httpx.post(f"{llm.base_url}/chat/completions", json={"model": "m", "messages": [], "stream": True})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.text == "not json at all"


def test_chunk_delay_spreads_the_stream_out(llm: FakeLLMServer, client: openai.OpenAI) -> None:
    delay = 0.05
    llm.enqueue(Reply(content="x" * 16, chunk_chars=4, chunk_delay_s=delay))  # 6 chunks, so 5 pauses
    start = time.monotonic()
    chunks = client.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True)
    arrivals = [time.monotonic() - start for _ in chunks]
    assert len(arrivals) == 6
    assert arrivals[-1] >= 5 * delay
    assert arrivals[-1] - arrivals[0] >= 4 * delay  # the chunks arrive one by one, not all at the end


def test_closing_the_server_ends_a_slow_stream(llm: FakeLLMServer) -> None:
    llm.enqueue(Reply(content="x" * 40, chunk_chars=1, chunk_delay_s=10.0))
    c = openai.OpenAI(base_url=llm.base_url, api_key="none", max_retries=0, timeout=5.0)
    s = c.chat.completions.create(model="fake-model", messages=MESSAGES, stream=True)
    assert next(iter(s)).choices[0].delta.role == "assistant"
    start = time.monotonic()
    llm.close()
    with pytest.raises((openai.APIError, httpx.HTTPError)):
        list(s)
    assert time.monotonic() - start < 4.0
    c.close()
