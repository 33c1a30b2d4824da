"""DICOM studies from a PACS over DICOMweb (``medkg ingest dicomweb``): the studies a server lists (QIDO-RS),
their instances listed (QIDO-RS) and retrieved (WADO-RS, in the transfer syntax the server stores) through
``dicomweb-client``, a batch at a time, into a private temporary folder that is handed to the loader of
files (``multimodal.load``): the same de-identification, index and graph as ``medkg ingest dicom``.

An instance already loaded (in the image index and the graph, with a current vector) is not retrieved again,
so a re-run resumes an interrupted one and adds nothing twice. The original UIDs stay in this module: a
retrieved file is named by the instance's pseudonym, and messages name the server's root and the kind of
request, never a study's or an instance's own UID (only a ``--study`` the user gave).
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import requests
from dicomweb_client.api import DICOMwebClient
from pydicom.dataset import Dataset
from retrying import RetryError

from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.progress import progress_bar
from multimodal.deid import Pseudonymizer
from multimodal.image_index import ImageIndex
from multimodal.load import ImageLoadResult

__all__ = [
    "DicomWeb",
    "DicomwebError",
    "Instance",
    "Plan",
    "already_loaded",
    "plan",
    "retrieve_and_load",
    "study_image",
]

STUDY_UID, SERIES_UID, SOP_UID = "0020000D", "0020000E", "00080018"
PAGE = 500  # QIDO-RS results asked for at once (a server may give fewer: paging goes on until one adds none)
_UID = re.compile(r"^[0-9]+(\.[0-9]+)*$")
_UIDS_IN_PATH = re.compile(r"[0-9]+(\.[0-9]+){2,}")
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")
ANY_TRANSFER_SYNTAX = (("application/dicom", "*"),)  # as stored: no transcoding by the server


class DicomwebError(InvalidInput):
    """A DICOMweb request that failed; ``status`` is the HTTP status, None where no answer came."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    @property
    def of_the_server(self) -> bool:
        """The failure is the server's (unreachable, refused credentials, overloaded), not one request's."""
        return self.status is None or self.status in (401, 403, 429, 503, 504)


@dataclass(frozen=True)
class Instance:
    """One instance as the server lists it (original UIDs: never printed nor stored) and its pseudonym."""

    study: str
    series: str
    sop: str
    image_id: str


@dataclass
class Plan:
    """What a run will do: the studies and instances found, those loaded before, the ones to retrieve."""

    url: str
    studies: int = 0
    instances: int = 0
    already: int = 0  # loaded by an earlier run: not retrieved again
    unlisted: int = 0  # listed without their series or instance UID: cannot be retrieved
    pending: list[Instance] = field(default_factory=list)


