"""The text pipeline shared by ingest (passages) and query-time linking: scispacy's rule tokenizer,
sentence boundaries, scispacy's abbreviation detector, a token normaliser the lexicon matches on,
and a spaCy NER model's entity spans when one is configured. spaCy is imported by
:func:`build_pipeline` alone (~1 s), which commands that only normalise tokens or read the graph do not
pay, and without torch unless an NER model is configured (:func:`_import_spacy`).
"""

from __future__ import annotations

import sys
import threading
import unicodedata
import warnings
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

__all__ = ["build_pipeline", "norm_token", "normalize_doc", "SentenceMode"]

# "rule" (spaCy's sentencizer) by default: on 200 PubMedQA abstracts within 1% of scispacy's pySBD boundaries
# (1,921 vs 1,940 sentences) at 7x the speed (757 vs 107 abstracts/s on 2 cores).
SentenceMode = Literal["rule", "pysbd"]
_lock = threading.Lock()


def norm_token(text: str) -> str:
    """The form the lexicon matches on: accents and compatibility forms folded (``Sjögren`` written
    with a combining diaeresis or not, ``Café`` -> ``cafe``); short all-caps tokens (abbreviations,
    gene symbols) keep their case; everything else is case-folded and de-pluralised (``Seizures`` ->
    ``seizure``, ``arteries`` -> ``artery``). Applied identically to lexicon terms and text, so any
    rule is safe."""
    if not text.isascii():
        text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    if len(text) <= 6 and text.isupper() and any(c.isalpha() for c in text):
        return text
    low = text.casefold()
    if len(low) > 4 and low.endswith("ies"):
        return low[:-3] + "y"
    if len(low) > 4 and low.endswith("sses"):
        return low[:-2]
    if len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is", "os")):
        return low[:-1]
    return low


def normalize_doc(doc: Doc) -> Doc:
    for token in doc:
        token.norm_ = norm_token(token.text)
    return doc


def _norm_component(doc: Doc) -> Doc:
    return normalize_doc(doc)


def _paragraph_component(doc: Doc) -> Doc:
    """A line break ends a sentence (titles and abstract sections are joined by line breaks)."""
    for token in doc[1:]:
        previous = doc[token.i - 1]
        if "\n" in previous.whitespace_ or (previous.is_space and "\n" in previous.text):
            token.is_sent_start = True
    return doc


class _LockedAbbreviations:
    """scispacy's abbreviation detector, one document at a time: it adds each document's rules to a
    matcher shared by every caller and removes them afterwards, so two threads (the API's worker
    pool) running it at once fail with E109/E175 or see each other's abbreviations."""

    def __init__(self, nlp: Language, name: str) -> None:
        from scispacy.abbreviation import AbbreviationDetector

        self._detector = AbbreviationDetector(nlp, name=name)
        self._lock = threading.Lock()

    def __call__(self, doc: Doc) -> Doc:
        with self._lock:
            return self._detector(doc)


def _abbreviation_component(nlp: Language, name: str) -> _LockedAbbreviations:
    return _LockedAbbreviations(nlp, name)


def _register_components() -> None:
    """medkg's components in spaCy's registry (once per process; called under ``_lock``)."""
    from spacy.language import Language

    if not Language.has_factory("medkg_norm"):
        Language.component("medkg_norm", func=_norm_component)
        Language.component("medkg_paragraphs", func=_paragraph_component)
        Language.factory("medkg_abbreviations", func=_abbreviation_component)


class _TorchHidden:
    """A meta-path finder under which ``import torch`` fails in the thread that installed it: thinc sees no
    torch while spaCy is imported there, and any other thread imports torch as usual meanwhile."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "torch" and threading.get_ident() == self.thread:
            raise ImportError("torch is hidden from thinc while spaCy is imported (kg.nlp)")
        return None


def _import_spacy(with_torch: bool) -> None:
    """Import spaCy (and scispacy's sentence segmenter, which registers "pysbd_sentencizer"). thinc, spaCy's
    machine-learning layer, imports torch whenever it is installed: 3 s of every process that splits
    sentences (2-core AMD EPYC), for thinc's torch models that medkg's rule pipeline never runs, while the
    embedders run without torch on their ONNX path. Unless ``with_torch`` (a configured NER model may be a
    transformer) or torch is in already, thinc is imported seeing no torch (``has_torch`` False); torch
    stays importable for whatever else needs it, in this thread afterwards and in the others throughout."""
    hidden = None
    if not with_torch and "torch" not in sys.modules and "thinc" not in sys.modules:
        hidden = _TorchHidden()
        sys.meta_path.insert(0, hidden)
    try:
        import scispacy.custom_sentence_segmenter  # noqa: F401
        import spacy  # noqa: F401
    finally:
        if hidden is not None:
            sys.meta_path.remove(hidden)


@lru_cache(maxsize=4)
def build_pipeline(sentences: SentenceMode = "rule", ner_model: str | None = None) -> Language:
    """A cached pipeline: tokenizer, sentences, abbreviations, token norms (and NER when configured).
    One pipeline serves every thread."""
    _import_spacy(with_torch=bool(ner_model))
    import spacy

    # scispacy's tokenizer regex triggers a FutureWarning in re; its abbreviation detector warns on
    # every document without a definition. Neither says anything actionable.
    warnings.filterwarnings("ignore", message="Possible set union", category=FutureWarning)
    warnings.filterwarnings("ignore", message=r"\[W036\]", category=UserWarning)
    with _lock:
        _register_components()
        if ner_model:
            try:
                nlp = spacy.load(ner_model, exclude=["lemmatizer", "attribute_ruler", "tagger"])
            except OSError as exc:
                raise ValueError(f"cannot load the NER model {ner_model!r}: {exc}") from exc
        else:
            from scispacy.custom_tokenizer import combined_rule_tokenizer

            nlp = spacy.blank("en")
            nlp.tokenizer = combined_rule_tokenizer(nlp)
        if not ({"parser", "senter", "sentencizer", "pysbd_sentencizer"} & set(nlp.pipe_names)):
            nlp.add_pipe("pysbd_sentencizer" if sentences == "pysbd" else "sentencizer", first=True)
            nlp.add_pipe("medkg_paragraphs", after="pysbd_sentencizer" if sentences == "pysbd" else "sentencizer")
        nlp.add_pipe("medkg_abbreviations")
        nlp.add_pipe("medkg_norm")
    return nlp
