"""PyTorch checkpoints read without PyTorch: a `.pth` file's tensors as numpy arrays, and nothing in it run.

A checkpoint (`torch.save`'s zip format, the default since PyTorch 1.6) is a zip of one pickle (`<name>/data.pkl`)
and one member per tensor storage (`<name>/data/<key>`, stored uncompressed). A pickle is a program: loaded by
Python's own unpickler, a `.pth` someone hands over can call `os.system`. So the pickle is interpreted opcode by
opcode by a machine that knows only the opcodes a checkpoint uses and the handful of globals that rebuild its values
(app.io.checkpoint_pickle); any other global, opcode or callable is refused in one line naming the file and what it
asked for.

Reading is in two steps so a large checkpoint never costs twice its size: `read_checkpoint` reads the zip's
directory and the pickle only (tensors are `TensorRef`s, each checked against the bytes its storage member really
holds), and `read_tensors` / `network_weights` read the tensors asked for, each storage once, straight into its
array. An nnU-Net checkpoint's optimizer state (as large as the network) is never read unless asked for.

Every size is bounded before anything is allocated: the file (`limit`), the pickle (`PICKLE_LIMIT`), what it
makes while it is read (`MAX_VALUES`) and in its content (`MAX_ENTRIES`, `MAX_DEPTH`), and each tensor by its
storage member's size.
"""

from __future__ import annotations

import os
import struct
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from app.errors import ModelError
from app.guard.untrusted import open_untrusted
from app.io.checkpoint_pickle import Storage, StorageType, TensorRef, Value, is_count, itemsize, unpickled

CHECKPOINT_FILE_LIMIT = 8 << 30  # TotalSegmentator's largest checkpoints are under 2 GB
PICKLE_LIMIT = 64 << 20  # the pickle holds the structure only (an nnU-Net checkpoint's: a few MB at most)
_BLOCK = 16 << 20  # a storage is read this much at a time


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint's content with its tensors as `TensorRef`s (dicts, lists, tuples, numbers, strings, small numpy
    arrays; `torch.device('cuda')` as `'cuda'`, `torch.Size` as a tuple, numpy scalars as Python numbers), the
    storages they refer to, and the file's identity (a tensor is read only from the file that was checked)."""

    path: Path
    content: Value
    storages: Mapping[str, Storage]
    big_endian: bool
    identity: tuple[int, int, int, int]  # device, inode, size, modification time (ns)


def read_checkpoint(path: str | os.PathLike[str], *, limit: int = CHECKPOINT_FILE_LIMIT) -> Checkpoint:
    """The checkpoint at `path`, its tensors not yet read. ModelError (one line naming the file) for anything that
    is not a PyTorch zip checkpoint of plain values and tensors, or that declares more than its file holds."""
    where = Path(path)
    with _opened(where, limit) as handle:
        identity = _identity(handle)
        archive = _archive(where, handle)
        prefix = _prefix(where, archive)
        big_endian = _big_endian(where, archive, prefix)
        storages: dict[str, Storage] = {}
        content = unpickled(_pickle_bytes(where, archive, prefix), where,
                            _StorageFinder(where, handle, archive, prefix, identity[2], storages))
    return Checkpoint(where, content, storages, big_endian, identity)


def tensors(checkpoint: Checkpoint) -> Iterator[tuple[str, TensorRef]]:
    """Every tensor of the checkpoint with its place (`network_weights.encoder.stages.0.convs.0.conv.weight`)."""
    yield from _tensors_in(checkpoint.content, "")


def read_tensors(checkpoint: Checkpoint, refs: Mapping[str, TensorRef]) -> dict[str, np.ndarray]:
    """The tensors `refs` names, read from the file (each storage once): read-only numpy arrays of the tensors'
    shapes, C-contiguous; bfloat16 becomes float32 (numpy has no bfloat16), every other type stays as stored."""
    found: dict[str, np.ndarray] = {}
    with _opened(checkpoint.path, checkpoint.identity[2]) as handle:
        if _identity(handle) != checkpoint.identity:
            raise ModelError(f"{checkpoint.path}: the file changed since it was read")
        read: dict[str, np.ndarray] = {}
        for name, ref in refs.items():
            if ref.storage not in read:
                read[ref.storage] = _read_storage(checkpoint, handle, checkpoint.storages[ref.storage])
            found[name] = _view(read[ref.storage], ref)
    return found


