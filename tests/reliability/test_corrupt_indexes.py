"""A damaged index in the data dir, met at start-up by the real app as ``medkg serve`` runs it
(``create_app(warm=True)``: the warm-up thread loads the model and every index).

FAISS files and their id maps (entities, passages, images) and the passage table are not rebuilt
by the server: ``/readyz`` answers 503 "failed" naming the file and saying how to rebuild it (the
exact ``medkg`` command), requests that need the index answer 503 with the same message, and
nothing answers 500 or wrong results. ``medkg reindex`` (the command named for entity and passage
vectors) sets the damaged files aside and rebuilds them from the graph and the passage table: the
server then answers as before the damage. Derived caches are rebuilt instead of trusted:
BM25 files (from the passage table) and the pickled phenotype index (from the graph), which is
also never unpickled beyond its own classes (a pickle that would run code is refused and rebuilt).
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pydicom.data
import pytest
from fastapi.testclient import TestClient

from kg.settings import load_settings
from multimodal.load import load_images
from service.api.app import create_app
from service.container import Container
from tests.support.qa_store import build_qa_store

pytestmark = pytest.mark.reliability

QUESTION = {"q": "aortic root aneurysm in Marfan syndrome", "k": 5, "mode": "bm25"}
DIFFERENTIAL = {"terms": ["HP:0001250", "HP:0000252"], "top_k": 3}


def settings(data_dir: Path) -> Any:
    return load_settings(
        data_dir=data_dir, api_keys=None, llm_base_url=None, rate_limit_per_minute=0,
        ladybug_buffer_pool_mb=256, ladybug_max_db_size_gb=2,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A loaded data dir (graph, entity and passage indexes, BM25, one image, the phenotype cache) and
    what the healthy server answers from it."""
    data = tmp_path_factory.mktemp("pristine") / "data"
    container = Container(settings(data))
    build_qa_store(container)
    image = Path(pydicom.data.get_testdata_file("CT_small.dcm"))
    loaded = load_images(container.graph, container.image_index, container.pseudonymizer, [image], progress=False)
    assert loaded.images == 1
    container.close()
    with serve(data) as (client, ready):
        assert ready["status"] == "ready", ready
        answers = {
            "search": client.get("/v1/search", params=QUESTION).json(),
            "differential": client.post("/v1/differential", json=DIFFERENTIAL).json(),
        }
    assert answers["search"] and answers["differential"]["diseases"]
    for name in ("entities.vectors", "passages.vectors", "images.vectors", "phenotypes.pkl", "passages.tantivy"):
        assert (data / "indexes" / name).exists(), name
    return data, answers


class serve:  # noqa: N801 - used as a context manager, like a function
    """The app as ``medkg serve`` starts it, on ``data``; yields the client and the settled /readyz."""

    def __init__(self, data: Path) -> None:
        self.client = TestClient(create_app(settings(data), warm=True))

    def __enter__(self) -> tuple[TestClient, dict[str, Any]]:
        self.client.__enter__()
        deadline = time.monotonic() + 120
        while True:
            r = self.client.get("/readyz")
            body = r.json()
            assert r.status_code == (200 if body["status"] == "ready" else 503), body
            if body["status"] != "loading" or time.monotonic() > deadline:
                return self.client, body
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.client.__exit__(*exc)


@pytest.fixture()
def copy(pristine: tuple[Path, dict[str, Any]], tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    shutil.copytree(pristine[0], data)
    yield data


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])


def flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def garbage(path: Path) -> None:
    path.write_bytes(b"\x00garbage, not what this file should hold\xff" * 10)


