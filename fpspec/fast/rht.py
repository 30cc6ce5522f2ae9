"""The 16-point random Hadamard transform and its bfloat16 rounding, fast: the twins of
:func:`fpspec.exact.blocks.rht16_exact` and :func:`fpspec.exact.blocks.round_bf16_exact`
(FPS-BLK-10, FPS-BLK-20).
"""

from __future__ import annotations

import numba
import numpy as np

from ..errors import FpspecError
from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the kernels below
from .codes import chunk_bounds, chunk_count

__all__ = ["rht16_fast", "round_bf16_fast"]


# ---------------------------------------------------------- Hadamard transform
def _rht_weights() -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    signs = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)
    return np.ascontiguousarray(signs[:, None] * h * 0.25)


_RHT_W = _rht_weights()


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _rht16_kernel(x, w, out, first_bad):
    """Each group of 16: y_j = a_15, a_i = fp32(a_(i-1) + x_i w_ij) (FPS-BLK-10).

    binary64 emulates each fused step exactly: x w is exact in binary64, and when a + x w
    is not exact in binary64 the exponent gap exceeds 29 bits, so both roundings return the
    larger addend (docs/scheme-nvfp4.rst)."""
    ngroups = x.shape[0] // 16
    nch = chunk_count(ngroups)
    for c in numba.prange(nch):
        bad = -1
        g0, g1 = chunk_bounds(c, ngroups)
        for gi in range(g0, g1):
            base = gi * 16
            for j in range(16):
                acc = np.float32(np.float64(x[base]) * w[0, j])
                for i in range(1, 16):
                    acc = np.float32(np.float64(acc) + np.float64(x[base + i]) * w[i, j])
                out[base + j] = acc
                if bad < 0 and not np.isfinite(acc):
                    bad = base + j
        first_bad[c] = bad


def rht16_fast(x: np.ndarray) -> np.ndarray:
    """Fast twin of :func:`fpspec.exact.blocks.rht16_exact`: the same binary32 steps."""
    m, k = x.shape
    if k % 16:
        raise FpspecError(f"the Hadamard transform needs the last dimension {k} to be a multiple of 16")
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    out = np.empty_like(flat)
    first_bad = np.full(max(1, chunk_count(flat.size // 16)), -1, dtype=np.int64)
    _rht16_kernel(flat, _RHT_W, out, first_bad)
    bad = first_bad[first_bad >= 0]
    if bad.size:
        i = int(bad.min())
        raise FpspecError("the Hadamard transform of the view overflows binary32 (FPS-BLK-10)", (i // k, i % k))
    return out.reshape(m, k)


def round_bf16_fast(v: np.ndarray) -> np.ndarray:
    """Fast twin of :func:`fpspec.exact.blocks.round_bf16_exact`: RNE to bfloat16 on the bits."""
    bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
    r = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    out = r.view(np.float32)
    if not np.isfinite(out).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(out))[0])
        raise FpspecError(f"the transformed value {float(v[idx])!r} rounds beyond bfloat16's largest finite "
                          f"value {float.fromhex('0x1.fep127')!r} (FPS-BLK-20)", idx)
    return out
