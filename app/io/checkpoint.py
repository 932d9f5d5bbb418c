"""PyTorch checkpoints read without PyTorch: a `.pth` file's tensors as numpy arrays, and nothing in it run.

A checkpoint (`torch.save`'s zip format, the default since PyTorch 1.6) is a zip of one pickle (`<name>/data.pkl`)
and one member per tensor storage (`<name>/data/<key>`, stored uncompressed). A pickle is a program: loaded by
Python's own unpickler, a `.pth` someone hands over can call `os.system`. So the pickle is interpreted here, opcode
by opcode, by a machine that knows only the opcodes a checkpoint uses and the handful of globals that rebuild its
values (tensors, `OrderedDict`, `torch.device`, `torch.Size`, numpy scalars, dtypes and small arrays); any other
global, opcode or callable is refused in one line naming the file and what it asked for. Nothing is ever called
but the functions below.

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
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias, TypeGuard

import numpy as np

from app.errors import ModelError
from app.guard.untrusted import open_untrusted

CHECKPOINT_FILE_LIMIT = 8 << 30  # TotalSegmentator's largest checkpoints are under 2 GB
PICKLE_LIMIT = 64 << 20  # the pickle holds the structure only (an nnU-Net checkpoint's: a few MB at most)
MAX_ENTRIES = 5_000_000  # list items and dict entries in the content, a value in several places counted in each
MAX_VALUES = 20_000_000  # what the pickle makes and keeps while it is read: containers, their items, remembered values
MAX_DEPTH = 100  # an nnU-Net checkpoint nests about 10 deep (init_args → plans → configurations → …)
_MAX_DIMENSIONS = 32
_MAX_EXTENT = 1 << 48  # a size, stride or offset past this is no tensor's (and would overflow numpy's strides)
_BLOCK = 16 << 20  # a storage is read this much at a time
_ONLY = "a checkpoint holds only tensors, numbers, strings, lists and dicts"


@dataclass(frozen=True)
class TensorRef:
    """A tensor in a checkpoint, not yet read: its storage's key and element type, and where in the storage it
    lies (offset, shape and strides in elements, as PyTorch counts them)."""

    storage: str
    dtype: str  # the stored element type: float32, float16, bfloat16 (read as float32), int64, bool, …
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


Key: TypeAlias = "str | int | float | bool | tuple[Key, ...] | None"
Value: TypeAlias = ("bool | int | float | complex | str | bytes | TensorRef | np.ndarray | list[Value] "
                    "| tuple[Value, ...] | dict[Key, Value] | None")


@dataclass(frozen=True)
class Storage:
    """A storage member of the zip: where its bytes start in the file, its element type and count."""

    key: str
    dtype: str
    numel: int
    start: int


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
        machine = _Machine(_pickle_bytes(where, archive, prefix), where,
                           _StorageFinder(where, handle, archive, prefix, identity[2], storages))
        content = machine.run()
    return Checkpoint(where, _finished(where, content), storages, big_endian, identity)


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


# The storage types of torch.save's persistent ids, and the numpy type of their elements
_STORAGE_TYPES = {"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                  "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}


def _itemsize(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else int(np.dtype(dtype).itemsize)


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
        if not isinstance(kind, _StorageType) or not isinstance(key, str) or not _is_count(numel):
            raise ModelError(f"{self.path}: a malformed tensor storage ({pid!r:.80})")
        known = self.found.get(key)
        if known is not None:
            if (known.dtype, known.numel) != (kind.dtype, numel):
                raise ModelError(f"{self.path}: tensor storage {key!r} is declared twice, differently")
            return known
        storage = Storage(key, kind.dtype, numel, self._start(key, numel * _itemsize(kind.dtype)))
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


# --- the values a checkpoint's globals rebuild ---------------------------------------------------------------

def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class _StorageType:
    dtype: str


@dataclass(frozen=True)
class _Global:
    """An allowed global: only these are ever called, with the arguments the pickle gives."""

    name: str
    call: Callable[..., object]


class _NumpyType:
    """`numpy.ndarray` as `_reconstruct`'s first argument (never constructed)."""


