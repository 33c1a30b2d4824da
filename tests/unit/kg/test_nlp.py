"""The shared text pipeline: token norms, sentences, abbreviations, passages."""

from __future__ import annotations

import pytest

from ingest.pubmed.model import Article, Section
from ingest.pubmed.passages import article_text, split_passages
from kg.nlp import build_pipeline, norm_token


@pytest.mark.parametrize(
    ("token", "norm"),
    [
        ("Seizures", "seizure"),
        ("arteries", "artery"),
        ("abscesses", "abscess"),
        ("MS", "MS"),  # short all-caps keep their case: not the unit "ms"
        ("ms", "ms"),
        ("FBN1", "FBN1"),
        ("status", "status"),
        ("stenosis", "stenosis"),
        ("SEIZURES", "seizure"),  # long all-caps words are ordinary words in a shouted title
    ],
)
def test_norm_token(token: str, norm: str) -> None:
    assert norm_token(token) == norm


def test_pipeline_sentences_break_at_line_breaks_and_find_abbreviations() -> None:
    nlp = build_pipeline()
    doc = nlp("A title without a full stop\nBACKGROUND: Marfan syndrome (MFS) is rare. MFS affects e.g. the aorta.")
    sentences = [s.text.strip() for s in doc.sents if s.text.strip()]
    assert sentences == [
        "A title without a full stop",
        "BACKGROUND: Marfan syndrome (MFS) is rare.",
        "MFS affects e.g. the aorta.",
    ]
    pairs = {(a.text, a._.long_form.text) for a in doc._.abbreviations}
    assert pairs == {("MFS", "Marfan syndrome")}
    assert [t.norm_ for t in doc if t.text == "MFS"] == ["MFS", "MFS"]


def test_passages_group_whole_sentences_with_stable_ids() -> None:
    article = Article(
        pmid="123",
        title="Aortic disease in Marfan syndrome.",
        sections=[
            Section(label="BACKGROUND", text="One two three four five. " * 4),
            Section(label="RESULTS", text="Six seven eight nine ten eleven. " * 3),
        ],
    )
    text = article_text(article)
    assert text.startswith("Aortic disease in Marfan syndrome.\nBACKGROUND: One two")
    parsed = split_passages("PMID:123", build_pipeline()(text), max_words=12)
    assert [s.index for s in parsed.sentences] == list(range(8))
    ids = [p.id for p in parsed.passages]
    assert ids[0] == "PMID:123#s0" and all(i.startswith("PMID:123#s") for i in ids)
    for p in parsed.passages:
        assert p.text == text[p.start : p.end]
        assert len(p.text.split()) <= 12 or len(p.sentences) == 1
    covered = [i for p in parsed.passages for i in p.sentences]
    assert covered == list(range(8))  # every sentence in exactly one passage, in order
    # Same text, same ids; a character offset finds its sentence and passage.
    again = split_passages("PMID:123", build_pipeline()(text), max_words=12)
    assert [p.id for p in again.passages] == ids
    offset = text.index("RESULTS")
    assert parsed.passage_at(offset).start <= offset < parsed.passage_at(offset).end
    assert parsed.sentence_at(len(text) + 5) is None
