"""GEMM vector sets (coverage models gemm-order-independent, gemm-model-wide, gemm-instruction).

Operation ``gemm``: C = A @ BT^T to FP32 (FP16 for an FP16-accumulator preset) under a
named model (:mod:`fpspec.models`).  Plain operands: inputs ``a`` (C, M, K) and ``bt``
(C, N, K) codes, each of its own format (the inputs' ``format``; the operand kind
``e4m3-e5m2`` names A's and BT's).  Quantized operands (E2M1 payloads with block scales):
for each operand X in (a, bt): ``X_codes`` (E2M1 codes one per byte), ``X_scales``
(row-major block order), ``X_amax``, ``X_encode_scale``, ``X_decode_scale`` (FP32 bits);
the scheme, block, tile and T are in the meta's ``operand``.  Operands built from codes
(the instruction presets' NVFP4, MXFP4 and MXFP8 sets: no tensor scale): ``X_codes`` and
``X_scales`` only; payload format, scale format and block in the meta's ``operand``
(``scheme: codes``).  Output ``c``: FP32 (or FP16) bits (C, M, N).  Expected outputs come
from :func:`fpspec.matmul.gemm`, whose fast path is tested bit-equal to the exact spec.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..convert import encode
from ..formats import CodeKind, get_format
from ..matmul import gemm
from ..presets import INSTRUCTION_PRESETS, PRESETS
from ..quantization import quantize
from ..quantized import QuantizedTensor
from ..schemes import CODES_SCHEME
from . import coverage
from .coverage import SetPlan, make_meta
from .ops import from_twin, register_operation, split_impl, to_twin
from .schema import tag_mask

__all__ = ["gemm_op", "PRESET_OPERANDS", "INSTRUCTION_OPERANDS"]

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
    "seed-triton-h200": ["bf16"], "seed-triton-h200-snap": ["bf16"],
}
#: The operand kinds of each instruction preset's set (coverage model gemm-instruction):
#: its natural inputs, mixed formats where the instruction takes them.
INSTRUCTION_OPERANDS: dict[str, list[str]] = {
    "sm70-f16": ["fp16"], "sm75-f16": ["fp16"], "sm80-f16": ["bf16"], "sm80-f16-f16acc": ["fp16"],
    "sm89-fp8": ["e4m3-e5m2"], "sm90-f16": ["bf16"], "sm90-f16-f16acc": ["fp16"], "sm90-fp8": ["e4m3"],
    "sm100-f16": ["bf16"], "sm100-f8f6f4": ["e4m3-e5m2"], "sm100-mxf8f6f4": ["mxfp8-e4m3"],
    "sm100-mxf4nvf4": ["nvfp4", "mxfp4"], "sm120-f8f6f4": ["e5m2"], "sm120-mxf8f6f4": ["mxfp8-e5m2"],
    "sm120-mxf4nvf4": ["mxfp4-b16"], "cdna3-f16": ["bf16"], "cdna3-fp8": ["e4m3fnuz-e5m2fnuz"],
}
#: Operands built from codes: kind -> (payload format, scale format, block).
_CODE_OPERANDS = {"nvfp4": ("e2m1", "ue4m3", 16), "mxfp4": ("e2m1", "ue8m0", 32), "mxfp4-b16": ("e2m1", "ue8m0", 16),
                  "mxfp8-e4m3": ("e4m3", "ue8m0", 32), "mxfp8-e5m2": ("e5m2", "ue8m0", 32)}
_PLAIN = ("e4m3", "e5m2", "bf16", "fp16", "e4m3fnuz", "e5m2fnuz")
_Q_FIELDS = ("codes", "scales", "amax", "encode_scale", "decode_scale")


def _plain_formats(kind: str) -> tuple[str, str] | None:
    """(A's, BT's) code format of a plain operand kind (``e4m3`` or ``e4m3-e5m2``), else None."""
    parts = tuple(kind.split("-")) if kind.count("-") == 1 else (kind,)
    if all(p in _PLAIN for p in parts):
        return (parts[0], parts[-1])
    return None


def _qt(inputs: dict[str, np.ndarray], prefix: str, i: int, op: dict[str, Any]) -> QuantizedTensor:
    """A quantized operand of case i; ``target`` None (MXFP4: no tensor scale) gives no params."""
    f32 = lambda k: np.uint32(inputs[f"{prefix}_{k}"][i]).view(np.float32)  # noqa: E731
    return QuantizedTensor(codes=inputs[f"{prefix}_codes"][i], scales=inputs[f"{prefix}_scales"][i],
                           scale_format=op["scale_format"], block=op["block"], tile=op["tile"],
                           encode_scale=f32("encode_scale"), decode_scale=f32("decode_scale"),
                           amax=f32("amax"), scheme=op["scheme"], profile=op["profile"],
                           params={} if op["target"] is None else {"target": str(op["target"])})


def _code_qt(inputs: dict[str, np.ndarray], prefix: str, i: int, op: dict[str, Any]) -> QuantizedTensor:
    return QuantizedTensor.from_codes(inputs[f"{prefix}_codes"][i], inputs[f"{prefix}_scales"][i],
                                      payload_format=op["payload_format"], scale_format=op["scale_format"],
                                      block=op["block"])


def gemm_op(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    model = meta["params"]["model"]
    kind = meta["params"]["operands"]
    out = []
    n = meta["cases"]
    impl, device = split_impl(impl)
    moved = (lambda q: q) if device is None else (lambda q: q.to(device))  # noqa: E731
    for i in range(n):
        fmts = _plain_formats(kind)
        if fmts is not None:
            c = gemm(to_twin(inputs["a"][i], device), to_twin(inputs["bt"][i], device), model,
                     fmt=fmts if fmts[0] != fmts[1] else fmts[0], impl=impl)
        elif meta["operand"]["scheme"] == CODES_SCHEME:  # operands built from codes (gemm-instruction, gemm-shapes)
            c = gemm(moved(_code_qt(inputs, "a", i, meta["operand"])), moved(_code_qt(inputs, "bt", i, meta["operand"])),
                     model, impl=impl)
        else:
            c = gemm(moved(_qt(inputs, "a", i, meta["operand"])), moved(_qt(inputs, "bt", i, meta["operand"])), model,
                     impl=impl)
        c = np.asarray(from_twin(c))
        out.append(c.view(np.uint16) if c.dtype == np.float16 else c.astype(np.float32).view(np.uint32))
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


def _finite_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Random finite codes of a format over its whole range (subnormals, zeros, the top binade)."""
    f = get_format(fmt)
    finite = np.array([c for c in range(f.num_codes) if f.kind(c) not in (CodeKind.NAN, CodeKind.INF)])
    return finite[rng.integers(0, finite.size, size=shape, dtype=np.int64)].astype(f.storage_dtype)


