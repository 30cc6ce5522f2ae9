"""Fast array encoder and decoder: the Numba twin of :mod:`fpspec.exact.rounding` (FPS-RND-14).

Bit-equal to the exact reference by test (tests/test_rounding_exhaustive.py,
test_rounding_sr.py, test_rounding_edges.py, test_decode_exhaustive.py).
The exactness argument (docs/rounding.rst, "The fast path"):

* the input's raw bits give the integer significand ``sig`` (< 2^53) and the binade
  exactly (fp16, bf16, fp32 and fp64 layouts are read directly);
* the neighbours are ``k = sig >> shift`` and the remainder ``rem``, integers;
* RNE/RNA compare ``rem`` with the half quantum as integers;
* stochastic modes compare ``delta = rem * 2^-shift`` (exact: a 53-bit integer
  times a power of two) against thresholds that are multiples of 2^-(N+1),
  which are exact in float64 for N <= 32.  When ``shift >= 64`` (no 64-bit
  shift exists) ``k = 0`` and ``delta = sig * 2^-64 * 2^-(shift-64)``, still exact;
  past ``shift = 128`` the second factor is capped at 2^-64, which keeps delta
  below 2^-33, where every threshold with N <= 32 bits classifies all values alike.

Performance: one element function (inlined) serves a generic kernel and an RNE
kernel whose mode is a compile-time constant; large arrays run in chunks on a
thread pool (the kernels release the GIL).  Few kernel signatures are compiled,
because each costs seconds on a fresh machine (cache=True keeps them on disk).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

from ..choices import (
    DEFAULT_SR_BITS,
    MAX_SR_BITS,
    NanPolicy,
    OverflowPolicy,
    Policies,
    RoundingMode,
    check_nbits,
    default_policies,
    quiet_nan_code,
    validate_mode,
    validate_policies,
)
from ..errors import FpspecError
from ..exact.rounding import fp32_nan_to_float64_bits
from ..formats import FloatFormat, get_format
from ..io import native_byte_order
from . import jit as _jit  # noqa: F401 - its cache locators must be in place before the kernels below
from .bits import bits_f32, f32_bits, shr_u32
from .codes import (DOWN, E_NAN, E_NEG, E_OVF, E_RBITS, E_ZERO, INPUT_LAYOUTS, MODE_CODES, NAN_ERROR,
                    NAN_FLIPPED_ZERO, NAN_SIGNED, NAN_UNSIGNED, NEG_ERROR, NEG_NAN, NEG_ZERO, NEGATIVE_CODES, OK,
                    OVERFLOW_CODES, OVF_ERROR, OVF_SAT, RNA, RNE, RTZ, SRA, SRM, SRU, UP, ZERO_CODES, ZERO_ERROR,
                    ZERO_NAN)
from .parallel import run_chunks

__all__ = ["encode_fast", "decode_fast", "decode_table", "MAX_SR_BITS",
           "validate_policies", "EncodeSpec", "encode_spec", "F32Spec"]


#: 2^-s for s in 0..64, exact float64 constants (no pow() in the kernels).
_POW2_NEG = np.array([2.0 ** -s for s in range(65)], dtype=np.float64)


@numba.njit(cache=True, nogil=True)
def _overflow_code(negative, mode, overflow_sat, nonfinite_code, max_code):
    down = mode == RTZ or (mode == DOWN and not negative) or (mode == UP and negative)
    if overflow_sat or down:
        return max_code
    return nonfinite_code


@numba.njit(cache=True, nogil=True, inline="always")
def _encode_one(b, r, layout, spec, mode, nbits):
    """Encode one input bit pattern ``b`` (int64); return (code, error kind).

    The steps are those of :func:`fpspec.exact.rounding.round_to_code`, on integers.
    ``layout`` (:class:`~fpspec.fast.codes.InputBits`) describes the input format, ``spec``
    (:class:`EncodeSpec`) the target format and the policies as codes of :mod:`fpspec.fast.codes`;
    ``mode`` and ``nbits`` stay scalars, so that a kernel can fix the mode at compile time.
    An error kind other than OK means the element is refused (the code is then 0).
    """
    in_man, in_exp_mask, in_bias, in_sign_shift = layout
    (m, emin, subnormals, signed, sign_mask, max_code, nonfinite_code, inf_code, nan_code, nan_in_code,
     overflow_pol, nan_pol, neg_pol, zero_pol) = spec
    stochastic = (mode == SRM) | (mode == SRA) | (mode == SRU)
    negative = ((b >> in_sign_shift) & 1) == 1
    exf = (b >> in_man) & in_exp_mask
    frac = b & ((1 << in_man) - 1)
    if stochastic and r >= (1 << nbits):
        return 0, E_RBITS
    # 1. NaN
    if exf == in_exp_mask and frac != 0:
        if nan_pol == NAN_ERROR:
            return 0, E_NAN
        elif nan_pol == NAN_SIGNED:
            return ((nan_in_code | sign_mask) if (negative and signed) else nan_in_code), OK
        elif nan_pol == NAN_UNSIGNED:
            return nan_in_code, OK
        return (0 if (negative or nan_code == sign_mask) else sign_mask), OK  # NAN_FLIPPED_ZERO
    # 2. sign, unsigned formats
    if negative and not signed:
        if exf == 0 and frac == 0:
            negative = False
        elif neg_pol == NEG_ERROR:
            return 0, E_NEG
        elif neg_pol == NEG_NAN:
            return nan_code, OK
        elif neg_pol == NEG_ZERO:
            return 0, OK
        else:  # NEG_ABS: the code of |x|
            negative = False
    sgn = sign_mask if (negative and signed) else 0
    # an FNUZ format (its NaN is the sign bit alone) has no -0: a zero result is +0 (FPS-FMT-8)
    zsgn = 0 if nan_code == sign_mask else sgn
    # 3. infinity
    if exf == in_exp_mask:
        if inf_code >= 0:
            return inf_code | sgn, OK
        if overflow_pol == OVF_ERROR:
            return 0, E_OVF
        return _overflow_code(negative, mode, overflow_pol == OVF_SAT, nonfinite_code, max_code) | sgn, OK
    # 4. zero
    if exf == 0 and frac == 0:
        if subnormals:
            return zsgn, OK
        if zero_pol == ZERO_ERROR:
            return 0, E_ZERO
        if zero_pol == ZERO_NAN:
            return nan_code, OK
        return 0, OK  # ZERO_MIN
    # 5. binade of |x| = sig * 2^(e - in_man)
    hidden = 1 << in_man
    if exf == 0:  # subnormal input: normalise
        sig = frac
        e = 1 - in_bias
        while sig < hidden:
            sig <<= 1
            e -= 1
    else:
        sig = frac | hidden
        e = exf - in_bias
    if not subnormals and e < emin:
        return sgn, OK  # below the smallest code of a format without zero
    eb = max(e, emin)
    # 6. neighbours: k = floor(|x| / 2^(eb - m)); delta = rem / 2^shift, half = 2^(shift-1)
    shift = in_man - m + (eb - e)
    if shift >= 64:
        # |x| = sig 2^-shift quanta with sig < 2^53: k = 0, and |x| is below half a quantum
        # (rem = 1 < half = 2 stands in for RNE/RNA/directed, which only compare with half
        # and 0).  delta = sig 2^-64 2^-(shift-64) is exact: two power-of-two scalings of a
        # 53-bit integer, far from float64's underflow.  A shift past 128 is capped: then delta and
        # the value computed are both below 2^-75, and every SR threshold with N <= 32 bits
        # (a multiple of 2^-(N+1) >= 2^-33) classifies all of (0, 2^-33) alike.
        k = np.int64(0)
        rem = np.int64(1)
        half = np.int64(2)
        delta = 0.0
        if stochastic:
            delta = (sig * _POW2_NEG[64]) * _POW2_NEG[min(shift - 64, 64)]
    elif shift <= 0:  # input no wider than the target here: exact
        k = sig << (-shift)
        rem = np.int64(0)
        half = np.int64(1)
        delta = 0.0
    else:
        k = sig >> shift
        rem = sig & ((np.int64(1) << shift) - 1)
        half = np.int64(1) << (shift - 1)
        delta = 0.0
        if stochastic:  # only stochastic modes look at delta = rem * 2^-shift (exact)
            delta = rem * _POW2_NEG[shift]
    code = (eb - emin) * (1 << m) + k
    if not subnormals:
        code -= 1 << m
    # 7. rounding (written as selects: the data-dependent decisions do not branch)
    if mode == RNE:
        up = (rem > half) | ((rem == half) & ((code & 1) == 1))
    elif mode == RNA:
        up = rem >= half
    elif mode == RTZ:
        up = False
    elif mode == UP:
        up = (rem != 0) & (not negative)
    elif mode == DOWN:
        up = (rem != 0) & negative
    elif mode == SRM:  # delta + (2r+1)/2^(N+1) >= 1; the threshold is exact in float64
        up = (rem != 0) & (delta >= 1.0 - (2 * r + 1) * _POW2_NEG[nbits + 1])
    elif mode == SRA:  # delta + r/2^N >= 1
        up = (rem != 0) & (delta >= 1.0 - r * _POW2_NEG[nbits])
    elif mode == SRU:  # r < delta 2^N
        up = (rem != 0) & (r < delta * (1 << nbits))
    elif subnormals:  # RNB with subnormals and a mantissa field: rne (FPS-RND-15)
        up = (rem > half) | ((rem == half) & ((code & 1) == 1))
    else:  # RNB in ue8m0: the lowest binade goes up past its bottom; elsewhere ties go up
        up = (rem != 0) & ((code == 0) | (rem >= half))
    code += np.int64(up)
    # 8. overflow
    if overflow_pol == OVF_ERROR and code > max_code:
        return 0, E_OVF
    ovf_code = _overflow_code(negative, mode, overflow_pol == OVF_SAT, nonfinite_code, max_code)
    code = ovf_code if code > max_code else code
    # 9. sign
    return code | (sgn if code != 0 else zsgn), OK


@numba.njit(cache=True, nogil=True)
def _encode_range(bits, layout, rbits, use_r, out, lo, hi, spec, mode, nbits):
    """Encode elements lo..hi-1; return (error kind, index) of the first refusal, or (0, -1).

    Every element is visited (no early exit, so the loop stays simple for the compiler);
    on a refusal the caller discards ``out``.  Runs without the GIL, so chunks of one
    array run on several threads (:func:`fpspec.fast.parallel.run_chunks`).
    """
    first_kind = 0
    first_idx = -1
    src, dst = bits[lo:hi], out[lo:hi]  # zero-based loops: see _encode_range_rne_f32
    rnd = rbits[lo:hi] if use_r else rbits
    for j in range(hi - lo):
        i = lo + j
        r = np.int64(rnd[j]) if use_r else np.int64(0)
        code, kind = _encode_one(np.int64(src[j]), r, layout, spec, mode, nbits)
        dst[j] = code
        if kind != OK and first_idx < 0:
            first_kind = kind
            first_idx = i
    return first_kind, first_idx


@numba.njit(cache=True, nogil=True)
def _encode_range_rne(bits, layout, out, lo, hi, spec):
    """:func:`_encode_range` with the mode fixed to RNE and no random bits.

    The same element function with the mode a compile-time constant, so the compiler
    drops the other modes' code: the common case runs about twice as fast.
    """
    first_kind = 0
    first_idx = -1
    src, dst = bits[lo:hi], out[lo:hi]  # zero-based loops: see _encode_range_rne_f32
    for j in range(hi - lo):
        i = lo + j
        code, kind = _encode_one(np.int64(src[j]), np.int64(0), layout, spec, RNE, DEFAULT_SR_BITS)
        dst[j] = code
        if kind != OK and first_idx < 0:
            first_kind = kind
            first_idx = i
    return first_kind, first_idx


_U32 = np.uint32


@numba.njit(cache=True, nogil=True, inline="always")
def rne_f32_magnitude(a, m, emin, limit):
    """Steps 5-8 of :func:`_encode_one` for a binary32 magnitude, branch-free in 32-bit lanes:
    the RNE magnitude code of ``a = |x|`` as bits (uint32) in a format with ``m >= 1``
    mantissa bits, subnormals and smallest normal exponent ``emin`` (its smallest
    subnormal at least 2^-124), saturated at ``limit`` (uint32; +-Inf and NaN bits give
    codes past every limit).  Every shift is a 32-bit shift by the same amount in every lane
    (:func:`fpspec.fast.bits.shr_u32`); the block quantizer's binary32 payloads take the same
    steps (docs/rounding.rst, FPS-RND-0), with ``drop = 23 - m``:

    5. binade: ``a >= 2^emin`` (a normal target binade) or below it (the subnormal binade).
    6.-7. neighbours and RNE, normal target: the bits of ``a`` from the binade below the
       target's lowest normal one on, ``a - (127 + emin - 1) 2^23``, are the target code
       times ``2^drop`` plus the dropped fraction; one integer round-half-even shift by
       ``drop`` gives the code, and a carry out of the significand moves into the next
       binade by itself.  Subnormal target: with ``c = 2^(emin - m + 23)``, the binary32
       sum ``|x| + c`` (default round-to-nearest-even) lies in c's binade, whose spacing is
       the target's subnormal quantum 2^(emin - m), so ``bits(|x| + c) - bits(c)`` is the
       RNE multiple of that quantum, the code (``2^m``, the lowest normal code, when it rounds
       up out of the subnormals).  A binary32 subnormal gives 0, as it must: it is below half
       of any such format's smallest subnormal, and a processor that flushes it to zero
       gives the same sum.
    8. overflow: ``min(code, limit)``.
    """
    drop = _U32(23 - m)
    low_normal = _U32(_U32(127 + emin) << _U32(23))
    # -(bits of 2^(emin - 1)) + (2^(drop - 1) - 1): the binade offset and the round-half bias in one
    offset = _U32(_U32(_U32(_U32(1) << _U32(drop - _U32(1))) - _U32(1)) - _U32(low_normal - _U32(0x800000)))
    c_bits = _U32(_U32(127 + emin - m + 23) << _U32(23))
    normal = shr_u32(_U32(_U32(a + offset) + _U32(shr_u32(a, drop) & _U32(1))), drop)
    subnormal = _U32(f32_bits(bits_f32(a) + bits_f32(c_bits)) - c_bits)
    code = normal if a >= low_normal else subnormal
    return code if code < limit else limit


@numba.njit(cache=True, nogil=True)
def _encode_range_rne_f32(bits, out, lo, hi, spec):
    """:func:`_encode_one` for the common case, branch-free in 32-bit lanes: float32 input
    (``bits`` uint32), RNE, a signed format of at most 8 bits with subnormals and ``m >= 1``
    whose smallest subnormal is at least 2^-124, overflow ``sat`` or ``nonfinite`` with the
    nonfinite code right above max finite (``limit`` is the code every overflow and +-Inf
    becomes; ``sat`` only in formats without Inf),
    and any NaN policy but ``error`` folded into ``nan_base ^ (sign & nan_sign)``; ``spec`` is an
    :class:`F32Spec`.  Returns (1, -1) when a NaN was seen (the caller decides whether that is a
    refusal), else (0, -1).  Steps 5-8 are :func:`rne_f32_magnitude` and 9. sign an OR, no branches.  A NaN's
    bits lie above every limit, so the loop gives it ``limit | sign``; 1. NaN is then a second
    pass over the slice, run only when the largest ``|x|`` bits are a NaN's, that writes the
    NaN codes (a select per element in the main loop cost 3-10 % of its time).  The loops run
    over zero-based slices, because an index that may be negative makes Numba wrap it around
    and the loop then stays scalar (3.4 times slower here).
    """
    m, emin, limit, sign_shift, sign_bit, nan_base, nan_sign = spec
    lim = _U32(limit)
    ss = _U32(sign_shift)
    sb = _U32(sign_bit)
    nb = _U32(nan_base)
    ns = _U32(nan_sign)
    a_max = _U32(0)
    src, dst = bits[lo:hi], out[lo:hi]
    for i in range(hi - lo):  # from 0: the compiler can drop negative-index wraparound and vectorise
        u = src[i]
        a = _U32(u & _U32(0x7FFFFFFF))
        dst[i] = _U32(rne_f32_magnitude(a, m, emin, lim) | _U32(shr_u32(u, ss) & sb))
        a_max = a_max if a_max > a else a
    if a_max <= _U32(0x7F800000):
        return np.int64(0), np.int64(-1)
    for i in range(hi - lo):  # 1. NaN: the slice holds one
        u = src[i]
        if _U32(u & _U32(0x7FFFFFFF)) > _U32(0x7F800000):
            dst[i] = _U32(nb ^ _U32(_U32(shr_u32(u, ss) & sb) & ns))
    return np.int64(1), np.int64(-1)


class EncodeSpec(NamedTuple):
    """The target format and the policies of one conversion, as :func:`_encode_one` reads them
    (the policies as codes of :mod:`fpspec.fast.codes`); built by :func:`encode_spec`."""

    m: int                # mantissa bits
    emin: int             # smallest normal exponent
    subnormals: bool
    signed: bool
    sign_mask: int
    max_code: int         # largest finite magnitude code
    nonfinite_code: int   # what overflow becomes under OVF_NONFINITE: the Inf code, else the NaN code, else -1
    inf_code: int         # -1: no Inf
    nan_code: int         # -1: no NaN
    nan_in_code: int      # the code a NaN input becomes (NAN_SIGNED, NAN_UNSIGNED)
    overflow: int         # OVF_*
    nan: int              # NAN_*
    negative: int         # NEG_*
    zero: int             # ZERO_*


def encode_spec(fmt: FloatFormat, pol: Policies) -> EncodeSpec:
    """The :class:`EncodeSpec` of a conversion to ``fmt`` under the (validated) policies ``pol``."""
    nonfinite = fmt.inf_code if fmt.has_inf else (fmt.nan_code if fmt.has_nan else -1)
    nan_id, nan_in_code = _nan_args(fmt, pol)
    return EncodeSpec(fmt.man_bits, fmt.emin, fmt.subnormals, fmt.signed, fmt.sign_mask, fmt.max_finite_code,
                      nonfinite, fmt.inf_code if fmt.has_inf else -1, fmt.nan_code if fmt.has_nan else -1,
                      nan_in_code, OVERFLOW_CODES[pol.overflow], nan_id, NEGATIVE_CODES[pol.negative],
                      ZERO_CODES[pol.zero])


class F32Spec(NamedTuple):
    """The constants of :func:`_encode_range_rne_f32`; built by :func:`_rne_f32_spec`."""

    m: int            # mantissa bits
    emin: int         # smallest normal exponent
    limit: int        # the code every overflow and +-Inf becomes
    sign_shift: int   # 32 - bits: moves binary32's sign bit onto the format's
    sign_bit: int
    nan_base: int     # a NaN's code is nan_base ^ (sign & nan_sign)
    nan_sign: int


def _rne_f32_spec(fmt: FloatFormat, pol: Policies) -> F32Spec | None:
    """The :class:`F32Spec` of :func:`_encode_range_rne_f32` for ``fmt`` and ``pol``, or None when
    the case is not the one it handles (the general kernel then runs)."""
    if not (fmt.signed and fmt.subnormals and fmt.bits <= 8 and fmt.man_bits >= 1
            and fmt.emin - fmt.man_bits >= -124 and fmt.has_negative_zero):
        return None
    if pol.overflow is OverflowPolicy.SAT and not fmt.has_inf:  # (+-Inf must stay Inf where it exists)
        limit = fmt.max_finite_code
    elif pol.overflow is OverflowPolicy.NONFINITE:
        nonfinite = fmt.inf_code if fmt.has_inf else fmt.nan_code
        if nonfinite != fmt.max_finite_code + 1:
            return None
        limit = nonfinite
    else:
        return None
    sign_bit = fmt.sign_mask
    nan_base, nan_sign = {
        NanPolicy.NAN: (fmt.nan_code, sign_bit), NanPolicy.QUIET: (quiet_nan_code(fmt), sign_bit),
        NanPolicy.ZERO: (0, 0), NanPolicy.MAX: (fmt.max_finite_code, 0),
        NanPolicy.FLIPPED_ZERO: (sign_bit, sign_bit), NanPolicy.ERROR: (0, 0),
    }[pol.nan]
    return F32Spec(fmt.man_bits, fmt.emin, limit, 32 - fmt.bits, sign_bit, nan_base, nan_sign)


def _nan_args(fmt: FloatFormat, pol: Policies) -> tuple[int, int]:
    """(the kernel's NaN behaviour, the code a NaN input becomes) for step 1 of :func:`_encode_one`."""
    if pol.nan is NanPolicy.ERROR:
        return NAN_ERROR, 0
    if pol.nan is NanPolicy.NAN:
        return NAN_SIGNED, fmt.nan_code  # type: ignore[return-value]
    if pol.nan is NanPolicy.QUIET:
        return NAN_SIGNED, quiet_nan_code(fmt)  # type: ignore[return-value]
    if pol.nan is NanPolicy.ZERO:
        return NAN_UNSIGNED, 0
    if pol.nan is NanPolicy.MAX:
        return NAN_UNSIGNED, fmt.max_finite_code
    return NAN_FLIPPED_ZERO, 0


def encode_fast(x: np.ndarray, fmt: FloatFormat | str, mode: RoundingMode | str = RoundingMode.RNE,
                *, rbits: np.ndarray | None = None, nbits: int = DEFAULT_SR_BITS,
                policies: Policies | None = None) -> np.ndarray:
    """Encode a float array to codes of ``fmt``; same contract as :func:`fpspec.exact.rounding.encode_exact`."""
    fmt = get_format(fmt)
    mode = RoundingMode.parse(mode)
    pol = policies or default_policies(fmt)
    validate_policies(fmt, pol)
    validate_mode(fmt, mode)
    x = np.asarray(x)
    shape = x.shape
    if x.dtype.name not in INPUT_LAYOUTS:
        raise FpspecError(f"input must be a float array (float16/bfloat16/float32/float64), got {x.dtype}")
    view_dtype, layout = INPUT_LAYOUTS[x.dtype.name]
    # the bits viewed below must be native: fpspec.encode brings its input to the native order,
    # a direct caller of this public function may hand in a big-endian '>f4' (a no-op otherwise)
    x = native_byte_order(x)
    bits = np.ascontiguousarray(x).reshape(-1).view(view_dtype)
    if mode.stochastic:
        nbits = check_nbits(nbits, MAX_SR_BITS)
        if rbits is None:
            raise FpspecError(f"stochastic mode {mode.value} needs random bits (rbits)")
        rb = np.asarray(rbits)
        if rb.shape != shape:
            raise FpspecError(f"rbits shape {rb.shape} does not match input shape {shape}")
        if rb.dtype not in (np.uint8, np.uint16, np.uint32):
            raise FpspecError(f"rbits must be uint8, uint16 or uint32, got {rb.dtype}")
        rflat = np.ascontiguousarray(rb).reshape(-1).astype(np.uint32, copy=False)
        use_r = True
    else:
        rflat = np.zeros(1, dtype=np.uint32)
        use_r = False
    # Kernel signatures are kept few, because each costs seconds of compilation on a fresh
    # machine: RNE into a narrow format (the hot path) reads the raw uint32 (fp16/bf16
    # widened, fp32 as is) or int64 (fp64) bits and writes uint8; everything else goes
    # through one int64-in, uint32-out signature.
    f32_spec = _rne_f32_spec(fmt, pol) if (mode is RoundingMode.RNE and x.dtype == np.float32) else None
    if f32_spec is not None:  # the common case: branch-free 32-bit kernel
        out = np.empty(bits.shape[0], dtype=np.uint8)
        err = run_chunks(_encode_range_rne_f32, bits.shape[0], lambda lo, hi: (bits, out, lo, hi, f32_spec))
        if err[0] and pol.nan is NanPolicy.ERROR:
            err = (E_NAN, int(np.argmax(np.isnan(x.reshape(-1)))))
        else:
            err = (OK, -1)
    elif mode is RoundingMode.RNE and fmt.bits <= 8:
        spec = encode_spec(fmt, pol)
        if bits.dtype == np.uint16:
            bits = bits.astype(np.uint32)
        out = np.empty(bits.shape[0], dtype=np.uint8)
        err = run_chunks(_encode_range_rne, bits.shape[0], lambda lo, hi: (bits, layout, out, lo, hi, spec))
    else:
        spec = encode_spec(fmt, pol)
        out = np.empty(bits.shape[0], dtype=np.uint32)
        bits64 = bits.astype(np.int64, copy=False)
        err = run_chunks(_encode_range, bits.shape[0], lambda lo, hi: (
            bits64, layout, rflat, use_r, out, lo, hi, spec, MODE_CODES[mode], nbits))
    if err[0] != OK:
        where = tuple(int(i) for i in np.unravel_index(int(err[1]), shape)) if shape else ()
        msg = {
            E_NAN: f"NaN input to {fmt.name} under NaN policy 'error'",
            E_NEG: f"negative input to unsigned {fmt.name} under negative policy 'error'",
            E_ZERO: f"zero input to {fmt.name}, which has no zero, under zero policy 'error'",
            E_OVF: f"overflow: value beyond max finite {fmt.max_finite} of {fmt.name} "
                    "under overflow policy 'error'",
            E_RBITS: f"random value not below 2^{nbits}",
        }[int(err[0])]
        raise FpspecError(msg, where)
    return out.astype(fmt.storage_dtype, copy=False).reshape(shape)


_TABLES: dict[str, np.ndarray] = {}


def decode_table(fmt: FloatFormat | str) -> np.ndarray:
    """float64 value of every code of a format of at most 16 bits (NaN, +-Inf as floats)."""
    fmt = get_format(fmt)
    if fmt.bits > 16:
        raise FpspecError(f"{fmt.name} is too wide for a decode table")
    table = _TABLES.get(fmt.name)
    if table is None:
        table = np.array([float(fmt.decode_exact(c)) for c in range(fmt.num_codes)], dtype=np.float64)
        for c in range(fmt.num_codes):  # negative zeros keep their sign (FNUZ: that code is NaN)
            if fmt.signed and c == fmt.sign_mask and fmt.has_negative_zero:
                table[c] = -0.0
        table.setflags(write=False)
        _TABLES[fmt.name] = table
    return table


def decode_fast(codes: np.ndarray, fmt: FloatFormat | str) -> np.ndarray:
    """Decode codes to float64 (exact: every value of these formats is a float64)."""
    fmt = get_format(fmt)
    codes = np.asarray(codes)
    if codes.dtype.kind not in "ui":
        raise FpspecError(f"codes must be an unsigned integer array, got {codes.dtype}")
    bad = np.flatnonzero((codes.reshape(-1) < 0) | (codes.reshape(-1) >= fmt.num_codes))
    if bad.size:
        idx = tuple(int(i) for i in np.unravel_index(int(bad[0]), codes.shape))
        raise FpspecError(f"code {int(codes.reshape(-1)[bad[0]])} out of range for {fmt.name} "
                          f"({fmt.bits} bits)", idx)
    if fmt.bits == 32:
        u = codes.astype(np.uint32)
        with np.errstate(invalid="ignore"):  # a signalling NaN warns; it is rewritten below
            out = u.view(np.float32).astype(np.float64)  # exact for every non-NaN code
        nan = ((u & np.uint32(0x7F800000)) == np.uint32(0x7F800000)) & ((u & np.uint32(0x7FFFFF)) != 0)
        if nan.any():  # NaN: written from the bits, not left to the platform's conversion
            out.view(np.uint64)[nan] = fp32_nan_to_float64_bits(u[nan])
        return out
    return decode_table(fmt)[codes.astype(np.intp)]
