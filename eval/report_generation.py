"""Report quality on the IU chest X-ray reports (``python -m eval.report_generation [CSV]``).

Each report's impression is generated from its indication and findings with the report held out, and
scored (ROUGE-L, keyword F1) against its own impression beside two baselines: docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from kg.negation import negated_in
from kg.text_metrics import keyword_counts, micro_prf, rouge_l
from service.radiology.generator import usable_impression

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
IGNORED_HEADINGS = {"normal", "no indexing"}
CONSTANT_IMPRESSION = "No acute cardiopulmonary abnormality."  # the most common normal impression
SYSTEMS = (("medkg", "ours"), ("nearest_neighbour", "nn"), ("constant", "constant"))


def heading_vocabulary(mesh_terms: list[list[str]]) -> list[re.Pattern[str]]:
    heads = {t.split("/", 1)[0].strip().lower() for terms in mesh_terms for t in terms}
    heads -= IGNORED_HEADINGS
    return [re.compile(rf"\b{re.escape(h)}\b") for h in sorted(h for h in heads if len(h) > 2)]


def keywords(text: str, vocabulary: list[re.Pattern[str]]) -> set[str]:
    """The headings a text names, each with its polarity: "pleural effusion", or "no pleural effusion"
    when every mention is negated ("No pneumothorax or pleural effusion." states neither)."""
    low = text.lower()
    found = set()
    for p in vocabulary:
        heading = p.pattern.removeprefix("\\b").removesuffix("\\b").replace("\\", "")
        polarities = {negated_in(low, m.start(), m.end()) for m in p.finditer(low)}
        if polarities:
            found.add(heading if False in polarities else f"no {heading}")
    return found


def _strip_citations(text: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]", "", text).strip()


# Keywords micro-averaged, so a report with no keyword on either side adds nothing: a per-report F1 that
# counted "both empty" as 1.0 let an empty impression score above every real one.
def scores(rows: list[dict], prefix: str) -> dict[str, float]:
    """One system's figures over the rows: mean ROUGE-L, and keyword precision, recall and F1
    micro-averaged (the rows' true/false positives and false negatives summed first)."""
    p, r, f = micro_prf(row[f"{prefix}_keywords"] for row in rows)
    return {
        "rouge_l": round(statistics.fmean(row[f"{prefix}_rouge_l"] for row in rows), 4) if rows else 0.0,
        "keyword_precision": round(p, 4),
        "keyword_recall": round(r, 4),
        "keyword_f1": round(f, 4),
    }


def evaluate(generator, reports: list[tuple[str, object]], k: int = 5, limit: int | None = None) -> dict:  # noqa: ANN001
    """Each report with an impression in turn is the current study, every other report a prior: medkg's
    impression (the weighted medoid of the ``k`` nearest priors' impressions), the nearest usable prior's
    impression copied (baseline) and ``CONSTANT_IMPRESSION`` (baseline), each scored against the report's
    own impression by ROUGE-L and by the collection's MeSH headings found, with their polarity."""
    vocabulary = heading_vocabulary([r.mesh for _, r in reports])  # type: ignore[attr-defined]
    cases = [(d, r) for d, r in reports if r.impression and (r.findings or r.indication)]  # type: ignore[attr-defined]
    cases = cases[:limit] if limit else cases
    rows = []
    started = time.perf_counter()
    for doc_id, r in cases:
        query = " ".join(p for p in (r.indication, r.findings) if p)  # type: ignore[attr-defined]
        priors = generator.priors(query, k=k, exclude={doc_id})
        ours = _strip_citations(generator.compose_impression(priors, r.findings))  # type: ignore[attr-defined]
        # the baseline copies the nearest prior whose impression a draft could take (as medkg's does)
        nearest = next((p.report.impression for p in priors if usable_impression(p.report.impression)), "")
        ref = r.impression  # type: ignore[attr-defined]
        ref_kw = keywords(ref, vocabulary)
        row: dict = {"doc_id": doc_id, "priors": len(priors)}
        for prefix, text in (("ours", ours), ("nn", nearest), ("constant", CONSTANT_IMPRESSION)):
            row[f"{prefix}_rouge_l"] = rouge_l(text, ref)
            row[f"{prefix}_keywords"] = keyword_counts(keywords(text, vocabulary), ref_kw)  # (tp, fp, fn)
        rows.append(row)
    seconds = time.perf_counter() - started
    return {
        "reports": len(rows),
        "k": k,
        "keywords_in_vocabulary": len(vocabulary),
        **{name: scores(rows, prefix) for name, prefix in SYSTEMS},
        "without_priors": sum(1 for row in rows if not row["priors"]),
        "ms_per_report": round(1000 * seconds / max(len(rows), 1), 2),
        "rows": rows,
    }


def report(result: dict) -> None:
    print(f"{result['reports']} reports, impression from indication + findings, k = {result['k']} priors")
    print("keywords: micro-averaged over the reports (true/false positives and false negatives summed)")
    print(f"{'':24}{'ROUGE-L':>10}{'kw P':>9}{'kw R':>9}{'kw F1':>9}")
    for name, key in (
        ("constant", "constant"),
        ("nearest neighbour", "nearest_neighbour"),
        ("medkg (consensus)", "medkg"),
    ):
        s = result[key]
        print(
            f"{name:24}{s['rouge_l']:>10.4f}{s['keyword_precision']:>9.4f}{s['keyword_recall']:>9.4f}"
            f"{s['keyword_f1']:>9.4f}"
        )
    print(f"  (constant: {CONSTANT_IMPRESSION!r} for every report)")
    d_r = result["medkg"]["rouge_l"] - result["nearest_neighbour"]["rouge_l"]
    d_k = result["medkg"]["keyword_f1"] - result["nearest_neighbour"]["keyword_f1"]
    print(f"{'medkg - nearest':24}{d_r:>+10.4f}{'':>18}{d_k:>+9.4f}")
    print(f"{result['without_priors']} reports found no prior; {result['ms_per_report']} ms per report")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", type=Path, nargs="?", default=SHARED / "iu_xray_reports" / "indiana_reports_dev.csv")
    parser.add_argument("--limit", type=int, help="only the first N reports as current studies")
    parser.add_argument("--corpus", type=int, help="load only the first N reports (default: all)")
    parser.add_argument("-k", type=int, default=5, help="priors per report")
    parser.add_argument("--data-dir", type=Path, help="load the reports here (default: a temp dir)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    if not args.file.exists():
        print(f"{args.file} is absent (../shared/data/iu_xray_reports)", file=sys.stderr)
        return 2
    from ingest.radiology_reports import RadiologyReport, ReportLoader, read_iu_reports
    from kg.settings import load_settings
    from service.container import Container

    with tempfile.TemporaryDirectory(prefix="medkg-eval-reports-") as tmp:
        data_dir = args.data_dir or Path(tmp)
        with Container(load_settings(data_dir=data_dir)) as c:
            records = list(read_iu_reports(args.file))
            if args.corpus:
                records = [r for r in records if isinstance(r, RadiologyReport)][: args.corpus]
            loader = ReportLoader(c.graph, c.text_index, c.nlp, c.linker, progress=False, reports=c.reports)
            t0 = time.perf_counter()
            loaded = loader.load(records)
            print(
                f"loaded: {loaded.documents_added} added, {loaded.documents_unchanged} unchanged "
                f"({time.perf_counter() - t0:.1f} s)"
            )
            reports = [(d, r) for d, r in c.reports.iter() if isinstance(r, RadiologyReport)]
            result = evaluate(c.report_generator, reports, k=args.k, limit=args.limit)
    report(result)
    if args.json:
        args.json.write_text(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
