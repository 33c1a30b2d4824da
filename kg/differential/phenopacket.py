"""GA4GH Phenopackets v2 as differential cases: a phenopacket's observed and excluded phenotypic features, the
genes of its interpretations, and (for evaluation) its diagnoses and publications.

The JSON Schema is derived from the ``phenopackets`` package's protobuf descriptors, so it admits exactly the
documents the package's JSON parser takes (VRS variations aside: any object, not read), with what a
differential needs added: at least one phenotypic feature, each naming an HPO term. A document is checked
against it (an error names the field, e.g. ``phenopacket.phenotypicFeatures[2].type.id``) and then parsed by
the package.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from typing import TYPE_CHECKING, Any

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from phenopackets import Phenopacket

from kg.curie import normalize_curie
from kg.differential.patient import Patient
from kg.errors import InvalidInput

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

__all__ = [
    "HPO_TERM_PATTERN",
    "PHENOPACKET_FIELDS",
    "PhenopacketCase",
    "phenopacket_schema",
    "read_phenopacket",
    "read_phenopacket_file",
]

# An HPO term as a CURIE in any spelling medkg reads (HP:0001250, hp:0001250, HPO:0001250, HP_0001250, the OBO
# PURL; printable ASCII, no ':' or '|' after the prefix).
HPO_TERM_PATTERN = r"^[ \t\r\n]*(?:[Hh][Pp](?:[Oo]?:|_)|https?://purl\.obolibrary\.org/obo/HP_)[!-9;-{}~]+[ \t\r\n]*$"
PHENOPACKET_FIELDS = frozenset(f.json_name for f in Phenopacket.DESCRIPTOR.fields)
# interpretation statuses whose genes are candidates for the case (all but a gene ruled out)
_REJECTED = "REJECTED"
_SHOWN = 120
# VRS's variations (a variant's ``variationDescriptor.variation``): any object, neither checked nor parsed. medkg
# reads no variation, and their schema (seven-way oneofs nested in each other, a recursive VariationSet) makes
# JSON Schema generators (schemathesis) give up on the whole document.
_OPAQUE = frozenset({"org.ga4gh.vrs.v1.Variation"})
# 64-bit integers up to JSON's safe range (2**53 - 1): beyond it, a JSON number is not one integer to every reader
_SAFE_INTEGER = 2**53 - 1

_INT_RANGES = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_INT64: (-_SAFE_INTEGER, _SAFE_INTEGER),
    FieldDescriptor.TYPE_SINT64: (-_SAFE_INTEGER, _SAFE_INTEGER),
    FieldDescriptor.TYPE_SFIXED64: (-_SAFE_INTEGER, _SAFE_INTEGER),
    FieldDescriptor.TYPE_UINT64: (0, _SAFE_INTEGER),
    FieldDescriptor.TYPE_FIXED64: (0, _SAFE_INTEGER),
}
_FLOAT_MAX = 3.4028234663852886e38
# RFC 3339, which protobuf's Timestamp reads (the parser also checks the date against the calendar)
_TIMESTAMP = {"type": "string", "format": "date-time"}


def _scalar(field: FieldDescriptor) -> dict:
    if field.type in _INT_RANGES:
        low, high = _INT_RANGES[field.type]
        return {"type": "integer", "minimum": low, "maximum": high}
    if field.type == FieldDescriptor.TYPE_FLOAT:
        return {"type": "number", "minimum": -_FLOAT_MAX, "maximum": _FLOAT_MAX}
    if field.type == FieldDescriptor.TYPE_DOUBLE:
        return {"type": "number"}
    if field.type == FieldDescriptor.TYPE_BOOL:
        return {"type": "boolean"}
    if field.type == FieldDescriptor.TYPE_ENUM:
        return {"type": "string", "enum": [v.name for v in field.enum_type.values]}
    if field.type == FieldDescriptor.TYPE_BYTES:
        return {"type": "string", "contentEncoding": "base64", "pattern": r"^[A-Za-z0-9+/]*={0,2}$"}
    return {"type": "string"}


def _message(descriptor: Descriptor, ancestors: tuple[str, ...] = ()) -> dict:
    """The JSON Schema of a message in proto3's JSON mapping (lowerCamelCase names, enum names, at most one
    member of a oneof). A field of an ``_OPAQUE`` type is any object (``x-unread``: neither checked nor
    parsed); a message that contains itself is described one level deep."""
    if descriptor.full_name == "google.protobuf.Timestamp":
        return dict(_TIMESTAMP)
    ancestors = (*ancestors, descriptor.full_name)
    properties: dict[str, dict] = {}
    for field in descriptor.fields:
        kind = field.message_type
        if kind is not None and kind.full_name in ancestors:
            continue  # recursion: not described, so not accepted
        if kind is not None and kind.full_name in _OPAQUE:
            unread = {"type": "object", "x-unread": True}
            properties[field.json_name] = {"type": "array", "items": unread} if field.is_repeated else unread
            continue
        if kind is not None and kind.GetOptions().map_entry:
            value = kind.fields_by_name["value"]
            properties[field.json_name] = {"type": "object", "additionalProperties": _field(value, ancestors)}
            continue
        schema = _field(field, ancestors)
        properties[field.json_name] = {"type": "array", "items": schema} if field.is_repeated else schema
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    exclusive = [
        [f.json_name for f in oneof.fields if f.json_name in properties]
        for oneof in descriptor.oneofs
        if len(oneof.fields) > 1
    ]
    if exclusive:  # a oneof: at most one of its members
        schema["allOf"] = [
            {"not": {"anyOf": [{"required": list(pair)} for pair in combinations(names, 2)]}, "x-oneof": names}
            for names in exclusive
            if len(names) > 1
        ]
    return schema


def _field(field: FieldDescriptor, ancestors: tuple[str, ...]) -> dict:
    return _message(field.message_type, ancestors) if field.message_type is not None else _scalar(field)


def _parsed_part(data: Any, schema: dict) -> Any:
    """``data`` without its unread parts (``x-unread``), which the package's parser is not given."""
    if isinstance(data, dict) and "properties" in schema:
        fields = schema["properties"]
        return {k: _parsed_part(v, fields[k]) for k, v in data.items() if k in fields and not fields[k].get("x-unread")}
    if isinstance(data, list) and "items" in schema:
        return [_parsed_part(v, schema["items"]) for v in data]
    return data


