"""FP32 rounding of exact values for the fast GEMM path: the twin of the exact spec's
``round_fp32`` / ``round_acc`` (:mod:`fpspec.exact.binary32`) (FPS-GEMM-10, FPS-GEMM-13).

The exact spec rounds a :class:`~fractions.Fraction`; the fast path never holds one.
An exact value reaches these functions in one of three carriers, and each rounding
has one function per carrier:

=========================================  =============================================
exact spec                                 fast twin (carrier)
=========================================  =============================================
``round_acc(x, mode, bits)``               :func:`round_acc_int` (integer s 2^e),
                                           :func:`round_acc_pair` (float64 v + exact err),
                                           :func:`round_acc_terms` (sum of n terms s_i 2^l_i)
``round_fp32(x, mode)``                    the same with bits = 23 (:func:`round_fp32_int`,
                                           :func:`round_fp32_pair`)
``round_acc(x + y, mode, bits)``, x, y     :func:`add_round` (TwoSum pair);
FP32                                       :func:`add_round_int` (x + s 2^e)
``add_specials``                           :func:`add_specials`
``fp32_exponent``                          :func:`fp32_exponent`
=========================================  =============================================

``mode`` is :data:`RNE` or :data:`RTZ`; ``lat`` the accumulator's :class:`Lattice`: the
kept fraction bits (0..23) in an exponent range (quantum 2^(max(e, emin) - bits), overflow
at 2^top, FP32: emin -126, top 128; an FP16 accumulator: -14, 16), and whether an RTZ
overflow gives Inf (FPS-GEMM-13, FPS-GEMM-17, FPS-GEMM-19).  Results are FP32 values (or
accumulator values of fewer bits) held in float64, which is exact; a zero result is +0.

Exactness (docs/gemm.rst, "The fast path"):

* **Integers** ``s 2^e``: below 2^53 (and e in [-1000, 900]) the value is an exact
  float64 and is rounded as a pair with err = 0; otherwise on the integer (23 bits), or
  cut to its top 54 bits plus a sticky bit, an exact pair whose rounding to <= 24
  significant bits is the same (fewer bits).
* **Pairs** ``v + err`` (v the float64 nearest to the exact value, |err| <= ulp(v)/2):
  every FP32 value and midpoint, and every point and midpoint of a lattice of fewer
  bits, is a float64, so the exact value lies on v's side of each of them; err decides
  only when v is itself a lattice point (RTZ: one step toward zero, half a step at the
  bottom of a binade) or a midpoint (RNE: the sign of err).
* **Adding two FP32 values**: TwoSum gives s + err = x + y exactly in float64.
* **Sums of terms**: shifted to the smallest exponent and summed in int64 when the span
  fits 62 bits, else in a multi-limb integer (30-bit digits), exact for any span.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..exact.binary32 import FLT_MAX, FP32_EMIN
from .jit import gemm_jit

__all__ = ["RNE", "RTZ", "MODE_CODES", "FP32_BITS", "FP32_QUANTUM_EXP", "FLOAT32_BITS", "FLOAT64_BITS", "FP32_TOP",
           "POW2", "POW2_LO", "POW2_HI", "Lattice", "FP32_LATTICE", "lattice", "bitlen", "round_fp32_pair",
           "round_acc_pair", "round_fp32_int", "round_acc_int", "round_acc_terms", "add_round", "add_round_fp32",
           "add_round_int", "add_specials", "split_fp32", "fp32_exponent", "py_round_acc_int", "py_add_round"]

#: Rounding-mode codes of the compiled functions.
RNE = 0
RTZ = 1
#: Mode name (``RoundingMode`` vocabulary; ``rz`` is the GEMM models' alias) -> code.
MODE_CODES: dict[str, int] = {"rne": RNE, "rtz": RTZ, "rz": RTZ}

#: Number of kept fraction bits of an FP32 value.
FP32_BITS = 23
#: Exponent of the smallest FP32 subnormal quantum, 2^-149.
FP32_QUANTUM_EXP = FP32_EMIN - FP32_BITS
#: Significant bits of an FP32 number, the leading one included: a multiple of 2^L below
#: 2^(L + 24), with L >= FP32_QUANTUM_EXP and L + 24 <= FP32_TOP, is an FP32 number.
FLOAT32_BITS = FP32_BITS + 1
#: Every finite FP32 value lies below 2^FP32_TOP.
FP32_TOP = 128

#: Significand bits of float64: a multiple of 2^L below 2^(L + 53) is a float64 number.
FLOAT64_BITS = 53

#: ``POW2[e - POW2_LO]`` is 2^e for e in [POW2_LO, POW2_HI]: exact float64 constants
#: (multiplying by them is exact scaling), the one table of the GEMM path.
POW2_LO, POW2_HI = -1000, 1000
POW2 = np.array([math.ldexp(1.0, e) for e in range(POW2_LO, POW2_HI + 1)], dtype=np.float64)
#: The exponents e at which an integer s below 2^55 is scaled to the float64 s 2^e by a
#: product with POW2 here (far inside float64's range, whatever s's size).
_SCALED_LO, _SCALED_HI = -1000, 900
#: the smallest float64 that RNE32 sends to infinity: 2^128 - 2^103 (a midpoint)
_F32_OVERFLOW = math.ldexp(1.0, 128) - math.ldexp(1.0, 103)
#: limb width of the multi-limb sum
_LIMB = 30
_LIMB_MASK = (1 << _LIMB) - 1
#: the top / bottom of an empty sum's span
_SPAN_NONE = 1 << 30


class Lattice(NamedTuple):
    """The values an accumulator rounding produces (exact spec: ``round_acc``'s arguments):
    ``bits`` fraction bits at exponent max(e, ``emin``), magnitudes >= 2^``top`` overflow (Inf
    under RNE; under RTZ Inf when ``overflow_inf``, else the largest lattice value)."""

    bits: int
    emin: int
    top: int
    overflow_inf: bool


#: FP32 with IEEE overflow: the rounding of every FP32 step of the chain.
FP32_LATTICE = Lattice(FP32_BITS, FP32_EMIN, 128, False)


def lattice(bits: int = FP32_BITS, emin: int = FP32_EMIN, top: int = 128, overflow_inf: bool = False) -> Lattice:
    """A :class:`Lattice` (Python side; the compiled functions take the tuple)."""
    return Lattice(int(bits), int(emin), int(top), bool(overflow_inf))


@gemm_jit(inline=True)
def _is_fp32(lat):
    """Whether the lattice is FP32 with IEEE overflow (rounded by IEEE conversions)."""
    return lat.bits == FP32_BITS and lat.emin == FP32_EMIN and lat.top == 128 and not lat.overflow_inf


# ===================================================================== integers
@gemm_jit
def bitlen(x):
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


@gemm_jit
def split_fp32(v):
    """(sig, lsb) of a finite nonzero FP32 value held in float64: v = sig 2^lsb, |sig| < 2^24."""
    m, ex = math.frexp(v)
    sig = np.int64(math.ldexp(m, 24))
    return sig, ex - 24


@gemm_jit
def fp32_exponent(v):
    """Alignment exponent of a finite nonzero FP32 value: max(floor(log2|v|), -126)
    (exact spec: ``fp32_exponent``)."""
    m, ex = math.frexp(v)
    e = ex - 1
    return e if e > FP32_EMIN else FP32_EMIN


@gemm_jit
def add_specials(x, y):
    """IEEE x + y where one of them is not finite (exact spec: ``add_specials``)."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if math.isinf(x) and math.isinf(y):
        return x if x == y else math.nan
    return x if math.isinf(x) else y


# ======================================================================== pairs
@gemm_jit
def _rtz32(v):
    """RTZ of a finite nonzero float64 to FP32 (subnormals; beyond max -> max finite):
    the RNE conversion, stepped one FP32 value toward zero when it went outward."""
    f = np.float32(v)
    if abs(np.float64(f)) > abs(v):
        f = np.nextafter(f, np.float32(0.0))
    return np.float64(f) + 0.0


@gemm_jit
def round_fp32_pair(v, err, mode):
    """FP32 rounding (RNE or RTZ) of the exact value v + err, where v is a finite float64
    and err is exact with |err| <= ulp64(v)/2 (0 when v is exact).  IEEE overflow: Inf
    under RNE, the largest finite value under RTZ.

    Every FP32 value and FP32 midpoint is a float64 and v is the float64 nearest to
    v + err, so err matters only when v is itself an FP32 value (RTZ) or an FP32 midpoint
    (RNE)."""
    if v == 0.0:
        return 0.0
    if mode == RTZ:
        f = _rtz32(v)
        if err != 0.0 and f == v and ((err < 0.0) != (v < 0.0)):
            f = np.float64(np.nextafter(np.float32(f), np.float32(0.0)))
        return f
    f32 = np.float32(v)
    f = np.float64(f32)
    if err != 0.0:
        if math.isinf(f):
            if abs(v) == _F32_OVERFLOW and ((err < 0.0) != (v < 0.0)):
                f = np.float64(np.nextafter(f32, np.float32(0.0)))
        elif f != v:
            o32 = np.nextafter(f32, np.float32(math.inf) if v > f else np.float32(-math.inf))
            o = np.float64(o32)
            if 2.0 * v == f + o and ((err > 0.0) == (o > f)):
                f = o
    return f + 0.0


@gemm_jit
def round_acc_pair(v, err, mode, lat):
    """Rounding of the exact value v + err to the accumulator lattice ``lat`` (FPS-GEMM-13);
    FP32 with IEEE overflow is :func:`round_fp32_pair`.  Same contract for err.

    Every value and midpoint of a lattice of at most 24 significant bits in FP32's range is
    a float64 too, so the argument of :func:`round_fp32_pair` carries over: r = v / quantum
    is exact (a power-of-two scaling of a float64 within range), err matters only when r is
    an integer (RTZ) or an odd multiple of 1/2 (RNE).  Overflow: |result| >= 2^top is Inf
    (RNE, or RTZ with ``overflow_inf``) or (2 - 2^-bits) 2^(top-1) (RTZ)."""
    if _is_fp32(lat):
        return round_fp32_pair(v, err, mode)
    bits = lat.bits
    if v == 0.0:
        return 0.0
    m, ex = math.frexp(v)
    e = ex - 1
    if e < lat.emin:
        e = lat.emin
    q = e - bits
    r = math.ldexp(v, -q)
    neg = v < 0.0
    a = -r if neg else r
    t = np.floor(a)
    if mode == RTZ:
        if err != 0.0 and t == a and ((err < 0.0) != neg):
            # the exact value lies just inside |v|: one step toward zero, a half step
            # when |v| is the bottom of its binade (the lattice below is twice as fine)
            if t == math.ldexp(1.0, bits) and e > lat.emin:
                res = math.ldexp(2.0 * t - 1.0, q - 1)
            else:
                res = math.ldexp(t - 1.0, q)
        else:
            res = math.ldexp(t, q)
        if e >= lat.top - 1 and res >= math.ldexp(1.0, lat.top):  # (only the top binade can reach 2^top)
            res = math.inf if lat.overflow_inf else math.ldexp(math.ldexp(2.0, bits) - 1.0, lat.top - 1 - bits)
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
        if e >= lat.top - 1 and res >= math.ldexp(1.0, lat.top):
            res = math.inf
    return (-res if neg else res) + 0.0


# ===================================================================== integers
@gemm_jit
def round_fp32_int(s, e, mode):
    """FP32 value (as float64) of the signed integer s times 2^e rounded with mode
    (RNE or RTZ), subnormals, IEEE overflow (Inf under RNE, max finite under RTZ); 0 -> +0.

    Below 2^53 and with e in [-1000, 900], s 2^e is an exact float64 and is rounded from
    there (:func:`round_fp32_pair`); otherwise on the integer."""
    if s == 0:
        return 0.0
    neg = s < 0
    mag = -s if neg else s
    if mag < (1 << 53) and _SCALED_LO <= e <= _SCALED_HI:
        return round_fp32_pair(float(s) * POW2[e - POW2_LO], 0.0, mode)
    nb = bitlen(mag)
    top = e + nb - 1
    lsb_t = top - FP32_BITS if top >= FP32_EMIN else FP32_QUANTUM_EXP
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
        if mode == RNE and (above_half or (tie and (q & 1) == 1)):
            q += 1
        e2 = lsb_t
    else:
        q = mag
        e2 = e
    if q == 0:
        return 0.0  # zero results are +0 (FPS-GEMM-2)
    v = math.ldexp(float(q), e2)
    if v > FLT_MAX:
        v = math.inf if mode == RNE else FLT_MAX
    return -v if neg else v


@gemm_jit
def _round_far_outside(s, e, mode, lat):
    """Far outside FP32's range: Inf / the RTZ clamp, or +0 below the subnormal lattice
    (sticky-safe: every kept bit is far from the rounding point)."""
    if e > 0:
        big = math.inf if (mode == RNE or lat.overflow_inf) else \
            math.ldexp(math.ldexp(2.0, lat.bits) - 1.0, lat.top - 1 - lat.bits)
        return -big if s < 0 else big
    return 0.0


@gemm_jit
def round_acc_int(s, e, mode, lat):
    """s 2^e rounded to the accumulator lattice ``lat`` (FPS-GEMM-13); FP32 with IEEE
    overflow is :func:`round_fp32_int` (exact spec: ``round_acc``)."""
    if _is_fp32(lat):
        return round_fp32_int(s, e, mode)
    if s == 0:
        return 0.0
    neg = s < 0
    mag = -s if neg else s
    if mag < (1 << 53) and _SCALED_LO <= e <= _SCALED_HI:
        return round_acc_pair(float(s) * POW2[e - POW2_LO], 0.0, mode, lat)
    # keep the top 54 bits and a sticky bit: an exact float64 pair (head, err) whose
    # rounding to <= 24 significant bits equals that of s 2^e
    nb = bitlen(mag)
    sh = nb - 54
    if sh > 0:
        head = mag >> sh
        sticky = (mag - (head << sh)) != 0
        head = (head << 1) | (1 if sticky else 0)
        ee = e + sh - 1
    else:
        head = mag
        ee = e
    if ee > _SCALED_HI or ee < _SCALED_LO:
        return _round_far_outside(-head if neg else head, ee, mode, lat)
    hb = head >> 2
    lo = head - (hb << 2)
    v = float(hb << 2) * POW2[ee - POW2_LO]
    err = float(lo) * POW2[ee - POW2_LO]
    if neg:
        v = -v
        err = -err
    return round_acc_pair(v, err, mode, lat)


# ======================================================================= sums
@gemm_jit
def _round_acc_limbs(sigs, lsbs, n, mode, lat):
    """Exact sum of n terms sig * 2^lsb (any exponent span) in 30-bit limbs, rounded to the
    lattice ``lat``."""
    base = _SPAN_NONE
    top = -_SPAN_NONE
    for i in range(n):
        if sigs[i] != 0:
            if lsbs[i] < base:
                base = lsbs[i]
            t = lsbs[i] + bitlen(abs(sigs[i]))
            if t > top:
                top = t
    if top == -_SPAN_NONE:
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
    return round_acc_int(-head if neg else head, e, mode, lat)


@gemm_jit
def round_acc_terms(sigs, lsbs, n, mode, lat):
    """The exact sum of n terms sig * 2^lsb rounded to the lattice ``lat`` (exact spec:
    ``round_acc(sum(terms), ...)``): one int64 sum when the span allows, else limbs."""
    base = _SPAN_NONE
    top = -_SPAN_NONE
    for i in range(n):
        s = sigs[i]
        if s != 0:
            if lsbs[i] < base:
                base = lsbs[i]
            t = lsbs[i] + bitlen(s if s > 0 else -s)
            if t > top:
                top = t
    if top == -_SPAN_NONE:
        return 0.0
    if top - base + bitlen(n) <= 62:
        acc = 0
        for i in range(n):
            if sigs[i] != 0:
                acc += sigs[i] << (lsbs[i] - base)
        return round_acc_int(acc, base, mode, lat)
    return _round_acc_limbs(sigs, lsbs, n, mode, lat)


@gemm_jit
def add_round_fp32(x, y, mode):
    """:func:`add_round` to FP32 with IEEE overflow (the common lattice, without the lattice
    argument)."""
    if not (math.isfinite(x) and math.isfinite(y)):
        return add_specials(x, y)
    s = x + y
    bp = s - x
    err = (x - (s - bp)) + (y - bp)
    return round_fp32_pair(s, err, mode)


@gemm_jit
def add_round(x, y, mode, lat):
    """round(x + y) to the lattice ``lat`` for two FP32 values held in float64 (the
    accumulator update, the promotion, the split-K sum).  TwoSum gives s + err = x + y
    exactly (float64, no overflow for FP32 inputs); :func:`round_acc_pair` rounds that
    pair correctly.  Inf and NaN follow IEEE (:func:`add_specials`)."""
    if not (math.isfinite(x) and math.isfinite(y)):
        return add_specials(x, y)
    s = x + y
    bp = s - x
    err = (x - (s - bp)) + (y - bp)
    return round_acc_pair(s, err, mode, lat)


@gemm_jit
def add_round_int(x, s, e, mode, lat):
    """round(x + s 2^e) to the lattice ``lat``, x a finite FP32 value, s an int64 (a
    group's exact sum joining the accumulator).  An x of zero or an s of zero leave one
    addend; otherwise both are aligned in int64, or in limbs when their span is too wide."""
    if s == 0:
        return round_acc_pair(x, 0.0, mode, lat)
    if x == 0.0:
        return round_acc_int(s, e, mode, lat)
    sx, lx = split_fp32(x)
    base = lx if lx < e else e
    top_x = lx + bitlen(sx if sx > 0 else -sx)
    top_s = e + bitlen(s if s > 0 else -s)
    top = top_x if top_x > top_s else top_s
    if top - base + 2 <= 62:
        return round_acc_int((sx << (lx - base)) + (s << (e - base)), base, mode, lat)
    sigs = np.empty(2, dtype=np.int64)
    lsbs = np.empty(2, dtype=np.int64)
    sigs[0], lsbs[0], sigs[1], lsbs[1] = sx, lx, s, e
    return _round_acc_limbs(sigs, lsbs, 2, mode, lat)


# ============================================================ Python test hooks
def py_round_acc_int(s: int, e: int, mode: str = "rne", bits: int = 23, emin: int = FP32_EMIN, top: int = 128,
                     overflow_inf: bool = False) -> float:
    """Test hook: :func:`round_acc_int` of the integer s 2^e (``mode`` ``rne`` / ``rtz``) to
    the lattice of ``bits`` fraction bits, ``emin``, ``top``, ``overflow_inf``."""
    return float(round_acc_int(np.int64(s), np.int64(e), MODE_CODES[mode], lattice(bits, emin, top, overflow_inf)))


def py_add_round(x: float, y: float, mode: str = "rne", bits: int = 23, emin: int = FP32_EMIN, top: int = 128,
                 overflow_inf: bool = False) -> float:
    """Test hook: :func:`add_round` of two FP32 values (``mode`` ``rne`` / ``rtz``)."""
    return float(add_round(float(x), float(y), MODE_CODES[mode], lattice(bits, emin, top, overflow_inf)))
