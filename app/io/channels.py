"""Several input channels of one case, as nnU-Net takes them: a 3D model whose input has C > 1 channels (MR
sequences such as T1 and T2) reads the case `CASE` from the files `CASE_0000 … CASE_{C-1:04d}` (.nii.gz or .nii),
channel i from `CASE_{i:04d}`, in the order of the model's channel names, or from one 4D NIfTI whose C volumes are
the channels in file order. The channels share shape and geometry (the affine within AFFINE_TOLERANCE_MM).

One place for every face: a folder run groups its inputs into cases (`group_cases`: one input per case, named
CASE; a missing or mismatched channel is that case's one line, the other cases run), the viewer turns the volume
it shows into its case (`case_volume`), and both read a case as `[C, D, H, W]` (`case_stack`). A channel file
found beside the one given is opened through the untrusted gate under that file's folder (no link out of it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from app.errors import ImageError
from app.io.discover import InputFile
from app.io.limits import check_decoded, shape_text, volume_bytes_limit
from app.io.stack import CHUNK, VolumeStack
from app.io.volumes import Channel, Volume

METADATA_KEY = "seglens.channel_names"  # ONNX metadata: a JSON list of the model's channel names, in its order
AFFINE_TOLERANCE_MM = 1e-3  # two channels' voxel-to-mm affines may differ by this much (float32 in the header)
_ENDINGS = (".nii.gz", ".nii")
_NAMED = re.compile(r"^(?P<case>.+)_(?P<channel>\d{4})(?P<ending>\.nii\.gz|\.nii)$", re.IGNORECASE)
_MAX_NAME = 64


@dataclass(frozen=True)
class ChannelFile:
    """What nnU-Net's naming says of a file: its case, its channel and its ending (`.nii.gz`)."""

    case: str
    channel: int
    ending: str


@dataclass(frozen=True)
class Channels:
    """What a model takes: `count` channels, named `names` (empty when the model names none)."""

    count: int
    names: tuple[str, ...] = ()

    def label(self, index: int) -> str:
        """`channel 1 (T2)`, or `channel 1` when unnamed."""
        return f"channel {index} ({self.names[index]})" if index < len(self.names) else f"channel {index}"

    def wanted(self) -> str:
        """What a case must give, in one phrase."""
        named = f" ({', '.join(self.names)})" if self.names else ""
        return (f"the model takes {self.count} channels{named}: name a case's files CASE_0000 … "
                f"CASE_{self.count - 1:04d} (.nii.gz) or give a 4D NIfTI of {self.count} volumes")


def model_channels(count: int, metadata: Mapping[str, str]) -> Channels:
    """The model's `count` channels, named by its metadata (METADATA_KEY) when that holds `count` short names."""
    try:
        names = json.loads(metadata.get(METADATA_KEY, "[]"))
    except ValueError:
        names = []
    fits = isinstance(names, list) and len(names) == count and all(
        isinstance(name, str) and 0 < len(name) <= _MAX_NAME and name.isprintable() for name in names)
    return Channels(count, tuple(names) if fits else ())


def channel_file(path: Path) -> ChannelFile | None:
    """nnU-Net's naming of `path` (`CASE_0001.nii.gz` → case CASE, channel 1), None when it has none."""
    match = _NAMED.match(path.name)
    if match is None:
        return None
    return ChannelFile(match["case"], int(match["channel"]), match["ending"])


def case_volume(volume: Volume, channels: Channels) -> Volume:
    """`volume` as the case the model takes: itself for one channel, its time points for a 4D NIfTI of C volumes,
    else the case its file name belongs to, its other channels read from beside it. ImageError in one line,
    naming the case (or the file) and the channel file missing or differing."""
    if channels.count <= 1 or volume.channels:
        return volume
    named = channel_file(volume.source) if volume.kind == "nifti" and volume.time_points == 1 else None
    problem, case = _single_case(volume, channels, named)
    if case is None:
        where = volume.source if named is None or named.channel >= channels.count else \
            volume.source.parent / named.case
        raise ImageError(f"{where}: {problem}")
    return case


