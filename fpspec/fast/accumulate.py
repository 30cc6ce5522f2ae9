"""Fast GEMM accumulation: the Numba twin of :mod:`fpspec.exact.accumulate` (FPS-GEMM-10).

Bit-equal to the exact reference by test (tests/test_gemm_equality.py).  Every value
is carried as an integer significand and a power-of-two exponent; the only
floating-point numbers are FP32 results held in float64 (exact).  The exactness
argument, step by step (docs/gemm.rst, "The fast path"):

* **Operands.**  A decoded code is ``sig * 2^lsb`` with ``sig`` odd (trailing zeros
  stripped): at most 11 bits (fp16), 8 (bf16), 4 (e4m3), 3 (e5m2), 2 x 4 = 6 bits for an
  E2M1 payload times an E4M3/UE5M3 scale, 30 bits for an exactly dequantized value
  (3 x 15 x (2^24 - 1) < 2^30), 24 bits for an FP32-decoded one.  A product is
  ``(sa sb) 2^(la+lb)`` with ``sa sb < 2^60``: exact in int64.
* **Window groups** (``window_bits = F``): a kept term is an integer multiple of
  ``q = 2^(E-F)`` of magnitude below ``2^(F+2)`` (a product's value is below
  ``2^(ea+eb+2)`` <= ``2^(E+2)``), so the sum of n terms is below ``2^(F+2+log2 n)``:
  exact in int64 when ``F + 2 + bitlen(G+1) <= 62`` (checked by :func:`supports`;
  otherwise the exact implementation is used).
* **Exact groups** (no window): the terms are shifted to the group's smallest
  exponent and summed in int64 when ``max(bitlen(sig) + lsb) - min(lsb) + bitlen(n) <= 62``
  (always true for E2M1 x E4M3 scale blocks: the block-sum is below 2^13, the two
  scale significands below 2^8, the scale exponents span 28 bits); otherwise (wide
  UE5M3 / UE8M0 scale spans, BF16 products) a multi-limb integer accumulator with
  30-bit digits sums them exactly.
* **NVFP4 blocks.**  Without a window the group sum does not depend on the per-product
  exponents, so the products of one scale block are summed as small integers first:
  2 x E2M1 values are integers in [-12, 12], so a block of B <= 2^10 products sums
  exactly in int32.
* **Rounding** an integer ``S * 2^e`` to FP32 (RNE or RZ, subnormals, IEEE overflow):
  below 2^53 (and e in [-1000, 900]) ``S * 2^e`` is an exact float64, rounded by one
  IEEE conversion (RNE) or an exact truncation of ``v / 2^lsb`` (RZ); otherwise on the
  integer (:func:`_round_int`).
* **Adding two FP32 values** (``c + p``, the promotion): TwoSum gives ``s + err = x + y``
  exactly in float64.  Every FP32 value and FP32 midpoint is a float64, and ``s`` is the
  float64 nearest to the exact sum, so the exact sum lies on ``s``'s side of each of
  them: RZ(x + y) is the truncation of ``s`` except when ``s`` is itself an FP32 value
  and ``err`` points toward zero (then the neighbour toward zero); RNE(x + y) is the
  conversion of ``s`` except when ``s`` is exactly an FP32 midpoint, where the sign of
  ``err`` decides (:func:`_round_f64`).
* Snap (step 6) works on float64 holding an FP32 value times 2^L (exact); alpha
  (step 7) multiplies two FP32 values, exact in float64 (48 bits), then converts to
  FP32 once (IEEE conversion, RNE); BF16 output rounds the FP32 bits with integer RNE.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numba
import numpy as np

from ..errors import FpspecError
from ..formats import FloatFormat, get_format
from ..models import GemmModel
from .parallel import run_rows
from .rounding import decode_table

__all__ = ["gemm_fast", "supports", "round_int_to_fp32", "add2_round_fp32", "FastPathUnsupported"]

_RNE, _RZ, _NONE = 0, 1, 2
_MODE = {"rne": _RNE, "rz": _RZ, "none": _NONE}
_TRUNC, _FLOOR = 0, 1
FP32_EMIN = -126
_NO_FLOOR = -(1 << 30)
_LIMB = 30
_LIMB_MASK = (1 << _LIMB) - 1
_FP32_MAX = float(np.finfo(np.float32).max)


# ====================================================================== scalars
@numba.njit(cache=True, nogil=True)
def _bitlen(x):
    """Number of bits of a non-negative int64 (0 for 0)."""
    n = 0
    if x >= (1 << 32):
        x >>= 32
        n += 32
    if x >= (1 << 16):
        x >>= 16
        n += 16
    if x >= (1 << 8):
        x >>= 8
        n += 8
    if x >= (1 << 4):
        x >>= 4
        n += 4
    if x >= (1 << 2):
        x >>= 2
        n += 2
    if x >= 2:
        x >>= 1
        n += 1
    return n + x


_POW2_LO, _POW2_HI = -1000, 900
#: 2^e for e in [-1000, 900]: exact float64 constants (multiplying by them is exact scaling)
_POW2 = np.array([math.ldexp(1.0, e) for e in range(_POW2_LO, _POW2_HI + 1)], dtype=np.float64)
#: the smallest float64 that RNE32 sends to infinity: 2^128 - 2^103 (a midpoint)
_F32_OVF = math.ldexp(1.0, 128) - math.ldexp(1.0, 103)


@numba.njit(cache=True, nogil=True)
def _rz32(v):
    """RZ of a finite nonzero float64 to FP32 (subnormals; beyond max -> max finite):
    the RNE conversion, stepped one FP32 value toward zero when it went outward."""
    f = np.float32(v)
    if abs(np.float64(f)) > abs(v):
        f = np.nextafter(f, np.float32(0.0))
    return np.float64(f) + 0.0


@numba.njit(cache=True, nogil=True)
def _round_f64(v, err, mode):
    """FP32 rounding (RNE or RZ) of the exact value v + err, where v is a finite float64
    and err is exact with |err| <= ulp64(v)/2 (0 when v is exact).  IEEE overflow.

    Every FP32 value and FP32 midpoint is a float64 and v is the float64 nearest to
    v + err, so err matters only when v is itself an FP32 value (RZ) or an FP32 midpoint
    (RNE)."""
    if v == 0.0:
        return 0.0
    if mode == _RZ:
        f = _rz32(v)
        if err != 0.0 and f == v and ((err < 0.0) != (v < 0.0)):
            f = np.float64(np.nextafter(np.float32(f), np.float32(0.0)))
        return f
    f32 = np.float32(v)
    f = np.float64(f32)
    if err != 0.0:
        if math.isinf(f):
            if abs(v) == _F32_OVF and ((err < 0.0) != (v < 0.0)):
                f = np.float64(np.nextafter(f32, np.float32(0.0)))
        elif f != v:
            o32 = np.nextafter(f32, np.float32(math.inf) if v > f else np.float32(-math.inf))
            o = np.float64(o32)
            if 2.0 * v == f + o and ((err > 0.0) == (o > f)):
                f = o
    return f + 0.0


@numba.njit(cache=True, nogil=True)
def _round_f64_bits(v, err, mode, bits):
    """Rounding of the exact value v + err to ``bits`` fraction bits in FP32's exponent
    range (FPS-GEMM-13); bits = 23 is :func:`_round_f64`.  Same contract for err.

    For bits < 23 every value and midpoint of the bits-lattice is a float64 too, so the
    argument of :func:`_round_f64` carries over: r = v / quantum is exact (a power-of-two
    scaling of a float64 within range), err matters only when r is an integer (RZ) or
    an odd multiple of 1/2 (RNE).  Overflow: |result| >= 2^128 is Inf (RNE) or
    (2 - 2^-bits) 2^127 (RZ)."""
    if bits == 23:
        return _round_f64(v, err, mode)
    if v == 0.0:
        return 0.0
    m, ex = math.frexp(v)
    e = ex - 1
    if e < FP32_EMIN:
        e = FP32_EMIN
    q = e - bits
    r = math.ldexp(v, -q)
    neg = v < 0.0
    a = -r if neg else r
    t = np.floor(a)
    if mode == _RZ:
        if err != 0.0 and t == a and ((err < 0.0) != neg):
            # the exact value lies just inside |v|: one step toward zero, a half step
            # when |v| is the bottom of its binade (the lattice below is twice as fine)
            if t == math.ldexp(1.0, bits) and e > FP32_EMIN:
                res = math.ldexp(2.0 * t - 1.0, q - 1)
            else:
                res = math.ldexp(t - 1.0, q)
        else:
            res = math.ldexp(t, q)
        lim = math.ldexp(1.0, 128)
        if res >= lim:
            res = math.ldexp(math.ldexp(2.0, bits) - 1.0, 127 - bits)
    else:
        d = a - t
        if d > 0.5:
            t += 1.0
        elif d == 0.5:
            if err != 0.0:
                if (err > 0.0) != neg:
                    t += 1.0
            elif (t % 2.0) != 0.0:
                t += 1.0
        res = math.ldexp(t, q)
        if res >= math.ldexp(1.0, 128):
            res = math.inf
    return (-res if neg else res) + 0.0


@numba.njit(cache=True, nogil=True)
def _round_int_bits(s, e, mode, bits):
    """:func:`_round_int` to ``bits`` fraction bits (FPS-GEMM-13)."""
    if bits == 23:
        return _round_int(s, e, mode)
    if s == 0:
        return 0.0
    neg = s < 0
    mag = -s if neg else s
    if mag < (1 << 53) and _POW2_LO <= e <= _POW2_HI:
        return _round_f64_bits(float(s) * _POW2[e - _POW2_LO], 0.0, mode, bits)
    # keep the top 54 bits and a sticky bit: an exact float64 pair (head, err) whose
    # rounding to <= 24 significant bits equals that of s 2^e
    nb = _bitlen(mag)
    sh = nb - 54
    if sh > 0:
        head = mag >> sh
        sticky = (mag - (head << sh)) != 0
        head = (head << 1) | (1 if sticky else 0)
        ee = e + sh - 1
    else:
        head = mag
        ee = e
    if ee > _POW2_HI or ee < _POW2_LO:
        return _round_int_slow_bits(-head if neg else head, ee, mode, bits)
    hb = head >> 2
    lo = head - (hb << 2)
    v = float(hb << 2) * _POW2[ee - _POW2_LO]
    err = float(lo) * _POW2[ee - _POW2_LO]
    if neg:
        v = -v
        err = -err
    return _round_f64_bits(v, err, mode, bits)


@numba.njit(cache=True, nogil=True)
def _round_acc(s, e, packed):
    """:func:`_round_int_bits` with a packed accumulator mode: ``mode + 4 (23 - bits)``
    (a plain mode 0/1 means FP32, 23 bits)."""
    return _round_int_bits(s, e, packed & 3, 23 - (packed >> 2))


@numba.njit(cache=True, nogil=True)
def _round_int_slow_bits(s, e, mode, bits):
    """Far outside FP32's range: Inf / the RZ clamp, or +0 below the subnormal lattice
    (sticky-safe: every kept bit is far from the rounding point)."""
    if e > 0:
        big = math.inf if mode == _RNE else math.ldexp(math.ldexp(2.0, bits) - 1.0, 127 - bits)
        return -big if s < 0 else big
    return 0.0


@numba.njit(cache=True, nogil=True)
def _round_int(s, e, mode):
    """FP32 value (as float64) of the signed integer s times 2^e rounded with mode
    (RNE or RZ), subnormals, IEEE overflow (Inf under RNE, max finite under RZ); 0 -> +0.

    Below 2^53 and with e in [-1000, 900], s 2^e is an exact float64 and is rounded from
    there (:func:`_round_f64`); otherwise on the integer."""
    if s == 0:
        return 0.0
    neg = s < 0
    mag = -s if neg else s
    if mag < (1 << 53) and _POW2_LO <= e <= _POW2_HI:
        return _round_f64(float(s) * _POW2[e - _POW2_LO], 0.0, mode)
    nb = _bitlen(mag)
    top = e + nb - 1
    lsb_t = top - 23 if top >= FP32_EMIN else -149
    shift = lsb_t - e
    if shift > 0:
        if shift >= 63:
            q = 0
            above_half = False
            tie = False
            if shift == 63:
                above_half = mag > (1 << 62)
                tie = mag == (1 << 62)
        else:
            q = mag >> shift
            rem = mag - (q << shift)
            half = 1 << (shift - 1)
            above_half = rem > half
            tie = rem == half
        if mode == 0 and (above_half or (tie and (q & 1) == 1)):
            q += 1
        e2 = lsb_t
    else:
        q = mag
        e2 = e
    if q == 0:
        return 0.0  # zero results are +0 (FPS-GEMM-2)
    v = math.ldexp(float(q), e2)
    if v > _FP32_MAX:
        v = math.inf if mode == 0 else _FP32_MAX
    return -v if neg else v


@numba.njit(cache=True, nogil=True)
def _split32(v):
    """(sig, lsb) of a finite nonzero FP32 value held in float64: v = sig 2^lsb, |sig| < 2^24."""
    m, ex = math.frexp(v)
    sig = np.int64(math.ldexp(m, 24))
    return sig, ex - 24


@numba.njit(cache=True, nogil=True)
def _exp32(v):
    """FP32 alignment exponent of a finite nonzero FP32 value: max(floor(log2|v|), -126)."""
    m, ex = math.frexp(v)
    e = ex - 1
    return e if e > FP32_EMIN else FP32_EMIN


@numba.njit(cache=True, nogil=True)
def _add_special(x, y):
    """IEEE x + y for values where one is not finite."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if math.isinf(x) and math.isinf(y):
        return x if x == y else math.nan
    return x if math.isinf(x) else y


