import sqlite3

from kg.sql import IN_CHUNK, in_chunks


def test_in_chunks_covers_every_id_once_within_sqlite_limits():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (id TEXT PRIMARY KEY)")
    ids = [f"PMID:{i}" for i in range(2 * IN_CHUNK + 37)]
    db.executemany("INSERT INTO t VALUES (?)", [(i,) for i in ids[::2]])  # every other one stored
    found, sizes = set(), []
    for chunk, marks in in_chunks(ids):
        sizes.append(len(chunk))
        found |= {r[0] for r in db.execute(f"SELECT id FROM t WHERE id IN ({marks})", chunk)}
    assert found == set(ids[::2])
    assert sizes == [IN_CHUNK, IN_CHUNK, 37]
    assert list(in_chunks([])) == []
    assert list(in_chunks(("a", "b"), size=1)) == [(["a"], "?"), (["b"], "?")]
