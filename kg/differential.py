"""Phenotype-driven differential diagnosis: rank diseases by how well their HPO annotations explain a
patient's observed terms (and agree with the excluded ones).

Built once from the graph (HPO ``IS_A`` edges and the diseases' ``HAS_PHENOTYPE`` annotations) into
arrays, so a case is scored against every disease with a few vectorised numpy operations.

**Phenotype likelihood ratio** in the manner of LIRICAL (Robinson et al., AJHG 2020), the terms taken
as independent given the disease: ``log LR(case | d) = sum over observed q of log LR(q | d) + sum over
excluded x of log LR(not x | d)``.

* ``f(t)``: an annotation's frequency. HPO frequency terms count as the middle of their range; a
  case-series count ``n/m`` is shrunk towards the pooled frequency of all counts ``p0`` (empirical
  Bayes, a Beta prior of strength ``PRIOR_STRENGTH``: ``(n + k p0) / (m + k)``), since most counts come
  from a few patients ("1/1"); an annotation without a frequency counts as ``p0``.
* ``F(d, t)``: the frequency of ``t`` in ``d`` with annotation propagation, the largest ``f`` of the
  annotations of ``d`` at or below ``t``; ``bg(t)``: its background, the mean of ``F(·, t)`` over all
  diseases.
* observed ``q``: ``LR = max over ancestors a of q (q included) of F(d, a) / bg(a)``: exact when ``d``
  has ``q`` (``a = q``); through a more general ``a`` it reads ``P(q | d) = F(d, a) P(q | a)`` with
  ``P(q | a) = bg(q) / bg(a)`` from the background. The roots (All, Phenotypic abnormality) explain
  nothing. A feature the disease does not explain still happens (incomplete annotations, a second
  cause): ``P(q | d)`` is a mixture ``(1 - eps) P_model + eps bg(q)``, so ``LR = (1 - eps) LR_model +
  eps``. ``NOT_ANNOTATED`` when ``d`` is annotated ``NOT`` to have ``q`` or an ancestor of it.
  Vectorised as a Resnik similarity with ``-log bg`` as information content:
  ``log LR_model(q | d) = max over d's annotations t of [log f(t) + max over common ancestors a of
  -log bg(a)]``.
* excluded ``x``: ``LR = max(1 - F(d, x), false_negative) / (1 - bg(x))`` for a disease that has ``x``
  at least very frequently (HPO's 80% bound), ``1 / (1 - bg(x))`` for the others: the absence of an
  occasional feature says little (not developed yet; and published cases list as absent the features
  of their own disease's spectrum, so that on the dev cases the full formula costs top-1).
* the case is reduced to its most specific observed terms and most general excluded terms (the others
  are implied); an excluded term that an observed one implies is ignored.

**medkg score** = ``z(log LR) + z(Resnik) + z(embedding)``, each standardised over the diseases ranked,
equal weights: the LR above; the patient->disease Resnik best-match average (each observed term
explained by the disease's closest annotation; information content ``IC(t) = -log`` of the share of
diseases annotated with ``t`` or a descendant); and the same best-match average by meaning, the cosine
of each observed term's embedding to that of the disease's closest annotation (the entity index's
vectors of "name: definition. Synonyms: ..."; :meth:`PhenotypeIndex.embed_terms`). Three views of one
match with different failure modes: the LR leans on frequencies, Resnik on the ontology's ``IS_A``
alone, the embedding on what the terms say, across the ontology's branches ("Frequent falls" and
"Falls" share no informative ancestor; cosine 0.79). Without term vectors the score is the first two.
The default embedder is a general-domain sentence model: names built alike score high whatever
they mean ("Abnormality of the kidney" and "... of the liver", 0.85), which the other two views
correct; a biomedical model can be configured (``MEDKG_EMBEDDING_MODEL``).

**baselines**: Resnik best-match average over both directions (funSimAvg), two ways: ``scores``'s
baseline on the phenotype annotations with the IC above; ``pyhpo_scores`` as pyhpo computes it
(``HPOSet.similarity(kind="omim", method="resnik", combine="funSimAvg")``): a disease's set is every
HPO term it is annotated with (mode of inheritance, clinical course, modifiers too), the IC counts the
diseases of the namespace ranked. The extra terms weigh on the disease->patient half, so a disease
with one or two phenotypes no longer matches perfectly: that, not the IC, is what separates pyhpo's
figure from the first (on the dev phenopackets).

**candidate genes** (optional; the genes a sequencing test found variants in): the ranking keeps only
the diseases associated with them (``ASSOCIATED_WITH`` from a gene), each scored and standardised as
among all the diseases of the namespace, so a gene with several diseases (LMNA, FBN1) gets them in the
order of the phenotype match.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kg.curie import CurieError, curie_prefix, normalize_curie
from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.negation import by_polarity, negated_mentions

if TYPE_CHECKING:
    from kg.entity_index import EntityIndex
    from kg.linker import EntityLinker

__all__ = [
    "PhenotypeIndex",
    "Candidate",
    "CaseTerms",
    "LRParams",
    "disease_namespaces",
    "frequency_weight",
    "frequency_evidence",
    "terms_in_text",
    "terms_mentioned",
]

IS_A, HAS_PHENOTYPE, ASSOCIATED_WITH = "IS_A", "HAS_PHENOTYPE", "ASSOCIATED_WITH"
REPLACED_BY = "REPLACED_BY"
# HPO annotation aspects besides P: inheritance, clinical course, modifier, past medical history
OTHER_ASPECTS = ("HAS_INHERITANCE", "HAS_CLINICAL_COURSE", "HAS_MODIFIER", "HAS_PAST_MEDICAL_HISTORY")
DISEASE_PREFIXES = ("OMIM:", "ORPHA:", "DECIPHER:")
# HPO frequency terms -> the middle of their range
_FREQUENCY_TERMS = {
    "HP:0040280": 1.0,  # obligate
    "HP:0040281": 0.895,  # very frequent 80-99%
    "HP:0040282": 0.545,  # frequent 30-79%
    "HP:0040283": 0.17,  # occasional 5-29%
    "HP:0040284": 0.025,  # very rare 1-4%
    "HP:0040285": 0.0,  # excluded
}
DEFAULT_FREQUENCY = 0.5
PRIOR_STRENGTH = 1000.0  # pseudo-patients of the Beta prior on case-series counts (chosen on the tuning half)
_HPO_ID = re.compile(r"HP:\d{7}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_RATIO = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")

Frequency = float | tuple[int, int] | None  # a frequency, a count n/m, or unknown


@dataclass(frozen=True)
class LRParams:
    """The model's constants. ``false_positive`` (eps) was chosen on the tuning half of the dev cases;
    ``false_negative`` and ``not_annotated`` are LIRICAL's."""

    false_positive: float = 0.3  # eps: share of P(q | d) that is the background (unexplained features)
    false_negative: float = 0.01  # P(a feature is absent | the disease has it), the least
    not_annotated: float = 0.001  # LR of an observed term the disease is annotated NOT to have
    excluded_min_frequency: float = 0.8  # an excluded term counts against diseases this frequent in it
    resnik_weight: float = 1.0  # weight of z(Resnik) next to z(log LR); 0 ranks by the LR alone
    # weight of z(embedding) (the terms' meaning; only with term vectors attached): the equal weight of
    # the other views, which is also what the tuning half chose among 0.25, 0.5 and 1
    embedding_weight: float = 1.0
    collapse: bool = True  # most specific observed / most general excluded terms only