@numba.njit(cache=True, nogil=True)
def _add2_round(x, y, mode):
    """round(x + y) for two FP32 values held in float64 (the accumulator update, the
    promotion).  TwoSum gives s + err = x + y exactly (float64, no overflow for FP32
    inputs); :func:`_round_f64` rounds that pair correctly."""
    if not (math.isfinite(x) and math.isfinite(y)):
        return _add_special(x, y)
    s = x + y
    bp = s - x
    err = (x - (s - bp)) + (y - bp)
    return _round_f64_bits(s, err, mode & 3, 23 - (mode >> 2))


@numba.njit(cache=True, nogil=True)
def _limb_round(sigs, lsbs, n, mode):
    """Exact sum of n terms sig * 2^lsb, rounded to FP32 (the wide-span fallback)."""
    base = 1 << 30
    top = -(1 << 30)
    for i in range(n):
        if sigs[i] != 0:
            if lsbs[i] < base:
                base = lsbs[i]
            t = lsbs[i] + _bitlen(abs(sigs[i]))
            if t > top:
                top = t
    if top == -(1 << 30):
        return 0.0
    nl = (top - base) // _LIMB + 5
    acc = np.zeros(nl, dtype=np.int64)
    for i in range(n):
        s = sigs[i]
        if s == 0:
            continue
        neg = s < 0
        mag = -s if neg else s
        off = lsbs[i] - base
        li = off // _LIMB
        sh = off - li * _LIMB
        while mag != 0:
            chunk = mag & _LIMB_MASK
            mag >>= _LIMB
            v = chunk << sh  # < 2^59
            lo = v & _LIMB_MASK
            hi = v >> _LIMB
            if neg:
                acc[li] -= lo
                acc[li + 1] -= hi
            else:
                acc[li] += lo
                acc[li + 1] += hi
            li += 1
    # carry propagation: limbs 0..nl-2 in [0, 2^30), the top one signed
    for i in range(nl - 1):
        carry = acc[i] >> _LIMB
        acc[i] -= carry << _LIMB
        acc[i + 1] += carry
    neg = acc[nl - 1] < 0
    if neg:
        for i in range(nl):
            acc[i] = -acc[i]
        for i in range(nl - 1):
            carry = acc[i] >> _LIMB
            acc[i] -= carry << _LIMB
            acc[i + 1] += carry
    hi_i = -1
    for i in range(nl - 1, -1, -1):
        if acc[i] != 0:
            hi_i = i
            break
    if hi_i < 0:
        return 0.0
    # head: the top limb and the one below (>= 31 significant bits), sticky from the rest
    head = acc[hi_i]
    e = base + hi_i * _LIMB
    if hi_i >= 1:
        head = (head << _LIMB) | acc[hi_i - 1]
        e -= _LIMB
        sticky = False
        for i in range(hi_i - 1):
            if acc[i] != 0:
                sticky = True
                break
        if sticky:
            head = (head << 1) | 1
            e -= 1
    return _round_acc(-head if neg else head, e, mode)


