"""fidelity(): KL and top-1 of a model against the FP model per window; fidelity_of_each() runs the FP model once per
window for several models and gives each exactly what fidelity() gives it alone."""
import pytest
import torch

from harness.eval import fidelity as fidelity_module
from harness.eval.fidelity import fidelity, fidelity_of_each


class Counted:
    def __init__(self, model):
        self.model, self.calls = model, 0

    def __call__(self, input_ids):
        self.calls += 1
        return self.model(input_ids=input_ids)


class Perturbed:
    """The model's logits plus seeded noise: a stand-in for a quantized model that differs from the FP one."""

    def __init__(self, model, scale: float):
        self.model, self.scale = model, scale

    def __call__(self, input_ids):
        out = self.model(input_ids=input_ids)
        noise = torch.randn(out.logits.shape, generator=torch.Generator().manual_seed(int(input_ids[0, 0])))
        out.logits = out.logits + self.scale * noise
        return out


def test_each_model_gets_what_it_gets_alone_from_one_fp_pass_per_window(tiny_model):
    ids = torch.randint(0, tiny_model.config.vocab_size, (400,), generator=torch.Generator().manual_seed(0))
    models = {"same": tiny_model, "small": Perturbed(tiny_model, 0.1), "large": Perturbed(tiny_model, 3.0)}
    fp = Counted(tiny_model)
    each = fidelity_of_each(fp, models, ids, window=32, windows=4)
    assert fp.calls == 4  # once per window, not once per window and model
    for name, model in models.items():
        assert each[name] == fidelity(tiny_model, model, ids, window=32, windows=4), name
    assert each["same"]["kl"] == pytest.approx([0.0] * 4, abs=1e-6) and each["same"]["top1"] == [1.0] * 4
    assert min(each["large"]["kl"]) > max(each["small"]["kl"]) > 0


def test_a_stream_too_short_for_its_windows_is_named(tiny_model):
    with pytest.raises(ValueError, match="room for 3 windows of 32, not 4"):
        fidelity_of_each(tiny_model, {"q": tiny_model}, torch.zeros(100, dtype=torch.long), window=32, windows=4)


def _stream(model, n=400, seed=0):
    return torch.randint(0, model.config.vocab_size, (n,), generator=torch.Generator().manual_seed(seed))


def test_a_named_reference_is_computed_once_per_model_and_windows_in_a_process(tiny_model):
    ids, q = _stream(tiny_model), Perturbed(tiny_model, 0.5)
    fp = Counted(tiny_model)
    first = fidelity(fp, q, ids, window=32, windows=4, reference="tiny-reuse")
    again = fidelity(fp, q, ids, window=32, windows=4, reference="tiny-reuse")
    assert fp.calls == 4  # the second run reused the first's FP pass
    assert first["reference"] == "FP pass computed" and again["reference"].startswith("FP pass reused")
    assert (again["kl"], again["top1"]) == (first["kl"], first["top1"])  # to the bit
    assert again["kl"] == fidelity(tiny_model, q, ids, window=32, windows=4)["kl"]  # and what no cache gives

    fidelity(fp, q, ids, window=32, windows=2, reference="tiny-reuse")  # other windows: computed anew
    fidelity(fp, q, _stream(tiny_model, seed=1), window=32, windows=2, reference="tiny-reuse")  # other text
    fidelity(fp, q, _stream(tiny_model, seed=1), window=32, windows=2, reference="another model")
    assert fp.calls == 4 + 2 + 2 + 2
    fidelity(fp, q, ids, window=32, windows=4)  # unnamed: never reused
    assert fp.calls == 14


def test_a_reference_too_big_to_keep_is_recomputed(tiny_model, monkeypatch):
    ids, fp = _stream(tiny_model), Counted(tiny_model)
    window_bytes = 32 * tiny_model.config.vocab_size * 4  # one window's float32 log-probabilities
    monkeypatch.setattr(fidelity_module._REFERENCES, "max_bytes", 3 * window_bytes)
    for _ in range(2):
        result = fidelity(fp, tiny_model, ids, window=32, windows=4, reference="tiny-too-big")
    assert fp.calls == 8 and result["reference"] == "FP pass computed"
    assert fidelity_module._REFERENCES.log_probs is None  # nothing of it held
