"""Citation checking: every id an answer cites must be in its evidence bundle; the others are removed
from the text and the cited list, and reported. Also the order in which an answer's citations are
read (what the LLM is handed first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kg.retrieval.evidence import fact_of_citation

__all__ = ["CheckedCitations", "check_citations", "inline_ids", "reading_order"]

_BRACKET = re.compile(r"(\s?)\[([^\[\]]{1,2000})\]")
_TOKEN = re.compile(r"(?<![\w.:#-])[A-Za-z][A-Za-z0-9_.]*:[^\s;,\[\]]+")
_SPACED = re.compile(r"\b(PMID|PMC|DOI|KG|IMG):\s+(?=\S)", re.IGNORECASE)  # "PMID: 123"
_TRAILING = ".,;:)!?"
_RANGE = re.compile(r"^(?P<doc>.+#s)(?P<first>\d+)-s?(?P<last>\d+)$")
_MAX_RANGE = 50
_REMOVED = "\x00"  # where a bracket was removed, until the whitespace around it is tidied


@dataclass(frozen=True)
class CheckedCitations:
    text: str
    cited: list[str]  # kept ids, in order of first appearance (text first, then the model's list)
    dropped: list[str]  # ids not in the bundle, removed


def _tokens(inner: str) -> list[str]:
    """The id-like tokens of a bracket's text or a listed entry, in order."""
    tokens = (t.rstrip(_TRAILING) for t in _TOKEN.findall(_SPACED.sub(r"\1:", inner)))
    return [t for t in tokens if ":" in t and not t.endswith(":")]


def inline_ids(text: str) -> list[str]:
    """The id-like tokens cited in ``text``, in order."""
    return [t for m in _BRACKET.finditer(text) for t in _tokens(m.group(2))]


_POINT_END = re.compile(r"\[[^\[\]]*\]|[;.](?=\s|$)")


def reading_order(text: str, cited: Iterable[str] = ()) -> list[str]:
    """The ids an answer cites, the first of each point it makes (a clause or sentence: a disease's
    drugs, its subtypes) before the second of any: every point's strongest evidence comes first. Then
    the ``cited`` ids the text does not show."""
    points: list[list[str]] = [[]]
    for m in _POINT_END.finditer(text):
        if m.group(0).startswith("["):
            points[-1] += _tokens(m.group(0)[1:-1])
        elif points[-1]:
            points.append([])
    order = [p[n] for n in range(max(map(len, points))) for p in points if n < len(p)]
    return _bridges_first(list(dict.fromkeys([*order, *cited])))


_BRIDGES = frozenset({"IS_A", "SAME_AS"})


def _bridges_first(order: list[str]) -> list[str]:
    """Each cited fact about an entity that a cited ``IS_A``/``SAME_AS`` fact introduces ("gout is an
    arthritis") comes after that fact: what is said of a subtype rests on it being one."""
    facts = {cid: fact for cid in order if (fact := fact_of_citation(cid))}
    bridge_of: dict[str, str] = {}
    for cid, (subject, rel_type, _) in facts.items():
        if rel_type in _BRIDGES:
            bridge_of.setdefault(subject, cid)
    out: list[str] = []
    for cid in order:
        if cid in facts and facts[cid][1] not in _BRIDGES:
            out += [b for end in (facts[cid][0], facts[cid][2]) if (b := bridge_of.get(end)) and b not in out]
        if cid not in out:
            out.append(cid)
    return out


def _expand(token: str, allowed: dict[str, str]) -> list[str]:
    """The bundle's id that ``token`` names (any case); a sentence range: the bundle's ids in it."""
    if (held := allowed.get(token.casefold())) is not None:
        return [held]
    if (m := _RANGE.match(token)) and 0 <= int(m["last"]) - int(m["first"]) < _MAX_RANGE:
        ids = (allowed.get(f"{m['doc']}{n}".casefold()) for n in range(int(m["first"]), int(m["last"]) + 1))
        return [i for i in ids if i is not None]
    return []


def check_citations(text: str, listed: Iterable[str], allowed: set[str]) -> CheckedCitations:
    """Keep the cited ids (inline brackets of ``text``, then ``listed``) that ``allowed`` holds.

    A bracket is a citation as soon as it holds one id-like token, whatever else it holds ("[see
    PMID:1#s2]"), so no unchecked id hides in it: it is rewritten with its allowed ids, in order, once
    each. Trailing punctuation and case are not part of an id, "PMID: 123" is "PMID:123", and a range
    "PMID:1#s2-s4" stands for the bundle's ids in it. Brackets with no id-like token ("[sic]") and
    everything outside a removed bracket are left alone."""
    by_key = {i.casefold(): i for i in allowed}
    dropped: list[str] = []
    cited: list[str] = []

    def keep(token: str) -> list[str]:
        ids = _expand(token, by_key)
        if not ids and token not in dropped:
            dropped.append(token)
        for i in ids:
            if i not in cited:
                cited.append(i)
        return ids

    def fix(m: re.Match[str]) -> str:
        lead, tokens = m.group(1), _tokens(m.group(2))
        if not tokens:
            return m.group(0)
        kept = list(dict.fromkeys(i for t in tokens for i in keep(t)))
        if kept:
            return f"{lead}[{'; '.join(kept)}]"
        return ("\n" if lead == "\n" else "") + _REMOVED

    clean = _BRACKET.sub(fix, text)
    for entry in listed:
        for token in _tokens(entry):
            keep(token)
    clean = re.sub(rf"[ \t]*{_REMOVED}+(?=[.,;:!?)]|$)", "", clean)  # "text [bad]." -> "text."
    clean = re.sub(rf"(^|\n){_REMOVED}+[ \t]*", r"\1", clean)  # a line that began with one
    clean = clean.replace(_REMOVED, "").strip()
    return CheckedCitations(text=clean, cited=cited, dropped=dropped)
