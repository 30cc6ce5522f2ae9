"""Known disagreements between public references, as data (docs/disagreements.rst, FPS-DOC-5).

Each :class:`Disagreement` names one question that public sources answer
differently, who answers it how, and which fpspec name selects each answer.
A :class:`Selector` is a (kind, name) pair such as ``("rounding", "sr-add")``
or ``("format", "ue5m3fnu")``; :func:`resolve` turns it into the object it names,
so a test can prove that every name the table prints exists in the code.  A
behaviour that fpspec deliberately does not reproduce has no selector and says
why in ``note``.

Sources are cited by the short names that docs/disagreements.rst expands into
full public references: "seed" (Hu, Luschi, Balanca, arXiv 2609.02846 and
MrHuff/ue5m3-fp4), "TE" (TransformerEngine ``NVFP4QuantizerRef``), "OCP MX v1.0",
"torchao", "microxcaling", "ml_dtypes", "gfloat", "LLVM APFloat".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

from .choices import NanPolicy, NegativePolicy, OverflowPolicy, RoundingMode, ZeroPolicy
from .formats import get_format

__all__ = ["Selector", "Behaviour", "Disagreement", "DISAGREEMENTS", "SELECTOR_KINDS", "resolve",
           "register_selector_kind"]


@dataclass(frozen=True)
class Selector:
    """One fpspec name: ``kind`` says where it lives, ``name`` what it is.

    Kinds and the CLI/API place each is given in (see :data:`SELECTOR_KINDS`):
    ``format`` (``--format``), ``rounding`` (``--rounding``), ``overflow``,
    ``nan``, ``negative``, ``zero`` (the policies of :mod:`fpspec.choices`),
    ``nbits`` (``--nbits``, an integer); ``scheme`` and ``profile`` (``scheme/profile``,
    ``fpspec quantize --scheme S --profile P``), ``zero-scale-rule`` (``on``/``off``),
    ``sr-eval`` and ``rht-output`` (the ``sr_eval=`` and ``rht_output=`` arguments of
    :func:`fpspec.quantization.quantize`) and ``preset`` (``fpspec gemm --model NAME``).
    """

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}={self.name}"


@dataclass(frozen=True)
class Behaviour:
    """What one reference does, and the fpspec names that reproduce it (empty: not modelled)."""

    who: str
    does: str
    selects: tuple[Selector, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Disagreement:
    """One question public references answer differently."""

    key: str
    topic: str
    behaviours: tuple[Behaviour, ...]
    #: What fpspec does when the caller names nothing, and why.
    fpspec_default: str
    #: Requirement ids of the normative text that fixes fpspec's side.
    requirements: tuple[str, ...] = field(default=())
    #: The fpspec names of the default behaviour (when it is selectable by name).
    default_selects: tuple[Selector, ...] = field(default=())


def _sel(spec: str) -> tuple[Selector, ...]:
    """``"rounding=sr-add, nbits=8"`` -> selectors."""
    out = []
    for part in spec.split(","):
        kind, _, name = part.strip().partition("=")
        out.append(Selector(kind.strip(), name.strip()))
    return tuple(out)


def _resolve_nbits(name: str) -> int:
    n = int(name)
    if not 1 <= n <= 32:
        raise ValueError(f"nbits must be in 1..32, got {n}")
    return n


#: kind -> function that returns the named object or raises.
SELECTOR_KINDS: dict[str, Callable[[str], object]] = {
    "format": get_format,
    "rounding": RoundingMode.parse,
    "overflow": OverflowPolicy,
    "nan": NanPolicy,
    "negative": NegativePolicy,
    "zero": ZeroPolicy,
    "nbits": _resolve_nbits,
}


def _resolve_profile(name: str) -> object:
    """``scheme/profile`` (``--scheme S --profile P`` of ``fpspec quantize``)."""
    scheme, sep, profile = name.partition("/")
    if not sep:
        raise ValueError(f"a profile is named scheme/profile, got {name!r}")
    schemes = importlib.import_module("fpspec.schemes")
    return schemes.get_profile(scheme, profile)


def _resolve_scheme(name: str) -> object:
    schemes = importlib.import_module("fpspec.schemes")
    if name not in schemes.SCHEMES:
        raise ValueError(f"unknown scheme {name!r}")
    return name


def _resolve_zero_scale_rule(name: str) -> bool:
    """``on``/``off`` of ``fpspec quantize --zero-scale-rule`` (``zero_scale_rule=`` in the API)."""
    import inspect

    quantize = importlib.import_module("fpspec.quantization").quantize
    if "zero_scale_rule" not in inspect.signature(quantize).parameters:
        raise ValueError("fpspec.quantization.quantize has no zero_scale_rule parameter")
    if name not in ("on", "off"):
        raise ValueError(f"zero-scale-rule is on or off, got {name!r}")
    return name == "on"


def _resolve_sr_eval(name: str) -> object:
    """``sr_eval=`` of :func:`fpspec.quantization.quantize` (the seed-fp32 profile)."""
    return importlib.import_module("fpspec.schemes").SrEvaluation(name)


def _resolve_rht_output(name: str) -> object:
    """``rht_output=`` of :func:`fpspec.quantization.quantize`."""
    return importlib.import_module("fpspec.schemes").RhtOutput(name)


def _resolve_preset(name: str) -> object:
    """A GEMM preset (``fpspec gemm --model NAME``)."""
    return importlib.import_module("fpspec.presets").PRESETS[name]


SELECTOR_KINDS.update({
    "scheme": _resolve_scheme,
    "profile": _resolve_profile,
    "zero-scale-rule": _resolve_zero_scale_rule,
    "sr-eval": _resolve_sr_eval,
    "rht-output": _resolve_rht_output,
    "preset": _resolve_preset,
})


def register_selector_kind(kind: str, resolver: Callable[[str], object]) -> None:
    """Let a module make further names resolvable here."""
    SELECTOR_KINDS[kind] = resolver


def resolve(selector: Selector) -> object:
    """The object a selector names; ValueError/KeyError when the name does not exist."""
    try:
        resolver = SELECTOR_KINDS[selector.kind]
    except KeyError:
        raise ValueError(f"unknown selector kind {selector.kind!r} (in {selector})") from None
    return resolver(selector.name)


DISAGREEMENTS: tuple[Disagreement, ...] = (
    Disagreement(
        "ue5m3-max", "Which UE5M3: max finite 61440 or 114688",
        (
            Behaviour("seed paper", "exponent field 31 reserved: max 1.875*2^15 = 61440 (0xF7)",
                      _sel("format=ue5m3")),
            Behaviour("LLVM APFloat Float8E5M3FNU, PTX ISA 13.4, CUTLASS",
                      "FN style, only 0xFF is NaN: max 1.75*2^16 = 114688 (0xFE)",
                      _sel("format=ue5m3fnu")),
        ),
        "Both exist under distinct names; 'ue5m3' is the seed paper's because the project "
        "reproduces that recipe.", ("FPS-FMT-6",)),
    Disagreement(
        "ue5m3-specials", "What UE5M3 codes 0xF8..0xFF decode to",
        (
            Behaviour("seed paper", "reserved for specials, Inf/NaN never assigned; the encoder "
                      "saturates and never emits them", _sel("format=ue5m3"),
                      "fpspec decodes all eight as NaN and writes 0xFF for NaN"),
            Behaviour("LLVM APFloat Float8E5M3FNU", "0xF8..0xFE are finite (up to 114688), 0xFF NaN",
                      _sel("format=ue5m3fnu")),
        ),
        "ue5m3 decodes 0xF8..0xFF as NaN: an unassigned code must not become a magnitude.",
        ("FPS-FMT-6",)),
    Disagreement(
        "nan-into-e2m1", "What a NaN input becomes in E2M1 (which has no NaN)",
        (
            Behaviour("ml_dtypes float4_e2m1fn", "a zero code with the sign flipped (+NaN -> 0x8, -NaN -> 0x0)",
                      _sel("format=e2m1, nan=flipped-zero"),
                      "its quiet_NaN() is the -0 code, negated for a negative NaN"),
            Behaviour("TE NVFP4 round-to-nearest reference", "code 0 (+0)", _sel("nan=zero")),
            Behaviour("TE stochastic-rounding fallback", "+6 (code 0x7)", _sel("nan=max")),
        ),
        "refuse with an error naming the first NaN: E2M1 has no NaN code and sources disagree, "
        "so a silent choice would hide a bug.", ("FPS-RND-10",), default_selects=_sel("nan=error")),
    Disagreement(
        "signed-zero", "Whether -0.0 keeps its sign in E2M1",
        (
            Behaviour("TE NVFP4 Python reference (cast_to_fp4x2)", "a scaled -0.0 -> code 0 (+0): its ladder "
                      "tests x >= 0.0 for code 0 and x < -0.0 for code 8", _sel("profile=nvfp4/te-fp32"),
                      "in block quantization"),
            Behaviour("TE CUDA kernels (util/ptx_arch_spec.cuh mul_cvt_fp32_to_fp4_4x: cvt.rn.satfinite."
                      "e2m1x2.f32; the SR fallback's copysignf)", "-0.0 -> code 0x8 (-0): the conversion "
                      "copies the sign bit", _sel("profile=nvfp4/te-kernel, format=e2m1")),
            Behaviour("seed portable reference (formats.py)", "-0.0 -> code 0x8",
                      _sel("profile=ue5m3/seed-portable, profile=ue5m3/seed-fp32")),
            Behaviour("seed Triton kernel (_rounding.py round_e2m1: is_negative = value < 0.0)",
                      "-0.0 -> +0 (code 0); a negative value that rounds to zero -> -0", _sel("profile=ue5m3/seed-triton"),
                      "the kernel writes dequantized values (+0.0 for -0.0); the codes are the ones they imply"),
            Behaviour("torchao 0.18 (f32_to_f4_unpacked copies the sign bit)", "-0.0 -> code 0x8",
                      _sel("profile=nvfp4/torchao-0.18, profile=mxfp4/torchao-0.18-floor")),
            Behaviour("microxcaling (_quantize_elemwise_core: torch.sign(-0.0) = 0)",
                      "-0.0 -> +0, and so does a negative x whose binary32 quotient x / 2^e underflows to -0.0; "
                      "a negative nonzero quotient that rounds to zero -> code 0x8", _sel("profile=mxfp4/microxcaling")),
        ),
        "The element conversion keeps the sign of zero (code 0x8), as IEEE 754 conversions do; "
        "block profiles follow their source (FPS-BLK-11).", ("FPS-BLK-11",)),
    Disagreement(
        "double-rounding", "Rounding a float64 input: once, or through float32",
        (
            Behaviour("ml_dtypes before 0.7, astype from float64", "narrows to float32 first (2.5+2^-30 -> 2.0)",
                      (), "reproduce by casting the input to float32 before encoding"),
            Behaviour("ml_dtypes 0.7 astype from float64 (measured on 0.7.0)", "one rounding (2.5+2^-30 -> 3.0)",
                      _sel("rounding=rne")),
        ),
        "round the exact input value once (2.5+2^-30 -> 3.0), in every mode.", ("FPS-RND-0",)),
    Disagreement(
        "e4m3-overflow", "E4M3 overflow: NaN or saturation",
        (
            Behaviour("ml_dtypes; torch 2.11 casts (CPU and CUDA alike)",
                      "past the rounding boundary (above 464) and +-Inf -> NaN (0x7F/0xFF)",
                      _sel("format=e4m3, overflow=nonfinite")),
            Behaviour("torch >= 2.12 casts (pytorch#178817; measured on 2.13 CPU)",
                      "saturate: above 464 and +-Inf -> +-448 (0x7E/0xFE)", _sel("format=e4m3, overflow=sat")),
            Behaviour("TE NVFP4 block scale", "min(., 448) before conversion: saturation",
                      _sel("format=ue4m3, overflow=sat")),
        ),
        "e4m3: nonfinite (what the casts do); ue4m3, the scale format: sat (its use).", ("FPS-RND-9",)),
    Disagreement(
        "e8m0-zero-negative", "E8M0 of zero or of a negative value",
        (
            Behaviour("ml_dtypes float8_e8m0fnu", "0.0 -> 0xFF (NaN); negative -> NaN",
                      _sel("format=ue8m0, zero=nan, negative=nan")),
            Behaviour("torch float8_e8m0fnu casts (2.11, 2.13)", "0.0 -> 0x00 (2^-127); a negative x -> the code of |x|",
                      _sel("format=ue8m0, zero=min, negative=abs")),
            Behaviour("fpspec option", "0.0 -> the smallest code 2^-127", _sel("format=ue8m0, zero=min")),
        ),
        "refuse both: a zero or negative scale request is a bug upstream.", ("FPS-RND-11", "FPS-RND-12"),
        default_selects=_sel("zero=error, negative=error")),
    Disagreement(
        "e8m0-ties", "Ties of E8M0 (every value a power of two): to the even code or up",
        (
            Behaviour("ml_dtypes and torch float8_e8m0fnu", "every tie 1.5*2^e goes up (3.0 -> 4.0): the "
                      "significand 1 is odd", _sel("format=ue8m0, rounding=rne-bits, rounding=rna")),
            Behaviour("fpspec rne", "the tie goes to the even code (3.0 -> 2.0, code 0x80)", _sel("format=ue8m0, rounding=rne")),
        ),
        "rne, as for every other format; rna reproduces ml_dtypes 0.7, rne-bits (or rna, away from 2^-127) "
        "earlier ml_dtypes and torch.",
        ("FPS-RND-1", "FPS-RND-13", "FPS-RND-15"),
        default_selects=_sel("rounding=rne")),
    Disagreement(
        "e5m2-nan-code", "Which NaN code E5M2 writes",
        (
            Behaviour("ml_dtypes float8_e5m2", "0x7E / 0xFE, the IEEE quiet NaN", _sel("format=e5m2, nan=quiet")),
            Behaviour("torch float8_e5m2 casts", "0x7F / 0xFF", _sel("format=e5m2, nan=nan")),
            Behaviour("fpspec", "the canonical all-ones magnitude 0x7F / 0xFF, sign copied", _sel("format=e5m2, nan=nan")),
        ),
        "0x7F / 0xFF.", ("FPS-RND-10", "FPS-RND-13")),
    Disagreement(
        "e8m0-f32-subnormal", "E8M0 of float32 subnormals just above 2^-127",
        (
            Behaviour("ml_dtypes before 0.7 and torch float8_e8m0fnu", "bits 0x400001..0x5FFFFF (below the "
                      "midpoint) go up to 2^-126", _sel("format=ue8m0, rounding=rne-bits"),
                      "both round binary32 bits as if E8M0 had a subnormal binade [0, 2^-126) whose midpoint is "
                      "2^-127"),
            Behaviour("ml_dtypes 0.7 float8_e8m0fnu (measured on 0.7.0)", "2^-127 (code 0x00), by value",
                      _sel("format=ue8m0, rounding=rna")),
            Behaviour("fpspec rne and rna", "2^-127 (code 0x00)", _sel("format=ue8m0, rounding=rne")),
        ),
        "2^-127 under rne and rna: the exact value is nearer; rne-bits reproduces the bit-level casts.",
        ("FPS-RND-13", "FPS-RND-15")),
    Disagreement(
        "sr-variant", "Which stochastic rounding rule, with how many random bits",
        (
            Behaviour("seed paper", "one byte r per element; away from zero iff delta + (2r+1)/512 >= 1",
                      _sel("rounding=sr-midpoint, nbits=8")),
            Behaviour("seed code (formats.py and the Triton kernel's _rounding.py)",
                      "the same rule evaluated in FP32: up iff fp32(delta + (2r+1) 2^-9) >= 1, which also "
                      "rounds up when the exact sum lies in [1 - 2^-25, 1)",
                      _sel("profile=ue5m3/seed-fp32, rounding=sr-midpoint, nbits=8, sr-eval=fp32")),
            Behaviour("seed Triton kernel (_rounding.py: exponent = floor(tl.log2(a)))",
                      "the FP32 evaluation, with the binade taken from the GPU's log2",
                      _sel("profile=ue5m3/seed-triton, rounding=sr-midpoint, nbits=8, sr-eval=fp32"),
                      "measured on an H200 (vectors/provenance/h200-refs-cuda): floor(tl.log2 x) is FL(x) "
                      "(FPS-BLK-22), one above floor(log2 x) just below some powers of two, and at each such x "
                      "the seed's rounding gives the same value with either binade, so the profile's exact "
                      "binade reproduces the kernel"),
            Behaviour("TE software fallback, gfloat StochasticFastest", "add r/2^N, truncate; r = 0 is RTZ",
                      _sel("rounding=sr-add, nbits=8")),
            Behaviour("TE CUDA kernels on sm_100+ (PTX cvt.rs.satfinite.e2m1x4.f32)",
                      "hardware SR with Philox random words", (),
                      "not reproduced: the PTX ISA does not say where the random bits enter, the random words "
                      "depend on the launch geometry, and no sm_100 GPU is available; FPS-CNF-6 states when "
                      "sr-add with N = 8 is the same rule"),
            Behaviour("gfloat Stochastic (P3109)", "unbiased: P(up) = delta for delta a multiple of 2^-N",
                      _sel("rounding=sr-unbiased")),
        ),
        "sr-midpoint with N = 8 (alias 'sr'), the seed paper's rule, evaluated exactly (sr-eval=exact: the "
        "rule as the paper states it; the FP32 evaluation differs only for payload magnitudes below 1/4).",
        ("FPS-RND-5", "FPS-RND-6", "FPS-RND-7", "FPS-BLK-19", "FPS-CNF-6"),
        default_selects=_sel("rounding=sr-midpoint, nbits=8")),
    Disagreement(
        "ties", "Ties of round-to-nearest: to even or away from zero",
        (
            Behaviour("OCP MX v1.0, TE, seed, ml_dtypes", "ties to even", _sel("rounding=rne")),
            Behaviour("microxcaling 'nearest'", "ties away from zero (its binary32 floor(t + 0.5) also rounds "
                      "0.25 - 2^-26 up to 0.5)", _sel("rounding=rna, profile=mxfp4/microxcaling")),
        ),
        "ties to even.", ("FPS-RND-1", "FPS-RND-3"), default_selects=_sel("rounding=rne")),
    Disagreement(
        "zero-scale", "A block scale that rounds to zero",
        (
            Behaviour("seed paper (UE5M3 recipe)", "replaced by 1.0 after rounding (the zero-scale-to-one rule)",
                      _sel("profile=ue5m3/exact, zero-scale-rule=on")),
            Behaviour("TE NVFP4", "kept as code 0x00; every nonzero element of the block then becomes +-6",
                      _sel("profile=nvfp4/te-fp32")),
            Behaviour("UE5M3 without the rule", "code 0x00 kept, as TE does",
                      _sel("profile=ue5m3/exact, zero-scale-rule=off")),
        ),
        "Per scheme: on for ue5m3 (the seed paper), off for nvfp4 (TE)."),
    Disagreement(
        "amax-zero", "The tensor encode scale when the tensor amax (measured, or held by delayed scaling) is 0",
        (
            Behaviour("TE NVFP4 Python reference (NVFP4QuantizerRef)", "S_enc = 6*448/0 capped: FLT_MAX",
                      _sel("profile=nvfp4/te-fp32")),
            Behaviour("TE NVFP4 CUDA kernel (core_nvfp4.cuh compute_global_encode_scaling_factor_FP4)",
                      "S_enc = 1", _sel("profile=nvfp4/te-kernel")),
            Behaviour("seed kernel and portable reference", "a zero amax, measured or held, gives encode scale 1 "
                      "(where(amax == 0, 1, ...))", _sel("profile=ue5m3/seed-fp32, profile=ue5m3/exact")),
            Behaviour("torchao 0.18 (nvfp4_tensor.py: per_tensor_amax_to_scale(0) = 0, then a_B / 6 / 0)",
                      "0/0: scale bytes 0xFF (E4M3 NaN), codes 0xC, dequantized NaN",
                      _sel("profile=nvfp4/torchao-0.18"),
                      "the profile refuses a zero tensor amax with an error that says what torchao computes: a NaN "
                      "tensor is not a quantization (the level-1 torchao set leaves the all-zero case out)"),
        ),
        "Per profile, as each source does; a held amax of 0 means what a measured one means (FPS-BLK-5).",
        ("FPS-BLK-5", "FPS-SCL-10")),
    Disagreement(
        "rht-precision", "In which precision the Hadamard-transformed view is quantized",
        (
            Behaviour("TE NVFP4 Python reference (_apply_rht: x @ H in x.dtype)",
                      "the input's dtype: binary32 for float32 input, bfloat16 for bfloat16 input",
                      _sel("profile=nvfp4/te-fp32, rht-output=fp32, rht-output=bf16")),
            Behaviour("TE CUDA kernels (hadamard_transform_cast_fusion.cu: 'Downcast to BF16 for bit-wise "
                      "compatibility with unfused kernels'; the kernels take bfloat16 input)",
                      "the FP32 accumulator rounded to bfloat16 before the amax and the quantization",
                      _sel("profile=nvfp4/te-kernel, rht-output=bf16")),
        ),
        "Per profile: te-kernel rounds to bfloat16, the others keep binary32; rht_output selects either "
        "(FPS-BLK-20).", ("FPS-BLK-10", "FPS-BLK-20")),
    Disagreement(
        "e4m3-lower-clamp", "A lower clamp on NVFP4 (E4M3) block scales",
        (
            Behaviour("torchao 0.18 (CPU)", "clamps block scales at 2^-6 (E4M3_EPS) and divides in two steps, "
                      "fp32(fp32(a_B / 6) / fp32(g / 2688))", _sel("profile=nvfp4/torchao-0.18")),
            Behaviour("torchao 0.18 on CUDA", "the same steps, but torch's CUDA division by a Python scalar "
                      "multiplies by its binary32 reciprocal: a_B * fp32(1/6), g * fp32(1/2688) (measured on an "
                      "H200)", _sel("profile=nvfp4/torchao-0.18-cuda")),
            Behaviour("TE, torchao main", "no lower clamp (a tiny block gets scale 0x00)",
                      _sel("profile=nvfp4/te-fp32")),
        ),
        "No clamp (TE).", ("FPS-BLK-18",)),
    Disagreement(
        "fp32-order", "Exact real arithmetic or a fixed FP32 operation order in block scaling",
        (
            Behaviour("seed Triton kernel", "div/mul in FP32 in a fixed order (MrHuff/ue5m3-fp4, "
                      "src/ue5m3_fp4/backends/triton/quantization.py, _fake_quantize_operands_kernel)",
                      _sel("profile=ue5m3/seed-fp32")),
            Behaviour("TE NVFP4QuantizerRef", "its own FP32 sequence", _sel("profile=nvfp4/te-fp32")),
            Behaviour("the papers' formulas", "exact real arithmetic, one rounding per conversion",
                      _sel("profile=ue5m3/exact, profile=nvfp4/exact")),
        ),
        "Both kinds exist as named profiles; reassociating the FP32 steps flips exact midpoints, "
        "so neither stands in for the other.", ("FPS-BLK-2", "FPS-BLK-3")),
    Disagreement(
        "mx-scale", "How the MX (E8M0) block scale exponent is chosen",
        (
            Behaviour("OCP MX v1.0", "floor(log2 amax) - 2", _sel("profile=mxfp4/floor")),
            Behaviour("torchao 0.18 FLOOR / CEIL / EVEN (to_mx: the exponent field of the binary32 amax; EVEN "
                      "adds 2^21 to its bits first)", "floor, ceil, or the amax rounded to one mantissa bit "
                      "ties away: the same exponents as fpspec's floor, ceil, even (scale byte 0 differs: "
                      "mx-byte-zero)", _sel("profile=mxfp4/torchao-0.18-floor, profile=mxfp4/torchao-0.18-ceil, "
                                            "profile=mxfp4/torchao-0.18-even, profile=mxfp4/ceil, profile=mxfp4/even")),
            Behaviour("the exact rule of RCEIL (cuBLAS's documented rule)", "ceil(log2(amax / 6)) of the exact "
                      "quotient", _sel("profile=mxfp4/rceil")),
            Behaviour("torchao 0.18 RCEIL on CPU (_to_mx_rceil)", "ceil(torch.log2(fp32(amax / 6))): a binary32 "
                      "log2, one code too small when fp32(amax / 6) lies in (2^k, A[k]]",
                      _sel("profile=mxfp4/torchao-0.18-rceil")),
            Behaviour("microxcaling (_shared_exponents, method max)", "floor(torch.log2(amax)) - 2: one too high when "
                      "amax lies in [B[k], 2^k)", _sel("profile=mxfp4/microxcaling")),
            Behaviour("torchao 0.18 RCEIL on CUDA", "amax * fp32(1/6) (torch's CUDA division by a Python scalar) and "
                      "CUDA's log2, whose floor and ceiling are FL / CL but at four subnormal powers of two "
                      "(measured on an H200, FPS-BLK-29)", _sel("profile=mxfp4/torchao-0.18-rceil-cuda")),
        ),
        "floor(log2 amax) - 2 computed exactly (OCP); the binary32-log2 rules of torchao and microxcaling are "
        "exact too, as integer comparisons with generated tables (FPS-BLK-22).", ("FPS-BLK-12", "FPS-BLK-22"),
        default_selects=_sel("profile=mxfp4/floor")),
    Disagreement(
        "mx-byte-zero", "How an MX block whose scale byte is 0 (2^-127) quantizes",
        (
            Behaviour("OCP MX v1.0, microxcaling", "x / 2^-127; dequantized q 2^-127",
                      _sel("profile=mxfp4/floor, profile=mxfp4/microxcaling")),
            Behaviour("torchao 0.18 FLOOR / CEIL / EVEN (scale_fp32 clamped at F32_MIN_NORMAL)",
                      "x / 2^-126 (codes one binade smaller), dequantized q 2^-127",
                      _sel("profile=mxfp4/torchao-0.18-floor, profile=mxfp4/torchao-0.18-ceil, "
                           "profile=mxfp4/torchao-0.18-even")),
            Behaviour("torchao 0.18 RCEIL (reciprocal scale 1.0 for exponent 0)", "x * 1.0: every code a signed "
                      "zero (abs(x) < 2^-124 there)", _sel("profile=mxfp4/torchao-0.18-rceil")),
        ),
        "x / 2^-127, the byte's value (OCP).", ("FPS-BLK-13", "FPS-BLK-23"),
        default_selects=_sel("profile=mxfp4/floor")),
    Disagreement(
        "dequant-order", "The order of the multiplications of a dequantization",
        (
            Behaviour("seed portable reference (formats.py)", "payload * (scale * gd)",
                      _sel("profile=ue5m3/seed-portable")),
            Behaviour("seed kernel", "(payload * scale) * gd", _sel("profile=ue5m3/seed-fp32, profile=ue5m3/seed-triton")),
            Behaviour("TE", "payload * ((scale * amax) * fp32(1/2688)); TE's test helper differs by 1 ulp "
                      "on about half of the elements", _sel("profile=nvfp4/te-fp32")),
        ),
        "Per profile; exact profiles round the exact product once.", ("FPS-BLK-14", "FPS-BLK-25")),
    Disagreement(
        "nibble-order", "Which of two E2M1 codes sharing a byte is the low nibble",
        (
            Behaviour("TE NVFP4", "the even column in the low nibble", (),
                      "a storage layout, not arithmetic: fpspec's comparison tools for TE and torchao unpack it, "
                      "even column from the low nibble"),
            Behaviour("fpspec arrays and vector packs", "one code per uint8, in the low nibble; no packing", (),
                      "fpspec's own layout (FPS-VEC-11)"),
        ),
        "fpspec files hold one code per byte; a packed layout must name its nibble order.", ("FPS-VEC-11",)),
    Disagreement(
        "gemm-group", "How a GEMM forms and accumulates its group partials",
        (
            Behaviour("seed paper's probe-matched model", "exact sum of 64 products, RNE to FP32, RZ across groups",
                      _sel("preset=seed-probe-matched")),
            Behaviour("seed Triton GEMM (backends/triton/gemm.py, issue_rz_bf16_gemm)",
                      "per 64 products a tl.dot of BF16 operands on the tensor cores from a zero accumulator, "
                      "added to the running sum with add.rz.f32: on an H200 the Hopper tensor-core chain with "
                      "an RZ promotion every 64 products, every output reproduced "
                      "(vectors/provenance/h200-refs-cuda)",
                      _sel("preset=seed-triton-h200, preset=seed-triton-h200-snap")),
            Behaviour("seed CPU oracle (reproduce/diagnostics/numerics.py, accumulate_issue_terms)",
                      "each 64-product partial is torch's float32 sum(dim=2); partials added with RN, or with an RZ "
                      "emulated by comparing with an FP64 sum", (),
                      "not reproduced: the partial's rounding order is ATen's vectorised cascade sum, which depends "
                      "on the vector width of the CPU kernel torch dispatches to (AVX2 or AVX-512) and on torch's "
                      "version, not on the seed; and the emulated RZ is not an RZ when the FP64 sum itself rounds "
                      "(addends more than 29 binades apart)"),
            Behaviour("Khattak & Mikaitis tensor-core models", "aligned, truncated fused blocks of G products, RZ",
                      _sel("preset=km-h100-fp8, preset=km-b200-fp8, preset=km-h100-bf16, "
                           "preset=km-a100-bf16, preset=km-v100-fp16")),
            Behaviour("cuBLAS FP8 on H100/H200, use_fast_accum=False", "as km-h100-fp8, promoted to FP32 every 128",
                      _sel("preset=km-h100-fp8-promote128")),
            Behaviour("decoded-operand model", "decode to FP32, ordinary FP32 GEMM", _sel("preset=decoded-fp32")),
        ),
        "A parametrised family with named presets.", ("FPS-GEMM-1", "FPS-GEMM-3")),
    Disagreement(
        "snap", "The output snap to a 1/1024 lattice",
        (
            Behaviour("seed paper", "round(1024 c)/1024, ties to even", _sel("preset=seed-probe-matched")),
            Behaviour("seed paper (fits equally)", "no snap (or 1/2048, 1/4096: not uniquely identified)",
                      _sel("preset=seed-probe-matched-nosnap")),
        ),
        "A named GEMM parameter (snap_bits).", ("FPS-GEMM-7",)),
    Disagreement(
        "blackwell-nvfp4-gemm", "How a Blackwell NVFP4 GEMM accumulates: the seed's probe-matched model or the "
        "tcgen05.mma kind::mxf4nvf4 instruction",
        (
            Behaviour("seed paper's probe-matched model (fitted on tensor-scaled, narrow-range data)",
                      "each 64-product group summed exactly and rounded RNE to FP32, RZ across groups, the "
                      "output snapped to 1/1024.  Worked inputs (K = 64, UE4M3 block-16 scales, no tensor "
                      "scale): a0 = b0 = 0.5 with scale 2^-6, the rest 0 -> 0 (the snap; the instruction gives "
                      "2^-14); a0 = b0 = 6 with scale 448 and a16 = 1.5, b16 = 0.5 with scale 1 -> 7225345 "
                      "(the group RNE of 7225344.75; the instruction gives 7225344.5)",
                      _sel("preset=seed-probe-matched"),
                      "on MMA-Sim's NVFP4 reference set (vectors/provenance/mmasim, K = 256) it agrees with "
                      "tcgen05.mma on 55.2% of outputs; without the snap 82.9%; c = RZ(c + exact 64-sum) "
                      "(seed-probe-matched with snap_bits=none, group_rounding=none) on 99.6%, missing only "
                      "outputs fed by all-zero blocks under the largest scales or extreme scale steps, where "
                      "the instruction's F = 35 window aligned by the scale exponents cuts"),
            Behaviour("MMA-Sim tcgen05.mma kind::mxf4nvf4 (Xie et al., arXiv 2511.10909; checked against the GPU "
                      "by its authors)", "16-product sub-block sums times both scales, aligned by the scale "
                      "exponents, fused with C in a 35-bit window, truncated, RZ to FP32 per instruction",
                      _sel("preset=sm100-mxf4nvf4, preset=sm120-mxf4nvf4")),
        ),
        "Both are presets: seed-probe-matched reproduces the seed paper's reported numbers (use it to compare "
        "with the paper); sm100-mxf4nvf4 reproduces the instruction bit for bit (use it to validate an NVFP4 "
        "kernel or emulator; a kernel's tensor scale alpha is its own epilogue).", ("FPS-GEMM-21",)),
)
