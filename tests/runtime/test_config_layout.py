"""The model config has one Python definition (harness/models/arch.py): the engine's C struct, the ctypes mirror and
the packed file's config block all follow it."""
import ctypes
import struct

import pytest

from harness.engine.library import EngineConfig, lib
from harness.models import arch
from harness.pack import container

pytestmark = pytest.mark.native


def test_c_struct_and_ctypes_mirror_agree():
    assert lib().ef_config_size() == ctypes.sizeof(EngineConfig)
    for f in arch.FIELDS:
        assert lib().ef_config_offset(f.name.encode()) == getattr(EngineConfig, f.name).offset, f.name
    assert lib().ef_config_offset(b"no_such_field") == -1


def test_packed_config_block_follows_the_field_table(tiny_pair, tmp_path):
    _, artifact = tiny_pair
    read = container.PackedFile(container.pack_artifact(artifact, tmp_path / "m.efpk")).config
    assert read == pytest.approx(arch.complete(artifact.config))  # eps and theta are float32 on disk
    assert container.CONFIG.size == 64 and struct.calcsize("<8I") == 4 * len(arch.PACKED_INT_FIELDS)


def test_complete_names_the_bad_field():
    good = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 100}
    assert arch.complete(good)["head_dim"] == 16 and arch.complete(good)["rope_theta"] == 10000.0
    with pytest.raises(ValueError, match="vocab_size is missing"):
        arch.complete({k: v for k, v in good.items() if k != "vocab_size"})
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['hiden_size'\]"):
        arch.complete({**good, "hiden_size": 1})
