"""GEMM vector sets at kernel shapes (coverage model gemm-shapes, docs/vectors.rst, FPS-VEC-8).

The sets of :mod:`fpspec.vectors.gemm_sets` are 8 x 8 outputs at K = 256; a kernel has
edges those never reach.  This model gives every preset family sets at shapes a tiled
kernel must handle: M and N at and across tile sizes (1, 3, 7, 17, 129), K from 16 to
4096 plus one block (K not a multiple of the model's group where the model takes a K
tail; whole groups, the same shape rounded up, where it requires them), with blocks of
several kinds in every operand: ordinary, wide-range (block scales over the scale
format's range), tiny (scales at and below the smallest one: subnormal and zero
scales), all-zero blocks, a zero row of A and a zero row of BT, and special codes where
the operand format has them.

A set's arrays hold one shape for all its cases, so each shape is its own set
(``gemm-shapes-<preset>-<operands>-<M>x<N>x<K>``).  A ladder of a few shapes per preset
and operand kind, instead of every shape for every preset, keeps the pack small:

* quantized FP4 operands (UE5M3 and NVFP4 with tensor scales, MXFP4; the presets whose
  operand contract takes them, FPS-GEMM-25): 129 x 17 x 16, 7 x 129 x 144, 17 x 7 x 1040 and
  1 x 3 x 4112; the two ends only where another preset's ladder holds the same chain
  (:data:`SHORT_LADDER_OF`);
* plain codes (FP8, FP16, BF16; MXFP8 and block-16 MXFP4 built from codes for the
  instruction presets): 129 x 17 x 80 and 1 x 3 x 4112;
* the cuBLAS library presets, whose model depends on the shape: 129 x 17 x 80 and
  3 x 17 x 4112 (shapes cuBLAS runs on tensor-core kernels fpspec models, with K slices).

Inputs and outputs are laid out as in :mod:`fpspec.vectors.gemm_sets` (``gemm``
operation); quantized operands carry their tensor scales (``X_amax``,
``X_encode_scale``, ``X_decode_scale``), applied where the preset's contract puts them
(folded into decoded operands, the model's alpha, or the FP32 alpha epilogue after an
instruction chain: ``shape_coverage.tensor_scales``), and the meta's ``operand`` names
scheme, profile, block, tile and T.  Expected outputs come from :func:`fpspec.matmul.gemm`
(fast path, bit-equal to the exact spec by test).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..convert import encode
from ..cublas.h200 import call_shape
from ..formats import get_format
from ..cublas.library import LIBRARY, resolve
from ..models import GemmModel, contract_of
from ..presets import PRESETS
from ..quantization import quantize
from ..quantized import QuantizedTensor
from ..schemes import CODES_SCHEME
from . import coverage
from .coverage import SetPlan, make_meta
from .gemm_sets import _finite_codes, _q_inputs
from .schema import tag_mask

__all__ = ["SHAPE_PRESETS", "QUANTIZED_LADDER", "QUANTIZED_SHORT", "SHORT_LADDER_OF", "PLAIN_LADDER",
           "LIBRARY_LADDER", "QUANTIZED_KINDS", "CODE_KINDS", "UE5M3_WIDE_TARGET", "model_gemm_shapes",
           "shape_k", "shapes_of"]

#: (M, N, K) of each ladder before K is fitted to the model (:func:`shape_k`).  M and N: one
#: row (a GEMV), 3 and 7 (below an 8-wide tile), 17 (one past 16), 129 (one past 128); K: one
#: block, 128 + 16, 1024 + 16 and 4096 + 16 (a partial group of 16 for G = 32, 64, 128).
QUANTIZED_LADDER = ((129, 17, 16), (7, 129, 144), (17, 7, 1040), (1, 3, 4112))
#: The two ends of the quantized ladder, for a preset whose chain and operands another preset's full
#: ladder already covers (:data:`SHORT_LADDER_OF`).
QUANTIZED_SHORT = ((129, 17, 16), (1, 3, 4112))
PLAIN_LADDER = ((129, 17, 80), (1, 3, 4112))
#: cuBLAS runs BF16 and FP16 GEMMs of 1 x 3 x 4112 on a SIMT kernel fpspec does not model: their
#: long shape is 3 x 17 x 4112 (K split into slices on the H200); FP8 calls are padded to 16
#: rows (torch._scaled_mm) and keep 1 x 3 x 4112.
LIBRARY_LADDER = ((129, 17, 80), (3, 17, 4112))

#: Quantized operand kinds: scheme, profile, block, scale format, target T (None: no tensor scale).
QUANTIZED_KINDS: dict[str, tuple[str, str, int, str, float | None]] = {
    "ue5m3": ("ue5m3", "exact", 16, "ue5m3", 448.0),
    "nvfp4": ("nvfp4", "te-fp32", 16, "ue4m3", 448.0),
    "mxfp4": ("mxfp4", "floor", 32, "ue8m0", None),
}
#: T of the UE5M3 sets at K = 1040: UE5M3's largest value, so that block scales reach the top
#: of the format (at T = 448 they stop at 448; the smallest, 2^-17, is reached either way).
UE5M3_WIDE_TARGET = 61440.0
#: Operands built from codes (the instruction presets: no tensor scale): kind -> (payload, scale, block).
CODE_KINDS: dict[str, tuple[str, str, int]] = {
    "nvfp4-codes": ("e2m1", "ue4m3", 16), "mxfp4-codes": ("e2m1", "ue8m0", 32),
    "mxfp4-b16-codes": ("e2m1", "ue8m0", 16), "mxfp8-e4m3": ("e4m3", "ue8m0", 32),
    "mxfp8-e5m2": ("e5m2", "ue8m0", 32),
}
_PLAIN_KINDS = {"e4m3": ("e4m3", "e4m3"), "e5m2": ("e5m2", "e5m2"), "bf16": ("bf16", "bf16"),
                "fp16": ("fp16", "fp16"), "e4m3-e5m2": ("e4m3", "e5m2"),
                "e4m3fnuz-e5m2fnuz": ("e4m3fnuz", "e5m2fnuz")}

#: Operand kinds of each preset in this model: the operands the model is defined for (its
#: natural inputs; FP4 with tensor scales where the model applies alpha).
SHAPE_PRESETS: dict[str, list[str]] = {
    "seed-probe-matched": ["ue5m3", "nvfp4"], "seed-probe-matched-nosnap": ["ue5m3", "nvfp4"],
    "seed-triton-h200": ["bf16", "ue5m3"], "seed-triton-h200-snap": ["bf16", "ue5m3"],
    "decoded-fp32": ["ue5m3", "nvfp4", "mxfp4"], "exact": ["ue5m3", "nvfp4", "mxfp4"],
    "km-h100-fp8": ["e4m3"], "km-h100-fp8-promote128": ["e4m3"], "km-b200-fp8": ["e4m3"],
    "km-h100-bf16": ["bf16"], "km-a100-bf16": ["bf16"], "km-v100-fp16": ["fp16"],
    "sm70-f16": ["fp16"], "sm75-f16": ["fp16"], "sm80-f16": ["bf16"], "sm80-f16-f16acc": ["fp16"],
    "sm89-fp8": ["e4m3-e5m2"], "sm90-f16": ["bf16"], "sm90-f16-f16acc": ["fp16"], "sm90-fp8": ["e4m3"],
    "sm100-f16": ["bf16"], "sm100-f8f6f4": ["e4m3-e5m2"], "sm100-mxf8f6f4": ["mxfp8-e4m3"],
    "sm100-mxf4nvf4": ["nvfp4", "mxfp4"], "sm120-f8f6f4": ["e5m2"],
    "sm120-mxf8f6f4": ["mxfp8-e5m2"], "sm120-mxf4nvf4": ["nvfp4", "mxfp4-b16-codes"],
    "cdna3-f16": ["bf16"], "cdna3-fp8": ["e4m3fnuz-e5m2fnuz"],
    "cublas-h200-bf16": ["bf16"], "cublas-h200-fp16": ["fp16"], "cublas-h200-fp8": ["e4m3"],
    "cublas-h200-fp8-fast": ["e4m3"],
}

#: (preset, quantized kind) -> why two shapes (:data:`QUANTIZED_SHORT`) suffice: another preset's full
#: ladder holds the same chain on the same operands, or the chain and the operands apart.
_SEED_TRITON_SHORT = "its chain is the BF16 sets', its UE5M3 operands have seed-probe-matched's full ladder"
SHORT_LADDER_OF: dict[tuple[str, str], str] = {
    ("sm120-mxf4nvf4", "nvfp4"): "its chain is sm100-mxf4nvf4's, which has the full ladder",
    ("seed-triton-h200", "ue5m3"): _SEED_TRITON_SHORT, ("seed-triton-h200-snap", "ue5m3"): _SEED_TRITON_SHORT,
}

#: Seeds: 5400 + the set's index in this model's list (a new preset or shape appends).
_SEED0 = 5400
#: Block kinds and their weights (per mille) in every operand, drawn per block.
_KINDS = ("normal", "wide", "tiny", "zero")
_WEIGHTS = np.array([450, 300, 150, 100])


@dataclass(frozen=True)
class _Case:
    """What one case holds, for the meta's ``shape_coverage`` (checked by the tests)."""

    zero_blocks: int
    tiny_blocks: int
    wide_blocks: int
    specials: int


