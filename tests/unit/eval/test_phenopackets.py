"""The paired bootstrap behind the phenopackets evaluation's "medkg minus baseline" intervals."""

from __future__ import annotations

import json

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


class NoSameAs:
    """A store without ``SAME_AS`` edges: only the index's own disease ids are targets."""

    def neighbours(self, *_args: object, **_kwargs: object) -> list:
        return []


def small_index():  # noqa: ANN201 - kg.differential.PhenotypeIndex
    from kg.differential import PhenotypeIndex

    parents = {"HP:0000118": ["HP:0000001"], "HP:0000707": ["HP:0000118"], "HP:0000152": ["HP:0000118"]}
    parents |= {"HP:0001250": ["HP:0000707"], "HP:0000252": ["HP:0000152"]}
    annotations = {
        "OMIM:100001": [("HP:0001250", 0.9, [])],
        "OMIM:100002": [("HP:0000252", 0.9, [])],
        "OMIM:100003": [("HP:0001250", 0.2, []), ("HP:0000252", 0.2, [])],
    }
    return PhenotypeIndex(sorted({"HP:0000001", *parents}), parents, annotations, {})


def test_malformed_lines_and_cases_without_a_known_term_are_counted_never_hits(tmp_path, capsys) -> None:  # noqa: ANN001
    from eval.phenopackets import evaluate, report

    lines = [
        json.dumps({"observed": ["HP:0001250"], "diseases": ["OMIM:100001"]}),
        '{"observed": ["HP:0000252"], "diseases": ["OMIM:100002"]',  # line 2: cut short
        json.dumps({"observed": ["HP:0000252"]}),  # no diagnosis
        "",
        json.dumps({"observed": "HP:0000252", "diseases": ["OMIM:100002"]}),  # line 5: not a list
        json.dumps({"observed": ["HP:9999999"], "diseases": ["OMIM:100001"]}),  # nothing the index knows
        json.dumps({"observed": ["HP:0000252"], "diseases": ["MIM:100002"]}),  # the diagnosis spelled MIM:
        "[1, 2]",
    ]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(lines) + "\n")
    result = evaluate(small_index(), NoSameAs(), cases)  # type: ignore[arg-type]
    assert (result["cases"], result["evaluated"], result["unmapped_disease"]) == (7, 2, 0)
    assert (result["no_known_observed_term"], result["malformed_lines"]) == (1, 4)
    assert result["malformed"][0].startswith(f"{cases}:2: not JSON (Expecting ',' delimiter")
    assert result["malformed"][1:] == [
        f"{cases}:3: 'diseases' not a list of ids",
        f"{cases}:5: 'observed' not a list of ids",
        f"{cases}:8: not a JSON object",
    ]
    assert result["medkg"] == {"n": 2, "top1": 1.0, "top3": 1.0, "top10": 1.0, "mrr": 1.0}
    # the halves go by the place among the non-blank lines, malformed ones included: 1st and 6th
    assert (result["halves"]["tuning"]["medkg"]["n"], result["halves"]["held_out"]["medkg"]["n"]) == (1, 1)
    report(result)
    printed = capsys.readouterr().out
    assert "2 of 7 cases evaluated; 0 with a disease not in the graph; 1 without an observed term the graph knows" in (
        printed
    )
    assert "4 lines not a case, skipped" in printed and f"  {cases}:5: 'observed' not a list of ids" in printed
    limited = evaluate(small_index(), NoSameAs(), cases, limit=2)  # type: ignore[arg-type]
    assert (limited["cases"], limited["evaluated"], limited["malformed_lines"]) == (2, 1, 1)


