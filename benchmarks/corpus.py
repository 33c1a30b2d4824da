"""Scaled passage corpora for the scale benchmarks: the real passages of ../shared/data (PubMed XML
and PubMedQA abstracts, split as a load splits them) copied under new ids up to any size, with the real
PubMedQA questions as queries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from ingest.pubmed.model import Article
from ingest.pubmed.passages import article_text, split_passages
from ingest.pubmed.readers import expand_paths, iter_records
from kg.nlp import build_pipeline

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


@cache
def real_passages(shared: Path = SHARED) -> list[tuple[str, str]]:
    """(id, text) of every passage of the shared abstracts, as ``medkg ingest pubmed`` cuts them."""
    sources = [p for p in (shared / "pubmed_xml", shared / "pubmedqa") if p.exists()]
    if not sources:
        raise SystemExit(f"no abstracts under {shared}: the scale benchmarks copy the real passages there")
    nlp = build_pipeline()
    seen: set[str] = set()
    passages = []
    for record in iter_records(expand_paths(sources)):
        if not isinstance(record, Article):
            continue
        doc_id = f"PMID:{record.pmid}"
        if doc_id in seen:
            continue
        seen.add(doc_id)
        text = article_text(record)
        if text.strip():
            passages += [(p.id, p.text) for p in split_passages(doc_id, nlp(text)).passages]
    return passages


def scaled(
    n: int, start: int = 0, shared: Path = SHARED, real_max: int | None = None
) -> Iterator[tuple[int, str, str]]:
    """Passages ``start`` to ``start + n`` of the endless corpus: (number, id, text), the i-th a copy of
    real passage ``i % len(real)`` under the id ``SCALE<i // len(real)>:<its id>``, ``real`` the first
    ``real_max`` real passages (all by default)."""
    real = real_passages(shared)[:real_max]
    for i in range(start, start + n):
        pid, text = real[i % len(real)]
        yield i, f"SCALE{i // len(real)}:{pid}", text


def questions(shared: Path = SHARED) -> list[str]:
    """The PubMedQA dev questions: real clinical questions for query timings."""
    path = shared / "pubmedqa" / "pqal_dev.json"
    return [item["QUESTION"] for item in json.loads(path.read_text()).values()]