@numba.njit(cache=True, nogil=True)
def _exact_round(sigs, lsbs, n, mode):
    """Exact sum of n terms sig * 2^lsb rounded to FP32: int64 when the span allows."""
    base = 1 << 30
    top = -(1 << 30)
    for i in range(n):
        s = sigs[i]
        if s != 0:
            if lsbs[i] < base:
                base = lsbs[i]
            t = lsbs[i] + _bitlen(s if s > 0 else -s)
            if t > top:
                top = t
    if top == -(1 << 30):
        return 0.0
    if top - base + _bitlen(n) <= 62:
        acc = 0
        for i in range(n):
            if sigs[i] != 0:
                acc += sigs[i] << (lsbs[i] - base)
        return _round_acc(acc, base, mode)
    return _limb_round(sigs, lsbs, n, mode)


# =================================================================== the group
@numba.njit(cache=True, nogil=True)
def _group(c, sigs, lsbs, aexps, n, nspec, fused, window, below, efloor, grp_mode, acc_mode):
    """Steps 3-4 for one group of n finite terms (FPS-GEMM-5): the new accumulator.

    ``nspec``: special value of the group's terms (0.0 when all finite, else inf/nan).
    Buffers have room for one more term (the accumulator)."""
    if nspec != 0.0:
        return _add_special(c, nspec)
    if not math.isfinite(c) and (fused or grp_mode == _NONE):
        return c  # Inf/NaN accumulator plus finite terms (no separately rounded p)
    if window != _NO_FLOOR:
        # 3. alignment window
        e_max = -(1 << 30)
        for i in range(n):
            if sigs[i] != 0 and aexps[i] > e_max:
                e_max = aexps[i]
        m = n
        if fused and c != 0.0:
            sc, lc = _split32(c)
            sigs[m] = sc
            lsbs[m] = lc
            ec = _exp32(c)
            if ec > e_max:
                e_max = ec
            m += 1
        if e_max == -(1 << 30):
            return c if not fused else 0.0
        if e_max < efloor:
            e_max = efloor
        ql = e_max - window
        acc = 0
        for i in range(m):
            s = sigs[i]
            if s == 0:
                continue
            d = lsbs[i] - ql
            if d >= 0:
                acc += s << d
            else:
                neg = s < 0
                mag = -s if neg else s
                if below == _TRUNC:
                    t = 0 if -d >= 63 else (mag >> (-d))
                    acc += -t if neg else t
                else:  # floor: toward -inf
                    if neg:
                        t = 1 if -d >= 62 else ((mag + (1 << (-d)) - 1) >> (-d))
                        acc -= t
                    else:
                        acc += 0 if -d >= 63 else (mag >> (-d))
        if fused:
            return _round_acc(acc, ql, acc_mode)
        if grp_mode == _NONE:
            # exact group sum, then one rounding of c + sum
            if acc == 0:
                return c
            sigs[0] = acc
            lsbs[0] = ql
            m = 1
            if c != 0.0:
                sc, lc = _split32(c)
                sigs[1] = sc
                lsbs[1] = lc
                m = 2
            return _exact_round(sigs, lsbs, m, acc_mode)
        p = _round_int(acc, ql, grp_mode)
        return _add2_round(c, p, acc_mode)
    # 4. exact group sum
    if fused or grp_mode == _NONE:
        m = n
        if c != 0.0:
            sc, lc = _split32(c)
            sigs[m] = sc
            lsbs[m] = lc
            m += 1
        return _exact_round(sigs, lsbs, m, acc_mode)
    p = _exact_round(sigs, lsbs, n, grp_mode)
    return _add2_round(c, p, acc_mode)


