"""nnU-Net v2 trained-model folders made into ONNX without PyTorch: the plans' network (PlainConvUNet,
ResidualEncoderUNet) emitted as an ONNX graph with the checkpoint's weights."""
