"""Index generations: what a writer publishes, a reader of the same kind sees once; other kinds not."""

from __future__ import annotations

from pathlib import Path

from kg.index_generation import Generations


def test_a_reader_sees_each_new_generation_of_its_own_kind_once(tmp_path: Path) -> None:
    passages, entities = Generations(tmp_path, "passages", every_s=0), Generations(tmp_path, "entities", every_s=0)
    writer = Generations(tmp_path, "passages")
    assert not passages.changed() and passages.current() == 0
    assert writer.publish() == 1 and writer.publish() == 2
    assert passages.changed() and not passages.changed()  # once per generation
    assert not entities.changed()  # a passage checkpoint leaves the entity index alone
    assert Generations(tmp_path, "entities").publish() == 1 and entities.changed()
    assert Generations(tmp_path, "passages").current() == 2
    writer.every_s = 0
    assert not writer.changed()  # the writer has seen what it published


def test_a_reader_looks_at_most_every_so_often(tmp_path: Path) -> None:
    reader = Generations(tmp_path, "passages", every_s=3600)
    Generations(tmp_path, "passages").publish()
    assert not reader.changed()  # looked at creation, not again within the hour
    (tmp_path / "GENERATION").write_text("{broken")
    assert Generations(tmp_path, "passages").current() == 0  # an unreadable file reads as no generation
