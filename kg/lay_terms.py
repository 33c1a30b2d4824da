"""Everyday words for clinical terms that the ontologies do not carry, read in questions only.

HPO's own ``layperson`` synonyms ("High blood pressure", "Small head", "Heart attack": some 8,000, kept
at ingest whatever their scope) are the main lay vocabulary. This table adds the consumer words that
neither HPO nor the Disease Ontology has (the Consumer Health Vocabulary is not in any package registry:
it ships inside the UMLS, under licence). Each maps to a clinical name of the graph, resolved through the
linker's lexicon, so a word of this table links to whatever the graph calls that concept. Questions only:
in the literature "fits" fits a model and "consumption" is eaten.
"""

from __future__ import annotations

#: everyday words -> a name or synonym of the concept in the graph (HPO, Disease Ontology)
LAY_TERMS: dict[str, str] = {
    "fits": "seizure",
    "convulsions": "seizure",
    "sugar diabetes": "diabetes mellitus",
    "high sugar": "hyperglycemia",
    "brittle bones": "osteoporosis",
    "thinning bones": "osteoporosis",
    "short of breath": "dyspnea",
    "yellow eyes": "jaundice",
    "pins and needles": "paresthesia",
    "bedwetting": "enuresis",
    "bed wetting": "enuresis",
    "nosebleeds": "epistaxis",
    "floppy baby": "hypotonia",
    "hard of hearing": "hearing impairment",
    "short for age": "short stature",
    "slow growth": "growth delay",
    "tummy ache": "abdominal pain",
    "stomach ache": "abdominal pain",
    "belly pain": "abdominal pain",
    "the runs": "diarrhea",
    "hole in the heart": "ventricular septal defect",
    "blue baby": "cyanosis",
    "swollen ankles": "edema",
    "mad cow disease": "Creutzfeldt-Jakob disease",
    "lou gehrig disease": "amyotrophic lateral sclerosis",
    "wear and tear arthritis": "osteoarthritis",
    "womb cancer": "uterine cancer",  # the womb is the uterus; endometrial cancer is one kind
    "bowel cancer": "colorectal cancer",
    "black stool": "melena",
    "spinning sensation": "vertigo",
    "sleeplessness": "insomnia",
    "weak muscles": "muscle weakness",
    "big calves": "calf muscle pseudohypertrophy",
    "crossed eye": "strabismus",
    "thin bones": "osteoporosis",
    "falling sickness": "epilepsy",
    "shaking palsy": "Parkinson's disease",
    "salty sweat": "elevated sweat chloride",
    "water on the brain": "hydrocephalus",
    "lazy eye": "amblyopia",
    "pink eye": "conjunctivitis",
    "hives": "urticaria",
    "heartburn": "gastroesophageal reflux",
    "mini stroke": "transient ischemic attack",
    "enlarged heart": "cardiomegaly",
    "kidney stones": "nephrolithiasis",
    "gallstones": "cholelithiasis",
    "piles": "hemorrhoids",
    "cradle cap": "seborrheic dermatitis",
    "tongue tie": "ankyloglossia",
    "club foot": "talipes equinovarus",
    "wry neck": "torticollis",
    "pigeon chest": "pectus carinatum",
    "funnel chest": "pectus excavatum",
    "hay fever": "allergic rhinitis",
}

#: body parts in everyday words -> the word the ontologies' names use for the part, read in a question's
#: "X of the Y" and "X in the Y" (kg/linker.py, inverted names) with that word's other forms: "cancer of
#: the gullet" is esophagus (esophageal) cancer, "cancer of the neck of the womb" cervix (cervical) cancer,
#: "cancer of the eye" ocular cancer (the Disease Ontology has no "eye cancer"); alone, a part whose word
#: names an entity links to it as an everyday word of :data:`LAY_TERMS` does
BODY_PARTS: dict[str, str] = {
    "gullet": "esophagus",
    "food pipe": "esophagus",
    "windpipe": "trachea",
    "voice box": "larynx",
    "neck of the womb": "cervix",
    "lymph glands": "lymphatic system",
    "lymph nodes": "lymphatic system",
    "eye": "ocular",
    "eyeball": "ocular",
}