@numba.njit(cache=True, nogil=True)
def _finish(y, snap, alpha, bf16):
    """Steps 6-7 on one FP32 value held in float64 (alpha < 0 means no alpha)."""
    if snap != _NO_FLOOR and math.isfinite(y):
        x = math.ldexp(y, snap)
        f = np.floor(x)  # float (numba's math.floor returns int64 and would overflow)
        d = x - f
        if d > 0.5 or (d == 0.5 and (f % 2.0) != 0.0):
            f += 1.0
        y = math.ldexp(f, -snap) + 0.0
    if alpha >= 0.0:
        y = float(np.float32(y * alpha)) + 0.0  # + 0.0: a zero result is +0
    return y


# ================================================================= the kernels
@numba.njit(cache=True, nogil=True, inline="always")
def _chain_end(c, big, pending, promo, promo_mode):
    """The chain's result (step 5): c, or with promotion the FP32 accumulator with any
    partial still pending added in (FPS-GEMM-1)."""
    if promo <= 0:
        return c
    return _add2_round(big, c, promo_mode) if pending else big


@numba.njit(cache=True, nogil=True)
def _gemm_products(sa, la, ea, spa, sb, lb, eb, spb, g, exact_exp, fused, window, below, efloor,
                   grp_mode, acc_mode, promo, promo_mode, snap, alpha, out, r0, r1):
    """General kernel: one term per product (FPS-GEMM-10).

    Operands: odd significand s, exponent l of the last bit, alignment exponent e,
    special code sp (0 finite, 1 +inf, 2 -inf, 3 nan)."""
    k = sa.shape[1]
    n_rows = sb.shape[0]
    sigs = np.empty(g + 2, dtype=np.int64)
    lsbs = np.empty(g + 2, dtype=np.int64)
    aexps = np.empty(g + 2, dtype=np.int64)
    for i in range(r0, r1):
        for j in range(n_rows):
            c = 0.0
            big = 0.0
            pending = False
            k0 = 0
            while k0 < k:
                k1 = min(k0 + g, k)
                n = 0
                nspec = 0.0
                for kk in range(k0, k1):
                    xa = spa[i, kk]
                    xb = spb[j, kk]
                    if xa != 0 or xb != 0:
                        if xa == 3 or xb == 3:
                            v = math.nan
                        elif (xa == 0 and sa[i, kk] == 0) or (xb == 0 and sb[j, kk] == 0):
                            v = math.nan  # 0 x inf
                        else:
                            neg = (xa == 2 or (xa == 0 and sa[i, kk] < 0)) != \
                                (xb == 2 or (xb == 0 and sb[j, kk] < 0))
                            v = -math.inf if neg else math.inf
                        nspec = v if nspec == 0.0 else _add_special(nspec, v)
                        continue
                    s = np.int64(sa[i, kk]) * np.int64(sb[j, kk])
                    if s == 0:
                        continue
                    sigs[n] = s
                    lsbs[n] = np.int64(la[i, kk]) + np.int64(lb[j, kk])
                    if exact_exp:
                        aexps[n] = lsbs[n] + _bitlen(s if s > 0 else -s) - 1
                    else:
                        aexps[n] = np.int64(ea[i, kk]) + np.int64(eb[j, kk])
                    n += 1
                c = _group(c, sigs, lsbs, aexps, n, nspec, fused, window, below, efloor,
                           grp_mode, acc_mode)
                pending = True
                if promo > 0 and k1 % promo == 0:
                    big = _add2_round(big, c, promo_mode)
                    c = 0.0
                    pending = False
                k0 = k1
            out[i, j] = _finish(_chain_end(c, big, pending, promo, promo_mode), snap, alpha, False)


@numba.njit(cache=True, nogil=True)
def _gemm_blocks(pa, ssa, sla, pb, ssb, slb, bsz, plsb, g, exact_terms, fused, window, below, efloor,
                 grp_mode, acc_mode, promo, promo_mode, snap, alpha, out, r0, r1):
    """E2M1 kernel: one term per scale block (FPS-GEMM-10).

    ``pa``/``pb``: payload integers (2 x E2M1 value, int8) of shape (rows, K);
    ``ssa``/``sla``: block scale odd significand and exponent per (row, block); a block
    term is (sum of payload products) x ssa x ssb x 2^(sla + slb + plsb).  Used when no
    window applies to single products (no window, or scale_placement=block); g and
    promo are multiples of bsz."""
    k = pa.shape[1]
    n_rows = pb.shape[0]
    nblk = k // bsz
    gb = g // bsz
    sigs = np.empty(gb + 2, dtype=np.int64)
    lsbs = np.empty(gb + 2, dtype=np.int64)
    aexps = np.empty(gb + 2, dtype=np.int64)
    for i in range(r0, r1):
        arow = pa[i]
        for j in range(n_rows):
            brow = pb[j]
            c = 0.0
            big = 0.0
            pending = False
            b0 = 0
            while b0 < nblk:
                b1 = min(b0 + gb, nblk)
                n = 0
                for blk in range(b0, b1):
                    acc = np.int32(0)
                    base = blk * bsz
                    for kk in range(bsz):
                        acc += np.int32(arow[base + kk]) * np.int32(brow[base + kk])
                    if acc == 0:
                        continue
                    s = np.int64(acc) * (np.int64(ssa[i, blk]) * np.int64(ssb[j, blk]))
                    if s == 0:
                        continue
                    sigs[n] = s
                    lsbs[n] = np.int64(sla[i, blk]) + np.int64(slb[j, blk]) + plsb
                    if exact_terms:
                        aexps[n] = lsbs[n] + _bitlen(s if s > 0 else -s) - 1
                    n += 1
                c = _group(c, sigs, lsbs, aexps, n, 0.0, fused, window, below, efloor,
                           grp_mode, acc_mode)
                pending = True
                if promo > 0 and (b1 * bsz) % promo == 0:
                    big = _add2_round(big, c, promo_mode)
                    c = 0.0
                    pending = False
                b0 = b1
            out[i, j] = _finish(_chain_end(c, big, pending, promo, promo_mode), snap, alpha, False)


