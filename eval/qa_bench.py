"""Benchmark runs: questions through one answer mode, per-question JSONL, metrics and a Markdown report
(``medkg eval medqa FILE --mode offline``; likewise medmcqa, mmlu, pubmedqa, kgrag-mcq, kgrag-tf).
Runs resume where they stopped; the store is opened read-only and nothing is written to the data dir.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from eval.answering import MODES, Answerer, EvalError, EvalLLM, LLMAnswering, OfflineAnswering, RemoteAnswering
from eval.datasets import BENCHMARKS, DatasetError, Item, LoadResult, load
from service.container import Container
from service.web.eval_charts import render_report

if TYPE_CHECKING:
    import httpx

    from kg.differential import PhenotypeIndex
    from kg.settings import Settings

__all__ = [
    "EvalError",
    "REFERENCES",
    "RunConfig",
    "metrics",
    "open_container",
    "render_markdown",
    "run",
    "run_cli",
    "wilson",
]

DEFAULT_OUT = Path("eval-results")
FIRST_FAILURES = 5  # the run stops when its first this-many questions all fail

# Published figures, for context only: other models, the full test sets (ours: dev splits).
REFERENCES: dict[str, list[tuple[str, str, str]]] = {
    "medqa": [
        ("GPT-4, chain of thought", "83.97%", "MIRAGE (Xiong et al. 2024), MedQA-US test, 1,273 questions"),
        ("GPT-4 + MedRAG", "82.80%", "MIRAGE"),
        ("GPT-3.5, chain of thought", "65.04%", "MIRAGE"),
        ("GPT-3.5 + MedRAG", "66.61%", "MIRAGE"),
    ],
    "kgrag-mcq": [("GPT-4 + KG-RAG", "0.742", "KG-RAG (Soman et al. 2024), 306 MCQs")],
}


class RunConfig(BaseModel):
    benchmark: str
    mode: str
    file: str
    k: int = 8
    hops: int = 2
    budget: int | None = None
    context: bool = True  # PubMedQA: with the abstract (reasoning-required) or not
    model: str | None = None  # the LLM (LLM modes)
    url: str | None = None  # a medkg server (--url)

    @property
    def name(self) -> str:
        suffix = "-nocontext" if self.benchmark == "pubmedqa" and not self.context else ""
        return f"{self.benchmark}-{self.mode}{suffix}{'-remote' if self.url else ''}"


# ---- metrics -----------------------------------------------------------------------------------
def wilson(correct: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% for the default ``z``)."""
    if n <= 0:
        return 0.0, 0.0
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def _accuracy(correct: int, n: int) -> dict[str, Any]:
    low, high = wilson(correct, n)
    return {
        "n": n,
        "correct": correct,
        "accuracy": round(correct / n, 4) if n else 0.0,
        "ci95": [round(low, 4), round(high, 4)],
    }


