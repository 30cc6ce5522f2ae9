"""GEMM accumulation models: one parametrised family and its named presets (docs/gemm.rst, FPS-GEMM-*).

A :class:`GemmModel` is data only: every choice a low-precision dot product makes
between the exact products and the FP32 (or BF16) output, named.  The executable
spec that gives the parameters their meaning is :mod:`fpspec.exact.accumulate`;
:mod:`fpspec.fast.accumulate` is its bit-equal Numba twin.

One output element ``y[m, n]`` of ``A (M x K) @ BT (N x K)^T`` is computed as
(FPS-GEMM-1; the step numbers are used throughout the docs and the code):

1. **Terms.**  With ``scale_placement="product"`` every product ``a_k * b_k`` of two
   operand values is a term (K terms); with ``"block"`` the exact sum of the
   payload products of one scale block, times the two block scales, is one term
   (K/B terms).  ``operand_domain`` says what an operand value is: the encoded
   value (payload x block scale, the tensor scale left out, applied as alpha in
   step 7), its FP32 rounding with the tensor decode scale folded in, or the exact
   dequantized value.
2. **Groups.**  The terms are taken in order of k in groups of ``group_size``
   products (None: all K in one group).
3. **Alignment window.**  Inside a group, every nonzero term (and the running
   accumulator ``c`` when ``fused``) has an alignment exponent: for a product,
   ``ea + eb`` (``product_exponent="operands"``, the unnormalised product of
   Khattak & Mikaitis) or ``floor(log2|p|)`` (``"exact"``); for ``c``, its FP32
   exponent ``max(floor(log2|c|), -126)``.  With E the largest of these (raised
   to ``align_exponent_floor`` if given), each term keeps only its multiples of
   ``2^(E - window_bits)``: ``below_window="truncate"`` truncates the magnitude
   (toward zero), ``"floor"`` truncates the two's-complement value (toward -inf),
   ``"exact"`` keeps every bit (then ``window_bits`` must be None).
4. **Group sum.**  The kept terms are summed exactly.
   *Fused* (``fused=True``): ``c`` took part in step 3 and the exact sum is rounded
   once with ``accumulate_rounding`` to ``accumulate_bits`` fraction bits:
   ``c <- round(c' + sum)``.
   *Not fused*: the group's sum is rounded to FP32 with ``group_rounding``
   (``"none"`` keeps it exact) giving ``p``, then ``c <- round_acc(c + p)``.
   ``round_acc`` keeps ``accumulate_bits`` fraction bits (23: FP32) in FP32's
   exponent range (quantum ``2^(max(e, -126) - accumulate_bits)``, overflow as
   FP32: Inf under RNE, the largest such value below 2^128 under RTZ) (FPS-GEMM-13).
5. **Promotion.**  With ``promotion_interval = N_C``, after every N_C products
   (and at the end of K) the partial ``c`` is added into a separate FP32
   accumulator ``C <- round_promo(C + c)`` and ``c`` restarts at 0; the output of
   the chain is then ``C``, else ``c``.  **Split K:** with ``split_k = S``, K is
   cut into contiguous slices of S products (the last may be shorter); steps 2-5
   run on each slice as its own chain (groups and promotion counted from the slice
   start), and the slice results ``r_0, r_1, ...`` are added in order with FP32
   RNE: ``y <- RNE32(...RNE32(r_0 + r_1) ... + r_last)`` (FPS-GEMM-14).
6. **Snap.**  With ``snap_bits = L``: ``y <- round_half_even(y * 2^L) / 2^L``.
7. **Alpha.**  ``y <- alpha * y`` (for quantized operands only): alpha from the
   amaxes and targets, ``amax_a amax_b / ((6 T_a)(6 T_b))``, or from the
   per-operand FP32 decode scales ``d_a d_b``; ``alpha_rounding`` says how it is
   rounded (``"exact"``: never, y = RNE32(alpha y); ``"once"``: alpha =
   RNE32(alpha exact); ``"twice"``: each operand factor rounded to FP32, then
   their product; ``"fp32-divide"`` / ``"fp32-reciprocal"``: the seed's binary32
   order, RNE32(amax_a amax_b) divided by, or multiplied with the FP32 reciprocal
   of, the binary64 denominator rounded to FP32).
8. **Output.**  ``"fp32"`` as is, or ``"bf16"``: RNE to BF16 (returned as the
   float32 of that BF16 value).

Special values (FPS-GEMM-2): a NaN operand or 0 x Inf makes that output NaN;
Inf terms propagate (Inf - Inf is NaN); an FP32 rounding that overflows gives
Inf under RNE and max finite under RTZ.  A zero inside the chain (steps 1-5) is +0;
steps 6-8 keep IEEE signs (a negative value that snaps, scales or converts to zero
gives -0).

The presets and their sources are :data:`PRESETS`; ``fpspec models`` lists them.
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from dataclasses import dataclass
from typing import Any, Literal, Mapping

from .errors import FpspecError

__all__ = [
    "GemmModel",
    "Preset",
    "Backing",
    "BACKING_KINDS",
    "PRESETS",
    "CHOICE_ALIASES",
    "PARAMETER_ALIASES",
    "PARAMETER_HELP",
    "get_model",
    "parse_overrides",
    "preset_names",
    "presets_json",
]

Rounding = Literal["rne", "rtz"]
GroupRounding = Literal["rne", "rtz", "none"]
BelowWindow = Literal["truncate", "floor", "exact"]
ProductExponent = Literal["operands", "exact"]
ScalePlacement = Literal["product", "block"]
OperandDomain = Literal["encoded", "decoded-fp32", "decoded-exact"]
AlphaSource = Literal["amax", "decode-scales", "none"]
AlphaRounding = Literal["exact", "once", "twice", "fp32-divide", "fp32-reciprocal"]
OutputFormat = Literal["fp32", "bf16"]

_CHOICES: dict[str, tuple[str, ...]] = {
    "below_window": ("truncate", "floor", "exact"),
    "product_exponent": ("operands", "exact"),
    "group_rounding": ("rne", "rtz", "none"),
    "accumulate_rounding": ("rne", "rtz"),
    "promotion_rounding": ("rne", "rtz"),
    "scale_placement": ("product", "block"),
    "operand_domain": ("encoded", "decoded-fp32", "decoded-exact"),
    "alpha_source": ("amax", "decode-scales", "none"),
    "alpha_rounding": ("exact", "once", "twice", "fp32-divide", "fp32-reciprocal"),
    "output_format": ("fp32", "bf16"),
}

#: Other spellings accepted for a choice, and the canonical value they stand for:
#: ``rz`` is the GEMM models' former name of round toward zero, ``rtz`` in
#: :class:`fpspec.choices.RoundingMode` and everywhere else.
CHOICE_ALIASES: dict[str, str] = {"rz": "rtz"}
_ALIASED_FIELDS = ("group_rounding", "accumulate_rounding", "promotion_rounding")

#: Bound of ``align_exponent_floor``: far beyond the alignment exponent of any term or
#: FP32 accumulator (every one lies within -600..600), and keeps exponents machine integers.
ALIGN_EXPONENT_FLOOR_BOUND = 2000

#: One line per parameter (``fpspec models`` and docs/gemm.rst print these).
PARAMETER_HELP: dict[str, str] = {
    "group_size": "G: products per group (fused block); None = all of K in one group",
    "window_bits": "F = 23 + neab: fraction bits kept below the group's alignment exponent; None = no window",
    "below_window": "bits of a term below the window: truncate (magnitude, toward 0), floor (toward -inf), exact",
    "product_exponent": "alignment exponent of a product: operands (ea+eb, unnormalised) or exact floor(log2|p|)",
    "align_exponent_floor": "lower bound of the group's alignment exponent E (Khattak-Mikaitis min_exp_limit); None = none",
    "fused": "the running accumulator takes part in the group's alignment and rounding (block FMA)",
    "group_rounding": "rounding of a non-fused group's sum to FP32 before it is added: rne, rtz, none (exact)",
    "accumulate_rounding": "rounding of the running FP32 accumulator update (fused block, or c + p): rtz, rne",
    "promotion_interval": "N_C: products after which the partial is added into a separate FP32 accumulator; None = never",
    "promotion_rounding": "rounding of the promotion addition C + c: rne, rtz",
    "scale_placement": "block scales folded into each product (product) or applied to each scale block's exact sum (block)",
    "operand_domain": "operand values: encoded (payload x block scale; alpha later), decoded-fp32, decoded-exact",
    "snap_bits": "L: snap the accumulated value to the lattice 2^-L with ties to even; None = no snap",
    "alpha_source": "tensor-scale factor alpha: amax (amax_a amax_b / (6T_a 6T_b)), decode-scales (d_a d_b), none",
    "alpha_rounding": "how alpha is formed in FP32 before y = RNE32(alpha y): exact (never rounded), once, "
                      "twice, fp32-divide, fp32-reciprocal (the seed's binary32 order)",
    "output_format": "output conversion: fp32, or bf16 (RNE)",
    "require_full_groups": "K must be a multiple of group_size (whole hardware blocks); else FpspecError",
    "accumulate_bits": "fraction bits the running accumulator / fused block result keeps (0..23, in FP32's "
                       "exponent range), rounded with accumulate_rounding; 23 = FP32",
    "split_k": "S: K cut into slices of S products, each its own chain, slice results added in order "
               "with FP32 RNE (a library's split-K); None = one chain",
}

#: Short names accepted by :func:`get_model` / ``--set`` (``neab`` sets window_bits = 23 + neab).
PARAMETER_ALIASES: dict[str, str] = {
    "G": "group_size",
    "F": "window_bits",
    "N_C": "promotion_interval",
    "NC": "promotion_interval",
    "L": "snap_bits",
    "S": "split_k",
}


@dataclass(frozen=True)
class GemmModel:
    """Parameters of one accumulation model (FPS-GEMM-1).  See the module docstring for
    the meaning of each step; :data:`PARAMETER_HELP` has one line per field.

    Instances are validated on construction (FpspecError names the bad field); use
    :meth:`replace` (validated) to derive variants.
    """

    group_size: int | None = 64
    window_bits: int | None = None
    below_window: BelowWindow = "exact"
    product_exponent: ProductExponent = "exact"
    align_exponent_floor: int | None = None
    fused: bool = False
    group_rounding: GroupRounding = "rne"
    accumulate_rounding: Rounding = "rtz"
    promotion_interval: int | None = None
    promotion_rounding: Rounding = "rne"
    scale_placement: ScalePlacement = "product"
    operand_domain: OperandDomain = "encoded"
    snap_bits: int | None = None
    alpha_source: AlphaSource = "amax"
    alpha_rounding: AlphaRounding = "once"
    output_format: OutputFormat = "fp32"
    require_full_groups: bool = False
    accumulate_bits: int = 23
    split_k: int | None = None

    def __post_init__(self) -> None:
        def bad(name: str, why: str) -> FpspecError:
            return FpspecError(f"GEMM model parameter {name}={getattr(self, name)!r}: {why}")

        for name in _ALIASED_FIELDS:
            v = getattr(self, name)
            if isinstance(v, str) and v in CHOICE_ALIASES:
                object.__setattr__(self, name, CHOICE_ALIASES[v])
        for name, choices in _CHOICES.items():
            if getattr(self, name) not in choices:
                raise bad(name, f"must be one of {', '.join(choices)}")
        for name in ("fused", "require_full_groups"):
            if not isinstance(getattr(self, name), bool):
                raise bad(name, "must be true or false")
        for name in ("group_size", "promotion_interval", "split_k", "window_bits", "snap_bits",
                     "align_exponent_floor", "accumulate_bits"):
            v = getattr(self, name)
            if v is None and name != "accumulate_bits":
                continue
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise bad(name, "must be an integer" + ("" if name == "accumulate_bits" else " or None"))
            object.__setattr__(self, name, int(v))  # numpy integers are accepted, stored as int
        for name in ("group_size", "promotion_interval", "split_k"):
            v = getattr(self, name)
            if v is not None and v < 1:
                raise bad(name, "must be a positive integer or None")
        if self.window_bits is not None and not -60 <= self.window_bits <= 200:
            raise bad("window_bits", "must lie in -60..200")
        if self.snap_bits is not None and not -126 <= self.snap_bits <= 149:
            raise bad("snap_bits", "must lie in -126..149")
        if (self.align_exponent_floor is not None
                and abs(self.align_exponent_floor) > ALIGN_EXPONENT_FLOOR_BOUND):
            raise bad("align_exponent_floor", f"must lie in -{ALIGN_EXPONENT_FLOOR_BOUND}.."
                                              f"{ALIGN_EXPONENT_FLOOR_BOUND}")
        if not 0 <= self.accumulate_bits <= 23:
            raise bad("accumulate_bits", "must be an integer in 0..23 (the accumulator is an FP32 value)")
        if self.split_k is not None and self.group_size is not None and self.split_k % self.group_size:
            raise bad("split_k", f"must be a multiple of group_size={self.group_size} (slices hold whole groups)")
        if (self.window_bits is None) != (self.below_window == "exact"):
            raise bad("below_window", "is 'exact' exactly when window_bits is None")
        if self.fused and self.group_rounding != "none":
            raise bad("group_rounding", "must be 'none' for a fused model (the block is rounded once "
                                        "with accumulate_rounding)")
        if self.promotion_interval is not None:
            if self.group_size is None:
                raise bad("promotion_interval", "needs a group_size")
            if self.promotion_interval % self.group_size:
                raise bad("promotion_interval", f"must be a multiple of group_size={self.group_size}")

    # -------------------------------------------------------------- helpers
    @property
    def neab(self) -> int | None:
        """Khattak & Mikaitis' extra alignment bits: window_bits - 23 (None without a window)."""
        return None if self.window_bits is None else self.window_bits - 23

    def replace(self, **overrides: Any) -> "GemmModel":
        """A validated copy with some parameters changed (aliases of PARAMETER_ALIASES and
        ``neab`` accepted)."""
        canon = _canonical_overrides(overrides)
        if canon.get("fused") is True and "group_rounding" not in canon:
            canon["group_rounding"] = "none"  # a fused block has no separate group rounding
        return dataclasses.replace(self, **canon)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GemmModel":
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise FpspecError(f"unknown GEMM model parameter(s) {sorted(unknown)}")
        return cls(**d)

    def check_k(self, k: int) -> None:
        """FpspecError when ``require_full_groups`` and K does not fill whole groups
        (a last partial promotion interval is always allowed: it is promoted at the end)."""
        if not self.require_full_groups:
            return
        if self.group_size is not None and k % self.group_size:
            raise FpspecError(f"K={k} is not a multiple of group_size={self.group_size} "
                              f"(this model has require_full_groups=true)")


