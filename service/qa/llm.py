"""The LLM answer path: any OpenAI-compatible server (``openai`` client, ``base_url``) asked for a
JSON-schema answer over the evidence bundle; its citations are checked against the bundle.

Failures are :class:`LLMError` with the HTTP status the API answers: 504 when the server does not
answer in time (after the client's retries), 502 when it answers with an error or with something
that is not the schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from kg.retrieval.evidence import EvidenceBundle
from service.qa.answer import Answer
from service.qa.citations import check_citations
from service.qa.prompts import ANSWER_SCHEMA, answer_messages

__all__ = ["LLMAnswerer", "LLMError", "AnswerTextStream", "Completion", "parse_json_object"]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class LLMError(RuntimeError):
    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Completion:
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None


def parse_json_object(content: str) -> dict[str, Any]:
    """The JSON object of a reply (a ```json fence around it is tolerated), or LLMError."""
    fenced = _FENCE.match(content.strip())
    try:
        data = json.loads(fenced.group(1) if fenced else content)
    except ValueError as exc:
        raise LLMError(f"the LLM reply is not JSON: {content[:200]!r}") from exc
    if not isinstance(data, dict):
        raise LLMError("the LLM reply is not a JSON object")
    return data


class AnswerTextStream:
    """Pulls the text of the ``"answer"`` field out of a JSON object that arrives in pieces, so the
    answer can be streamed while the model is still writing it."""

    _KEY = re.compile(r'"answer"\s*:\s*"')
    _ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}

    def __init__(self) -> None:
        self.buffer = ""
        self._pos: int | None = None  # where the answer string's next unread character is
        self.done = False

    def feed(self, piece: str) -> str:
        self.buffer += piece
        if self.done:
            return ""
        if self._pos is None:
            m = self._KEY.search(self.buffer)
            if not m:
                return ""
            self._pos = m.end()
        out = []
        buf, i = self.buffer, self._pos
        while i < len(buf):
            ch = buf[i]
            if ch == '"':
                self.done = True
                i += 1
                break
            if ch == "\\":
                if i + 1 >= len(buf):
                    break  # the escape is cut: wait for the next piece
                nxt = buf[i + 1]
                if nxt == "u":
                    if i + 6 > len(buf):
                        break
                    try:
                        code = int(buf[i + 2 : i + 6], 16)
                    except ValueError:
                        out.append(buf[i : i + 6])
                        i += 6
                        continue
                    if 0xD800 <= code <= 0xDBFF:  # a character outside the BMP comes as a surrogate pair
                        if i + 12 > len(buf):
                            break  # wait for the low half
                        low = buf[i + 6 : i + 12]
                        if re.fullmatch(r"\\u[dD][c-fC-F][0-9a-fA-F]{2}", low):
                            out.append(chr(0x10000 + ((code - 0xD800) << 10) + (int(low[2:], 16) - 0xDC00)))
                            i += 12
                            continue
                        code = 0xFFFD  # a high half alone
                    elif 0xDC00 <= code <= 0xDFFF:  # a low half alone
                        code = 0xFFFD
                    out.append(chr(code))
                    i += 6
                    continue
                out.append(self._ESCAPES.get(nxt, nxt))
                i += 2
                continue
            out.append(ch)
            i += 1
        self._pos = i
        return "".join(out)


def _without_credentials(url: str) -> str:
    """``url`` without its user and password (``https://user:secret@host/v1`` -> ``https://host/v1``):
    an error message reaches API clients and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))


class LLMAnswerer:
    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 2
    ) -> None:
        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        # The client retries timeouts, connection errors, 408/409/429 and 5xx with backoff.
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout_s, max_retries=max_retries
        )
        self.response_format: dict[str, Any] = {
            "type": "json_schema",
            "json_schema": {"name": "cited_answer", "strict": True, "schema": ANSWER_SCHEMA},
        }

    def _request(self, question: str, bundle: EvidenceBundle, conversation: str, stream: bool) -> Any:
        return self._create(answer_messages(question, bundle.items, conversation), self.response_format, stream)

    def _create(self, messages: list[dict[str, str]], response_format: dict[str, Any], stream: bool) -> Any:
        try:
            return self.client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0,
                response_format=response_format,  # type: ignore[arg-type]
                stream=stream,
            )
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"the LLM did not answer within {self.timeout_s:g} s ({self.max_retries} retries)", 504
            ) from exc
        except openai.APIStatusError as exc:
            raise LLMError(f"the LLM server answered HTTP {exc.status_code}: {exc.message}") from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach the LLM server at {_without_credentials(str(self.client.base_url))}") from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise LLMError(f"unreadable response from the LLM server: {exc}") from exc

    def complete(
        self, messages: list[dict[str, str]], name: str = "reply", schema: dict[str, Any] | None = None
    ) -> Completion:
        """One completion for other tasks than answering (reports, benchmarks): its text and token
        usage; with ``schema`` the server is asked for JSON matching it. Failures are LLMError."""
        fmt: Any = (
            {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
            if schema is not None
            else openai.NOT_GIVEN
        )
        completion = self._create(messages, fmt, stream=False)
        usage = getattr(completion, "usage", None)
        return Completion(
            content=self._content(completion),
            prompt_tokens=getattr(usage, "prompt_tokens", None) or None,
            completion_tokens=getattr(usage, "completion_tokens", None) or None,
        )

    def complete_json(self, messages: list[dict[str, str]], name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """One JSON-schema completion, parsed."""
        return parse_json_object(self.complete(messages, name, schema).content)

    @staticmethod
    def _content(completion: Any) -> str:
        if not completion.choices:
            raise LLMError("the LLM returned no choices")
        choice = completion.choices[0]
        if choice.finish_reason == "length":
            raise LLMError("the LLM reply was cut off at the token limit")
        if not choice.message.content:
            refusal = getattr(choice.message, "refusal", None)
            raise LLMError(f"the LLM refused: {refusal}" if refusal else "the LLM reply was empty")
        return choice.message.content

    def parse(self, content: str, bundle: EvidenceBundle) -> Answer:
        data = parse_json_object(content)
        if not isinstance(data.get("answer"), str):
            raise LLMError("the LLM reply has no 'answer' text")
        listed = data.get("citations") or []
        if not isinstance(listed, list):
            listed = []
        checked = check_citations(data["answer"], [str(c) for c in listed], bundle.ids())
        try:
            confidence = min(1.0, max(0.0, float(data.get("confidence", 0.0))))
        except (TypeError, ValueError):
            confidence = 0.0
        insufficient = bool(data.get("insufficient_evidence", False)) or not checked.cited
        return Answer(
            text=checked.text,
            cited=checked.cited,
            confidence=round(confidence, 3),
            insufficient_evidence=insufficient,
            mode="llm",
            dropped_citations=checked.dropped,
        )

    def answer(self, question: str, bundle: EvidenceBundle, conversation: str = "") -> Answer:
        return self.parse(self._content(self._request(question, bundle, conversation, stream=False)), bundle)

    def stream(self, question: str, bundle: EvidenceBundle, conversation: str = "") -> Iterator[str | Answer]:
        """Pieces of the answer text as the model writes them, then the checked :class:`Answer`
        (whose text, with unknown citations removed, replaces what was streamed)."""
        chunks = self._request(question, bundle, conversation, stream=True)
        extractor = AnswerTextStream()
        try:
            for chunk in chunks:
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta.content or ""
                text = extractor.feed(delta)
                if text:
                    yield text
        except openai.APITimeoutError as exc:
            raise LLMError(f"the LLM stream stalled for more than {self.timeout_s:g} s", 504) from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise LLMError(f"the LLM stream broke off: {exc}") from exc
        yield self.parse(extractor.buffer, bundle)
