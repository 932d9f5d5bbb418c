"""A GenICam industrial camera as a station's source, through `harvesters` and a GenTL producer (.cti) by path.

The `genicam` extra installs harvesters and the EMVA's `genicam` binding, which ships Viky (`viky.cti` inside the
package, `simulator_cti()`), a GenTL camera simulator: the tests run against it. A real camera comes with its
vendor's producer (Basler's, Allied Vision's, MATRIX VISION's mvGenTL …), given by path.

`device`: the camera's index in the producer's list, or its serial number (a string). `features`: GenICam feature
values set in order before acquisition starts (`{"PixelFormat": "Mono8", "ExposureTime": 2000.0}`: a camera's
default format is often a Bayer or 12-bit one); one that is not there or refuses its value is one line. Frames
are RGB uint8: Mono8, RGB8, BGR8, RGBa8 and BGRa8 are taken; another format is refused in one line naming them.
Width × Height are checked against the pixel limit (app.io.decoded.pixel_limit) before acquisition starts.
Frames are handed over as app.io.sources.capture describes: newest wins, drops counted, a camera with no frame for
`stall_s` seconds ends the source with `stalled` set.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from app.errors import MissingExtra, need_extra, one_line
from app.io.decoded import pixel_limit
from app.io.limits import megapixels
from app.io.sources import SourceError
from app.io.sources.capture import STALL_S, CapturedSource

log = logging.getLogger(__name__)

Feature = str | int | float | bool  # a GenICam feature's value (enumerations by their symbolic name)

# GenICam's pixel format names (SFNC) → (channels in the buffer, their order as RGB indexes)
_FORMATS: dict[str, tuple[int, tuple[int, ...]]] = {
    "Mono8": (1, (0, 0, 0)), "RGB8": (3, (0, 1, 2)), "BGR8": (3, (2, 1, 0)),
    "RGBa8": (4, (0, 1, 2)), "BGRa8": (4, (2, 1, 0)),
}


def simulator_cti() -> Path | None:
    """The Viky GenTL simulator shipped in the `genicam` package, where it is installed."""
    try:
        import genicam
    except ImportError:
        return None
    path = Path(genicam.__file__).parent / "viky.cti"
    return path if path.is_file() else None


class GenICamSource(CapturedSource):
    """A Source (app.io.sources) over a GenICam camera: see the module's docstring. Iterate once; close when done
    (or use as a context manager). Raises SourceError in one line when the camera cannot be opened."""

    def __init__(self, cti: Path, *, device: int | str = 0, features: Mapping[str, Feature] | None = None,
                 stall_s: float = STALL_S) -> None:
        cti = Path(cti)
        super().__init__(f"{cti} camera {device}", kind="camera", live=True, stall_s=stall_s)
        self._harvester = _harvester(cti)
        try:
            self._camera = _create(self._harvester, cti, device)
            self._format = _configure(self._camera, self.name, features or {})
            self._camera.start()
        except SourceError:
            self._harvester.reset()
            raise
        except Exception as exc:  # harvesters and the producer raise their own kinds: one line, chained
            self._harvester.reset()
            raise SourceError(f"{self.name}: cannot start acquisition ({one_line(exc, typed=True)})") from exc

    def __enter__(self) -> GenICamSource:
        return self

    def _grab(self) -> npt.NDArray[np.uint8] | None:
        from genicam.gentl import TimeoutException

        try:
            with self._camera.fetch(timeout=min(self.stall_s, 0.5)) as buffer:  # short: close() is seen soon
                component = buffer.payload.components[0]
                return _rgb(component.data, int(component.width), int(component.height), self._format, self.name)
        except TimeoutException:
            return None  # nothing yet: the iterating thread judges a stall

    def _release(self) -> None:
        try:
            self._camera.stop()
            self._camera.destroy()
        except Exception as exc:  # letting go must not raise over the line's end
            log.debug("GenICam release: %s", one_line(exc, typed=True))
        self._harvester.reset()


def _harvester(cti: Path) -> Any:
    """A Harvester with the producer `cti` loaded and its cameras listed."""
    if not cti.is_file():
        raise SourceError(f"{cti}: no such GenTL producer file")
    try:
        need_extra("harvesters", extra="genicam", feature="a GenICam camera")
    except MissingExtra as exc:
        raise SourceError(f"{cti}: {exc}") from exc
    from harvesters.core import Harvester

    harvester = Harvester()
    try:
        harvester.add_file(str(cti))
        harvester.update()
    except Exception as exc:
        harvester.reset()
        raise SourceError(f"{cti}: not a GenTL producer harvesters can load ({one_line(exc, typed=True)})") from exc
    return harvester


def _create(harvester: Any, cti: Path, device: int | str) -> Any:
    """The image acquirer of camera `device` (an index, or a serial number)."""
    found = list(harvester.device_info_list)
    if not found:
        raise SourceError(f"{cti}: no camera found through this GenTL producer")
    serials = [str(info.serial_number) for info in found]
    if isinstance(device, int) and not 0 <= device < len(found):
        raise SourceError(f"{cti}: no camera {device}: {len(found)} found (0 to {len(found) - 1})")
    if isinstance(device, str) and device not in serials:
        raise SourceError(f"{cti}: no camera with serial number {device!r} (found: {', '.join(serials)})")
    return harvester.create(device if isinstance(device, int) else {"serial_number": device})


def _configure(camera: Any, name: str, features: Mapping[str, Feature]) -> str:
    """Set the features asked for; check the pixel format and the frame size; the format frames will come in."""
    node_map = camera.remote_device.node_map
    for feature, value in features.items():
        if not node_map.has_node(feature):
            raise SourceError(f"{name}: the camera has no feature {feature}")
        try:
            node_map.get_node(feature).value = value
        except Exception as exc:  # the producer's own kinds (InvalidArgumentException, AccessException …)
            raise SourceError(f"{name}: cannot set {feature} to {value!r} ({one_line(exc, first=True)})") from exc
    chosen = str(node_map.PixelFormat.value)
    if chosen not in _FORMATS:
        raise SourceError(f"{name}: pixel format {chosen} is not supported (taken: {', '.join(_FORMATS)})")
    width, height, limit = int(node_map.Width.value), int(node_map.Height.value), pixel_limit()
    if width * height > limit:
        raise SourceError(f"{name}: frames too large ({width}×{height} = {megapixels(width * height, beside=limit)}"
                          f" megapixels; the limit is {megapixels(limit)})")
    return chosen


def _rgb(data: npt.NDArray[np.uint8], width: int, height: int, pixel_format: str,
         name: str) -> npt.NDArray[np.uint8]:
    """The buffer's pixels as an RGB copy (the buffer goes back to the producer when the fetch ends)."""
    channels, order = _FORMATS[pixel_format]
    if data.size != width * height * channels:
        raise SourceError(f"{name}: a {pixel_format} frame of {width}×{height} came with {data.size} bytes")
    pixels = np.asarray(data, dtype=np.uint8).reshape(height, width, channels)
    return np.ascontiguousarray(pixels[..., list(order)])
