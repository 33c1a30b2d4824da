"""Prometheus metrics of one ``medkg serve`` process, ``GET /metrics`` in prometheus-client's text format:
requests by method, route and status with their latency; the QA stages' latencies, evidence tokens and
abstentions; LLM errors; and, read at scrape time, the graph's reachability and size, the indexes' sizes and a
build's progress behind the server. A label is a route template, a status, a stage or a mode: never a path, a
question, an id or anything else a request carries (no patient data)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kg.graph.base import GraphStoreError
from kg.progress import PROGRESS_FILE, read_published

if TYPE_CHECKING:
    from service.qa.engine import QAResponse

__all__ = ["Metrics", "install_metrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
TOKEN_BUCKETS = (0, 100, 250, 500, 1000, 1500, 2000, 4000, 8000, 16000)
UNMATCHED = "unmatched"  # a request no route took (a 404, a refused one): its path is never a label


class Metrics:
    """One process's metrics, in a registry of its own (an app per registry: tests build many apps)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "medkg_http_requests", "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "medkg_http_request_duration_seconds", "Time from a request's arrival to its last byte, by route.",
            ["method", "route"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.qa_stages = Histogram(
            "medkg_qa_stage_duration_seconds", "Each stage of answering a question (the answer's timings_ms).",
            ["stage"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.evidence_tokens = Histogram(
            "medkg_qa_evidence_tokens", "Tokens of evidence given to an answer.", buckets=TOKEN_BUCKETS, registry=r
        )
        self.answers = Counter(
            "medkg_qa_answers", "Answers given, by mode and whether they abstained (insufficient evidence).",
            ["mode", "abstained"], registry=r,
        )  # fmt: skip
        self.llm_errors = Counter(
            "medkg_llm_errors", "Requests the LLM failed (502) or timed out on (504).", ["status"], registry=r
        )

    def observe_answer(self, answer: QAResponse) -> None:
        for stage, ms in answer.timings_ms.items():
            self.qa_stages.labels(stage=stage).observe(ms / 1000)
        self.evidence_tokens.observe(answer.evidence.tokens)
        self.answers.labels(mode=answer.mode, abstained=str(answer.insufficient_evidence).lower()).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _StoreCollector(Collector):
    """Read at each scrape: whether the graph answers and how big it is, the passage and entity indexes' sizes
    once loaded, a build's progress (done, total, ETA) behind the server."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def collect(self) -> Iterator[Metric]:
        state = self.app.state
        container = getattr(state, "container", None)
        if container is None:  # before start-up
            return
        up = GaugeMetricFamily("medkg_graph_up", "1 when the graph store answers, else 0.")
        try:
            entities = container.graph.entity_count()
            up.add_metric([], 1)
            yield GaugeMetricFamily("medkg_graph_entities", "Entities in the graph.", value=entities)
        except GraphStoreError:
            up.add_metric([], 0)
        yield up
        readiness = getattr(state, "readiness", None)
        if readiness is not None and readiness.loaded:
            yield GaugeMetricFamily("medkg_passages", "Passages in the passage index.", value=len(container.text_index))
            yield GaugeMetricFamily(
                "medkg_indexed_entities", "Entities in the entity index.", value=len(container.entity_index.index)
            )
        build = getattr(readiness, "build", None) if readiness is not None else None
        if build is not None:
            yield from _build_metrics(build.report())
        job = read_published(container.settings.data_dir / PROGRESS_FILE)
        if job is not None:
            yield from _writer_metrics(job)


def _writer_metrics(job: dict[str, Any]) -> Iterator[Metric]:
    """The data dir's writer job (``medkg ingest ...``, ``reindex``, ``relink``: its command, never its input),
    as the job last published it: running (1; 0 when finished, failed or stalled), each step's counts,
    rate and ETA, when it started and was last heard of."""
    name = str(job.get("job", ""))
    running = GaugeMetricFamily(
        "medkg_writer_running", "1 while the data dir's writer job (medkg ingest ...) runs.", labels=["job"]
    )
    running.add_metric([name], 1 if job.get("state") == "running" and not job["stalled"] else 0)
    yield running
    state = GaugeMetricFamily(
        "medkg_writer_state", "The writer job's last state (1 for the one it is in).", labels=["job", "state"]
    )
    current = "stalled" if job["stalled"] else str(job.get("state"))
    for each in ("running", "finished", "failed", "stalled"):
        state.add_metric([name, each], 1 if each == current else 0)
    yield state
    for key, help_text in (
        ("started_at", "When the writer job started (Unix time)."),
        ("updated_at", "When the writer job last published its progress (Unix time)."),
    ):
        yield GaugeMetricFamily(f"medkg_writer_{key.removesuffix('_at')}_timestamp_seconds", help_text,
                                value=float(job.get(key) or 0))  # fmt: skip
    labels = ["job", "step", "unit"]
    done = GaugeMetricFamily("medkg_writer_done", "Items a step of the writer job has done.", labels=labels)
    total = GaugeMetricFamily("medkg_writer_total", "Items a step of the writer job will do.", labels=labels)
    rate = GaugeMetricFamily("medkg_writer_rate_per_second", "Items a second of a step so far.", labels=labels)
    eta = GaugeMetricFamily("medkg_writer_eta_seconds", "Seconds a step still needs at its rate.", labels=labels)
    for bar in job["bars"]:
        if not isinstance(bar, dict):
            continue
        key = [name, str(bar.get("what", "")), str(bar.get("unit", ""))]
        done.add_metric(key, float(bar.get("done") or 0))
        for family, field in ((total, "total"), (rate, "rate_per_s"), (eta, "eta_s")):
            if bar.get(field) is not None:
                family.add_metric(key, float(bar[field]))
    yield from (done, total, rate, eta)


def _build_metrics(report: dict[str, Any]) -> Iterator[Metric]:
    running = GaugeMetricFamily("medkg_build_running", "1 while a build runs behind the server.")
    running.add_metric([], 1 if report["state"] == "running" else 0)
    yield running
    done = GaugeMetricFamily("medkg_build_done", "Items the running build part has done.", labels=["part", "unit"])
    total = GaugeMetricFamily("medkg_build_total", "Items the running build part will do.", labels=["part", "unit"])
    for part in report["parts"]:
        progress = part.get("progress")
        if progress:
            done.add_metric([part["title"], progress["unit"]], progress["done"])
            if progress["total"]:
                total.add_metric([part["title"], progress["unit"]], progress["total"])
    yield done
    yield total
    if report.get("eta_s") is not None:
        yield GaugeMetricFamily("medkg_build_eta_seconds", "Seconds the running part still needs.", report["eta_s"])


class _RequestMetrics:
    """Outermost ASGI middleware: every request's status and time to its last byte, labelled by the route
    template the router matched (``scope["route"]``), a refused or unmatched request as ``unmatched``."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", None) or UNMATCHED
            method = scope.get("method", "")
            self.metrics.requests.labels(method=method, route=route, status=str(status)).inc()
            self.metrics.latency.labels(method=method, route=route).observe(time.perf_counter() - started)


def install_metrics(app: FastAPI) -> Metrics:
    """``/metrics`` and the request middleware (added last: outermost, it sees refusals too)."""
    metrics = Metrics()
    metrics.registry.register(_StoreCollector(app))
    app.state.metrics = metrics

    @app.get(
        "/metrics",
        tags=["ops"],
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST.split(";")[0]: {}}, "description": "Prometheus text."}},
    )
    def prometheus_metrics(request: Request) -> Response:
        """This process's metrics in Prometheus' text format (scrape each replica)."""
        return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(_RequestMetrics, metrics=metrics)
    return metrics
