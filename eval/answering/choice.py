"""Reading a model's reply as one of a question's options: a JSON ``{"answer": ...}`` where there is one
(after a preamble or in a fenced block too), else free text ("The answer is (C)", "**C**", an option's
text named alone and not negated). What cannot be read is None, never a guess."""

from __future__ import annotations

import re
from typing import Any

from kg.llm import find_json_object
from kg.negation import negated_in

__all__ = ["parse_choice"]

_DECOR = " \t\n*_`'\"()[]{}:.,;!"


def _norm_text(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())


def _normalize_value(value: Any, options: dict[str, str], kind: str) -> str | None:
    """An answer field's value (a key, "(C)", "C. text", an option's text) as an option key."""
    if isinstance(value, bool) and kind == "truefalse":
        return "True" if value else "False"
    if not isinstance(value, str | int | float) or isinstance(value, bool):
        return None
    text = str(value).strip()
    bare = text.strip(_DECOR)
    if bare in options:
        return bare
    folded = {k.casefold(): k for k in options}
    if bare.casefold() in folded and (kind != "mcq" or len(bare) == 1):
        return folded[bare.casefold()]
    if kind == "mcq":
        m = re.match(r"^[\s*(\[]*([A-Z])(?:[.):\]]|\*\*)", text)
        if m and m.group(1) in options:
            return m.group(1)
    by_text = [k for k, t in options.items() if _norm_text(t) == _norm_text(text)]
    if len(by_text) == 1:
        return by_text[0]
    return None


def _key_words(options: dict[str, str]) -> str:
    return "|".join(re.escape(k) for k in sorted(options, key=len, reverse=True))


# A negation before a key word in its sentence ("not true", "isn't true", "cannot say yes").
_NEGATION_BEFORE = re.compile(r"(?i)\b(?:not|never|cannot|neither|nor)\b|n't\b")
# An option's text negated in its sentence: a cue before it ("not", "no", "unlikely", "rule out") or a
# clause that goes on to negate it ("... is unlikely", "... can be excluded").
_OPTION_CUE_BEFORE = re.compile(
    r"(?i)\b(?:not|no|never|cannot|unlikely|improbable|excludes?|excluded|excluding|against|"
    r"rule[sd]?\s+out|ruling\s+out|r/o|incorrect|wrong|rather than|instead of)\b|n't\b"
)
_OPTION_CUE_AFTER = re.compile(
    r"(?i)^[^.!?\n;]*?\b(?:not|unlikely|improbable|excluded|ruled\s+out|incorrect|wrong|less likely)\b|"
    r"^[^.!?\n;]*?n't\b"
)


def _sentence_before(text: str, pos: int) -> str:
    return re.split(r"[.!?\n;]", text[:pos])[-1]


def _negated_before(text: str, pos: int) -> bool:
    return bool(_NEGATION_BEFORE.search(_sentence_before(text, pos)))


def _option_negated(text: str, option: str) -> bool:
    """Whether an option's text, where it stands in ``text``, is negated in its sentence (any occurrence)."""
    words = _norm_text(option).split()
    pattern = re.compile(r"(?i)(?<!\w)" + r"\W+".join(re.escape(w) for w in words) + r"(?!\w)")
    for m in pattern.finditer(text):
        if (
            negated_in(text, m.start(), m.end())
            or _OPTION_CUE_BEFORE.search(_sentence_before(text, m.start()))
            or _OPTION_CUE_AFTER.search(text[m.end() :])
        ):
            return True
    return False


def _free_text(text: str, options: dict[str, str], kind: str) -> str | None:
    keys = _key_words(options)
    if kind == "mcq":
        # "the answer is (C)", "Answer: C", "correct option is **C**": the first statement of the answer
        # (not "option B would be unlikely" or "answer A is a distractor", which discuss other options)
        said = re.findall(
            rf"(?i:answer|(?:correct|best|right)\s+(?:option|choice))\s*(?i:is|:|=|would be|should be|will be)"
            rf"\s*(?i:option\s*|choice\s*)?[\s*(\[]*({keys})(?![\w'-])",
            text,
        )
        if said:
            return said[0]
        m = re.match(rf"^[\s*(\[]*({keys})[\s*)\].:]*$", text)  # "C", "C.", "**C**", "(C)"
        if m:
            return m.group(1)
        m = re.match(rf"^[\s*(\[]*({keys})(?:[.):\]]|\*\*)", text)  # "C. Hypoglycemia because ..."
        if m:
            return m.group(1)
        bold = set(re.findall(rf"\*\*\(?({keys})\)?[.):]?\*\*", text))
        if len(bold) == 1:
            return bold.pop()
        # an option's text verbatim (and no other option's, unless inside the found one), not negated
        # where it stands ("not ethanol intoxication", "ethanol intoxication is unlikely")
        norm = f" {_norm_text(text)} "
        found = [k for k, t in options.items() if _norm_text(t) and f" {_norm_text(t)} " in norm]
        found = [
            k for k in found if not any(k != o and _norm_text(options[k]) in _norm_text(options[o]) for o in found)
        ]
        if len(found) != 1 or _option_negated(text, options[found[0]]):
            return None
        return found[0]
    # a key word negated in its sentence ("This statement is not true.", "Not true.", "It is not possible
    # to say yes") is no answer: neither it nor its opposite
    said = re.search(rf"(?i)answer\s*(?:is|:|=)\s*[\s*\"'(\[]*({keys})\b", text)
    if said:
        return None if _negated_before(text, said.start(1)) else _normalize_value(said.group(1), options, kind)
    # the first sentence opens or closes with the answer, and names no other ("Yes, ...", "The statement
    # is true."; not "Yes and no", nor "The study found no difference.")
    first = re.split(r"[.!?\n]", text, maxsplit=1)[0]
    named = {w.casefold() for w in re.findall(rf"(?i)\b({keys})\b", first)}
    m = re.match(rf"(?i)^[\s*\"'(\[]*({keys})\b", first) or re.search(rf"(?i)\b({keys})[\s*\"')\]]*$", first)
    if m and len(named) == 1 and not _negated_before(first, m.start(1)):
        return _normalize_value(m.group(1), options, kind)
    return None


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_ANSWER_FIELDS = ("answer", "answer_choice", "choice", "option")


def parse_choice(text: str | None, options: dict[str, str], kind: str) -> tuple[str | None, str | None]:
    """(option key or None, explanation) of a reply: JSON ``{"answer": ...}`` first (after any
    ``<think>...</think>`` block; the whole reply, a fenced block or an object after a preamble), else
    free text."""
    if not text or not text.strip():
        return None, None
    text = _THINK.sub(" ", text)
    if "</think>" in text.casefold():  # a reasoning block whose opening tag was cut off
        text = text[text.casefold().rindex("</think>") + len("</think>") :]
    if not text.strip():
        return None, None
    data = find_json_object(text, prefer=_ANSWER_FIELDS)
    if data is not None:
        explanation = data.get("explanation")
        explanation = explanation if isinstance(explanation, str) else None
        for field in _ANSWER_FIELDS:
            if field in data:
                key = _normalize_value(data[field], options, kind)
                if key is None and isinstance(data[field], str):
                    key = _free_text(data[field], options, kind)
                return key, explanation
        return None, explanation
    return _free_text(text.strip(), options, kind), None
