// The ask page: a question (and optionally a DICOM study) in, the cited answer, its evidence, the
// knowledge-graph paths drawn with cytoscape.js, and the stage timings out.
"use strict";

(() => {
  const { el, api } = medkg;
  const SESSION_STORE = "medkg.session";
  const $ = (id) => document.getElementById(id);
  let graph = null;

  medkg.header("qa");

  function sessionId() {
    return sessionStorage.getItem(SESSION_STORE);
  }

  async function ensureSession() {
    if (!$("use-session").checked) return null;
    if (sessionId()) return sessionId();
    const created = await api("/v1/sessions", { method: "POST" });
    sessionStorage.setItem(SESSION_STORE, created.id);
    return created.id;
  }

  function preview(answer) {
    const plain = answer.replace(/\s*\[[^\[\]]*\]/g, "");
    return plain.length > 160 ? `${plain.slice(0, 160)}…` : plain;
  }

  async function showHistory() {
    const id = sessionId();
    const list = $("history");
    list.replaceChildren();
    if (!id) {
      $("session-info").textContent = "No session yet: the first question starts one.";
      return;
    }
    try {
      const session = await api(`/v1/sessions/${encodeURIComponent(id)}`);
      $("session-info").textContent = `Session ${session.id.slice(0, 8)}… · ${session.turns.length} turn(s) kept`;
      for (const turn of session.turns) {
        const again = el("button", { type: "button", class: "link", text: turn.question });
        again.addEventListener("click", () => {
          $("question").value = turn.question;
          $("question").focus();
        });
        list.append(el("li", {}, el("div", { class: "q" }, again), el("div", { class: "hint", text: preview(turn.answer) })));
      }
    } catch (error) {
      if (error.status === 404) {
        sessionStorage.removeItem(SESSION_STORE);
        $("session-info").textContent = "The session expired: the next question starts a new one.";
      } else {
        $("session-info").textContent = `Could not read the session: ${error.message}`;
      }
    }
  }

  function renderAnswer(r) {
    const nums = medkg.numbering(r.citations);
    const detail = $("citation-detail");
    detail.replaceChildren();
    delete detail.dataset.open;
    const box = $("answer");
    box.dataset.mode = r.mode;
    box.dataset.abstained = String(r.insufficient_evidence);
    if (r.insufficient_evidence) {
      box.replaceChildren(
        el(
          "div",
          { class: "abstained", role: "note" },
          el("strong", { text: "Not enough evidence to answer." }),
          el("p", { text: r.answer }),
          el("p", { class: "hint", text: "Nothing below is an answer: it is what was retrieved and judged too weak." }),
        ),
      );
    } else {
      box.replaceChildren(
        el("p", { class: "answer-text" }, medkg.citedText(r.answer, nums, detail)),
        el("p", { class: "hint", text: `${r.mode} answer · confidence ${r.confidence.toFixed(2)} · ${r.citations.length} citation(s)` }),
      );
      if (r.dropped_citations.length) {
        box.append(el("p", { class: "hint", text: `Removed citations the evidence does not hold: ${r.dropped_citations.join(", ")}` }));
      }
    }
    for (const c of r.citations) nums.number(c.id); // cited facts the text does not mark are still listed
    $("cited-list").replaceChildren(r.citations.length ? medkg.citationList(nums, detail) : el("p", { class: "hint", text: "None." }));
    renderDifferential(r.differential || []);
    $("answer-section").hidden = false;
    return nums;
  }

  function renderDifferential(rows) {
    const out = $("differential-out");
    if (!rows.length) {
      out.replaceChildren();
      return;
    }
    const body = el("tbody");
    for (const d of rows) {
      body.append(
        el(
          "tr",
          {},
          el("td", { class: "num", text: d.entry }),
          el(
            "td",
            {},
            el("strong", { text: d.name || d.disease }),
            " ",
            el("code", { class: "id", text: d.disease }),
            // an entry of one disease's subtypes (or descriptions): what unites them, and this one's own rank
            d.group ? el("span", { class: "hint", text: ` (${d.group.name || d.group.id}; rank ${d.rank})` }) : "",
          ),
          el("td", { text: d.matches.map((m) => m.observed).join(", ") }),
          el("td", { text: d.genes.join(", ") }),
        ),
      );
    }
    out.replaceChildren(
      el("h3", { text: "Differential (from the phenotypes in the question)" }),
      el("div", { class: "table-wrap" }, el("table", {}, el("thead", {}, el("tr", {}, ["#", "Disease", "Matched phenotypes", "Genes"].map((h) => el("th", { scope: "col", text: h })))), body)),
    );
  }

  function renderEvidence(r, nums) {
    const body = $("evidence-table").querySelector("tbody");
    body.replaceChildren();
    const byId = new Map(r.citations.map((c) => [c.id, c]));
    for (const item of r.retrieved || []) {
      const title = item.cited
        ? el("button", {
            type: "button",
            class: "link",
            text: item.title || item.id,
            onclick: () => medkg.openCitation($("citation-detail"), byId.get(item.id), nums.number(item.id), null),
          })
        : el("span", { text: item.title || item.id });
      body.append(
        el(
          "tr",
          { dataset: { id: item.id, cited: String(item.cited) } },
          el("td", { class: item.cited ? "cited-yes" : "", text: item.cited ? `✓ ${nums.number(item.id)}` : "", "aria-label": item.cited ? "cited" : "not cited" }),
          el("td", { text: item.kind }),
          el("td", {}, title, el("br"), el("code", { class: "id", text: item.id })),
          el("td", { class: "num", text: item.score.toFixed(3) }),
        ),
      );
    }
    const e = r.evidence;
    $("evidence-summary").textContent =
      `${e.items} items (${e.kg_facts} facts, ${e.passages} passages, ${e.images} studies), ` +
      `${e.tokens} of ${e.budget} tokens; ${e.dropped_for_budget} left out for the budget; ${r.citations.length} cited.`;
    $("evidence-section").hidden = false;

    const chips = $("linked");
    chips.replaceChildren(
      ...[...new Map(r.linked_entities.map((x) => [x.id, x])).values()].map((x) =>
        el(
          "li",
          { class: x.negated ? "chip excluded" : "chip", title: `${x.method}, score ${x.score.toFixed(2)}${x.negated ? ", negated in the question" : ""}` },
          el("span", { text: x.negated ? `no ${x.name}` : x.name }),
          el("code", { class: "id", text: x.id }),
        ),
      ),
    );
    $("expanded").textContent = r.expanded_query !== r.question ? `Searched as: ${r.expanded_query}` : "";
    $("linked-section").hidden = r.linked_entities.length === 0 && !$("expanded").textContent;
    $("timings").replaceChildren(medkg.timings(r.timings_ms));
    $("timings-section").hidden = false;
  }

  function renderPaths(r, nums) {
    const section = $("paths-section");
    const list = $("paths-list");
    const container = $("paths-graph");
    list.replaceChildren();
    if (graph) {
      graph.destroy();
      graph = null;
    }
    container.dataset.nodes = "0";
    container.dataset.edges = "0";
    if (!r.kg_paths.length) {
      section.hidden = true;
      return;
    }
    section.hidden = false;
    const byId = new Map(r.citations.map((c) => [c.id, c]));
    const nodes = new Map();
    const edges = new Map();
    for (const path of r.kg_paths) {
      for (const n of path.nodes) nodes.set(n.id, n.name);
      // nodes in walking order; a step may point either way along the walk
      const words = [path.nodes[0].name || path.nodes[0].id];
      path.steps.forEach((s, i) => {
        edges.set(`${s.subject}|${s.type}|${s.object}`, s);
        const next = path.nodes[i + 1] || { id: s.object, name: s.object };
        const forward = s.subject === path.nodes[i].id;
        words.push(forward ? `—${s.type}→` : `←${s.type}—`, next.name || next.id);
      });
      list.append(el("li", { text: words.join(" ") }));
    }
    const linked = new Set(r.linked_entities.map((x) => x.id));
    const elements = [
      ...[...nodes].map(([id, name]) => ({ data: { id, label: name && name !== id ? `${name}\n${id}` : id, linked: linked.has(id) ? 1 : 0 } })),
      ...[...edges].map(([key, s]) => ({ data: { id: key, source: s.subject, target: s.object, label: s.type, citation: s.citation || "", sameAs: s.type === "SAME_AS" ? 1 : 0 } })),
    ];
    if (typeof cytoscape !== "function") {
      container.replaceChildren(el("p", { class: "error", text: "The graph library did not load; the paths are listed below." }));
      return;
    }
    graph = cytoscape({
      container,
      elements,
      layout: { name: "breadthfirst", directed: true, padding: 16, spacingFactor: 1.1 },
      style: [
        { selector: "node", style: { label: "data(label)", "font-size": 11, "text-wrap": "wrap", "text-max-width": 120, "background-color": "#54aeff", width: 18, height: 18, color: "#1f2328", "text-valign": "bottom", "text-margin-y": 4 } },
        { selector: "node[linked = 1]", style: { "background-color": "#0550ae", width: 24, height: 24, "font-weight": "bold" } },
        { selector: "edge", style: { label: "data(label)", "font-size": 9, width: 2, "line-color": "#8c959f", "target-arrow-color": "#8c959f", "target-arrow-shape": "triangle", "curve-style": "bezier", "text-rotation": "autorotate", "text-background-color": "#ffffff", "text-background-opacity": 0.85, "text-background-padding": 2, color: "#57606a" } },
        { selector: "edge[sameAs = 1]", style: { "line-style": "dashed" } },
        { selector: "edge:selected", style: { "line-color": "#0969da", "target-arrow-color": "#0969da", width: 3 } },
      ],
    });
    graph.on("tap", "edge", (event) => {
      const id = event.target.data("citation");
      const citation = id && (byId.get(id) || null);
      if (citation) medkg.openCitation($("citation-detail"), citation, nums.number(id), null);
    });
    container.dataset.nodes = String(graph.nodes().length);
    container.dataset.edges = String(graph.edges().length);
    window.medkgGraph = graph;
  }

  $("ask-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const button = $("ask-button");
    const status = $("ask-status");
    const question = $("question").value.trim();
    if (!question) {
      status.textContent = "Type a question first.";
      $("question").focus();
      return;
    }
    const options = { k: Number($("opt-k").value) || 8, hops: Number($("opt-hops").value) || 0 };
    medkg.busy(button, true, "Answering…");
    status.textContent = "Retrieving evidence and composing a cited answer…";
    const box = $("answer");
    try {
      const session = await ensureSession();
      const file = $("study").files[0];
      let form;
      let json;
      if (file) {
        form = new FormData();
        form.append("question", question);
        if (session) form.append("session_id", session);
        // a form is flat: each option is a part of its own (k, hops, mode, budget)
        for (const [name, value] of Object.entries(options)) {
          if (value !== null && value !== undefined) form.append(name, String(value));
        }
        form.append("stream", "true");
        form.append("file", file, file.name);
      } else {
        json = { question, session_id: session, options, stream: true };
      }
      // The answer streams in (events: retrieval, delta..., answer); it is rendered with its
      // citations once complete.
      let response = null;
      let live = null;
      let deltas = 0;
      await medkg.apiEvents("/v1/qa", {
        json,
        form,
        onEvent(name, data) {
          if (name === "retrieval") {
            status.textContent = `${data.evidence_ids.length} evidence item(s) retrieved; composing the answer…`;
            live = el("p", { class: "answer-text streaming" });
            box.setAttribute("aria-busy", "true");
            box.replaceChildren(live);
            $("answer-section").hidden = false;
          } else if (name === "delta") {
            deltas += 1;
            live?.append(document.createTextNode(data.text));
          } else if (name === "answer") {
            response = data;
          } else if (name === "error") {
            const error = new Error(`${data.status}: ${data.detail}`);
            error.status = data.status;
            throw error;
          }
        },
      });
      if (!response) throw new Error("the answer stream ended before the answer (try again)");
      box.dataset.streamed = String(deltas);
      box.removeAttribute("aria-busy");
      const nums = renderAnswer(response);
      renderEvidence(response, nums);
      renderPaths(response, nums);
      status.textContent = `Answered in ${(response.timings_ms.total / 1000).toFixed(2)} s.`;
      await showHistory();
      $("answer").focus?.();
    } catch (error) {
      status.textContent = "";
      box.removeAttribute("aria-busy");
      $("answer-section").hidden = false;
      medkg.showError(box, error);
    } finally {
      medkg.busy(button, false);
    }
  });

  $("study").addEventListener("change", () => {
    const file = $("study").files[0];
    if (file) medkg.previewUpload(file, $("study-preview"));
    else $("study-preview").replaceChildren();
  });

  $("new-session").addEventListener("click", async () => {
    sessionStorage.removeItem(SESSION_STORE);
    await showHistory();
    $("question").focus();
  });

  showHistory();
})();
