"""The contract every packing layout follows, and the per-channel bit-width metadata they share.

A layout turns one quantized linear's signed codes q (int8 [C, D], channel c holding bits[c]-bit values) into the
bytes stored on disk (the tensor's payload, docs/format.md) and back. Every layout except raw INT8 starts its payload
with the bit-width section: the widths as 3-bit codes (b - 1), little-endian bit stream, zero-padded to 64 bytes.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from harness.registry import Registry, RegistryError

BITS_SECTION_ALIGN = 64


class PackError(ValueError):
    """A payload or file does not follow docs/format.md, or the input cannot be packed."""


LAYOUTS = Registry("packing layout")  # name -> the layout (one stateless instance each)


def register_layout(cls):
    """Class decorator of a Layout subclass: registers one instance under its name; its dtype id must be its own."""
    owner = next((name for name, lay in LAYOUTS.items() if lay.dtype == cls.dtype and name != cls.name), None)
    if owner is not None:
        raise RegistryError(f"packing layout {cls.name!r}: dtype {cls.dtype} is already {owner!r}'s")
    LAYOUTS.register(cls())
    return cls


def get_layout(name: str) -> "Layout":
    if name not in LAYOUTS:
        raise PackError(f"unknown packing layout {name!r}; choose one of {sorted(LAYOUTS)}")
    return LAYOUTS[name]


def layout_of_dtype(dtype: int) -> "Layout | None":
    """The layout whose payloads carry this tensor dtype id, or None (a raw tensor)."""
    return next((lay for lay in LAYOUTS.values() if lay.dtype == dtype), None)


class Layout(ABC):
    """One way of storing a quantized linear's codes. Subclasses are stateless."""

    name: str  # registry key, e.g. "weightlet"
    dtype: int  # the tensor dtype id written in the file's index (docs/format.md, "Data types")
    has_bits_section: bool = True

    @abstractmethod
    def channel_bytes(self, bits: np.ndarray, dim: int) -> np.ndarray:
        """int64 [C]: bytes each channel occupies in the payload (after the bit-width section)."""

    @abstractmethod
    def encode_channels(self, u: np.ndarray, bits: int) -> np.ndarray:
        """Pack the offset-binary codes u (uint8 [n, D], all channels of width `bits`) into uint8 [n, channel_bytes]."""

    @abstractmethod
    def decode_channels(self, raw: np.ndarray, bits: int, dim: int) -> np.ndarray:
        """Inverse of encode_channels: uint8 [n, channel_bytes] -> offset-binary codes uint8 [n, D]."""

    # --- shared by every layout ---------------------------------------------------------------------------------

    def encode(self, codes: np.ndarray, bits: np.ndarray) -> bytes:
        """The payload of codes int8 [C, D] at widths bits [C]: the bit-width section, then every channel's data."""
        head = encode_bits(np.asarray(bits).astype(np.uint8)) if self.has_bits_section else b""
        return head + self.encode_body(codes, bits)

    def encode_body(self, codes: np.ndarray, bits: np.ndarray) -> bytes:
        """The channels' data of codes [C, D] without the bit-width section: the channels are back to back, so the
        bodies of consecutive blocks of rows concatenate to the body of the whole tensor."""
        codes, bits = _check_codes(codes, bits)
        c, d = codes.shape
        sizes = self.channel_bytes(bits, d)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        body = np.zeros(int(starts[-1]), np.uint8)
        for b in np.unique(bits):
            rows = np.nonzero(bits == b)[0]
            u = (codes[rows].astype(np.int16) + (1 << (int(b) - 1))).astype(np.uint8)
            packed = self.encode_channels(u, int(b))
            # channels of one width have one size, so their byte ranges are starts[rows] + arange(size)
            body[starts[rows][:, None] + np.arange(packed.shape[1])] = packed
        return body.tobytes()

    def decode(self, payload: bytes | np.ndarray, channels: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
        """payload -> (codes int8 [C, D], bits uint8 [C]); raises PackError on any inconsistency."""
        buf = np.frombuffer(payload, np.uint8)
        if self.has_bits_section:
            bits = decode_bits(buf, channels)
            body = buf[bits_section_size(channels):]
        else:
            bits = np.full(channels, 8, np.uint8)
            body = buf
        sizes = self.channel_bytes(bits, dim)
        if int(sizes.sum()) != body.size:
            raise PackError(
                f"{self.name} payload: channel data is {body.size} bytes but the bit-widths imply {int(sizes.sum())}"
            )
        starts = np.concatenate([[0], np.cumsum(sizes)])
        codes = np.empty((channels, dim), np.int8)
        for b in np.unique(bits):
            rows = np.nonzero(bits == b)[0]
            raw = body[starts[rows][:, None] + np.arange(int(sizes[rows[0]]))]
            u = self.decode_channels(raw, int(b), dim)
            codes[rows] = (u.astype(np.int16) - (1 << (int(b) - 1))).astype(np.int8)
        return codes, bits

    def payload_size(self, bits: np.ndarray, dim: int) -> int:
        head = bits_section_size(len(bits)) if self.has_bits_section else 0
        return head + int(self.channel_bytes(np.asarray(bits, np.uint8), dim).sum())


def bits_section_size(channels: int) -> int:
    return _align(-(-3 * channels // 8), BITS_SECTION_ALIGN)


def encode_bits(bits: np.ndarray) -> bytes:
    """Per-channel widths 1..8 as 3-bit codes b-1: code i occupies stream bits 3i..3i+2, stream bit n = bit n%8 of
    byte n//8 (little-endian bit order)."""
    codes = bits.astype(np.uint8) - 1
    stream = ((codes[:, None] >> np.arange(3, dtype=np.uint8)) & 1).reshape(-1)
    out = np.zeros(bits_section_size(len(bits)), np.uint8)
    packed = np.packbits(stream, bitorder="little")
    out[: packed.size] = packed
    return out.tobytes()


def decode_bits(buf: np.ndarray, channels: int) -> np.ndarray:
    size = bits_section_size(channels)
    if buf.size < size:
        raise PackError(f"payload of {buf.size} bytes is shorter than its bit-width section ({size} bytes)")
    stream = np.unpackbits(buf[:size], bitorder="little")
    if stream[3 * channels :].any():
        raise PackError("bit-width section: padding bits after the last 3-bit code are not zero")
    codes = stream[: 3 * channels].reshape(channels, 3) @ np.array([1, 2, 4])
    return (codes + 1).astype(np.uint8)


def _check_codes(codes, bits) -> tuple[np.ndarray, np.ndarray]:
    codes = np.ascontiguousarray(np.asarray(codes), dtype=np.int8)
    bits = np.asarray(bits).astype(np.uint8)
    if codes.ndim != 2 or bits.shape != (codes.shape[0],):
        raise PackError(f"codes must be [C, D] and bits [C]; got {codes.shape} and {bits.shape}")
    if ((bits < 1) | (bits > 8)).any():
        raise PackError("bit-widths must lie in 1..8")
    lo = -(1 << (bits.astype(np.int32) - 1))
    q = codes.astype(np.int32)
    if ((q < lo[:, None]) | (q > -lo[:, None] - 1)).any():
        raise PackError("codes hold values outside their channel's bit-width")
    return codes, bits


def _align(n: int, a: int) -> int:
    return -(-n // a) * a
