// The evaluation page: the runs of `medkg eval ... --out MEDKG_EVAL_DIR`, plotted.
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

  async function load() {
    const status = $("eval-status");
    try {
      const data = await api("/v1/eval/runs");
      if (!data.runs.length) {
        status.textContent = `No runs in ${data.dir} yet: run e.g. \`medkg eval medqa FILE --out ${data.dir}\`.`;
        return;
      }
      status.textContent = `${data.runs.length} run(s) in ${data.dir}.`;
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
    } catch (error) {
      medkg.showError(status, error);
    }
  }

  load();
})();
