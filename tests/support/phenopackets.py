"""GA4GH Phenopackets v2 built with the ``phenopackets`` package from the reduced real cases of
../shared/data/phenopackets (the same fields phenopacket-store's files carry), as JSON."""

from __future__ import annotations

from google.protobuf.json_format import MessageToDict
from google.protobuf.timestamp_pb2 import Timestamp
from phenopackets import (
    Diagnosis,
    ExternalReference,
    GeneDescriptor,
    GenomicInterpretation,
    Individual,
    Interpretation,
    MetaData,
    OntologyClass,
    Phenopacket,
    PhenotypicFeature,
    Resource,
    VariantInterpretation,
    VariationDescriptor,
)


def as_phenopacket(case: dict, by_variant: bool = True) -> dict:
    """``case`` (id, pmids, observed, excluded, diseases, genes) as a phenopacket's JSON: each gene as the gene
    context of a causative variant (``by_variant``, as phenopacket-store writes them) or as a gene call."""
    subject = f"{case['id']}-proband"

    def call(symbol: str) -> GenomicInterpretation:
        g = GenomicInterpretation(subject_or_biosample_id=subject, interpretation_status="CAUSATIVE")
        if by_variant:
            g.variant_interpretation.CopyFrom(
                VariantInterpretation(
                    variation_descriptor=VariationDescriptor(
                        id=f"{symbol}-variant", gene_context=GeneDescriptor(value_id=f"HGNC:{symbol}", symbol=symbol)
                    )  # fmt: skip
                )
            )
        else:
            g.gene.CopyFrom(GeneDescriptor(value_id=f"HGNC:{symbol}", symbol=symbol))
        return g

    created = Timestamp()
    created.FromJsonString("2024-05-01T12:00:00Z")
    packet = Phenopacket(
        id=case["id"],
        subject=Individual(id=subject, sex="UNKNOWN_SEX"),
        phenotypic_features=[PhenotypicFeature(type=OntologyClass(id=t)) for t in case["observed"]]
        + [PhenotypicFeature(type=OntologyClass(id=t), excluded=True) for t in case.get("excluded", [])],
        interpretations=[
            Interpretation(
                id=f"{case['id']}-{n}",
                progress_status="SOLVED",
                diagnosis=Diagnosis(
                    disease=OntologyClass(id=disease), genomic_interpretations=[call(g) for g in case.get("genes", [])]
                ),
            )
            for n, disease in enumerate(case["diseases"])
        ],
        meta_data=MetaData(
            created=created,
            created_by="medkg tests",
            resources=[
                Resource(
                    id="hp",
                    name="human phenotype ontology",
                    namespace_prefix="HP",
                    url="http://purl.obolibrary.org/obo/hp.owl",
                    iri_prefix="http://purl.obolibrary.org/obo/HP_",
                )
            ],  # fmt: skip
            phenopacket_schema_version="2.0.2",
            external_references=[ExternalReference(id=p) for p in case.get("pmids", [])],
        ),
    )
    return MessageToDict(packet)
