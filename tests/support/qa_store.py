"""A small graph of Marfan syndrome, epilepsy and two annotated diseases, with three abstracts: the
store the QA, CLI, backup, browser and reliability tests build."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from ingest.pubmed.load import PubmedLoader
from ingest.pubmed.model import Article, Section
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation
from kg.settings import load_settings
from service.container import Container

ENTITIES = [
    Entity(id="OMIM:154700", name="Marfan syndrome", category="Disease", xrefs=["ORPHA:558"]),
    Entity(id="ORPHA:558", name="Marfan syndrome", category="Disease"),
    Entity(id="HP:0001166", name="Arachnodactyly", category="Phenotype", synonyms=["Long, slender fingers"]),
    Entity(id="HP:0001083", name="Ectopia lentis", category="Phenotype", synonyms=["Lens dislocation"]),
    Entity(id="HP:0002616", name="Aortic root aneurysm", category="Phenotype", synonyms=["aortic dilatation"]),
    Entity(id="HP:0000545", name="Myopia", category="Phenotype", synonyms=["Nearsightedness"]),
    Entity(id="DOID:1826", name="epilepsy", category="Disease"),
    Entity(id="DRUGBANK:DB00313", name="Valproic acid", category="Drug"),
    Entity(id="DRUGBANK:DB00555", name="Lamotrigine", category="Drug"),
    Entity(id="DRUGBANK:DB00678", name="Losartan", category="Drug"),
    Entity(id="NCBIGene:2200", name="FBN1", category="Gene", synonyms=["fibrillin 1"]),
    # a small HPO hierarchy and two annotated diseases, for the differential routing
    Entity(id="HP:0000001", name="All", category="Phenotype"),
    Entity(id="HP:0000118", name="Phenotypic abnormality", category="Phenotype"),
    Entity(id="HP:0001250", name="Seizure", category="Phenotype"),
    Entity(id="HP:0000252", name="Microcephaly", category="Phenotype"),
    Entity(id="HP:0001252", name="Hypotonia", category="Phenotype"),
    Entity(id="OMIM:100001", name="Microcephaly-epilepsy syndrome", category="Disease"),
    Entity(id="OMIM:100002", name="Congenital hypotonia", category="Disease"),
    Entity(id="NCBIGene:93627", name="TBCK", category="Gene"),
]


HIERARCHY = {
    "HP:0000118": "HP:0000001",
    **{t: "HP:0000118" for t in ("HP:0001250", "HP:0000252", "HP:0001252", "HP:0001166", "HP:0001083")},
    **{t: "HP:0000118" for t in ("HP:0002616", "HP:0000545")},
}


PHENO = {"HP:0001166": "HP:0040281", "HP:0001083": "HP:0040282", "HP:0002616": "HP:0040281", "HP:0000545": None}


RELATIONS = [
    *(
        Relation(
            subject="OMIM:154700",
            type="HAS_PHENOTYPE",
            object=hp,
            source="hpo",
            evidence={"pmids": ["20591885"], "frequency": freq} if freq else {},
        )
        for hp, freq in PHENO.items()
    ),
    Relation(subject="OMIM:154700", type="SAME_AS", object="ORPHA:558", source="xref"),
    Relation(subject="NCBIGene:2200", type="ASSOCIATED_WITH", object="OMIM:154700", source="hpo"),
    Relation(subject="NCBIGene:93627", type="ASSOCIATED_WITH", object="OMIM:100002", source="hpo"),
    Relation(subject="DRUGBANK:DB00313", type="TREATS", object="DOID:1826", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB00555", type="TREATS", object="DOID:1826", source="pharmacotherapydb"),
    Relation(subject="DRUGBANK:DB00678", type="TREATS", object="ORPHA:558", source="trial"),
    *(Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in HIERARCHY.items()),
    *(
        Relation(subject=d, type="HAS_PHENOTYPE", object=t, source="hpo", evidence={"pmids": pmids})
        for d, t, pmids in (
            ("OMIM:100001", "HP:0001250", ["PMID:11"]),
            ("OMIM:100001", "HP:0000252", ["PMID:12"]),
            ("OMIM:100002", "HP:0001252", ["PMID:11"]),
        )
    ),
]


ARTICLES = [
    Article(
        pmid="20591885",
        title="The revised Ghent nosology for the Marfan syndrome.",
        sections=[
            Section(
                text="In the revised Ghent nosology, aortic root aneurysm and ectopia lentis are the cardinal "
                "clinical features of Marfan syndrome. Systemic features such as arachnodactyly add to the score."
            )
        ],
        year=2010,
    ),
    Article(
        pmid="24102121",
        title="Losartan versus atenolol in children with Marfan syndrome.",
        sections=[Section(text="Losartan slowed the rate of aortic root dilatation in children with Marfan syndrome.")],
        year=2014,
    ),
    Article(
        pmid="30000001",
        title="Valproate in generalized epilepsy.",
        sections=[Section(text="Valproic acid remains effective for generalized epilepsy in adults.")],
        year=2018,
    ),
]


def build_qa_store(container: Container) -> None:
    g = container.graph
    g.upsert_entities(ENTITIES)
    g.upsert_relations(RELATIONS)
    container.entity_index.update(g, progress=False)
    container.phrase_index.update(g, progress=False)
    PubmedLoader(g, container.text_index, container.nlp, container.linker, progress=False).load(ARTICLES)


@contextmanager
def qa_container(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    entities: Sequence[Entity] = (),
    relations: Sequence[Relation] = (),
) -> Iterator[Container]:
    """A container on the backend ``request.param`` names ("ladybug": a fresh embedded store; "neo4j":
    the session's Neo4j, cleared) holding this module's store plus ``entities`` and ``relations`` (in
    before the linker is built), offline answers, no API keys, no rate limit."""
    from tests.conftest import open_ladybug

    tmp = tmp_path_factory.mktemp(f"qa-{request.param}")
    store: BaseGraphStore
    if request.param == "ladybug":
        store = open_ladybug(tmp)
    else:
        store = request.getfixturevalue("_neo4j_store")
        store.clear()
    settings = load_settings(data_dir=tmp, api_keys=None, llm_base_url=None, rate_limit_per_minute=0)
    container = Container(settings, graph=store)
    store.upsert_entities(entities)
    store.upsert_relations(relations)
    build_qa_store(container)
    try:
        yield container
    finally:
        container.close()
        if request.param == "ladybug":
            store.close()
        else:
            store.clear()
