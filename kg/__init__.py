"""The knowledge layer of medkg: data model, settings, graph stores, indexes, embedders, retrieval.

`kg` imports nothing from the layers above it (ingest, multimodal, service, eval).
"""
