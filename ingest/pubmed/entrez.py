"""PubMed records fetched live from NCBI E-utilities: esearch for PMIDs, efetch for the XML records, with
a rate limit per client (3 requests/s, 10 with an API key), retries, and a checkpoint file so an
interrupted run resumes where it stopped. Error texts never carry the API key.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from http.client import HTTPException
from pathlib import Path
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from Bio import Entrez

from ingest.pubmed.model import Article, Deletion
from ingest.summary import Problem
from kg.progress import progress_bar

__all__ = ["Delivery", "EntrezClient", "EntrezError", "RateLimiter", "DEFAULT_BASE_URL", "EFETCH_ORIGIN"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://eutils.ncbi.nlm.nih.gov/entrez/eutils/"
EFETCH_ORIGIN = "entrez efetch"
ESEARCH_PAGE_MAX = 10_000  # the most ids one esearch call returns
PUBMED_SEARCH_LIMIT = 10_000  # PubMed's esearch gives only the first 10,000 hits of a query
POST_ID_COUNT = 200  # NCBI asks for POST from about 200 ids (Bio.Entrez's rule)
POST_PARAMS_CHARS = 1000
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_NCBI_ERROR = re.compile(rb"<ERROR>(.*?)(?:</ERROR>|$)", re.DOTALL)
_EMPTY_ID_LIST = "ID list is empty"  # efetch's 400 when no id is well-formed: nothing to return, not a failure
# an API key named in a text: "api-key":"…", api_key=…, 'api key': …
_API_KEY_VALUE = re.compile(r"""(api[-_ ]?key["']?\s*[:=]\s*["']?)[^"'&\s,;}<]+""", re.IGNORECASE)


class EntrezError(RuntimeError):
    """An E-utilities request that failed (bad query, HTTP error after retries, unreadable answer)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RateLimiter:
    """At most ``per_second`` starts per second, spaced evenly, shared by every thread using it."""

    def __init__(self, per_second: float) -> None:
        if per_second <= 0:
            raise ValueError(f"requests_per_second must be positive, got {per_second}")
        self.interval = 1.0 / per_second
        self._next = 0.0  # monotonic time the next request may start
        self._lock = threading.Lock()

    def wait(self) -> None:
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


class Delivery:
    """PMIDs handed out by :meth:`EntrezClient.fetch` (``delivery=``), recorded in its checkpoint only when
    :meth:`commit` is called: after the consumer's own checkpoint (``PubmedLoader.load(on_commit=...)``),
    when every record it has taken is durable. What was handed out but not committed is fetched again."""

    def __init__(self) -> None:
        self._state: _Checkpoint | None = None
        self._taken: list[str] = []

    def commit(self) -> None:
        """Every PMID handed out so far is durable: record it in the checkpoint."""
        if self._state is not None and self._taken:
            self._state.add(self._taken)
        self._taken = []


