"""Floating-point formats as data (spec: docs/formats.rst, requirements FPS-FMT-*).

A :class:`FloatFormat` is a frozen descriptor of a binary floating-point encoding:
sign bit or not, exponent and mantissa widths, bias, whether exponent field 0
holds subnormals, and which codes are special.  Everything else (max finite,
min normal, every code's exact value) is *derived* from those fields, so a
format cannot contradict itself.

Bit layout of a code (most significant bit first)::

    [ sign (0 or 1 bit) | exponent field E (exp_bits) | mantissa field M (man_bits) ]

Value of a finite code, with ``s`` the sign bit (0 when unsigned):

1. ``E == 0`` and the format has subnormals:  ``(-1)^s * M * 2^(1 - bias - man_bits)``
2. otherwise:                                 ``(-1)^s * (2^man_bits + M) * 2^(E - bias - man_bits)``

Special codes follow one of the :class:`Specials` rules.  The one rule that no
source fixes, how the seed paper's UE5M3 decodes exponent field 31, is the named
choice :data:`UE5M3_RESERVED_DECODE` (FPS-FMT-6).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property
from typing import Iterator

from .errors import FpspecError

__all__ = [
    "Specials",
    "CodeKind",
    "FloatFormat",
    "FORMATS",
    "get_format",
    "E2M1",
    "E4M3",
    "UE4M3",
    "UE5M3",
    "UE5M3FNU",
    "UE8M0",
    "E5M2",
    "FP16",
    "BF16",
    "FP32",
    "E4M3FNUZ",
    "E5M2FNUZ",
    "UE5M3_RESERVED_DECODE",
]


class Specials(enum.Enum):
    """Which codes of a format are Inf or NaN (FPS-FMT-2)."""

    #: No Inf, no NaN: every code is finite (E2M1).
    NONE = "none"
    #: IEEE 754: all-ones exponent field; mantissa 0 is Inf, anything else NaN.
    IEEE = "ieee"
    #: "FN" (finite, NaN): only all-ones exponent *and* all-ones mantissa is NaN,
    #: no Inf (OCP E4M3, E8M0, LLVM Float8E5M3FNU).
    FN = "fn"
    #: The whole all-ones exponent binade is reserved and decodes as NaN, no Inf
    #: (fpspec's reading of the seed paper's UE5M3, see UE5M3_RESERVED_DECODE).
    RESERVED_BINADE_NAN = "reserved-binade-nan"
    #: "FNUZ" (finite, NaN, unsigned zero): the negative-zero code (sign bit alone) is
    #: the one NaN; no Inf, no -0 (AMD CDNA3 FP8 / BF8, LLVM Float8E4M3FNUZ / Float8E5M2FNUZ).
    FNUZ = "fnuz"


class CodeKind(enum.Enum):
    """The class of one code, as printed by ``fpspec codebook``."""

    ZERO = "zero"
    SUBNORMAL = "subnormal"
    NORMAL = "normal"
    INF = "inf"
    NAN = "nan"


#: FPS-FMT-6: the seed paper reserves exponent field 31 of UE5M3 for specials but
#: never says which code is Inf and which NaN; its encoder saturates at 61440 and
#: never emits them.  fpspec decodes all eight codes 0xF8..0xFF as NaN and writes
#: 0xFF when it must produce a NaN.  Rationale: with no Inf assigned by the source,
#: "reserved means not-a-number" is the only reading that cannot turn an
#: unspecified code into a magnitude.
UE5M3_RESERVED_DECODE = Specials.RESERVED_BINADE_NAN


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point encoding (FPS-FMT-1).

    Attributes:
        name: the CLI name (``e2m1``, ``ue5m3``, ...).
        exp_bits: width of the exponent field.
        man_bits: width of the mantissa (trailing significand) field.
        bias: exponent bias.
        signed: whether the code has a sign bit (the most significant bit).
        subnormals: whether exponent field 0 encodes subnormals (and zero).  When
            False, exponent field 0 is an ordinary binade and the format has no
            zero (UE8M0).
        specials: which codes are Inf / NaN.
        description: one line for humans, with the source.
    """

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    signed: bool
    subnormals: bool
    specials: Specials
    description: str = ""

    # ----------------------------------------------------------------- layout
    @cached_property
    def bits(self) -> int:
        """Total code width in bits."""
        return int(self.signed) + self.exp_bits + self.man_bits

    @cached_property
    def num_codes(self) -> int:
        return 1 << self.bits

    @cached_property
    def sign_mask(self) -> int:
        """The sign bit of a code (0 for unsigned formats)."""
        return (1 << (self.bits - 1)) if self.signed else 0

    @cached_property
    def magnitude_mask(self) -> int:
        return (1 << (self.exp_bits + self.man_bits)) - 1

    @cached_property
    def exp_max_field(self) -> int:
        return (1 << self.exp_bits) - 1

    @cached_property
    def man_max_field(self) -> int:
        return (1 << self.man_bits) - 1

    @property
    def storage_dtype(self) -> str:
        """NumPy dtype name of the code containers: uint8, uint16 or uint32."""
        return "uint8" if self.bits <= 8 else ("uint16" if self.bits <= 16 else "uint32")

    def split(self, code: int) -> tuple[int, int, int]:
        """Return the (sign, exponent field, mantissa field) of a code."""
        self._check_code(code)
        sign = (code >> (self.bits - 1)) & 1 if self.signed else 0
        exp = (code >> self.man_bits) & self.exp_max_field
        man = code & self.man_max_field
        return sign, exp, man

    def join(self, sign: int, exp: int, man: int) -> int:
        """Inverse of :meth:`split`."""
        if sign and not self.signed:
            raise ValueError(f"{self.name} is unsigned: sign bit must be 0")
        if not 0 <= exp <= self.exp_max_field or not 0 <= man <= self.man_max_field:
            raise ValueError(f"{self.name}: field out of range (exp={exp}, man={man})")
        return (sign << (self.bits - 1) if self.signed else 0) | (exp << self.man_bits) | man

    def _check_code(self, code: int) -> None:
        if not 0 <= code < self.num_codes:
            raise ValueError(f"code {code:#x} out of range for {self.name} ({self.bits} bits)")

    # ---------------------------------------------------------- classification
    def kind(self, code: int) -> CodeKind:
        """Classify one code."""
        _, exp, man = self.split(code)
        top = exp == self.exp_max_field
        if self.specials is Specials.IEEE and top:
            return CodeKind.INF if man == 0 else CodeKind.NAN
        if self.specials is Specials.FN and top and man == self.man_max_field:
            return CodeKind.NAN
        if self.specials is Specials.RESERVED_BINADE_NAN and top:
            return CodeKind.NAN
        if self.specials is Specials.FNUZ and code == self.sign_mask:
            return CodeKind.NAN
        if exp == 0 and self.subnormals:
            return CodeKind.ZERO if man == 0 else CodeKind.SUBNORMAL
        return CodeKind.NORMAL

    @cached_property
    def has_inf(self) -> bool:
        return self.specials is Specials.IEEE

    @cached_property
    def has_nan(self) -> bool:
        return self.specials is not Specials.NONE

    @cached_property
    def has_zero(self) -> bool:
        return self.subnormals

    @cached_property
    def has_negative_zero(self) -> bool:
        """Whether the sign bit on a zero is a code of its own (-0); in an FNUZ format that
        code is the NaN, and a zero result is always +0 (FPS-FMT-8)."""
        return self.signed and self.subnormals and self.specials is not Specials.FNUZ

    # ------------------------------------------------------------ exact values
    @cached_property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade."""
        return (1 if self.subnormals else 0) - self.bias

    def decode_exact(self, code: int) -> Fraction | float:
        """Exact value of a code: a Fraction, or a float inf / nan (FPS-FMT-3).

        Negative zero is returned as ``Fraction(0)``; use :meth:`split` for its sign.
        A NaN code returns a float NaN carrying the code's sign bit.
        """
        kind = self.kind(code)
        sign, exp, man = self.split(code)
        if kind is CodeKind.NAN:
            return math.copysign(math.nan, -1.0 if sign else 1.0)
        if kind is CodeKind.INF:
            return -math.inf if sign else math.inf
        if exp == 0 and self.subnormals:
            sig, e = man, self.emin
        else:
            sig, e = (1 << self.man_bits) | man, exp - self.bias
        value = Fraction(sig) * Fraction(2) ** (e - self.man_bits)
        return -value if sign else value

    @cached_property
    def max_finite_code(self) -> int:
        """The positive code with the largest finite value."""
        if self.specials in (Specials.NONE, Specials.FNUZ):
            return self.magnitude_mask
        if self.specials is Specials.FN:
            return self.magnitude_mask - 1
        # IEEE and reserved binade: the top of the binade below the all-ones exponent.
        return self.join(0, self.exp_max_field - 1, self.man_max_field)

    @cached_property
    def max_finite(self) -> Fraction:
        return self.decode_exact(self.max_finite_code)  # type: ignore[return-value]

    @cached_property
    def min_normal(self) -> Fraction:
        return Fraction(2) ** self.emin

    @cached_property
    def min_subnormal(self) -> Fraction | None:
        """Smallest positive subnormal, or None when the format has none."""
        if not self.subnormals or self.man_bits == 0:
            return None
        return Fraction(2) ** (self.emin - self.man_bits)

    @cached_property
    def min_positive(self) -> Fraction:
        """Smallest positive finite value (subnormal if any)."""
        return self.min_subnormal if self.min_subnormal is not None else self.min_normal

    @property
    def eps(self) -> Fraction:
        """Distance from 1 to the next larger value, 2^-man_bits."""
        return Fraction(1, 1 << self.man_bits)

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite binade."""
        _, exp, _ = self.split(self.max_finite_code)
        return exp - self.bias

    @cached_property
    def nan_code(self) -> int | None:
        """Canonical NaN code written by encoders: all ones below the sign, or in an FNUZ
        format its one NaN, the sign bit alone."""
        if self.specials is Specials.FNUZ:
            return self.sign_mask
        return self.magnitude_mask if self.has_nan else None

    @cached_property
    def inf_code(self) -> int | None:
        return self.exp_max_field << self.man_bits if self.has_inf else None

    def finite_values(self) -> list[Fraction]:
        """Every distinct finite value, ascending (zero once)."""
        vals = {self.decode_exact(c) for c in range(self.num_codes)
                if self.kind(c) not in (CodeKind.INF, CodeKind.NAN)}
        return sorted(vals)  # type: ignore[arg-type]

    def codes(self) -> Iterator[int]:
        return iter(range(self.num_codes))

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:
        # Equal formats have equal names, so hashing the name alone is consistent with
        # the generated __eq__, and cheap enough for the exact path's memo keys.
        return hash(self.name)


