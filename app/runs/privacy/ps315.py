"""What SegLens adds to dicognito's de-identification (app.runs.privacy.deidentify), from DICOM PS3.15 Annex E, Table
E.1-1 (Basic Application Level Confidentiality Profile), and the source values the last check looks for.

dicognito 0.19 replaces every PN, UI (but class and transfer syntax UIDs), DA/DT/TM, the patient's and the
institution's address, the IDs it knows and strips a few patient attributes; it leaves the free-text and
equipment attributes below as they were. These are the profile's X (remove) attributes that dicognito keeps.
None of them is Type 1 or 2 in an IOD SegLens writes. PatientAge, PatientSex, PatientSize and PatientWeight are
kept on purpose: the Retain Patient Characteristics Option, declared in DeidentificationMethodCodeSequence.
"""

from __future__ import annotations

REMOVE = (
    "AcquisitionComments", "AcquisitionDeviceProcessingDescription", "AcquisitionProtocolDescription",
    "ActualHumanPerformersSequence", "AdditionalPatientHistory", "AdmissionID", "AdmittingDiagnosesCodeSequence",
    "AdmittingDiagnosesDescription", "Allergies", "AuthorObserverSequence", "BranchOfService",
    "CommentsOnThePerformedProcedureStep", "ConfidentialityConstraintOnPatientDataDescription",
    "ContributionDescription", "CountryOfResidence", "CurrentPatientLocation", "CustodialOrganizationSequence",
    "DataSetTrailingPadding", "DerivationDescription", "DeviceSerialNumber", "DigitalSignaturesSequence",
    "DischargeDiagnosisDescription", "DistributionAddress", "DistributionName", "EthnicGroup", "FrameComments",
    "GantryID", "GeneratorID", "HumanPerformerName", "HumanPerformerOrganization", "IconImageSequence",
    "IdentifyingComments", "ImageComments", "ImagePresentationComments", "ImagingServiceRequestComments",
    "InstitutionAddress", "InstitutionCodeSequence", "InstitutionName", "InstitutionalDepartmentName",
    "InstitutionalDepartmentTypeCodeSequence", "InsurancePlanIdentification",
    "IntendedRecipientsOfResultsIdentificationSequence", "InterpretationApproverSequence", "InterpretationAuthor",
    "InterpretationDiagnosisDescription", "InterpretationIDIssuer", "InterpretationRecorder",
    "InterpretationText", "InterpretationTranscriber", "IssuerOfAdmissionIDSequence", "IssuerOfPatientID",
    "IssuerOfPatientIDQualifiersSequence", "IssuerOfServiceEpisodeIDSequence", "LastMenstrualDate",
    "MedicalAlerts", "MedicalRecordLocator", "MilitaryRank", "ModifiedAttributesSequence",
    "ModifiedImageDescription", "ModifyingDeviceID", "NameOfPhysiciansReadingStudy",
    "NamesOfIntendedRecipientsOfResults", "Occupation", "OperatorIdentificationSequence", "OperatorsName",
    "OrderCallbackPhoneNumber", "OrderEnteredBy", "OrderEntererLocation", "OriginalAttributesSequence",
    "OtherPatientIDs", "OtherPatientIDsSequence", "OtherPatientNames", "ParticipantSequence", "PatientAddress",
    "PatientBirthName", "PatientBirthTime", "PatientComments", "PatientInsurancePlanCodeSequence",
    "PatientMotherBirthName", "PatientPrimaryLanguageCodeSequence", "PatientReligiousPreference", "PatientState",
    "PatientTelecomInformation", "PatientTelephoneNumbers", "PerformedLocation",
    "PerformedProcedureStepDescription", "PerformedProcedureStepID", "PerformingPhysicianIdentificationSequence",
    "PerformingPhysicianName", "PersonAddress", "PersonIdentificationCodeSequence", "PersonName",
    "PersonTelephoneNumbers", "PhysicianApprovingInterpretation", "PhysiciansOfRecord",
    "PhysiciansOfRecordIdentificationSequence", "PhysiciansReadingStudyIdentificationSequence", "PreMedication",
    "ProtocolName", "ReasonForStudy", "ReasonForTheImagingServiceRequest", "ReferencedPatientAliasSequence",
    "ReferencedPatientPhotoSequence", "ReferencedPatientSequence", "ReferringPhysicianAddress",
    "ReferringPhysicianIdentificationSequence", "ReferringPhysicianTelephoneNumbers", "RegionOfResidence",
    "RequestAttributesSequence", "RequestedContrastAgent", "RequestedProcedureComments",
    "RequestedProcedureDescription", "RequestedProcedureID", "RequestedProcedureLocation", "RequestingPhysician",
    "RequestingService", "ResponsibleOrganization", "ResponsiblePerson", "ResultsComments",
    "ResultsDistributionListSequence", "ResultsIDIssuer", "ScheduledHumanPerformersSequence",
    "ScheduledPatientInstitutionResidence", "ScheduledPerformingPhysicianIdentificationSequence",
    "ScheduledPerformingPhysicianName", "ScheduledProcedureStepDescription", "ScheduledProcedureStepID",
    "ScheduledProcedureStepLocation", "ScheduledStationName", "ScheduledStudyLocation",
    "ScheduledStudyLocationAETitle", "SeriesDescription", "ServiceEpisodeDescription", "ServiceEpisodeID",
    "SmokingStatus", "SpecialNeeds", "StationName", "StudyComments", "StudyDescription", "StudyIDIssuer",
    "TextComments", "TextString", "TopicAuthor", "TopicKeywords", "TopicSubject", "TopicTitle",
    "VerifyingObserverIdentificationCodeSequence", "VerifyingObserverName", "VerifyingObserverSequence",
    "VerifyingOrganization", "VisitComments",
    # Clinical Trial Subject, Study and Series modules, issuers, stations and detectors: the Patient and Study
    # modules highdicom copies into a SEG or SC carry the first (a subject ID identifies the patient to the trial)
    "CassetteID", "ClinicalTrialCoordinatingCenterName", "ClinicalTrialProtocolEthicsCommitteeApprovalNumber",
    "ClinicalTrialProtocolEthicsCommitteeName", "ClinicalTrialProtocolID", "ClinicalTrialProtocolName",
    "ClinicalTrialSeriesDescription", "ClinicalTrialSeriesID", "ClinicalTrialSiteID", "ClinicalTrialSiteName",
    "ClinicalTrialSponsorName", "ClinicalTrialSubjectID", "ClinicalTrialSubjectReadingID",
    "ClinicalTrialTimePointDescription", "ClinicalTrialTimePointID", "ConsultingPhysicianIdentificationSequence",
    "ContentCreatorIdentificationCodeSequence", "DetectorID", "DeviceLabel", "IssuerOfAccessionNumberSequence",
    "IssuerOfTheContainerIdentifierSequence", "LongDeviceDescription", "PatientTransportArrangements",
    "PerformedStationAETitle", "PerformedStationGeographicLocationCodeSequence", "PerformedStationName",
    "PerformedStationNameCodeSequence", "PlateID", "ReasonForVisit", "ReasonForVisitCodeSequence",
    "RequestingPhysicianIdentificationSequence", "ScheduledStationAETitle",
    "ScheduledStationGeographicLocationCodeSequence", "ScheduledStationNameCodeSequence", "SourceSerialNumber",
    "SpecimenAccessionNumber", "XRayDetectorID", "XRaySourceID",
)

