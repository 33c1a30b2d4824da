"""The HTTP API end to end: the real app, a real embedded store, real requests (TestClient)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kg.model import Entity, Relation
from kg.settings import load_settings
from service.api.app import create_app
from service.container import Container


@pytest.fixture()
def client(tmp_path: Path) -> Iterator[TestClient]:
    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2)
    container = Container(settings)
    g = container.graph
    g.upsert_entities(
        [
            Entity(id="DB00945", name="Aspirin", category="Drug", synonyms=["acetylsalicylic acid"]),
            Entity(id="DOID:0050423", name="Kawasaki disease", category="Disease", xrefs=["OMIM:611775"]),
            Entity(id="OMIM:611775", name="Kawasaki disease, susceptibility to", category="Disease"),
            Entity(id="HP:0001945", name="Fever", category="Phenotype"),
        ]
    )
    g.upsert_relations(
        [
            Relation(subject="DB00945", type="TREATS", object="DOID:0050423", source="pharmacotherapydb"),
            Relation(subject="DOID:0050423", type="SAME_AS", object="OMIM:611775", source="doid"),
            Relation(
                subject="OMIM:611775",
                type="HAS_PHENOTYPE",
                object="HP:0001945",
                source="hpo",
                evidence={"pmids": ["PMID:12345"]},
            ),
        ]
    )
    with TestClient(create_app(container=container)) as c:
        yield c


def test_health_and_stats(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "backend": "ladybug", "entities": 4}
    s = client.get("/v1/stats").json()
    assert (s["entities"], s["relations"], s["relation_types"]["TREATS"]) == (4, 3, 1)


def test_entity_lookup_and_search(client: TestClient) -> None:
    r = client.get("/v1/entities/Compound::DB00945")
    assert r.status_code == 200 and r.json()["id"] == "DRUGBANK:DB00945"
    assert client.get("/v1/entities/HP:9999999").status_code == 404
    # an id that is not a CURIE names no entity: 404, saying why (schema-valid input is never a 422)
    bad = client.get("/v1/entities/nonsense")
    assert bad.status_code == 404 and "has no prefix" in bad.json()["detail"]
    assert client.get("/v1/entities/0/neighbours").status_code == 404
    assert client.get("/v1/paths", params={"source": "0", "target": "HP:0001945"}).status_code == 404
    found = client.get("/v1/entities", params={"q": "ACETYLSALICYLIC ACID"}).json()
    assert [e["id"] for e in found] == ["DRUGBANK:DB00945"]
    assert client.get("/v1/entities", params={"q": ""}).status_code == 422


def test_neighbours_and_paths(client: TestClient) -> None:
    nbrs = client.get("/v1/entities/DOID:0050423/neighbours", params={"direction": "in"}).json()
    assert [(n["entity"]["id"], n["relation"]["type"]) for n in nbrs] == [("DRUGBANK:DB00945", "TREATS")]
    paths = client.get("/v1/paths", params={"source": "DB00945", "target": "HP:0001945", "max_hops": 2}).json()
    assert len(paths) == 1
    p = paths[0]
    assert [n["name"] for n in p["nodes"]] == [
        "Aspirin",
        "Kawasaki disease",
        "Kawasaki disease, susceptibility to",
        "Fever",
    ]
    assert (p["cost"], p["length"]) == (2, 3)
    assert p["relations"][2]["evidence"] == {"pmids": ["PMID:12345"]}
    hood = client.get("/v1/entities/DB00945/neighbourhood", params={"hops": 2}).json()
    assert len(hood["entities"]) == 3
    assert (
        client.get("/v1/paths", params={"source": "DB00945", "target": "HP:0001945", "max_hops": 9}).status_code == 422
    )
    unknown = client.get("/v1/paths", params={"source": "DB00945", "target": "HP:9999999"})
    assert unknown.status_code == 404 and "HP:9999999" in unknown.json()["detail"]


@pytest.mark.reliability
def test_neo4j_down_is_503_with_retry_after(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = load_settings(graph_backend="neo4j", neo4j_uri=f"bolt://127.0.0.1:{port}", neo4j_connect_timeout_s=2)
    with TestClient(create_app(settings)) as c:
        r = c.get("/v1/stats")
        assert r.status_code == 503 and r.headers["Retry-After"] == "5"
        assert f"bolt://127.0.0.1:{port}" in r.json()["detail"]
        assert c.get("/healthz").status_code == 503


class _Proxy:
    """A loopback TCP forwarder, to bring "Neo4j" up on a port after the API has started."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        import threading

        self.server = socket.create_server(("127.0.0.1", port))
        self.target = target
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import threading

        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.stopped = True
        self.server.close()


