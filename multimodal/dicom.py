"""Reading DICOM files into de-identified, display-ready images: a file, an upload, a folder or a
DICOMDIR in; a float32 image in [0, 1] with pseudonymous ids out, or a :class:`DicomError` saying why
not. Log lines carry only pseudonymous ids, never paths or patient data.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pydicom
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.errors import InvalidDicomError
from pydicom.filereader import read_file_meta_info
from pydicom.multival import MultiValue
from pydicom.pixels import apply_color_lut, apply_modality_lut, apply_voi_lut, get_decoder, pixel_array
from pydicom.uid import (
    UID,
    ExplicitVRBigEndian,
    ExplicitVRLittleEndian,
    ImplicitVRLittleEndian,
    JPEG2000TransferSyntaxes,
    JPEGLSTransferSyntaxes,
    JPEGTransferSyntaxes,
    MediaStorageDirectoryStorage,
    MPEGTransferSyntaxes,
    RLETransferSyntaxes,
)

from kg.errors import InvalidInput
from multimodal.deid import Pseudonymizer, deidentify

__all__ = ["DicomError", "DicomImage", "dicom_files", "read_dicom", "iter_dicom"]

logger = logging.getLogger(__name__)

_PIXEL_KEYWORDS = ("PixelData", "FloatPixelData", "DoubleFloatPixelData")
_PIXEL_DATA_TAG_BYTES = (b"\xe0\x7f\x10\x00", b"\x7f\xe0\x00\x10")  # (7FE0,0010), little / big endian
_PERCENTILES = (0.5, 99.5)


class DicomError(InvalidInput):
    """A file that yields no image. ``path`` is the file (None for uploaded bytes), ``reason`` the
    message without the path, ``kind`` one of: ``unreadable``, ``empty``, ``not_dicom``,
    ``truncated``, ``corrupt``, ``dicomdir``, ``no_pixels``, ``unsupported``, ``undecodable``."""

    def __init__(self, path: Path | str | None, reason: str, kind: str = "corrupt") -> None:
        self.path = None if path is None else str(path)
        self.reason = reason
        self.kind = kind
        super().__init__(f"{self.path if self.path is not None else 'uploaded data'}: {reason}")

    def __reduce__(self):  # noqa: ANN204 - keep path/reason/kind through pickling
        return (type(self), (self.path, self.reason, self.kind))


@dataclass(frozen=True)
class ImageMetadata:
    """A de-identified image's pseudonymous ids and technical metadata (what the image index keeps).

    ``photometric`` is the interpretation stored in the file (e.g. ``MONOCHROME1``, ``YBR_FULL_422``);
    ``sha256`` is the digest of the file's bytes (for de-duplication), ``frames`` the frame count of
    the object."""

    image_id: str
    study_id: str
    series_id: str
    modality: str | None
    body_part: str | None
    study_description: str | None
    series_description: str | None
    view_position: str | None
    laterality: str | None
    pixel_spacing: tuple[float, float] | None
    rows: int
    columns: int
    frames: int
    photometric: str
    transfer_syntax: str
    burned_in_annotation: bool | None
    sha256: str


@dataclass(frozen=True)
class DicomImage(ImageMetadata):
    """One de-identified image read from a file: its metadata and display-ready pixels, always
    MONOCHROME2-like grey (H x W) or RGB (H x W x 3), float32 in [0, 1], of the middle frame."""

    pixels: np.ndarray = field(repr=False, compare=False)

    @property
    def is_colour(self) -> bool:
        return self.pixels.ndim == 3


# ---- parsing ---------------------------------------------------------------------------------------
def _looks_like_raw_data_set(data: bytes) -> bool:
    """A data set written without the 128-byte preamble: it starts with a group 0002 or 0008 element."""
    if len(data) < 8:
        return False
    return int.from_bytes(data[:2], "little") in (0x0002, 0x0008) or int.from_bytes(data[:2], "big") in (2, 8)


def _parse(data: bytes, path: Path | None) -> Dataset:
    if not data:
        raise DicomError(path, "empty file (0 bytes)", "empty")
    has_marker = len(data) >= 132 and data[128:132] == b"DICM"
    if not has_marker and not _looks_like_raw_data_set(data):
        reason = "not a DICOM file: no 'DICM' marker at byte 128 and no DICOM data set at its start"
        if len(data) < 132 and data[:1] == b"\x00":
            reason = f"truncated: {len(data)} bytes end inside the 128-byte preamble"
            raise DicomError(path, reason, "truncated")
        raise DicomError(path, reason, "not_dicom")
    try:
        # A file without the preamble but with (or without) its meta group needs force=True.
        ds = pydicom.dcmread(io.BytesIO(data), force=not has_marker)
    except InvalidDicomError as exc:
        raise DicomError(path, f"not a DICOM file: {exc}", "not_dicom") from None
    except (EOFError, struct.error) as exc:
        raise DicomError(path, f"truncated: the file ends inside a data element ({exc})", "truncated") from None
    except Exception as exc:  # pydicom raises many types on damaged input
        raise DicomError(path, f"cannot be parsed: {type(exc).__name__}: {str(exc)[:200]}", "corrupt") from None
    if has_marker and len(ds) == 0:  # pydicom drops everything when the data set ends mid-element
        if any(tag in data for tag in _PIXEL_DATA_TAG_BYTES):
            raise DicomError(path, "truncated: the file ends inside its Pixel Data element", "truncated")
        raise DicomError(path, "truncated: no complete data element after the file meta information", "truncated")
    if not has_marker and not any(k in ds for k in ("SOPClassUID", "Modality", "Rows", "DirectoryRecordSequence")):
        raise DicomError(path, "not a DICOM file: no 'DICM' marker and no recognisable DICOM attributes", "not_dicom")
    return ds


def _ensure_transfer_syntax(ds: Dataset, path: Path | None) -> UID:
    """The data set's transfer syntax; a file without one (read with force) gets the encoding it was read in."""
    meta = ds.file_meta if hasattr(ds, "file_meta") else None
    ts = meta.get("TransferSyntaxUID") if meta is not None else None
    if ts is None:
        implicit, little = ds.original_encoding
        if implicit is None:
            raise DicomError(path, "truncated or damaged: the transfer syntax is missing and cannot be inferred")
        ts = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian if little else ExplicitVRBigEndian
        if meta is None:
            ds.file_meta = FileMetaDataset()
        ds.file_meta.TransferSyntaxUID = ts
    ts = UID(str(ts))
    try:
        known = ts.is_transfer_syntax
    except ValueError:  # a private transfer syntax
        known = False
    if not known:
        raise DicomError(path, f"unsupported transfer syntax {ts}: not a known DICOM transfer syntax", "unsupported")
    return ts