def network_weights(checkpoint: Checkpoint) -> dict[str, np.ndarray]:
    """An nnU-Net checkpoint's `network_weights` (a plain state dict's entries where there is none): parameter
    name → array, in the checkpoint's order. ModelError when it holds no tensors or something else."""
    content = checkpoint.content
    weights = content.get("network_weights", content) if isinstance(content, dict) else content
    if not isinstance(weights, dict) or not weights:
        raise ModelError(f"{checkpoint.path}: no network weights (neither 'network_weights' nor a state dict)")
    refs = {key: ref for key, ref in weights.items() if isinstance(key, str) and isinstance(ref, TensorRef)}
    if len(refs) != len(weights):
        odd = next(key for key in weights if key not in refs)
        raise ModelError(f"{checkpoint.path}: the network weights hold {odd!r:.60}, which is not a named tensor")
    return read_tensors(checkpoint, refs)


# --- the file and its zip -------------------------------------------------------------------------------------

def _opened(path: Path, limit: int) -> BinaryIO:
    try:
        return open_untrusted(path, limit=limit)
    except OSError as exc:
        raise ModelError(f"{path}: {exc.strerror or exc}") from exc


def _identity(handle: BinaryIO) -> tuple[int, int, int, int]:
    info = os.fstat(handle.fileno())
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _archive(path: Path, handle: BinaryIO) -> zipfile.ZipFile:
    head = handle.read(4)
    handle.seek(0)
    if head[:2] == b"\x80\x02" or head[:1] == b"\x80":
        raise ModelError(f"{path}: an old PyTorch format (before 1.6); re-save it with torch >= 1.6")
    if head != b"PK\x03\x04":
        raise ModelError(f"{path}: not a PyTorch checkpoint (not a zip archive)")
    try:
        return zipfile.ZipFile(handle)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelError(f"{path}: a truncated or damaged zip archive ({exc})") from exc


def _prefix(path: Path, archive: zipfile.ZipFile) -> str:
    names = archive.namelist()
    if any(name.endswith("constants.pkl") or "/code/" in name for name in names):
        raise ModelError(f"{path}: a TorchScript archive (torch.jit.save), not a checkpoint of weights")
    pickles = [name for name in names if name.endswith("/data.pkl") and name.count("/") == 1]
    if len(pickles) != 1:
        raise ModelError(f"{path}: not a PyTorch checkpoint (no single <name>/data.pkl in the zip)")
    return pickles[0][: -len("data.pkl")]


def _big_endian(path: Path, archive: zipfile.ZipFile, prefix: str) -> bool:
    try:
        order = archive.read(prefix + "byteorder") if archive.getinfo(prefix + "byteorder").file_size < 16 else b"?"
    except KeyError:
        return False  # written before PyTorch recorded it: little-endian, as every machine that wrote one
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ModelError(f"{path}: a damaged zip archive ({exc})") from exc
    if order not in (b"little", b"big"):
        raise ModelError(f"{path}: an unknown byte order {order[:16]!r}")
    return order == b"big"


def _pickle_bytes(path: Path, archive: zipfile.ZipFile, prefix: str) -> bytes:
    info = archive.getinfo(prefix + "data.pkl")
    if info.file_size > PICKLE_LIMIT:
        raise ModelError(f"{path}: its pickle declares {info.file_size} bytes; the limit is {PICKLE_LIMIT}")
    try:
        with archive.open(info) as member:
            data = member.read(PICKLE_LIMIT + 1)  # a deflated member cannot inflate past the limit
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
        raise ModelError(f"{path}: a truncated or damaged zip archive ({exc})") from exc
    if len(data) > PICKLE_LIMIT:
        raise ModelError(f"{path}: its pickle holds over {PICKLE_LIMIT} bytes")
    return data


