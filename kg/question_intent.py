"""What a question asks for, read as the graph's relation types: "what medicine helps X" asks for the
``TREATS`` and ``PALLIATES`` edges of X, "features of X" for its ``HAS_PHENOTYPE`` edges, "is X inherited"
for ``HAS_INHERITANCE``, "at what age does X start" for ``HAS_CLINICAL_COURSE``, "which gene" for
``ASSOCIATED_WITH`` a gene, "mentioned together with" for
``CO_MENTIONED``. Facts of an asked type answer the question; the others only inform it. Also whether a
question asks what/which/how (a co-mention in the literature never answers that on its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["Asked", "asked_relations", "asks_what"]


@dataclass(frozen=True)
class Asked:
    """A relation type a question asks for, the category the other end must have, and which end the
    entity the question names must be (None: any; "features of asthma" asks for asthma's phenotypes,
    not for the diseases that have asthma as one)."""

    type: str
    other: str | None = None
    named_is: Literal["subject", "object"] | None = None


_INTENTS: tuple[tuple[tuple[Asked, ...], re.Pattern[str]], ...] = tuple(
    (asked, re.compile(pattern, re.IGNORECASE))
    for asked, pattern in (
        (
            (Asked("TREATS"), Asked("PALLIATES")),
            r"\b(treat\w*|therap\w*|drugs?|medications?|medicines?|meds|pills?|tablets?|remed(y|ies)|cur(e|es|ed)"
            r"|helps?(?! (to )?(tell|diagnos\w*|detect\w*|predict\w*|distinguish\w*|differentiat\w*|identif\w*))"
            r"|manag(e|ed|ement)|prescri\w*|first[- ]line|us(e|ed|es) (for|in|on|to treat)|indicat(ed|ions?)"
            r"|(give|gives|given|gave)(?! rise)( \w+)? (for|to|in)|relie(f|ve)|eas(e|es|ing)|get rid of"
            r"|(what|which|anything)( \w+){0,2} (stop|stops|calm|calms|control|controls)"
            r"|(can|should|do|could|does|did) (i|you|we|he|she|they|people|patients|my \w+) (take|put on|apply)"
            r"|(what('s| is) there|is there anything) for)\b",
        ),
        (
            (Asked("HAS_PHENOTYPE", named_is="subject"), Asked("HAS_SYMPTOM", named_is="subject")),
            r"\b(features?|symptoms?|signs?|phenotypes?|manifestations?|presentation|characteristics?"
            r"|clinical (picture|findings?)|findings?|what does .{1,40} look like)\b",
        ),
        (  # the diseases that have a feature: the named feature is the object
            (Asked("HAS_PHENOTYPE", named_is="object"), Asked("HAS_SYMPTOM", named_is="object")),
            r"\b(which|what)( \w+){0,2} (diseases?|disorders?|syndromes?|conditions?)\b",
        ),
        (
            (Asked("HAS_INHERITANCE"),),
            r"\b(inherit\w*|hereditary|heritable|passed (down|on)|runs? in (the )?famil\w*|mode of transmission"
            r"|[xy][- ]linked|autosomal)\b|\b(dominant|recessive)( (or|and) (dominant|recessive))?\W*$",
        ),
        (  # onset and course: HPO's clinical course annotations ("Childhood onset", "Slowly progressive")
            (Asked("HAS_CLINICAL_COURSE", named_is="subject"),),
            r"\b(onset|at what age|what age|how old|age (at|of) (onset|diagnosis|presentation)"
            r"|when (does|do|did|is|are|will) .{1,60}? (start|begin|appear|present|manifest|develop|show)\w*"
            r"|clinical course|(how|does|do) .{1,60}? progress\w*|natural history)\b",
        ),
        ((Asked("ASSOCIATED_WITH", "Gene"),), r"\b(genes?|genetic (cause|basis)|mutat\w*|variants? in)\b"),
        # "to tell X from other kinds of stroke" compares; it asks for no subtypes
        (
            (Asked("IS_A"),),
            r"\b(?<!from other )(?<!than other )(?<!to other )(types? of|kinds? of|subtypes?|forms? of|classif\w*)\b",
        ),
        ((Asked("CO_MENTIONED"),), r"\b(co-?mention\w*|mentioned (together )?(with|alongside)|mentioned together)\b"),
    )
)
_WHAT = re.compile(r"\b(what|which|how|list|name)\b", re.IGNORECASE)


def asked_relations(question: str) -> tuple[Asked, ...]:
    """The relation types ``question`` asks for (none: it asks for nothing the graph states as an edge,
    "what dietary factors increase the risk of X", and the literature answers it)."""
    return tuple(a for asked, pattern in _INTENTS if pattern.search(question) for a in asked)


def asks_what(question: str) -> bool:
    """Whether ``question`` asks what, which or how (not a yes/no question)."""
    return _WHAT.search(question) is not None
