"""The paired bootstrap behind the phenopackets evaluation's "medkg minus baseline" intervals."""

from __future__ import annotations

import pytest

from eval.phenopackets import paired_difference, written
from kg.model import Entity


def test_the_same_ranks_differ_by_nothing() -> None:
    ranks = [1, 4, None, 12, 2, 30]
    d = paired_difference(ranks, ranks, ["a", "a", "b", "b", "c", "c"])
    assert set(d) == {"top1", "top3", "top10", "mrr"}
    assert all(m == {"points": 0.0, "ci95_cases": [0.0, 0.0], "ci95_cohorts": [0.0, 0.0]} for m in d.values())


def test_a_difference_every_case_shares_has_no_spread() -> None:
    ours, base = [1] * 50, [20] * 50  # every case: first against twentieth
    d = paired_difference(ours, base, [f"c{i % 7}" for i in range(50)])
    assert d["top1"] == d["top10"] == {"points": 100.0, "ci95_cases": [100.0, 100.0], "ci95_cohorts": [100.0, 100.0]}
    assert d["mrr"]["points"] == pytest.approx(95.0)


def test_the_interval_surrounds_the_difference_and_cohorts_widen_it() -> None:
    # 200 cases in 20 cohorts of 10: medkg finds the diagnosis in the top 10 where the baseline does
    # not in 6 cohorts, the other way round in 2, and the cases of a cohort go together
    ours, base, groups = [], [], []
    for c in range(20):
        better, worse = c < 6, 6 <= c < 8
        ours += [3 if not worse else 40] * 10
        base += [40 if better else 3] * 10
        groups += [f"gene{c}"] * 10
    d = paired_difference(ours, base, groups)["top10"]
    assert d["points"] == 20.0  # (60 - 20) / 200 cases
    low, high = d["ci95_cases"]
    assert low < 20.0 < high and low > 0  # 200 independent cases: clearly positive
    c_low, c_high = d["ci95_cohorts"]
    assert c_low < low and c_high > high  # 20 cohorts carry less information than 200 cases
    assert paired_difference(ours, base, groups)["top10"] == d  # seeded: the same figures each run


def test_no_cases() -> None:
    none = {"points": 0.0, "ci95_cases": [0.0, 0.0], "ci95_cohorts": [0.0, 0.0]}
    assert paired_difference([], [], [])["top10"] == none


def test_a_case_written_as_text() -> None:
    entities = {
        "HP:0001250": Entity(id="HP:0001250", name="Seizure", category="Phenotype", synonyms=["Epileptic seizure"]),
        "HP:0000252": Entity(id="HP:0000252", name="Microcephaly", category="Phenotype"),
        "HP:0001252": Entity(id="HP:0001252", name="Hypotonia", category="Phenotype", synonyms=["Low muscle tone"]),
        "HP:0002353": Entity(id="HP:0002353", name="EEG abnormality", category="Phenotype"),
        "HP:0000256": Entity(id="HP:0000256", name="Macrocephaly", category="Phenotype"),
    }
    case = {
        "observed": ["HP:0001250", "HP:0000252", "HP:9999999", "HP:0002353"],  # one unknown: left out
        "excluded": ["HP:0001252", "HP:0000256"],
    }
    assert written(case, entities) == "Seizure, microcephaly and EEG abnormality. No hypotonia or macrocephaly."
    assert written(case, entities, synonyms=True) == (
        "Epileptic seizure, microcephaly and EEG abnormality. No low muscle tone or macrocephaly."
    )
    assert written({"observed": ["HP:0000252"]}, entities) == "Microcephaly."
