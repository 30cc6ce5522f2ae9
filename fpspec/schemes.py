"""Block-scaling schemes and their arithmetic profiles, as named data (FPS-BLK-*).

A *scheme* fixes what a block quantizer produces (E2M1 payload codes plus one
scale code per block, in a scale format); a *profile* fixes the arithmetic that
gets there.  Every profile is a frozen :class:`Profile` object in
:data:`PROFILES`, keyed ``(scheme, name)``; the normative operation order of
each is in ``docs/scheme-ue5m3.rst``, ``docs/scheme-nvfp4.rst`` and
``docs/scheme-mxfp4.rst``.  Nothing in the block code reads a flag from
anywhere else: the exact and fast paths both take a :class:`BlockSpec`, which is
a profile resolved against the caller's settings (T, scale format, rounding...).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from fractions import Fraction

from .choices import RoundingMode
from .errors import FpspecError
from .formats import get_format

__all__ = [
    "Arithmetic",
    "AmaxZero",
    "SignedZero",
    "MxScaleMode",
    "Profile",
    "BlockSpec",
    "PROFILES",
    "SCHEMES",
    "get_profile",
    "profiles_of",
    "default_profile",
    "ONE_CODE",
]


class Arithmetic(enum.Enum):
    """How the per-tensor and per-block scale arithmetic is evaluated."""

    #: Real (rational) arithmetic, one rounding per format conversion (FPS-BLK-2).
    EXACT = "exact"
    #: A sequence of IEEE binary32 operations, each correctly rounded (RNE) (FPS-BLK-3).
    FP32 = "fp32"
    #: OCP MX power-of-two scale from the block amax's exponent (FPS-BLK-12).
    MX = "mx"
    #: torchao 0.18's binary32 sequence: divisions by the per-tensor scale, a 2^-6 lower
    #: clamp on block scales (FPS-BLK-18).
    TORCHAO = "torchao-fp32"


class AmaxZero(enum.Enum):
    """What the tensor encode scale is when the tensor amax is 0."""

    #: The encode scale is 1 (seed paper; TE's CUDA kernel).
    ONE = "one"
    #: 6T/0 = +inf, capped at FLT_MAX (TE's Python reference ``NVFP4QuantizerRef``).
    FLT_MAX = "flt-max"


class SignedZero(enum.Enum):
    """Which E2M1 code a scaled value of -0.0 gets."""

    #: -0.0 keeps its sign: code 0x8 (round_to_code semantics; the seed's portable reference).
    KEEP = "keep"
    #: A scaled value that *is* -0.0 gets code 0x0, while a negative value that rounds to
    #: zero keeps code 0x8 (TE's ``cast_to_fp4x2``).
    POSITIVE = "positive"


class MxScaleMode(enum.Enum):
    """How an MX block's E8M0 scale exponent is chosen from the block amax (FPS-BLK-12)."""

    #: OCP MX v1.0: floor(log2 amax) - emax(E2M1); torchao FLOOR.
    FLOOR = "floor"
    #: ceil(log2 amax) - emax(E2M1); torchao CEIL.
    CEIL = "ceil"
    #: floor(log2 amax'), amax' = amax rounded to 1 mantissa bit ties-away, minus emax; torchao EVEN.
    EVEN = "even"
    #: ceil(log2(amax / 6)): the smallest power of two >= amax/6; torchao RCEIL / cuBLAS,
    #: computed on the exact quotient (torchao rounds amax * fp32(1/6) first).
    RCEIL = "rceil"


#: UE5M3 / UE4M3 / UE5M3FNU code of 1.0 (exponent field = bias, mantissa 0).
ONE_CODE = {"ue5m3": 0x78, "ue5m3fnu": 0x78, "ue4m3": 0x38}


