"""One 2D image through a model: preprocessing, the pipeline, tiling, postprocessing and the label map at the image's
size."""
