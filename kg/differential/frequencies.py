"""The numbers of the phenotype likelihood-ratio model: an HPO annotation's frequency as its source
states it (a frequency term, a case-series count, a percentage), each annotation's frequency as the
model counts it, and the model's constants (:class:`LRParams`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from kg.annotation_terms import FREQUENCY_TERMS, RATIO

__all__ = [
    "DEFAULT_FREQUENCY",
    "PRIOR_STRENGTH",
    "Frequency",
    "LRParams",
    "annotation_frequencies",
    "frequency_evidence",
    "frequency_weight",
    "seen_in_none",
]

# HPO frequency terms -> the middle of their range
_FREQUENCY_TERMS = {term: middle for term, (_, middle) in FREQUENCY_TERMS.items()}
DEFAULT_FREQUENCY = 0.5
PRIOR_STRENGTH = 1000.0  # pseudo-patients of the Beta prior on case-series counts (chosen on the tuning half)
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


def frequency_weight(values: Iterable[str], default: float = DEFAULT_FREQUENCY) -> float:
    """An annotation's frequency (HPO frequency term, "3/10" or "25%"; the largest if several)."""
    found = []
    for value in values:
        if value in _FREQUENCY_TERMS:
            found.append(_FREQUENCY_TERMS[value])
        elif m := RATIO.match(value):
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
    counts = [(int(m[1]), int(m[2])) for v in values if (m := RATIO.match(v)) and int(m[2])]
    if counts:
        n, m = sum(c[0] for c in counts), sum(c[1] for c in counts)
        return (min(n, m), m)
    f = frequency_weight(values, default=-1.0)
    return None if f < 0 else f


def seen_in_none(frequency: Frequency) -> bool:
    """Whether an annotation's frequency says no patient had the feature (a count 0/m, 0%, Excluded)."""
    if isinstance(frequency, tuple):
        return frequency[0] == 0 and frequency[1] > 0
    return frequency is not None and frequency <= 0


def annotation_frequencies(given: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, float]:
    """Each annotation's frequency ``f(t)``, and the pooled frequency ``p0`` of all case-series counts.
    ``given``: the frequency term or percentage of each annotation (NaN if none); ``counts``: its count
    ``n/m`` as rows ``(n, m)`` (``(0, 0)`` if none). A count is shrunk towards ``p0`` (empirical Bayes,
    a Beta prior worth ``PRIOR_STRENGTH`` patients: ``(n + k p0) / (m + k)``), since most counts come
    from a few patients ("1/1"); an annotation with neither counts as ``p0``."""
    prior = float(counts[:, 0].sum() / counts[:, 1].sum()) if counts[:, 1].sum() else DEFAULT_FREQUENCY
    k = PRIOR_STRENGTH
    shrunk = (counts[:, 0] + k * prior) / (counts[:, 1] + k)
    freq = np.where(counts[:, 1] > 0, shrunk, np.where(np.isnan(given), prior, given)).astype(np.float32)
    return freq, prior
