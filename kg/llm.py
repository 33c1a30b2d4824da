"""The one client of OpenAI-compatible chat servers (``openai`` client, ``base_url``) that every LLM call
goes through: its failures are :class:`LLMError` with the HTTP status the API answers, and
:func:`parse_json_object` / :func:`find_json_object` read the JSON objects models reply with."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "ChatClient",
    "Completion",
    "LLMError",
    "find_json_object",
    "json_schema_format",
    "parse_json_object",
    "reply_content",
    "unfenced",
    "without_credentials",
]

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)  # a fence around the whole reply
_FENCED = re.compile(r"```(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)  # fenced blocks anywhere in it


class LLMError(RuntimeError):
    """An LLM call gave no usable reply. ``status`` is the HTTP status the API answers with: 504 when the
    server does not answer in time (after the client's retries), 502 when it answers with an error or
    with something unusable."""

    def __init__(self, message: str, status: int = 502) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Completion:
    content: str
    prompt_tokens: int | None
    completion_tokens: int | None


# ---- reading a reply ---------------------------------------------------------------------------


def unfenced(content: str) -> str:
    """The reply without a ```json fence around the whole of it (the reply as it is when there is none)."""
    fenced = _FENCE.match(content.strip())
    return fenced.group(1) if fenced else content


def parse_json_object(content: str) -> dict[str, Any]:
    """The JSON object of a reply (a ```json fence around it is tolerated), or LLMError."""
    try:
        data = json.loads(unfenced(content))
    except ValueError as exc:
        raise LLMError(f"the LLM reply is not JSON: {content[:200]!r}") from exc
    if not isinstance(data, dict):
        raise LLMError("the LLM reply is not a JSON object")
    return data


def find_json_object(text: str, prefer: Sequence[str] = ()) -> dict[str, Any] | None:
    """A JSON object anywhere in a reply: the whole reply, else its last fenced block, else its last
    balanced ``{...}`` that parses (one with a key in ``prefer`` first), else None. Reads a JSON answer
    after a preamble ("Here is the JSON: {...}") as JSON."""
    try:
        return parse_json_object(text)
    except LLMError:
        pass
    for block in reversed(_FENCED.findall(text)):
        try:
            return parse_json_object(block)
        except LLMError:
            continue
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    i = text.find("{")
    while i >= 0:
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found.append(value)
        i = text.find("{", end)
    preferred = [d for d in found if any(key in d for key in prefer)]
    return (preferred or found or [None])[-1]


def reply_content(completion: Any) -> str:
    """The text of a completion's first choice, or LLMError (no choice, cut off, refused, empty)."""
    if not completion.choices:
        raise LLMError("the LLM returned no choices")
    choice = completion.choices[0]
    if choice.finish_reason == "length":
        raise LLMError("the LLM reply was cut off at the token limit")
    if not choice.message.content:
        refusal = getattr(choice.message, "refusal", None)
        raise LLMError(f"the LLM refused: {refusal}" if refusal else "the LLM reply was empty")
    return choice.message.content


# ---- asking ------------------------------------------------------------------------------------


def json_schema_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The ``response_format`` that asks for JSON matching ``schema`` (OpenAI strict mode)."""
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}


def without_credentials(url: str) -> str:
    """``url`` without its user and password (``https://user:secret@host/v1`` -> ``https://host/v1``):
    an error message reaches API clients and logs."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"[{host}]" if ":" in host else host
    return urlunsplit(parts._replace(netloc=netloc + (f":{parts.port}" if parts.port else "")))


class ChatClient:
    """Chat completions (temperature 0) of one model on an OpenAI-compatible server."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 2
    ) -> None:
        import openai  # here: 0.6 s to import, which commands that call no LLM do not pay

        self.model = model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        # The client retries timeouts, connection errors, 408/409/429 and 5xx with backoff.
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout_s, max_retries=max_retries
        )

    def create(
        self, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None, stream: bool = False
    ) -> Any:
        """The server's completion (with ``stream``, its chunks); ``response_format`` None asks for none.
        Failures are LLMError."""
        import openai

        try:
            return self.client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                temperature=0,
                response_format=openai.NOT_GIVEN if response_format is None else response_format,  # type: ignore[arg-type]
                stream=stream,
            )
        except openai.APITimeoutError as exc:
            raise LLMError(
                f"the LLM did not answer within {self.timeout_s:g} s ({self.max_retries} retries)", 504
            ) from exc
        except openai.APIStatusError as exc:
            raise LLMError(f"the LLM server answered HTTP {exc.status_code}: {exc.message}") from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"cannot reach the LLM server at {without_credentials(str(self.client.base_url))}") from exc
        except (openai.OpenAIError, ValueError) as exc:  # e.g. a response body that is not JSON
            raise LLMError(f"unreadable response from the LLM server: {exc}") from exc

    def complete(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None) -> Completion:
        """One completion: its text (checked by :func:`reply_content`) and token usage."""
        completion = self.create(messages, response_format)
        usage = getattr(completion, "usage", None)
        return Completion(
            content=reply_content(completion),
            prompt_tokens=getattr(usage, "prompt_tokens", None) or None,
            completion_tokens=getattr(usage, "completion_tokens", None) or None,
        )

    def complete_json(self, messages: list[dict[str, str]], name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """One JSON-schema completion, parsed (:func:`parse_json_object`)."""
        return parse_json_object(self.complete(messages, json_schema_format(name, schema)).content)

    def stream(self, messages: list[dict[str, str]], response_format: dict[str, Any] | None = None) -> Iterator[str]:
        """The reply's text in pieces as the model writes it. Failures are LLMError."""
        import openai

        chunks = self.create(messages, response_format, stream=True)
        try:
            for chunk in chunks:
                if chunk.choices and (piece := chunk.choices[0].delta.content):
                    yield piece
        except openai.APITimeoutError as exc:
            raise LLMError(f"the LLM stream stalled for more than {self.timeout_s:g} s", 504) from exc
        except (openai.OpenAIError, ValueError) as exc:
            raise LLMError(f"the LLM stream broke off: {exc}") from exc
