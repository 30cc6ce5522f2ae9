"""Step 0 of block quantization, fast: the input scan (FPS-BLK-1).

One parallel pass over the flat input gives max |x| (the tensor amax g of current scaling),
the first value block quantization cannot take (NaN, +-inf, or a binary64 magnitude whose
binary32 rounding is infinite), and, for binary32 input, max |x| of every block
(:class:`ScanResult`), which the block kernels of :mod:`fpspec.fast.blocks` then read
instead of measuring them again.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the kernels below
from .codes import chunk_bounds, chunk_count

__all__ = ["scan_values", "ScanResult", "BINARY32_OVERFLOW"]

from ..input_check import BINARY32_OVERFLOW, FLOAT_INPUT_DTYPES, not_a_float_input, not_a_matrix, refused_input


class ScanResult(NamedTuple):
    """max |x| (NaN when there is a NaN), the first bad flat index or -1, and why it is bad;
    with a block length, max |x| of every block too (binary32, exact; None when the scan
    found a bad value or measured no blocks)."""

    amax: float
    bad: int
    why: str
    block_amax: np.ndarray | None = None


@numba.njit(cache=True, nogil=True, inline="always")
def _max4(a0, a1, a2, a3):
    b0 = a0 if a0 > a1 else a1
    b1 = a2 if a2 > a3 else a3
    return b0 if b0 > b1 else b1


@numba.njit(cache=True, parallel=True)
def _absmax16_bits32(bits, out):
    """out[s] = max over the 16 values 16s .. 16s + 15 of bits & 0x7FFFFFFF: max |x| of every run
    of 16 binary32 values given as bits (>= 0x7F800000: a NaN or an Inf).  The integer order of
    those bits is the order of the magnitudes, and a maximum is exact in any order, so it is
    taken in two passes of maxima of four: every quarter run, then every four quarters.  LLVM
    vectorizes a loop whose body reads four consecutive values (an interleaved group, in 32-bit
    lanes); a run of 16 written out in one body is unrolled into scalar code, since Numba runs
    LLVM without its SLP vectorizer (the single pass took 1.8 times as long)."""
    n = out.shape[0]
    mask = np.uint32(0x7FFFFFFF)
    for c in numba.prange(chunk_count(n)):
        s0, s1 = chunk_bounds(c, n)
        seg = bits[s0 * 16:s1 * 16]
        quarter = np.empty((s1 - s0) * 4, dtype=np.uint32)
        for q in range(quarter.shape[0]):
            quarter[q] = _max4(seg[4 * q] & mask, seg[4 * q + 1] & mask, seg[4 * q + 2] & mask, seg[4 * q + 3] & mask)
        dst = out[s0:s1]
        for r in range(s1 - s0):
            dst[r] = _max4(quarter[4 * r], quarter[4 * r + 1], quarter[4 * r + 2], quarter[4 * r + 3])


@numba.njit(cache=True, parallel=True)
def _absmax_bits32(bits):
    """max over i of (bits[i] & 0x7FFFFFFF): the binary32 |x| max as bits (>= 0x7F800000: non-finite)."""
    n = bits.shape[0]
    chunk = 1 << 16
    nch = (n + chunk - 1) // chunk
    part = np.zeros(max(nch, 1), dtype=np.uint32)
    for c in numba.prange(nch):
        seg = bits[c * chunk:min(n, (c + 1) * chunk)]
        m = np.uint32(0)
        for i in range(seg.shape[0]):  # branch-free over a slice: LLVM vectorizes it
            v = seg[i] & np.uint32(0x7FFFFFFF)
            m = v if v > m else m
        part[c] = m
    return part.max()


@numba.njit(cache=True, parallel=True)
def _absmax_f64(x):
    """max |x| of a binary64 array; NaN when it holds a NaN (a NaN, once taken, stays)."""
    n = x.shape[0]
    chunk = 1 << 16
    nch = (n + chunk - 1) // chunk
    part = np.zeros(max(nch, 1))
    for c in numba.prange(nch):
        seg = x[c * chunk:min(n, (c + 1) * chunk)]
        m = 0.0
        for i in range(seg.shape[0]):
            v = abs(seg[i])
            m = v if (v > m or v != v) else m
        part[c] = m
    r = 0.0
    for c in range(part.shape[0]):
        r = part[c] if (part[c] > r or part[c] != part[c]) else r
    return r


def scan_values(flat: np.ndarray, block: int = 0) -> ScanResult:
    """max |x| of a flat binary32 or binary64 array in one parallel pass, and the first value
    block quantization cannot take: NaN, +-inf, or (binary64) a magnitude whose binary32
    rounding is infinite (FPS-BLK-1).

    ``block`` (16 or 32, dividing the size): for binary32 values, the same pass also gives
    max |x| of every run of ``block`` consecutive values (``block_amax``), and max |x| is
    their maximum (a maximum is exact in any order)."""
    if flat.size == 0:
        return ScanResult(0.0, -1, "")
    if flat.dtype == np.float32 and block in (16, 32) and flat.size % block == 0:
        runs = np.empty(flat.size // 16, dtype=np.uint32)
        _absmax16_bits32(flat.view(np.uint32), runs)
        if block == 32:
            runs = np.maximum(runs[0::2], runs[1::2])
        top = runs.max()  # the bits of the largest magnitude
        if top < 0x7F800000:
            return ScanResult(float(top.view(np.float32)), -1, "", runs.view(np.float32))
        return ScanResult(float("nan"), int(np.flatnonzero(~np.isfinite(flat))[0]), "non-finite")
    if flat.dtype == np.float32:
        m = np.uint32(_absmax_bits32(flat.view(np.uint32)))
        if m < 0x7F800000:
            return ScanResult(float(np.array([m], np.uint32).view(np.float32)[0]), -1, "")
        return ScanResult(float("nan"), int(np.flatnonzero(~np.isfinite(flat))[0]), "non-finite")
    a = float(_absmax_f64(flat))
    if a < BINARY32_OVERFLOW:
        return ScanResult(a, -1, "")
    finite = np.isfinite(flat)
    if not finite.all():
        return ScanResult(a, int(np.flatnonzero(~finite)[0]), "non-finite")
    return ScanResult(a, int(np.flatnonzero(np.abs(flat) >= BINARY32_OVERFLOW)[0]), "binary32-range")


def scan_input(x: object, block: int = 0) -> tuple[np.ndarray, np.float32, np.ndarray | None]:
    """Step 0's check of a numpy input (FPS-BLK-1): the input as a 2-D binary32/binary64 array
    (fp16/bf16 widened exactly, leading dimensions flattened to M), fp32(max |x|), and (``block`` >
    0, binary32 input, rows of whole blocks) max |x| of every run of ``block`` values along the last
    axis; refuses NaN, Inf and values beyond binary32, naming the first
    (:func:`fpspec.input_check.refused_input`)."""
    x = np.asarray(x)
    if x.dtype.name not in FLOAT_INPUT_DTYPES:
        raise not_a_float_input(x.dtype)
    if x.ndim < 2:
        raise not_a_matrix(x.shape)
    if x.dtype.name in ("float16", "bfloat16"):
        x = x.astype(np.float32)  # exact widening
    shape = x.shape
    flat = np.ascontiguousarray(x).reshape(-1)
    whole = block > 0 and shape[-1] % block == 0
    scan = scan_values(flat, block if whole else 0)
    if scan.bad >= 0:
        idx = tuple(int(i) for i in np.unravel_index(scan.bad, shape))
        raise refused_input(scan.why, float(flat[scan.bad]), idx)
    x2 = flat.reshape(shape)
    if x2.ndim > 2:
        x2 = x2.reshape(-1, shape[-1])
    return x2, np.float32(scan.amax), scan.block_amax
