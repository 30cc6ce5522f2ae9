"""Reference outputs of GEMM instructions from MMA-Sim, for fpspec's instruction presets (issue 15).

MMA-Sim (microsoft/MMA-Sim; Xie et al., arXiv 2511.10909) is a bit-accurate CPU model
of the tensor-core and matrix-core instructions of eight NVIDIA and two AMD GPU
architectures, validated bitwise against the hardware.  It is NOT part of fpspec and
is never copied into the tree: fetch it yourself and point this script at the folder
that holds its ``mmasim`` package.  It needs torch (CPU is enough)::

    python3 -m tools.mmasim_vectors --mmasim /path/to/MMA-Sim --commit c785138 \\
        generate --out vectors/provenance/mmasim [--only SET ...] [--seed 15]
    python3 -m tools.mmasim_vectors --mmasim /path/to/MMA-Sim verify vectors/provenance/mmasim
    python3 -m tools.mmasim_vectors list

For every set (one preset of issue 15 with one operand-format variant) the script
draws seeded random operands as *codes* (bit patterns of the operand formats, block
scales as scale-format bytes) and runs the K-chain of the instruction from C = 0:
``D_0 = mma(A_0, B_0, 0)``, ``D_s = mma(A_s, B_s, D_{s-1})``, A_s / B_s the s-th
k-slice, over an M x N grid of instruction tiles.  It stores the codes, the first
instruction's output ``d_first`` and the chain's output ``d`` (bit patterns) in one
uncompressed ``.npz`` per set with a JSON ``__meta__``, plus ``MANIFEST.json``.
``verify`` re-runs a seeded sample of tiles and compares every bit.

The layout of the files is described in ``vectors/provenance/mmasim/README.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tools.common import import_package

#: Bumped whenever the operand generator changes (same seed, different codes).
GENERATOR_VERSION = 1
#: Seed of the committed files.
DEFAULT_SEED = 15
#: Every chain runs over K = 256 products (a multiple of every instruction's k).
K_TOTAL = 256


# --------------------------------------------------------------------------------------
# Operand formats, as code layouts (the arithmetic is MMA-Sim's, not ours).
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CodeFormat:
    """Bit layout of one operand or scale format, enough to draw codes of a given class."""

    name: str
    ebits: int
    mbits: int
    bias: int
    specials: str      # "ieee" (Inf + NaN), "fn" (S.1..1.1..1 NaN, no Inf), "fnuz" (0x80 NaN),
    #                    "none" (E2M1), "e8m0" (0xFF NaN, no zero, no sign)
    signed: bool
    storage: str       # numpy dtype of the stored codes
    torch_dtype: str   # torch dtype MMA-Sim takes ("" for packed E2M1)

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        top = (1 << self.ebits) - 1
        if self.specials in ("ieee",):
            top -= 1
        if self.specials == "e8m0":
            top -= 1
        return top - self.bias

    @property
    def sign_bit(self) -> int:
        return 1 << (self.ebits + self.mbits)

    @property
    def mant_mask(self) -> int:
        return (1 << self.mbits) - 1

    def nan_codes(self) -> list[int]:
        """NaN codes (positive ones first)."""
        e = ((1 << self.ebits) - 1) << self.mbits
        if self.specials == "ieee":
            quiet = e | (1 << (self.mbits - 1))
            out = [quiet, quiet | 1, e | 1]
            return out + [c | self.sign_bit for c in out]
        if self.specials == "fn":
            c = e | self.mant_mask
            return [c, c | self.sign_bit] if self.signed else [c]
        if self.specials == "fnuz":
            return [0x80]
        if self.specials == "e8m0":
            return [0xFF]
        return []

    def inf_code(self) -> int | None:
        if self.specials != "ieee":
            return None
        return ((1 << self.ebits) - 1) << self.mbits


FMT: dict[str, CodeFormat] = {f.name: f for f in (
    CodeFormat("fp16", 5, 10, 15, "ieee", True, "uint16", "float16"),
    CodeFormat("bf16", 8, 7, 127, "ieee", True, "uint16", "bfloat16"),
    # TF32 operands are given as FP32 codes; MMA-Sim (and the hardware) drop the low 13 bits.
    CodeFormat("tf32", 8, 23, 127, "ieee", True, "uint32", "float32"),
    CodeFormat("e4m3", 4, 3, 7, "fn", True, "uint8", "float8_e4m3fn"),
    CodeFormat("e5m2", 5, 2, 15, "ieee", True, "uint8", "float8_e5m2"),
    CodeFormat("e4m3fnuz", 4, 3, 8, "fnuz", True, "uint8", "float8_e4m3fnuz"),
    CodeFormat("e5m2fnuz", 5, 2, 16, "fnuz", True, "uint8", "float8_e5m2fnuz"),
    CodeFormat("e2m1", 2, 1, 1, "none", True, "uint8", ""),
    CodeFormat("ue4m3", 4, 3, 7, "fn", False, "uint8", "float8_e4m3fn"),
    CodeFormat("ue8m0", 8, 0, 127, "e8m0", False, "uint8", "float8_e8m0fnu"),
    CodeFormat("fp32", 8, 23, 127, "ieee", True, "uint32", "float32"),
)}


# --------------------------------------------------------------------------------------
# The sets: one per (preset, operand variant).
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class VecSet:
    """One instruction of one preset with one operand-format combination."""

    preset: str
    variant: str
    api: str           # MMA-Sim class: mma, wgmma, tcgen05mma, mma_block_scale, tcgen05mma_block_scale, mfma
    arch: str          # MMA-Sim architecture name
    qualifier: str     # MMA-Sim qualifier string
    instruction: str   # the PTX / ISA instruction it models
    a_fmt: str
    b_fmt: str
    d_fmt: str         # fp32 or fp16 (C has the same format)
    m: int
    n: int
    k: int
    M: int
    N: int
    scale_fmt: str | None = None
    block: int | None = None
    notes: str = ""

    @property
    def name(self) -> str:
        return f"{self.preset}__{self.variant}"

    @property
    def K(self) -> int:
        return K_TOTAL

    @property
    def steps(self) -> int:
        return self.K // self.k

    @property
    def vendor(self) -> str:
        return "amd" if self.api == "mfma" else "nv_ptx"


def _nv_mma(preset: str, variant: str, arch: str, q: str, ptx: str, a: str, b: str, d: str,
            m: int, n: int, k: int, **kw: Any) -> VecSet:
    return VecSet(preset, variant, "mma", arch, q, ptx, a, b, d, m, n, k, 64, 64, **kw)


def _sets() -> list[VecSet]:
    out: list[VecSet] = []
    add = out.append
    add(_nv_mma("sm70-f16", "fp16", "Volta", "m8n8k4.f32.f16.f16.f32",
                "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f32", "fp16", "fp16", "fp32", 8, 8, 4))
    add(_nv_mma("sm75-f16", "fp16", "Turing", "m16n8k8.f32.f16.f16.f32",
                "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32", "fp16", "fp16", "fp32", 16, 8, 8))
    for v, t in (("fp16", "f16"), ("bf16", "bf16")):
        add(_nv_mma("sm80-f16", v, "Ampere", f"m16n8k16.f32.{t}.{t}.f32",
                    f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32", v, v, "fp32", 16, 8, 16))
    add(_nv_mma("sm80-f16-f16acc", "fp16", "Ampere", "m16n8k16.f16.f16.f16.f16",
                "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16", "fp16", "fp16", "fp16", 16, 8, 16))
    add(_nv_mma("sm80-tf32", "tf32", "Ampere", "m16n8k8.f32.tf32.tf32.f32",
                "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", "tf32", "tf32", "fp32", 16, 8, 8,
                notes="extra set: TF32 operands (not a preset of issue 15)"))
    fp8_variants = (("e4m3", "e4m3", "e4m3"), ("e5m2", "e5m2", "e5m2"), ("e4m3-e5m2", "e4m3", "e5m2"))
    for v, a, b in fp8_variants:
        add(_nv_mma("sm89-fp8", v, "Ada Lovelace", f"m16n8k32.f32.{a}.{b}.f32",
                    f"mma.sync.aligned.m16n8k32.row.col.f32.{a}.{b}.f32", a, b, "fp32", 16, 8, 32))
    for v, t in (("fp16", "f16"), ("bf16", "bf16")):
        add(VecSet("sm90-f16", v, "wgmma", "Hopper", f"m64n8k16.f32.{t}.{t}",
                   f"wgmma.mma_async.sync.aligned.m64n8k16.f32.{t}.{t}", v, v, "fp32", 64, 8, 16, 64, 64))
    add(VecSet("sm90-f16-f16acc", "fp16", "wgmma", "Hopper", "m64n8k16.f16.f16.f16",
               "wgmma.mma_async.sync.aligned.m64n8k16.f16.f16.f16", "fp16", "fp16", "fp16", 64, 8, 16, 64, 64))
    for v, a, b in fp8_variants:
        add(VecSet("sm90-fp8", v, "wgmma", "Hopper", f"m64n8k32.f32.{a}.{b}",
                   f"wgmma.mma_async.sync.aligned.m64n8k32.f32.{a}.{b}", a, b, "fp32", 64, 8, 32, 64, 64))
    add(VecSet("sm90-tf32", "tf32", "wgmma", "Hopper", "m64n8k8.f32.tf32.tf32",
               "wgmma.mma_async.sync.aligned.m64n8k8.f32.tf32.tf32", "tf32", "tf32", "fp32", 64, 8, 8, 64, 64,
               notes="extra set: TF32 operands (not a preset of issue 15)"))
    for v, t in (("fp16", "f16"), ("bf16", "bf16")):
        add(VecSet("sm100-f16", v, "tcgen05mma", "Blackwell", f"m64n8k16.f32.{t}.{t}",
                   "tcgen05.mma.cta_group::1.kind::f16 (M=64, N=8, K=16, f32 D)", v, v, "fp32", 64, 8, 16, 64, 64))
    for v, a, b in fp8_variants:
        add(VecSet("sm100-f8f6f4", v, "tcgen05mma", "Blackwell", f"m64n8k32.f32.{a}.{b}",
                   "tcgen05.mma.cta_group::1.kind::f8f6f4 (M=64, N=8, K=32, f32 D)", a, b, "fp32", 64, 8, 32, 64, 64))
    add(VecSet("sm100-tf32", "tf32", "tcgen05mma", "Blackwell", "m64n8k8.f32.tf32.tf32",
               "tcgen05.mma.cta_group::1.kind::tf32 (M=64, N=8, K=8, f32 D)", "tf32", "tf32", "fp32", 64, 8, 8, 64, 64,
               notes="extra set: TF32 operands (not a preset of issue 15)"))
    for v, a, b in fp8_variants:
        add(VecSet("sm100-mxf8f6f4", v, "tcgen05mma_block_scale", "Blackwell",
                   f"m128n8k32.block32.f32.{a}.{b}.ue8m0",
                   "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X (M=128, N=8, K=32)",
                   a, b, "fp32", 128, 8, 32, 128, 32, scale_fmt="ue8m0", block=32))
    fp4_variants = (("nvfp4-ue4m3-b16", "ue4m3", 16, "scale_vec::4X"),
                    ("mxfp4-ue8m0-b32", "ue8m0", 32, "scale_vec::2X"),
                    ("mxfp4-ue8m0-b16", "ue8m0", 16, "scale_vec::4X"))
    for v, s, bs, vec in fp4_variants:
        add(VecSet("sm100-mxf4nvf4", v, "tcgen05mma_block_scale", "Blackwell",
                   f"m128n8k64.block{bs}.f32.e2m1.e2m1.{s}",
                   f"tcgen05.mma.cta_group::1.kind::mxf4nvf4.block_scale.{vec} (M=128, N=8, K=64)",
                   "e2m1", "e2m1", "fp32", 128, 8, 64, 128, 32, scale_fmt=s, block=bs))
    for v, a, b in fp8_variants:
        add(_nv_mma("sm120-f8f6f4", v, "RTX Blackwell", f"m16n8k32.f32.{a}.{b}.f32",
                    f"mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f32.{a}.{b}.f32", a, b, "fp32", 16, 8, 32))
    for v, a, b in fp8_variants:
        out.append(VecSet("sm120-mxf8f6f4", v, "mma_block_scale", "RTX Blackwell",
                          f"m16n8k32.block32.f32.{a}.{b}.f32.ue8m0",
                          f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                          f".f32.{a}.{b}.f32.ue8m0", a, b, "fp32", 16, 8, 32, 64, 64,
                          scale_fmt="ue8m0", block=32))
    for v, s, bs, vec in fp4_variants:
        out.append(VecSet("sm120-mxf4nvf4", v, "mma_block_scale", "RTX Blackwell",
                          f"m16n8k64.block{bs}.f32.e2m1.e2m1.f32.{s}",
                          f"mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.{vec}"
                          f".f32.e2m1.e2m1.f32.{s}", "e2m1", "e2m1", "fp32", 16, 8, 64, 64, 64,
                          scale_fmt=s, block=bs))
    for v in ("fp16", "bf16"):
        t = "f16" if v == "fp16" else v
        add(VecSet("cdna3-f16", v, "mfma", "CDNA3", f"f32_16x16x16_{t}",
                   f"v_mfma_f32_16x16x16_{t} (CDNA3)", v, v, "fp32", 16, 16, 16, 64, 64))
    for v, a, b, q in (("e4m3fnuz", "e4m3fnuz", "e4m3fnuz", "fp8_fp8"),
                       ("e5m2fnuz", "e5m2fnuz", "e5m2fnuz", "bf8_bf8"),
                       ("e4m3fnuz-e5m2fnuz", "e4m3fnuz", "e5m2fnuz", "fp8_bf8")):
        add(VecSet("cdna3-fp8", v, "mfma", "CDNA3", f"f32_16x16x32_{q}",
                   f"v_mfma_f32_16x16x32_{q} (CDNA3)", a, b, "fp32", 16, 16, 32, 64, 64))
    return out


SETS: list[VecSet] = _sets()
SETS_BY_NAME: dict[str, VecSet] = {s.name: s for s in SETS}

#: Operand combinations MMA-Sim lists but cannot run at commit c785138 (no set is generated).
NOT_RUNNABLE = {
    "e2m1 operands in kind::f8f6f4 / kind::mxf8f6f4 (e.g. e2m1 x e4m3)":
        "MMA-Sim maps e2m1 to torch.uint8 and its k=32 path calls extract_significand_exponent "
        "on the raw byte: AssertionError 'Unsupported dtype: torch.uint8'",
}


# --------------------------------------------------------------------------------------
# Operand generation (codes).
# --------------------------------------------------------------------------------------

def _spots(K: int, fmt: CodeFormat) -> np.ndarray:
    """Positions along K where 'zspot' lines hold zeros and 'hspot' lines huge values.

    For 8-bit exponents (BF16, TF32) the huge values are near 2^127, so every other line
    keeps its spot entries small (see :func:`_lines`) and most outputs stay finite."""
    return np.arange(K) % (32 if fmt.ebits == 8 else 8) == 5


@dataclass
class Profile:
    """Unbiased exponent ranges used for one operand format in one set."""

    wide: tuple[int, int]
    narrow: tuple[int, int]
    top: int
    high: tuple[int, int]
    huge: tuple[int, int]
    spot_other: tuple[int, int] | None
    bottom: tuple[int, int]
    tiny: tuple[int, int]
    small: tuple[int, int]
    mixed_gap: int
    ramp: tuple[int, int]


def _profile(fmt: CodeFormat, d_fmt: str) -> Profile:
    lo, hi = fmt.emin, fmt.emax
    if fmt.ebits == 8:  # bf16, tf32: keep most products far from 2^128
        # huge >= 2^114: a zero times it sets an alignment exponent >= -12 under MMA-Sim's
        # zero-as-2^-126 rule, which wipes out the 2^-40 products of a 'zspot' line
        return Profile(wide=(-60, 60), narrow=(-2, 2), top=hi, high=(58, 64), huge=(114, hi),
                       spot_other=(-40, -20), bottom=(-75, -63), tiny=(lo, lo + 16),
                       small=(-45, -35), mixed_gap=12, ramp=(-55, 55))
    if d_fmt == "fp16":  # FP16 accumulator: keep most sums below 65504
        return Profile(wide=(lo, 5), narrow=(-2, 2), top=hi, high=(3, 5), huge=(5, 5),
                       spot_other=None, bottom=(lo, lo + 3), tiny=(lo, lo), small=(lo, lo + 6),
                       mixed_gap=8, ramp=(lo, 5))
    return Profile(wide=(lo, hi), narrow=(-2, 2), top=hi, high=(hi - 2, hi), huge=(hi, hi),
                   spot_other=None, bottom=(lo, lo + 2), tiny=(lo, lo), small=(lo, lo + 4),
                   mixed_gap=min(12, (hi - lo) // 2), ramp=(lo, hi))


def _finite(fmt: CodeFormat, exps: np.ndarray, rng: np.random.Generator,
            p_sub: float = 0.0, p_zero: float = 0.0) -> np.ndarray:
    """Finite codes with the given unbiased exponents (clipped to the format), some subnormal or zero."""
    n = exps.shape[0]
    exps = np.clip(exps, fmt.emin, fmt.emax)
    mant = rng.integers(0, 1 << fmt.mbits, size=n, dtype=np.int64)
    field_ = exps.astype(np.int64) + fmt.bias
    if fmt.mbits > 0:
        sub = rng.random(n) < p_sub
        field_[sub] = 0
        mant[sub] = rng.integers(1, 1 << fmt.mbits, size=int(sub.sum()), dtype=np.int64)
    code = (field_ << fmt.mbits) | mant
    if fmt.specials == "fn":  # S.1111.111 is NaN
        code[code == (((1 << fmt.ebits) - 1) << fmt.mbits) | fmt.mant_mask] -= 1
    zero = rng.random(n) < p_zero
    code[zero] = 0
    if fmt.signed:
        neg = rng.random(n) < 0.5
        if fmt.specials == "fnuz":  # 0x80 is NaN, not -0
            neg &= code != 0
        code[neg] |= fmt.sign_bit
    return code


def _uniform(rng: np.random.Generator, r: tuple[int, int], n: int) -> np.ndarray:
    return rng.integers(r[0], r[1] + 1, size=n)


#: Value classes of the lines (rows of A, columns of B), by line index mod 16.
ROW_CLASSES = ["step", "wide", "narrow", "wide_sub", "bottom", "wide", "zspot", "special",
               "zero_heavy", "narrow", "top", "ramp_up", "tiny", "narrow", "mixed", "ramp_down"]
COL_CLASSES = ["wide", "narrow", "hspot", "wide_sub", "narrow", "bottom", "ramp_down", "zero_heavy",
               "narrow", "mixed", "wide", "special", "narrow", "ramp_up", "top", "step"]


def _line_values(fmt: CodeFormat, prof: Profile, cls: str, K: int, rng: np.random.Generator) -> np.ndarray:
    """One line of K payload codes of value class ``cls`` (no specials, no cancellation yet)."""
    if fmt.name == "e2m1":
        return _e2m1_line(cls, K, rng)
    if cls == "wide":
        return _finite(fmt, _uniform(rng, prof.wide, K), rng, p_sub=0.03, p_zero=0.03)
    if cls == "narrow":
        return _finite(fmt, _uniform(rng, prof.narrow, K), rng, p_zero=0.02)
    if cls == "wide_sub":
        return _finite(fmt, _uniform(rng, prof.wide, K), rng, p_sub=0.3, p_zero=0.03)
    if cls == "bottom":
        return _finite(fmt, _uniform(rng, prof.bottom, K), rng, p_sub=0.3, p_zero=0.03)
    if cls == "tiny":
        return _finite(fmt, _uniform(rng, prof.tiny, K), rng, p_sub=0.6, p_zero=0.05)
    if cls == "zero_heavy":
        return _finite(fmt, _uniform(rng, prof.wide, K), rng, p_sub=0.03, p_zero=0.5)
    if cls == "step":  # bottom of the range (subnormals) for the first 16 k, then the top:
        h = 16         # a small C meets terms 2^25 and more above it (visible in d_first)
        p_sub = 1.0 if fmt.mbits <= 3 else 0.7  # FP8: only subnormals, for the smallest C
        lo = _finite(fmt, _uniform(rng, (prof.wide[0], prof.wide[0] + 2), h), rng, p_sub=p_sub)
        hi = _finite(fmt, _uniform(rng, (prof.wide[1] - 2, prof.wide[1]), K - h), rng)
        return np.concatenate([lo, hi])
    if cls in ("ramp_up", "ramp_down"):  # exponents sweep the range along K: C vs new terms
        lo, hi = prof.ramp
        exps = np.round(np.linspace(lo, hi, K)).astype(np.int64) + rng.integers(-1, 2, size=K)
        if cls == "ramp_down":
            exps = exps[::-1].copy()
        return _finite(fmt, exps, rng, p_zero=0.02)
    if cls in ("top", "high"):  # a quarter of the entries in the top binade (or just below)
        exps = _uniform(rng, prof.narrow, K)
        hit = rng.random(K) < 0.25
        exps[hit] = prof.top if cls == "top" else _uniform(rng, prof.high, int(hit.sum()))
        return _finite(fmt, exps, rng)
    if cls == "mixed":
        c = (prof.narrow[0] + prof.narrow[1]) // 2
        g = prof.mixed_gap // 2
        exps = np.where(rng.random(K) < 0.5, c + g, c - g) + rng.integers(-1, 2, size=K)
        return _finite(fmt, exps, rng, p_zero=0.02)
    if cls == "zspot":
        codes = _finite(fmt, _uniform(rng, prof.small, K), rng)
        sp = _spots(K, fmt)
        codes[sp] = np.where(rng.random(int(sp.sum())) < 0.5, 0, _zero_neg(fmt))
        return codes
    if cls == "hspot":
        codes = _finite(fmt, _uniform(rng, prof.narrow, K), rng)
        sp = _spots(K, fmt)
        codes[sp] = _finite(fmt, _uniform(rng, prof.huge, int(sp.sum())), rng)
        return codes
    raise ValueError(cls)


def _zero_neg(fmt: CodeFormat) -> int:
    """-0 where the format has one, else +0."""
    if not fmt.signed or fmt.specials == "fnuz":
        return 0
    return fmt.sign_bit


def _e2m1_line(cls: str, K: int, rng: np.random.Generator) -> np.ndarray:
    mags = {"narrow": [2, 3, 4, 5], "bottom": [0, 1], "tiny": [0, 1], "top": [6, 7]}
    if cls == "step":
        codes = np.concatenate([rng.choice(np.array([0, 1, 1, 1]), size=K // 2),
                                rng.choice(np.array([6, 7]), size=K - K // 2)])
    elif cls in mags:
        codes = rng.choice(np.array(mags[cls]), size=K)
    else:
        codes = rng.integers(0, 8, size=K)
    if cls == "zero_heavy":
        codes[rng.random(K) < 0.5] = 0
    return codes | (np.where(rng.random(K) < 0.5, 8, 0))


def _add_specials(fmt: CodeFormat, line: np.ndarray, which: int, rng: np.random.Generator) -> str:
    """Put NaN (which = 0) or Inf (which = 1; NaN if the format has no Inf) in a line; say what."""
    K = line.shape[0]
    inf = fmt.inf_code()
    pos = rng.choice(K, size=2, replace=False)
    sb = fmt.sign_bit
    if which == 1 and inf is not None:
        line[pos[0]] = inf | (sb if rng.random() < 0.5 else 0)
        if rng.random() < 0.5:  # a second Inf of the other sign makes Inf - Inf
            line[pos[1]] = line[pos[0]] ^ sb
            return "+inf+-inf"
        return "+inf"
    nans = fmt.nan_codes()
    if not nans:
        return ""
    c = nans[int(rng.integers(0, len(nans)))]
    if fmt.name == "tf32":  # keep a payload bit above the 13 the instruction drops
        c = 0x7FC00000 | int(rng.integers(0, 1 << 13)) | (sb if rng.random() < 0.5 else 0)
    line[pos[0]] = c
    return "+nan"


def _cancel(fmt: CodeFormat, line: np.ndarray, mirror_only: bool, rng: np.random.Generator) -> np.ndarray:
    """Second half of K := first half (B columns) or -first half, lightly perturbed (A rows)."""
    K = line.shape[0]
    h = K // 2
    first = line[:h].copy()
    if mirror_only:
        line[h:] = first
        return line
    flip = first ^ (fmt.sign_bit if fmt.signed else 0)
    if fmt.specials == "fnuz":  # 0x00 must not become 0x80 (NaN)
        flip = np.where(first == 0, 0, flip)
    pert = rng.random(h) < 0.03
    line[h:] = flip
    if fmt.name == "e2m1":
        line[h:][pert] = rng.integers(0, 16, size=int(pert.sum()))
    else:
        prof = _profile(fmt, "fp32")
        line[h:][pert] = _finite(fmt, _uniform(rng, prof.narrow, int(pert.sum())), rng)
    return line


def _fp16_tie(line: np.ndarray, i: int, k: int, is_a: bool) -> None:
    """First instruction of an FP16-accumulator 'tie' line (line index i, i % 16 == 12).

    A: +-[1, 2^-11, 2^-12, 0, ..., 0] over the first k entries; B: [1, 1, 2^-j], j = 11..14
    by column.  Row x column gives D_0 = RNE16(+-(1 + 2^-11 + 2^-(12+j))): an exact FP16
    tie plus a last term that the window F keeps or truncates, so F shows in d_first."""
    if is_a:
        sign = 0x8000 if (i // 16) % 2 else 0
        line[:k] = 0
        line[:3] = np.array([0x3C00, 0x1000, 0x0C00]) | sign
    else:
        line[:3] = [0x3C00, 0x3C00, (15 - (11 + (i // 16) % 4)) << 10]


def _lines(fmt: CodeFormat, d_fmt: str, count: int, K: int, classes: list[str], is_a: bool,
           rng: np.random.Generator, k: int = 0) -> tuple[np.ndarray, list[str]]:
    """``count`` lines of K codes (rows of A if is_a, else columns of B) and their class names."""
    prof = _profile(fmt, d_fmt)
    out = np.zeros((count, K), dtype=np.int64)
    names: list[str] = []
    for i in range(count):
        cls = classes[i % 16]
        if d_fmt == "fp16" and fmt.name == "fp16" and i % 16 == 12:
            line = _line_values(fmt, prof, "narrow", K, rng)
            _fp16_tie(line, i, k, is_a)
            if not is_a:  # keep the mirror of the other even columns
                line = _cancel(fmt, line, True, rng)
            out[i] = line
            names.append("tie" + ("" if is_a else "+mirror"))
            continue
        special = -1
        if cls == "special":
            special = (i // 16) % 2
            cls = "wide"
        if cls == "top" and (not is_a or (i // 16) % 2 == 1):
            cls = "high"  # the top binade in two rows of A only (they overflow where it matters)
        line = _line_values(fmt, prof, cls, K, rng)
        if prof.spot_other is not None and cls not in ("zspot", "bottom", "tiny") and is_a:
            sp = _spots(K, fmt)  # keep products with the huge spot values of B finite
            line[sp] = _finite(fmt, _uniform(rng, prof.spot_other, int(sp.sum())), rng)
        tag = cls
        if is_a and i % 4 == 1 and special < 0:
            line = _cancel(fmt, line, False, rng)
            tag += "+cancel"
        elif not is_a and i % 2 == 0 and special < 0:
            line = _cancel(fmt, line, True, rng)
            tag += "+mirror"
        if special >= 0:
            tag += _add_specials(fmt, line, special, rng)
        out[i] = line
        names.append(tag)
    return out, names


# Block scales -------------------------------------------------------------------------

#: Scale classes by line index mod 16 (rows of A scales, columns of B scales).
SCALE_ROW_CLASSES = ["step", "narrow", "wide", "ramp_up", "tiny", "narrow", "zblock", "nan",
                     "wide", "wide", "mixed", "wide", "zero", "narrow", "ovf_last", "ramp_down"]
SCALE_COL_CLASSES = ["wide", "narrow", "zblock", "wide", "narrow", "tiny", "wide", "zero",
                     "narrow", "mixed", "ramp_up", "nan", "narrow", "ramp_down", "ovf_last", "step"]


def _scale_codes(sfmt: CodeFormat, exps: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Scale codes near 2^exps: UE8M0 exactly; UE4M3 with a random mantissa, subnormal below 2^-6."""
    if sfmt.name == "ue8m0":
        return np.clip(exps, -127, 127) + 127
    exps = np.clip(exps, -9, 8)
    codes = _finite(sfmt, exps, rng)
    sub = exps < -6  # subnormal m * 2^-9 with 2^e <= m * 2^-9 < 2^(e+1)
    lo = 1 << (exps[sub] + 9)
    codes[sub] = lo + (rng.integers(0, 1 << 8, size=int(sub.sum())) % lo)
    return codes