def _canonical_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    fields = {f.name for f in dataclasses.fields(GemmModel)}
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if key == "neab":
            if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
                raise FpspecError(f"GEMM model parameter neab={value!r}: must be an integer or None")
            out["window_bits"] = None if value is None else 23 + int(value)
            continue
        name = PARAMETER_ALIASES.get(key, key)
        if name not in fields:
            raise FpspecError(f"unknown GEMM model parameter {key!r}; known: {', '.join(sorted(fields))} "
                              f"(aliases: {', '.join(sorted(PARAMETER_ALIASES))}, neab)")
        out[name] = value
    # Keep window_bits and below_window consistent when only one of them is changed.
    if "window_bits" in out and "below_window" not in out:
        out["below_window"] = "exact" if out["window_bits"] is None else "truncate"
    return out


#: What a preset's numbers rest on (:class:`Backing`): ``measured`` (fpspec's own
#: bit-exact comparison with a real GPU), ``hardware-validated-model`` (a public model
#: that its authors checked bitwise against the hardware, e.g. MMA-Sim), ``paper`` (taken
#: from a publication; fpspec has not measured it), ``fpspec-choice`` (a reference or
#: convention fpspec defines).
BACKING_KINDS = ("measured", "hardware-validated-model", "paper", "fpspec-choice")
BackingKind = Literal["measured", "hardware-validated-model", "paper", "fpspec-choice"]


