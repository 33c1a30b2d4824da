"""The names of HPO annotation qualifiers, so that evidence reads "very frequent (80-99%)", "onset in
childhood", "published clinical study" rather than "HP:0040281", "HP:0011463", "PCS": HPO's frequency
and onset terms (their names and definitions in hp.obo, 2025-01-16 release) and the evidence codes of
phenotype.hpoa (its documentation). Fixed vocabularies, read once here rather than looked up per fact."""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "FREQUENCY_TERMS",
    "ONSET_EARLIEST_YEARS",
    "RATIO",
    "describe_evidence_codes",
    "describe_frequencies",
    "describe_onsets",
]

#: HPO's frequency terms: their names, and the middle of their range (the frequency the differential
#: diagnosis counts for an annotation that gives the term).
FREQUENCY_TERMS: dict[str, tuple[str, float]] = {
    "HP:0040280": ("obligate (100%)", 1.0),
    "HP:0040281": ("very frequent (80-99%)", 0.895),
    "HP:0040282": ("frequent (30-79%)", 0.545),
    "HP:0040283": ("occasional (5-29%)", 0.17),
    "HP:0040284": ("very rare (1-4%)", 0.025),
    "HP:0040285": ("excluded (0%)", 0.0),
}
ONSET_NAMES = {
    "HP:0003674": "onset",
    "HP:0030674": "antenatal onset",
    "HP:0011460": "embryonal onset",
    "HP:0011461": "fetal onset",
    "HP:0034199": "late first trimester onset",
    "HP:0034198": "second trimester onset",
    "HP:0034197": "third trimester onset",
    "HP:0003577": "congenital onset",
    "HP:0003623": "neonatal onset",
    "HP:0410280": "pediatric onset",
    "HP:0003593": "infantile onset",
    "HP:0011463": "childhood onset",
    "HP:0003621": "juvenile onset",
    "HP:0003581": "adult onset",
    "HP:0011462": "young adult onset",
    "HP:0025708": "early young adult onset",
    "HP:0025709": "intermediate young adult onset",
    "HP:0025710": "late young adult onset",
    "HP:0003596": "middle age onset",
    "HP:0003584": "late onset",
    "HP:4000040": "puerperal onset",
    "HP:6000314": "perimenopausal onset",
    "HP:6000315": "postmenopausal onset",
}
#: The youngest age (years) of each onset class, by its HPO definition (infantile: from 28 days; childhood:
#: 1 to 5 years; juvenile: 5 to 15; adult: 16 and over; middle age: 40 to 60; late: after 60); those
#: before birth, at birth and neonatal begin at 0. What a patient's age rules out (kg/differential/patient.py).
ONSET_EARLIEST_YEARS = {
    **dict.fromkeys(["HP:0030674", "HP:0011460", "HP:0011461", "HP:0034199", "HP:0034198", "HP:0034197"], 0.0),
    **dict.fromkeys(["HP:0003577", "HP:0003623", "HP:0410280"], 0.0),
    "HP:0003593": 28 / 365.25,
    "HP:0011463": 1.0,
    "HP:0003621": 5.0,
    **dict.fromkeys(["HP:0003581", "HP:0011462", "HP:0025708", "HP:4000040"], 16.0),
    "HP:0025709": 19.0,
    "HP:0025710": 25.0,
    **dict.fromkeys(["HP:0003596", "HP:6000314"], 40.0),
    "HP:6000315": 45.0,
    "HP:0003584": 60.0,
}
EVIDENCE_CODE_NAMES = {
    "PCS": "published clinical study",
    "TAS": "traceable author statement",
    "IEA": "inferred from electronic annotation",
}
#: A case-series count: "3/10", three of ten patients.
RATIO = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def _joined(values: Iterable[str], name) -> str:  # noqa: ANN001 - str -> str
    return ", ".join(dict.fromkeys(name(str(v)) for v in values if str(v).strip()))


def describe_frequencies(values: Iterable[str] | str) -> str:
    """ "very frequent (80-99%)", "3 of 10 patients", "25%" (several joined by commas)."""

    def name(value: str) -> str:
        if value in FREQUENCY_TERMS:
            return FREQUENCY_TERMS[value][0]
        if m := RATIO.match(value):
            return f"{m[1]} of {m[2]} patients"
        return value

    return _joined([values] if isinstance(values, str) else values, name)


def describe_onsets(values: Iterable[str] | str) -> str:
    return _joined([values] if isinstance(values, str) else values, lambda v: ONSET_NAMES.get(v, v))


def describe_evidence_codes(values: Iterable[str] | str) -> str:
    return _joined([values] if isinstance(values, str) else values, lambda v: EVIDENCE_CODE_NAMES.get(v, v))
