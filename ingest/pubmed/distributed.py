"""Literature loads on Ray Data, for corpora that outgrow one process. Each input file is a shard:
actors parse it, split passages and link mentions (each holding the sentence pipeline and the linker),
other actors embed the passages (on CPUs or GPUs, batch size and precision per device); the driver
writes each shard's result as one Parquet file (records, passages with their vectors, mentions), then
merges the shards in file order through :class:`PubmedLoader`, whose own writes make the result that of
a one-process load. Resumable by shard: a shard is recorded as merged once a checkpoint made it
durable, and a shard written but not merged is not prepared again."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ingest.pubmed.load import PreparedArticle, PubmedLoader, passage_records, prepare_articles
from ingest.pubmed.model import Article, Deletion
from ingest.pubmed.passages import ArticleText, Passage, Sentence
from ingest.pubmed.readers import Record, read_records
from ingest.summary import IngestSummary, Problem
from kg.linker import EntityLinker, Lexicon, Mention
from kg.progress import progress_bar

if TYPE_CHECKING:
    from kg.settings import Settings

__all__ = [
    "MANIFEST", "PrepareResult", "RayLoad", "Shard", "ShardPlan", "WorkerKit", "merge_shards", "plan_shards",
    "prepare_shards", "ray_session", "read_shard",
]  # fmt: skip

log = logging.getLogger(__name__)

FORMAT = 1  # of the shard files; part of every shard's key
CHUNK = 256  # articles prepared (and sent on to the embedders) at a time
MANIFEST = "merged.jsonl"

_SENTENCE = pa.struct([("index", pa.int32()), ("start", pa.int32()), ("end", pa.int32())])
_PASSAGE = pa.struct(
    [("id", pa.string()), ("index", pa.int32()), ("sentences", pa.list_(pa.int32())), ("start", pa.int32()),
     ("end", pa.int32()), ("embed_text", pa.string())]
)  # fmt: skip
_MENTION = pa.struct(
    [("start", pa.int32()), ("end", pa.int32()), ("text", pa.string()), ("ids", pa.list_(pa.string())),
     ("method", pa.string()), ("score", pa.float64()), ("sentence", pa.int32())]
)  # fmt: skip
SCHEMA = pa.schema(
    [
        ("shard", pa.string()),
        ("seq", pa.int64()),  # the record's place in its file; on the "end" row, the file's record count
        ("kind", pa.string()),  # article | deletion | problem | end
        ("record", pa.string()),  # the Article, Deletion or Problem as JSON
        ("fingerprint", pa.string()),
        ("text", pa.string()),  # the article's text as parsed (title and abstract)
        ("sentences", pa.list_(_SENTENCE)),
        ("passages", pa.list_(_PASSAGE)),
        ("mentions", pa.list_(_MENTION)),
        ("vectors", pa.binary()),  # float32, one row per passage, in passage order
        ("embedded_by", pa.string()),  # the signature of the embedder that made them
    ]
)


# ---- what a worker needs -----------------------------------------------------------------------
@dataclass
class WorkerKit:
    """Everything a worker builds its part of the pipeline from, shipped once with the actors: the
    settings (sentence pipeline, embedder, linking thresholds, the data dir whose entity index the
    linker's vector fallback reads) and the driver's lexicon tables, so that a worker links exactly as
    the driver's linker does (its rules' signature is checked)."""

    settings: Settings
    max_words: int
    lexicon: tuple[dict[str, list[str]], dict[str, list[str]], set[str], int] | None  # None: no linking
    linker_rules: str | None  # EntityLinker.rules_signature of the driver's linker
    threads: int = 1  # torch threads per actor

    @classmethod
    def of(cls, settings: Settings, max_words: int, linker: EntityLinker | None, threads: int = 1) -> WorkerKit:
        if linker is None:
            return cls(settings, max_words, None, None, threads)
        lex = linker.lexicon
        return cls(
            settings, max_words, (lex.names, lex.synonyms, lex.defining_words, lex.max_ids), linker.rules_signature,
            threads,
        )  # fmt: skip

    def nlp(self) -> Any:
        from kg.nlp import build_pipeline

        return build_pipeline(self.settings.sentence_splitter, self.settings.ner_model)

    def embedder(self, device: str | None = None) -> Any:
        """The configured embedder (on ``device`` instead of the configured one when given)."""
        import torch

        from kg.embedders import build_embedder

        torch.set_num_threads(self.threads)
        settings = self.settings
        if device is not None and device != settings.embedding_device:
            settings = settings.model_copy(update={"embedding_device": device, "embedding_dtype": "auto"})
        return build_embedder(settings)

    def linker(self, nlp: Any) -> EntityLinker | None:
        """The driver's linker, rebuilt here; its vector fallback (a few short spans per abstract) embeds
        on the CPU, leaving the GPUs to the passages."""
        if self.lexicon is None:
            return None
        from kg.entity_index import EntityIndex

        names, synonyms, words, max_ids = self.lexicon
        lexicon = Lexicon(nlp, names=names, synonyms=synonyms, max_ids=max_ids, defining_words=words)
        index = EntityIndex(self.settings.data_dir / "indexes", self.embedder("cpu"), read_only=True)
        linker = EntityLinker(
            nlp, lexicon, index, threshold=self.settings.link_threshold,
            query_threshold=self.settings.link_query_threshold,
        )  # fmt: skip
        if linker.rules_signature != self.linker_rules:
            raise RuntimeError(
                f"a worker's linker ({linker.rules_signature}) differs from the driver's ({self.linker_rules}): "
                "the workers must run the same medkg and embedding model as the driver"
            )
        return linker

    def key(self, path: Path) -> str:
        """A shard's key: the file (path, size, modification time) and what its result depends on."""
        st = path.stat()
        s = self.settings
        parts = [
            f"v{FORMAT}", str(path.resolve()), str(st.st_size), str(st.st_mtime_ns), str(self.max_words),
            self.linker_rules or "-", s.embedding_model, s.embedding_device, s.embedding_dtype,
            s.embedding_backend, s.sentence_splitter, s.ner_model or "-",
        ]  # fmt: skip
        return hashlib.sha1("|".join(parts).encode()).hexdigest()[:20]


