"""The image embeddings a prompt encoder made, kept in memory by least-recent use and bounded by bytes: going back
to an image already encoded costs no encoder run (X-AnyLabeling re-encodes on every image switch)."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from app.inference.prompt.frame import FrameGeometry

DEFAULT_CACHE_BYTES = 512 << 20  # SAM's embedding is 4 MiB and SAM2's ~26 MiB: 20-100 images


@dataclass(frozen=True)
class Embedding:
    """One image's encoder outputs (by the decoder input they feed) and where the image lies in the frame."""

    key: tuple[Hashable, ...]
    tensors: dict[str, np.ndarray]
    geometry: FrameGeometry

    @property
    def nbytes(self) -> int:
        return sum(int(t.nbytes) for t in self.tensors.values())


def image_identity(image: np.ndarray) -> str:
    """A stable identity of an image's pixels (shape, dtype and bytes hashed), for callers that give no key."""
    digest = hashlib.blake2b(digest_size=16)
    digest.update(f"{image.shape}{image.dtype}".encode())
    digest.update(np.ascontiguousarray(image).data)
    return digest.hexdigest()


class EmbeddingCache:
    """LRU by bytes: adding past `max_bytes` drops the least recently used embeddings first; one larger than the
    whole budget is returned to its caller but not kept. Safe to share between threads."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Hashable, ...], Embedding] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: tuple[Hashable, ...]) -> bool:
        return key in self._items

    def get(self, key: tuple[Hashable, ...]) -> Embedding | None:
        """The embedding under `key`, now the most recently used; None when absent."""
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
            return item

    def put(self, embedding: Embedding) -> None:
        """Keep `embedding` (replacing one under the same key), dropping old ones until the total fits."""
        with self._lock:
            old = self._items.pop(embedding.key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if embedding.nbytes > self.max_bytes:
                return
            self._items[embedding.key] = embedding
            self._bytes += embedding.nbytes
            while self._bytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self._bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
