"""Differential diagnosis on a small hand-made ontology, on both backends (real stores)."""

from __future__ import annotations

import math
import pickle
from collections import defaultdict

import numpy as np
import pytest

from kg.differential import (
    OTHER_ASPECTS,
    PRIOR_STRENGTH,
    LRParams,
    PhenotypeIndex,
    frequency_evidence,
    frequency_weight,
)
from kg.errors import InvalidInput
from kg.graph.base import BaseGraphStore
from kg.model import Entity, Relation

TERMS = {
    "HP:0000001": None,
    "HP:0000118": "HP:0000001",
    "HP:0000707": "HP:0000118",  # nervous system
    "HP:0001250": "HP:0000707",  # seizure
    "HP:0002069": "HP:0001250",  # generalized tonic-clonic seizure
    "HP:0001252": "HP:0000707",  # hypotonia
    "HP:0000152": "HP:0000118",  # head and neck
    "HP:0000252": "HP:0000152",  # microcephaly
    "HP:0000256": "HP:0000152",  # macrocephaly
}


def phenotype(d: str, t: str, freq: str | None = None, pmids=(), negated: bool = False) -> Relation:
    evidence = {"pmids": list(pmids)} | ({"frequency": [freq]} if freq else {})
    return Relation(subject=d, type="HAS_PHENOTYPE", object=t, source="hpo", evidence=evidence, negated=negated)


@pytest.fixture
def index(store: BaseGraphStore) -> PhenotypeIndex:
    store.upsert_entities([Entity(id=t, name=t, category="Phenotype") for t in TERMS])
    store.upsert_entities(
        [Entity(id=f"OMIM:{i}", name=f"disease {i}", category="Disease") for i in (100001, 100002, 100003)]
        + [Entity(id="NCBIGene:1", name="GENE1", category="Gene")]
    )
    store.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in TERMS.items() if p]
        + [
            phenotype("OMIM:100001", "HP:0002069", "HP:0040281", ["PMID:11"]),
            phenotype("OMIM:100001", "HP:0000252", "HP:0040280", ["PMID:12"]),
            phenotype("OMIM:100002", "HP:0001252", "HP:0040282"),
            phenotype("OMIM:100002", "HP:0000256", "1/2"),
            phenotype("OMIM:100003", "HP:0001250", "HP:0040283"),
            phenotype("OMIM:100003", "HP:0000252", negated=True),
            Relation(subject="NCBIGene:1", type="ASSOCIATED_WITH", object="OMIM:100001", source="hpo"),
        ]
    )
    return PhenotypeIndex.from_graph(store)


def test_frequency_weights() -> None:
    assert frequency_weight(["HP:0040280"]) == 1.0
    assert frequency_weight(["3/10"]) == pytest.approx(0.3)
    assert frequency_weight(["25%"]) == pytest.approx(0.25)
    assert frequency_weight(["HP:0040284", "HP:0040282"]) == pytest.approx(0.545)  # the largest
    assert frequency_weight([]) == 0.5
    # what the index keeps: counts pooled (to be shrunk), else the frequency term, else unknown
    assert frequency_evidence(["1/1", "3/10"]) == (4, 11)
    assert frequency_evidence(["HP:0040281"]) == pytest.approx(0.895)
    assert frequency_evidence(["25%"]) == pytest.approx(0.25)
    assert frequency_evidence([]) is None and frequency_evidence(["0/0"]) is None


def test_ranking_explains_itself(index: PhenotypeIndex) -> None:
    assert index.diseases == ["OMIM:100001", "OMIM:100002", "OMIM:100003"]
    # IC from annotations: a term more diseases share is less informative.
    ic = dict(zip(index.terms, index.ic.tolist(), strict=True))
    assert ic["HP:0000118"] == pytest.approx(0.0) and ic["HP:0002069"] > ic["HP:0001250"] > ic["HP:0000707"]
    ranked = index.rank(["HP:0002069", "HP:0000252"], top_k=3)
    assert [c.disease for c in ranked][0] == "OMIM:100001"
    top = ranked[0]
    assert {(q, t) for q, t, _ in top.matches} == {("HP:0002069", "HP:0002069"), ("HP:0000252", "HP:0000252")}
    assert top.pmids == ["PMID:11", "PMID:12"] and top.genes == ["GENE1"]
    assert [(t, kind) for t, kind, _ in top.likelihood_ratios] == [
        ("HP:0002069", "observed"),
        ("HP:0000252", "observed"),
    ]
    assert all(lr > 1 for _, _, lr in top.likelihood_ratios)
    assert top.log10_lr == pytest.approx(math.log10(math.prod(lr for _, _, lr in top.likelihood_ratios)), abs=1e-3)
    # A disease annotated NOT to have an observed term says so, and the term's LR is LIRICAL's 1/1000.
    d3 = next(c for c in ranked if c.disease == "OMIM:100003")
    assert d3.contradictions == ["annotated NOT to have HP:0000252"]
    assert ("HP:0000252", "observed", pytest.approx(0.001)) in d3.likelihood_ratios
    # A less specific observation still matches through the ontology.
    assert index.rank(["HP:0001250"], top_k=1)[0].disease in {"OMIM:100001", "OMIM:100003"}
    assert index.rank(["HP:9999999"]) == []


def test_frequencies_background_and_propagation(index: PhenotypeIndex) -> None:
    bg = dict(zip(index.terms, index.bg.tolist(), strict=True))
    # frequency terms: GTCS 0.895 (OMIM:100001), seizure 0.17 (OMIM:100003); "1/2" is shrunk to the prior
    k, p0 = PRIOR_STRENGTH, index.prior_frequency
    assert p0 == pytest.approx(0.5)  # the pooled frequency of all counts (just "1/2" here)
    assert bg["HP:0002069"] == pytest.approx(0.895 / 3)
    assert bg["HP:0001250"] == pytest.approx((0.895 + 0.17) / 3)  # propagated: the largest at or below
    assert bg["HP:0000256"] == pytest.approx((1 + k * p0) / (2 + k) / 3)
    # an observed term's LR: F(d, q) / bg(q), mixed with the background (eps)
    eps = LRParams().false_positive
    _, _, parts = index.scores(["HP:0001250"], baseline=False)
    lr = np.exp(parts["term_lr"][0])
    assert lr[0] == pytest.approx((1 - eps) * 0.895 / bg["HP:0001250"] + eps, rel=1e-4)
    assert lr[2] == pytest.approx((1 - eps) * 0.17 / bg["HP:0001250"] + eps, rel=1e-4)
    # through a more general shared ancestor (nervous system) when the disease lacks the term itself
    assert lr[1] == pytest.approx((1 - eps) * 0.545 / bg["HP:0000707"] + eps, rel=1e-4)


