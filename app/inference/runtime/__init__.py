"""How a model runs here: ONNX Runtime's providers, the runtime options, the local session, its checked answers, the
doctor and telemetry."""