# Z (zero length) attributes of Type 2 that dicognito would fill with made-up values: emptied instead, so the
# output holds no random text that could by chance contain a real name (and trip the last check).
EMPTY = ("AccessionNumber", "PatientBirthDate", "StudyID", "ReferringPhysicianName", "ContentCreatorName",
         "PatientBirthDateInAlternativeCalendar")

# Attributes SegLens writes itself into a SEG or Secondary Capture (its series description, the banner text, the
# model's hash as the device serial number): kept in those, removed from a copy of the source.
OWN_IN_DERIVED = frozenset({"SeriesDescription", "ImageComments", "DerivationDescription", "DeviceSerialNumber",
                            "ContentDescription"})

# The source's values the last check (app.runs.privacy.check) looks for in every output: kind → attributes.
# Names are also looked for by their components (family, given…); the kind is what a failed check says, never
# the value.
IDENTIFYING = {
    "patient name": ("PatientName", "OtherPatientNames", "PatientBirthName", "PatientMotherBirthName"),
    "patient ID": ("PatientID", "OtherPatientIDs", "IssuerOfPatientID", "MedicalRecordLocator",
                   "ClinicalTrialSubjectID", "ClinicalTrialSubjectReadingID"),
    "birth date": ("PatientBirthDate",),
    "accession number": ("AccessionNumber",),
    "institution": ("InstitutionName", "InstitutionAddress", "InstitutionalDepartmentName"),
    "address or telephone": ("PatientAddress", "PatientTelephoneNumbers", "ReferringPhysicianAddress",
                             "ReferringPhysicianTelephoneNumbers"),
    "station or device": ("StationName", "DeviceSerialNumber"),
    "physician or operator": ("ReferringPhysicianName", "PerformingPhysicianName", "OperatorsName",
                              "NameOfPhysiciansReadingStudy", "RequestingPhysician", "PhysiciansOfRecord"),
}
NAME_KINDS = frozenset({"patient name", "physician or operator"})

# DICOM's own registry (SOP classes, transfer syntaxes, coding schemes, well-known frames of reference): never
# an instance's UID, never remapped.
DICOM_ROOT = "1.2.840.10008."