def test_exclusions_and_contradictions(index: PhenotypeIndex) -> None:
    observed, excluded = ["HP:0001250"], ["HP:0000252"]
    plain, _, p0 = index.scores(observed)
    penalised, baseline, p1 = index.scores(observed, excluded)
    i1, i3 = index.disease_index["OMIM:100001"], index.disease_index["OMIM:100003"]
    assert index.rank_of(plain, ["OMIM:100001"]) == 1
    # OMIM:100001 has the excluded microcephaly as obligate: LR max(1 - 1, 0.01) / (1 - bg)
    drop = p1["log10_lr"][i1] - p0["log10_lr"][i1]
    bg = float(index.bg[index.term_index["HP:0000252"]])
    assert drop == pytest.approx(math.log10(0.01 / (1 - bg)), abs=1e-4)
    assert p1["log10_lr"][i3] - p0["log10_lr"][i3] == pytest.approx(-math.log10(1 - bg), abs=1e-4)
    assert index.rank_of(penalised, ["OMIM:100003"]) == 1
    assert np.allclose(baseline, index.scores(observed)[1])  # the baseline ignores exclusions
    ranked = index.rank(observed, excluded, top_k=3)
    d1 = next(c for c in ranked if c.disease == "OMIM:100001")
    assert d1.contradictions == ["has HP:0000252, which the patient does not"]
    assert ("HP:0000252", "excluded", pytest.approx(0.01 / (1 - bg), rel=1e-3)) in d1.likelihood_ratios
    # An excluded term that an observed one implies is ignored; only the most specific observed terms count.
    assert index.case_terms(["HP:0001250", "HP:0002069"], ["HP:0001250", "HP:0000707"]) == (
        [index.term_index["HP:0002069"]],
        [],
    )
    assert index.case_terms(["HP:0001250"], ["HP:0000152", "HP:0000252"])[1] == [index.term_index["HP:0000152"]]


