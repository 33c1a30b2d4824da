"""Reading real DICOM files: the samples in ../shared/data/dicom, every file of the pydicom-data
wheel, pydicom's own test files, and broken files made from them."""

from __future__ import annotations

import functools
import importlib.util
import io
import shutil
from pathlib import Path

import numpy as np
import pydicom
import pytest
from pydicom.dataset import Dataset
from pydicom.encaps import encapsulate
from pydicom.fileset import FileSet
from pydicom.uid import JPEG2000, MPEG4HP41, ExplicitVRLittleEndian, ImplicitVRLittleEndian

import multimodal.dicom as dicom_module
from multimodal.deid import Pseudonymizer
from multimodal.dicom import DicomError, DicomImage, iter_dicom, read_dicom
from tests.conftest import shared

P = Pseudonymizer(b"k" * 32)
PYDICOM_FILES = Path(pydicom.data.__file__).parent / "test_files"  # in the pydicom wheel: no download
_spec = importlib.util.find_spec("data_store")
WHEEL_DATA = Path(_spec.submodule_search_locations[0]) / "data" if _spec and _spec.submodule_search_locations else None
WHEEL_FILES = sorted(p.name for p in WHEEL_DATA.glob("*.dcm")) if WHEEL_DATA else []

# ../shared/data/dicom: file -> (pixels shape, photometric as stored, frames, modality, body part)
SHARED = {
    "pydicom_data/RG1_J2KI.dcm": ((1955, 1841), "MONOCHROME1", 1, "CR", "CHEST"),
    "pydicom_data/RG3_J2KI.dcm": ((1760, 1760), "MONOCHROME1", 1, "CR", "EXTREMITY"),
    "pydicom_data/693_UNCR.dcm": ((512, 512), "MONOCHROME2", 1, "CT", None),
    "pydicom_data/eCT_Supplemental.dcm": ((512, 512), "MONOCHROME2", 2, "CT", None),
    "pydicom_data/MR-SIEMENS-DICOM-WithOverlays.dcm": ((484, 484), "MONOCHROME2", 1, "MR", "ABDOMEN"),
    "pydicom_data/MR2_UNCR.dcm": ((1024, 1024), "MONOCHROME2", 1, "MR", None),
    "pydicom_data/emri_small.dcm": ((64, 64), "MONOCHROME2", 10, "MR", "HEAD"),
    "pydicom_data/US1_UNCR.dcm": ((480, 640, 3), "RGB", 1, "US", None),
    "pydicom_data/JPEG-LL.dcm": ((1024, 256), "MONOCHROME2", 1, "NM", "WHOLE BODY"),
    "pydicom_wheel/CT_small.dcm": ((128, 128), "MONOCHROME2", 1, "CT", None),
    "pydicom_wheel/MR_small.dcm": ((64, 64), "MONOCHROME2", 1, "MR", None),
}
# Files of the pydicom-data wheel that do not load, and why; every other one must load.
WHEEL_ERRORS = {"emri_small_jpeg_2k_lossless_too_short.dcm": ("truncated", "ends inside its Pixel Data")}


@functools.lru_cache(maxsize=4)
def _read_shared(name: str) -> DicomImage:
    """Each big file is decoded once per session (the inversion test reuses the chest radiograph)."""
    return read_dicom(shared("dicom", *name.split("/")), P)


def _check_image(img: DicomImage) -> None:
    assert img.pixels.dtype == np.float32 and img.pixels.flags.c_contiguous
    assert np.isfinite(img.pixels).all()
    assert 0.0 <= float(img.pixels.min()) and float(img.pixels.max()) <= 1.0
    assert float(img.pixels.max()) > float(img.pixels.min())  # not blank
    assert img.pixels.shape[:2] == (img.rows, img.columns)
    assert img.pixels.ndim == 2 or img.pixels.shape[2] == 3
    assert img.frames >= 1 and len(img.sha256) == 64
    assert img.image_id.startswith("IMG:2.25.") and img.study_id.startswith("STUDY:2.25.")
    assert img.series_id.startswith("SERIES:2.25.")
    assert "pixels" not in repr(img)


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_samples_load(name: str) -> None:
    shape, photometric, frames, modality, body_part = SHARED[name]
    img = _read_shared(name)
    _check_image(img)
    assert (img.pixels.shape, img.photometric, img.frames) == (shape, photometric, frames)
    assert (img.modality, img.body_part) == (modality, body_part)


