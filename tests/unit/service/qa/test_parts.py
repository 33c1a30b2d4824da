"""The QA pieces that need no store: citation checking, the streamed-answer extractor, the token
budget, sentence splitting and source URLs."""

from __future__ import annotations

import json

import pytest

from kg.curie import source_url
from kg.retrieval.evidence import EvidenceItem, fact_citation_id, fill_budget
from service.qa.citations import check_citations, inline_ids, reading_order
from service.qa.extractive import split_sentences
from service.qa.llm import AnswerTextStream


def test_unknown_citations_are_removed_from_text_and_list_and_reported() -> None:
    allowed = {"KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166", "PMID:7#s2"}
    text = (
        "Arachnodactyly [KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166; PMID:9#s1]. "
        "Baldness [PMID:99999999#s1]. Lens [PMID:7#s2]. Quoted [sic]."
    )
    r = check_citations(text, ["PMID:8#s3", "[PMID:7#s2]"], allowed)
    assert (
        r.text == "Arachnodactyly [KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166]. Baldness. Lens [PMID:7#s2]. Quoted [sic]."
    )
    assert r.cited == ["KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166", "PMID:7#s2"]
    assert r.dropped == ["PMID:9#s1", "PMID:99999999#s1", "PMID:8#s3"]
    assert inline_ids(text)[:2] == ["KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166", "PMID:9#s1"]


@pytest.mark.parametrize(
    ("text", "clean", "dropped"),
    [
        # an unknown id cannot hide beside a known one, behind a word, or behind a space after the colon
        ("X [PMID:999#s1 PMID:1#s2].", "X [PMID:1#s2].", ["PMID:999#s1"]),
        ("X [see PMID:999#s1].", "X.", ["PMID:999#s1"]),
        ("X [PMID: 999].", "X.", ["PMID:999"]),
        # a known id is not lost to its separators, its punctuation or its case
        ("X [PMID:1#s2 and PMID:1#s2].", "X [PMID:1#s2].", []),
        ("X [PMID:1#s2.]", "X [PMID:1#s2]", []),
        ("X [pmid:1#s2].", "X [PMID:1#s2].", []),
        ("X [PMID:1#s2-s3].", "X [PMID:1#s2; PMID:1#s3].", []),
        # nothing outside a removed bracket changes: numbers, colons, line breaks
        ("A dose of .5 mg, ratio 3 : 1 [PMID:1#s2].", "A dose of .5 mg, ratio 3 : 1 [PMID:1#s2].", []),
        ("Line one [PMID:1#s2]\n[PMID:9#s9] Line two.", "Line one [PMID:1#s2]\nLine two.", ["PMID:9#s9"]),
        ("Odds [95% CI: 1.2-3.4] and [n = 12].", "Odds [95% CI: 1.2-3.4] and [n = 12].", []),
    ],
)
def test_every_id_in_a_bracket_is_checked(text: str, clean: str, dropped: list[str]) -> None:
    r = check_citations(text, [], {"PMID:1#s2", "PMID:1#s3"})
    assert (r.text, r.dropped) == (clean, dropped)


def test_listed_citations_are_read_like_inline_ones() -> None:
    allowed = {"PMID:1#s2", "PMID:1#s3", "PMID:3#s1"}
    r = check_citations("X.", ["PMID:1#s2; PMID:3#s1", "PMID:1#s3.", "KG:fake"], allowed)
    assert r.cited == ["PMID:1#s2", "PMID:3#s1", "PMID:1#s3"] and r.dropped == ["KG:fake"]


def test_the_offline_answer_cites_only_its_evidence() -> None:
    """A quoted abstract sentence keeps its own bracketed references as text, not as citations."""
    from kg.retrieval.evidence import EvidenceBundle
    from service.qa.extractive import ExtractiveComposer

    passage = EvidenceItem(
        id="PMID:1#s2",
        kind="passage",
        text="Losartan reduced aortic root dilation in Marfan syndrome [PMID:555; OR: 2.1].",
        title="Losartan in Marfan syndrome",
        url=None,
        score=0.8,
    )
    answer = ExtractiveComposer().compose(
        "Does losartan reduce aortic dilation in Marfan syndrome?", EvidenceBundle(items=[passage], budget=1000)
    )
    assert answer.cited == ["PMID:1#s2"]
    assert "(PMID:555; OR: 2.1)" in answer.text and inline_ids(answer.text) == ["PMID:1#s2"]


def test_an_article_with_only_a_title_is_quoted_by_its_title() -> None:
    """An article indexed without an abstract has its title as its one passage: the title is what it
    says ("Asymptomatic congenital lobar emphysema in a young adult.")."""
    from kg.retrieval.evidence import EvidenceBundle
    from service.qa.extractive import ExtractiveComposer

    title = "Asymptomatic congenital lobar emphysema in a young adult."
    passage = EvidenceItem(id="PMID:23037488#s0", kind="passage", text=title, title=title, url=None, score=0.89)
    answer = ExtractiveComposer().compose(
        "Can congenital lobar emphysema present in adults?", EvidenceBundle(items=[passage], budget=1000)
    )
    assert answer.cited == ["PMID:23037488#s0"] and answer.text.startswith(title), answer.text


def test_a_fully_supported_answer_is_unchanged() -> None:
    r = check_citations("A [PMID:1#s0], B [PMID:2#s1].", [], {"PMID:1#s0", "PMID:2#s1"})
    assert r.text == "A [PMID:1#s0], B [PMID:2#s1]." and r.dropped == []


