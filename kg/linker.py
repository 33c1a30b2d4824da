"""Entity linking, shared by ingest (passages) and query time (questions): the graph's names and
synonyms as a lexicon, local abbreviations, and the entity vector index for near misses.
"""

from __future__ import annotations

import hashlib
import re
import string
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from kg.curie import curie_prefix
from kg.entity_index import EntityIndex
from kg.graph.base import BaseGraphStore
from kg.lay_terms import BODY_PARTS, LAY_TERMS
from kg.model import NOT_VOCABULARY, Entity
from kg.nlp import norm_token
from kg.phrase_index import PhraseIndex
from kg.unknown_names import COMMON_ZIPF, RARE_ZIPF, UnknownName, UnknownNames, zipf

if TYPE_CHECKING:  # spaCy is imported where a pipeline is built or a span made (kg/nlp.py says why)
    from spacy.language import Language
    from spacy.tokens import Doc, Span

__all__ = ["Lexicon", "EntityLinker", "Mention", "TermMatcher", "QUALIFIER_CATEGORIES", "LINKER_VERSION"]

# Terms never matched on their own: ontology roots and words too general to mean one concept.
GENERIC_TERMS = frozenset(
    {
        "all", "disease", "diseases", "syndrome", "disorder", "abnormality", "phenotype", "phenotypic abnormality",
        "clinical", "patient", "human", "other", "unknown", "normal", "onset", "frequency", "death", "finding",
        "mode of inheritance", "inheritance", "condition", "chronic", "acute", "severe", "mild", "progressive",
        "cell", "tissue", "protein", "gene", "drug", "treatment", "therapy", "study", "age", "sex", "male",
        "female", "child", "adult", "time", "type", "group", "level", "rate", "risk", "case", "cases",
        # the course and history qualifiers of HPO, as words on their own
        "stable", "recurrent", "prolonged", "transient", "episodic", "intermittent", "periodic", "fluctuating",
        "subacute", "stationary", "nonprogressive", "non-progressive", "cyclic", "cyclical", "diurnal",
        "nocturnal", "migratory", "quotidian", "affected", "unaffected", "healthy",
        # MeSH headings about study design and populations, not about a patient's problem
        "method", "incidence", "prevalence", "prognosis", "risk factor", "aged", "middle aged", "young adult",
        "adolescent", "infant", "survivor", "family",
    }
)  # fmt: skip
# Categories whose terms say how a finding shows (HPO's clinical modifiers: severity, laterality,
# pattern; frequencies): a one-word name ("Left", "Focal", "Frequent") is an adjective in running
# text, not a mention of a concept, so it is matched only inside a longer name of another entity.
QUALIFIER_CATEGORIES = frozenset({"ClinicalModifier", "Frequency"})
MAX_TERM_TOKENS = 12
# Bumped whenever the rules above change what a text links to (a stored document linked under an
# older version is then found by `medkg relink`, through the linker's signature).
# 3: a vector-linked long form's short forms replace their lexicon links; no records. 4: accents folded,
# white space inside a line ignored, hyphenated terms also matched spaced. 5: negation ('ruled out',
# 'Seizures: absent', wrapped lines, double negatives) changes the stored `negated` flags of reports;
# sentences in capitals also matched in sentence case. 6: "lead to" is a verb, no link to the metal
LINKER_VERSION = 6
# A sentence is written in capitals when it has two words or more and this share of its (ASCII) letters
# is upper case (or the whole text is): "NO ACUTE DISEASE." is, "COMPARISON: None." (11 of 14) is not.
CAPITALS_SHARE = 0.8
_UPPER, _LOWER = string.ascii_uppercase.encode(), string.ascii_lowercase.encode()
_WORD = re.compile(r"[a-z][a-z0-9-]+")
#: ids that name where or what a finding is about (a body part, a MeSH heading), never a finding: a phrase
#: around one ("a tiny head") may link the finding it describes
_SETTING_PREFIXES = ("BODYPART:", "MESH:")
#: two words are forms of one word ("pancreas" and "pancreatic", "testicle" and "testis") when their first
#: VARIANT_STEM letters are the same and names of one entity differ in that word alone ("pancreas
#: neoplasm", "pancreatic neoplasm") in VARIANT_MIN_ENTITIES entities or more: "bone" and "skeletal", "head"
#: and "neck" differ so too, but are no forms of one word ("swelling of the head" is no neck swelling)
VARIANT_MIN_ENTITIES = 2
VARIANT_STEM = 4
# a question's "cancer of the prostate", "loss of hearing", "cancer in the bones": a word, "of" and a
# determiner at most or "in" and a determiner, then a word or a body part's everyday words (kg/lay_terms.py)
_DETERMINER = "(?:the|my|his|her|their|your|our) "
_OF_PHRASE = re.compile(
    rf"\b([A-Za-z]+) (?:of (?:an? |{_DETERMINER})?|in {_DETERMINER})"
    rf"({'|'.join(sorted((re.escape(p) for p in BODY_PARTS if ' ' in p), key=len, reverse=True))}|[A-Za-z]+)\b"
)
#: one-word names that are also verbs, read as the verb where one of these words follows: "mutations lead to
#: disease" names no lead (the metal, a MeSH heading); "lead poisoning" and "exposure to lead" still do
VERB_READINGS: dict[str, frozenset[str]] = {"lead": frozenset({"to"})}
_EPONYM = re.compile(r"^([A-Z][a-z]+)('s)? (disease|syndrome)$")


