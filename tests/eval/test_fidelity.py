"""fidelity(): KL and top-1 of a model against the FP model per window; fidelity_of_each() runs the FP model once per
window for several models and gives each exactly what fidelity() gives it alone."""
import pytest
import torch

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
