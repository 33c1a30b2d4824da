"""The image index (real FAISS, real SQLite, real DICOM files) and the end-to-end PHI guarantee:
no identifier of a DICOM file reaches an image, the index files, the graph entities or the logs."""

from __future__ import annotations

import json
import logging
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pydicom
import pytest

from kg.vector_index import VectorIndex
from multimodal.comparability import comparable
from multimodal.deid import Pseudonymizer
from multimodal.dicom import DicomImage, iter_dicom, read_dicom
from multimodal.encoders import DescriptorEncoder
from multimodal.graph import image_entities, report_relation
from multimodal.image_index import ImageIndex

P = Pseudonymizer(b"i" * 32)
PYDICOM_FILES = Path(pydicom.data.__file__).parent / "test_files"
SAMPLES = (
    "CT_small.dcm",
    "MR_small.dcm",
    "examples_rgb_color.dcm",
    "JPEG2000.dcm",
    "rtdose.dcm",
    "liver_1frame.dcm",
    "SC_rgb_rle.dcm",
)


@pytest.fixture(scope="module")
def images() -> list[DicomImage]:
    found = list(iter_dicom([PYDICOM_FILES / name for name in SAMPLES], P))
    assert all(isinstance(img, DicomImage) for img in found)
    return found  # type: ignore[return-value]


def test_add_search_and_reembed_nothing(tmp_path: Path, images: list[DicomImage]) -> None:
    index = ImageIndex(tmp_path, DescriptorEncoder())
    result = index.add(images)
    assert (result.added, result.unchanged, result.embedded) == (len(images), 0, len(images))
    assert len(index) == len(images) == len(index.vectors)
    for img in images:
        best = index.search(img, k=3)[0]
        assert best.image_id == img.image_id and best.score == pytest.approx(1.0, abs=1e-4)
        assert (best.study_id, best.modality, best.body_part) == (img.study_id, img.modality, img.body_part)
    again = index.add(images)
    assert (again.added, again.changed, again.unchanged, again.embedded) == (0, 0, len(images), 0)
    # a vector query, and a query image that is not in the index (embedded on the fly)
    vector = index.vectors.vector(images[0].image_id)
    assert index.search(vector, k=1)[0].image_id == images[0].image_id
    # the same MR instance in another encoding: same id, other file, so its vector is computed afresh
    other_file = read_dicom(PYDICOM_FILES / "MR_small_bigendian.dcm", P)
    assert other_file.image_id == images[1].image_id and other_file.sha256 != images[1].sha256
    hits = index.search(other_file, k=2)
    assert hits[0].image_id == images[1].image_id and hits[0].score == pytest.approx(1.0, abs=1e-4)
    with pytest.raises(ValueError, match="151 values"):
        index.search(np.ones(7, np.float32))
    index.close()


def test_exclude_link_report_get_and_persistence(tmp_path: Path, images: list[DicomImage]) -> None:
    index = ImageIndex(tmp_path, DescriptorEncoder())
    index.add(images)
    ct = images[0]
    hits = index.search(ct, k=3, exclude={ct.image_id})
    assert len(hits) == 3 and ct.image_id not in {h.image_id for h in hits}
    index.link_report(ct.image_id, "REPORT:CXR1")
    with pytest.raises(KeyError):
        index.link_report("IMG:2.25.1", "REPORT:CXR2")
    record = index.get([ct.image_id, "IMG:2.25.1"])
    assert list(record) == [ct.image_id]
    rec = record[ct.image_id]
    assert (rec.report_id, rec.sha256, rec.rows, rec.pixel_spacing) == ("REPORT:CXR1", ct.sha256, 128, ct.pixel_spacing)
    assert rec.added_at.endswith("Z")
    index.close()

    reopened = ImageIndex(tmp_path, DescriptorEncoder())
    assert len(reopened) == len(images) and len(reopened.vectors) == len(images)
    best = reopened.search(ct, k=1)[0]
    assert (best.image_id, best.report_id) == (ct.image_id, "REPORT:CXR1")
    assert reopened.add(images).embedded == 0
    # the report link survives a re-add, and a new encoder signature re-embeds everything
    assert reopened.get([ct.image_id])[ct.image_id].report_id == "REPORT:CXR1"
    reopened.encoder = type("Other", (DescriptorEncoder,), {"signature": "descriptor-v2:151"})()
    assert reopened.add(images).embedded == len(images)
    reopened.close()