def test_jpeg2000_chest_radiograph_is_inverted_so_bone_is_bright() -> None:
    path = shared("dicom", "pydicom_data", "RG1_J2KI.dcm")
    img = _read_shared("pydicom_data/RG1_J2KI.dcm")
    assert img.transfer_syntax == "JPEG 2000 Image Compression" and img.photometric == "MONOCHROME1"
    assert (img.view_position, img.study_description) == ("PA", "THORAX")
    raw = pydicom.dcmread(path).pixel_array.astype(np.float64)
    h, w = raw.shape

    def region(a: np.ndarray, c0: float, c1: float) -> float:
        return float(a[int(0.3 * h) : int(0.6 * h), int(c0 * w) : int(c1 * w)].mean())

    # the right and left lung fields against the spine / mediastinum between them
    lungs = (region(img.pixels, 0.2, 0.35) + region(img.pixels, 0.65, 0.8)) / 2
    spine = region(img.pixels, 0.46, 0.54)
    assert lungs < spine - 0.15
    # the stored MONOCHROME1 values have the opposite relation: inversion flipped it
    assert (region(raw, 0.2, 0.35) + region(raw, 0.65, 0.8)) / 2 > region(raw, 0.46, 0.54)


def test_jpeg2000_extremity_radiograph_decodes() -> None:
    img = _read_shared("pydicom_data/RG3_J2KI.dcm")
    assert img.transfer_syntax == "JPEG 2000 Image Compression"
    assert img.study_description == "Non-ossifying fibroma of distal tibia" and img.view_position == "AP"


@pytest.mark.skipif(not WHEEL_FILES, reason="the pydicom-data wheel (package data_store) is not installed")
@pytest.mark.parametrize("name", WHEEL_FILES)
def test_every_pydicom_data_file_loads_or_says_why(name: str) -> None:
    path = WHEEL_DATA / name
    if name in WHEEL_ERRORS:
        kind, words = WHEEL_ERRORS[name]
        with pytest.raises(DicomError, match=words) as info:
            read_dicom(path, P)
        assert info.value.kind == kind and info.value.path == str(path)
        return
    img = read_dicom(path, P)
    _check_image(img)
    ds = pydicom.dcmread(path, force=True, stop_before_pixels=True)
    assert img.frames == int(ds.get("NumberOfFrames") or 1)
    colour = img.photometric in ("RGB", "PALETTE COLOR") or img.photometric.startswith("YBR")
    assert img.pixels.ndim == (3 if colour else 2)


@pytest.mark.parametrize(
    ("name", "kind", "words"),
    [
        ("reportsi.dcm", "no_pixels", "structured report"),
        ("rtplan.dcm", "no_pixels", "without pixel data"),
        ("MR_truncated.dcm", "truncated", "truncated"),
        ("dicomdirtests/DICOMDIR", "dicomdir", "DICOMDIR"),
    ],
)
def test_files_without_an_image_raise_specific_errors(name: str, kind: str, words: str) -> None:
    with pytest.raises(DicomError, match=words) as info:
        read_dicom(PYDICOM_FILES / name, P)
    assert info.value.kind == kind


def test_bytes_input_equals_file_input() -> None:
    path = PYDICOM_FILES / "CT_small.dcm"
    from_file, from_bytes = read_dicom(path, P), read_dicom(path.read_bytes(), P)
    assert from_file == from_bytes
    np.testing.assert_array_equal(from_file.pixels, from_bytes.pixels)
    with pytest.raises(DicomError, match="uploaded data: not a DICOM file") as info:
        read_dicom(b"hello, world" * 20, P)
    assert info.value.path is None


def test_file_without_preamble_is_read_with_force(tmp_path: Path) -> None:
    data = (PYDICOM_FILES / "CT_small.dcm").read_bytes()
    (tmp_path / "nopreamble").write_bytes(data[132:])  # file meta group at byte 0, no 'DICM'
    img = read_dicom(tmp_path / "nopreamble", P)
    assert img.image_id == read_dicom(PYDICOM_FILES / "CT_small.dcm", P).image_id
    palette = read_dicom(WHEEL_DATA / "OT-PAL-8-face.dcm", P) if WHEEL_DATA else None  # no meta at all
    assert palette is None or palette.pixels.shape == (480, 640, 3)


