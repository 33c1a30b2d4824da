"""Field types whose validation is exactly their JSON Schema's, for bodies parsed strictly (``strict=True``:
``0`` is not ``false``, ``"3"`` is not ``3``): ``WholeNumber`` is an integer as JSON Schema has it, so ``3.0``
(a number with no fractional part) is ``3`` while ``3.5`` and ``"3"`` are refused. ``whole_number(ge, le)`` is one
with its bounds, for an optional field (bounds given after the validator would not reach the JSON Schema)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field


def integral(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


WholeNumber = Annotated[int, BeforeValidator(integral)]


def whole_number(ge: int, le: int) -> Any:
    """A ``WholeNumber`` between ``ge`` and ``le``."""
    return Annotated[int, Field(ge=ge, le=le), BeforeValidator(integral)]
