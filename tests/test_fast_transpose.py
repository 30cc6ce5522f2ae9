"""The fast paths' cache-blocked transpose (columnwise views): the same values as NumPy's."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.fast.transpose import TRANSPOSE_TILE, transpose_fast


@pytest.mark.parametrize("shape", [(64, 64), (65, 64), (64, 129), (1, 5000), (5000, 1), (200, 333), (130, 4096)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transpose_equals_numpy(shape, dtype):
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    x.flat[::7] = -0.0
    got = transpose_fast(x)
    assert got.shape == (shape[1], shape[0]) and got.dtype == dtype and got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(x.T).view(np.uint8))  # bits, -0.0 kept


def test_transpose_of_a_strided_view_and_of_other_dtypes():
    x = np.arange(300 * 400, dtype=np.float64).reshape(300, 400)
    view = x[::2, 1::3]  # not contiguous
    assert np.array_equal(transpose_fast(view), view.T)
    codes = np.arange(256 * 256, dtype=np.uint32).reshape(256, 256)
    assert np.array_equal(transpose_fast(codes), codes.T)  # NumPy's copy
    small = np.ones((TRANSPOSE_TILE - 1, TRANSPOSE_TILE), np.float32)
    assert transpose_fast(small).shape == (TRANSPOSE_TILE, TRANSPOSE_TILE - 1)
