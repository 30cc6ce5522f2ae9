"""Every implementation-defined choice of the conversion core, named in one place.

This module is fpspec's ``specialize.h``: each enum is a choice that public
sources make differently, and :func:`default_policies` states, per format,
which member fpspec picks when the caller says nothing, and why.  The
normative text is ``docs/rounding.rst`` (FPS-RND-*) and ``docs/disagreements.rst``.
"""

from __future__ import annotations

import enum
import numbers
from dataclasses import dataclass, replace

from .errors import FpspecError
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
    "MODE_ALIASES",
    "validate_policies",
    "check_nbits",
    "validate_mode",
    "quiet_nan_code",
    "MAX_SR_BITS",
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
    #: Nearest, ties to the even *significand*, as converters that round IEEE bit patterns
    #: compute it (ml_dtypes, torch c10): rne in every format with a mantissa field and
    #: subnormals; in ue8m0 ties go up and the lowest binade rounds up (FPS-RND-15).
    #: (Last member: the fast kernels number the modes in this order.)
    RNE_BITS = "rne-bits"

    @property
    def stochastic(self) -> bool:
        return self._value_.startswith("sr-")

    @classmethod
    def parse(cls, name: "str | RoundingMode") -> "RoundingMode":
        """The mode of a name or alias (:data:`MODE_ALIASES`); FpspecError for anything else."""
        if isinstance(name, RoundingMode):
            return name
        if isinstance(name, str):
            if name in MODE_ALIASES:
                return MODE_ALIASES[name]
            try:
                return cls(name)
            except ValueError:
                pass
        known = ", ".join(m.value for m in cls)
        aliases = ", ".join(f"{a} = {m.value}" for a, m in MODE_ALIASES.items())
        if not isinstance(name, str):
            raise FpspecError(f"a rounding mode is a name ({known}; aliases {aliases}), "
                              f"got {name!r} of type {type(name).__name__}")
        raise FpspecError(f"unknown rounding mode {name!r}; known: {known} (aliases {aliases})")


#: Other accepted spellings of a mode, per FPS-RND-16.  ``rz`` is the usual GEMM
#: literature's name for round toward zero, ``sr`` the seed paper's rule.  The canonical
#: name (the enum value) is what fpspec writes.  There is deliberately no ``nearest``:
#: IEEE's "round to nearest" ties to even, microxcaling's "nearest" ties away (``rna``),
#: so that word is refused rather than guessed.
MODE_ALIASES: dict[str, RoundingMode] = {
    "sr": RoundingMode.SR_MIDPOINT,
    "rz": RoundingMode.RTZ,
}


#: Default SR bit width N: the seed paper draws one byte per element (FPS-RND-5).
DEFAULT_SR_BITS = 8
#: Widest random value: rbits arrays are at most uint32, and the fast path's thresholds
#: are exact in float64 up to N = 32 (FPS-RND-8).
MAX_SR_BITS = 32


def check_nbits(nbits: object, limit: int = MAX_SR_BITS) -> int:
    """``nbits`` as an int in 1..limit, else FpspecError saying what was given (FPS-RND-16)."""
    if isinstance(nbits, bool) or not isinstance(nbits, numbers.Integral):
        raise FpspecError(f"nbits must be an integer in 1..{limit}, got {nbits!r} of type {type(nbits).__name__}")
    n = int(nbits)
    if not 1 <= n <= limit:
        raise FpspecError(f"nbits must be in 1..{limit}, got {n}")
    return n


def validate_mode(fmt: FloatFormat | str, mode: RoundingMode) -> None:
    """Refuse a mode that is not defined for ``fmt`` (FPS-RND-15: ``rne-bits`` needs a format
    with a mantissa field and subnormals, or one with neither, like ue8m0)."""
    fmt = get_format(fmt)
    if mode is RoundingMode.RNE_BITS and (fmt.man_bits == 0) == fmt.subnormals:
        raise FpspecError(f"rounding rne-bits is defined for formats with a mantissa field and subnormals "
                          f"or with neither (ue8m0); {fmt.name} has man_bits={fmt.man_bits}, "
                          f"subnormals={fmt.subnormals}")


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
    #: The IEEE 754-2019 sec. 6.2.1 quiet NaN, sign copied: all-ones exponent, trailing
    #: significand 10...0 (ml_dtypes float8_e5m2 writes 0x7E/0xFE).  In a format with one
    #: NaN code per sign (FN, ue5m3) it is that code.
    QUIET = "quiet"
    #: A zero whose sign is the opposite of the NaN's (+NaN -> -0, -NaN -> +0): ml_dtypes
    #: float4_e2m1fn, whose quiet_NaN() is the -0 code, negated for a negative NaN.
    FLIPPED_ZERO = "flipped-zero"


def quiet_nan_code(fmt: FloatFormat | str) -> int | None:
    """The positive code of NaN policy ``quiet`` (FPS-RND-10): in an IEEE-style format the
    all-ones exponent with trailing significand 10...0 (IEEE 754-2019 sec. 6.2.1); in a
    format whose NaNs are not split into quiet and signalling, its canonical NaN code."""
    fmt = get_format(fmt)
    if fmt.has_inf and fmt.man_bits >= 1:
        return (fmt.exp_max_field << fmt.man_bits) | (1 << (fmt.man_bits - 1))
    return fmt.nan_code


