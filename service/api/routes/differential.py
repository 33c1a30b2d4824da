"""Phenotype-driven differential diagnosis over HTTP."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, RootModel, field_validator, model_validator

from kg.curie import normalize_curie
from kg.differential import disease_namespaces, terms_in_text, terms_mentioned
from kg.differential.patient import Patient, first_known, read_patient
from kg.differential.phenopacket import (
    HPO_TERM_PATTERN,
    PHENOPACKET_FIELDS,
    PhenopacketCase,
    phenopacket_schema,
    read_phenopacket,
)
from service.api.deps import get_container
from service.container import Container

router = APIRouter(prefix="/v1", tags=["differential"])
Deps = Annotated[Container, Depends(get_container)]


# An HPO term in any spelling medkg reads: the schema says so, and a term in that form that the graph does not
# know is an answer (unknown_terms).
HpoTerm = Annotated[str, Field(min_length=4, max_length=200, json_schema_extra={"pattern": HPO_TERM_PATTERN})]


def _any_case(word: str) -> str:
    return "".join(f"[{ch.upper()}{ch.lower()}]" for ch in word)


# The disease namespaces a ranking can be restricted to, in every spelling kg.differential reads (which checks
# them, naming one it does not know).
_NAMESPACE_WORDS = ("omim", "mim", "orphanet", "orpha", "ordo", "decipher")
NAMESPACE_PATTERN = rf"^[ \t\r\n]*(?:{'|'.join(_any_case(w) for w in _NAMESPACE_WORDS)}):?[ \t\r\n]*$"


def _phenopacket_json_schema(schema: dict[str, Any]) -> None:
    schema.clear()
    schema.update(phenopacket_schema())
    schema["title"] = "Phenopacket"


class Phenopacket(RootModel[dict[str, Any]]):
    """A GA4GH Phenopacket v2, checked against the ``phenopackets`` package's schema."""

    model_config = ConfigDict(json_schema_extra=_phenopacket_json_schema)


class DifferentialRequest(BaseModel):
    # a case states at least one observed phenotype: as HPO terms, in text, or in a phenopacket
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["terms"], "properties": {"terms": {"minItems": 1}}},
                {"required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}},
                {"required": ["phenopacket"], "properties": {"phenopacket": {"type": "object"}}},
            ]
        }
    )

    terms: list[HpoTerm] = Field(default_factory=list, max_length=200, description="Observed HPO terms.")
    text: str | None = Field(
        default=None,
        max_length=5000,
        description='Free text, linked to HPO terms; a negated one ("no hypotonia", "seizures were absent") '
        "counts as excluded.",
    )
    excluded: list[HpoTerm] = Field(default_factory=list, max_length=500, description="HPO terms ruled out.")
    top_k: int = Field(default=10, ge=1, le=500)
    namespaces: list[Annotated[str, Field(max_length=20, json_schema_extra={"pattern": NAMESPACE_PATTERN})]] = Field(
        default_factory=list,
        max_length=5,
        description="Rank only these disease namespaces: OMIM, ORPHA or DECIPHER (any case; MIM, Orphanet and "
        "ORDO read as OMIM and ORPHA).",
    )
    genes: list[Annotated[str, Field(min_length=1, max_length=40)]] = Field(
        default_factory=list,
        max_length=100,
        description="Candidate genes (HGNC symbols, e.g. those a sequencing test found variants in): rank only "
        "the diseases associated with them.",
    )

    sex: Literal["male", "female"] | None = Field(
        default=None,
        description="The patient's sex: weighs each disease's mode of inheritance (an X-linked recessive disease "
        "is seen mostly in males). Else read from the text (a boy, she) or the phenopacket's subject.",
    )
    age_years: float | None = Field(
        default=None,
        ge=0,
        le=130,
        strict=True,  # a number: false is no age of 0
        description="The patient's age in years: a disease whose every annotated onset is later weighs less. Else "
        "read from the text (a 3-year-old) or the phenopacket's subject (its age at the last encounter).",
    )
    phenopacket: Phenopacket | None = Field(
        default=None,
        description="A GA4GH Phenopacket v2: its observed and excluded phenotypic features are added to terms and "
        "excluded, the genes of its interpretations (all but REJECTED) to genes, its subject's sex and age "
        "to sex and age_years. The whole body may be the phenopacket instead.",
    )
    _case: PhenopacketCase | None = PrivateAttr(default=None)

    @model_validator(mode="before")
    @classmethod
    def _whole_body_phenopacket(cls, data: Any) -> Any:
        # a body with none of this request's fields and some of a phenopacket's is a phenopacket
        if isinstance(data, dict) and not data.keys() & cls.model_fields.keys() and data.keys() & PHENOPACKET_FIELDS:
            return {"phenopacket": data}
        return data

    @field_validator("terms", "excluded")
    @classmethod
    def _curies(cls, values: list[str]) -> list[str]:
        for value in values:  # the schema's pattern, with a message that says what is wrong
            if not re.match(HPO_TERM_PATTERN, value):
                raise ValueError(f"{value!r} is not an HPO term (HP:0001250)")
        return [normalize_curie(v) for v in values]

    @model_validator(mode="after")
    def _states_a_phenotype(self) -> DifferentialRequest:
        if self.phenopacket is not None:
            self._case = read_phenopacket(self.phenopacket.root)  # InvalidInput naming the field
        if not self.terms and not self.text and self._case is None:
            raise ValueError("give observed HPO terms (terms), a description (text) or a phenopacket")
        return self

    @property
    def all_terms(self) -> list[str]:
        return list(dict.fromkeys([*self.terms, *(self._case.observed if self._case else [])]))

    @property
    def all_excluded(self) -> list[str]:
        return list(dict.fromkeys([*self.excluded, *(self._case.excluded if self._case else [])]))

    @property
    def all_genes(self) -> list[str]:
        return list(dict.fromkeys([*self.genes, *(self._case.genes if self._case else [])]))

    @property
    def patient(self) -> Patient:
        """The sex and age given, else those of the phenopacket's subject, else those the text states."""
        case = self._case.patient if self._case else None
        return first_known(Patient(self.sex, self.age_years), case, read_patient(self.text or ""))


