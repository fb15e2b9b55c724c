"""Paper-shaped models with random weights: the published shapes, a deterministic streamed recipe whose channels are
not uniform, a clear error for the shape the runtime cannot run, and no accuracy on random weights."""
import pytest
import torch

from harness.models.random_shape import parameter_shapes, random_tensor, write_checkpoint
from harness.models.zoo import ModelUnavailable, checkpoint_dir, load_model_spec

# (hidden, intermediate, layers, heads, kv heads, head_dim, vocab, tied) of the published config.json files
PUBLISHED = {"shape-qwen1.5-1.8b": (2048, 5504, 24, 16, 16, 128, 151936, False),
             "shape-llama3-8b": (4096, 14336, 32, 32, 8, 128, 128256, False),
             "shape-mistral-7b": (4096, 14336, 32, 32, 8, 128, 32000, False),
             "shape-phi3-3.8b": (3072, 8192, 32, 32, 32, 96, 32064, False)}
KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
        "head_dim", "vocab_size", "tie_word_embeddings")
PARAMS_B = {"shape-qwen1.5-1.8b": 1.84, "shape-llama3-8b": 8.03, "shape-mistral-7b": 7.24}  # without Qwen's biases


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_shapes_equal_the_published_configs(name):
    spec = load_model_spec(name)
    assert spec.source == "random" and tuple(spec.architecture[k] for k in KEYS) == PUBLISHED[name]
    if name in PARAMS_B:
        total = sum(torch.Size(s).numel() for shard in parameter_shapes(spec.architecture).values()
                    for s in shard.values())
        assert total / 1e9 == pytest.approx(PARAMS_B[name], abs=0.01)


def test_phi3_is_a_clear_not_supported_error():
    with pytest.raises(ModelUnavailable, match="not supported.*fused qkv_proj"):
        checkpoint_dir(load_model_spec("shape-phi3-3.8b"))


def test_recipe_is_deterministic_and_not_uniform_across_channels():
    w = random_tensor("model.layers.0.mlp.up_proj.weight", (256, 512)).float()
    assert torch.equal(w.half(), random_tensor("model.layers.0.mlp.up_proj.weight", (256, 512)))
    assert not torch.equal(w.half(), random_tensor("model.layers.1.mlp.up_proj.weight", (256, 512)))
    peaks = w.abs().amax(dim=1)
    assert peaks.max() / peaks.min() > 3  # per-output-channel ranges differ: a bit allocation has work to do
    cols = w.abs().mean(dim=0)
    assert (cols > 4 * cols.median()).sum() == 5  # 1% of 512 input channels are outliers
    assert torch.equal(random_tensor("model.norm.weight", (8,)), torch.ones(8, dtype=torch.float16))


def test_a_small_shape_streams_into_loadable_shards(tmp_path, default_model_spec):
    from transformers import AutoModelForCausalLM

    from harness.models.arch import complete

    a = complete({"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "vocab_size": 49152, "tie_word_embeddings": False})
    write_checkpoint(a, tmp_path, checkpoint_dir(default_model_spec))
    assert sorted(p.name for p in tmp_path.glob("*.safetensors")) == [
        "model-embed.safetensors", "model-head.safetensors", "model-layer000.safetensors", "model-layer001.safetensors"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    assert model.config.edgeflow_random_weights["seed"] == 0
    assert torch.equal(model.model.layers[1].mlp.down_proj.weight.half(),
                       random_tensor("model.layers.1.mlp.down_proj.weight", (64, 96)))


@pytest.mark.parametrize("experiment", ["accuracy", "perplexity", "fidelity"])
def test_random_weights_give_no_accuracy(tmp_path, experiment):
    from harness.runner.job import run_job
    from harness.runner.store import ResultsStore
    from harness.runner.sweep import compose_config

    store = ResultsStore(tmp_path)
    cfg = compose_config([f"experiment={experiment}", "model=shape-qwen1.5-1.8b", "dataset=lambada-local",
                          "quantizer=edgeflow"])
    assert run_job(cfg, store) == "not run"
    row = store.read(experiment).iloc[0]
    assert "random weights" in row["error"] and row["notes"].startswith("random weights: N(0, 0.02)")