class _StorageFinder:
    """torch.save's persistent ids (`('storage', FloatStorage, '0', 'cpu', 12)`) → `Storage`, each checked against
    the bytes its zip member really holds (stored, uncompressed, inside the file)."""

    def __init__(self, path: Path, handle: BinaryIO, archive: zipfile.ZipFile, prefix: str, size: int,
                 found: dict[str, Storage]) -> None:
        self.path, self.handle, self.archive, self.prefix, self.size, self.found = (path, handle, archive, prefix,
                                                                                   size, found)

    def __call__(self, pid: object) -> Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise ModelError(f"{self.path}: refused: a persistent id that is not a tensor storage ({pid!r:.80})")
        _, kind, key, _location, numel = pid
        if not isinstance(kind, StorageType) or not isinstance(key, str) or not is_count(numel):
            raise ModelError(f"{self.path}: a malformed tensor storage ({pid!r:.80})")
        known = self.found.get(key)
        if known is not None:
            if (known.dtype, known.numel) != (kind.dtype, numel):
                raise ModelError(f"{self.path}: tensor storage {key!r} is declared twice, differently")
            return known
        storage = Storage(key, kind.dtype, numel, self._start(key, numel * itemsize(kind.dtype)))
        self.found[key] = storage
        return storage

    def _start(self, key: str, size: int) -> int:
        try:
            info = self.archive.getinfo(f"{self.prefix}data/{key}")
        except KeyError:
            raise ModelError(f"{self.path}: tensor storage {key!r} is missing from the zip") from None
        if info.compress_type != zipfile.ZIP_STORED:
            raise ModelError(f"{self.path}: tensor storage {key!r} is compressed (torch.save stores them as they are)")
        if info.file_size < size:
            raise ModelError(f"{self.path}: tensor storage {key!r} holds {info.file_size} bytes; its tensors "
                             f"declare {size}")
        self.handle.seek(info.header_offset)
        local = self.handle.read(30)
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            raise ModelError(f"{self.path}: a truncated or damaged zip archive (tensor storage {key!r})")
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        start = int(info.header_offset) + 30 + int(name_length) + int(extra_length)
        if start + size > self.size:
            raise ModelError(f"{self.path}: truncated: tensor storage {key!r} ends past the end of the file")
        return start


def _read_storage(checkpoint: Checkpoint, handle: BinaryIO, storage: Storage) -> np.ndarray:
    stored = "uint16" if storage.dtype == "bfloat16" else storage.dtype
    dtype = np.dtype(stored).newbyteorder(">" if checkpoint.big_endian else "<")
    array = np.empty(storage.numel, dtype=dtype)
    handle.seek(storage.start)
    raw, done = array.reshape(-1).view(np.uint8), 0
    while done < raw.size:  # a block at a time: never the whole storage twice
        block = handle.read(min(raw.size - done, _BLOCK))
        if not block:
            raise ModelError(f"{checkpoint.path}: truncated: tensor storage {storage.key!r} ends early")
        raw[done:done + len(block)] = np.frombuffer(block, dtype=np.uint8)
        done += len(block)
    if storage.dtype == "bfloat16":  # bfloat16 is float32's upper half
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array if dtype.isnative else array.astype(dtype.newbyteorder("="))


def _view(storage: np.ndarray, ref: TensorRef) -> np.ndarray:
    count = int(np.prod(ref.shape, dtype=object))
    if ref.offset == 0 and count == storage.size and ref.stride == _contiguous(ref.shape):
        array = storage.reshape(ref.shape)
    else:
        strides = tuple(step * storage.itemsize for step in ref.stride)
        view = np.lib.stride_tricks.as_strided(storage[ref.offset:], ref.shape, strides, writeable=False)
        array = np.ascontiguousarray(view)
    array.flags.writeable = False
    return array


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _tensors_in(value: Value, place: str) -> Iterator[tuple[str, TensorRef]]:
    if isinstance(value, TensorRef):
        yield place, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors_in(item, f"{place}.{key}" if place else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _tensors_in(item, f"{place}.{index}" if place else str(index))

