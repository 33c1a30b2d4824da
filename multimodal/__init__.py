"""Images for medkg: DICOM reading with de-identification on ingest (:mod:`multimodal.dicom`,
:mod:`multimodal.deid`), image encoders (:mod:`multimodal.encoders`: a training-free descriptor by
default, any transformers vision model when configured), the image index (:mod:`multimodal.image_index`:
FAISS vectors + SQLite metadata) and the graph entities of images (:mod:`multimodal.graph`).

Nothing in this package stores or logs a patient identifier, a file path or pixel data outside the
image index's vectors: UIDs are replaced by keyed pseudonyms before any value is read.
"""
