"""Every implementation-defined choice of the conversion core, named in one place.

This module is fpspec's ``specialize.h``: each enum is a choice that public
sources make differently, and :func:`default_policies` states, per format,
which member fpspec picks when the caller says nothing, and why.  The
normative text is ``docs/rounding.rst`` (FPS-RND-*) and ``docs/disagreements.rst``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

from .formats import FloatFormat, get_format

__all__ = [
    "RoundingMode",
    "OverflowPolicy",
    "NanPolicy",
    "NegativePolicy",
    "ZeroPolicy",
    "Policies",
    "default_policies",
    "DEFAULT_SR_BITS",
    "POLICY_RATIONALE",
]


class RoundingMode(enum.Enum):
    """How an exact value between two neighbours ``lo < |x| < hi`` is rounded (FPS-RND-1..8).

    ``delta = (|x| - lo) / (hi - lo)`` is the position between the neighbours, in [0, 1).
    Directed and stochastic modes are stated on the magnitude; ``up``/``down`` are
    toward +/- infinity, so their magnitude direction depends on the sign.
    """

    #: Nearest; a tie goes to the neighbour whose *code* is even (FPS-RND-1).
    RNE = "rne"
    #: Toward zero: always ``lo`` (FPS-RND-2).
    RTZ = "rtz"
    #: Nearest; a tie goes away from zero ("round half away", microxcaling "nearest") (FPS-RND-3).
    RNA = "rna"
    #: Toward +infinity (FPS-RND-4).
    UP = "up"
    #: Toward -infinity (FPS-RND-4).
    DOWN = "down"
    #: Seed paper's N-bit midpoint rule: away from zero iff delta + (2r+1)/2^(N+1) >= 1 (FPS-RND-5).
    SR_MIDPOINT = "sr-midpoint"
    #: Add-and-truncate (TransformerEngine fallback, gfloat StochasticFastest):
    #: away from zero iff delta + r/2^N >= 1; r = 0 is RTZ (FPS-RND-6).
    SR_ADD = "sr-add"
    #: Compare: away from zero iff r < delta * 2^N, i.e. P(up) = ceil(delta 2^N)/2^N,
    #: exactly delta whenever delta is a multiple of 2^-N (FPS-RND-7).
    SR_UNBIASED = "sr-unbiased"

    @property
    def stochastic(self) -> bool:
        return self._value_.startswith("sr-")

    @classmethod
    def parse(cls, name: "str | RoundingMode") -> "RoundingMode":
        if isinstance(name, RoundingMode):
            return name
        aliases = {"sr": cls.SR_MIDPOINT, "nearest": cls.RNE}
        if name in aliases:
            return aliases[name]
        try:
            return cls(name)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"unknown rounding mode {name!r}; known: {known} (alias: sr)") from None


#: Default SR bit width N: the seed paper draws one byte per element (FPS-RND-5).
DEFAULT_SR_BITS = 8


class OverflowPolicy(enum.Enum):
    """What a value whose rounded magnitude exceeds max finite becomes (FPS-RND-9).

    Overflow is decided on the value rounded with an unbounded exponent range
    (IEEE 754 sec. 7.4).  Under ``NONFINITE`` a mode that rounded the magnitude
    down (rtz; ``down`` on a positive value; ``up`` on a negative one) still
    delivers max finite, as IEEE 754 requires.
    """

    #: Clamp to max finite (signed).
    SAT = "sat"
    #: Inf where the format has it, else the NaN code.
    NONFINITE = "nonfinite"
    #: Refuse: raise an error naming the first offending element.
    ERROR = "error"


class NanPolicy(enum.Enum):
    """What a NaN input becomes (FPS-RND-10)."""

    #: Refuse: raise an error naming the first NaN (default where the format has no NaN).
    ERROR = "error"
    #: The format's canonical NaN code, sign bit copied (ml_dtypes, torch).
    NAN = "nan"
    #: Code 0 (+0): TransformerEngine's NVFP4 round-to-nearest reference.
    ZERO = "zero"
    #: +max finite: TransformerEngine's stochastic-rounding software fallback (NaN -> +6).
    MAX = "max"


class NegativePolicy(enum.Enum):
    """What a negative non-zero input to an unsigned format becomes (FPS-RND-11)."""

    #: Refuse (default): an unsigned scale receiving a negative value is a bug upstream.
    ERROR = "error"
    #: The NaN code (ml_dtypes float8_e8m0fnu, torch).
    NAN = "nan"
    #: Code 0, where the format has a zero.
    ZERO = "zero"


class ZeroPolicy(enum.Enum):
    """What an exact zero becomes in a format that has no zero (UE8M0) (FPS-RND-12)."""

    #: Refuse (default): a zero E8M0 scale request is a bug upstream.
    ERROR = "error"
    #: The NaN code (ml_dtypes and torch: 0.0 -> 0xFF).
    NAN = "nan"
    #: The smallest code, 2^-127.
    MIN = "min"


@dataclass(frozen=True)
class Policies:
    """The non-rounding choices of one conversion, bundled (FPS-RND-9..12)."""

    overflow: OverflowPolicy
    nan: NanPolicy
    negative: NegativePolicy = NegativePolicy.ERROR
    zero: ZeroPolicy = ZeroPolicy.ERROR

    def with_(self, **changes: object) -> "Policies":
        """A copy with some fields replaced; strings are parsed to the enums."""
        parsed: dict[str, object] = {}
        types = {"overflow": OverflowPolicy, "nan": NanPolicy,
                 "negative": NegativePolicy, "zero": ZeroPolicy}
        for key, value in changes.items():
            if value is None:
                continue
            if key not in types:
                raise ValueError(f"unknown policy {key!r}")
            parsed[key] = value if isinstance(value, types[key]) else types[key](value)
        return replace(self, **parsed)  # type: ignore[arg-type]


#: Why each format's defaults are what they are (rendered in docs/rounding.rst).
POLICY_RATIONALE: dict[str, str] = {
    "e2m1": "sat: E2M1 has no Inf/NaN and every block-scaling source (OCP MX, NVFP4, seed) "
            "clamps to +-6; NaN error: there is no NaN code and sources disagree "
            "(ml_dtypes 0x8/0x0, TE reference 0x0, TE SR +6).",
    "e4m3": "nonfinite: what ml_dtypes and torch casts do (past 464 -> NaN); OCP allows "
            "either, sat is one flag away.",
    "ue4m3": "sat: the NVFP4 scale is min(., 448) before conversion in TE, so saturation is "
             "the format's use.",
    "ue5m3": "sat: the seed paper's encoder saturates at 61440 and never emits 0xF8..0xFF.",
    "ue5m3fnu": "sat: same use as ue5m3 (a block scale), saturating at 114688.",
    "ue8m0": "nonfinite: what ml_dtypes and torch do past 2^127 (0xFF).",
    "e5m2": "nonfinite: IEEE 754 semantics, as ml_dtypes and torch.",
    "fp16": "nonfinite: IEEE 754.",
    "bf16": "nonfinite: IEEE 754.",
    "fp32": "nonfinite: IEEE 754.",
}


def default_policies(fmt: FloatFormat | str) -> Policies:
    """The policies fpspec uses for ``fmt`` unless told otherwise (see POLICY_RATIONALE)."""
    fmt = get_format(fmt)
    saturating = {"e2m1", "ue4m3", "ue5m3", "ue5m3fnu"}
    overflow = OverflowPolicy.SAT if fmt.name in saturating or not fmt.has_nan else OverflowPolicy.NONFINITE
    nan = NanPolicy.NAN if fmt.has_nan else NanPolicy.ERROR
    return Policies(overflow=overflow, nan=nan)
