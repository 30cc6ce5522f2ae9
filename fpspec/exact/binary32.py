"""Binary32 (FP32) vocabulary of the executable spec: constants, exact binary logarithms,
and correctly rounded binary32 operations on exact values.

Profiles that are sequences of binary32 operations (:mod:`fpspec.exact.blocks`) and
the GEMM models' FP32 steps (:mod:`fpspec.exact.accumulate`) are written with these.
Each operation is the exact real result rounded once with
``round_to_code(., "fp32", "rne")``, which is what IEEE 754 requires of a correctly
rounded binary32 ``*``, ``/``, ``+`` and fusedMultiplyAdd.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import numpy as np

from ..errors import FpspecError
from ..formats import FP32
from .rounding import round_to_code

__all__ = ["FLT_MAX", "FP32_EMIN", "floor_log2", "ceil_log2", "f32", "f32_mul", "f32_div",
           "f32_add", "f32_fma", "round_fp32", "round_acc", "fp32_exponent", "f64"]

#: Largest finite binary32 value.
FLT_MAX = float(np.finfo(np.float32).max)

#: Exponent of binary32's smallest normal binade (2^-126).
FP32_EMIN = -126


def floor_log2(a: Fraction) -> int:
    """floor(log2 a) for a > 0, exactly, from integer bit lengths."""
    n, d = a.numerator, a.denominator
    e = n.bit_length() - d.bit_length()
    if (n << max(-e, 0)) < (d << max(e, 0)):
        e -= 1
    return e


def ceil_log2(a: Fraction) -> int:
    """ceil(log2 a) for a > 0, exactly."""
    e = floor_log2(a)
    return e if Fraction(2) ** e == a else e + 1


def f32(v: Fraction | float | int) -> float:
    """Round an exact value to binary32 (RNE, overflow to +-inf); returns the float."""
    if isinstance(v, float) and (math.isinf(v) or math.isnan(v) or v == 0):
        return float(np.float32(v))
    code = round_to_code(v, "fp32", "rne")
    return struct.unpack("<f", struct.pack("<I", code))[0]


def _sign(v: float) -> int:
    return -1 if math.copysign(1.0, v) < 0 else 1


def f32_mul(a: float, b: float) -> float:
    """Correctly rounded binary32 product of two binary32 values (signed zeros, infinities)."""
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan  # IEEE invalid operation (only a dequantization can reach it)
        return math.inf * _sign(a) * _sign(b)
    if a == 0 or b == 0:
        return math.copysign(0.0, _sign(a) * _sign(b))
    r = f32(Fraction(a) * Fraction(b))
    return r if r != 0 else math.copysign(0.0, _sign(a) * _sign(b))


def f32_div(a: float, b: float) -> float:
    """Correctly rounded binary32 quotient of two binary32 values."""
    if b == 0:
        if a == 0:
            raise FpspecError("binary32 step 0 / 0 is undefined")
        return math.inf * _sign(a) * _sign(b)
    if math.isinf(a):
        return math.inf * _sign(a) * _sign(b)
    if a == 0:
        return math.copysign(0.0, _sign(a) * _sign(b))
    r = f32(Fraction(a) / Fraction(b))
    return r if r != 0 else math.copysign(0.0, _sign(a) * _sign(b))


def f32_add(a: float, b: float) -> float:
    """Correctly rounded binary32 sum of two finite binary32 values (IEEE signed-zero rules)."""
    if a == 0 and b == 0:
        return -0.0 if (_sign(a) < 0 and _sign(b) < 0) else 0.0
    r = f32(Fraction(a) + Fraction(b))
    return r if r != 0 else 0.0


def f32_fma(a: float, b: float, c: float) -> float:
    """fp32(a * b + c) with one rounding (IEEE fusedMultiplyAdd on finite binary32 values)."""
    prod = Fraction(a) * Fraction(b)
    exact = prod + Fraction(c)
    if exact == 0:
        prod_neg = prod == 0 and _sign(a) * _sign(b) < 0
        return -0.0 if (prod == 0 and c == 0 and prod_neg and _sign(c) < 0) else 0.0
    r = f32(exact)
    return r if r != 0 else math.copysign(0.0, 1 if exact > 0 else -1)


# ------------------------------------------------- roundings of the GEMM chain
# The GEMM models (fpspec.exact.accumulate, FPS-GEMM-*) carry a finite value as a
# Fraction (zero is +0) and Inf / NaN as floats; only steps 6-8 produce a float -0.0.


def round_fp32(x: Fraction | float, mode: str) -> Fraction | float:
    """Round an exact value to FP32 (``rne``, or ``rtz`` / ``rz``) with IEEE 754 overflow:
    Inf under RNE, max finite under RTZ.  A zero result is +0 (Fraction 0); Inf and NaN
    pass through."""
    if isinstance(x, float):
        return x
    return FP32.decode_exact(round_to_code(x, FP32, "rne" if mode == "rne" else "rtz"))


def round_acc(x: Fraction | float, mode: str, bits: int = 23, *, emin: int = FP32_EMIN, top: int = 128,
              overflow_inf: bool = False) -> Fraction | float:
    """Round an exact value to ``bits`` fraction bits in an accumulator format's exponent
    range (the GEMM accumulator rounding, FPS-GEMM-13, FPS-GEMM-19): quantum
    2^(max(floor(log2|x|), emin) - bits), ``rne`` (ties to even) or ``rtz``; a result of
    magnitude >= 2^top is Inf under RNE, and under RTZ (2 - 2^-bits) 2^(top-1) (IEEE) or
    Inf (``overflow_inf``, FPS-GEMM-17).  FP32 is emin -126, top 128 (the defaults); FP16
    emin -14, top 16.  With bits = 23 in FP32 and IEEE overflow this is :func:`round_fp32`."""
    if isinstance(x, float) or (bits == 23 and emin == FP32_EMIN and top == 128 and not overflow_inf):
        return round_fp32(x, mode)
    if x == 0:
        return Fraction(0)
    e = max(floor_log2(abs(x)), emin)
    quantum = Fraction(2) ** (e - bits)
    q = x / quantum
    if mode == "rne":
        k = round(q)  # ties to even
    else:
        k = abs(q.numerator) // q.denominator
        k = -k if x < 0 else k
    r = k * quantum
    if abs(r) >= Fraction(2) ** top:
        big = math.inf if (mode == "rne" or overflow_inf) else (2 - Fraction(1, 2 ** bits)) * Fraction(2) ** (top - 1)
        return big if r > 0 else -big
    return r


def fp32_exponent(c: Fraction, emin: int = FP32_EMIN) -> int:
    """Alignment exponent of a nonzero FP32 value: max(floor(log2|c|), -126) (of an FP16
    accumulator value: emin -14)."""
    return max(floor_log2(abs(c)), emin)


def f64(x: Fraction) -> Fraction:
    """An exact value rounded to binary64 (RNE), as a Fraction: the value a Python float
    expression computes (CPython's int / int division is correctly rounded)."""
    return Fraction(x.numerator / x.denominator)