def metrics(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(records)
    correct = sum(1 for r in records if r["correct"])
    errors = sum(1 for r in records if r.get("error"))
    parsed = sum(1 for r in records if r["parsed"])
    latencies = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    prompt = [r["prompt_tokens"] for r in records if r.get("prompt_tokens") is not None]
    completion = [r["completion_tokens"] for r in records if r.get("completion_tokens") is not None]
    subjects: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        if r.get("subject"):
            subjects.setdefault(r["subject"], []).append(r)
    gold = Counter(r["answer"] for r in records)
    majority = gold.most_common(1)[0] if gold else ("", 0)
    return {
        **_accuracy(correct, n),
        "accuracy_of_parsed": round(correct / parsed, 4) if parsed else 0.0,
        "parsed": parsed,
        "unparsed": n - errors - parsed,
        "errors": errors,
        "parse_rate": round(parsed / (n - errors), 4) if n - errors else 0.0,
        "prior_decided": sum(1 for r in records if r.get("decided_by") == "prior"),
        "latency_s": {
            "p50": round(_percentile(latencies, 0.5), 3),
            "p95": round(_percentile(latencies, 0.95), 3),
            "mean": round(statistics.fmean(latencies), 3) if latencies else 0.0,
        },
        "tokens": {
            "prompt_total": sum(prompt),
            "completion_total": sum(completion),
            "prompt_mean": round(statistics.fmean(prompt), 1) if prompt else None,
            "completion_mean": round(statistics.fmean(completion), 1) if completion else None,
            "source": sorted({r["tokens_source"] for r in records if r.get("tokens_source")}),
            "evidence_mean": round(statistics.fmean([r.get("evidence_tokens", 0) for r in records]), 1) if n else 0.0,
        },
        "baselines": {
            "chance": round(statistics.fmean([1 / len(r["options"]) for r in records]), 4) if n else 0.0,
            "majority_answer": majority[0],
            "majority_accuracy": round(majority[1] / n, 4) if n else 0.0,
        },
        "per_subject": {
            s: _accuracy(sum(1 for r in rs if r["correct"]), len(rs)) for s, rs in sorted(subjects.items())
        },
    }


# ---- records -----------------------------------------------------------------------------------
def _read_records(path: Path) -> tuple[dict[str, dict[str, Any]], int, int]:
    """(records by id without the errored ones, unreadable lines, errored records) of a JSONL."""
    records: dict[str, dict[str, Any]] = {}
    bad = errored = 0
    if not path.exists():
        return records, 0, 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            r["id"]  # noqa: B018 - a record without an id is unreadable
        except (ValueError, KeyError, TypeError):
            bad += 1  # e.g. the last line of a run killed mid-write
            continue
        if r.get("error"):
            errored += 1
            records.pop(r["id"], None)
            continue
        records[r["id"]] = r
    return records, bad, errored


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


def _record(item: Item, outcome: Any, mode: str, model: str | None, latency: float) -> dict[str, Any]:
    data = outcome.model_dump()
    return {
        "id": item.id,
        "dataset": item.dataset,
        "subject": item.subject,
        "kind": item.kind,
        "mode": mode,
        "model": model,
        "question": item.question,
        "options": item.options,
        "context_given": bool(item.context),
        "answer": item.answer,
        "predicted": outcome.predicted,
        "correct": outcome.predicted == item.answer,
        **{k: v for k, v in data.items() if k != "predicted"},
        "latency_s": round(latency, 4),
    }


def run(
    items: Sequence[Item],
    answerer: Answerer,
    out_dir: Path,
    config: RunConfig,
    progress: bool = True,
    fresh: bool = False,
) -> dict[str, Any]:
    """Answer ``items`` (skipping those already answered in ``out_dir``), then write the metrics and
    the Markdown report; returns the metrics (with the paths written). The metrics cover every answered
    question of the configuration in its JSONL (earlier runs' too), so a run of a few items (``--limit``)
    keeps the figures of the full run it shares a JSONL with.

    Writes ``<name>.jsonl`` (per question: what was asked, evidence ids, answer, parsed, right, citations,
    scores, tokens, latency), ``<name>.run.json`` (the configuration a resumed run must match),
    ``<name>.metrics.json`` and ``summary.md`` (every run of the folder side by side, with the published
    reference numbers). Ids already in the JSONL are skipped, errored ones asked again; ``fresh`` starts over."""
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / f"{config.name}.jsonl"
    run_file = out_dir / f"{config.name}.run.json"
    if fresh:
        for path in (jsonl, run_file, out_dir / f"{config.name}.metrics.json"):
            path.unlink(missing_ok=True)
    if run_file.exists() and jsonl.exists():
        before = json.loads(run_file.read_text(encoding="utf-8"))
        now = config.model_dump()
        changed = {k: (before.get(k), v) for k, v in now.items() if before.get(k) != v}
        if changed:
            what = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items())
            raise EvalError(
                f"{jsonl} holds answers of another configuration ({what}): use another --out, or --fresh to start over"
            )
    done, bad, errored = _read_records(jsonl)
    if bad or errored:  # drop unreadable lines and errored answers (asked again below)
        tmp = jsonl.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values()), encoding="utf-8")
        tmp.replace(jsonl)
    _write_json(run_file, config.model_dump())

    wanted = {i.id for i in items}
    todo = [i for i in items if i.id not in done]
    resumed = sum(1 for i in wanted if i in done)
    answered = [done[i.id] for i in items if i.id in done]
    model = getattr(getattr(answerer, "llm", None), "model", None) or config.model
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(items), initial=resumed, desc=config.name, unit="q", dynamic_ncols=True, file=sys.stderr)
    first_failures: list[str] = []
    asked = 0
    interrupted = False
    try:
        with jsonl.open("a", encoding="utf-8") as stream:
            for item in todo:
                started = time.perf_counter()
                try:
                    outcome = answerer.answer(item.public())
                except EvalError:
                    raise
                except Exception as exc:  # one question's failure is recorded, not the run's end
                    from eval.answering import Outcome

                    outcome = Outcome(error=f"{type(exc).__name__}: {exc}")
                record = _record(item, outcome, config.mode, model, time.perf_counter() - started)
                stream.write(json.dumps(record, ensure_ascii=False) + "\n")
                stream.flush()
                answered.append(record)
                asked += 1
                if record["error"] and len(first_failures) == asked - 1:  # every question so far failed
                    first_failures.append(record["error"])
                    if len(first_failures) >= min(FIRST_FAILURES, len(todo)) and len(todo) > 1:
                        raise EvalError(
                            f"the first {len(first_failures)} questions all failed (last: {first_failures[-1]}); "
                            f"answers so far are in {jsonl}, rerun to resume"
                        )
                if bar is not None:
                    right = sum(1 for r in answered if r["correct"])
                    bar.set_postfix(acc=f"{right / len(answered):.3f}", refresh=False)
                    bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
    llm = getattr(answerer, "llm", None)
    # The metrics (and summary.md) cover every answered question of this configuration in the JSONL, not
    # only this run's items: a --limit run after the full one must not replace its figures by a sample's.
    everything = list({**done, **{r["id"]: r for r in answered}}.values())
    result = {
        "benchmark": config.benchmark,
        "description": BENCHMARKS[config.benchmark][1] if config.benchmark in BENCHMARKS else config.benchmark,
        "mode": config.mode,
        "model": model,
        "config": config.model_dump(),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "resumed": resumed,
        "asked": len(answered) - resumed,
        "run_items": len(items),  # the questions this run was given (fewer with --limit); n counts all answered
        "interrupted": interrupted,
        "json_schema_fallback": getattr(llm, "fell_back", None),
        **metrics(everything),
    }
    _write_json(out_dir / f"{config.name}.metrics.json", result)
    (out_dir / "summary.md").write_text(render_markdown(out_dir), encoding="utf-8")
    (out_dir / "report.html").write_text(render_report(out_dir), encoding="utf-8")
    result["files"] = {
        "jsonl": str(jsonl),
        "metrics": str(out_dir / f"{config.name}.metrics.json"),
        "summary": str(out_dir / "summary.md"),
        "report": str(out_dir / "report.html"),
    }
    return result


