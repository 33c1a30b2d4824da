from __future__ import annotations

import pytest

from kg.text_metrics import keyword_f1, prf, rouge_l


def test_rouge_l() -> None:
    assert rouge_l("No acute cardiopulmonary abnormality.", "no acute cardiopulmonary abnormality") == pytest.approx(
        1.0
    )
    assert rouge_l("", "anything") == 0.0 and rouge_l("cat", "dog") == 0.0
    # LCS "no acute findings" = 3 of 4 candidate and 3 of 5 reference tokens
    p, r = 3 / 4, 3 / 5
    expected = (1 + 1.44) * p * r / (r + 1.44 * p)
    assert rouge_l("no acute pulmonary findings", "no acute cardiopulmonary process findings") == pytest.approx(
        expected
    )


def test_keyword_f1() -> None:
    assert keyword_f1({"cardiomegaly"}, {"cardiomegaly", "effusion"}) == pytest.approx(2 / 3)
    assert prf(set(), set()) == (1.0, 1.0, 1.0) and keyword_f1({"a"}, set()) == 0.0


def test_micro_averaged_keywords() -> None:
    from kg.text_metrics import keyword_counts, micro_prf

    assert keyword_counts({"a", "b"}, {"b", "c"}) == (1, 1, 1)
    # both empty adds nothing; an empty prediction scores 0, not 1
    assert micro_prf([keyword_counts(set(), set()), keyword_counts(set(), {"a"})]) == (0.0, 0.0, 0.0)
    p, r, f = micro_prf([(1, 1, 0), (0, 0, 0), (1, 0, 2)])  # tp 2, fp 1, fn 2
    assert (p, r) == pytest.approx((2 / 3, 1 / 2)) and f == pytest.approx(2 * p * r / (p + r))
