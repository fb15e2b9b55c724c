"""Safetensors files read and written one tensor at a time, so memory holds one tensor, never a whole model.

The `safetensors` library either loads every tensor (`load_file`, `save_file`) or memory-maps the file
(`safe_open`), and pages of a mapping count in the process's RSS once touched, so streaming a 4 GB checkpoint through
it grows RSS by 4 GB. Here reads are `pread`s of one tensor's bytes, and writes append to a spool file whose header
is written last. The format (https://huggingface.co/docs/safetensors): u64 little-endian header size N, N bytes of
JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}} (offsets relative to the byte buffer
after the header), then the byte buffer, every byte of it covered by exactly one tensor.
"""
from __future__ import annotations

import json
import math
import os
import struct
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.cache import atomic_file

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}
_COPY_CHUNK = 64 << 20


@dataclass
class Chunks:
    """A tensor that arrives in blocks along dim 0 (their concatenation has `shape`), so it is never whole in memory
    while it is written. A producer may rely on its blocks being consumed before it is asked for its next item."""

    dtype: torch.dtype
    shape: tuple[int, ...]
    parts: Iterable[torch.Tensor]

    def materialize(self) -> torch.Tensor:
        return torch.cat(list(self.parts)).reshape(self.shape)


def return_freed_memory() -> None:
    """Make glibc give every allocation of 1 MiB or more back to the system when it is freed (mmap'd chunks).

    By default glibc raises its mmap threshold to the size of the largest chunk freed so far (up to 32 MiB), so the
    tensors of one layer (4-32 MiB each) then come from the heap, and freeing them leaves holes the next layer's
    differently-sized tensors do not fill: streaming Qwen1.5-1.8B's layers grew RSS by 50-70 MB per layer. A fixed
    threshold keeps RSS flat from layer to layer. Process-wide, so called once by the streaming entry points;
    a no-op where the C library has no mallopt."""
    import ctypes

    global _HEAP_SET
    if not _HEAP_SET:
        mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
        if mallopt is not None:
            mallopt(_M_MMAP_THRESHOLD, 1 << 20)
        _HEAP_SET = True


_M_MMAP_THRESHOLD = -3  # glibc's malloc.h
_HEAP_SET = False


class SafetensorsError(ValueError):
    """A safetensors file is missing, truncated or malformed."""


class SafetensorsReader:
    """One safetensors file: its header parsed and checked at open, tensors read on demand."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:
            raise SafetensorsError(f"{self.path}: cannot open ({e.strerror})") from None
        size = os.fstat(self._fd).st_size
        head = os.pread(self._fd, 8, 0)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if n < 2 or 8 + n > size:
            self.close()
            raise SafetensorsError(f"{self.path}: not a safetensors file (header size {n}, file {size} bytes)")
        try:
            header = json.loads(os.pread(self._fd, n, 8))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            self.close()
            raise SafetensorsError(f"{self.path}: header is not valid JSON ({e})") from None
        self.metadata = header.pop("__metadata__", {}) or {}
        self._base, self._entries = 8 + n, header
        for name, e in header.items():
            begin, end = e["data_offsets"]
            if e["dtype"] not in DTYPES or end - begin != math.prod(e["shape"]) * DTYPES[e["dtype"]].itemsize \
                    or self._base + end > size:
                self.close()
                raise SafetensorsError(f"{self.path}: tensor {name!r} ({e['dtype']} {e['shape']}) does not fit the "
                                       f"file (bytes {begin}..{end}, file {size})")

    def names(self) -> list[str]:
        return list(self._entries)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._entry(name)["shape"])

    def dtype(self, name: str) -> torch.dtype:
        return DTYPES[self._entry(name)["dtype"]]

    def read(self, name: str) -> torch.Tensor:
        e = self._entry(name)
        begin, end = e["data_offsets"]
        return self._pread(begin, end - begin, e["dtype"], name).reshape(e["shape"])

    def read_rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        """Rows start..stop-1 of a tensor (its dim 0), without reading the rest."""
        e = self._entry(name)
        shape = e["shape"]
        if not shape or not 0 <= start <= stop <= shape[0]:
            raise IndexError(f"{self.path}: rows {start}..{stop} of {name!r} {shape}")
        row = math.prod(shape[1:]) * DTYPES[e["dtype"]].itemsize
        begin = e["data_offsets"][0] + start * row
        return self._pread(begin, (stop - start) * row, e["dtype"], name).reshape([stop - start, *shape[1:]])

    def _pread(self, begin: int, size: int, dtype: str, name: str) -> torch.Tensor:
        buf = bytearray(size)
        view, done = memoryview(buf), 0
        while done < size:  # pread may return less than asked for
            n = os.preadv(self._fd, [view[done:]], self._base + begin + done)
            if n <= 0:
                raise SafetensorsError(f"{self.path}: truncated while reading {name!r}")
            done += n
        return torch.frombuffer(buf, dtype=DTYPES[dtype]) if size else torch.empty(0, dtype=DTYPES[dtype])

    def _entry(self, name: str) -> dict:
        try:
            return self._entries[name]
        except KeyError:
            raise KeyError(f"{self.path} has no tensor {name!r}") from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_fd", -1) >= 0:
            self.close()


class CheckpointReader:
    """A Hugging Face checkpoint directory: one `model.safetensors`, or shards listed in
    `model.safetensors.index.json`. Tensors by parameter name, one at a time."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        index = self.directory / "model.safetensors.index.json"
        if index.is_file():
            weight_map = json.loads(index.read_text())["weight_map"]
        elif (self.directory / "model.safetensors").is_file():
            with SafetensorsReader(self.directory / "model.safetensors") as r:
                weight_map = dict.fromkeys(r.names(), "model.safetensors")
        else:
            raise SafetensorsError(f"{self.directory} has neither model.safetensors nor model.safetensors.index.json")
        self._shard_of = weight_map
        self._readers: dict[str, SafetensorsReader] = {}

    def names(self) -> list[str]:
        return list(self._shard_of)

    def _reader(self, name: str) -> SafetensorsReader:
        try:
            shard = self._shard_of[name]
        except KeyError:
            raise KeyError(f"checkpoint {self.directory} has no tensor {name!r}") from None
        if shard not in self._readers:
            self._readers[shard] = SafetensorsReader(self.directory / shard)
        return self._readers[shard]

    def shape(self, name: str) -> tuple[int, ...]:
        return self._reader(name).shape(name)

    def read(self, name: str) -> torch.Tensor:
        return self._reader(name).read(name)

    def read_rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        return self._reader(name).read_rows(name, start, stop)

    def close(self) -> None:
        for r in self._readers.values():
            r.close()
        self._readers.clear()