def _eponym_alone(term: str) -> tuple[str, str, bool] | None:
    """How people write an eponym alone: "Parkinson's disease" -> "parkinsons" (also "alzheimers",
    "crohns"), with the noun it drops and whether the term is possessive; none when it or the name is
    an everyday word ("downs", "graves"; "Little's disease", whose "littles" the lexicon matches as
    "little")."""
    if not (m := _EPONYM.match(term)):
        return None
    alone = f"{m[1].casefold()}s"
    return (alone, m[3], bool(m[2])) if zipf(alone) < RARE_ZIPF and zipf(m[1]) < COMMON_ZIPF else None


@dataclass(frozen=True)
class Mention:
    """A span of text linked to one or more entities (several when sources share a name)."""

    start: int  # character offsets in the linked text
    end: int
    text: str
    ids: tuple[str, ...]
    method: str  # lexicon | abbreviation | lay | vector | ner
    score: float = 1.0
    sentence: int = 0  # index of the sentence (within the linked text) holding the span


class TermMatcher:
    """Every occurrence of a set of term keys (normalised tokens joined by spaces) in a sequence of token
    norms: a dict of each term's token tuple and its prefixes, walked from every position. What spaCy's
    PhraseMatcher on the NORM attribute finds, built in a fraction of the time: the PhraseMatcher made a
    Doc and vocabulary entries for each of the demo's 86k terms (5.5 s of every linker's start, 0.4 s now)."""

    _PREFIX = ""  # the value of a prefix that is not itself a term

    def __init__(self, keys: Iterable[str]) -> None:
        self._table: dict[tuple[str, ...], str] = {}
        for key in keys:
            words = tuple(sys.intern(w) for w in key.split(" "))
            for n in range(1, len(words)):
                self._table.setdefault(words[:n], self._PREFIX)
            self._table[words] = key

    def __len__(self) -> int:
        return sum(1 for v in self._table.values() if v)

    def find(self, norms: Sequence[str]) -> list[tuple[str, int, int]]:
        """``(key, start, end)`` of every match in ``norms``, overlapping ones included."""
        found = []
        get = self._table.get
        for start in range(len(norms)):
            for end in range(start + 1, len(norms) + 1):
                key = get(tuple(norms[start:end]))
                if key is None:
                    break
                if key:
                    found.append((key, start, end))
        return found

    def spans(self, doc: Doc) -> list[Span]:
        """The matches in ``doc`` (matched on each token's norm) as spans labelled with their key."""
        from spacy.tokens import Span

        return [Span(doc, s, e, label=key) for key, s, e in self.find([t.norm_ for t in doc])]


