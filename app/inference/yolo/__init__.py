"""Ultralytics YOLO exports opened as they are: the head read from the graph and its metadata (segment, detect,
classify, obb; v8/11 anchors, YOLOv5 objectness, end-to-end), Ultralytics' letterbox and its postprocessing
exactly (confidence, class-aware NMS, max_det, retina masks), into `Instances` or class scores."""