def _check_pixels(ds: Dataset, data: bytes, path: Path | None) -> None:
    if any(k in ds for k in _PIXEL_KEYWORDS):
        return
    meta = getattr(ds, "file_meta", None)
    sop = UID(str((meta.get("MediaStorageSOPClassUID") if meta is not None else None) or ds.get("SOPClassUID") or ""))
    if sop == MediaStorageDirectoryStorage or "DirectoryRecordSequence" in ds:
        raise DicomError(
            path,
            "a DICOMDIR (the index of a DICOM file set), not an image: iter_dicom reads the files it references",
            "dicomdir",
        )
    if any(tag in data for tag in _PIXEL_DATA_TAG_BYTES):
        raise DicomError(path, "truncated: the file ends inside its Pixel Data element", "truncated")
    name = sop.name if sop else "unknown"
    modality = str(ds.get("Modality") or "").strip()
    if modality == "SR" or " SR " in f" {name} " or "Report" in name:
        raise DicomError(path, f"a structured report ({name}): DICOM without pixel data", "no_pixels")
    raise DicomError(
        path, f"DICOM without pixel data (SOP class {name}, modality {modality or 'unknown'})", "no_pixels"
    )


# ---- decoding --------------------------------------------------------------------------------------
def _plugin_hint(ts: UID) -> str:
    if ts in JPEG2000TransferSyntaxes:
        return "pylibjpeg with pylibjpeg-openjpeg, or Pillow built with OpenJPEG"
    if ts in JPEGLSTransferSyntaxes:
        return "pylibjpeg with pylibjpeg-libjpeg, or pyjpegls"
    if ts in JPEGTransferSyntaxes:
        return "pylibjpeg with pylibjpeg-libjpeg, or Pillow (baseline and extended JPEG only)"
    if ts in RLETransferSyntaxes:
        return "pylibjpeg with pylibjpeg-rle (pydicom's own RLE decoder needs only numpy)"
    if ts in MPEGTransferSyntaxes:
        return "none in pydicom: it is video; extract frames with ffmpeg first"
    return "GDCM (python-gdcm)"


