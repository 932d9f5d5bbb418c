"""`seglens-cli serve`: ONNX models over the Open Inference Protocol (KServe v2 / Triton), REST and gRPC. Beside
app.runs: it serves models; it does not run folders."""
