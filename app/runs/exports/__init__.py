"""A volume's result in the formats clinical and research systems read: DICOM SEG, a NIfTI label volume, RTSTRUCT,
Secondary Capture and de-identified source copies."""
