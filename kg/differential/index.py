"""The phenotype index: built once from the graph (HPO ``IS_A`` edges, the diseases' ``HAS_PHENOTYPE``
annotations with frequency and PMIDs, ``NOT`` annotations, genes, obsolete terms) into numpy arrays that
the scores read, with its terms' embeddings (the embedding view) attached from the entity index."""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from typing import TYPE_CHECKING

import numpy as np

from kg.differential.case import DISEASE_PREFIXES, CaseReading
from kg.differential.explain import Explanations
from kg.differential.frequencies import Frequency, annotation_frequencies, frequency_evidence, seen_in_none
from kg.differential.scoring import Scoring
from kg.graph.base import BaseGraphStore

if TYPE_CHECKING:
    from kg.entity_index import EntityIndex

__all__ = ["ASSOCIATED_WITH", "HAS_PHENOTYPE", "IS_A", "OTHER_ASPECTS", "REPLACED_BY", "PhenotypeIndex"]

IS_A, HAS_PHENOTYPE, ASSOCIATED_WITH = "IS_A", "HAS_PHENOTYPE", "ASSOCIATED_WITH"
REPLACED_BY = "REPLACED_BY"
# HPO annotation aspects besides P: inheritance, clinical course, modifier, past medical history
OTHER_ASPECTS = ("HAS_INHERITANCE", "HAS_CLINICAL_COURSE", "HAS_MODIFIER", "HAS_PAST_MEDICAL_HISTORY")


class PhenotypeIndex(Explanations, Scoring, CaseReading):
    """Every disease's HPO annotations and the ontology as arrays; reads a case (:class:`CaseReading`),
    scores it against every disease (:class:`Scoring`) and ranks them, explained (:class:`Explanations`)."""

    # the version of the derived arrays (and of the cache's stamp); an index pickled by another version
    # derives them again. 5: no disease without an annotation to a current term (rank() failed on one),
    # PMIDs of repeated annotations merged; 6: annotations seen in no patient (0/m, Excluded) left out;
    # 7: term vectors (the embedding view)
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
        none_had = {d: [a[0] for a in ann if seen_in_none(a[1])] for d, ann in annotations.items()}
        annotations = {d: [a for a in ann if not seen_in_none(a[1])] for d, ann in annotations.items()}
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
        # annotation frequencies: counts shrunk towards the pooled frequency of all counts
        self.flat_freq, self.prior_frequency = annotation_frequencies(self.flat_given, self.flat_counts)
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
        self.__dict__.pop("_patient_modes", None)
        self._set_ic: dict[tuple[str, ...], tuple[np.ndarray, list[np.ndarray]]] = {}

    def __getstate__(self) -> dict:  # the caches are rebuilt on first use
        transient = ("_set_ic", "_by_gene", "_annotation_cache", "_patient_modes")
        return {k: v for k, v in self.__dict__.items() if k not in transient}

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


def _extracted(evidence: dict) -> bool:
    """Whether a relation was extracted by a language model from a passage (``ingest/llm_extract.py``
    records the model): evidence for QA, not a curated annotation the ranking may weigh (one sentence
    would otherwise count as a disease's feature, or, negated, as an LR of 1/1000 against it)."""
    return bool(evidence.get("model")) and "passages" in evidence