# ---- the Markdown report -----------------------------------------------------------------------
_MODE_ORDER = {m: i for i, m in enumerate(MODES)}


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def render_markdown(out_dir: Path) -> str:
    runs = []
    for path in sorted(out_dir.glob("*.metrics.json")):
        try:
            runs.append(json.loads(path.read_text(encoding="utf-8")))
        except ValueError:
            continue
    runs.sort(key=lambda r: (r["benchmark"], _MODE_ORDER.get(r["mode"], 9), str(r.get("config", {}).get("url"))))
    lines = [
        "# medkg benchmark results",
        "",
        f"{len(runs)} run(s) in `{out_dir}`; accuracy in %, with its 95% Wilson interval. Unparsed answers and "
        "errors count as wrong. *Prior* = offline answers decided by the documented prior (option most similar "
        "to the question) because the evidence did not separate the options.",
        "",
        "| Benchmark | Mode | Model | n | Accuracy (95% CI) | Parsed | Errors | Prior decided | Latency p50 / p95 (s) "
        "| Prompt / completion tokens (mean) | Evidence tokens (mean) | Chance / majority |",
        "|---|---|---|---:|---|---:|---:|---:|---|---|---:|---|",
    ]
    for r in runs:
        low, high = r["ci95"]
        tok = r["tokens"]
        tokens = (
            f"{tok['prompt_mean']:.0f} / {tok['completion_mean']:.0f}"
            + (" (est.)" if tok["source"] == ["estimated"] else "")
            if tok.get("prompt_mean") is not None
            else "-"
        )
        mode = r["mode"] + (" (server)" if r.get("config", {}).get("url") else "")
        if r["benchmark"] == "pubmedqa" and not r.get("config", {}).get("context", True):
            mode += ", no context"
        base = r["baselines"]
        lines.append(
            f"| {r['benchmark']} | {mode} | {r.get('model') or '-'} | {r['n']} | "
            f"**{_pct(r['accuracy'])}** ({_pct(low)}-{_pct(high)}) | {r['parsed']}/{r['n'] - r['errors']} | "
            f"{r['errors']} | {r['prior_decided'] if r['mode'] == 'offline' else '-'} | "
            f"{r['latency_s']['p50']:.2f} / {r['latency_s']['p95']:.2f} | {tokens} | "
            f"{r['tokens']['evidence_mean']:.0f} | "
            f"{_pct(base['chance'])} / {_pct(base['majority_accuracy'])} ({base['majority_answer']}) |"
        )
    by_benchmark: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        if r.get("per_subject"):
            by_benchmark.setdefault(r["benchmark"], []).append(r)
    for benchmark, rs in by_benchmark.items():
        subjects = sorted({s for r in rs for s in r["per_subject"]})
        heads = [r["mode"] + (" (server)" if r.get("config", {}).get("url") else "") for r in rs]
        lines += [
            "",
            f"## {benchmark}: accuracy per subject (%)",
            "",
            "| Subject | n | " + " | ".join(heads) + " |",
            "|---|---:|" + "---:|" * len(rs),
        ]
        for s in subjects:
            n = max(r["per_subject"].get(s, {}).get("n", 0) for r in rs)
            cells = [_pct(r["per_subject"][s]["accuracy"]) if s in r["per_subject"] else "-" for r in rs]
            lines.append(f"| {s} | {n} | " + " | ".join(cells) + " |")
    shown = [b for b in REFERENCES if any(r["benchmark"] == b for r in runs)] or list(REFERENCES)
    lines += [
        "",
        "## Published reference numbers (context, not comparable)",
        "",
        "Other systems on the full test sets; the runs above use the development splits in ../shared/data "
        "(MedQA: 255 of the 1,273 test questions; KG-RAG: 71 of 306 MCQs), so only the order of magnitude "
        "compares.",
        "",
        "| Benchmark | System | Accuracy | Source |",
        "|---|---|---|---|",
    ]
    for b in shown:
        for system, value, source in REFERENCES[b]:
            lines.append(f"| {b} | {system} | {value} | {source} |")
    lines += [
        "",
        "Offline mode: no LLM; each option is scored by the support it finds in retrieved evidence (dense "
        "relevance, IDF-weighted lexical coverage, knowledge-graph connections to the question's entities), "
        "see `eval/answering/offline.py`.",
        "",
    ]
    return "\n".join(lines)


