"""nnU-Net v2 trained-model folders made into ONNX without PyTorch: the folder read (folder, records), the plans'
network (PlainConvUNet, ResidualEncoderUNet) emitted as an ONNX graph with the checkpoint's weights (network), its
inference values said in sidecar keys with what is not yet exact (mapping), and both written (importer)."""
