"""Who the patient is, as a vignette says it: sex and age, and nothing where it says neither."""

import pytest

from kg.differential.patient import Patient, read_patient


@pytest.mark.parametrize(
    ("text", "sex", "age"),
    [
        ("A 3-year-old girl with seizures and microcephaly", "female", 3.0),
        ("Boy with progressive proximal muscle weakness and calf pseudohypertrophy", "male", None),
        ("A six-month-old infant with hypotonia; his mother has myotonia", "male", 0.5),
        ("Newborn with hypotonia and poor feeding", None, 0.0),
        ("A woman aged 45 with ptosis and ophthalmoplegia", "female", 45.0),
        ("Patient with seizures, microcephaly and hypotonia", None, None),
        ("He has seizures; she has none", None, None),  # both: nothing said of this patient
        ("A 10-day-old male with jaundice", "male", 10 / 365.25),
        ("Human immunodeficiency virus and mandibular hypoplasia", None, None),  # no sex in "human"
        # a feature's onset is not the patient's age
        ("Patient with neonatal hypotonia and seizures since age 3", None, None),
        ("A female newborn with hypotonia", "female", 0.0),
    ],
)
def test_sex_and_age_as_a_vignette_states_them(text: str, sex: str | None, age: float | None) -> None:
    patient = read_patient(text)
    assert patient.sex == sex
    assert patient.age_years == (pytest.approx(age) if age is not None else None)


def test_a_patient_describes_itself() -> None:
    assert Patient("female", 3.0).describe() == "a female patient aged 3 years"
    assert Patient("male", 0.5).describe() == "a male patient aged 6 months"
    assert Patient(None, 0.0).describe() == "a patient aged under a month"
    assert Patient().describe() == "" and not Patient()