class NegativePolicy(enum.Enum):
    """What a negative non-zero input to an unsigned format becomes (FPS-RND-11)."""

    #: Refuse (default): an unsigned scale receiving a negative value is a bug upstream.
    ERROR = "error"
    #: The NaN code (ml_dtypes float8_e8m0fnu, torch).
    NAN = "nan"
    #: Code 0, where the format has a zero.
    ZERO = "zero"
    #: The code of |x|: torch's cast to float8_e8m0fnu drops the sign (-3.0 -> 4.0 under rna).
    ABS = "abs"


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

    def __post_init__(self) -> None:
        """Names are accepted for the fields (``Policies(overflow="sat", nan="nan")``); anything
        else that is not a member is refused with the known names (FPS-RND-16)."""
        for key, enum_type in _POLICY_TYPES.items():
            value = getattr(self, key)
            if not isinstance(value, enum_type):
                object.__setattr__(self, key, _parse_member(enum_type, key, value))
        # hashed once: the exact path looks policies up in a memo on every element
        object.__setattr__(self, "_hash", hash((self.overflow, self.nan, self.negative, self.zero)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined]

    def with_(self, **changes: object) -> "Policies":
        """A copy with some fields replaced; strings are parsed to the enums."""
        parsed: dict[str, object] = {}
        types = _POLICY_TYPES
        for key, value in changes.items():
            if value is None:
                continue
            if key not in types:
                raise FpspecError(f"unknown policy {key!r}; known: {', '.join(types)}")
            parsed[key] = value if isinstance(value, types[key]) else _parse_member(types[key], key, value)
        return replace(self, **parsed)  # type: ignore[arg-type]


_POLICY_TYPES: dict[str, type[enum.Enum]] = {"overflow": OverflowPolicy, "nan": NanPolicy,
                                             "negative": NegativePolicy, "zero": ZeroPolicy}


def _parse_member(enum_type: type[enum.Enum], key: str, value: object) -> enum.Enum:
    try:
        return enum_type(value)
    except (ValueError, TypeError):
        known = ", ".join(str(m.value) for m in enum_type)
        raise FpspecError(f"unknown {key} policy {value!r}; known: {known}") from None


def validate_policies(fmt: FloatFormat | str, pol: Policies) -> None:
    """Refuse, before any element is read, a policy that ``fmt`` cannot honour (FPS-RND-16).

    Each refused combination would otherwise produce a code the policy does not name
    (e.g. NaN policy ``zero`` into ue8m0, which has no zero, would give 2^-127).
    """
    fmt = get_format(fmt)

    def refuse(kind: str, value: str, why: str) -> None:
        raise FpspecError(f"{kind} policy {value!r} is impossible for {fmt.name}: {why}")

    if pol.overflow is OverflowPolicy.NONFINITE and not (fmt.has_inf or fmt.has_nan):
        refuse("overflow", "nonfinite", "it has no Inf or NaN code")
    if pol.nan in (NanPolicy.NAN, NanPolicy.QUIET) and not fmt.has_nan:
        refuse("NaN", pol.nan.value, "it has no NaN code")
    if pol.nan is NanPolicy.ZERO and not fmt.has_zero:
        refuse("NaN", "zero", "it has no zero (code 0 is 2^%d)" % fmt.emin)
    if pol.nan is NanPolicy.FLIPPED_ZERO and not (fmt.has_zero and fmt.signed):
        refuse("NaN", "flipped-zero", "it has no signed zero")
    if not fmt.signed:
        if pol.negative is NegativePolicy.ZERO and not fmt.has_zero:
            refuse("negative", "zero", "it has no zero")
        if pol.negative is NegativePolicy.NAN and not fmt.has_nan:
            refuse("negative", "nan", "it has no NaN code")
    if not fmt.has_zero and pol.zero is ZeroPolicy.NAN and not fmt.has_nan:
        refuse("zero", "nan", "it has no NaN code")


#: Why each format's defaults are what they are (rendered in docs/rounding.rst).
POLICY_RATIONALE: dict[str, str] = {
    "e2m1": "sat: E2M1 has no Inf/NaN and every block-scaling source (OCP MX, NVFP4, seed) "
            "clamps to +-6; NaN error: there is no NaN code and sources disagree "
            "(ml_dtypes 0x8/0x0, TE reference 0x0, TE SR +6).",
    "e4m3": "nonfinite: what ml_dtypes and torch 2.11 casts do (past 464 -> NaN); torch >= 2.12 "
            "saturates (sat); OCP allows either, sat is one flag away.",
    "ue4m3": "sat: the NVFP4 scale is min(., 448) before conversion in TE, so saturation is "
             "the format's use.",
    "ue5m3": "sat: the seed paper's encoder saturates at 61440 and never emits 0xF8..0xFF.",
    "ue5m3fnu": "sat: same use as ue5m3 (a block scale), saturating at 114688.",
    "ue8m0": "nonfinite: what ml_dtypes and torch do past 2^127 (0xFF).",
    "e5m2": "nonfinite: IEEE 754 semantics, as ml_dtypes and torch.",
    "fp16": "nonfinite: IEEE 754.",
    "e4m3fnuz": "nonfinite: what ml_dtypes does (past max finite 240, and for +-Inf: the NaN 0x80; "
                "the format has no Inf).",
    "e5m2fnuz": "nonfinite: what ml_dtypes does (past max finite 57344, and for +-Inf: the NaN 0x80; "
                "the format has no Inf).",
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
