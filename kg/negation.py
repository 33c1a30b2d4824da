"""Whether a mention in clinical text is negated: a small NegEx-style rule (Chapman et al. 2001). Radiology
reports use it for their MENTIONS evidence ("No pneumothorax."); the differential and QA count a negated
phenotype in a question or case text as excluded ("seizures and microcephaly, no hypotonia").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["by_polarity", "negated", "negated_in", "negated_mentions"]

# Not "absent", "lack of" or "never" before a mention: in a phenotype description they state a finding
# ("absent thumbs", "lack of speech", "never walked") and would negate the rest of the sentence.
_CUES = r"no|not|without|negative for|free of|absence of|clear of|neither|nor|resolution of|denies|denied"
_EITHER_WAY = "ruled out"  # a cue where it opens its clause, a clause's own negation after its mention
_CUE = re.compile(r"\b(?:" + _CUES + "|" + _EITHER_WAY + r")\b", re.IGNORECASE)
# Phrases with a cue word that negate nothing ("no change in cardiomegaly" states cardiomegaly).
_PSEUDO = re.compile(
    r"\b(?:no (?:(?:significant|interval|appreciable|new|further)\s+)*"
    r"(?:change|increase|decrease|worsening|improvement)s?"
    r"|not (?:only|necessarily|changed|significantly changed|otherwise specified)"
    r"|not (?:un(?:common|usual|likely|expected)|infrequent|rare)(?:ly)?)\b",  # double negatives
    re.IGNORECASE,
)
# What a clause says after a mention to negate it ("... was not observed"): it also ends the scope of
# its own "not" ("hypotonia was not observed, and the child has seizures").
_ABSENT_AFTER = r"absent|not (?:present|observed|seen|noted|found|reported|detected)|ruled out|excluded"
# After a colon, a value that says its heading is absent ("Seizures: absent", "Fever: none.", "Cough: no,
# ..."): a value only where its clause ends after it ("Respiratory: no cough" opens a scope).
_ABSENT_VALUE = r":\s*(?:no|none|nil|negative|denie[sd]|" + _ABSENT_AFTER + r")\s*"
# A cue's scope ends at these (the last one before a mention starts the mention's scope). "with" ends
# it ("no fever, with seizures"); "without" is a word of its own and does not. So does a question ("no
# fever, rule out pneumonia").
_CONJUNCTIONS = (
    r"[;:]|\b(?:but|however|although|though|except|aside from|apart from|yet|which|with|rule out|r/o"
    r"|there (?:is|are|has been|have been))\b"
)
# So does a verb that states something new ("denies fever and reports headache", "no fever, developed
# seizures"), a clause's own negation after its mention, and a value after a colon ("Fever: no, cough").
_SCOPE_END = re.compile(
    _ABSENT_VALUE + r"(?=[,;.!?])|" + _CONJUNCTIONS
    + r"|\b(?:has|had|develop(?:s|ed)|reports?|reported|presents?|presented|shows?|showed|exhibit(?:s|ed)?|"
    + _ABSENT_AFTER + r")\b",
    re.IGNORECASE,
)  # fmt: skip
# Where a scope end does not end the scope: a colon right after a cue ("Denies: fever"), and "ruled out"
# where it opens its clause (a subject aside) or is "ruled out for": a cue there, not the end of a clause.
_CUE_BEFORE = re.compile(r"\b(?:" + _CUES + "|" + _EITHER_WAY + r")\s*$", re.IGNORECASE)
_CLAUSE_OPENS = re.compile(r"(?:^|[,;:(])\s*(?:(?:we|i|they|he|she)\s+(?:(?:have|has|had)\s+)?)?$", re.IGNORECASE)
_FOR = re.compile(r"\s+for\b", re.IGNORECASE)
# A cue that negates only the concept right after it: "absence of the corpus callosum, seizures"
# states the seizures (and in a phenotype text "absence of" often names a finding).
_NARROW_CUE = re.compile(r"\babsence of\b", re.IGNORECASE)
_LIST_GAP = re.compile(r",|\b(?:and|or)\b", re.IGNORECASE)
_PARENTHESES = re.compile(r"\([^()]*\)")  # closed before the mention: "hypotonia (not seizures) and"
# After the mention, in its clause (up to a comma or a scope's end): "... was absent", "... were not
# observed", "... ruled out"; with the other mentions blanked, "seizures and [hypotonia] were absent".
_CLAUSE_END = re.compile(r",|" + _CONJUNCTIONS, re.IGNORECASE)
_POST = re.compile(
    r"^[^\w(]*(?:(?:and|or|nor)\W+)?(?:(?:was|were|is|are|has been|have been|had been)\s+)?(?:"
    + _ABSENT_AFTER
    + r")\b",
    re.IGNORECASE,
)
_POST_VALUE = re.compile(r"^[^\w:]*(?:(?:and|or)[^\w:]+)?" + _ABSENT_VALUE + r"(?:[,;.!?]|$)", re.IGNORECASE)
# A line break ends a sentence unless the next line goes on in lower case (a wrapped line); a blank
# line always ends one.
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n(?![^\S\n]*[a-z])")
# What stands for another mention in a text read around one (neither a word nor white space: a mention
# before "ruled out", or between a colon's "no" and a comma, still stands there).
_HIDDEN = "\x00"


def negated(before: str, after: str = "") -> bool:
    """Whether a mention whose sentence reads ``before`` up to it (and ``after`` from its end) is
    negated: a cue ("no", "without", "denies" ...) stands before it with nothing that ends the cue's scope
    in between ("but", "with", a semicolon, a verb stating something new; a colon unless right after a
    cue), or its clause goes on to say it is absent ("seizures were absent", "Fever: none"). Pseudo-
    negations ("no change in") and cues in parentheses closed before it count for nothing; "absence of"
    negates only the concept right after it; "ruled out" negates either way, as in NegEx, while "rule
    out" and "r/o" ask a question and end a scope. A "not" after another mention of the sentence
    qualifies that mention: its scope ends at the next comma."""
    scope = before
    for end in _SCOPE_END.finditer(before):
        if end.group().lower() == _EITHER_WAY:
            opens = _CLAUSE_OPENS.search(before, 0, end.start()) or _FOR.match(before, end.end())
            scope = before[end.start() if opens else end.end() :]  # from the cue, or after the clause's end
        elif not (end.group() == ":" and _CUE_BEFORE.search(before, 0, end.start())):
            scope = before[end.end() :]
    clause = after[: m.start()] if (m := _CLAUSE_END.search(after)) else after
    if _POST.match(clause) or _POST_VALUE.match(after):
        return True
    scope = _PSEUDO.sub(" ", _PARENTHESES.sub(" ", scope))
    cues = list(_CUE.finditer(scope))
    if not cues:
        return False
    last = cues[-1]
    if last.group(0).lower() == "not" and _HIDDEN in scope[: last.start()] and "," in scope[last.end() :]:
        return False  # a "not" that qualifies a stated mention ("seizures that are not controlled, and ...")
    return not (_NARROW_CUE.fullmatch(last.group(0)) and _LIST_GAP.search(scope, last.end()))


def negated_in(text: str, start: int, end: int) -> bool:
    """Whether the mention at ``text[start:end]`` is negated within its sentence."""
    return _negated_in(text, text, start, end)


def _negated_in(text: str, read: str, start: int, end: int) -> bool:
    """Whether the mention at ``text[start:end]`` is negated, its sentence found in ``text`` and read in
    ``read`` (the same text with other mentions hidden)."""
    sentence_start = 0
    for m in _SENTENCE_END.finditer(text):  # the whole text: a line break looks at the next line
        if m.end() > start:
            break
        sentence_start = m.end()
    following = _SENTENCE_END.search(text, end)
    return negated(read[sentence_start:start], read[end : following.start() if following else len(text)])


def negated_mentions(text: str, spans: list[tuple[int, int]]) -> list[bool]:
    """For each mention ``(start, end)`` of ``text``, whether it is negated, reading the text with the
    other mentions (those that do not overlap it) blanked out: a cue or a scope's end inside another
    concept's own words counts for nothing. Sentences are those of the text itself."""
    text = text.replace(_HIDDEN, " ")  # the text's own NULs are no hidden mention

    def blanked(keep: tuple[int, int] | None) -> str:
        chars = list(text)
        for s, e in spans:
            if keep is None or e <= keep[0] or s >= keep[1]:
                chars[s:e] = _HIDDEN * (e - s)
        return "".join(chars)

    every = blanked(None)  # a mention's own words are never read: one text serves all but overlapping ones
    out = []
    for i, (start, end) in enumerate(spans):
        overlapped = any(s < end and e > start for j, (s, e) in enumerate(spans) if j != i)
        out.append(_negated_in(text, blanked((start, end)) if overlapped else every, start, end))
    return out


def by_polarity(found: Iterable[tuple[str, bool]]) -> tuple[list[str], list[str]]:
    """``(id, negated)`` pairs as the ids stated and the ids negated, each once in first-seen order; an id
    both stated and negated ("seizures ... no seizures since") counts as stated."""
    stated: dict[str, None] = {}
    negated: dict[str, None] = {}
    for i, negative in found:
        (negated if negative else stated)[i] = None
    return list(stated), [i for i in negated if i not in stated]
