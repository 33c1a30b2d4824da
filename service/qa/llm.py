"""The LLM answer path: the configured OpenAI-compatible server (:class:`~kg.llm.ChatClient`) asked for a
JSON-schema answer over the evidence bundle; its citations are checked against the bundle. Failures
are :class:`~kg.llm.LLMError` (504: no answer in time; 502: an error or a reply off the schema)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from kg.llm import ChatClient, Completion, LLMError, json_schema_format, parse_json_object
from kg.retrieval.evidence import EvidenceBundle
from service.qa.answer import Answer
from service.qa.citations import check_citations
from service.qa.prompts import ANSWER_SCHEMA, answer_messages

__all__ = ["LLMAnswerer", "LLMError", "AnswerTextStream", "Completion", "parse_json_object"]


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


class LLMAnswerer:
    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 60.0, max_retries: int = 2
    ) -> None:
        self.chat = ChatClient(base_url, model, api_key=api_key, timeout_s=timeout_s, max_retries=max_retries)
        self.response_format: dict[str, Any] = json_schema_format("cited_answer", ANSWER_SCHEMA)

    @property
    def model(self) -> str:
        return self.chat.model

    def complete(
        self, messages: list[dict[str, str]], name: str = "reply", schema: dict[str, Any] | None = None
    ) -> Completion:
        """One completion for other tasks than answering (reports, benchmarks): its text and token
        usage; with ``schema`` the server is asked for JSON matching it. Failures are LLMError."""
        return self.chat.complete(messages, json_schema_format(name, schema) if schema is not None else None)

    def complete_json(self, messages: list[dict[str, str]], name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """One JSON-schema completion, parsed."""
        return self.chat.complete_json(messages, name, schema)

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

    def answer(
        self, question: str, bundle: EvidenceBundle, conversation: str = "", unknown: Sequence[str] = ()
    ) -> Answer:
        """``unknown``: names of the question medkg knows nothing about, which the prompt says it must not
        answer about."""
        messages = answer_messages(question, bundle.items, conversation, unknown)
        return self.parse(self.chat.complete(messages, self.response_format).content, bundle)

    def stream(
        self, question: str, bundle: EvidenceBundle, conversation: str = "", unknown: Sequence[str] = ()
    ) -> Iterator[str | Answer]:
        """Pieces of the answer text as the model writes them, then the checked :class:`Answer`
        (whose text, with unknown citations removed, replaces what was streamed)."""
        extractor = AnswerTextStream()
        messages = answer_messages(question, bundle.items, conversation, unknown)
        for piece in self.chat.stream(messages, self.response_format):
            text = extractor.feed(piece)
            if text:
                yield text
        yield self.parse(extractor.buffer, bundle)