def _decode(ds: Dataset, ts: UID, index: int | None, path: Path | None) -> np.ndarray:
    try:
        decoder = get_decoder(ts)
    except NotImplementedError:
        raise DicomError(
            path,
            f"unsupported transfer syntax '{ts.name}' ({ts}): pydicom has no decoder for it; {_plugin_hint(ts)}",
            "unsupported",
        ) from None
    if not decoder.is_available:
        raise DicomError(
            path,
            f"transfer syntax '{ts.name}' ({ts}) needs a decoder plugin that is not installed: {_plugin_hint(ts)}",
            "unsupported",
        )
    try:
        return pixel_array(ds, index=index)  # YBR -> RGB while decoding (as_rgb defaults to True)
    except (EOFError, struct.error) as exc:
        raise DicomError(path, f"truncated pixel data ({exc})", "truncated") from None
    except Exception as exc:
        message = str(exc)
        if "less than expected" in message or "end of the data" in message.lower():
            raise DicomError(path, f"truncated pixel data: {message[:200]}", "truncated") from None
        raise DicomError(
            path,
            f"pixel data in '{ts.name}' could not be decoded: {type(exc).__name__}: {message[:200]}",
            "undecodable",
        ) from None


_LUT_KEYWORDS = (
    "RescaleSlope",
    "RescaleIntercept",
    "RescaleType",
    "ModalityLUTSequence",
    "WindowCenter",
    "WindowWidth",
    "VOILUTFunction",
    "VOILUTSequence",
)


def _lut_view(ds: Dataset, index: int | None) -> Dataset:
    """The attributes the LUT functions read, taken from the top level, then the shared and the
    per-frame functional groups of an enhanced multi-frame object (later ones win); a rescale slope
    without an intercept, or the reverse, gets the other's default."""
    view = Dataset()
    for keyword in ("PixelRepresentation", "BitsStored", "BitsAllocated", "PhotometricInterpretation", *_LUT_KEYWORDS):
        if keyword in ds:
            setattr(view, keyword, ds[keyword].value)
    groups = []
    shared = ds.get("SharedFunctionalGroupsSequence")
    if shared:
        groups.append(shared[0])
    per_frame = ds.get("PerFrameFunctionalGroupsSequence")
    if per_frame:
        groups.append(per_frame[min(index or 0, len(per_frame) - 1)])
    for group in groups:
        for macro in ("PixelValueTransformationSequence", "FrameVOILUTSequence"):
            items = group.get(macro)
            if items:
                for keyword in _LUT_KEYWORDS:
                    if keyword in items[0]:
                        setattr(view, keyword, items[0][keyword].value)
    # pydicom rescales only with both: the one missing (or empty) takes its default (slope 1, intercept 0)
    slope, intercept = view.get("RescaleSlope"), view.get("RescaleIntercept")
    if slope not in (None, "") or intercept not in (None, ""):
        view.RescaleSlope = 1 if slope in (None, "") else slope
        view.RescaleIntercept = 0 if intercept in (None, "") else intercept
    return view


def _first(value: object) -> float:
    if isinstance(value, list | tuple | MultiValue):
        value = value[0]
    return float(value)  # type: ignore[arg-type]


def _percentile_window(values: np.ndarray) -> np.ndarray:
    step = max(1, int(np.sqrt(values.size / 262_144)))  # percentiles of ~256k samples are plenty
    sample = values[::step, ::step]
    if np.isnan(sample).all():  # e.g. a float parametric map's background only
        return np.zeros(values.shape, np.float32)
    lo, hi = np.nanpercentile(sample, _PERCENTILES)  # NaN pixels (no value there) do not count
    if hi <= lo:
        lo, hi = float(np.nanmin(sample)), float(np.nanmax(sample))
    if hi <= lo:
        return np.zeros(values.shape, np.float32)
    return ((values - lo) / (hi - lo)).astype(np.float32)


