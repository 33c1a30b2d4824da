"""The composition root: the one place that reads settings and builds stores, indexes and models."""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kg import threads
from kg.errors import NotConfigured
from kg.graph import BaseGraphStore, build_graph_store
from kg.settings import Settings, load_settings
from service.data_lock import DataDirLock, WriterLock

# The indexes, models and linker are imported by the properties that build them: a command that reads the
# graph alone (`medkg stats`, `entity`, `paths`) does not load FAISS, bm25s/SciPy or spaCy.
if TYPE_CHECKING:
    from spacy.language import Language

    from ingest.llm_extract import MergeResult
    from ingest.pubmed.entrez import EntrezClient
    from ingest.radiology_reports import ReportStore
    from kg.differential import PhenotypeCache, PhenotypeIndex
    from kg.embedders import TextEmbedder
    from kg.entity_index import EntityIndex
    from kg.linker import EntityLinker
    from kg.name_index import NameIndex
    from kg.phrase_index import PhraseIndex
    from kg.retrieval.retriever import Retriever
    from kg.text_index import TextIndex
    from multimodal.deid import Pseudonymizer
    from multimodal.encoders import ImageEncoder
    from multimodal.image_index import ImageIndex
    from service.qa.engine import QAEngine
    from service.qa.graph_sessions import GraphSessionStore
    from service.qa.llm import LLMAnswerer
    from service.qa.sessions import SessionStore
    from service.radiology.generator import ReportGenerator

__all__ = ["Container", "build_graph_store"]

logger = logging.getLogger("medkg.container")


class cached_property(functools.cached_property):  # noqa: N801 - used as functools' is
    """:func:`functools.cached_property` built once per container even when threads race for it (the
    served demo's build, the readiness warm-up and requests; Python 3.12 dropped functools' lock)."""

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        try:
            return instance.__dict__[self.attrname]
        except KeyError:
            with instance._build_lock:
                if self.attrname in instance.__dict__:
                    return instance.__dict__[self.attrname]
                return super().__get__(instance, owner)


#: Components :meth:`Container.close` keeps: models, which hold no open file or connection.
_KEPT_ON_CLOSE = frozenset({"text_embedder", "nlp", "image_encoder"})