@dataclass
class Lexicon:
    """Normalised term -> entity ids, compiled into a :class:`TermMatcher`."""

    nlp: Language
    names: dict[str, list[str]] = field(default_factory=dict)  # term key -> ids whose name it is
    synonyms: dict[str, list[str]] = field(default_factory=dict)  # term key -> ids with it as a synonym
    build_seconds: float = 0.0
    max_ids: int = 5
    # every word of the entities' definitions (case-folded): the clinical vocabulary of the graph
    defining_words: set[str] = field(default_factory=set)
    # a word -> its other forms, read from the names (:meth:`variants`)
    word_variants: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    # an eponym written alone -> the nouns it drops ("'s": one is possessive) -> entities (while building)
    _eponyms: dict[str, dict[str, set[str]]] = field(default_factory=dict, repr=False)
    # word pair -> the entities whose names differ in it alone (while building)
    _pairs: Counter[tuple[str, str]] = field(default_factory=Counter, repr=False)

    @classmethod
    def build(
        cls,
        store: BaseGraphStore,
        nlp: Language,
        *,
        exclude_sources: Iterable[str] = (),
        held_out: set[tuple[str, str]] | None = None,
        page: int = 20_000,
    ) -> Lexicon:
        """Read every entity's name and synonyms. ``held_out`` ``(id, term)`` pairs are left out
        (for measuring the vector fallback); entities only from ``exclude_sources`` are left out."""
        started = time.perf_counter()
        excluded = set(exclude_sources)
        held = {(i, t.casefold()) for i, t in (held_out or set())}
        lexicon = cls(nlp)
        after = ""
        while rows := store.scan_entities(after=after, limit=page):
            after = rows[-1].id
            for entity in rows:
                if entity.category in NOT_VOCABULARY or entity.obsolete:
                    continue
                if excluded and entity.sources and set(entity.sources) <= excluded:
                    continue
                lexicon._add(entity, held)
                if entity.description:
                    lexicon.defining_words.update(_WORD.findall(entity.description.casefold()))
        lexicon._add_eponyms_alone()
        lexicon._add_word_variants()
        lexicon.build_seconds = round(time.perf_counter() - started, 2)
        return lexicon

    def _add(self, entity: Entity, held: set[tuple[str, str]]) -> None:
        qualifier = entity.category in QUALIFIER_CATEGORIES
        keys: list[str] = []
        for term, table in ((entity.name, self.names), *((s, self.synonyms) for s in entity.synonyms)):
            if (entity.id, term.casefold()) in held or (qualifier and len(term.split()) == 1):
                continue
            # "Focal-onset seizure" is also written "focal onset seizure" (the tokenizer keeps a
            # hyphenated word whole), "Spinal muscular atrophy, type I" without its comma
            for variant in dict.fromkeys((term, term.replace("-", " "), term.replace(",", ""))):
                key = self.key(variant)
                if key is None:
                    continue
                if variant is term:
                    keys.append(key)
                ids = table.setdefault(key, [])
                if entity.id not in ids:
                    ids.append(entity.id)
            if eponym := _eponym_alone(term):  # "parkinsons", "alzheimers": added once all are read
                alone, noun, possessive = eponym
                self._eponyms.setdefault(alone, {}).setdefault(noun, set()).add(entity.id)
                if possessive:
                    self._eponyms[alone].setdefault("'s", set())
        self._count_variants(keys)

    def _count_variants(self, keys: list[str]) -> None:
        """Count the word pairs that alone tell apart two of one entity's names ("pancreas neoplasm",
        "pancreatic neoplasm"): lower-case words of three letters or more, in names of two words or more."""
        split = [k.split(" ") for k in dict.fromkeys(k for k in keys if " " in k)]
        seen = set()
        for n, a in enumerate(split):
            for b in split[n + 1 :]:
                if len(a) != len(b):
                    continue
                differ = [(x, y) for x, y in zip(a, b, strict=True) if x != y]
                if len(differ) == 1 and all(w.isalpha() and w.islower() and len(w) > 2 for w in differ[0]):
                    seen.add(tuple(sorted(differ[0])))
        self._pairs.update(seen)

    def _add_word_variants(self) -> None:
        variants: dict[str, set[str]] = defaultdict(set)
        for (x, y), entities in self._pairs.items():
            if entities >= VARIANT_MIN_ENTITIES and x[:VARIANT_STEM] == y[:VARIANT_STEM]:
                variants[x].add(y)
                variants[y].add(x)
        self.word_variants = {w: tuple(sorted(v)) for w, v in variants.items()}
        self._pairs.clear()

    def variants(self, word: str) -> tuple[str, ...]:
        """Other forms of ``word`` (matched as the lexicon matches it), read from the names
        (:data:`VARIANT_MIN_ENTITIES`): "pancreas" -> "pancreatic" (pancreatic and pancreas neoplasm, ...),
        "testicle" -> "testis" (large testicles and large testes), "ovary" -> "ovarian"."""
        return self.word_variants.get(norm_token(word), ())

    def _add_eponyms_alone(self) -> None:
        """The possessive eponyms written alone, each of one disease only: "cushings" stays unlinked,
        since Cushing disease (of the pituitary) and Cushing's syndrome are two."""
        for alone, nouns in self._eponyms.items():
            named = [ids for noun, ids in nouns.items() if noun != "'s"]
            if "'s" in nouns and len(named) == 1 and (key := self.key(alone)):
                ids = self.synonyms.setdefault(key, [])
                ids += [i for i in sorted(named[0]) if i not in ids]
        self._eponyms.clear()

    def key(self, term: str) -> str | None:
        """The match key of a term (normalised tokens joined by spaces), or None if never matched."""
        tokens = [norm_token(t.text) for t in self.nlp.make_doc(term) if not t.is_space]
        if not tokens or len(tokens) > MAX_TERM_TOKENS:
            return None
        key = " ".join(tokens)
        if len(key) < 3 or key.casefold() in GENERIC_TERMS:
            return None
        if len(tokens) == 1 and self.nlp.vocab[tokens[0]].is_stop:
            return None
        return key

    def words(self) -> frozenset[str]:
        """The tokens of the terms that are words, not short all-caps forms (``heart``, ``large``)."""
        keys = self.names.keys() | self.synonyms.keys()
        return frozenset(t for key in keys for t in key.split(" ") if t == t.casefold() and not t.isdigit())

    def ids_for(self, key: str) -> tuple[str, ...]:
        ids = self.names.get(key) or self.synonyms.get(key) or []
        return tuple(sorted(ids)[: self.max_ids])

    def all_ids(self, key: str) -> tuple[str, ...]:
        """The ids of the entities named ``key`` and then of those that bear it as a synonym (where
        :meth:`ids_for` gives the first that has any)."""
        return tuple(dict.fromkeys((*self.names.get(key, ()), *self.synonyms.get(key, ()))))

    def __len__(self) -> int:
        return len(self.names.keys() | self.synonyms.keys())

    def matcher(self, keys: Iterable[str] | None = None) -> TermMatcher:
        """A matcher of ``keys`` (default: every term), each matched under its own key."""
        return TermMatcher(self.names.keys() | self.synonyms.keys() if keys is None else keys)

    def namesakes(
        self, words: str, ids: Sequence[str], names: Callable[[Iterable[str]], Mapping[str, str]]
    ) -> tuple[str, ...]:
        """``ids`` (linked from ``words``), then one concept's other entries in other ontologies: the
        entities ``words`` name or are a synonym of, and those named as any of these is ("high blood
        pressure" names SYMP:0020064 and is HPO's lay synonym of HP:0000822 Hypertension, whose name the
        Disease Ontology's DOID:10763 hypertension shares); ``max_ids`` at most. ``names(ids)``: display
        names."""
        found = list(ids)

        def add(key: str | None, tables: Sequence[dict[str, list[str]]], other_than: str = "") -> None:
            for table in tables if key else ():
                for i in table.get(key, ()):  # type: ignore[arg-type]
                    same_ontology = bool(other_than) and curie_prefix(i) == other_than
                    if i not in found and len(found) < self.max_ids and not same_ontology:
                        found.append(i)

        add(self.key(words), (self.names, self.synonyms))
        for entity_id, name in names(list(found)).items():
            add(self.key(name), (self.names,))
            # another ontology's synonym of it: HPO's "Type II diabetes mellitus" is the Disease Ontology's
            # synonym of its type 2 diabetes mellitus (within one ontology such a synonym names a broader
            # class: alpha thalassemia's "Hemoglobin H disease")
            add(self.key(name), (self.synonyms,), other_than=curie_prefix(entity_id))
        return tuple(found)