class EntrezClient:
    """esearch/efetch against NCBI (or ``base_url``), with rate limiting, retries and resumable fetches."""

    def __init__(
        self,
        email: str | None,
        api_key: str | None,
        tool: str = "medkg",
        base_url: str | None = None,
        batch_size: int = 200,
        max_tries: int = 3,
        backoff_s: float = 1.0,
        requests_per_second: float | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        if batch_size < 1 or max_tries < 1:
            raise ValueError("batch_size and max_tries must be at least 1")
        self.email = email or None
        self.api_key = api_key or None
        self.tool = tool
        self.base_url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/"
        self.batch_size = batch_size
        self.max_tries = max_tries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.requests_per_second = requests_per_second or (10.0 if self.api_key else 3.0)
        self._limiter = RateLimiter(self.requests_per_second)
        if self.email is None or not _EMAIL.match(self.email):
            logger.warning(
                "NCBI asks E-utilities users for a contact email (got %r); requests go on without one", email
            )

    # -- search ---------------------------------------------------------------------------------------------

    def search(self, query: str, max_results: int, *, page_size: int = ESEARCH_PAGE_MAX) -> list[str]:
        """PMIDs (as strings, in NCBI's order) of the first ``max_results`` hits of ``query``.

        Raises :class:`EntrezError` with NCBI's message for a rejected query or a failed request."""
        limit = min(max_results, PUBMED_SEARCH_LIMIT)
        if max_results > PUBMED_SEARCH_LIMIT:
            logger.warning("PubMed esearch returns at most %d hits; asked for %d", PUBMED_SEARCH_LIMIT, max_results)
        pmids: list[str] = []
        seen: set[str] = set()
        retstart = 0
        while retstart < limit:
            retmax = min(page_size, limit - retstart)
            params = {"db": "pubmed", "term": query, "retstart": str(retstart), "retmax": str(retmax)}
            record = self._read_esearch(self._call("esearch", params))
            ids = [str(i) for i in record.get("IdList", [])]
            for pmid in ids:  # pages can overlap when PubMed changes between calls
                if pmid not in seen:
                    seen.add(pmid)
                    pmids.append(pmid)
            retstart += len(ids)
            if not ids or retstart >= int(record.get("Count", 0)):
                break
        return pmids[:limit]

    def _read_esearch(self, body: bytes) -> dict[str, Any]:
        if b"<!ENTITY" in body:  # NCBI's answers declare none; Bio.Entrez's expat would expand them or fetch URLs
            raise EntrezError(f"esearch: answer refused, it declares XML entities: {_snippet(body)}")
        try:
            record = Entrez.read(io.BytesIO(body), validate=False)
        except RuntimeError as exc:  # an <ERROR> element in a 200 answer
            raise EntrezError(f"esearch: NCBI error: {exc}") from exc
        except Exception as exc:
            raise EntrezError(f"esearch: unreadable answer ({exc}): {_snippet(body)}") from exc
        if not isinstance(record, dict) or "Count" not in record:
            raise EntrezError(f"esearch: unexpected answer: {_snippet(body)}")
        errors = {k: list(v) for k, v in dict(record.get("ErrorList") or {}).items() if v}
        if errors:
            logger.warning("esearch: NCBI reported %s for query %r", errors, record.get("QueryTranslation", ""))
        return record

    # -- fetch ----------------------------------------------------------------------------------------------

    def fetch(
        self,
        pmids: Sequence[str],
        *,
        checkpoint: Path | None = None,
        progress: bool = False,
        delivery: Delivery | None = None,
    ) -> Iterator[Article | Deletion | Problem]:
        """The PubMed records of ``pmids``, fetched ``batch_size`` at a time.

        A batch is read whole before it is parsed, so a connection dropped mid-body is retried like any other
        failure and no record is yielded twice.
        A batch that fails after ``max_tries`` yields one Problem (HTTP status and id range); PMIDs that NCBI did
        not return yield one Problem per batch. With ``checkpoint``, PMIDs already delivered are skipped and each
        delivered PMID is recorded there: a whole batch once its last record has been taken, the records taken
        so far when the iteration is stopped (a record counts as taken once the next one is asked for). With a
        ``delivery`` as well, they are recorded only when ``delivery.commit()`` is called (every record handed
        out until then counts)."""
        from ingest.pubmed.xml import parse_pubmed_xml

        wanted: list[str] = []
        for raw in dict.fromkeys(str(p).strip() for p in pmids):
            if raw.isdigit() and int(raw) > 0:
                wanted.append(str(int(raw)))
            else:
                yield Problem(file=EFETCH_ORIGIN, message=f"not a PMID: {raw!r}")
        wanted = list(dict.fromkeys(wanted))
        state = _Checkpoint(checkpoint) if checkpoint is not None else None
        if delivery is not None:
            delivery._state, delivery._taken = state, []
        todo = [p for p in wanted if state is None or p not in state.delivered]
        taken: list[str] = []  # delivered PMIDs of the current batch, not yet in the checkpoint
        bar = progress_bar(
            total=len(wanted), initial=len(wanted) - len(todo), desc="efetch", unit=" pmids", disable=not progress
        )
        try:
            for start in range(0, len(todo), self.batch_size):
                batch = todo[start : start + self.batch_size]
                span = f"PMIDs {batch[0]}..{batch[-1]} ({len(batch)} ids)"
                try:
                    body = self._call("efetch", {"db": "pubmed", "id": ",".join(batch), "retmode": "xml"})
                except EntrezError as exc:
                    if exc.status == 400 and _EMPTY_ID_LIST in str(exc):
                        body = b"<PubmedArticleSet></PubmedArticleSet>"
                    else:
                        yield Problem(file=EFETCH_ORIGIN, message=f"{exc}; {span} not fetched")
                        bar.update(len(batch))
                        continue
                requested = set(batch)
                returned: set[str] = set()
                for item in parse_pubmed_xml(io.BytesIO(body), EFETCH_ORIGIN):
                    ours = isinstance(item, Article) and item.pmid in requested
                    if ours and delivery is not None:
                        delivery._taken.append(item.pmid)  # handed out now; recorded at its commit()
                    yield item
                    if ours:
                        returned.add(item.pmid)
                        if delivery is None:
                            taken.append(item.pmid)
                missing = [p for p in batch if p not in returned]
                if missing:
                    shown = ", ".join(missing[:20]) + (f", ... (+{len(missing) - 20})" if len(missing) > 20 else "")
                    yield Problem(file=EFETCH_ORIGIN, message=f"{len(missing)} PMIDs not returned: {shown}")
                if state is not None and taken:
                    state.add(taken)
                taken = []
                bar.update(len(batch))
        finally:
            bar.close()
            if state is not None and taken:
                state.add(taken)

    def search_and_fetch(
        self,
        query: str,
        max_results: int,
        checkpoint: Path | None = None,
        *,
        progress: bool = False,
        delivery: Delivery | None = None,
    ) -> Iterator[Article | Deletion | Problem]:
        """:meth:`search` then :meth:`fetch`; with ``checkpoint`` the PMID list is kept there too, so a resumed
        run fetches the same set even if PubMed changed meanwhile."""
        pmids: list[str] | None = None
        if checkpoint is not None:
            pmids = _Checkpoint(checkpoint).search_result(query, max_results)
        if pmids is None:
            pmids = self.search(query, max_results)
            if checkpoint is not None:
                _Checkpoint(checkpoint).save_search(query, max_results, pmids)
        yield from self.fetch(pmids, checkpoint=checkpoint, progress=progress, delivery=delivery)

    # -- HTTP -----------------------------------------------------------------------------------------------

    # Built here, not by Bio.Entrez's functions: they hard-code NCBI's URL and keep the rate limit, retries and
    # identity in module globals. Same rules as ``Bio.Entrez._build_request``: identity on every call, None
    # values dropped, POST from 200 ids or 1000 characters of parameters.
    def _request(self, utility: str, params: dict[str, str]) -> Request:
        full = {**params, "tool": self.tool, "email": self.email, "api_key": self.api_key}
        encoded = urlencode({k: v for k, v in full.items() if v is not None})
        url = f"{self.base_url}{utility}.fcgi"
        ids = params.get("id")
        if len(encoded) > POST_PARAMS_CHARS or (ids is not None and ids.count(",") + 1 >= POST_ID_COUNT):
            headers = {"Content-Type": "application/x-www-form-urlencoded"}
            return Request(url, data=encoded.encode("utf-8"), headers=headers, method="POST")
        return Request(f"{url}?{encoded}", method="GET")

    def _call(self, utility: str, params: dict[str, str]) -> bytes:
        """The whole answer body; retries 429, 5xx and connection failures, raises EntrezError at the end.

        Messages never carry the URL nor the API key (an error body may echo it)."""
        request = self._request(utility, params)
        failure = "no attempt"
        status: int | None = None
        retry_after = 0.0
        for attempt in range(self.max_tries):
            if attempt:
                time.sleep(max(self.backoff_s * 2 ** (attempt - 1), retry_after))
            self._limiter.wait()
            try:
                with urlopen(request, timeout=self.timeout_s) as response:
                    return response.read()
            except HTTPError as exc:
                status, retry_after = exc.code, _retry_after(exc.headers) if exc.code == 429 else 0.0
                body = self._redact(_read_error_body(exc).decode("utf-8", "replace")).encode("utf-8")
                failure = f"HTTP {exc.code}" + (f": {_ncbi_message(body)}" if body else "")
                if exc.code != 429 and exc.code < 500:
                    raise EntrezError(f"{utility}: {failure}", status=exc.code) from None
            except (URLError, OSError, HTTPException) as exc:  # refused, reset, timed out, truncated body
                status, retry_after = None, 0.0
                reason = exc.reason if isinstance(exc, URLError) else exc
                failure = self._redact(f"connection error: {type(reason).__name__}: {reason}")
            logger.info("%s attempt %d/%d failed: %s", utility, attempt + 1, self.max_tries, failure)
        raise EntrezError(f"{utility}: {failure} after {self.max_tries} tries", status=status)

    def _redact(self, text: str) -> str:
        """``text`` without the configured API key, nor any value named api-key/api_key."""
        if self.api_key:
            text = text.replace(self.api_key, "***")
        return _API_KEY_VALUE.sub(r"\1***", text)


def _retry_after(headers: Any) -> float:
    try:
        return min(float(headers.get("Retry-After", 0)), 60.0) if headers is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def _read_error_body(exc: HTTPError) -> bytes:
    try:
        return exc.read() or b""
    except Exception:
        return b""


def _ncbi_message(body: bytes) -> str:
    """NCBI's reason from an error answer: the <ERROR> text of an XML envelope, else the body's start."""
    match = _NCBI_ERROR.search(body)
    if match:
        text = re.sub(r"<[^>]*>", " ", match.group(1).decode("utf-8", "replace"))
        return " ".join(text.split())[:300]
    return _snippet(body)


def _snippet(body: bytes, limit: int = 200) -> str:
    return " ".join(body[:limit].decode("utf-8", "replace").split())


class _Checkpoint:
    """A JSON-lines file: ``{"search": {...}}`` once, ``{"delivered": [pmids]}`` per flush. A torn last line
    (crash mid-write) is ignored and the next append starts on a fresh line."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.delivered: set[str] = set()
        self.search: dict[str, Any] | None = None
        self._torn = False
        if self.path.exists():
            data = self.path.read_bytes()
            self._torn = bool(data) and not data.endswith(b"\n")
            for line in data.splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict):
                    continue
                if isinstance(entry.get("search"), dict):
                    self.search = entry["search"]
                self.delivered.update(str(p) for p in entry.get("delivered", ()))

    def search_result(self, query: str, max_results: int) -> list[str] | None:
        if self.search is None:
            return None
        if self.search.get("query") != query or self.search.get("max_results") != max_results:
            raise EntrezError(
                f"checkpoint {self.path} belongs to query {self.search.get('query')!r} "
                f"(max {self.search.get('max_results')}); use another checkpoint file or delete it"
            )
        return [str(p) for p in self.search.get("pmids", [])]

    def save_search(self, query: str, max_results: int, pmids: list[str]) -> None:
        self.search = {"query": query, "max_results": max_results, "pmids": pmids}
        self._append({"search": self.search})

    def add(self, pmids: list[str]) -> None:
        self.delivered.update(pmids)
        self._append({"delivered": pmids})

    def _append(self, entry: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = ("\n" if self._torn else "") + json.dumps(entry) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self._torn = False