def _model_of(preset: str, shape: tuple[int, int, int]) -> GemmModel:
    if preset in LIBRARY:
        return resolve(preset, call_shape(preset, shape))
    return PRESETS[preset].model


def shape_k(preset: str, k: int, block: int) -> int:
    """K of a ladder rung for a preset: K rounded up to whole scale blocks, and to whole groups
    and instructions where the model requires them (``require_full_groups``, ``instruction_k``)."""
    m = PRESETS[preset].model if preset in PRESETS else LIBRARY[preset].model
    unit = block
    if m.instruction_k is not None:
        unit = math.lcm(unit, m.instruction_k)
    if m.require_full_groups and m.group_size is not None:
        unit = math.lcm(unit, m.group_size)
    return -(-k // unit) * unit


def _block_kinds(rng: np.random.Generator, rows: int, blocks: int) -> np.ndarray:
    """A block kind index per (row, block); every kind at least once where there are 4 blocks."""
    draw = rng.integers(0, int(_WEIGHTS.sum()), size=(rows, blocks), dtype=np.int64)  # integer draws (FPS-VEC-10)
    kinds = np.searchsorted(np.cumsum(_WEIGHTS), draw, side="right")
    flat = kinds.reshape(-1)
    if flat.size >= len(_KINDS):
        flat[:len(_KINDS)] = np.arange(len(_KINDS))[::-1]  # row 0 starts with zero, tiny, wide, normal
    return kinds


def _span(scale_format: str, target: float | None) -> int:
    """Binades from the largest block scale to the smallest positive one: log2(T / s_min), or
    40 for UE8M0 (no tensor scale; its range is wider than any FP32 dot product)."""
    if target is None:
        return 40
    return math.ceil(math.log2(target / float(get_format(scale_format).min_positive)))


def _block_values(rng: np.random.Generator, rows: int, k: int, block: int, span: int, scale: int,
                  tiny_floor: int | None) -> tuple[np.ndarray, np.ndarray]:
    """float32 (rows, K) built block by block: ordinary blocks (2^-4..1 of the tensor's top),
    wide ones (2^-span..1), tiny ones (2^-(span+8)..2^-(span-2): scales at and below the
    smallest), zero blocks; all values times 2^scale.  Returns the values and the kinds."""
    nb = k // block
    kinds = _block_kinds(rng, rows, nb)
    lo = np.array([-4, -span, -span - 8, 0])[kinds]
    hi = np.array([0, 0, -span + 2, 0])[kinds]
    e = rng.integers(0, 1 << 16, size=(rows, nb), dtype=np.uint64).astype(np.int64) % (hi - lo + 1) + lo
    u = rng.integers(0, 1 << 20, size=(4, rows, nb, block), dtype=np.uint64).astype(np.float64)
    centred = u.sum(axis=0) / (1 << 20) - 2.0  # a sum of four uniforms, in [-2, 2)
    v = centred * np.ldexp(1.0, (e + scale).astype(np.int32))[..., None]
    if tiny_floor is not None:  # MXFP4: tiny blocks just above FP32's smallest values (scales near 2^-127)
        t = kinds == 2
        v[t] = centred[t] * np.ldexp(1.0, tiny_floor)
    v[kinds == 3] = 0.0
    return v.reshape(rows, k).astype(np.float32), kinds


def _quantized_operand(rng: np.random.Generator, kind: str, rows: int, k: int, target: float | None,
                       zero_row: int) -> tuple[QuantizedTensor, _Case]:
    scheme, profile, block, sf, _ = QUANTIZED_KINDS[kind]
    span = _span(sf, target)
    scale = int(rng.integers(0, 33, dtype=np.int64)) - 16  # the tensor's top: 2^-16..2^16, alpha != 1
    v, kinds = _block_values(rng, rows, k, block, span, scale, -125 if target is None else None)
    if zero_row < rows and rows > 1:
        v[zero_row] = 0.0
        kinds[zero_row] = 3
    kw: dict[str, Any] = {"profile": profile, "block": block}
    if target is not None:
        kw["target"] = target
    q = quantize(v, scheme, **kw)
    return q, _Case(int((kinds == 3).sum()), int((kinds == 2).sum()), int((kinds == 1).sum()), 0)


def _code_operand(rng: np.random.Generator, kind: str, rows: int, k: int, specials: bool,
                  zero_row: int) -> tuple[np.ndarray, np.ndarray, _Case]:
    """Payload codes and scale bytes: random finite payloads; per block an ordinary scale, one
    over a wide range, a tiny one (UE4M3 subnormals, UE8M0 2^-127..2^-118), or a zero block
    (zero payloads, and scale 0 for UE4M3); a NaN scale in one block of row 2 where ``specials``."""
    pf, sf, block = CODE_KINDS[kind]
    nb = k // block
    kinds = _block_kinds(rng, rows, nb)
    codes = _finite_codes(rng, pf, (rows, k))
    # the (lowest, highest) scale code of each block kind: normal, wide, tiny, zero
    ranges = np.array([(0x30, 0x48), (0x01, 0x7E), (0x01, 0x07), (0x00, 0x00)] if sf == "ue4m3" else
                      [(120, 134), (70, 180), (0, 9), (100, 140)], dtype=np.int64)
    lo, hi = ranges[kinds, 0], ranges[kinds, 1]
    scales = (rng.integers(0, 1 << 16, size=(rows, nb), dtype=np.uint64).astype(np.int64) % (hi - lo + 1)
              + lo).astype(np.uint8)
    codes.reshape(rows, nb, block)[kinds == 3] = 0
    if zero_row < rows and rows > 1:
        codes[zero_row] = 0
        kinds[zero_row] = 3
    n_special = 0
    if specials and rows > 2:
        scales[2, nb // 2] = get_format(sf).nan_code
        n_special = 1
    return codes, scales, _Case(int((kinds == 3).sum()), int((kinds == 2).sum()), int((kinds == 1).sum()),
                                n_special)


def _plain_operand(rng: np.random.Generator, fmt: str, rows: int, k: int, specials: bool,
                   zero_row: int) -> tuple[np.ndarray, _Case]:
    """Codes of one plain format, block by block (16 elements): ordinary values (2^-4..2^4;
    FP16 2^-4..2^0), wide ones over the format's normal range (BF16 2^-20..2^20, FP16
    2^-14..2^2, so that an FP16 accumulator rarely overflows), tiny ones (subnormals, some that
    round to zero), zero runs; a NaN in row 2 and an Inf (or a second NaN) in row 3 where
    ``specials``."""
    f = get_format(fmt)
    block = 16
    nb = k // block
    kinds = _block_kinds(rng, rows, nb)
    top = {"bf16": 20, "fp16": 2}.get(fmt, f.emax - 1)
    bottom = max(f.emin, -20)
    sub = f.emin - f.man_bits
    lo = np.array([-4, bottom, sub - 1, 0])[kinds]
    hi = np.array([0 if fmt == "fp16" else 4, top, f.emin - 1, 0])[kinds]
    e = (rng.integers(0, 1 << 16, size=(rows, nb, block), dtype=np.uint64).astype(np.int64)
         % (hi - lo + 1)[..., None] + lo[..., None])
    u = rng.integers(0, 1 << 20, size=(rows, nb, block), dtype=np.uint64).astype(np.float64) / (1 << 20)
    sign = np.where(rng.integers(0, 2, size=(rows, nb, block), dtype=np.uint64) == 1, -1.0, 1.0)
    v = sign * (1 + u) * np.ldexp(1.0, e.astype(np.int32))
    v[kinds == 3] = 0.0
    v = v.reshape(rows, k)
    if zero_row < rows and rows > 1:
        v[zero_row] = 0.0
        kinds[zero_row] = 3
    codes = encode(v.astype(np.float32), fmt, "rne")
    n_special = 0
    if specials and rows > 3:
        codes[2, k // 3] = f.nan_code
        codes[3, k // 2] = f.inf_code if f.has_inf else f.nan_code
        n_special = 2
    return codes, _Case(int((kinds == 3).sum()), int((kinds == 2).sum()), int((kinds == 1).sum()), n_special)


def _codes_meta(prefix: str, rows: int, k: int, pf: str, sf: str, block: int, tensor: bool) -> dict[str, dict]:
    what = "BT codes (N, K): B's columns as rows" if prefix == "bt" else "A codes (M, K)"
    out = {f"{prefix}_codes": {"format": pf, "dtype": "uint8", "shape": [rows, k],
                               "role": f"{what}: {pf} payload codes, one per byte"},
           f"{prefix}_scales": {"format": sf, "dtype": "uint8", "shape": [rows, k // block],
                                "role": f"{sf} block scale codes (block {block}), row-major"}}
    if tensor:
        for key, role in (("amax", "tensor amax"), ("encode_scale", "tensor encode scale"),
                          ("decode_scale", "tensor decode scale")):
            out[f"{prefix}_{key}"] = {"format": "fp32", "dtype": "uint32", "shape": [], "role": role}
    return out


def _operands(kind: str, rng: np.random.Generator, cases: int, m: int, n: int, k: int, target: float | None):
    """Inputs, input meta, the meta's ``operand`` (or None) and the cases' contents."""
    specials = m > 3
    contents: list[list[_Case]] = []
    if kind in QUANTIZED_KINDS:
        scheme, profile, block, sf, _ = QUANTIZED_KINDS[kind]
        qa, qb = [], []
        for _ in range(cases):
            a, ca = _quantized_operand(rng, kind, m, k, target, 0)
            b, cb = _quantized_operand(rng, kind, n, k, target, 1)
            qa.append(a)
            qb.append(b)
            contents.append([ca, cb])
        inputs = {**_q_inputs(qa, "a"), **_q_inputs(qb, "bt")}
        meta = {**_codes_meta("a", m, k, "e2m1", sf, block, True), **_codes_meta("bt", n, k, "e2m1", sf, block, True)}
        operand = {"scheme": scheme, "profile": profile, "block": block, "tile": "1xB", "target": target,
                   "scale_format": sf}
        return inputs, meta, operand, contents
    if kind in CODE_KINDS:
        pf, sf, block = CODE_KINDS[kind]
        arrays: dict[str, list[np.ndarray]] = {"a_codes": [], "a_scales": [], "bt_codes": [], "bt_scales": []}
        for _ in range(cases):
            row = []
            for prefix, rows, zero_row in (("a", m, 0), ("bt", n, 1)):
                c, s, info = _code_operand(rng, kind, rows, k, specials and prefix == "a", zero_row)
                arrays[f"{prefix}_codes"].append(c)
                arrays[f"{prefix}_scales"].append(s)
                row.append(info)
            contents.append(row)
        inputs = {key: np.stack(v) for key, v in arrays.items()}
        meta = {**_codes_meta("a", m, k, pf, sf, block, False), **_codes_meta("bt", n, k, pf, sf, block, False)}
        return inputs, meta, {"scheme": CODES_SCHEME, "payload_format": pf, "scale_format": sf,
                              "block": block}, contents
    fa, fb = _PLAIN_KINDS[kind]
    plain: dict[str, list[np.ndarray]] = {"a": [], "bt": []}
    for _ in range(cases):
        a, ca = _plain_operand(rng, fa, m, k, specials, 0)
        b, cb = _plain_operand(rng, fb, n, k, False, 1)
        plain["a"].append(a)
        plain["bt"].append(b)
        contents.append([ca, cb])
    inputs = {key: np.stack(v) for key, v in plain.items()}
    meta = {"a": {"format": fa, "dtype": inputs["a"].dtype.name, "shape": [m, k], "role": "A codes (M, K)"},
            "bt": {"format": fb, "dtype": inputs["bt"].dtype.name, "shape": [n, k],
                   "role": "BT codes (N, K): B's columns as rows"}}
    return inputs, meta, None, contents


def _coverage(preset: str, model: GemmModel, shape: tuple[int, int, int], contents: list[list[_Case]],
              tensor: bool) -> dict[str, Any]:
    """The meta's ``shape_coverage``: what the set's cases hold (the tests check these claims);
    ``tensor_scales``: where the preset's contract puts the operands' tensor scales (FPS-GEMM-25)."""
    m, n, k = shape
    g = model.group_size
    return {"m": m, "n": n, "k": k, "group_size": g, "k_tail": (k % g) if g else 0,
            "tensor_scales": contract_of(preset).tensor_scales(model) if tensor else None,
            "require_full_groups": model.require_full_groups, "instruction_k": model.instruction_k,
            "k_tile": model.k_tile, "k_tile_tail": (k % model.k_tile) if model.k_tile else 0,
            "k_slices": len(model.slice_lengths(k)),
            "tensor_scale": tensor,
            "zero_blocks": sum(c.zero_blocks for row in contents for c in row),
            "tiny_blocks": sum(c.tiny_blocks for row in contents for c in row),
            "wide_blocks": sum(c.wide_blocks for row in contents for c in row),
            "specials": sum(c.specials for row in contents for c in row),
            "zero_rows": {"a": 0 if m > 1 else None, "bt": 1 if n > 1 else None}}


def _describe(preset: str, model: GemmModel, kind: str, shape: tuple[int, int, int], cov: dict[str, Any],
              target: float | None) -> str:
    m, n, k = shape
    if kind in QUANTIZED_KINDS:
        ops = (f"{kind} operands quantized with tensor scales (T = {target:g}), the tensor scales "
               + contract_of(preset).tensor_scales_text(model)
               if target is not None else f"{kind} operands (E8M0 scales, no tensor scale)")
    elif kind in CODE_KINDS:
        ops = f"{kind} operands given as payload codes and scale bytes (no tensor scale)"
    else:
        ops = f"{kind} codes"
    tail = (f"K tail of {cov['k_tail']} past whole groups of {cov['group_size']}" if cov["k_tail"]
            else f"a partial K tile of {cov['k_tile_tail']} (tiles of {cov['k_tile']})" if cov["k_tile_tail"]
            else "whole groups (the model requires them)" if cov["require_full_groups"] or cov["instruction_k"]
            else "K in whole groups")
    short = SHORT_LADDER_OF.get((preset, kind))
    return (f"{m} x {n} x {k} under {preset}: {ops}; M and N at and across tile edges, {tail}; ordinary, "
            "wide-range, tiny and zero blocks, a zero row of A and of BT"
            + (", special codes" if cov["specials"] else "") + " (one set per shape: a set's arrays have one shape"
            + (f"; two shapes only: {short})" if short else ")"))


def _plan(preset: str, kind: str, shape: tuple[int, int, int], level: int, seed: int) -> SetPlan:
    m, n, k = shape
    rng = np.random.Generator(np.random.PCG64(seed))
    cases = 1 if level == 1 else 4
    target = None
    if kind in QUANTIZED_KINDS:
        target = QUANTIZED_KINDS[kind][4]
        if kind == "ue5m3" and k == 1040:
            target = UE5M3_WIDE_TARGET
    inputs, in_meta, operand, contents = _operands(kind, rng, cases, m, n, k, target)
    model = _model_of(preset, shape)
    fp16 = model.output_format == "fp16"
    out = {"c": {"format": "fp16" if fp16 else "fp32", "dtype": "uint16" if fp16 else "uint32", "shape": [m, n],
                 "layout": f"{'FP16' if fp16 else 'FP32'} bits of C, row-major",
                 "depends_on": [f"gemm-model:{preset}"]}}
    tensor = kind in QUANTIZED_KINDS and target is not None
    cov = _coverage(preset, model, shape, contents, tensor)
    used = {i["format"] for i in in_meta.values()} | {out["c"]["format"]}
    extra: dict[str, Any] = {"params": {"model": preset, "operands": kind}, "model": preset,
                             "formats_used": sorted(used), "shape_coverage": cov}
    if operand is not None:
        extra["operand"] = operand
        if kind in QUANTIZED_KINDS:
            extra["scheme"] = operand["scheme"]
    name = f"gemm-shapes-{preset}-{kind}-{m}x{n}x{k}"
    reqs = ["FPS-GEMM-1", "FPS-GEMM-3", "FPS-VEC-8"] + (["FPS-GEMM-8"] if tensor else []) \
        + (["FPS-GEMM-2"] if cov["specials"] else []) + (["FPS-CUB-6"] if preset in LIBRARY else [])
    meta = make_meta(name, "gemm", "gemm-shapes", _describe(preset, model, kind, shape, cov, target), reqs, seed,
                     level, cases, in_meta, out, key="array", **extra)
    tags = tag_mask("wide_range", "profile_dependent", "zero_block")
    if cov["specials"]:
        tags |= tag_mask("nan_input") | (tag_mask("inf_input") if kind in _PLAIN_KINDS and get_format(
            _PLAIN_KINDS[kind][0]).has_inf else 0)
    return SetPlan(name, meta, inputs, np.full(cases, tags, dtype=np.uint32),
                   key=np.arange(cases, dtype=np.uint64), impl="fast")


def _ladder(preset: str, kind: str) -> tuple[tuple[int, int, int], ...]:
    if preset in LIBRARY and kind != "e4m3":
        return LIBRARY_LADDER
    if (preset, kind) in SHORT_LADDER_OF:
        return QUANTIZED_SHORT
    return QUANTIZED_LADDER if kind in QUANTIZED_KINDS else PLAIN_LADDER


def _block_of(kind: str) -> int:
    if kind in QUANTIZED_KINDS:
        return QUANTIZED_KINDS[kind][2]
    if kind in CODE_KINDS:
        return CODE_KINDS[kind][2]
    return 16


def shapes_of(preset: str, kind: str) -> list[tuple[int, int, int]]:
    """The (M, N, K) of a preset's sets for one operand kind, K fitted to the model."""
    return [(m, n, shape_k(preset, k, _block_of(kind))) for m, n, k in _ladder(preset, kind)]


def model_gemm_shapes(level: int) -> list[SetPlan]:
    """gemm-shapes: per preset (library presets included) and operand kind, a ladder of
    shapes a tiled kernel must handle: M and N across tile edges (1, 3, 7, 17, 129), K from 16
    to 4096 + 16 (a K tail where the model takes one, whole groups where it requires them);
    FP4 operands with tensor scales (UE5M3, NVFP4; MXFP4), plain and block-scaled codes;
    ordinary, wide-range, tiny and zero blocks, zero rows, special codes; one set per shape."""
    plans, i = [], 0
    for preset, kinds in SHAPE_PRESETS.items():  # a new preset or kind appends: earlier sets keep their seeds
        for kind in kinds:
            for shape in shapes_of(preset, kind):
                plans.append(_plan(preset, kind, shape, level, _SEED0 + i))
                i += 1
    return plans


coverage.COVERAGE_MODELS["gemm-shapes"] = model_gemm_shapes
