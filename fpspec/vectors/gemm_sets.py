"""GEMM vector sets (coverage models gemm-order-independent, gemm-model-wide).

Operation ``gemm``: C = A @ BT^T to FP32 under a named model (:mod:`fpspec.models`).
Plain operands: inputs ``a`` (C, M, K) and ``bt`` (C, N, K) codes of ``fmt``
(e4m3, bf16, fp16).  Quantized operands (E2M1 payloads with block scales): for
each operand X in (a, bt): ``X_codes`` (E2M1 codes one per byte), ``X_scales``
(row-major block order), ``X_amax``, ``X_encode_scale``, ``X_decode_scale``
(FP32 bits); the scheme, block, tile and T are in the meta's ``operand``.
Output ``c``: FP32 bits (C, M, N).  Expected outputs come from
:func:`fpspec.matmul.gemm`, whose fast path is tested bit-equal to the exact spec.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..convert import encode
from ..matmul import gemm
from ..models import PRESETS
from ..quantization import quantize
from ..quantized import QuantizedTensor
from . import coverage
from .coverage import SetPlan, make_meta
from .ops import register_operation
from .schema import tag_mask

__all__ = ["gemm_op", "PRESET_OPERANDS"]

M = N = 8
K = 256
_QOP = {"scheme": "ue5m3", "profile": "exact", "block": 16, "tile": "1xB", "target": 448.0,
        "scale_format": "ue5m3"}
#: Which operand kinds each preset is exercised on (its natural inputs).
PRESET_OPERANDS: dict[str, list[str]] = {
    "seed-probe-matched": ["ue5m3"], "seed-probe-matched-nosnap": ["ue5m3"],
    "decoded-fp32": ["ue5m3", "e4m3"], "exact": ["ue5m3", "e4m3", "bf16"],
    "km-h100-fp8": ["e4m3"], "km-h100-fp8-promote128": ["e4m3"], "km-b200-fp8": ["e4m3"],
    "km-h100-bf16": ["bf16"], "km-a100-bf16": ["bf16"], "km-v100-fp16": ["fp16"],
}
_Q_FIELDS = ("codes", "scales", "amax", "encode_scale", "decode_scale")


def _qt(inputs: dict[str, np.ndarray], prefix: str, i: int, op: dict[str, Any]) -> QuantizedTensor:
    f32 = lambda k: np.uint32(inputs[f"{prefix}_{k}"][i]).view(np.float32)  # noqa: E731
    return QuantizedTensor(codes=inputs[f"{prefix}_codes"][i], scales=inputs[f"{prefix}_scales"][i],
                           scale_format=op["scale_format"], block=op["block"], tile=op["tile"],
                           encode_scale=f32("encode_scale"), decode_scale=f32("decode_scale"),
                           amax=f32("amax"), scheme=op["scheme"], profile=op["profile"],
                           params={"target": str(op["target"])})


def gemm_op(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    model = meta["params"]["model"]
    kind = meta["params"]["operands"]
    out = []
    n = meta["cases"]
    for i in range(n):
        if kind in ("e4m3", "bf16", "fp16"):
            c = gemm(inputs["a"][i], inputs["bt"][i], model, fmt=kind, impl=impl)
        else:
            c = gemm(_qt(inputs, "a", i, meta["operand"]), _qt(inputs, "bt", i, meta["operand"]), model, impl=impl)
        out.append(np.asarray(c, dtype=np.float32).view(np.uint32))
    return {"c": np.stack(out)}


register_operation("gemm", gemm_op)


def _int_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    v = rng.integers(lo, hi + 1, size=shape, dtype=np.int64).astype(np.float32)
    return encode(v, fmt, "rne")


def _wide_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    if fmt == "e4m3":
        c = rng.integers(0, 0x7F, size=shape, dtype=np.uint64).astype(np.uint8)  # finite magnitudes
        s = rng.integers(0, 2, size=shape, dtype=np.uint64).astype(np.uint8) << 7
        return c | s
    lo, hi = (-20, 20) if fmt == "bf16" else (-14, 15)
    e = rng.integers(lo, hi + 1, size=shape, dtype=np.int64)
    mant = rng.integers(0, 1 << 24, size=shape, dtype=np.uint64).astype(np.float64) / (1 << 24) + 1
    sign = np.where(rng.integers(0, 2, size=shape, dtype=np.uint64) == 1, -1.0, 1.0)
    v = (sign * mant * np.ldexp(1.0, e.astype(np.int32))).astype(np.float32)
    return encode(v, fmt, "rne")


def _q_inputs(qts: list[QuantizedTensor], prefix: str) -> dict[str, np.ndarray]:
    d = {f"{prefix}_codes": np.stack([q.codes for q in qts]),
         f"{prefix}_scales": np.stack([q.scales for q in qts])}
    for k in ("amax", "encode_scale", "decode_scale"):
        d[f"{prefix}_{k}"] = np.array([np.float32(getattr(q, k)) for q in qts], dtype=np.float32).view(np.uint32)
    return d


def _q_meta(prefix: str, rows: int) -> dict[str, dict]:
    b = _QOP["block"]
    return {
        f"{prefix}_codes": {"format": "e2m1", "dtype": "uint8", "shape": [rows, K], "role": "E2M1 codes, one per byte"},
        f"{prefix}_scales": {"format": _QOP["scale_format"], "dtype": "uint8", "shape": [rows, K // b],
                             "role": "block scale codes, row-major"},
        f"{prefix}_amax": {"format": "fp32", "dtype": "uint32", "shape": [], "role": "tensor amax"},
        f"{prefix}_encode_scale": {"format": "fp32", "dtype": "uint32", "shape": [], "role": "tensor encode scale"},
        f"{prefix}_decode_scale": {"format": "fp32", "dtype": "uint32", "shape": [], "role": "tensor decode scale"},
    }


def _operands(kind: str, rng: np.random.Generator, cases: int, order_independent: bool):
    if kind in ("e4m3", "bf16", "fp16"):
        mk = (lambda s: _int_codes(rng, kind, s, -2, 2)) if order_independent else (lambda s: _wide_codes(rng, kind, s))
        a = np.stack([mk((M, K)) for _ in range(cases)])
        bt = np.stack([mk((N, K)) for _ in range(cases)])
        dt = a.dtype.name
        return ({"a": a, "bt": bt},
                {"a": {"format": kind, "dtype": dt, "shape": [M, K], "role": "A codes (M, K)"},
                 "bt": {"format": kind, "dtype": dt, "shape": [N, K], "role": "BT codes (N, K): B's columns as rows"}})
    qa, qb = [], []
    for _ in range(cases):
        if order_independent:  # E2M1 in +-{0..2}, scales in {0.5, 1, 2}, amax = 6T: alpha = 1, all sums exact
            for lst, rows in ((qa, M), (qb, N)):
                codes = rng.integers(0, 5, size=(rows, K), dtype=np.uint64).astype(np.uint8)
                codes |= (rng.integers(0, 2, size=(rows, K), dtype=np.uint64).astype(np.uint8) << 3)
                scales = np.array([0x70, 0x78, 0x80], dtype=np.uint8)[
                    rng.integers(0, 3, size=(rows, K // 16), dtype=np.uint64)]
                lst.append(QuantizedTensor(codes=codes, scales=scales, scale_format="ue5m3", block=16, tile="1xB",
                                           encode_scale=np.float32(1), decode_scale=np.float32(1),
                                           amax=np.float32(6 * 448), scheme="ue5m3", profile="exact",
                                           params={"target": "448.0"}))
        else:
            for lst, rows in ((qa, M), (qb, N)):
                e = rng.integers(-12, 13, size=(rows, K // 16, 1), dtype=np.int64)
                u = rng.integers(0, 1 << 20, size=(4, rows, K // 16, 16), dtype=np.uint64).astype(np.float64)
                v = ((u.sum(axis=0) / (1 << 20) - 2.0) * np.ldexp(1.0, e.astype(np.int32))).reshape(rows, K)
                lst.append(quantize(v.astype(np.float32), "ue5m3", profile="exact", target=448.0))
    inputs = {**_q_inputs(qa, "a"), **_q_inputs(qb, "bt")}
    return inputs, {**_q_meta("a", M), **_q_meta("bt", N)}


def _plan(name: str, model: str | None, kind: str, level: int, seed: int, order_independent: bool) -> SetPlan:
    rng = np.random.Generator(np.random.PCG64(seed))
    cases = 3 if level == 1 else 16
    inputs, in_meta = _operands(kind, rng, cases, order_independent)
    compute_model = model or "exact"
    depends = [] if order_independent else [f"gemm-model:{model}"]
    out = {"c": {"format": "fp32", "dtype": "uint32", "shape": [M, N], "layout": "FP32 bits of C, row-major",
                 "depends_on": depends}}
    if order_independent:
        desc = (f"integer-valued {kind} operands: every accumulation order gives these FP32 outputs "
                "(every correct kernel passes, whatever its model)")
        model_doc = "gemm-order-independent"
        tags = tag_mask("order_independent")
    else:
        desc = f"wide-range {kind} operands, FP32 outputs of model {model}"
        model_doc = "gemm-model-wide"
        tags = tag_mask("wide_range", "profile_dependent")
    extra: dict[str, Any] = {"params": {"model": compute_model, "operands": kind}, "model": model,
                             "formats_used": sorted({kind if kind != "ue5m3" else "e2m1", "fp32"}
                                                    | ({"ue5m3"} if kind == "ue5m3" else set()))}
    if kind == "ue5m3":
        extra["operand"] = dict(_QOP)
        extra["scheme"] = "ue5m3"
    meta = make_meta(name, "gemm", model_doc, desc, ["FPS-GEMM-1", "FPS-GEMM-3", "FPS-VEC-8"], seed, level,
                     cases, in_meta, out, key="array", **extra)
    return SetPlan(name, meta, inputs, np.full(cases, tags, dtype=np.uint32),
                   key=np.arange(cases, dtype=np.uint64), impl="fast")


def model_gemm_order_independent(level: int) -> list[SetPlan]:
    """gemm-order-independent: integer-valued operands (E4M3, BF16, FP16 codes in -2..2;
    UE5M3-scaled E2M1 with scales in {1/2, 1, 2} and alpha = 1) whose every partial sum is
    exact in FP32 and inside every preset's alignment window: one output, every model."""
    return [_plan(f"gemm-order-independent-{k}", None, k, level, 5000 + i, True)
            for i, k in enumerate(("e4m3", "bf16", "fp16", "ue5m3"))]


def model_gemm_wide(level: int) -> list[SetPlan]:
    """gemm-model-wide: per preset, operands spanning a wide exponent range (random finite E4M3
    codes; BF16 over 2^-20..2^20; FP16 over its normal range; UE5M3 blocks over 2^-12..2^12),
    FP32 outputs that separate the accumulation models."""
    plans, i = [], 0
    for preset in PRESETS:
        for kind in PRESET_OPERANDS.get(preset, []):
            plans.append(_plan(f"gemm-{preset}-{kind}-wide", preset, kind, level, 5100 + i, False))
            i += 1
    return plans


coverage.COVERAGE_MODELS["gemm-order-independent"] = model_gemm_order_independent
coverage.COVERAGE_MODELS["gemm-model-wide"] = model_gemm_wide
