"""Fast block quantization: the fused Numba twin of :mod:`fpspec.exact.blocks` (FPS-BLK-*).

One pass per block: block amax, scale code, multiplier, payload codes and the
dequantized values, parallel over blocks.  Bit-equal to the exact reference by
test (tests/test_blocks_equality.py).  Why each step is exact
(docs/scheme-ue5m3.rst, "The fast path"):

* ``exact`` profiles work in binary64 on binary32 inputs.  The block scale
  a_B T / g is one binary64 division of an exact product (a_B T has at most 48
  significant bits) by g; a UE5M3/UE4M3 midpoint (5 significant bits) times g
  has at most 29 bits, so a quotient that is not a midpoint is at least 2^-48
  (relative) away from it, far more than the 2^-53 binary64 rounding error:
  rounding the binary64 quotient gives the same code as rounding the real one.
* The payload decision compares |x| 6T (exact, <= 50 bits) with t (g s)
  (exact, <= 31 bits) for each E2M1 decision point t: no rounding at all.
  Stochastic modes need delta: the binary64 quotient x 6T / (g s) lies on the
  same side of every threshold lo + step k / 2^(N+1) (<= 11 + 28 bits times the
  divisor) for the same reason.
* ``fp32`` profiles perform the same binary32 operations as the spec, in the
  same order; Numba's binary32 ``*`` and ``/`` are IEEE correctly rounded
  (no fast-math, no contraction), and ``error_model="numpy"`` gives 1/0 = inf.
* ``mx`` profiles take exponents from the bits; x / 2^e is exact in binary64.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from ..choices import RoundingMode
from ..errors import FpspecError
from ..formats import get_format
from ..schemes import AmaxZero, Arithmetic, BlockSpec, MxScaleMode, SignedZero
from .rounding import decode_table

__all__ = ["quantize_view_fast", "block_amax_grid_fast", "rht16_fast", "absmax_float32"]

_MODE_IDS = {m: i for i, m in enumerate(RoundingMode)}
_RNE, _RTZ, _RNA, _UP, _DOWN, _SRM, _SRA, _SRU = (_MODE_IDS[RoundingMode(v)] for v in (
    "rne", "rtz", "rna", "up", "down", "sr-midpoint", "sr-add", "sr-unbiased"))
_MX_IDS = {MxScaleMode.FLOOR: 0, MxScaleMode.CEIL: 1, MxScaleMode.EVEN: 2, MxScaleMode.RCEIL: 3}
_KIND = {Arithmetic.EXACT: 0, Arithmetic.FP32: 1, Arithmetic.MX: 2, Arithmetic.TORCHAO: 3}

_FLT_MAX32 = np.float32(np.finfo(np.float32).max)

#: E2M1 decision points between neighbouring magnitudes (codes k and k+1).
_E2M1_POINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_E2M1_MAG = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


@numba.njit(cache=True, nogil=True)
def _pow2(p):
    return math.ldexp(1.0, p)


@numba.njit(cache=True, nogil=True)
def _exp_of(v):
    """floor(log2 v) of a positive finite binary64 value (frexp reads the exponent bits)."""
    return math.frexp(v)[1] - 1


@numba.njit(cache=True, nogil=True)
def _man_nonzero(v):
    """Whether a positive value is not a power of two."""
    return v != math.ldexp(1.0, math.frexp(v)[1] - 1)


@numba.njit(cache=True, nogil=True)
def _round_scale_rne(v, m, emin, max_code):
    """RNE, saturating code of a positive binary64 value in a subnormal-capable unsigned format."""
    if v == 0.0:
        return 0
    e = _exp_of(v)
    eb = e if e > emin else emin
    q = v * _pow2(m - eb)
    k = math.floor(q)
    rem = q - k
    ki = np.int64(k)
    if rem > 0.5 or (rem == 0.5 and (ki & 1) == 1):
        ki += 1
    code = (eb - emin) * (1 << m) + ki
    if code > max_code:
        code = max_code
    return code


@numba.njit(cache=True, nogil=True)
def _e2m1_mag(a, mode, r, nbits):
    """E2M1 magnitude code of |v| = a >= 0 under a rounding mode (saturating)."""
    if a >= 6.0:
        return 7
    if mode == _RNE:
        return ((a > 0.25) + (a >= 0.75) + (a > 1.25) + (a >= 1.75)
                + (a > 2.5) + (a >= 3.5) + (a > 5.0))
    if mode == _RNA:
        return ((a >= 0.25) + (a >= 0.75) + (a >= 1.25) + (a >= 1.75)
                + (a >= 2.5) + (a >= 3.5) + (a >= 5.0))
    if a < 2.0:
        step = 0.5
        k = math.floor(a * 2.0)
        lo_code = np.int64(k)
    elif a < 4.0:
        step = 1.0
        k = math.floor(a)
        lo_code = np.int64(k) + 2
    else:
        step = 2.0
        k = 2.0
        lo_code = 6
    delta = (a - k * step) / step
    if delta == 0.0:
        return lo_code
    up = False
    if mode == _SRM:
        up = delta >= 1.0 - (2 * r + 1) * 2.0 ** (-(nbits + 1))
    elif mode == _SRA:
        up = delta >= 1.0 - r * 2.0 ** (-nbits)
    elif mode == _SRU:
        up = r < delta * (1 << nbits)
    return lo_code + 1 if up else lo_code


@numba.njit(cache=True, nogil=True)
def _abs_max32(seg):
    """max |x| of one block of binary32 values: the block amax."""
    a32 = np.float32(0.0)
    for t in range(seg.shape[0]):
        v = abs(seg[t])
        a32 = v if v > a32 else a32
    return a32


@numba.njit(cache=True, nogil=True)
def _signbit(v):
    return math.copysign(1.0, v) < 0.0


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _quantize_blocks(x, k_cols, block, tile2d, grid, rbits, use_r, nbits, mode, kind,
                     # exact
                     six_t, tt, g, g_pos,
                     # fp32
                     mulf, gd, inv_six_t, amax32, cap, te_deq,
                     # scales
                     sm, semin, smax_code, smax32, smin32, zero_rule, one_code, stable,
                     # mx
                     mx_mode,
                     # output
                     pos_zero, codes, scales, deq):
    n = x.shape[0]
    nblk_row = k_cols // block
    nblocks = n // block
    for bn in numba.prange(nblocks):
        i = bn // nblk_row
        bj = bn - i * nblk_row
        base = bn * block
        if tile2d:
            a_b = grid[i // block, bj]
        else:
            a_b = 0.0
            for t in range(block):
                v = abs(np.float64(x[base + t]))
                if v > a_b:
                    a_b = v
        # ---- scale
        if kind == 0:
            if g_pos:
                u = (a_b * tt) / g
            else:
                u = a_b / 6.0
            code = _round_scale_rne(u, sm, semin, smax_code)
        elif kind == 1:
            sc = np.float32(a_b) * mulf
            if sc > _FLT_MAX32:
                sc = _FLT_MAX32
            if sc > smax32:
                sc = smax32
            code = _round_scale_rne(np.float64(sc), sm, semin, smax_code)
        elif kind == 3:
            sbs = (np.float32(a_b) / np.float32(6.0)) / mulf
            sbs = sbs if sbs > smin32 else smin32
            sbs = sbs if sbs < smax32 else smax32
            code = _round_scale_rne(np.float64(sbs), sm, semin, smax_code)
        else:
            if a_b == 0.0:
                e = -127
            else:
                fl = _exp_of(a_b)
                if mx_mode == 0:
                    e = fl - 2
                elif mx_mode == 1:
                    e = fl + (1 if _man_nonzero(a_b) else 0) - 2
                elif mx_mode == 2:
                    e = fl + (1 if a_b >= 1.75 * _pow2(fl) else 0) - 2
                else:
                    y = a_b / 6.0
                    e = _exp_of(y) + (1 if _man_nonzero(y) else 0)
            if e < -127:
                e = -127
            if e > 127:
                e = 127
            code = e + 127
        if (kind == 0 or kind == 1) and code == 0 and zero_rule:
            code = one_code
        if tile2d:
            scales[(i // block) * nblk_row + bj] = code
        else:
            scales[bn] = code
        # ---- payload
        if kind == 0:
            s = stable[code]
            den = g * s if g_pos else s
            num = six_t if g_pos else 1.0
            for t in range(block):
                xv = np.float64(x[base + t])
                neg = _signbit(xv)
                a = abs(xv)
                if s == 0.0:
                    mag = 7 if a > 0.0 else 0
                elif mode == _RNE or mode == _RNA:
                    p = a * num
                    if mode == _RNE:
                        mag = ((p > 0.25 * den) + (p >= 0.75 * den) + (p > 1.25 * den)
                               + (p >= 1.75 * den) + (p > 2.5 * den) + (p >= 3.5 * den)
                               + (p > 5.0 * den))
                    else:
                        mag = ((p >= 0.25 * den) + (p >= 0.75 * den) + (p >= 1.25 * den)
                               + (p >= 1.75 * den) + (p >= 2.5 * den) + (p >= 3.5 * den)
                               + (p >= 5.0 * den))
                else:
                    r = np.int64(rbits[base + t]) if use_r else 0
                    mag = _e2m1_mag((a * num) / den, mode, r, nbits)
                q = mag | (8 if neg else 0)
                codes[base + t] = q
                qv = _E2M1_MAG_NB[mag]
                if g_pos:
                    d = np.float32((qv * s * g) / six_t)
                else:
                    d = np.float32(qv * s)
                deq[base + t] = -d if neg else d
        elif kind == 1:
            s32 = np.float32(stable[code])
            mult = np.float32(1.0) / (s32 * gd)
            if cap and mult > _FLT_MAX32:
                mult = _FLT_MAX32
            dscale = (s32 * amax32) * inv_six_t
            for t in range(block):
                y = np.float32(x[base + t]) * mult
                neg = _signbit(y)
                if pos_zero and y == 0:
                    neg = False
                r = np.int64(rbits[base + t]) if use_r else 0
                mag = _e2m1_mag(abs(np.float64(y)), mode, r, nbits)
                q = mag | (8 if neg else 0)
                codes[base + t] = q
                qv = np.float32(_E2M1_MAG_NB[mag])
                if neg:
                    qv = -qv
                if te_deq:
                    deq[base + t] = qv * dscale
                else:
                    deq[base + t] = (qv * s32) * gd
        elif kind == 3:
            s32 = np.float32(stable[code])
            recip = gd / s32
            dscale = mulf * s32
            for t in range(block):
                y = np.float32(x[base + t]) * recip
                neg = _signbit(y)
                r = np.int64(rbits[base + t]) if use_r else 0
                mag = _e2m1_mag(abs(np.float64(y)), mode, r, nbits)
                codes[base + t] = mag | (8 if neg else 0)
                qv = np.float32(_E2M1_MAG_NB[mag])
                if neg:
                    qv = -qv
                deq[base + t] = qv * dscale
        else:
            sc = _pow2(code - 127)
            inv = _pow2(127 - code)
            for t in range(block):
                xv = np.float64(x[base + t])
                neg = _signbit(xv)
                r = np.int64(rbits[base + t]) if use_r else 0
                mag = _e2m1_mag(abs(xv) * inv, mode, r, nbits)
                codes[base + t] = mag | (8 if neg else 0)
                d = np.float32(_E2M1_MAG_NB[mag] * sc)
                deq[base + t] = -d if neg else d


_E2M1_MAG_NB = _E2M1_MAG


_HOT_CHUNK = 1024


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _rne_rows_exact(x, sbits, block, six_t, tt, g, g_pos, sm, semin, smax_code, zero_rule, one_code,
                    stable, codes, scales):
    """Hot path of exact profiles: 1xB blocks, binary32 input, RNE, no dequantization.

    Same arithmetic as :func:`_quantize_blocks` (kind 0), written inline with
    branch-free element loops (they vectorize); parallel over chunks of blocks.
    ``sbits`` is the input's uint32 view (sign bits).
    """
    nblocks = x.shape[0] // block
    nch = (nblocks + _HOT_CHUNK - 1) // _HOT_CHUNK
    num = six_t if g_pos else 1.0
    for c in numba.prange(nch):
        for bn in range(c * _HOT_CHUNK, min(nblocks, (c + 1) * _HOT_CHUNK)):
            lo = bn * block
            seg = x[lo:lo + block]
            sb = sbits[lo:lo + block]
            out = codes[lo:lo + block]
            a32 = _abs_max32(seg)
            a_b = np.float64(a32)
            u = (a_b * tt) / g if g_pos else a_b / 6.0
            code = _round_scale_rne(u, sm, semin, smax_code)
            if code == 0 and zero_rule:
                code = one_code
            scales[bn] = code
            s = stable[code]
            if s == 0.0:
                for t in range(block):
                    out[t] = np.uint8(7 if seg[t] != 0 else 0) | np.uint8((sb[t] >> 28) & 8)
                continue
            den = g * s if g_pos else s
            t0, t1, t2, t3 = 0.25 * den, 0.75 * den, 1.25 * den, 1.75 * den
            t4, t5, t6 = 2.5 * den, 3.5 * den, 5.0 * den
            for t in range(block):
                p = abs(np.float64(seg[t])) * num
                mag = (np.uint8(p > t0) + np.uint8(p >= t1) + np.uint8(p > t2) + np.uint8(p >= t3)
                       + np.uint8(p > t4) + np.uint8(p >= t5) + np.uint8(p > t6))
                out[t] = mag | np.uint8((sb[t] >> 28) & 8)


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _rne_rows_fp32(x, sbits, block, mulf, gd, cap, sm, semin, smax_code, smax32, zero_rule, one_code,
                   stable, pos_zero, codes, scales):
    """Hot path of binary32 profiles (kind 1), as :func:`_rne_rows_exact`."""
    nblocks = x.shape[0] // block
    nch = (nblocks + _HOT_CHUNK - 1) // _HOT_CHUNK
    zmask = np.uint8(0) if pos_zero else np.uint8(8)
    for c in numba.prange(nch):
        for bn in range(c * _HOT_CHUNK, min(nblocks, (c + 1) * _HOT_CHUNK)):
            lo = bn * block
            seg = x[lo:lo + block]
            sb = sbits[lo:lo + block]
            out = codes[lo:lo + block]
            a32 = _abs_max32(seg)
            sc = a32 * mulf
            sc = sc if sc < _FLT_MAX32 else _FLT_MAX32
            sc = sc if sc < smax32 else smax32
            code = _round_scale_rne(np.float64(sc), sm, semin, smax_code)
            if code == 0 and zero_rule:
                code = one_code
            scales[bn] = code
            s32 = np.float32(stable[code])
            mult = np.float32(1.0) / (s32 * gd)
            if cap:
                mult = mult if mult < _FLT_MAX32 else _FLT_MAX32
            for t in range(block):
                y = seg[t] * mult
                a = abs(y)
                mag = (np.uint8(a > np.float32(0.25)) + np.uint8(a >= np.float32(0.75))
                       + np.uint8(a > np.float32(1.25)) + np.uint8(a >= np.float32(1.75))
                       + np.uint8(a > np.float32(2.5)) + np.uint8(a >= np.float32(3.5))
                       + np.uint8(a > np.float32(5.0)))
                sign = np.uint8((sb[t] >> 28) & 8) & (np.uint8(8) if y != 0 else zmask)
                out[t] = mag | sign


@numba.njit(cache=True, parallel=True)
def _absmax_bits32(bits):
    """max over i of (bits[i] & 0x7FFFFFFF): the binary32 |x| max as bits (>= 0x7F800000: non-finite)."""
    n = bits.shape[0]
    chunk = 1 << 16
    nch = (n + chunk - 1) // chunk
    part = np.zeros(nch, dtype=np.uint32)
    for c in numba.prange(nch):
        seg = bits[c * chunk:min(n, (c + 1) * chunk)]
        m = np.uint32(0)
        for i in range(seg.shape[0]):  # a branch-free max over a slice: LLVM vectorizes it
            v = seg[i] & np.uint32(0x7FFFFFFF)
            m = v if v > m else m
        part[c] = m
    return part.max() if nch else np.uint32(0)


def absmax_float32(x: np.ndarray) -> tuple[np.float32, bool]:
    """(max |x|, all finite) of a binary32 array in one parallel pass over the bits."""
    bits = np.ascontiguousarray(x).reshape(-1).view(np.uint32)
    m = np.uint32(_absmax_bits32(bits))
    return np.array([m], dtype=np.uint32).view(np.float32)[0], bool(m < 0x7F800000)


def block_amax_grid_fast(x: np.ndarray, block: int, tile: str) -> np.ndarray:
    """max |x| per block (1xB) or tile (BxB) as float64 (max is exact in any order)."""
    m, k = x.shape
    a = np.abs(x.astype(np.float64, copy=False))
    if tile == "BxB":
        return a.reshape(m // block, block, k // block, block).max(axis=(1, 3))
    return a.reshape(m, k // block, block).max(axis=2)


def _tile_order(x: np.ndarray, block: int, tile: str) -> np.ndarray:
    return np.ascontiguousarray(x).reshape(-1)


def quantize_view_fast(x: np.ndarray, spec: BlockSpec, amax: float, rbits: np.ndarray | None = None,
                       want_dequant: bool = True, hot_path: bool = True):
    """Fast twin of :func:`fpspec.exact.blocks.quantize_view_exact`; same result type.

    ``want_dequant=False`` leaves ``dequant`` as None.  ``hot_path=False`` forces the
    general kernel (tests compare both kernels with the spec).
    """
    from ..exact.blocks import BlockResult  # the result container only (no arithmetic)

    m, k = x.shape
    b = spec.block
    tile2d = spec.tile == "BxB"
    kind = _KIND[spec.arithmetic]
    prof = spec.profile
    if kind not in (1, 3) and x.dtype not in (np.float32, np.float64):
        x = x.astype(np.float32)
    if kind in (1, 3) and x.dtype != np.float32:
        raise FpspecError("binary32 profiles take binary32 input")
    if kind == 0 and x.dtype == np.float64:
        x32 = x.astype(np.float32)
        if not np.array_equal(x32.astype(np.float64), x):
            raise FpspecError("the fast path of an exact profile takes binary32 values; "
                              "use impl='exact' for binary64 inputs that are not binary32 values")
        x = x32
    grid = block_amax_grid_fast(x, b, spec.tile) if tile2d else np.zeros((1, 1))
    flat = np.ascontiguousarray(x).reshape(-1)
    mode = spec.rounding
    use_r = mode.stochastic
    if use_r:
        if rbits is None or rbits.shape != (m, k):
            raise FpspecError(f"stochastic rounding needs rbits of shape {(m, k)}")
        rflat = np.ascontiguousarray(rbits).reshape(-1)
        if int(rflat.max(initial=0)) >= (1 << spec.nbits):
            raise FpspecError(f"random values must be below 2^{spec.nbits}")
    else:
        rflat = np.zeros(1, dtype=np.uint8)

    sf = get_format(spec.scale_format)
    stable = decode_table(sf).copy()
    stable[~np.isfinite(stable)] = 0.0
    smax32 = np.float32(float(sf.max_finite))
    f32 = np.float32
    six_t = tt = g = 0.0
    g_pos = False
    mulf = gd = inv_six_t = amax32 = f32(0)
    enc = dec = f32(1)
    if kind == 0:
        assert spec.target is not None
        tt = float(spec.target)
        six_t = 6.0 * tt  # exact: T is a binary32 value
        g = float(amax)
        g_pos = g > 0
        if g_pos:
            with np.errstate(over="ignore", under="ignore"):
                enc = f32(six_t / g)  # reported only; +inf when G exceeds binary32 (as the spec's fp32(G))
                dec = f32(g / six_t)
    elif kind == 1:
        assert spec.target is not None
        with np.errstate(divide="ignore", over="ignore"):
            six_t32 = f32(6.0) * f32(float(spec.target))
            amax32 = f32(amax)
            if amax32 == 0 and prof.amax_zero is AmaxZero.ONE:
                ge = f32(1.0)
            else:
                ge = min(six_t32 / amax32, _FLT_MAX32)
                if ge == 0:
                    ge = f32(1.0)
            gd = f32(1.0) / ge
            mulf = ge * (f32(1.0) / f32(6.0))
            inv_six_t = f32(1.0) / six_t32
        enc, dec = ge, gd
    elif kind == 3:
        assert spec.target is not None
        if amax == 0:
            raise FpspecError("profile torchao-0.18 is undefined for a zero tensor amax (0/0 in the block scale)")
        with np.errstate(divide="ignore", over="ignore", under="ignore"):
            six_t32 = f32(6.0) * f32(float(spec.target))
            pts = f32(amax) / six_t32
            inv_pts = f32(1.0) / pts
        if not np.isfinite(inv_pts):
            raise FpspecError(f"profile torchao-0.18 overflows 1/per_tensor_scale for amax {amax!r}")
        mulf, gd = pts, inv_pts   # kernel arguments: mulf = per-tensor scale, gd = its reciprocal
        enc, dec = inv_pts, pts
    mx_mode = _MX_IDS[prof.mx_mode] if prof.mx_mode is not None else 0
    codes = np.empty(m * k, dtype=np.uint8)
    scales = np.empty((m // b if tile2d else m) * (k // b), dtype=np.uint8)
    if (hot_path and not want_dequant and kind in (0, 1) and not tile2d and mode is RoundingMode.RNE
            and flat.dtype == np.float32):
        if kind == 0:
            _rne_rows_exact(flat, flat.view(np.uint32), b, six_t, tt, g, g_pos, sf.man_bits, sf.emin,
                            sf.max_finite_code, spec.zero_scale_rule, spec.one_code, stable, codes, scales)
        else:
            _rne_rows_fp32(flat, flat.view(np.uint32), b, f32(mulf), f32(gd), prof.cap_multiplier,
                           sf.man_bits, sf.emin, sf.max_finite_code, smax32, spec.zero_scale_rule,
                           spec.one_code, stable, prof.signed_zero is SignedZero.POSITIVE, codes, scales)
        return BlockResult(codes.reshape(m, k), scales.reshape(m, k // b), f32(enc), f32(dec), None)
    deq = np.empty(m * k, dtype=np.float32)
    with np.errstate(all="ignore"):
        _quantize_blocks(flat, k, b, tile2d, grid, rflat, use_r, spec.nbits, _MODE_IDS[mode], kind,
                         six_t, tt, g, g_pos,
                         f32(mulf), f32(gd), f32(inv_six_t), f32(amax32), prof.cap_multiplier,
                         prof.dequant == "te",
                         sf.man_bits, sf.emin, sf.max_finite_code, smax32, f32(float(sf.min_normal)),
                         spec.zero_scale_rule, spec.one_code if kind != 2 else 0, stable, mx_mode,
                         prof.signed_zero is SignedZero.POSITIVE, codes, scales, deq)
    return BlockResult(codes.reshape(m, k), scales.reshape((m // b if tile2d else m), k // b),
                       f32(enc), f32(dec), deq.reshape(m, k))


def _rht_weights() -> np.ndarray:
    h = np.ones((1, 1))
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    signs = np.array([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], dtype=np.float64)
    return (signs[:, None] * h * 0.25).astype(np.float32)


def rht16_fast(x: np.ndarray) -> np.ndarray:
    """Fast twin of :func:`fpspec.exact.blocks.rht16_exact`: the same binary32 steps, vectorized."""
    m, k = x.shape
    w = _rht_weights()
    # binary64 emulates each fused step exactly: x w is exact in binary64, and when
    # a + x w is not exact in binary64 the exponent gap exceeds 29 bits, so both
    # roundings return the larger addend (docs/scheme-nvfp4.rst).
    g = np.ascontiguousarray(x, dtype=np.float32).astype(np.float64).reshape(m, k // 16, 16)
    w64 = w.astype(np.float64)
    with np.errstate(all="ignore"):
        acc = (g[:, :, 0:1] * w64[0][None, None, :]).astype(np.float32)
        for i in range(1, 16):
            acc = (acc.astype(np.float64) + g[:, :, i:i + 1] * w64[i][None, None, :]).astype(np.float32)
    return acc.reshape(m, k)
