"""The named GEMM presets as data, with their provenance (docs/gemm.rst, FPS-GEMM-3, FPS-GEMM-21).

Each :class:`Preset` is a :class:`~fpspec.models.GemmModel` with the source it cites and
the evidence it rests on (:class:`Backing`): the seed's models, Khattak & Mikaitis' tensor
cores, the references, and the instruction-level ``smXX-*`` / ``cdna3-*`` models of
docs/hardware-models.rst (:data:`PRESETS`).  The one door to a model by name, these and the
library presets (``cublas-h200-*``, whose model depends on the GEMM's shape), is
:func:`fpspec.named_models.get_model`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from .errors import FpspecError
from .models import ACCUMULATOR_FORMATS, NAN_BITS, GemmModel, unknown_preset

__all__ = [
    "Preset",
    "Backing",
    "BACKING_KINDS",
    "PRESETS",
    "INSTRUCTION_PRESETS",
    "MMASIM",
    "KM_SOURCE",
    "km_accumulate_bits",
    "preset_model",
    "with_overrides",
    "preset_names",
    "arithmetic_summary",
]

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
    #: The GPU generation an instruction-level preset models (empty for the others).
    architecture: str = ""
    #: The PTX / ISA instruction it models (empty for the others).
    instruction: str = ""
    #: A library preset's call (a :data:`fpspec.cublas.h200.TARGETS` name): the model
    #: depends on the GEMM's shape, :func:`fpspec.cublas.library.resolve` gives it (empty for
    #: the others).
    library: str = ""


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

_H200_TRITON = "NVIDIA H200 (Triton 3.6, torch 2.11, CUDA 13.0)"
#: Outputs of the committed provenance (all of 64 x 64 x 1024 twice and 96 x 200 x 640; rows 0-31 x
#: columns 0-127 of 1024 x 1024 x 512); the GPU computed every output of the four GEMMs.
_SEED_TRITON_SHAPES = ((64, 64, 1024), (96, 200, 640), (1024, 1024, 512))
_SEED_TRITON_OUTPUTS = 2 * 64 * 64 + 96 * 200 + 32 * 128

KM_SOURCE = ("Khattak & Mikaitis, 'Accurate Models of NVIDIA Tensor Cores' (arXiv 2512.07004), "
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

# ------------------------------------------------------- instruction-level presets
#: MMA-Sim, the hardware-validated reference of the instruction presets (FPS-GEMM-21).
MMASIM = ("MMA-Sim (github.com/microsoft/MMA-Sim, commit c785138); Xie, Wang, Yang, Yang, 'MMA-Sim: "
          "Bit-Accurate Reference Model of Tensor Cores and Matrix Cores', arXiv 2511.10909")
_MMASIM_DETAIL = ("MMA-Sim's model of the instruction, which its authors checked bitwise against the GPU; "
                  "fpspec reproduces every output of its MMA-Sim sets (vectors/provenance/mmasim)")
_MMASIM_REF = "vectors/provenance/mmasim; docs/hardware-models.rst"


def _nvidia(g: int, window: int, k: int, *, bits: int = 23, acc: str = "fp32", zero: str = "emin",
            **more: Any) -> GemmModel:
    """An NVIDIA tensor-core instruction as MMA-Sim models it: fused groups of G products with
    C, window F, magnitude truncation, RZ (RNE for an FP16 D), Inf on overflow, NaN
    0x7FFFFFFF (FPS-GEMM-21)."""
    return GemmModel(group_size=g, window_bits=window, below_window="truncate", product_exponent="operands",
                     fused=True, group_rounding="none", accumulate_rounding="rne" if acc == "fp16" else "rtz",
                     operand_domain="encoded", alpha_source="none", require_full_groups=True,
                     accumulate_bits=bits, instruction_k=k, zero_alignment=zero, accumulator_format=acc,
                     output_format=acc, accumulate_overflow="inf", nan_encoding="all-ones", **more)


def _cdna3(g: int, lanes: int, drop: int | None) -> GemmModel:
    """An AMD CDNA3 MFMA instruction as MMA-Sim models it: two groups per instruction, products
    truncated at their own window, the sum and C floored at the joint exponent, RNE32."""
    return GemmModel(group_size=g, window_bits=24, below_window="truncate", product_exponent="operands",
                     fused=False, group_rounding="none", accumulate_rounding="rne", operand_domain="encoded",
                     alpha_source="none", require_full_groups=True, instruction_k=2 * g, zero_alignment="emin",
                     product_overflow="inf", window_lanes=lanes, join_sum_bits=31, join_c_bits=24,
                     join_drop_bits=drop, join_below="floor", chain_zero="signed", nan_encoding="ieee-quiet")


def _source(instruction: str, call: str) -> str:
    return f"{instruction}; {MMASIM} ({call})"


def _mmasim_backing() -> Backing:
    return Backing("hardware-validated-model", _MMASIM_DETAIL, _MMASIM_REF)


_H200_MMASIM = "NVIDIA H200 (cuBLAS through torch 2.11, nvjet_sm90 wgmma kernels)"
_H200_MMASIM_REF = "vectors/provenance/h200-mmasim; docs/hardware-models.rst"

_INSTRUCTION_PRESETS = (
    Preset("sm70-f16", _nvidia(4, 23, 4),
           "Volta mma m8n8k4 FP16 -> FP32: fused groups of 4 products with C, F = 23, RZ",
           _source("PTX mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32 (sm_70)",
                   "mma('Volta', 'm8n8k4.f32.f16.f16.f32')"), _mmasim_backing()),
    Preset("sm75-f16", _nvidia(8, 24, 8),
           "Turing mma m16n8k8 FP16 -> FP32: fused groups of 8 with C, F = 24, RZ",
           _source("PTX mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 (sm_75)",
                   "mma('Turing', 'm16n8k8.f32.f16.f16.f32')"), _mmasim_backing()),
    Preset("sm80-f16", _nvidia(8, 24, 16),
           "Ampere mma m16n8k16 FP16/BF16 -> FP32: a split instruction, two fused halves of 8 products, "
           "each with C, F = 24, RZ to FP32",
           _source("PTX mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32 (sm_80)",
                   "mma('Ampere', 'm16n8k16.f32.{f16,bf16}...')"), _mmasim_backing()),
    Preset("sm80-f16-f16acc", _nvidia(8, 24, 16, bits=10, acc="fp16"),
           "Ampere mma m16n8k16 FP16 -> FP16: two fused halves of 8 with an FP16 C, F = 24, each half "
           "rounded to FP16 (RNE)",
           _source("PTX mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 (sm_80)",
                   "mma('Ampere', 'm16n8k16.f16.f16.f16.f16')"), _mmasim_backing()),
    Preset("sm89-fp8", _nvidia(16, 13, 32, bits=13),
           "Ada mma m16n8k32 FP8 (e4m3/e5m2, mixed) -> FP32: two fused halves of 16, F = 13, each half "
           "RZ to 13 fraction bits (e8m13)",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89)",
                   "mma('Ada Lovelace', 'm16n8k32.f32.a.b.f32')"), _mmasim_backing()),
    Preset("sm90-f16", _nvidia(16, 25, 16, zero="excluded"),
           "Hopper wgmma m64nNk16 FP16/BF16 -> FP32: fused groups of 16 with C, F = 25, RZ; zero products and "
           "C = 0 out of the alignment, as the H200 shows",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}.{f16,bf16} (sm_90a)",
                   "wgmma('Hopper', 'm64n8k16.f32.f16.f16')") + "; the zero rule from the H200",
           Backing("measured", "cuBLAS FP16 and BF16 GEMMs (FP32 out) of the operands of the 12 FP16/BF16 MMA-Sim "
                               "sets: every output of one instruction (K = 16) and of the K = 256 chain; MMA-Sim "
                               "itself differs on BF16 where zero products or C = 0 would set the alignment "
                               "(zero_alignment=emin reproduces MMA-Sim)",
                   _H200_MMASIM_REF, device=_H200_MMASIM, outputs=98_304, shapes=((64, 64, 16), (64, 64, 256)))),
    Preset("sm90-f16-f16acc", _nvidia(16, 25, 16, bits=10, acc="fp16", zero="excluded"),
           "Hopper wgmma m64nNk16 FP16 -> FP16: fused groups of 16 with an FP16 C, F = 25, RNE to FP16; zero "
           "rule as sm90-f16",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk16.f16.f16.f16 (sm_90a)",
                   "wgmma('Hopper', 'm64n8k16.f16.f16.f16')"), _mmasim_backing()),
    Preset("sm90-fp8", _nvidia(32, 13, 32, bits=13, zero="excluded"),
           "Hopper wgmma m64nNk32 FP8 (e4m3/e5m2, mixed) -> FP32: fused groups of 32 with C, F = 13, RZ to 13 "
           "fraction bits (= torch._scaled_mm use_fast_accum=True); zero rule as sm90-f16",
           _source("PTX wgmma.mma_async.sync.aligned.m64nNk32.f32.{e4m3,e5m2}.{e4m3,e5m2} (sm_90a)",
                   "wgmma('Hopper', 'm64n8k32.f32.a.b')"),
           Backing("measured", "torch._scaled_mm (e4m3, e4m3 x e5m2; scales 1, FP32 out) of the operands of the 8 "
                               "such MMA-Sim sets: every output of one instruction (K = 32) and of the K = 256 chain "
                               "with use_fast_accum=True, and of one instruction without it; without it the chain "
                               "promotes every 128 products (promotion_interval=128 reproduces those 32,768 "
                               "outputs too)",
                   _H200_MMASIM_REF, device=_H200_MMASIM, outputs=98_304, shapes=((64, 64, 32), (64, 64, 256)))),
    Preset("sm100-f16", _nvidia(16, 25, 16),
           "Blackwell tcgen05.mma kind::f16 FP16/BF16 -> FP32: fused groups of 16 with C, F = 25, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::f16 (sm_100a, K = 16)",
                   "tcgen05mma('Blackwell', 'm64n8k16.f32.f16.f16')"), _mmasim_backing()),
    Preset("sm100-f8f6f4", _nvidia(32, 25, 32),
           "Blackwell tcgen05.mma kind::f8f6f4 FP8 (e4m3/e5m2, mixed) -> FP32: fused groups of 32 with C, F = 25, "
           "RZ to FP32 (no 13-bit cut)",
           _source("PTX tcgen05.mma.cta_group::1.kind::f8f6f4 (sm_100a, K = 32)",
                   "tcgen05mma('Blackwell', 'm64n8k32.f32.a.b')"), _mmasim_backing()),
    Preset("sm100-mxf8f6f4", _nvidia(32, 25, 32, block_exponent="scales"),
           "Blackwell tcgen05.mma kind::mxf8f6f4 (MXFP8: FP8 payloads, UE8M0 block-32 scales) -> FP32: each "
           "product a b s_a s_b aligned at e(a)+e(b)+e(s_a)+e(s_b), fused groups of 32 with C, F = 25, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X (sm_100a, K = 32)",
                   "tcgen05mma_block_scale('Blackwell', 'm128n8k32.block32.f32.a.b.ue8m0')"), _mmasim_backing()),
    Preset("sm100-mxf4nvf4", _nvidia(64, 35, 64, scale_placement="block", block_exponent="scales",
                                     block_term_size=16),
           "Blackwell tcgen05.mma kind::mxf4nvf4 (NVFP4: UE4M3 block-16 scales; MXFP4: UE8M0 block 32 or 16) "
           "-> FP32: terms = exact sums of 16 E2M1 products times both scales, aligned by the scale exponents, "
           "fused groups of 64 products with C, F = 35, RZ",
           _source("PTX tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.scale_vec::{4X,2X} (sm_100a, K = 64)",
                   "tcgen05mma_block_scale('Blackwell', 'm128n8k64.block{16,32}.f32.e2m1.e2m1.{ue4m3,ue8m0}')"),
           _mmasim_backing()),
    Preset("sm120-f8f6f4", _nvidia(32, 25, 32),
           "RTX Blackwell mma m16n8k32 kind::f8f6f4 FP8 -> FP32: as sm100-f8f6f4 (one fused group of 32, "
           "F = 25, RZ; not split)",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_120a)",
                   "mma('RTX Blackwell', 'm16n8k32.f32.a.b.f32')"), _mmasim_backing()),
    Preset("sm120-mxf8f6f4", _nvidia(32, 25, 32, block_exponent="scales"),
           "RTX Blackwell mma m16n8k32 kind::mxf8f6f4 (MXFP8) -> FP32: as sm100-mxf8f6f4",
           _source("PTX mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X..."
                   "ue8m0 (sm_120a)", "mma_block_scale('RTX Blackwell', 'm16n8k32.block32.f32.a.b.f32.ue8m0')"),
           _mmasim_backing()),
    Preset("sm120-mxf4nvf4", _nvidia(64, 35, 64, scale_placement="block", block_exponent="scales",
                                     block_term_size=16),
           "RTX Blackwell mma m16n8k64 kind::mxf4nvf4 (NVFP4, MXFP4) -> FP32: as sm100-mxf4nvf4",
           _source("PTX mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::{4X,2X} (sm_120a)",
                   "mma_block_scale('RTX Blackwell', 'm16n8k64.block{16,32}.f32.e2m1.e2m1.f32.{ue4m3,ue8m0}')"),
           _mmasim_backing()),
    Preset("cdna3-f16", _cdna3(8, 1, None),
           "AMD CDNA3 MFMA FP16/BF16 -> FP32: groups of 8 products truncated 24 bits below their largest "
           "exponent (a product >= 2^128 is Inf), the sum floored to 31 bits and C to 24 below the joint "
           "exponent, one RNE to FP32 per group",
           _source("AMD CDNA3 ISA v_mfma_f32_16x16x16_{f16,bf16} (also 32x32x8)", "mfma('CDNA3', "
                   "'f32_16x16x16_f16')"), _mmasim_backing()),
    Preset("cdna3-fp8", _cdna3(16, 2, 25),
           "AMD CDNA3 MFMA FP8/BF8 (e4m3fnuz, e5m2fnuz, mixed) -> FP32: groups of 16 in even-k and odd-k "
           "lanes, each truncated 24 bits below its own largest exponent, then floored at the joint one; C "
           "dropped below 2^(M-25), sum floored to 31 bits, C to 24; one RNE to FP32 per group",
           _source("AMD CDNA3 ISA v_mfma_f32_16x16x32_{fp8_fp8,bf8_bf8,fp8_bf8} (also 32x32x16)",
                   "mfma('CDNA3', 'f32_16x16x32_fp8_fp8')"), _mmasim_backing()),
)

#: Architecture and instruction of each instruction-level preset (the hardware-models table).
_INSTRUCTIONS: dict[str, tuple[str, str]] = {
    "sm70-f16": ("Volta (sm_70)", "mma.sync.aligned.m8n8k4 .f32.f16.f16.f32"),
    "sm75-f16": ("Turing (sm_75)", "mma.sync.aligned.m16n8k8 .f32.f16.f16.f32"),
    "sm80-f16": ("Ampere (sm_80)", "mma.sync.aligned.m16n8k16 .f32.{f16,bf16}"),
    "sm80-f16-f16acc": ("Ampere (sm_80)", "mma.sync.aligned.m16n8k16 .f16.f16.f16.f16"),
    "sm89-fp8": ("Ada (sm_89)", "mma.sync.aligned.m16n8k32 .f32.{e4m3,e5m2}"),
    "sm90-f16": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk16 .f32.{f16,bf16}"),
    "sm90-f16-f16acc": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk16 .f16.f16.f16"),
    "sm90-fp8": ("Hopper (sm_90a)", "wgmma.mma_async m64nNk32 .f32.{e4m3,e5m2}"),
    "sm100-f16": ("Blackwell (sm_100a)", "tcgen05.mma kind::f16"),
    "sm100-f8f6f4": ("Blackwell (sm_100a)", "tcgen05.mma kind::f8f6f4"),
    "sm100-mxf8f6f4": ("Blackwell (sm_100a)", "tcgen05.mma kind::mxf8f6f4.block_scale (UE8M0, block 32)"),
    "sm100-mxf4nvf4": ("Blackwell (sm_100a)", "tcgen05.mma kind::mxf4nvf4.block_scale (UE4M3 b16, UE8M0 b32/b16)"),
    "sm120-f8f6f4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k32 kind::f8f6f4"),
    "sm120-mxf8f6f4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k32 kind::mxf8f6f4.block_scale"),
    "sm120-mxf4nvf4": ("RTX Blackwell (sm_120a)", "mma.sync m16n8k64 kind::mxf4nvf4.block_scale"),
    "cdna3-f16": ("AMD CDNA3 (MI300)", "v_mfma_f32_16x16x16_{f16,bf16}"),
    "cdna3-fp8": ("AMD CDNA3 (MI300)", "v_mfma_f32_16x16x32_{fp8,bf8}_{fp8,bf8}"),
}
_INSTRUCTION_PRESETS = tuple(dataclasses.replace(p, architecture=_INSTRUCTIONS[p.name][0],
                                                 instruction=_INSTRUCTIONS[p.name][1]) for p in _INSTRUCTION_PRESETS)

#: The seed's Triton GEMM: the Hopper wgmma chain (sm90-f16) restarted every 64 products, each
#: partial added to the FP32 sum with RZ (a promotion, FPS-GEMM-6).
_SEED_TRITON = next(p.model for p in _INSTRUCTION_PRESETS if p.name == "sm90-f16").replace(
    promotion_interval=64, promotion_rounding="rtz")


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
    Preset("seed-triton-h200", _SEED_TRITON,
           "The seed's Triton GEMM (issue_rz_bf16_gemm) as it runs on an H200: per 64 products a tl.dot of "
           "BF16 operands from a zero accumulator (the Hopper tensor-core chain of sm90-f16, = km-h100-bf16 "
           "on finite operands), added to the running FP32 sum with add.rz.f32",
           "MrHuff/ue5m3-fp4 src/ue5m3_fp4/backends/triton/gemm.py (_issue_rz_kernel, BLOCK_K = 64); measured "
           "on an NVIDIA H200 (vectors/provenance/h200-refs-cuda)",
           Backing("measured", "the seed's issue_rz_bf16_gemm run by Triton 3.6 on BF16 operands (wide and narrow "
                               "exponent ranges, both of its tile sizes): every output reproduced",
                   "vectors/provenance/h200-refs-cuda; docs/gemm.rst", device=_H200_TRITON,
                   outputs=_SEED_TRITON_OUTPUTS, shapes=_SEED_TRITON_SHAPES)),
    Preset("seed-triton-h200-snap", _SEED_TRITON.replace(snap_bits=10),
           "seed-triton-h200 with the kernel's optional output snap round(C * 1024) / 1024 (ties to even)",
           "MrHuff/ue5m3-fp4 issue_rz_bf16_gemm(snap_to_1_over_1024=True); measured on an NVIDIA H200",
           Backing("measured", "issue_rz_bf16_gemm(..., snap_to_1_over_1024=True) on the same operands: every "
                               "output reproduced", "vectors/provenance/h200-refs-cuda; docs/gemm.rst",
                   device=_H200_TRITON, outputs=_SEED_TRITON_OUTPUTS, shapes=_SEED_TRITON_SHAPES)),
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
           KM_SOURCE + "; reproduced bit for bit on an NVIDIA H200 (docs/probe-h200.rst)",
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=True: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-h100-fp8-promote128", _km(32, 13).replace(promotion_interval=128, promotion_rounding="rne"),
           "km-h100-fp8 plus promotion of the partial into an FP32 accumulator (RNE add) every 128 "
           "products: cuBLAS FP8 GEMM on H100/H200 with use_fast_accum=False",
           "measured on an NVIDIA H200 with torch._scaled_mm (docs/probe-h200.rst); " + KM_SOURCE,
           Backing("measured", "torch._scaled_mm, float8_e4m3fn, FP32 output, use_fast_accum=False: every sampled "
                               "output reproduced (split_k set where cuBLAS splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=_H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-b200-fp8", _km(32, 25),
           "B200 FP8 tensor core: fused blocks of 32 products, neab = 2 (25 fraction bits), RTZ",
           KM_SOURCE,
           Backing("paper", "Khattak & Mikaitis' B200 FP8 parameters; not measured by fpspec", "arXiv 2512.07004")),
    Preset("km-h100-bf16", _km(16, 25),
           "H100 FP16/BF16 tensor core: fused blocks of 16 products, neab = 2, RTZ",
           KM_SOURCE + "; reproduced on an H200 (cuBLAS splits K at some shapes: set split_k, docs/probe-h200.rst)",
           Backing("measured", "torch.mm with FP32 output on BF16, FP16, and BF16 with reduced-precision reduction "
                               "off: every sampled output of the three targets reproduced (split_k set where cuBLAS "
                               "splits K)", "docs/probe-h200.rst",
                   device=_H200, outputs=3 * _H200_OUTPUTS, shapes=_H200_SHAPES)),
    Preset("km-a100-bf16", _km(8, 24),
           "A100 FP16/BF16 tensor core: fused blocks of 8 products, neab = 1, RTZ",
           KM_SOURCE,
           Backing("paper", "Khattak & Mikaitis' A100 FP16/BF16 parameters; not measured by fpspec",
                   "arXiv 2512.07004")),
    Preset("km-v100-fp16", _km(4, 23),
           "V100 FP16 tensor core: fused blocks of 4 products, neab = 0, RTZ",
           KM_SOURCE + "; Fasi, Higham, Mikaitis, Pranesh, PeerJ CS 2021",
           Backing("paper", "Khattak & Mikaitis' V100 parameters (Fasi et al. 2021 probed a V100); not measured "
                            "by fpspec", "arXiv 2512.07004; PeerJ CS 2021")),
    *_INSTRUCTION_PRESETS,
)}

#: The names of the instruction-level presets, NVIDIA tensor-core and AMD matrix-core
#: instructions, each the chain of its instruction from C = 0 (FPS-GEMM-21).
INSTRUCTION_PRESETS: tuple[str, ...] = tuple(p.name for p in _INSTRUCTION_PRESETS)


def preset_names() -> list[str]:
    return list(PRESETS)


def preset_model(model: "str | GemmModel", **overrides: Any) -> GemmModel:
    """A fixed preset of :data:`PRESETS` by name (or a model), with validated overrides
    (FPS-GEMM-3); FpspecError for any other name (the library presets, whose model depends on
    the GEMM's shape, are :func:`fpspec.named_models.get_model`'s).

    Setting ``window_bits`` (or ``neab``) without ``below_window`` picks "truncate"
    for an integer and "exact" for None, the only consistent companion.
    """
    if isinstance(model, GemmModel):
        return with_overrides(model, overrides)
    if isinstance(model, str) and model in PRESETS:
        return with_overrides(PRESETS[model].model, overrides)
    raise unknown_preset(model)


def with_overrides(base: GemmModel, overrides: "dict[str, Any]") -> GemmModel:
    """``base`` with the parameters of ``overrides`` changed, each validated (FPS-GEMM-3)."""
    if not overrides:
        return base
    try:
        return base.replace(**overrides)
    except TypeError as exc:  # pragma: no cover - replace() names fields already
        raise FpspecError(str(exc)) from None


def arithmetic_summary(model: GemmModel) -> dict[str, str]:
    """One line per aspect of an instruction-level model, derived from its parameters (the
    hardware-models table of docs/hardware-models.rst): k, group, window, alignment,
    rounding, specials, output (FPS-GEMM-21)."""
    g, k = model.group_size, model.instruction_k
    halves = f" = {k // g} x {g}" if (g and k and k != g) else ""
    if model.scale_placement == "block":
        t = model.block_term_size
        terms = f"{g // t} block terms of {t} products" if (g and t) else "block terms"
    else:
        terms = f"{g} products" if g else "all products"
    if model.fused:
        group = f"{terms} + C, fused"
    elif model.join_sum_bits is not None:
        group = f"{terms}; C joins after the window"
    else:
        group = f"{terms}; C added after rounding"
    window = "none" if model.window_bits is None else f"F = {model.window_bits}, {model.below_window}"
    if model.window_lanes > 1:
        window += f", {model.window_lanes} lanes (k mod {model.window_lanes}) merged by {model.join_below}"
    if model.join_sum_bits is not None:
        window += (f"; join: sum {model.join_below} to {model.join_sum_bits} bits, C to {model.join_c_bits}"
                   + (f", C dropped below M - {model.join_drop_bits}" if model.join_drop_bits is not None else ""))
    if model.block_exponent == "scales":
        align = "e(s_a) + e(s_b)" if model.scale_placement == "block" else "e(a) + e(b) + e(s_a) + e(s_b)"
    else:
        align = "e(a) + e(b)" if model.product_exponent == "operands" else "floor(log2 |p|)"
    align += "; zeros and C = 0 at -126" if model.zero_alignment == "emin" else "; zeros and C = 0 excluded"
    acc_bits = ACCUMULATOR_FORMATS[model.accumulator_format][2]
    mode = model.accumulate_rounding.upper().replace("RTZ", "RZ")
    width = {"fp32": "FP32", "fp16": "FP16"}[model.accumulator_format]
    rounding = f"{mode} to {width}" if model.accumulate_bits == acc_bits else \
        f"{mode} to {model.accumulate_bits} fraction bits (FP32 range)"
    rounding += " per group" if not model.fused or (g and k and g < k) else " per instruction"
    specials = []
    if model.accumulate_overflow == "inf" or model.accumulate_rounding == "rne":
        specials.append("overflow -> Inf")
    else:
        specials.append("RZ overflow -> max finite")
    if model.product_overflow == "inf":
        specials.append("product >= 2^128 -> Inf")
    specials.append(f"NaN {NAN_BITS[(model.nan_encoding, model.output_format)]:#x}")
    if model.chain_zero == "signed":
        specials.append("-0 on negative underflow")
    return {"k": f"{k}{halves}" if k else "any", "group": group, "window": window, "alignment": align,
            "rounding": rounding, "specials": ", ".join(specials), "output": model.output_format.upper()}
