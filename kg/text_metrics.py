"""Text-overlap metrics for generated reports: ROUGE-L (computed here in a few lines rather than pulled
in as a dependency) and keyword precision/recall/F1, micro-averaged over a corpus.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["tokens", "rouge_l", "keyword_f1", "prf", "keyword_counts", "micro_prf"]

_WORD = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _lcs(a: list[str], b: list[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if x == y else max(prev[j], cur[j - 1]))
        prev = cur
    return prev[-1]


def rouge_l(candidate: str, reference: str, beta: float = 1.2) -> float:
    """ROUGE-L (Lin 2004): the sentence-level F-measure of the longest common subsequence of lower-cased
    word tokens (punctuation dropped); beta = 1.2, the original ROUGE script's default for ROUGE-L."""
    c, r = tokens(candidate), tokens(reference)
    lcs = _lcs(c, r)
    if lcs == 0:
        return 0.0
    p, rec = lcs / len(c), lcs / len(r)
    return (1 + beta**2) * p * rec / (rec + beta**2 * p)


def prf(predicted: Iterable[str], reference: Iterable[str]) -> tuple[float, float, float]:
    """Precision, recall and F1 of two sets; both empty counts as a perfect match."""
    pred, ref = set(predicted), set(reference)
    if not pred and not ref:
        return 1.0, 1.0, 1.0
    tp = len(pred & ref)
    p = tp / len(pred) if pred else 0.0
    r = tp / len(ref) if ref else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def keyword_f1(predicted: Iterable[str], reference: Iterable[str]) -> float:
    return prf(predicted, reference)[2]


def keyword_counts(predicted: Iterable[str], reference: Iterable[str]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) of one prediction's keywords."""
    pred, ref = set(predicted), set(reference)
    return len(pred & ref), len(pred - ref), len(ref - pred)


def micro_prf(counts: Iterable[tuple[int, int, int]]) -> tuple[float, float, float]:
    """Micro-averaged precision, recall and F1 of per-item (tp, fp, fn) counts: the counts summed over
    the corpus first, so an item with no keyword on either side adds nothing (:func:`prf` counts it a
    perfect match, which rewards saying nothing). Nothing predicted gives precision 0 (not 1)."""
    tp = fp = fn = 0
    for a, b, c in counts:
        tp, fp, fn = tp + a, fp + b, fn + c
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)