# ---- rows ------------------------------------------------------------------------------------------
def _record_row(shard: str, seq: int, record: Record) -> dict[str, Any]:
    kind = "deletion" if isinstance(record, Deletion) else "problem" if isinstance(record, Problem) else "article"
    return {"shard": shard, "seq": seq, "kind": kind, "record": record.model_dump_json()}


def _prepared_row(shard: str, seq: int, item: PreparedArticle) -> dict[str, Any]:
    text = item.text
    embeds = {r.id: r.embed_text for r in passage_records([item])}
    return {
        **_record_row(shard, seq, item.article),
        "fingerprint": item.fingerprint,
        "text": text.text,
        "sentences": [{"index": s.index, "start": s.start, "end": s.end} for s in text.sentences],
        "passages": [
            {
                "id": p.id,
                "index": p.index,
                "sentences": list(p.sentences),
                "start": p.start,
                "end": p.end,
                "embed_text": embeds[p.id],
            }
            for p in text.passages
        ],  # fmt: skip
        "mentions": [
            {
                "start": m.start,
                "end": m.end,
                "text": m.text,
                "ids": list(m.ids),
                "method": m.method,
                "score": m.score,
                "sentence": m.sentence,
            }
            for m in item.mentions
        ],  # fmt: skip
    }


def _prepared_of(row: dict[str, Any]) -> PreparedArticle:
    article = Article.model_validate_json(row["record"])
    raw = row["text"]
    sentences = [Sentence(s["index"], s["start"], s["end"]) for s in row["sentences"]]
    passages = [
        Passage(p["id"], p["index"], tuple(p["sentences"]), p["start"], p["end"], raw[p["start"] : p["end"]])
        for p in row["passages"]
    ]
    mentions = [
        Mention(m["start"], m["end"], m["text"], tuple(m["ids"]), m["method"], m["score"], m["sentence"])
        for m in row["mentions"]
    ]
    item = PreparedArticle(article, row["fingerprint"], ArticleText(f"PMID:{article.pmid}", raw, sentences, passages))
    item.mentions = mentions
    if row["vectors"] is not None:
        matrix = np.frombuffer(row["vectors"], dtype=np.float32).reshape(len(passages), -1)
        item.vectors = {p.id: matrix[i] for i, p in enumerate(passages)}
        item.embedded_by = row["embedded_by"]
    return item


