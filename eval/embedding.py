"""The text embedder an evaluation uses: the configured one, built by the service's own factory
(:func:`kg.embedders.build_embedder`), so the figures measure the model the service runs and the
similarity floor taken from the same settings belongs to it."""

from __future__ import annotations

from kg.embedders import TextEmbedder, build_embedder
from kg.settings import Settings, load_settings


def configured_embedder(settings: Settings | None = None) -> TextEmbedder:
    """The embedder of ``settings``, which an evaluation's main() passes (default: the environment's)."""
    return build_embedder(settings or load_settings())


def describe(embedder: TextEmbedder) -> str:
    """One line for a report's header: which model (and precision, device) made the vectors."""
    return f"embedding model: {embedder.model_name} ({embedder.dtype}, {embedder.device})"
