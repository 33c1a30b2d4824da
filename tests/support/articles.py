"""A small Marfan syndrome lexicon and an abstract about it, for the literature-load tests."""

from __future__ import annotations

from ingest.pubmed.model import Article, MeshHeading, Section
from kg.model import Entity

MARFAN_ONTOLOGY = [
    Entity(id="DOID:14323", name="Marfan syndrome", category="Disease"),
    Entity(id="HP:0002616", name="Aortic root aneurysm", category="Phenotype", synonyms=["aortic root dilatation"]),
    Entity(id="HP:0001083", name="Ectopia lentis", category="Phenotype", synonyms=["lens dislocation"]),
    Entity(id="DRUGBANK:DB00335", name="Atenolol", category="Drug"),
    Entity(id="DOID:162", name="cancer", category="Disease"),
]


def marfan(pmid: str = "100", abstract: str | None = None, **extra) -> Article:
    return Article(
        pmid=pmid,
        title="Atenolol in Marfan syndrome.",
        sections=[
            Section(
                label="BACKGROUND", text="Marfan syndrome (MFS) causes aortic root dilatation and lens dislocation."
            ),
            Section(label="RESULTS", text=abstract or "In MFS, atenolol slowed aortic root dilatation."),
        ],
        journal="N Engl J Med",
        year=2014,
        mesh=[MeshHeading(ui="D008382", name="Marfan Syndrome", major=True, qualifiers=["drug therapy"])],
        doi="10.1056/x",
        **extra,
    )