def _record_of(row: dict[str, Any]) -> Record | PreparedArticle:
    if row["kind"] == "article":
        return _prepared_of(row)
    if row["kind"] == "deletion":
        return Deletion.model_validate_json(row["record"])
    return Problem.model_validate_json(row["record"])


def _table(rows: list[dict[str, Any]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=SCHEMA)


# ---- the Ray actors ------------------------------------------------------------------------------
class PrepareWorker:
    """A Ray Data actor: reads whole files (one shard per input row) and yields their records prepared,
    ``CHUNK`` articles at a time, then one ``end`` row per file with its record count."""

    def __init__(self, kit: WorkerKit) -> None:
        self.kit = kit
        self.nlp = kit.nlp()
        self.linker = kit.linker(self.nlp)

    def __call__(self, batch: dict[str, np.ndarray]) -> Iterator[pa.Table]:
        for shard, path in zip(batch["shard"], batch["path"], strict=True):
            seq = 0
            rows: list[dict[str, Any]] = []
            chunk: list[tuple[int, Article]] = []
            for record in read_records(path):
                if isinstance(record, Article):
                    chunk.append((seq, record))
                    if len(chunk) >= CHUNK:
                        rows += self._prepare(shard, chunk)
                        chunk = []
                else:
                    rows.append(_record_row(shard, seq, record))
                seq += 1
                if len(rows) >= CHUNK:
                    yield _table(rows)
                    rows = []
            rows += self._prepare(shard, chunk)
            rows.append({"shard": shard, "seq": seq, "kind": "end"})
            yield _table(rows)

    def _prepare(self, shard: str, chunk: list[tuple[int, Article]]) -> list[dict[str, Any]]:
        if not chunk:
            return []
        prepared = prepare_articles([a for _, a in chunk], self.nlp, self.linker, self.kit.max_words)
        return [_prepared_row(shard, seq, item) for (seq, _), item in zip(chunk, prepared, strict=True)]


class EmbedWorker:
    """A Ray Data actor: embeds the passages of the articles in a batch of rows (on the configured
    device: one CPU thread per actor, or one GPU) and fills their ``vectors``."""

    def __init__(self, kit: WorkerKit) -> None:
        self.embedder = kit.embedder()

    def __call__(self, table: pa.Table) -> pa.Table:
        rows = table.to_pylist()
        texts = [p["embed_text"] for r in rows if r["kind"] == "article" for p in r["passages"]]
        vectors = self.embedder.encode_memoised(texts) if texts else np.zeros((0, 0), dtype=np.float32)
        at = 0
        for r in rows:
            if r["kind"] == "article":
                n = len(r["passages"])
                r["vectors"] = np.ascontiguousarray(vectors[at : at + n], dtype=np.float32).tobytes()
                r["embedded_by"] = self.embedder.signature
                at += n
        return _table(rows)


# ---- shards ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Shard:
    path: Path
    key: str


@dataclass
class ShardPlan:
    """The shards of a load and where each one stands: merged (nothing to do), written (merge only) or
    to prepare."""

    shards: list[Shard]
    stage: Path  # where shard files are written
    manifest: Path  # merged shards, one JSON line each
    merged: set[str] = field(default_factory=set)

    def file(self, shard: Shard) -> Path:
        return self.stage / f"{shard.key}.parquet"

    @property
    def to_merge(self) -> list[Shard]:
        return [s for s in self.shards if s.key not in self.merged]

    @property
    def to_prepare(self) -> list[Shard]:
        return [s for s in self.to_merge if not self.file(s).exists()]

    def record_merged(self, shards: Iterable[Shard], keep: bool) -> None:
        """Note shards as merged (appended and synced), then drop their files unless ``keep``."""
        done = [s for s in shards if s.key not in self.merged]
        if not done:
            return
        self.manifest.parent.mkdir(parents=True, exist_ok=True)
        with open(self.manifest, "a", encoding="utf-8") as fh:
            for s in done:
                fh.write(json.dumps({"key": s.key, "file": str(s.path), "at": time.time()}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.merged.update(s.key for s in done)
        if not keep:
            for s in done:
                self.file(s).unlink(missing_ok=True)

    def drop_merged_files(self) -> None:
        """Drop the files of shards recorded merged: a load killed between recording a shard and
        dropping its file leaves the file, which no later load reads."""
        for s in self.shards:
            if s.key in self.merged:
                self.file(s).unlink(missing_ok=True)


def plan_shards(files: Sequence[Path], kit: WorkerKit, stage: Path, manifest: Path) -> ShardPlan:
    merged: set[str] = set()
    if manifest.exists():
        for line in manifest.read_text(encoding="utf-8").splitlines():
            try:
                merged.add(json.loads(line)["key"])
            except (ValueError, KeyError):
                continue  # a line cut by a crash: that shard is merged again (the loader skips what is stored)
    stage.mkdir(parents=True, exist_ok=True)
    return ShardPlan([Shard(Path(f), kit.key(Path(f))) for f in files], stage, manifest, merged)


@dataclass
class PrepareResult:
    shards: int = 0
    articles: int = 0
    passages: int = 0
    seconds: float = 0.0


def prepare_shards(
    plan: ShardPlan,
    kit: WorkerKit,
    *,
    workers: int,
    gpus: float = 0,
    progress: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> PrepareResult:
    """Run the Ray Data pipeline over the shards not written yet (Ray already initialised): each shard's
    rows are gathered into ``<key>.parquet.part`` and renamed to ``<key>.parquet`` once all its records
    are in, so a shard file that exists is whole."""
    import ray
    import ray.data

    todo = plan.to_prepare
    result = PrepareResult()
    if not todo:
        return result
    started = time.perf_counter()
    items = [{"shard": s.key, "path": str(s.path)} for s in todo]
    ds = ray.data.from_items(items, override_num_blocks=len(items))
    prepare_actors = max(1, min(workers, len(todo)))
    ds = ds.map_batches(
        PrepareWorker,
        fn_constructor_args=(kit,),
        batch_size=1,
        batch_format="numpy",
        compute=ray.data.ActorPoolStrategy(size=prepare_actors),
        num_cpus=0.5,
    )
    embed_args: dict[str, Any] = {"num_gpus": 1} if gpus else {"num_cpus": 0.5}
    ds = ds.map_batches(
        EmbedWorker,
        fn_constructor_args=(kit,),
        batch_size=2048 if gpus else None,  # a GPU is fed ~5,000 passages a call, a CPU actor a block
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=max(1, int(gpus)) if gpus else max(1, workers)),
        **embed_args,
    )
    writers: dict[str, pq.ParquetWriter] = {}
    seen: dict[str, int] = {}
    expected: dict[str, int] = {}
    by_key = {s.key: s for s in todo}
    with progress_bar(total=len(todo), desc="prepare shards (Ray)", unit=" shards", disable=not progress) as bar:
        for table in ds.iter_batches(batch_format="pyarrow", batch_size=None):
            for key in set(table.column("shard").to_pylist()):
                part = table.filter(pa.compute.equal(table.column("shard"), key))
                kinds = part.column("kind").to_pylist()
                if "end" in kinds:
                    expected[key] = part.column("seq").to_pylist()[kinds.index("end")]
                    part = part.filter(pa.compute.not_equal(part.column("kind"), "end"))
                if part.num_rows:
                    if key not in writers:
                        writers[key] = pq.ParquetWriter(_part(plan.file(by_key[key])), SCHEMA)
                    writers[key].write_table(part)
                    seen[key] = seen.get(key, 0) + part.num_rows
                    articles = [k == "article" for k in part.column("kind").to_pylist()]
                    result.articles += sum(articles)
                    result.passages += sum(
                        len(p) for p, a in zip(part.column("passages").to_pylist(), articles, strict=True) if a
                    )
                if key in expected and seen.get(key, 0) == expected[key]:
                    _finish(plan.file(by_key[key]), writers.pop(key, None))
                    del expected[key]
                    result.shards += 1
                    bar.update(1)
                    bar.set_postfix_str(f"{result.articles:,} articles", refresh=False)
                    if on_progress is not None:
                        on_progress(result.shards, len(todo))
    for writer in writers.values():  # shards whose rows did not all arrive: not renamed, prepared again
        writer.close()
    if expected or writers:
        raise RuntimeError(f"{len(expected) + len(writers)} shard(s) ended incomplete; run the load again")
    result.seconds = round(time.perf_counter() - started, 3)
    return result


def _part(path: Path) -> Path:
    return path.with_name(path.name + ".part")


def _finish(path: Path, writer: pq.ParquetWriter | None) -> None:
    """Close a shard's file and put it in place (an empty file for a file of no records)."""
    if writer is None:
        writer = pq.ParquetWriter(_part(path), SCHEMA)
    writer.close()
    with open(_part(path), "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(_part(path), path)


def read_shard(path: Path) -> Iterator[Record | PreparedArticle]:
    """A shard file's records in their file's order."""
    table = pq.read_table(path, schema=SCHEMA)
    table = table.sort_by("seq")
    for batch in table.to_batches(max_chunksize=CHUNK):
        for row in batch.to_pylist():
            yield _record_of(row)


def merge_shards(
    loader: PubmedLoader, plan: ShardPlan, source: str, *, keep: bool = False
) -> tuple[IngestSummary, int]:
    """Merge the written shards not merged yet, in file order, through ``loader`` (one load, its
    checkpoints as usual: every ``checkpoint_every`` records and at the end); after each checkpoint,
    the shards all of whose records it made durable are recorded as merged (a checkpoint per shard
    cost 1 s each with HPO in the embedded store: 100 s of a 2,000-article merge from 83 small files).
    Returns the load's summary and the number of shards merged."""
    if not keep:
        plan.drop_merged_files()
    shards = [s for s in plan.to_merge if plan.file(s).exists()]
    complete: list[Shard] = []

    def records() -> Iterator[Record | PreparedArticle]:
        for shard in shards:
            yield from read_shard(plan.file(shard))
            complete.append(shard)  # resumed after its last record was taken in: durable at the next checkpoint

    def on_commit() -> None:
        plan.record_merged(complete, keep)
        complete.clear()

    return loader.load(records(), source=source, on_commit=on_commit), len(shards)


def _start_local_ray(workers: int, options: dict[str, Any], attempts: int = 3) -> None:
    """A local Ray of ``workers`` CPUs. Ray gives up when its raylet has not registered within 30 s (a fixed
    limit), which a busy 2-core machine can exceed (it did once in CI, beside another test's load): the
    start is tried again, up to ``attempts`` times in all."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(num_cpus=workers, **options)
            return
        except Exception as exc:  # Ray raises a bare Exception for this
            if "timed out during startup" not in str(exc) or attempt == attempts:
                raise
            log.warning("Ray did not start (%s); trying again (%d of %d)", exc, attempt + 1, attempts)
            ray.shutdown()


@contextmanager
def ray_session(address: str | None, workers: int) -> Iterator[dict[str, float]]:
    """Ray for the load: the cluster at ``address`` (``auto``, ``ray://host:10001``), or a local Ray of
    ``workers`` CPUs started here and stopped at the end. Yields the cluster's resources."""
    import ray
    import ray.data

    started = False
    if not ray.is_initialized():
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
        if address:
            ray.init(address=address, **options)
        else:
            _start_local_ray(workers, options)
        started = True
    logging.getLogger("ray.data").setLevel(logging.WARNING)  # its plan and timings each run: medkg reports its own
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # medkg shows its own (shards, articles, ETA)
    context.execution_options.verbose_progress = False
    try:
        yield ray.cluster_resources()
    finally:
        if started:
            ray.shutdown()


@dataclass
class RayLoad:
    """What a distributed load did: the shards (in all, merged before, prepared now, merged now), the
    preparation (articles, passages, seconds in Ray) and the merge's summary."""

    shards: int
    merged_before: int
    prepared: PrepareResult
    merged: int
    summary: IngestSummary
    merge_seconds: float
    workers: int
    address: str | None = None
    shard_dir: Path | None = None
