"""The image index: a FAISS vector index of image embeddings plus a SQLite table of de-identified image
metadata and display thumbnails. File paths are never stored (a path can hold a patient's name); ids
are pseudonyms.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from kg.errors import InvalidInput
from kg.model import format_time, utc_now
from kg.sql import in_chunks
from kg.vector_index import VectorIndex
from multimodal.comparability import comparable
from multimodal.dicom import DicomImage, ImageMetadata
from multimodal.encoders import ImageEncoder
from multimodal.preview import preview_png

__all__ = ["AddResult", "ImageHit", "ImageIndex", "ImageRecord", "ImageReindexResult"]

THUMBNAIL_SIDE = 256
_METADATA = (
    "study_id",
    "series_id",
    "modality",
    "body_part",
    "study_description",
    "series_description",
    "view_position",
    "laterality",
    "pixel_spacing_row",
    "pixel_spacing_col",
    "rows",
    "columns",
    "frames",
    "photometric",
    "transfer_syntax",
    "burned_in_annotation",
    "sha256",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS images (
    image_id TEXT PRIMARY KEY,
    study_id TEXT NOT NULL,
    series_id TEXT NOT NULL,
    modality TEXT,
    body_part TEXT,
    study_description TEXT,
    series_description TEXT,
    view_position TEXT,
    laterality TEXT,
    pixel_spacing_row REAL,
    pixel_spacing_col REAL,
    rows INTEGER NOT NULL,
    columns INTEGER NOT NULL,
    frames INTEGER NOT NULL,
    photometric TEXT NOT NULL,
    transfer_syntax TEXT NOT NULL,
    burned_in_annotation INTEGER,
    sha256 TEXT NOT NULL,
    report_id TEXT,
    added_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS images_study ON images(study_id);
CREATE INDEX IF NOT EXISTS images_report ON images(report_id);
-- a display thumbnail (PNG, at most THUMBNAIL_SIDE pixels a side) of the de-identified pixels; none
-- for an image whose header says it has burned-in annotation (text in the pixels may identify)
CREATE TABLE IF NOT EXISTS thumbnails (
    image_id TEXT PRIMARY KEY,
    png BLOB NOT NULL
);
"""


@dataclass(frozen=True)
class ImageRecord(ImageMetadata):
    """What the index knows about an image (never its pixels or its file's path)."""

    report_id: str | None
    added_at: str


@dataclass(frozen=True)
class ImageHit:
    image_id: str
    study_id: str
    score: float  # cosine similarity to the query
    modality: str | None
    body_part: str | None
    study_description: str | None
    view_position: str | None
    report_id: str | None


@dataclass
class AddResult:
    added: int = 0  # images new to the index
    changed: int = 0  # images already there whose file or metadata changed
    unchanged: int = 0
    embedded: int = 0  # vectors computed (new, changed, or missing from the saved vectors)
    seconds: float = 0.0


@dataclass
class ImageReindexResult:
    indexed: int = 0  # images in the metadata table
    embedded: int = 0  # vectors computed
    missing: int = 0  # indexed images still without a current vector (their files were not given)
    not_indexed: int = 0  # images read that the index does not hold (`medkg ingest dicom` adds them)
    changed: int = 0  # images read whose file differs from the indexed one (`medkg ingest dicom` updates them)
    removed: int = 0  # vectors of images no longer in the table, dropped
    seconds: float = 0.0


def _row(meta: ImageMetadata) -> tuple:
    """The ``_METADATA`` columns of an image read from a file or of a stored record."""
    spacing = meta.pixel_spacing or (None, None)
    burned = None if meta.burned_in_annotation is None else int(meta.burned_in_annotation)
    derived = {"pixel_spacing_row": spacing[0], "pixel_spacing_col": spacing[1], "burned_in_annotation": burned}
    return tuple(derived[c] if c in derived else getattr(meta, c) for c in _METADATA)


_STORED_AS_IS = [f.name for f in fields(ImageMetadata) if f.name not in ("pixel_spacing", "burned_in_annotation")]


def _record(row: sqlite3.Row) -> ImageRecord:
    spacing = None if row["pixel_spacing_row"] is None else (row["pixel_spacing_row"], row["pixel_spacing_col"])
    burned = row["burned_in_annotation"]
    return ImageRecord(
        **{name: row[name] for name in _STORED_AS_IS},
        pixel_spacing=spacing,
        burned_in_annotation=None if burned is None else bool(burned),
        report_id=row["report_id"],
        added_at=row["added_at"],
    )