class EntityLinker:
    """Links text to entities from three sources, in order of trust: the ``Lexicon`` (every name and
    synonym, matched on normalised tokens, the longest of overlapping matches kept; a sentence in
    capitals is also read in sentence case); local abbreviations (scispacy's ``AbbreviationDetector``:
    a short form links to what its long form links to in that document, overriding its global meaning);
    and the entity vector index for what the lexicon left (a long form, an NER span, a question's
    uncovered chunks), linked when the cosine clears ``threshold``. A question's phrases also go to the
    phrase index (:mod:`kg.phrase_index`: findings' names one by one), linked at ``phrase_threshold``."""

    def __init__(
        self,
        nlp: Language,
        lexicon: Lexicon,
        entity_index: EntityIndex | None = None,
        threshold: float = 0.75,
        query_threshold: float | None = None,
        phrase_index: PhraseIndex | None = None,
        phrase_threshold: float = 0.8,
    ) -> None:
        self.nlp = nlp
        self.lexicon = lexicon
        self.entity_index = entity_index
        self.phrase_index = phrase_index
        self.phrase_threshold = phrase_threshold
        self.threshold = threshold
        self.query_threshold = threshold if query_threshold is None else query_threshold
        self._matcher = lexicon.matcher()
        self._words = lexicon.words()

    @cached_property
    def signature(self) -> str:
        """What decides the links of a text: the rules' version, every lexicon term with its ids, and
        the vector fallback's threshold and embedder. Stored with each linked document, so that `medkg
        relink` finds the documents another lexicon linked. (Not how many entity vectors there are: the
        MeSH headings of every literature load join the entity index but not a document linker's
        lexicon, and would make every document look stale.)"""
        digest = self._rules_digest()
        if self.entity_index is not None:
            digest.update(self.entity_index.embedder.signature.encode())
        return digest.hexdigest()[:16]

    @cached_property
    def rules_signature(self) -> str:
        """:attr:`signature` without the embedder's precision (which the device decides): what a
        distributed load's workers must share with its driver, whatever hardware each runs on."""
        digest = self._rules_digest()
        if self.entity_index is not None:
            digest.update(self.entity_index.embedder.model_name.encode())
        return digest.hexdigest()[:16]

    def _rules_digest(self) -> Any:
        digest = hashlib.sha1(f"v{LINKER_VERSION}|{self.threshold}|{self.lexicon.max_ids}".encode())
        for table in (self.lexicon.names, self.lexicon.synonyms):
            for key in sorted(table):
                digest.update(f"{key}\t{','.join(sorted(table[key]))}\n".encode())
            digest.update(b"--\n")
        return digest

    # ---- documents ---------------------------------------------------------------------------
    def link_docs(self, docs: Sequence[Doc]) -> list[list[Mention]]:
        """Mentions of each parsed document; vector look-ups of all documents are batched."""
        results: list[list[Mention]] = []
        pending: list[tuple[int, Span, str]] = []  # (doc index, span, method) awaiting the vector index
        for i, doc in enumerate(docs):
            mentions, unresolved = self._lexical(doc)
            results.append(mentions)
            pending.extend((i, span, method) for span, method in unresolved)
        if pending and self.entity_index is not None and len(self.entity_index.index):
            hits = self._nearest([span.text for _, span, _ in pending])
            for (i, span, method), hit in zip(pending, hits, strict=True):
                if hit and hit[1] >= self.threshold:
                    found_by = "ner" if method == "ner" else "vector"
                    found = self._expand_short_forms(docs[i], span, (hit[0],), found_by, hit[1], method)
                    # the short forms' local meaning replaces their global one (a lexicon link there)
                    local = {(m.start, m.end) for m in found if m.method == "abbreviation"}
                    results[i] = [m for m in results[i] if m.method != "lexicon" or (m.start, m.end) not in local]
                    results[i].extend(found)
        for mentions in results:
            mentions.sort(key=lambda m: (m.start, -m.end))
        return results

    def link_text(self, text: str) -> list[Mention]:
        return self.link_docs([self.nlp(text)])[0]

    def link_query(self, text: str) -> list[Mention]:
        """Link a question: lexicon and abbreviations first; then the whole question (when short)
        and the chunks the lexicon left uncovered go to the entity vector index."""
        return self._link_query(self.nlp(text))

    def read_question(
        self,
        text: str,
        known: Callable[[str], bool] = lambda _: False,
        names: Callable[[Iterable[str]], dict[str, str]] = lambda _: {},
    ) -> tuple[list[Mention], list[UnknownName]]:
        """:meth:`link_query`, and the names the question uses that nothing links and that medkg does not
        know (:mod:`kg.unknown_names`; ``known(word)``: whether the literature holds the word,
        ``names(ids)``: display names for suggestions)."""
        doc = self.nlp(text)
        unknown = self.unknown_names
        mentions = [  # a link by meaning of a word nobody knows is a guess ("zorblaxitol" -> a migraine drug)
            m
            for m in self._link_query(doc)
            if not (_one_word(m) and m.method == "vector" and unknown.unknown_word(m.text))
            or unknown.spelled_like(m.text, m.ids)  # unless a misspelling ("metfromin" -> Metformin)
        ]
        # a name vouches for its words; a link by meaning only for a word it matched alone, not for the
        # words of a chunk or a whole short question it matched as a whole
        vouched = [(m.start, m.end) for m in mentions if m.method != "vector" or _one_word(m)]
        return mentions, unknown.find(doc, vouched, known, names)

    @cached_property
    def unknown_names(self) -> UnknownNames:
        return UnknownNames(
            self.lexicon.names.keys() | self.lexicon.synonyms.keys(), self.lexicon.ids_for, self.lexicon.defining_words
        )

    @cached_property
    def _lay(self) -> tuple[TermMatcher, dict[str, tuple[str, ...]]]:
        """The everyday words of :mod:`kg.lay_terms` the lexicon lacks, each with the ids of its clinical
        name (a word whose clinical name the graph does not hold is left out)."""
        ids_of: dict[str, tuple[str, ...]] = {}
        for words, clinical in (LAY_TERMS | BODY_PARTS).items():
            key, target = self.lexicon.key(words), self.lexicon.key(clinical)
            ids = self.lexicon.ids_for(target) if target else ()
            if key and ids and not self.lexicon.ids_for(key):
                ids_of[key] = ids
        return self.lexicon.matcher(ids_of), ids_of

    def _with_lay_words(self, doc: Doc, mentions: list[Mention]) -> list[Mention]:
        """``mentions`` and a question's everyday words (:mod:`kg.lay_terms`): a lay phrase wins over
        the shorter names inside it ("wear and tear arthritis" is osteoarthritis, not arthritis) and
        yields to a name it overlaps otherwise."""
        from spacy.util import filter_spans

        matcher, ids_of = self._lay
        strings = self.nlp.vocab.strings
        for span in filter_spans(matcher.spans(doc)):
            start, end = span.start_char, span.end_char
            mentions = _in_place_of_inner(mentions, Mention(start, end, span.text, ids_of[strings[span.label]], "lay"))
        return mentions

    def _with_inverted_names(self, doc: Doc, mentions: list[Mention]) -> list[Mention]:
        """``mentions`` and a question's "X of the Y" or "X in the Y" read as the name "Y X" ("cancer of
        the prostate": prostate cancer, "loss of hearing": hearing loss, "cancer in the bones": bone cancer)
        when that name (or everyday words of :mod:`kg.lay_terms`) is a disease's or a finding's, not a body
        part's or a MeSH heading's, Y also read in its other forms (:meth:`Lexicon.variants`: "cancer of
        the pancreas", pancreatic cancer) or as the names' word for a body part in everyday words
        (:data:`~kg.lay_terms.BODY_PARTS`: "cancer of the gullet", esophagus cancer): it wins over the
        shorter names inside it and yields to a name it overlaps otherwise; of one span, it joins the name
        read as written."""
        for match in _OF_PHRASE.finditer(doc.text):
            head, whose = match.group(1), match.group(2)
            ids = self._inverted_ids(head, whose)
            if not ids:
                continue
            start, end = match.start(1), match.end(2)
            same = [m for m in mentions if (m.start, m.end) == (start, end)]
            if same:  # "cancer of the pancreas" is also HPO's Neoplasm of the pancreas
                ids = tuple(dict.fromkeys((*same[0].ids, *ids)))
            mentions = _in_place_of_inner(mentions, Mention(start, end, doc.text[start:end], ids, "lexicon"))
        return mentions

    def _inverted_ids(self, head: str, whose: str) -> tuple[str, ...]:
        """The ids of the names "Y X" (``whose`` ``head``) of diseases and findings: Y as written, in its other
        forms, and as the names' word for the body part so called, in its forms too (HPO names "cervix
        cancer", the Disease Ontology "cervical cancer": one concept, both linked); a synonym counts beside
        a name (MeSH names "hearing loss", HPO has it as a synonym of Hearing impairment)."""
        part = self._body_parts.get(self.lexicon.key(whose) or "")
        words = (whose, *self.lexicon.variants(whose), *([part, *self.lexicon.variants(part)] if part else []))
        ids: list[str] = []
        for word in dict.fromkeys(words):
            key = self.lexicon.key(f"{word} {head}")
            named = self.lexicon.all_ids(key) if key else ()
            ids += [i for i in named or self._lay[1].get(key or "", ()) if not i.startswith(_SETTING_PREFIXES)]
        return tuple(dict.fromkeys(ids))[: self.lexicon.max_ids]

    @cached_property
    def _body_parts(self) -> dict[str, str]:
        """:data:`~kg.lay_terms.BODY_PARTS` by match key ("eyes" is "eye")."""
        return {key: part for words, part in BODY_PARTS.items() if (key := self.lexicon.key(words))}

    def _link_query(self, doc: Doc) -> list[Mention]:
        mentions = self._with_lay_words(doc, self.link_docs([doc])[0])
        mentions = self._with_inverted_names(doc, mentions)
        vectors = _Vectors(self.entity_index.embedder if self.entity_index is not None else None)
        if self.entity_index is None or not len(self.entity_index.index):
            return sorted(mentions, key=lambda m: (m.start, -m.end))
        covered = {t for m in mentions for t in range(m.start, m.end)}
        chunks = [  # a lone word that is never a term on its own ("phenotypes", "disease") is no concept
            c
            for c in _content_chunks(doc)
            if not covered & set(range(c.start_char, c.end_char)) and (len(c) > 1 or self.lexicon.key(c.text))
        ]
        whole = any(m.start <= doc[0].idx and m.end >= len(doc.text.rstrip()) for m in mentions) if len(doc) else True
        if len(doc) <= 8 and not whole:  # a short question may name one concept the lexicon lacks
            chunks.insert(0, doc[:])
        for chunk, hit in zip(chunks, self._nearest([c.text for c in chunks], vectors) if chunks else [], strict=True):
            if hit and hit[1] >= self.query_threshold:
                mentions.append(
                    Mention(chunk.start_char, chunk.end_char, chunk.text, (hit[0],), "vector", round(hit[1], 4))
                )
                if chunk.start == 0 and chunk.end == len(doc):
                    break
        mentions = self._with_phrases(doc, mentions, vectors)
        mentions.sort(key=lambda m: (m.start, -m.end))
        return mentions

    def _with_phrases(self, doc: Doc, mentions: list[Mention], vectors: _Vectors) -> list[Mention]:
        """A run of content words whose nearest finding name (the phrase index) is at
        ``phrase_threshold`` or more links that finding, in place of what linked inside it less surely:
        a link by meaning below both, or a lone body part or MeSH heading ("head" in "a tiny head"). A
        name the lexicon linked (an ontology's term) stands, as does a link across its edges. Only runs
        of two words or more where a phrase could link are embedded."""
        if self.phrase_index is None or not len(self.phrase_index.index):
            return mentions

        def inside(chunk: Span) -> list[Mention] | None:
            """The mentions inside the run, or None where what the lexicon linked there stands."""
            start, end = chunk.start_char, chunk.end_char
            within = [m for m in mentions if start <= m.start and m.end <= end]
            if any(m.end > start and m.start < end for m in mentions if m not in within):
                return None  # a link across its edges
            for m in within:
                if m.method != "vector" and ((m.start, m.end) == (start, end) or not _setting_only(m)):
                    return None
            return within

        # runs of two words or more: a lone word is the entity index's ("thin" is no "Thin skin")
        chunks = [c for c in _content_chunks(doc) if len(c) > 1]
        open_chunks = [(c, within) for c in chunks if (within := inside(c)) is not None]
        texts = [c.text for c, _ in open_chunks]
        for (chunk, within), hit in zip(open_chunks, self.phrase_index.nearest(texts, vectors.of(texts)), strict=True):
            if hit is None or hit[2] < self.phrase_threshold:
                continue
            sure = min(hit[2], self.phrase_threshold)
            if any(hit[0] in m.ids or (m.method == "vector" and m.score >= sure) for m in within):
                continue  # the same finding, or a link by meaning as sure
            mentions = [m for m in mentions if m not in within]
            start, end = chunk.start_char, chunk.end_char
            mentions.append(Mention(start, end, chunk.text, (hit[0],), "vector", round(hit[2], 4)))
        return mentions

    # ---- internals ---------------------------------------------------------------------------
    def _nearest(self, texts: list[str], vectors: _Vectors | None = None) -> list[tuple[str, float] | None]:
        assert self.entity_index is not None
        matrix = vectors.of(texts) if vectors is not None else self.entity_index.embedder.encode(texts)
        return [hits[0] if hits else None for hits in self.entity_index.index.search(matrix, 1)]

    def _phrase_matches(self, doc: Doc, capitals: dict[int, str]) -> list[Span]:
        """The lexicon's matches in ``doc``, longest first where they overlap. White space inside a
        line is not a word: "global  developmental delay" (two spaces, a no-break or thin space) is
        matched as if single-spaced; a line break still ends a phrase. ``capitals`` (token -> its norm
        as a word, from :func:`_capitals`) gives the sentence-case reading, matched as well: of two
        matches of one span the one as written wins, and a lone short all-caps token that is an
        ordinary word there matches only as that word."""
        from spacy.tokens import Span
        from spacy.util import filter_spans

        gaps = [t for t in doc if t.is_space and "\n" not in t.text]
        if not gaps and not capitals:
            return filter_spans(self._matcher.spans(doc))
        words = [t for t in doc if not (t.is_space and "\n" not in t.text)]
        readings = [[t.norm_ for t in words]]
        if capitals:
            readings.append([capitals.get(t.i, t.norm_) for t in words])
        spans = []
        for reading, norms in enumerate(readings):
            for key, s, e in self._matcher.find(norms):
                if reading == 0 and e - s == 1 and self._a_word(capitals.get(words[s].i)):
                    continue  # "NO", "ALL", "LARGE" in capitals: not an abbreviation
                spans.append(Span(doc, words[s].i, words[e - 1].i + 1, label=key))
        return filter_spans(spans)

    def _a_word(self, norm: str | None) -> bool:
        """Whether a token read as a word (``norm``) is one of the lexicon's words (a stop word alone is
        never a term)."""
        return norm is not None and norm in self._words

    def _long_form_ids(self, long_form: Span, capitals: dict[int, str]) -> tuple[str, ...]:
        """What a local abbreviation's long form links to: as written, or read in sentence case."""
        texts = [long_form.text]
        if any(t.i in capitals for t in long_form):
            texts.append(long_form.text.lower())
        for text in texts:
            key = self.lexicon.key(text)
            if key and (ids := self.lexicon.ids_for(key)):
                return ids
        return ()

    def _lexical(self, doc: Doc) -> tuple[list[Mention], list[tuple[Span, str]]]:
        strings = self.nlp.vocab.strings
        capitals = _capitals(doc)
        spans = self._phrase_matches(doc, capitals)
        mentions: list[Mention] = []
        taken = set()
        unresolved: list[tuple[Span, str]] = []
        sentence_of = _sentence_index(doc)
        # Local abbreviations first: they override the short form's global meaning.
        for short in getattr(doc._, "abbreviations", []):
            long_form = short._.long_form
            ids = self._long_form_ids(long_form, capitals)
            if ids:
                mentions.append(self._mention(short, ids, "abbreviation", sentence_of))
                taken.update(range(short.start, short.end))
            elif not any(s.start <= long_form.start and long_form.end <= s.end for s in spans) and not any(
                u == long_form for u, _ in unresolved
            ):
                unresolved.append((long_form, "abbreviation"))
        for span in spans:
            if taken & set(range(span.start, span.end)) or _a_verb_here(span):
                continue
            ids = self.lexicon.ids_for(strings[span.label])
            if ids:
                mentions.append(self._mention(span, ids, "lexicon", sentence_of))
                taken.update(range(span.start, span.end))
        for ent in doc.ents:  # NER spans (only when an NER model is configured)
            if not taken & set(range(ent.start, ent.end)):
                unresolved.append((ent, "ner"))
        return mentions, unresolved

    def _expand_short_forms(
        self, doc: Doc, span: Span, ids: tuple[str, ...], method: str, score: float, origin: str
    ) -> list[Mention]:
        """A vector-linked long form also links its short forms in the document."""
        sentence_of = _sentence_index(doc)
        out = [self._mention(span, ids, method, sentence_of, score)]
        if origin == "abbreviation":
            for short in getattr(doc._, "abbreviations", []):
                if short._.long_form == span:
                    out.append(self._mention(short, ids, "abbreviation", sentence_of, score))
        return out

    @staticmethod
    def _mention(span: Span, ids: tuple[str, ...], method: str, sentence_of: dict[int, int], score: float = 1.0):
        return Mention(span.start_char, span.end_char, span.text, ids, method, round(score, 4), sentence_of[span.start])


