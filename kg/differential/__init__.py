"""Phenotype-driven differential diagnosis: rank diseases by how well their HPO annotations explain a
patient's observed terms (and agree with the excluded ones); the model is described in
docs/differential.md. One concern a module; the public names are re-exported here."""

from kg.differential.cache import PhenotypeCache, phenotype_stamp
from kg.differential.case import (
    DISEASE_PREFIXES,
    NOT_PHENOTYPIC,
    PHENOTYPIC_ABNORMALITY,
    Candidate,
    CaseTerms,
    disease_namespaces,
    terms_in_text,
    terms_mentioned,
)
from kg.differential.frequencies import (
    DEFAULT_FREQUENCY,
    PRIOR_STRENGTH,
    Frequency,
    LRParams,
    frequency_evidence,
    frequency_weight,
)
from kg.differential.index import ASSOCIATED_WITH, HAS_PHENOTYPE, IS_A, OTHER_ASPECTS, REPLACED_BY, PhenotypeIndex

__all__ = [
    "ASSOCIATED_WITH",
    "DEFAULT_FREQUENCY",
    "DISEASE_PREFIXES",
    "HAS_PHENOTYPE",
    "IS_A",
    "NOT_PHENOTYPIC",
    "OTHER_ASPECTS",
    "PHENOTYPIC_ABNORMALITY",
    "PRIOR_STRENGTH",
    "REPLACED_BY",
    "Candidate",
    "CaseTerms",
    "Frequency",
    "LRParams",
    "PhenotypeCache",
    "PhenotypeIndex",
    "disease_namespaces",
    "frequency_evidence",
    "frequency_weight",
    "phenotype_stamp",
    "terms_in_text",
    "terms_mentioned",
]