def _grey(arr: np.ndarray, ds: Dataset, index: int | None) -> np.ndarray:
    view = _lut_view(ds, index)
    values = apply_modality_lut(arr, view).astype(np.float64, copy=False)
    out: np.ndarray | None = None
    if "VOILUTSequence" in view and view.VOILUTSequence:
        lut = view.VOILUTSequence[0]
        voi = Dataset()
        voi.VOILUTSequence = view.VOILUTSequence
        voi.PhotometricInterpretation = "MONOCHROME2"
        voi.PixelRepresentation, voi.BitsStored = 0, 16
        # LUT Data read as OW (always so in an implicit-VR file) is decoded in the file's byte order
        if (meta := getattr(ds, "file_meta", None)) is not None:
            voi.file_meta = meta
        if getattr(ds, "original_encoding", (None, None))[1] is not None:
            voi.set_original_encoding(*ds.original_encoding)
        try:
            mapped = apply_voi_lut(values.astype(np.int64), voi, index=0).astype(np.float64)
            bits = int(lut.LUTDescriptor[2]) or 16
            top = max(float(2**bits - 1), float(mapped.max()))
            out = (mapped / top).astype(np.float32)
        except Exception as exc:  # a broken LUT falls back to the percentile window
            logger.warning("VOI LUT not applied (%s: %s); percentile window used", type(exc).__name__, exc)
            out = None
    elif "WindowCenter" in view and "WindowWidth" in view:
        try:
            centre, width = _first(view.WindowCenter), _first(view.WindowWidth)
        except (TypeError, ValueError, IndexError):
            centre, width = 0.0, 0.0
        if np.isfinite(centre) and np.isfinite(width) and width >= 1:
            voi = Dataset()
            voi.WindowCenter, voi.WindowWidth = centre, width
            voi.VOILUTFunction = str(view.get("VOILUTFunction") or "LINEAR")
            voi.PhotometricInterpretation = "MONOCHROME2"
            voi.PixelRepresentation, voi.BitsStored = 0, 16  # output range [0, 65535]
            out = (apply_voi_lut(values, voi, index=0) / 65535.0).astype(np.float32)
            if float(out.max()) - float(out.min()) < 1e-6 < float(values.max()) - float(values.min()):
                out = None  # the window misses the image entirely: use the percentile window instead
    if out is None:
        out = _percentile_window(values)
    out = np.clip(np.nan_to_num(out, nan=0.0, posinf=1.0, neginf=0.0), 0.0, 1.0)
    if str(ds.get("PhotometricInterpretation", "")).strip().upper() == "MONOCHROME1":
        out = 1.0 - out
    return out.astype(np.float32, copy=False)


def _colour(arr: np.ndarray, ds: Dataset, photometric: str) -> np.ndarray:
    if photometric == "PALETTE COLOR":
        arr = apply_color_lut(arr, ds)
        # 16-bit palettes often hold 8-bit values (and big-endian files can come back byte-swapped,
        # 0xFF00 -> 0x00FF): a palette whose output never exceeds 255 is an 8-bit one.
        top = 255.0 if arr.dtype.itemsize == 1 or int(arr.max()) <= 255 else 65535.0
    else:
        bits = int(ds.get("BitsStored") or arr.dtype.itemsize * 8)
        top = float(2**bits - 1) if arr.dtype.kind in "ui" else max(1.0, float(arr.max()))
    out = arr.astype(np.float32) / np.float32(top)
    return np.clip(np.nan_to_num(out), 0.0, 1.0)


# ---- metadata --------------------------------------------------------------------------------------
def _text(ds: Dataset, *keywords: str) -> str | None:
    for keyword in keywords:
        value = ds.get(keyword)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


def _spacing(ds: Dataset, index: int | None) -> tuple[float, float] | None:
    candidates = [ds.get("PixelSpacing"), ds.get("ImagerPixelSpacing")]
    for groups in (ds.get("PerFrameFunctionalGroupsSequence"), ds.get("SharedFunctionalGroupsSequence")):
        if groups:
            group = groups[min(index or 0, len(groups) - 1)] if len(groups) > 1 else groups[0]
            measures = group.get("PixelMeasuresSequence")
            if measures:
                candidates.append(measures[0].get("PixelSpacing"))
    for value in candidates:
        try:
            if value is not None and len(value) == 2:
                row, col = float(value[0]), float(value[1])
                if row > 0 and col > 0:
                    return (row, col)
        except (TypeError, ValueError):
            continue
    return None


