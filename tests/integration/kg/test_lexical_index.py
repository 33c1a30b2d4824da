"""The lexical index's query: terms of little weight (a word in most passages) only rescore what the
others found, on a real Tantivy index."""

from __future__ import annotations

from pathlib import Path

from kg.lexical_index import LexicalIndex


def _index(tmp_path: Path, bodies: dict[str, str]) -> LexicalIndex:
    index = LexicalIndex(tmp_path / "passages.tantivy")
    index.write(bodies, lambda chunk: {pid: bodies[pid] for pid in chunk})
    return index


def _corpus() -> dict[str, str]:
    # "patient" is in 54 of 60 passages: its IDF (0.1) is under 5% of the query's; aspirin and stroke
    # are rare (IDF 2.2-2.4)
    bodies = {f"filler-{i}": f"patient cohort follow visit{i}" for i in range(54)}
    bodies |= {
        "both-and-patient": "aspirin stroke patient trial",
        "both": "aspirin stroke dose trial",
        "aspirin": "aspirin dose bleed trial",
        "stroke": "stroke imag scan trial",
        "aspirin-patient": "aspirin patient dose trial",
        "stroke-patient": "stroke patient scan trial",
    }
    return bodies


def test_light_terms_rescore_so_the_top_is_exact_bm25(tmp_path: Path) -> None:
    index = _index(tmp_path, _corpus())
    query = ["aspirin", "stroke", "patient"]
    for k in (1, 2, 3):
        found = index.search(query, k)
        exact = index.search(query, k, min_term_share=0)
        assert [p for p, _ in found] == [p for p, _ in exact]
        assert [s for _, s in found] == [s for _, s in exact]  # the light term is in the score
    ranked = [p for p, _ in index.search(query, 3)]
    assert ranked[:2] == ["both-and-patient", "both"]  # the same words less "patient" rank second


def test_passages_with_only_light_terms_are_not_candidates(tmp_path: Path) -> None:
    index = _index(tmp_path, _corpus())
    found = {p for p, _ in index.search(["aspirin", "patient"], 50)}
    assert found == {"both-and-patient", "both", "aspirin", "aspirin-patient"}
    assert len(index.search(["aspirin", "patient"], 100, min_term_share=0)) == 59  # exact: any word
    # a query of light terms alone searches with them
    assert len(index.search(["patient", "cohort"], 50)) == 50


def test_removed_passages_are_not_rescored_back(tmp_path: Path) -> None:
    bodies = _corpus()
    index = _index(tmp_path, bodies)
    del bodies["both-and-patient"]
    index.write(["both-and-patient"], lambda chunk: {pid: bodies[pid] for pid in chunk if pid in bodies})
    found = [p for p, _ in index.search(["aspirin", "stroke", "patient"], 50)]
    assert found[0] == "both" and "both-and-patient" not in found
