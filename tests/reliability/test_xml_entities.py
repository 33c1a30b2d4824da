"""XML entity attacks on every XML parser of the project: the PubMed XML reader (files, and efetch
answers through the E-utilities client) and the esearch answer parser (Bio.Entrez, expat).

"Billion laughs" (nested internal entities) and quadratic blow-up must be refused quickly without
memory growth; external entities (``SYSTEM "file://..."``, a plain path, ``http://``), parameter
entities and an external DTD must never be read: a secret file's content may appear nowhere, not in
the records, the problems, the graph or the passage index.
"""

from __future__ import annotations

import http.server
import resource
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.pubmed.entrez import EntrezClient, EntrezError
from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Article
from ingest.pubmed.readers import read_records
from ingest.summary import Problem
from kg.nlp import build_pipeline
from kg.text_index import TextIndex
from tests.conftest import open_ladybug

pytestmark = pytest.mark.reliability

ARTICLE = (
    "<PubmedArticle><MedlineCitation><PMID>{pmid}</PMID><Article><ArticleTitle>{title}</ArticleTitle>"
    "<Abstract><AbstractText>{text}</AbstractText></Abstract></Article></MedlineCitation></PubmedArticle>\n"
)


def article_set(doctype: str, *titles: str) -> bytes:
    body = "".join(ARTICLE.format(pmid=900 + i, title=t, text=f"Abstract {t}") for i, t in enumerate(titles))
    return f'<?xml version="1.0"?>\n{doctype}\n<PubmedArticleSet>\n{body}</PubmedArticleSet>\n'.encode()


def billion_laughs(levels: int = 10) -> str:
    decls = ['<!ENTITY lol0 "lol">'] + [
        f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, levels)
    ]  # 10^9 "lol" at ten levels
    return "<!DOCTYPE PubmedArticleSet [\n" + "\n".join(decls) + "\n]>"


QUADRATIC = '<!DOCTYPE PubmedArticleSet [<!ENTITY a "' + "A" * 5_000 + '">]>'  # x 200,000 references: 1 GB


@pytest.fixture()
def secret(tmp_path: Path) -> tuple[Path, str]:
    value = f"MEDKG-SECRET-{uuid.uuid4().hex}"
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(value + "\n")
    return path, value