@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_answer_text_is_pulled_out_of_json_arriving_in_pieces(size: int) -> None:
    answer = 'Line one "quoted" \\ back\nnew line, caf\u00e9 \u2014 \U0001d6fc-blocker \U0001f48a done [KG:A-B-C].'
    payload = json.dumps({"answer": answer, "citations": ["KG:A-B-C"], "confidence": 0.5})
    stream = AnswerTextStream()
    pieces = [stream.feed(payload[i : i + size]) for i in range(0, len(payload), size)]
    assert "".join(pieces) == answer and stream.done and json.loads(stream.buffer)["answer"] == answer


def test_answer_stream_replaces_a_lone_surrogate_half() -> None:
    stream = AnswerTextStream()  # what a model may emit: halves that make no character, never sent as such
    text = "".join(stream.feed(ch) for ch in '{"answer": "a\\ud835b \\udefc c"}')
    assert text == "a\ufffdb \ufffd c" and text.encode("utf-8")


def test_answer_stream_with_the_key_later_in_the_object() -> None:
    stream = AnswerTextStream()
    payload = '{"citations": [], "answer": "short"}'
    assert "".join(stream.feed(ch) for ch in payload) == "short"


def _item(i: int, tokens: int, kind: str = "kg") -> EvidenceItem:
    return EvidenceItem(id=f"{kind}{i}", kind=kind, text="x", title=None, url=None, score=1.0, tokens=tokens)  # type: ignore[arg-type]


def test_budget_takes_items_in_rounds_and_skips_what_does_not_fit() -> None:
    facts = [_item(i, 10) for i in range(6)]
    passages = [_item(i, 100, "passage") for i in range(3)]
    b = fill_budget([facts, passages], budget=245, per_round=[3, 1])
    assert [i.id for i in b] == ["kg0", "kg1", "kg2", "passage0", "kg3", "kg4", "kg5"]
    assert b.tokens == 160 and b.dropped_for_budget == 2
    b = fill_budget([facts, passages], budget=1000, per_round=[3, 1])
    assert [i.id for i in b][3:5] == ["passage0", "kg3"] and len(b) == 9 and b.dropped_for_budget == 0
    assert fill_budget([facts], budget=0).items == []
    with pytest.raises(ValueError):
        fill_budget([facts, passages], budget=10, per_round=[1])


def test_the_llm_reads_every_point_of_the_answer_before_the_second_fact_of_any() -> None:
    ra, oa, gout = "DOID:7148", "DOID:8398", "DOID:13189"
    isa = {d: fact_citation_id(d, "IS_A", "DOID:848") for d in (ra, oa, gout)}
    treats = {d: [fact_citation_id(f"DRUGBANK:DB0{n}", "TREATS", d) for n in range(2)] for d in (ra, oa, gout)}
    text = (
        f"Arthritis has the subtype rheumatoid arthritis [{isa[ra]}], osteoarthritis [{isa[oa]}] and gout "
        f"[{isa[gout]}]. Rheumatoid arthritis is treated by A [{treats[ra][0]}] and B [{treats[ra][1]}]; "
        f"osteoarthritis by C [{treats[oa][0]}; {treats[oa][1]}]. Gout by D [{treats[gout][0]}]."
    )
    order = reading_order(text, [*inline_ids(text), "PMID:1#s2"])
    # one fact of each point first, and a subtype's drug after the fact that makes it a subtype
    assert order[:6] == [isa[ra], treats[ra][0], isa[oa], treats[oa][0], isa[gout], treats[gout][0]]
    assert order[6:] == [treats[ra][1], treats[oa][1], "PMID:1#s2"]
    assert reading_order("Nothing cited.", ["KG:x"]) == ["KG:x"] and reading_order("") == []


def test_a_bundle_led_by_some_ids_keeps_every_item_and_the_others_order() -> None:
    bundle = fill_budget([[_item(i, 10) for i in range(5)]], budget=1000)
    led = bundle.leading(["kg3", "kg1", "kg3", "absent"])
    assert [i.id for i in led] == ["kg3", "kg1", "kg0", "kg2", "kg4"] and led.budget == bundle.budget
    assert [i.id for i in bundle] == ["kg0", "kg1", "kg2", "kg3", "kg4"]


def test_sentences_split_on_ends_not_on_abbreviations() -> None:
    text = "Losartan (e.g. 50 mg) slowed dilatation vs. atenolol. Smith et al. agreed. 3 cases were excluded."
    assert split_sentences(text) == [
        "Losartan (e.g. 50 mg) slowed dilatation vs. atenolol.",
        "Smith et al. agreed.",
        "3 cases were excluded.",
    ]


def test_citation_ids_and_source_urls() -> None:
    assert fact_citation_id("OMIM:154700", "HAS_PHENOTYPE", "HP:0001166") == "KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166"
    assert source_url("PMID:31675180#s4") == "https://pubmed.ncbi.nlm.nih.gov/31675180/"
    assert source_url("DRUGBANK:DB00945") == "https://go.drugbank.com/drugs/DB00945"
    assert source_url("NOPE:1") is None and source_url("not a curie") is None


def test_an_llm_error_never_shows_the_servers_credentials() -> None:
    from service.qa.llm import LLMAnswerer, LLMError

    llm = LLMAnswerer("http://user:s3cret@127.0.0.1:9/v1", "model", timeout_s=1, max_retries=0)
    with pytest.raises(LLMError) as info:
        llm.complete([{"role": "user", "content": "hi"}])
    assert "127.0.0.1:9" in str(info.value) and "s3cret" not in str(info.value) and "user" not in str(info.value)
