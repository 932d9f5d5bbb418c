"""The pickle of a PyTorch checkpoint, interpreted without Python's unpickler (app.io.checkpoint reads the zip around
it): a machine that knows only the opcodes `torch.save` writes (protocols 2 to 5) and the handful of globals that
rebuild a checkpoint's values — tensors (as `TensorRef`s into their storages), `OrderedDict`, `torch.device`,
`torch.Size`, dtypes, numpy scalars and small arrays. Any other global, opcode or callable is refused in one line
(`refused: the pickle asks for the global 'posix.system'`); nothing is ever called but the rebuilders below.

What the machine makes is then checked and made plain (`unpickled`): placeholders resolved, nesting bounded
(`MAX_DEPTH`), entries counted as a tree (`MAX_ENTRIES`: a value held in several places counts wherever it is),
cycles refused; the stack and the memo are bounded while it runs (`MAX_VALUES`).
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias, TypeGuard

import numpy as np

from app.errors import ModelError

MAX_ENTRIES = 5_000_000  # list items and dict entries in the content, a value in several places counted in each
MAX_VALUES = 20_000_000  # what the pickle makes and keeps while it is read: containers, their items, remembered values
MAX_DEPTH = 100  # an nnU-Net checkpoint nests about 10 deep (init_args → plans → configurations → …)
_MAX_DIMENSIONS = 32
_MAX_EXTENT = 1 << 48  # a size, stride or offset past this is no tensor's (and would overflow numpy's strides)
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


# The storage types of torch.save's persistent ids, and the numpy type of their elements
_STORAGE_TYPES = {"DoubleStorage": "float64", "FloatStorage": "float32", "HalfStorage": "float16",
                  "BFloat16Storage": "bfloat16", "LongStorage": "int64", "IntStorage": "int32",
                  "ShortStorage": "int16", "CharStorage": "int8", "ByteStorage": "uint8", "BoolStorage": "bool",
                  "ComplexFloatStorage": "complex64", "ComplexDoubleStorage": "complex128"}


def itemsize(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else int(np.dtype(dtype).itemsize)


# --- the values a checkpoint's globals rebuild ---------------------------------------------------------------

def is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True)
class StorageType:
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
                and all(is_count(size) for size in state[1]) and len(state[1]) <= _MAX_DIMENSIONS):
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
    if not isinstance(kind, str) or not (index is None or is_count(index)):
        raise _Refused("a malformed torch.device")
    return kind if index is None or ":" in kind else f"{kind}:{index}"


def _size(sizes: object = ()) -> tuple[int, ...]:
    if not isinstance(sizes, tuple | list) or not all(is_count(size) for size in sizes):
        raise _Refused("a malformed torch.Size")
    return tuple(sizes)


def _rebuild_tensor(storage: object, offset: object, shape: object, stride: object, _grad: object = False,
                    hooks: object = None, *_: object) -> TensorRef:
    if not (isinstance(storage, Storage) and is_count(offset) and isinstance(shape, tuple)
            and isinstance(stride, tuple) and len(shape) == len(stride) <= _MAX_DIMENSIONS
            and all(is_count(n) and n <= _MAX_EXTENT for n in (offset, *shape, *stride)) and not hooks):
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
    found.update({("torch", name): StorageType(dtype) for name, dtype in _STORAGE_TYPES.items()})
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


def unpickled(data: bytes, path: Path, storage: Callable[[object], Storage]) -> Value:
    """The checkpoint's content from its pickle `data`: plain values, its tensors as `TensorRef`s (`storage` turns
    each persistent id into its `Storage`). ModelError naming `path` for anything a checkpoint never holds."""
    return _finished(path, _Machine(data, path, storage).run())