def _a_verb_here(span: Span) -> bool:
    """Whether a one-word match is the verb of :data:`VERB_READINGS` where it stands ("lead to")."""
    return len(span) == 1 and _verb_at(span.doc, span.start)


def _verb_at(doc: Doc, i: int) -> bool:
    """Whether token ``i`` is a verb of :data:`VERB_READINGS`, the word it takes following it."""
    follows = VERB_READINGS.get(doc[i].norm_)
    return follows is not None and i + 1 < len(doc) and doc[i + 1].lower_ in follows


def _one_word(mention: Mention) -> bool:
    return " " not in mention.text.strip()


def _sentence_index(doc: Doc) -> dict[int, int]:
    if not doc.has_annotation("SENT_START"):
        return defaultdict(int)
    index: dict[int, int] = {}
    for i, sent in enumerate(doc.sents):
        for t in range(sent.start, sent.end):
            index[t] = i
    return index


def _capitals(doc: Doc) -> dict[int, str]:
    """The short all-caps tokens of the sentences written in capitals (``CAPITALS_SHARE``), each with its
    norm as a word ("HEART" -> ``heart``, "SPOTS" -> ``spot``): the tokens whose norm keeps their case."""
    text = doc.text.encode("ascii", "replace")  # one byte a character: offsets stay
    if _in_capitals(doc[:], text):
        shouted = [doc[:]]
    elif doc.has_annotation("SENT_START"):
        shouted = [s for s in doc.sents if _in_capitals(s, text)]
    else:
        return {}
    return {
        t.i: word
        for span in shouted
        for t in span
        if t.text.isupper() and (word := norm_token(t.text.lower())) != t.norm_
    }


