"""The one exception for input that cannot be used as given: a request's, an uploaded file's, a data
file's, a command line's. It is the caller's to fix, so the API answers it 422 with its message and the
CLI prints it in one line. Any other ``ValueError`` reaching the API is a server bug: 500, logged, its
message (which may name internals) not shown. ``NotConfigured`` is a request this server is not set up for
(mode "llm" without an LLM): 409, the server's state and not the request's form is what to change."""

from __future__ import annotations

__all__ = ["InvalidInput", "NotConfigured"]


class InvalidInput(ValueError):
    """Input that cannot be used as given; the message says what to change."""


class NotConfigured(InvalidInput):
    """A request this server's configuration cannot serve (an LLM mode without an LLM); the message says
    which setting it needs."""
