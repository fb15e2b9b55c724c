"""Packing an artifact and reading it back; corrupt or truncated files are rejected with a clear error."""
import struct
import zlib

import numpy as np
import pytest

from harness.pack import LAYOUTS, PackedFile, PackError, pack_artifact
from harness.pack.container import ALIGNMENT, HEADER, REGION, TENSOR, CONFIG
from harness.pack.fuzz_corpus import reseal_header, reseal_meta, sealed_but_invalid


@pytest.fixture(scope="module")
def packed(tiny_artifact, tmp_path_factory):
    d = tmp_path_factory.mktemp("packed")
    return {name: pack_artifact(tiny_artifact, d / f"{name}.efpk", layout=name) for name in LAYOUTS}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_tensor_reads_back(packed, tiny_artifact, layout):
    f = PackedFile(packed[layout])
    assert f.config["hidden_size"] == 72 and f.config["num_hidden_layers"] == 2 and f.config["tie_word_embeddings"]
    assert f.provenance["layout"] == layout
    for name, q in tiny_artifact.linears.items():
        codes, bits = f.quant_codes(name)
        np.testing.assert_array_equal(codes, q.codes.numpy())
        if layout != "int8":
            np.testing.assert_array_equal(bits, q.bits.numpy())
        np.testing.assert_array_equal(f.array(f"{name}.w_scale"), q.w_scale.numpy())
        np.testing.assert_array_equal(f.array(f"{name}.in_scale"), q.in_scale.numpy())
        assert f.array(f"{name}.act_scale").shape == ()
        np.testing.assert_array_equal(f.array(f"{name}.out_step"), q.out_step.numpy())  # version 3: the NPU's grid
    assert f.version >= 3 and not f.float_outputs  # (grids: version 3 on)
    for name, t in tiny_artifact.others.items():
        np.testing.assert_array_equal(f.array(name), t.numpy())


def test_older_files_read_and_say_they_carry_float_outputs(tiny_artifact, tmp_path, monkeypatch):
    from dataclasses import replace

    from harness.pack import container
    float_outputs = replace(tiny_artifact, linears={n: replace(q, out_step=None)
                                                      for n, q in tiny_artifact.linears.items()})
    monkeypatch.setattr(container, "VERSION", 2)
    old = PackedFile(pack_artifact(float_outputs, tmp_path / "v2.efpk"))
    assert old.version == 2 and old.float_outputs
    assert not any(t.name.endswith((".out_step", ".act_bits")) for t in old.tensors)


def test_layers_are_aligned_contiguous_regions(packed):
    f = PackedFile(packed["weightlet"])
    kinds = [(r.kind, r.layer) for r in f.regions]
    assert kinds == [(0, 0), (1, 0), (1, 1), (2, 0)]
    for r in f.regions:
        assert r.offset % ALIGNMENT == 0 and r.size % ALIGNMENT == 0
        names = [t.name for t in f.tensors[r.first_tensor : r.first_tensor + r.n_tensors]]
        if r.kind == 1:
            assert all(n.startswith(f"model.layers.{r.layer}.") for n in names)
            assert names[0].endswith("input_layernorm.weight") and names[-1].startswith(f"model.layers.{r.layer}.mlp.down_proj")


# --- corruption: each case edits a valid file and names the error it must raise --------------------------------------

def corruptions(data: bytes):
    n_regions, n_tensors = HEADER.unpack_from(data)[8:10]
    tensors_at = 64 + CONFIG.size + REGION.size * n_regions
    quant = next(i for i in range(n_tensors) if TENSOR.unpack_from(data, tensors_at + 64 * i)[2] >= 16)
    rec = tensors_at + 64 * quant  # absolute offset of a quantized weight's record
    offset = struct.unpack_from("<Q", data, rec + 32)[0]

    def meta_field(pos, fmt, value):
        def edit(meta):
            struct.pack_into(fmt, meta, pos - 64, value)
        return edit

    def case(label, fn, match):
        d = bytearray(data)
        fn(d)
        return label, bytes(d), match

    yield case("bad magic", lambda d: d.__setitem__(slice(0, 4), b"GGUF"), "bad magic")
    yield case("wrong version", lambda d: reseal_header(d, version=5), "version 5")
    yield case("header checksum", lambda d: d.__setitem__(20, d[20] ^ 1), "header checksum")
    yield case("metadata checksum", lambda d: d.__setitem__(64 + 70, d[64 + 70] ^ 1), "metadata checksum")
    yield "truncated", data[: len(data) - ALIGNMENT], "truncated"
    yield "tiny", data[:40], "truncated"
    yield case("index past the end", lambda d: reseal_meta(d, meta_field(rec + 32, "<Q", len(data) + 64)),
               "outside its region")
    yield case("size past the region", lambda d: reseal_meta(d, meta_field(rec + 40, "<Q", 1 << 40)),
               "outside its region")
    yield case("region past the end", lambda d: reseal_meta(
        d, meta_field(64 + CONFIG.size + REGION.size * (n_regions - 1) + 16, "<Q", 1 << 20)), "past the end")
    yield case("payload checksum", lambda d: d.__setitem__(offset + 100, d[offset + 100] ^ 0x10), "checksum mismatch")
    yield case("unknown dtype", lambda d: reseal_meta(d, meta_field(rec + 8, "<B", 99)), "unknown dtype")

    # 3-bit codes cover exactly the widths 1..8, so a bad code shows as a size that disagrees with the payload, or
    # as padding bits set past the last code; the payload checksum is resealed so that check is the one that fires
    size, channels = struct.unpack_from("<Q", data, rec + 40)[0], struct.unpack_from("<I", data, rec + 16)[0]

    def payload_edit(pos, xor):
        def fn(d):
            d[offset + pos] ^= xor
            reseal_meta(d, meta_field(rec + 48, "<I", zlib.crc32(bytes(d[offset : offset + size]))))
        return fn

    yield case("bit code changed", payload_edit(0, 0x01), "bit-widths imply")
    yield case("bit code padding", payload_edit((3 * channels) // 8 + 1, 0x80), "padding bits")

    # the embedding's row-CRC table (U32, version 2): in a version-1 file, and with one entry wrong but the table's own
    # CRC resealed (only a reader that checks the rows against the table it read whole can tell)
    yield from sealed_but_invalid(data)


def test_corrupt_files_are_rejected(packed, tmp_path):
    data = packed["weightlet"].read_bytes()
    for label, bad, match in corruptions(data):
        path = tmp_path / "bad.efpk"
        path.write_bytes(bad)
        with pytest.raises(PackError, match=match):
            f = PackedFile(path)
            for t in f.tensors:  # errors found only when a payload is used
                f.quant_codes(t.name[:-7]) if t.dtype >= 16 else f.array(t.name)
        assert label
