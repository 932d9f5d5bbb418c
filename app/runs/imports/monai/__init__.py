"""MONAI bundles made into ONNX: the bundle folder read through the gates, its config's references resolved
without evaluating any Python (reader, records), the inference pipeline's transforms, inferer and post-processing
said in sidecar keys or refused (translation), the allowlisted network built with the bundle's weights and exported
(network: the one module that needs PyTorch and MONAI, the `import` extra), and both written (importer)."""
