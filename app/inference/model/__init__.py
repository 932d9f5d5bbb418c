"""What a model is: its spec (ModelSpec and its records), the sidecar, the ONNX graph read, class names, labels and
codes; and the ModelSession protocol every backend that runs one implements (session.py). Imports nothing else of
app.inference."""
