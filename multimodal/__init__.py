"""Images for medkg: DICOM reading with de-identification on ingest, image encoders, the image index and
the graph entities of images. Nothing here stores or logs a patient identifier, a file path or pixel
data outside the image index: UIDs are replaced by keyed pseudonyms before any value is read.
"""
