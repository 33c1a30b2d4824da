"""Distributed literature ingest (``medkg ingest pubmed --ray``) against today's one-process loader, in
one run on one machine: abstracts/s end to end with 1 and 2 local Ray workers and with the loader, the
Ray stage (parse, split, link, embed) and the merge timed apart. Input: copies of
../shared/data/pubmed_xml (PMIDs shifted per copy); HPO in the graph first, so linking has a lexicon.
Each run starts from a copy of the same store.

    python -m benchmarks.ingest_distributed --records 2000 --workers 1,2
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import write_results
from benchmarks.ingest_pubmed import DEFAULT_SOURCE, source_files, write_copies
from kg.embedding_paths import cpu_features


def _cpu() -> str:
    model = cpu_features()["model"]
    return model if model != "unknown" else platform.processor() or "unknown CPU"


def _abstracts(paths: list[Path]) -> int:
    from ingest.pubmed.model import Article
    from ingest.pubmed.readers import iter_records

    return sum(1 for r in iter_records(paths) if isinstance(r, Article) and any(s.text for s in r.sections))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=2000, help="articles loaded (copies of the shared files)")
    ap.add_argument("--workers", default="1,2", help="local Ray sizes to run, comma-separated")
    ap.add_argument("--no-hpo", dest="hpo", action="store_false", help="skip loading HPO (an empty lexicon)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="folder of PubMed XML files")
    ap.add_argument("--json", dest="json_out", type=Path, help="write the figures to this file")
    args = ap.parse_args(argv)
    if not args.source.is_dir():
        print(f"{args.source}: no such folder (real PubMed XML from ../shared/data/pubmed_xml)", file=sys.stderr)
        return 2

    from ingest.hpo import hpo_items
    from ingest.pubmed.readers import iter_records
    from ingest.writer import ingest
    from kg.settings import load_settings
    from service import ingestion
    from service.container import Container

    sizes = [int(w) for w in args.workers.split(",") if w.strip()]
    results: dict = {"records": args.records, "cpus": os.cpu_count(), "cpu": _cpu(), "runs": []}
    print(f"machine: {results['cpu']}, {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="medkg-bench-ray-") as tmp_name:
        tmp = Path(tmp_name)
        paths, n = write_copies(source_files(args.source), args.source, args.records, tmp / "xml")
        abstracts = _abstracts(paths)
        print(f"input: {len(paths)} files, {n:,} articles, {abstracts:,} with an abstract", flush=True)
        template = tmp / "template"
        # vector_memo_mb=0: every run embeds its passages, as the benchmark times it
        with Container(load_settings(data_dir=template, vector_memo_mb=0)) as c:
            if args.hpo:
                ingest(c.graph, hpo_items(), "hpo", progress=False)
            c.graph.checkpoint()

        def fresh(name: str) -> Container:
            shutil.copytree(template, tmp / name)
            return Container(load_settings(data_dir=tmp / name, vector_memo_mb=0))

        with fresh("plain") as c:
            c.document_linker  # noqa: B018 - built before the clock starts, as in each Ray run
            c.text_embedder.encode(["warm-up"])
            t0 = time.perf_counter()
            loaded = ingestion.load_literature(c, iter_records(paths), "pubmed", True, False, progress=False)
            seconds = time.perf_counter() - t0
            base = {"mode": "loader", "seconds": seconds, "abstracts_per_s": abstracts / seconds,
                    "passages": loaded.passages, "timings": dict(loaded.summary.timings)}  # fmt: skip
        results["runs"].append(base)
        print(f"today's loader: {abstracts / seconds:.1f} abstracts/s ({seconds:.1f} s)", flush=True)
        for workers in sizes:
            with fresh(f"ray{workers}") as c:
                c.document_linker  # noqa: B018
                c.text_embedder.encode(["warm-up"])
                t0 = time.perf_counter()
                ray = ingestion.load_literature_ray(c, paths, "pubmed", True, progress=False, workers=workers)
                seconds = time.perf_counter() - t0
                run = {
                    "mode": f"ray {workers}", "workers": workers, "seconds": seconds,
                    "abstracts_per_s": abstracts / seconds, "prepare_s": ray.prepared.seconds,
                    "merge_s": ray.merge_seconds, "passages": len(c.text_index),
                    "ratio_to_loader": (abstracts / seconds) / base["abstracts_per_s"],
                }  # fmt: skip
            results["runs"].append(run)
            print(
                f"ray, {workers} local worker(s): {run['abstracts_per_s']:.1f} abstracts/s ({seconds:.1f} s: Ray "
                f"stage {run['prepare_s']:.1f} s, merge {run['merge_s']:.1f} s), {run['ratio_to_loader']:.2f}x "
                "today's loader",
                flush=True,
            )
    write_results(args.json_out, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
