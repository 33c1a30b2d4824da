"""The ranking as a user reads it: the top diseases of a case as :class:`Candidate` s, each explained
by its matched phenotypes (by the ontology and by meaning), the likelihood ratio of each term, its
contradictions with the case, its genes and the PMIDs behind the matched annotations."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from kg.differential.case import Candidate
from kg.differential.frequencies import LRParams
from kg.differential.patient import Patient
from kg.differential.scoring import Scoring

__all__ = ["Explanations"]


class Explanations(Scoring):
    """:meth:`rank` of :class:`~kg.differential.index.PhenotypeIndex`: its scores, explained. A mixin
    over the index's arrays."""

    log_freq: np.ndarray
    pmids: dict[tuple[str, str], list[str]]
    negated: dict[str, set[int]]

    def rank(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        top_k: int = 10,
        explain: bool = True,
        prefixes: Sequence[str] = (),
        params: LRParams | None = None,
        genes: Sequence[str] = (),
        patient: Patient | None = None,
    ) -> list[Candidate]:
        """The ``top_k`` diseases for a case, each with its matched phenotype pairs, the likelihood
        ratio of each term (and of the ``patient``'s sex and age), contradictions, genes and the PMIDs
        behind the matched annotations. With candidate ``genes`` (e.g. those a sequencing test found
        variants in), only the diseases associated with them, scored as among all."""
        p = params or LRParams()
        score, _, parts = self.scores(observed, excluded, prefixes, p, baseline=False, genes=genes, patient=patient)
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
        cand.likelihood_ratios += parts["patient"].get(i, [])  # type: ignore[attr-defined]
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