def test_reindex_from_the_files_after_the_vectors_are_lost(tmp_path: Path, images: list[DicomImage]) -> None:
    """The vector files lost: ``reindex`` embeds the indexed images again from their files, keeps their
    metadata, report links and thumbnails, leaves alone images it does not hold or whose file changed,
    says what is still missing, and resumes after an interruption."""
    index = ImageIndex(tmp_path, DescriptorEncoder())
    index.add(images[:5])
    index.link_report(images[0].image_id, "IUXR:1")
    index.commit()
    before = {img.image_id: index.vectors.vector(img.image_id) for img in images[:5]}
    thumbnail = index.thumbnail(images[0].image_id)
    index.close()
    moved = VectorIndex.set_aside(tmp_path, "images")
    assert sorted(p.name.split(".damaged-")[0] for p in moved) == ["images.vectors"]

    class Interrupted(Exception):
        pass

    def then_stop(found: list[DicomImage], after: int):
        for n, img in enumerate(found):
            if n == after:
                raise Interrupted
            yield img

    broken = ImageIndex(tmp_path, DescriptorEncoder())
    assert len(broken) == 5 and sorted(broken.without_vectors()) == sorted(before)
    with pytest.raises(Interrupted):  # saved every 2 embeddings: the first 2 (of 3 read) survive
        broken.reindex(then_stop(images[:4], 3), batch=1, checkpoint=2)
    # killed there: not closed (close() would save the third vector too)

    index = ImageIndex(tmp_path, DescriptorEncoder())
    assert len(index.without_vectors()) == 3
    other_file = read_dicom(PYDICOM_FILES / "MR_small_bigendian.dcm", P)  # images[1] in another file
    assert other_file.image_id == images[1].image_id
    given = [other_file] + images[2:4] + images[5:]  # images[4]'s file is not given
    r = index.reindex(given)
    assert (r.indexed, r.embedded, r.missing) == (5, 2, 1)  # images[2] and [3]; images[4] still missing
    assert (r.not_indexed, r.changed) == (len(images) - 5, 1)  # left alone (images[1]'s vector is intact)
    assert index.without_vectors() == [images[4].image_id]
    r = index.reindex([images[4], other_file])  # stops reading once nothing is missing
    assert (r.embedded, r.missing, r.changed) == (1, 0, 0)
    assert index.reindex(images).embedded == 0
    for image_id, vector in before.items():
        assert np.allclose(index.vectors.vector(image_id), vector, atol=1e-6)
    assert index.get([images[0].image_id])[images[0].image_id].report_id == "IUXR:1"
    assert index.thumbnail(images[0].image_id) == thumbnail
    assert len(index) == 5 and len(index.vectors) == 5  # images[5:] were not added
    # a file that changed since it was indexed is left to `medkg ingest dicom`
    index.vectors.remove([images[1].image_id])
    r = index.reindex([other_file])
    assert (r.changed, r.embedded, r.missing) == (1, 0, 1)
    index.close()


def test_concurrent_adds_and_searches(tmp_path: Path, images: list[DicomImage]) -> None:
    index = ImageIndex(tmp_path, DescriptorEncoder())

    def work(i: int) -> int:
        index.add(images[i % len(images) :] + images[: i % len(images)])
        return len(index.search(images[i % len(images)], k=2))

    with ThreadPoolExecutor(4) as pool:
        assert all(n >= 1 for n in pool.map(work, range(12)))
    assert len(index) == len(images) == len(index.vectors)
    index.close()


