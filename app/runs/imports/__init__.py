"""Importers: another framework's trained model compiled into an ONNX graph SegLens runs without that framework
(nnU-Net v2 trained-model folders first). A compiler, not a run: it reads a description and weights and writes a
model; nothing in it runs inference."""