@numba.njit(cache=True, nogil=True)
def _apply_exact_sum(c, acc, e, fused, grp_mode, acc_mode, sigs, lsbs):
    """Step 4 given the group's exact sum acc * 2^e (no window applied to c)."""
    if fused or grp_mode == _NONE:
        if not math.isfinite(c):
            return c
        if acc == 0:
            return c
        if c == 0.0:
            return _round_acc(acc, e, acc_mode)
        sigs[0] = acc
        lsbs[0] = e
        sc, lc = _split32(c)
        sigs[1] = sc
        lsbs[1] = lc
        return _exact_round(sigs, lsbs, 2, acc_mode)
    if acc == 0:
        return c
    return _add2_round(c, _round_int(acc, e, grp_mode), acc_mode)


@numba.njit(cache=True, nogil=True)
def _gemm_blocks_rows(pa, pbt, sal, sbtl, basea, baseb, wa, wb, ssa, sla, ssbt, slbt, bsz, plsb, g,
                      fused, grp_mode, acc_mode, promo, promo_mode, snap, alpha, out, r0, r1):
    """E2M1 kernel without a window, vectorised over the N outputs of a row (FPS-GEMM-10).

    Block sums of payload integers (|2q| <= 12, so |sum| <= 144 B < 2^31) accumulate in
    int32 lanes across j.  Per (row, group) the block scales are integers relative to the
    group's smallest scale exponent (``sal`` = sig << (lsb - basea), width ``wa`` bits);
    when ``bitlen(144 B) + wa + wb + bitlen(groups blocks) <= 62`` the group sum is one
    int64 dot, else the terms go through the exact (limb) fallback."""
    k = pa.shape[1]
    n = pbt.shape[1]
    nblk = k // bsz
    gb = g // bsz
    bs = np.zeros((gb, n), dtype=np.int32)
    c = np.zeros(n, dtype=np.float64)
    big = np.zeros(n, dtype=np.float64)
    sigs = np.empty(gb + 2, dtype=np.int64)
    lsbs = np.empty(gb + 2, dtype=np.int64)
    bsum_bits = _bitlen(144 * bsz) + _bitlen(gb)
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        pending = False
        gi = 0
        b0 = 0
        while b0 < nblk:
            b1 = min(b0 + gb, nblk)
            nb = b1 - b0
            bs[:nb, :] = 0
            for bl in range(nb):
                row = bs[bl]
                for kk in range((b0 + bl) * bsz, (b0 + bl + 1) * bsz):
                    av = np.int32(pa[i, kk])
                    if av != 0:
                        brow = pbt[kk]
                        for j in range(n):
                            row[j] += av * np.int32(brow[j])
            for j in range(n):
                if wa[i, gi] + wb[gi, j] + bsum_bits <= 62:
                    acc = np.int64(0)
                    for bl in range(nb):
                        acc += np.int64(bs[bl, j]) * sal[i, b0 + bl] * sbtl[b0 + bl, j]
                    c[j] = _apply_exact_sum(c[j], acc, basea[i, gi] + baseb[gi, j] + plsb, fused,
                                            grp_mode, acc_mode, sigs, lsbs)
                else:
                    m = 0
                    for bl in range(nb):
                        s = np.int64(bs[bl, j]) * (np.int64(ssa[i, b0 + bl]) * np.int64(ssbt[b0 + bl, j]))
                        if s != 0:
                            sigs[m] = s
                            lsbs[m] = np.int64(sla[i, b0 + bl]) + np.int64(slbt[b0 + bl, j]) + plsb
                            m += 1
                    c[j] = _group(c[j], sigs, lsbs, lsbs, m, 0.0, fused, _NO_FLOOR, _TRUNC, _NO_FLOOR,
                                  grp_mode, acc_mode)
            pending = True
            if promo > 0 and (b1 * bsz) % promo == 0:
                for j in range(n):
                    big[j] = _add2_round(big[j], c[j], promo_mode)
                    c[j] = 0.0
                pending = False
            b0 = b1
            gi += 1
        for j in range(n):
            out[i, j] = _finish(_chain_end(c[j], big[j], pending, promo, promo_mode), snap, alpha, False)


@numba.njit(cache=True, nogil=True)
def _gemm_window_rows(sa, la, ea, sbt, lbt, ebt, g, fused, window, below, efloor, grp_mode, acc_mode,
                      promo, promo_mode, snap, alpha, out, r0, r1):
    """Window kernel for finite operands with ``product_exponent="operands"``, vectorised
    over the N outputs of a row (FPS-GEMM-10).  Per group: E[j] = max(ea + eb) over the
    nonzero products (and c's FP32 exponent when fused), then the kept multiples of
    2^(E-F) of every term summed in int64 (|sum| < 2^(F + 2 + bitlen(G + 1)) <= 2^62)."""
    k = sa.shape[1]
    n = sbt.shape[1]
    none = -(1 << 30)
    emax = np.empty(n, dtype=np.int64)
    acc = np.empty(n, dtype=np.int64)
    c = np.zeros(n, dtype=np.float64)
    big = np.zeros(n, dtype=np.float64)
    sigs = np.empty(4, dtype=np.int64)
    lsbs = np.empty(4, dtype=np.int64)
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        pending = False
        k0 = 0
        while k0 < k:
            k1 = min(k0 + g, k)
            for j in range(n):
                emax[j] = none
                acc[j] = 0
                if fused and c[j] != 0.0 and math.isfinite(c[j]):
                    emax[j] = _exp32(c[j])
            for kk in range(k0, k1):
                s_a = np.int64(sa[i, kk])
                if s_a == 0:
                    continue
                e_a = np.int64(ea[i, kk])
                erow = ebt[kk]
                srow = sbt[kk]
                for j in range(n):
                    cand = e_a + np.int64(erow[j]) if srow[j] != 0 else none
                    if cand > emax[j]:
                        emax[j] = cand
            for j in range(n):
                if emax[j] != none and emax[j] < efloor:
                    emax[j] = efloor
            if fused:
                for j in range(n):
                    if c[j] != 0.0 and math.isfinite(c[j]):
                        sc, lc = _split32(c[j])
                        acc[j] = _keep(sc, lc - (emax[j] - window), below)
            for kk in range(k0, k1):
                s_a = np.int64(sa[i, kk])
                if s_a == 0:
                    continue
                l_a = np.int64(la[i, kk]) + window  # d = la + lb - (E - F)
                lrow = lbt[kk]
                srow = sbt[kk]
                for j in range(n):
                    s = s_a * np.int64(srow[j])
                    d = l_a + np.int64(lrow[j]) - emax[j]
                    acc[j] += _keep(s, d, below)
            for j in range(n):
                cj = c[j]
                if emax[j] == none or (not math.isfinite(cj) and (fused or grp_mode == _NONE)):
                    continue
                ql = emax[j] - window
                if fused:
                    c[j] = _round_acc(acc[j], ql, acc_mode)
                elif grp_mode == _NONE:
                    c[j] = _apply_exact_sum(cj, acc[j], ql, False, _NONE, acc_mode, sigs, lsbs)
                else:
                    c[j] = _add2_round(cj, _round_int(acc[j], ql, grp_mode), acc_mode)
            pending = True
            if promo > 0 and k1 % promo == 0:
                for j in range(n):
                    big[j] = _add2_round(big[j], c[j], promo_mode)
                    c[j] = 0.0
                pending = False
            k0 = k1
        for j in range(n):
            out[i, j] = _finish(_chain_end(c[j], big[j], pending, promo, promo_mode), snap, alpha, False)