@dataclass(frozen=True)
class Profile:
    """One named arithmetic profile of one scheme (the documented defaults live here).

    Attributes:
        scheme: ``ue5m3``, ``nvfp4`` or ``mxfp4``.
        name: the profile name (``exact``, ``seed-fp32``, ``te-fp32``, ``floor``, ...).
        arithmetic: see :class:`Arithmetic`.
        scale_formats: accepted scale formats, the first is the default.
        target: default T (the largest block scale the tensor amax maps to).
        zero_scale_rule: default of the zero-scale-to-one rule.
        amax_zero: encode scale for a zero tensor amax.
        signed_zero: E2M1 code of a scaled -0.0.
        cap_multiplier: FP32 profiles: the per-block multiplier is min(., FLT_MAX).
        dequant: name of the dequantization formula (see :mod:`fpspec.quantization`).
        mx_mode: MX scale rule (mxfp4 only).
        roundings: accepted payload rounding modes, the first is the default.
        source: where the definition comes from (rendered in the docs).
    """

    scheme: str
    name: str
    arithmetic: Arithmetic
    scale_formats: tuple[str, ...]
    target: Fraction | None
    zero_scale_rule: bool
    amax_zero: AmaxZero
    signed_zero: SignedZero
    cap_multiplier: bool
    dequant: str
    mx_mode: MxScaleMode | None = None
    roundings: tuple[str, ...] = ("rne", "sr-midpoint", "rtz", "rna", "sr-add", "sr-unbiased")
    source: str = ""


_ROUND_SEED = ("rne", "sr-midpoint", "rtz", "rna", "sr-add", "sr-unbiased")

PROFILES: dict[tuple[str, str], Profile] = {}


def _add(p: Profile) -> None:
    PROFILES[(p.scheme, p.name)] = p


_add(Profile("ue5m3", "exact", Arithmetic.EXACT, ("ue5m3", "ue5m3fnu"), Fraction(448), True,
             AmaxZero.ONE, SignedZero.KEEP, False, "exact", roundings=_ROUND_SEED,
             source="Hu, Luschi, Balanca (arXiv 2609.02846), the recipe in real arithmetic"))
