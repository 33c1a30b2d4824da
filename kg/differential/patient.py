"""Who the patient is, read from a vignette ("A 3-year-old girl with ...", "Boy with ..."), and what it
says about each disease: a likelihood ratio from the disease's mode of inheritance for the patient's sex
(an X-linked recessive disease is mostly seen in boys) and from its onset for the patient's age (a
disease whose every annotated onset is later than the patient's age is seldom the diagnosis yet). The
constants are genetics' and HPO's definitions, not fitted: the dev cases state neither sex nor age
(docs/differential.md#the-patients-sex-and-age)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kg.annotation_terms import ONSET_EARLIEST_YEARS

__all__ = ["Patient", "first_known", "patient_factors", "read_patient"]

AUTOSOMAL_DOMINANT, AUTOSOMAL_RECESSIVE = "HP:0000006", "HP:0000007"
X_LINKED, X_LINKED_RECESSIVE, X_LINKED_DOMINANT = "HP:0001417", "HP:0001419", "HP:0001423"
Y_LINKED, MITOCHONDRIAL, SEMIDOMINANT = "HP:0001450", "HP:0001427", "HP:0032113"
# the modes that say who inherits: an annotation's other inheritance terms ("Sporadic", "Typified by
# incomplete penetrance", "somatic mosaicism") leave the mode as it is
_MENDELIAN = {
    AUTOSOMAL_DOMINANT,
    AUTOSOMAL_RECESSIVE,
    X_LINKED,
    X_LINKED_RECESSIVE,
    X_LINKED_DOMINANT,
    Y_LINKED,
    MITOCHONDRIAL,
    SEMIDOMINANT,
}
# P(sex | disease) / P(sex): a disease whose only mode is X-linked recessive is seen in males ~90% of
# the time (a manifesting carrier is the exception), X-linked dominant ones about twice as often in
# females (several are lethal in males), Y-linked ones in males alone; both sexes equally otherwise
SEX_LR = {
    X_LINKED_RECESSIVE: {"male": 1.8, "female": 0.2},
    X_LINKED_DOMINANT: {"male": 0.67, "female": 1.33},
    Y_LINKED: {"male": 2.0, "female": 0.01},
}
# a disease whose every annotated onset begins after the patient's age: features before their onset
LATER_ONSET_LR = 0.2

# the patient, not a relative ("his mother" says the patient is male)
_MALE = re.compile(r"\b(boy|man|male|gentleman|he|his|him)\b", re.IGNORECASE)
_FEMALE = re.compile(r"\b(girl|woman|female|lady|she|her|hers|pregnant)\b", re.IGNORECASE)
_NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve".split())}
# the patient's age now, not a feature's onset: "a 45-year-old woman", "a woman aged 45" (not "seizures
# since age 3"), a vignette that opens with "A newborn" (not "neonatal hypotonia")
_AGE = re.compile(
    r"\b(\d{1,3}(?:\.\d+)?|" + "|".join(_NUMBERS) + r")[- ](years?|yrs?|months?|weeks?|days?)[- ]old\b"
    r"|\baged (\d{1,3})\b",
    re.IGNORECASE,
)
_UNIT_YEARS = {"y": 1.0, "m": 1 / 12, "w": 7 / 365.25, "d": 1 / 365.25}
_NEWBORN = re.compile(r"^\W*(an? )?((male|female) )?(newborn|neonate)\b", re.IGNORECASE)


class DiseaseTerms(Protocol):
    """What the factors read of the phenotype index: each disease's HPO terms of every aspect."""

    terms: list[str]
    term_index: dict[str, int]
    diseases: list[str]
    set_terms: np.ndarray
    set_offsets: np.ndarray
    __dict__: dict

    @property
    def set_sizes(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Patient:
    sex: str | None = None  # "male" | "female"
    age_years: float | None = None

    def __bool__(self) -> bool:
        return self.sex is not None or self.age_years is not None

    def describe(self) -> str:
        """ "a female patient aged 3 years", "a male patient", "" when nothing is known."""
        if not self:
            return ""
        who = f"a {self.sex} patient" if self.sex else "a patient"
        if self.age_years is None:
            return who
        age = self.age_years
        unit = f"{age:g} years" if age >= 1 else f"{round(age * 12)} months" if age >= 1 / 12 else "under a month"
        return f"{who} aged {unit}"


def first_known(*patients: Patient | None) -> Patient:
    """The first sex and the first age that ``patients`` know (given before read from a phenopacket, before
    read from text)."""
    known = [p for p in patients if p is not None]
    sex = next((p.sex for p in known if p.sex), None)
    age = next((p.age_years for p in known if p.age_years is not None), None)
    return Patient(sex, age)


def read_patient(text: str) -> Patient:
    """The patient's sex and age as a vignette states them; ``None`` where it does not (or says both)."""
    male, female = _MALE.search(text) is not None, _FEMALE.search(text) is not None
    sex = "male" if male and not female else "female" if female and not male else None
    age = None
    if m := _AGE.search(text):
        if m[3]:  # "aged 45"
            age = float(m[3])
        else:  # "3-year-old", "six-month-old"
            word = m[1].lower()
            age = (_NUMBERS[word] if word in _NUMBERS else float(word)) * _UNIT_YEARS[m[2][0].lower()]
    elif _NEWBORN.search(text):
        age = 0.0
    return Patient(sex, age)


def patient_factors(
    index: DiseaseTerms, patient: Patient
) -> tuple[np.ndarray, dict[int, list[tuple[str, str, float]]]]:
    """``log LR`` of ``patient`` for every disease of ``index`` (0 where sex and age say nothing), and for
    each disease it changes, why: ``(term, "sex" | "age", LR)`` with the inheritance or onset term."""
    modes, onsets = _disease_modes(index)
    log_lr = np.zeros(len(index.diseases), dtype=np.float64)
    why: dict[int, list[tuple[str, str, float]]] = {}
    if patient.sex:
        for mode, lrs in SEX_LR.items():
            rows = np.flatnonzero(modes == mode)
            log_lr[rows] += math.log(lrs[patient.sex])
            for i in rows.tolist():
                why.setdefault(i, []).append((mode, "sex", lrs[patient.sex]))
    if patient.age_years is not None:
        later = np.flatnonzero(onsets[:, 0] > patient.age_years + 1e-9)
        log_lr[later] += math.log(LATER_ONSET_LR)
        for i in later.tolist():
            why.setdefault(i, []).append((index.terms[int(onsets[i, 1])], "age", LATER_ONSET_LR))
    return log_lr, why


def _disease_modes(index: DiseaseTerms) -> tuple[np.ndarray, np.ndarray]:
    """Each disease's sex-linked mode (``X_LINKED_RECESSIVE``, ``X_LINKED_DOMINANT``, ``Y_LINKED``, or
    "" when its modes are others or mixed) and its earliest onset (years, the onset term's index; -inf
    and -1 without one), from its HPO terms of all aspects; kept beside the index, unpickled."""
    if "_patient_modes" not in index.__dict__:
        n = len(index.diseases)
        modes = np.full(n, "", dtype=object)
        onsets = np.tile(np.array([-math.inf, -1.0]), (n, 1))  # no onset annotated: never later
        sizes = index.set_sizes
        ids = index.terms
        for i in range(n):
            start = int(index.set_offsets[i])
            terms = {ids[int(t)] for t in index.set_terms[start : start + int(sizes[i])]}
            mode = (terms & _MENDELIAN) - {X_LINKED}  # "X-linked" beside a precise X-linked mode adds nothing
            if len(mode) == 1 and (only := next(iter(mode))) in SEX_LR:
                modes[i] = only
            ages = [(ONSET_EARLIEST_YEARS[t], t) for t in terms if t in ONSET_EARLIEST_YEARS]
            if ages:
                earliest, term = min(ages)
                onsets[i] = (earliest, index.term_index[term])
        index.__dict__["_patient_modes"] = (modes, onsets)
    return index.__dict__["_patient_modes"]
