"""Fixtures for the native runtime tests: a tiny random Llama and a quantized artifact of it."""
from __future__ import annotations

import pytest
import torch
from transformers import LlamaForCausalLM

from harness.artifact import LINEAR_SUFFIXES, Artifact, QuantLinear
from harness.models.arch import runtime_config
from harness.quant.numerics import act_scale_for, quantize_per_channel
from tests.tiny_llama import tiny_llama as shared_tiny_llama


def tiny_llama(seed: int = 0, tie: bool = True, layers: int = 2) -> LlamaForCausalLM:
    """tests.tiny_llama with an intermediate size that is not a multiple of 32 (the GEMM kernels' K tail), weights
    of std 0.1 (logits spread enough that the top-1 token is never a near tie) and non-trivial norm weights (a mix-up
    of norms would show)."""
    model = shared_tiny_llama(intermediate=160, layers=layers, tie=tie, seed=seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0.0, 0.1)
    return model


def make_artifact(model: LlamaForCausalLM, seed: int = 0, calib_tokens: int = 48,
                  head_in_budget: bool = False) -> Artifact:
    """A runtime-compatible artifact: per-channel codes of 3..8 bits, smoothing-like in_scale, act_scale from the
    inputs each linear sees on random calibration tokens. head_in_budget: the LM head is its own table (a copy when
    tied, as quantizer.lm_head=budget makes) with rows of 3..8 bits, packed as a quantized weight (format version 4)."""
    g = torch.Generator().manual_seed(seed)
    cfg = model.config
    peaks: dict[str, torch.Tensor] = {}
    hooks = []
    for name, mod in model.named_modules():
        if name.endswith(LINEAR_SUFFIXES):
            hooks.append(mod.register_forward_hook(
                lambda m, inp, out, name=name: peaks.__setitem__(name, inp[0].detach().abs().amax(dim=(0, 1)))))
    with torch.no_grad():
        model(torch.randint(0, cfg.vocab_size, (2, calib_tokens), generator=g))
    for h in hooks:
        h.remove()
    linears = {}
    for name, peak in peaks.items():
        w = model.get_submodule(name).weight.detach().float()
        bits = torch.randint(3, 9, (w.shape[0],), generator=g, dtype=torch.uint8)
        in_scale = torch.empty(w.shape[1]).uniform_(0.5, 2.0, generator=g)
        codes, w_scale = quantize_per_channel(w / in_scale[None, :], bits)
        act_scale = act_scale_for(peak, in_scale)
        linears[name] = QuantLinear(codes=codes, bits=bits, w_scale=w_scale, in_scale=in_scale, act_scale=act_scale)
    others = {}
    for table in ["model.embed_tokens"] + ([] if cfg.tie_word_embeddings and not head_in_budget else ["lm_head"]):
        w = model.get_submodule(table).weight.detach().float()
        rows = w.shape[0]
        bits = torch.randint(3, 9, (rows,), generator=g, dtype=torch.uint8) if table == "lm_head" and head_in_budget \
            else torch.full((rows,), 8, dtype=torch.uint8)
        codes, scale = quantize_per_channel(w, bits)
        others |= {f"{table}.codes": codes, f"{table}.w_scale": scale, f"{table}.bits": bits}
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            others[name] = p.detach().float().clone()
    config = runtime_config(cfg) | ({"tie_word_embeddings": False} if head_in_budget else {})
    manifest = {"model": {"name": "tiny-random-llama", "config": config},
                "quantizer": {"name": "test-random-bits", "params": {}}, "runtime_compatible": True}
    return Artifact(manifest=manifest, linears=linears, others=others)


@pytest.fixture(scope="module")
def tiny_pair():
    model = tiny_llama()
    return model, make_artifact(model)