class Match(BaseModel):
    observed: str
    disease_term: str
    similarity: float


class SemanticMatch(BaseModel):
    observed: str
    disease_term: str = Field(description="The disease's annotation closest to the observed term in meaning.")
    cosine: float = Field(description="Cosine of the two terms' embeddings (name, definition, synonyms).")


class TermLR(BaseModel):
    term: str
    status: str = Field(
        description="observed, excluded (a term the disease has at least very frequently), sex (term: the "
        "disease's X- or Y-linked mode of inheritance) or age (term: its earliest onset, later than the patient's age)"
    )
    lr: float = Field(description="Likelihood ratio of the term (or of the patient's sex or age) for this disease.")


class PatientOut(BaseModel):
    sex: str | None = Field(description="male, female, or null when neither was given nor read.")
    age_years: float | None


class DiseaseOut(BaseModel):
    disease: str
    name: str | None
    score: float = Field(
        description="The sum of the views (the response's `views`: log LR, Resnik, embedding), each standardised "
        "over the diseases ranked."
    )
    baseline: float = Field(description="Resnik best-match average, both directions.")
    log10_lr: float = Field(description="log10 of the phenotype likelihood ratio of the case.")
    matches: list[Match]
    embedding: float | None = Field(
        default=None,
        description="The embedding view: the mean over the observed terms of the cosine to the disease's closest "
        "annotation in meaning (null when the index has no term vectors).",
    )
    semantic_matches: list[SemanticMatch] = Field(
        default_factory=list, description="Each observed term with the disease's closest annotation in meaning."
    )
    contradictions: list[str]
    genes: list[str]
    pmids: list[str]
    likelihood_ratios: list[TermLR] = Field(
        description="Each observed term's LR, and each excluded term's for a disease that has it at least very "
        "frequently. Their product times 1/(1 - background frequency) of every other excluded term (the same "
        "factor for every disease without it, so not listed) is 10**log10_lr."
    )


