"""The executable spec of rounding one exact value to a format (docs/rounding.rst).

Everything here is integer or :class:`fractions.Fraction` arithmetic; there is no
floating-point operation between the input and the code.  :func:`round_to_code`
is the single rounding function of fpspec: every conversion, every block
quantizer's exact profile and the fast path's tests end here.

The steps, numbered as in FPS-RND-0:

1. NaN input: the NaN policy decides.
2. Split the sign; an unsigned format applies the negative policy to x < 0.
3. Inf input: Inf code, else treated as overflow (step 8).
4. Zero: the (signed) zero code, or the zero policy where the format has none.
5. Binade: e = floor(log2 |x|), raised to emin in the subnormal range; below
   emin in a format without subnormals the result is the smallest code.
6. Neighbours: k = floor(|x| / 2^(e-m)); lo = k 2^(e-m), hi = lo + 2^(e-m), with
   codes c and c+1 (positive codes are ordered by magnitude); delta = the
   position of |x| between them, in [0, 1).
7. Rounding: the mode (and the random value r for stochastic modes) picks c or c+1
   (``rne-bits`` by its own rule, FPS-RND-15).
8. Overflow: a code past max finite is resolved by the overflow policy.
9. The sign bit is put back.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Iterable

import numpy as np

from ..choices import (
    DEFAULT_SR_BITS,
    MAX_SR_BITS,
    NanPolicy,
    NegativePolicy,
    OverflowPolicy,
    Policies,
    RoundingMode,
    ZeroPolicy,
    check_nbits,
    default_policies,
    quiet_nan_code,
    validate_mode,
    validate_policies,
)
from ..errors import FpspecError
from ..formats import CodeKind, FloatFormat, get_format

__all__ = ["round_to_code", "round_up_decision", "round_up_decision_int", "round_up_decision_bits", "locate",
           "encode_exact", "decode_exact_array", "decode_exact_codes", "fp32_nan_to_float64_bits", "exact_value"]

Number = Fraction | float | int


def _floor_log2(num: int, den: int) -> int:
    """floor(log2(num/den)) for num, den > 0, exactly, from the integer bit lengths."""
    e = num.bit_length() - den.bit_length()
    # Now 2^(e-1) < num/den < 2^(e+1); one comparison settles which side of 2^e it is.
    if (num << max(-e, 0)) < (den << max(e, 0)):
        e -= 1
    return e


def _exact_ratio(x: Number) -> tuple[int, int]:
    """The exact value of a finite x as an integer ratio ``num/den`` with den > 0."""
    if isinstance(x, float):
        return x.as_integer_ratio()  # exact: den is a power of two
    if isinstance(x, int):
        return x, 1
    return x.numerator, x.denominator


def round_up_decision_int(mode: RoundingMode, rem: int, den: int, code_lo: int, negative: bool,
                          r: int | None, nbits: int) -> bool:
    """Step 7 on integers: whether the magnitude goes to the upper neighbour (FPS-RND-1..8).

    ``delta = rem / den`` in (0, 1) is the position of |x| between the neighbours,
    ``code_lo`` the magnitude code of the lower one.  Each test is the definition of
    the mode in docs/rounding.rst, multiplied through by the positive ``den * 2^(N+1)``.
    """
    if mode is RoundingMode.RNE:  # delta > 1/2, or delta == 1/2 and code_lo odd
        return 2 * rem > den or (2 * rem == den and code_lo % 2 == 1)
    if mode is RoundingMode.RNA:  # delta >= 1/2
        return 2 * rem >= den
    if mode is RoundingMode.RTZ:
        return False
    if mode is RoundingMode.UP:
        return not negative
    if mode is RoundingMode.DOWN:
        return negative
    assert r is not None, "stochastic rounding needs r"
    if mode is RoundingMode.SR_MIDPOINT:  # delta + (2r+1)/2^(N+1) >= 1
        return (rem << (nbits + 1)) + (2 * r + 1) * den >= den << (nbits + 1)
    if mode is RoundingMode.SR_ADD:  # delta + r/2^N >= 1
        return (rem << nbits) + r * den >= den << nbits
    if mode is RoundingMode.SR_UNBIASED:  # r < delta * 2^N
        return r * den < rem << nbits
    raise AssertionError(mode)


def round_up_decision_bits(fmt: FloatFormat, rem: int, den: int, code_lo: int) -> bool:
    """Step 7 of ``rne-bits`` (FPS-RND-15): nearest, ties to the even significand, as a
    converter rounding IEEE bit patterns computes it.

    With a mantissa field and subnormals the significand's last bit is the code's last
    bit: this is ``rne``.  In a format with neither (ue8m0) every normal code's significand
    is 1 (odd), so a tie goes up; and the lowest binade [2^emin, 2^(emin+1)) is rounded as
    the subnormal binade such a converter assumes, whose neighbours are 0 (code 0) and
    2^(emin+1) (code 1) with midpoint 2^emin: every value above 2^emin goes up.
    """
    if fmt.subnormals:
        return round_up_decision_int(RoundingMode.RNE, rem, den, code_lo, False, None, 0)
    if code_lo == 0:  # the lowest binade, above its bottom: past the assumed subnormal midpoint
        return True
    return 2 * rem >= den


def round_up_decision(mode: RoundingMode, delta: Fraction, code_lo: int, negative: bool,
                      r: int | None, nbits: int) -> bool:
    """Step 7 with ``delta`` as a Fraction in (0, 1); see :func:`round_up_decision_int`."""
    return round_up_decision_int(mode, delta.numerator, delta.denominator, code_lo, negative, r, nbits)


def _magnitude_down_mode(mode: RoundingMode, negative: bool) -> bool:
    """Modes that IEEE 754 sec. 7.4 lets overflow to max finite instead of Inf."""
    return (mode is RoundingMode.RTZ
            or (mode is RoundingMode.DOWN and not negative)
            or (mode is RoundingMode.UP and negative))


def _nonfinite_code(fmt: FloatFormat) -> int:
    code = fmt.inf_code if fmt.has_inf else fmt.nan_code
    if code is None:
        raise FpspecError(f"{fmt.name} has no Inf or NaN code: overflow policy 'nonfinite' is impossible")
    return code


def _with_sign(fmt: FloatFormat, code: int, negative: bool) -> int:
    if code == 0 and not fmt.has_negative_zero:
        return 0  # an FNUZ format's sign-bit-only code is its NaN: every zero is +0 (FPS-FMT-8)
    return code | fmt.sign_mask if (negative and fmt.signed) else code


@lru_cache(maxsize=1 << 18)
def locate(num: int, den: int, fmt: FloatFormat) -> tuple[int, int, int] | None:
    """Steps 5 and 6 for the magnitude ``a = num/den > 0``: ``(code_lo, rem, qden)``.

    ``code_lo`` is the magnitude code of the largest value of the format's grid
    (extended with an unbounded exponent range above) that is <= a, and
    ``rem/qden`` in [0, 1) the position of ``a`` between it and the next grid value.
    None means ``a`` is below the smallest code of a format without subnormals.
    (A pure function of its arguments, memoised so that the modes of one sweep share it.)
    """
    m = fmt.man_bits
    # 5. binade: 2^e <= a < 2^(e+1), raised to emin in the subnormal range
    e = _floor_log2(num, den)
    if e < fmt.emin:
        if not fmt.subnormals:
            return None
        e = fmt.emin
    # 6. neighbours: a / 2^(e-m) = k + rem/qden
    shift = m - e
    scaled_num, qden = (num << shift, den) if shift >= 0 else (num, den << -shift)
    k, rem = divmod(scaled_num, qden)
    code = (e - fmt.emin) * (1 << m) + k - (0 if fmt.subnormals else (1 << m))
    return code, rem, qden


def round_to_code(x: Number, fmt: FloatFormat | str, mode: RoundingMode | str = RoundingMode.RNE,
                  *, r: int | None = None, nbits: int = DEFAULT_SR_BITS,
                  policies: Policies | None = None) -> int:
    """Round one exact value to a code of ``fmt`` (FPS-RND-0).

    Args:
        x: the exact input: a Fraction, an int, or a float (whose exact binary
            value is used; -0.0, inf and nan are recognised).
        fmt: the target format.
        mode: the rounding mode.
        r: the random integer in [0, 2^nbits) for stochastic modes.
        nbits: the width N of ``r``.
        policies: overflow / NaN / negative / zero policies; default
            :func:`fpspec.choices.default_policies` of ``fmt``.

    Raises:
        FpspecError: when a policy is ``error`` and applies, or arguments are invalid.
    """
    fmt = get_format(fmt)
    mode = RoundingMode.parse(mode)
    pol = _checked_policies(fmt, mode, policies)
    if mode.stochastic:
        check_nbits(nbits)
    return _round_checked(x, fmt, mode, r, nbits, pol)


def _round_checked(x: Number, fmt: FloatFormat, mode: RoundingMode, r: int | None, nbits: int,
                   pol: Policies) -> int:
    """Steps 1-7 of :func:`round_to_code` on arguments its door resolved and checked (a format,
    a mode, policies the format honours, a valid ``nbits``): what :func:`encode_exact` runs per
    element."""
    if not isinstance(x, (float, int, Fraction)):
        x = float(x)  # NumPy / ml_dtypes float scalars widen to a Python float exactly
    if mode.stochastic and (r is None or not 0 <= r < (1 << nbits)):
        raise FpspecError(f"stochastic mode {mode.value} needs r in [0, 2^{nbits}), got {r}")

    # 1. NaN
    if isinstance(x, float) and math.isnan(x):
        negative = math.copysign(1.0, x) < 0
        if pol.nan is NanPolicy.ERROR:
            raise FpspecError(f"NaN input to {fmt.name} under NaN policy 'error'")
        if pol.nan is NanPolicy.ZERO:
            return 0
        if pol.nan is NanPolicy.MAX:
            return fmt.max_finite_code
        if pol.nan is NanPolicy.FLIPPED_ZERO:
            return _with_sign(fmt, 0, not negative)
        code = quiet_nan_code(fmt) if pol.nan is NanPolicy.QUIET else fmt.nan_code
        assert code is not None  # validate_policies refused NaN policies the format cannot honour
        return _with_sign(fmt, code, negative)

    # 2. sign
    is_inf = isinstance(x, float) and math.isinf(x)
    if isinstance(x, float):
        negative = math.copysign(1.0, x) < 0
        num, den = (1, 0) if is_inf else _exact_ratio(abs(x))
    else:
        num, den = _exact_ratio(x)
        negative = num < 0
        num = abs(num)
    if negative and not fmt.signed:
        if num == 0:
            negative = False  # -0 is zero in an unsigned format
        elif pol.negative is NegativePolicy.ERROR:
            raise FpspecError(f"negative input to unsigned {fmt.name} under negative policy 'error'")
        elif pol.negative is NegativePolicy.ZERO:
            return 0
        elif pol.negative is NegativePolicy.ABS:
            negative = False  # the code of |x|
        else:
            assert fmt.nan_code is not None
            return fmt.nan_code

    # 3. infinity
    if is_inf:
        if fmt.has_inf:
            return _with_sign(fmt, fmt.inf_code, negative)  # type: ignore[arg-type]
        return _overflow(fmt, mode, pol, negative)

    # 4. zero
    if num == 0:
        if fmt.has_zero:
            return _with_sign(fmt, 0, negative)
        if pol.zero is ZeroPolicy.ERROR:
            raise FpspecError(f"zero input to {fmt.name}, which has no zero, under zero policy 'error'")
        if pol.zero is ZeroPolicy.MIN:
            return 0
        return fmt.nan_code  # type: ignore[return-value]

    # 5, 6. binade and neighbours
    where = locate(num, den, fmt)
    if where is None:
        return _with_sign(fmt, 0, negative)  # below the smallest code of a format without zero
    code, rem, qden = where

    # 7. rounding
    if rem:
        if mode is RoundingMode.RNE_BITS:
            up = round_up_decision_bits(fmt, rem, qden, code)
        else:
            up = round_up_decision_int(mode, rem, qden, code, negative, r, nbits)
        code += up

    # 8. overflow
    if code > fmt.max_finite_code:
        return _overflow(fmt, mode, pol, negative)

    # 9. sign
    return _with_sign(fmt, code, negative)


@lru_cache(maxsize=1024)
def _checked_policies(fmt: FloatFormat, mode: RoundingMode, policies: Policies | None) -> Policies:
    """The policies in force (the format's defaults when None), refused up front when the
    format cannot honour them or the mode is not defined for it (FPS-RND-15, FPS-RND-16)."""
    pol = policies or default_policies(fmt)
    validate_policies(fmt, pol)
    validate_mode(fmt, mode)
    return pol


def _overflow(fmt: FloatFormat, mode: RoundingMode, pol: Policies, negative: bool) -> int:
    if pol.overflow is OverflowPolicy.ERROR:
        raise FpspecError(f"overflow: value beyond max finite {fmt.max_finite} of {fmt.name} "
                          "under overflow policy 'error'")
    if pol.overflow is OverflowPolicy.SAT or _magnitude_down_mode(mode, negative):
        return _with_sign(fmt, fmt.max_finite_code, negative)
    return _with_sign(fmt, _nonfinite_code(fmt), negative)


# --------------------------------------------------------------------- arrays
def exact_value(v: object) -> Number:
    """The exact value of one NumPy scalar of a float dtype, as a Python float.

    float16, bfloat16 and float32 widen to float64 exactly (sign of zero and of
    NaN kept), so the float carries the input's exact value.
    """
    return float(v)


def _as_exact_floats(x: np.ndarray) -> list[float]:
    """Every element's exact value, row-major, as Python floats (exact widening to float64)."""
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        raise FpspecError(f"input must be a float array (float16/bfloat16/float32/float64), got {x.dtype}")
    with np.errstate(invalid="ignore"):  # NaN widens to NaN (sign kept); nothing is lost
        return x.astype(np.float64).reshape(-1).tolist()


def encode_exact(x: np.ndarray, fmt: FloatFormat | str, mode: RoundingMode | str = RoundingMode.RNE,
                 *, rbits: np.ndarray | None = None, nbits: int = DEFAULT_SR_BITS,
                 policies: Policies | None = None) -> np.ndarray:
    """Element-by-element :func:`round_to_code` over an array (the slow reference).

    Errors name the first offending index.
    """
    fmt = get_format(fmt)
    mode = RoundingMode.parse(mode)
    pol = _checked_policies(fmt, mode, policies)
    x = np.asarray(x)
    values = _as_exact_floats(x)
    out = np.empty(x.shape, dtype=fmt.storage_dtype)
    flat_r: Iterable[int | None]
    if mode.stochastic:
        check_nbits(nbits, MAX_SR_BITS)
        if rbits is None or np.shape(rbits) != x.shape:
            raise FpspecError(f"stochastic mode {mode.value} needs rbits of shape {x.shape}")
        flat_r = np.asarray(rbits).reshape(-1).tolist()
    else:
        flat_r = [None] * x.size
    codes = []
    for i, (v, r) in enumerate(zip(values, flat_r)):
        try:
            codes.append(_round_checked(v, fmt, mode, r, nbits, pol))
        except FpspecError as exc:
            where = tuple(int(j) for j in np.unravel_index(i, x.shape)) if x.shape else ()
            raise FpspecError(str(exc), where) from None
    out.reshape(-1)[:] = codes
    return out


def decode_exact_array(codes: np.ndarray, fmt: FloatFormat | str) -> list[Fraction | float]:
    """Decode every code with :meth:`FloatFormat.decode_exact` (flat list, row-major)."""
    fmt = get_format(fmt)
    return [fmt.decode_exact(int(c)) for c in np.asarray(codes).reshape(-1)]


def decode_exact_codes(codes: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Decode codes to float64 values, every code by :meth:`FloatFormat.decode_exact` (FPS-FMT-3):
    the exact twin of :func:`fpspec.fast.rounding.decode_fast` (same checks, same output)."""
    codes = np.asarray(codes)
    if codes.dtype.kind not in "ui":
        raise FpspecError(f"codes must be an unsigned integer array, got {codes.dtype}")
    flat = codes.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= fmt.num_codes))
    if bad.size:
        idx = tuple(int(i) for i in np.unravel_index(int(bad[0]), codes.shape))
        raise FpspecError(f"code {int(flat[bad[0]])} out of range for {fmt.name} ({fmt.bits} bits)", idx)
    values = decode_exact_array(codes, fmt)
    out = np.array([float(v) for v in values], dtype=np.float64)  # exact: every value fits float64
    if fmt.signed:  # Fraction(0) has no sign: the negative zero code decodes to -0.0
        out[(flat & fmt.sign_mask).astype(bool) & (out == 0)] = -0.0
    if fmt.bits == 32:  # binary32 NaN codes keep their trailing significand (quieted)
        nan = np.array([fmt.kind(int(c)) is CodeKind.NAN for c in flat], dtype=bool)
        if nan.any():
            out.view(np.uint64)[nan] = fp32_nan_to_float64_bits(flat[nan].astype(np.uint32))
    return out.reshape(codes.shape)


def fp32_nan_to_float64_bits(u: np.ndarray) -> np.ndarray:
    """float64 bits of binary32 NaN codes: sign kept, quiet bit set, the trailing significand
    moved to the top of float64's (IEEE 754 sec. 6.2.3 widening, as x86 and Arm convert)."""
    u64 = u.astype(np.uint64)
    return ((u64 >> np.uint64(31)) << np.uint64(63)) | np.uint64(0x7FF8000000000000) | \
        ((u64 & np.uint64(0x7FFFFF)) << np.uint64(29))
