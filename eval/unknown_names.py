"""How often real questions name something medkg calls unknown (kg/unknown_names.py) on a store: the
dev sets of ../shared/data (MedQA, MedMCQA, MMLU-Med, KG-RAG, PubMedQA) are linked as the QA engine links
them, and for each set this prints how many questions name an unknown word, how many of those the
engine would answer "no information" (at most 30 words) rather than with a note, and the words. The
dev sets are real questions about real things, so every flag is a word the store does not hold: a
drug no source has, a typo of the dataset, or clinical jargon the rules miss.

    python -m eval.unknown_names --data-dir data [--shared-data ../shared/data] [--limit 300]
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from eval.datasets import load
from kg.settings import load_settings
from service.container import Container
from service.qa.engine import ABOUT_ONE_THING_WORDS

SETS = {
    "medqa": "medqa_usmle/medqa_usmle_dev.jsonl",
    "medmcqa": "medmcqa/medmcqa_dev.jsonl",
    "mmlu": "mmlu_med/mmlu_med_dev.jsonl",
    "kgrag-mcq": "kg_rag_benchmark/mcq_questions_dev.csv",
    "kgrag-tf": "kg_rag_benchmark/true_false_questions_dev.csv",
    "pubmedqa": "pubmedqa/pqal_dev.json",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="The store to link against.")
    parser.add_argument("--shared-data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--limit", type=int, default=300, help="Questions per set at most.")
    args = parser.parse_args()
    results: dict[str, dict[str, object]] = {}
    with Container(load_settings(data_dir=args.data_dir)) as c:
        for name, relative in SETS.items():
            path = args.shared_data / relative
            if not path.exists():
                print(f"{name}: skipped ({path} not found)")
                continue
            items = load(name, path).items[: args.limit]
            flagged = stopped = 0
            words: collections.Counter[str] = collections.Counter()
            for item in items:
                unknown = c.retriever.link(item.question).unknown
                if unknown:
                    flagged += 1
                    stopped += len(item.question.split()) <= ABOUT_ONE_THING_WORDS
                    words.update(u.text for u in unknown)
            results[name] = {"questions": len(items), "flagged": flagged, "no_information": stopped}
            print(f"{name}: {flagged}/{len(items)} name an unknown word ({stopped} short enough to get "
                  f"'no information'); most often: {', '.join(w for w, _ in words.most_common(10))}")  # fmt: skip
    print(json.dumps(results))


if __name__ == "__main__":
    main()