@numba.njit(cache=True, nogil=True)
def _gemm_fp32_rows(va, vbt, promo, snap, alpha, out, r0, r1):
    """Sequential FP32 arithmetic (G = 1, product RNE, add RNE, promotion RNE), vectorised
    over the N outputs of a row (FPS-GEMM-10).  IEEE float32 * and + are correctly
    rounded RNE with subnormals (no fast-math, no FMA contraction), which is exactly
    p = RNE32(a b), c = RNE32(c + p); Inf and NaN follow IEEE as in FPS-GEMM-2, and c
    is never -0 (it starts at +0 and x + y is -0 only for -0 + -0)."""
    k = va.shape[1]
    n = vbt.shape[1]
    c = np.zeros(n, dtype=np.float32)
    big = np.zeros(n, dtype=np.float32)
    for i in range(r0, r1):
        c[:] = 0.0
        big[:] = 0.0
        pending = False
        for kk in range(k):
            a = va[i, kk]
            row = vbt[kk]
            for j in range(n):
                p = a * row[j]
                c[j] = c[j] + p
            pending = True
            if promo > 0 and (kk + 1) % promo == 0:
                for j in range(n):
                    big[j] = big[j] + c[j]
                    c[j] = 0.0
                pending = False
        for j in range(n):
            y = c[j]
            if promo > 0:
                y = big[j] + c[j] if pending else big[j]
            out[i, j] = _finish(np.float64(y) + 0.0, snap, alpha, False)


@numba.njit(cache=True, nogil=True, inline="always")
def _keep(s, d, below):
    """The kept part of s * 2^d in units of the window quantum (d = lsb - quantum exponent)."""
    if s == 0:
        return np.int64(0)
    if d >= 0:
        return s << d
    neg = s < 0
    mag = -s if neg else s
    sh = -d
    if below == _TRUNC or not neg:
        t = np.int64(0) if sh >= 63 else (mag >> sh)
        return -t if neg else t
    t = np.int64(1) if sh >= 62 else ((mag + (np.int64(1) << sh) - 1) >> sh)
    return -t


# ============================================================ operand decoding
def _split_values(v: np.ndarray, emin: int | None):
    """float64 values -> (odd sig int32, lsb int16, alignment exponent int16, special int8)."""
    v = np.asarray(v, dtype=np.float64)
    spec = np.zeros(v.shape, dtype=np.int8)
    spec[np.isposinf(v)] = 1
    spec[np.isneginf(v)] = 2
    spec[np.isnan(v)] = 3
    fin = np.where(spec == 0, v, 0.0)
    m, e = np.frexp(fin)
    sig = np.ldexp(m, 53).astype(np.int64)
    lsb = (e.astype(np.int64) - 53)
    aexp = e.astype(np.int64) - 1
    if emin is not None:
        aexp = np.maximum(aexp, emin)
    nz = sig != 0
    for _ in range(53):
        even = nz & ((sig & 1) == 0)
        if not even.any():
            break
        sig = np.where(even, sig >> 1, sig)
        lsb = np.where(even, lsb + 1, lsb)
    if np.abs(sig).max(initial=0) >= (1 << 31):
        raise FpspecError("operand significand wider than 31 bits (internal)")
    lsb = np.where(nz, lsb, 0)
    aexp = np.where(nz, aexp, 0)
    return sig.astype(np.int32), lsb.astype(np.int32), aexp.astype(np.int32), spec


def _code_table(fmt: FloatFormat) -> np.ndarray:
    """float64 value of every code (exact): fp16 and bf16 from their bits, 8-bit formats
    from the exact decode table."""
    if fmt.name == "fp16":
        return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt.name == "bf16":
        with np.errstate(invalid="ignore"):  # NaN patterns widen to NaN
            return (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)
    return decode_table(fmt)


def _code_operand(codes: np.ndarray, fmt: FloatFormat, model: GemmModel):
    table = _code_table(fmt)
    emin = FP32_EMIN if model.operand_domain == "decoded-fp32" else fmt.emin
    s, l, e, sp = _split_values(table, emin)
    idx = codes.astype(np.intp)
    return s[idx], l[idx], e[idx], sp[idx]


def _payload_int(qt) -> np.ndarray:
    """2 x E2M1 value of every payload code, int8 (exact: values are multiples of 1/2)."""
    table = decode_table(get_format(qt.payload_format))
    lut = (table * 2).astype(np.int8)
    if qt.codes.max(initial=0) >= len(lut):
        raise FpspecError(f"payload code out of range for {qt.payload_format}")
    return lut[qt.codes.astype(np.intp)]


def _scale_values(qt) -> np.ndarray:
    fmt = get_format(qt.scale_format)
    if qt.scales.max(initial=0) >= fmt.num_codes:
        bad = int(np.argmax(qt.scales.reshape(-1) >= fmt.num_codes))
        raise FpspecError(f"scale code {int(qt.scales.reshape(-1)[bad])} out of range for {fmt.name}",
                          tuple(int(x) for x in np.unravel_index(bad, qt.scales.shape)))
    grid = qt.scales if qt.tile == "1xB" else np.repeat(qt.scales, qt.block, axis=0)
    return decode_table(fmt)[grid.astype(np.intp)]


def _quantized_operand(qt, model: GemmModel):
    """Per-element (sig, lsb, aexp, special) of a QuantizedTensor in the model's domain."""
    v = _quantized_values(qt, model)
    return _split_values(v, FP32_EMIN if model.operand_domain == "decoded-fp32" else None)


def _quantized_values(qt, model: GemmModel) -> np.ndarray:
    """float64 operand values of a QuantizedTensor in the model's domain (exact)."""
    p = decode_table(get_format(qt.payload_format))[qt.codes.astype(np.intp)]
    s = np.repeat(_scale_values(qt), qt.block, axis=1)
    with np.errstate(invalid="ignore"):
        v = p * s  # exact: 2-bit x 4-bit significands (or x 1 for E8M0), in float64 range
    if model.operand_domain == "encoded":
        return v
    d = float(np.float32(qt.decode_scale))
    if model.operand_domain == "decoded-fp32":
        with np.errstate(invalid="ignore", over="ignore"):
            w = v * d  # exact in float64: <= 6 + 24 significant bits, exponents within range
            return w.astype(np.float32).astype(np.float64)  # one IEEE rounding, RNE
    with np.errstate(invalid="ignore"):
        return v * d  # exact: < 2^30 significand, exponent >= -149 - 17 - 1