def group_cases(inputs: Sequence[InputFile], channels: Channels) -> list[InputFile]:
    """`inputs` with each case's channel files made one input (`<folder>/CASE`, in the place of its first file),
    each 4D NIfTI of C volumes one case; a case that cannot be made (a channel missing, unreadable or differing), a
    file not named as a case's channel, a channel past the model's: an input whose problem is that one line. A 2D
    image stays as it is (the 3D run says what it needs). Unchanged for a model of one channel."""
    if channels.count <= 1:
        return list(inputs)
    slots: list[InputFile | tuple[Path, str]] = []
    cases: dict[tuple[Path, str], dict[int, InputFile]] = {}
    for item in inputs:
        four_d = item.volume is not None and item.volume.time_points > 1
        named = None if four_d or (item.volume is None and not item.problem) else channel_file(item.path)
        if named is None or named.channel >= channels.count:
            slots.append(_single_input(item, channels, named))
            continue
        key = (item.path.parent, named.case)
        if key not in cases:
            cases[key] = {}
            slots.append(key)
        cases[key].setdefault(named.channel, item)
    return [slot if isinstance(slot, InputFile) else _case_input(slot[0], slot[1], cases[slot], channels)
            for slot in slots]


def case_stack(volume: Volume) -> VolumeStack | CaseStack:
    """How `volume` is read whole for a 3D model: a case of several channels as `[C, D, H, W]`, else `[D, H, W]`."""
    return CaseStack(volume) if volume.channels else VolumeStack(volume)


class CaseStack:
    """A case's channels as float32 `[C, D, H, W]`, filled by `step` one channel after the other (each a
    VolumeStack writing into its row), with VolumeStack's `done` / `depth` / `complete` over all of them."""

    def __init__(self, volume: Volume, *, max_pixels: int | None = None, chunk: int = CHUNK) -> None:
        """ImageError (one line) when the case is over the volume limit: nothing allocated."""
        from app.io.images import pixel_limit

        self.volume, self._chunk = volume, chunk
        self._max_pixels = max_pixels or pixel_limit()
        self._slices = volume.depth // max(1, volume.time_points)
        shape = (len(volume.channels), self._slices, volume.rows, volume.columns)
        check_decoded(volume.source, shape, 4, volume_bytes_limit(self._max_pixels), dtype="float32",
                      what="case")
        self.depth = shape[0] * self._slices
        self.array = np.zeros(shape, np.float32)
        self.done = 0
        self._current: VolumeStack | None = None

    @property
    def complete(self) -> bool:
        return self.done >= self.depth

    def step(self) -> int:
        """Read up to a chunk more slices of the current channel; how many were read (ImageError as VolumeStack)."""
        index = self.done // max(1, self._slices)
        if self.complete:
            return 0
        if self._current is None:
            channel = self.volume.channels[index]
            self._current = VolumeStack(channel.volume, max_pixels=self._max_pixels, chunk=self._chunk,
                                        time_point=channel.time, into=self.array[index])
        read = self._current.step()
        self.done = index * self._slices + self._current.done
        if self._current.complete:
            self._current = None
        return read


def _single_case(volume: Volume, channels: Channels, named: ChannelFile | None) -> tuple[str, Volume | None]:
    """One volume's case (a 4D NIfTI's time points, or its file's case beside it), or why there is none."""
    if volume.time_points > 1:
        return _four_d_case(volume, channels)
    if named is None or named.channel >= channels.count:
        return _misnamed(volume, channels, named), None
    return _assembled(volume.source.parent, named, {named.channel: volume}, channels)


def _four_d_case(volume: Volume, channels: Channels) -> tuple[str, Volume | None]:
    if volume.time_points != channels.count:
        return f"a 4D NIfTI of {volume.time_points} volumes; {channels.wanted()}", None
    slices = volume.depth // volume.time_points
    named = tuple(Channel(volume, time=t, name=_name(channels, t)) for t in range(channels.count))
    return "", replace(volume, slices=volume.slices[:slices], time_points=1, channels=named,
                       info={**volume.info, "Channels": _channel_text(channels)})


def _misnamed(volume: Volume, channels: Channels, named: ChannelFile | None) -> str:
    if named is not None:
        return f"{channels.label(named.channel)} of case {named.case}, past the model's: {channels.wanted()}"
    what = "a DICOM series gives one channel" if volume.kind != "nifti" else "not named as a case's channel"
    return f"{what}; {channels.wanted()}"


