"""What a model is, and the records of what it finds: its spec (ModelSpec and its records), the sidecar, the ONNX
graph read, its class names (labels.py reads them from a labels file: not app.runs.labels, the instance label files a
run writes and reads back) and codes; `Instances` (instances.py: the objects a detection or instance model found in
one image); and the ModelSession protocol every backend that runs one implements (session.py). Imports nothing else
of app.inference."""
