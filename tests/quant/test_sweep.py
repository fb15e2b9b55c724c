import math

import torch

from harness.artifact import load_artifact
from harness.quant.sweep import calibration_sequences, perplexity_sweep


def test_sweep_rows(model, tmp_path):
    stream = torch.randint(0, 256, (400,), generator=torch.Generator().manual_seed(2))
    calib = calibration_sequences(stream, num_sequences=3, seq_len=32)
    assert len(calib) == 3 and all(len(c) == 32 for c in calib)
    pairs = [({"name": "edgeflow", "alpha_grid": [0.5]}, 4.5), ({"name": "uniform", "alpha_grid": [0.5]}, 8),
             ("uniform", 4.5)]
    seen = []
    rows = perplexity_sweep(model, "tiny", pairs, calib, stream, window=100, max_windows=2, artifact_root=tmp_path,
                            on_row=seen.append)
    assert seen == rows
    assert [(r["quantizer"], r["bits"]) for r in rows] == [("fp", 16.0), ("edgeflow", 4.5), ("uniform", 8.0),
                                                           ("uniform", 4.5)]
    fp, ef, int8, bad = rows
    assert all(r["protocol"] == fp["protocol"] and r["windows"] == 2 for r in rows[:3])
    assert abs(int8["value"] - fp["value"]) < abs(ef["value"] - fp["value"]) + 0.05 * fp["value"]
    assert ef["effective_bits"] > 4.5 and ef["runtime_compatible"] is True
    assert math.isnan(bad["value"]) and "must be an integer" in bad["error"]  # recorded, the sweep went on
    assert load_artifact(tmp_path / "tiny-edgeflow-4.5").manifest["quantizer"]["params"]["budget_bits"] == 4.5
