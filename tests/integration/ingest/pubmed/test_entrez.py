"""EntrezClient against a local E-utilities stand-in that answers with real NCBI records
(:mod:`tests.support.entrez_server`). Nothing here reaches NCBI.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.pubmed.entrez import Delivery, EntrezClient, EntrezError
from ingest.pubmed.model import Article
from ingest.summary import Problem
from tests.support.entrez_server import BAD_QUERY, PUBMED_XML, Corpus, Eutils, EutilsServer, load_corpus, serve

FAST = {"backoff_s": 0.01, "requests_per_second": 1000.0}

pytestmark = pytest.mark.skipif(
    not (PUBMED_XML / "biopython_entrez" / "esearch1.xml").exists(),
    reason=f"shared PubMed XML files not found under {PUBMED_XML}",
)


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return load_corpus()


@pytest.fixture(scope="module")
def server(corpus: Corpus) -> Iterator[EutilsServer]:
    with serve(corpus) as httpd:
        yield httpd


@pytest.fixture
def eutils(server: EutilsServer) -> Eutils:
    """A fresh stand-in state for each test."""
    return server.fresh()


@pytest.fixture
def pmids(corpus: Corpus) -> list[str]:
    """25 PMIDs served by the stand-in."""
    return sorted(corpus.records)[:25]


def client(eutils: Eutils, **options: object) -> EntrezClient:
    settings: dict[str, object] = {"email": "dev@example.org", "api_key": None, **FAST, **options}
    return EntrezClient(base_url=eutils.base_url, **settings)  # type: ignore[arg-type]


def articles(items: list[object]) -> list[Article]:
    return [i for i in items if isinstance(i, Article)]


def problems(items: list[object]) -> list[Problem]:
    return [i for i in items if isinstance(i, Problem)]


def test_corpus_has_the_shared_records(corpus: Corpus) -> None:
    assert len(corpus.records) == 467  # SOURCE.md: 467 unique PMIDs
    assert b"<PubmedArticleSet>" in corpus.efetch_head and b"eSearchResult" in corpus.esearch_head


def test_search_pages_with_retstart_and_retmax(eutils: Eutils, pmids: list[str]) -> None:
    eutils.search_ids = pmids
    assert client(eutils).search("biopython", 22, page_size=10) == pmids[:22]
    assert [(c.params["retstart"], c.params["retmax"]) for c in eutils.esearches()] == [
        ("0", "10"),
        ("10", "10"),
        ("20", "2"),
    ]
    assert all(c.params["db"] == "pubmed" and c.params["term"] == "biopython" for c in eutils.esearches())


def test_search_stops_at_count(eutils: Eutils, pmids: list[str]) -> None:
    eutils.search_ids = pmids
    assert client(eutils).search("biopython", 1000, page_size=10) == pmids
    assert [c.params["retstart"] for c in eutils.esearches()] == ["0", "10", "20"]


def test_search_with_no_hits(eutils: Eutils) -> None:
    assert client(eutils).search("nothing matches", 50) == []
    assert len(eutils.esearches()) == 1


def test_bad_query_raises_with_ncbi_message(eutils: Eutils) -> None:
    with pytest.raises(EntrezError, match="HTTP 400: Invalid query: unbalanced brackets") as info:
        client(eutils).search(BAD_QUERY, 10)
    assert info.value.status == 400
    assert len(eutils.esearches()) == 1  # a 400 is not retried


def test_fetch_returns_the_real_records_in_batches(eutils: Eutils, corpus: Corpus, pmids: list[str]) -> None:
    items = list(client(eutils, batch_size=10).fetch(pmids))
    assert problems(items) == []
    got = articles(items)
    assert [a.pmid for a in got] == pmids
    assert {a.pmid: a.title for a in got} == {p: corpus.titles[p] for p in pmids}
    calls = eutils.efetches()
    assert [c.ids for c in calls] == [pmids[:10], pmids[10:20], pmids[20:]]
    assert all(c.params["db"] == "pubmed" and c.params["retmode"] == "xml" and c.method == "GET" for c in calls)


def test_many_ids_are_posted(eutils: Eutils, corpus: Corpus) -> None:
    many = sorted(corpus.records)[:250]
    got = articles(list(client(eutils, batch_size=250).fetch(many)))
    assert sorted(a.pmid for a in got) == many
    assert [(c.method, len(c.ids)) for c in eutils.efetches()] == [("POST", 250)]


def test_identity_is_sent_with_every_request(eutils: Eutils, pmids: list[str]) -> None:
    c = client(eutils, api_key="k3y", tool="medkg-test", batch_size=10, requests_per_second=None)
    assert c.requests_per_second == 10.0  # NCBI's limit with an API key
    c.search("biopython", 5)
    list(c.fetch(pmids[:15]))
    assert len(eutils.calls) == 3
    for call in eutils.calls:
        assert (call.params["email"], call.params["api_key"], call.params["tool"]) == (
            "dev@example.org",
            "k3y",
            "medkg-test",
        )


def test_missing_email_warns_once_and_is_not_sent(
    eutils: Eutils, pmids: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="ingest.pubmed.entrez"):
        c = client(eutils, email=None, requests_per_second=None)
        list(c.fetch(pmids[:3]))
        c.search("biopython", 5)
    assert c.requests_per_second == 3.0  # NCBI's limit without a key
    assert len([r for r in caplog.records if "email" in r.getMessage()]) == 1
    assert all("email" not in call.params and "api_key" not in call.params for call in eutils.calls)


def test_rate_limit_spaces_requests(eutils: Eutils, pmids: list[str]) -> None:
    n = 6
    started = time.monotonic()
    items = list(client(eutils, batch_size=1, requests_per_second=5.0).fetch(pmids[:n]))
    elapsed = time.monotonic() - started
    assert len(articles(items)) == n
    assert elapsed >= (n - 1) / 5
    arrivals = [c.at for c in eutils.efetches()]
    assert arrivals[-1] - arrivals[0] >= (n - 1) / 5 - 0.05  # server clock: allow for connection jitter


def test_rate_limit_holds_across_threads(eutils: Eutils, pmids: list[str]) -> None:
    c = client(eutils, batch_size=1, requests_per_second=5.0)
    started = time.monotonic()
    threads = [threading.Thread(target=lambda p=p: list(c.fetch([p]))) for p in pmids[:6]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert time.monotonic() - started >= 5 / 5
    assert len(eutils.efetches()) == 6


def test_retries_503_then_succeeds(eutils: Eutils, pmids: list[str]) -> None:
    eutils.efetch_statuses = [503, 503]
    items = list(client(eutils, batch_size=10).fetch(pmids[:5]))
    assert problems(items) == []
    assert [a.pmid for a in articles(items)] == pmids[:5]
    assert len(eutils.efetches()) == 3


def test_retries_429_too(eutils: Eutils, pmids: list[str]) -> None:
    eutils.efetch_statuses = [429]
    assert len(articles(list(client(eutils).fetch(pmids[:2])))) == 2
    assert len(eutils.efetches()) == 2


def test_failing_batch_becomes_a_problem_and_the_rest_arrive(eutils: Eutils, pmids: list[str]) -> None:
    eutils.failing_ids = {pmids[12]}
    items = list(client(eutils, batch_size=10, max_tries=3).fetch(pmids))
    assert [a.pmid for a in articles(items)] == pmids[:10] + pmids[20:]
    [problem] = problems(items)
    assert problem.file == "entrez efetch"
    assert "HTTP 503" in problem.message and f"PMIDs {pmids[10]}..{pmids[19]} (10 ids)" in problem.message
    assert [len(c.ids) for c in eutils.efetches()] == [10, 10, 10, 10, 5]  # the failing batch tried 3 times


def test_unreachable_server_becomes_a_problem(eutils: Eutils, pmids: list[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = EntrezClient("dev@example.org", None, base_url=f"http://127.0.0.1:{port}/entrez/eutils", max_tries=2, **FAST)
    [problem] = list(c.fetch(pmids[:3]))
    assert isinstance(problem, Problem) and "connection error" in problem.message and "after 2 tries" in problem.message


def test_pmids_not_returned_are_reported(eutils: Eutils, pmids: list[str]) -> None:
    items = list(client(eutils, batch_size=10).fetch([*pmids[:3], "1", "2", "x1"]))
    assert [a.pmid for a in articles(items)] == pmids[:3]
    messages = [p.message for p in problems(items)]
    assert messages == ["not a PMID: 'x1'", "2 PMIDs not returned: 1, 2"]


@pytest.mark.reliability
def test_interrupted_fetch_resumes_from_checkpoint(eutils: Eutils, pmids: list[str], tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.ckpt"
    first = client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint)
    taken = list(itertools.islice(first, 11))  # all of batch 1, then the first record of batch 2
    first.close()  # stop: the record of batch 2 was handed out but never followed by a request for the next
    assert [c.ids for c in eutils.efetches()] == [pmids[:10], pmids[10:20]]

    eutils.calls.clear()
    rest = list(client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint))
    assert [c.ids for c in eutils.efetches()] == [pmids[10:20], pmids[20:]]
    assert {a.pmid for a in articles(taken + rest)} == set(pmids)

    eutils.calls.clear()
    assert list(client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint)) == []
    assert eutils.calls == []


def test_stopping_mid_batch_keeps_the_records_taken(eutils: Eutils, pmids: list[str], tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.ckpt"
    first = client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint)
    list(itertools.islice(first, 4))
    first.close()
    eutils.calls.clear()
    list(client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint))
    assert [c.ids for c in eutils.efetches()] == [pmids[3:13], pmids[13:23], pmids[23:]]


def test_torn_checkpoint_line_is_ignored(eutils: Eutils, pmids: list[str], tmp_path: Path) -> None:
    checkpoint = tmp_path / "run.ckpt"
    checkpoint.write_text(f'{{"delivered": ["{pmids[0]}"]}}\n{{"delivered": ["{pmids[1]}", "')
    list(client(eutils, batch_size=10).fetch(pmids[:5], checkpoint=checkpoint))
    assert [c.ids for c in eutils.efetches()] == [pmids[1:5]]
    eutils.calls.clear()
    list(client(eutils).fetch(pmids[:5], checkpoint=checkpoint))
    assert eutils.calls == []


def test_search_and_fetch_resumes_the_same_set(eutils: Eutils, pmids: list[str], tmp_path: Path) -> None:
    checkpoint = tmp_path / "query.ckpt"
    eutils.search_ids = pmids[:15]
    first = client(eutils, batch_size=5).search_and_fetch("biopython", 12, checkpoint)
    taken = list(itertools.islice(first, 6))
    first.close()

    eutils.search_ids = pmids[5:]  # PubMed moved on: the resumed run must keep the first answer
    eutils.calls.clear()
    rest = list(client(eutils, batch_size=5).search_and_fetch("biopython", 12, checkpoint))
    assert eutils.esearches() == []
    assert [c.ids for c in eutils.efetches()] == [pmids[5:10], pmids[10:12]]
    assert {a.pmid for a in articles(taken + rest)} == set(pmids[:12])

    with pytest.raises(EntrezError, match="belongs to query 'biopython'"):
        list(client(eutils).search_and_fetch("another query", 12, checkpoint))


def test_progress_bar_does_not_change_the_records(eutils: Eutils, pmids: list[str]) -> None:
    items = list(client(eutils, batch_size=10).fetch(pmids, progress=True))
    assert [a.pmid for a in articles(items)] == pmids


@pytest.mark.reliability
def test_an_interrupted_load_fetches_again_what_it_had_not_committed(
    eutils: Eutils, pmids: list[str], tmp_path: Path, text_embedder
) -> None:
    from ingest.pubmed.load import PubmedLoader
    from kg.nlp import build_pipeline
    from kg.text_index import TextIndex
    from tests.conftest import open_ladybug

    checkpoint = tmp_path / "run.ckpt"
    store = open_ladybug(tmp_path)
    try:
        loader = PubmedLoader(store, TextIndex(tmp_path / "idx", text_embedder), build_pipeline(), None,
                              progress=False, batch_size=2, checkpoint_every=4)  # fmt: skip

        def interrupted(records: Iterator[object]) -> Iterator[object]:
            for n, record in enumerate(records, start=1):
                if n == 15:
                    raise KeyboardInterrupt  # Ctrl-C: 14 records loaded, 12 of them committed
                yield record

        delivery = Delivery()
        fetched = client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint, delivery=delivery)
        with pytest.raises(KeyboardInterrupt):
            loader.load(interrupted(fetched), on_commit=delivery.commit)
        fetched.close()  # the fetch stopped too (as at the end of a process)
        assert loader.text_index.document_count() == 12

        eutils.calls.clear()
        delivery = Delivery()
        fetched = client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint, delivery=delivery)
        report = loader.load(fetched, on_commit=delivery.commit)
        assert [c.ids for c in eutils.efetches()] == [pmids[12:22], pmids[22:]]
        assert report.read["articles read"] == 13
        assert sorted(loader.text_index.iter_document_ids("PMID:")) == sorted(f"PMID:{p}" for p in pmids)

        eutils.calls.clear()  # all of them committed: nothing left to fetch
        assert list(client(eutils, batch_size=10).fetch(pmids, checkpoint=checkpoint, delivery=Delivery())) == []
        assert eutils.calls == []
    finally:
        store.close()


class _EchoingKey(Eutils):
    """Answers every efetch with NCBI's JSON rate-limit error, which echoes the caller's API key."""

    def answer(self, utility: str, params: dict[str, str]) -> tuple[int, bytes]:
        key = params.get("api_key", "")
        return 429, f'{{"error":"API rate limit exceeded","api-key":"{key}","count":"11","limit":"10"}}'.encode()


def test_an_error_body_never_shows_the_api_key(
    server: EutilsServer, corpus: Corpus, pmids: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    key = "0123456789abcdef0123456789abcdef0123"
    base = server.fresh().base_url
    server.eutils = _EchoingKey(corpus, base_url=base)
    c = EntrezClient("dev@example.org", key, base_url=base, max_tries=2, **FAST)
    with caplog.at_level(logging.INFO, logger="ingest.pubmed.entrez"):
        [problem] = list(c.fetch(pmids[:2]))
    assert "HTTP 429" in problem.message and "API rate limit exceeded" in problem.message
    assert '"api-key":"***"' in problem.message
    assert key not in problem.message
    assert caplog.messages and not any(key in m for m in caplog.messages)
