"""Seed inputs for the native reader's fuzzer: small valid packed files in every layout, so mutations start from
well-formed headers, tables and payloads, and the invalid files the readers must refuse though every checksum holds
(a U32 tensor in a version-1 file; a row-CRC entry that disagrees with its row, the table's own CRC resealed; output
grids in a version-2 file; a quantized LM head in a version-3 file).

`reseal_header` and `reseal_meta` edit a file and recompute the checksums over what they edited (tests use them to
build corrupt files that get past the checksums to the check under test)."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

from harness.pack import LAYOUTS, pack_artifact
from harness.pack.container import CONFIG, EMBED_ROW_CRCS, HEADER, REGION, TENSOR
from harness.pack.synthetic import random_artifact

SEED_CONFIG = dict(hidden_size=40, intermediate_size=24, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=1, head_dim=20, vocab_size=8, max_position_embeddings=64,
                   rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True)
HEADER_FIELDS = ("magic", "version", "header_size", "file_size", "meta_offset", "meta_size", "meta_crc", "alignment",
                 "n_regions", "n_tensors", "packing", "header_crc")


def reseal_header(data: bytearray, **fields) -> None:
    """Set header fields (names as HEADER_FIELDS) and recompute header_crc unless it is one of them."""
    values = dict(zip(HEADER_FIELDS, HEADER.unpack_from(data)))
    values.update(fields)
    HEADER.pack_into(data, 0, *(values[n] for n in HEADER_FIELDS))
    if "header_crc" not in fields:
        struct.pack_into("<I", data, 60, zlib.crc32(bytes(data[:60])))


def reseal_meta(data: bytearray, edit) -> None:
    """edit(meta: bytearray) the metadata in place, then recompute meta_crc and header_crc."""
    meta_size = HEADER.unpack_from(data)[5]
    meta = bytearray(data[64 : 64 + meta_size])
    edit(meta)
    data[64 : 64 + meta_size] = meta
    reseal_header(data, meta_crc=zlib.crc32(bytes(meta)))


def tensor_records(data: bytes) -> dict[str, int]:
    """{tensor name: absolute file offset of its 64-byte record}."""
    n_regions, n_tensors = HEADER.unpack_from(data)[8:10]
    records = 64 + CONFIG.size + REGION.size * n_regions
    strings = records + TENSOR.size * n_tensors
    out = {}
    for i in range(n_tensors):
        rec = records + TENSOR.size * i
        offset, length = struct.unpack_from("<II", data, rec)
        out[bytes(data[strings + offset : strings + offset + length]).decode()] = rec
    return out


def sealed_but_invalid(data: bytes) -> list[tuple[str, bytes, str]]:
    """(label, file, error the readers raise) for each invalid file behind valid checksums that a valid version-3
    file yields: its row CRCs (version 2) in a version-1 file, a wrong row-CRC entry, its linears' output grids
    (version 3) in a version-2 file, its quantized LM head (version 4) in a version-3 file; [] when it has none."""
    records = tensor_records(data)
    out = []
    if EMBED_ROW_CRCS in records:
        old = bytearray(data)
        reseal_header(old, version=1)
        rec = records[EMBED_ROW_CRCS]
        at, size = struct.unpack_from("<QQ", data, rec + 32)
        wrong = bytearray(data)
        wrong[at + 4 * 3] ^= 0x01  # row 3's entry
        reseal_meta(wrong, lambda meta: struct.pack_into("<I", meta, rec + 48 - 64,
                                                         zlib.crc32(bytes(wrong[at : at + size]))))
        out += [("u32 in a version-1 file", bytes(old), "u32 needs format version 2"),
                ("row CRC entry", bytes(wrong), "row 3 disagrees")]
    if any(name.endswith(".out_step") for name in records):
        v2 = bytearray(data)
        reseal_header(v2, version=2)
        out.append(("output grids in a version-2 file", bytes(v2), "need format version 3, the file is version 2"))
    if "lm_head.weight" in records and data[records["lm_head.weight"] + 8] >= 16:  # (dtype byte: quantized)
        v3 = bytearray(data)
        reseal_header(v3, version=3)
        out.append(("quantized LM head in a version-3 file", bytes(v3), "needs format version 4, the file is version 3"))
    return out


def write_corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    artifacts = {"": random_artifact(SEED_CONFIG, mean_bits=4, seed=5, name="fuzz-seed", output_grids=True),
                 "head-": random_artifact(SEED_CONFIG, mean_bits=4, seed=6, name="fuzz-seed", output_grids=True,
                                          lm_head_bits=4)}  # (the LM head inside the bit budget: version 4)
    for prefix, artifact in artifacts.items():
        for name in LAYOUTS:
            path = pack_artifact(artifact, folder / f"seed-{prefix}{name}.efpk", layout=name)
            for label, data, _ in sealed_but_invalid(path.read_bytes()):
                (folder / f"invalid-{prefix}{name}-{label.replace(' ', '-')}.efpk").write_bytes(data)
    return folder
