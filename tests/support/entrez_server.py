"""A local E-utilities stand-in that answers with real NCBI records (for the Entrez client and CLI tests).

The efetch handler serves the real ``PubmedArticle``/``PubmedBookArticle`` elements of the shared PubMed XML
files (byte for byte, inside the envelope of a real efetch answer); the esearch handler answers in the format of
the real ``esearch1.xml``. Every request is logged in :attr:`Eutils.calls`. Nothing here reaches NCBI.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree as ET
from xml.sax.saxutils import escape

from tests.conftest import SHARED_DATA

__all__ = ["BAD_QUERY", "PUBMED_XML", "Call", "Corpus", "Eutils", "EutilsServer", "load_corpus", "serve"]

PUBMED_XML = SHARED_DATA / "pubmed_xml"
BAD_QUERY = "cancer[[["  # esearch answers 400 with NCBI's error message

_RECORD = re.compile(rb"<(PubmedArticle|PubmedBookArticle)>.*?</\1>", re.DOTALL)


@dataclass(frozen=True)
class Corpus:
    records: dict[str, bytes]  # PMID -> raw XML of its record
    titles: dict[str, str]  # PMID -> whitespace-normalised title
    efetch_head: bytes  # XML declaration, DOCTYPE and <PubmedArticleSet> of a real efetch answer
    esearch_head: bytes  # XML declaration and DOCTYPE of the real esearch answer


def load_corpus() -> Corpus:
    """Every record of the shared PubMed XML files (first occurrence of each PMID)."""
    records: dict[str, bytes] = {}
    titles: dict[str, str] = {}
    for path in sorted(PUBMED_XML.glob("*/*.xml")):
        data = path.read_bytes()
        if b"<PubmedArticleSet>" not in data:
            continue
        for match in _RECORD.finditer(data):
            elem = ET.fromstring(match.group(0))
            pmid = elem.findtext(".//PMID")
            title = elem.find(".//ArticleTitle")
            if title is None:
                title = elem.find(".//BookTitle")
            if pmid and pmid not in records:
                records[pmid] = match.group(0)
                titles[pmid] = " ".join("".join(title.itertext()).split()) if title is not None else ""
    pubmed1 = (PUBMED_XML / "biopython_entrez" / "pubmed1.xml").read_bytes()
    esearch1 = (PUBMED_XML / "biopython_entrez" / "esearch1.xml").read_bytes()
    efetch_head = pubmed1[: pubmed1.index(b"<PubmedArticleSet>") + len(b"<PubmedArticleSet>")]
    esearch_head = esearch1[: esearch1.index(b"<eSearchResult>")]
    return Corpus(records, titles, efetch_head, esearch_head)


@dataclass
class Call:
    at: float  # time.monotonic() when the request arrived
    utility: str  # "esearch" or "efetch"
    method: str
    params: dict[str, str]

    @property
    def ids(self) -> list[str]:
        return self.params["id"].split(",")


@dataclass
class Eutils:
    """What the stand-in answers, and every request it got."""

    corpus: Corpus
    base_url: str = ""
    search_ids: list[str] = field(default_factory=list)
    efetch_statuses: list[int] = field(default_factory=list)  # answered (one each) before the next efetch succeeds
    failing_ids: set[str] = field(default_factory=set)  # an efetch naming any of these gets a 503, always
    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def efetches(self) -> list[Call]:
        return [c for c in self.calls if c.utility == "efetch"]

    def esearches(self) -> list[Call]:
        return [c for c in self.calls if c.utility == "esearch"]

    def answer(self, utility: str, params: dict[str, str]) -> tuple[int, bytes]:
        if utility == "esearch":
            return self._esearch(params)
        ids = params.get("id", "").split(",")
        with self.lock:
            status = self.efetch_statuses.pop(0) if self.efetch_statuses else 200
        if status == 200 and self.failing_ids.intersection(ids):
            status = 503
        if status != 200:
            return status, b"<html><body><h1>Service unavailable</h1></body></html>"
        found = [self.corpus.records[i] for i in ids if i in self.corpus.records]
        return 200, self.corpus.efetch_head + b"\n" + b"\n".join(found) + b"\n</PubmedArticleSet>\n"

    def _esearch(self, params: dict[str, str]) -> tuple[int, bytes]:
        term = params.get("term", "")
        if term == BAD_QUERY:
            body = f"<eSearchResult><ERROR>Invalid query: unbalanced brackets in {escape(term)}</ERROR></eSearchResult>"
            return 400, self.corpus.esearch_head + body.encode()
        retstart, retmax = int(params.get("retstart", 0)), int(params.get("retmax", 20))
        page = self.search_ids[retstart : retstart + retmax]
        ids = "".join(f"<Id>{i}</Id>\n" for i in page)
        body = (
            f"<eSearchResult><Count>{len(self.search_ids)}</Count><RetMax>{len(page)}</RetMax>"
            f"<RetStart>{retstart}</RetStart><IdList>\n{ids}</IdList><TranslationSet/>"
            f"<QueryTranslation>{escape(term)}[All Fields]</QueryTranslation></eSearchResult>\n"
        )
        return 200, self.corpus.esearch_head + body.encode()


class _Handler(BaseHTTPRequestHandler):
    server: EutilsServer

    def do_GET(self) -> None:
        self._serve(urlsplit(self.path).query)

    def do_POST(self) -> None:
        self._serve(self.rfile.read(int(self.headers.get("Content-Length", 0))).decode())

    def _serve(self, query: str) -> None:
        eutils = self.server.eutils
        path = urlsplit(self.path).path
        match = re.fullmatch(r"/entrez/eutils/(esearch|efetch)\.fcgi", path)
        if match is None:
            self.send_error(404)
            return
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        with eutils.lock:
            eutils.calls.append(Call(time.monotonic(), match.group(1), self.command, params))
        status, body = eutils.answer(match.group(1), params)
        self.send_response(status)
        self.send_header("Content-Type", "text/xml; charset=UTF-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


class EutilsServer(ThreadingHTTPServer):
    """Serves ``/entrez/eutils/{esearch,efetch}.fcgi`` from :attr:`eutils` (replace it to reset the state)."""

    daemon_threads = True
    eutils: Eutils

    def fresh(self) -> Eutils:
        """A new, empty stand-in state (no search hits, no request logged), with its base URL."""
        host, port = self.server_address[:2]
        self.eutils = Eutils(self.eutils.corpus, base_url=f"http://{host}:{port}/entrez/eutils/")
        return self.eutils


@contextmanager
def serve(corpus: Corpus) -> Iterator[EutilsServer]:
    """The stand-in, listening on a free port of 127.0.0.1 in a background thread."""
    httpd = EutilsServer(("127.0.0.1", 0), _Handler)
    httpd.eutils = Eutils(corpus)
    httpd.fresh()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
