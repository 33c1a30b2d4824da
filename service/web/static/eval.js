// The evaluation page: the runs of `medkg eval ... --out MEDKG_EVAL_DIR` (QA benchmarks and
// differential diagnosis), plotted.
"use strict";

(() => {
  const { el, api } = medkg;
  const $ = (id) => document.getElementById(id);
  const pct = (x) => `${(100 * x).toFixed(1)}%`;

  medkg.header("eval");

  function svg(markup) {
    // The charts are SVG the server built from escaped text; parsed as an SVG document, never as HTML.
    const doc = new DOMParser().parseFromString(markup, "image/svg+xml");
    const root = doc.documentElement;
    if (root.nodeName !== "svg" || doc.querySelector("parsererror") || doc.querySelector("script, foreignObject")) {
      return el("p", { class: "error", text: "The chart could not be read." });
    }
    return document.importNode(root, true);
  }

  const RANKERS = { baseline_resnik_bma: "Resnik BMA", baseline_pyhpo: "pyhpo", medkg: "medkg" };
  const signed = (x) => `${x >= 0 ? "+" : ""}${x.toFixed(1)}`;
  const points = (d) => `${signed(d.points)} (${signed(d.ci95_cases[0])} to ${signed(d.ci95_cases[1])})`;

  function showRuns(data) {
    $("acc-chart").replaceChildren(svg(data.charts.accuracy));
    $("acc-section").hidden = false;
    if (data.charts.latency) {
      $("lat-chart").replaceChildren(svg(data.charts.latency));
      $("lat-section").hidden = false;
    }
    const body = $("runs").querySelector("tbody");
    body.replaceChildren(
      ...data.runs.map((r) =>
        el(
          "tr",
          { dataset: { run: r.name } },
          el("td", { text: r.description }),
          el("td", { text: r.label }),
          el("td", { text: r.model || "-" }),
          el("td", { class: "num", text: r.n }),
          el("td", { text: `${pct(r.accuracy)} (${pct(r.ci95[0])}–${pct(r.ci95[1])})` }),
          el("td", { class: "num", text: pct(r.chance) }),
          el("td", { text: `${(r.latency_s.p50 || 0).toFixed(2)} / ${(r.latency_s.p95 || 0).toFixed(2)}` }),
          el("td", { text: r.finished_at || "" }),
        ),
      ),
    );
    $("runs-section").hidden = false;
  }

  function showDifferential(data) {
    $("dd-chart").replaceChildren(svg(data.charts.differential));
    const rows = [];
    for (const r of data.differential) {
      for (const [key, label] of Object.entries(RANKERS)) {
        const m = r.rankers[key];
        const gain = r.medkg_minus[key];
        rows.push(
          el(
            "tr",
            { dataset: { run: r.name, ranker: key } },
            el("td", { text: r.file }),
            el("td", { text: label }),
            el("td", { class: "num", text: m.n }),
            ...["top1", "top3", "top10", "mrr"].map((k) => el("td", { class: "num", text: pct(m[k]) })),
            el("td", { text: gain ? `${points(gain.top1)}, ${points(gain.top10)}` : "" }),
          ),
        );
      }
    }
    $("dd-runs").querySelector("tbody").replaceChildren(...rows);
    $("dd-notes").replaceChildren(
      ...data.differential.map((r) => {
        // What became of the file's lines (worded as eval_charts.py words it in report.html).
        const lines = r.malformed_lines;
        const named = r.malformed.map((m) => el("li", {}, el("code", { text: m })));
        if (lines > r.malformed.length) named.push(el("li", { text: `and ${lines - r.malformed.length} more` }));
        return el(
          "li",
          { dataset: { run: r.name } },
          `${r.file}: ${r.evaluated} of ${r.cases} cases evaluated; ${r.unmapped_disease} whose diagnosis is not ` +
            `in the graph and ${r.no_known_observed_term} without an observed term the graph knows (counted, not ` +
            `ranked); ${lines} ${lines === 1 ? "line" : "lines"} not a case (skipped); ranking all diseases p50 ` +
            `${r.latency_ms.p50} ms, p95 ${r.latency_ms.p95} ms; intervals from a paired bootstrap over the cases` +
            (r.finished_at ? `; finished ${r.finished_at}` : ""),
          named.length ? el("ul", { class: "malformed" }, named) : null,
        );
      }),
    );
    $("dd-section").hidden = false;
  }

  async function load() {
    const status = $("eval-status");
    try {
      const data = await api("/v1/eval/runs");
      const total = data.runs.length + data.differential.length;
      if (!total) {
        status.textContent = `No runs in ${data.dir} yet: run e.g. \`medkg eval medqa FILE --out ${data.dir}\`.`;
        return;
      }
      status.textContent = `${total} run(s) in ${data.dir}.`;
      if (data.runs.length) showRuns(data);
      if (data.differential.length) showDifferential(data);
    } catch (error) {
      medkg.showError(status, error);
    }
  }

  load();
})();
