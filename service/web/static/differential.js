// The differential page: HPO terms picked by typing (autocomplete from /v1/entities?match=prefix),
// excluded terms marked, diseases ranked by POST /v1/differential with their evidence.
"use strict";

(() => {
  const { el, api } = medkg;
  const $ = (id) => document.getElementById(id);
  const input = $("term-input");
  const listbox = $("term-options");
  const terms = new Map(); // id -> {name, excluded}
  let options = [];
  let active = -1;
  let pending = null;
  let requestNo = 0;

  medkg.header("differential");

  function closeList() {
    listbox.hidden = true;
    listbox.replaceChildren();
    input.setAttribute("aria-expanded", "false");
    input.removeAttribute("aria-activedescendant");
    options = [];
    active = -1;
  }

  function highlight(index) {
    active = index;
    [...listbox.children].forEach((li, i) => li.setAttribute("aria-selected", String(i === index)));
    if (index >= 0) {
      input.setAttribute("aria-activedescendant", listbox.children[index].id);
      listbox.children[index].scrollIntoView({ block: "nearest" });
    }
  }

  function matchedSynonym(entity, typed) {
    const t = typed.trim().toLowerCase();
    if (entity.name.toLowerCase().includes(t)) return null;
    return (entity.synonyms || []).find((s) => s.toLowerCase().includes(t)) || null;
  }

  async function suggest() {
    const typed = input.value.trim();
    if (typed.length < 2) {
      closeList();
      return;
    }
    const mine = ++requestNo;
    try {
      const found = await api(`/v1/entities?q=${encodeURIComponent(typed)}&match=prefix&category=Phenotype&limit=12`);
      if (mine !== requestNo) return; // a later keystroke's answer wins
      options = found.filter((e) => !terms.has(e.id));
      listbox.replaceChildren(
        ...options.map((e, i) => {
          const synonym = matchedSynonym(e, typed);
          const li = el(
            "li",
            { role: "option", id: `term-option-${i}`, "aria-selected": "false", dataset: { id: e.id } },
            el("span", { text: e.name }),
            synonym ? el("span", { class: "hint", text: ` (${synonym})` }) : null,
            el("span", { class: "id", text: e.id }),
          );
          li.addEventListener("mousedown", (event) => {
            event.preventDefault(); // keep the focus in the input
            choose(i);
          });
          return li;
        }),
      );
      if (!options.length) listbox.append(el("li", { class: "hint", role: "presentation", text: "No phenotype starts with that." }));
      listbox.hidden = false;
      input.setAttribute("aria-expanded", "true");
      highlight(options.length ? 0 : -1);
    } catch (error) {
      listbox.replaceChildren(el("li", { class: "error", role: "presentation", text: error.message }));
      listbox.hidden = false;
    }
  }

  function choose(index) {
    const entity = options[index];
    if (!entity) return;
    terms.set(entity.id, { name: entity.name, excluded: false });
    input.value = "";
    closeList();
    renderTerms();
    input.focus();
  }

  function renderTerms() {
    const list = $("terms");
    list.replaceChildren();
    for (const [id, term] of terms) {
      const box = el("input", { type: "checkbox", id: `exclude-${id}`, checked: term.excluded || null });
      box.addEventListener("change", () => {
        term.excluded = box.checked;
        renderTerms();
        document.getElementById(`exclude-${id}`).focus();
      });
      const remove = el("button", { type: "button", class: "secondary", "aria-label": `Remove ${term.name}`, text: "×" });
      remove.addEventListener("click", () => {
        terms.delete(id);
        renderTerms();
        input.focus();
      });
      list.append(
        el(
          "li",
          { class: term.excluded ? "chip excluded" : "chip", dataset: { id } },
          el("span", { text: term.name }),
          el("code", { class: "id", text: id }),
          box,
          el("label", { for: `exclude-${id}`, text: "excluded" }),
          remove,
        ),
      );
    }
    $("terms-empty").hidden = terms.size > 0;
  }

  input.addEventListener("input", () => {
    clearTimeout(pending);
    pending = setTimeout(suggest, 150);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown" && options.length) {
      event.preventDefault();
      highlight((active + 1) % options.length);
    } else if (event.key === "ArrowUp" && options.length) {
      event.preventDefault();
      highlight((active - 1 + options.length) % options.length);
    } else if (event.key === "Enter" && !listbox.hidden && active >= 0) {
      event.preventDefault();
      choose(active);
    } else if (event.key === "Escape") {
      closeList();
    }
  });
  input.addEventListener("blur", () => setTimeout(closeList, 100));

  function renderResults(r) {
    const body = $("results").querySelector("tbody");
    body.replaceChildren();
    const names = r.term_names || {};
    const named = (id) => (names[id] ? `${names[id]} (${id})` : id);
    const withNames = (text) => text.replace(/HP:\d{7}/g, named);
    r.diseases.forEach((d, i) => {
      const byOntology = new Set(d.matches.map((m) => m.observed));
      const byMeaning = (d.semantic_matches || []).filter((m) => !byOntology.has(m.observed));
      const matches = el(
        "ul",
        {},
        d.matches.map((m) => el("li", { text: `${named(m.observed)} → ${named(m.disease_term)} (${m.similarity.toFixed(2)})` })),
        byMeaning.map((m) => el("li", { class: "semantic", text: `${named(m.observed)} ≈ ${named(m.disease_term)} (cosine ${m.cosine.toFixed(2)})` })),
      );
      const links = d.pmids.slice(0, 5).map((p) => el("a", { href: `https://pubmed.ncbi.nlm.nih.gov/${p.replace(/^PMID:/, "")}/`, target: "_blank", rel: "noopener", text: p }));
      body.append(
        el(
          "tr",
          { dataset: { disease: d.disease } },
          el("td", { class: "num", text: i + 1 }),
          el("td", {}, el("strong", { text: d.name || d.disease }), el("br"), el("code", { class: "id", text: d.disease })),
          el("td", { class: "num", text: d.score.toFixed(3) }),
          el("td", {}, matches),
          el("td", { text: d.contradictions.map(withNames).join(", ") }),
          el("td", { text: d.genes.slice(0, 8).join(", ") + (d.genes.length > 8 ? ` (+${d.genes.length - 8})` : "") }),
          el("td", {}, links.flatMap((a, j) => (j ? [", ", a] : [a])), d.pmids.length > 5 ? ` (+${d.pmids.length - 5})` : ""),
        ),
      );
    });
    const parts = [`${r.observed.length} observed term(s)`];
    if (r.views && r.views.length) parts.push(`score: ${r.views.join(" + ")}`);
    if (r.from_text.length) parts.push(`${r.from_text.length} from the text (${r.from_text.map(named).join(", ")})`);
    if (r.excluded_from_text.length) parts.push(`${r.excluded_from_text.length} negated in the text (${r.excluded_from_text.map(named).join(", ")})`);
    if (r.excluded.length) parts.push(`${r.excluded.length} excluded (${r.excluded.map(named).join(", ")})`);
    if (r.unknown_terms.length) parts.push(`unknown to the graph: ${r.unknown_terms.join(", ")}`);
    const ignored = Object.entries(r.ignored_terms || {});
    if (ignored.length) parts.push(`not counted: ${ignored.map(([t, why]) => `${named(t)} (${why})`).join(", ")}`);
    if (r.genes.length) parts.push(`only the diseases of ${r.genes.join(", ")}`);
    if (r.unknown_genes.length) parts.push(`genes of no disease in the graph: ${r.unknown_genes.join(", ")}`);
    const p = r.patient || {};
    if (p.sex || p.age_years != null) {
      const age = p.age_years == null ? "" : ` aged ${p.age_years >= 1 ? `${+p.age_years.toFixed(1)} years` : `${Math.round(p.age_years * 12)} months`}`;
      parts.push(`weighed for a ${p.sex || ""}${p.sex ? " " : ""}patient${age} (X- and Y-linked diseases, later onsets)`);
    }
    $("results-summary").textContent = parts.join(" · ");
    $("results-section").hidden = false;
  }

  $("diff-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const status = $("diff-status");
    const observed = [...terms].filter(([, t]) => !t.excluded).map(([id]) => id);
    const excluded = [...terms].filter(([, t]) => t.excluded).map(([id]) => id);
    const text = $("free-text").value.trim();
    if (!observed.length && !text) {
      status.textContent = "Add at least one observed phenotype, or describe the patient.";
      input.focus();
      return;
    }
    const namespace = $("namespace").value;
    const genes = $("genes").value.split(/[\s,;]+/).filter(Boolean);
    const button = $("rank-button");
    medkg.busy(button, true, "Ranking…");
    status.textContent = "Ranking diseases…";
    try {
      const started = performance.now();
      const r = await api("/v1/differential", {
        method: "POST",
        json: {
          terms: observed,
          excluded,
          text: text || null,
          top_k: Number($("top-k").value) || 10,
          namespaces: namespace ? [namespace] : [],
          genes,
          sex: $("sex").value || null,
          age_years: $("age").value === "" ? null : Number($("age").value),
        },
      });
      renderResults(r);
      status.textContent = `${r.diseases.length} diseases in ${Math.round(performance.now() - started)} ms.`;
    } catch (error) {
      status.textContent = "";
      $("results-section").hidden = false;
      medkg.showError($("results-summary"), error);
      $("results").querySelector("tbody").replaceChildren();
    } finally {
      medkg.busy(button, false);
    }
  });
})();