# ================================================================== dispatcher
def _run_rows(kernel, m: int, args: tuple) -> None:
    """Run a nogil row-range kernel over rows 0..m-1 (:func:`fpspec.fast.parallel.run_rows`);
    the work is the outputs times the operands' K."""
    k = args[0].shape[1] if args[0].ndim == 2 else 1
    run_rows(kernel, m, args, args[-1].size * max(1, k))


def supports(model: GemmModel, k: int) -> bool:
    """Whether the fast path covers this model (else gemm uses the exact path)."""
    if model.window_bits is not None:
        g = model.group_size or k
        if model.window_bits + 2 + (g + 2).bit_length() > 62 or model.window_bits < -60:
            return False
    return model.alpha_rounding != "exact" or model.alpha_source == "none"


def _canonical_nan(y: np.ndarray) -> np.ndarray:
    """Every NaN as the one output NaN, 0x7FC00000 (FPS-GEMM-2)."""
    nan = np.isnan(y)
    if nan.any():
        y[nan] = np.uint32(0x7FC00000).view(np.float32)
    return y


def _fp32_exact(v: np.ndarray) -> bool:
    """Whether every value is an FP32 value (NaN and Inf included)."""
    with np.errstate(invalid="ignore", over="ignore"):
        w = v.astype(np.float32).astype(np.float64)
    return bool(np.array_equal(w, v, equal_nan=True))


def _round_bf16_bits(y: np.ndarray) -> np.ndarray:
    """RNE of FP32 values to BF16 on the bits (NaN kept quiet), back to float32."""
    bits = y.astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(y)
    r = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    r = np.where(nan, 0x7FC00000, r).astype(np.uint32)
    return r.view(np.float32)


def _products(sa, la, ea, spa, sb, lb, eb, spb, g, model, window, below, efloor, grp, accm, promo,
              promo_mode, snap, alpha_f, out) -> None:
    """Product terms: the vectorised window kernel where it applies, else the general one."""
    m = sa.shape[0]
    if (window != _NO_FLOOR and model.product_exponent == "operands" and not spa.any()
            and not spb.any()):
        _run_rows(_gemm_window_rows, m, (sa, la, ea, np.ascontiguousarray(sb.T),
                                         np.ascontiguousarray(lb.T), np.ascontiguousarray(eb.T), g,
                                         model.fused, window, below, efloor, grp, accm, promo,
                                         promo_mode, snap, alpha_f, out))
        return
    _run_rows(_gemm_products, m, (sa, la, ea, spa, sb, lb, eb, spb, g, model.product_exponent == "exact",
                                  model.fused, window, below, efloor, grp, accm, promo, promo_mode, snap,
                                  alpha_f, out))


