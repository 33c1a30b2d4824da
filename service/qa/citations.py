"""Citation checking: every id an answer cites must be in its evidence bundle.

Inline citations are square brackets holding one or more ids separated by ``;`` or ``,``
("[PMID:1#s2; KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166]"). An id the bundle does not hold is
removed from the text (an emptied bracket goes with it) and from the cited list, and reported.
Brackets that hold no id-like token ("[sic]") are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["CheckedCitations", "check_citations", "inline_ids"]

_BRACKET = re.compile(r"\s?\[([^\[\]]{1,2000})\]")
_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*:\S+$")


@dataclass(frozen=True)
class CheckedCitations:
    text: str
    cited: list[str]  # kept ids, in order of first appearance (text first, then the model's list)
    dropped: list[str]  # ids not in the bundle, removed


def _split(inner: str) -> list[str]:
    return [p.strip() for p in re.split(r"[;,]", inner) if p.strip()]


def inline_ids(text: str) -> list[str]:
    """The id-like tokens cited in ``text``, in order."""
    found: list[str] = []
    for m in _BRACKET.finditer(text):
        found += [p for p in _split(m.group(1)) if _ID.match(p)]
    return found


def check_citations(text: str, listed: Iterable[str], allowed: set[str]) -> CheckedCitations:
    dropped: list[str] = []
    cited: list[str] = []

    def keep(token: str) -> bool:
        if token in allowed:
            if token not in cited:
                cited.append(token)
            return True
        if token not in dropped:
            dropped.append(token)
        return False

    def fix(m: re.Match[str]) -> str:
        parts = _split(m.group(1))
        if not any(_ID.match(p) for p in parts):
            return m.group(0)
        kept = [p for p in parts if not _ID.match(p) or keep(p)]
        if not kept:
            return ""
        lead = " " if m.group(0).startswith((" ", "\n", "\t")) else ""
        return f"{lead}[{'; '.join(kept)}]"

    clean = _BRACKET.sub(fix, text)
    for token in listed:
        token = token.strip().strip("[]")
        if token:
            keep(token)
    clean = re.sub(r"\s+([.,;:])", r"\1", clean).strip()
    return CheckedCitations(text=clean, cited=cited, dropped=dropped)