# ---- wiring: the store, the answerers ----------------------------------------------------------
class _ReadOnlyContainer(Container):
    """The service's container with the phenotype index read from its cache, or built in memory when
    the cache is stale: an evaluation writes nothing into the data dir."""

    @cached_property
    def phenotype_index(self) -> PhenotypeIndex:
        return self._cached_phenotype_index() or self._build_phenotype_index()


@contextmanager
def open_container(settings: Settings, need_graph: bool = True) -> Iterator[Container]:
    """A container on the configured store, the embedded one opened read-only."""
    from kg.settings import GraphBackend

    store = None
    if need_graph and settings.graph_backend is GraphBackend.ladybug:
        from kg.graph.ladybug_store import LadybugGraphStore

        if not settings.ladybug_path.exists():
            raise EvalError(
                f"no graph at {settings.ladybug_path} (MEDKG_DATA_DIR={settings.data_dir}): ingest data first "
                "(`medkg demo` or `medkg ingest ...`)"
            )
        store = LadybugGraphStore(
            settings.ladybug_path,
            buffer_pool_mb=settings.ladybug_buffer_pool_mb,
            max_db_size_gb=settings.ladybug_max_db_size_gb,
            read_only=True,
        )
    c = _ReadOnlyContainer(settings, graph=store)
    try:
        yield c
    finally:
        try:
            c.close()
        finally:
            if store is not None:
                store.close()


def _server_client(url: str, api_key: str | None, timeout_s: float) -> httpx.Client:
    import httpx

    root = url.rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    return httpx.Client(base_url=root, headers=headers, timeout=timeout_s)


def _print_issues(result: LoadResult, limit: int = 10) -> None:
    skipped = [i for i in result.issues if i.skipped]
    repaired = [i for i in result.issues if not i.skipped]
    if not result.issues:
        return
    print(f"{len(skipped)} malformed item(s) skipped, {len(repaired)} repaired:", file=sys.stderr)
    for issue in result.issues[:limit]:
        print(f"  {issue}", file=sys.stderr)
    if len(result.issues) > limit:
        print(f"  ... and {len(result.issues) - limit} more", file=sys.stderr)


