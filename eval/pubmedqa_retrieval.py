"""Retrieval quality on PubMedQA (``python -m eval.pubmedqa_retrieval``).

Recall@1, Recall@5 and MRR of each question's own abstract among PubMed distractors, for BM25, dense
and hybrid retrieval side by side; the figures are in docs/evaluation.md#retrieval.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from eval.embedding import configured_embedder, describe
from ingest.pubmed.documents import parse_documents
from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Article
from ingest.pubmed.readers import expand_paths, iter_records
from kg.embedders import TextEmbedder
from kg.graph.ladybug_store import LadybugGraphStore
from kg.nlp import build_pipeline
from kg.settings import load_settings
from kg.text_index import TextIndex

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def evaluate(
    path: Path, embedder: TextEmbedder, floor: float, distractors: list[Path], depth: int = 50
) -> dict[str, dict[str, float]]:
    """The PubMedQA abstracts plus ``distractors`` ingested as ``medkg ingest docs`` does; each question
    searched, and the rank of its own abstract scored. The hybrid is run without a floor (pure ranking
    quality) and with ``floor`` (what the service returns: a floor can only lose recall, it exists to
    abstain on off-topic questions)."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    questions = {str(int(pmid)): item["QUESTION"] for pmid, item in raw.items()}
    with path.open(encoding="utf-8") as stream:
        articles = [r for r in parse_documents(stream, str(path)) if isinstance(r, Article)]
    extra = [r for r in iter_records(distractors) if isinstance(r, Article) and r.pmid not in questions]
    articles += extra
    with tempfile.TemporaryDirectory(prefix="medkg-eval-pqa-") as tmp:
        store = LadybugGraphStore(Path(tmp) / "graph.lbug", buffer_pool_mb=512, max_db_size_gb=4)
        index = TextIndex(Path(tmp) / "indexes", embedder)
        try:
            t0 = time.perf_counter()
            PubmedLoader(store, index, build_pipeline(), None, progress=False).load(articles)
            print(
                f"corpus: {len(articles)} abstracts ({len(extra)} of them distractors from PubMed XML), "
                f"{len(index)} passages ({time.perf_counter() - t0:.1f} s); {len(questions)} questions"
            )
            runs = {"bm25": ("bm25", -1.0), "dense": ("dense", -1.0), "hybrid": ("hybrid", -1.0)}
            runs[f"hybrid, floor {floor}"] = ("hybrid", floor)
            results: dict[str, dict[str, float]] = {}
            for name, (mode, run_floor) in runs.items():
                ranks = []
                for pmid, question in questions.items():
                    hits = index.search(question, k=depth, mode=mode, floor=run_floor, candidates=depth)  # type: ignore[arg-type]
                    docs = list(dict.fromkeys(h.doc_id for h in hits))
                    gold = f"PMID:{pmid}"
                    ranks.append(docs.index(gold) + 1 if gold in docs else None)
                n = len(ranks)
                results[name] = {
                    "recall@1": round(sum(1 for r in ranks if r == 1) / n, 3),
                    "recall@5": round(sum(1 for r in ranks if r and r <= 5) / n, 3),
                    "mrr": round(sum(1 / r for r in ranks if r) / n, 3),
                }
        finally:
            index.close()
            store.close()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", type=Path, default=SHARED / "pubmedqa" / "pqal_dev.json")
    parser.add_argument("--floor", type=float, help="the similarity floor (default: MEDKG_SEARCH_FLOOR)")
    parser.add_argument(
        "--distractors", default=str(SHARED / "pubmed_xml"), help="more abstracts in the corpus ('' for none)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    distractors = expand_paths([args.distractors]) if args.distractors and Path(args.distractors).exists() else []
    if not args.file.exists():
        print(f"{args.file} is absent (../shared/data/pubmedqa)")
        return 2
    settings = load_settings()  # the embedder and the floor of the same configuration
    floor = settings.search_floor if args.floor is None else args.floor
    embedder = configured_embedder(settings)
    print(describe(embedder) + f"; floor {floor}")
    results = evaluate(args.file, embedder, floor, distractors)
    print(f"{'':<18} {'Recall@1':>9} {'Recall@5':>9} {'MRR':>7}")
    for name, r in results.items():
        print(f"{name:<18} {r['recall@1']:>9.3f} {r['recall@5']:>9.3f} {r['mrr']:>7.3f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
