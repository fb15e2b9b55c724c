"""ResultSpool: per-linear results on disk between the A16 pass and the main pass (harness/quant/spool.py)."""
import tempfile

import pytest
import torch

from harness.artifact import QuantLinear
from harness.quant import make_quantizer
from harness.quant.base import LayerResult
from harness.quant.spool import ResultSpool
from harness.safetensors_io import TensorDict


def _result(value: float) -> LayerResult:
    linear = QuantLinear(codes=torch.full((2, 3), 1, dtype=torch.int8), bits=torch.full((2,), 4, dtype=torch.uint8),
                         w_scale=torch.full((2,), value), in_scale=torch.ones(3), act_scale=torch.tensor(0.5))
    return LayerResult(linear, {}, {"alpha": value})


def test_a_result_is_taken_once_at_the_width_asked_and_the_folder_goes_with_the_spool(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    shared = _result(0.5)
    with ResultSpool([LayerResult, QuantLinear]) as spool:
        spool.put("layers.0.q_proj", {8: _result(0.0), 16: _result(1.0)})
        spool.put("layers.0.k_proj", {8: shared, 16: shared})
        assert spool.take("layers.0.q_proj", 16).info == {"alpha": 1.0}
        assert spool.take("layers.0.q_proj", 8) is None  # taken: its file is gone
        k = spool.take("layers.0.k_proj", 8)
        assert torch.equal(k.linear.w_scale, shared.linear.w_scale) and k.info == {"alpha": 0.5}
        assert spool.take("layers.0.v_proj", 8) is None  # never put
        spool.put("layers.0.o_proj", {8: shared})
    assert list(tmp_path.iterdir()) == []


def test_a_quantization_stopped_half_way_leaves_no_spool_behind(model, calibration, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    q = make_quantizer({"name": "edgeflow", "budget_bits": 6, "alpha_grid": [0.5], "a16_budget": 0.5})
    q.calibrate(model, calibration)
    tensors = q.quantized_tensors(TensorDict(dict(model.named_parameters())), model.config, "tiny", {})
    next(tensors)  # the A16 pass ran over every linear, the main pass wrote the first tensor
    assert len(list(tmp_path.iterdir())) == 1 and len(list(next(tmp_path.iterdir()).iterdir())) > 1
    tensors.close()
    assert list(tmp_path.iterdir()) == []


def test_a_result_of_a_class_not_allowed_is_refused_when_read(tmp_path, monkeypatch):
    """The files are read by torch's weights-only unpickler: only the classes the spool was given come back."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with ResultSpool([QuantLinear]) as spool:
        spool.put("x", {8: _result(0.0)})  # a LayerResult, not among the allowed
        with pytest.raises(Exception, match="weights_only|Unsupported global"):
            spool.take("x", 8)


def test_a_spool_folder_removed_under_a_quantization_is_named(tmp_path, monkeypatch):
    import shutil

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match="spool folder .* was removed while it quantized"):
        with ResultSpool([LayerResult, QuantLinear]) as spool:
            shutil.rmtree(next(tmp_path.iterdir()))
            spool.put("x", {8: _result(0.0)})  # the error comes out of the `with` as it is