def summary_line(result: dict[str, Any]) -> str:
    low, high = result["ci95"]
    parts = [
        f"{result['benchmark']} {result['mode']}: accuracy {_pct(result['accuracy'])}% "
        f"(95% CI {_pct(low)}-{_pct(high)}) on {result['n']} questions"
        + (
            f" (all answered in the JSONL; this run was given {result['run_items']})"
            if result.get("run_items") is not None and result["run_items"] != result["n"]
            else ""
        ),
        f"parsed {result['parsed']}/{result['n'] - result['errors']}",
        f"errors {result['errors']}",
    ]
    if result["mode"] == "offline":
        parts.append(f"prior decided {result['prior_decided']}")
    parts.append(f"latency p50 {result['latency_s']['p50']:.2f} s, p95 {result['latency_s']['p95']:.2f} s")
    return "; ".join(parts)


def run_cli(
    benchmark: str,
    file: Path,
    mode: str = "offline",
    limit: int | None = None,
    url: str | None = None,
    out: Path = DEFAULT_OUT,
    k: int = 8,
    hops: int = 2,
    budget: int | None = None,
    context: bool = True,
    fresh: bool = False,
    json_schema: bool = True,
    api_key: str | None = None,
    progress: bool = True,
    settings: Settings | None = None,
    client: httpx.Client | None = None,
    server_timeout_s: float = 300.0,
    container: Container | None = None,
) -> dict[str, Any]:
    """What ``medkg eval <benchmark>`` does; raises :class:`EvalError` with a one-line reason.
    ``client`` (an httpx client for ``url``) and ``container`` (instead of opening the configured
    store) are for embedding the run, e.g. in tests."""
    from kg.embedders import EmbedderError
    from kg.graph.base import GraphStoreError
    from kg.settings import SettingsError, load_settings
    from kg.vector_index import VectorIndexError

    if mode not in MODES:
        raise EvalError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
    if url and mode != "kg-rag":
        raise EvalError(
            f"--url supports --mode kg-rag only (the server's QA path: its LLM over its full evidence bundle). "
            f"Mode {mode!r} needs what /v1/qa does not return"
            + (
                " (the offline scorer reads every option's evidence pool and graph neighbours; /v1/qa gives only the"
                " cited items)"
                if mode == "offline"
                else " (the server cannot answer closed-book or restrict evidence to passages)"
            )
            + ": run it in process, without --url."
        )
    try:
        loaded = load(benchmark, file, with_context=context)
    except DatasetError as exc:
        raise EvalError(str(exc)) from None
    _print_issues(loaded)
    if not loaded.items:
        raise EvalError(f"{file}: no readable {benchmark} question")
    items = loaded.items[:limit] if limit else loaded.items
    config = RunConfig(
        benchmark=benchmark,
        mode=mode,
        file=str(Path(file).resolve()),
        k=k,
        hops=hops,
        budget=budget,
        context=context,
        url=url,
    )
    try:
        if url:
            own = client is None
            client = client or _server_client(url, api_key, server_timeout_s)
            try:
                return run(items, RemoteAnswering(client, k=k, hops=hops, budget=budget), out, config, progress, fresh)
            finally:
                if own:
                    client.close()
        try:
            settings = settings or (container.settings if container is not None else load_settings())
        except SettingsError as exc:
            raise EvalError(str(exc)) from None
        opened = nullcontext(container) if container is not None else open_container(settings, mode != "closed-book")
        with opened as c:
            answerer: Answerer
            default_budget = budget or settings.qa_budget_tokens
            if mode == "offline":
                answerer = OfflineAnswering(c.retriever, k=k, hops=hops, budget=default_budget)
            else:
                if c.llm_answerer is None:
                    raise EvalError(f"--mode {mode} needs an LLM: set MEDKG_LLM_BASE_URL and MEDKG_LLM_MODEL")
                llm = EvalLLM(c.llm_answerer, json_schema=json_schema)
                config.model = llm.model
                retriever = c.retriever if mode != "closed-book" else None
                answerer = LLMAnswering(llm, mode, retriever, c.text_embedder, k=k, hops=hops, budget=default_budget)
            return run(items, answerer, out, config, progress, fresh)
    except (GraphStoreError, VectorIndexError, EmbedderError, OSError) as exc:
        raise EvalError(str(exc)) from None
