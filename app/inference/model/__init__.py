"""What a model is: its spec (ModelSpec and its records), the sidecar, the ONNX graph read, class names, labels and
codes. Imports nothing else of app.inference."""
