"""Exactly representable probe operands (FPS-PRB-1).

A probe is a short list of *products*: at reduction index ``k`` the exact value
``a_k * b_k``.  :class:`ProductSplitter` turns each wanted product into a pair of
operand codes whose decoded values multiply to it exactly, and refuses (with an
:class:`~fpspec.errors.FpspecError`) a product that no pair of codes of the
format gives.  Nothing in a probe is ever rounded on the way in.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
import math
from functools import lru_cache

import numpy as np

from ..errors import FpspecError
from ..fast.rounding import decode_table
from ..formats import FloatFormat, get_format

__all__ = ["ProductSplitter", "ProbeRow", "build_operands", "pow2", "value_table"]

_VALUES: dict[str, np.ndarray] = {}


def value_table(fmt: FloatFormat | str) -> np.ndarray:
    """float64 value of every code (exact).  FP16 and BF16 by reinterpreting the bits as
    IEEE binary16 / the upper half of binary32 (exact by definition, and fast); the
    8-bit formats from :func:`fpspec.fast.rounding.decode_table`."""
    f = get_format(fmt)
    t = _VALUES.get(f.name)
    if t is None:
        codes = np.arange(1 << f.bits, dtype=np.uint32)
        if f.name == "fp16":
            t = codes.astype(np.uint16).view(np.float16).astype(np.float64)
        elif f.name == "bf16":
            with np.errstate(invalid="ignore"):  # NaN payloads
                t = (codes << np.uint32(16)).view(np.float32).astype(np.float64)
        else:
            t = decode_table(f)
        t.setflags(write=False)
        _VALUES[f.name] = t
    return t


def pow2(e: int) -> Fraction:
    """2**e as an exact Fraction (negative e allowed)."""
    return Fraction(1 << e) if e >= 0 else Fraction(1, 1 << -e)


@dataclass(frozen=True)
class ProbeRow:
    """One probe: the exact product wanted at each reduction index (others are 0)."""

    products: tuple[tuple[int, Fraction], ...]

    @staticmethod
    def of(items: dict[int, Fraction] | list[tuple[int, Fraction]]) -> "ProbeRow":
        pairs = sorted(dict(items).items())
        return ProbeRow(tuple((int(k), Fraction(v)) for k, v in pairs if v != 0))

    def exact_sum(self) -> Fraction:
        return sum((v for _, v in self.products), Fraction(0))


def _split_odd(value: Fraction) -> tuple[int, int]:
    """value = m * 2**e with m an odd integer (value != 0); returns (m, e)."""
    num, den = value.numerator, value.denominator
    e = 0
    while num % 2 == 0:
        num //= 2
        e += 1
    while den % 2 == 0:
        den //= 2
        e -= 1
    if den != 1:
        raise FpspecError(f"probe product {value} is not a dyadic rational")
    return num, e


class ProductSplitter:
    """Find operand codes (a, b) of one format with decode(a) * decode(b) == p exactly."""

    def __init__(self, fmt: FloatFormat | str):
        self.fmt = get_format(fmt)
        if self.fmt.bits > 16:
            raise FpspecError(f"probe operands must be a format of at most 16 bits, got {self.fmt.name}")
        table = value_table(self.fmt)
        # every value of these formats is a float64, so floats are exact dictionary keys
        self._code_of: dict[float, int] = {}
        for code, v in enumerate(table.tolist()):
            if v > 0 and v != float("inf") and v not in self._code_of:  # first (canonical) code
                self._code_of[v] = code
        self._span = (self.fmt.emin - self.fmt.man_bits - 2, self.fmt.emax + 2)
        self._table = table
        self.zero_code = 0
        self._split = lru_cache(maxsize=None)(self._split_uncached)
        self._forced: dict[Fraction, tuple[int, int]] = {}

    def code(self, value: Fraction) -> int | None:
        """The code of ``value`` (signed), or None when not representable."""
        value = Fraction(value)
        if value == 0:
            return 0
        f = float(abs(value))
        c = self._code_of.get(f)
        if c is None or Fraction(f) != abs(value):
            return None
        if value < 0:
            if not self.fmt.signed:
                return None
            c |= self.fmt.sign_mask
        return c

    def representable(self, value: Fraction) -> bool:
        return self.code(value) is not None

    def _split_uncached(self, value: Fraction) -> tuple[int, int] | None:
        if value == 0:
            return (0, 0)
        m, e = _split_odd(abs(value))
        neg = value < 0
        # factor the odd significand into two odd factors; try the balanced exponent first
        factors = [(d, m // d) for d in range(1, m + 1) if m % d == 0]
        lo, hi = self._span
        for da, db in factors:
            # a = da * 2^x must lie in the format's binades: x in [lo, hi] is enough to try
            for x in sorted(range(lo - da.bit_length(), hi + 1), key=lambda s: abs(s - e / 2)):
                a, b = math.ldexp(da, x), math.ldexp(db, e - x)  # exact: small odd integers
                ca, cb = self._code_of.get(a), self._code_of.get(b)
                if ca is not None and cb is not None:
                    if neg:
                        if not self.fmt.signed:
                            return None
                        ca |= self.fmt.sign_mask
                    return (ca, cb)
        return None

    def split(self, value: Fraction) -> tuple[int, int]:
        """Codes (a, b) with a*b == value exactly (FPS-PRB-1); raises when impossible."""
        pair = self._forced.get(Fraction(value)) or self._split(Fraction(value))
        if pair is None:
            raise FpspecError(f"product {value} is not a product of two {self.fmt.name} values")
        a, b = pair
        got = Fraction(float(self._table[a])) * Fraction(float(self._table[b]))
        if got != value:  # the assertion the whole probe rests on
            raise FpspecError(f"internal: split of {value} gives {got}")
        return pair

    def force(self, a: Fraction, b: Fraction) -> None:
        """Make the product a*b (and -(a*b)) split as exactly these operands: probes of the
        product exponent need a chosen pair (e.g. 1.5 x 1.5, significand 2.25)."""
        ca, cb = self.code(a), self.code(b)
        if ca is None or cb is None:
            raise FpspecError(f"{a} or {b} is not a {self.fmt.name} value")
        na = self.code(-a)
        self._forced[Fraction(a) * Fraction(b)] = (ca, cb)
        if na is not None:
            self._forced[-Fraction(a) * Fraction(b)] = (na, cb)

    def can_split(self, value: Fraction) -> bool:
        return self._split(Fraction(value)) is not None


def build_operands(rows: list[ProbeRow], K: int, splitter: ProductSplitter,
                   n_rows: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Operand code arrays A (n x K) and BT (n x K): probe i in row i of both (FPS-PRB-2).

    Every entry is checked: decode(A[i,k]) * decode(BT[i,k]) equals the wanted
    product exactly, and every other entry is the +0 code.
    """
    n = len(rows) if n_rows is None else n_rows
    if n < len(rows):
        raise FpspecError(f"{len(rows)} probes do not fit in {n} rows")
    dtype = np.dtype(splitter.fmt.storage_dtype)
    a = np.zeros((n, K), dtype=dtype)
    bt = np.zeros((n, K), dtype=dtype)
    for i, row in enumerate(rows):
        for k, v in row.products:
            if not 0 <= k < K:
                raise FpspecError(f"probe {i}: reduction index {k} outside K = {K}")
            a[i, k], bt[i, k] = splitter.split(v)
    return a, bt