SEGMENT = "passages.vectors/seg-000001.f32"
FATAL: list[tuple[str, str, Callable[[Path], None], str, list[str]]] = [
    # (file, damage, how, the rebuild command the message must give, requests that need the index)
    ("entities.vectors/seg-000001.f32", "truncated", truncate, "medkg reindex --only entities", ["/v1/link?q=marfan"]),
    ("entities.vectors/map.sqlite", "garbage", garbage, "medkg reindex --only entities", ["/v1/link?q=marfan"]),
    (SEGMENT, "one byte flipped", flip, "medkg reindex --only passages", ["/v1/search?q=marfan&mode=dense"]),
    ("passages.vectors/map.sqlite", "truncated", truncate, "medkg reindex --only passages", ["/v1/search?q=marfan"]),
    ("passages.sqlite", "garbage", garbage, "medkg ingest pubmed", ["/v1/search?q=marfan&mode=bm25"]),
    ("images.vectors/seg-000001.f32", "truncated", truncate, "medkg reindex --only images --from", []),
]


@pytest.mark.parametrize(("name", "damage", "how", "command", "requests"), FATAL, ids=[f"{f[0]}-{f[1]}" for f in FATAL])
def test_a_damaged_index_is_named_at_start_up(
    copy: Path, name: str, damage: str, how: Callable[[Path], None], command: str, requests: list[str]
) -> None:
    path = copy / "indexes" / name
    how(path)
    with serve(copy) as (client, ready):
        assert ready["status"] == "failed", ready
        detail = ready["checks"]["models"]["detail"]
        assert str(path) in detail and command in detail, detail
        assert "Traceback" not in detail
        for url in requests:
            r = client.get(url)
            assert r.status_code == 503, (url, r.status_code, r.text[:300])
            assert str(path) in r.json()["detail"] and command in r.json()["detail"], r.text[:300]
        again = client.get("/readyz")  # a retry fails the same way and keeps saying why
        assert again.status_code == 503 and again.json()["status"] in ("failed",), again.json()
        assert client.get("/healthz").status_code == 200  # the graph itself is fine