@dataclass(frozen=True)
class Backing:
    """A preset's provenance as data (``fpspec models --json``; the docs' table of what
    each model is backed by).  ``measured`` names the ``device``, the number of FP32
    ``outputs`` compared bit for bit and the (M, N, K) ``shapes``; ``reference`` says
    where the evidence is written down."""

    kind: BackingKind
    detail: str
    reference: str
    device: str | None = None
    outputs: int | None = None
    shapes: tuple[tuple[int, int, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in BACKING_KINDS:
            raise FpspecError(f"preset backing kind {self.kind!r}: must be one of {', '.join(BACKING_KINDS)}")
        measured = self.device is not None and bool(self.outputs) and bool(self.shapes)
        if measured != (self.kind == "measured"):
            raise FpspecError(f"preset backing {self.kind!r}: device, outputs and shapes are given exactly "
                              "for a measured preset")

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["shapes"] = [list(x) for x in self.shapes]
        return d


@dataclass(frozen=True)
class Preset:
    """A named model with its provenance (printed by ``fpspec models`` and docs/gemm.rst):
    ``source`` cites, ``backing`` classifies the evidence."""

    name: str
    model: GemmModel
    summary: str
    source: str
    backing: Backing


_FP32_SEQ = GemmModel(group_size=1, fused=False, group_rounding="rne", accumulate_rounding="rne",
                      operand_domain="decoded-fp32", alpha_source="none", snap_bits=None)


def km_accumulate_bits(neab: int) -> int:
    """Kept fraction bits of a Khattak-Mikaitis block result for FP32 output: 23 + neab
    when neab < 0, else 23 (their GEMM.m narrows the output significand by neab only
    when neab is negative) (FPS-GEMM-15)."""
    return min(23, 23 + neab)


def _km(g: int, window: int) -> GemmModel:
    return GemmModel(group_size=g, window_bits=window, below_window="truncate",
                     product_exponent="operands", fused=True, group_rounding="none",
                     accumulate_rounding="rtz", operand_domain="encoded", alpha_source="decode-scales",
                     alpha_rounding="once", require_full_groups=True,
                     accumulate_bits=km_accumulate_bits(window - 23))


#: The seed's alpha: (amax_a * amax_b).to(float32) / ((T_a * 6.0) * (T_b * 6.0)) in
#: MrHuff/ue5m3-fp4 (_encoded_global_alpha, backends/triton/quantization.py), evaluated by
#: torch on CUDA, which divides a tensor by a Python float as a product with the FP32
#: reciprocal (aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu): fp32-reciprocal.
_SEED = GemmModel(group_size=64, window_bits=None, below_window="exact", fused=False,
                  group_rounding="rne", accumulate_rounding="rtz", scale_placement="product",
                  operand_domain="encoded", snap_bits=10, alpha_source="amax", alpha_rounding="fp32-reciprocal")

_KM_SRC = ("Khattak & Mikaitis, 'Accurate Models of NVIDIA Tensor Cores' (arXiv 2512.07004), "
           "block-FMA model; code north-numerical-computing/MATLAB-tensor-core")

#: The acceptance shapes (M, N, K) of the H200 probe runs (docs/probe-h200.rst; the
#: probe's DEFAULT_SHAPES), 114,688 sampled FP32 outputs per target.
_H200_SHAPES = ((64, 64, 256), (64, 64, 1024), (64, 64, 4096), (64, 64, 16384), (256, 256, 2048),
                (1024, 1024, 1024), (4096, 4096, 256), (2048, 2048, 8192), (128, 4096, 16384),
                (4096, 128, 4096), (512, 512, 16384))
_H200_OUTPUTS = 114_688
_H200 = "NVIDIA H200 (cuBLAS 13.0 through torch 2.11)"
_SEED_PAPER = ("the seed paper's model, probe-matched by its authors on a Blackwell GPU (366 of 512 native "
               "matches on wide-range operands, 512 of 512 on narrow-range ones); not measured by fpspec")

#: The named presets (FPS-GEMM-3), in the order ``fpspec models`` lists them.
PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("seed-probe-matched", _SEED,
           "Seed paper's probe-matched Blackwell NVFP4 model: encoded operands, G = 64, exact group "
           "sum RNE to FP32, RTZ across groups in order, snap to 1/1024 (ties to even), then alpha "
           "in the seed's FP32 order",
           "Hu, Luschi, Balanca, arXiv 2609.02846 (UE5M3 FP4), probe-matched GEMM model; "
           "MrHuff/ue5m3-fp4 docs/numerics.md; alpha: its _encoded_global_alpha as torch evaluates it on CUDA",
           Backing("paper", _SEED_PAPER + "; alpha order read from the seed's code",
                   "arXiv 2609.02846; docs/gemm.rst")),
    Preset("seed-probe-matched-nosnap", _SEED.replace(snap_bits=None),
           "seed-probe-matched without the output lattice snap (the paper could not separate "
           "no snap, 1/1024, 1/2048, 1/4096)",
           "arXiv 2609.02846, probe-matched model, snap left out",
           Backing("paper", _SEED_PAPER + "; the paper fits no snap as well as 1/1024",
                   "arXiv 2609.02846; docs/gemm.rst")),
    Preset("decoded-fp32", _FP32_SEQ,
           "Decode operands to FP32 (tensor decode scale folded in, RNE), then a sequential "
           "FP32 dot product: each product rounded to FP32 (RNE), then added (RNE); no FMA",
           "arXiv 2609.02846 decoded-operand model (an ordinary FP32 GEMM)",
           Backing("fpspec-choice", "a sequential FP32 dot product without FMA: the seed paper's decoded-operand "
                                    "model names no order, fpspec chose this one", "docs/gemm.rst")),
    Preset("exact", GemmModel(group_size=None, fused=False, group_rounding="none",
                              accumulate_rounding="rne", operand_domain="decoded-exact",
                              alpha_source="none"),
           "Infinitely precise dot product of the exact dequantized operands, one final RNE to FP32",
           "fpspec reference (the Kulisch-accumulator / correct_rounding model of Khattak & Mikaitis)",
           Backing("fpspec-choice", "the correctly rounded dot product: fpspec's reference, no hardware",
                   "docs/gemm.rst")),
    Preset("km-h100-fp8", _km(32, 13),
           "H100/H200 FP8 tensor core: fused blocks of 32 products, 13-bit window (neab = -10), "
           "magnitude truncation, block result kept to 13 fraction bits with RTZ "
           "(= torch._scaled_mm use_fast_accum=True)",
           _KM_SRC + "; reproduced bit for bit on an NVIDIA H200 (docs/probe-h200.rst)",
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=True: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-h100-fp8-promote128", _km(32, 13).replace(promotion_interval=128, promotion_rounding="rne"),
           "km-h100-fp8 plus promotion of the partial into an FP32 accumulator (RNE add) every 128 "
           "products: cuBLAS FP8 GEMM on H100/H200 with use_fast_accum=False",
           "measured on an NVIDIA H200 with torch._scaled_mm (docs/probe-h200.rst); " + _KM_SRC,
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=False: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-b200-fp8", _km(32, 25),
           "B200 FP8 tensor core: fused blocks of 32 products, neab = 2 (25 fraction bits), RTZ",
           _KM_SRC,
           Backing("paper", "Khattak & Mikaitis' B200 FP8 parameters; not measured by fpspec", "arXiv 2512.07004")),
    Preset("km-h100-bf16", _km(16, 25),
           "H100 FP16/BF16 tensor core: fused blocks of 16 products, neab = 2, RTZ",
           _KM_SRC + "; reproduced on an H200 (cuBLAS splits K at some shapes: set split_k, docs/probe-h200.rst)",
           Backing("measured", "torch.mm with FP32 output on BF16, FP16, and BF16 with reduced-precision reduction "
                               "off: every sampled output of the three targets reproduced (split_k set where cuBLAS "
                               "splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=3 * _H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-a100-bf16", _km(8, 24),
           "A100 FP16/BF16 tensor core: fused blocks of 8 products, neab = 1, RTZ",
           _KM_SRC,
           Backing("paper", "Khattak & Mikaitis' A100 FP16/BF16 parameters; not measured by fpspec",
                   "arXiv 2512.07004")),
    Preset("km-v100-fp16", _km(4, 23),
           "V100 FP16 tensor core: fused blocks of 4 products, neab = 0, RTZ",
           _KM_SRC + "; Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021",
           Backing("paper", "Khattak & Mikaitis' V100 parameters (Fasi et al. 2021 probed a V100); not measured "
                            "by fpspec", "arXiv 2512.07004; PeerJ CS 2021")),
)}


def preset_names() -> list[str]:
    return list(PRESETS)


def get_model(model: "str | GemmModel", **overrides: Any) -> GemmModel:
    """A preset by name (or a model), with validated overrides (FPS-GEMM-3).

    Setting ``window_bits`` (or ``neab``) without ``below_window`` picks "truncate"
    for an integer and "exact" for None, the only consistent companion.
    """
    if isinstance(model, GemmModel):
        base = model
    else:
        try:
            base = PRESETS[model].model
        except KeyError:
            raise FpspecError(f"unknown GEMM model preset {model!r}; known: {', '.join(PRESETS)}") from None
    if not overrides:
        return base
    try:
        return base.replace(**overrides)
    except TypeError as exc:  # pragma: no cover - replace() names fields already
        raise FpspecError(str(exc)) from None


def _parse_value(name: str, text: str) -> Any:
    """One ``--set`` value: a choice name of the parameter (``none`` too, where it is one),
    none / null / off (None), true / false, an integer, else the text."""
    t = text.strip()
    low = t.lower()
    field = PARAMETER_ALIASES.get(name, name)
    if field in _CHOICES and (low in _CHOICES[field] or (field in _ALIASED_FIELDS and low in CHOICE_ALIASES)):
        return low
    if low in ("none", "null", "off"):
        return None
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no"):
        return False
    try:
        return int(t, 0)
    except ValueError:
        return t


def parse_overrides(items: "list[str] | tuple[str, ...] | None") -> dict[str, Any]:
    """Parse ``PARAM=VALUE`` strings (``--set``): integers, true/false, none, or a choice name."""
    out: dict[str, Any] = {}
    for item in items or ():
        if "=" not in item:
            raise FpspecError(f"--set expects PARAM=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        out[key.strip()] = _parse_value(key.strip(), value)
    return out


def presets_json() -> str:
    """JSON of every preset (``fpspec models --json``)."""
    return json.dumps({name: {"summary": p.summary, "source": p.source, "backing": p.backing.to_dict(),
                              "parameters": p.model.to_dict()}
                       for name, p in PRESETS.items()}, indent=2)