class DifferentialResponse(BaseModel):
    observed: list[str]
    from_text: list[str] = Field(description="The HPO terms the text states (observed).")
    excluded_from_text: list[str] = Field(
        default_factory=list, description='The HPO terms the text negates (excluded: "no hypotonia").'
    )
    unknown_terms: list[str] = Field(description="Observed or excluded terms the graph does not know: ignored.")
    replaced_terms: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Obsolete HPO terms given, each with the current terms it was counted as (its replacement; "
        "for an observed term without one, its last parents).",
    )
    excluded: list[str] = Field(description="The excluded terms counted (an obsolete one as its replacement).")
    ignored_terms: dict[str, str] = Field(
        default_factory=dict,
        description="Known terms given that the ranking does not count, each with why: a mode of inheritance, onset or "
        "course (no phenotypic abnormality), or an excluded term that an observed one is or implies.",
    )
    patient: PatientOut = Field(
        default_factory=lambda: PatientOut(sex=None, age_years=None),
        description="The patient's sex and age the ranking weighed (given, from the phenopacket, or read from "
        "the text).",
    )
    genes: list[str] = Field(default_factory=list, description="The candidate genes the ranking was restricted to.")
    unknown_genes: list[str] = Field(
        default_factory=list, description="Candidate genes given that no disease in the graph is associated with."
    )
    views: list[str] = Field(
        default_factory=list,
        description="What each score adds up, each standardised over the diseases ranked: likelihood_ratio, "
        "resnik, and embedding (the terms' meaning, when the index holds term vectors).",
    )
    diseases: list[DiseaseOut]
    reason: str | None = Field(
        default=None,
        description="Why no disease is ranked, when the case gives nothing to rank by: no observed term the graph "
        "knows as a phenotypic abnormality, or only candidate genes no disease is associated with.",
    )
    term_names: dict[str, str] = Field(
        default_factory=dict, description="The name of every HPO term in the answer (observed, excluded, matched)."
    )


def describe_body(openapi: dict[str, Any]) -> None:
    """The body is a DifferentialRequest or, whole, a phenopacket: what the OpenAPI document says (a route's
    ``openapi_extra`` can only add to the request model's ``$ref``, not replace it)."""
    body = openapi["paths"]["/v1/differential"]["post"]["requestBody"]["content"]["application/json"]
    body["schema"] = {
        "anyOf": [{"$ref": "#/components/schemas/DifferentialRequest"}, {"$ref": "#/components/schemas/Phenopacket"}]
    }


@router.post("/differential", response_model=DifferentialResponse)
def differential(c: Deps, request: DifferentialRequest) -> DifferentialResponse:
    namespaces = disease_namespaces(request.namespaces)  # InvalidInput (422) for one outside them
    from_text, excluded_from_text = terms_in_text(c.linker, request.text) if request.text else ([], [])
    given_excluded = list(dict.fromkeys([*request.all_excluded, *excluded_from_text]))
    index = c.phenotype_index
    case = index.read_case([*request.all_terms, *from_text], given_excluded)
    known, excluded = case.observed, case.excluded
    genes, unknown_genes = index.known_genes(request.all_genes)
    # A well-formed case with nothing to rank by is answered, not refused: no diseases, and why.
    reason = None
    if not known:
        why = f" ({'; '.join(f'{t}: {w}' for t, w in case.ignored.items())})" if case.ignored else ""
        reason = (
            f"no observed HPO term that the graph knows is a phenotypic abnormality{why}: give terms (HP:...) or text"
        )
    elif unknown_genes and not genes:
        reason = f"no disease in the graph is associated with {', '.join(unknown_genes)}"
    patient = request.patient
    ranked = (
        []
        if reason
        else index.rank(known, excluded, top_k=request.top_k, prefixes=namespaces, genes=genes, patient=patient)
    )
    terms = terms_mentioned(ranked, known, excluded)
    names = c.graph.get_entities([*(r.disease for r in ranked), *terms])
    return DifferentialResponse(
        observed=known,
        from_text=from_text,
        excluded_from_text=excluded_from_text,
        unknown_terms=case.unknown,
        ignored_terms=case.ignored,
        replaced_terms={
            **index.replacements([*request.all_terms, *from_text]),
            **index.replacements(given_excluded, broaden=False),
        },
        excluded=excluded,
        reason=reason,
        patient=PatientOut(sex=patient.sex, age_years=patient.age_years),
        genes=genes,
        unknown_genes=unknown_genes,
        views=index.views(),
        diseases=[
            DiseaseOut(
                disease=r.disease,
                name=names[r.disease].name if r.disease in names else None,
                score=r.score,
                baseline=r.baseline,
                log10_lr=r.log10_lr,
                matches=[Match(observed=q, disease_term=t, similarity=s) for q, t, s in r.matches],
                embedding=r.embedding,
                semantic_matches=[
                    SemanticMatch(observed=q, disease_term=t, cosine=s) for q, t, s in r.semantic_matches
                ],
                contradictions=r.contradictions,
                genes=r.genes,
                pmids=r.pmids,
                likelihood_ratios=[TermLR(term=t, status=st, lr=lr) for t, st, lr in r.likelihood_ratios],
            )
            for r in ranked
        ],
        term_names={t: names[t].name for t in terms if t in names and names[t].name},
    )