class _DType:
    """`numpy.dtype('f8', False, True)` until BUILD gives its byte order: numbers and booleans only."""

    _CODES = frozenset({"b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"})

    def __init__(self, code: object, *_: object) -> None:
        if not isinstance(code, str) or code not in self._CODES:
            raise _Refused(f"a numpy array or number of type {code!r:.20} ({_ONLY})")
        self.code, self.order = code, "<"

    def build(self, state: object) -> None:
        if isinstance(state, tuple) and len(state) > 1 and state[1] in ("<", ">", "|", "="):
            self.order = "<" if state[1] in ("|", "=") else str(state[1])

    def dtype(self) -> np.dtype:
        return np.dtype(self.order + self.code)


class _Array:
    """`numpy.core.multiarray._reconstruct(ndarray, (0,), b'b')` until BUILD gives its shape, type and bytes."""

    def __init__(self, kind: object, *_: object) -> None:
        if not isinstance(kind, _NumpyType):
            raise _Refused(f"a numpy object other than an array ({_ONLY})")
        self.array: np.ndarray | None = None

    def build(self, state: object) -> None:
        if not (isinstance(state, tuple) and len(state) == 5 and isinstance(state[1], tuple)
                and isinstance(state[2], _DType) and isinstance(state[4], bytes)
                and all(_is_count(size) for size in state[1]) and len(state[1]) <= _MAX_DIMENSIONS):
            raise _Refused(f"a numpy array of other than numbers ({_ONLY})")
        dtype, shape, raw = state[2].dtype(), state[1], state[4]
        if int(np.prod(shape, dtype=object)) * dtype.itemsize != len(raw):
            raise _Refused(f"a numpy array of shape {shape} whose bytes do not match it")
        array = np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if state[3] else "C")
        self.array = np.ascontiguousarray(array.astype(dtype.newbyteorder("=")))


def _scalar(dtype: object, raw: object) -> object:
    if not isinstance(dtype, _DType) or not isinstance(raw, bytes) or len(raw) != dtype.dtype().itemsize:
        raise _Refused("a malformed numpy number")
    return np.frombuffer(raw, dtype=dtype.dtype())[0].item()


def _encode(text: object, encoding: object = "utf-8") -> bytes:
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise _Refused("a malformed text encoding")
    return text.encode("latin-1")


def _ordered_dict(items: object = ()) -> dict[object, object]:
    if items not in ((), []):
        raise _Refused("an OrderedDict built from arguments")
    return {}


def _device(kind: object, index: object = None) -> str:
    if not isinstance(kind, str) or not (index is None or _is_count(index)):
        raise _Refused("a malformed torch.device")
    return kind if index is None or ":" in kind else f"{kind}:{index}"


def _size(sizes: object = ()) -> tuple[int, ...]:
    if not isinstance(sizes, tuple | list) or not all(_is_count(size) for size in sizes):
        raise _Refused("a malformed torch.Size")
    return tuple(sizes)


def _rebuild_tensor(storage: object, offset: object, shape: object, stride: object, _grad: object = False,
                    hooks: object = None, *_: object) -> TensorRef:
    if not (isinstance(storage, Storage) and _is_count(offset) and isinstance(shape, tuple)
            and isinstance(stride, tuple) and len(shape) == len(stride) <= _MAX_DIMENSIONS
            and all(_is_count(n) and n <= _MAX_EXTENT for n in (offset, *shape, *stride)) and not hooks):
        raise _Refused("a malformed tensor")
    count = int(np.prod(shape, dtype=object))
    last = offset + sum((size - 1) * step for size, step in zip(shape, stride, strict=True)) if count else 0
    if count > storage.numel or (count and last >= storage.numel):
        raise _Refused(f"a tensor of shape {shape} past the end of its storage ({storage.numel} elements)")
    return TensorRef(storage.key, storage.dtype, offset, shape, stride)


def _parameter(data: object, *_: object) -> object:
    if not isinstance(data, TensorRef):
        raise _Refused("a malformed parameter")
    return data


_TORCH_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
                 "double", "float", "half", "long", "int", "short")


