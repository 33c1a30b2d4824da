"""The NegEx-style negation rule shared by radiology reports, the differential and the QA."""

from __future__ import annotations

import pytest

from kg.negation import by_polarity, negated, negated_in, negated_mentions


def _at(text: str, mention: str) -> bool:
    start = text.index(mention)
    return negated_in(text, start, start + len(mention))


@pytest.mark.parametrize(
    ("text", "mention", "expected"),
    [
        ("Child with seizures and microcephaly, no hypotonia.", "hypotonia", True),
        ("Child with seizures and microcephaly, no hypotonia.", "seizures", False),
        ("Child with seizures and microcephaly, no hypotonia.", "microcephaly", False),
        ("No pneumothorax or large pleural effusion.", "pleural effusion", True),  # a cue covers a list
        ("No fever, but seizures since infancy.", "seizures", False),  # "but" ends its scope
        ("Boy without hypotonia, with seizures and microcephaly.", "hypotonia", True),
        ("Boy without hypotonia, with seizures and microcephaly.", "seizures", False),  # "with" ends it too
        ("Patient denies chest pain.", "chest pain", True),
        ("Negative for ataxia.", "ataxia", True),
        ("No change in cardiomegaly.", "cardiomegaly", False),  # a pseudo-negation
        ("Seizures were absent. Microcephaly was noted.", "Seizures", True),  # negated after the mention
        ("Seizures were absent. Microcephaly was noted.", "Microcephaly", False),  # the next sentence
        ("Hypotonia was not observed on examination.", "Hypotonia", True),
        ("Microcephaly; seizures were absent.", "Microcephaly", False),  # the next clause's "absent"
        ("Microcephaly; seizures were absent.", "seizures", True),
        ("Ataxia, hypotonia was absent.", "Ataxia", False),
        ("Absent thumbs and short stature.", "short stature", False),  # "absent" states a finding before one
        ("Never walked; seizures from 2 years.", "seizures", False),
        ("Macrocephaly (head circumference 2.5 SD) and no seizures", "Macrocephaly", False),  # "2.5" ends nothing
        ("Macrocephaly (head circumference 2.5 SD) and no seizures", "seizures", True),
        # a clause's own negation ends the scope of its "not"
        ("Hypotonia was not observed, and the child has seizures.", "seizures", False),
        ("Hypotonia was not observed, and the child has seizures.", "Hypotonia", True),
        # a verb that states something new ends a scope
        ("Patient denies fever and reports headache.", "headache", False),
        ("He has no fever and developed seizures.", "seizures", False),
        ("He has no fever and developed seizures.", "fever", True),
        # a cue inside parentheses closed before the mention ("(NO)" is nitric oxide)
        ("Hypotonia (not seizures) and microcephaly.", "microcephaly", False),
        ("Hypotonia (not seizures) and microcephaly.", "seizures", True),
        ("Nitric oxide (NO) levels were high in sepsis.", "sepsis", False),
        # "absence of" negates only what follows it directly
        ("Absence of the corpus callosum, seizures and hypotonia.", "seizures", False),
        ("Absence of fever.", "fever", True),
        # more pseudo-negations
        ("No changes in cardiomegaly.", "cardiomegaly", False),
        ("No significant interval change in cardiomegaly.", "cardiomegaly", False),
    ],
)
def test_negated_in(text: str, mention: str, expected: bool) -> None:
    assert _at(text, mention) is expected


@pytest.mark.parametrize(
    ("text", "mention", "expected"),
    [
        # "ruled out" negates what follows it where it opens its clause or is "ruled out for" (NegEx's
        # pre-negation "ruled out"), and what it follows otherwise ("Pneumonia was ruled out, seizures")
        ("Ruled out pneumonia.", "pneumonia", True),
        ("Ruled out: pneumothorax", "pneumothorax", True),
        ("Impression: ruled out pneumonia and sepsis.", "sepsis", True),
        ("We ruled out pneumonia.", "pneumonia", True),
        ("He was ruled out for myocardial infarction.", "myocardial infarction", True),
        ("Pneumonia was ruled out, seizures persisted.", "seizures", False),
        ("Pneumonia ruled out, seizures persisted.", "seizures", False),
        ("Pneumonia ruled out, seizures persisted.", "Pneumonia", True),
        # "rule out" / "r/o" asks a question (an indication): it negates nothing and ends a cue's scope
        ("Rule out: pneumothorax", "pneumothorax", False),
        ("Indication: rule out pneumonia.", "pneumonia", False),
        ("No fever, rule out pneumonia.", "pneumonia", False),
        ("No fever, r/o pneumonia.", "pneumonia", False),
        ("No fever, rule out pneumonia.", "fever", True),
        # a cue right before a colon governs the list after it
        ("Denies: fever, chills or night sweats.", "night sweats", True),
        ("Negative for: ataxia.", "ataxia", True),
        # a negative value after a colon negates the mention before it, and ends its own scope
        ("Seizures: absent.", "Seizures", True),
        ("Fever: none", "Fever", True),
        ("Pneumothorax: no.", "Pneumothorax", True),
        ("Seizures: negative, hypotonia: present.", "Seizures", True),
        ("Seizures: present", "Seizures", False),
        ("Fever: no, cough: yes.", "cough", False),
        ("Respiratory: no cough.", "cough", True),  # "no" opens a scope here, it is not a value
        ("Respiratory: no cough.", "Respiratory", False),
        # a line break inside a sentence (a wrapped line: the next one starts in lower case) keeps the scope
        ("No fever,\ncough or\nrash.", "fever", True),
        ("No fever,\ncough or\nrash.", "cough", True),
        ("No fever,\ncough or\nrash.", "rash", True),
        ("No fever,\n  cough.", "cough", True),
        # a blank line, a new line that starts a new sentence or item, or a full stop ends it
        ("No fever,\n\ncough.", "cough", False),
        ("No fever\nCough since Monday.", "Cough", False),
        ("No fever\n- cough", "cough", False),
        ("No fever.\ncough.", "cough", False),
        # double negatives state a finding
        ("Not uncommonly, patients have seizures.", "seizures", False),
        ("Not infrequently, seizures occur.", "seizures", False),
        ("It is not unusual to find hypotonia.", "hypotonia", False),
        ("Not rare: hypotonia.", "hypotonia", False),
        ("Not only seizures but also hypotonia.", "seizures", False),
        ("Not only seizures but also hypotonia.", "hypotonia", False),
        ("Not unusual for seizures.", "seizures", False),
    ],
)
def test_negation_gaps(text: str, mention: str, expected: bool) -> None:
    assert _at(text, mention) is expected