@pytest.mark.parametrize(
    "names",
    [["entities.vectors/seg-000001.f32"], ["passages.vectors/map.sqlite"], [SEGMENT, "entities.vectors/map.sqlite"]],
)
def test_medkg_reindex_repairs_damaged_vectors(
    copy: Path, pristine: tuple[Path, dict[str, Any]], names: list[str]
) -> None:
    from tests.support.cli import run

    for i, name in enumerate(names):
        (truncate, garbage)[i % 2](copy / "indexes" / name)
    env = {"MEDKG_DATA_DIR": str(copy), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "HF_HUB_OFFLINE": "1"}
    r = run(["reindex"], env, copy.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    aside = sorted(p.name for p in (copy / "indexes").iterdir() if ".damaged-" in p.name)
    stems = {n.split(".")[0] for n in names}
    assert {a.split(".")[0] for a in aside} == stems and len(aside) == len(stems)  # each store kept whole
    for stem in stems:  # rebuilt in full (an intact index only catches up: no file set aside)
        line = next(x for x in r.stdout.splitlines() if x.startswith(stem))
        found = re.search(r"([\d,]+) (?:stored|indexed), ([\d,]+) embedded", line)
        assert found, line
        stored, embedded = (int(x.replace(",", "")) for x in found.groups())
        assert embedded == stored > 0, line
    with serve(copy) as (client, ready):
        assert ready["status"] == "ready", ready
        for mode in ("dense", "bm25"):
            assert client.get("/v1/search", params={**QUESTION, "mode": mode}).status_code == 200
        assert client.get("/v1/search", params=QUESTION).json() == pristine[1]["search"]
        assert client.get("/v1/link", params={"q": "marfan syndrome"}).status_code == 200
    again = run(["reindex"], env, copy.parent)  # nothing left to do
    assert again.returncode == 0 and "0 embedded" in again.stdout, again.stdout


def test_medkg_reindex_images_from_their_files(copy: Path) -> None:
    """A damaged image index: ``medkg reindex --only images --from FILES`` sets it aside and embeds
    the indexed images again from their files, keeping their metadata and thumbnails."""
    import sqlite3

    from multimodal.dicom import read_dicom
    from tests.support.cli import run

    truncate(copy / "indexes" / "images.vectors" / "seg-000001.f32")
    env = {"MEDKG_DATA_DIR": str(copy), "MEDKG_LADYBUG_BUFFER_POOL_MB": "256", "HF_HUB_OFFLINE": "1"}
    r = run(["reindex", "--only", "images"], env, copy.parent)
    assert r.returncode == 2 and "--from" in r.stderr, r.stderr
    image = pydicom.data.get_testdata_file("CT_small.dcm")
    r = run(["reindex", "--only", "images", "--from", image], env, copy.parent)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "images: 1 indexed, 1 embedded" in r.stdout, r.stdout
    aside = sorted(p.name.split(".damaged-")[0] for p in (copy / "indexes").iterdir() if ".damaged-" in p.name)
    assert aside == ["images.vectors"]
    with sqlite3.connect(copy / "indexes" / "images.sqlite") as db:
        (image_id,) = db.execute("SELECT image_id FROM images").fetchone()
    with serve(copy) as (client, ready):
        assert ready["status"] == "ready", ready
        assert client.get(f"/v1/images/{image_id}/preview").status_code == 200  # thumbnail kept
    c = Container(settings(copy))
    try:
        best = c.image_index.search(read_dicom(Path(image), c.pseudonymizer), k=1)[0]
        assert best.image_id == image_id and best.score == pytest.approx(1.0, abs=1e-4)
    finally:
        c.close()
    again = run(["reindex", "--only", "images", "--from", image], env, copy.parent)
    assert again.returncode == 0 and "1 indexed, 0 embedded" in again.stdout, again.stdout


@pytest.mark.parametrize("which", ["every file", "index files only"])
def test_damaged_bm25_files_are_rebuilt(
    copy: Path, pristine: tuple[Path, dict[str, Any]], caplog: pytest.LogCaptureFixture, which: str
) -> None:
    folder = copy / "indexes" / "passages.tantivy"
    files = sorted(
        p
        for p in folder.iterdir()
        if p.is_file() and not p.name.startswith(".") and (which == "every file" or p.suffix != ".json")
    )
    assert len(files) > 2
    for i, path in enumerate(files):
        (truncate, garbage, flip)[i % 3](path)
    with serve(copy) as (client, ready):
        assert ready["status"] == "ready", ready
        assert client.get("/v1/search", params=QUESTION).json() == pristine[1]["search"]
    if which == "index files only":  # the stamp still matches: the files themselves fail to load
        assert any("BM25 index" in r.getMessage() and "rebuilding" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with serve(copy) as (client, ready):  # what was rebuilt is used as it is the next time
        assert ready["status"] == "ready"
        assert client.get("/v1/search", params=QUESTION).json() == pristine[1]["search"]
    assert not any("BM25 index" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "runs code", "another object"])
def test_a_phenotype_cache_that_does_not_load_is_rebuilt(
    copy: Path, pristine: tuple[Path, dict[str, Any]], damage: str, tmp_path: Path
) -> None:
    path = copy / "indexes" / "phenotypes.pkl"
    marker = tmp_path / "pwned"
    if damage == "truncated":
        truncate(path)
    elif damage == "garbage":
        garbage(path)
    elif damage == "runs code":

        class Evil:
            def __reduce__(self) -> tuple[Any, ...]:
                return (os.system, (f"touch {marker}",))

        path.write_bytes(pickle.dumps({"stamp": "whatever", "index": Evil()}))
    else:
        stamp = pickle.loads(path.read_bytes())["stamp"]  # the right stamp, the wrong thing inside
        path.write_bytes(pickle.dumps({"stamp": stamp, "index": {"not": "an index"}}))
    with serve(copy) as (client, ready):
        assert ready["status"] == "ready", ready
        r = client.post("/v1/differential", json=DIFFERENTIAL)
        assert r.status_code == 200 and r.json() == pristine[1]["differential"], r.text[:300]
    assert not marker.exists(), "the cache was unpickled beyond the index's own classes"
    with path.open("rb") as f:
        assert type(pickle.load(f)["index"]).__name__ == "PhenotypeIndex"  # rewritten, usable next time
