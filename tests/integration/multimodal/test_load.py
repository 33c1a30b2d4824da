"""DICOM files into the graph and the image index, on both backends: a file loaded again with a
corrected header (same SOP Instance UID) ends what it no longer states; loaded without a report
pairing, an image keeps the report it was paired with."""

from __future__ import annotations

from pathlib import Path

import pydicom
from pydicom.data import get_testdata_file
from pydicom.fileset import FileSet

from kg.graph.base import BaseGraphStore
from kg.model import Entity
from multimodal.deid import Pseudonymizer
from multimodal.encoders import DescriptorEncoder
from multimodal.graph import DEPICTS, HAS_IMAGE, HAS_MODALITY, HAS_REPORT
from multimodal.image_index import ImageIndex
from multimodal.load import FilesRead, load_images, read_images


def edges(store: BaseGraphStore, image_id: str) -> set[tuple[str, str, str]]:
    found = store.neighbours(image_id, rel_types=[DEPICTS, HAS_MODALITY, HAS_REPORT, HAS_IMAGE])
    return {(n.relation.subject, n.relation.type, n.relation.object) for n in found}


def test_a_corrected_file_ends_what_it_no_longer_states(store: BaseGraphStore, tmp_path: Path) -> None:
    ds = pydicom.dcmread(get_testdata_file("CT_small.dcm"))
    for folder in ("first", "corrected", "again"):
        (tmp_path / folder).mkdir()
    ds.BodyPartExamined, ds.Modality = "ABDOMEN", "OT"
    ds.save_as(tmp_path / "first" / "7_IM-0001.dcm")
    ds.BodyPartExamined, ds.Modality = "CHEST", "CT"
    ds.StudyInstanceUID = pydicom.uid.generate_uid()  # the same instance, filed under another study
    ds.save_as(tmp_path / "corrected" / "8_IM-0001.dcm")
    ds.save_as(tmp_path / "again" / "IM-0001.dcm")
    store.upsert_entities([Entity(id=f"IUXR:{n}", name=f"report {n}", category="Document") for n in (7, 8)])
    index = ImageIndex(tmp_path / "idx", DescriptorEncoder())
    pseudonyms = Pseudonymizer(b"k" * 32)

    def report_for(key: str) -> str | None:
        return f"IUXR:{key.split('_')[0]}" if "_" in key else None

    first = load_images(store, index, pseudonyms, [tmp_path / "first"], report_for, progress=False)
    assert first.added == 1 and first.edges_ended == 0
    (image,) = [n.entity.id for n in store.neighbours("IUXR:7", rel_types=[HAS_REPORT], direction="in")]
    (old_study,) = [s for s, t, _ in edges(store, image) if t == HAS_IMAGE]
    assert edges(store, image) == {
        (old_study, HAS_IMAGE, image), (image, HAS_MODALITY, "DCM:OT"), (image, DEPICTS, "BODYPART:ABDOMEN"),
        (image, HAS_REPORT, "IUXR:7"),
    }  # fmt: skip

    corrected = load_images(store, index, pseudonyms, [tmp_path / "corrected"], report_for, progress=False)
    assert corrected.changed == 1 and corrected.edges_ended == 4
    (study,) = [s for s, t, _ in edges(store, image) if t == HAS_IMAGE]
    assert study != old_study
    assert edges(store, image) == {
        (study, HAS_IMAGE, image), (image, HAS_MODALITY, "DCM:CT"), (image, DEPICTS, "BODYPART:CHEST"),
        (image, HAS_REPORT, "IUXR:8"),
    }  # fmt: skip
    history = store.relations(subject=image, type=DEPICTS)
    assert {(r.object, r.valid_to is None) for r in history} == {("BODYPART:ABDOMEN", False), ("BODYPART:CHEST", True)}
    assert store.get_entity(image).name == "CT chest image" and store.get_entity(image).synonyms == []
    assert index.get([image])[image].report_id == "IUXR:8"

    # loaded again without a pairing: nothing changes, its report stays
    again = load_images(store, index, pseudonyms, [tmp_path / "again"], report_for, progress=False)
    assert again.unchanged == 1 and again.edges_ended == 0
    assert (image, HAS_REPORT, "IUXR:8") in edges(store, image)


def test_files_of_a_folder_with_a_dicomdir_are_read_once_under_their_own_names(
    store: BaseGraphStore, tmp_path: Path
) -> None:
    fs = FileSet()
    for name in ("CT_small.dcm", "MR_small.dcm"):
        fs.add(pydicom.dcmread(get_testdata_file(name)))
    fs.write(tmp_path / "media")
    names = sorted(p.name for p in (tmp_path / "media").rglob("IM*") if p.is_file())
    assert len(names) == 2 and (tmp_path / "media" / "DICOMDIR").is_file()
    asked: list[str] = []

    def report_for(key: str) -> str | None:
        asked.append(key)
        return None

    index = ImageIndex(tmp_path / "idx", DescriptorEncoder())
    pseudonyms = Pseudonymizer(b"k" * 32)
    result = load_images(store, index, pseudonyms, [tmp_path / "media"], report_for, progress=False)
    assert (result.files, result.images, result.duplicates, result.errors) == (2, 2, 0, [])
    assert sorted(asked) == names  # paired by each file's name, not the DICOMDIR's

    # a DICOMDIR given directly is still followed, to files read under their own names, each once
    for given in ([tmp_path / "media" / "DICOMDIR"], [tmp_path / "media" / "DICOMDIR", tmp_path / "media"]):
        tally = FilesRead()
        read = list(read_images(given, pseudonyms, tally, False, "test"))
        assert sorted(path.name for path, _ in read) == names
        assert (tally.files, tally.images, tally.duplicates) == (2, 2, 0)
