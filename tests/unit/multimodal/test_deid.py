"""De-identification (PS3.15 Annex E basic profile) on in-memory data sets: no files, no pixels."""

from __future__ import annotations

import re
import stat
from pathlib import Path

import pytest
from pydicom import dcmread
from pydicom.datadict import keyword_for_tag
from pydicom.dataset import Dataset, FileMetaDataset
from pydicom.sequence import Sequence
from pydicom.uid import CTImageStorage, ExplicitVRLittleEndian

from kg.settings import SettingsError, load_settings
from multimodal.deid import PHI_KEYWORDS, PHI_TAGS, Pseudonymizer, deidentify, load_or_create_key, resolve_key

KEY = bytes(range(32))
UID_RE = re.compile(r"^2\.25\.(0|[1-9]\d*)$")
STUDY_UID = "1.2.826.0.1.3680043.8.498.1"
SERIES_UID = "1.2.826.0.1.3680043.8.498.2"
SOP_UID = "1.2.826.0.1.3680043.8.498.3"
FOR_UID = "1.2.826.0.1.3680043.8.498.4"
REF_UID = "1.2.826.0.1.3680043.8.498.5"
PHI_VALUES = (
    "Doe^Jane",
    "MRN-123456",
    "19700101",
    "12 Elm Street",
    "St Example Hospital",
    "Dr^Who",
    "ACC987",
    "SECRET-PRIVATE",
    "555-0100",
    "Radiology West",
    "SN-4711",
    "CTSTATION1",
    "20240102",
    "101500",
)


def _dataset() -> Dataset:
    ds = Dataset()
    ds.file_meta = FileMetaDataset()
    ds.file_meta.MediaStorageSOPClassUID = CTImageStorage
    ds.file_meta.MediaStorageSOPInstanceUID = SOP_UID
    ds.file_meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds.SOPClassUID = CTImageStorage
    ds.SOPInstanceUID = SOP_UID
    ds.StudyInstanceUID = STUDY_UID
    ds.SeriesInstanceUID = SERIES_UID
    ds.FrameOfReferenceUID = FOR_UID
    ds.Modality = "CT"
    ds.PatientName = "Doe^Jane"
    ds.PatientID = "MRN-123456"
    ds.PatientBirthDate = "19700101"
    ds.PatientAddress = "12 Elm Street"
    ds.PatientTelephoneNumbers = "555-0100"
    ds.PatientSex = "F"
    ds.PatientAge = "095Y"
    ds.EthnicGroup = "Example"
    ds.InstitutionName = "St Example Hospital"
    ds.InstitutionalDepartmentName = "Radiology West"
    ds.ReferringPhysicianName = "Dr^Who"
    ds.AccessionNumber = "ACC987"
    ds.DeviceSerialNumber = "SN-4711"
    ds.StationName = "CTSTATION1"
    ds.StudyDate = "20240102"
    ds.StudyTime = "101500"
    ds.StudyDescription = "CT chest for Jane DOE (MRN-123456)"
    ds.SeriesDescription = "Axial 5mm"
    ds.BodyPartExamined = "CHEST"
    ds.BurnedInAnnotation = "NO"
    ref = Dataset()
    ref.ReferencedSOPClassUID = CTImageStorage
    ref.ReferencedSOPInstanceUID = REF_UID
    ref.PatientName = "Doe^Jane"  # PHI nested in a sequence
    ds.ReferencedImageSequence = Sequence([ref])
    block = ds.private_block(0x0009, "ACME", create=True)
    block.add_new(0x01, "LO", "SECRET-PRIVATE")
    ds.add_new(0x60000010, "US", 4)  # overlay rows
    return ds


def _all_text(ds: Dataset) -> str:
    parts: list[str] = []
    ds.walk(lambda _d, elem: parts.append(f"{elem.tag} {elem.value!r}"))
    parts.extend(f"{elem.tag} {elem.value!r}" for elem in ds.file_meta)
    return "\n".join(parts)


def test_pseudonyms_are_valid_stable_and_keyed() -> None:
    p, same, other = Pseudonymizer(KEY), Pseudonymizer(KEY), Pseudonymizer(bytes(32))
    uid = p.uid(STUDY_UID)
    assert UID_RE.match(uid) and len(uid) <= 64
    assert uid == same.uid(STUDY_UID) == p.uid(STUDY_UID + "\x00")  # padding does not change a UID
    assert uid != other.uid(STUDY_UID) and uid != p.uid(SERIES_UID)
    assert p.image_id(SOP_UID) == "IMG:" + p.uid(SOP_UID)
    assert p.study_id(STUDY_UID) == "STUDY:" + uid
    assert "0, 1, 2" not in repr(p) and "***" in repr(p)
    with pytest.raises(ValueError):
        Pseudonymizer(b"short")


