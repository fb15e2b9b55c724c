"""Fixtures of the quantizer tests: a tiny random Llama and calibration token sequences."""
import pytest
import torch

from tests.tiny_llama import tiny_llama


@pytest.fixture
def model():
    return tiny_llama()


@pytest.fixture
def calibration():
    gen = torch.Generator().manual_seed(1)
    return [torch.randint(0, 256, (32,), generator=gen) for _ in range(4)]
