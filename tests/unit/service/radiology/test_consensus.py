from __future__ import annotations

from service.radiology.consensus import Candidate, consensus_sentences, consensus_text


def test_consensus_text_is_the_weighted_medoid() -> None:
    odd = Candidate("Large right pneumothorax with mediastinal shift.", 0.9, "A#s3")
    common = [
        Candidate("No acute cardiopulmonary abnormality.", 0.8, "B#s3"),
        Candidate("No acute cardiopulmonary disease.", 0.7, "C#s2"),
        Candidate("No acute cardiopulmonary process.", 0.6, "D#s2"),
    ]
    chosen = consensus_text([odd, *common])
    assert chosen is not None and chosen.source in {"B#s3", "C#s2", "D#s2"}
    assert consensus_text([odd]) is odd and consensus_text([]) is None


def test_consensus_sentences_need_support() -> None:
    neighbours = [
        (0.9, [("The heart is normal in size.", "A#s1"), ("Small left effusion.", "A#s2")]),
        (0.8, [("Heart is normal in size.", "B#s1"), ("Old rib fracture.", "B#s2")]),
        (0.7, [("The heart is normal in size.", "C#s1"), ("Lungs are clear.", "C#s2")]),
        (0.6, [("Lungs are clear.", "D#s1")]),
    ]
    got = consensus_sentences(neighbours)
    assert got[0].text == "The heart is normal in size." and got[0].sources == ["A#s1", "B#s1", "C#s1"]
    assert abs(got[0].support - 2.4) < 1e-9
    texts = [s.text for s in got]
    assert "Lungs are clear." in texts and "Small left effusion." in texts  # nearest neighbour's own
    assert "Old rib fracture." not in texts  # one neighbour, not the nearest


def test_consensus_sentences_never_group_a_finding_with_its_negation() -> None:
    neighbours = [
        (0.9, [("There is a small left pleural effusion.", "A#s1"), ("Heart is enlarged.", "A#s2")]),
        (0.8, [("There is no left pleural effusion.", "B#s1")]),
        (0.7, [("There is no left pleural effusion.", "C#s1")]),
        (0.6, [("The heart is not significantly enlarged.", "D#s1")]),
        (0.5, [("The heart is enlarged.", "E#s1")]),
    ]
    got = {s.text: s for s in consensus_sentences(neighbours)}
    assert got["There is no left pleural effusion."].sources == ["B#s1", "C#s1"]
    assert abs(got["There is no left pleural effusion."].support - 1.5) < 1e-9
    assert got["There is a small left pleural effusion."].sources == ["A#s1"]  # the nearest's own, unsupported
    assert abs(got["There is a small left pleural effusion."].support - 0.9) < 1e-9
    assert "The heart is not significantly enlarged." not in got  # one neighbour, not the nearest
    assert got["Heart is enlarged."].sources == ["A#s2", "E#s1"]  # not "not significantly enlarged"


def test_consensus_sentences_still_group_paraphrases_that_both_negate_or_add_a_negated_clause() -> None:
    neighbours = [
        (0.9, [("No pneumothorax or pleural effusion.", "A#s1"), ("Degenerative changes of the spine.", "A#s2")]),
        (0.8, [("No pleural effusion or pneumothorax.", "B#s1")]),
        (0.7, [("Degenerative changes of the spine without fracture.", "C#s1")]),
    ]
    got = {s.text: s.sources for s in consensus_sentences(neighbours)}
    assert got == {
        "No pneumothorax or pleural effusion.": ["A#s1", "B#s1"],
        "Degenerative changes of the spine.": ["A#s2", "C#s1"],
    }