def _instruction_codes(rng: np.random.Generator, fmt: str, shape: tuple[int, ...], mid: bool) -> np.ndarray:
    """Operand codes for an instruction preset: random finite codes (BF16 within 2^-60..2^60 so
    that chains do not overflow; FP16 normal samples scaled by 2^-14..2^4, or 2^-6..2^3
    where ``mid``), one in eight zero."""
    if fmt == "bf16":
        e = rng.integers(-60, 61, size=shape, dtype=np.int64)
        mant = 1 + rng.integers(0, 128, size=shape, dtype=np.int64) / 128
        sign = np.where(rng.integers(0, 2, size=shape, dtype=np.int64) == 1, -1.0, 1.0)
        x = encode((sign * np.ldexp(mant, e.astype(np.int32))).astype(np.float32), "bf16", "rne")
    elif fmt == "fp16":
        span = (-6, 3) if mid else (-14, 4)
        e = rng.integers(span[0], span[1] + 1, size=shape, dtype=np.int64).astype(np.int32)
        x = encode(np.ldexp(rng.standard_normal(shape), e).astype(np.float32), "fp16", "rne")
    else:
        x = _finite_codes(rng, fmt, shape)
    x[rng.random(shape) < 0.125] = 0
    return x


def _instruction_operands(kind: str, rng: np.random.Generator, cases: int):
    """Inputs and input meta of a gemm-instruction set: plain codes of one or two formats, or
    payload codes and scale bytes (wide scales, a zero block under the largest scale)."""
    fmts = _plain_formats(kind)
    if fmts is not None:
        a = np.stack([_instruction_codes(rng, fmts[0], (M, K), c % 2 == 0) for c in range(cases)])
        bt = np.stack([_instruction_codes(rng, fmts[1], (N, K), c % 2 == 0) for c in range(cases)])
        if fmts == ("bf16", "bf16"):  # output (0, 0) of case 0: zeros facing 2^120 beside 2^-40 products
            small = np.ldexp(1 + rng.integers(0, 128, size=(2, K)) / 128, -20).astype(np.float32)
            a[0, 0], bt[0, 0] = encode(small[0], "bf16", "rne"), encode(small[1], "bf16", "rne")
            a[0, 0, ::16] = 0
            bt[0, 0, ::16] = encode(np.full(K // 16, 2.0 ** 120, np.float32), "bf16", "rne")
        if fmts == ("fp16", "fp16"):  # output (1, 1) of case 0: one instruction's FP16 tie, 1 + 2^-11,
            row = np.zeros(K, np.float32)  # plus 2^-25, which a 24-bit window drops and a 25-bit one keeps
            a[0, 1] = encode(np.concatenate([[1, 1, 2.0 ** -12], row[3:]]).astype(np.float32), "fp16", "rne")
            bt[0, 1] = encode(np.concatenate([[1, 2.0 ** -11, 2.0 ** -13], row[3:]]).astype(np.float32), "fp16", "rne")
        return ({"a": a, "bt": bt},
                {"a": {"format": fmts[0], "dtype": a.dtype.name, "shape": [M, K], "role": "A codes (M, K)"},
                 "bt": {"format": fmts[1], "dtype": bt.dtype.name, "shape": [N, K],
                        "role": "BT codes (N, K): B's columns as rows"}}, None)
    pf, sf, blk = _CODE_OPERANDS[kind]
    inputs, meta = {}, {}
    top = get_format(sf).max_finite_code
    for prefix, rows in (("a", M), ("bt", N)):
        codes = np.stack([_finite_codes(rng, pf, (rows, K)) for _ in range(cases)])
        lo, hi = (0x01, top + 1) if sf == "ue4m3" else (100, 160)
        scales = rng.integers(lo, hi, size=(cases, rows, K // blk), dtype=np.int64).astype(np.uint8)
        codes[:, 0, :blk] = 0  # a zero block under the largest scale: it still aligns (FPS-GEMM-16)
        scales[:, 0, 0] = top
        if sf == "ue4m3":  # case 0, row 0: the next block 0.5 x 2^-9 at one k: its product 2^-20 falls
            scales[0, 0, 1] = 0x01  # below the window the zero block sets (2^(16-35)) and is cut
            codes[0, 0, blk:2 * blk] = 0
            codes[0, 0, blk] = 0x1
        if prefix == "a":  # case 0, row 0 of A: zero after the first 64 products, so that the chain
            codes[0, 0, 64:] = 0  # keeps what the first instruction did
        inputs[f"{prefix}_codes"], inputs[f"{prefix}_scales"] = codes, scales
        meta[f"{prefix}_codes"] = {"format": pf, "dtype": "uint8", "shape": [rows, K],
                                   "role": f"{pf} payload codes, one per byte"}
        meta[f"{prefix}_scales"] = {"format": sf, "dtype": "uint8", "shape": [rows, K // blk],
                                    "role": f"{sf} block scale codes (block {blk}), row-major"}
    return inputs, meta, {"scheme": CODES_SCHEME, "payload_format": pf, "scale_format": sf, "block": blk}


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
    for preset, kinds in PRESET_OPERANDS.items():  # a new preset appends: earlier sets keep their seeds
        for kind in kinds:
            plans.append(_plan(f"gemm-{preset}-{kind}-wide", preset, kind, level, 5100 + i, False))
            i += 1
    return plans


def _instruction_plan(name: str, preset: str, kind: str, level: int, seed: int) -> SetPlan:
    rng = np.random.Generator(np.random.PCG64(seed))
    cases = 3 if level == 1 else 16
    inputs, in_meta, operand = _instruction_operands(kind, rng, cases)
    model = PRESETS[preset].model
    fp16 = model.output_format == "fp16"
    out = {"c": {"format": "fp16" if fp16 else "fp32", "dtype": "uint16" if fp16 else "uint32", "shape": [M, N],
                 "layout": f"{'FP16' if fp16 else 'FP32'} bits of C, row-major",
                 "depends_on": [f"gemm-model:{preset}"]}}
    used = {i["format"] for i in in_meta.values()} | {"fp16" if fp16 else "fp32"}
    extra: dict[str, Any] = {"params": {"model": preset, "operands": kind}, "model": preset,
                             "formats_used": sorted(used)}
    if operand is not None:
        extra["operand"] = operand
    desc = (f"{kind} operands (wide range, zeros{', a zero block under the largest scale' if operand else ''}), "
            f"the K = {K} chain of {PRESETS[preset].instruction} ({PRESETS[preset].architecture}) from C = 0")
    meta = make_meta(name, "gemm", "gemm-instruction", desc, ["FPS-GEMM-1", "FPS-GEMM-21", "FPS-VEC-8"], seed,
                     level, cases, in_meta, out, key="array", **extra)
    return SetPlan(name, meta, inputs, np.full(cases, tag_mask("wide_range", "profile_dependent"), dtype=np.uint32),
                   key=np.arange(cases, dtype=np.uint64), impl="fast")


def model_gemm_instruction(level: int) -> list[SetPlan]:
    """gemm-instruction: per instruction-level preset (docs/hardware-models.rst), its natural
    operands (plain codes, mixed formats, NVFP4 / MXFP4 / MXFP8 built from codes) over a wide
    range with zeros, K = 256: the chain of the instruction from C = 0, for validating an
    MMA emulator bit for bit."""
    plans, i = [], 0
    for preset in INSTRUCTION_PRESETS:
        for kind in INSTRUCTION_OPERANDS[preset]:
            plans.append(_instruction_plan(f"gemm-{preset}-{kind}", preset, kind, level, 5200 + i))
            i += 1
    return plans


coverage.COVERAGE_MODELS["gemm-order-independent"] = model_gemm_order_independent
coverage.COVERAGE_MODELS["gemm-model-wide"] = model_gemm_wide
coverage.COVERAGE_MODELS["gemm-instruction"] = model_gemm_instruction
