"""Fast block quantization: the Numba twin of :mod:`fpspec.exact.blocks` (FPS-BLK-15).

Each profile function of the exact spec has a namesake here with the same
numbered steps (docs/scheme-*.rst):

* :func:`_exact_profile`   FPS-BLK-2 (ue5m3 and nvfp4 ``exact``)
* :func:`_fp32_profile`    FPS-BLK-3 (``seed-fp32``), FPS-BLK-8/9 (``te-fp32``, ``te-kernel``)
* :func:`_torchao_profile` FPS-BLK-18 (``torchao-0.18``)
* :func:`_mx_profile`      FPS-BLK-12/13 (``mxfp4`` floor, ceil, even, rceil), FPS-BLK-27/28 (``mxfp8``)
* :func:`_torchao_mx_profile` FPS-BLK-23 (``mxfp4`` torchao-0.18-floor, -ceil, -even, -rceil)
* :func:`_microxcaling_profile` FPS-BLK-24 (``mxfp4`` microxcaling)

Each computes the tensor-level step 1 in Python and runs one Numba kernel
(``_<name>_blocks``; the three MX profiles share :func:`_mx_blocks`, as they share
the exact spec's ``_mx_blocks``), parallel over chunks of blocks, that does the
per-block steps: block amax, scale code, payload codes.  Every payload goes through one
rounding helper, the twin of :func:`fpspec.exact.blocks.payload_code`: E2M1 payloads
through :func:`e2m1_magnitude` (comparisons with the decision points), the FP8 payloads
of ``mxfp8`` through :func:`minifloat_magnitude` (the exact binary64 quotient x / 2^e
split into binade, integer part and fraction).  Two RNE hot loops take the same decisions
in 32-bit lanes: the ``exact`` profile's binary32 payloads count the binary32 bounds of
their scale code (:func:`e2m1_rne_bounds`), and the binary32 profiles' y = fp32(x mult)
takes the encoder's steps (:func:`fpspec.fast.rounding.rne_f32_magnitude`).  Every
UE5M3/UE4M3 scale goes through
:func:`scale_code_rne`.  The element format reaches the MX kernel as data
(:class:`ElemArgs`).  The other jobs of the fast block path have their own modules: the
input scan (step 0, :mod:`fpspec.fast.scan`), dequantization (:mod:`fpspec.fast.dequant`)
and the Hadamard transform (:mod:`fpspec.fast.rht`).

Why it is exact (docs/scheme-ue5m3.rst, "The fast path"): every decision is a
comparison of an exact value X = |x| 6T (or a_B T, |y|, |x|) with an exact
threshold t d.  X is held as an unevaluated sum p + pe of two binary64 values
(Dekker's TwoProduct; pe = 0 when the product is exact, as for every binary32
input) and a threshold as h + l the same way; p > h decides, and p == h leaves
pe - l, the exact difference.  ``fp32`` profiles perform the same binary32
operations as the spec, in the same order (Numba's binary32 ``*`` and ``/`` are
IEEE operations: no fast-math, no contraction; ``error_model="numpy"`` gives
1/0 = inf).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ..errors import FpspecError
from ..formats import E2M1, FloatFormat
from ..schemes import AmaxZero, Arithmetic, BlockResult, BlockSpec, SignedZero, SrEvaluation, TorchDevice
from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the kernels below
from .bits import bits_f32, bits_f64, f32_bits, f64_bits
from .codes import (MODE_CODES, MX_CEIL, MX_EVEN, MX_FLOOR, MX_MODE_CODES, MX_RCEIL, MX_RCEIL_FP32, RNA,
                    RNE, RTZ, SRA, SRM, SRU, ZB_MIN_NORMAL, ZB_ONE, ZERO_BYTE_CODES, block_slot, chunk_bounds,
                    chunk_count)
from .dequant import dequant_value_table, dequantize_blocks
from .log2 import float_log2_ceil_of, float_log2_floor_of
from .rounding import decode_table, rne_f32_magnitude

__all__ = ["quantize_view_fast", "block_amax_grid_fast", "e2m1_magnitude", "minifloat_magnitude", "scale_code_rne",
           "ElemArgs", "elem_args", "BlockGrid", "block_grid", "ScaleArgs", "scale_args", "RoundingArgs",
           "rounding_args", "ExactArgs", "Fp32Args", "TorchaoArgs", "MxArgs"]

_FLT_MAX32 = np.float32(np.finfo(np.float32).max)
#: Products below this magnitude skip TwoProduct: every nonzero threshold is above 2^-210.
_TINY = 2.0 ** -900

#: E2M1 magnitudes of codes 0..7.
_E2M1_MAG = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
_U32 = np.uint32
#: 2^-s for s in 0..64, exact binary64 constants.
_POW2_NEG = np.array([2.0 ** -s for s in range(65)])


# ------------------------------------------------------------ bit helpers
@numba.njit(cache=True, nogil=True, inline="always")
def _pow2(n):
    """2^n for -1022 <= n <= 1023, built from its exponent bits."""
    return bits_f64(np.uint64(n + 1023) << np.uint64(52))


@numba.njit(cache=True, nogil=True, inline="always")
def _floor_log2(v):
    """floor(log2 v) of a positive normal binary64 value, from its exponent bits."""
    return np.int64((f64_bits(v) >> np.uint64(52)) & np.uint64(0x7FF)) - 1023


@numba.njit(cache=True, nogil=True, inline="always")
def _mantissa(v):
    return f64_bits(v) & np.uint64(0xFFFFFFFFFFFFF)


# ---------------------------------------------------- exact comparisons
@numba.njit(cache=True, nogil=True, inline="always")
def _two_product_err(a, b, p):
    """a b - p exactly, p = fp64(a b) (Dekker's TwoProduct; |a b| >= 2^-900, no overflow)."""
    c = 134217729.0  # 2^27 + 1 (Veltkamp's splitter)
    t = c * a
    ah = t - (t - a)
    al = a - ah
    t = c * b
    bh = t - (t - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.njit(cache=True, nogil=True, inline="always")
def _product_err(a, b, p):
    """The error term of p = fp64(a b) for a, b >= 0: exact above 2^-900; below it only the sign of
    a b matters (every threshold is larger), so an underflowed nonzero product reports +tiny."""
    if p >= _TINY:
        return _two_product_err(a, b, p)
    if p == 0.0 and a != 0.0 and b != 0.0:
        return 5e-324
    return 0.0


@numba.njit(cache=True, nogil=True, inline="always")
def _gt(p, pe, h, l):
    """Whether p + pe > h + l, for p = fp64(p + pe) and h = fp64(h + l) (exact)."""
    return (p > h) | ((p == h) & (pe > l))


@numba.njit(cache=True, nogil=True, inline="always")
def _ge(p, pe, h, l):
    return (p > h) | ((p == h) & (pe >= l))


# ------------------------------------------- the E2M1 payload rounding helper
@numba.njit(cache=True, nogil=True, inline="always")
def e2m1_magnitude(p, pe, d, mode, r, nbits):
    """E2M1 magnitude code (0..7, saturating at 6) of the exact ratio X / d, X = p + pe >= 0,
    d > 0 exact, under a payload rounding (twin of step 3 of :func:`fpspec.exact.blocks.e2m1_payload`).

    Nearest modes count the decision points t with X above t d (ties: to the even code, or
    away); other modes find the lower neighbour lo (the toward-zero count) and compare X
    with theta d, theta the threshold of the mode for random value r (FPS-RND-5..7).
    Every t d is exact (t has at most 3 bits); theta d is held as TwoProduct h + l.
    """
    if mode == RNE:
        return (np.int64(_gt(p, pe, 0.25 * d, 0.0)) + np.int64(_ge(p, pe, 0.75 * d, 0.0))
                + np.int64(_gt(p, pe, 1.25 * d, 0.0)) + np.int64(_ge(p, pe, 1.75 * d, 0.0))
                + np.int64(_gt(p, pe, 2.5 * d, 0.0)) + np.int64(_ge(p, pe, 3.5 * d, 0.0))
                + np.int64(_gt(p, pe, 5.0 * d, 0.0)))
    if mode == RNA:
        return (np.int64(_ge(p, pe, 0.25 * d, 0.0)) + np.int64(_ge(p, pe, 0.75 * d, 0.0))
                + np.int64(_ge(p, pe, 1.25 * d, 0.0)) + np.int64(_ge(p, pe, 1.75 * d, 0.0))
                + np.int64(_ge(p, pe, 2.5 * d, 0.0)) + np.int64(_ge(p, pe, 3.5 * d, 0.0))
                + np.int64(_ge(p, pe, 5.0 * d, 0.0)))
    lo = (np.int64(_ge(p, pe, 0.5 * d, 0.0)) + np.int64(_ge(p, pe, 1.0 * d, 0.0))
          + np.int64(_ge(p, pe, 1.5 * d, 0.0)) + np.int64(_ge(p, pe, 2.0 * d, 0.0))
          + np.int64(_ge(p, pe, 3.0 * d, 0.0)) + np.int64(_ge(p, pe, 4.0 * d, 0.0))
          + np.int64(_ge(p, pe, 6.0 * d, 0.0)))
    if lo == 7 or mode < SRM:  # saturated, or rtz (up/down are not payload roundings)
        return lo
    lo_v = _E2M1_MAG[lo]
    hi_v = _E2M1_MAG[lo + 1]
    step = hi_v - lo_v
    if mode == SRM:    # delta + (2r+1)/2^(N+1) >= 1
        theta = hi_v - step * (2 * r + 1) * _POW2_NEG[nbits + 1]
    elif mode == SRA:  # delta + r/2^N >= 1
        theta = hi_v - step * r * _POW2_NEG[nbits]
    else:               # r < delta 2^N
        theta = lo_v + step * r * _POW2_NEG[nbits]
    h = theta * d
    l = _two_product_err(theta, d, h) if h >= _TINY else 0.0
    up = _gt(p, pe, h, l) if mode == SRU else _ge(p, pe, h, l)
    return lo + np.int64(up)


#: The decision points t of E2M1 RNE (midpoints of neighbouring magnitudes) in the order
#: :func:`e2m1_magnitude` counts them, and whether X must lie strictly above t d (a tie
#: goes down, to the even code) or may equal it (a tie goes up).
_E2M1_RNE_POINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
_E2M1_RNE_STRICT = np.array([True, False, True, False, True, False, True])


@numba.njit(cache=True, nogil=True, inline="always")
def _bound_holds(v, h, num, strict):
    """Whether v num <= h (``strict``) or v num < h, for a binary32 v >= 0 (v num is exact)."""
    p = np.float64(v) * num
    return (p <= h) if strict else (p < h)


@numba.njit(cache=True, nogil=True, inline="always")
def _f32_bound(h, num, strict):
    """The largest binary32 v >= 0 with v num <= h (``strict``) or v num < h, or -1 when there is
    none: then |x| num > h (or >= h) holds exactly when |x| > v.  The start, fp32(fp64(h / num)),
    is within an ulp or two of v; the steps that follow test exact products."""
    v = np.float32(min(h / num, 3.4028234663852886e38))
    while v > 0 and not _bound_holds(v, h, num, strict):
        v = bits_f32(_U32(f32_bits(v) - _U32(1)))
    while v < _FLT_MAX32 and _bound_holds(bits_f32(_U32(f32_bits(v) + _U32(1))), h, num, strict):
        v = bits_f32(_U32(f32_bits(v) + _U32(1)))
    return v if _bound_holds(v, h, num, strict) else np.float32(-1.0)


@numba.njit(cache=True, nogil=True)
def _e2m1_rne_bounds_kernel(stable, gd, num, out):
    for c in range(stable.shape[0]):
        d = gd * stable[c]
        for k in range(_E2M1_RNE_POINTS.shape[0]):
            out[c, k] = _f32_bound(_E2M1_RNE_POINTS[k] * d, num, _E2M1_RNE_STRICT[k])


def e2m1_rne_bounds(stable: np.ndarray, gd: float, num: float) -> np.ndarray:
    """For each scale code c, the binary32 bounds v_1..v_7 with which the RNE step of
    :func:`e2m1_magnitude` on a binary32 input becomes a count: for X = |x| num (exact, ``num``
    a value of at most 26 significant bits) and d = fp64(gd stable[c]), X > t_k d (or >= t_k d,
    as the tie rule of t_k says) exactly when |x| > v_k, so the magnitude is the number of
    v_k below |x|.  Returns float32[len(stable), 7] (docs/scheme-ue5m3.rst, "The fast path")."""
    out = np.empty((stable.shape[0], _E2M1_RNE_POINTS.shape[0]), dtype=np.float32)
    _e2m1_rne_bounds_kernel(np.asarray(stable, dtype=np.float64), float(gd), float(num), out)
    return out


@numba.njit(cache=True, nogil=True, inline="always")
def _e2m1_sr_fp32(y, r, nbits):
    """The seed's FP32 evaluation of sr-midpoint for a binary32 y (twin of step 2 of
    :func:`fpspec.exact.blocks.e2m1_payload`): every operation is a binary32 one."""
    a = abs(y)
    if a == 0:
        return np.int64(0)
    if a >= 6:  # saturated (also y = +-inf, from a multiplier near FLT_MAX)
        return np.int64(7)
    q = max(_floor_log2(np.float64(a)), 0) - 1
    sig = a * np.float32(_pow2(-q))
    lower = np.float32(np.floor(sig))
    delta = sig - lower
    m = np.float32(2 * r + 1) * np.float32(_POW2_NEG[nbits + 1])
    up = (delta + m) >= np.float32(1.0)
    mag = min((np.float64(lower) + (1.0 if up else 0.0)) * _pow2(q), 6.0)
    return e2m1_magnitude(mag, 0.0, 1.0, RNE, 0, 0)


@numba.njit(cache=True, nogil=True, inline="always")
def minifloat_magnitude(y, m, emin, max_code, mode):
    """Magnitude code of the exact binary64 value y >= 0 in a signed minifloat with subnormals
    (m mantissa bits, smallest normal exponent emin, largest finite magnitude code max_code),
    rounded RNE, RNA or RTZ and saturating (twin of step 4 of
    :func:`fpspec.exact.blocks.payload_code` for FP8 payloads).

    The binade e = floor(log2 y) comes from the exponent bits; q = y 2^(m - max(e, emin)) is
    exact (a power-of-two scaling, q < 2^(m+1)), its integer part k and fraction f = q - k
    are exact; the code is (max(e, emin) - emin) 2^m + k, plus one when f rounds up.  A y
    below 2^-1000 (far below half of every format's smallest code) gives 0."""
    if y < 2.0 ** -1000:
        return np.int64(0)
    eb = max(_floor_log2(y), emin)
    q = y * _pow2(m - eb)
    k = np.floor(q)
    f = q - k
    if mode == RNE:
        up = (f > 0.5) | ((f == 0.5) & (np.int64(k) % 2 == 1))
    elif mode == RNA:
        up = f >= 0.5
    else:  # rtz
        up = False
    code = (eb - emin) * (np.int64(1) << m) + np.int64(k) + np.int64(up)
    return code if code < max_code else np.int64(max_code)


@numba.njit(cache=True, nogil=True, inline="always")
def _microxcaling_code(v, mode, m, emin, top, e2m1, max_code):
    """microxcaling's rounding of a binary32 A (twin of
    :func:`fpspec.exact.blocks._microxcaling_code`, step 3 of ``payload_code``): the
    magnitude code; binary32 adds."""
    a = abs(np.float32(v))
    pe = max(float_log2_floor_of(a) if a != 0 else np.int64(0), np.int64(emin))
    t = np.float32(np.float64(a) * _pow2(m - pe))     # exact
    if mode == RTZ:
        r = np.floor(np.float64(t))
    else:
        r = np.floor(np.float64(t + np.float32(0.5)))  # one binary32 addition
        hb = np.float64(t - np.float32(0.5))
        if mode == RNE and hb >= 0.0 and hb == np.floor(hb) and np.int64(hb) % 2 == 0:
            r -= 1.0
    mag = min(r * _pow2(pe - m), top)
    if e2m1:
        return e2m1_magnitude(mag, 0.0, 1.0, RNE, 0, 0)
    return minifloat_magnitude(mag, m, emin, max_code, RNE)


# ------------------------------------------------------- scale rounding
@numba.njit(cache=True, nogil=True, inline="always")
def _round_scale_candidate(v, m, emin, max_code):
    """RNE code of a binary64 value v >= 0 in an unsigned subnormal-capable scale format,
    saturating; exact when v is the exact request."""
    e = _floor_log2(v) if v > 0.0 else emin
    eb = e if e > emin else emin
    q = v * _pow2(m - eb)                       # exact: a power-of-two scaling, q < 2^(m+1)
    k = (q + 4503599627370496.0) - 4503599627370496.0   # RNE to an integer (2^52 trick)
    code = (eb - emin) * (1 << m) + np.int64(k)
    return code if code < max_code else max_code


@numba.njit(cache=True, nogil=True, inline="always")
def _scale_code_of_quotient(p, d, m, emin, max_code):
    """The candidate of :func:`scale_code_rne`: the RNE code of fp64(p / d), or 0 when p is far
    below half the smallest scale (p < 2^-900).  Branch-free (a select), so that a loop of it
    over blocks vectorizes."""
    c = _round_scale_candidate(p / d, m, emin, max_code)
    return c if p >= _TINY else np.int64(0)


@numba.njit(cache=True, nogil=True, inline="always")
def scale_code_rne(a, t, d, wide, m, emin, max_code, stable):
    """RNE scale code of the exact ratio a t / d (a, t, d >= 0, d > 0) (twin of
    ``round_to_code(a_B * G / 6, scale_format, "rne")``).

    The candidate is the RNE code of the binary64 quotient fp64(a t) / d.  For binary32 a
    it is exact: a t is exact (at most 48 bits) and a midpoint times d has at most 29 bits,
    so a quotient that is not a midpoint lies at least 2^-49 (relative) from every midpoint,
    more than the quotient's rounding error 2^-53.  For binary64 a (``wide``) the candidate
    can be one code off next to a midpoint: a t, held as TwoProduct p + pe, is compared with
    the two neighbouring midpoints times d (exact: at most m + 2 bits times d), ties to even.
    """
    p = a * t
    c = _scale_code_of_quotient(p, d, m, emin, max_code)
    if wide and p >= _TINY:
        pe = _two_product_err(a, t, p)
        if c > 0:
            mid = 0.5 * (stable[c - 1] + stable[c]) * d
            if _gt(mid, 0.0, p, pe) | ((mid == p) & (pe == 0.0) & ((c & 1) == 1)):
                c -= 1
        if c < max_code:
            mid = 0.5 * (stable[c] + stable[c + 1]) * d
            if _gt(p, pe, mid, 0.0) | ((mid == p) & (pe == 0.0) & ((c & 1) == 1)):
                c += 1
    return c


class ElemArgs(NamedTuple):
    """The payload format as the MX kernel reads it (the data behind ``spec.payload_format``)."""

    e2m1: bool          # E2M1 payloads: the threshold helper e2m1_magnitude; else minifloat_magnitude
    m: int              # mantissa width
    emin: int           # smallest normal exponent
    emax: int           # exponent of the largest binade (2, 8, 15)
    max_code: int       # largest finite magnitude code
    sign_mask: int      # 0x8 or 0x80
    top: float          # largest finite value (6, 448, 57344)
    even_field: int     # binary64 mantissa field of 2 - 2^-(m+1) (the EVEN rounding point)
    top_field: int      # binary64 mantissa field of top / 2^emax (RCEIL)


def elem_args(fmt: FloatFormat) -> ElemArgs:
    """:class:`ElemArgs` of a payload format (E2M1, E4M3, E5M2)."""
    top = float(fmt.max_finite)
    even = 2.0 - 2.0 ** -(fmt.man_bits + 1)
    field = lambda v: int(np.array([v], np.float64).view(np.uint64)[0] & np.uint64(0xFFFFFFFFFFFFF))  # noqa: E731
    return ElemArgs(fmt.name == E2M1.name, fmt.man_bits, fmt.emin, fmt.emax, fmt.max_finite_code,
                    fmt.sign_mask, top, field(even), field(top / 2.0 ** fmt.emax))


@numba.njit(cache=True, nogil=True, inline="always")
def _scalar_quotient(a, c, cuda):
    """torch's binary32 a / c for a Python number c (twin of
    :func:`fpspec.exact.blocks._scalar_quotient`): a division on the CPU, a * fp32(1 / c) on CUDA."""
    a32 = np.float32(a)
    c32 = np.float32(c)
    return a32 * (np.float32(1.0) / c32) if cuda else a32 / c32


@numba.njit(cache=True, nogil=True, inline="always")
def _mx_exponent(a, mode, emax, top, even_field, top_field, cuda):
    """Unbiased E8M0 exponent of a block amax a >= 0 from its bits (twin of
    :func:`fpspec.exact.blocks._mx_exponent`), clamped to [-127, 127]; emax, top (the largest
    value), even_field and top_field describe the payload format (:class:`ElemArgs`); ``cuda``:
    torch's CUDA arithmetic for the binary32 rules (FPS-BLK-29)."""
    if a == 0.0:
        return np.int64(-127)
    fl = _floor_log2(a)
    man = _mantissa(a)
    if mode == MX_FLOOR:          # floor(log2 a) - emax
        e = fl - emax
    elif mode == MX_CEIL:         # ceil(log2 a) - emax
        e = fl + (1 if man != 0 else 0) - emax
    elif mode == MX_EVEN:         # a >= (2 - 2^-(m+1)) 2^fl rounds up
        e = fl + (1 if man >= np.uint64(even_field) else 0) - emax
    elif mode == MX_RCEIL:        # ceil(log2(a / top)): a <= (top / 2^emax) 2^fl gives fl - emax, else one more
        e = fl - emax if man <= np.uint64(top_field) else fl - emax + 1
    elif mode == MX_RCEIL_FP32:  # CL(fp32(a / top)), a binary32
        d = _scalar_quotient(a, top, cuda)
        e = float_log2_ceil_of(d) if d > 0 else np.int64(-127)
    else:                         # MX_FLOOR_FP32: FL(a) - emax, a binary32
        e = float_log2_floor_of(np.float32(a)) - emax
    return max(np.int64(-127), min(np.int64(127), e))


@numba.njit(cache=True, nogil=True, inline="always")
def _mx_divisor(e, zero_byte):
    """The divisor of a block's elements (twin of :func:`fpspec.exact.blocks._mx_divisor`)."""
    if e == -127 and zero_byte == ZB_MIN_NORMAL:
        return _pow2(-126)
    if e == -127 and zero_byte == ZB_ONE:
        return 1.0
    return _pow2(e)


# --------------------------------------------------------- block amaxes
@numba.njit(cache=True, nogil=True, inline="always")
def _block_amax(x, base, block):
    """max |x| over one block of the flat view (exact; order-free).  Loops over 16-element
    slices (every block length is a multiple of 16) so that LLVM vectorizes them."""
    a = abs(x[base])
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        for j in range(16):
            v = abs(xs[j])
            a = v if v > a else a
    return np.float64(a)


@numba.njit(cache=True, parallel=True)
def _tile_amax_kernel(x, m, k, block, out):
    nbr = k // block
    for ti in numba.prange(m // block):
        for bj in range(nbr):
            a = 0.0
            for i in range(ti * block, (ti + 1) * block):
                v = _block_amax(x, i * k + bj * block, block)
                a = v if v > a else a
            out[ti * nbr + bj] = a


def block_amax_grid_fast(x: np.ndarray, block: int, tile: str) -> np.ndarray:
    """max |x| per block (1xB) or tile (BxB) as float64, shape of the scale grid (twin of
    :func:`fpspec.exact.blocks.block_amax_grid_exact`)."""
    m, k = x.shape
    flat = np.ascontiguousarray(x).reshape(-1)
    if tile == "BxB":
        out = np.empty((m // block) * (k // block))
        _tile_amax_kernel(flat, m, k, block, out)
        return out.reshape(m // block, k // block)
    return np.abs(flat.reshape(m, k // block, block)).max(axis=2).astype(np.float64)


def _known_amax(flat: np.ndarray, m: int, k: int, spec: BlockSpec,
                block_amax: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """The amax of every scale slot when the kernel is not to measure it block by block, and
    whether it is given: a BxB tile's amax (measured here), or a 1xB view's block amaxes
    measured by the input scan (:func:`scan_values` with ``block``); else (nothing, False)."""
    if spec.tile == "BxB":
        out = np.empty((m // spec.block) * (k // spec.block), dtype=flat.dtype)  # exact: maxima of values
        _tile_amax_kernel(flat, m, k, spec.block, out)
        return out, True
    if block_amax is None:
        return np.zeros(1, dtype=flat.dtype), False
    if block_amax.shape != (m * (k // spec.block),) or block_amax.dtype != flat.dtype:
        raise FpspecError(f"block amaxes must be {flat.dtype}, one per block of the {m}x{k} view "
                          f"({m * (k // spec.block)}), got {block_amax.dtype} {block_amax.shape}")
    return block_amax, True


# -------------------------------------------------------- payload loops
# Every block length is a multiple of 16: the element loops run over 16-element slices,
# a constant trip count that LLVM unrolls fully.  (Numba runs LLVM without its SLP
# vectorizer, so an unrolled body is vectorized only where the loop vectorizer got to it first.)

@numba.njit(cache=True, nogil=True, inline="always")
def _payload_ratio_rne(x, codes, base, block, num, d):
    """RNE codes of |x| num / d for binary32 x (|x| num exact): the hot loop of
    :func:`_payload_ratio`."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            out[j] = (e2m1_magnitude(abs(np.float64(xs[j])) * num, 0.0, d, RNE, 0, 0)
                      | (8 if np.signbit(xs[j]) else 0))


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_ratio(x, codes, rbits, use_r, wide, base, block, num, d, mode, nbits):
    """Codes of the exact ratios x num / d (exact and MX profiles); ``wide``: binary64 x,
    whose products |x| num are held as TwoProduct pairs."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        rs = rbits[h:h + 16] if use_r else rbits[0:0]
        for j in range(16):
            a = abs(np.float64(xs[j]))
            p = a * num
            pe = _product_err(a, num, p) if wide else 0.0
            r = np.int64(rs[j]) if use_r else np.int64(0)
            out[j] = e2m1_magnitude(p, pe, d, mode, r, nbits) | (8 if np.signbit(xs[j]) else 0)


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_bounds_rne(x, codes, base, block, bounds):
    """RNE codes of the exact ratios |x| num / d for binary32 x, from the block's binary32 bounds
    (a row of :func:`e2m1_rne_bounds`): the magnitude is the number of bounds below |x|."""
    b0, b1, b2, b3, b4, b5, b6 = bounds[0], bounds[1], bounds[2], bounds[3], bounds[4], bounds[5], bounds[6]
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            a = abs(xs[j])
            mag = (_U32(a > b0) + _U32(a > b1) + _U32(a > b2) + _U32(a > b3) + _U32(a > b4) + _U32(a > b5)
                   + _U32(a > b6))
            out[j] = mag | (_U32(8) if np.signbit(xs[j]) else _U32(0))


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_zero_scale(x, codes, base, block):
    """A zero scale without the zero-scale rule: nonzero x -> +-6, zeros stay (signed) zeros."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            out[j] = (7 if xs[j] != 0 else 0) | (8 if np.signbit(xs[j]) else 0)


@numba.njit(cache=True, nogil=True, inline="always")
def _negative(y, pos_zero):
    """The sign of an E2M1 code for scaled value y: signbit(y), or y < 0 under
    ``signed_zero = positive`` (-0.0 then gets code 0x0) (FPS-BLK-11)."""
    return (y < 0) if pos_zero else np.signbit(y)


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_product_rne(x, codes, base, block, mult, pos_zero):
    """RNE codes of y = fp32(x * mult): the hot loop of :func:`_payload_product`.  y is a binary32
    value, so its E2M1 magnitude is the encoder's, from its bits in 32-bit lanes
    (:func:`fpspec.fast.rounding.rne_f32_magnitude`, saturating at 6); +-inf gives 6, and a NaN
    (0 * inf, which only an uncapped multiplier can give) magnitude 0, as
    :func:`e2m1_magnitude` gives them."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            y = xs[j] * mult
            a = _U32(f32_bits(y) & _U32(0x7FFFFFFF))
            mag = rne_f32_magnitude(a, 1, 0, _U32(7)) if a <= _U32(0x7F800000) else _U32(0)
            out[j] = mag | (_U32(8) if _negative(y, pos_zero) else _U32(0))


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_product(x, codes, rbits, use_r, base, block, mult, pos_zero, mode, sr_fp32, nbits):
    """Codes of y = fp32(x * mult) (binary32 profiles); ``sr_fp32``: the seed's FP32
    evaluation of sr-midpoint."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        rs = rbits[h:h + 16] if use_r else rbits[0:0]
        for j in range(16):
            y = xs[j] * mult
            r = np.int64(rs[j]) if use_r else np.int64(0)
            if sr_fp32:
                mag = _e2m1_sr_fp32(y, r, nbits)
            else:
                mag = e2m1_magnitude(abs(np.float64(y)), 0.0, 1.0, mode, r, nbits)
            out[j] = mag | (8 if _negative(y, pos_zero) else 0)


# --------------------------------------------------- the kernels' arguments
# A kernel takes the arrays it reads and writes (the flat view x, the known block amaxes,
# the random values, the codes and scales it writes) and its settings as named tuples built
# once per call from the resolved BlockSpec: where each block's scale lies (BlockGrid), the
# scale format and the zero-scale rule (ScaleArgs), the payload rounding (RoundingArgs), the
# payload format (ElemArgs, MX) and the profile's tensor-level values (ExactArgs, Fp32Args,
# TorchaoArgs, MxArgs).  Each kernel unpacks them before its parallel loop.

class BlockGrid(NamedTuple):
    """Where each block's scale lies in the scale grid (:func:`fpspec.fast.codes.block_slot`)."""

    nbr: int            # blocks per row of the view (K / B)
    block: int          # B
    tile2d: bool        # BxB tiles: one scale per B x B tile


class ScaleArgs(NamedTuple):
    """The block scale format as :func:`scale_code_rne` rounds to it, and the zero-scale rule."""

    m: int              # mantissa width
    emin: int           # smallest normal exponent
    max_code: int       # largest finite code
    stable: np.ndarray  # float64 value of every code (0 for the non-finite ones)
    zero_rule: bool     # a scale that rounds to code 0 becomes one_code (FPS-BLK-4)
    one_code: int       # the code of 1.0


class RoundingArgs(NamedTuple):
    """The payload rounding: a code of :mod:`fpspec.fast.codes` and N, the random values' width."""

    mode: int
    nbits: int


class ExactArgs(NamedTuple):
    """Step 1 of the ``exact`` profile (FPS-BLK-2): T, 6T, g, and the RNE bounds of every scale code."""

    t: float
    six_t: float
    g: float
    wide: bool          # binary64 view: products |x| 6T held as TwoProduct pairs
    bounds: np.ndarray  # e2m1_rne_bounds of the scale codes (float32[codes, 7])


class Fp32Args(NamedTuple):
    """Steps 1-2 of the binary32 profiles (FPS-BLK-3, FPS-BLK-8) and their switches."""

    mulf: np.float32    # fp32(ge * fp32(1/6))
    gd: np.float32      # fp32(1 / ge)
    cap: bool           # the payload multiplier is capped at FLT_MAX
    smax32: np.float32  # the scale format's largest value, binary32
    pos_zero: bool      # signed_zero = positive: y = -0.0 gets code 0x0
    sr_fp32: bool       # the seed's FP32 evaluation of sr-midpoint


class TorchaoArgs(NamedTuple):
    """Step 1 of ``torchao-0.18`` (FPS-BLK-18): the per-tensor scale, its reciprocal, the clamp."""

    pts: np.float32     # fp32(g / fp32(6T))
    ipts: np.float32    # fp32(1 / pts)
    cuda: bool          # torch's CUDA arithmetic (FPS-BLK-29)
    smin32: np.float32  # the scale clamp [2^-6, 448], binary32
    smax32: np.float32


class MxArgs(NamedTuple):
    """The rules of an MX profile (FPS-BLK-12, FPS-BLK-13, FPS-BLK-23, FPS-BLK-24) as codes."""

    mx_mode: int        # MX_* of fpspec.fast.codes
    zero_byte: int      # ZB_*
    fp32_quotient: bool  # microxcaling: A = fp32(x / 2^e)
    cuda: bool


def block_grid(spec: BlockSpec, k: int) -> BlockGrid:
    """The :class:`BlockGrid` of an (M, ``k``) view under ``spec``."""
    return BlockGrid(k // spec.block, spec.block, spec.tile == "BxB")


def scale_args(spec: BlockSpec) -> ScaleArgs:
    """The :class:`ScaleArgs` of ``spec``'s scale format and zero-scale rule."""
    sf = spec.scale_format
    stable = decode_table(sf).copy()
    stable[~np.isfinite(stable)] = 0.0
    return ScaleArgs(sf.man_bits, sf.emin, sf.max_finite_code, stable, spec.zero_scale_rule, spec.one_code)


def rounding_args(spec: BlockSpec) -> RoundingArgs:
    """The :class:`RoundingArgs` of ``spec``'s payload rounding."""
    return RoundingArgs(MODE_CODES[spec.rounding], spec.nbits)


# ----------------------------------------------------- per-profile kernels
# Each kernel runs over chunks of BLOCK_CHUNK blocks in parallel (the one loop of
# fpspec.fast.codes: chunk_count, chunk_bounds); within a chunk, one pass computes every
# block's scale (the scale steps), a second pass the payloads (the payload step), so that the
# latency of one block's scale arithmetic overlaps the next block's.

@numba.njit(cache=True, parallel=True, error_model="numpy")
def _exact_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, grid, scale, rounding, args):
    """Steps 2-4 of :func:`fpspec.exact.blocks._exact_profile` (FPS-BLK-2) for every block
    (``grid``: :class:`BlockGrid`, ``scale``: :class:`ScaleArgs`, ``rounding``:
    :class:`RoundingArgs`, ``args``: :class:`ExactArgs`)."""
    nbr, block, tile2d = grid
    sm, semin, smax_code, stable, zero_rule, one_code = scale
    mode, nbits = rounding
    t, six_t, g, wide, bounds = args
    nblocks = x.shape[0] // block
    num = six_t if g > 0.0 else 1.0
    # 2. u_B = a_B G / 6 = a_B T / g (a_B / 6 when g = 0): the ratio a_B tt / dd
    tt, dd, gd = (t, g, g) if g > 0.0 else (1.0, 6.0, 1.0)
    for c in numba.prange(chunk_count(nblocks)):
        b0, b1 = chunk_bounds(c, nblocks)
        divisor = np.empty(b1 - b0)
        block_code = np.empty(b1 - b0, dtype=np.int64)
        if amax_known and not tile2d and not wide:
            for bn in range(b0, b1):  # binary32 block amaxes given: branch-free, vectorized across blocks
                code = _scale_code_of_quotient(np.float64(known_amax[bn]) * tt, dd, sm, semin, smax_code)
                code = one_code if (code == 0) & zero_rule else code  # 3. zero-scale rule
                scales[bn] = code
                block_code[bn - b0] = code
                divisor[bn - b0] = gd * stable[code]
        else:
            for bn in range(b0, b1):
                sidx = block_slot(bn, nbr, block, tile2d)
                a_b = known_amax[sidx] if amax_known else _block_amax(x, bn * block, block)
                code = scale_code_rne(a_b, tt, dd, wide, sm, semin, smax_code, stable)
                code = one_code if (code == 0) & zero_rule else code  # 3. zero-scale rule
                scales[sidx] = code
                block_code[bn - b0] = code
                divisor[bn - b0] = gd * stable[code]
        for bn in range(b0, b1):
            # 4. q = E2M1(x G / s_B) = E2M1(|x| 6T / (g s_B)); s_B = 0: nonzero x -> +-6
            d = divisor[bn - b0]
            if d == 0.0:
                _payload_zero_scale(x, codes, bn * block, block)
            elif mode == RNE and not wide:  # the bounds of d = gd stable[code] (e2m1_rne_bounds)
                _payload_bounds_rne(x, codes, bn * block, block, bounds[block_code[bn - b0]])
            else:
                _payload_ratio(x, codes, rbits, use_r, wide, bn * block, block, num, d, mode, nbits)


@numba.njit(cache=True, nogil=True, inline="always")
def _fp32_scale(a_b, mulf, gd, cap, smax32, sm, semin, smax_code, stable, zero_rule, one_code):
    """Steps 3-5 of :func:`fpspec.exact.blocks._fp32_profile` for one block of binary32 amax a_b:
    its scale code and payload multiplier (branch-free: selects only)."""
    # 3. sc = fp32(a_B * mulf), min(sc, FLT_MAX, U), RNE (sc is a binary32 value: exact)
    sc = a_b * mulf
    sc = sc if sc < _FLT_MAX32 else _FLT_MAX32
    sc = sc if sc < smax32 else smax32
    code = _round_scale_candidate(np.float64(sc), sm, semin, smax_code)
    code = one_code if (code == 0) & zero_rule else code  # 4. zero-scale rule
    # 5. mult = fp32(1 / fp32(s_B * gd)), capped at FLT_MAX
    mult = np.float32(1.0) / (np.float32(stable[code]) * gd)
    return code, (mult if (mult < _FLT_MAX32) | (not cap) else _FLT_MAX32)


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _fp32_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, grid, scale, rounding, args):
    """Steps 3-6 of :func:`fpspec.exact.blocks._fp32_profile` (FPS-BLK-3, FPS-BLK-8) for every block
    (``args``: :class:`Fp32Args`)."""
    nbr, block, tile2d = grid
    sm, semin, smax_code, stable, zero_rule, one_code = scale
    mode, nbits = rounding
    mulf, gd, cap, smax32, pos_zero, sr_fp32 = args
    nblocks = x.shape[0] // block
    for c in numba.prange(chunk_count(nblocks)):
        b0, b1 = chunk_bounds(c, nblocks)
        multiplier = np.empty(b1 - b0, dtype=np.float32)
        if amax_known and not tile2d:
            for bn in range(b0, b1):  # binary32 block amaxes given: branch-free, vectorized across blocks
                scales[bn], multiplier[bn - b0] = _fp32_scale(np.float32(known_amax[bn]), mulf, gd, cap, smax32, sm,
                                                              semin, smax_code, stable, zero_rule, one_code)
        else:
            for bn in range(b0, b1):
                sidx = block_slot(bn, nbr, block, tile2d)
                a_b = np.float32(known_amax[sidx] if amax_known else _block_amax(x, bn * block, block))
                scales[sidx], multiplier[bn - b0] = _fp32_scale(a_b, mulf, gd, cap, smax32, sm, semin, smax_code,
                                                                stable, zero_rule, one_code)
        for bn in range(b0, b1):
            # 6. q = E2M1(fp32(x * mult)); y = -0.0 gets 0x0 under signed_zero = positive
            mult = multiplier[bn - b0]
            if mode == RNE:
                _payload_product_rne(x, codes, bn * block, block, mult, pos_zero)
            else:
                _payload_product(x, codes, rbits, use_r, bn * block, block, mult, pos_zero, mode, sr_fp32, nbits)


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _torchao_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, grid, scale, rounding, args):
    """Steps 2-3 of :func:`fpspec.exact.blocks._torchao_profile` (FPS-BLK-18) for every block
    (``args``: :class:`TorchaoArgs`; the profile has no zero-scale rule)."""
    nbr, block, tile2d = grid
    sm, semin, smax_code, stable = scale.m, scale.emin, scale.max_code, scale.stable
    mode, nbits = rounding
    pts, ipts, cuda, smin32, smax32 = args
    nblocks = x.shape[0] // block
    for c in numba.prange(chunk_count(nblocks)):
        b0, b1 = chunk_bounds(c, nblocks)
        reciprocal = np.empty(b1 - b0, dtype=np.float32)
        for bn in range(b0, b1):
            sidx = block_slot(bn, nbr, block, tile2d)
            a_b = np.float32(known_amax[sidx] if amax_known else _block_amax(x, bn * block, block))
            # 2. sbs = fp32(fp32(a_B / 6) / pts), clamped to [2^-6, 448], RNE (a_B / 6 as on the device)
            sbs = _scalar_quotient(a_b, 6.0, cuda) / pts
            sbs = sbs if sbs > smin32 else smin32
            sbs = sbs if sbs < smax32 else smax32
            code = _round_scale_candidate(np.float64(sbs), sm, semin, smax_code)
            scales[sidx] = code
            # 3. recip = fp32(ipts / s_B)
            reciprocal[bn - b0] = ipts / np.float32(stable[code])
        for bn in range(b0, b1):
            # 3. q = E2M1(fp32(x * recip)), -0.0 keeping 0x8
            _payload_product(x, codes, rbits, use_r, bn * block, block, reciprocal[bn - b0], False, mode, False,
                             nbits)


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_microxcaling(x, codes, base, block, d32, mode, m, emin, top, e2m1, max_code, sign_mask):
    """Codes of A = fp32(x / 2^e) under microxcaling's rounding; A = -0.0 gives code 0x0."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            a = xs[j] / d32                                  # one binary32 division
            out[j] = _microxcaling_code(a, mode, m, emin, top, e2m1, max_code) | (sign_mask if a < 0 else 0)


@numba.njit(cache=True, nogil=True, inline="always")
def _payload_minifloat(x, codes, base, block, d, mode, m, emin, max_code, sign_mask):
    """FP8 codes of the exact quotients |x| / d (d a power of two: the binary64 quotient is exact,
    or far below the smallest code where it underflows), the sign bit copied."""
    for h in range(base, base + block, 16):
        xs = x[h:h + 16]
        out = codes[h:h + 16]
        for j in range(16):
            y = abs(np.float64(xs[j])) / d
            out[j] = minifloat_magnitude(y, m, emin, max_code, mode) | (sign_mask if np.signbit(xs[j]) else 0)


@numba.njit(cache=True, parallel=True, error_model="numpy")
def _mx_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, block, rounding, args, elem):
    """Steps 2-3 of :func:`fpspec.exact.blocks._mx_blocks` (FPS-BLK-12, FPS-BLK-13, FPS-BLK-23,
    FPS-BLK-24, FPS-BLK-27, FPS-BLK-28) for every block (1xB); ``args``: :class:`MxArgs`, the
    payload format as :class:`ElemArgs`."""
    mode, nbits = rounding
    mx_mode, zero_byte, fp32_quotient, cuda = args
    e2m1, m, emin, emax, max_code, sign_mask, top, even_field, top_field = elem
    nblocks = x.shape[0] // block
    for c in numba.prange(chunk_count(nblocks)):
        b0, b1 = chunk_bounds(c, nblocks)
        for bn in range(b0, b1):
            # 2. e from the bits of a_B (or its binary32 log2); c_B = e + 127
            a_b = np.float64(known_amax[bn]) if amax_known else _block_amax(x, bn * block, block)
            scales[bn] = _mx_exponent(a_b, mx_mode, emax, top, even_field, top_field, cuda) + 127
        for bn in range(b0, b1):
            # 3. q = payload(x / d): E2M1: |x| against t d (exact); FP8: the exact quotient's
            #    binade and fraction; or microxcaling's binary32 steps
            d = _mx_divisor(np.int64(scales[bn]) - 127, zero_byte)
            if fp32_quotient:
                _payload_microxcaling(x, codes, bn * block, block, np.float32(d), mode, m, emin, top, e2m1,
                                      max_code, sign_mask)
            elif not e2m1:
                _payload_minifloat(x, codes, bn * block, block, d, mode, m, emin, max_code, sign_mask)
            elif mode == RNE:
                _payload_ratio_rne(x, codes, bn * block, block, 1.0, d)
            else:
                _payload_ratio(x, codes, rbits, use_r, False, bn * block, block, 1.0, d, mode, nbits)


# ------------------------------------------------ per-profile step 1 (Python)
_Run = tuple[np.float32, np.float32, object]


def _exact_profile(spec: BlockSpec, amax: float) -> _Run:
    """Step 1 of FPS-BLK-2: G = 6T/g (1 when g = 0); the kernel does steps 2-4."""
    assert spec.target is not None
    t = float(spec.target)
    six_t = 6.0 * t  # exact: T is a binary32 value
    g = float(amax)
    enc = dec = np.float32(1.0)
    if g > 0:
        with np.errstate(over="ignore", under="ignore"):
            enc = np.float32(six_t / g)  # reported only: fp32(G), fp32(1/G) (double rounding is exact:
            dec = np.float32(g / six_t)  # quotients of <= 26-bit values)
    scale = scale_args(spec)
    bounds = e2m1_rne_bounds(scale.stable, g if g > 0 else 1.0, six_t if g > 0 else 1.0)  # the kernel's gd and num

    def run(x, known_amax, amax_known, m, k, rbits, use_r, codes, scales):
        _exact_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, block_grid(spec, k), scale,
                              rounding_args(spec), ExactArgs(t, six_t, g, x.dtype == np.float64, bounds))
    return enc, dec, run


def _fp32_profile(spec: BlockSpec, amax: float) -> _Run:
    """Steps 1-2 of FPS-BLK-3 / FPS-BLK-8 in binary32; the kernel does steps 3-6."""
    prof = spec.profile
    assert spec.target is not None
    f32 = np.float32
    with np.errstate(divide="ignore", over="ignore"):
        six_t = f32(6.0) * f32(float(spec.target))
        a32 = f32(amax)
        if a32 == 0 and prof.amax_zero is AmaxZero.ONE:                  # 1
            ge = f32(1.0)
        elif a32 == 0 and prof.amax_zero is AmaxZero.REFUSE:
            _zero_amax(spec)
        else:
            ge = min(six_t / a32, _FLT_MAX32)
            if ge == 0:
                ge = f32(1.0)
        gd = f32(1.0) / ge                                               # 2
        mulf = ge * (f32(1.0) / f32(6.0))
    args = Fp32Args(mulf, gd, prof.cap_multiplier, f32(float(spec.scale_format.max_finite)),
                    prof.signed_zero is SignedZero.POSITIVE, spec.sr_eval is SrEvaluation.FP32)
    scale = scale_args(spec)

    def run(x, known_amax, amax_known, m, k, rbits, use_r, codes, scales):
        _fp32_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, block_grid(spec, k), scale,
                             rounding_args(spec), args)
    return ge, gd, run


def _torchao_profile(spec: BlockSpec, amax: float) -> _Run:
    """Step 1 of FPS-BLK-18; the kernel does steps 2-3."""
    assert spec.target is not None
    f32 = np.float32
    if amax == 0:
        _zero_amax(spec)
    cuda = spec.profile.torch_device is TorchDevice.CUDA
    with np.errstate(divide="ignore", over="ignore", under="ignore"):
        six_t = f32(6.0) * f32(float(spec.target))
        pts = f32(_scalar_quotient(amax, six_t, cuda))  # binary32, so that the kernel's sbs is a binary32 quotient
        ipts = f32(1.0) / pts
    if not np.isfinite(ipts):
        raise FpspecError(f"profile {spec.profile.name} overflows 1/per_tensor_scale for amax {amax!r}")
    sf = spec.scale_format
    args = TorchaoArgs(pts, ipts, cuda, f32(float(sf.min_normal)), f32(float(sf.max_finite)))
    scale = scale_args(spec)

    def run(x, known_amax, amax_known, m, k, rbits, use_r, codes, scales):
        _torchao_profile_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, block_grid(spec, k), scale,
                                rounding_args(spec), args)
    return ipts, pts, run


def _mx_run(spec: BlockSpec) -> _Run:
    """Steps 2-3 of every MX profile: the shared kernel :func:`_mx_blocks`, the payload format
    passed as :class:`ElemArgs`."""
    prof = spec.profile
    assert prof.mx_mode is not None and prof.mx_zero_byte is not None
    args = MxArgs(MX_MODE_CODES[prof.mx_mode], ZERO_BYTE_CODES[prof.mx_zero_byte],
                  spec.arithmetic is Arithmetic.MICROXCALING, prof.torch_device is TorchDevice.CUDA)
    ea = elem_args(spec.payload_format)

    def run(x, known_amax, amax_known, m, k, rbits, use_r, codes, scales):
        _mx_blocks(x, known_amax, amax_known, rbits, use_r, codes, scales, spec.block, rounding_args(spec), args, ea)
    return np.float32(1.0), np.float32(1.0), run


def _mx_profile(spec: BlockSpec, amax: float) -> _Run:
    """Step 1 of FPS-BLK-12: no tensor scale; the kernel does steps 2-3."""
    return _mx_run(spec)


def _torchao_mx_profile(spec: BlockSpec, amax: float) -> _Run:
    """Step 1 of FPS-BLK-23: no tensor scale (the view is binary32); the kernel does steps 2-3."""
    return _mx_run(spec)


def _microxcaling_profile(spec: BlockSpec, amax: float) -> _Run:
    """Step 1 of FPS-BLK-24: no tensor scale (the view is binary32); the kernel does steps 2-3."""
    return _mx_run(spec)


def _zero_amax(spec: BlockSpec) -> None:
    raise FpspecError(spec.profile.zero_amax_refusal())


#: Arithmetic -> profile function (the same table as in :mod:`fpspec.exact.blocks`).
_PROFILE_FUNCTIONS = {
    Arithmetic.EXACT: _exact_profile,
    Arithmetic.FP32: _fp32_profile,
    Arithmetic.TORCHAO: _torchao_profile,
    Arithmetic.MX: _mx_profile,
    Arithmetic.TORCHAO_MX: _torchao_mx_profile,
    Arithmetic.MICROXCALING: _microxcaling_profile,
}


def quantize_view_fast(x: np.ndarray, spec: BlockSpec, amax: float, rbits: np.ndarray | None = None,
                       want_dequant: bool = True, block_amax: np.ndarray | None = None) -> BlockResult:
    """Fast twin of :func:`fpspec.exact.blocks.quantize_view_exact`; same result.

    ``x`` is the prepared (M, K) view: binary32, or binary64 for exact and MX profiles
    (exact products are then held as TwoProduct pairs).  ``want_dequant=False``
    leaves ``dequant`` as None.  ``block_amax``: max |x| of every 1xB block of the view,
    flat, as the input scan measured it (:func:`scan_values`); None: the kernel measures
    them.
    """
    m, k = x.shape
    b = spec.block
    if spec.arithmetic.binary32_input or x.dtype != np.float64:
        x = np.ascontiguousarray(x, dtype=np.float32)
    flat = np.ascontiguousarray(x).reshape(-1)
    use_r = spec.rounding.stochastic
    if use_r:
        if rbits is None or rbits.shape != (m, k):
            raise FpspecError(f"stochastic rounding needs rbits of shape {(m, k)}")
        # uint8 as given; wider values as uint32 (one compiled kernel per width class)
        rflat = np.ascontiguousarray(rbits, dtype=np.uint8 if rbits.dtype == np.uint8 else np.uint32).reshape(-1)
    else:
        rflat = np.zeros(1, dtype=np.uint8)
    enc, dec, run = _PROFILE_FUNCTIONS[spec.arithmetic](spec, amax)
    tile2d = spec.tile == "BxB"
    codes = np.empty(m * k, dtype=np.uint8)
    scales = np.empty((m // b if tile2d else m) * (k // b), dtype=np.uint8)
    run(flat, *_known_amax(flat, m, k, spec, block_amax), m, k, rflat, use_r, codes, scales)
    res = BlockResult(codes.reshape(m, k), scales.reshape((m // b if tile2d else m), k // b),
                      np.float32(enc), np.float32(dec), None)
    if want_dequant:
        table = dequant_value_table(spec.profile.dequant, spec.scale_format, spec.payload_format.name, amax,
                                    spec.target, res.decode_scale)
        res.dequant, _ = dequantize_blocks(res.codes, res.scales, table, b, spec.tile)
    return res