class TensorDict:
    """Tensors already in memory ({name: tensor}, e.g. a loaded model's parameters) behind the readers' interface:
    names(), shape(), dtype(), read(), read_rows()."""

    def __init__(self, tensors: dict[str, torch.Tensor]):
        self._tensors = tensors

    def names(self) -> list[str]:
        return list(self._tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(self._tensors[name].shape)

    def dtype(self, name: str) -> torch.dtype:
        return self._tensors[name].dtype

    def read(self, name: str) -> torch.Tensor:
        return self._tensors[name].detach()

    def read_rows(self, name: str, start: int, stop: int) -> torch.Tensor:
        return self._tensors[name].detach()[start:stop]


def write_safetensors(path: str | os.PathLike, tensors: Iterable[tuple[str, torch.Tensor]],
                      metadata: dict[str, str] | None = None) -> Path:
    """Write (name, tensor) pairs as they come (each may be dropped once written); atomic (temp file + rename).
    `metadata` may be filled while the tensors come: it is read with the header, after the last tensor.

    The byte buffer goes to a spool file first, then the header and the buffer (copied in the kernel) to the file."""
    path = Path(path)
    header: dict = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=path.parent) as spool:
        offset = 0
        for name, t in tensors:
            if name in header:
                raise ValueError(f"tensor {name!r} written twice")
            begin = offset
            for part in (t.parts if isinstance(t, Chunks) else [t]):
                data = byte_view(part)
                spool.write(data)
                offset += len(data)
            shape = tuple(t.shape)
            if offset - begin != math.prod(shape) * t.dtype.itemsize:
                raise ValueError(f"tensor {name!r}: {offset - begin} bytes written for {t.dtype} {list(shape)}")
            header[name] = {"dtype": NAMES[t.dtype], "shape": list(shape), "data_offsets": [begin, offset]}
        spool.flush()
        spool.seek(0)
        header = {"__metadata__": metadata, **header} if metadata else header
        blob = json.dumps(header, separators=(",", ":")).encode()
        blob += b" " * (-len(blob) % 8)  # the buffer starts 8-aligned
        with atomic_file(path) as tmp, open(tmp, "wb") as out:
            out.write(struct.pack("<Q", len(blob)) + blob)
            out.flush()
            _copy(spool, out, offset)
    return path


def byte_view(t: torch.Tensor) -> memoryview:
    """The bytes of a tensor as stored (row-major), without a copy when it is already contiguous."""
    return memoryview(t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy())


def _copy(src, dst, size: int) -> None:
    done = 0
    while done < size:
        try:
            n = os.copy_file_range(src.fileno(), dst.fileno(), min(_COPY_CHUNK, size - done))
        except OSError:  # (filesystems without copy_file_range)
            chunk = src.read(min(_COPY_CHUNK, size - done))
            dst.write(chunk)
            n = len(chunk)
        if n <= 0:
            raise OSError(f"copying {dst.name}: source ended after {done} of {size} bytes")
        done += n
