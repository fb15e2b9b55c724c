"""An untied embedding stays on storage: edgeflow-run reads the rows of the prompt's tokens (and later the rows decode
looks up), each checked against its CRC-32 in model.embed_tokens.row_crc32, instead of the whole [vocab, hidden]
table; the logits are the same as with the table in memory and a corrupt row is an invalid model file."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from harness.engine.capi import NativeEngine
from harness.engine.run import RuntimeRunError, run_edgeflow
from harness.pack import PackedFile, pack_artifact
from tests.runtime.conftest import make_artifact
from tests.runtime.test_cli import binary  # noqa: F401 (fixture)
from tests.tiny_llama import tiny_llama

pytestmark = pytest.mark.native

VOCAB, HIDDEN = 8192, 64  # a 512 KB table: 128 blocks of 4 KB, of which a prompt touches a few
PROMPT = [3, 17, 99, 4, 4000, 8, 8, 1, 42, 7777, 5]
BLOCK = 4096


@pytest.fixture(scope="module")
def untied(tmp_path_factory):
    model = tiny_llama(vocab=VOCAB, hidden=HIDDEN, intermediate=160, tie=False, seed=7)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.1)
    artifact = make_artifact(model, seed=8)
    return artifact, pack_artifact(artifact, tmp_path_factory.mktemp("rows") / "untied.efpk")


def _with_row_flipped(path, row, out):
    codes = PackedFile(path).info("model.embed_tokens.codes")
    data = bytearray(path.read_bytes())
    data[codes.offset + row * HIDDEN + 5] ^= 0x40
    out.write_bytes(bytes(data))
    return out


def test_row_crcs_are_the_crcs_of_the_tables_rows(untied):
    _, path = untied
    f = PackedFile(path)
    table = f.array("model.embed_tokens.codes")
    assert f.array("model.embed_tokens.row_crc32").tolist() == [zlib.crc32(r.tobytes()) for r in table]
    assert "lm_head.row_crc32" not in {t.name for t in f.tensors}  # the LM head is read whole


def test_only_the_prompts_rows_are_read_and_the_logits_are_unchanged(untied, binary):
    artifact, path = untied
    f = PackedFile(path)
    embedding = f.regions[0]
    report = run_edgeflow(path, PROMPT, threads=2, new_tokens=4, evict_cache=True, binary=binary)
    rows_at_most = len(set(PROMPT)) * 2 * BLOCK  # a row may straddle two blocks
    small = sum(t.size + 2 * BLOCK for t in f.tensors[1:] if t.region == 0 and t.name != "model.embed_tokens.codes")
    assert f.file_size - embedding.size < report.bytes_read <= f.file_size - embedding.size + small + rows_at_most
    with NativeEngine.from_artifact(artifact) as whole_table, NativeEngine.open(path) as stored_rows:
        seq = PROMPT + report.tokens[:4]
        want = whole_table.logits(seq)
        assert torch.equal(stored_rows.logits(seq), want)  # and a second prompt's new rows come on demand:
        assert torch.equal(stored_rows.logits([9, 8191, 6000]), whole_table.logits([9, 8191, 6000]))
    assert report.tokens == want.argmax(-1)[len(PROMPT) - 1:].tolist()


def test_a_corrupt_row_is_an_invalid_model_file_when_it_is_needed(untied, binary, tmp_path):
    _, path = untied
    clean = run_edgeflow(path, PROMPT, threads=2, new_tokens=1, binary=binary).tokens
    with pytest.raises(RuntimeRunError, match="model.embed_tokens.codes row 99: checksum mismatch") as err:
        run_edgeflow(_with_row_flipped(path, 99, tmp_path / "prompt-row.efpk"), PROMPT, threads=2, binary=binary)
    assert err.value.code == 4
    unused = next(r for r in range(VOCAB) if r not in PROMPT and r not in clean)
    other = run_edgeflow(_with_row_flipped(path, unused, tmp_path / "unused-row.efpk"), PROMPT, threads=2,
                         new_tokens=1, binary=binary)
    assert other.tokens == clean  # a row nobody looks up is never read
    first = clean[0]
    assert first not in PROMPT, "the fixture's first token should be a row the prompt does not read"
    with pytest.raises(RuntimeRunError, match=f"row {first}: checksum mismatch"):  # decode embeds it
        run_edgeflow(_with_row_flipped(path, first, tmp_path / "decode-row.efpk"), PROMPT, threads=2,
                     new_tokens=2, binary=binary)


def test_version_1_files_without_row_crcs_still_run(untied, binary, tmp_path, monkeypatch):
    """Files packed before the row CRCs (format version 1) have their table read whole, as then."""
    from harness.pack import container

    artifact, path = untied
    monkeypatch.setattr(container, "VERSION", 1)
    old = pack_artifact(artifact, tmp_path / "v1.efpk")
    f = PackedFile(old)
    assert "model.embed_tokens.row_crc32" not in {t.name for t in f.tensors}
    report = run_edgeflow(old, PROMPT, threads=2, binary=binary)
    assert report.bytes_read == sum(r.size for r in f.regions)
    assert report.tokens == run_edgeflow(path, PROMPT, threads=2, binary=binary).tokens
    assert np.array_equal(f.array("model.embed_tokens.codes"), PackedFile(path).array("model.embed_tokens.codes"))