def test_key_file_is_created_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "deid.key"
    key = load_or_create_key(path)
    assert len(key) == 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create_key(path) == key
    assert resolve_key(None, tmp_path / "sub") == key
    assert resolve_key("ab" * 16, tmp_path) == bytes([0xAB] * 16)
    with pytest.raises(SettingsError, match="hexadecimal"):
        resolve_key("not hex at all, not hex at all!!", tmp_path)
    (tmp_path / "bad.key").write_bytes(b"x")
    with pytest.raises(SettingsError, match="at least 16"):
        load_or_create_key(tmp_path / "bad.key")


def test_settings_deid_key_and_image_encoder() -> None:
    settings = load_settings(deid_key="0f" * 16)
    assert settings.deid_key is not None and settings.deid_key.get_secret_value() == "0f" * 16
    assert settings.image_encoder == "descriptor"
    assert load_settings().deid_key is None
    with pytest.raises(SettingsError, match="MEDKG_DEID_KEY") as info:
        load_settings(deid_key="zz-secret-value-zz")
    assert "zz-secret-value-zz" not in str(info.value)


def test_phi_keyword_list_covers_the_basic_profile_essentials() -> None:
    names = set(PHI_KEYWORDS)
    for keyword in (
        "PatientName",
        "PatientID",
        "PatientBirthDate",
        "PatientBirthTime",
        "OtherPatientIDs",
        "OtherPatientIDsSequence",
        "PatientAddress",
        "PatientTelephoneNumbers",
        "PatientMotherBirthName",
        "MilitaryRank",
        "InstitutionName",
        "InstitutionAddress",
        "ReferringPhysicianName",
        "PerformingPhysicianName",
        "OperatorsName",
        "PhysiciansOfRecord",
        "NameOfPhysiciansReadingStudy",
        "RequestingPhysician",
        "AccessionNumber",
        "StudyID",
        "DeviceSerialNumber",
        "StationName",
        "InstitutionalDepartmentName",
        "StudyDate",
        "SeriesDate",
        "AcquisitionDate",
        "ContentDate",
        "StudyTime",
        "SeriesTime",
        "AcquisitionTime",
        "ContentTime",
    ):
        assert keyword in names, keyword
    for kept in ("PatientSex", "PatientAge", "EthnicGroup", "StudyDescription", "BodyPartExamined"):
        assert kept not in names
    assert len(PHI_TAGS) == len(names)


def test_deidentify_removes_phi_and_replaces_uids() -> None:
    original = _dataset()
    before = _all_text(original)
    p = Pseudonymizer(KEY)
    out = deidentify(original, p)
    assert _all_text(original) == before  # the input is not modified
    text = _all_text(out)
    for value in PHI_VALUES:
        assert value not in text, value
    for uid in (STUDY_UID, SERIES_UID, SOP_UID, FOR_UID, REF_UID):
        assert uid not in text, uid
    assert out.StudyInstanceUID == p.uid(STUDY_UID)
    assert out.SOPInstanceUID == out.file_meta.MediaStorageSOPInstanceUID == p.uid(SOP_UID)
    assert out.ReferencedImageSequence[0].ReferencedSOPInstanceUID == p.uid(REF_UID)
    assert "PatientName" not in out.ReferencedImageSequence[0]
    # classes and syntaxes are not identifiers
    assert out.SOPClassUID == CTImageStorage == out.ReferencedImageSequence[0].ReferencedSOPClassUID
    assert out.file_meta.TransferSyntaxUID == ExplicitVRLittleEndian
    # patient characteristics are kept, a very old age is aggregated
    assert (out.PatientSex, out.PatientAge, out.EthnicGroup) == ("F", "090Y", "Example")
    # descriptors are kept with known identifiers scrubbed
    assert out.StudyDescription == "CT chest for [REMOVED] [REMOVED] ([REMOVED])"
    assert out.BodyPartExamined == "CHEST" and out.SeriesDescription == "Axial 5mm"
    assert out.BurnedInAnnotation == "NO"
    assert not any(elem.tag.is_private for elem in out)
    assert not any(elem.tag.group == 0x6000 for elem in out)
    assert out.PatientIdentityRemoved == "YES"
    assert {item.CodeValue for item in out.DeidentificationMethodCodeSequence} >= {"113100", "113108"}
    for elem in out:
        assert int(elem.tag) not in PHI_TAGS, keyword_for_tag(elem.tag)


def test_deidentify_is_deterministic_per_key() -> None:
    a = deidentify(_dataset(), Pseudonymizer(KEY))
    b = deidentify(_dataset(), Pseudonymizer(KEY))
    c = deidentify(_dataset(), Pseudonymizer(bytes(32)))
    assert a.StudyInstanceUID == b.StudyInstanceUID != c.StudyInstanceUID
    assert a.SeriesInstanceUID == b.SeriesInstanceUID != c.SeriesInstanceUID


