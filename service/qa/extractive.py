"""The offline answer path: an extractive composer that states the best-supported knowledge-graph facts
and quotes the best-supported literature sentences, every sentence cited, writing nothing of its own
beyond joining facts; it abstains when nothing in the evidence reaches the support floor.

What answers comes first: the facts of the relation types the question asks for, then the literature's
sentences, then facts that only inform (never alone when the question asks for a relation: "which genes"
is not answered by a subtype); a co-mention in the literature is stated only when nothing else is, and
never answers a what/which/how question on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import bm25s
import Stemmer

from kg.model import CO_MENTIONED
from kg.question_intent import asked_relations, asks_what
from kg.retrieval.evidence import EvidenceBundle, EvidenceItem
from kg.retrieval.facts import negate_phrase, relation_phrase
from service.qa.answer import Answer
from service.qa.citations import inline_ids

__all__ = ["ExtractiveComposer", "split_sentences"]

_ABBREV = r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<!\bet al\.)(?<!\bvs\.)(?<!\bFig\.)(?<!\bDr\.)(?<!\bNo\.)"
_SENTENCE_END = re.compile(_ABBREV + r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage; a line break (between labelled sections) always ends one."""
    return [s.strip() for line in text.splitlines() for s in _SENTENCE_END.split(line.strip()) if s.strip()]


def _unbracketed(text: str) -> str:
    """Text quoted from the data (a sentence, an impression, a name) with its square brackets made
    round: an abstract's own "[PMID:555; OR: 2.1]" must not read as one of the answer's citations."""
    return text.replace("[", "(").replace("]", ")")