def _globals() -> dict[tuple[str, str], object]:
    found: dict[tuple[str, str], object] = {
        ("collections", "OrderedDict"): _Global("OrderedDict", _ordered_dict),
        ("torch._utils", "_rebuild_tensor_v2"): _Global("tensor", _rebuild_tensor),
        ("torch._utils", "_rebuild_tensor"): _Global("tensor", _rebuild_tensor),
        ("torch._utils", "_rebuild_parameter"): _Global("parameter", _parameter),
        ("torch._utils", "_rebuild_parameter_with_state"): _Global("parameter", _parameter),
        ("torch", "device"): _Global("device", _device),
        ("torch", "Size"): _Global("Size", _size),
        ("numpy", "dtype"): _Global("dtype", _DType),
        ("numpy", "ndarray"): _NumpyType(),
        ("_codecs", "encode"): _Global("encode", _encode),
    }
    for module in ("numpy.core.multiarray", "numpy._core.multiarray"):
        found[(module, "scalar")] = _Global("scalar", _scalar)
        found[(module, "_reconstruct")] = _Global("array", _Array)
    found.update({("torch", name): _StorageType(dtype) for name, dtype in _STORAGE_TYPES.items()})
    found.update({("torch", name): f"torch.{name}" for name in _TORCH_DTYPES})
    return found


_GLOBALS = _globals()


class _Refused(Exception):
    """What the pickle asked for that a checkpoint never needs (the reason, without the file)."""


# --- the pickle machine ---------------------------------------------------------------------------------------