def _read_back(ds: Dataset, tmp_path: Path, drop_charset: bool = False) -> Dataset:
    """``ds`` written and read back: its text values are raw bytes until something converts them."""
    path = tmp_path / "written.dcm"
    ds.save_as(path, enforce_file_format=True)
    read = dcmread(path)
    if drop_charset:  # a file that declares no character set, its bytes UTF-8 all the same
        del read[0x00080005]
    return read


@pytest.mark.parametrize(
    ("charset", "name", "description"),
    [
        ("ISO_IR 144", "Иванов^Иван", "КТ Иванов грудь"),  # Cyrillic
        ("ISO_IR 148", "Şahin^Ayşe", "BT Şahin toraks"),  # Turkish
        ("ISO_IR 126", "Παπαδόπουλος^Νίκος", "CT Παπαδόπουλος θώρακας"),  # Greek
        ("ISO_IR 192", "Müller^Jörg", "CT Müller Thorax Jörg"),  # UTF-8
    ],
)
def test_descriptors_lose_the_name_in_the_files_character_set(
    charset: str, name: str, description: str, tmp_path: Path
) -> None:
    ds = _dataset()
    ds.SpecificCharacterSet = charset
    ds.PatientName, ds.StudyDescription, ds.SeriesDescription = name, description, name.split("^")[1] + " pa"
    out = deidentify(_read_back(ds, tmp_path), Pseudonymizer(bytes(32)))
    family, given = name.split("^")
    assert family not in str(out.StudyDescription) and "[REMOVED]" in str(out.StudyDescription)
    assert str(out.SeriesDescription) == "[REMOVED] pa"
    assert given not in _all_text(out) and family not in _all_text(out)


def test_descriptors_lose_the_name_when_the_file_declares_no_character_set(tmp_path: Path) -> None:
    ds = _dataset()
    ds.SpecificCharacterSet = "ISO_IR 192"
    ds.PatientName, ds.StudyDescription, ds.SeriesDescription = "Müller^Jörg", "Müller Thorax", "Jörg pa"
    out = deidentify(_read_back(ds, tmp_path, drop_charset=True), Pseudonymizer(bytes(32)))
    assert str(out.StudyDescription) == "[REMOVED] Thorax" and str(out.SeriesDescription) == "[REMOVED] pa"


@pytest.mark.parametrize("implicit", [False, True])
def test_no_date_time_or_person_name_survives_at_any_depth(implicit: bool) -> None:
    """The attributes the list missed (some inside functional groups and context items) and, as a
    safety net, every DA / DT / TM / PN element whether listed or not, also read back without VRs."""
    import io

    from pydicom.uid import ImplicitVRLittleEndian

    ds = _dataset()
    ds.InstanceCoercionDateTime = "20240102101010"
    ds.StudyUpdateDateTime = "20240103101010"
    ds.PatientBirthDateInAlternativeCalendar = "19500101"
    ds.ReviewerName = "Smith^Bob"
    ds.AcquisitionDeviceProcessingDescription = "Doe Jane chest"
    ds.ClinicalTrialSubjectID = "SUBJ-0042"
    ds.SecondaryReviewerName = "Roe^Rick"  # not listed: the VR net takes these
    ds.ExpectedCompletionDateTime = "20240104101010"
    ds.ContrastBolusStartTime = "101112"
    frame = Dataset()
    frame.FrameAcquisitionDateTime = "20240105101112"
    frame.FrameReferenceDateTime = "20240106101112"
    frame.FrameAcquisitionNumber = 1
    group = Dataset()
    group.FrameContentSequence = Sequence([frame])
    ds.PerFrameFunctionalGroupsSequence = Sequence([group])
    context = Dataset()
    context.ValueType, context.DateTime, context.Date, context.Time = "DATE", "20240107", "20240108", "101314"
    evaluator = Dataset()
    evaluator.EvaluatorName = "Poe^Pat"
    context.ConceptNameCodeSequence = Sequence([evaluator])  # a name two levels down, in no listed sequence
    ds.AcquisitionContextSequence = Sequence([context])
    if implicit:
        ds.file_meta.TransferSyntaxUID = ImplicitVRLittleEndian
        buffer = io.BytesIO()
        ds.save_as(buffer, implicit_vr=True, little_endian=True, enforce_file_format=True)
        ds = dcmread(io.BytesIO(buffer.getvalue()))
    out = deidentify(ds, Pseudonymizer(KEY))
    text = _all_text(out)
    for value in ("2024010", "19500101", "101112", "101314", "Smith", "Doe", "SUBJ-0042", "Roe", "Poe"):
        assert value not in text, value
    found: list[str] = []
    out.walk(lambda _d, elem: found.append(elem.keyword) if elem.VR in ("DA", "DT", "TM", "PN") else None)
    assert found == []
    assert out.PerFrameFunctionalGroupsSequence[0].FrameContentSequence[0].FrameAcquisitionNumber == 1
    assert out.AcquisitionContextSequence[0].ValueType == "DATE"
    assert out.StudyDescription.startswith("CT chest for [REMOVED]")  # descriptors are cleaned, not removed