@cache
def phenopacket_schema() -> dict:
    """The JSON Schema of a phenopacket a differential reads (its ``phenotypicFeatures`` required, non-empty,
    each with an HPO ``type``)."""
    schema = _message(Phenopacket.DESCRIPTOR)
    feature = schema["properties"]["phenotypicFeatures"]
    feature["minItems"] = 1
    item = feature["items"]
    item["required"] = ["type"]
    term = item["properties"]["type"]
    term["required"] = ["id"]
    term["properties"]["id"] = {"type": "string", "minLength": 4, "maxLength": 200, "pattern": HPO_TERM_PATTERN}
    schema["required"] = ["phenotypicFeatures"]
    schema["description"] = (
        "A GA4GH Phenopacket v2 (JSON, as phenopacket-store holds them): its phenotypic features are the "
        "observed and excluded terms, the genes of its interpretations (all but REJECTED) the candidate genes. "
        "Checked against the phenopackets package's schema, all but VRS variations (variationDescriptor."
        "variation: any object, not read)."
    )
    return schema


@dataclass(frozen=True)
class PhenopacketCase:
    """What a differential and its evaluation read from a phenopacket."""

    id: str
    observed: list[str]
    excluded: list[str]
    genes: list[str]
    diseases: list[str]  # the diagnoses: interpretations' diseases, then diseases not excluded
    pmids: list[str]
    sex: str | None = None  # the subject's: "male" | "female" (None: unknown or other)
    age_years: float | None = None  # the subject's age at the last encounter (an ISO 8601 duration)

    @property
    def patient(self) -> Patient:
        return Patient(self.sex, self.age_years)


def _where(path: list[str | int], root: str) -> str:
    out = root
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


@cache
def _validator() -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(phenopacket_schema())


def _schema_error(data: object, root: str) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
    if error is None:
        return None
    where = _where(list(error.absolute_path), root)
    if error.validator == "not" and "x-oneof" in error.schema:
        return f"{where}: give at most one of {', '.join(error.schema['x-oneof'])}"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unexpected = sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        return f"{where}: no field {', '.join(unexpected)} in a phenopacket here (fields: {', '.join(allowed)})"
    path = list(error.absolute_path)
    if error.validator in ("pattern", "minLength", "maxLength") and path[-2:] == ["type", "id"]:
        return f"{where}: {_shown(error.instance)} is not an HPO term (HP:0001250)"
    if error.validator == "minItems" and path == ["phenotypicFeatures"]:
        return f"{where}: a phenopacket without phenotypic features gives nothing to rank"
    text = error.message if len(error.message) <= 2 * _SHOWN else f"{_shown(error.instance)} fails {error.validator!r}"
    return f"{where}: {text}"


