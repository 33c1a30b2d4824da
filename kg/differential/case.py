"""A case as the differential reads it, and what a ranking answers: the HPO terms of a free text, the
disease namespaces, the case's terms and candidate genes as the index knows them (:class:`CaseReading`),
and the ranked :class:`Candidate` diseases."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kg.curie import CurieError, curie_prefix, normalize_curie
from kg.errors import InvalidInput
from kg.negation import by_polarity, negated_mentions

if TYPE_CHECKING:
    from kg.linker import EntityLinker

__all__ = [
    "DISEASE_PREFIXES",
    "NOT_PHENOTYPIC",
    "PHENOTYPIC_ABNORMALITY",
    "Candidate",
    "CaseReading",
    "CaseTerms",
    "disease_namespaces",
    "prefix_key",
    "terms_in_text",
    "terms_mentioned",
]

DISEASE_PREFIXES = ("OMIM:", "ORPHA:", "DECIPHER:")
PHENOTYPIC_ABNORMALITY = "HP:0000118"
NOT_PHENOTYPIC = (
    "not a phenotypic abnormality (an inheritance, onset or course, or a root): says nothing about which disease"
)
_HPO_ID = re.compile(r"HP:\d{7}")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


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


def prefix_key(prefixes: Sequence[str]) -> tuple[str, ...]:
    """The canonical disease prefixes of ``prefixes`` (``("OMIM:", "ORPHA:")``), a cache key."""
    return tuple(sorted(p + ":" for p in disease_namespaces(prefixes)))


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
    # (term, "observed" | "excluded" | "sex" | "age", LR): each observed term and each excluded term that
    # counts against the disease; excluded terms it does not have add a factor 1 / (1 - bg(x)) each; the
    # patient's sex (the disease's inheritance term) and age (its earliest onset term) where they count
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


class CaseReading:
    """How :class:`~kg.differential.index.PhenotypeIndex` reads a case: its terms (an obsolete one as
    what replaced it; only phenotypic abnormalities count; collapsed to the most specific observed and
    most general excluded ones) and its candidate genes. A mixin over the index's ontology arrays."""

    terms: list[str]
    term_index: dict[str, int]
    ancestors: list[np.ndarray]
    descendants: list[np.ndarray]
    diseases: list[str]
    disease_index: dict[str, int]
    genes: dict[str, list[str]]
    replaced_by: dict[str, list[str]]
    obsolete_parents: dict[str, list[str]]

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
