"""Quantizing a checkpoint on disk layer by layer (harness/quant/stream.py) gives exactly what quantizing the loaded
model gives: the same calibration statistics and the same artifact, for tied and untied embeddings, one file or
shards, INT8 or FP16 tables; and bad checkpoints fail naming the problem."""
import pytest
import torch
from transformers import LlamaForCausalLM

from harness.artifact import load_artifact
from harness.quant import make_quantizer
from harness.quant.calibrate import collect_stats
from harness.quant.stream import checkpoint_stats, write_artifact
from harness.safetensors_io import SafetensorsError
from tests.tiny_llama import tiny_llama


def _calibration(n=3, length=40):
    return [torch.randint(0, 256, (length - i,), generator=torch.Generator().manual_seed(i)) for i in range(n)]


def _checkpoint(tmp_path, tie, shard):
    """The tiny model saved in FP16 (as checkpoints are) and loaded back in FP32 (as load_model does)."""
    path = tmp_path / "ckpt"
    tiny_llama(layers=3, tie=tie, seed=5).half().save_pretrained(path, max_shard_size="100KB" if shard else "1GB")
    assert (path / "model.safetensors.index.json").is_file() == shard
    return path, LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


@pytest.mark.parametrize("tie,shard,embedding_bits,rounding", [(True, False, 8, "nearest"), (False, True, 8, "nearest"),
                                                                (False, False, 16, "nearest"), (True, True, 8, "gptq")])
def test_the_streamed_artifact_equals_the_in_memory_one(tmp_path, monkeypatch, tie, shard, embedding_bits, rounding):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    checkpoint, model = _checkpoint(tmp_path, tie, shard)
    config = {"name": "edgeflow", "budget_bits": 4.5, "alpha_grid": [0.0, 0.5], "embedding_bits": embedding_bits,
              "weight_rounding": rounding}
    calibration = _calibration()

    in_memory = make_quantizer(config)
    in_memory.calibrate(model, calibration)
    want = in_memory.quantize(model, "tiny")

    streamed = make_quantizer(config)
    streamed.stats = checkpoint_stats("tiny", checkpoint, calibration, streamed.config.grid_tokens,
                                      gram=streamed.needs_gram)
    assert set(streamed.stats) == set(in_memory.stats)
    for name, stats in in_memory.stats.items():
        got = streamed.stats[name]
        assert torch.equal(got.in_max, stats.in_max) and torch.equal(got.out_max, stats.out_max)
        assert torch.equal(got.rows, stats.rows), name
        assert (got.gram is None) == (rounding == "nearest") and (got.gram is None or torch.equal(got.gram, stats.gram))
    got = load_artifact(write_artifact(checkpoint, streamed, "tiny", tmp_path / "artifact"))

    assert got.manifest.pop("timing_s")["quantize"] > 0
    assert got.manifest == {"format": "edgeflow-qartifact", "version": 1, **want.manifest}
    assert got.linears.keys() == want.linears.keys() and got.others.keys() == want.others.keys()
    for name, q in want.linears.items():
        for field in ("codes", "bits", "w_scale", "in_scale", "act_scale"):
            assert torch.equal(getattr(got.linears[name], field), getattr(q, field)), f"{name}.{field}"
    for name, t in want.others.items():
        assert torch.equal(got.others[name], t), name


def test_statistics_are_cached_per_checkpoint_and_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    checkpoint, _ = _checkpoint(tmp_path, True, False)
    first = checkpoint_stats("tiny", checkpoint, _calibration(), 16)
    assert checkpoint_stats("tiny", checkpoint, _calibration(), 16).path == first.path  # reused
    assert checkpoint_stats("tiny", checkpoint, _calibration(n=2), 16).path != first.path  # other data
    assert checkpoint_stats("tiny", checkpoint, _calibration(), 8).path != first.path  # other row sample


def test_a_truncated_checkpoint_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    checkpoint, _ = _checkpoint(tmp_path, True, False)
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1000])
    with pytest.raises(SafetensorsError, match="model.safetensors.*does not fit the file"):
        checkpoint_stats("tiny", checkpoint, _calibration(), 16)


def test_stream_stats_match_collect_stats_on_a_real_shape(tmp_path, monkeypatch):
    """GQA with more heads than the tiny default, and sequences of different lengths."""
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "gqa"
    tiny_llama(hidden=96, intermediate=160, layers=2, heads=6, kv_heads=2, seed=1).half().save_pretrained(path)
    model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    calibration = _calibration(n=4, length=33)
    want = collect_stats(model, calibration, sample_rows=20)
    got = checkpoint_stats("gqa", path, calibration, 20)
    for name, stats in want.items():
        assert torch.equal(got[name].rows, stats.rows) and torch.equal(got[name].in_max, stats.in_max), name


def test_linears_given_one_input_share_one_gram_matrix_in_memory_and_on_disk(tmp_path, monkeypatch):
    """q, k and v (gate and up) get the very same input tensor: one Gram sum and one stored matrix serve them, each
    the mean of x x^T over the calibration tokens of that linear's own input; the file stores 4 per layer, not 7."""
    from harness.safetensors_io import SafetensorsReader

    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path / "cache"))
    checkpoint, model = _checkpoint(tmp_path, tie=False, shard=False)
    calibration = _calibration()
    stats = collect_stats(model, calibration, gram=True)
    layer = "model.layers.1."
    q, k, v = (stats[f"{layer}self_attn.{p}_proj"].gram for p in "qkv")
    assert q is k is v and stats[f"{layer}mlp.gate_proj"].gram is stats[f"{layer}mlp.up_proj"].gram
    assert stats[f"{layer}self_attn.o_proj"].gram is not q and stats[f"{layer}mlp.down_proj"].gram is not q

    own = {name: [] for name in (f"{layer}self_attn.v_proj", f"{layer}mlp.up_proj", f"{layer}mlp.down_proj")}
    hooks = [model.get_submodule(n).register_forward_hook(lambda m, a, o, n=n: own[n].append(a[0][0].float()))
             for n in own]
    with torch.inference_mode():
        for seq in calibration:
            model.model(input_ids=seq[None], use_cache=False)
    for h in hooks:
        h.remove()
    for name, xs in own.items():  # summed as calibration sums: each sequence's float32 product into float64
        total = sum((x.t() @ x).double() for x in xs)
        assert torch.equal(stats[name].gram, (total / sum(len(x) for x in xs)).float()), name

    on_disk = checkpoint_stats("tiny", checkpoint, calibration, 256, gram=True)
    grams = [n for n in SafetensorsReader(on_disk.path).names() if n.endswith(".gram")]
    assert len(grams) == 4 * model.config.num_hidden_layers
    for name in stats:
        assert torch.equal(on_disk[name].gram, stats[name].gram), name
