"""The baseline layouts EdgeFlow is compared with (paper section 3.2, Figure 4; section 5.4.2, Figure 13).

- int8:    every weight padded to 8 bits, the signed code q stored as-is; no bit-width section is needed.
- mixed48: each channel padded to 4 bits (b <= 4: nibble u4 = q + 8, weight 2i in the low nibble of byte i) or to
           8 bits (b > 4: q as int8). Cheap to unpack, but reads more bytes than the codes need.
- kquant:  like llama.cpp's K-quants, each weight's 4/2/1-bit pieces (same split and bit order as the weightlet
           layout) go to separate bit planes, each plane stored contiguously per channel in weight order
           (weight i of a w-bit plane at bits (i*w) % 8 of byte i*w // 8, little-endian). Compact, but a weight's
           bits are scattered over planes and unpacking is a shift-and-mask loop per weight.
"""
from __future__ import annotations

import numpy as np

from harness.pack.base import Layout, _check_codes, register_layout
from harness.pack.weightlet import pieces_with_shifts


@register_layout
class Int8Layout(Layout):
    name = "int8"
    dtype = 17
    has_bits_section = False

    def channel_bytes(self, bits, dim):
        return np.full(len(bits), dim, np.int64)

    def encode_body(self, codes, bits):
        # widths are not stored: the codes are re-read as 8-bit, so the payload is q itself
        return _check_codes(codes, bits)[0].tobytes()

    def encode_channels(self, u, bits):
        raise NotImplementedError("int8 stores the codes directly (see encode_body)")

    def decode_channels(self, raw, bits, dim):
        return (raw.view(np.int8).astype(np.int16) + 128).astype(np.uint8)  # bits is 8 here


@register_layout
class Mixed48Layout(Layout):
    name = "mixed48"
    dtype = 18

    def channel_bytes(self, bits, dim):
        bits = np.asarray(bits)
        return np.where(bits <= 4, -(-dim // 2), dim).astype(np.int64)

    def encode_channels(self, u, bits):
        q = u.astype(np.int16) - (1 << (bits - 1))
        if bits > 4:
            return q.astype(np.int8).view(np.uint8)
        u4 = (q + 8).astype(np.uint8)
        if u4.shape[1] % 2:
            u4 = np.pad(u4, ((0, 0), (0, 1)), constant_values=8)
        return u4[:, 0::2] | (u4[:, 1::2] << 4)

    def decode_channels(self, raw, bits, dim):
        if bits > 4:
            q = raw.view(np.int8).astype(np.int16)
        else:
            u4 = np.stack([raw & 15, raw >> 4], axis=2).reshape(raw.shape[0], -1)[:, :dim]
            q = u4.astype(np.int16) - 8
        return (q + (1 << (bits - 1))).astype(np.uint8)


@register_layout
class KQuantLayout(Layout):
    name = "kquant"
    dtype = 19

    def channel_bytes(self, bits, dim):
        plane = {w: -(-dim * w // 8) for w in (1, 2, 4)}
        per_bits = np.array([0] + [sum(plane[w] for w, _ in pieces_with_shifts(b)) for b in range(1, 9)], np.int64)
        return per_bits[np.asarray(bits, np.int64)]

    def encode_channels(self, u, bits):
        n, d = u.shape
        planes = []
        for width, shift in pieces_with_shifts(bits):
            piece = (u >> shift) & ((1 << width) - 1)
            per_byte = 8 // width
            pad = (-d) % per_byte
            piece = np.pad(piece, ((0, 0), (0, pad))).reshape(n, -1, per_byte)
            placed = piece << (width * np.arange(per_byte, dtype=np.uint8))
            planes.append(np.bitwise_or.reduce(placed, axis=2))
        return np.concatenate(planes, axis=1)

    def decode_channels(self, raw, bits, dim):
        n = raw.shape[0]
        u = np.zeros((n, dim), np.uint8)
        start = 0
        for width, shift in pieces_with_shifts(bits):
            per_byte = 8 // width
            size = -(-dim * width // 8)
            plane = raw[:, start : start + size, None]
            piece = (plane >> (width * np.arange(per_byte, dtype=np.uint8))) & ((1 << width) - 1)
            u |= piece.reshape(n, -1)[:, :dim] << shift
            start += size
        return u
