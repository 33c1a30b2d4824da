"""De-identification of DICOM data sets on ingest (DICOM PS3.15 Annex E, Basic Application Level
Confidentiality Profile with the Retain Patient Characteristics and Clean Descriptors options), applied
before anything else is read from a file; keyed UID pseudonyms and the key that makes them.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path
from typing import Any

from pydicom.charset import convert_encodings, decode_bytes
from pydicom.datadict import dictionary_VR, keyword_for_tag, tag_for_keyword
from pydicom.dataelem import DataElement
from pydicom.dataset import Dataset
from pydicom.multival import MultiValue
from pydicom.tag import BaseTag
from pydicom.uid import UID_dictionary

from kg.settings import SettingsError

__all__ = [
    "PHI_KEYWORDS",
    "PHI_TAGS",
    "KEY_BYTES",
    "Pseudonymizer",
    "load_or_create_key",
    "resolve_key",
    "deidentify",
]

KEY_BYTES = 32

# Attributes removed by the basic profile: DICOM PS3.15 (2024) Annex E, Table E.1-1 "Application Level
# Confidentiality Profile Attributes", the entries whose Basic Profile action is X, Z, D, X/Z, X/D, Z/D or
# X/Z/D (all removed here; removing is allowed for each), less those kept by the Retain Patient
# Characteristics Option (PatientSex, PatientAge, PatientSize, PatientWeight, EthnicGroup, ...) and the three
# descriptors kept under the Clean Descriptors Option (StudyDescription, SeriesDescription, and
# BodyPartExamined, which the table does not list). UIDs (action U) are replaced, not removed; see
# _KEEP_UID_KEYWORDS.
PHI_KEYWORDS: tuple[str, ...] = (
    # patient identity
    "PatientName",
    "PatientID",
    "IssuerOfPatientID",
    "TypeOfPatientID",
    "IssuerOfPatientIDQualifiersSequence",
    "PatientBirthDate",
    "PatientBirthTime",
    "PatientBirthDateInAlternativeCalendar",
    "PatientDeathDateInAlternativeCalendar",
    "PatientAlternativeCalendar",
    "PatientBirthName",
    "PatientMotherBirthName",
    "OtherPatientIDs",
    "OtherPatientIDsSequence",
    "OtherPatientNames",
    "PatientAddress",
    "PatientTelephoneNumbers",
    "PatientTelecomInformation",
    "CountryOfResidence",
    "RegionOfResidence",
    "MilitaryRank",
    "BranchOfService",
    "MedicalRecordLocator",
    "Occupation",
    "PatientReligiousPreference",
    "PatientInsurancePlanCodeSequence",
    "InsurancePlanIdentification",
    "PatientPrimaryLanguageCodeSequence",
    "PatientComments",
    "AdditionalPatientHistory",
    "MedicalAlerts",
    "Allergies",
    "SpecialNeeds",
    "PatientState",
    "PatientTransportArrangements",
    "PatientInstitutionResidence",
    "ReferencedPatientSequence",
    "ReferencedPatientAliasSequence",
    "ReferencedPatientPhotoSequence",
    "ResponsiblePerson",
    "ResponsiblePersonRole",
    "ResponsibleOrganization",
    "PersonName",
    "PersonAddress",
    "PersonTelephoneNumbers",
    "PersonIdentificationCodeSequence",
    "LastMenstrualDate",
    "PregnancyStatus",
    "SmokingStatus",
    # visit, order and request
    "AccessionNumber",
    "IssuerOfAccessionNumberSequence",
    "StudyID",
    "StudyIDIssuer",
    "AdmissionID",
    "IssuerOfAdmissionID",
    "IssuerOfAdmissionIDSequence",
    "AdmittingDate",
    "AdmittingTime",
    "AdmittingDiagnosesDescription",
    "AdmittingDiagnosesCodeSequence",
    "DischargeDiagnosisDescription",
    "ServiceEpisodeID",
    "ServiceEpisodeDescription",
    "IssuerOfServiceEpisodeID",
    "CurrentPatientLocation",
    "VisitComments",
    "ReasonForStudy",
    "ReasonForTheRequestedProcedure",
    "RequestAttributesSequence",
    "RequestedProcedureID",
    "RequestedProcedureDescription",
    "RequestedProcedureComments",
    "RequestedProcedureLocation",
    "RequestedContrastAgent",
    "RequestingPhysician",
    "RequestingService",
    "ImagingServiceRequestComments",
    "PlacerOrderNumberImagingServiceRequest",
    "FillerOrderNumberImagingServiceRequest",
    "OrderCallbackPhoneNumber",
    "OrderEnteredBy",
    "OrderEntererLocation",
    "PreMedication",
    "StudyComments",
    # clinical trial subject, site and protocol
    "ClinicalTrialSponsorName",
    "ClinicalTrialProtocolID",
    "ClinicalTrialProtocolName",
    "ClinicalTrialSiteID",
    "ClinicalTrialSiteName",
    "ClinicalTrialSubjectID",
    "ClinicalTrialSubjectReadingID",
    "ClinicalTrialTimePointID",
    "ClinicalTrialTimePointDescription",
    "ClinicalTrialCoordinatingCenterName",
    "ClinicalTrialProtocolEthicsCommitteeName",
    "ClinicalTrialProtocolEthicsCommitteeApprovalNumber",
    "ClinicalTrialSeriesID",
    "ClinicalTrialSeriesDescription",
    # people
    "ReferringPhysicianName",
    "ReferringPhysicianAddress",
    "ReferringPhysicianTelephoneNumbers",
    "ReferringPhysicianIdentificationSequence",
    "ConsultingPhysicianName",
    "ConsultingPhysicianIdentificationSequence",
    "PerformingPhysicianName",
    "PerformingPhysicianIdentificationSequence",
    "PhysiciansOfRecord",
    "PhysiciansOfRecordIdentificationSequence",
    "NameOfPhysiciansReadingStudy",
    "PhysiciansReadingStudyIdentificationSequence",
    "OperatorsName",
    "OperatorIdentificationSequence",
    "ScheduledPerformingPhysicianName",
    "ScheduledPerformingPhysicianIdentificationSequence",
    "ScheduledHumanPerformersSequence",
    "ActualHumanPerformersSequence",
    "HumanPerformerName",
    "HumanPerformerOrganization",
    "NamesOfIntendedRecipientsOfResults",
    "IntendedRecipientsOfResultsIdentificationSequence",
    "PhysicianApprovingInterpretation",
    "InterpretationAuthor",
    "InterpretationRecorder",
    "InterpretationTranscriber",
    "InterpretationApproverSequence",
    "DistributionName",
    "DistributionAddress",
    "ContentCreatorName",
    "ContentCreatorIdentificationCodeSequence",
    "AuthorObserverSequence",
    "ParticipantSequence",
    "VerifyingObserverName",
    "VerifyingObserverSequence",
    "VerifyingObserverIdentificationCodeSequence",
    "VerifyingOrganization",
    "ReviewerName",
    "CustodialOrganizationSequence",
    # institution, device, station
    "InstitutionName",
    "InstitutionAddress",
    "InstitutionCodeSequence",
    "InstitutionalDepartmentName",
    "InstitutionalDepartmentTypeCodeSequence",
    "StationName",
    "DeviceSerialNumber",
    "DeviceID",
    "DeviceDescription",
    "LongDeviceDescription",
    "DeviceLabel",
    "UDISequence",
    "UniqueDeviceIdentifier",
    "AcquisitionDeviceProcessingDescription",
    "DetectorID",
    "GantryID",
    "GeneratorID",
    "CassetteID",
    "PlateID",
    "ModifyingDeviceID",
    "PerformedStationName",
    "PerformedStationAETitle",
    "PerformedLocation",
    "PerformedStationGeographicLocationCodeSequence",
    "ScheduledStationName",
    "ScheduledStationAETitle",
    "ScheduledProcedureStepLocation",
    "SourceApplicationEntityTitle",
    "ProtocolName",
    "PerformedProcedureStepID",
    "PerformedProcedureStepDescription",
    "CommentsOnThePerformedProcedureStep",
    "ScheduledProcedureStepID",
    "ScheduledProcedureStepDescription",
    "ScheduledStudyLocation",
    "ScheduledStudyLocationAETitle",
    # dates and times (the basic profile removes or dummies them; removed here, and every other DA, DT
    # and TM element with them: see _scrub)
    "StudyDate",
    "StudyTime",
    "SeriesDate",
    "SeriesTime",
    "AcquisitionDate",
    "AcquisitionTime",
    "AcquisitionDateTime",
    "ContentDate",
    "ContentTime",
    "InstanceCreationDate",
    "InstanceCreationTime",
    "OverlayDate",
    "OverlayTime",
    "CurveDate",
    "CurveTime",
    "DateOfSecondaryCapture",
    "TimeOfSecondaryCapture",
    "PerformedProcedureStepStartDate",
    "PerformedProcedureStepStartTime",
    "PerformedProcedureStepEndDate",
    "PerformedProcedureStepEndTime",
    "ScheduledProcedureStepStartDate",
    "ScheduledProcedureStepStartTime",
    "ScheduledProcedureStepEndDate",
    "ScheduledProcedureStepEndTime",
    "RadiopharmaceuticalStartTime",
    "RadiopharmaceuticalStopTime",
    "RadiopharmaceuticalStartDateTime",
    "RadiopharmaceuticalStopDateTime",
    "DateOfLastCalibration",
    "TimeOfLastCalibration",
    "TimezoneOffsetFromUTC",
    "InstanceCoercionDateTime",
    "StudyUpdateDateTime",
    "FrameAcquisitionDateTime",
    "FrameReferenceDateTime",
    "ReviewDate",
    "ReviewTime",
    # free text and other carriers of identifiers
    "ImageComments",
    "FrameComments",
    "AcquisitionComments",
    "DerivationDescription",
    "IdentifyingComments",
    "TextString",
    "TextComments",
    "Impressions",
    "ResultsComments",
    "InterpretationText",
    "InterpretationDiagnosisDescription",
    "ContentSequence",
    "GraphicAnnotationSequence",
    "IconImageSequence",
    "DigitalSignaturesSequence",
    "OriginalAttributesSequence",
    "ModifiedAttributesSequence",
    "DataSetTrailingPadding",
    "TopicTitle",
    "TopicSubject",
    "TopicAuthor",
    "TopicKeywords",
    "ContributionDescription",
    "ConfidentialityConstraintOnPatientDataDescription",
)


def _tags(keywords: tuple[str, ...]) -> frozenset[int]:
    tags = set()
    for keyword in keywords:
        tag = tag_for_keyword(keyword)
        if tag is None:  # a typo here would silently keep an identifier
            raise RuntimeError(f"PHI_KEYWORDS: {keyword!r} is not a DICOM keyword known to pydicom")
        tags.add(tag)
    return frozenset(tags)


PHI_TAGS: frozenset[int] = _tags(PHI_KEYWORDS)
# Removed wherever they occur, listed or not: no date, time or person name is kept (none is shifted).
_REMOVED_VRS = frozenset({"DA", "DT", "TM", "PN"})

# UI elements that name a class or a syntax rather than an instance: never pseudonymised.
_KEEP_UID_KEYWORDS = frozenset(
    {
        "TransferSyntaxUID",
        "SOPClassUID",
        "MediaStorageSOPClassUID",
        "AffectedSOPClassUID",
        "RequestedSOPClassUID",
        "ReferencedSOPClassUID",
        "ReferencedSOPClassUIDInFile",
        "ReferencedTransferSyntaxUIDInFile",
        "ReferencedRelatedGeneralSOPClassUIDInFile",
        "RelatedGeneralSOPClassUID",
        "OriginalSpecializedSOPClassUID",
        "SOPClassesInStudy",
        "ImplementationClassUID",
        "CodingSchemeUID",
        "ContextGroupExtensionCreatorUID",
        "ContextUID",
        "MappingResourceUID",
        "PrivateInformationCreatorUID",
    }
)
# The descriptors kept under the Clean Descriptors Option: known identifiers are scrubbed from them.
_DESCRIPTOR_KEYWORDS = ("StudyDescription", "SeriesDescription", "BodyPartExamined")
_DESCRIPTOR_TAGS = frozenset(tag_for_keyword(k) for k in _DESCRIPTOR_KEYWORDS)
_PATIENT_AGE = tag_for_keyword("PatientAge")
_CHARSET = tag_for_keyword("SpecificCharacterSet")
_IDENTIFIER_KEYWORDS = ("PatientName", "PatientID", "OtherPatientIDs", "OtherPatientNames", "AccessionNumber")
_REMOVED = "[REMOVED]"
# PS3.16 CID 7050 "De-identification Method": what was applied.
_METHOD_CODES = (
    ("113100", "Basic Application Confidentiality Profile"),
    ("113108", "Retain Patient Characteristics Option"),
    ("113105", "Clean Descriptors Option"),
)


class Pseudonymizer:
    """Keyed, deterministic, one-way UID pseudonyms (HMAC-SHA256), valid DICOM UIDs under ``2.25``."""

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes | bytearray) or len(key) < 16:
            raise ValueError("a pseudonymisation key must be at least 16 bytes")
        self._key = bytes(key)

    def __repr__(self) -> str:  # never show the key
        return "Pseudonymizer(key=***)"

    def uid(self, value: str) -> str:
        """``2.25.<integer of the first 16 bytes of HMAC-SHA256(key, value)>`` (at most 44 characters)."""
        value = str(value).strip().rstrip("\x00").strip()
        digest = hmac.new(self._key, value.encode("utf-8"), hashlib.sha256).digest()
        return "2.25." + str(int.from_bytes(digest[:16], "big"))

    def image_id(self, sop_instance_uid: str) -> str:
        return "IMG:" + self.uid(sop_instance_uid)

    def study_id(self, study_uid: str) -> str:
        return "STUDY:" + self.uid(study_uid)

    def series_id(self, series_uid: str) -> str:
        return "SERIES:" + self.uid(series_uid)


def load_or_create_key(path: Path) -> bytes:
    """The key in ``path``; on first use, 32 random bytes are written there with mode 0600."""
    path = Path(path)
    try:
        key = path.read_bytes()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        key = secrets.token_bytes(KEY_BYTES)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first: use that one
            key = path.read_bytes()
        else:
            with os.fdopen(fd, "wb") as handle:
                handle.write(key)
                handle.flush()
                os.fsync(handle.fileno())
    if len(key) < 16:
        raise SettingsError(
            f"{path} holds {len(key)} bytes; a pseudonymisation key needs at least 16 (restore the key file, "
            "or set MEDKG_DEID_KEY)"
        )
    return key


def resolve_key(hex_key: str | Any | None, data_dir: Path) -> bytes:
    """The configured key (hex, ``MEDKG_DEID_KEY``; a pydantic ``SecretStr`` is accepted), else the
    key file ``<data_dir>/deid.key``."""
    if hex_key is not None and hasattr(hex_key, "get_secret_value"):
        hex_key = hex_key.get_secret_value()
    if hex_key:
        try:
            key = bytes.fromhex(hex_key.strip())
        except ValueError:
            raise SettingsError("MEDKG_DEID_KEY: the de-identification key must be hexadecimal") from None
        if len(key) < 16:
            raise SettingsError("MEDKG_DEID_KEY: the de-identification key must be at least 16 bytes (32 hex digits)")
        return key
    return load_or_create_key(Path(data_dir) / "deid.key")


def _is_overlay_or_curve(tag: int) -> bool:
    group = tag >> 16
    return (0x5000 <= group <= 0x501E or 0x6000 <= group <= 0x601E) and group % 2 == 0


def _raw_values(ds: Dataset, tag: BaseTag, encodings: list[str] | None = None) -> list[str]:
    """The values of an element as text, read without pydicom's value conversion: converting
    validates the value and quotes an invalid one (a name, an original UID) in a warning and a log."""
    value = ds.get_item(tag).value
    if value is None:
        return []
    if isinstance(value, bytes):
        if encodings:
            text = decode_bytes(value, encodings, set())
        else:
            try:
                text = value.decode("utf-8")
            except UnicodeDecodeError:  # most often ISO_IR 100
                text = value.decode("latin-1")
        return [v.strip(" \x00") for v in text.split("\\")]
    if isinstance(value, MultiValue | list | tuple):
        return [str(v) for v in value]
    return [str(value)]


def _pseudonymise_uids(ds: Dataset, tag: BaseTag, pseudonymizer: Pseudonymizer) -> None:
    keyword = keyword_for_tag(tag)
    values = _raw_values(ds, tag)
    new = [v if not v or keyword in _KEEP_UID_KEYWORDS or v in UID_dictionary else pseudonymizer.uid(v) for v in values]
    ds[tag] = DataElement(tag, "UI", new if len(new) > 1 else new[0] if new else "")


def _encodings(ds: Dataset) -> list[str]:
    """The Python codecs of a dataset's text: its Specific Character Set, else ISO 8859 (pydicom's
    default for a file that names none)."""
    return convert_encodings(_raw_values(ds, _CHARSET) or ["ISO_IR 6"]) if _CHARSET in ds else ["iso8859"]


def _identifiers(ds: Dataset) -> list[str]:
    """The patient's names and ids as they read in the file's character set (what its descriptors
    are cleaned in) and as UTF-8 or Latin-1 (a file whose declared set is wrong or missing)."""
    found: list[str] = []
    encodings = _encodings(ds)
    for keyword in _IDENTIFIER_KEYWORDS:
        tag = tag_for_keyword(keyword)
        read = [*_raw_values(ds, tag, encodings), *_raw_values(ds, tag)] if tag in ds else []
        for text in dict.fromkeys(read):
            found.append(text)
            found.extend(re.split(r"[\^=]", text))  # PN components: family^given^middle^prefix^suffix
    # Longest first, so "Doe^Jane" is removed before "Doe"; single letters would eat ordinary text.
    return sorted({f.strip() for f in found if len(f.strip()) >= 2}, key=len, reverse=True)


def _clean_descriptor(text: str, identifiers: list[str]) -> str:
    for ident in identifiers:
        text = re.sub(re.escape(ident), _REMOVED, text, flags=re.IGNORECASE)
    return text


def _cap_age(value: str) -> str:
    match = re.fullmatch(r"(\d{3})([DWMY])", value.strip())
    if match and match.group(2) == "Y" and int(match.group(1)) > 89:
        return "090Y"
    return value


def _vr(ds: Dataset, tag: BaseTag) -> str:
    """The VR of an element without converting its value (an implicit-VR or UN element: the dictionary's)."""
    vr = ds.get_item(tag).VR
    if vr in (None, "UN"):
        try:
            return dictionary_VR(tag)
        except KeyError:
            return "UN"
    return str(vr)


def _scrub(ds: Dataset, pseudonymizer: Pseudonymizer, identifiers: list[str], encodings: list[str]) -> None:
    """Remove, replace and clean in place, recursively. Nothing removed or replaced is converted by
    pydicom first, so its value validation never quotes an identifier into a warning or a log."""
    if _CHARSET in ds:
        encodings = _encodings(ds)
    for tag in list(ds.keys()):
        if tag.is_private or int(tag) in PHI_TAGS or _is_overlay_or_curve(int(tag)):
            del ds[tag]
            continue
        vr = _vr(ds, tag)
        if vr in _REMOVED_VRS:
            del ds[tag]
            continue
        if vr == "SQ":
            for item in ds[tag].value or ():
                _scrub(item, pseudonymizer, identifiers, encodings)
        elif vr == "UI":
            _pseudonymise_uids(ds, tag, pseudonymizer)
        elif int(tag) in _DESCRIPTOR_TAGS and identifiers:
            values = [_clean_descriptor(v, identifiers) for v in _raw_values(ds, tag, encodings)]
            max_length = 16 if vr == "CS" else 64
            ds[tag] = DataElement(tag, vr, "\\".join(values)[:max_length])
        elif int(tag) == _PATIENT_AGE:
            values = _raw_values(ds, tag)
            ds[tag] = DataElement(tag, "AS", _cap_age(values[0]) if values else "")


def deidentify(ds: Dataset, pseudonymizer: Pseudonymizer) -> Dataset:
    """A de-identified copy of ``ds`` (basic profile). ``ds`` is unchanged.

    Removes ``PHI_KEYWORDS`` at any depth, every DA/DT/TM/PN element (listed or not), private tags,
    overlays and curves; replaces instance UIDs by their ``Pseudonymizer`` pseudonyms (registered UIDs
    are kept); keeps patient sex, age (over 89 as ``090Y``), size, weight and ethnic group, and the
    study/series descriptions and body part with known identifiers scrubbed; records
    ``PatientIdentityRemoved`` and ``DeidentificationMethod``.

    ``BurnedInAnnotation`` is kept: pixel-level scrubbing is not done, so the flag is what tells a
    caller that the pixels may show identifying text."""
    identifiers = _identifiers(ds)
    out = Dataset()
    out.update(copy.deepcopy(ds))  # a plain Dataset: no file name (a path can hold a patient's name)
    meta = getattr(ds, "file_meta", None)
    if meta is not None:
        out.file_meta = copy.deepcopy(meta)
    if hasattr(ds, "original_encoding"):
        out.set_original_encoding(*ds.original_encoding, ds.original_character_set)

    _scrub(out, pseudonymizer, identifiers, _encodings(ds))
    if meta is not None:
        for tag in list(out.file_meta.keys()):
            if _vr(out.file_meta, tag) == "UI":
                _pseudonymise_uids(out.file_meta, tag, pseudonymizer)
        for tag in [t for t in out.file_meta.keys() if t.is_private]:
            del out.file_meta[tag]
        for keyword in ("SourceApplicationEntityTitle", "SendingApplicationEntityTitle"):
            if keyword in out.file_meta:
                delattr(out.file_meta, keyword)
    out.PatientIdentityRemoved = "YES"
    out.DeidentificationMethod = "PS3.15 E.1 basic; retain pat. chars; clean descriptors"
    codes = []
    for value, meaning in _METHOD_CODES:
        item = Dataset()
        item.CodeValue, item.CodingSchemeDesignator, item.CodeMeaning = value, "DCM", meaning
        codes.append(item)
    out.DeidentificationMethodCodeSequence = codes
    return out
