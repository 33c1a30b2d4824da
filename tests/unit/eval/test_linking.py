"""The held-out synonyms of the linking evaluation hide something: never the term's own name again."""

from eval.linking import _unlike_the_rest
from kg.model import Entity


def key(text: str) -> str | None:  # stands in for the lexicon's key: case and a plural ignored
    folded = text.casefold().strip()
    return folded.removesuffix("s") if folded else None


def test_a_synonym_that_is_the_name_again_is_never_held_out() -> None:
    term = Entity(
        id="HP:0001250",
        name="Seizure",
        category="Phenotype",
        synonyms=["Seizures", "seizure", "Epileptic seizure", "Fits", "Fit"],
    )
    assert _unlike_the_rest(term, key) == ["Epileptic seizure"]  # "Fits" and "Fit" would give each other away
    assert _unlike_the_rest(term.model_copy(update={"synonyms": ["SEIZURE"]}), key) == []
