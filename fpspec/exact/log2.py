"""The floor and ceiling of a correctly rounded binary32 log2, exactly and without libm (FPS-BLK-22).

Two public MX quantizers take block and element exponents from ``torch.log2`` of a
binary32 value: microxcaling ``floor(log2 x)``, torchao 0.18's RCEIL ``ceil(log2 x)``.
torch's CPU log2 is not correctly rounded, but its floor and ceiling equal those of
the correctly rounded value RN32(log2 x) on every positive finite binary32 x (an
exhaustive scan of all 2^31 - 2^23 - 1 of them, docs/scheme-mxfp4.rst).  So the rule
fpspec states is

* FL(x) = floor(RN32(log2 x)): floor(log2 x), plus one when RN32 rounds log2 x up
  to the next integer k (x "one too high just below 2^k");
* CL(x) = ceil(RN32(log2 x)): ceil(log2 x), minus one when RN32 rounds log2 x down
  to the integer k below it (x "one too small just above 2^k").

RN32(log2 x) = k for x != 2^k exactly when abs(log2 x - k) < h, h half the binary32
spacing next to k on x's side; equality never happens (2^h is irrational).  With
y = x / 2^k or 2^k / x (whichever is > 1) the test is ln y < h ln 2, decided here on
rational intervals of ln y = 2 atanh((y-1)/(y+1)) and ln 2 = 2 atanh(1/3) that are
narrowed until they separate: exact, no floating-point logarithm.

:func:`derive_counts` turns the rule into the two tables the fast path uses
(:mod:`fpspec.fast.log2`): for each k, how many binary32 values below 2^k have
FL = k, and how many above 2^k have CL = k.  ``python3 -m fpspec.exact.log2`` prints
them as Python source.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

from .binary32 import floor_log2

__all__ = ["rn32_log2_is", "float_log2_floor", "float_log2_ceil", "derive_counts", "K_BELOW", "K_ABOVE"]

#: k of the "below 2^k" table: x in [2^(k-1), 2^k) for every positive finite binary32 x.
K_BELOW = range(-148, 129)
#: k of the "above 2^k" table: x in (2^k, 2^(k+1)).
K_ABOVE = range(-149, 128)


def _half_spacing(k: int, above: bool) -> Fraction:
    """Half the distance from the binary32 value k to its neighbour above (or below) it."""
    if k == 0:
        return Fraction(1, 2 ** 150)  # half the smallest subnormal
    m = abs(k)
    j = m.bit_length() - 1          # 2^j <= |k| < 2^(j+1): binary32 spacing 2^(j-23) at |k|
    toward_zero = above == (k < 0)
    if toward_zero and m == 1 << j:
        return Fraction(1, 2 ** (25 - j))  # the binade below |k| = 2^j is twice as fine
    return Fraction(1, 2 ** (24 - j))


def _atanh_interval(z: Fraction, terms: int) -> tuple[Fraction, Fraction]:
    """Bounds of atanh z = sum z^(2i+1)/(2i+1) for 0 <= z < 1, from ``terms`` terms."""
    s = Fraction(0)
    p = z
    z2 = z * z
    for i in range(terms):
        s += p / (2 * i + 1)
        p *= z2
    tail = p / ((2 * terms + 1) * (1 - z2))  # the remaining terms are below a geometric series
    return s, s + tail


def _ln_lt(y: Fraction, h: Fraction) -> bool:
    """Whether ln y < h ln 2, for rational y > 1 and h > 0 with y != 2^h (never equal)."""
    z = (y - 1) / (y + 1)
    terms = 2
    while True:
        lo_y, hi_y = _atanh_interval(z, terms)
        lo_2, hi_2 = _atanh_interval(Fraction(1, 3), terms + 4)
        if hi_y < h * lo_2:
            return True
        if lo_y > h * hi_2:
            return False
        terms *= 2


def rn32_log2_is(x: Fraction, k: int) -> bool:
    """Whether the correctly rounded binary32 log2 of x > 0 is the integer k (abs(log2 x - k) < 1)."""
    p = Fraction(2) ** k
    if x == p:
        return True
    above = x > p
    return _ln_lt(x / p if above else p / x, _half_spacing(k, above))


def _power_of_two(x: Fraction) -> bool:
    return x.numerator & (x.numerator - 1) == 0 and x.denominator & (x.denominator - 1) == 0


def float_log2_floor(x: Fraction | float) -> int:
    """FL(x) = floor(RN32(log2 x)) for a positive value x (FPS-BLK-22)."""
    x = Fraction(x)
    k0 = floor_log2(x)
    if _power_of_two(x):
        return k0
    return k0 + 1 if rn32_log2_is(x, k0 + 1) else k0


def float_log2_ceil(x: Fraction | float) -> int:
    """CL(x) = ceil(RN32(log2 x)) for a positive value x (FPS-BLK-22)."""
    x = Fraction(x)
    k0 = floor_log2(x)
    if _power_of_two(x):
        return k0
    return k0 if rn32_log2_is(x, k0) else k0 + 1


# ------------------------------------------------------------- the tables
def _bits(v: Fraction) -> int:
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def _value(bits: int) -> Fraction:
    return Fraction(struct.unpack("<f", struct.pack("<I", bits))[0])


def _count(start: int, step: int, limit: int, k: int) -> int:
    """How many binary32 values start, start + step, ... (at most ``limit``) have RN32(log2) = k.
    The predicate holds on a prefix (log2 is monotone): a float64 estimate of its length is
    checked and corrected with the exact test, so no logarithm decides anything."""
    def holds(n: int) -> bool:  # the n-th value (1-based) from start
        return n <= limit and rn32_log2_is(_value(start + step * (n - 1)), k)

    h = float(_half_spacing(k, step > 0))
    x0 = float(_value(start))
    ulp = abs(float(_value(start + step)) - x0)
    # distance from 2^k to the rounding boundary 2^(k +- h), in ulps (an estimate only)
    n = max(0, min(limit, int(abs(2.0 ** k * math.expm1(math.log(2.0) * h)) / ulp) if ulp else 0))
    while n > 0 and not holds(n):
        n -= 1
    while holds(n + 1):
        n += 1
    return n


def derive_counts() -> tuple[dict[int, int], dict[int, int]]:
    """(below, above): below[k] = #{binary32 x < 2^k : FL(x) = k} for k in :data:`K_BELOW`,
    above[k] = #{binary32 x > 2^k : CL(x) = k} for k in :data:`K_ABOVE`.

    The values are consecutive bit patterns: FL(x) = floor(log2 x) + 1 iff
    bits(x) >= bits(2^(k)) - below[k] with k = floor(log2 x) + 1 (bits(2^128) = 0x7F800000),
    and CL(x) = ceil(log2 x) - 1 iff bits(x) <= bits(2^k) + above[k] with k = floor(log2 x).
    """
    below, above = {}, {}
    for k in K_BELOW:  # the values of (2^(k-1), 2^k), downwards from 2^k
        top = 0x7F800000 if k == 128 else _bits(Fraction(2) ** k)
        below[k] = _count(top - 1, -1, top - _bits(Fraction(2) ** (k - 1)) - 1, k)
    for k in K_ABOVE:
        base = _bits(Fraction(2) ** k)
        nxt = 0x7F800000 if k == 127 else _bits(Fraction(2) ** (k + 1))
        above[k] = _count(base + 1, 1, nxt - base - 1, k)
    return below, above


def _source() -> str:
    below, above = derive_counts()

    def rows(d: dict[int, int]) -> str:
        ks = sorted(d)
        out = []
        for i in range(0, len(ks), 16):
            out.append("    " + " ".join(f"{d[k]},".rjust(3) for k in ks[i:i + 16]).rstrip())
        return "\n".join(out)

    return (f"#: below[k], k = {K_BELOW.start}..{K_BELOW.stop - 1} (generated by python3 -m fpspec.exact.log2)\n"
            f"BELOW_COUNTS = (\n{rows(below)}\n)\n"
            f"#: above[k], k = {K_ABOVE.start}..{K_ABOVE.stop - 1}\n"
            f"ABOVE_COUNTS = (\n{rows(above)}\n)\n")


if __name__ == "__main__":
    print(_source(), end="")
