"""Files, frames and studies in and out, with no model knowledge: images, DICOM, NIfTI and volumes decoded into
arrays, the folder walk and output names, atomic writes and PNG text, reference masks; PACS connections (io/pacs)
and a station's frame sources (io/sources). The layer below app.inference."""