E2M1 = FloatFormat("e2m1", 2, 1, 1, True, True, Specials.NONE,
                   "FP4 payload E2M1 (OCP MX v1.0 sec. 5.3.3); values +-{0,0.5,1,1.5,2,3,4,6}")
E4M3 = FloatFormat("e4m3", 4, 3, 7, True, True, Specials.FN,
                   "OCP FP8 E4M3 ('E4M3FN'): max 448, NaN S.1111.111, no Inf")
UE4M3 = FloatFormat("ue4m3", 4, 3, 7, False, True, Specials.FN,
                    "E4M3 with sign bit 0: the NVFP4 block-scale format (NVIDIA, arXiv 2509.25149)")
UE5M3 = FloatFormat("ue5m3", 5, 3, 15, False, True, UE5M3_RESERVED_DECODE,
                    "Seed paper's UE5M3 (arXiv 2609.02846): max 61440, exponent field 31 reserved")
UE5M3FNU = FloatFormat("ue5m3fnu", 5, 3, 15, False, True, Specials.FN,
                       "FN-style UE5M3 (LLVM APFloat Float8E5M3FNU, PTX ISA 13.4): only 0xFF NaN, max 114688")
UE8M0 = FloatFormat("ue8m0", 8, 0, 127, False, False, Specials.FN,
                    "OCP MX scale E8M0 ('E8M0FNU'): 2^(e-127), 0xFF NaN, no zero")