def _burned_in(ds: Dataset) -> bool | None:
    value = str(ds.get("BurnedInAnnotation") or "").strip().upper()
    return {"YES": True, "NO": False}.get(value)


def read_dicom(source: Path | str | bytes, pseudonymizer: Pseudonymizer) -> DicomImage:
    """Read, de-identify and decode one DICOM file (a path) or upload (bytes).

    The data set is de-identified (:func:`multimodal.deid.deidentify`) before anything is taken from it;
    one representative frame (the middle one of a multi-frame object) is decoded (pydicom's plugins:
    pylibjpeg, Pillow) and made display-ready: greyscale through the Modality LUT, then the VOI LUT or the
    first window (else a 0.5-99.5 percentile window), MONOCHROME1 inverted; colour converted to RGB
    (H x W x 3) and scaled by its bit depth. What cannot be read raises :class:`DicomError` (a missing
    decoder names the plugin that would decode it)."""
    path: Path | None = None
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        path = Path(source)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise DicomError(path, "no such file", "unreadable") from None
        except IsADirectoryError:
            raise DicomError(path, "a directory, not a file (iter_dicom walks folders)", "unreadable") from None
        except OSError as exc:
            raise DicomError(path, f"cannot be read: {exc.strerror or exc}", "unreadable") from None
    digest = hashlib.sha256(data).hexdigest()
    parsed = _parse(data, path)
    try:
        ds = deidentify(parsed, pseudonymizer)  # before anything is taken from the data set
    except Exception as exc:
        raise DicomError(path, f"cannot be parsed: {type(exc).__name__}: {str(exc)[:200]}", "corrupt") from None
    del parsed
    _check_pixels(ds, data, path)
    ts = _ensure_transfer_syntax(ds, path)
    try:
        rows, columns = int(ds.Rows), int(ds.Columns)
        frames = max(1, int(ds.get("NumberOfFrames") or 1))
    except (AttributeError, TypeError, ValueError):
        raise DicomError(path, "pixel data without valid Rows/Columns/Number of Frames", "corrupt") from None
    index = frames // 2 if frames > 1 else None
    arr = _decode(ds, ts, index, path)
    photometric = str(ds.get("PhotometricInterpretation") or "").strip().upper()
    try:
        if arr.ndim == 3 and arr.shape[-1] == 3 or photometric == "PALETTE COLOR":
            pixels = _colour(arr, ds, photometric)
        elif arr.ndim == 2:
            pixels = _grey(arr, ds, index)
        else:
            raise DicomError(path, f"decoded pixel array has an unexpected shape {arr.shape}", "undecodable")
    except DicomError:
        raise
    except Exception as exc:
        raise DicomError(
            path, f"pixel values could not be mapped for display: {type(exc).__name__}: {str(exc)[:200]}", "corrupt"
        ) from None

    sop = _text(ds, "SOPInstanceUID") or _text(ds.file_meta, "MediaStorageSOPInstanceUID")
    if sop is None:  # no instance UID at all: the content decides the identity
        sop = pseudonymizer.uid("sha256:" + digest)
    study = _text(ds, "StudyInstanceUID") or pseudonymizer.uid("study-of:" + sop)
    series = _text(ds, "SeriesInstanceUID") or pseudonymizer.uid("series-of:" + sop)
    body_part = _text(ds, "BodyPartExamined")
    image = DicomImage(
        image_id="IMG:" + sop,  # the UIDs in ``ds`` already are pseudonyms
        study_id="STUDY:" + study,
        series_id="SERIES:" + series,
        modality=(_text(ds, "Modality") or "").upper() or None,
        body_part=body_part.upper() if body_part else None,
        study_description=_text(ds, "StudyDescription"),
        series_description=_text(ds, "SeriesDescription"),
        view_position=_text(ds, "ViewPosition"),
        laterality=_text(ds, "ImageLaterality", "Laterality", "FrameLaterality"),
        pixel_spacing=_spacing(ds, index),
        rows=rows,
        columns=columns,
        frames=frames,
        photometric=photometric,
        transfer_syntax=ts.name,
        burned_in_annotation=_burned_in(ds),
        sha256=digest,
        pixels=np.ascontiguousarray(pixels, dtype=np.float32),
    )
    logger.debug(
        "read %s: %s %s %dx%d, %d frame(s), %s",
        image.image_id,
        image.modality,
        image.body_part,
        rows,
        columns,
        frames,
        image.transfer_syntax,
    )
    return image


