"""Names a question uses that medkg knows nothing about ("zorblaxitol", "quintraxamab", "metfromin"):
a word the linker left unlinked that is no word of everyday English (``wordfreq``'s frequency lists,
shipped in its wheel), is in no name or synonym of the graph, and (the caller's check) occurs in no
indexed passage. The answer then says medkg has no information about it rather than answering with
evidence about something else; near misses in the graph's names are offered as suggestions
(``rapidfuzz``), never substituted."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property

from rapidfuzz import fuzz, process
from spacy.tokens import Doc
from wordfreq import zipf_frequency

from kg.nlp import norm_token

__all__ = ["UnknownName", "UnknownNames", "RARE_ZIPF"]

#: A word rarer than this in English (Zipf scale: 3 is once per million words, 1 once per billion) may
#: be a name. Drug, gene and syndrome names sit below it ("zonisamide" 0, "adalimumab" 1.5,
#: "losartan" 1.6, "FBN1" 0; "metformin" 2.55 is above, and known as a name of the graph), everyday
#: and common clinical words above ("fits" 4.3, "seizure" 3.7, "dose" 4.2, "migraine" 3.3). Clinical
#: words below it ("hypotonia" 1.8, "ectopia" 1.2) are words of the graph's names or of the literature.
RARE_ZIPF = 2.5
#: How close a name of the graph must be to be suggested (rapidfuzz ratio, 0-100).
SUGGEST_CUTOFF = 75.0
_NAME_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")


@dataclass(frozen=True)
class UnknownName:
    """A name in the question (``text`` at ``start``:``end``) that medkg cannot link to anything it
    knows; ``suggestions``: close names of the graph, as ``(entity id, name)``."""

    text: str
    start: int
    end: int
    suggestions: tuple[tuple[str, str], ...] = ()


class UnknownNames:
    """Finds :class:`UnknownName` s in a parsed question, given what the linker linked there."""

    def __init__(self, terms: Iterable[str], term_ids: Callable[[str], tuple[str, ...]]) -> None:
        """``terms``: the lexicon's keys (normalised names and synonyms); ``term_ids``: the ids of a key."""
        self._terms = list(terms)
        self._term_ids = term_ids

    @cached_property
    def _words(self) -> frozenset[str]:
        return frozenset(w.casefold() for t in self._terms for w in t.split(" "))

    @cached_property
    def _single(self) -> list[str]:
        """One-word names (what a one-word unknown name is compared with for suggestions)."""
        return sorted({t for t in self._terms if " " not in t and len(t) >= 4})

    def find(
        self,
        doc: Doc,
        linked: Iterable[tuple[int, int]],
        known: Callable[[str], bool] = lambda _: False,
        names: Callable[[Iterable[str]], dict[str, str]] = lambda _: {},
    ) -> list[UnknownName]:
        """The tokens of ``doc`` outside the ``linked`` character spans that look like names nobody here
        knows; ``known(word)`` may vouch for one (the passage index holds it); ``names(ids)`` gives
        the display names of suggested entities."""
        covered = {c for start, end in linked for c in range(start, end)}
        found: list[UnknownName] = []
        for token in doc:
            word = token.text
            if token.idx in covered or token.is_stop or token.like_num or not _NAME_LIKE.match(word):
                continue
            if len(word) < 4 and not any(ch.isdigit() for ch in word):  # short forms: too ambiguous
                continue
            if self._in_names(word) or zipf_frequency(word, "en") >= RARE_ZIPF or known(word):
                continue
            found.append(UnknownName(word, token.idx, token.idx + len(word), self._suggest(word, names)))
        return found

    def _in_names(self, word: str) -> bool:
        """A word of a name or synonym of the graph, as written or as the lexicon matches it (singular)."""
        return word.casefold() in self._words or norm_token(word).casefold() in self._words

    def _suggest(self, word: str, names: Callable[[Iterable[str]], dict[str, str]]) -> tuple[tuple[str, str], ...]:
        close = process.extract(word.casefold(), self._single, scorer=fuzz.ratio, limit=3, score_cutoff=SUGGEST_CUTOFF)
        ids = list(dict.fromkeys(i for term, _, _ in close for i in self._term_ids(term)[:1]))
        shown = names(ids)
        return tuple((i, shown[i]) for i in ids if i in shown)
