"""The one exception for input that cannot be used as given: a request's, an uploaded file's, a data
file's, a command line's. It is the caller's to fix, so the API answers it 422 with its message and the
CLI prints it in one line. Any other ``ValueError`` reaching the API is a server bug: 500, logged, its
message (which may name internals) not shown."""

from __future__ import annotations

__all__ = ["InvalidInput"]


class InvalidInput(ValueError):
    """Input that cannot be used as given; the message says what to change."""