# ---- many files ------------------------------------------------------------------------------------
def _is_dicomdir(path: Path) -> bool:
    if path.name.upper() == "DICOMDIR":
        return True
    try:
        with path.open("rb") as handle:
            head = handle.read(132)
        if head[128:132] != b"DICM":
            return False
        meta = read_file_meta_info(path)
        return meta.get("MediaStorageSOPClassUID") == MediaStorageDirectoryStorage
    except Exception:
        return False


def _dicomdir_files(path: Path) -> Iterator[Path | DicomError]:
    try:
        ds = pydicom.dcmread(path, force=True)
        records = ds.DirectoryRecordSequence
    except Exception as exc:
        yield DicomError(path, f"DICOMDIR cannot be read: {type(exc).__name__}: {str(exc)[:200]}", "corrupt")
        return
    root = path.parent.resolve()
    for record in records:
        file_id = record.get("ReferencedFileID")
        if not file_id:
            continue
        parts = [str(p) for p in (file_id if isinstance(file_id, list | MultiValue) else [file_id])]
        target = root.joinpath(*parts)
        try:
            resolved = target.resolve()
        except OSError:
            resolved = target
        if root not in resolved.parents:
            yield DicomError(path, f"DICOMDIR references a file outside its folder: {'/'.join(parts)}", "corrupt")
            continue
        if not resolved.is_file():
            # File IDs are upper case by the standard; some media are copied with lower-case names.
            lowered = root.joinpath(*[p.lower() for p in parts])
            if lowered.is_file():
                resolved = lowered
            else:
                yield DicomError(target, "referenced by the DICOMDIR but missing", "unreadable")
                continue
        yield resolved


def dicom_files(paths: Iterable[Path | str], *, dicomdirs_in_folders: bool = True) -> Iterator[Path | DicomError]:
    """The files ``paths`` name, each once (by resolved path): a folder walked recursively in name order,
    a DICOMDIR given directly followed to the files it references (a file it names that is missing is a
    :class:`DicomError`). ``dicomdirs_in_folders=False`` skips a DICOMDIR met in a folder walk, which
    reaches the files it indexes anyway."""
    seen: set[Path] = set()

    def listed() -> Iterator[Path | DicomError]:
        for item in paths:
            path = Path(item)
            if path.is_dir():
                for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
                    dirnames.sort()
                    for name in sorted(filenames):
                        file = Path(dirpath) / name
                        if dicomdirs_in_folders or not _is_dicomdir(file):
                            yield file
            elif path.is_file() and _is_dicomdir(path):
                yield from _dicomdir_files(path)
            else:
                yield path

    for entry in listed():
        if isinstance(entry, Path):
            try:
                key = entry.resolve()
            except OSError:
                key = entry
            if key in seen:
                continue
            seen.add(key)
        yield entry


def iter_dicom(paths: Iterable[Path | str], pseudonymizer: Pseudonymizer) -> Iterator[DicomImage | DicomError]:
    """One :class:`DicomImage` or :class:`DicomError` per file, never an exception.

    A folder is walked recursively and every file in it is tried (DICOM files often have no
    extension); a DICOMDIR met in a folder is reported as such (the walk reads its files anyway).
    A DICOMDIR given directly is followed to the files it references. A file reached twice is read once."""
    for entry in dicom_files(paths):
        if isinstance(entry, DicomError):
            yield entry
            continue
        try:
            yield read_dicom(entry, pseudonymizer)
        except DicomError as exc:
            yield exc
        except Exception as exc:  # a bug or an unforeseen pydicom failure must not stop the walk
            yield DicomError(entry, f"cannot be read: {type(exc).__name__}: {str(exc)[:200]}", "corrupt")