def test_unsupported_and_undecodable_transfer_syntaxes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds = pydicom.dcmread(PYDICOM_FILES / "MR_small.dcm")
    ds.file_meta.TransferSyntaxUID = MPEG4HP41
    ds.PixelData = encapsulate([b"\x00\x00\x00\x01" + b"\x00" * 64])
    ds["PixelData"].VR = "OB"
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    with pytest.raises(DicomError, match="MPEG-4 AVC/H.264 High Profile") as info:
        read_dicom(buf.getvalue(), P)
    assert info.value.kind == "unsupported" and "ffmpeg" in info.value.reason

    ds.file_meta.TransferSyntaxUID = JPEG2000
    ds.PixelData = encapsulate([b"\xff\x4f\xff\x51" + b"\x07" * 200])  # a J2K start marker, then garbage
    buf = io.BytesIO()
    ds.save_as(buf, enforce_file_format=True)
    with pytest.raises(DicomError, match="could not be decoded") as info:
        read_dicom(buf.getvalue(), P)
    assert info.value.kind == "undecodable"

    class Missing:  # what pydicom reports when no plugin for the syntax is installed
        is_available = False

    monkeypatch.setattr(dicom_module, "get_decoder", lambda ts: Missing())
    with pytest.raises(DicomError, match="pylibjpeg-openjpeg") as info:
        read_dicom(buf.getvalue(), P)
    assert info.value.kind == "unsupported" and "not installed" in info.value.reason


