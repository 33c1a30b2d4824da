"""The text embedder an evaluation uses: the configured one (``MEDKG_EMBEDDING_MODEL`` with its device
and dtype), as the service builds it (``service/container.py``), so the figures measure the model the
service runs and the similarity floor taken from the same settings belongs to it."""

from __future__ import annotations

from kg.embedders import TextEmbedder
from kg.settings import Settings, load_settings


def configured_embedder(settings: Settings | None = None) -> TextEmbedder:
    """A :class:`TextEmbedder` of ``settings`` (default: the environment's)."""
    settings = settings or load_settings()
    return TextEmbedder(settings.embedding_model, device=settings.embedding_device, dtype=settings.embedding_dtype)


def describe(embedder: TextEmbedder) -> str:
    """One line for a report's header: which model (and precision, device) made the vectors."""
    return f"embedding model: {embedder.model_name} ({embedder.dtype}, {embedder.device})"