@pytest.mark.neo4j
@pytest.mark.reliability
def test_api_recovers_when_neo4j_comes_up_without_restart() -> None:
    from urllib.parse import urlparse

    from tests.conftest import require_neo4j

    neo = require_neo4j()
    real = urlparse(neo["uri"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = load_settings(
        graph_backend="neo4j",
        neo4j_uri=f"bolt://127.0.0.1:{port}",
        neo4j_user=neo["user"],
        neo4j_password=neo["password"],
        neo4j_database=neo["database"],
        neo4j_connect_timeout_s=2,
    )
    with TestClient(create_app(settings)) as c:
        assert c.get("/v1/stats").status_code == 503
        proxy = _Proxy(port, (real.hostname or "127.0.0.1", real.port or 7687))
        try:
            r = c.get("/v1/stats")
            assert r.status_code == 200 and r.json()["backend"] == "neo4j"
            assert c.get("/healthz").json()["status"] == "ok"
        finally:
            proxy.close()


def test_ids_with_a_slash_are_reachable(client: TestClient) -> None:
    c = client.app.state.container
    c.graph.upsert_entities([Entity(id="DOI:10.1000/182", name="A handbook", category="Publication")])
    c.graph.upsert_relations([Relation(subject="DOI:10.1000/182", type="MENTIONS", object="HP:0001945", source="t")])
    one = client.get("/v1/entities/DOI:10.1000/182")
    assert one.status_code == 200 and one.json()["name"] == "A handbook"
    nbrs = client.get("/v1/entities/DOI:10.1000/182/neighbours").json()
    assert [n["entity"]["id"] for n in nbrs] == ["HP:0001945"]
    hood = client.get("/v1/entities/DOI:10.1000/182/neighbourhood", params={"hops": 1})
    assert hood.status_code == 200
    assert client.get("/v1/entities/DOI:10.1000/999").status_code == 404


def test_the_first_build_of_the_qa_engine_leaves_the_server_answering(tmp_path: Path) -> None:
    """``c.qa`` is built on first use (linker, lexicon, indexes: seconds to a minute): in a worker
    thread, so that health probes and other requests are answered meanwhile."""
    building, finished = threading.Event(), threading.Event()

    class SlowToBuild(Container):
        @property
        def qa(self) -> Any:  # stands in for the cached build
            building.set()
            time.sleep(3)
            finished.set()
            raise RuntimeError("built too late")

    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2)
    with TestClient(create_app(container=SlowToBuild(settings)), raise_server_exceptions=False) as client:
        asked = threading.Thread(target=client.post, args=("/v1/qa",), kwargs={"json": {"question": "fever?"}})
        asked.start()
        assert building.wait(10)
        assert client.get("/healthz").status_code == 200
        answered_meanwhile = not finished.is_set()
        asked.join(15)
    assert answered_meanwhile


def test_a_damaged_key_file_is_a_server_fault_not_the_clients(tmp_path: Path) -> None:
    import pydicom

    (tmp_path / "deid.key").write_bytes(b"abc")  # truncated
    settings = load_settings(data_dir=tmp_path, ladybug_buffer_pool_mb=128, ladybug_max_db_size_gb=2)
    ct = Path(pydicom.data.__file__).parent / "test_files" / "CT_small.dcm"
    with TestClient(create_app(container=Container(settings)), raise_server_exceptions=False) as client:
        r = client.post("/v1/images/preview", files={"file": ("ct.dcm", ct.read_bytes(), "application/dicom")})
    assert r.status_code == 503 and "misconfigured" in r.text and str(tmp_path) not in r.text


def test_a_model_the_server_builds_wrongly_is_its_fault(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from kg.model import GraphStats

    def broken() -> GraphStats:
        return GraphStats.model_validate({"entities": "many"})  # a pydantic ValidationError, a ValueError

    monkeypatch.setattr(client.app.state.container.graph, "stats", broken)
    with pytest.raises(ValidationError):
        broken()
    r = TestClient(client.app, raise_server_exceptions=False).get("/v1/stats")
    assert r.status_code == 500 and "entities" not in r.text
    assert (
        client.post("/v1/differential", json={"terms": ["HP:0001945"], "namespaces": ["NOPE"]}).status_code == 422
    )  # the client's own bad input stays 422


def test_only_the_clients_input_errors_are_422(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ValueError from inside the server (numpy, a library, a bug) is a 500 that shows nothing of
    its message; the client's own bad input (``InvalidInput``) stays a 422 that says what to change."""
    graph = client.app.state.container.graph

    def library_complaint(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("operands could not be broadcast together with shapes (3,) (7,) at /srv/medkg")

    monkeypatch.setattr(graph, "neighbours", library_complaint)
    r = TestClient(client.app, raise_server_exceptions=False).get("/v1/entities/HP:0001945/neighbours")
    assert r.status_code == 500 and "broadcast" not in r.text and "/srv" not in r.text
    monkeypatch.undo()
    r = client.post("/v1/qa", json={"question": " \n\t "})  # the engine's own check, after the model's
    assert r.status_code == 422 and "the question is empty" in r.text
    assert (
        client.post("/v1/differential", json={"terms": ["HP:0001945"], "namespaces": ["NOPE"]}).status_code == 422
    )  # an InvalidInput
