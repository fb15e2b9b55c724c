"""harness/safetensors_io.py: files the safetensors library reads back exactly, tensors read one at a time (whole or
by rows), and bad files or bad input named."""
import os
import struct

import pytest
import torch
from safetensors.torch import load_file, save_file

from harness.safetensors_io import (CheckpointReader, Chunks, SafetensorsError, SafetensorsReader,
                                    write_safetensors)

TENSORS = {"a": torch.randn(5, 3), "scalar": torch.tensor(2.5), "codes": torch.randint(-8, 8, (4, 6), dtype=torch.int8),
           "empty": torch.zeros(0, 3), "half": torch.randn(7).half(), "bits": torch.arange(9, dtype=torch.uint8)}


def test_written_files_load_with_the_library_and_chunks_join(tmp_path):
    table = torch.randn(10, 4)
    pairs = [*TENSORS.items(), ("table", Chunks(torch.float32, (10, 4), [table[:3], table[3:9], table[9:]]))]
    path = write_safetensors(tmp_path / "x.safetensors", pairs, {"note": "kept"})
    back = load_file(str(path))
    assert all(torch.equal(back[k], v) for k, v in TENSORS.items()) and torch.equal(back["table"], table)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~_umask()  # as open() would make it, not private
    assert [p.name for p in tmp_path.iterdir()] == ["x.safetensors"]  # no spool or temp file left


def test_reads_whole_tensors_and_row_ranges_of_library_files(tmp_path):
    save_file(TENSORS, str(tmp_path / "y.safetensors"))
    with SafetensorsReader(tmp_path / "y.safetensors") as r:
        assert all(torch.equal(r.read(k), v) for k, v in TENSORS.items())
        assert torch.equal(r.read_rows("a", 1, 4), TENSORS["a"][1:4]) and r.shape("scalar") == ()
        assert r.dtype("half") == torch.float16
        with pytest.raises(IndexError, match="rows 3..9"):
            r.read_rows("a", 3, 9)
        with pytest.raises(KeyError, match="no tensor 'missing'"):
            r.read("missing")


def test_sharded_checkpoints_are_read_through_their_index(tmp_path):
    save_file({"x": torch.ones(2)}, str(tmp_path / "s1.safetensors"))
    save_file({"y": torch.zeros(3)}, str(tmp_path / "s2.safetensors"))
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": {"x": "s1.safetensors", "y": "s2.safetensors"}}')
    ckpt = CheckpointReader(tmp_path)
    assert ckpt.names() == ["x", "y"] and torch.equal(ckpt.read("y"), torch.zeros(3))
    with pytest.raises(SafetensorsError, match="neither model.safetensors nor"):
        CheckpointReader(tmp_path / "nothing-here")


@pytest.mark.parametrize("damage,message", [
    (lambda b: b[:-5], "does not fit the file"),
    (lambda b: b[:4], "not a safetensors file"),
    (lambda b: struct.pack("<Q", 4) + b"{bad" + b[12:], "not valid JSON"),
])
def test_damaged_files_are_named(tmp_path, damage, message):
    save_file({"a": torch.randn(8, 8)}, str(tmp_path / "z.safetensors"))
    (tmp_path / "z.safetensors").write_bytes(damage((tmp_path / "z.safetensors").read_bytes()))
    with pytest.raises(SafetensorsError, match=f"z.safetensors.*{message}"):
        SafetensorsReader(tmp_path / "z.safetensors")


def test_bad_input_leaves_no_file(tmp_path):
    with pytest.raises(ValueError, match="'a' written twice"):
        write_safetensors(tmp_path / "d.safetensors", [("a", torch.ones(1)), ("a", torch.ones(1))])
    with pytest.raises(ValueError, match="'t': 8 bytes written for torch.float32 \\[3\\]"):
        write_safetensors(tmp_path / "d.safetensors", [("t", Chunks(torch.float32, (3,), [torch.ones(2)]))])
    assert list(tmp_path.iterdir()) == []


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