class ImageIndex:
    """Image vectors (FAISS), metadata and display thumbnails (SQLite) in ``directory``; safe to
    share between threads. Files: ``<name>.vectors/`` (the vectors) and ``<name>.sqlite``
    (per image: metadata, the linked report, when it was added, a thumbnail of at most 256 pixels a side).

    No thumbnail for an image whose header declares burned-in annotation. ``thumbnails=False`` keeps no
    pixels at all: the thumbnails kept earlier are deleted, none is served, and one re-added loses its own.
    A vector's fingerprint covers the file's SHA-256 and the encoder, so re-adding an unchanged image
    embeds nothing and another encoder re-embeds everything."""

    def __init__(
        self,
        directory: Path | str,
        encoder: ImageEncoder,
        name: str = "images",
        thumbnails: bool = True,
        read_only: bool = False,
    ) -> None:
        self.directory = Path(directory)
        self.thumbnails = thumbnails
        self.directory.mkdir(parents=True, exist_ok=True)
        self.encoder = encoder
        self.name = name
        self._lock = threading.RLock()
        self._db = sqlite3.connect(self.directory / f"{name}.sqlite", check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        # Deleted or overwritten metadata does not linger in free pages of the file.
        self._db.execute("PRAGMA secure_delete = ON")
        self._db.executescript(_SCHEMA)
        if not thumbnails and self._db.execute("SELECT 1 FROM thumbnails LIMIT 1").fetchone():
            self._db.execute("DELETE FROM thumbnails")  # kept while thumbnails were on: no pixels now
            self._db.commit()
        try:
            self.vectors = VectorIndex.open(
                self.directory, name, encoder.dimension, model=encoder.signature, read_only=read_only
            )
        except Exception:
            self._db.close()
            raise

    def _fingerprint(self, img: DicomImage) -> str:
        return self._fingerprint_of(img.sha256)

    def _fingerprint_of(self, sha256: str) -> str:
        """A vector's fingerprint: the file's SHA-256 under this encoder."""
        return hashlib.sha256(f"{sha256}\n{self.encoder.signature}".encode()).hexdigest()

    # ---- writes ------------------------------------------------------------------------------
    def add(self, images: Sequence[DicomImage], batch: int = 64) -> AddResult:
        """Store and embed images; what is already there unchanged embeds nothing. Call ``commit``."""
        started = time.perf_counter()
        result = AddResult()
        unique = list({img.image_id: img for img in images}.values())
        now = format_time(utc_now())
        columns = ", ".join(_METADATA)
        marks = ", ".join("?" * len(_METADATA))
        updates = ", ".join(f"{c} = excluded.{c}" for c in _METADATA)
        with self._lock:
            stored = self.get([img.image_id for img in unique])
            for img in unique:
                old = stored.get(img.image_id)
                if old is None:
                    result.added += 1
                elif _row(img) == _row(old):
                    result.unchanged += 1
                    # deletes a thumbnail kept earlier where none may be kept now (thumbnails off,
                    # burned-in annotation); makes a missing one (e.g. indexed before they were kept)
                    if not self.thumbnails or img.burned_in_annotation or not self._has_thumbnail(img.image_id):
                        self._store_thumbnail(img)
                    continue
                else:
                    result.changed += 1
                # report_id and added_at of an existing row are kept
                self._db.execute(
                    f"INSERT INTO images (image_id, {columns}, added_at) VALUES (?, {marks}, ?) "
                    f"ON CONFLICT(image_id) DO UPDATE SET {updates}",
                    (img.image_id, *_row(img), now),
                )
                self._store_thumbnail(img)
            self._db.commit()
        # The vectors' own fingerprints decide what to embed, so an interrupted run re-embeds
        # exactly what did not reach the saved index.
        ids = [img.image_id for img in unique]
        prints = [self._fingerprint(img) for img in unique]
        need = self.vectors.needs_update(ids, prints)
        for start in range(0, len(need), batch):
            chunk = need[start : start + batch]
            vectors = self.encoder.encode([unique[i].pixels for i in chunk])
            result.embedded += self.vectors.upsert([ids[i] for i in chunk], vectors, [prints[i] for i in chunk])
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def without_vectors(self) -> list[str]:
        """The indexed images without a current vector (never embedded, lost with a damaged index, or
        embedded by another encoder), from the metadata table alone."""
        with self._lock:
            rows = self._db.execute("SELECT image_id, sha256 FROM images ORDER BY image_id").fetchall()
        ids = [r[0] for r in rows]
        return [ids[i] for i in self.vectors.needs_update(ids, [self._fingerprint_of(r[1]) for r in rows])]

    def reindex(self, images: Iterable[DicomImage], batch: int = 64, checkpoint: int = 1000) -> ImageReindexResult:
        """Give the indexed images their vectors again from their files (``images``: read and
        de-identified as when they were loaded). Only images the table holds, with the same file, are
        embedded, and only where the vector is missing or stale; the metadata, report links and
        thumbnails are kept as they are. Vectors of images no longer in the table are dropped. Reading
        stops once nothing is missing; vectors are saved every ``checkpoint`` embeddings, so an
        interrupted run resumes."""
        started = time.perf_counter()
        result = ImageReindexResult()
        with self._lock:
            stored = dict(self._db.execute("SELECT image_id, sha256 FROM images").fetchall())
        result.indexed = len(stored)
        result.removed = self.vectors.remove([i for i in self.vectors.ids() if i not in stored])
        needed = set(self.without_vectors())
        pending: list[DicomImage] = []
        since_save = 0

        def embed() -> None:
            nonlocal since_save
            if pending:
                vectors = self.encoder.encode([img.pixels for img in pending])
                prints = [self._fingerprint(img) for img in pending]
                result.embedded += self.vectors.upsert([img.image_id for img in pending], vectors, prints)
                since_save += len(pending)
                pending.clear()
            if since_save >= checkpoint:
                self.commit()
                since_save = 0

        for img in images:
            if not needed:
                break
            sha = stored.get(img.image_id)
            if sha is None:
                result.not_indexed += 1
            elif sha != img.sha256:
                result.changed += 1
            elif img.image_id in needed:
                needed.discard(img.image_id)
                pending.append(img)
                if len(pending) >= batch:
                    embed()
        embed()
        result.missing = len(needed)
        self.vectors.fit_kind()
        self.commit()
        result.seconds = round(time.perf_counter() - started, 3)
        return result

    def _store_thumbnail(self, img: DicomImage) -> None:
        if not self.thumbnails or img.burned_in_annotation:
            self._db.execute("DELETE FROM thumbnails WHERE image_id = ?", (img.image_id,))
            return
        png = preview_png(img, THUMBNAIL_SIDE)
        self._db.execute("INSERT OR REPLACE INTO thumbnails (image_id, png) VALUES (?, ?)", (img.image_id, png))

    def link_report(self, image_id: str, report_id: str | None) -> None:
        """Record the report (a Document id) of an image; ``None`` unlinks. Unknown image: KeyError."""
        with self._lock:
            changed = self._db.execute(
                "UPDATE images SET report_id = ? WHERE image_id = ?", (report_id, image_id)
            ).rowcount
            self._db.commit()
        if not changed:
            raise KeyError(f"image {image_id} is not in the index")

    def remove(self, image_ids: Iterable[str]) -> int:
        ids = list(dict.fromkeys(image_ids))
        n = 0
        with self._lock:
            for chunk, marks in in_chunks(ids):
                n += self._db.execute(f"DELETE FROM images WHERE image_id IN ({marks})", chunk).rowcount
                self._db.execute(f"DELETE FROM thumbnails WHERE image_id IN ({marks})", chunk)
            self._db.commit()
        self.vectors.remove(ids)
        return n

    def commit(self) -> None:
        """Persist the vectors (the metadata is committed by each write)."""
        with self._lock:
            self.vectors.save()

    def close(self) -> None:
        with self._lock:
            self.commit()
            self._db.close()

    # ---- reads -------------------------------------------------------------------------------
    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM images").fetchone()[0]

    def __contains__(self, image_id: object) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM images WHERE image_id = ?", (image_id,)).fetchone() is not None

    def get(self, image_ids: Iterable[str]) -> dict[str, ImageRecord]:
        ids = list(dict.fromkeys(image_ids))
        out: dict[str, ImageRecord] = {}
        with self._lock:
            for chunk, marks in in_chunks(ids):
                for row in self._db.execute(f"SELECT * FROM images WHERE image_id IN ({marks})", chunk):
                    out[row["image_id"]] = _record(row)
        return out

    def _has_thumbnail(self, image_id: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM thumbnails WHERE image_id = ?", (image_id,)).fetchone() is not None

    def thumbnail(self, image_id: str) -> bytes | None:
        """The PNG thumbnail of an indexed image, or None (unknown, burned-in annotation, kept none, or
        thumbnails off)."""
        if not self.thumbnails:
            return None
        with self._lock:
            row = self._db.execute("SELECT png FROM thumbnails WHERE image_id = ?", (image_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def study_images(self, study_id: str) -> list[str]:
        with self._lock:
            return [
                r[0]
                for r in self._db.execute(
                    "SELECT image_id FROM images WHERE study_id = ? ORDER BY image_id", (study_id,)
                )
            ]

    def own_study(self, image_id: str | None = None, image: DicomImage | None = None) -> set[str]:
        """The indexed images a prior study must not be, for a query image (``image_id``, or an uploaded
        ``image``): itself, the other images of its study, and every image paired with a report of
        that study (a frontal and a lateral view share one report)."""
        own = {i for i in (image_id, image.image_id if image is not None else None) if i}
        studies = {r.study_id for r in self.get(own).values()} | ({image.study_id} if image is not None else set())
        for study in studies:
            own.update(self.study_images(study))
        reports = [r.report_id for r in self.get(own).values() if r.report_id]
        with self._lock:
            for chunk, marks in in_chunks(reports):
                own.update(
                    r[0] for r in self._db.execute(f"SELECT image_id FROM images WHERE report_id IN ({marks})", chunk)
                )
        return own

    def kind_of(self, image_id: str | None = None, image: DicomImage | None = None) -> tuple[str | None, str | None]:
        """The modality and body part of a query image (``image``, else the indexed ``image_id``), for
        ``search(comparable_to=...)``."""
        if image is None and image_id:
            image = self.get([image_id]).get(image_id)  # type: ignore[assignment]
        return (image.modality, image.body_part) if image is not None else (None, None)

    def query_vector(self, query: np.ndarray | DicomImage) -> np.ndarray:
        """The vector of a query: a vector as given; an image's stored vector when the index holds
        this very file under this encoder, else a fresh embedding of its pixels."""
        if isinstance(query, DicomImage):
            if self.vectors.fingerprint(query.image_id) == self._fingerprint(query):
                stored = self.vectors.vector(query.image_id)
                if stored is not None:
                    return stored
            return self.encoder.encode([query.pixels])[0]
        vector = np.asarray(query, dtype=np.float32)
        if vector.ndim == 2 and vector.shape[0] == 1:
            vector = vector[0]
        if vector.shape != (self.encoder.dimension,):
            raise ValueError(f"a query vector must have {self.encoder.dimension} values, got shape {vector.shape}")
        return vector

    def search(
        self,
        query: np.ndarray | DicomImage,
        k: int = 5,
        exclude: Iterable[str] = (),
        comparable_to: tuple[str | None, str | None] | None = None,
    ) -> list[ImageHit]:
        """The ``k`` most similar images, best first, leaving out the ids in ``exclude``. ``comparable_to``
        (a ``(modality, body part)`` from ``kind_of``): only images a radiologist would compare with such
        a study: of the same modality when it is known, and of the same body part when both state one."""
        if k <= 0:
            raise InvalidInput(f"k must be positive, got {k}")
        excluded = set(exclude)
        vector = self.query_vector(query)
        n = k + len(excluded)
        while True:  # images left out can leave fewer than k among the first n: look further while there are more
            found = self.vectors.search(vector, n)[0]
            kept = [(sid, score) for sid, score in found if sid not in excluded]
            records = self.get([sid for sid, _ in kept])
            if comparable_to is not None:
                kept = [
                    (sid, s)
                    for sid, s in kept
                    if sid in records and comparable(records[sid].modality, records[sid].body_part, *comparable_to)
                ]
            if len(kept) >= k or len(found) < n:
                break
            n *= 4
        kept = kept[:k]
        hits = []
        for sid, score in kept:
            rec = records.get(sid)
            if rec is None:  # a vector whose row was removed by another process: skip it
                continue
            hits.append(
                ImageHit(
                    image_id=sid,
                    study_id=rec.study_id,
                    score=score,
                    modality=rec.modality,
                    body_part=rec.body_part,
                    study_description=rec.study_description,
                    view_position=rec.view_position,
                    report_id=rec.report_id,
                )
            )
        return hits
