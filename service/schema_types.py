"""Field types whose validation is exactly their JSON Schema's, for bodies parsed strictly (``strict=True``:
``0`` is not ``false``, ``"3"`` is not ``3``): ``whole_number(ge, le)`` is an integer as JSON Schema has it, so
``3.0`` (a number with no fractional part) is ``3`` while ``3.5`` and ``"3"`` are refused. Its bounds are given
before the validator: given after it (an outer ``Field``), an optional field's bounds would not reach the schema."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field


def _integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def whole_number(ge: int, le: int) -> Any:
    """An integer between ``ge`` and ``le``, written as JSON Schema allows (``3`` or ``3.0``)."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(_integral)]
