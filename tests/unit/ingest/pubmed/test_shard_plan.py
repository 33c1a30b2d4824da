"""The shard plan of a Ray load: a load killed between recording a shard merged and dropping its file
leaves the file behind; the next merge drops it, and keeps the files of shards not merged yet."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

from ingest.pubmed.distributed import Shard, ShardPlan  # noqa: E402


def test_the_files_of_shards_recorded_merged_are_dropped_and_no_others(tmp_path: Path) -> None:
    stage = tmp_path / "shards"
    stage.mkdir()
    plan = ShardPlan([Shard(tmp_path / f"{k}.xml", k) for k in ("a", "b", "c")], stage, stage / "merged.jsonl")
    for shard in plan.shards:
        plan.file(shard).write_bytes(b"rows")
    # the record is synced, then the kill comes before the file is dropped
    plan.record_merged(plan.shards[:1], keep=True)
    assert plan.file(plan.shards[0]).exists() and (stage / "merged.jsonl").read_text().count("\n") == 1

    plan.drop_merged_files()
    assert sorted(p.name for p in stage.glob("*.parquet")) == ["b.parquet", "c.parquet"]
    assert [s.key for s in plan.to_merge] == ["b", "c"] and plan.to_prepare == []