def _single_input(item: InputFile, channels: Channels, named: ChannelFile | None) -> InputFile:
    """An input that is no channel of a case to gather: a 4D case, a problem, or a 2D image (as it is)."""
    if item.problem or item.volume is None:
        return item
    problem, case = _single_case(item.volume, channels, named)
    return replace(item, volume=case) if case is not None else replace(item, volume=None, problem=problem)


def _case_input(folder: Path, case: str, found: dict[int, InputFile], channels: Channels) -> InputFile:
    """One case's input, named `<folder>/CASE` (its rel likewise beside the first file's)."""
    first = found[min(found)]
    path, rel = folder / case, first.rel.parent / case
    named = channel_file(first.path)
    assert named is not None  # gathered by name
    broken = next(((index, item) for index, item in sorted(found.items()) if item.volume is None), None)
    if broken is not None:
        problem = f"{channels.label(broken[0])}, {broken[1].path.name}: {broken[1].problem}"
        return InputFile(path, rel, problem=problem)
    volumes = {index: item.volume for index, item in found.items() if item.volume is not None}
    problem, volume = _assembled(folder, named, volumes, channels)
    return InputFile(path, rel, volume=volume) if volume is not None else InputFile(path, rel, problem=problem)


def _assembled(folder: Path, named: ChannelFile, found: dict[int, Volume],
               channels: Channels) -> tuple[str, Volume | None]:
    """The case of channels `found` (index → volume) and those beside them in `folder`, checked alike, or the
    one line saying which channel file is missing, unreadable or differs."""
    volumes: list[Volume] = []
    for index in range(channels.count):
        try:
            volume = found.get(index) or _beside(folder, named, index)
        except ImageError as exc:  # names the file
            return f"{channels.label(index)}: {exc}", None
        if isinstance(volume, str):
            return f"{channels.label(index)} missing: no file {volume} beside it", None
        volumes.append(volume)
    for index, volume in enumerate(volumes[1:], start=1):
        differs = geometry_difference(volumes[0], volume)
        if differs:
            return (f"{channels.label(index)}, {volume.source.name}: {differs}; the channels of a case must share "
                    "shape and geometry"), None
    first = volumes[0]
    label = f"NIfTI · {named.case} ({_channel_text(channels)}; {first.depth} slices)"
    return "", replace(first, key=named.case, label=label, info={**first.info, "Channels": _channel_text(channels)},
                       channels=tuple(Channel(v, name=_name(channels, i)) for i, v in enumerate(volumes)))


def _beside(folder: Path, named: ChannelFile, index: int) -> Volume | str:
    """Channel `index` of the case read from `folder` (its own ending first), or the file name it should have."""
    from app.io.nifti import nifti_volume

    endings = (named.ending, *(e for e in _ENDINGS if e != named.ending.lower()))
    for ending in endings:
        path = folder / f"{named.case}_{index:04d}{ending}"
        if path.exists() or path.is_symlink():
            return nifti_volume(path, root=folder)
    return f"{named.case}_{index:04d}{named.ending}"


def geometry_difference(first: Volume, other: Volume) -> str:
    """How `other`'s grid differs from `first`'s, in words naming `first`'s file, "" when they match: the shape
    (slices × rows × columns), geometry read on one side only, the affine (beyond AFFINE_TOLERANCE_MM)."""
    shape = (first.depth // max(1, first.time_points), first.rows, first.columns)
    own = (other.depth // max(1, other.time_points), other.rows, other.columns)
    name = first.source.name
    if own != shape:
        return f"its shape {shape_text(own)} differs from {name}'s {shape_text(shape)}"
    if other.affine is None and first.affine is not None:
        return f"no geometry read from it, unlike {name}"
    if first.affine is None and other.affine is not None:
        return f"it has a geometry, {name} none"
    if first.affine is not None and other.affine is not None:
        gap = float(np.max(np.abs(first.affine - other.affine)))
        if gap > AFFINE_TOLERANCE_MM:
            return f"its voxel-to-mm affine differs from {name}'s (by up to {gap:.4g} mm)"
    return ""


def _name(channels: Channels, index: int) -> str:
    return channels.names[index] if index < len(channels.names) else ""


def _channel_text(channels: Channels) -> str:
    named = f": {', '.join(channels.names)}" if channels.names else ""
    return f"{channels.count} channels{named}"