def test_graph_entities(images: list[DicomImage]) -> None:
    ct = images[0]
    entities, relations = image_entities(ct)
    by_category = {e.category: e for e in entities}
    assert by_category["Image"].id == ct.image_id and by_category["Image"].name == "CT image"
    assert by_category["ImagingStudy"].id == ct.study_id
    assert by_category["Modality"].id == "DCM:CT" and by_category["Modality"].name == "Computed Tomography"
    assert "Anatomy" not in by_category  # CT_small has no body part
    assert {(r.subject, r.type, r.object) for r in relations} == {
        (ct.study_id, "HAS_IMAGE", ct.image_id),
        (ct.image_id, "HAS_MODALITY", "DCM:CT"),
    }
    nm = images[3]
    entities, relations = image_entities(nm)
    part = next(e for e in entities if e.category == "Anatomy")
    assert (part.id, part.name) == ("BODYPART:WHOLE_BODY", "Whole Body")
    assert any(r.type == "DEPICTS" and r.object == part.id and r.source == "dicom" for r in relations)
    rel = report_relation(ct.image_id, "PMID:123")
    assert (rel.subject, rel.type, rel.object, rel.source) == (ct.image_id, "HAS_REPORT", "PMID:123", "reports")


def test_chest_radiograph_entity_name(images: list[DicomImage]) -> None:
    cr = replace(images[0], modality="CR", body_part="CHEST", view_position="PA")  # the name uses metadata only
    entities, _ = image_entities(cr)
    assert entities[0].name == "CR chest image (PA)"
    assert next(e for e in entities if e.category == "Modality").name == "Computed Radiography"


# ---- PHI ------------------------------------------------------------------------------------------
PHI = {
    "PatientName": "Doe^Jane",
    "PatientID": "MRN-123456",
    "PatientBirthDate": "19700101",
    "PatientAddress": "12 Elm Street",
    "InstitutionName": "St Example Hospital",
    "ReferringPhysicianName": "Dr^Who",
    "AccessionNumber": "ACC987",
}
PRIVATE = "SECRET-PRIVATE"


def _phi_file(tmp_path: Path) -> tuple[Path, list[str]]:
    ds = pydicom.dcmread(PYDICOM_FILES / "CT_small.dcm")
    for keyword, value in PHI.items():
        setattr(ds, keyword, value)
    ds.StudyDescription = "CT chest Doe"
    # invalid values: pydicom's validation would quote them in a warning if they were ever converted
    ds.OtherPatientIDs = "OTHER-ID-" + "9" * 70  # LO longer than 64
    ds.StudyInstanceUID = "1.2.826.0.1.3680043.0123.77"  # a leading zero is not allowed in a UID
    ds.private_block(0x0011, "ACME HOSPITAL", create=True).add_new(0x10, "LO", PRIVATE)
    uids = [str(ds.StudyInstanceUID), str(ds.SeriesInstanceUID), str(ds.SOPInstanceUID)]
    path = tmp_path / "in" / "Doe_Jane_MRN-123456.dcm"  # a path that itself holds identifiers
    path.parent.mkdir()
    ds.save_as(path)
    return path, uids


