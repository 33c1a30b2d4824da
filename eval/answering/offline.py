"""Answering without an LLM: the option best supported by retrieved evidence (dense relevance, lexical
coverage, graph connections) for multiple choice, and cue-counting rules for yes/no/maybe and true/false."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from eval.answering.outcome import Outcome
from eval.datasets import Question
from kg.model import SAME_AS
from kg.retrieval.evidence import EvidenceItem, fact_citation_id
from kg.retrieval.facts import render_fact
from kg.retrieval.retriever import Retrieval, passage_evidence

if TYPE_CHECKING:
    from kg.model import Relation
    from kg.retrieval.retriever import Retriever

__all__ = ["MARGIN", "TF_THRESHOLD", "WEAK_SUPPORT", "WEIGHTS", "OfflineAnswering", "cue_counts"]

MARGIN = 0.01  # offline MCQ: a lead smaller than this is a tie, and the prior decides
WEAK_SUPPORT = 0.3  # yes/no/maybe: best sentence cosine under this -> "maybe"
TF_THRESHOLD = 0.5  # true/false: support strictly above this -> the statement is supported
WEIGHTS = {"dense": 1.0, "lexical": 1.0, "graph": 1.0}
_NEGATION = re.compile(
    r"\b(?:no|not|none|neither|nor|without|never|fail(?:s|ed)? to|did not|does not|do not|was not|were not"
    r"|is not|are not|cannot|unable|lack(?:s|ed|ing)?|absence|non-?significant|insignificant|unchanged"
    r"|similar|comparable)\b",
    re.IGNORECASE,
)
_FINDING = re.compile(
    r"\b(?:significant(?:ly)?|associated with|improv\w*|increas\w*|reduc\w*|decreas\w*|effective|benefit\w*"
    r"|higher|lower|greater|predict\w*|correlat\w*|superior|better)\b",
    re.IGNORECASE,
)
_STATEMENT_NEGATION = re.compile(r"\b(?:is not|are not|does not|do not|isn't|aren't|doesn't|don't|not)\b\s*", re.I)
_CURIE = re.compile(r"\b[A-Za-z][A-Za-z0-9]*:[A-Za-z0-9][A-Za-z0-9_.]*\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\[])")


def cue_counts(sentence: str) -> tuple[int, int]:
    """(negations, findings) in a sentence; a finding within three words after a negation is negated."""
    negations = list(_NEGATION.finditer(sentence))
    findings = 0
    for m in _FINDING.finditer(sentence):
        before = sentence[: m.start()].split()[-3:]
        if not any(_NEGATION.fullmatch(w.strip(",;:()")) for w in before) and not any(
            n.end() <= m.start() and len(sentence[n.end() : m.start()].split()) < 3 for n in negations
        ):
            findings += 1
    return len(negations), findings


class OfflineAnswering:
    """The option best supported by retrieved evidence, no LLM.

    *Multiple choice.* The question stem is retrieved once (the retriever's bundle: linked entities, KG
    facts and paths, passages). Each option is linked on its own (``Retriever.link``) and searched
    twice in the passage index (hybrid BM25 + dense, the service's floor): "question + option" and the
    option alone. Everything found (the question's bundle, the options' passages, the options' KG facts
    below) is one evidence pool shared by all options. Each option then gets three support scores:

    1. *dense*: max over pool items ``e`` of ``sqrt(cos(q, e)+ * cos(o, e)+)`` (embeddings of the
       question ``q``, the option ``o`` and the item; ``x+`` = max(x, 0)): evidence that is about the
       question *and* about the option. (The embedding of "question + option" is dominated by a long
       vignette, so the two relevances are taken apart.)
    2. *lexical*: IDF-weighted coverage of the option's own words (stemmed, stop words out, and words
       that every option has removed) by a pool item, times that item's relevance ``cos(q, e)+``;
       max over items. IDF comes from the pool, so words found everywhere weigh little (BM25's IDF with
       saturation at one occurrence and no length normalisation).
    3. *graph*: ``c / (c + 1)`` where ``c`` counts the question's linked entities joined to one of the
       option's linked entities (``SAME_AS`` free) by a current, non-negated fact, or lying at the ends
       of a retrieved path through an option entity (e.g. the option disease ``HAS_PHENOTYPE`` two of
       the question's findings: c = 2).

    The option with the largest sum (weights 1, fixed a priori, never tuned on answers) is chosen. When
    the best sum beats the runner-up by less than :data:`MARGIN` (no evidence at all is the extreme
    case), the *prior* decides among the options within the margin: the option whose text is most
    similar to the question (cosine of embeddings). Outcomes say which decided (``decided_by``:
    ``evidence`` or ``prior``), and the report counts the prior's decisions.

    *Yes/no/maybe* (PubMedQA). Sentences of the item's context (the reasoning-required setting) or,
    without one, of the retrieved passages; the 3 most similar to the question are read. Under
    :data:`WEAK_SUPPORT` cosine for the best one: "maybe". Otherwise negation cues ("no significant",
    "did not", "similar", ...) against finding cues ("significantly", "improved", "associated with", a
    finding cue within three words after a negation counts as a negation): more negations: "no", else
    "yes".

    *True/false* (KG-RAG). A negation in the statement ("is not", "not associated") is noted and
    removed; the positive statement is retrieved. Support: 1.0 for a direct fact between entities
    linked from different mentions (a path of cost ``n``: ``1/n``); for a passage naming both mentions,
    its cosine to the statement; a statement naming an identifier ("... is DOID:9169") is supported when
    that id is one linked entity's id, ``SAME_AS`` equivalent or xref. Supported means support above
    :data:`TF_THRESHOLD` (0.5, a documented constant: a direct fact or a co-mentioning passage closer
    than 0.5, not a two-hop path); the answer is True when supported and not negated or unsupported and
    negated.
    """

    mode = "offline"

    def __init__(self, retriever: Retriever, k: int = 8, hops: int = 2, budget: int = 1500, option_k: int = 4) -> None:
        import Stemmer

        self.retriever = retriever
        self.embedder = retriever.embedder
        self.graph = retriever.graph
        self.text_index = retriever.text_index
        self.k, self.hops, self.budget, self.option_k = k, hops, budget, option_k
        self._stemmer = Stemmer.Stemmer("english")

    def answer(self, q: Question) -> Outcome:
        started = time.perf_counter()
        if q.kind == "mcq":
            out = self._mcq(q)
        elif q.kind == "yesno":
            out = self._yes_no_maybe(q)
        else:
            out = self._true_false(q)
        out.parsed = out.predicted is not None
        out.timings_ms["total"] = round((time.perf_counter() - started) * 1000, 1)
        return out

    # ---- helpers -------------------------------------------------------------------------------
    def _tokens(self, texts: list[str]) -> list[set[str]]:
        import bm25s

        if not texts:
            return []
        return [
            set(t)
            for t in bm25s.tokenize(texts, stopwords="en", stemmer=self._stemmer, return_ids=False, show_progress=False)
        ]

    def _vectors(self, items: list[EvidenceItem]) -> np.ndarray:
        """Unit vectors of pool items: a passage's stored vector, else the embedded text (a fact's short form)."""
        dim = None
        vectors: list[np.ndarray | None] = []
        for item in items:
            vec = self.text_index.vectors.vector(item.id) if item.kind == "passage" else None
            vectors.append(vec)
            dim = len(vec) if vec is not None else dim
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            encoded = self.embedder.encode(
                [items[i].title or items[i].text if items[i].kind == "kg" else items[i].text for i in missing]
            )
            for i, vec in zip(missing, encoded, strict=True):
                vectors[i] = vec
        if not vectors:
            return np.zeros((0, dim or 1), dtype=np.float32)
        return np.stack([np.asarray(v, dtype=np.float32) for v in vectors])

    def _count_tokens(self, items: list[EvidenceItem]) -> int:
        missing = [i.text for i in items if not i.tokens]
        return sum(i.tokens for i in items) + (sum(self.embedder.count_tokens(missing)) if missing else 0)

    def _graph_support(
        self, option_ids: Sequence[str], question_ids: set[str], retrieval: Retrieval
    ) -> tuple[set[str], list[EvidenceItem]]:
        """The question entities joined to the option's entities (``SAME_AS`` free), with the facts."""
        own = set(option_ids)
        queue, expanded = list(dict.fromkeys(option_ids))[:5], set()
        types = [*self.retriever.graph_evidence.fact_types(), SAME_AS]
        connected: set[str] = set()
        facts: dict[str, EvidenceItem] = {}
        names = {e.id: e.name for e in retrieval.entities.values()}
        while queue:
            eid = queue.pop(0)
            if eid in expanded:
                continue
            expanded.add(eid)
            for n in self.graph.neighbours(eid, rel_types=types, limit=1000):
                other, rel = n.entity.id, n.relation
                names.setdefault(other, n.entity.name)
                if rel.type == SAME_AS:
                    if other not in own and len(own) < len(option_ids) + 3:
                        own.add(other)
                        queue.append(other)
                    continue
                if other in question_ids and other not in own and not rel.negated:
                    connected.add(other)
                    facts.setdefault(_fact_id(rel), self._fact_item(rel, names))
        for path in retrieval.paths:  # a path between question entities running through an option entity
            if own & set(path.nodes[1:-1]):
                connected |= {path.nodes[0], path.nodes[-1]} - own
                for rel in path.relations:
                    if rel.type != SAME_AS:
                        facts.setdefault(_fact_id(rel), self._fact_item(rel, names))
        for item in retrieval.bundle.of_kind("kg"):
            ends = {item.meta.get("subject"), item.meta.get("object")}
            if own & ends and not item.meta.get("negated"):
                hit = (ends - own) & question_ids
                if hit:
                    connected |= hit
                    facts.setdefault(item.id, item)
        return connected, list(facts.values())

    @staticmethod
    def _fact_item(rel: Relation, names: dict[str, str]) -> EvidenceItem:
        return EvidenceItem(
            id=_fact_id(rel),
            kind="kg",
            text=render_fact(rel, names),
            title=render_fact(rel, names, with_evidence=False),
            url=None,
            score=0.0,
            meta={"subject": rel.subject, "type": rel.type, "object": rel.object, "negated": rel.negated},
        )

    # ---- multiple choice -----------------------------------------------------------------------
    def _mcq(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        t = time.perf_counter()
        retrieval = self.retriever.retrieve(q.question, k=self.k, hops=self.hops, budget=self.budget)
        timings["retrieval"] = time.perf_counter() - t
        question_ids = {e.id for e in retrieval.linked}

        t = time.perf_counter()
        keys = list(q.options)
        texts = [q.options[k] for k in keys]
        n = len(keys)
        vecs = self.embedder.encode([q.question, *texts, *(f"{q.question} {o}" for o in texts)])
        qv, ov, qov = vecs[0], vecs[1 : 1 + n], vecs[1 + n :]
        pool: dict[str, EvidenceItem] = {i.id: i for i in retrieval.bundle}
        floor = self.retriever.search_floor
        for i, text in enumerate(texts):
            hits = self.text_index.search(f"{q.question} {text}", k=self.option_k, floor=floor, vector=qov[i])
            hits += self.text_index.search(text, k=self.option_k, floor=floor, vector=ov[i])
            for h in hits:
                if not h.retracted:
                    pool.setdefault(h.id, passage_evidence(h))
        option_linked: dict[str, list[str]] = {}
        graph_hits: dict[str, set[str]] = {}
        for key, text in zip(keys, texts, strict=True):
            linked, _, _ = self.retriever.link(text)
            option_linked[key] = list(dict.fromkeys(e.id for e in linked))
            graph_hits[key], facts = self._graph_support(option_linked[key], question_ids, retrieval)
            for f in facts:
                pool.setdefault(f.id, f)
        timings["options"] = time.perf_counter() - t

        t = time.perf_counter()
        items = list(pool.values())
        ev = self._vectors(items)
        rel_q = np.clip(ev @ qv, 0, None) if len(items) else np.zeros(0)
        rel_o = np.clip(ev @ ov.T, 0, None) if len(items) else np.zeros((0, n))  # items x options
        dense = np.sqrt(rel_q[:, None] * rel_o) if len(items) else np.zeros((0, n))

        option_tokens = self._tokens(texts)
        shared = set.intersection(*option_tokens) if option_tokens else set()
        option_tokens = [t_ - shared for t_ in option_tokens]
        docs = self._tokens(
            [f"{i.title or ''} {i.text}" if i.kind == "passage" else (i.title or i.text) for i in items]
        )
        big_n = len(docs)
        df: dict[str, int] = {}
        for d in docs:
            for tok in d:
                df[tok] = df.get(tok, 0) + 1

        def idf(tok: str) -> float:
            f = df.get(tok, 0)
            return math.log(1 + (big_n - f + 0.5) / (f + 0.5))

        scores: dict[str, dict[str, float]] = {}
        best_items: dict[str, list[str]] = {}
        for j, key in enumerate(keys):
            total_idf = sum(idf(tok) for tok in option_tokens[j])
            lexical = np.zeros(len(items))
            if total_idf > 0:
                for e, d in enumerate(docs):
                    lexical[e] = sum(idf(tok) for tok in option_tokens[j] & d) / total_idf * rel_q[e]
            c = len(graph_hits[key])
            parts = {
                "dense": float(dense[:, j].max()) if len(items) else 0.0,
                "lexical": float(lexical.max()) if len(items) else 0.0,
                "graph": c / (c + 1),
            }
            parts["total"] = sum(WEIGHTS[name] * parts[name] for name in WEIGHTS)
            parts["prior"] = float(ov[j] @ qv)
            scores[key] = {name: round(v, 4) for name, v in parts.items()}
            top = []
            if len(items):
                top.append(items[int(dense[:, j].argmax())].id)
                if parts["lexical"] > 0:
                    top.append(items[int(lexical.argmax())].id)
            best_items[key] = top
        ranked = sorted(keys, key=lambda k_: -scores[k_]["total"])
        best = scores[ranked[0]]["total"]
        close = [k_ for k_ in ranked if best - scores[k_]["total"] < MARGIN]
        if len(close) == 1:
            chosen, decided_by = close[0], "evidence"
        else:
            chosen, decided_by = max(close, key=lambda k_: scores[k_]["prior"]), "prior"
        timings["scoring"] = time.perf_counter() - t
        facts_of_choice = [
            i.id
            for i in items
            if i.kind == "kg"
            and {i.meta.get("subject"), i.meta.get("object")} & set(option_linked[chosen])
            and {i.meta.get("subject"), i.meta.get("object")} & graph_hits[chosen]
        ]
        return Outcome(
            predicted=chosen,
            decided_by=decided_by,
            evidence_ids=[i.id for i in items],
            cited=list(dict.fromkeys([*best_items[chosen], *facts_of_choice]))[:8] if decided_by == "evidence" else [],
            linked=sorted(question_ids | {i for ids in option_linked.values() for i in ids}),
            option_scores=scores,
            evidence_tokens=self._count_tokens(items),
            timings_ms={k_: round(v * 1000, 1) for k_, v in timings.items()},
        )

    # ---- yes / no / maybe ----------------------------------------------------------------------
    def _yes_no_maybe(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        sentences: list[tuple[str | None, str]] = []  # (evidence id, sentence)
        evidence_ids: list[str] = []
        tokens = 0
        linked: list[str] = []
        if q.context:
            sentences = [(None, s) for line in q.context.splitlines() for s in _SENTENCE.split(line) if s.strip()]
        else:
            t = time.perf_counter()
            retrieval = self.retriever.retrieve(q.question, k=self.k, hops=self.hops, budget=self.budget)
            timings["retrieval"] = time.perf_counter() - t
            passages = retrieval.bundle.of_kind("passage")
            evidence_ids = [p.id for p in passages]
            tokens = sum(p.tokens for p in passages)
            linked = [e.id for e in retrieval.linked]
            sentences = [(p.id, s) for p in passages for s in _SENTENCE.split(p.text) if s.strip()]
        out = Outcome(decided_by="rule", evidence_ids=evidence_ids, evidence_tokens=tokens, linked=linked)
        has_maybe = "maybe" in q.options
        if not sentences:
            out.predicted = "maybe" if has_maybe else _first(q.options, "yes")
            out.decided_by = "prior"
            out.timings_ms = {k: round(v * 1000, 1) for k, v in timings.items()}
            return out
        t = time.perf_counter()
        vecs = self.embedder.encode([q.question, *(s for _, s in sentences)])
        rel = vecs[1:] @ vecs[0]
        top = [int(i) for i in np.argsort(-rel)[:3]]
        strength = float(rel[top[0]])
        negations = findings = 0
        for i in top:
            a, b = cue_counts(sentences[i][1])
            negations, findings = negations + a, findings + b
        if strength < WEAK_SUPPORT and has_maybe:
            out.predicted = "maybe"
        elif negations > findings:
            out.predicted = _first(q.options, "no")
        else:
            out.predicted = _first(q.options, "yes")
        out.option_scores = {"rule": {"strength": round(strength, 4), "negations": negations, "findings": findings}}
        out.cited = list(dict.fromkeys(sentences[i][0] for i in top if sentences[i][0]))
        timings["scoring"] = time.perf_counter() - t
        out.timings_ms = {k: round(v * 1000, 1) for k, v in timings.items()}
        return out

    # ---- true / false --------------------------------------------------------------------------
    def _true_false(self, q: Question) -> Outcome:
        timings: dict[str, float] = {}
        negated = _STATEMENT_NEGATION.search(q.question) is not None
        positive = " ".join(_STATEMENT_NEGATION.sub("", q.question).split())
        curies = _CURIE.findall(positive)
        query = " ".join(_CURIE.sub("", positive).split()) if curies else positive
        t = time.perf_counter()
        retrieval = self.retriever.retrieve(query, k=self.k, hops=self.hops, budget=self.budget)
        timings["retrieval"] = time.perf_counter() - t
        t = time.perf_counter()
        mention_of: dict[str, str] = {}
        for e in retrieval.linked:
            mention_of.setdefault(e.id, e.mention.casefold())
        support, how, cited = 0.0, "none", []
        if curies:
            ids = set(mention_of)
            names = self.graph.get_entities(ids)
            equivalents = set(ids) | {x for e in names.values() for x in e.xrefs}
            for eid in ids:
                equivalents |= {n.entity.id for n in self.graph.neighbours(eid, rel_types=[SAME_AS], limit=50)}
            if any(c in equivalents for c in curies):
                support, how = 1.0, "identifier"
        else:
            for path in retrieval.paths:
                a, b = path.nodes[0], path.nodes[-1]
                if mention_of.get(a) != mention_of.get(b) and path.cost > 0 and 1 / path.cost > support:
                    support, how = 1 / path.cost, f"path of {path.cost}"
                    cited = [fact_citation_id(r.subject, r.type, r.object) for r in path.relations if r.type != SAME_AS]
            for item in retrieval.bundle.of_kind("kg"):
                s, o = item.meta.get("subject"), item.meta.get("object")
                if (
                    s in mention_of
                    and o in mention_of
                    and mention_of[s] != mention_of[o]
                    and not item.meta.get("negated")
                ):
                    support, how, cited = 1.0, "fact", [item.id]
                    break
            mentions = {m for m in mention_of.values() if m}
            passages = retrieval.bundle.of_kind("passage")
            if support <= TF_THRESHOLD and len(mentions) >= 2 and passages:
                vecs = self._vectors(passages)
                sv = self.embedder.encode([positive])[0]
                for p, vec in zip(passages, vecs, strict=True):
                    text = p.text.casefold()
                    named = {m for m in mentions if m in text}
                    if len(named) >= 2 and float(vec @ sv) > support:
                        support, how, cited = float(vec @ sv), "passage", [p.id]
        supported = support > TF_THRESHOLD
        timings["scoring"] = time.perf_counter() - t
        return Outcome(
            predicted="True" if supported != negated else "False",
            decided_by="rule",
            evidence_ids=[i.id for i in retrieval.bundle],
            cited=cited if supported else [],
            linked=list(mention_of),
            option_scores={"rule": {"support": round(support, 4), "negated": float(negated)}},
            explanation=f"support {support:.2f} ({how}){'; the statement is negated' if negated else ''}",
            evidence_tokens=retrieval.bundle.tokens,
            timings_ms={k: round(v * 1000, 1) for k, v in timings.items()},
        )


def _fact_id(rel: Relation) -> str:
    return fact_citation_id(rel.subject, f"NOT_{rel.type}" if rel.negated else rel.type, rel.object)


def _first(options: dict[str, str], word: str) -> str | None:
    return word if word in options else next(iter(options), None)
