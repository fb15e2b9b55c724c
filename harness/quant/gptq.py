"""Error-compensating weight rounding (GPTQ; Frantar et al., 2023) on a quantizer's own grids.

Rounding each weight to its nearest level (what the paper's EdgeFlow does) minimises every weight's own error;
what matters is the layer's output error on real inputs. For one output channel w [D] with codes q and signed scale
s, the error on calibration inputs X [T, D] is
    || X (w - s q) ||^2 = (w - s q)^T H (w - s q),      H = X^T X  [D, D] (calibrate.LinearStats.gram)
GPTQ rounds the input columns one at a time and moves each column's rounding error onto the columns not yet
rounded, along H's inverse, so that they absorb it. Rows are independent of each other, so every channel keeps the
grid the method chose for it (its bit-width and scale): the codes are drop-in, and the packers and the runtime run
them unchanged. Columns go in order of decreasing H[k, k] (the most active inputs first, GPTQ's "act order"), in
blocks of BLOCK whose updates to later columns are applied as one matmul.

H is damped by `damp` times its mean diagonal (it is singular when calibration tokens are fewer than D, and a dead
input channel has H[k, k] = 0; such a channel's weights are rounded to zero). The damping also decides how far the
rounding trusts the calibration text's input correlations. GPTQ's usual 0.01 fits them closely and does not
transfer to text unlike the calibration corpus; 1.0 (quantizer.gptq_damp's default) does. EdgeFlow at 7 bits on the
default model, weights only, KL against FP16 over 4 x 512 tokens, held-out corpus text / out-of-domain English
(python-docs): nearest rounding 0.0209 / 0.0255; damp 0.01: 0.0146 / 0.0393; 0.1: 0.0129 / 0.0294; 1.0: 0.0147 /
0.0253.
"""
from __future__ import annotations

import torch

from harness.quant.numerics import code_range

BLOCK = 128


def gptq_codes(weight: torch.Tensor, bits: torch.Tensor, scale: torch.Tensor, gram: torch.Tensor,
               damp: float = 1.0) -> torch.Tensor:
    """int8 [C, D] codes of weight [C, D] on per-row grids (bits [C], signed scale [C]) that minimise each row's
    output error on inputs with Gram matrix gram [D, D] (float, sum or mean of x x^T), column by column."""
    c, d = weight.shape
    if gram.shape != (d, d):
        raise ValueError(f"gram is {tuple(gram.shape)}, the weight has {d} input channels")
    h = gram.double().clone()
    dead = torch.diagonal(h) <= 0
    h[dead, dead] = 1.0
    h += damp * float(torch.diagonal(h).mean()) * torch.eye(d, dtype=h.dtype)
    order = torch.argsort(torch.diagonal(h), descending=True)
    h = h[order][:, order]
    w = weight.float()[:, order].clone()
    w[:, dead[order]] = 0.0
    # U: upper Cholesky factor of H^-1 (float64 to factor, float32 to use); row j holds how column j's error
    # spreads onto the columns after j, divided by U[j, j]
    u = torch.linalg.cholesky(torch.linalg.inv(h), upper=True).float()
    lo, hi = (b.float()[:, None] for b in code_range(bits))
    step = scale.float()[:, None]  # [C, 1]
    codes = torch.empty_like(w)
    for a in range(0, d, BLOCK):
        b = min(a + BLOCK, d)
        block, errors = w[:, a:b].clone(), torch.empty(c, b - a, dtype=w.dtype)
        for j in range(b - a):
            q = torch.clamp(torch.round(block[:, j:j + 1] / step), lo, hi)  # [C, 1], round half to even
            codes[:, a + j:a + j + 1] = q
            err = (block[:, j:j + 1] - q * step) / u[a + j, a + j]
            block[:, j + 1:] -= err * u[a + j, a + j + 1:b][None, :]
            errors[:, j:j + 1] = err
        w[:, b:] -= errors @ u[a:b, b:]
    out = torch.empty_like(codes)
    out[:, order] = codes
    return out.to(torch.int8)