def test_folder_walk_reports_bad_files_and_loads_the_rest(tmp_path: Path) -> None:
    ct = (PYDICOM_FILES / "CT_small.dcm").read_bytes()
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "IM0001").write_bytes(ct)  # no extension, in a sub-folder
    shutil.copy(PYDICOM_FILES / "MR_small.dcm", tmp_path / "mr.dcm")
    (tmp_path / "notes.txt").write_text("not an image\n" * 20)
    (tmp_path / "empty.dcm").write_bytes(b"")
    (tmp_path / "truncated.dcm").write_bytes(ct[: len(ct) // 2])
    (tmp_path / "header_only.dcm").write_bytes(ct[:140])
    shutil.copy(PYDICOM_FILES / "dicomdirtests" / "DICOMDIR", tmp_path / "DICOMDIR")
    shutil.copy(PYDICOM_FILES / "reportsi.dcm", tmp_path / "report.dcm")

    results = list(iter_dicom([tmp_path, tmp_path / "mr.dcm", tmp_path / "missing.dcm"], P))
    images = [r for r in results if isinstance(r, DicomImage)]
    errors = {Path(e.path).name: e for e in results if isinstance(e, DicomError)}
    assert sorted(i.modality for i in images) == ["CT", "MR"]  # mr.dcm given twice: read once
    assert {name: e.kind for name, e in errors.items()} == {
        "notes.txt": "not_dicom",
        "empty.dcm": "empty",
        "truncated.dcm": "truncated",
        "header_only.dcm": "truncated",
        "DICOMDIR": "dicomdir",
        "report.dcm": "no_pixels",
        "missing.dcm": "unreadable",
    }
    assert "structured report" in errors["report.dcm"].reason
    assert str(errors["empty.dcm"]) == f"{tmp_path / 'empty.dcm'}: empty file (0 bytes)"


def test_dicomdir_is_followed_to_its_files(tmp_path: Path) -> None:
    fs = FileSet()
    for name in ("CT_small.dcm", "MR_small.dcm"):
        fs.add(pydicom.dcmread(PYDICOM_FILES / name))
    fs.write(tmp_path / "media")
    dicomdir = tmp_path / "media" / "DICOMDIR"
    results = list(iter_dicom([dicomdir], P))
    assert sorted(r.modality for r in results if isinstance(r, DicomImage)) == ["CT", "MR"]
    assert not [r for r in results if isinstance(r, DicomError)]

    victim = next(p for p in (tmp_path / "media").rglob("IM*") if p.is_file())
    victim.unlink()
    results = list(iter_dicom([dicomdir], P))
    errors = [r for r in results if isinstance(r, DicomError)]
    assert len(errors) == 1 and "referenced by the DICOMDIR but missing" in errors[0].reason
    assert len([r for r in results if isinstance(r, DicomImage)]) == 1


def _mr_with(tmp_path: Path, name: str, implicit: bool, **elements: object) -> Path:
    """pydicom's MR_small with other pixels and elements, written in the chosen transfer syntax."""
    ds = pydicom.dcmread(PYDICOM_FILES / "MR_small.dcm")
    for keyword in ("WindowCenter", "WindowWidth", "PixelData", "SmallestImagePixelValue", "LargestImagePixelValue"):
        if keyword in ds:
            delattr(ds, keyword)
    for keyword, value in elements.items():
        setattr(ds, keyword, value)
    if "PixelData" in ds:
        ds["PixelData"].VR = "OB" if ds.BitsAllocated <= 8 else "OW"
    ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian if implicit else ExplicitVRLittleEndian
    path = tmp_path / name
    ds.save_as(path, implicit_vr=implicit, little_endian=True, enforce_file_format=True)
    return path


@pytest.mark.parametrize("implicit", [True, False], ids=["implicit VR", "explicit VR"])
def test_a_voi_lut_is_applied_in_either_vr(tmp_path: Path, implicit: bool) -> None:
    pixels = np.zeros((64, 64), np.uint8)
    pixels[:, 32:] = 255
    lut = Dataset()
    lut.LUTDescriptor = [256, 0, 8]
    inverted = np.arange(255, -1, -1, dtype="<u2")  # an inverting display mapping
    lut.add_new(0x00283006, "OW" if implicit else "US", inverted.tobytes() if implicit else inverted.tolist())
    path = _mr_with(
        tmp_path, "voi.dcm", implicit, VOILUTSequence=[lut], PixelData=pixels.tobytes(),
        BitsAllocated=8, BitsStored=8, HighBit=7, PixelRepresentation=0,
    )  # fmt: skip
    img = read_dicom(path, P)
    assert float(img.pixels[:, :32].mean()) == pytest.approx(1.0) and float(img.pixels[:, 32:].mean()) == 0.0


def test_nan_pixels_of_a_float_image_do_not_blank_it(tmp_path: Path) -> None:
    values = np.tile(np.linspace(0, 100, 64, dtype=np.float32), (64, 1))
    values[:8, :8] = np.nan  # no value there, as a parametric map's background
    path = _mr_with(
        tmp_path, "float.dcm", False, FloatPixelData=values.tobytes(), BitsAllocated=32,
    )  # fmt: skip
    img = read_dicom(path, P)
    assert float(img.pixels.max()) == 1.0 and float(img.pixels[:, -1].min()) > 0.9 and img.pixels[:, 8].max() < 0.2


@pytest.mark.parametrize(
    "rescale, window",
    [({"RescaleSlope": 2}, (300, 600)), ({"RescaleIntercept": -100}, (50, 300))],
    ids=["slope only", "intercept only"],
)
def test_a_rescale_slope_or_intercept_alone_is_applied(
    tmp_path: Path, rescale: dict[str, float], window: tuple[int, int]
) -> None:
    """Stored 0, 100, 200, 300 become 0..600 (slope 2) or -100..200 (intercept -100): the window, in
    rescaled units, spans them exactly."""
    pixels = np.repeat(np.array([0, 100, 200, 300], np.uint16), 16).reshape(8, 8)
    path = _mr_with(
        tmp_path, "rescale.dcm", False, PixelData=pixels.tobytes(), Rows=8, Columns=8,
        BitsAllocated=16, BitsStored=16, HighBit=15, PixelRepresentation=0,
        WindowCenter=window[0], WindowWidth=window[1], **rescale,
    )  # fmt: skip
    ds = pydicom.dcmread(path)
    assert ("RescaleSlope" in ds) != ("RescaleIntercept" in ds)
    img = read_dicom(path, P)
    assert np.unique(img.pixels).tolist() == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0], abs=0.01)