E5M2 = FloatFormat("e5m2", 5, 2, 15, True, True, Specials.IEEE,
                   "OCP FP8 E5M2: IEEE-style Inf and NaN, max 57344")
FP16 = FloatFormat("fp16", 5, 10, 15, True, True, Specials.IEEE, "IEEE 754 binary16")
BF16 = FloatFormat("bf16", 8, 7, 127, True, True, Specials.IEEE, "bfloat16: the upper half of binary32")
FP32 = FloatFormat("fp32", 8, 23, 127, True, True, Specials.IEEE, "IEEE 754 binary32")
E4M3FNUZ = FloatFormat("e4m3fnuz", 4, 3, 8, True, True, Specials.FNUZ,
                       "FP8 E4M3 FNUZ (AMD CDNA3 'FP8'; LLVM Float8E4M3FNUZ): bias 8, max 240, NaN 0x80, no Inf, no -0")
E5M2FNUZ = FloatFormat("e5m2fnuz", 5, 2, 16, True, True, Specials.FNUZ,
                       "FP8 E5M2 FNUZ (AMD CDNA3 'BF8'; LLVM Float8E5M2FNUZ): bias 16, max 57344, NaN 0x80, no Inf, "
                       "no -0")

#: Every predefined format by CLI name (FPS-FMT-4).
FORMATS: dict[str, FloatFormat] = {
    f.name: f for f in (E2M1, E4M3, UE4M3, UE5M3, UE5M3FNU, UE8M0, E5M2, FP16, BF16, FP32, E4M3FNUZ, E5M2FNUZ)
}


def get_format(name: str | FloatFormat) -> FloatFormat:
    """Look a format up by CLI name; a FloatFormat is returned unchanged."""
    if isinstance(name, FloatFormat):
        return name
    if not isinstance(name, str):
        raise FpspecError(f"a format is a name ({', '.join(FORMATS)}) or a FloatFormat, "
                          f"got {type(name).__name__} {name!r}")
    try:
        return FORMATS[name]
    except KeyError:
        raise FpspecError(f"unknown format {name!r}; known: {', '.join(FORMATS)}") from None
