"""Block-scaling schemes and their arithmetic profiles, as named data (FPS-BLK-*).

A *scheme* (:class:`BlockScheme`) fixes what a block quantizer produces: payload
codes (E2M1; E4M3 or E5M2 for ``mxfp8``) plus one scale code per block, which
block lengths and tile shapes exist, whether there is a tensor scale, and the
default profile.  A
*profile* (:class:`Profile`) fixes the arithmetic that gets there.  Both are
frozen objects in :data:`BLOCK_SCHEMES` and :data:`PROFILES`; the normative
operation order of each profile is in ``docs/scheme-ue5m3.rst``,
``docs/scheme-nvfp4.rst``, ``docs/scheme-mxfp4.rst`` and ``docs/scheme-mxfp8.rst``.  Nothing in the block
code reads a flag from anywhere else: the exact and fast paths both take a
:class:`BlockSpec` (a profile resolved against the caller's settings: T, scale
format, rounding, ...) and return a :class:`BlockResult`.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from .choices import DEFAULT_SR_BITS, RoundingMode
from .errors import FpspecError
from .formats import FloatFormat, get_format

__all__ = [
    "CODES_SCHEME",
    "Arithmetic",
    "AmaxZero",
    "SignedZero",
    "MxScaleMode",
    "MxZeroByte",
    "TorchDevice",
    "OCP_MX_MODES",
    "SrEvaluation",
    "RhtOutput",
    "Dequant",
    "BlockScheme",
    "Profile",
    "BlockSpec",
    "BlockResult",
    "BLOCK_SCHEMES",
    "PROFILES",
    "SCHEMES",
    "get_scheme",
    "get_profile",
    "profiles_of",
    "default_profile",
    "resolve_spec",
    "parse_target",
    "MAX_SR_BITS",
]

#: Widest random value a stochastic payload rounding takes (as :func:`fpspec.convert.encode`).
MAX_SR_BITS = 32


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
    #: torchao 0.18's ``to_mx`` on binary32 tensors: MX exponents from the bits (or, RCEIL,
    #: from a binary32 division and log2), its own handling of scale byte 0 (FPS-BLK-23).
    TORCHAO_MX = "torchao-mx"
    #: microxcaling's binary32 MX quantizer: exponents from a binary32 log2, its
    #: round-half-up done in binary32 (FPS-BLK-24).
    MICROXCALING = "microxcaling"

    @property
    def binary32_input(self) -> bool:
        """Whether the profile reads its input as binary32 values (its first operation is a
        binary32 one): binary64 input is narrowed (RNE) first (FPS-BLK-1)."""
        return self in (Arithmetic.FP32, Arithmetic.TORCHAO, Arithmetic.TORCHAO_MX, Arithmetic.MICROXCALING)


class AmaxZero(enum.Enum):
    """What the tensor encode scale is when the tensor amax (measured or held) is 0 (FPS-BLK-5)."""

    #: The encode scale is 1 (seed paper and its kernel; TE's CUDA kernel).
    ONE = "one"
    #: 6T/0 = +inf, capped at FLT_MAX (TE's Python reference ``NVFP4QuantizerRef``).
    FLT_MAX = "flt-max"
    #: The profile's formula divides 0 by 0: a zero amax is refused (torchao 0.18).
    REFUSE = "refuse"


class SignedZero(enum.Enum):
    """Which payload code a scaled value of -0.0 gets (FPS-BLK-11, FPS-BLK-28).

    The sign bit is 0x8 for E2M1 and 0x80 for E4M3 and E5M2."""

    #: -0.0 keeps its sign: code 0x8 (0x80) (round_to_code semantics; the seed's portable
    #: reference; TE's CUDA kernel, whose ``cvt.rn.satfinite.e2m1x2.f32`` copies the sign bit).
    KEEP = "keep"
    #: A scaled value that *is* -0.0 gets code 0x0, while a negative value that rounds to
    #: zero keeps code 0x8 (0x80) (TE's Python ``cast_to_fp4x2``, which tests ``x < -0.0``).
    POSITIVE = "positive"


class MxScaleMode(enum.Enum):
    """How an MX block's E8M0 scale exponent is chosen from the block amax (FPS-BLK-12, FPS-BLK-27).

    emax and max are those of the element (payload) format: 2 and 6 for E2M1, 8 and 448
    for E4M3, 15 and 57344 for E5M2; m is its mantissa width."""

    #: OCP MX v1.0: floor(log2 amax) - emax; torchao FLOOR.
    FLOOR = "floor"
    #: ceil(log2 amax) - emax; torchao CEIL.
    CEIL = "ceil"
    #: floor(log2 amax'), amax' = amax rounded to m mantissa bits ties-away, minus emax; torchao EVEN.
    EVEN = "even"
    #: ceil(log2(amax / max)): the smallest power of two >= amax/max; cuBLAS's rule, computed
    #: on the exact quotient.
    RCEIL = "rceil"
    #: CL(fp32(amax / max)) = ceil(RN32(log2(fp32(amax / max)))): torchao 0.18 RCEIL on CPU, a
    #: binary32 division and a binary32 log2 (one too small just above a power of two;
    #: FPS-BLK-22, FPS-BLK-23).
    RCEIL_FP32 = "rceil-fp32"
    #: FL(amax) - emax = floor(RN32(log2 amax)) - emax (amax 0 read as 2^-126):
    #: microxcaling's shared exponent "max" (one too high just below a power of two;
    #: FPS-BLK-22, FPS-BLK-24).
    FLOOR_FP32 = "floor-fp32"


#: The OCP / exact MX scale rules, one ``mxfp4`` and one ``mxfp8`` profile each.
OCP_MX_MODES = (MxScaleMode.FLOOR, MxScaleMode.CEIL, MxScaleMode.EVEN, MxScaleMode.RCEIL)


class MxZeroByte(enum.Enum):
    """How an MX block whose scale byte is 0 (2^-127) quantizes its elements (FPS-BLK-13, FPS-BLK-23).

    Dequantization is q 2^-127 under every rule (the byte's value)."""

    #: Divide by 2^-127, the byte's value (OCP MX; microxcaling).
    EXACT = "exact"
    #: Divide by 2^-126: torchao 0.18 FLOOR / CEIL / EVEN clamp the binary32 scale at the
    #: smallest normal value (``torch.clamp(scale_fp32, min=F32_MIN_NORMAL)``).
    MIN_NORMAL = "min-normal"
    #: Multiply by 1.0: torchao 0.18 RCEIL's reciprocal scale for exponent 0.
    ONE = "one"


class TorchDevice(enum.Enum):
    """The device a torch-based reference quantizer runs on, where its binary32 results depend
    on it (FPS-BLK-29).  Two differences were measured on an NVIDIA H200 with torch 2.11
    (vectors/provenance/h200-refs-cuda):

    * a tensor divided by a Python number: on the CPU one binary32 division; on CUDA a
      multiplication by the number's binary32 reciprocal (ATen's true-division kernel with a
      CPU scalar), so ``a / 6`` is fp32(a fp32(1/6));
    * floor and ceiling of ``torch.log2``: FL / CL (FPS-BLK-22) on both, except that on CUDA
      both are one higher at 2^-146, 2^-143, 2^-137 and 2^-136, where every MX rule clamps the
      exponent to -127 anyway (so no profile output depends on it)."""

    #: torch on the CPU.
    CPU = "cpu"
    #: torch on an NVIDIA GPU (CUDA).
    CUDA = "cuda"


class SrEvaluation(enum.Enum):
    """How the comparison of a stochastic payload rounding is evaluated (FPS-BLK-19)."""

    #: The rule on exact values, as :doc:`rounding` defines it (FPS-RND-5..7).
    EXACT = "exact"
    #: The seed's FP32 evaluation of its midpoint rule: up iff
    #: fp32(delta + fp32((2r+1) 2^-(N+1))) >= 1, delta the exact fractional position.
    FP32 = "fp32"


class RhtOutput(enum.Enum):
    """In which precision the Hadamard-transformed view is kept (FPS-BLK-10, FPS-BLK-20)."""

    #: The binary32 result of the transform (fpspec's sequential fused order).
    FP32 = "fp32"
    #: The binary32 result rounded to bfloat16 (RNE), as TE's transform kernels store it.
    BF16 = "bf16"


class Dequant(str, enum.Enum):
    """The dequantization formula of a profile (FPS-BLK-14); compares equal to its name."""

    EXACT = "exact"
    SEED_KERNEL = "seed-kernel"
    SEED_PORTABLE = "seed-portable"
    TE = "te"
    TORCHAO = "torchao"
    MX = "mx"


@dataclass(frozen=True, kw_only=True)
class BlockScheme:
    """One block-scaling scheme: what its quantized tensors hold (FPS-BLK-1, FPS-BLK-6).

    Attributes:
        name: ``ue5m3``, ``nvfp4``, ``mxfp4`` or ``mxfp8``.
        payload_formats: the element (payload) formats a caller may choose, the first is the
            default: ``e2m1``, or ``e4m3`` and ``e5m2`` for mxfp8 (FPS-BLK-26).
        blocks: allowed block lengths B; ``default_block`` is used when none is given.
        tiles: allowed tile shapes (``1xB``, ``BxB``).
        tensor_scale: whether a tensor amax and target T scale the blocks (False for MX).
        default_profile: the profile used when the caller names none (why: docs/scheme-*.rst).
        source: where the scheme is defined.
    """

    name: str
    payload_formats: tuple[str, ...]
    blocks: tuple[int, ...]
    default_block: int
    tiles: tuple[str, ...]
    tensor_scale: bool
    default_profile: str
    source: str = ""

    @property
    def payload_format(self) -> FloatFormat:
        """The default payload format."""
        return get_format(self.payload_formats[0])

    def profiles(self) -> list["Profile"]:
        return [p for (s, _), p in PROFILES.items() if s == self.name]


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One named arithmetic profile of one scheme (the documented defaults live here).

    Attributes:
        scheme: the :class:`BlockScheme` name.
        name: the profile name (``exact``, ``seed-fp32``, ``te-fp32``, ``floor``, ...).
        arithmetic: see :class:`Arithmetic`.
        scale_formats: accepted scale format names, the first is the default.
        target: default T (the largest block scale the tensor amax maps to); None without
            a tensor scale.
        zero_scale_rule: default of the zero-scale-to-one rule (FPS-BLK-4).
        amax_zero: encode scale for a zero tensor amax.
        signed_zero: payload code of a scaled -0.0.
        cap_multiplier: binary32 profiles: the per-block multiplier is min(., FLT_MAX).
        dequant: the dequantization formula.
        mx_mode: MX scale rule (mxfp4 and mxfp8 only).
        mx_zero_byte: how a block with scale byte 0 quantizes (mxfp4 and mxfp8 only).
        roundings: accepted payload rounding modes, the first is the default.
        sr_evaluations: accepted :class:`SrEvaluation` values, the first is the default.
        rht_output: default :class:`RhtOutput` of the Hadamard transform.
        amax_zero_note: with ``amax_zero = refuse``, what the source computes instead (said in the error).
        torch_device: for reproductions of torch code, the device whose binary32 arithmetic
            they follow (:class:`TorchDevice`); CPU for every other profile.
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
    dequant: Dequant
    mx_mode: MxScaleMode | None = None
    mx_zero_byte: MxZeroByte | None = None
    roundings: tuple[str, ...] = ("rne", "sr-midpoint", "rtz", "rna", "sr-add", "sr-unbiased")
    sr_evaluations: tuple[SrEvaluation, ...] = (SrEvaluation.EXACT,)
    rht_output: RhtOutput = RhtOutput.FP32
    amax_zero_note: str = ""
    torch_device: TorchDevice = TorchDevice.CPU
    source: str = ""

    def zero_amax_refusal(self) -> str:
        """The error message of a zero tensor amax under ``amax_zero = refuse`` (FPS-BLK-5)."""
        return (f"profile {self.scheme}/{self.name} is undefined for a zero tensor amax (0/0 in the block "
                f"scale); its source divides by the amax" + (f": {self.amax_zero_note}" if self.amax_zero_note else ""))


_ALL_ROUNDINGS = ("rne", "sr-midpoint", "rtz", "rna", "sr-add", "sr-unbiased")

#: Scheme name -> scheme (FPS-BLK-1).
BLOCK_SCHEMES: dict[str, BlockScheme] = {s.name: s for s in (
    BlockScheme(name="ue5m3", payload_formats=("e2m1",), blocks=(16, 32), default_block=16, tiles=("1xB", "BxB"),
                tensor_scale=True, default_profile="exact",
                source="Hu, Luschi, Balanca (arXiv 2609.02846): E2M1 payloads, UE5M3 block scales"),
    BlockScheme(name="nvfp4", payload_formats=("e2m1",), blocks=(16,), default_block=16, tiles=("1xB", "BxB"),
                tensor_scale=True, default_profile="te-fp32",
                source="NVIDIA, Pretraining LLMs with NVFP4 (arXiv 2509.25149): 1x16 / 16x16, E4M3 scales"),
    BlockScheme(name="mxfp4", payload_formats=("e2m1",), blocks=(32,), default_block=32, tiles=("1xB",),
                tensor_scale=False, default_profile="floor",
                source="OCP Microscaling Formats (MX) v1.0: 1x32 blocks, E8M0 scales, no tensor scale"),
    BlockScheme(name="mxfp8", payload_formats=("e4m3", "e5m2"), blocks=(32,), default_block=32, tiles=("1xB",),
                tensor_scale=False, default_profile="floor",
                source="OCP Microscaling Formats (MX) v1.0 sec. 5.2 Table 1 (MXFP8: E5M2 or E4M3 elements, "
                       "k = 32, E8M0 scales) and sec. 6.3; no tensor scale"),
)}

PROFILES: dict[tuple[str, str], Profile] = {}


def _add(p: Profile) -> None:
    PROFILES[(p.scheme, p.name)] = p


_add(Profile(scheme="ue5m3", name="exact", arithmetic=Arithmetic.EXACT, scale_formats=("ue5m3", "ue5m3fnu"),
             target=Fraction(448), zero_scale_rule=True, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
             cap_multiplier=False, dequant=Dequant.EXACT,
             source="Hu, Luschi, Balanca (arXiv 2609.02846), the recipe in real arithmetic"))
_add(Profile(scheme="ue5m3", name="seed-fp32", arithmetic=Arithmetic.FP32, scale_formats=("ue5m3", "ue5m3fnu"),
             target=Fraction(448), zero_scale_rule=True, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
             cap_multiplier=True, dequant=Dequant.SEED_KERNEL,
             sr_evaluations=(SrEvaluation.EXACT, SrEvaluation.FP32),
             source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/quantization.py (FP32 div_rn/mul_rn)"))
_add(Profile(scheme="ue5m3", name="seed-triton", arithmetic=Arithmetic.FP32, scale_formats=("ue5m3", "ue5m3fnu"),
             target=Fraction(448), zero_scale_rule=True, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.POSITIVE,
             cap_multiplier=True, dequant=Dequant.SEED_KERNEL,
             sr_evaluations=(SrEvaluation.EXACT, SrEvaluation.FP32),
             source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/quantization.py and _rounding.py: "
                    "seed-fp32 with round_e2m1's sign (is_negative = value < 0.0: -0.0 gives +0); its SR "
                    "is sr_eval='fp32'"))
_add(Profile(scheme="ue5m3", name="seed-portable", arithmetic=Arithmetic.FP32, scale_formats=("ue5m3", "ue5m3fnu"),
             target=Fraction(448), zero_scale_rule=True, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
             cap_multiplier=True, dequant=Dequant.SEED_PORTABLE,
             sr_evaluations=(SrEvaluation.EXACT, SrEvaluation.FP32),
             source="MrHuff/ue5m3-fp4 src/ue5m3_fp4/formats.py (_quantize_dequantize_blocks_impl): the "
                    "seed-fp32 sequence, dequantized as payload * (scale * global_decode)"))
_add(Profile(scheme="nvfp4", name="te-fp32", arithmetic=Arithmetic.FP32, scale_formats=("ue4m3",),
             target=Fraction(448), zero_scale_rule=False, amax_zero=AmaxZero.FLT_MAX,
             signed_zero=SignedZero.POSITIVE, cap_multiplier=True, dequant=Dequant.TE, roundings=("rne", "sr-add"),
             source="NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/"
                    "reference_nvfp4.py NVFP4QuantizerRef"))
_add(Profile(scheme="nvfp4", name="te-kernel", arithmetic=Arithmetic.FP32, scale_formats=("ue4m3",),
             target=Fraction(448), zero_scale_rule=False, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
             cap_multiplier=True, dequant=Dequant.TE, roundings=("rne", "sr-add"), rht_output=RhtOutput.BF16,
             source="TE's CUDA kernels (transformer_engine/common/cast/nvfp4/core_nvfp4.cuh, "
                    "util/ptx_arch_spec.cuh, hadamard_transform/hadamard_transform_cast_fusion.cu): as "
                    "te-fp32 but S_enc = 1 for a zero tensor amax, -0.0 keeps its sign, the transformed "
                    "view is rounded to bfloat16"))
_add(Profile(scheme="nvfp4", name="torchao-0.18", arithmetic=Arithmetic.TORCHAO, scale_formats=("ue4m3",),
             target=Fraction(448), zero_scale_rule=False, amax_zero=AmaxZero.REFUSE, signed_zero=SignedZero.KEEP,
             cap_multiplier=False, dequant=Dequant.TORCHAO, roundings=("rne",),
             amax_zero_note="torchao 0.18 computes scale bytes 0xFF (E4M3 NaN), codes 0xC and NaN dequantized "
                            "values there, which fpspec does not reproduce",
             source="pytorch/ao 0.18.0 torchao/prototype/mx_formats/nvfp4_tensor.py, two-level scaling "
                    "(nvfp4_quantize with per_tensor_amax_to_scale)"))
_add(replace(
    PROFILES[("nvfp4", "torchao-0.18")], name="torchao-0.18-cuda", torch_device=TorchDevice.CUDA,
    source="pytorch/ao 0.18.0 torchao/prototype/mx_formats/nvfp4_tensor.py as torchao-0.18, run by torch on "
           "CUDA: amax / 2688 and a_B / 6 are multiplications by binary32 reciprocals (measured on an H200, "
           "vectors/provenance/h200-refs-cuda)"))
_add(Profile(scheme="nvfp4", name="exact", arithmetic=Arithmetic.EXACT, scale_formats=("ue4m3",),
             target=Fraction(448), zero_scale_rule=False, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
             cap_multiplier=False, dequant=Dequant.EXACT,
             source="NVFP4 (arXiv 2509.25149) in real arithmetic"))
_OCP_SOURCE = {"mxfp4": "OCP Microscaling Formats v1.0 sec. 6.3",
               "mxfp8": "OCP Microscaling Formats v1.0 sec. 5.2 (MXFP8) and sec. 6.3; E4M3 / E5M2 elements "
                        "as OCP 8-bit Floating Point Specification (OFP8) v1.0, saturating conversion"}
#: The OCP scale rules, one profile each for mxfp4 and mxfp8 (FPS-BLK-12, FPS-BLK-27).
for _scheme in ("mxfp4", "mxfp8"):
    for _mode in OCP_MX_MODES:
        _add(Profile(scheme=_scheme, name=_mode.value, arithmetic=Arithmetic.MX, scale_formats=("ue8m0",),
                     target=None, zero_scale_rule=False, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.KEEP,
                     cap_multiplier=False, dequant=Dequant.MX, mx_mode=_mode, mx_zero_byte=MxZeroByte.EXACT,
                     roundings=("rne", "rna"),
                     source=_OCP_SOURCE[_scheme] if _mode is MxScaleMode.FLOOR
                     else "pytorch/ao torchao/prototype/mx_formats ScaleCalculationMode." + _mode.name))
# Reproductions of public quantizers: mxfp4 only (their FP8 paths are not measured here).
for _name, _mode, _zero in (("floor", MxScaleMode.FLOOR, MxZeroByte.MIN_NORMAL),
                            ("ceil", MxScaleMode.CEIL, MxZeroByte.MIN_NORMAL),
                            ("even", MxScaleMode.EVEN, MxZeroByte.MIN_NORMAL),
                            ("rceil", MxScaleMode.RCEIL_FP32, MxZeroByte.ONE)):
    _add(Profile(scheme="mxfp4", name=f"torchao-0.18-{_name}", arithmetic=Arithmetic.TORCHAO_MX,
                 scale_formats=("ue8m0",), target=None, zero_scale_rule=False, amax_zero=AmaxZero.ONE,
                 signed_zero=SignedZero.KEEP, cap_multiplier=False, dequant=Dequant.MX, mx_mode=_mode,
                 mx_zero_byte=_zero, roundings=("rne",),
                 source="pytorch/ao 0.18.0 torchao/prototype/mx_formats/mx_tensor.py to_mx (ScaleCalculationMode."
                        + _name.upper() + ("; _to_mx_rceil" if _name == "rceil" else "") + ") and to_dtype, "
                        "CPU torch"))
_add(replace(
    PROFILES[("mxfp4", "torchao-0.18-rceil")], name="torchao-0.18-rceil-cuda", torch_device=TorchDevice.CUDA,
    source="pytorch/ao 0.18.0 to_mx (ScaleCalculationMode.RCEIL; _to_mx_rceil's eager fallback) run by torch "
           "on CUDA: amax / 6 is amax * fp32(1/6), then CUDA's log2 (measured on an H200, "
           "vectors/provenance/h200-refs-cuda); FLOOR / CEIL / EVEN divide by no Python number and take "
           "no log2, so torchao-0.18-floor, -ceil, -even hold on CUDA too (measured)"))
_add(Profile(scheme="mxfp4", name="microxcaling", arithmetic=Arithmetic.MICROXCALING, scale_formats=("ue8m0",),
             target=None, zero_scale_rule=False, amax_zero=AmaxZero.ONE, signed_zero=SignedZero.POSITIVE,
             cap_multiplier=False, dequant=Dequant.MX, mx_mode=MxScaleMode.FLOOR_FP32,
             mx_zero_byte=MxZeroByte.EXACT, roundings=("rne", "rna", "rtz"),
             source="microsoft/microxcaling mx/mx_ops.py _quantize_mx (shared_exp_method \"max\", the "
                    "pure-PyTorch path) and mx/elemwise_ops.py _quantize_elemwise_core; its round names "
                    "even, nearest, floor are fpspec's rne, rna, rtz"))

#: Scheme name -> default profile name (a view of :data:`BLOCK_SCHEMES`).
SCHEMES: dict[str, str] = {name: s.default_profile for name, s in BLOCK_SCHEMES.items()}
#: Scheme and profile name of a tensor no quantizer made, built from payload codes and scale
#: bytes as an instruction takes them (no tensor scale; FPS-GEMM-4,
#: :meth:`fpspec.quantized.QuantizedTensor.from_codes`).
CODES_SCHEME = "codes"


def get_scheme(name: str) -> BlockScheme:
    try:
        return BLOCK_SCHEMES[name]
    except (KeyError, TypeError):
        raise FpspecError(f"unknown scheme {name!r}; known: {', '.join(BLOCK_SCHEMES)}") from None


def profiles_of(scheme: str) -> list[str]:
    return [name for (s, name) in PROFILES if s == scheme]


def default_profile(scheme: str) -> str:
    return get_scheme(scheme).default_profile


def get_profile(scheme: str, name: str | None = None) -> Profile:
    name = name or default_profile(scheme)
    try:
        return PROFILES[(scheme, name)]
    except (KeyError, TypeError):
        raise FpspecError(f"unknown profile {name!r} for scheme {scheme!r}; known: "
                          f"{', '.join(profiles_of(scheme))}") from None


@dataclass(frozen=True, kw_only=True)
class BlockSpec:
    """A profile resolved against one call's settings: everything the block code needs.

    ``target`` is a Fraction (None without a tensor scale); ``scale_format`` and
    ``payload_format`` the :class:`~fpspec.formats.FloatFormat` objects; ``rounding`` a
    :class:`RoundingMode` with ``nbits`` random bits evaluated as ``sr_eval`` says.
    """

    profile: Profile
    block: int
    tile: str
    target: Fraction | None
    scale_format: FloatFormat
    zero_scale_rule: bool
    rounding: RoundingMode
    nbits: int = DEFAULT_SR_BITS
    sr_eval: SrEvaluation = SrEvaluation.EXACT
    rht_output: RhtOutput = RhtOutput.FP32
    payload_format: FloatFormat = field(default_factory=lambda: get_format("e2m1"))

    @property
    def scheme(self) -> BlockScheme:
        return BLOCK_SCHEMES[self.profile.scheme]

    @property
    def arithmetic(self) -> Arithmetic:
        return self.profile.arithmetic

    @property
    def one_code(self) -> int:
        """The scale code of 1.0 (exponent field = bias, mantissa 0), used by the zero-scale rule."""
        return self.scale_format.bias << self.scale_format.man_bits

    def with_(self, **kw: object) -> "BlockSpec":
        return replace(self, **kw)  # type: ignore[arg-type]


@dataclass
class BlockResult:
    """What quantizing one view gives, from either implementation (FPS-BLK-15)."""

    codes: np.ndarray          # uint8 (M, K): one payload code per element (E2M1, E4M3 or E5M2)
    scales: np.ndarray         # uint8 scale grid, row-major block order
    encode_scale: np.float32
    decode_scale: np.float32
    dequant: np.ndarray | None = field(default=None)  # float32 (M, K); None when not asked for


def _enum_choice(enum_cls: type[enum.Enum], value: object, what: str) -> enum.Enum:
    if isinstance(value, enum_cls):
        return value
    try:
        return enum_cls(value)
    except ValueError:
        raise FpspecError(f"{what} must be one of {', '.join(m.value for m in enum_cls)}, "
                          f"got {value!r}") from None


def _check_nbits(nbits: object) -> int:
    if isinstance(nbits, bool) or not isinstance(nbits, (int, np.integer)) or not 1 <= nbits <= MAX_SR_BITS:
        raise FpspecError(f"nbits (the random-bit width of stochastic rounding) must be an integer in "
                          f"1..{MAX_SR_BITS}, got {nbits!r}")
    return int(nbits)


def resolve_spec(scheme: str, profile: str | None, *, block: int | None = None, tile: str = "1xB",
                 target: object = None, scale_format: str | FloatFormat | None = None,
                 zero_scale_rule: bool | None = None, rounding: str | RoundingMode = "rne",
                 nbits: int = DEFAULT_SR_BITS, sr_eval: str | SrEvaluation | None = None,
                 rht_output: str | RhtOutput | None = None,
                 payload_format: str | FloatFormat | None = None) -> BlockSpec:
    """Check the settings against the scheme and profile and build the :class:`BlockSpec`."""
    sch = get_scheme(scheme)
    prof = get_profile(scheme, profile)
    pf_name = payload_format.name if isinstance(payload_format, FloatFormat) else payload_format
    pf_name = sch.payload_formats[0] if pf_name is None else pf_name
    if pf_name not in sch.payload_formats:
        raise FpspecError(f"{scheme} payloads are {' or '.join(sch.payload_formats)}, got payload format "
                          f"{pf_name!r}")
    block = sch.default_block if block is None else block
    if isinstance(block, bool) or block not in sch.blocks:
        raise FpspecError(f"{scheme} uses blocks of {' or '.join(map(str, sch.blocks))}, got {block!r}")
    if tile not in sch.tiles:
        raise FpspecError(f"{scheme} allows tiles {', '.join(sch.tiles)} (1xB: B elements along K, "
                          f"BxB: a square), got {tile!r}")
    sf_name = scale_format.name if isinstance(scale_format, FloatFormat) else (scale_format or prof.scale_formats[0])
    if sf_name not in prof.scale_formats:
        raise FpspecError(f"scale format {sf_name!r} is not accepted by {scheme}/{prof.name}; "
                          f"accepted: {', '.join(prof.scale_formats)}")
    sf = get_format(sf_name)
    try:
        mode = RoundingMode.parse(rounding)
    except ValueError as exc:
        raise FpspecError(str(exc)) from None
    if mode.value not in prof.roundings:
        raise FpspecError(f"rounding {mode.value!r} is not accepted by {scheme}/{prof.name}; "
                          f"accepted: {', '.join(prof.roundings)}")
    nb = _check_nbits(nbits)
    sre = prof.sr_evaluations[0] if sr_eval is None else _enum_choice(SrEvaluation, sr_eval, "sr_eval")
    if sre not in prof.sr_evaluations:
        raise FpspecError(f"sr_eval {sre.value!r} is not accepted by {scheme}/{prof.name}; accepted: "
                          f"{', '.join(e.value for e in prof.sr_evaluations)}")
    if sre is SrEvaluation.FP32 and mode is not RoundingMode.SR_MIDPOINT:
        raise FpspecError(f"sr_eval 'fp32' is the seed's evaluation of sr-midpoint; rounding is {mode.value!r}")
    if sre is SrEvaluation.FP32 and nb > 23:
        raise FpspecError(f"sr_eval 'fp32' needs (2r+1) 2^-(N+1) exact in binary32: nbits <= 23, got {nb}")
    rho = prof.rht_output if rht_output is None else _enum_choice(RhtOutput, rht_output, "rht_output")
    if not sch.tensor_scale:
        if target is not None:
            raise FpspecError(f"{scheme} has no tensor scale: a target T does not apply")
        t = None
    else:
        t = parse_target(target if target is not None else prof.target)
    zr = prof.zero_scale_rule if zero_scale_rule is None else bool(zero_scale_rule)
    if zr and not sch.tensor_scale:
        raise FpspecError(f"the zero-scale rule does not apply to {scheme} ({sf.name} has no zero)")
    return BlockSpec(profile=prof, block=block, tile=tile, target=t, scale_format=sf, zero_scale_rule=zr,
                     rounding=mode, nbits=nb, sr_eval=sre, rht_output=rho, payload_format=get_format(pf_name))


def parse_target(target: object) -> Fraction:
    """T must be a positive, finite binary32 value (the seed and TE compute 6T in FP32)."""
    try:
        f = float(target)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise FpspecError(f"target T must be a number, got {target!r}") from None
    if not math.isfinite(f) or f <= 0:
        raise FpspecError(f"target T must be finite and positive, got {target!r}")
    with np.errstate(over="ignore"):
        f32 = float(np.float32(f))
    if math.isinf(f32):
        raise FpspecError(f"target T = {target!r} is beyond the binary32 range "
                          f"(max {float(np.finfo(np.float32).max)!r})")
    if f32 != f:
        raise FpspecError(f"target T must be exactly representable in binary32, got {target!r}")
    return Fraction(f)