def test_no_identifier_reaches_any_output(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    path, uids = _phi_file(tmp_path)
    caplog.clear()  # writing the test file may have warned about its invalid values
    secrets = [*PHI.values(), "Doe", "Jane", "Dr^Who", "OTHER-ID-", PRIVATE, *uids, str(path), path.name]
    raw = path.read_bytes()
    assert all(s.encode() in raw for s in [*PHI.values(), PRIVATE, *uids])  # they are really in the file

    index_dir = tmp_path / "index"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        img = read_dicom(path, P)
        (img_from_walk,) = list(iter_dicom([path.parent], P))
        assert img_from_walk == img
        index = ImageIndex(index_dir, DescriptorEncoder())
        index.add([img])
        index.link_report(img.image_id, "REPORT:1")
        index.search(img, k=1)
        index.close()
        entities, relations = image_entities(img)
        relations.append(report_relation(img.image_id, "REPORT:1"))

    fields = {k: v for k, v in asdict(img).items() if k != "pixels"}
    texts = {
        "repr": repr(img),
        "fields": json.dumps(fields, default=str),
        "graph": json.dumps(
            [e.model_dump(mode="json") for e in entities] + [r.model_dump(mode="json") for r in relations]
        ),
        "logs": "\n".join(f"{r.name} {r.getMessage()}" for r in caplog.records),
        "warnings": "\n".join(str(w.message) for w in caught),
    }
    assert img.study_description == "CT chest [REMOVED]"
    index_files = sorted(p for p in index_dir.rglob("*") if p.is_file())
    assert {p.suffix for p in index_files} >= {".sqlite", ".f32"}
    blobs = {p.name: p.read_bytes() for p in index_files}
    for secret in secrets:
        for where, text in texts.items():
            assert secret not in text, f"{secret!r} in {where}"
        for name, blob in blobs.items():
            assert secret.encode() not in blob, f"{secret!r} in {name}"
    assert any(r.name == "multimodal.dicom" for r in caplog.records)  # logging happened, clean

    # pseudonyms: stable for one key, different for another
    assert img.image_id == P.image_id(uids[2]) and img.study_id == P.study_id(uids[0])
    assert read_dicom(path, Pseudonymizer(b"i" * 32)).image_id == img.image_id
    other = read_dicom(path, Pseudonymizer(b"j" * 32))
    assert (other.image_id, other.study_id, other.series_id) != (img.image_id, img.study_id, img.series_id)
    assert other.image_id != img.image_id and other.study_id != img.study_id


def test_a_prior_study_is_never_the_querys_own(tmp_path: Path, images: list[DicomImage]) -> None:
    """ "Similar prior studies" leave out the query, the other images of its study (a second view) and
    any image paired with its study's report."""
    index = ImageIndex(tmp_path, DescriptorEncoder())
    ct = images[0]
    view = replace(ct, image_id="IMG:2.25.901", sha256="0" * 64)  # a second image of the study
    paired = replace(ct, image_id="IMG:2.25.902", study_id="STUDY:2.25.9", sha256="1" * 64)
    index.add([*images, view, paired])
    index.link_report(ct.image_id, "IUXR:1")
    index.link_report(paired.image_id, "IUXR:1")  # filed under another study, the same report
    own = {ct.image_id, view.image_id, paired.image_id}
    assert index.own_study(ct.image_id) == own == index.own_study(image=ct)
    assert index.own_study(image=replace(ct, image_id="IMG:2.25.903")) >= own  # an upload, not indexed
    nearest = index.search(ct, k=3)
    assert {h.image_id for h in nearest} == own  # identical pixels: the study's own images come first
    priors = index.search(ct, k=3, exclude=index.own_study(ct.image_id))
    assert len(priors) == 3 and not own & {h.image_id for h in priors}
    assert index.own_study() == set() and index.own_study("IMG:2.25.1") == {"IMG:2.25.1"}


def test_thumbnails_off_keeps_and_serves_none_of_those_kept_before(tmp_path: Path, images: list[DicomImage]) -> None:
    import sqlite3

    def kept() -> int:
        with sqlite3.connect(tmp_path / "images.sqlite") as db:
            return db.execute("SELECT count(*) FROM thumbnails").fetchone()[0]

    first = images[0]
    index = ImageIndex(tmp_path, DescriptorEncoder())
    index.add([first])
    index.close()
    assert kept() == 1
    off = ImageIndex(tmp_path, DescriptorEncoder(), thumbnails=False)
    assert off.thumbnail(first.image_id) is None and kept() == 0  # none served, none left in the file
    assert off.add([first]).unchanged == 1
    assert off.thumbnail(first.image_id) is None and kept() == 0
    off.close()
    on = ImageIndex(tmp_path, DescriptorEncoder())
    assert on.thumbnail(first.image_id) is None
    assert on.add([first]).unchanged == 1 and on.thumbnail(first.image_id) is not None  # made again
    on.close()


def test_an_index_built_by_another_encoder_is_refused(tmp_path: Path, images: list[DicomImage]) -> None:
    """An encoder of the same dimension but other weights or method embeds into another space: the
    index names the encoder's signature and will not open under another (``medkg reindex`` sets it
    aside and embeds again)."""
    from kg.vector_index import VectorIndexError

    index = ImageIndex(tmp_path, DescriptorEncoder())
    index.add(images[:2])
    index.commit()
    index.close()

    class Retrained(DescriptorEncoder):
        signature = "descriptor-v2:151"

    with pytest.raises(VectorIndexError, match="'descriptor-v1:151', but this process embeds with 'descriptor-v2"):
        ImageIndex(tmp_path, Retrained())
    assert len(ImageIndex(tmp_path, DescriptorEncoder())) == 2


def test_comparable_search_keeps_the_modality_and_body_part(tmp_path: Path, images: list[DicomImage]) -> None:
    """Priors for a study are of its modality, and of its body part when both images state one (case
    aside); an unknown value rules nothing out; the search looks past the images it leaves out."""
    index = ImageIndex(tmp_path, DescriptorEncoder())
    ct = next(img for img in images if img.modality == "CT")
    chest = replace(ct, image_id="IMG:2.25.801", study_id="STUDY:2.25.8", body_part="CHEST", sha256="8" * 64)
    head = replace(ct, image_id="IMG:2.25.802", study_id="STUDY:2.25.9", body_part="head", sha256="9" * 64)
    index.add([*images, chest, head])
    everything = index.search(ct, k=len(images) + 2)
    assert {h.modality for h in everything} > {"CT"}
    assert index.kind_of(image_id=head.image_id) == ("CT", "head") and index.kind_of(image=ct) == ("CT", None)
    same_kind = index.search(ct, k=10, comparable_to=("CT", None))  # no body part stated: any CT
    assert {h.image_id for h in same_kind} == {ct.image_id, chest.image_id, head.image_id}
    heads = index.search(ct, k=10, comparable_to=("ct", "HEAD"))  # a head CT: not the chest one
    assert {h.image_id for h in heads} == {ct.image_id, head.image_id}
    one = index.search(ct, k=1, exclude=[ct.image_id], comparable_to=("CT", "HEAD"))
    assert [h.image_id for h in one] == [head.image_id]
    assert index.search(ct, k=3, comparable_to=("XA", None)) == []


def test_comparable_reads_synonyms_of_the_region_and_radiographs_of_either_detector(
    tmp_path: Path, images: list[DicomImage]
) -> None:
    """THORAX is the chest and "C-SPINE" the cervical spine; a CR radiograph is a prior for a DX one;
    the region still separates them (a chest radiograph is no prior for a spine one)."""
    index = ImageIndex(tmp_path, DescriptorEncoder())
    base = images[0]
    cr_chest = replace(base, image_id="IMG:2.25.811", study_id="STUDY:2.25.81", modality="CR", body_part="CHEST")
    dx_thorax = replace(base, image_id="IMG:2.25.812", study_id="STUDY:2.25.82", modality="DX", body_part="THORAX")
    dx_spine = replace(base, image_id="IMG:2.25.813", study_id="STUDY:2.25.83", modality="DX", body_part="C-SPINE")
    ct_chest = replace(base, image_id="IMG:2.25.814", study_id="STUDY:2.25.84", modality="CT", body_part="CHEST")
    index.add([replace(img, sha256=str(i) * 64) for i, img in enumerate([cr_chest, dx_thorax, dx_spine, ct_chest])])
    chest_priors = index.search(
        dx_thorax, k=10, exclude=[dx_thorax.image_id], comparable_to=index.kind_of(image=dx_thorax)
    )
    assert [h.image_id for h in chest_priors] == [cr_chest.image_id]
    spine = index.search(dx_spine, k=10, comparable_to=("CR", "cervical spine"))
    assert [h.image_id for h in spine] == [dx_spine.image_id]
    assert {h.image_id for h in index.search(base, k=10, comparable_to=("XR", None))} == {
        cr_chest.image_id,
        dx_thorax.image_id,
        dx_spine.image_id,
    }


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (("DX", "THORAX"), ("CR", "chest"), True),
        (("MR", "BRAIN"), ("MR", "HEAD"), True),
        (("CT", "ABD_PELVIS"), ("CT", "ABDOMENPELVIS"), True),
        (("CT", "LUMBAR SPINE"), ("CT", "L-SPINE"), True),
        (("CT", "LSPINE"), ("CT", "CERVICAL_SPINE"), False),
        (("CT", "CHEST"), ("MR", "CHEST"), False),
        (("CT", None), ("CT", "KNEE"), True),
        ((None, "KNEE"), ("MR", "HAND"), False),
    ],
)
def test_comparable_pairs(a: tuple, b: tuple, same: bool) -> None:
    assert comparable(*a, *b) is same and comparable(*b, *a) is same
