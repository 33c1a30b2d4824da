from pathlib import Path

from kg.graph.ladybug_store import LadybugGraphStore
from kg.model import Entity, Relation
from tests.conftest import open_ladybug
from tests.support import REPO


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


def _crash_after(tmp_path: Path, body: str) -> None:
    """Run ``body`` with a store ``s`` in a child process that exits without closing anything."""
    import subprocess
    import sys
    import textwrap

    script = (
        textwrap.dedent(
            f"""
        import os
        from kg.graph.ladybug_store import LadybugGraphStore
        from kg.model import Entity, Relation
        s = LadybugGraphStore({str(tmp_path / "g.lbug")!r}, buffer_pool_mb=256, max_db_size_gb=2)
        def terms(a, b):
            return [Entity(id=f"HP:{{i:07d}}", name=f"term {{i}}") for i in range(a, b)]
        """
        )
        + textwrap.dedent(body)
        + "\nos._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, cwd=REPO)


def _counts(tmp_path: Path) -> tuple[int, int]:
    store = LadybugGraphStore(tmp_path / "g.lbug", buffer_pool_mb=256, max_db_size_gb=2)
    try:
        stats = store.stats()
        return stats.entities, stats.relations
    finally:
        store.close()


def test_commits_survive_a_crash(tmp_path: Path) -> None:
    _crash_after(
        tmp_path,
        """
        s.upsert_entities(terms(1, 201))
        s.upsert_relations([Relation(subject=f"HP:{i:07d}", type="IS_A", object="HP:0000001") for i in range(2, 201)])
        """,
    )
    assert _counts(tmp_path) == (200, 199)


def test_bulk_loads_are_durable_at_checkpoints(tmp_path: Path) -> None:
    """Inside bulk(), copies become durable at checkpoint(); a crash loses only what came after the
    last one, and leaves a database that opens and answers."""
    _crash_after(
        tmp_path,
        """
        with s.bulk():
            s.upsert_entities(terms(1, 101))
            s.checkpoint()
            s.upsert_entities(terms(101, 201))
            os._exit(0)
        """,
    )
    assert _counts(tmp_path) == (100, 0)
    store = LadybugGraphStore(tmp_path / "g.lbug", buffer_pool_mb=256, max_db_size_gb=2)
    with store.bulk():
        store.upsert_entities([Entity(id=f"HP:{i:07d}", name=f"term {i}") for i in range(101, 201)])
    store.close()  # the end of bulk() is a checkpoint
    assert _counts(tmp_path) == (200, 0)
