"""Names a question uses that medkg knows nothing about ("zorblaxitol", "quintraxamab", "metfromin",
"azithromycin" where no source of the graph has it): a word the linker left unlinked, in no name,
synonym or definition of the graph and (the caller's check) in no indexed passage, that looks like a
name: absent from everyday English (``wordfreq``'s frequency lists, shipped in its wheel), or rare
there and built like a drug name (a common INN/USAN stem: -mab, -mycin, -sartan...). The answer then
says medkg has no information about it rather than answering with evidence about something else;
near misses in the graph's names are offered as suggestions (``rapidfuzz``), never substituted."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from rapidfuzz import fuzz, process

from kg.nlp import norm_token

if TYPE_CHECKING:
    from spacy.tokens import Doc

__all__ = [
    "ABSENT_ZIPF",
    "COMMON_ZIPF",
    "DRUG_STEMS",
    "DRUG_STEM_STARTS",
    "RARE_ZIPF",
    "UnknownName",
    "UnknownNames",
    "zipf",
]

#: Zipf frequency in English (3 is once per million words, 1 once per billion) below which a word is
#: no word of English: invented and misspelt names ("zorblaxitol", "metfromin" 0), rare drugs and gene
#: symbols ("mepolizumab", "FBX9" 0). Clinical words of vignettes sit above it ("gravida" 1.5,
#: "diaphoretic" 1.6, "edentulous" 1.5, "sphygmomanometer" 1.4).
ABSENT_ZIPF = 1.0
#: Below this, a word built like a drug name is one ("ceftriaxone" 1.9, "azithromycin" 2.0, "losartan"
#: 1.6); everyday words are above it ("fits" 4.3, "seizure" 3.7, "dose" 4.2, "migraine" 3.3).
RARE_ZIPF = 3.0
#: At or above this, a word is everyday English (once in 10,000 words: "little", "worth", "today"), too
#: common to be taken for a name on its own.
COMMON_ZIPF = 4.0
#: Endings of common INN/USAN drug stems (WHO's stem book): a rare word ending so names a drug.
DRUG_STEMS = (
    "mab", "cept", "nib", "ciclib", "parib", "zomib", "mycin", "micin", "cillin", "penem",
    "floxacin", "cycline", "azole", "vir", "tidine", "pril", "sartan",
    "olol", "alol", "dipine", "statin", "fibrate", "gliptin", "glitazone", "gliflozin", "glinide", "parin",
    "xaban", "gatran", "grel", "triptan", "setron", "pitant", "caine", "zepam", "zolam", "barbital", "oxetine",
    "triptyline", "pramine", "peridol", "apine", "idone", "terol", "lukast", "sonide", "olone", "semide",
    "thiazide", "tide", "relin", "kinra", "leukin", "ase", "platin", "taxel", "rubicin", "trexate", "tabine",
    "limus", "profen", "coxib", "fenac", "dronate", "tepa", "mustine", "vudine", "lutamide",
    "trozole", "gestrel", "sterone", "afil", "osin", "pressin", "tocin", "formin",
)  # fmt: skip
#: Beginnings of INN stems ("ceftriaxone", "cephalexin", "sulfasalazine").
DRUG_STEM_STARTS = ("cef", "ceph", "sulfa")
#: Word-forming prefixes of clinical English: a word made of one and a known word is no name.
PREFIXES = (
    "non", "un", "anti", "inter", "intra", "extra", "sub", "supra", "super", "hyper", "hypo", "pre", "post",
    "peri", "para", "pseudo", "semi", "multi", "poly", "primi", "micro", "macro", "immuno", "neuro", "cardio",
    "osteo", "myo", "hepato", "nephro", "gastro", "entero", "broncho", "pneumo", "dermato", "hemo", "haemo",
    "patho", "cross", "co", "de", "re", "dis", "mis", "over", "under", "auto", "trans", "endo", "epi", "retro",
)  # fmt: skip
#: How close a name of the graph must be to be suggested (rapidfuzz ratio, 0-100).
SUGGEST_CUTOFF = 80.0
_NAME_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9-]*$")
#: the nouns an eponym names ("Halvorsen-Drake syndrome"): a person's name before one names a disease,
#: whatever the name means in English ("Drake", "Lowe", "Marvell")
EPONYM_HEADS = frozenset({"syndrome", "disease", "disorder", "anomaly", "dysplasia", "dystrophy", "myopathy", "palsy"})
_SURNAMES = re.compile(r"^[A-Z][a-z]+(-[A-Z][a-z]+)*$")  # "Halvorsen", "Halvorsen-Drake" (one token or three)


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

    def __init__(
        self, terms: Iterable[str], term_ids: Callable[[str], tuple[str, ...]], defining: Iterable[str] = ()
    ) -> None:
        """``terms``: the lexicon's keys (normalised names and synonyms); ``term_ids``: the ids of a key;
        ``defining``: the (case-folded) words of the entities' definitions."""
        self._terms = list(terms)
        self._term_ids = term_ids
        self._defining = frozenset(defining)

    @cached_property
    def _words(self) -> frozenset[str]:
        return frozenset(w.casefold() for t in self._terms for w in t.split(" "))

    @cached_property
    def _single(self) -> list[str]:
        """One-word names (what a one-word unknown name is compared with for suggestions)."""
        return sorted({t for t in self._terms if " " not in t and len(t) >= 4})

    def warm(self) -> None:
        """Build the word sets and load wordfreq's list now (a fraction of a second) rather than at the
        first question."""
        self._words, self._single  # noqa: B018
        zipf("medkg")

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
        found = self._eponyms(doc, covered, known, names)
        covered |= {c for u in found for c in range(u.start, u.end)}
        for token in doc:
            word = token.text
            if token.idx in covered or token.is_stop or token.like_num or not _NAME_LIKE.match(word):
                continue
            if not self.unknown_word(word) or known(word):
                continue
            found.append(UnknownName(word, token.idx, token.idx + len(word), self._suggest(word, names)))
        return found

    def _eponyms(
        self,
        doc: Doc,
        covered: set[int],
        known: Callable[[str], bool],
        names: Callable[[Iterable[str]], dict[str, str]],
    ) -> list[UnknownName]:
        """Eponyms the linker left: the capitalised names (joined by hyphens) before a disease noun,
        unknown when one of them is in no name, synonym or definition of the graph nor in the literature
        ("Halvorsen-Drake syndrome": "Drake" is an English word, "Halvorsen" is nowhere here)."""
        found: list[UnknownName] = []
        for head in doc:
            if head.text.casefold() not in EPONYM_HEADS or head.idx in covered:
                continue
            start = head.i
            while (
                start > 0
                and not doc[start - 1].is_stop
                and (_SURNAMES.match(doc[start - 1].text) or doc[start - 1].text == "-")
            ):
                start -= 1
            while start < head.i and doc[start].text == "-":
                start += 1
            span = doc[start : head.i]
            words = [w for t in span for w in t.text.split("-") if w]
            if not words or start == 0 and len(words) == 1 or any(t.idx in covered for t in span):
                continue  # a sentence's first word alone may be any word ("Syndrome of ...")
            if any(not self._in_graph(w) and not known(w) for w in words):
                text = span.text
                found.append(UnknownName(text, span.start_char, span.end_char, self._suggest(text, names)))
        return found

    def unknown_word(self, word: str) -> bool:
        """Whether ``word`` looks like a name and is no word of the graph (the literature not asked)."""
        if word.isupper() and not any(ch.isdigit() for ch in word):  # short forms (HEENT, MRI): ambiguous
            return False
        if len(word) < 4 and not any(ch.isdigit() for ch in word):
            return False
        return not self._in_graph(word) and _name_like(word) and not self._compound(word)

    def spelled_like(self, word: str, ids: Iterable[str]) -> bool:
        """Whether a one-word name of one of ``ids`` is spelt close to ``word`` (a misspelling of it)."""
        wanted = set(ids)
        return any(wanted & set(self._term_ids(term)) for term in self._close(word, limit=10))

    def _in_graph(self, word: str) -> bool:
        """A word of a name, synonym or definition of the graph, as written or as the lexicon matches it
        (singular)."""
        forms = {word.casefold(), norm_token(word).casefold()}
        return bool(forms & self._words or forms & self._defining)

    def _compound(self, word: str) -> bool:
        """A known word behind a word-forming prefix ("noncontributory", "primigravida", "interscapular")."""
        low = word.casefold()
        for prefix in PREFIXES:
            rest = low[len(prefix) :]
            if low.startswith(prefix) and len(rest) >= 4 and (zipf(rest) >= ABSENT_ZIPF or self._in_graph(rest)):
                return True
        return False

    def _close(self, word: str, limit: int) -> list[str]:
        """One-word names of the graph spelt within SUGGEST_CUTOFF of ``word``, closest first."""
        found = process.extract(
            word.casefold(), self._single, scorer=fuzz.ratio, limit=limit, score_cutoff=SUGGEST_CUTOFF
        )
        return [term for term, _, _ in found]

    def _suggest(self, word: str, names: Callable[[Iterable[str]], dict[str, str]]) -> tuple[tuple[str, str], ...]:
        ids = list(dict.fromkeys(i for term in self._close(word, limit=3) for i in self._term_ids(term)[:1]))
        shown = names(ids)
        return tuple((i, shown[i]) for i in ids if i in shown)


def zipf(word: str) -> float:
    """``word``'s Zipf frequency in English (wordfreq, imported at first use: 0.4 s)."""
    from wordfreq import zipf_frequency

    return zipf_frequency(word, "en")


def _name_like(word: str) -> bool:
    """No word of English, or a rare one built like a drug name."""
    frequency = zipf(word)
    low = word.casefold()
    return frequency < ABSENT_ZIPF or (
        frequency < RARE_ZIPF and (low.endswith(DRUG_STEMS) or low.startswith(DRUG_STEM_STARTS))
    )