def disease_namespaces(names: Iterable[str]) -> list[str]:
    """Disease namespaces as a user spells them (``omim``, ``MIM``, ``Orphanet:``, ``ordo``) in their
    canonical form (``OMIM``, ``ORPHA``; each once, order kept). Raises ``InvalidInput`` for a name that
    is not one of ``DISEASE_PREFIXES``: a ranking restricted to it would be empty."""
    allowed = [p.rstrip(":") for p in DISEASE_PREFIXES]
    out: list[str] = []
    for name in names:
        try:  # the prefix of a CURIE of it: kg.curie's spellings (MIM, Orphanet, ORDO...), upper case
            prefix = curie_prefix(normalize_curie(f"{name.strip().rstrip(':')}:1"))
        except CurieError:
            prefix = None
        if prefix not in allowed:
            raise InvalidInput(f"unknown disease namespace {name!r}: expected one of {', '.join(allowed)}")
        out.append(prefix)
    return list(dict.fromkeys(out))


def frequency_weight(values: Iterable[str], default: float = DEFAULT_FREQUENCY) -> float:
    """An annotation's frequency (HPO frequency term, "3/10" or "25%"; the largest if several)."""
    found = []
    for value in values:
        if value in _FREQUENCY_TERMS:
            found.append(_FREQUENCY_TERMS[value])
        elif m := _RATIO.match(value):
            n, d = int(m[1]), int(m[2])
            if d:
                found.append(min(1.0, n / d))
        elif m := _PERCENT.match(value):
            found.append(min(1.0, float(m[1]) / 100))
    return max(found) if found else default


def frequency_evidence(values: Iterable[str]) -> Frequency:
    """What an annotation says about its frequency: the pooled count ``(n, m)`` of its "n/m" values,
    else the largest HPO frequency term or percentage, else ``None``."""
    values = list(values)
    counts = [(int(m[1]), int(m[2])) for v in values if (m := _RATIO.match(v)) and int(m[2])]
    if counts:
        n, m = sum(c[0] for c in counts), sum(c[1] for c in counts)
        return (min(n, m), m)
    f = frequency_weight(values, default=-1.0)
    return None if f < 0 else f


PHENOTYPIC_ABNORMALITY = "HP:0000118"
NOT_PHENOTYPIC = (
    "not a phenotypic abnormality (an inheritance, onset or course, or a root): says nothing about which disease"
)


@dataclass
class CaseTerms:
    """A case's HPO terms as a ranking reads them (:meth:`PhenotypeIndex.read_case`)."""

    observed: list[str]  # counted
    excluded: list[str]  # counted
    unknown: list[str]  # not in the graph: ignored
    ignored: dict[str, str]  # known, not counted: why


@dataclass
class Candidate:
    disease: str
    score: float  # the sum of the views (z(log LR) + z(Resnik) + z(embedding)) among the diseases ranked
    baseline: float  # Resnik best-match average, both directions
    # (observed, disease term, Resnik similarity): each observed term that shares an ancestor below the
    # roots with an annotation of the disease, and the annotation behind its LR (else the closest)
    matches: list[tuple[str, str, float]] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)  # excluded terms it has / NOT-annotated observed
    pmids: list[str] = field(default_factory=list)
    genes: list[str] = field(default_factory=list)
    log10_lr: float = 0.0  # the likelihood ratio of the case, log10
    # the embedding view: the mean over the observed terms of the cosine of each to the disease's
    # closest annotation by meaning (None without term vectors); and those closest annotations
    # (observed, disease term, cosine)
    embedding: float | None = None
    semantic_matches: list[tuple[str, str, float]] = field(default_factory=list)
    # (term, "observed" | "excluded", LR): each observed term and each excluded term that counts against
    # the disease; excluded terms it does not have add a factor 1 / (1 - bg(x)) each
    likelihood_ratios: list[tuple[str, str, float]] = field(default_factory=list)


def terms_mentioned(candidates: Iterable[Candidate], *case: Iterable[str]) -> list[str]:
    """Every HPO term a ranking mentions, sorted: the case's (``case``: observed, excluded...), the
    matched annotations (by the ontology and by meaning), the terms with a likelihood ratio, those named in
    contradictions."""
    terms = {t for group in case for t in group}
    for c in candidates:
        terms.update(t for _, t, _ in c.matches)
        terms.update(t for _, t, _ in c.semantic_matches)
        terms.update(t for t, _, _ in c.likelihood_ratios)
        terms.update(t for reason in c.contradictions for t in _HPO_ID.findall(reason))
    return sorted(terms)


def terms_in_text(linker: EntityLinker, text: str) -> tuple[list[str], list[str]]:
    """The HPO terms the entity linker finds in ``text``: those it states, and those it negates ("no
    hypotonia", "seizures were absent"; a term both stated and negated counts as stated). Control
    characters read as spaces (a NUL pasted in hid the mention beside it)."""
    text = _CONTROL.sub(" ", text)
    mentions = linker.link_query(text)
    negations = negated_mentions(text, [(m.start, m.end) for m in mentions])
    found = zip(mentions, negations, strict=True)
    return by_polarity((i, negative) for m, negative in found for i in m.ids if i.startswith("HP:"))