_add(Profile("ue5m3", "seed-fp32", Arithmetic.FP32, ("ue5m3", "ue5m3fnu"), Fraction(448), True,
             AmaxZero.ONE, SignedZero.KEEP, True, "seed-kernel", roundings=_ROUND_SEED,
             source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/quantization.py (FP32 div_rn/mul_rn)"))
_add(Profile("nvfp4", "te-fp32", Arithmetic.FP32, ("ue4m3",), Fraction(448), False,
             AmaxZero.FLT_MAX, SignedZero.POSITIVE, True, "te", roundings=("rne", "sr-add"),
             source="NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/"
                    "reference_nvfp4.py NVFP4QuantizerRef"))
_add(Profile("nvfp4", "te-kernel", Arithmetic.FP32, ("ue4m3",), Fraction(448), False,
             AmaxZero.ONE, SignedZero.POSITIVE, True, "te", roundings=("rne", "sr-add"),
             source="TE's CUDA kernel: as te-fp32 but S_enc = 1 for a zero tensor amax"))
_add(Profile("nvfp4", "torchao-0.18", Arithmetic.TORCHAO, ("ue4m3",), Fraction(448), False,
             AmaxZero.ONE, SignedZero.KEEP, False, "torchao", roundings=("rne",),
             source="pytorch/ao 0.18.0 torchao/prototype/mx_formats/nvfp4_tensor.py, two-level scaling "
                    "(nvfp4_quantize with per_tensor_amax_to_scale)"))
_add(Profile("nvfp4", "exact", Arithmetic.EXACT, ("ue4m3",), Fraction(448), False,
             AmaxZero.ONE, SignedZero.KEEP, False, "exact", roundings=("rne", "sr-midpoint", "rtz", "rna",
                                                                      "sr-add", "sr-unbiased"),
             source="NVFP4 (arXiv 2509.25149) in real arithmetic"))
for _mode in MxScaleMode:
    _add(Profile("mxfp4", _mode.value, Arithmetic.MX, ("ue8m0",), None, False, AmaxZero.ONE,
                 SignedZero.KEEP, False, "mx", mx_mode=_mode, roundings=("rne", "rna"),
                 source="OCP Microscaling Formats v1.0 sec. 6.3" if _mode is MxScaleMode.FLOOR
                 else "pytorch/ao torchao/prototype/mx_formats ScaleCalculationMode." + _mode.name))

#: Scheme name -> default profile name (why: docs/scheme-*.rst).
SCHEMES: dict[str, str] = {"ue5m3": "exact", "nvfp4": "te-fp32", "mxfp4": "floor"}


def profiles_of(scheme: str) -> list[str]:
    return [name for (s, name) in PROFILES if s == scheme]


def default_profile(scheme: str) -> str:
    if scheme not in SCHEMES:
        raise FpspecError(f"unknown scheme {scheme!r}; known: {', '.join(SCHEMES)}")
    return SCHEMES[scheme]


def get_profile(scheme: str, name: str | None = None) -> Profile:
    name = name or default_profile(scheme)
    try:
        return PROFILES[(scheme, name)]
    except KeyError:
        raise FpspecError(f"unknown profile {name!r} for scheme {scheme!r}; known: "
                          f"{', '.join(profiles_of(scheme))}") from None


@dataclass(frozen=True)
class BlockSpec:
    """A profile resolved against one call's settings: everything the block code needs.

    ``target`` is a Fraction; ``rounding`` a :class:`RoundingMode` with ``nbits`` random bits.
    """

    profile: Profile
    block: int
    tile: str
    target: Fraction | None
    scale_format: str
    zero_scale_rule: bool
    rounding: RoundingMode
    nbits: int = 8
    params: dict = field(default_factory=dict)

    @property
    def scheme(self) -> str:
        return self.profile.scheme

    @property
    def arithmetic(self) -> Arithmetic:
        return self.profile.arithmetic

    @property
    def one_code(self) -> int:
        return ONE_CODE[self.scale_format]

    def with_(self, **kw: object) -> "BlockSpec":
        return replace(self, **kw)  # type: ignore[arg-type]


def resolve_spec(scheme: str, profile: str | None, *, block: int, tile: str, target: object,
                 scale_format: str | None, zero_scale_rule: bool | None,
                 rounding: str | RoundingMode, nbits: int = 8) -> BlockSpec:
    """Check the settings against the profile and build the :class:`BlockSpec`."""
    prof = get_profile(scheme, profile)
    if block not in (16, 32):
        raise FpspecError(f"block must be 16 or 32, got {block}")
    if scheme == "nvfp4" and block != 16:
        raise FpspecError("nvfp4 uses blocks of 16")
    if scheme == "mxfp4" and block != 32:
        raise FpspecError("mxfp4 uses blocks of 32 (OCP MX)")
    if tile not in ("1xB", "BxB"):
        raise FpspecError(f"tile must be '1xB' or 'BxB', got {tile!r}")
    if scheme == "mxfp4" and tile != "1xB":
        raise FpspecError("mxfp4 uses 1x32 blocks only")
    sf = scale_format or prof.scale_formats[0]
    if sf not in prof.scale_formats:
        raise FpspecError(f"scale format {sf!r} is not accepted by {scheme}/{prof.name}; "
                          f"accepted: {', '.join(prof.scale_formats)}")
    get_format(sf)
    try:
        mode = RoundingMode.parse(rounding)
    except ValueError as exc:
        raise FpspecError(str(exc)) from None
    if mode.value not in prof.roundings:
        raise FpspecError(f"rounding {mode.value!r} is not accepted by {scheme}/{prof.name}; "
                          f"accepted: {', '.join(prof.roundings)}")
    if prof.arithmetic is Arithmetic.MX:
        if target is not None:
            raise FpspecError("mxfp4 has no tensor scale: a target T does not apply")
        t = None
    else:
        t = _parse_target(target if target is not None else prof.target)
    zr = prof.zero_scale_rule if zero_scale_rule is None else bool(zero_scale_rule)
    if zr and prof.arithmetic is Arithmetic.MX:
        raise FpspecError("the zero-scale rule does not apply to mxfp4 (E8M0 has no zero)")
    return BlockSpec(prof, block, tile, t, sf, zr, mode, nbits)


def _parse_target(target: object) -> Fraction:
    """T must be a positive, finite binary32 value (the seed and TE compute 6T in FP32)."""
    import math

    import numpy as np

    try:
        f = float(target)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FpspecError(f"target T must be a number, got {target!r}") from None
    if not math.isfinite(f) or f <= 0:
        raise FpspecError(f"target T must be finite and positive, got {target!r}")
    if float(np.float32(f)) != f:
        raise FpspecError(f"target T must be exactly representable in binary32, got {target!r}")
    return Fraction(f)