def test_cases_cut_to_what_a_vignette_states(tmp_path, capsys) -> None:  # noqa: ANN001
    """--vignettes: the first five observed terms the index knows and two excluded, as eval.trust_questions
    writes a vignette; a case with fewer than three known observed terms is counted apart, not ranked."""
    from eval.phenopackets import evaluate, report

    lines = [
        {"observed": ["HP:0000252", "HP:0000152", "HP:0001250"], "diseases": ["OMIM:100001"]},
        {"observed": ["HP:0001250", "HP:0000252"], "diseases": ["OMIM:100001"]},  # two known terms
        {"observed": ["HP:0001250", "HP:9999999"], "diseases": ["OMIM:100001"]},  # one
    ]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    whole = evaluate(small_index(), NoSameAs(), cases)  # type: ignore[arg-type]
    cut = evaluate(small_index(), NoSameAs(), cases, vignettes=True)  # type: ignore[arg-type]
    assert (whole["evaluated"], cut["evaluated"], cut["too_few_terms_for_a_vignette"]) == (3, 1, 2)
    assert "vignettes" not in whole and cut["medkg"]["n"] == 1
    report(cut)
    assert "as vignettes (five observed terms, two excluded), 2 with fewer than three known" in capsys.readouterr().out


def test_the_diagnosis_among_a_qa_answers_entries(tmp_path, store, capsys) -> None:  # noqa: ANN001
    """--entries: a diagnosis ranked second behind another subtype of its disease (both mapped to one
    Disease Ontology class) is in the answer's first entry; the first five diseases are reported beside."""
    from eval.phenopackets import evaluate, report
    from kg.model import Entity, Relation

    store.upsert_entities(
        [Entity(id=f"OMIM:10000{i}", name=f"disease {i}", category="Disease") for i in (1, 2, 3)]
        + [Entity(id="DOID:1", name="a disease with subtypes", category="Disease")]
    )
    store.upsert_relations(
        [Relation(subject="DOID:1", type="SAME_AS", object=d, source="xref") for d in ("OMIM:100001", "OMIM:100003")]
    )
    cases = tmp_path / "cases.jsonl"
    rows = [
        {"observed": ["HP:0001250"], "diseases": ["OMIM:100003"]},  # ranked 2nd, behind its sibling 100001
        {"observed": ["HP:0001250"], "diseases": ["OMIM:100002"]},  # ranked 3rd: the second entry
    ]
    cases.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = evaluate(small_index(), store, cases, entries=True)
    assert result["medkg"]["top1"] == 0.0
    assert result["entries"] == {"n": 2, "top1": 0.5, "top3": 1.0, "top5": 1.0, "diseases_top5": 1.0}
    assert "entries" not in evaluate(small_index(), store, cases)
    report(result)
    assert "first 0.500, first three 1.000, first five 1.000 (among the first five diseases: 1.000)" in (
        capsys.readouterr().out
    )


def test_cases_that_state_the_patient_are_ranked_without_and_with_it(tmp_path, capsys) -> None:  # noqa: ANN001
    """A case that states the patient's sex or age (phenopacket-store's subject) is also ranked with them:
    a girl whose diagnosis is X-linked recessive ranks it lower; a case that states neither is not counted."""
    from eval.phenopackets import evaluate, report
    from kg.differential import PhenotypeIndex

    parents = {"HP:0000118": ["HP:0000001"], "HP:0000005": ["HP:0000001"], "HP:0001419": ["HP:0000005"]}
    parents |= {"HP:0001250": ["HP:0000118"], "HP:0000252": ["HP:0000118"]}
    annotations = {
        "OMIM:100001": [("HP:0001250", 0.5, []), ("HP:0000252", 0.5, [])],
        "OMIM:100002": [("HP:0001250", 0.5, []), ("HP:0000252", 0.5, [])],
    }
    index = PhenotypeIndex(sorted({"HP:0000001", *parents}), parents, annotations, {}, {"OMIM:100002": ["HP:0001419"]})
    rows = [
        {"observed": ["HP:0001250", "HP:0000252"], "diseases": ["OMIM:100002"], "sex": "male"},
        {"observed": ["HP:0001250", "HP:0000252"], "diseases": ["OMIM:100002"], "sex": "female", "age_years": 3},
        {"observed": ["HP:0001250", "HP:0000252"], "diseases": ["OMIM:100002"]},
    ]
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = evaluate(index, NoSameAs(), cases)  # type: ignore[arg-type]
    patient = result["with_the_patient"]
    assert patient["cases"] == 2
    assert (patient["without"]["top1"], patient["with"]["top1"]) == (0.0, 0.5)  # tied, then first for the boy
    assert result["medkg"]["n"] == 3
    report(result)
    assert "the 2 cases that state the patient's sex or age, ranked without and with them" in capsys.readouterr().out
