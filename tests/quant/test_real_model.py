"""The default model end to end: quantize, fake-quant, perplexity and lm-eval's HFLM on the result."""
import math

import pytest
import torch

from harness.eval.perplexity import perplexity
from harness.quant import make_quantizer
from harness.quant.fakequant import build_fakequant_model

pytestmark = pytest.mark.real_model

TEXT = ("It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of "
        "foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it "
        "was the season of Darkness, it was the spring of hope, it was the winter of despair. ") * 4


@pytest.fixture(scope="module")
def fp_and_tokens(default_model_spec):
    from harness.models.zoo import load_model

    model, tokenizer = load_model(default_model_spec)
    return model, tokenizer, torch.tensor(tokenizer(TEXT)["input_ids"])


def test_edgeflow_5_bits_on_the_default_model(fp_and_tokens):
    model, tokenizer, ids = fp_and_tokens
    q = make_quantizer({"name": "edgeflow", "budget_bits": 5, "alpha_grid": [0.0, 0.5, 1.0]})
    q.calibrate(model, [ids[i * 64:(i + 1) * 64] for i in range(4)])
    art = q.quantize(model, "smollm2-135m")
    assert len(art.linears) == 7 * 30 and art.manifest["model"]["config"]["num_key_value_heads"] == 3
    assert 5.0 < art.manifest["effective_bits_per_weight"] < 5.3
    fq = build_fakequant_model(art, model)
    fp_ppl = perplexity(model, ids, window=128)["ppl"]
    q_ppl = perplexity(fq, ids, window=128)["ppl"]
    float_ppl = perplexity(build_fakequant_model(art, model, numerics="cpu-float"), ids, window=128)["ppl"]
    # Float outputs (what no NPU computes) within 1.5x of FP16; the NPU's 8-bit output grids cost more (measured
    # 1.59x on this text, 2026-12-07): what the paper's 8-bit recipe costs on an NPU
    assert math.isfinite(float_ppl) and float_ppl < 1.5 * fp_ppl
    assert math.isfinite(q_ppl) and float_ppl < q_ppl < 2.5 * fp_ppl

    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=fq, tokenizer=tokenizer, batch_size=1)
    req = Instance("loglikelihood", {}, ("It was the best of times, it was the", " worst"), 0)
    (logprob, _greedy), = lm.loglikelihood([req])
    assert math.isfinite(logprob) and logprob < 0
