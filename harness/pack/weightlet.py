"""EdgeFlow's SIMD-friendly weightlet layout (paper section 4.2, Figures 7 and 8; byte layout in docs/format.md).

A b-bit offset-binary code u is split into weightlets of 4, 2 and 1 bits, largest first, the first piece holding the
lowest bits (7 = 4+2+1: bits 3..0, 5..4, 6). A channel's D weights form groups of 128 = 8 stripes of 16 weights;
the remainder D mod 128, if any, forms one short tail group of S = ceil(r/16) stripes (its last stripe padded with
u = 2^(b-1), i.e. q = 0). In a group, the pieces of width w of S stripes fill ceil(S*w/8) blocks of 16 bytes:
stripe s sits in block s // (8/w), at bits [8-(p+1)w, 8-pw) of every byte, p = s % (8/w) (stripe 0 at the MSB side),
byte j holding weight 16*s + j. So one 16-byte load, a shift and a mask yield one piece of 16 consecutive weights,
and a full group of b-bit weights is exactly 16*b bytes.
"""
from __future__ import annotations

import numpy as np

from harness.pack.base import Layout, register_layout

GROUP = 128  # weights per group
STRIPE = 16  # consecutive weights one 128-bit register unpacks at once
BLOCK_BYTES = 16

# bit-width -> weightlet widths, largest first (the first piece holds the least significant bits of u)
PIECES = {8: (4, 4), 7: (4, 2, 1), 6: (4, 2), 5: (4, 1), 4: (4,), 3: (2, 1), 2: (2,), 1: (1,)}


def pieces_with_shifts(bits: int) -> list[tuple[int, int]]:
    """[(width, shift)]: piece i occupies bits shift..shift+width-1 of u."""
    out, shift = [], 0
    for w in PIECES[bits]:
        out.append((w, shift))
        shift += w
    return out


def group_bytes(bits: int, stripes: int = GROUP // STRIPE) -> int:
    """Bytes of a group of `stripes` stripes: each piece's stripes fill whole 16-byte blocks."""
    return BLOCK_BYTES * sum(-(-stripes * w // 8) for w, _ in pieces_with_shifts(bits))


def _split(dim: int) -> tuple[int, int]:
    """(full groups, stripes in the tail group or 0)."""
    return dim // GROUP, -(-(dim % GROUP) // STRIPE)


@register_layout
class WeightletLayout(Layout):
    name = "weightlet"
    dtype = 16

    def channel_bytes(self, bits, dim):
        full, tail = _split(dim)
        per_bits = np.array([0] + [full * group_bytes(b) + (group_bytes(b, tail) if tail else 0)
                                   for b in range(1, 9)], np.int64)
        return per_bits[np.asarray(bits, np.int64)]

    def encode_channels(self, u, bits):
        n, d = u.shape
        full, tail = _split(d)
        stripes = full * 8 + tail
        padded = np.full((n, stripes * STRIPE), 1 << (bits - 1), np.uint8)
        padded[:, :d] = u
        parts = [_encode_groups(padded[:, : full * GROUP].reshape(n, full, 8, STRIPE), bits).reshape(n, -1)]
        if tail:
            parts.append(_encode_groups(padded[:, full * GROUP :].reshape(n, 1, tail, STRIPE), bits).reshape(n, -1))
        return np.concatenate(parts, axis=1)

    def decode_channels(self, raw, bits, dim):
        n = raw.shape[0]
        full, tail = _split(dim)
        split = full * group_bytes(bits)
        parts = [_decode_groups(raw[:, :split].reshape(n, full, group_bytes(bits)), bits, 8).reshape(n, -1)]
        if tail:
            parts.append(_decode_groups(raw[:, split:].reshape(n, 1, -1), bits, tail).reshape(n, -1))
        return np.concatenate(parts, axis=1)[:, :dim]


def _encode_groups(u: np.ndarray, bits: int) -> np.ndarray:
    """u: uint8 [n, G, S, 16] (S stripes per group) -> uint8 [n, G, group_bytes(bits, S)]."""
    n, g, s, _ = u.shape
    out = []
    for width, shift in pieces_with_shifts(bits):
        per_block = 8 // width
        blocks = -(-s // per_block)
        piece = np.zeros((n, g, blocks * per_block, STRIPE), np.uint8)
        piece[:, :, :s] = (u >> shift) & ((1 << width) - 1)
        piece = piece.reshape(n, g, blocks, per_block, STRIPE) << _position_shifts(width)[:, None]
        out.append(np.bitwise_or.reduce(piece, axis=3).reshape(n, g, blocks * BLOCK_BYTES))
    return np.concatenate(out, axis=2)


def _decode_groups(raw: np.ndarray, bits: int, s: int) -> np.ndarray:
    """raw: uint8 [n, G, group_bytes(bits, s)] -> u uint8 [n, G, s * 16]."""
    n, g, _ = raw.shape
    u = np.zeros((n, g, s, STRIPE), np.uint8)
    start = 0
    for width, shift in pieces_with_shifts(bits):
        per_block = 8 // width
        blocks = -(-s // per_block)
        block = raw[:, :, start : start + blocks * BLOCK_BYTES].reshape(n, g, blocks, 1, STRIPE)
        piece = (block >> _position_shifts(width)[:, None]) & ((1 << width) - 1)
        u |= piece.reshape(n, g, blocks * per_block, STRIPE)[:, :, :s] << shift
        start += blocks * BLOCK_BYTES
    return u.reshape(n, g, s * STRIPE)


def _position_shifts(width: int) -> np.ndarray:
    """Bit offset of stripe position p in a byte of a block of `width`-bit pieces (position 0 at the MSB side)."""
    return (8 - width * (np.arange(8 // width) + 1)).astype(np.uint8)