def _join(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


@dataclass
class _Group:
    anchor: str
    phrase: str
    items: list[tuple[str, list[str]]] = field(default_factory=list)  # (other end's name, fact ids)


class ExtractiveComposer:
    """Support: a fact counts when its cosine to the question reaches ``fact_floor`` or it lies on a path
    between two entities of the question; a passage counts when its cosine reaches ``passage_floor`` and
    one of its sentences shares a content word with the question."""

    def __init__(
        self,
        fact_floor: float = 0.45,
        passage_floor: float = 0.5,
        max_groups: int = 3,
        facts_per_group: int = 8,
        max_sentences: int = 3,
    ) -> None:
        self.fact_floor = fact_floor
        self.passage_floor = passage_floor
        self.max_groups = max_groups
        self.facts_per_group = facts_per_group
        self.max_sentences = max_sentences
        self._stemmer = Stemmer.Stemmer("english")

    def _terms(self, text: str) -> set[str]:
        return set(
            bm25s.tokenize([text], stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)[0]
        )

    # ---- knowledge-graph facts ----------------------------------------------------------------
    def fact_sentences(self, facts: list[EvidenceItem], max_groups: int | None = None) -> list[str]:
        """One sentence per (anchor, relation, direction), anchors by name, so the OMIM and Orphanet
        records of one disease read as one ("Marfan syndrome has phenotype Scoliosis [KG:OMIM..;
        KG:ORPHA..] ..."); the other ends keep the order of the bundle. ``max_groups`` sentences at most
        (default: the composer's)."""
        limit = self.max_groups if max_groups is None else max_groups
        groups: dict[tuple[str, str, bool, bool], _Group] = {}
        for f in facts:
            m = f.meta
            inverse = m["object"] == m["seed"] and m["subject"] != m["seed"]
            anchor = (m["object_name"] if inverse else m["subject_name"]) or (m["object"] if inverse else m["subject"])
            other = (m["subject_name"] if inverse else m["object_name"]) or (m["subject"] if inverse else m["object"])
            key = (anchor.casefold(), m["type"], inverse, m["negated"])
            if key not in groups:
                if len(groups) >= limit:
                    continue
                phrase = relation_phrase(m["type"], inverse=inverse)
                groups[key] = _Group(anchor, negate_phrase(phrase) if m["negated"] else phrase)
            group = groups[key]
            for name, ids in group.items:
                if name.casefold() == other.casefold():
                    ids.append(f.id)
                    break
            else:
                if len(group.items) < self.facts_per_group:
                    group.items.append((other, [f.id]))
        sentences = []
        for g in groups.values():
            parts = [f"{_unbracketed(name)} [{'; '.join(ids)}]" for name, ids in g.items]
            sentence = f"{_unbracketed(g.anchor)} {g.phrase} {_join(parts)}."
            sentences.append(sentence[0].upper() + sentence[1:])
        return sentences

    # ---- literature ---------------------------------------------------------------------------
    def _literature_sentences(self, question: str, passages: list[EvidenceItem]) -> list[tuple[str, EvidenceItem]]:
        q = self._terms(question)
        chosen: list[tuple[float, str, EvidenceItem]] = []
        for p in passages:
            if p.score < self.passage_floor:
                continue
            best: tuple[float, str] | None = None
            sentences = split_sentences(p.text)
            for s in sentences:
                if p.title and s == p.title.strip() and len(sentences) > 1:
                    continue  # the title is shown with the citation (unless the article has nothing else)
                overlap = len(q & self._terms(s)) / max(len(q), 1)
                if overlap > 0 and (best is None or overlap > best[0]):
                    best = (overlap, s)
            if best:
                chosen.append((best[0] + p.score, best[1], p))
        chosen.sort(key=lambda c: -c[0])
        return [(s, p) for _, s, p in chosen[: self.max_sentences]]

    @staticmethod
    def _differential_sentence(items: list[EvidenceItem]) -> str | None:
        """ "Diseases ranked ...: 1. X (OMIM:1), with Seizure [KG:OMIM:1-HAS_PHENOTYPE-HP:...] ...; 2. Y ...";
        an entry of several diseases (one disease's subtypes) names what unites them, then each member
        with its own rank: "3. Dilated cardiomyopathy (DOID:12930), 2 of the diseases ranked: ..."."""
        by_entry: dict[int, dict[str, list[EvidenceItem]]] = {}
        for item in items:
            by_entry.setdefault(item.meta["ddx_entry"], {}).setdefault(item.meta["subject"], []).append(item)
        if not by_entry:
            return None
        parts = []
        for number in sorted(by_entry):
            members = by_entry[number]
            described = []
            for disease, found in members.items():
                name = _unbracketed(found[0].meta["subject_name"] or disease)
                matched = _join([f"{_unbracketed(i.meta['object_name'] or i.meta['object'])} [{i.id}]" for i in found])
                where = disease
                if found[0].meta.get("ddx_group"):  # a subtype's gene is what tells it from the others
                    where += f", rank {found[0].meta['ddx_disease_rank']}"
                    where += "".join(f", {g}" for g in found[0].meta.get("ddx_disease_genes") or [])
                described.append(f"{name} ({where}), with {matched}")
            first = next(iter(members.values()))[0].meta
            if first.get("ddx_group"):
                group = _unbracketed(first.get("ddx_group_name") or first["ddx_group"])
                group = group[:1].upper() + group[1:] if group[1:2].islower() else group
                head = f"{group} ({first['ddx_group']}), {len(members)} of the diseases ranked: "
                parts.append(f"{number}. {head}" + "; ".join(described))
            else:
                parts.append(f"{number}. {described[0]}")
        genes = items[0].meta.get("ddx_genes") or []
        among = f" (those associated with {_join(genes)})" if genes else ""
        excluded = items[0].meta.get("ddx_excluded") or []
        said = [p] if (p := items[0].meta.get("ddx_patient")) else []
        said += [f"{_join(excluded)} excluded"] if excluded else []
        without = f" ({'; '.join(said)})" if said else ""
        lead = f"Diseases{among} ranked by similarity of their HPO annotations to the observed phenotypes{without}: "
        return lead + "; ".join(parts) + "."

    @staticmethod
    def _image_sentences(items: list[EvidenceItem], limit: int = 3) -> list[str]:
        """The similar prior studies that have a report: what their impression said."""
        out = []
        for item in items:
            impression = _unbracketed(item.meta.get("impression") or "").strip().rstrip(".")
            if impression and len(out) < limit:
                study = f"{_unbracketed(item.title)}, similarity {item.score:.2f}"
                out.append(f'A similar prior study ({study}) was reported as "{impression}" [{item.id}].')
        return out

    def compose(self, question: str, bundle: EvidenceBundle) -> Answer:
        ddx = [f for f in bundle.of_kind("kg") if "ddx_entry" in f.meta]
        facts = [f for f in bundle.of_kind("kg") if "ddx_entry" not in f.meta]
        answering = [f for f in facts if f.meta.get("answers")]
        supported = [
            f for f in facts if not f.meta.get("answers") and (f.meta.get("on_path") or f.score >= self.fact_floor)
        ]
        informing = [f for f in supported if f.meta["type"] != CO_MENTIONED]
        co_mentions = [f for f in supported if f.meta["type"] == CO_MENTIONED]
        quoted = self._literature_sentences(question, bundle.of_kind("passage"))
        lead = self._differential_sentence(ddx)
        sentences = ([lead] if lead else []) + self._image_sentences(bundle.of_kind("image"))
        answers = self.fact_sentences(answering)
        sentences += answers
        sentences += [f"{_unbracketed(s).rstrip()} [{p.id}]" for s, p in quoted]
        asked = {a.type for a in asked_relations(question)}
        if sentences or not asked:  # facts of another relation do not answer on their own
            sentences += self.fact_sentences(informing, max_groups=max(0, self.max_groups - len(answers)))
        if not sentences and co_mentions and not asks_what(question) and asked <= {CO_MENTIONED}:
            # "is X mentioned with Y?": the co-mention answers; "drugs after a stroke" it does not
            sentences = self.fact_sentences(co_mentions)
        if not sentences:
            best = max((i.score for i in bundle), default=0.0)
            return Answer(
                text=(
                    "Insufficient evidence: nothing in the knowledge graph or the indexed literature reaches the "
                    f"support floor for this question (best match {best:.2f})."
                ),
                cited=[],
                confidence=0.0,
                insufficient_evidence=True,
                mode="extractive",
            )
        held = bundle.ids()
        cited = [i for i in dict.fromkeys(inline_ids(" ".join(sentences))) if i in held]
        support = [i.score for i in bundle if i.id in cited]
        confidence = round(min(1.0, max(0.0, sum(support) / len(support))), 3) if support else 0.0
        return Answer(
            text=" ".join(sentences), cited=cited, confidence=confidence, insufficient_evidence=False, mode="extractive"
        )