class Container:
    """Lazily built components for one process; ``close()`` releases them."""

    def __init__(
        self, settings: Settings | None = None, graph: BaseGraphStore | None = None, read_only: bool = False
    ) -> None:
        """``graph``: an open store to use instead of the configured one (the caller closes it).
        ``read_only``: the indexes are opened as a reader beside the data dir's writer (`medkg serve` over
        Neo4j, one of several replicas): nothing written, each generation an ingest publishes opened at
        the next search."""
        self.settings = settings or load_settings()
        self.read_only = read_only
        self._build_lock = threading.RLock()
        threads.configure(faiss=self.settings.faiss_threads, torch=self.settings.torch_threads)
        self._owns_graph = graph is None
        self._data_lock = DataDirLock(self.settings.data_dir)
        self._writer_lock = WriterLock(self.settings.data_dir)
        if graph is not None:
            self.__dict__["graph"] = graph

    def _use_data_dir(self) -> None:
        """Hold the data dir's shared lock (:mod:`service.data_lock`) from the first component that opens
        something in it until :meth:`close`: backup and restore wait for no one, they are refused.
        :class:`DataDirBusy` while a backup or restore runs."""
        try:
            self._data_lock.acquire("opening the data dir")
        except PermissionError as exc:  # a data dir this process cannot write: nothing to guard
            logger.warning("the data dir's lock file cannot be created (%s); going on without it", exc)

    def claim_writer(self, what: str) -> None:
        """Become the data dir's one writer (:class:`service.data_lock.WriterLock`) until :meth:`close`:
        loads, reindexing and relinking call it first. :class:`DataDirBusy` naming the writer holding it."""
        if self.read_only:
            raise ValueError("a read-only container cannot write")
        self._use_data_dir()
        self._writer_lock.acquire(what)

    @cached_property
    def graph(self) -> BaseGraphStore:
        self._use_data_dir()
        return build_graph_store(self.settings)

    @cached_property
    def text_embedder(self) -> TextEmbedder:
        from kg.embedders import build_embedder

        return build_embedder(self.settings)

    @cached_property
    def entity_index(self) -> EntityIndex:
        from kg.entity_index import EntityIndex

        self._use_data_dir()
        return EntityIndex(self.settings.data_dir / "indexes", self.text_embedder, read_only=self.read_only)

    @cached_property
    def phrase_index(self) -> PhraseIndex:
        from kg.phrase_index import PhraseIndex

        self._use_data_dir()
        return PhraseIndex(self.settings.data_dir / "indexes", self.text_embedder, read_only=self.read_only)

    @cached_property
    def text_index(self) -> TextIndex:
        from kg.text_index import TextIndex

        self._use_data_dir()
        return TextIndex(self.settings.data_dir / "indexes", self.text_embedder, read_only=self.read_only)

    @cached_property
    def nlp(self) -> Language:
        from kg.nlp import build_pipeline

        return build_pipeline(self.settings.sentence_splitter, self.settings.ner_model)

    @cached_property
    def linker(self) -> EntityLinker:
        """Built from the graph as it is now (a few seconds for ~60k entities)."""
        return self._linker()

    def _linker(self, exclude_sources: tuple[str, ...] = ()) -> EntityLinker:
        from kg.linker import EntityLinker, Lexicon

        return EntityLinker(
            self.nlp,
            Lexicon.build(self.graph, self.nlp, exclude_sources=exclude_sources),
            self.entity_index,
            threshold=self.settings.link_threshold,
            query_threshold=self.settings.link_query_threshold,
            phrase_index=self.phrase_index,
            phrase_threshold=self.settings.link_phrase_threshold,
        )

    @cached_property
    def document_linker(self) -> EntityLinker:
        """The linker of literature and report loads: as :attr:`linker`, less the MeSH descriptors that
        article headings created (name only). What a load links then does not depend on what earlier
        loads, or an interrupted run of this one, added: a resumed load ends as an uninterrupted one."""
        from ingest.pubmed.load import MESH_HEADING_SOURCE

        return self._linker(exclude_sources=(MESH_HEADING_SOURCE,))

    @cached_property
    def name_index(self) -> NameIndex:
        """Name and synonym completion (the web page's autocomplete), from one scan of the graph."""
        from kg.name_index import NameIndex

        return NameIndex.from_graph(self.graph)

    @cached_property
    def phenotype_index(self) -> PhenotypeIndex:
        """Built from the graph's HPO annotations (~30 s for all of HPO), its terms' vectors taken from
        the entity index (each term missing there or stale embedded then: ~2 min for all of HPO on 2
        cores), and cached in the data dir until the graph's counts or the embedding model change (a
        load that updates edges in place, which leaves the counts as they were, calls
        :meth:`forget_phenotype_cache`). A cache that cannot be loaded (damaged, written by another
        version, or naming anything but the index's own classes and numpy arrays) is rebuilt."""
        self._use_data_dir()
        cached = self._cached_phenotype_index()
        if cached is not None:
            return cached
        index = self._build_phenotype_index()
        self._phenotype_cache.save(index)
        return index

    def _cached_phenotype_index(self) -> PhenotypeIndex | None:
        """The cached phenotype index if it was built from what the graph and the settings hold now."""
        return self._phenotype_cache.load()

    def _build_phenotype_index(self) -> PhenotypeIndex:
        from kg.differential import PhenotypeIndex

        index = PhenotypeIndex.from_graph(self.graph)
        if index.terms:
            embedded = index.embed_terms(self.graph, self.entity_index)
            if embedded:
                logger.info("phenotype index: %d HPO terms embedded (not in the entity index)", embedded)
        return index

    @property
    def _phenotype_cache(self) -> PhenotypeCache:
        """The phenotype index's cache in the data dir, stamped with the graph's counts and the embedder."""
        from kg.differential import PhenotypeCache, phenotype_stamp

        return PhenotypeCache(
            self.settings.data_dir / "indexes" / "phenotypes.pkl",
            lambda: phenotype_stamp(self.graph.stats(), self.text_embedder.signature),
        )

    def forget_phenotype_cache(self) -> None:
        """Drop the cached phenotype index (and this container's copy): the next use rebuilds it."""
        self._phenotype_cache.forget()
        self.__dict__.pop("phenotype_index", None)

    @cached_property
    def retriever(self) -> Retriever:
        from kg.retrieval.retriever import Retriever

        return Retriever(
            self.graph,
            self.linker,
            self.entity_index,
            self.text_index,
            self.text_embedder,
            search_floor=self.settings.search_floor,
            phenotypes=lambda: self.phenotype_index,
        )

    @cached_property
    def sessions(self) -> SessionStore | GraphSessionStore:
        """Conversation sessions: in the graph store when it is Neo4j (every API replica sees them),
        else in ``<data dir>/sessions.sqlite``."""
        given = self.__dict__.get("graph")  # a store handed in, or one opened already, says; else the settings
        if given is None:
            in_graph = self.settings.graph_backend == "neo4j"
        else:  # a Neo4j store has imported its module: not imported for the embedded store (the driver: 0.5 s)
            neo4j_store = sys.modules.get("kg.graph.neo4j_store")
            in_graph = neo4j_store is not None and isinstance(given, neo4j_store.Neo4jGraphStore)
        if in_graph:
            from service.qa.graph_sessions import GraphSessionStore

            return GraphSessionStore(
                self.graph, ttl_s=self.settings.session_ttl_s, half_life_s=self.settings.session_half_life_s
            )
        from service.qa.sessions import SessionStore

        self._use_data_dir()
        return SessionStore(
            self.settings.data_dir / "sessions.sqlite",
            ttl_s=self.settings.session_ttl_s,
            half_life_s=self.settings.session_half_life_s,
        )

    @cached_property
    def llm_answerer(self) -> LLMAnswerer | None:
        """The LLM answer path, or None when no LLM is configured (answers are then extractive)."""
        s = self.settings
        if not s.llm_enabled or not s.llm_model:
            return None
        from service.qa.llm import LLMAnswerer

        return LLMAnswerer(
            s.llm_base_url or "",
            s.llm_model,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            timeout_s=s.llm_timeout_s,
            max_retries=s.llm_max_retries,
        )

    @cached_property
    def qa(self) -> QAEngine:
        from service.qa.engine import QAEngine
        from service.qa.extractive import ExtractiveComposer

        composer = ExtractiveComposer(
            fact_floor=self.settings.qa_fact_floor, passage_floor=self.settings.qa_passage_floor
        )
        from service.radiology.images import similar_study_evidence

        def images(image, image_id):  # noqa: ANN001, ANN202 - DicomImage | None, str | None
            return similar_study_evidence(self.image_index, self.reports, image, image_id)

        return QAEngine(
            self.retriever,
            composer,
            self.llm_answerer,
            self.sessions,
            default_budget=self.settings.qa_budget_tokens,
            image_evidence=images,
        )

    @cached_property
    def pseudonymizer(self) -> Pseudonymizer:
        """Keyed UID pseudonyms for DICOM de-identification (MEDKG_DEID_KEY, else a key file in the data dir)."""
        from multimodal.deid import Pseudonymizer, resolve_key

        self._use_data_dir()
        return Pseudonymizer(resolve_key(self.settings.deid_key, self.settings.data_dir))

    @cached_property
    def image_encoder(self) -> ImageEncoder:
        from multimodal.encoders import build_image_encoder

        return build_image_encoder(self.settings.image_encoder, device=self.settings.embedding_device)

    @cached_property
    def image_index(self) -> ImageIndex:
        from multimodal.image_index import ImageIndex

        self._use_data_dir()
        return ImageIndex(
            self.settings.data_dir / "indexes", self.image_encoder, thumbnails=self.settings.image_thumbnails,
            read_only=self.read_only,
        )  # fmt: skip

    @cached_property
    def reports(self) -> ReportStore:
        """Radiology reports by document id (indication, findings, impression), next to the text index."""
        from ingest.radiology_reports import report_store_for

        return report_store_for(self.text_index)

    @cached_property
    def report_generator(self) -> ReportGenerator:
        from service.radiology.generator import ReportGenerator

        return ReportGenerator(
            self.text_index,
            self.reports,
            retriever=self.retriever,
            image_index=self.image_index,
            llm=self.llm_answerer,
            text_floor=self.settings.search_floor,
            fact_floor=self.settings.qa_fact_floor,
        )

    def triple_merger(self) -> Callable[[str, str], MergeResult]:
        """LLM triple extraction of one passage merged into the graph (needs MEDKG_LLM_BASE_URL)."""
        from ingest.llm_extract import TripleExtractor, merge_extraction

        s = self.settings
        if not s.llm_enabled or not s.llm_model:
            raise NotConfigured("triple extraction needs an LLM: set MEDKG_LLM_BASE_URL and MEDKG_LLM_MODEL")
        extractor = TripleExtractor(
            s.llm_base_url or "",
            s.llm_model,
            api_key=s.llm_api_key.get_secret_value() if s.llm_api_key else None,
            timeout_s=s.llm_timeout_s,
        )

        def extract_and_merge(text: str, passage_id: str) -> MergeResult:
            extraction = extractor.extract(text, passage_id)
            return merge_extraction(
                self.graph, extraction, passage_id, entity_index=self.entity_index, model_name=s.llm_model
            )

        return extract_and_merge

    def entrez(self) -> EntrezClient:
        from ingest.pubmed.entrez import EntrezClient

        key = self.settings.entrez_api_key
        return EntrezClient(
            email=self.settings.entrez_email,
            api_key=key.get_secret_value() if key else None,
            base_url=self.settings.entrez_base_url,
        )

    def close(self) -> None:
        for name in ("reports", "image_index"):
            if name in self.__dict__:
                self.__dict__.pop(name).close()
        if "sessions" in self.__dict__:
            self.sessions.close()
            del self.__dict__["sessions"]
        for name in ("text_index", "entity_index", "phrase_index"):
            if name in self.__dict__:
                self.__dict__.pop(name).close()
        if "graph" in self.__dict__ and self._owns_graph:
            self.graph.close()
            del self.__dict__["graph"]
        # Everything else built on what was just closed (linker, retriever, QA engine, report generator
        # hold the graph and the indexes) is dropped too, so a container used again (an app whose
        # lifespan restarts) rebuilds it instead of answering 500 from a closed store. The models
        # hold no open resource and are kept.
        for name, attr in vars(Container).items():
            if isinstance(attr, cached_property) and name not in _KEPT_ON_CLOSE:
                if name != "graph" or self._owns_graph:
                    self.__dict__.pop(name, None)
        self._writer_lock.release()
        self._data_lock.release()

    def __enter__(self) -> Container:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
