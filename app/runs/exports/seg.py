"""DICOM SEG (binary) for a DICOM volume, through highdicom: one segment per class, every frame referencing its
source instance, the source's frame of reference kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from app.errors import OutputError
from app.inference.model.codes import DEFAULT_CODE, Coded
from app.io.volumes import Volume, source_datasets
from app.runs.exports.sources import source_series_number

if TYPE_CHECKING:
    import highdicom as hd
    from pydicom import Dataset

    from app.runs.outputs.segments import Algorithm, Segment
    from app.runs.privacy.deidentify import VolumePrivacy

SEG_SERIES_OFFSET = 1000  # the SEG's SeriesNumber: the source's + 1000, so a PACS lists it beside its source


def build_segmentation(volume: Volume, labels: np.ndarray, segments: Sequence[Segment], *, algorithm: Algorithm,
                       privacy: VolumePrivacy | None = None) -> hd.seg.Segmentation:
    """The highdicom Segmentation of `labels` (uint8, the volume's slice order) for `segments` (value >= 1);
    under --anonymize (`privacy`) made from source headers with no identifying value (writer_sources)."""
    import highdicom as hd

    kept = [segment for segment in segments if segment.value >= 1]
    if not kept:
        raise OutputError(f"{volume.source}: no class to write as a DICOM SEG segment")
    datasets = source_datasets(volume)
    datasets = privacy.writer_sources(datasets) if privacy is not None else datasets
    sources, frames = _source_order(volume, datasets, _segment_numbers(labels, kept))
    try:
        seg = hd.seg.Segmentation(
            source_images=sources, pixel_array=frames,
            segmentation_type=hd.seg.SegmentationTypeValues.BINARY,
            segment_descriptions=_descriptions(kept, algorithm),
            series_instance_uid=hd.UID(), series_number=source_series_number(datasets) + SEG_SERIES_OFFSET,
            sop_instance_uid=hd.UID(), instance_number=1,
            manufacturer="SegLens", manufacturer_model_name="SegLens",
            software_versions=algorithm.software_version, device_serial_number=algorithm.version,
            series_description=f"SegLens {algorithm.name}"[:64],
            content_label="SEGLENS", content_description=f"Segmentation by {algorithm.name}"[:64],
        )
    except (ValueError, TypeError, AttributeError, KeyError) as exc:  # highdicom's checks of the source headers
        raise OutputError(f"{volume.source}: cannot build a DICOM SEG ({exc})") from exc
    return seg


def _segment_numbers(labels: np.ndarray, kept: Sequence[Segment]) -> np.ndarray:
    # A label map of segment numbers 1..n (highdicom's "label map" style) instead of n stacked bool planes:
    # one byte per voxel whatever the number of classes; labels not in `kept` become 0.
    lut = np.zeros(256, np.uint8)
    for number, segment in enumerate(kept, start=1):
        lut[segment.value] = number
    numbers: np.ndarray = lut[labels]
    return numbers


def _source_order(volume: Volume, datasets: list[Dataset], frames: np.ndarray) -> tuple[list[Dataset], np.ndarray]:
    """(source_images, frames) as highdicom pairs them: one dataset per slice, or the multi-frame file once with
    its frames in the file's order."""
    if volume.kind != "dicom-multiframe":
        return datasets, frames
    order = [ref.frame for ref in volume.slices]
    number = int(datasets[0].get("NumberOfFrames", 0) or 0)
    if len({ref.path for ref in volume.slices}) != 1 or sorted(order) != list(range(number)):
        raise OutputError(f"{volume.source}: a DICOM SEG needs every frame of the multi-frame file, once each")
    in_file = np.empty_like(frames)
    in_file[order] = frames
    return [datasets[0]], in_file


def _descriptions(kept: Sequence[Segment], algorithm: Algorithm) -> list[hd.seg.SegmentDescription]:
    import highdicom as hd
    from pydicom.sr.codedict import codes

    identification = hd.AlgorithmIdentificationSequence(
        name=algorithm.name, version=algorithm.version, family=codes.cid7162.ArtificialIntelligence,
        parameters={"model_sha256": algorithm.sha256},
    )
    # A class's category and type are the sidecar's `code:`; without one SegLens cannot tell what a free-text
    # class name means, so the segment gets the generic SNOMED CT "Tissue" (85756007) as both (codes.DEFAULT_CODE)
    # and its label carries the class name.
    return [
        hd.seg.SegmentDescription(
            segment_number=number, segment_label=segment.name[:64] or f"class {segment.value}",
            segmented_property_category=_concept((segment.code or DEFAULT_CODE).category),
            segmented_property_type=_concept((segment.code or DEFAULT_CODE).type),
            algorithm_type=hd.seg.SegmentAlgorithmTypeValues.AUTOMATIC, algorithm_identification=identification,
            display_color=hd.color.CIELabColor.from_rgb(*segment.color),
        )
        for number, segment in enumerate(kept, start=1)
    ]


def _concept(coded: Coded) -> hd.sr.CodedConcept:
    import highdicom as hd

    return hd.sr.CodedConcept(value=coded.value, scheme_designator=coded.scheme, meaning=coded.meaning)
