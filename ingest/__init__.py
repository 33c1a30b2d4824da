"""Loaders that bring sources into the graph: ontologies (OBO, HPO annotations, TSV edge lists) and,
in later issues, PubMed. Every loader is a generator of :class:`kg.model.Entity`,
:class:`kg.model.Relation` and :class:`ingest.summary.Problem` items that :func:`ingest.writer.ingest`
writes in batches; re-running a load changes no counts.
"""