def test_mentions_read_without_other_mentions_keep_their_places() -> None:
    """A mention blanked out still stands between the words around it: "ruled out" after one is the
    post-negation, a value after a colon is a value, and a mention at the start of a line starts it."""

    def spans(text: str, *words: str) -> list[tuple[int, int]]:
        return [(text.index(w), text.index(w) + len(w)) for w in words]

    text = "Pneumonia ruled out, seizures persisted."
    assert negated_mentions(text, spans(text, "Pneumonia", "seizures")) == [True, False]
    text = "Ruled out pneumonia, sepsis and meningitis."
    assert negated_mentions(text, spans(text, "pneumonia", "sepsis", "meningitis")) == [True, True, True]
    text = "Respiratory: no cough, wheeze or dyspnoea."
    assert negated_mentions(text, spans(text, "cough", "wheeze", "dyspnoea")) == [True, True, True]
    text = "Seizures and hypotonia: absent; microcephaly."
    assert negated_mentions(text, spans(text, "Seizures", "hypotonia", "microcephaly")) == [True, True, False]
    text = "No fever,\ncough or\nrash.\nSeizures since birth."
    assert negated_mentions(text, spans(text, "fever", "cough", "rash", "Seizures")) == [True, True, True, False]
    text = "No fever\nCough since Monday."
    assert negated_mentions(text, spans(text, "fever", "Cough")) == [True, False]


def test_negated_reads_the_text_around_the_mention() -> None:
    assert negated("There is no ") and not negated("There is ")
    assert negated("", " is absent") and not negated("", " is present")
    assert not negated("no effusion; there is ")  # a scope ends at the semicolon


def test_words_inside_other_mentions_neither_open_nor_end_a_scope() -> None:
    blank_after = "Microcephaly; seizures were absent."  # the blanked "seizures" leaves "; were absent"
    spans = [(0, 12), (14, 22)]
    assert negated_mentions(blank_after, spans) == [False, True]
    text = "Microtia. No flat face, face with broad temples or ptosis."
    spans = [(text.index(w), text.index(w) + len(w)) for w in ("Microtia", "flat face", "face with broad temples")]
    spans.append((text.index("ptosis"), text.index("ptosis") + len("ptosis")))
    assert negated_mentions(text, spans) == [False, True, True, True]
    assert not _at(text, "ptosis")  # read without the mentions, "with" would end the scope
    named = "No social interaction, seizures and hypotonia."  # a concept named with "no"
    spans = [(0, len("No social interaction")), (named.index("seizures"), named.index("seizures") + 8)]
    assert negated_mentions(named, spans) == [False, False]
    # a mention that spans the cue (a whole short question linked as one concept) hides nothing
    short = "no seizures"
    assert negated_mentions(short, [(0, len(short)), (3, len(short))]) == [False, True]


def test_a_clause_negating_two_mentions() -> None:
    text = "Seizures and hypotonia were absent; microcephaly."
    spans = [(text.index(w), text.index(w) + len(w)) for w in ("Seizures", "hypotonia", "microcephaly")]
    assert negated_mentions(text, spans) == [True, True, False]


def test_by_polarity() -> None:
    found = [("HP:1", False), ("HP:2", True), ("HP:3", True), ("HP:2", False), ("HP:1", True), ("HP:3", True)]
    assert by_polarity(found) == (["HP:1", "HP:2"], ["HP:3"])  # stated wins; each once, first-seen order
    assert by_polarity([]) == ([], [])


def test_a_not_qualifying_an_earlier_mention_ends_at_its_clause() -> None:
    """A "not" after another mention qualifies that one: it negates nothing past the next comma; "no"
    opening a list after a mention still negates the whole list; an aside in parentheses after a mention
    is not its clause."""

    def read(text: str, *words: str) -> list[bool]:
        return negated_mentions(text, [(text.index(w), text.index(w) + len(w)) for w in words])

    assert read("Seizures that are not well controlled, and microcephaly.", "Seizures", "microcephaly") == [
        False,
        False,
    ]
    assert read(
        "Developmental delay not otherwise specified, seizures and hypotonia.",
        "Developmental delay",
        "seizures",
        "hypotonia",
    ) == [False, False, False]
    assert read("Seizures, no ataxia, ptosis or hypotonia.", "Seizures", "ataxia", "ptosis", "hypotonia") == [
        False,
        True,
        True,
        True,
    ]
    assert read("Seizures and microcephaly, not hypotonia.", "Seizures", "microcephaly", "hypotonia") == [
        False,
        False,
        True,
    ]
    assert read("Seizures (absent in sibling) and microcephaly.", "Seizures", "microcephaly") == [False, False]
    assert read("Seizures were absent, microcephaly.", "Seizures", "microcephaly") == [True, False]
