"""What a figure shows, read off its PNG as a reader sees it: how much of the picture is drawn in a colour (a bar's
fill, a line). A test that only checks a file's size passes on a blank canvas; this one fails when a system's bars
are missing or drawn in another system's colour."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def colour_share(png: Path, hex_colour: str, tolerance: int = 3) -> float:
    """The share of the picture's pixels within `tolerance` (of 255, per channel) of `hex_colour` ("#8c564b")."""
    from matplotlib.image import imread

    rgb = np.round(imread(png)[..., :3] * 255)  # [H, W, 3], floats 0..255
    want = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)])
    return float((np.abs(rgb - want) <= tolerance).all(axis=-1).mean())


def drawn_in(png: Path, hex_colour: str, at_least: float = 5e-4) -> bool:
    """Whether the picture has a visible area (by default 0.05% of its pixels, ~1,000 of a 2,000 x 600 figure) in
    `hex_colour`: a bar or a thick line, not an antialiased edge."""
    return colour_share(png, hex_colour) >= at_least
