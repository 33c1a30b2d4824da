// medkg web pages: the shared parts (site header, API calls with the key, errors, cited text).
// Everything from the server is put in the page as text (textContent), never as markup.
"use strict";

const medkg = (() => {
  const KEY_STORE = "medkg.apiKey";
  const PAGES = [
    ["/", "Ask", "qa"],
    ["/reports", "Reports", "reports"],
    ["/differential", "Differential", "differential"],
    ["/eval", "Evaluation", "eval"],
  ];

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (name === "dataset") Object.assign(node.dataset, value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  function apiKey() {
    return sessionStorage.getItem(KEY_STORE) || "";
  }

  async function api(path, { method = "GET", json, form, raw = false, signal } = {}) {
    const headers = { Accept: "application/json" };
    const key = apiKey();
    if (key) headers["X-API-Key"] = key;
    let body;
    if (json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(json);
    } else if (form !== undefined) {
      body = form;
    }
    let response;
    try {
      response = await fetch(path, { method, headers, body, signal });
    } catch (exc) {
      throw new Error(`the server did not answer (${exc.message})`);
    }
    if (!response.ok) {
      let detail = response.statusText;
      try {
        const problem = await response.json();
        detail = typeof problem.detail === "string" ? problem.detail : JSON.stringify(problem.detail);
      } catch (_) {
        /* not JSON: keep the status text */
      }
      const hint = response.status === 401 ? " (enter an API key under 'API key')" : "";
      const error = new Error(`${response.status}: ${detail}${hint}`);
      error.status = response.status;
      throw error;
    }
    return raw ? response : response.json();
  }

  // Server-sent events answering a POST (EventSource cannot POST): onEvent(name, data) for each
  // event as it arrives; an exception thrown by onEvent stops reading and propagates.
  async function apiEvents(path, { json, form, onEvent }) {
    const response = await api(path, { method: "POST", json, form, raw: true });
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = "message";
          const data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
          }
          if (data.length) onEvent(name, JSON.parse(data.join("\n")));
        }
        if (done) return;
      }
    } finally {
      reader.releaseLock();
    }
  }

  function header(active) {
    const host = document.querySelector("header.site");
    const items = PAGES.map(([href, label, id]) =>
      el("li", {}, el("a", { href, "aria-current": id === active ? "page" : null, text: label })),
    );
    const keyInput = el("input", {
      type: "password",
      id: "api-key",
      autocomplete: "off",
      placeholder: "none on loopback",
      value: apiKey(),
    });
    const saved = el("span", { class: "hint", role: "status" });
    const form = el(
      "form",
      {
        onsubmit: (event) => {
          event.preventDefault();
          if (keyInput.value) sessionStorage.setItem(KEY_STORE, keyInput.value);
          else sessionStorage.removeItem(KEY_STORE);
          saved.textContent = keyInput.value ? "saved for this tab" : "cleared";
        },
      },
      el("label", { for: "api-key", class: "inline", text: "Key" }),
      keyInput,
      el("button", { type: "submit", class: "secondary", text: "Save" }),
      saved,
    );
    host.replaceChildren(
      el("a", { class: "skip", href: "#main", text: "Skip to content" }),
      el("a", { class: "brand", href: "/", text: "medkg" }),
      el("nav", { "aria-label": "Pages" }, el("ul", {}, items)),
      el("details", {}, el("summary", { text: "API key" }), form),
    );
    buildBanner(host);
  }

  // ---- what is still being built (the served demo indexes behind the server) --------------------
  function duration(seconds) {
    if (seconds < 60) return `${Math.max(1, Math.round(seconds))} s`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes} min ${Math.round(seconds % 60)} s`;
    return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
  }

  function buildText(report) {
    if (report.status === "loading") return "Loading the models and indexes…";
    const build = report.build;
    if (!build || build.state !== "running") return "";
    const running = build.parts.find((part) => part.state === "running");
    const waiting = build.parts.filter((part) => part.state === "waiting").map((part) => part.title);
    let text = "Still indexing; answers use what is indexed so far.";
    if (running) {
      text += ` Now: ${running.title}`;
      const progress = running.progress;
      if (progress) {
        const of = progress.total ? ` of ${progress.total.toLocaleString()}` : "";
        const percent = progress.percent !== null ? ` (${progress.percent}%)` : "";
        text += `, ${progress.what} ${progress.done.toLocaleString()}${of} ${progress.unit}${percent}`;
        if (progress.eta_s !== null) text += `, about ${duration(progress.eta_s)} left`;
      }
      text += ".";
    }
    if (waiting.length) text += ` Then: ${waiting.join(", ")}.`;
    return text;
  }

  async function buildBanner(host) {
    const banner = el("p", { class: "build-status", role: "status", "aria-live": "polite", hidden: true });
    host.after(banner);
    for (;;) {
      let report;
      try {
        report = await (await fetch("/readyz", { headers: { Accept: "application/json" } })).json();
      } catch {
        return; // the server is gone or not medkg's: nothing to show
      }
      const text = buildText(report);
      banner.textContent = text;
      banner.hidden = !text;
      if (!text) return;
      await new Promise((resolve) => setTimeout(resolve, 5000));
    }
  }

  function showError(container, error) {
    container.replaceChildren(el("p", { class: "error", role: "alert", text: error.message || String(error) }));
  }

  // ---- citations ------------------------------------------------------------------------------
  // Answers cite evidence ids in square brackets, several separated by ';':
  // "[KG:OMIM:154700-HAS_PHENOTYPE-HP:0001166; PMID:123#s4]".
  const GROUP = /\[([^\[\]]+)\]/g;

  function pubmedLinks(text) {
    const ids = [...new Set([...text.matchAll(/PMID:(\d+)/g)].map((m) => m[1]))];
    return ids.map((id) => el("a", { href: `https://pubmed.ncbi.nlm.nih.gov/${id}/`, target: "_blank", rel: "noopener", text: `PMID:${id}` }));
  }

  const KIND_LABEL = { kg: "Knowledge-graph fact", passage: "Literature passage", image: "Similar prior study" };

  // The de-identified pixels of a DICOM the user chose, rendered by the server into `box`.
  let uploadUrl = null;
  async function previewUpload(file, box) {
    box.replaceChildren(el("p", { class: "hint", text: "Rendering the de-identified image…" }));
    const form = new FormData();
    form.append("file", file, file.name);
    try {
      const response = await api("/v1/images/preview?max_side=512", { method: "POST", form, raw: true });
      const blob = await response.blob();
      if (uploadUrl) URL.revokeObjectURL(uploadUrl);
      uploadUrl = URL.createObjectURL(blob);
      box.replaceChildren(el("img", { class: "preview", id: "preview-image", alt: "De-identified preview of the chosen study", src: uploadUrl }));
      return true;
    } catch (error) {
      showError(box, error);
      return false;
    }
  }

  // The thumbnail of an indexed study, fetched with the key (an <img src> could not send it).
  function thumbnail(imageId, alt) {
    const holder = el("div", { class: "thumb", dataset: { image: imageId } });
    api(`/v1/images/${encodeURIComponent(imageId)}/preview`, { raw: true })
      .then((response) => response.blob())
      .then((blob) => holder.replaceChildren(el("img", { class: "preview", alt, src: URL.createObjectURL(blob) })))
      .catch((error) => holder.replaceChildren(el("p", { class: "hint", text: `No image to show: ${error.message}` })));
    return holder;
  }

  function citationCard(citation, number) {
    const links = [];
    if (citation.url) {
      const label = citation.url.includes("pubmed.ncbi.nlm.nih.gov") ? "Open in PubMed" : "Open the source";
      links.push(el("a", { href: citation.url, target: "_blank", rel: "noopener", text: label }));
    }
    for (const link of pubmedLinks(citation.text || "")) {
      if (!citation.url || !citation.url.includes(link.textContent.slice(5))) links.push(link);
    }
    return el(
      "article",
      { class: "citation-detail", "aria-label": `Citation ${number}`, tabindex: "-1", dataset: { citation: citation.id } },
      el("div", { class: "kind", text: `[${number}] ${KIND_LABEL[citation.kind] || citation.kind}` }),
      el("div", {}, el("strong", { text: citation.title || citation.id })),
      citation.kind === "image" ? thumbnail(citation.id, `Thumbnail of the cited study ${citation.title || ""}`) : null,
      el("blockquote", { text: citation.text }),
      el("div", {}, el("code", { class: "id", text: citation.id })),
      links.length ? el("p", {}, links.flatMap((a, i) => (i ? [" · ", a] : [a]))) : null,
    );
  }

  // A numbering of citation ids shared by everything shown for one answer.
  function numbering(citations) {
    const byId = new Map(citations.map((c) => [c.id, c]));
    const numbers = new Map();
    return {
      byId,
      number(id) {
        if (!numbers.has(id)) numbers.set(id, numbers.size + 1);
        return numbers.get(id);
      },
      ordered() {
        return [...numbers.keys()].map((id) => byId.get(id)).filter(Boolean);
      },
    };
  }

  // Text with [id; id] groups turned into numbered buttons; a button shows its citation in `detail`.
  function citedText(text, nums, detail) {
    const out = document.createDocumentFragment();
    let last = 0;
    for (const match of text.matchAll(GROUP)) {
      const ids = match[1].split(/;\s*/).map((s) => s.trim());
      const known = ids.filter((id) => nums.byId.has(id));
      if (!known.length) continue;
      out.append(text.slice(last, match.index).replace(/\s+$/, ""));
      for (const id of known) {
        const n = nums.number(id);
        const citation = nums.byId.get(id);
        const button = el("button", {
          type: "button",
          class: "cite",
          "aria-expanded": "false",
          "aria-label": `Citation ${n}: ${citation.title || id}`,
          dataset: { citation: id },
          text: String(n),
        });
        button.addEventListener("click", () => openCitation(detail, citation, n, button));
        out.append(button);
      }
      last = match.index + match[0].length;
    }
    out.append(text.slice(last));
    return out;
  }

  function openCitation(detail, citation, number, button) {
    const open = detail.dataset.open === citation.id;
    document.querySelectorAll("button.cite[aria-expanded='true']").forEach((b) => b.setAttribute("aria-expanded", "false"));
    if (open) {
      detail.replaceChildren();
      delete detail.dataset.open;
      return;
    }
    const card = citationCard(citation, number);
    detail.replaceChildren(card);
    detail.dataset.open = citation.id;
    if (button) button.setAttribute("aria-expanded", "true");
    card.focus({ preventScroll: false });
  }

  function citationList(nums, detail) {
    const list = el("ol", { class: "citations" });
    nums.ordered().forEach((c, i) => {
      const button = el("button", { type: "button", class: "link", text: c.title || c.id });
      button.addEventListener("click", () => openCitation(detail, c, i + 1, null));
      list.append(el("li", {}, button, " ", el("code", { class: "id", text: c.id })));
    });
    return list;
  }

  function timings(map) {
    const entries = Object.entries(map || {}).filter(([k]) => k !== "total");
    const max = Math.max(1, ...entries.map(([, v]) => v));
    const list = el("ul", { class: "timings", "aria-label": "Time per stage" });
    for (const [stage, ms] of entries) {
      list.append(
        el(
          "li",
          {},
          el("span", { text: stage }),
          el("span", { class: "bar", style: null, dataset: { ms: ms } }),
          el("span", { class: "ms", text: `${ms.toFixed(1)} ms` }),
        ),
      );
    }
    // Bar widths through the CSSOM (inline style attributes are refused by the page's CSP).
    list.querySelectorAll(".bar").forEach((bar) => {
      bar.style.width = `${(100 * Number(bar.dataset.ms)) / max}%`;
    });
    if (map && map.total !== undefined) list.append(el("li", {}, el("strong", { text: "total" }), el("span"), el("strong", { class: "ms", text: `${map.total.toFixed(1)} ms` })));
    return list;
  }

  function busy(button, on, label) {
    button.disabled = on;
    if (on) {
      button.dataset.label = button.textContent;
      button.textContent = label;
    } else if (button.dataset.label) {
      button.textContent = button.dataset.label;
    }
  }

  return { el, api, apiEvents, header, showError, numbering, citedText, citationList, citationCard, openCitation, timings, busy, pubmedLinks, thumbnail, previewUpload };
})();
