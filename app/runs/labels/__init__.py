"""Instance labels a training pipeline reads, and reads back: COCO instances JSON (polygons or run-length masks,
a results form with scores) and YOLO txt with its data.yaml, written whole through the writing gate and read back
through the reading gates as references, and the instance metrics a reference is scored with (per-image precision
and recall at IoU 0.5, mAP@0.5:0.95 as COCOeval computes it). Not a model's class names from its labels file:
those are app.inference.model.labels."""
