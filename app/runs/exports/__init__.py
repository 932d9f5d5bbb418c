"""A volume's result in the formats clinical systems read: DICOM SEG, RTSTRUCT, Secondary Capture and de-identified
source copies."""