def _in_capitals(span: Span, doc_text: bytes) -> bool:
    """Whether ``span`` has two words or more and ``CAPITALS_SHARE`` of its (ASCII) letters are upper case."""
    text = doc_text[span.start_char : span.end_char]
    upper = len(text) - len(text.translate(None, _UPPER))
    if upper < 2 or upper < CAPITALS_SHARE * (len(text) - len(text.translate(None, _LOWER)) + upper):
        return False
    return sum(1 for t in span if t.text.upper() != t.text.lower()) >= 2


def _content_chunks(doc: Doc, max_tokens: int = 6) -> list[Span]:
    """Maximal runs of content words (split at stop words, punctuation and the verbs of
    :data:`VERB_READINGS`: "an inflamed appendix lead to"), a parser-free stand-in for noun chunks."""
    chunks: list[Span] = []
    start = None
    for token in [*doc, None]:
        boundary = (
            token is None
            or token.is_stop
            or token.is_punct
            or token.is_space
            or token.like_num
            or _verb_at(doc, token.i)
        )
        if boundary:
            if start is not None and token is not None and token.i - start <= max_tokens:
                chunks.append(doc[start : token.i])
            elif start is not None and token is None and len(doc) - start <= max_tokens:
                chunks.append(doc[start:])
            start = None
        elif start is None:
            start = token.i
    return chunks