def test_an_obsolete_term_counts_as_its_replacement_or_else_its_last_parents(
    index: PhenotypeIndex, store: BaseGraphStore
) -> None:
    replaced, moved = "HP:0009901", "HP:0009902"  # obsolete: one replaced_by, one with its last parent only
    store.upsert_entities([Entity(id=t, name=t, category="Phenotype", obsolete=True) for t in (replaced, moved)])
    store.upsert_relations(
        [
            Relation(subject=replaced, type="REPLACED_BY", object="HP:0002069", source="hp"),
            Relation(subject=moved, type="IS_A", object="HP:0001252", source="hp"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    assert replaced not in index.term_index and moved not in index.term_index
    assert index.known([replaced, moved, "HP:0000252", "HP:9999999"]) == (
        ["HP:0002069", "HP:0001252", "HP:0000252"],
        ["HP:9999999"],
    )
    assert index.replacements([replaced, moved, "HP:0000252"]) == {replaced: ["HP:0002069"], moved: ["HP:0001252"]}
    as_given = index.rank([replaced, "HP:0000252"], top_k=3)
    as_current = index.rank(["HP:0002069", "HP:0000252"], top_k=3)
    assert [(c.disease, c.score) for c in as_given] == [(c.disease, c.score) for c in as_current]
    assert as_given[0].disease == "OMIM:100001"
    # ruling out a term is not ruling out its parent: an excluded obsolete term counts only as its replacement
    assert index.case_terms(["HP:0000252"], [moved, replaced])[1] == [index.term_index["HP:0002069"]]
    assert index.replacements([moved, replaced], broaden=False) == {replaced: ["HP:0002069"]}


def test_an_index_pickled_by_an_older_version_derives_again(index: PhenotypeIndex) -> None:
    state = dict(index.__dict__)
    for key in ("flat_given", "flat_counts", "prop_freq", "prop_log_freq", "bg", "lr_ic", "version"):
        state.pop(key)
    state["flat_freq"] = np.asarray([0.895, 1.0, 0.545, 0.5, 0.17], dtype=np.float32)  # version 1's
    old = PhenotypeIndex.__new__(PhenotypeIndex)
    old.__setstate__(state)
    assert old.version == PhenotypeIndex.CACHE_VERSION
    assert [c.disease for c in old.rank(["HP:0002069", "HP:0000252"])][0] == "OMIM:100001"
    assert pickle.loads(pickle.dumps(index)).rank(["HP:0001250"])[0].disease == index.rank(["HP:0001250"])[0].disease


def test_pyhpo_baseline_counts_every_aspect(store: BaseGraphStore) -> None:
    """pyhpo's set similarity on a hand-made ontology: the disease side takes the mode of inheritance
    too, and the information content counts the diseases of the namespace ranked."""
    terms = {"HP:0000001": None, "HP:0000118": "HP:0000001", "HP:0000005": "HP:0000001"}
    terms |= {"HP:0000006": "HP:0000005", "HP:0001250": "HP:0000118", "HP:0001252": "HP:0000118"}
    store.upsert_entities([Entity(id=t, name=t, category="Phenotype") for t in terms])
    store.upsert_entities([Entity(id=d, name=d, category="Disease") for d in ("OMIM:1", "OMIM:2", "ORPHA:1")])
    store.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in terms.items() if p]
        + [
            phenotype("OMIM:1", "HP:0001250"),
            Relation(subject="OMIM:1", type="HAS_INHERITANCE", object="HP:0000006", source="hpo"),
            phenotype("OMIM:2", "HP:0001250"),
            phenotype("OMIM:2", "HP:0001252"),
            phenotype("ORPHA:1", "HP:0001250"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    # within OMIM both diseases have seizures: IC 0, no information; ORPHA:1 is outside
    ours = index.pyhpo_scores(["HP:0001250"], prefixes=["OMIM"])
    assert ours[:2].tolist() == pytest.approx([0.0, 0.0]) and np.isneginf(ours[2])
    # over all three: hypotonia and the mode of inheritance have IC log 3 (one disease of three);
    # funSimAvg = (patient->disease + disease->patient) / 2, and the disease side is its whole set
    half = (math.log(3) + math.log(3) / 2) / 2
    assert index.pyhpo_scores(["HP:0001252"])[index.disease_index["OMIM:2"]] == pytest.approx(half)
    assert index.pyhpo_scores(["HP:0000006"])[index.disease_index["OMIM:1"]] == pytest.approx(half)
    # the phenotype-only model never sees the inheritance term
    assert index.set_terms.size == index.flat_terms.size + 1


def test_ranking_within_a_namespace(store: BaseGraphStore) -> None:
    store.upsert_entities(
        [Entity(id=t, name=t, category="Phenotype") for t in ("HP:0000001", "HP:0000118", "HP:0001250")]
        + [Entity(id=d, name=d, category="Disease") for d in ("OMIM:100001", "ORPHA:1")]
    )
    store.upsert_relations(
        [
            Relation(subject="HP:0000118", type="IS_A", object="HP:0000001"),
            Relation(subject="HP:0001250", type="IS_A", object="HP:0000118"),
            phenotype("OMIM:100001", "HP:0001250"),
            phenotype("ORPHA:1", "HP:0001250"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    assert [c.disease for c in index.rank(["HP:0001250"], prefixes=["OMIM"])] == ["OMIM:100001"]
    assert len(index.rank(["HP:0001250"])) == 2
    score, _, _ = index.scores(["HP:0001250"], prefixes=["ORPHA"])
    assert index.rank_of(score, ["ORPHA:1"]) == 1 and index.rank_of(score, ["OMIM:100001"]) == 2


def test_candidate_genes_filter_the_ranking_without_changing_scores(index: PhenotypeIndex) -> None:
    case = ["HP:0001250", "HP:0000252"]
    everything = {c.disease: c.score for c in index.rank(case, top_k=10)}
    assert len(everything) == 3 and max(everything, key=everything.get) == "OMIM:100001"
    mask, unknown = index.gene_diseases(["gene1", "NOSUCH"])  # symbols in any case
    assert [index.diseases[i] for i in np.flatnonzero(mask)] == ["OMIM:100001"] and unknown == ["NOSUCH"]
    assert index.known_genes(["gene1", "NOSUCH", "gene1"]) == (["gene1"], ["NOSUCH"])
    only = index.rank(case, top_k=10, genes=["GENE1"])
    assert [(c.disease, c.score, c.genes) for c in only] == [("OMIM:100001", everything["OMIM:100001"], ["GENE1"])]
    score, baseline, _ = index.scores(case, genes=["GENE1"])
    assert np.isneginf(np.delete(score, index.disease_index["OMIM:100001"])).all()
    assert np.isneginf(np.delete(baseline, index.disease_index["OMIM:100001"])).all()
    assert index.rank(case, genes=["NOSUCH"]) == []  # a gene of no disease leaves nothing to rank
    restored = pickle.loads(pickle.dumps(index))  # the gene lookup is a cache, rebuilt after unpickling
    assert "_by_gene" not in restored.__dict__ and [c.disease for c in restored.rank(case, genes=["GENE1"])] == [
        "OMIM:100001"
    ]


def test_a_disease_annotated_only_with_terms_the_index_lacks_is_left_out(store: BaseGraphStore) -> None:
    """All of a disease's annotations name obsolete (or dropped) terms: it cannot be scored, so it is not
    ranked (it had no annotation left: the baseline divided by 0, the ranking failed)."""
    gone = "HP:0009901"
    store.upsert_entities(
        [Entity(id=t, name=t, category="Phenotype") for t in TERMS]
        + [Entity(id=gone, name=gone, category="Phenotype", obsolete=True)]
        + [Entity(id=d, name=d, category="Disease") for d in ("OMIM:100001", "OMIM:100002", "OMIM:100009")]
    )
    store.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in TERMS.items() if p]
        + [
            phenotype("OMIM:100001", "HP:0002069"),
            phenotype("OMIM:100002", "HP:0000252"),
            phenotype("OMIM:100009", gone),  # last of all diseases: reduceat's offset past the end
            phenotype("OMIM:100009", "HP:9999999"),
            Relation(subject="OMIM:100009", type="HAS_INHERITANCE", object="HP:0000001", source="hpo"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    assert index.diseases == ["OMIM:100001", "OMIM:100002"]
    ranked = index.rank(["HP:0001250", "HP:0000252"], top_k=5)
    assert [c.disease for c in ranked] == ["OMIM:100001", "OMIM:100002"]
    score, baseline, _ = index.scores(["HP:0001250"])
    assert np.isfinite(score).all() and np.isfinite(baseline).all() and baseline.max() > 0
    assert np.isfinite(index.pyhpo_scores(["HP:0001250"])).all()


def test_an_index_pickled_with_an_unannotated_disease_drops_it(index: PhenotypeIndex) -> None:
    """A version-4 pickle may hold a disease without annotations (last, and with a term of another
    aspect): unpickling derives again without it."""
    state = dict(index.__dict__, version=4, diseases=[*index.diseases, "OMIM:100009"])
    state["offsets"] = np.append(index.offsets, len(index.flat_terms))
    state["set_offsets"] = np.append(index.set_offsets, len(index.set_terms))
    state["set_terms"] = np.append(index.set_terms, index.term_index["HP:0000118"]).astype(np.int32)
    state["disease_index"] = {d: i for i, d in enumerate(state["diseases"])}
    old = PhenotypeIndex.__new__(PhenotypeIndex)
    old.__setstate__(state)
    assert old.diseases == index.diseases and old.version == PhenotypeIndex.CACHE_VERSION
    assert np.array_equal(old.set_terms, index.set_terms) and np.array_equal(old.offsets, index.offsets)
    case = ["HP:0002069", "HP:0000252"]
    assert [(c.disease, c.score, c.baseline) for c in old.rank(case)] == [
        (c.disease, c.score, c.baseline) for c in index.rank(case)
    ]


def test_obsolete_observed_terms_are_explained_and_count_in_the_baseline(index: PhenotypeIndex) -> None:
    index.replaced_by = {"HP:0009901": ["HP:0002069"]}
    only = index.rank(["HP:0009901"], top_k=3)  # only an obsolete term: it counts as its replacement
    assert [(c.disease, c.score, c.baseline) for c in only] == [
        (c.disease, c.score, c.baseline) for c in index.rank(["HP:0002069"], top_k=3)
    ]
    top = index.rank(["HP:0009901", "HP:0000252"], top_k=1)[0]
    assert {q for q, _, _ in top.matches} == {"HP:0002069", "HP:0000252"}  # the replacement is explained
    assert [t for t, _, _ in top.likelihood_ratios] == ["HP:0002069", "HP:0000252"]
    _, as_given, _ = index.scores(["HP:0009901", "HP:0000252"])
    _, as_current, _ = index.scores(["HP:0002069", "HP:0000252"])
    assert np.array_equal(as_given, as_current)  # the baseline counts it too


def test_disease_namespaces_in_any_spelling_and_no_other(index: PhenotypeIndex) -> None:
    from kg.differential import disease_namespaces

    assert disease_namespaces(["omim", "MIM:", " Orphanet", "ordo", "decipher", "OMIM"]) == [
        "OMIM",
        "ORPHA",
        "DECIPHER",
    ]
    case = ["HP:0001250"]
    assert [c.disease for c in index.rank(case, prefixes=["omim"])] == [c.disease for c in index.rank(case)]
    assert index.rank(case, prefixes=["orphanet"]) == []
    for wrong in (["FOO"], ["HP"], ["OMIM", "omimps"], [""], ["a b"]):
        with pytest.raises(InvalidInput, match="disease namespace"):
            index.rank(case, prefixes=wrong)
    with pytest.raises(InvalidInput):
        index.pyhpo_scores(case, prefixes=["FOO"])


def test_a_case_without_a_known_observed_term_ranks_nothing(index: PhenotypeIndex) -> None:
    """No observed term the index knows: every disease ranked scores 0, and those outside the
    namespace or the genes are still -inf (not tied with them, first by disease id)."""
    score, baseline, parts = index.scores(["HP:9999999"], genes=["GENE1"])
    assert not len(parts["obs"])
    assert score.tolist() == baseline.tolist() == [0.0, -np.inf, -np.inf]
    assert np.isneginf(index.scores(["HP:9999999"], prefixes=["ORPHA"])[0]).all()
    assert index.rank(["HP:9999999"]) == []


def test_a_term_sharing_nothing_below_the_roots_is_no_match(index: PhenotypeIndex) -> None:
    """OMIM:100003 has nothing of the head (only a seizure): microcephaly is not "matched" to it, and its
    likelihood ratio still shows; a similarity of 0 is never shown as -0.0."""
    ranked = {c.disease: c for c in index.rank(["HP:0002069", "HP:0000252"], top_k=3)}
    d3 = ranked["OMIM:100003"]
    assert [q for q, _, _ in d3.matches] == ["HP:0002069"]
    assert [t for t, _, _ in d3.likelihood_ratios] == ["HP:0002069", "HP:0000252"]
    # seizure and hypotonia share the nervous system, which every disease here has: IC -log(3/3)
    d2 = index.rank(["HP:0001250"], top_k=3)
    (match,) = next(c for c in d2 if c.disease == "OMIM:100002").matches
    assert match == ("HP:0001250", "HP:0001252", 0.0) and math.copysign(1.0, match[2]) == 1.0


def test_pmids_of_a_term_annotated_twice_are_merged() -> None:
    terms = ["HP:0000001", "HP:0000118", "HP:0001250"]
    parents = {"HP:0000118": ["HP:0000001"], "HP:0001250": ["HP:0000118"]}
    annotations = {"OMIM:1": [("HP:0001250", 0.5, ["PMID:1", "PMID:2"]), ("HP:0001250", None, ["PMID:2", "PMID:3"])]}
    index = PhenotypeIndex(terms, parents, annotations, {})
    assert index.pmids[("OMIM:1", "HP:0001250")] == ["PMID:1", "PMID:2", "PMID:3"]
    assert index.rank(["HP:0001250"])[0].pmids == ["PMID:1", "PMID:2", "PMID:3"]


# ---- the model on real data: all of HPO as pyhpo bundles it (2025-01) ----------------------------
ARACHNODACTYLY, ECTOPIA_LENTIS = "HP:0001166", "HP:0001083"


@pytest.fixture(scope="session")
def hpo() -> PhenotypeIndex:
    """The index of every HPO disease annotation, built from the ingest's items (what ``from_graph``
    reads back from a store, without the store: ~15 s)."""
    from ingest.hpo import hpo_items

    terms: list[str] = []
    parents: dict[str, list[str]] = defaultdict(list)
    annotations: dict[str, list] = defaultdict(list)
    negated: dict[str, set[str]] = defaultdict(set)
    other: dict[str, list[str]] = defaultdict(list)
    for item in hpo_items(genes=False):
        if isinstance(item, Entity) and item.id.startswith("HP:") and not item.obsolete:
            terms.append(item.id)
        elif isinstance(item, Relation) and item.type == "IS_A" and item.object.startswith("HP:"):
            parents[item.subject].append(item.object)
        elif isinstance(item, Relation) and item.type == "HAS_PHENOTYPE":
            if item.negated:
                negated[item.subject].add(item.object)
            else:
                frequency = frequency_evidence(item.evidence.get("frequency", []))
                annotations[item.subject].append((item.object, frequency, item.evidence.get("pmids", [])))
        elif isinstance(item, Relation) and item.type in OTHER_ASPECTS and not item.negated:
            other[item.subject].append(item.object)
    return PhenotypeIndex(sorted(terms), parents, annotations, negated, other)


def frequency_in(index: PhenotypeIndex, disease: str, term: str) -> float:
    """F(d, t): the largest frequency of the disease's annotations at or below the term (0 if none)."""
    x = index.term_index[term]
    s, e = index.prop_ptr[x], index.prop_ptr[x + 1]
    found = dict(zip(index.prop_disease[s:e].tolist(), index.prop_freq[s:e].tolist(), strict=True))
    return found.get(index.disease_index[disease], 0.0)


@pytest.mark.slow
def test_real_hpo_background_and_frequencies(hpo: PhenotypeIndex) -> None:
    assert len(hpo.diseases) > 12_000 and 0.3 < hpo.prior_frequency < 0.6
    # the background frequency never grows from a term to its child; the roots carry no evidence
    child = np.repeat(np.arange(len(hpo.terms)), [len(a) for a in hpo.ancestors])
    ancestor = np.concatenate(hpo.ancestors)
    assert (hpo.bg[ancestor] >= hpo.bg[child] - 1e-9).all()
    assert np.isneginf(hpo.lr_ic[[hpo.term_index["HP:0000001"], hpo.term_index["HP:0000118"]]]).all()
    # counts from a handful of patients ("1/1") are shrunk towards the pooled frequency, not taken as 100%
    one_of_one = (hpo.flat_counts[:, 0] == 1) & (hpo.flat_counts[:, 1] == 1)
    assert one_of_one.any() and (hpo.flat_freq[one_of_one] < 0.5).all()


@pytest.mark.slow
def test_real_hpo_a_very_frequent_annotation_beats_an_occasional_one(hpo: PhenotypeIndex) -> None:
    # Orphanet: arachnodactyly is very frequent in Marfan syndrome (ORPHA:558), occasional in ORPHA:2604
    assert frequency_in(hpo, "ORPHA:558", ARACHNODACTYLY) == pytest.approx(0.895)
    assert frequency_in(hpo, "ORPHA:2604", ARACHNODACTYLY) == pytest.approx(0.17)
    score, _, parts = hpo.scores([ARACHNODACTYLY], prefixes=["ORPHA"])
    marfan, other = hpo.disease_index["ORPHA:558"], hpo.disease_index["ORPHA:2604"]
    bg, eps = float(hpo.bg[hpo.term_index[ARACHNODACTYLY]]), LRParams().false_positive
    lr = np.exp(parts["term_lr"][0])
    assert lr[marfan] == pytest.approx((1 - eps) * 0.895 / bg + eps, rel=1e-4)
    assert lr[other] == pytest.approx((1 - eps) * 0.17 / bg + eps, rel=1e-4)
    assert lr[marfan] > lr[other] > 1
    assert score[marfan] > score[other]
    assert parts["resnik"][marfan] == parts["resnik"][other]  # Resnik sees one exact match in both
    # a term the disease has nothing in common with below the roots: the background share (eps)
    _, _, anaemia = hpo.scores(["HP:0001903"], baseline=False)
    assert math.exp(anaemia["term_lr"][0, marfan]) == pytest.approx(eps)


@pytest.mark.slow
def test_real_hpo_an_excluded_term_lowers_the_diseases_that_nearly_always_have_it(hpo: PhenotypeIndex) -> None:
    # All four have arachnodactyly very frequently; ectopia lentis: very frequent in homocystinuria
    # (ORPHA:394) and ORPHA:284979, frequent in Marfan syndrome (ORPHA:558), occasional in ORPHA:115.
    four = ["ORPHA:394", "ORPHA:284979", "ORPHA:558", "ORPHA:115"]
    assert [frequency_in(hpo, d, ARACHNODACTYLY) for d in four] == pytest.approx([0.895] * 4)
    assert [frequency_in(hpo, d, ECTOPIA_LENTIS) for d in four] == pytest.approx([0.895, 0.895, 0.545, 0.17])
    idx = [hpo.disease_index[d] for d in four]
    _, _, plain = hpo.scores([ARACHNODACTYLY], baseline=False)
    score, _, parts = hpo.scores([ARACHNODACTYLY], [ECTOPIA_LENTIS], baseline=False)
    change = parts["log10_lr"][idx] - plain["log10_lr"][idx]
    bg = float(hpo.bg[hpo.term_index[ECTOPIA_LENTIS]])
    assert change[:2] == pytest.approx([math.log10((1 - 0.895) / (1 - bg))] * 2, abs=1e-4)
    assert change[2:] == pytest.approx([-math.log10(1 - bg)] * 2, abs=1e-4)  # too rare to count against
    assert max(score[idx[:2]]) < min(score[idx[2:]])
    ranked = {c.disease: c for c in hpo.rank([ARACHNODACTYLY], [ECTOPIA_LENTIS], top_k=500)}
    assert "has HP:0001083, which the patient does not" in ranked["ORPHA:394"].contradictions
    assert ("HP:0001083", "excluded", pytest.approx((1 - 0.895) / (1 - bg), rel=1e-3)) in ranked[
        "ORPHA:394"
    ].likelihood_ratios
    # the full likelihood ratio (every frequency counts): Marfan syndrome now falls below ORPHA:115
    full, _, _ = hpo.scores([ARACHNODACTYLY], [ECTOPIA_LENTIS], params=LRParams(excluded_min_frequency=0.0))
    assert full[idx[2]] < full[idx[3]]


@pytest.mark.slow
def test_real_hpo_not_annotations_and_a_case(hpo: PhenotypeIndex) -> None:
    # ORPHA:199310 is annotated NOT to have global developmental delay (HP:0001263)
    assert hpo.term_index["HP:0001263"] in hpo.negated["ORPHA:199310"]
    _, _, parts = hpo.scores(["HP:0001263"], baseline=False)
    assert math.exp(parts["term_lr"][0, hpo.disease_index["ORPHA:199310"]]) == pytest.approx(0.001)
    # Marfan syndrome's hallmarks: arachnodactyly, ectopia lentis, aortic root aneurysm, tall stature
    case = [ARACHNODACTYLY, ECTOPIA_LENTIS, "HP:0002616", "HP:0000098"]
    score, baseline, _ = hpo.scores(case, prefixes=["OMIM"])
    assert hpo.rank_of(score, ["OMIM:154700"]) == 1
    assert hpo.rank_of(baseline, ["OMIM:154700"]) > 1  # both-direction Resnik misses it
    top = hpo.rank(case, prefixes=["OMIM"], top_k=1)[0]
    assert top.disease == "OMIM:154700" and len(top.matches) == 4 and top.log10_lr > 5


@pytest.mark.slow
def test_real_hpo_pyhpo_baseline_is_pyhpos_own_similarity(hpo: PhenotypeIndex) -> None:
    """``pyhpo_scores`` reproduces pyhpo's ``HPOSet.similarity`` (Resnik, funSimAvg, OMIM IC) on real
    HPO: for well- and barely-annotated diseases alike, and it ranks the same."""
    from pyhpo import HPOSet, Ontology

    Ontology()
    omim = {f"OMIM:{d.id}": d for d in Ontology.omim_diseases}
    case = ["HP:0001250", "HP:0000252", "HP:0001252", "HP:0001263", "HP:0000486"]  # seizure, microcephaly...
    ours = hpo.pyhpo_scores(case, prefixes=["OMIM"])
    assert np.isneginf(ours[hpo.disease_index["ORPHA:558"]])  # outside the namespace
    order = np.argsort(-ours, kind="stable")
    sizes = np.diff(np.append(hpo.offsets, len(hpo.flat_terms)))
    sample = [int(i) for i in order[:10]] + [
        int(i)
        for i in np.flatnonzero((sizes <= 2) & hpo._namespace_mask(["OMIM"]))[:10]  # one or two phenotypes
    ]
    query = HPOSet.from_queries(case)
    for i in sample:
        d = hpo.diseases[i]
        theirs = query.similarity(
            HPOSet.from_queries(sorted(omim[d].hpo)), kind="omim", method="resnik", combine="funSimAvg"
        )
        assert float(ours[i]) == pytest.approx(theirs, abs=2e-3), d
    # the sample has diseases whose set is larger than their phenotypes (a mode of inheritance...)
    assert any(len(omim[hpo.diseases[i]].hpo) > sizes[i] for i in sample[10:])


def test_an_annotation_seen_in_no_patient_is_no_match() -> None:
    """HPO's "0/11" (none of 11 patients) and "Excluded (0%)" say the disease lacks the feature: such an
    annotation matches nothing, cites nothing and contradicts no excluded term; a count above zero from
    another source for the same term still counts."""
    terms = ["HP:0000001", "HP:0000118", "HP:0001250", "HP:0000252", "HP:0000256"]
    parents = {t: ["HP:0000118"] for t in terms[2:]} | {"HP:0000118": ["HP:0000001"]}
    annotations = {
        "OMIM:1": [("HP:0001250", 0.9, []), ("HP:0000252", (0, 11), ["PMID:999"]), ("HP:0000256", 0.0, ["PMID:7"])],
        "OMIM:2": [("HP:0001250", 0.9, []), ("HP:0000252", (0, 4), []), ("HP:0000252", (2, 5), ["PMID:8"])],
        "OMIM:3": [("HP:0001250", 0.9, [])],
    }
    index = PhenotypeIndex(terms, parents, annotations, {})
    ranked = {c.disease: c for c in index.rank(["HP:0001250", "HP:0000252"], top_k=3)}
    assert ranked["OMIM:1"].score == ranked["OMIM:3"].score < ranked["OMIM:2"].score
    assert ranked["OMIM:1"].pmids == [] and ranked["OMIM:2"].pmids == ["PMID:8"]
    assert not [m for m in ranked["OMIM:1"].matches if m[1] == "HP:0000252"]
    excluded = {c.disease: c for c in index.rank(["HP:0001250"], ["HP:0000256"], top_k=3)}
    assert excluded["OMIM:1"].contradictions == [] and excluded["OMIM:1"].score == excluded["OMIM:3"].score


def test_gene_associations_negated_stated_twice_or_extracted(index: PhenotypeIndex, store: BaseGraphStore) -> None:
    """A negated association names no candidate gene; a symbol stated by two sources is listed once."""
    store.upsert_entities(
        [Entity(id="HGNC:2", name="GENE1", category="Gene"), Entity(id="NCBIGene:2", name="GENE2", category="Gene")]
    )
    store.upsert_relations(
        [
            Relation(subject="HGNC:2", type="ASSOCIATED_WITH", object="OMIM:100001", source="orphanet"),
            Relation(subject="NCBIGene:1", type="ASSOCIATED_WITH", object="OMIM:100001", source="other"),
            Relation(subject="NCBIGene:2", type="ASSOCIATED_WITH", object="OMIM:100002", source="llm", negated=True),
            # what a language model extracted from one passage is no curated annotation
            Relation(
                subject="NCBIGene:2", type="ASSOCIATED_WITH", object="OMIM:100003", source="llm-extraction",
                evidence={"passages": ["PMID:5#s1"], "model": "m"},
            ),
            Relation(
                subject="OMIM:100001", type="HAS_PHENOTYPE", object="HP:0001252", source="llm-extraction",
                evidence={"passages": ["PMID:5#s2"], "model": "m"}, negated=True,
            ),
            Relation(
                subject="OMIM:100003", type="HAS_PHENOTYPE", object="HP:0000256", source="llm-extraction",
                evidence={"passages": ["PMID:5#s3"], "model": "m"},
            ),
        ]
    )  # fmt: skip
    again = PhenotypeIndex.from_graph(store)
    assert again.genes == {"OMIM:100001": ["GENE1"]}
    assert "OMIM:100001" not in again.negated and index.set_sizes.tolist() == again.set_sizes.tolist()
    assert again.known_genes(["GENE2"]) == ([], ["GENE2"])
    assert [c.genes for c in again.rank(["HP:0001250"], genes=["GENE1"])] == [["GENE1"]]


def test_terms_that_say_nothing_about_the_disease_are_not_counted() -> None:
    """A mode of inheritance or the root is no phenotypic abnormality: not counted (no LR of ε for every
    disease), and named with why; so is an excluded term that an observed one is or implies."""
    terms = ["HP:0000001", "HP:0000005", "HP:0000006", "HP:0000118", "HP:0000707", "HP:0001250", "HP:0000256"]
    parents = {
        "HP:0000005": ["HP:0000001"],
        "HP:0000006": ["HP:0000005"],
        "HP:0000118": ["HP:0000001"],
        "HP:0000707": ["HP:0000118"],
        "HP:0001250": ["HP:0000707"],
        "HP:0000256": ["HP:0000118"],
    }
    annotations = {"OMIM:1": [("HP:0001250", 0.9, [])], "OMIM:2": [("HP:0000256", 0.9, [])]}
    index = PhenotypeIndex(terms, parents, annotations, {})
    case = index.read_case(
        ["HP:0001250", "HP:0000006", "HP:9999999"], ["HP:0001250", "HP:0000707", "HP:0000118", "HP:0000256"]
    )
    assert case.observed == ["HP:0001250"] and case.excluded == ["HP:0000256"] and case.unknown == ["HP:9999999"]
    assert set(case.ignored) == {"HP:0000006", "HP:0000118", "HP:0001250", "HP:0000707"}
    assert case.ignored["HP:0000006"].startswith("not a phenotypic abnormality")
    assert case.ignored["HP:0000707"].startswith("an observed term is or implies it")
    alone, with_inheritance = index.rank(["HP:0001250"]), index.rank(["HP:0001250", "HP:0000006"])
    assert [(c.disease, c.score, c.log10_lr, c.likelihood_ratios) for c in alone] == [
        (c.disease, c.score, c.log10_lr, c.likelihood_ratios) for c in with_inheritance
    ]
    assert index.read_case(["HP:0000006", "HP:0000118"]).observed == []


# ---- the embedding view -------------------------------------------------------------------------
def meaning_index() -> PhenotypeIndex:
    """Two branches under Phenotypic abnormality that share nothing below it: the observed X (branch A)
    is close in meaning to Y (branch B), which OMIM:1 has; OMIM:2 has Z, far from X in meaning."""
    terms = ["HP:0000001", "HP:0000118", "HP:0000010", "HP:0000011", "HP:0000020", "HP:0000021", "HP:0000022"]
    parents = {
        "HP:0000118": ["HP:0000001"],
        "HP:0000010": ["HP:0000118"],  # branch A
        "HP:0000011": ["HP:0000010"],  # X
        "HP:0000020": ["HP:0000118"],  # branch B
        "HP:0000021": ["HP:0000020"],  # Y
        "HP:0000022": ["HP:0000020"],  # Z
    }
    annotations = {"OMIM:1": [("HP:0000021", None, [])], "OMIM:2": [("HP:0000022", None, [])]}
    return PhenotypeIndex(terms, parents, annotations, {})


def meaning_vectors(index: PhenotypeIndex) -> np.ndarray:
    vectors = np.zeros((len(index.terms), 3), dtype=np.float32)
    vectors[index.term_index["HP:0000011"]] = [1.0, 0.2, 0.0]  # X
    vectors[index.term_index["HP:0000021"]] = [0.9, 0.3, 0.1]  # Y: close to X
    vectors[index.term_index["HP:0000022"]] = [0.0, 0.1, 1.0]  # Z: far
    return vectors


def test_the_embedding_view_matches_terms_across_branches() -> None:
    """Without term vectors nothing separates the two diseases (no ancestor shared below the roots);
    with them the disease whose annotation is close in meaning ranks first, and says which annotation."""
    index = meaning_index()
    before = index.scores(["HP:0000011"])[0]
    assert before[index.disease_index["OMIM:1"]] == before[index.disease_index["OMIM:2"]]
    assert index.views() == ["likelihood_ratio", "resnik"] and index.rank(["HP:0000011"])[0].embedding is None
    index.attach_vectors(meaning_vectors(index), "test-model")
    assert index.views() == ["likelihood_ratio", "resnik", "embedding"]
    first, second = index.rank(["HP:0000011"], top_k=2)
    assert (first.disease, second.disease) == ("OMIM:1", "OMIM:2")
    assert first.matches == [] and first.semantic_matches[0][:2] == ("HP:0000011", "HP:0000021")
    x, y = meaning_vectors(index)[[index.term_index["HP:0000011"], index.term_index["HP:0000021"]]]
    cosine = float(x @ y / np.linalg.norm(x) / np.linalg.norm(y))
    assert first.semantic_matches[0][2] == pytest.approx(cosine, abs=1e-3) and first.embedding == pytest.approx(
        cosine, abs=1e-3
    )
    assert second.embedding is not None and second.embedding < first.embedding
    # the weight 0 turns the view off: the scores are the two views' again
    off = index.scores(["HP:0000011"], params=LRParams(embedding_weight=0))[0]
    assert np.array_equal(off, before) and index.views(LRParams(embedding_weight=0)) == ["likelihood_ratio", "resnik"]


def test_a_term_without_a_vector_matches_nothing_by_meaning() -> None:
    index = meaning_index()
    vectors = meaning_vectors(index)
    vectors[index.term_index["HP:0000021"]] = 0.0  # Y was never embedded
    index.attach_vectors(vectors, "test-model")
    ranked = {c.disease: c for c in index.rank(["HP:0000011"], top_k=2)}
    assert ranked["OMIM:1"].embedding == 0.0 and ranked["OMIM:2"].embedding > 0.0
    assert ranked["OMIM:1"].semantic_matches == [] and ranked["OMIM:2"].semantic_matches[0][1] == "HP:0000022"
    with pytest.raises(ValueError, match="one row per term"):
        index.attach_vectors(vectors[:3], "test-model")


def test_term_vectors_survive_the_cache() -> None:
    """Pickled and loaded again (the service's cache), the index keeps its vectors and ranks the same;
    the per-annotation layout is rebuilt on first use."""
    index = meaning_index()
    index.attach_vectors(meaning_vectors(index), "test-model")
    expected = index.scores(["HP:0000011"])[0]
    again = pickle.loads(pickle.dumps(index))
    assert "_annotation_cache" not in again.__dict__ and again.vector_model == "test-model"
    assert np.array_equal(again.scores(["HP:0000011"])[0], expected)


def test_one_diseases_subtypes_and_descriptions_are_one_entry(store: BaseGraphStore) -> None:
    """The answer's entries gather the ranked diseases the graph maps to one Disease Ontology class (a
    disease's numbered OMIM subtypes), to each other or that bear one name (one disease in OMIM and
    Orphanet); each member
    keeps its own rank, a disease mapped to nothing else is an entry of its own, and an entry's class is
    what all its members share."""
    from kg.differential.case import Candidate
    from kg.differential.groups import disease_classes, group_ranked

    store.upsert_entities(
        [Entity(id=d, name=d, category="Disease") for d in ("OMIM:1", "OMIM:2", "OMIM:3", "OMIM:4", "ORPHA:5")]
        + [
            Entity(id="ORPHA:778", name="Rett syndrome", category="Disease"),
            Entity(id="OMIM:312750", name="Rett  Syndrome", category="Disease"),
        ]
        + [
            Entity(id="DOID:12930", name="dilated cardiomyopathy", category="Disease"),
            Entity(id="DOID:0110425", name="dilated cardiomyopathy 1A", category="Disease"),
            Entity(id="DOID:630", name="genetic disease", category="Disease"),
        ]
    )
    store.upsert_relations(
        [
            Relation(subject="DOID:12930", type="SAME_AS", object="OMIM:1", source="xref"),
            Relation(subject="DOID:12930", type="SAME_AS", object="OMIM:3", source="xref"),
            Relation(subject="DOID:0110425", type="SAME_AS", object="OMIM:3", source="xref"),
            Relation(subject="OMIM:4", type="SAME_AS", object="ORPHA:5", source="xref"),
            # the class's own IS_A maps no disease to "genetic disease": no key of OMIM:1 or OMIM:3
            Relation(subject="DOID:12930", type="IS_A", object="DOID:630", source="doid"),
        ]
    )
    classes = disease_classes(store, ["OMIM:1", "OMIM:2", "OMIM:3", "OMIM:4", "ORPHA:5"])
    assert classes["OMIM:3"] == {"OMIM:3", "DOID:12930", "DOID:0110425", "name:omim:3"}
    assert classes["OMIM:2"] == {"OMIM:2", "name:omim:2"}
    ranked = [Candidate(d, 5.0 - i, 0.0) for i, d in enumerate(["OMIM:1", "OMIM:2", "ORPHA:5", "OMIM:3", "OMIM:4"])]
    entries = group_ranked(ranked, classes, entries=5)
    assert [[(r, c.disease) for r, c in e.members] for e in entries] == [
        [(1, "OMIM:1"), (4, "OMIM:3")],
        [(2, "OMIM:2")],
        [(3, "ORPHA:5"), (5, "OMIM:4")],
    ]
    assert [e.group for e in entries] == ["DOID:12930", None, "ORPHA:5"]
    # one disease named alike in OMIM and Orphanet, with no cross-reference between them, is one entry
    rett = disease_classes(store, ["ORPHA:778", "OMIM:312750"])
    both = group_ranked([Candidate("ORPHA:778", 2.0, 0.0), Candidate("OMIM:312750", 1.0, 0.0)], rett, 5)
    assert [([c.disease for _, c in e.members], e.group) for e in both] == [(["ORPHA:778", "OMIM:312750"], "ORPHA:778")]
    # with room for two entries, a later member still joins its entry; a disease of its own does not fit
    two = group_ranked(ranked, classes, entries=2)
    assert [[c.disease for _, c in e.members] for e in two] == [["OMIM:1", "OMIM:3"], ["OMIM:2"]]
    # an entry keeps what all its members share: a third disease that shares only the first's subtype
    # class (not the class the entry's members share) opens an entry of its own
    narrowed = {
        "OMIM:1": frozenset({"OMIM:1", "DOID:A", "DOID:B"}),
        "OMIM:2": frozenset({"OMIM:2", "DOID:A"}),
        "OMIM:3": frozenset({"OMIM:3", "DOID:B"}),
    }
    ranked = [Candidate(d, 3.0 - i, 0.0) for i, d in enumerate(["OMIM:1", "OMIM:2", "OMIM:3"])]
    assert [[c.disease for _, c in e.members] for e in group_ranked(ranked, narrowed, 5)] == [
        ["OMIM:1", "OMIM:2"],
        ["OMIM:3"],
    ]


def test_the_patients_sex_and_age_weigh_inheritance_and_onset(store: BaseGraphStore) -> None:
    """Three diseases alike in their phenotypes: an X-linked recessive one ranks first for a boy and last
    for a girl (LR 1.8 and 0.2), one whose only onset is in adulthood drops for a 3-year-old (LR 0.2)
    and not for a 30-year-old; each factor is listed with the inheritance or onset term behind it, and a
    patient of unknown sex and age changes nothing."""
    from kg.differential.patient import Patient

    terms = {"HP:0000001": None, "HP:0000118": "HP:0000001", "HP:0000005": "HP:0000001"}
    terms |= {"HP:0000007": "HP:0000005", "HP:0001417": "HP:0000005", "HP:0001419": "HP:0001417"}
    terms |= {"HP:0003674": "HP:0000001", "HP:0003581": "HP:0003674", "HP:0003577": "HP:0003674"}
    terms |= {"HP:0001250": "HP:0000118", "HP:0001252": "HP:0000118"}
    store.upsert_entities([Entity(id=t, name=t, category="Phenotype") for t in terms])
    store.upsert_entities([Entity(id=d, name=d, category="Disease") for d in ("OMIM:1", "OMIM:2", "OMIM:3")])
    store.upsert_relations(
        [Relation(subject=t, type="IS_A", object=p, source="hp") for t, p in terms.items() if p]
        + [phenotype(d, t) for d in ("OMIM:1", "OMIM:2", "OMIM:3") for t in ("HP:0001250", "HP:0001252")]
        + [
            # X-linked recessive (HPO states the general "X-linked" beside it), autosomal recessive twice
            Relation(subject="OMIM:1", type="HAS_INHERITANCE", object="HP:0001419", source="hpo"),
            Relation(subject="OMIM:1", type="HAS_INHERITANCE", object="HP:0001417", source="hpo"),
            Relation(subject="OMIM:2", type="HAS_INHERITANCE", object="HP:0000007", source="hpo"),
            Relation(subject="OMIM:2", type="HAS_CLINICAL_COURSE", object="HP:0003581", source="hpo"),
            Relation(subject="OMIM:3", type="HAS_INHERITANCE", object="HP:0000007", source="hpo"),
            Relation(subject="OMIM:3", type="HAS_CLINICAL_COURSE", object="HP:0003577", source="hpo"),
        ]
    )
    index = PhenotypeIndex.from_graph(store)
    case = ["HP:0001250", "HP:0001252"]

    def ranked(patient: Patient | None) -> list[tuple[str, list]]:
        return [
            (c.disease, [lr for lr in c.likelihood_ratios if lr[1] in ("sex", "age")])
            for c in index.rank(case, patient=patient)
        ]

    plain = index.scores(case, baseline=False)[0]
    assert np.allclose(index.scores(case, baseline=False, patient=Patient())[0], plain)
    boy = ranked(Patient("male"))
    assert boy[0] == ("OMIM:1", [("HP:0001419", "sex", 1.8)])
    girl = ranked(Patient("female"))
    assert girl[-1] == ("OMIM:1", [("HP:0001419", "sex", 0.2)])
    toddler = ranked(Patient(None, 3.0))
    assert toddler[-1] == ("OMIM:2", [("HP:0003581", "age", 0.2)])
    assert all(not why for _, why in ranked(Patient(None, 30.0)))
