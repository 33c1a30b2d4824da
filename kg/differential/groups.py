"""A ranking as a clinician reads it: the ranked diseases that are one disease, or subtypes of one,
gathered into one entry. OMIM describes a genetically heterogeneous disease as numbered subtypes
("Cardiomyopathy, dilated, 1A" ... "1KK") that the phenotypes alone cannot tell apart, and Orphanet
describes many a disease again; the graph maps them to each other and to the Disease Ontology class they
are subtypes of (``SAME_AS``, from the ontology's cross-references). An entry is led by its best-ranked
disease and keeps every member's own rank (docs/differential.md#entries)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kg.differential.case import Candidate
from kg.graph.base import BaseGraphStore
from kg.model import SAME_AS

__all__ = ["ENTRIES", "ENTRY_DEPTH", "DifferentialEntry", "disease_classes", "group_ranked"]

ENTRIES, ENTRY_DEPTH = 5, 50  # what an answer lists: five entries of the diseases ranked among the first 50


@dataclass
class DifferentialEntry:
    """One entry of a differential: ranked diseases, best first, each with its own 1-based rank, and
    the class that unites them (the Disease Ontology class they all map to, or, for one disease described
    twice, by name or cross-reference, the first's own id); ``None`` for an entry of one disease."""

    members: list[tuple[int, Candidate]] = field(default_factory=list)
    group: str | None = None
    shared: frozenset[str] = frozenset()  # what the members all map to (the entry's candidates for ``group``)

    @property
    def lead(self) -> Candidate:
        return self.members[0][1]


_NAME = "name:"  # a key of a disease's name ("name:rett syndrome"), beside the ids it is mapped to


def disease_classes(store: BaseGraphStore, diseases: Iterable[str]) -> dict[str, frozenset[str]]:
    """Each disease with what the graph says it is: itself, its ``SAME_AS`` neighbours (the same disease
    in another vocabulary, the Disease Ontology classes that cross-reference it) and its name (OMIM and
    Orphanet name many a disease alike, "Rett syndrome", where no cross-reference joins them)."""
    ids = list(dict.fromkeys(diseases))
    out: dict[str, set[str]] = {d: {d} for d in ids}
    for disease, entity in store.get_entities(ids).items():
        if name := " ".join(entity.name.casefold().split()):
            out[disease].add(_NAME + name)
    for disease, _rel, other in store.edge_rows(ids, [SAME_AS], direction="both"):
        out[disease].add(other["id"])
    return {d: frozenset(keys) for d, keys in out.items()}


def group_ranked(
    ranked: Sequence[Candidate], classes: Mapping[str, frozenset[str]], entries: int
) -> list[DifferentialEntry]:
    """The first ``entries`` entries of ``ranked`` (best first): a disease joins the first entry whose
    members all share one of its classes with it (the entry keeps what they all share), else opens the
    next entry while there is room. Every member keeps its rank; a disease the graph maps to nothing
    else is an entry of its own."""
    out: list[DifferentialEntry] = []
    for rank, candidate in enumerate(ranked, 1):
        keys = classes.get(candidate.disease, frozenset({candidate.disease}))
        entry = next((e for e in out if e.shared & keys), None)
        if entry is not None:
            entry.shared &= keys
            entry.members.append((rank, candidate))
        elif len(out) < entries:
            out.append(DifferentialEntry(members=[(rank, candidate)], shared=keys))
    for entry in out:
        if len(entry.members) > 1:
            lead = entry.lead.disease
            # a class of its own beside the members (a Disease Ontology class), else the first member
            members = {d.disease for _, d in entry.members}
            others = sorted(k for k in entry.shared - members if not k.startswith(_NAME))
            entry.group = others[0] if others else lead
    return out
