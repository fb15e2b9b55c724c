import math

import pytest
import torch
import torch.nn.functional as F

from harness.eval.perplexity import perplexity
from tests.tiny_llama import tiny_llama


class Uniform(torch.nn.Module):
    """Predicts every token with probability 1/V: perplexity must be exactly V."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, input_ids):
        return type("Out", (), {"logits": torch.zeros(*input_ids.shape, self.vocab)})()


def test_uniform_model_has_perplexity_vocab():
    r = perplexity(Uniform(50), torch.randint(0, 50, (1000,)), window=100)
    assert r["ppl"] == pytest.approx(50) and r["windows"] == 10 and r["tokens"] == 1000
    assert "100-token windows" in r["protocol"]


def test_matches_the_gptq_loop_on_a_tiny_llama():
    model = tiny_llama()
    ids = torch.randint(0, 256, (333,), generator=torch.Generator().manual_seed(0))
    r = perplexity(model, ids, window=64, max_windows=3)
    assert r["windows"] == 3 and r["tokens"] == 192
    nlls = []
    with torch.no_grad():  # GPTQ's eval: loss of each window * window length, summed, / (windows * window)
        for i in range(3):
            w = ids[i * 64:(i + 1) * 64][None]
            nlls.append(F.cross_entropy(model(w).logits[0, :-1], w[0, 1:]) * 64)
    assert r["ppl"] == pytest.approx(math.exp(float(torch.stack(nlls).sum() / (3 * 64))), rel=1e-5)
    assert perplexity(model, ids, window=64)["windows"] == 5  # the 13-token remainder is dropped


def test_bad_input():
    model = tiny_llama()
    with pytest.raises(ValueError, match="fewer than one window"):
        perplexity(model, torch.arange(10), window=64)
    with pytest.raises(ValueError, match="1-D integer"):
        perplexity(model, torch.zeros(2, 100, dtype=torch.long), window=64)
    with pytest.raises(ValueError, match="vocabulary"):
        perplexity(model, torch.full((100,), 999), window=64)
    with pytest.raises(ValueError, match="max_windows"):
        perplexity(model, torch.arange(100), window=64, max_windows=0)
