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
7. Rounding: the mode (and the random value r for stochastic modes) picks c or c+1.
8. Overflow: a code past max finite is resolved by the overflow policy.
9. The sign bit is put back.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable

import numpy as np

from ..choices import (
    DEFAULT_SR_BITS,
    NanPolicy,
    NegativePolicy,
    OverflowPolicy,
    Policies,
    RoundingMode,
    ZeroPolicy,
    default_policies,
)
from ..errors import FpspecError
from ..formats import FloatFormat, get_format

__all__ = ["round_to_code", "round_up_decision", "encode_exact", "decode_exact_array", "exact_value"]

Number = Fraction | float | int


def _floor_log2(a: Fraction) -> int:
    """floor(log2 a) for a > 0, exactly, from the integer bit lengths."""
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    # 2^e <= n/d < 2^(e+1) after at most one correction.
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1
    return e


def round_up_decision(mode: RoundingMode, delta: Fraction, code_lo: int, negative: bool,
                      r: int | None, nbits: int) -> bool:
    """Step 7: whether the magnitude goes to the upper neighbour (FPS-RND-1..8).

    ``delta`` in (0, 1) is the position of |x| between the neighbours, ``code_lo``
    the magnitude code of the lower one.
    """
    if mode is RoundingMode.RNE:
        return delta > Fraction(1, 2) or (delta == Fraction(1, 2) and code_lo % 2 == 1)
    if mode is RoundingMode.RNA:
        return delta >= Fraction(1, 2)
    if mode is RoundingMode.RTZ:
        return False
    if mode is RoundingMode.UP:
        return not negative
    if mode is RoundingMode.DOWN:
        return negative
    assert r is not None, "stochastic rounding needs r"
    scale = Fraction(1, 1 << nbits)
    if mode is RoundingMode.SR_MIDPOINT:
        return delta + (2 * r + 1) * scale / 2 >= 1
    if mode is RoundingMode.SR_ADD:
        return delta + r * scale >= 1
    if mode is RoundingMode.SR_UNBIASED:
        return r < delta * (1 << nbits)
    raise AssertionError(mode)


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
    return code | fmt.sign_mask if (negative and fmt.signed) else code


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
    pol = policies or default_policies(fmt)
    if mode.stochastic:
        if r is None or not 0 <= r < (1 << nbits):
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
        if fmt.nan_code is None:
            raise FpspecError(f"{fmt.name} has no NaN code: NaN policy 'nan' is impossible")
        return _with_sign(fmt, fmt.nan_code, negative)

    # 2. sign
    if isinstance(x, float):
        negative = math.copysign(1.0, x) < 0
    else:
        negative = x < 0
    is_inf = isinstance(x, float) and math.isinf(x)
    a = None if is_inf else abs(Fraction(x))
    if negative and not fmt.signed:
        if a == 0:
            negative = False  # -0 is zero in an unsigned format
        elif pol.negative is NegativePolicy.ERROR:
            raise FpspecError(f"negative input to unsigned {fmt.name} under negative policy 'error'")
        elif pol.negative is NegativePolicy.ZERO:
            if not fmt.has_zero:
                raise FpspecError(f"{fmt.name} has no zero: negative policy 'zero' is impossible")
            return 0
        else:
            assert fmt.nan_code is not None
            return fmt.nan_code

    # 3. infinity
    if is_inf:
        if fmt.has_inf:
            return _with_sign(fmt, fmt.inf_code, negative)  # type: ignore[arg-type]
        return _overflow(fmt, mode, pol, negative)

    # 4. zero
    assert a is not None
    if a == 0:
        if fmt.has_zero:
            return _with_sign(fmt, 0, negative)
        if pol.zero is ZeroPolicy.ERROR:
            raise FpspecError(f"zero input to {fmt.name}, which has no zero, under zero policy 'error'")
        if pol.zero is ZeroPolicy.MIN:
            return 0
        return fmt.nan_code  # type: ignore[return-value]

    # 5. binade
    m = fmt.man_bits
    e = _floor_log2(a)
    if e < fmt.emin:
        if not fmt.subnormals:
            return _with_sign(fmt, 0, negative)  # no zero below: the smallest code
        e = fmt.emin

    # 6. neighbours
    quantum = Fraction(2) ** (e - m)
    scaled = a / quantum
    k = scaled.numerator // scaled.denominator
    delta = scaled - k
    code = (e - fmt.emin) * (1 << m) + k - (0 if fmt.subnormals else (1 << m))

    # 7. rounding
    if delta and round_up_decision(mode, delta, code, negative, r, nbits):
        code += 1

    # 8. overflow
    if code > fmt.max_finite_code:
        return _overflow(fmt, mode, pol, negative)

    # 9. sign
    return _with_sign(fmt, code, negative)


def _overflow(fmt: FloatFormat, mode: RoundingMode, pol: Policies, negative: bool) -> int:
    if pol.overflow is OverflowPolicy.ERROR:
        raise FpspecError(f"overflow: value beyond max finite {fmt.max_finite} of {fmt.name} "
                          "under overflow policy 'error'")
    if pol.overflow is OverflowPolicy.SAT or _magnitude_down_mode(mode, negative):
        return _with_sign(fmt, fmt.max_finite_code, negative)
    return _with_sign(fmt, _nonfinite_code(fmt), negative)


# --------------------------------------------------------------------- arrays
def exact_value(v: object) -> Number:
    """The exact value of one NumPy scalar of a float dtype (float, or Fraction for non-native)."""
    return float(v)  # float16/32/64 and bfloat16 all widen to float64 exactly


def encode_exact(x: np.ndarray, fmt: FloatFormat | str, mode: RoundingMode | str = RoundingMode.RNE,
                 *, rbits: np.ndarray | None = None, nbits: int = DEFAULT_SR_BITS,
                 policies: Policies | None = None) -> np.ndarray:
    """Element-by-element :func:`round_to_code` over an array (the slow reference).

    Errors name the first offending index.
    """
    fmt = get_format(fmt)
    mode = RoundingMode.parse(mode)
    x = np.asarray(x)
    out = np.empty(x.shape, dtype=fmt.storage_dtype)
    flat_r: Iterable[int | None]
    if mode.stochastic:
        if rbits is None or np.shape(rbits) != x.shape:
            raise FpspecError(f"stochastic mode {mode.value} needs rbits of shape {x.shape}")
        flat_r = (int(v) for v in np.asarray(rbits).reshape(-1))
    else:
        flat_r = (None for _ in range(x.size))
    flat_out = out.reshape(-1)
    for i, (v, r) in enumerate(zip(x.reshape(-1), flat_r)):
        try:
            flat_out[i] = round_to_code(exact_value(v), fmt, mode, r=r, nbits=nbits, policies=policies)
        except FpspecError as exc:
            raise FpspecError(str(exc), np.unravel_index(i, x.shape) if x.shape else ()) from None
    return out


def decode_exact_array(codes: np.ndarray, fmt: FloatFormat | str) -> list[Fraction | float]:
    """Decode every code with :meth:`FloatFormat.decode_exact` (flat list, row-major)."""
    fmt = get_format(fmt)
    return [fmt.decode_exact(int(c)) for c in np.asarray(codes).reshape(-1)]
