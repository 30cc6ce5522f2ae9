"""Shared test fixtures: exhaustive input domains."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest


@pytest.fixture(scope="session")
def all_fp16() -> np.ndarray:
    """Every FP16 bit pattern as float16 (NaNs included)."""
    return np.arange(1 << 16, dtype=np.uint16).view(np.float16)


@pytest.fixture(scope="session")
def all_bf16() -> np.ndarray:
    """Every BF16 bit pattern as ml_dtypes.bfloat16 (NaNs included)."""
    return np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