def _in_place_of_inner(mentions: list[Mention], longer: Mention) -> list[Mention]:
    """``mentions`` with ``longer`` in place of those inside it; as they were when one overlaps its edge."""
    inside = [m for m in mentions if longer.start <= m.start and m.end <= longer.end]
    if any(m.end > longer.start and m.start < longer.end for m in mentions if m not in inside):
        return mentions
    return [*(m for m in mentions if m not in inside), longer]


def _setting_only(mention: Mention) -> bool:
    """Whether a mention links only body parts or MeSH headings (:data:`_SETTING_PREFIXES`)."""
    return all(i.startswith(_SETTING_PREFIXES) for i in mention.ids)


class _Vectors:
    """A question's texts embedded once, for the entity index and the phrase index both."""

    def __init__(self, embedder: Any) -> None:  # noqa: ANN401 - kg.embedders.TextEmbedder or None
        self.embedder = embedder
        self._by_text: dict[str, Any] = {}

    def of(self, texts: list[str]) -> Any:  # noqa: ANN401 - an (n, dim) float32 array
        import numpy as np

        new = [t for t in dict.fromkeys(texts) if t not in self._by_text]
        if new:
            self._by_text.update(zip(new, self.embedder.encode(new), strict=True))
        return np.asarray([self._by_text[t] for t in texts], dtype=np.float32)