def _scales_and_payload(vs: VecSet, payload: np.ndarray, line_names: list[str], is_a: bool,
                        rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """Block-scale codes for the lines of one operand; zeroes the payload of 'zblock' blocks."""
    sfmt = FMT[vs.scale_fmt or ""]
    pfmt = FMT[_payload_fmt(vs, is_a)]
    count, K = payload.shape
    bs = vs.block or 0
    nb = K // bs
    classes = SCALE_ROW_CLASSES if is_a else SCALE_COL_CLASSES
    e8 = sfmt.name == "ue8m0"
    wide = (-30, 30) if e8 else (-9, 8)
    out = np.zeros((count, nb), dtype=np.int64)
    names = list(line_names)
    last_blocks = np.arange(nb) >= nb - vs.k // bs  # blocks of the chain's last instruction
    for i in range(count):
        cls = classes[i % 16]
        if cls in ("nan", "ovf_last") and (i // 16) % 2 == 1:
            cls = "wide"
        cancel = "+cancel" in names[i] or "+mirror" in names[i]
        if cls == "narrow":
            exps = _uniform(rng, (-2, 2), nb)
        elif cls == "tiny":
            exps = _uniform(rng, (-127, -100) if e8 else (-9, -6), nb)
        elif cls == "mixed":  # far-apart blocks: 2^+-30 (UE8M0); ~448 or subnormal (UE4M3)
            hi_, lo_ = ((29, 31), (-31, -29)) if e8 else ((6, 8), (-9, -7))
            exps = np.where(rng.random(nb) < 0.5, _uniform(rng, hi_, nb), _uniform(rng, lo_, nb))
        elif cls in ("ramp_up", "ramp_down"):  # scales sweep the range along K: C vs new terms
            lo_, hi_ = (-50, 50) if e8 else (-9, 8)
            exps = np.round(np.linspace(lo_, hi_, nb)).astype(np.int64)
            if cls == "ramp_down":
                exps = exps[::-1].copy()
        elif cls == "step":  # smallest scales for half of K, then the largest (finite chain)
            lo_, hi_ = (-40, 40) if e8 else (-9, 8)
            exps = np.where(np.arange(nb) < nb // 2, lo_, hi_)
        elif cls == "zblock" and not e8:  # UE4M3: tiny scales beside the 448 zero blocks
            exps = _uniform(rng, (-9, -6), nb)
        else:  # wide, zero, zblock, ovf_last, nan
            exps = _uniform(rng, wide, nb)
        codes = _scale_codes(sfmt, exps, rng)
        if cls == "zero" and not e8:  # UE4M3 zero scales (UE8M0 has none: plain wide lines)
            codes[rng.random(nb) < 0.3] = 0
        if cls == "zblock" and e8:  # zero payload blocks under the largest scales
            z = rng.random(nb) < 0.15
            if cancel:
                z[nb // 2:] = z[:nb // 2]
            codes[z] = _scale_codes(sfmt, _uniform(rng, (100, 127), int(z.sum())), rng)
            for b in np.nonzero(z)[0]:
                payload[i, b * bs:(b + 1) * bs] = np.where(rng.random(bs) < 0.5, 0, _zero_neg(pfmt))
        if cls == "zblock" and not e8:
            # UE4M3 spans only 2^-9..448, so a zero block shows in the alignment only at the
            # extremes: every fourth block gets scale ~448 (A: with a zero payload, B: not),
            # the others subnormal scales; A zblock x B zblock puts a zero term at 2^16
            # beside terms near 2^-12 whose low bits fall below the 35-bit window.
            z = np.arange(nb) % 4 == 1
            codes[z] = _scale_codes(sfmt, np.full(int(z.sum()), 8), rng)
            if is_a:
                for b in np.nonzero(z)[0]:
                    payload[i, b * bs:(b + 1) * bs] = np.where(rng.random(bs) < 0.5, 0, _zero_neg(pfmt))
        if cancel:  # the mirrored half keeps the same scales
            codes[nb // 2:] = codes[:nb // 2]
        if cls == "ovf_last":  # the largest scale in the chain's last instruction only
            codes[last_blocks] = _scale_codes(sfmt, np.full(int(last_blocks.sum()), 127 if e8 else 8), rng)
        if cls == "nan":
            codes[int(rng.integers(0, nb))] = sfmt.nan_codes()[0]
        out[i] = codes
        names[i] += f"/scale:{cls}"
    return out, names


def _payload_fmt(vs: VecSet, is_a: bool) -> str:
    return vs.a_fmt if is_a else vs.b_fmt


def make_operands(vs: VecSet, seed: int) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    """The codes of one set: a (M, K), b (K, N) and, for block-scaled sets, a_scale, b_scale."""
    rng = np.random.default_rng([seed, zlib.crc32(vs.name.encode())])
    fa, fb = FMT[vs.a_fmt], FMT[vs.b_fmt]
    a, a_names = _lines(fa, vs.d_fmt, vs.M, vs.K, ROW_CLASSES, True, rng, vs.k)
    bt, b_names = _lines(fb, vs.d_fmt, vs.N, vs.K, COL_CLASSES, False, rng, vs.k)
    arrays: dict[str, np.ndarray] = {}
    if vs.scale_fmt:
        a_s, a_names = _scales_and_payload(vs, a, a_names, True, rng)
        b_s, b_names = _scales_and_payload(vs, bt, b_names, False, rng)
        arrays["a_scale"] = a_s.astype(np.uint8)
        arrays["b_scale"] = np.ascontiguousarray(b_s.T).astype(np.uint8)
    arrays["a"] = a.astype(fa.storage)
    arrays["b"] = np.ascontiguousarray(bt.T).astype(fb.storage)
    return arrays, {"a_rows": a_names, "b_cols": b_names}


# --------------------------------------------------------------------------------------
# Running MMA-Sim.
# --------------------------------------------------------------------------------------

def _import_mmasim(path: str) -> Any:
    """MMA-Sim's ``mmasim.simulator`` package (with its ``nv_ptx`` and ``amd`` modules)."""
    import importlib

    import_package(path, "mmasim")
    importlib.import_module("mmasim.simulator.nv_ptx")
    importlib.import_module("mmasim.simulator.amd")
    return sys.modules["mmasim.simulator"]


def _instruction(sim: Any, vs: VecSet) -> Callable[..., Any]:
    mod = sim.amd if vs.api == "mfma" else sim.nv_ptx
    return getattr(mod, vs.api)(vs.arch, vs.qualifier)


def _to_torch(codes: np.ndarray, fmt: CodeFormat) -> Any:
    import torch
    codes = np.ascontiguousarray(codes)
    if fmt.storage == "uint16":
        return torch.from_numpy(codes.view(np.int16).copy()).view(getattr(torch, fmt.torch_dtype))
    if fmt.storage == "uint32":
        return torch.from_numpy(codes.view(np.int32).copy()).view(getattr(torch, fmt.torch_dtype))
    return torch.from_numpy(codes.copy()).view(getattr(torch, fmt.torch_dtype))


def _pack_e2m1(codes: np.ndarray, axis: int) -> Any:
    """Two E2M1 codes per byte along K (element 2j in the low nibble), as MMA-Sim reads them."""
    import torch
    if axis == 1:
        packed = codes[:, 0::2] | (codes[:, 1::2] << 4)
    else:
        packed = codes[0::2, :] | (codes[1::2, :] << 4)
    return torch.from_numpy(np.ascontiguousarray(packed.astype(np.uint8)))


def _d_bits(d: Any, d_fmt: str) -> np.ndarray:
    import torch
    if d_fmt == "fp16":
        return d.contiguous().view(torch.int16).numpy().view(np.uint16).copy()
    return d.contiguous().view(torch.int32).numpy().view(np.uint32).copy()


def run_tile(instr: Any, vs: VecSet, ops: dict[str, np.ndarray], i0: int, j0: int) -> tuple[np.ndarray, np.ndarray]:
    """The K-chain for the tile at (i0, j0): (d_first, d) bit patterns, each (m, n)."""
    import torch
    m, n, k = vs.m, vs.n, vs.k
    fa, fb = FMT[vs.a_fmt], FMT[vs.b_fmt]
    c = torch.zeros((m, n), dtype=torch.float16 if vs.d_fmt == "fp16" else torch.float32)
    first = None
    for s in range(vs.steps):
        ka, kb = s * k, (s + 1) * k
        a = ops["a"][i0:i0 + m, ka:kb]
        b = ops["b"][ka:kb, j0:j0 + n]
        if vs.scale_fmt:
            sf = FMT[vs.scale_fmt]
            nb = k // (vs.block or 1)
            sa = _to_torch(ops["a_scale"][i0:i0 + m, s * nb:(s + 1) * nb], sf)
            sb = _to_torch(ops["b_scale"][s * nb:(s + 1) * nb, j0:j0 + n], sf)
            if vs.a_fmt == "e2m1":
                ta, tb = _pack_e2m1(a, 1), _pack_e2m1(b, 0)
            else:
                ta, tb = _to_torch(a, fa), _to_torch(b, fb)
            c = instr(ta, tb, c, sa, sb)
        else:
            c = instr(_to_torch(a, fa), _to_torch(b, fb), c)
        if first is None:
            first = _d_bits(c, vs.d_fmt)
    assert first is not None
    return first, _d_bits(c, vs.d_fmt)


def run_set(sim: Any, vs: VecSet, ops: dict[str, np.ndarray],
            tiles: list[tuple[int, int]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """d_first and d for every output (or only the listed tiles; other outputs left 0)."""
    instr = _instruction(sim, vs)
    dt = np.uint16 if vs.d_fmt == "fp16" else np.uint32
    d_first = np.zeros((vs.M, vs.N), dtype=dt)
    d = np.zeros((vs.M, vs.N), dtype=dt)
    if tiles is None:
        tiles = [(i, j) for i in range(0, vs.M, vs.m) for j in range(0, vs.N, vs.n)]
    for i0, j0 in tiles:
        f, r = run_tile(instr, vs, ops, i0, j0)
        d_first[i0:i0 + vs.m, j0:j0 + vs.n] = f
        d[i0:i0 + vs.m, j0:j0 + vs.n] = r
    return d_first, d


# --------------------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------------------

def _counts(d: np.ndarray, d_fmt: str) -> dict[str, int]:
    x = d.view(np.float16 if d_fmt == "fp16" else np.float32)
    bits = d.astype(np.uint64)
    sign = 1 << (15 if d_fmt == "fp16" else 31)
    tiny = np.finfo(x.dtype).tiny
    return {
        "outputs": int(d.size),
        "nan": int(np.isnan(x).sum()),
        "inf": int(np.isinf(x).sum()),
        "zero": int((x == 0).sum()),
        "negative_zero": int(((x == 0) & ((bits & sign) != 0)).sum()),
        "subnormal": int(((x != 0) & (np.abs(x) < tiny)).sum()),
        "finite_nonzero": int((np.isfinite(x) & (x != 0)).sum()),
    }


def _meta(vs: VecSet, seed: int, commit: str, torch_version: str, names: dict[str, list[str]],
          d: np.ndarray) -> dict[str, Any]:
    return {
        "set": vs.name,
        "preset": vs.preset,
        "variant": vs.variant,
        "source": "MMA-Sim (github.com/microsoft/MMA-Sim; Xie et al., arXiv 2511.10909)",
        "mmasim_commit": commit,
        "mmasim_call": f"mmasim.simulator.{vs.vendor}.{vs.api}({vs.arch!r}, {vs.qualifier!r})",
        "instruction": vs.instruction,
        "arch": vs.arch,
        "m": vs.m, "n": vs.n, "k": vs.k,
        "M": vs.M, "N": vs.N, "K": vs.K,
        "steps": vs.steps,
        "a_format": vs.a_fmt,
        "b_format": vs.b_fmt,
        "c_format": vs.d_fmt,
        "d_format": vs.d_fmt,
        "scale_format": vs.scale_fmt,
        "block_size": vs.block,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
        "torch_version": torch_version,
        "chain": "D_0 = mma(A_0, B_0, 0); D_s = mma(A_s, B_s, D_{s-1}), A_s = a[:, s*k:(s+1)*k], "
                 "B_s = b[s*k:(s+1)*k, :]; every m x n tile of the M x N grid on its own",
        "layout": {
            "a": "(M, K) codes of a_format, row-major",
            "b": "(K, N) codes of b_format",
            "a_scale": "(M, K/block_size) scale codes (block-scaled sets only)",
            "b_scale": "(K/block_size, N) scale codes (block-scaled sets only)",
            "d_first": "(M, N) bits of D_0 = mma(A_0, B_0, 0), the first instruction alone",
            "d": "(M, N) bits of the chain's output D_{K/k - 1}",
            "tf32": "tf32 operands are FP32 codes with random low 13 bits (the instruction ignores them)",
            "e2m1": "one E2M1 code per byte, low nibble (MMA-Sim gets them packed two per byte along K)",
        },
        "nan_bits_defined": vs.api != "mfma",
        "row_classes": names["a_rows"],
        "col_classes": names["b_cols"],
        "counts": _counts(d, vs.d_fmt),
        "notes": vs.notes,
    }


def _save(path: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
    blob = np.frombuffer(json.dumps(meta, sort_keys=True, indent=1).encode(), dtype=np.uint8)
    entries = {"__meta__": blob, **{k: np.ascontiguousarray(v) for k, v in sorted(arrays.items())}}
    with open(path, "wb") as fh:
        np.savez(fh, **entries)


def load(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("__meta__").tobytes().decode())
    return arrays, meta


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def generate(sim: Any, out: Path, seed: int, commit: str, only: list[str] | None) -> int:
    import torch
    out.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SETS if not only or s.name in only or s.preset in only]
    if only and not chosen:
        print(f"no set matches {only}", file=sys.stderr)
        return 2
    manifest_path = out / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    manifest.setdefault("sets", {})
    total = 0.0
    for vs in chosen:
        t0 = time.perf_counter()
        ops, names = make_operands(vs, seed)
        d_first, d = run_set(sim, vs, ops)
        meta = _meta(vs, seed, commit, torch.__version__, names, d)
        path = out / f"{vs.name}.npz"
        _save(path, {**ops, "d_first": d_first, "d": d}, meta)
        dt = time.perf_counter() - t0
        total += dt
        manifest["sets"][vs.name] = {"file": path.name, "sha256": _sha256(path), "bytes": path.stat().st_size,
                                     "counts": meta["counts"], "instruction": vs.instruction}
        print(f"{vs.name:40s} {d.size:6d} outputs {dt:7.1f} s  {meta['counts']}", flush=True)
    manifest["mmasim_commit"] = commit
    manifest["seed"] = seed
    manifest["generator_version"] = GENERATOR_VERSION
    manifest["torch_version"] = torch.__version__
    manifest["not_runnable"] = NOT_RUNNABLE
    manifest["sets"] = dict(sorted(manifest["sets"].items()))
    manifest_path.write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"total {total:.1f} s", flush=True)
    return 0


def verify(sim: Any, folder: Path, tiles_per_set: int, seed: int, only: list[str] | None) -> int:
    """Regenerate the operands from the seed and re-run a sample of tiles; compare every bit."""
    bad = 0
    files = sorted(folder.glob("*.npz"))
    for path in files:
        arrays, meta = load(path)
        vs = SETS_BY_NAME.get(meta["set"])
        if vs is None:
            print(f"{path.name}: unknown set {meta['set']!r}")
            bad += 1
            continue
        if only and vs.name not in only and vs.preset not in only:
            continue
        ops, _ = make_operands(vs, meta["seed"])
        same_ops = all(np.array_equal(ops[k], arrays[k]) for k in ops)
        grid = [(i, j) for i in range(0, vs.M, vs.m) for j in range(0, vs.N, vs.n)]
        rng = np.random.default_rng([seed, zlib.crc32(vs.name.encode())])
        pick = [grid[int(t)] for t in rng.choice(len(grid), size=min(tiles_per_set, len(grid)), replace=False)]
        t0 = time.perf_counter()
        d_first, d = run_set(sim, vs, {k: arrays[k] for k in ops}, pick)
        mism = 0
        for i0, j0 in pick:
            sl = (slice(i0, i0 + vs.m), slice(j0, j0 + vs.n))
            mism += int((d_first[sl] != arrays["d_first"][sl]).sum() + (d[sl] != arrays["d"][sl]).sum())
        counts_ok = _counts(arrays["d"], vs.d_fmt) == meta["counts"]
        ok = same_ops and mism == 0 and counts_ok
        bad += 0 if ok else 1
        print(f"{vs.name:40s} tiles {pick} operands-from-seed {'same' if same_ops else 'DIFFER'} "
              f"mismatching bits {mism} counts {'ok' if counts_ok else 'DIFFER'} "
              f"({time.perf_counter() - t0:.1f} s)", flush=True)
    print("verify:", "OK" if bad == 0 else f"{bad} set(s) FAILED")
    return 0 if bad == 0 else 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mmasim", help="folder holding MMA-Sim's 'mmasim' package")
    p.add_argument("--commit", default="", help="the MMA-Sim commit in that folder (recorded in the files)")
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("--out", required=True, type=Path)
    g.add_argument("--seed", type=int, default=DEFAULT_SEED)
    g.add_argument("--only", nargs="*", help="set names (preset__variant) or preset names")
    v = sub.add_parser("verify")
    v.add_argument("dir", type=Path)
    v.add_argument("--tiles", type=int, default=1, help="tiles re-run per set")
    v.add_argument("--seed", type=int, default=0, help="seed of the tile choice")
    v.add_argument("--only", nargs="*")
    sub.add_parser("list")
    args = p.parse_args(argv)
    if args.cmd == "list":
        for s in SETS:
            print(f"{s.name:40s} {s.instruction}  M x N x K = {s.M} x {s.N} x {s.K}")
        for what, why in NOT_RUNNABLE.items():
            print(f"not generated: {what}: {why}")
        return 0
    if not args.mmasim:
        p.error("--mmasim is required")
    sim = _import_mmasim(args.mmasim)
    if args.cmd == "generate":
        if not args.commit:
            p.error("generate needs --commit (recorded in every file)")
        return generate(sim, args.out, args.seed, args.commit, args.only)
    return verify(sim, args.dir, args.tiles, args.seed, args.only)


if __name__ == "__main__":
    sys.exit(main())
