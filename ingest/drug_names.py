"""The names people use for the graph's drugs ("aspirin", "Tylenol", "paracetamol", "Lipitor"), which
PharmacotherapyDB and Hetionet do not carry (they name a drug once, by its DrugBank name: "Acetylsalicylic
acid"). They come from the dictionary inside the ``drug-named-entity-recognition`` wheel (Fast Data
Science, MIT: DrugBank's open vocabulary with MeSH, MedlinePlus, NHS and Wikipedia names, keyed by
DrugBank id) and are added as synonyms to the entities of the graph that carry that DrugBank id. Names
only: a drug the graph does not know stays unknown to it. (The dictionary's MeSH ids are not taken: some
name a drug's class, D018931 "Antineoplastic Agents, Hormonal" for both goserelin and octreotide, and
would join different drugs by ``SAME_AS``.)

The dictionary's Wikipedia-scraped part has noise ("ears and nose", "plan b", "publisher=...", "5-fu");
:func:`usable_name` keeps a name only if it reads as a drug name.
"""

from __future__ import annotations

import bz2
import pickle
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from pathlib import Path

from ingest.writer import Item
from kg.graph.base import BaseGraphStore
from kg.model import Entity, name_key
from kg.unknown_names import COMMON_ZIPF, zipf

__all__ = ["DrugNames", "drug_name_items", "load_dictionary", "usable_name"]

PACKAGE = "drug_named_entity_recognition"
DICTIONARY = "drug_ner_dictionary.pkl.bz2"
#: a name of several words made of everyday words alone is a phrase, not a drug ("ears and nose",
#: "plan b", "little noses"); "goserelin acetate" has a rarer word
EVERYDAY_WORD_ZIPF = 3.0
_CHARACTERS = re.compile(r"^[a-z0-9][a-z0-9 '-]*$")
_LETTER_RUN = re.compile(r"[a-z]{4,}")
_WORD = re.compile(r"[a-z]+|\d+")


@dataclass(frozen=True)
class DrugNames:
    """The dictionary's names by DrugBank id (``DRUGBANK:DB00945``)."""

    names: dict[str, list[str]]
    release: str


def usable_name(name: str) -> bool:
    """Whether a name of the dictionary reads as a drug name: plain characters (no markup, no
    "c/t/s"), not MeSH's inverted form ("acetate, goserelin"), a run of four letters (not a code:
    "5-fu", "vp-16"), no everyday English word ("today") and no phrase of everyday words alone ("plan
    b"; a vitamin's name is one: "vitamin d")."""
    if not _CHARACTERS.match(name) or not _LETTER_RUN.search(name):
        return False
    words = _WORD.findall(name)
    if len(words) == 1:
        return zipf(name) < COMMON_ZIPF  # an everyday word is no drug's only name
    if words[0] == "vitamin":
        return True
    return any(len(w) > 1 and not w.isdigit() and zipf(w) < EVERYDAY_WORD_ZIPF for w in words)


@cache
def load_dictionary() -> DrugNames:
    """The wheel's dictionary: every usable name of a drug with a DrugBank id, the names that the
    dictionary gives to two drugs left out (read once a process: 2-3 s)."""
    with bz2.open(Path(str(resources.files(PACKAGE) / DICTIONARY)), "rb") as f:
        data = pickle.load(f)  # noqa: S301 - the installed wheel's own data file, not user input
    canonical = data["drug_canonical_to_data"]
    names: dict[str, list[str]] = defaultdict(list)
    for name, targets in data["drug_variant_to_canonical"].items():
        if len(set(targets)) != 1 or not usable_name(name):
            continue
        record = canonical.get(targets[0]) or {}
        if not (drugbank := record.get("drugbank_id")):
            continue
        names[f"DRUGBANK:{drugbank}"].append(name)
    return DrugNames(dict(names), f"{PACKAGE.replace('_', '-')}:{metadata.version(PACKAGE)}")


def _named(store: BaseGraphStore, keys: set[str], page: int = 20_000) -> dict[str, list[Entity]]:
    """The entities of the graph whose name or a synonym has one of ``keys`` (``name_key``), by key: one
    scan of the graph, which costs what some 200 lookups by name do."""
    found: dict[str, list[Entity]] = defaultdict(list)
    after = ""
    while batch := store.scan_entities(after, page):
        for entity in batch:
            for key in {name_key(entity.name), *(name_key(s) for s in entity.synonyms)} & keys:
                found[key].append(entity)
        after = batch[-1].id
    return found


def drug_name_items(store: BaseGraphStore) -> Iterator[Item]:
    """Synonyms for the graph's entities with a DrugBank id; a name that already names
    another entity of the graph (other than a MeSH heading) is left out, and counted."""
    dictionary = load_dictionary()
    stored = store.get_entities(dictionary.names)
    yield ("drugs of the dictionary", len(dictionary.names))
    yield ("of them in the graph", len(stored))
    named = _named(store, {name_key(n) for drug_id in stored for n in dictionary.names[drug_id]})
    for drug_id in sorted(stored):
        entity = stored[drug_id]
        known = {name_key(entity.name), *(name_key(s) for s in entity.synonyms)}
        added: list[str] = []
        for name in dictionary.names[drug_id]:
            if name_key(name) in known:
                continue
            # a MeSH heading (category Concept) named so is this drug's or names a class of drugs
            if any(e.id != drug_id and e.category != "Concept" for e in named.get(name_key(name), ())):
                yield ("names left out: another entity's name", 1)
                continue
            added.append(name)
        if added:
            yield ("drugs named", 1)
            yield ("names added", len(added))
            yield Entity(
                id=drug_id,
                name=entity.name,
                category=entity.category,
                synonyms=added,
                sources=[dictionary.release],
            )