class PhenotypeIndex:
    # of the derived arrays; an index pickled by another version derives them again. 5: no disease
    # without an annotation to a current term (rank() failed on one), PMIDs of repeated annotations merged;
    # 6: annotations seen in no patient (0/m, Excluded) left out; 7: term vectors (the embedding view)
    CACHE_VERSION = 7

    def __init__(
        self,
        terms: list[str],
        parents: dict[str, list[str]],
        annotations: dict[str, list[tuple[str, Frequency, list[str]]]],
        negated: dict[str, set[str]],
        other: dict[str, list[str]] | None = None,
    ) -> None:
        """``other``: each disease's HPO terms of the other aspects (``OTHER_ASPECTS``), used only by
        ``pyhpo_scores``."""
        started = time.perf_counter()
        # an annotation whose frequency is zero ("0/11": none of 11 patients; "Excluded (0%)") says the
        # disease does not have the feature: no match, no frequency, no citation for having it (pyhpo, which
        # counts them, keeps them in its disease sets)
        none_had = {d: [a[0] for a in ann if _seen_in_none(a[1])] for d, ann in annotations.items()}
        annotations = {d: [a for a in ann if not _seen_in_none(a[1])] for d, ann in annotations.items()}
        self.terms = terms
        self.term_index = {t: i for i, t in enumerate(terms)}
        n = len(terms)
        # ancestors (self included) by a walk up the IS_A edges
        self.ancestors: list[np.ndarray] = []
        memo: dict[int, set[int]] = {}

        def up(i: int) -> set[int]:
            if i in memo:
                return memo[i]
            memo[i] = {i}  # cycles (none in HPO) end here
            out = {i}
            for p in parents.get(terms[i], ()):
                j = self.term_index.get(p)
                if j is not None:
                    out |= up(j)
            memo[i] = out
            return out

        sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
        for i in range(n):
            self.ancestors.append(np.fromiter(sorted(up(i)), dtype=np.int32))
        descendants: list[list[int]] = [[] for _ in range(n)]
        for i, anc in enumerate(self.ancestors):
            for a in anc:
                descendants[a].append(i)
        self.descendants = [np.asarray(d, dtype=np.int32) for d in descendants]

        # a disease none of whose annotations names a current term (all obsolete, or dropped) cannot be
        # scored: left out
        self.diseases = sorted(d for d, ann in annotations.items() if any(t in self.term_index for t, _, _ in ann))
        self.disease_index = {d: i for i, d in enumerate(self.diseases)}
        flat_terms: list[int] = []
        given: list[float] = []  # a frequency term or percentage, NaN if none
        counts: list[tuple[int, int]] = []  # n/m, (0, 0) if none
        offsets: list[int] = []
        self.pmids: dict[tuple[str, str], list[str]] = {}
        for d in self.diseases:
            offsets.append(len(flat_terms))
            for term, freq, pmids in annotations[d]:
                i = self.term_index.get(term)
                if i is None:
                    continue
                flat_terms.append(i)
                given.append(float(freq) if isinstance(freq, (int, float)) else math.nan)
                counts.append((int(freq[0]), int(freq[1])) if isinstance(freq, tuple) else (0, 0))
                if pmids:  # the same term annotated twice (two sources): the PMIDs of both
                    self.pmids[(d, term)] = list(dict.fromkeys([*self.pmids.get((d, term), []), *pmids]))
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.flat_terms = np.asarray(flat_terms, dtype=np.int32)
        self.flat_given = np.asarray(given, dtype=np.float32)
        self.flat_counts = np.asarray(counts, dtype=np.float32).reshape(-1, 2)
        self.negated = {d: {self.term_index[t] for t in ts if t in self.term_index} for d, ts in negated.items()}
        # every HPO term of each disease (all aspects, distinct): pyhpo's disease sets
        sets = []
        for i, d in enumerate(self.diseases):
            start = offsets[i]
            end = offsets[i + 1] if i + 1 < len(offsets) else len(flat_terms)
            extra = (self.term_index[t] for t in [*(other or {}).get(d, ()), *none_had[d]] if t in self.term_index)
            sets.append(sorted(set(flat_terms[start:end]) | set(extra)))
        self.set_offsets = np.cumsum([0] + [len(x) for x in sets[:-1]]).astype(np.int64)
        self.set_terms = np.asarray([t for x in sets for t in x], dtype=np.int32)
        self.genes: dict[str, list[str]] = {}
        # an obsolete term -> the current terms that replaced it; or, without one, its last parents
        self.replaced_by: dict[str, list[str]] = {}
        self.obsolete_parents: dict[str, list[str]] = {}
        # each term's embedding (normalised; a zero row for a term without one) and the model's name:
        # the embedding view, once attach_vectors is called
        self.term_vectors: np.ndarray | None = None
        self.vector_model: str | None = None
        self._derive()
        self.build_seconds = round(time.perf_counter() - started, 2)

    def _derive(self) -> None:
        """Everything computed from the ontology and the annotations: frequencies, propagated
        frequencies, background frequencies, both information contents."""
        n, n_dis = len(self.terms), len(self.diseases)
        total = max(1, n_dis)
        self.version = self.CACHE_VERSION
        self.counts = np.diff(np.append(self.offsets, len(self.flat_terms))).astype(np.float32)
        # roots and their children (All; Phenotypic abnormality, Mode of inheritance, ...): no evidence
        roots = {i for i in range(n) if len(self.ancestors[i]) == 1}
        self.top = np.asarray([i for i in range(n) if set(self.ancestors[i].tolist()) - {i} <= roots], np.int32)
        # annotation frequencies: counts shrunk towards the pooled frequency p0 of all counts
        nm = self.flat_counts
        self.prior_frequency = float(nm[:, 0].sum() / nm[:, 1].sum()) if nm[:, 1].sum() else DEFAULT_FREQUENCY
        k, p0 = PRIOR_STRENGTH, self.prior_frequency
        shrunk = (nm[:, 0] + k * p0) / (nm[:, 1] + k)
        self.flat_freq = np.where(
            nm[:, 1] > 0, shrunk, np.where(np.isnan(self.flat_given), p0, self.flat_given)
        ).astype(np.float32)
        with np.errstate(divide="ignore"):
            self.log_freq = np.log(self.flat_freq).astype(np.float32)
        # F(d, t) for every term t at or above an annotation of d: (term, disease) pairs sorted by term
        lengths = np.fromiter((len(self.ancestors[t]) for t in self.flat_terms), np.int64, len(self.flat_terms))
        up = np.concatenate([self.ancestors[t] for t in self.flat_terms]) if len(self.flat_terms) else np.zeros(0)
        owner = np.repeat(np.repeat(np.arange(n_dis, dtype=np.int64), self.counts.astype(np.int64)), lengths)
        freq = np.repeat(self.flat_freq, lengths)
        key = up.astype(np.int64) * total + owner
        order = np.lexsort((-freq, key))
        key, freq = key[order], freq[order]
        first = np.ones(len(key), dtype=bool)
        first[1:] = key[1:] != key[:-1]  # the largest frequency of each (term, disease)
        key, freq = key[first], freq[first]
        prop_term = key // total
        self.prop_disease = (key % total).astype(np.int32)
        self.prop_freq = freq.astype(np.float32)
        with np.errstate(divide="ignore"):
            self.prop_log_freq = np.log(self.prop_freq).astype(np.float32)
        self.prop_ptr = np.searchsorted(prop_term, np.arange(n + 1)).astype(np.int64)
        covered = np.diff(self.prop_ptr)
        # IC for Resnik: the share of diseases annotated with t or a descendant
        self.ic = np.where(covered > 0, -np.log(np.maximum(covered, 1) / total), -math.log(1 / total)).astype(
            np.float32
        )
        self.ic_order = [anc[np.argsort(self.ic[anc], kind="stable")] for anc in self.ancestors]
        # background frequency, and its -log as the LR's information content
        bg = np.bincount(prop_term, weights=freq, minlength=n) / total
        self.bg = np.maximum(bg, 0.5 / total)  # a term no disease has: half a disease
        self.lr_ic = (-np.log(self.bg)).astype(np.float32)
        self.lr_ic[self.top] = -np.inf
        pairs = [(self.disease_index[d], t) for d, ts in self.negated.items() if d in self.disease_index for t in ts]
        self.neg_disease = np.asarray([p[0] for p in pairs], dtype=np.int64)
        self.neg_terms = np.asarray([p[1] for p in pairs], dtype=np.int64)
        self._masks: dict[tuple[str, ...], np.ndarray] = {}
        self.__dict__.pop("_annotation_cache", None)
        self._set_ic: dict[tuple[str, ...], tuple[np.ndarray, list[np.ndarray]]] = {}

    def __getstate__(self) -> dict:  # the caches are rebuilt on first use
        return {k: v for k, v in self.__dict__.items() if k not in ("_set_ic", "_by_gene", "_annotation_cache")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._set_ic = {}
        self.__dict__.setdefault("replaced_by", {})
        self.__dict__.setdefault("obsolete_parents", {})
        self.__dict__.setdefault("term_vectors", None)
        self.__dict__.setdefault("vector_model", None)
        if state.get("version") != self.CACHE_VERSION:  # pickled by an older medkg: derive again
            if "flat_given" not in state:  # version 1 kept only a frequency per annotation
                self.flat_given = np.asarray(state["flat_freq"], dtype=np.float32)
                self.flat_counts = np.zeros((len(self.flat_given), 2), dtype=np.float32)
            if "set_terms" not in state:  # before version 3: the phenotype annotations only
                self.set_terms, self.set_offsets = self.flat_terms, self.offsets
            self._drop_unannotated()
            self._derive()

    def _drop_unannotated(self) -> None:
        """Leave out the diseases without an annotation (which an index pickled before version 5 may
        hold): their offsets, and their terms of the other aspects."""
        sizes = np.diff(np.append(self.offsets, len(self.flat_terms)))
        keep = sizes > 0
        if keep.all():
            return
        set_sizes = self.set_sizes
        self.diseases = [d for d, kept in zip(self.diseases, keep.tolist(), strict=True) if kept]
        self.disease_index = {d: i for i, d in enumerate(self.diseases)}
        self.offsets = (np.cumsum(sizes[keep]) - sizes[keep]).astype(np.int64)
        self.set_terms = self.set_terms[np.repeat(keep, set_sizes)]
        self.set_offsets = (np.cumsum(set_sizes[keep]) - set_sizes[keep]).astype(np.int64)
        self.__dict__.pop("_by_gene", None)

    # ---- construction from the graph ----------------------------------------------------------
    @classmethod
    def from_graph(cls, store: BaseGraphStore, page: int = 20_000) -> PhenotypeIndex:
        terms: list[str] = []
        obsolete: list[str] = []
        diseases: list[str] = []
        after = ""
        while rows := store.scan_entities(after=after, limit=page):
            after = rows[-1].id
            for e in rows:
                if e.id.startswith("HP:"):
                    (obsolete if e.obsolete else terms).append(e.id)
                elif e.id.startswith(DISEASE_PREFIXES):
                    diseases.append(e.id)
        parents: dict[str, list[str]] = defaultdict(list)
        for child, _rel, parent in store.edge_rows(terms, [IS_A]):
            if parent["id"].startswith("HP:"):
                parents[child].append(parent["id"])
        annotations: dict[str, list[tuple[str, Frequency, list[str]]]] = defaultdict(list)
        negated: dict[str, set[str]] = defaultdict(set)
        for disease, rel, term in store.edge_rows(diseases, [HAS_PHENOTYPE]):
            evidence = json.loads(rel["evidence"]) if rel.get("evidence") else {}
            if _extracted(evidence):
                continue
            if rel.get("negated"):
                negated[disease].add(term["id"])
            else:
                frequency = frequency_evidence(evidence.get("frequency", []))
                annotations[disease].append((term["id"], frequency, evidence.get("pmids", [])))
        other: dict[str, list[str]] = defaultdict(list)
        for disease, rel, term in store.edge_rows(diseases, list(OTHER_ASPECTS)):
            if not rel.get("negated") and term["id"].startswith("HP:"):
                other[disease].append(term["id"])
        index = cls(sorted(terms), parents, annotations, negated, other)
        for disease, rel, gene in store.edge_rows(index.diseases, [ASSOCIATED_WITH], direction="in"):
            # a negated association ("not associated with", from an extraction) is no candidate gene; a
            # symbol stated by two sources (or by an HGNC and an NCBIGene entity) is listed once
            evidence = json.loads(rel["evidence"]) if rel.get("evidence") else {}
            if gene.get("category") == "Gene" and not rel.get("negated") and not _extracted(evidence):
                symbols = index.genes.setdefault(disease, [])
                if gene["name"] not in symbols:
                    symbols.append(gene["name"])
        # An obsolete term stands for what replaced it (OBO ``replaced_by``); a term a newer release made
        # obsolete without saying by what keeps its last parents (``ingest/hpo_update.py``).
        links = {REPLACED_BY: index.replaced_by, IS_A: index.obsolete_parents}
        for term, rel, target in store.edge_rows(obsolete, list(links)):
            if target["id"] in index.term_index:
                links[rel["type"]].setdefault(term, []).append(target["id"])
        return index

    # ---- the embedding view --------------------------------------------------------------------
    def attach_vectors(self, vectors: np.ndarray, model: str) -> None:
        """Give every term (in ``self.terms`` order) its embedding, from ``model``: rows normalised, a
        zero row for a term without one (it matches nothing by meaning). Turns the embedding view on."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(self.terms):
            raise ValueError(f"term vectors must have one row per term ({len(self.terms)}), got {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.term_vectors = vectors / np.where(norms > 0, norms, 1.0)
        self.vector_model = model
        self.__dict__.pop("_annotation_cache", None)

    def embed_terms(self, store: BaseGraphStore, entity_index: EntityIndex, progress: bool = False) -> int:
        """Attach every term's vector: the entity index's where it holds the term's current text from
        its model, else embedded now with the same text and model. Returns how many were embedded now."""
        entities = store.get_entities(self.terms)
        vectors, embedded = entity_index.vectors([entities.get(t) for t in self.terms], progress=progress)
        self.attach_vectors(vectors, entity_index.embedder.signature)
        return embedded

    def views(self, params: LRParams | None = None) -> list[str]:
        """The views a score adds up (each standardised over the diseases ranked)."""
        p = params or LRParams()
        out = ["likelihood_ratio"]
        if p.resnik_weight:
            out.append("resnik")
        if p.embedding_weight and self.term_vectors is not None:
            out.append("embedding")
        return out

    def _annotation_vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """The vectors of the distinct annotated terms, and for each annotation its row among them."""
        if "_annotation_cache" not in self.__dict__:
            assert self.term_vectors is not None
            distinct, row = np.unique(self.flat_terms, return_inverse=True)
            self.__dict__["_annotation_cache"] = (np.ascontiguousarray(self.term_vectors[distinct]), row)
        return self.__dict__["_annotation_cache"]

    def _embedding_to_diseases(self, terms: Sequence[int]) -> np.ndarray:
        """The embedding best-match average of ``terms`` to each disease: for each term the cosine to the
        disease's closest annotation by meaning, averaged over the terms. A term's meaning reaches
        across the ontology's branches, where Resnik needs a shared ancestor ("Frequent falls" and
        "Falls")."""
        assert self.term_vectors is not None
        vectors, row = self._annotation_vectors()
        cosines = self.term_vectors[list(terms)] @ vectors.T  # (terms, distinct annotated terms)
        total = np.zeros(len(self.diseases), dtype=np.float32)
        for per_term in cosines:  # one term at a time: 1-D reduceat stays linear in the terms
            total += np.maximum.reduceat(per_term[row], self.offsets)
        return total / max(1, len(terms))

    # ---- scoring -----------------------------------------------------------------------------
    def _similarity_to_all(self, q: int, ic: np.ndarray, order: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """Resnik similarity of term ``q`` to every term under ``ic``: the IC of their most informative
        common ancestor among ``order`` (``q``'s ancestors by increasing IC; ``fill`` where none)."""
        sim = np.full(len(self.terms), fill, dtype=np.float32)
        for a in order:  # general -> specific: later (higher IC) ancestors overwrite
            sim[self.descendants[a]] = ic[a]
        return sim

    def _resnik(self, terms: Sequence[int]) -> np.ndarray:
        return np.stack([self._similarity_to_all(q, self.ic, self.ic_order[q]) for q in terms])

    def _lr_order(self, q: int) -> np.ndarray:
        anc = self.ancestors[q]
        anc = anc[np.isfinite(self.lr_ic[anc])]
        return anc[np.argsort(self.lr_ic[anc], kind="stable")]

    def current(self, terms: Iterable[str], broaden: bool = True) -> list[str]:
        """``terms`` (order kept) with each obsolete one replaced by the terms that replaced it, or else
        (``broaden``: for observed terms, never excluded ones) by its last parents."""

        def now(t: str) -> list[str]:
            return self.replaced_by.get(t) or (self.obsolete_parents.get(t) if broaden else None) or [t]

        return list(dict.fromkeys(r for t in terms for r in now(t)))

    def replacements(self, terms: Iterable[str], broaden: bool = True) -> dict[str, list[str]]:
        """The obsolete terms among ``terms`` that ``current`` replaces, with what replaces them."""
        return {t: now for t in dict.fromkeys(terms) if (now := self.current([t], broaden)) != [t]}

    def known(self, terms: Iterable[str], broaden: bool = True) -> tuple[list[str], list[str]]:
        """The terms the index knows (an obsolete one as ``current`` replaces it; ``broaden=False`` for
        excluded terms), and the rest, which a ranking ignores."""
        ids = self.current(terms, broaden)
        return [t for t in ids if t in self.term_index], [t for t in ids if t not in self.term_index]

    def _phenotypic(self, i: int) -> bool:
        """Whether term ``i`` is a phenotypic abnormality (below HP:0000118, not it): a mode of
        inheritance, an onset or a clinical course says nothing about which disease, nor does the root
        (an ontology without HP:0000118 counts every term)."""
        root = self.term_index.get(PHENOTYPIC_ABNORMALITY)
        return root is None or (i != root and bool((self.ancestors[i] == root).any()))

    def read_case(self, observed: Sequence[str], excluded: Sequence[str] = ()) -> CaseTerms:
        """The case's terms sorted out: the observed and excluded ones that count (an obsolete one as
        ``current`` replaces it), the unknown ones, and the known ones that do not count, with why."""
        obs, unknown = self.known(observed)
        exc, unknown_excluded = self.known(excluded, broaden=False)
        ignored: dict[str, str] = {}
        for t in [*obs, *exc]:
            if not self._phenotypic(self.term_index[t]):
                ignored[t] = NOT_PHENOTYPIC
        obs = [t for t in obs if t not in ignored]
        implied = {int(a) for t in obs for a in self.ancestors[self.term_index[t]]}
        for t in exc:
            if t not in ignored and self.term_index[t] in implied:
                ignored[t] = "an observed term is or implies it: not counted as excluded"
        return CaseTerms(
            observed=obs,
            excluded=[t for t in exc if t not in ignored],
            unknown=list(dict.fromkeys([*unknown, *unknown_excluded])),
            ignored=ignored,
        )

    def case_terms(
        self, observed: Sequence[str], excluded: Sequence[str] = (), collapse: bool = True
    ) -> tuple[list[int], list[int]]:
        """The indices of the terms that count: the most specific observed terms and the most general
        excluded ones (``collapse``); only phenotypic abnormalities; never an excluded term that an
        observed one implies."""
        case = self.read_case(observed, excluded)
        obs = [self.term_index[t] for t in case.observed]
        exc = [self.term_index[t] for t in case.excluded]
        if collapse:
            above = {int(a) for q in obs for a in self.ancestors[q] if a != q}
            obs = [q for q in obs if q not in above]
            below = {int(t) for x in exc for t in self.descendants[x] if t != x}
            exc = [x for x in exc if x not in below]
        return obs, exc

    def _resnik_to_diseases(self, q: int) -> np.ndarray:
        """Resnik similarity of term ``q`` to each disease, the IC of the most informative ancestor of
        ``q`` that the disease has (it or a descendant): the propagated columns of ``q``'s ancestors,
        general to specific, each overwriting the last."""
        out = np.zeros(len(self.diseases), dtype=np.float32)
        for a in self.ic_order[q]:
            if self.ic[a] > 0:
                out[self.prop_disease[self.prop_ptr[a] : self.prop_ptr[a + 1]]] = self.ic[a]
        return out

    def _lr_to_diseases(self, q: int) -> np.ndarray:
        """``log LR_model(q | d) = max over ancestors a of q of log F(d, a) - log bg(a)`` for each
        disease (``-inf`` where no ancestor below the roots is shared)."""
        out = np.full(len(self.diseases), -np.inf, dtype=np.float32)
        for a in self.ancestors[q]:
            if np.isfinite(self.lr_ic[a]):
                s, e = self.prop_ptr[a], self.prop_ptr[a + 1]
                d = self.prop_disease[s:e]
                out[d] = np.maximum(out[d], self.prop_log_freq[s:e] + self.lr_ic[a])
        return out

    def gene_diseases(self, genes: Iterable[str]) -> tuple[np.ndarray, list[str]]:
        """The diseases associated with any of ``genes`` (HGNC symbols, any case), as a mask over
        ``self.diseases``, and the genes given that are associated with none."""
        if "_by_gene" not in self.__dict__:
            by_gene: dict[str, list[int]] = defaultdict(list)
            for disease, symbols in self.genes.items():
                if disease in self.disease_index:
                    for symbol in symbols:
                        by_gene[symbol.upper()].append(self.disease_index[disease])
            self._by_gene = dict(by_gene)
        mask = np.zeros(len(self.diseases), dtype=bool)
        unknown = []
        for gene in dict.fromkeys(genes):
            if (rows := self._by_gene.get(gene.strip().upper())) is None:
                unknown.append(gene)
            else:
                mask[rows] = True
        return mask, unknown

    def known_genes(self, genes: Iterable[str]) -> tuple[list[str], list[str]]:
        """The genes given (each once, case and surrounding spaces aside; blanks dropped) that some
        disease is associated with, and the others."""
        first: dict[str, str] = {}
        for g in genes:
            if g.strip():
                first.setdefault(g.strip().upper(), g.strip())
        genes = list(first.values())
        unknown = self.gene_diseases(genes)[1]
        return [g for g in genes if g not in unknown], unknown

    def _shown(self, prefixes: Sequence[str], genes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The diseases a score is standardised over (those of ``prefixes``) and those it ranks: of
        these, the ones associated with ``genes`` when any are given. Candidate genes filter the
        ranking and never change a disease's score."""
        n = len(self.diseases)
        inside = self._namespace_mask(prefixes) if prefixes else np.ones(n, dtype=bool)
        return inside, (inside & self.gene_diseases(genes)[0]) if genes else inside

    def scores(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        prefixes: Sequence[str] = (),
        params: LRParams | None = None,
        baseline: bool = True,
        genes: Sequence[str] = (),
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(score, baseline, parts)`` for every disease (in ``self.diseases`` order); ``-inf`` outside
        ``prefixes`` and, when ``genes`` are given, for the diseases associated with none of them.
        ``parts["log10_lr"]`` is the likelihood ratio; the baseline is zeros unless ``baseline``. A case
        without an observed term the index knows scores 0 (and ``parts["obs"]`` is empty): nothing to
        rank it by."""
        p = params or LRParams()
        n = len(self.diseases)
        obs, exc = self.case_terms(observed, excluded, p.collapse)
        inside, shown = self._shown(prefixes, genes)
        if not obs or not n:  # nothing to score: every disease ranked ties at 0
            zero = np.where(shown, 0.0, -np.inf).astype(np.float32)
            return zero, zero, {"obs": np.zeros(0, np.int64)}
        resnik = np.mean([self._resnik_to_diseases(q) for q in obs], axis=0)  # patient -> disease
        # likelihood ratio of each observed term: a mixture with the background, or NOT annotated
        model = np.exp(np.stack([self._lr_to_diseases(q) for q in obs]).astype(np.float64))
        term_lr = np.log((1.0 - p.false_positive) * model + p.false_positive)
        if len(self.neg_terms):
            for row, q in enumerate(obs):
                term_lr[row, self.neg_disease[np.isin(self.neg_terms, self.ancestors[q])]] = math.log(p.not_annotated)
        log_lr = term_lr.sum(axis=0)
        # excluded terms: against the diseases that (nearly) always have them
        for x in exc:
            log_lr -= math.log1p(-min(float(self.bg[x]), 0.99))
            s, e = self.prop_ptr[x], self.prop_ptr[x + 1]
            f = self.prop_freq[s:e]
            hit = f >= p.excluded_min_frequency
            log_lr[self.prop_disease[s:e][hit]] += np.log(np.maximum(1.0 - f[hit], p.false_negative))
        score = _z(log_lr, inside)
        if p.resnik_weight:
            score = score + p.resnik_weight * _z(resnik, inside)
        embedding = None
        if p.embedding_weight and self.term_vectors is not None:
            embedding = self._embedding_to_diseases(obs)
            score = score + p.embedding_weight * _z(embedding, inside)
        score = np.where(shown, score, -np.inf).astype(np.float32)
        base = np.zeros(n, dtype=np.float32)
        # every observed term as given (an obsolete one as ``current`` replaces it), not collapsed
        all_obs = list(dict.fromkeys(self.term_index[t] for t in self.current(observed) if t in self.term_index))
        if baseline:  # Resnik best-match average of all the observed terms, both directions
            per_annotation = self._resnik(all_obs)[:, self.flat_terms]  # (n_obs, n_annotations)
            q_to_d = np.maximum.reduceat(per_annotation, self.offsets, axis=1).mean(axis=0)
            d_to_q = np.add.reduceat(per_annotation.max(axis=0), self.offsets) / np.maximum(self.counts, 1)
            base = np.where(shown, (q_to_d + d_to_q) / 2, -np.inf).astype(np.float32)
        parts: dict[str, np.ndarray] = {
            "obs": np.asarray(obs, np.int64),
            "exc": np.asarray(exc, np.int64),
            "all_obs": np.asarray(all_obs, np.int64),
            "term_lr": term_lr,
            "log10_lr": log_lr / math.log(10),
            "resnik": resnik,
            **({"embedding": embedding} if embedding is not None else {}),
        }
        return score, base, parts

    def pyhpo_scores(
        self, observed: Sequence[str], prefixes: Sequence[str] = (), genes: Sequence[str] = ()
    ) -> np.ndarray:
        """pyhpo's set similarity of the observed terms (as given) to every disease in ``prefixes``
        (``-inf`` outside, and for diseases of none of ``genes`` when given): Resnik, funSimAvg, over
        each disease's set of all its HPO terms, the IC ``-log`` of the share of the namespace's
        diseases whose set has the term or a descendant (0 if none)."""
        inside, shown = self._shown(prefixes, genes)
        obs = list(dict.fromkeys(self.term_index[t] for t in observed if t in self.term_index))
        if not obs or not inside.any():
            return np.where(shown, 0.0, -np.inf).astype(np.float32)
        ic, order = self._namespace_ic(prefixes, inside)
        sims = np.stack([self._similarity_to_all(q, ic, order[q]) for q in obs])[:, self.set_terms]
        q_to_d = np.maximum.reduceat(sims, self.set_offsets, axis=1).mean(axis=0)
        d_to_q = np.add.reduceat(sims.max(axis=0), self.set_offsets) / np.maximum(self.set_sizes, 1)
        return np.where(shown, (q_to_d + d_to_q) / 2, -np.inf).astype(np.float32)

    def _namespace_ic(self, prefixes: Sequence[str], inside: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        """pyhpo's IC over the diseases ``inside`` (their sets of all aspects, propagated), and each
        term's ancestors by increasing IC; cached per namespace."""
        key = _prefix_key(prefixes)
        if key not in self._set_ic:
            owner = np.repeat(np.arange(len(self.diseases)), self.set_sizes)
            keep = inside[owner]
            terms, owner = self.set_terms[keep], owner[keep]
            up = np.concatenate([self.ancestors[t] for t in terms]).astype(np.int64)
            who = np.repeat(owner, [len(self.ancestors[t]) for t in terms]).astype(np.int64)
            pairs = np.unique(up * len(self.diseases) + who)  # (term, disease) once each
            cover = np.bincount(pairs // len(self.diseases), minlength=len(self.terms))
            total = max(1, int(inside.sum()))
            ic = np.where(cover > 0, -np.log(np.maximum(cover, 1) / total), 0.0).astype(np.float32)
            self._set_ic[key] = (ic, [anc[np.argsort(ic[anc], kind="stable")] for anc in self.ancestors])
        return self._set_ic[key]

    @property
    def set_sizes(self) -> np.ndarray:
        """The number of distinct HPO terms in each disease's set (all aspects)."""
        return np.diff(np.append(self.set_offsets, len(self.set_terms)))

    def _namespace_mask(self, prefixes: Sequence[str]) -> np.ndarray:
        """The diseases of ``prefixes`` (any spelling ``disease_namespaces`` reads; ``InvalidInput`` for
        another)."""
        key = _prefix_key(prefixes)
        if key not in self._masks:
            self._masks[key] = np.asarray([d.startswith(key) for d in self.diseases], dtype=bool)
        return self._masks[key]

    def rank(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        top_k: int = 10,
        explain: bool = True,
        prefixes: Sequence[str] = (),
        params: LRParams | None = None,
        genes: Sequence[str] = (),
    ) -> list[Candidate]:
        """The ``top_k`` diseases for a case, each with its matched phenotype pairs, the likelihood
        ratio of each term, contradictions, genes and the PMIDs behind the matched annotations. With
        candidate ``genes`` (e.g. those a sequencing test found variants in), only the diseases
        associated with them, scored as among all."""
        p = params or LRParams()
        score, _, parts = self.scores(observed, excluded, prefixes, p, baseline=False, genes=genes)
        if not len(parts["obs"]):
            return []
        k = min(top_k, int(np.isfinite(score).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-score, k - 1)[:k] if k < len(score) else np.arange(len(score))
        order = top[np.lexsort((top, -score[top]))]
        sims = self._resnik(parts["all_obs"].tolist())  # term-level, for the baseline and the matches
        # the LR's term-level similarity (-inf: no common ancestor below the roots), by the rows of sims
        parts["lr_sims"] = np.stack(
            [self._similarity_to_all(q, self.lr_ic, self._lr_order(q), -np.inf) for q in parts["all_obs"]]
        )
        out = []
        for i in (int(i) for i in order):
            cand = Candidate(
                self.diseases[i],
                round(float(score[i]), 4),
                round(self._baseline_of(i, sims), 4),
                log10_lr=round(float(parts["log10_lr"][i]), 4),
            )
            if explain:
                self._explain(cand, i, parts, sims, p)
            out.append(cand)
        return out

    def _annotations_of(self, i: int) -> tuple[int, int]:
        start = int(self.offsets[i])
        end = int(self.offsets[i + 1]) if i + 1 < len(self.offsets) else len(self.flat_terms)
        return start, end

    def _baseline_of(self, i: int, sims: np.ndarray) -> float:
        """The baseline of one disease from the observed terms' Resnik rows (0 without annotations)."""
        start, end = self._annotations_of(i)
        if start == end or not len(sims):
            return 0.0
        block = sims[:, self.flat_terms[start:end]]
        return float((block.max(axis=1).mean() + block.max(axis=0).mean()) / 2)

    def rank_of(self, score: np.ndarray, targets: Iterable[str]) -> int | None:
        """The 1-based rank of the best-placed target under ``score`` (ties: disease order)."""
        idx = [self.disease_index[t] for t in targets if t in self.disease_index]
        if not idx:
            return None
        best = max(idx, key=lambda i: (score[i], -i))
        ahead = int((score > score[best]).sum())
        tied_before = int(((score == score[best]) & (np.arange(len(score)) < best)).sum())
        return ahead + tied_before + 1

    def _explain(self, cand: Candidate, i: int, parts: dict[str, np.ndarray], sims: np.ndarray, p: LRParams) -> None:
        start, end = self._annotations_of(i)
        ann = self.flat_terms[start:end]
        scored = {int(q): row for row, q in enumerate(parts["obs"])}
        pmids: list[str] = []
        for row, q in enumerate(int(x) for x in parts["all_obs"]):
            shared = parts["lr_sims"][row, ann]
            if np.isfinite(shared).any():  # an annotation shares an ancestor with q below the roots: a match
                lr_row = shared + self.log_freq[start:end] if q in scored else None
                if lr_row is not None and np.isfinite(lr_row).any():  # the annotation behind the LR
                    j = int(np.argmax(lr_row))
                else:  # the closest annotation
                    j = int(np.argmax(sims[row, ann]))
                term = self.terms[int(ann[j])]
                similarity = max(0.0, round(float(sims[row, ann[j]]), 3))  # never -0.0 (an IC of -log 1)
                cand.matches.append((self.terms[q], term, similarity))
                pmids += self.pmids.get((cand.disease, term), [])
            if q in scored:
                lr = math.exp(float(parts["term_lr"][scored[q], i]))
                cand.likelihood_ratios.append((self.terms[q], "observed", float(f"{lr:.4g}")))
        has = set(ann.tolist())
        for x in (int(x) for x in parts["exc"]):
            below = [t for t in self.descendants[x].tolist() if t in has]
            if not below:
                continue
            for t in below:
                cand.contradictions.append(f"has {self.terms[t]}, which the patient does not")
            s, e = self.prop_ptr[x], self.prop_ptr[x + 1]
            f = float(self.prop_freq[s:e][np.searchsorted(self.prop_disease[s:e], i)])
            if f >= p.excluded_min_frequency:
                lr = max(1.0 - f, p.false_negative) / (1.0 - min(float(self.bg[x]), 0.99))
                cand.likelihood_ratios.append((self.terms[x], "excluded", float(f"{lr:.4g}")))
        nots = self.negated.get(cand.disease, set())
        for q in (int(x) for x in parts["all_obs"]):
            if nots & set(self.ancestors[q].tolist()):
                cand.contradictions.append(f"annotated NOT to have {self.terms[q]}")
        cand.pmids = list(dict.fromkeys(pmids))[:20]
        cand.genes = sorted(self.genes.get(cand.disease, []))
        if "embedding" in parts and self.term_vectors is not None:
            cand.embedding = round(float(parts["embedding"][i]), 4)
            cosines = self.term_vectors[parts["obs"]] @ self.term_vectors[ann].T
            for row, q in enumerate(int(x) for x in parts["obs"]):
                j = int(np.argmax(cosines[row]))
                if cosines[row, j] > 0:  # a term without a vector (or the disease's) is close to nothing
                    cand.semantic_matches.append(
                        (self.terms[q], self.terms[int(ann[j])], round(float(cosines[row, j]), 3))
                    )


def _extracted(evidence: dict) -> bool:
    """Whether a relation was extracted by a language model from a passage (``ingest/llm_extract.py``
    records the model): evidence for QA, not a curated annotation the ranking may weigh (one sentence
    would otherwise count as a disease's feature, or, negated, as an LR of 1/1000 against it)."""
    return bool(evidence.get("model")) and "passages" in evidence


def _seen_in_none(frequency: Frequency) -> bool:
    """Whether an annotation's frequency says no patient had the feature (a count 0/m, 0%, Excluded)."""
    if isinstance(frequency, tuple):
        return frequency[0] == 0 and frequency[1] > 0
    return frequency is not None and frequency <= 0


def _prefix_key(prefixes: Sequence[str]) -> tuple[str, ...]:
    """The canonical disease prefixes of ``prefixes`` (``("OMIM:", "ORPHA:")``), a cache key."""
    return tuple(sorted(p + ":" for p in disease_namespaces(prefixes)))


def _z(values: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """``values`` standardised over the diseases ranked (``inside``)."""
    v = values[inside].astype(np.float64)
    sd = float(v.std()) if len(v) else 0.0
    return (values - (float(v.mean()) if len(v) else 0.0)) / (sd if sd > 0 else 1.0)
