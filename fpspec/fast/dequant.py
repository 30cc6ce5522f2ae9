"""Fast dequantization of block-quantized tensors: the Numba twin of :mod:`fpspec.exact.dequant`
(FPS-BLK-14, FPS-BLK-21).

One kernel serves every profile: each profile's formula is a factor F of the scale code and
a divisor D with value = fp32(q F / D) (:func:`dequant_factors`; docs/scheme-ue5m3.rst,
FPS-BLK-14), tabled for every (scale code, payload code) pair (:func:`dequant_value_table`),
so that the kernel looks values up (:func:`dequantize_blocks`).  The numbered steps are
those of :func:`fpspec.exact.dequant.dequant_value_exact`:

1. F and D of the block's scale code (the profile's formula, :func:`dequant_factors`);
2. q, the payload code's value (its magnitude, then the sign bit);
3. fp32(q F / D): q F is exact in binary64, and the one binary64 quotient rounds to binary32
   as the real quotient does.
"""

from __future__ import annotations

import numba
import numpy as np

from ..errors import FpspecError
from ..formats import get_format
from ..schemes import Dequant
from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the kernels below
from .codes import block_slot, chunk_bounds, chunk_count
from .rounding import decode_table

__all__ = ["dequantize_blocks", "dequant_factors", "dequant_value_table"]


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _dequant_kernel(codes, scales, values, row_bad, nbr, block, tile2d, out, first_bad):
    """out[j] = values[s, q] for each element j of payload code q in a block of scale code s
    (``values``: :func:`dequant_value_table`), and each chunk's first non-finite output,
    looked for only in blocks whose row of the table holds a non-finite value."""
    n = codes.shape[0]
    nblocks = n // block
    nch = chunk_count(nblocks)
    for c in numba.prange(nch):
        bad = -1
        b0, b1 = chunk_bounds(c, nblocks)
        for bn in range(b0, b1):
            s = scales[block_slot(bn, nbr, block, tile2d)]
            row = values[s]
            for j in range(bn * block, (bn + 1) * block):
                out[j] = row[codes[j]]
            if row_bad[s] and bad < 0:
                for j in range(bn * block, (bn + 1) * block):
                    if not np.isfinite(out[j]):
                        bad = j
                        break
        first_bad[c] = bad


def dequant_factors(formula: Dequant, scales: np.ndarray, scale_format, amax: float, target, decode_scale
                    ) -> tuple[np.ndarray, float]:
    """Per-block factor F and divisor D of a profile's dequantization, value = fp32(q F / D):

    * exact: F = s g, D = 6T (F = s, D = 1 when g = 0): q s g / (6T) rounded once;
    * seed-kernel: F = s gd, D = 1: fp32(fp32(q s) gd), q s being exact in binary32;
    * seed-portable: F = fp32(s gd), D = 1;
    * te: F = fp32(fp32(s g) fp32(1/(6T))), D = 1;
    * torchao: F = fp32(gd s), D = 1;
    * mx: F = 2^(c - 127), D = 1.
    """
    table = decode_table(scale_format)
    s = table[scales.reshape(-1)]  # uint8 indices: no index copy
    f32 = np.float32
    with np.errstate(over="ignore", invalid="ignore"):
        if formula is Dequant.MX:
            return s, 1.0
        six_t = 6.0 * float(target)
        g = float(amax)
        if formula is Dequant.EXACT:
            return (s * g, six_t) if g > 0 else (s, 1.0)
        s32 = s.astype(np.float32)
        if formula is Dequant.SEED_KERNEL:
            return s32.astype(np.float64) * float(decode_scale), 1.0
        if formula is Dequant.TE:
            inv = f32(1.0) / f32(six_t)
            return ((s32 * f32(g)) * inv).astype(np.float64), 1.0
        if formula in (Dequant.TORCHAO, Dequant.SEED_PORTABLE):
            return (f32(decode_scale) * s32).astype(np.float64), 1.0
    raise FpspecError(f"no dequantization formula {formula!r}")


def dequant_value_table(formula: Dequant, scale_format, payload_format: str, amax: float, target,
                        decode_scale) -> tuple[np.ndarray, np.ndarray]:
    """fp32((q F) / D) for every pair (scale code, payload code), a (scale codes x payload
    codes) binary32 table (FPS-BLK-14): F of each scale code from :func:`dequant_factors`,
    q the payload code's value.  q F is exact in binary64 and the one binary64 quotient
    rounds to binary32 as the real quotient does (docs/scheme-ue5m3.rst, "The fast path");
    NumPy's binary64 operations are IEEE operations, so every entry is the element-wise
    formula's value, and dequantizing a block is a row look-up.  Also, per scale code, whether
    its row holds a non-finite value for a finite payload code (the payload's NaN and Inf
    codes are refused before dequantization)."""
    codes = np.arange(get_format(scale_format).num_codes, dtype=np.uint8)
    factors, divisor = dequant_factors(formula, codes, scale_format, amax, target, decode_scale)
    mags, sign_mask = _magnitudes(payload_format)
    q = np.arange(2 * sign_mask)
    mag_q = mags[q & (sign_mask - 1)]
    with np.errstate(over="ignore", invalid="ignore"):
        v = ((mag_q[None, :] * np.asarray(factors, dtype=np.float64)[:, None]) / float(divisor)).astype(np.float32)
    values = np.ascontiguousarray(np.where((q & sign_mask) != 0, -v, v))
    return values, ~np.isfinite(values[:, np.isfinite(mag_q)]).all(axis=1)


def _magnitudes(payload_format: str) -> tuple[np.ndarray, int]:
    """The magnitude of each payload code below the sign bit (E2M1: 0, 0.5, ..., 6), and the sign bit."""
    fmt = get_format(payload_format)
    with np.errstate(invalid="ignore"):
        mags = np.abs(decode_table(fmt)[:fmt.sign_mask]).astype(np.float64)
    return mags, fmt.sign_mask


def dequantize_blocks(codes: np.ndarray, scales: np.ndarray, table: tuple[np.ndarray, np.ndarray], block: int,
                      tile: str) -> tuple[np.ndarray, int]:
    """float32 values of (M, K) payload codes (E2M1, or the FP8 codes of mxfp8) under the
    blocks' scale codes and the table of every pair's value (:func:`dequant_value_table`);
    and the flat index of the first non-finite value (-1 when all are finite)."""
    values, row_bad = table
    m, k = codes.shape
    flat = np.ascontiguousarray(codes).reshape(-1)
    out = np.empty(m * k, dtype=np.float32)
    nblocks = flat.shape[0] // block
    first_bad = np.empty(max(1, chunk_count(nblocks)), dtype=np.int64)
    first_bad[:] = -1
    _dequant_kernel(flat, np.ascontiguousarray(scales, dtype=np.uint8).reshape(-1), values, row_bad, k // block,
                    block, tile == "BxB", out, first_bad)
    bad = first_bad[first_bad >= 0]
    return out.reshape(m, k), int(bad.min()) if bad.size else -1
