// The report page: a DICOM study and its indication in; the de-identified preview, a cited draft
// (technique, findings, impression, clinical context) and the similar prior studies out.
"use strict";

(() => {
  const { el, api } = medkg;
  const $ = (id) => document.getElementById(id);

  medkg.header("reports");

  function section(title, text, nums, detail) {
    if (!text) return null;
    return el("div", { class: "report-section" }, el("h3", { text: title }), el("p", {}, medkg.citedText(text, nums, detail)));
  }

  function renderReport(r) {
    const nums = medkg.numbering(r.citations);
    const detail = $("citation-detail");
    detail.replaceChildren();
    delete detail.dataset.open;
    const box = $("report");
    box.dataset.abstained = String(r.insufficient_evidence);
    const parts = [
      r.insufficient_evidence
        ? el("div", { class: "abstained", role: "note" }, el("strong", { text: "Too little evidence for a draft." }), el("p", { text: "No prior study is similar enough; what follows is not a report." }))
        : null,
      section("Indication", r.indication, nums, detail),
      section("Technique", r.technique, nums, detail),
      section("Findings", r.findings, nums, detail),
      section("Impression", r.impression, nums, detail),
      section("Clinical context (knowledge graph)", r.context, nums, detail),
      el("p", { class: "hint", text: `${r.mode} draft · confidence ${r.confidence.toFixed(2)} · a draft for a radiologist to check, not a diagnosis` }),
    ];
    box.replaceChildren(...parts.filter(Boolean));
    for (const c of r.citations) nums.number(c.id);
    $("cited-list").replaceChildren(r.citations.length ? medkg.citationList(nums, detail) : el("p", { class: "hint", text: "None." }));
    $("report-section").hidden = false;

    const body = $("priors-table").querySelector("tbody");
    body.replaceChildren(
      ...r.priors.map((p) =>
        el(
          "tr",
          {},
          el(
            "td",
            {},
            p.image_id ? medkg.thumbnail(p.image_id, `Prior study ${p.doc_id}`) : null,
            el("code", { class: "id", text: p.doc_id }),
            p.indication ? el("div", { class: "hint", text: p.indication }) : null,
          ),
          el("td", { class: "num", text: p.score.toFixed(3) }),
          el("td", { text: p.via.join(", ") }),
          el("td", { text: p.impression || "" }),
        ),
      ),
    );
    $("priors-section").hidden = r.priors.length === 0;
    $("timings").replaceChildren(medkg.timings(r.timings_ms));
    $("timings-section").hidden = false;
  }

  $("study").addEventListener("change", () => {
    const file = $("study").files[0];
    if (file) medkg.previewUpload(file, $("preview"));
  });

  $("report-form").addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = $("study").files[0];
    const status = $("report-status");
    if (!file) {
      status.textContent = "Choose a DICOM study first.";
      $("study").focus();
      return;
    }
    const button = $("report-button");
    medkg.busy(button, true, "Drafting…");
    status.textContent = "Finding similar prior studies and drafting…";
    const form = new FormData();
    form.append("file", file, file.name);
    form.append("indication", $("indication").value.trim());
    form.append("findings", $("findings").value.trim());
    form.append("k", String(Number($("opt-k").value) || 5));
    try {
      const [report] = await Promise.all([
        api("/v1/reports", { method: "POST", form }),
        $("preview-image") ? Promise.resolve(true) : medkg.previewUpload(file, $("preview")),
      ]);
      renderReport(report);
      status.textContent = `Drafted in ${(report.timings_ms.total / 1000).toFixed(2)} s.`;
      $("report").focus();
    } catch (error) {
      status.textContent = "";
      $("report-section").hidden = false;
      medkg.showError($("report"), error);
    } finally {
      medkg.busy(button, false);
    }
  });
})();
