"""The one folder run for images and volumes: its plan, the prefetch → inference → writer stages, --resume, metrics
against a reference, and volumes."""