def _parse_error(text: str, root: str) -> str:
    """protobuf's "Failed to parse a field: Failed to parse b field: why at Phenopacket.a.b." as
    "phenopacket.a.b: why"."""
    text = re.sub(r"\s*Available Fields.*", "", text, flags=re.S)
    found = re.fullmatch(r"(?:Failed to parse \w+ field: )*(.*?)\s+at Phenopacket((?:[.\w\[\]])*?)\.*", text, re.S)
    return f"{root}{found[2]}: {found[1]}" if found else f"{root}: {text}"


def read_phenopacket(data: object, root: str = "phenopacket") -> PhenopacketCase:
    """The case in ``data`` (a phenopacket as parsed JSON); ``InvalidInput`` naming the field (under ``root``)
    for a document that is not a phenopacket with phenotypic features."""
    if not isinstance(data, dict):
        raise InvalidInput(f"{root}: a phenopacket is a JSON object, not {type(data).__name__}")
    problem = _schema_error(data, root)
    if problem:
        raise InvalidInput(problem)
    message = Phenopacket()
    try:
        json_format.ParseDict(_parsed_part(data, phenopacket_schema()), message)
    except json_format.ParseError as exc:  # what the schema cannot say: a date that is not in the calendar
        raise InvalidInput(_parse_error(str(exc), root)) from None
    return _case(message)


def read_phenopacket_file(path: Path) -> PhenopacketCase:
    """The case of a phenopacket JSON file; ``InvalidInput`` naming the file (and the field) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"{path}: not a JSON phenopacket ({exc})") from None
    try:
        return read_phenopacket(data)
    except InvalidInput as exc:
        raise InvalidInput(f"{path}: {exc}") from None


def _case(p: Phenopacket) -> PhenopacketCase:
    observed, excluded = [], []
    for feature in p.phenotypic_features:
        (excluded if feature.excluded else observed).append(normalize_curie(feature.type.id))
    genes, diagnoses = [], []
    for interpretation in p.interpretations:
        diagnosis = interpretation.diagnosis
        if diagnosis.disease.id:
            diagnoses.append(diagnosis.disease.id)
        for genomic in diagnosis.genomic_interpretations:
            status = genomic.DESCRIPTOR.fields_by_name["interpretation_status"].enum_type
            if status.values_by_number[genomic.interpretation_status].name == _REJECTED:
                continue
            which = genomic.WhichOneof("call")
            if which == "gene":
                symbol = genomic.gene.symbol
            elif which == "variant_interpretation":
                symbol = genomic.variant_interpretation.variation_descriptor.gene_context.symbol
            else:
                symbol = ""
            if symbol.strip():
                genes.append(symbol.strip())
    diagnoses += [d.term.id for d in p.diseases if d.term.id and not d.excluded]
    pmids = [r.id for r in p.meta_data.external_references if r.id.upper().startswith("PMID:")]
    return PhenopacketCase(
        id=p.id,
        observed=_unique(observed),
        excluded=_unique(t for t in excluded if t not in observed),
        genes=_unique(genes),
        diseases=_unique(diagnoses),
        pmids=_unique(pmids),
        sex={"MALE": "male", "FEMALE": "female"}.get(
            p.subject.DESCRIPTOR.fields_by_name["sex"].enum_type.values_by_number[p.subject.sex].name
        ),
        age_years=_years(p.subject.time_at_last_encounter.age.iso8601duration),
    )


_DURATION = re.compile(r"^P(?:(\d+(?:\.\d+)?)Y)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)W)?(?:(\d+(?:\.\d+)?)D)?$")


def _years(duration: str) -> float | None:
    """An ISO 8601 duration of years, months, weeks and days ("P3Y6M") in years; None for none or another."""
    m = _DURATION.match(duration.strip().upper()) if duration.strip() else None
    if not m or not any(m.groups()):
        return None
    y, mo, w, d = (float(g) if g else 0.0 for g in m.groups())
    return y + mo / 12 + w * 7 / 365.25 + d / 365.25


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))
