from pathlib import Path

from kg.model import Entity, Relation
from tests.conftest import open_ladybug


def test_embedded_store_persists_in_the_data_dir(tmp_path: Path) -> None:
    store = open_ladybug(tmp_path)
    store.upsert_entities([Entity(id="HP:0000001", name="All"), Entity(id="HP:0000118", name="Phenotypic abnormality")])
    store.upsert_relations([Relation(subject="HP:0000118", type="IS_A", object="HP:0000001", source="hpo")])
    store.close()
    assert (tmp_path / "graph.lbug").exists()
    reopened = open_ladybug(tmp_path)
    try:
        st = reopened.stats()
        assert (st.entities, st.relations) == (2, 1)
        assert [n.entity.id for n in reopened.neighbours("HP:0000118")] == ["HP:0000001"]
    finally:
        reopened.close()


def test_many_stores_open_at_once(tmp_path: Path) -> None:
    stores = [open_ladybug(tmp_path / str(i)) for i in range(8)]
    try:
        for i, s in enumerate(stores):
            s.upsert_entities([Entity(id=f"HP:{i:07d}", name=f"n{i}")])
        assert [s.stats().entities for s in stores] == [1] * 8
    finally:
        for s in stores:
            s.close()


def test_threads_use_their_own_connections_and_transactions(tmp_path: Path) -> None:
    import threading

    store = open_ladybug(tmp_path)
    try:
        store.upsert_entities([Entity(id=f"HP:{i:07d}", name=f"n{i}") for i in range(50)])
        errors: list[BaseException] = []

        def reader() -> None:
            try:
                for _ in range(20):
                    assert store.stats().entities == 50
                    assert store.get_entity("HP:0000007") is not None
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=reader) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    finally:
        store.close()
    store.close()  # closing twice is harmless
