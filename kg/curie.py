"""One normaliser for every source's spelling of an identifier: ``MIM:154700``, ``Orphanet:558``,
``Gene::4313``, ``DB00945``, OBO PURLs ... all become one CURIE (``OMIM:154700``, ``ORPHA:558``,
``NCBIGene:4313``, ``DRUGBANK:DB00945``), the form of every entity id in medkg.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kg.errors import InvalidInput

__all__ = ["CurieError", "normalize_curie", "try_normalize_curie", "curie_prefix", "source_url"]


class CurieError(InvalidInput):
    """An identifier that cannot be read as a CURIE."""


# Alternative prefix spellings (compared case-insensitively) -> canonical prefix.
_PREFIX_ALIASES: dict[str, str] = {
    "hp": "HP",
    "hpo": "HP",
    "omim": "OMIM",
    "mim": "OMIM",
    "omimps": "OMIMPS",
    "orpha": "ORPHA",
    "orphanet": "ORPHA",
    "ordo": "ORPHA",
    "doid": "DOID",
    "mondo": "MONDO",
    "decipher": "DECIPHER",
    "mesh": "MESH",
    "msh": "MESH",
    "umls": "UMLS",
    "umls_cui": "UMLS",
    "cui": "UMLS",
    "ncbigene": "NCBIGene",
    "entrezgene": "NCBIGene",
    "entrez": "NCBIGene",
    "geneid": "NCBIGene",
    "ncbi_gene": "NCBIGene",
    "drugbank": "DRUGBANK",
    "pmid": "PMID",
    "pubmed": "PMID",
    "hgnc": "HGNC",
    "ensembl": "ENSEMBL",
    "uniprotkb": "UniProtKB",
    "uniprot": "UniProtKB",
    "uberon": "UBERON",
    "go": "GO",
    "chebi": "CHEBI",
    "ncit": "NCIT",
    "nci": "NCIT",
    "efo": "EFO",
    "icd10cm": "ICD10CM",
    "icd10": "ICD10CM",
    "icd-10": "ICD10CM",
    "icd9cm": "ICD9CM",
    "icd9": "ICD9CM",
    "icd-9": "ICD9CM",
    "snomedct": "SNOMEDCT",
    "snomedct_us": "SNOMEDCT",
    "snomed": "SNOMEDCT",
    "sctid": "SNOMEDCT",
    "kegg": "KEGG",
    "meddra": "MEDDRA",
    "ndfrt": "NDFRT",
    "doi": "DOI",
}

# Hetionet's ``Kind::identifier`` spelling: the kind names the namespace of a bare identifier.
_HETIONET_KINDS: dict[str, str] = {
    "gene": "NCBIGene",
    "compound": "DRUGBANK",
    "symptom": "MESH",
    "side effect": "UMLS",
    "pharmacologic class": "NDFRT",
    "pathway": "PATHWAY",
}

# Prefixes whose local part is upper-cased (D008382, C0024796, DB00945).
_UPPER_LOCAL = {"MESH", "UMLS", "DRUGBANK", "NDFRT"}
# What their (upper-cased) local ids look like: DB00945 (DBSALT000123), D008382 / C535325 / Q000175,
# C0024796, N0000175503.
_UPPER_LOCAL_FORM = {
    "DRUGBANK": re.compile(r"^DB(?:SALT)?\d{5,6}$"),
    "MESH": re.compile(r"^[A-Z]\d{6,9}$"),
    "UMLS": re.compile(r"^C\d{7}$"),
    "NDFRT": re.compile(r"^N\d{10}$"),
}
# Prefixes whose local part is a plain number (leading '#', '%', '+', '*' and zero padding kept as given).
_NUMERIC_LOCAL = {"OMIM", "OMIMPS", "ORPHA", "NCBIGene", "PMID"}

_OBO_PURL = re.compile(r"^https?://purl\.obolibrary\.org/obo/([A-Za-z][A-Za-z0-9]*)_(\S+)$")
_ORDO_IRI = re.compile(r"^https?://www\.orpha\.net/ORDO/Orphanet_(\d+)$")
_BARE_DRUGBANK = re.compile(r"^DB\d{5}$", re.IGNORECASE)
_UNDERSCORE_FORM = re.compile(r"^(Orphanet|HP|DOID|MONDO|UBERON|GO|CHEBI)_(\S+)$", re.IGNORECASE)
_FRAGMENT = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
_PREFIX_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]*$")
# SNOMED CT with an edition or release in its prefix (UMLS, DO): SNOMED_CT, SNOMEDCT_US_2025_09_01,
# SNOMEDCT_2010_1_31: one code system, one prefix.
_SNOMED_PREFIX = re.compile(r"^snomed(?:[_-]?ct)?(?:_us)?(?:_\d{4}_\d{1,2}_\d{1,2})?$", re.IGNORECASE)
# Orphanet's own spellings of its number inside a local part: Orphanet_558, ORPHA558 (Orphanet:ORPHA558).
_ORPHA_LOCAL = re.compile(r"^(?:orphanet_|orpha)", re.IGNORECASE)


def curie_prefix(curie: str) -> str:
    """The canonical prefix of an already normalised CURIE (``HP`` for ``HP:0001250``)."""
    return curie.split(":", 1)[0]


def _canonical_prefix(prefix: str) -> str:
    alias = _PREFIX_ALIASES.get(prefix.lower())
    if alias:
        return alias
    if _SNOMED_PREFIX.match(prefix):
        return "SNOMEDCT"
    if not _PREFIX_RE.match(prefix):
        raise CurieError(f"invalid CURIE prefix {prefix!r}")
    return prefix.upper()


def _canonical_local(prefix: str, local: str, original: str) -> str:
    local = local.strip()
    if not local:
        raise CurieError(f"identifier {original!r} has an empty local part")
    if "|" in local:  # a list written into one field ("D001|D002"), and the relation key's separator
        raise CurieError(f"identifier {original!r} holds '|': one id per value")
    if prefix in _NUMERIC_LOCAL:
        digits = local.lstrip("#%+*^")
        if prefix == "ORPHA":
            digits = _ORPHA_LOCAL.sub("", digits)
        if not (digits.isascii() and digits.isdigit()):  # "１５４７００" (full-width) is not one of them
            raise CurieError(f"identifier {original!r}: {prefix} ids are numeric")
        return digits
    if prefix in _UPPER_LOCAL:
        if not _UPPER_LOCAL_FORM[prefix].match(local.upper()):
            raise CurieError(f"identifier {original!r} is not a {prefix} id")
        return local.upper()
    if any(ch.isspace() for ch in local):
        raise CurieError(f"identifier {original!r} contains white space")
    return local


def normalize_curie(value: str, default_prefix: str | None = None) -> str:
    """Return the canonical CURIE for ``value``.

    ``default_prefix`` applies to a bare local id (``"4313"`` with ``default_prefix="NCBIGene"``).
    Raises :class:`CurieError` with the offending value when it cannot be read.
    """
    if not isinstance(value, str):
        raise CurieError(f"identifier must be a string, got {type(value).__name__}")
    return _normalize(value, default_prefix)


# A load reads the same few ten thousand ids again and again (HPO: 2.8 million ends of edges, ~50,000 ids):
# the canonical forms are kept, 65,536 at most (~15 MB); a failure is not kept, it raises every time.
@lru_cache(maxsize=1 << 16)
def _normalize(value: str, default_prefix: str | None) -> str:
    original = value
    value = value.strip()
    if not value:
        raise CurieError("empty identifier")

    m = _OBO_PURL.match(value)
    if m:
        value = f"{m.group(1)}:{m.group(2)}"
    m = _ORDO_IRI.match(value)
    if m:
        return f"ORPHA:{m.group(1)}"

    # Hetionet: Kind::identifier (identifier may itself be a CURIE such as DOID:9352).
    if "::" in value:
        kind, _, rest = value.partition("::")
        kind_key = kind.strip().lower()
        rest = rest.strip()
        if not rest:
            raise CurieError(f"identifier {original!r} has nothing after '::'")
        if ":" in rest:
            return _normalize(rest, None)
        namespace = _HETIONET_KINDS.get(kind_key)
        if namespace is None:
            raise CurieError(f"identifier {original!r}: unknown kind {kind.strip()!r} for a bare id")
        return _normalize(f"{namespace}:{rest}", None)

    m = _UNDERSCORE_FORM.match(value)
    if m and ":" not in value:
        value = f"{m.group(1)}:{m.group(2)}"

    if ":" not in value:
        if _BARE_DRUGBANK.match(value):
            return f"DRUGBANK:{value.upper()}"
        if default_prefix:
            prefix = _canonical_prefix(default_prefix)
            return f"{prefix}:{_canonical_local(prefix, value, original)}"
        raise CurieError(f"identifier {original!r} has no prefix (expected PREFIX:local, e.g. HP:0001250)")

    prefix, _, local = value.partition(":")
    prefix = _canonical_prefix(prefix.strip())
    # A part of a document (a passage ``PMID:123#s4``): the fragment follows the canonical id.
    base, hashmark, fragment = local[1:].rpartition("#") if "#" in local[1:] else ("", "", "")
    if hashmark and _FRAGMENT.match(fragment):
        return f"{_normalize(f'{prefix}:{local[0]}{base}', None)}#{fragment}"
    if prefix == "OMIM" and local.strip().upper().startswith("PS"):  # OMIM phenotypic series, MIM:PS267700
        prefix, local = "OMIMPS", local.strip()[2:]
    # MeSH descriptors are sometimes written MESH:MESH:D0001 or MSH:D0001; strip a repeated prefix (as
    # often as it is repeated: a stored id must read back as itself).
    while ":" in local and _canonical_prefix(local.split(":", 1)[0]) == prefix:
        local = local.split(":", 1)[1]
    return f"{prefix}:{_canonical_local(prefix, local, original)}"


def try_normalize_curie(value: str, default_prefix: str | None = None) -> str | None:
    """Like :func:`normalize_curie` but returns ``None`` for what cannot be read."""
    try:
        return normalize_curie(value, default_prefix)
    except CurieError:
        return None


# Where a reader can check an identifier: the source's own page. ``{}`` is the local part.
_SOURCE_URLS: dict[str, str] = {
    "PMID": "https://pubmed.ncbi.nlm.nih.gov/{}/",
    "HP": "https://hpo.jax.org/browse/term/HP:{}",
    "OMIM": "https://omim.org/entry/{}",
    "ORPHA": "https://www.orpha.net/en/disease/detail/{}",
    "DECIPHER": "https://www.deciphergenomics.org/syndrome/{}",
    "DOID": "https://disease-ontology.org/?id=DOID:{}",
    "MONDO": "https://monarchinitiative.org/MONDO:{}",
    "MESH": "https://meshb.nlm.nih.gov/record/ui?ui={}",
    "DRUGBANK": "https://go.drugbank.com/drugs/{}",
    "NCBIGene": "https://www.ncbi.nlm.nih.gov/gene/{}",
    "UMLS": "https://uts.nlm.nih.gov/uts/umls/concept/{}",
    "UBERON": "http://purl.obolibrary.org/obo/UBERON_{}",
    "GO": "http://purl.obolibrary.org/obo/GO_{}",
    "CHEBI": "http://purl.obolibrary.org/obo/CHEBI_{}",
}


def source_url(curie: str) -> str | None:
    """The public page of an identifier (``PMID:123#s4`` -> its PubMed page), or None when unknown."""
    try:
        prefix, _, local = normalize_curie(curie).partition(":")
    except CurieError:
        return None
    template = _SOURCE_URLS.get(prefix)
    return template.format(local.split("#", 1)[0]) if template else None