def _safe_url(url: str) -> str:
    """``url`` without a user and password in it."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1]))


def _first(data: dict[str, Any], tag: str) -> str | None:
    """The first value of a DICOM JSON attribute, as text."""
    values = (data.get(tag) or {}).get("Value") or []
    return str(values[0]).strip() if values and values[0] is not None else None


class DicomWeb:
    """A DICOMweb server at ``url`` (its root, e.g. ``http://pacs:8042/dicom-web``), with basic auth (``user``,
    ``password``) or a bearer ``token``. Every failure is an :class:`InvalidInput` of one line: an
    unreachable server, an HTTP error (its status and the URL asked), an answer that is not DICOMweb."""

    def __init__(
        self,
        url: str,
        *,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        timeout: float | tuple[float, float] = (10, 120),
    ) -> None:
        parts = urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidInput(
                f"not a DICOMweb URL: {url!r}; give the server's DICOMweb root, e.g. http://127.0.0.1:8042/dicom-web"
            )
        if token and (user or password):
            raise InvalidInput("give either a token or a user and password, not both")
        if bool(user) != bool(password):
            raise InvalidInput("a DICOMweb user and password go together (--user and --password)")
        self.url = _safe_url(url.strip()).rstrip("/")
        session = requests.Session()
        if parts.username and not (user or token):  # http://user:password@host/... as requests takes it
            user, password = parts.username, parts.password or ""
        if token:
            session.headers["Authorization"] = f"Bearer {token}"
        elif user:
            session.auth = (user, password or "")
        try:
            self.client = DICOMwebClient(self.url, session=session, timeout=timeout)
        except ValueError as exc:
            raise InvalidInput(f"not a DICOMweb URL: {self.url} ({exc})") from None
        # the first request (the search for studies) is tried once: a wrong URL or a server that is down
        # fails at once; the requests after it are retried (see studies)
        self.client.set_http_retry_params(retry=False)

    # ---- requests ----------------------------------------------------------------------------------------
    def _where(self, response: requests.Response | None) -> str:
        """The URL a response answered, its UIDs (after the root) left out, and the user and password."""
        if response is None or not response.url:
            return self.url
        url = _safe_url(response.url)
        if url.startswith(self.url):
            return self.url + _UIDS_IN_PATH.sub("<uid>", url[len(self.url) :])
        return url

    def _http_error(self, what: str, response: requests.Response | None) -> DicomwebError:
        status = response.status_code if response is not None else None
        reason = f" {response.reason}" if response is not None and response.reason else ""
        hint = ""
        if status in (401, 403):
            hint = ": give --user and --password, or --token (MEDKG_DICOMWEB_USER/_PASSWORD/_TOKEN)"
        elif status in (400, 404, 405) and what.startswith("QIDO-RS search for studies"):
            hint = f": is {self.url} the server's DICOMweb root (e.g. http://127.0.0.1:8042/dicom-web)?"
        said = f"HTTP {status}{reason}" if status is not None else "HTTP error"
        return DicomwebError(f"{what}: {said} from {self._where(response)}{hint}", status)

    @contextmanager
    def _request(self, what: str) -> Iterator[None]:
        """Failures of the request ``what`` made one clear line (an :class:`InvalidInput`)."""
        try:
            yield
        except InvalidInput:
            raise
        except requests.HTTPError as exc:
            raise self._http_error(what, exc.response) from None
        except RetryError as exc:  # a 429/503/504 still there after dicomweb-client's retries
            value = getattr(exc.last_attempt, "value", None)
            raise self._http_error(what, value if isinstance(value, requests.Response) else None) from None
        except requests.Timeout:
            raise DicomwebError(f"{what}: the DICOMweb server at {self.url} did not answer in time") from None
        except requests.ConnectionError as exc:
            found = _ERRNO.search(str(exc))
            reason = found.group(1).strip() if found else type(exc).__name__
            raise DicomwebError(f"cannot reach the DICOMweb server at {self.url}: {reason}") from None
        except requests.RequestException as exc:
            raise DicomwebError(f"{what}: request to {self.url} failed: {type(exc).__name__}") from None
        except ValueError as exc:  # JSON or multipart that is not what DICOMweb answers
            raise DicomwebError(f"{what}: not a DICOMweb answer from {self.url} ({str(exc)[:120]})", 200) from None

    def _pages(
        self, search: Callable[..., list[dict[str, Any]]], key: Callable[[dict[str, Any]], str | None],
        limit: int | None = None, **kwargs: Any,
    ) -> list[dict[str, Any]]:  # fmt: skip
        """Every result of a QIDO-RS search (at most ``limit``), page by page: until a page is empty or adds
        nothing new (a server that ignores ``offset`` answers the first page again)."""
        found: dict[str | None, dict[str, Any]] = {}
        offset = 0
        while limit is None or len(found) < limit:
            size = PAGE if limit is None else min(PAGE, limit - len(found))
            page = search(limit=size, offset=offset, **kwargs)
            new = {key(item): item for item in page if key(item) not in found}
            if not new:
                break
            found.update(new)
            offset += len(page)
        return list(found.values())[:limit]

    def studies(self, study: str | None = None, limit: int | None = None) -> list[str]:
        """The Study Instance UIDs the server lists (``study`` alone; at most ``limit``), in its order."""
        if study is not None:
            if not _UID.match(study) or len(study) > 64:
                raise InvalidInput(f"not a DICOM UID: {study!r} (digits and dots, at most 64 characters)")
            with self._request(f"QIDO-RS search for studies (StudyInstanceUID={study})"):
                found = self.client.search_for_studies(search_filters={"StudyInstanceUID": study})
            if not any(_first(s, STUDY_UID) == study for s in found):
                raise InvalidInput(f"no study UID {study} on {self.url}")
            studies = [study]
        else:
            with self._request("QIDO-RS search for studies"):
                found = self._pages(self.client.search_for_studies, lambda s: _first(s, STUDY_UID), limit)
            studies = [uid for s in found if (uid := _first(s, STUDY_UID))]
        # the server answers: from now on a dropped connection, a timeout or HTTP 408/429/503/504 is tried
        # again (dicomweb-client's retries: 5 tries, waits doubling from 2 s)
        self.client.set_http_retry_params(retry=True, max_attempts=5, wait_exponential_multiplier=1000)
        return studies

    def instances(self, study: str) -> list[dict[str, Any]]:
        """The instances of a study, as QIDO-RS lists them (DICOM JSON)."""
        with self._request("QIDO-RS search for the instances of a study"):
            return self._pages(self.client.search_for_instances, lambda i: _first(i, SOP_UID), study_instance_uid=study)

    def retrieve(self, instance: Instance) -> Dataset:
        """One instance (WADO-RS), in the transfer syntax the server stores it in."""
        what = "WADO-RS retrieve of an instance"
        try:
            with self._request(what):
                return self.client.retrieve_instance(
                    instance.study, instance.series, instance.sop, media_types=ANY_TRANSFER_SYNTAX
                )
        except InvalidInput:
            raise
        except Exception as exc:  # pydicom on a part that is no data set (truncated, damaged): this one's
            raise DicomwebError(f"{what}: unreadable answer from {self.url} ({type(exc).__name__})", 200) from None

    def check(self) -> None:
        """One QIDO-RS search (one study at most): a wrong root, a server that is down or refused credentials
        fail now, before the work whose result is to be stored there."""
        with self._request("QIDO-RS search for studies"):
            self.client.search_for_studies(limit=1)

    def store(self, datasets: list[Dataset]) -> None:
        """Store instances on the server (STOW-RS), e.g. a drafted report as a structured report."""
        with self._request("STOW-RS store"):
            self.client.store_instances(datasets)


def study_image(server: DicomWeb, study: str) -> Dataset:
    """The first instance of ``study`` on ``server`` that holds pixels (a report's study), as stored: the
    original data set, which the caller de-identifies before reading it (an SR made from it goes back to the
    same study). ``InvalidInput`` for a study the server does not have or one without an image."""
    server.studies(study)  # "no study UID ... on URL" when it has none
    for item in server.instances(study):
        series, sop = _first(item, SERIES_UID), _first(item, SOP_UID)
        if series and sop:
            ds = server.retrieve(Instance(study, series, sop, image_id=""))
            if "PixelData" in ds:
                return ds
    raise InvalidInput(f"study {study} on {server.url} has no image (no instance with pixel data)")


# ---- planning and loading -----------------------------------------------------------------------------------
def already_loaded(index: ImageIndex, graph: BaseGraphStore) -> Callable[[list[str]], set[str]]:
    """Which of some image ids a load finished: in the image index and in the graph, with a current vector
    (an interrupted load may have left one without the others)."""

    def loaded(image_ids: list[str]) -> set[str]:
        indexed = set(index.get(image_ids))
        if not indexed:
            return set()
        return (indexed & graph.existing(indexed)) - set(index.without_vectors())

    return loaded


def plan(
    server: DicomWeb,
    pseudonymizer: Pseudonymizer,
    loaded: Callable[[list[str]], set[str]],
    study: str | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> Plan:
    """The instances of the server's studies (``study`` alone; the first ``limit``), those ``loaded``
    before left out."""
    found = Plan(server.url)
    studies = server.studies(study, limit)
    found.studies = len(studies)
    listed: dict[str, Instance] = {}
    bar = progress_bar(total=len(studies), desc="dicomweb search", unit=" studies", disable=not progress)
    with bar:
        for uid in studies:
            for item in server.instances(uid):
                series, sop = _first(item, SERIES_UID), _first(item, SOP_UID)
                if not (series and sop):
                    found.unlisted += 1
                    continue
                listed.setdefault(sop, Instance(uid, series, sop, pseudonymizer.image_id(sop)))
            bar.update(1)
    found.instances = len(listed) + found.unlisted
    done = loaded([i.image_id for i in listed.values()]) if listed else set()
    found.already = sum(1 for i in listed.values() if i.image_id in done)
    found.pending = [i for i in listed.values() if i.image_id not in done]
    return found


def retrieve_and_load(
    server: DicomWeb,
    todo: Iterable[Instance],
    load: Callable[[Path], ImageLoadResult],
    total: int | None = None,
    progress: bool = True,
    batch: int = 32,
    batch_bytes: int = 512 * 2**20,
) -> ImageLoadResult:
    """Retrieve ``todo`` and ``load`` them a folder at a time (``batch`` instances, or ``batch_bytes``): what a
    batch loaded stays loaded if a later one fails. An instance the server will not give (an HTTP error of
    its own) is counted as an error, and the rest load; an unreachable server ends the run (after loading
    what was retrieved)."""
    started = time.perf_counter()
    result = ImageLoadResult()
    with tempfile.TemporaryDirectory(prefix="medkg-dicomweb-") as folder:  # mode 0700: original data inside
        staged = Path(folder)
        held, size = 0, 0

        def flush() -> None:
            nonlocal held, size
            if held:
                result.add(load(staged))
                for file in staged.iterdir():
                    file.unlink()
            held, size = 0, 0

        bar = progress_bar(total=total, desc="dicomweb retrieve", unit=" instances", disable=not progress)
        with bar:
            try:
                for instance in todo:
                    name = f"{instance.image_id.removeprefix('IMG:')}.dcm"  # the pseudonym, as errors name it
                    try:
                        ds = server.retrieve(instance)
                    except DicomwebError as exc:
                        if exc.of_the_server:
                            raise
                        result.failed(name, str(exc), "retrieve")
                        result.files += 1
                        bar.update(1)
                        continue
                    try:
                        ds.save_as(staged / name)
                    except Exception as exc:  # a data set pydicom cannot write back (its values not quoted)
                        result.failed(name, f"cannot be written: {type(exc).__name__}", "corrupt")
                        result.files += 1
                        bar.update(1)
                        continue
                    held, size = held + 1, size + (staged / name).stat().st_size
                    del ds
                    if held >= batch or size >= batch_bytes:
                        flush()
                    bar.update(1)
            except InvalidInput:
                flush()  # keep what was retrieved before the server failed
                raise
            flush()
    result.seconds = round(time.perf_counter() - started, 2)
    return result
