"""A case scored against every disease with vectorised numpy over the index's arrays: the phenotype
likelihood ratio (in the manner of LIRICAL), the Resnik and embedding best-match averages, their sum of
z-scores (the medkg score), and pyhpo's set similarity as a baseline (docs/differential.md)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from kg.differential.case import CaseReading, prefix_key
from kg.differential.frequencies import LRParams
from kg.differential.patient import Patient, patient_factors

__all__ = ["Scoring"]


class Scoring(CaseReading):
    """The scores of :class:`~kg.differential.index.PhenotypeIndex`. A mixin over the index's arrays;
    it keeps its caches (``_masks``, ``_set_ic``, ``_annotation_cache``) beside them, unpickled."""

    flat_terms: np.ndarray
    offsets: np.ndarray
    counts: np.ndarray
    set_terms: np.ndarray
    set_offsets: np.ndarray
    ic: np.ndarray
    ic_order: list[np.ndarray]
    lr_ic: np.ndarray
    bg: np.ndarray
    prop_ptr: np.ndarray
    prop_disease: np.ndarray
    prop_freq: np.ndarray
    prop_log_freq: np.ndarray
    neg_disease: np.ndarray
    neg_terms: np.ndarray
    term_vectors: np.ndarray | None
    _masks: dict[tuple[str, ...], np.ndarray]
    _set_ic: dict[tuple[str, ...], tuple[np.ndarray, list[np.ndarray]]]

    # ---- the embedding view --------------------------------------------------------------------
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

    # ---- term similarities ----------------------------------------------------------------------
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
        disease (``-inf`` where no ancestor below the roots is shared): exact when ``d`` has ``q``;
        through a more general ``a`` it reads ``P(q | d) = F(d, a) P(q | a)`` with ``P(q | a) = bg(q) /
        bg(a)``. A Resnik similarity with ``-log bg`` as information content."""
        out = np.full(len(self.diseases), -np.inf, dtype=np.float32)
        for a in self.ancestors[q]:
            if np.isfinite(self.lr_ic[a]):
                s, e = self.prop_ptr[a], self.prop_ptr[a + 1]
                d = self.prop_disease[s:e]
                out[d] = np.maximum(out[d], self.prop_log_freq[s:e] + self.lr_ic[a])
        return out

    # ---- the diseases ranked -------------------------------------------------------------------
    def _shown(self, prefixes: Sequence[str], genes: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The diseases a score is standardised over (those of ``prefixes``) and those it ranks: of
        these, the ones associated with ``genes`` when any are given. Candidate genes filter the
        ranking and never change a disease's score."""
        n = len(self.diseases)
        inside = self._namespace_mask(prefixes) if prefixes else np.ones(n, dtype=bool)
        return inside, (inside & self.gene_diseases(genes)[0]) if genes else inside

    def _namespace_mask(self, prefixes: Sequence[str]) -> np.ndarray:
        """The diseases of ``prefixes`` (any spelling ``disease_namespaces`` reads; ``InvalidInput`` for
        another)."""
        key = prefix_key(prefixes)
        if key not in self._masks:
            self._masks[key] = np.asarray([d.startswith(key) for d in self.diseases], dtype=bool)
        return self._masks[key]

    # ---- scores --------------------------------------------------------------------------------
    def scores(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        prefixes: Sequence[str] = (),
        params: LRParams | None = None,
        baseline: bool = True,
        genes: Sequence[str] = (),
        patient: Patient | None = None,
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(score, baseline, parts)`` for every disease (in ``self.diseases`` order); ``-inf`` outside
        ``prefixes`` and, when ``genes`` are given, for the diseases associated with none of them. The
        ``patient``'s sex and age multiply the likelihood ratio (``kg/differential/patient.py``).
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
        # likelihood ratio of each observed term: a mixture with the background (a feature the disease
        # does not explain still happens: incomplete annotations, a second cause), or NOT annotated
        model = np.exp(np.stack([self._lr_to_diseases(q) for q in obs]).astype(np.float64))
        term_lr = np.log((1.0 - p.false_positive) * model + p.false_positive)
        if len(self.neg_terms):
            for row, q in enumerate(obs):
                term_lr[row, self.neg_disease[np.isin(self.neg_terms, self.ancestors[q])]] = math.log(p.not_annotated)
        log_lr = term_lr.sum(axis=0)
        # excluded terms: against the diseases that (nearly) always have them; the absence of an
        # occasional feature says little (not developed yet; published cases list as absent the features
        # of their own disease's spectrum: the full formula cost top-1 on the dev cases)
        for x in exc:
            log_lr -= math.log1p(-min(float(self.bg[x]), 0.99))
            s, e = self.prop_ptr[x], self.prop_ptr[x + 1]
            f = self.prop_freq[s:e]
            hit = f >= p.excluded_min_frequency
            log_lr[self.prop_disease[s:e][hit]] += np.log(np.maximum(1.0 - f[hit], p.false_negative))
        patient_why: dict[int, list[tuple[str, str, float]]] = {}
        if patient:
            factors, patient_why = patient_factors(self, patient)
            log_lr = log_lr + factors
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
            "patient": patient_why,  # type: ignore[dict-item]  # disease row -> (term, "sex" | "age", LR)
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
        key = prefix_key(prefixes)
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

    def rank_of(self, score: np.ndarray, targets: Iterable[str]) -> int | None:
        """The 1-based rank of the best-placed target under ``score`` (ties: disease order)."""
        idx = [self.disease_index[t] for t in targets if t in self.disease_index]
        if not idx:
            return None
        best = max(idx, key=lambda i: (score[i], -i))
        ahead = int((score > score[best]).sum())
        tied_before = int(((score == score[best]) & (np.arange(len(score)) < best)).sum())
        return ahead + tied_before + 1


def _z(values: np.ndarray, inside: np.ndarray) -> np.ndarray:
    """``values`` standardised over the diseases ranked (``inside``)."""
    v = values[inside].astype(np.float64)
    sd = float(v.std()) if len(v) else 0.0
    return (values - (float(v.mean()) if len(v) else 0.0)) / (sd if sd > 0 else 1.0)