def _local_scales(sv: np.ndarray, gb: int):
    """Block scales as integers relative to each (row, group)'s smallest scale exponent.

    Returns (local ints int64, base exponent per (row, group), width in bits per (row,
    group); width 99 when a group's span does not fit, then the ints are unused)."""
    sig, lsb, _, _ = _split_values(sv, None)
    sig = sig.astype(np.int64)
    lsb = lsb.astype(np.int64)
    rows, nblk = sig.shape
    ng = -(-nblk // gb)
    pad = ng * gb - nblk
    big = np.int64(1 << 40)
    lsb_nz = np.where(sig != 0, lsb, big)
    lp = np.pad(lsb_nz, ((0, 0), (0, pad)), constant_values=big).reshape(rows, ng, gb)
    base = lp.min(axis=2)
    base = np.where(base == big, 0, base)
    shift = np.where(sig != 0, lsb - np.repeat(base, gb, axis=1)[:, :nblk], 0)
    width_el = np.where(sig != 0, _bitlen_np(np.abs(sig)) + shift, 0)
    wp = np.pad(width_el, ((0, 0), (0, pad))).reshape(rows, ng, gb)
    width = wp.max(axis=2)
    ok_el = np.repeat(width, gb, axis=1)[:, :nblk] <= 40
    local = np.where(ok_el & (sig != 0), sig << np.clip(shift, 0, 62), 0)
    width = np.where(width <= 40, width, 99)
    return local.astype(np.int64), base.astype(np.int64), width.astype(np.int64), sig, lsb


def _bitlen_np(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.int64)
    n = np.zeros(x.shape, dtype=np.int64)
    for b in range(62, -1, -1):
        hit = (n == 0) & (x >= (np.int64(1) << b))
        n = np.where(hit, b + 1, n)
    return n


def _blocks_rows(a, bt, sva, svb, g, model, grp, accm, promo, promo_mode, snap, alpha_f, out) -> None:
    bsz = a.block
    gb = g // bsz
    sal, basea, wa, ssa, sla = _local_scales(sva, gb)
    sbl, baseb, wb, ssb, slb = _local_scales(svb, gb)
    _run_rows(_gemm_blocks_rows, a.shape[0], (
        _payload_int(a), np.ascontiguousarray(_payload_int(bt).T), sal, np.ascontiguousarray(sbl.T),
        basea, np.ascontiguousarray(baseb.T), wa, np.ascontiguousarray(wb.T), ssa, sla,
        np.ascontiguousarray(ssb.T), np.ascontiguousarray(slb.T), bsz, -2, g, model.fused, grp, accm,
        promo, promo_mode, snap, alpha_f, out))


def gemm_fast(a, bt, model: GemmModel, *, fmt: str | None = None,
              alpha: Fraction | None = None) -> np.ndarray:
    """The fast GEMM (bit-equal to :func:`fpspec.exact.accumulate.gemm_exact`).

    Arguments are already validated by :func:`fpspec.matmul.gemm`; ``alpha`` is the FP32
    alpha (a Fraction) or None.
    """
    from ..quantized import QuantizedTensor

    quantized = isinstance(a, QuantizedTensor)
    k = a.shape[1]
    if model.split_k is not None and model.split_k < k:
        return _gemm_split(a, bt, model, fmt, alpha, quantized)
    g_raw = model.group_size
    g = g_raw if g_raw is not None else max(k, 1)
    window = model.window_bits if model.window_bits is not None else _NO_FLOOR
    below = _FLOOR if model.below_window == "floor" else _TRUNC
    efloor = model.align_exponent_floor if model.align_exponent_floor is not None else _NO_FLOOR
    grp = _MODE[model.group_rounding]
    # the accumulator's rounding packs mode and kept bits: mode + 4 (23 - accumulate_bits)
    accm = _MODE[model.accumulate_rounding] + 4 * (23 - model.accumulate_bits)
    promo = model.promotion_interval or 0
    promo_mode = _MODE[model.promotion_rounding]
    snap = model.snap_bits if model.snap_bits is not None else _NO_FLOOR
    alpha_f = float(alpha) if alpha is not None else -1.0
    if alpha is not None and alpha == 0:
        alpha_f = 0.0
    m, n = a.shape[0], bt.shape[0]
    out = np.empty((m, n), dtype=np.float64)

    if (model.window_bits is None and g == 1 and not model.fused and model.group_rounding == "rne"
            and model.accumulate_bits == 23
            and model.accumulate_rounding == "rne" and (promo == 0 or model.promotion_rounding == "rne")
            and model.operand_domain != "decoded-exact"):
        # sequential FP32 arithmetic: every operand value is an FP32 value here (FP8/16 codes,
        # encoded E2M1 x scale with <= 6 significant bits and |exponent| < 127 + 17 + 3, or
        # FP32-decoded values)
        if quantized:
            va, vb = _quantized_values(a, model), _quantized_values(bt, model)
        else:
            f = get_format(fmt)
            va, vb = _code_table(f)[np.asarray(a).astype(np.intp)], _code_table(f)[np.asarray(bt).astype(np.intp)]
        if _fp32_exact(va) and _fp32_exact(vb):
            _run_rows(_gemm_fp32_rows, m, (va.astype(np.float32), np.ascontiguousarray(vb.astype(np.float32).T),
                                           promo, snap, alpha_f, out))
            y = _canonical_nan(out.astype(np.float32))
            return _round_bf16_bits(y) if model.output_format == "bf16" else y
    if quantized and model.operand_domain == "encoded":
        sva, svb = _scale_values(a), _scale_values(bt)
        finite = bool(np.isfinite(sva).all() and np.isfinite(svb).all())
        bsz = a.block
        whole = bsz == bt.block and g % bsz == 0 and (promo == 0 or promo % bsz == 0) and bsz <= 1024
        if finite and whole and model.window_bits is None:
            _blocks_rows(a, bt, sva, svb, g, model, grp, accm, promo, promo_mode, snap, alpha_f, out)
        elif finite and whole and model.scale_placement == "block":
            ssa, sla, _, _ = _split_values(sva, None)
            ssb, slb, _, _ = _split_values(svb, None)
            _run_rows(_gemm_blocks, m, (_payload_int(a), ssa, sla, _payload_int(bt), ssb, slb, bsz, -2, g,
                                        True, model.fused, window, below, efloor, grp, accm, promo,
                                        promo_mode, snap, alpha_f, out))
        elif model.scale_placement == "block" and model.window_bits is not None:
            raise FastPathUnsupported()  # block terms with NaN scales or odd group sizes
        else:
            _products(*_quantized_operand(a, model), *_quantized_operand(bt, model), g, model, window,
                      below, efloor, grp, accm, promo, promo_mode, snap, alpha_f, out)
    else:
        if quantized:
            opa, opb = _quantized_operand(a, model), _quantized_operand(bt, model)
        else:
            f = get_format(fmt)
            opa, opb = _code_operand(np.asarray(a), f, model), _code_operand(np.asarray(bt), f, model)
        _products(*opa, *opb, g, model, window, below, efloor, grp, accm, promo, promo_mode, snap,
                  alpha_f, out)
    y = _canonical_nan(out.astype(np.float32))  # exact: every entry is an FP32 value
    if model.output_format == "bf16":
        y = _round_bf16_bits(y)
    return y


def _slice_k(x, k0: int, k1: int, quantized: bool):
    """Columns k0..k1-1 of an operand (a QuantizedTensor's scales with them; k0 and k1
    are multiples of its block, checked by check_quantized_pair)."""
    if not quantized:
        return np.ascontiguousarray(np.asarray(x)[:, k0:k1])
    import dataclasses

    return dataclasses.replace(x, codes=np.ascontiguousarray(x.codes[:, k0:k1]),
                               scales=np.ascontiguousarray(x.scales[:, k0 // x.block:-(-k1 // x.block)]))


@numba.njit(cache=True, nogil=True)
def _finish_all(y, snap, alpha, out):
    for i in range(y.size):
        out[i] = _finish(y[i], snap, alpha, False)


def _gemm_split(a, bt, model: GemmModel, fmt, alpha, quantized: bool) -> np.ndarray:
    """Step 5b (FPS-GEMM-14): each slice of split_k products is a chain of its own (the
    same kernels on the sliced operands, without steps 6-8); the slice results, FP32
    values, are added in order with numpy float32 + (IEEE, RNE; Inf and NaN as IEEE);
    then snap, alpha and the output conversion as for one chain."""
    k = a.shape[1]
    inner = model.replace(split_k=None, snap_bits=None, output_format="fp32")
    total = None
    for k0 in range(0, k, model.split_k):
        k1 = min(k0 + model.split_k, k)
        part = gemm_fast(_slice_k(a, k0, k1, quantized), _slice_k(bt, k0, k1, quantized), inner,
                         fmt=fmt, alpha=None)
        if total is None:
            total = part
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                total = total + part
    assert total is not None
    y64 = total.astype(np.float64).reshape(-1) + 0.0  # +0.0: a zero sum of slices is +0
    out = np.empty_like(y64)
    snap = model.snap_bits if model.snap_bits is not None else _NO_FLOOR
    alpha_f = float(alpha) if alpha is not None else -1.0
    _finish_all(y64, snap, alpha_f, out)
    y = _canonical_nan(out.astype(np.float32).reshape(total.shape))
    return _round_bf16_bits(y) if model.output_format == "bf16" else y


class FastPathUnsupported(Exception):
    """Raised for a configuration the fast path leaves to the exact one."""


def round_int_to_fp32(s: int, e: int, mode: str = "rne", bits: int = 23) -> float:
    """Test hook: the fast integer-to-FP32 rounding (:func:`_round_int`), to ``bits``
    fraction bits (:func:`_round_acc`)."""
    return float(_round_acc(np.int64(s), np.int64(e), _MODE[mode] + 4 * (23 - bits)))


def add2_round_fp32(x: float, y: float, mode: str = "rne", bits: int = 23) -> float:
    """Test hook: the fast FP32 addition with rounding to ``bits`` fraction bits (:func:`_add2_round`)."""
    return float(_add2_round(float(x), float(y), _MODE[mode] + 4 * (23 - bits)))
