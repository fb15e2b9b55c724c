"""Every layout round-trips random codes bit-exactly; the weightlet bytes follow docs/format.md to the bit."""
import numpy as np
import pytest

from harness.pack import LAYOUTS, PackError
from harness.pack.base import decode_bits, encode_bits
from harness.pack.synthetic import random_codes
from harness.pack.weightlet import WeightletLayout

SHAPES = [(1, 1), (3, 127), (8, 128), (9, 129), (17, 300), (64, 256)]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("shape", SHAPES)
def test_round_trip_every_width_mix(layout, shape):
    rng = np.random.default_rng(hash(shape) % 2**32)
    c, d = shape
    for trial in range(4):
        bits = rng.integers(1, 9, c).astype(np.uint8) if trial else np.full(c, 1 + trial % 8, np.uint8)
        codes = random_codes(bits, d, rng)
        lay = LAYOUTS[layout]
        payload = lay.encode(codes, bits)
        assert len(payload) == lay.payload_size(bits, d)
        out, out_bits = lay.decode(payload, c, d)
        np.testing.assert_array_equal(out, codes)
        if lay.has_bits_section:
            np.testing.assert_array_equal(out_bits, bits)


@pytest.mark.parametrize("bits", range(1, 9))
def test_weightlet_group_is_16b_bytes_and_uniform_width_round_trips(bits):
    rng = np.random.default_rng(bits)
    codes = random_codes(np.full(5, bits, np.uint8), 128 * 3, rng)
    lay = WeightletLayout()
    assert lay.channel_bytes(np.array([bits]), 384)[0] == 16 * bits * 3
    out, _ = lay.decode(lay.encode(codes, np.full(5, bits)), 5, 384)
    np.testing.assert_array_equal(out, codes)


def test_weightlet_bytes_match_the_documented_layout():
    # 3-bit channel of one group: u = q + 4. Pieces: 2 bits @ 0 (two blocks), then 1 bit @ 2 (one block).
    rng = np.random.default_rng(7)
    u = rng.integers(0, 8, 128)
    payload = WeightletLayout().encode((u - 4).astype(np.int8)[None], np.array([3], np.uint8))
    data = np.frombuffer(payload, np.uint8)[64:]  # after the 64-byte bit-width section
    assert data.size == 48
    lo, hi = u & 3, u >> 2
    for k in range(2):  # 2-bit block k: byte j = p(64k+j)<<6 | p(64k+16+j)<<4 | p(64k+32+j)<<2 | p(64k+48+j)
        for j in range(16):
            w = 64 * k + j
            expect = lo[w] << 6 | lo[w + 16] << 4 | lo[w + 32] << 2 | lo[w + 48]
            assert data[16 * k + j] == expect
    for j in range(16):  # 1-bit block: byte j = p(j)<<7 | p(16+j)<<6 | ... | p(112+j)
        assert data[32 + j] == sum(int(hi[16 * s + j]) << (7 - s) for s in range(8))


def test_weightlet_tail_group_keeps_only_its_stripes():
    # D = 168 = one full group + a tail of 40 weights = 3 stripes (the last one half padding with u = 4 -> q = 0)
    rng = np.random.default_rng(9)
    u = rng.integers(0, 8, 168)
    data = np.frombuffer(WeightletLayout().encode((u - 4).astype(np.int8)[None], np.array([3])), np.uint8)[64:]
    tail = data[48:]  # the full 3-bit group is 48 bytes
    assert tail.size == 32  # 2-bit piece: ceil(3*2/8) = 1 block; 1-bit piece: 1 block
    t = np.concatenate([u[128:], np.full(8, 4)])
    for j in range(16):
        assert tail[j] == (t[j] & 3) << 6 | (t[16 + j] & 3) << 4 | (t[32 + j] & 3) << 2  # position 3 unused: 0
        assert tail[16 + j] == (t[j] >> 2) << 7 | (t[16 + j] >> 2) << 6 | (t[32 + j] >> 2) << 5


def test_weightlet_4bit_block_pairs_weight_j_with_j_plus_16():
    u = np.arange(128) % 16
    data = np.frombuffer(WeightletLayout().encode((u - 8).astype(np.int8)[None], np.array([4])), np.uint8)[64:]
    assert [int(x) for x in data[:3]] == [0 << 4 | 0, 1 << 4 | 1, 2 << 4 | 2]  # weights (0,16), (1,17), (2,18)
    assert data[16] == (32 % 16) << 4 | (48 % 16)  # block 1 starts at weight 32


def test_bits_section_is_little_endian_3bit_codes():
    section = encode_bits(np.array([1, 8, 3], np.uint8))  # codes 0, 7, 2 -> stream 000 111 010
    assert len(section) == 64 and section[0] == 0b10111000 and section[1] == 0
    np.testing.assert_array_equal(decode_bits(np.frombuffer(section, np.uint8), 3), [1, 8, 3])


def test_decoder_rejects_bad_payloads():
    lay = WeightletLayout()
    bits = np.array([5, 6], np.uint8)
    payload = bytearray(lay.encode(random_codes(bits, 128, np.random.default_rng(0)), bits))
    with pytest.raises(PackError, match="channel data"):
        lay.decode(bytes(payload[:-1]), 2, 128)
    payload[1] |= 0x80  # stream bit 15: padding after the two 3-bit codes
    with pytest.raises(PackError, match="padding bits"):
        lay.decode(bytes(payload), 2, 128)
    with pytest.raises(PackError, match="shorter than its bit-width section"):
        lay.decode(b"\0" * 10, 2, 128)


def test_encoder_rejects_codes_outside_their_width():
    with pytest.raises(PackError, match="outside"):
        WeightletLayout().encode(np.array([[2]], np.int8), np.array([2]))
    with pytest.raises(PackError, match="1..8"):
        WeightletLayout().encode(np.array([[0]], np.int8), np.array([9]))


def test_bytes_on_disk_order_at_5_bits():
    # the paper's trade-off (section 3.2): mixed INT4/INT8 pads, weightlet and kquant are compact
    rng = np.random.default_rng(3)
    bits = rng.choice([4, 5, 6], 256, p=[0.12, 0.76, 0.12]).astype(np.uint8)
    size = {name: lay.payload_size(bits, 1024) for name, lay in LAYOUTS.items()}
    assert size["kquant"] == size["weightlet"] < size["mixed48"] < size["int8"]
    assert size["weightlet"] == 64 * 2 + 1024 * int(bits.sum()) // 8  # codes at exactly b bits + 3-bit widths


def test_packing_config_group_is_validated():
    from omegaconf import OmegaConf

    from harness.registry import conf_group
    from harness.config import ConfigError
    from harness.runner.schemas import validate_groups

    for name in LAYOUTS:
        node = OmegaConf.create({"packing": OmegaConf.load(conf_group("packing") / f"{name}.yaml")})
        assert validate_groups(node)["packing"].layout == name
    with pytest.raises(ConfigError, match="packing: packing.layout must be one of"):
        validate_groups(OmegaConf.create({"packing": {"layout": "gguf"}}))


def test_layout_names_and_dtype_ids_are_each_owned_once():
    from harness.pack.base import register_layout
    from harness.registry import RegistryError

    with pytest.raises(RegistryError, match="dtype 16 is already 'weightlet'"):
        register_layout(type("Copy", (type(LAYOUTS["weightlet"]),), {"name": "copy"}))
    assert "copy" not in LAYOUTS