def hostile_documents(secret_path: Path) -> dict[str, bytes]:
    url = secret_path.as_uri()
    return {
        "billion laughs": article_set(billion_laughs(), "Laughs &lol9; end", "Second"),
        "quadratic blow-up": article_set(QUADRATIC, "Blow " + "&a;" * 200_000, "Second"),
        "external entity (file URL)": article_set(
            f'<!DOCTYPE PubmedArticleSet [<!ENTITY xxe SYSTEM "{url}">]>', "Leak &xxe; end", "Second"
        ),
        "external entity (path)": article_set(
            f'<!DOCTYPE PubmedArticleSet [<!ENTITY xxe SYSTEM "{secret_path}">]>', "Leak &xxe; end", "Second"
        ),
        "external entity (/etc/passwd)": article_set(
            '<!DOCTYPE PubmedArticleSet [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>', "Leak &xxe; end", "Second"
        ),
        "external entity (http)": article_set(
            '<!DOCTYPE PubmedArticleSet [<!ENTITY xxe SYSTEM "http://127.0.0.1:9/secret">]>', "Leak &xxe;", "Second"
        ),
        "parameter entity": article_set(
            f'<!DOCTYPE PubmedArticleSet [<!ENTITY % p SYSTEM "{url}"> %p;]>', "Title", "Second"
        ),
        "external DTD": article_set(f'<!DOCTYPE PubmedArticleSet SYSTEM "{url}">', "Title one", "Second"),
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_the_pubmed_reader_refuses_entity_declarations_and_never_reads_outside_files(
    tmp_path: Path, secret: tuple[Path, str]
) -> None:
    secret_path, value = secret
    for name, data in hostile_documents(secret_path).items():
        path = tmp_path / f"{name.replace(' ', '_').replace('/', '_')}.xml"
        path.write_bytes(data)
        before, started = _peak_rss_mb(), time.perf_counter()
        records = list(read_records(path))
        seconds, grown = time.perf_counter() - started, _peak_rss_mb() - before
        assert seconds < 2 and grown < 100, f"{name}: {seconds:.2f} s, {grown:.0f} MB more at peak"
        text = repr(records)
        assert value not in text and "root:x:0:0" not in text, name
        problems = [r for r in records if isinstance(r, Problem)]
        if name == "external DTD":  # no entity declared: the DTD is simply never loaded (no network, no file)
            assert [r.title for r in records if isinstance(r, Article)] == ["Title one", "Second"]
            continue
        assert not [r for r in records if isinstance(r, Article)], f"{name}: a record of a refused file loaded"
        assert len(problems) == 1 and problems[0].file == str(path) and problems[0].line, (name, problems)
        message = problems[0].message
        assert "refused" in message or "amplification" in message, (name, message)


def test_nothing_of_a_hostile_file_reaches_the_graph_or_the_passages(
    tmp_path: Path, secret: tuple[Path, str], text_embedder
) -> None:
    secret_path, value = secret
    store = open_ladybug(tmp_path)
    index = TextIndex(tmp_path / "indexes", text_embedder)
    try:
        loader = PubmedLoader(store, index, build_pipeline(), None, progress=False)
        files = []
        for i, data in enumerate(hostile_documents(secret_path).values()):
            files.append(tmp_path / f"hostile{i}.xml")
            files[-1].write_bytes(data)
        report = loader.load(r for f in files for r in read_records(f))
        assert report.problem_count == 7  # every file but the one with an external DTD (which declares nothing)
        entities = store.scan_entities(after="", limit=10_000)
        assert sorted(e.id for e in entities if e.category == "Document") == ["PMID:900", "PMID:901"]
        dumped = repr(entities) + repr(index.get(index.document_passages("PMID:900") + ["PMID:901#s0"]))
        dumped += repr(report.problems)
        assert value not in dumped and "root:x:0:0" not in dumped
    finally:
        index.close()
        store.close()


class _Hostile(http.server.BaseHTTPRequestHandler):
    bodies: dict[str, bytes] = {}

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer()

    def _answer(self) -> None:
        body = self.bodies["esearch" if "esearch" in self.path else "efetch"]
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def hostile_eutils() -> Iterator[tuple[str, type[_Hostile]]]:
    handler = type("Handler", (_Hostile,), {"bodies": {}})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/entrez/eutils/", handler
    server.shutdown()
    server.server_close()


def esearch_answer(doctype: str, pmid: str) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8" ?>\n{doctype}\n<eSearchResult><Count>1</Count><RetMax>1</RetMax>'
        f"<RetStart>0</RetStart><IdList><Id>{pmid}</Id></IdList><TranslationSet/>"
        "<QueryTranslation>x</QueryTranslation></eSearchResult>\n"
    ).encode()


def test_entrez_answers_with_entities_are_refused(
    hostile_eutils: tuple[str, type[_Hostile]], secret: tuple[Path, str]
) -> None:
    base_url, handler = hostile_eutils
    secret_path, value = secret
    client = EntrezClient(
        email="dev@example.org", api_key=None, base_url=base_url, backoff_s=0.01, requests_per_second=1000.0
    )
    for doctype, pmid in (
        (billion_laughs(), "&lol9;"),
        (f'<!DOCTYPE eSearchResult [<!ENTITY xxe SYSTEM "{secret_path.as_uri()}">]>', "&xxe;"),
        ('<!DOCTYPE eSearchResult [<!ENTITY xxe SYSTEM "http://127.0.0.1:9/x">]>', "&xxe;"),
    ):
        handler.bodies["esearch"] = esearch_answer(doctype, pmid)
        started = time.perf_counter()
        with pytest.raises(EntrezError) as failure:
            client.search("anything", 10)
        assert time.perf_counter() - started < 2
        assert "declares XML entities" in str(failure.value) and value not in str(failure.value)
    for name, data in hostile_documents(secret_path).items():
        handler.bodies["efetch"] = data
        fetched = list(client.fetch(["900", "901"]))
        assert value not in repr(fetched) and "root:x:0:0" not in repr(fetched), name
        titles = [r.title for r in fetched if isinstance(r, Article)]
        assert titles == (["Title one", "Second"] if name == "external DTD" else []), name