class _Machine:
    """A pickle interpreter of the opcodes torch.save writes (protocols 2 to 5), and no others."""

    def __init__(self, data: bytes, path: Path, storage: Callable[[object], Storage]) -> None:
        self.data, self.path, self.storage = data, path, storage
        self.position, self.entries = 0, 0
        self.stack: list[object] = []
        self.marks: list[int] = []  # where each open MARK is on the stack
        self.memo: dict[int, object] = {}
        self.ops = _operations()

    def run(self) -> object:
        try:
            while True:
                code = self._byte()
                operation = self.ops.get(code)
                if operation is None:
                    raise _Refused(f"pickle opcode {bytes([code])!r} ({_ONLY})")
                if operation(self) is True:
                    return self._last(1)[0]
                if len(self.stack) > MAX_VALUES:
                    raise _Refused(f"a pickle of over {MAX_VALUES} values on its stack")
        except _Refused as exc:
            raise ModelError(f"{self.path}: refused: {exc}") from None
        except ModelError:
            raise
        except (OSError, zipfile.BadZipFile) as exc:  # reading a storage member's header
            raise ModelError(f"{self.path}: a damaged zip archive ({exc})") from exc
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, struct.error, OverflowError,
                UnicodeDecodeError, MemoryError, RecursionError) as exc:
            raise ModelError(f"{self.path}: a malformed pickle ({type(exc).__name__} at byte {self.position})") \
                from None

    def _read(self, count: int) -> bytes:
        end = self.position + count
        if count < 0 or end > len(self.data):
            raise ValueError("the pickle ends early")
        chunk = self.data[self.position:end]
        self.position = end
        return chunk

    def _byte(self) -> int:
        if self.position >= len(self.data):
            raise ValueError("the pickle ends early")
        self.position += 1
        return self.data[self.position - 1]

    def _int(self, fmt: str) -> int:
        value: int = struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]
        return value

    def _line(self) -> str:
        end = self.data.index(b"\n", self.position, self.position + 256)
        text = self.data[self.position:end].decode("ascii")
        self.position = end + 1
        return text

    def _mark(self) -> None:
        self.marks.append(len(self.stack))

    def _marked(self) -> list[object]:
        """The values since the last MARK, taken off the stack with it."""
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def _last(self, count: int) -> list[object]:
        """The last `count` values, taken off the stack; none of them below the last MARK."""
        if len(self.stack) - (self.marks[-1] if self.marks else 0) < count:
            raise _Refused("a malformed pickle (too few values on its stack)")
        items = self.stack[len(self.stack) - count:]
        del self.stack[len(self.stack) - count:]
        return items

    def _push(self, value: object) -> None:
        self.stack.append(value)

    def _push_made(self, value: object) -> None:
        """A container the pickle makes: counted, so a few bytes each cannot fill the memory."""
        self._count(1)
        self.stack.append(value)

    def _top(self) -> object:
        """The last value, left on the stack (not one below the last MARK)."""
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise _Refused("a malformed pickle (no value on its stack)")
        return self.stack[-1]

    def _count(self, added: int) -> None:
        self.entries += added
        if self.entries > MAX_VALUES:
            raise _Refused(f"a pickle of over {MAX_VALUES} values")

    def _global(self, module: str, name: str) -> None:
        found = _GLOBALS.get((module, name))
        if found is None:
            raise _Refused(f"the pickle asks for the global '{module}.{name}' ({_ONLY})")
        self._push(found)

    def _reduce(self) -> None:
        function, arguments = self._last(2)
        if not isinstance(function, _Global) or not isinstance(arguments, tuple):
            raise _Refused(f"the pickle calls {_shown(function)} ({_ONLY})")
        self._push(function.call(*arguments))

    def _build(self) -> None:
        state, target = self._last(1)[0], self._last(1)[0]
        self._push(target)
        if isinstance(target, dict) and isinstance(state, dict):
            return  # a state dict's `_metadata` (each module's version): nothing a reader of weights needs
        if not isinstance(target, _DType | _Array):
            raise _Refused(f"the pickle sets the state of {_shown(target)} ({_ONLY})")
        target.build(state)

    def _append(self, items: list[object]) -> None:
        target = self._top()
        if not isinstance(target, list):
            raise _Refused(f"the pickle appends to {_shown(target)}")
        self._count(len(items))
        target.extend(items)

    def _set(self, items: list[object]) -> None:
        target = self._top()
        if not isinstance(target, dict) or len(items) % 2:
            raise _Refused(f"the pickle sets items of {_shown(target)}")
        self._count(len(items) // 2)
        for index in range(0, len(items), 2):
            target[items[index]] = items[index + 1]

    def _put(self, index: int) -> None:
        self._count(1)
        self.memo[index] = self._top()

    def _persistent(self) -> None:
        self._push(self.storage(self._last(1)[0]))


def _shown(value: object) -> str:
    return f"'{value.name}'" if isinstance(value, _Global) else f"a value of type {type(value).__name__}"


def _operations() -> dict[int, Callable[[_Machine], object]]:
    """Opcode → what it does to the machine; STOP's returns True (the pickle's end)."""
    m = _Machine
    ops: dict[bytes, Callable[[_Machine], object]] = {
        b"\x80": _protocol,  # PROTO
        b"\x95": lambda s: s._read(8),  # FRAME (a hint for readers of a stream; the whole pickle is in memory)
        b".": lambda s: True,  # STOP
        b"(": m._mark,
        b"0": lambda s: s._last(1),  # POP
        b"1": m._marked,  # POP_MARK
        b"2": lambda s: s._push(s._top()),  # DUP
        b"N": lambda s: s._push(None),
        b"\x88": lambda s: s._push(True),
        b"\x89": lambda s: s._push(False),
        b"J": lambda s: s._push(s._int("<i")),  # BININT
        b"K": lambda s: s._push(s._byte()),  # BININT1
        b"M": lambda s: s._push(s._int("<H")),  # BININT2
        b"\x8a": lambda s: s._push(int.from_bytes(s._read(s._byte()), "little", signed=True)),  # LONG1
        b"G": lambda s: s._push(struct.unpack(">d", s._read(8))[0]),  # BINFLOAT
        b"X": lambda s: s._push(_text(s._read(s._int("<I")))),  # BINUNICODE
        b"\x8c": lambda s: s._push(_text(s._read(s._byte()))),  # SHORT_BINUNICODE
        b"\x8d": lambda s: s._push(_text(s._read(s._int("<Q")))),  # BINUNICODE8
        b"B": lambda s: s._push(s._read(s._int("<I"))),  # BINBYTES
        b"C": lambda s: s._push(s._read(s._byte())),  # SHORT_BINBYTES
        b"\x8e": lambda s: s._push(s._read(s._int("<Q"))),  # BINBYTES8
        b"}": lambda s: s._push_made({}),
        b"]": lambda s: s._push_made([]),
        b")": lambda s: s._push(()),
        b"t": lambda s: s._push_made(tuple(s._marked())),
        b"\x85": lambda s: s._push_made(tuple(s._last(1))),
        b"\x86": lambda s: s._push_made(tuple(s._last(2))),
        b"\x87": lambda s: s._push_made(tuple(s._last(3))),
        b"l": lambda s: s._push_made(s._marked()),  # LIST
        b"d": _dict_from,  # DICT
        b"a": lambda s: s._append(s._last(1)),
        b"e": lambda s: s._append(s._marked()),
        b"s": lambda s: s._set(s._last(2)),
        b"u": lambda s: s._set(s._marked()),
        b"q": lambda s: s._put(s._byte()),  # BINPUT
        b"r": lambda s: s._put(s._int("<I")),  # LONG_BINPUT
        b"\x94": lambda s: s._put(len(s.memo)),  # MEMOIZE
        b"h": lambda s: s._push(s.memo[s._byte()]),  # BINGET
        b"j": lambda s: s._push(s.memo[s._int("<I")]),  # LONG_BINGET
        b"c": lambda s: s._global(s._line(), s._line()),  # GLOBAL
        b"\x93": _stack_global,  # STACK_GLOBAL
        b"R": m._reduce,
        b"b": m._build,
        b"Q": m._persistent,  # BINPERSID
    }
    return {code[0]: operation for code, operation in ops.items()}


def _protocol(machine: _Machine) -> None:
    if machine._byte() > 5:
        raise _Refused("a pickle protocol past 5")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _dict_from(machine: _Machine) -> None:
    items = machine._marked()
    machine._push_made({})
    machine._set(items)


def _stack_global(machine: _Machine) -> None:
    module, name = machine._last(2)
    if not isinstance(module, str) or not isinstance(name, str):
        raise _Refused("a malformed global")
    machine._global(module, name)


# --- the unpickled values, checked and made plain -------------------------------------------------------------

class _Finisher:
    """The machine's values as plain values: placeholders resolved, nesting bounded, cycles refused. A value in
    several places is made once and stays shared, but counts in full wherever it is: a few lists that each hold
    the last one twice would otherwise be a small pickle of 2^100 entries to whoever walks the content."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done: dict[int, tuple[Value, int]] = {}  # id → the value made and its entries, counted as a tree
        self.open: set[int] = set()

    def value(self, item: object, depth: int) -> tuple[Value, int]:
        if depth > MAX_DEPTH:
            raise ModelError(f"{self.path}: refused: a pickle nested deeper than {MAX_DEPTH} levels")
        if item is None or isinstance(item, bool | int | float | complex | str | bytes | TensorRef):
            return item, 1
        key = id(item)
        if key not in self.done:
            if key in self.open:
                raise ModelError(f"{self.path}: refused: a pickle that contains itself")
            self.open.add(key)
            self.done[key] = self._made(item, depth)
            self.open.discard(key)
        return self.done[key]

    def _made(self, item: object, depth: int) -> tuple[Value, int]:
        if isinstance(item, list | tuple):
            made = [self.value(entry, depth + 1) for entry in item]
            values = [value for value, _ in made]
            return self._counted(values if isinstance(item, list) else tuple(values), made)
        if isinstance(item, dict):
            keys = [self._key(key, depth + 1) for key in item]
            made = [self.value(entry, depth + 1) for entry in item.values()]
            return self._counted(dict(zip(keys, (value for value, _ in made), strict=True)), made)
        if isinstance(item, _Array) and item.array is not None:
            return item.array, 1
        if isinstance(item, _DType):
            return str(item.dtype()), 1
        raise ModelError(f"{self.path}: refused: {_shown(item)} as a value ({_ONLY})")

    def _counted(self, value: Value, made: list[tuple[Value, int]]) -> tuple[Value, int]:
        entries = 1 + sum(count for _, count in made)
        if entries > MAX_ENTRIES:
            raise ModelError(f"{self.path}: refused: a pickle of over {MAX_ENTRIES} entries")
        return value, entries

    def _key(self, key: object, depth: int) -> Key:
        made, _ = self.value(key, depth)
        if made is None or isinstance(made, bool | int | float | str):
            return made
        if isinstance(made, tuple):
            plain = [entry for entry in made if entry is None or isinstance(entry, bool | int | float | str)]
            if len(plain) == len(made):
                return tuple(plain)
        raise ModelError(f"{self.path}: refused: a dict key of type {type(made).__name__}")


def _finished(path: Path, content: object) -> Value:
    return _Finisher(path).value(content, 0)[0]
