"""Block-quantization and range-bound vector sets (coverage models block-quantize, range-bounds).

Operation ``quantize``: inputs ``x`` (FP32 bits, (C, M, K)), ``amax`` (FP32 bits, (C,),
the tensor amax g handed to the quantizer; +0 only for an all-zero tensor, where
the quantizer measures it) and, for stochastic payload rounding, ``r`` (uint8,
one random value per element of the quantized view).  Outputs: ``codes``
(E2M1 codes one per byte, the quantized view (M', K')), ``scales`` (one scale
code per block, row-major block order), ``decode_scale`` (FP32 bits) and
``dequant`` (FP32 bits of the profile's dequantization).  Expected outputs come
from :func:`fpspec.quantization.quantize` with ``impl="exact"`` (FPS-BLK-*).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..formats import get_format
from ..quantization import dequantize, quantize
from ..schemes import get_profile, get_scheme
from . import coverage
from .coverage import SetPlan, make_meta
from .ops import register_operation
from .schema import TAGS, tag_mask

__all__ = ["BLOCK_CONFIGS", "quantize_op"]

M, K = 16, 32


def _cfg(scheme: str, profile: str, tile: str = "1xB", block: int | None = None, target: float | None = 448.0,
         scale_format: str | None = None, rounding: str = "rne", columnwise: bool = False, rht: bool = False,
         zero_scale_rule: bool | None = None) -> dict[str, Any]:
    sch = get_scheme(scheme)
    block = block or sch.default_block
    prof = get_profile(scheme, profile)
    return {"scheme": scheme, "profile": profile, "tile": tile, "block": block,
            "target": target if sch.tensor_scale else None,
            "scale_format": scale_format or prof.scale_formats[0], "rounding": rounding,
            "columnwise": columnwise, "rht": rht,
            "zero_scale_rule": prof.zero_scale_rule if zero_scale_rule is None else zero_scale_rule}


#: The level-1 block configurations: every scheme and profile, both tile shapes, both T,
#: both UE5M3 variants, SR payloads, columnwise + RHT, and the zero-scale rule off.
BLOCK_CONFIGS: list[dict[str, Any]] = [
    _cfg("ue5m3", "exact"),
    _cfg("ue5m3", "exact", target=2048.0),
    _cfg("ue5m3", "exact", tile="BxB"),
    _cfg("ue5m3", "exact", block=32),
    _cfg("ue5m3", "exact", scale_format="ue5m3fnu"),
    _cfg("ue5m3", "exact", zero_scale_rule=False),
    _cfg("ue5m3", "exact", rounding="sr-midpoint"),
    _cfg("ue5m3", "seed-fp32"),
    _cfg("ue5m3", "seed-fp32", tile="BxB"),
    _cfg("ue5m3", "seed-fp32", target=2048.0),
    _cfg("ue5m3", "seed-fp32", rounding="sr-midpoint"),
    _cfg("ue5m3", "seed-fp32", columnwise=True),
    _cfg("nvfp4", "te-fp32"),
    _cfg("nvfp4", "te-fp32", tile="BxB"),
    _cfg("nvfp4", "te-fp32", columnwise=True, rht=True),
    _cfg("nvfp4", "te-kernel"),
    _cfg("nvfp4", "exact"),
    _cfg("mxfp4", "floor"),
    _cfg("mxfp4", "ceil"),
    _cfg("mxfp4", "even"),
    _cfg("mxfp4", "rceil"),
    _cfg("mxfp4", "floor", rounding="rna"),
]


def _tensor_scale(c: dict[str, Any]) -> bool:
    return get_scheme(c["scheme"]).tensor_scale


def set_name(c: dict[str, Any], prefix: str = "quantize") -> str:
    parts = [prefix, c["scheme"], c["profile"], "1x%d" % c["block"] if c["tile"] == "1xB" else "%dx%d" % (c["block"], c["block"])]
    if c["target"] is not None and c["target"] != 448.0:
        parts.append(f"t{int(c['target'])}")
    prof = get_profile(c["scheme"], c["profile"])
    if c["scale_format"] != prof.scale_formats[0]:
        parts.append(c["scale_format"])
    if c["zero_scale_rule"] != prof.zero_scale_rule:
        parts.append("nozsr" if prof.zero_scale_rule else "zsr")
    if c["rounding"] != "rne":
        parts.append(c["rounding"])
    if c["columnwise"]:
        parts.append("colwise")
    if c["rht"]:
        parts.append("rht")
    return "-".join(parts)


# ---------------------------------------------------------------- cases
def _blocks_view(x: np.ndarray, c: dict[str, Any]) -> list[tuple[slice, slice]]:
    """Block slices of the *original* (M, K) tensor along the view's K (for case construction)."""
    b = c["block"]
    if c["columnwise"]:  # view is X^T: blocks run down the columns of X
        return [(slice(j, j + b), slice(i, i + 1)) for i in range(K) for j in range(0, M, b)]
    if c["tile"] == "BxB":
        return [(slice(i, i + b), slice(j, j + b)) for i in range(0, M, b) for j in range(0, K, b)]
    return [(slice(i, i + 1), slice(j, j + b)) for i in range(M) for j in range(0, K, b)]


def _cases(c: dict[str, Any], rng: np.random.Generator, level: int) -> list[tuple[np.ndarray, float, int]]:
    """(x, g, case tags) per case.  g = 0.0 only for the all-zero tensor."""
    T = c["target"] or 448.0
    smax = float(get_format(c["scale_format"]).max_finite)
    cases: list[tuple[np.ndarray, float, int]] = []
    blocks = _blocks_view(np.zeros((M, K)), c)

    def normal(shape: tuple[int, ...]) -> np.ndarray:
        # normal-ish values from integer draws (a stable stream): sum of 4 uniforms, centred
        u = rng.integers(0, 1 << 20, size=(4,) + shape, dtype=np.uint64).astype(np.float64) / (1 << 20)
        return u.sum(axis=0) - 2.0

    def amax_of(x: np.ndarray) -> float:
        return float(np.max(np.abs(x)))

    n_random = 6 if level == 1 else 200
    for _ in range(n_random):  # wide-range random blocks
        x = np.zeros((M, K))
        for bs in blocks:
            e = int(rng.integers(-24, 13))
            x[bs] = normal(x[bs].shape) * 2.0 ** e
        x = x.astype(np.float32)
        cases.append((x, amax_of(x), 0))
    # zero blocks, an all-zero tensor, and -0.0 elements
    x = (normal((M, K)) * 4).astype(np.float32)
    for bs in blocks[::3]:
        x[bs] = 0.0
    x[blocks[1]] = -0.0
    cases.append((x, amax_of(x), tag_mask("zero_block", "zero_input", "negative_zero")))
    cases.append((np.zeros((M, K), dtype=np.float32), 0.0, tag_mask("zero_block", "zero_input")))
    # blocks at and around the smallest scale: g = T, so u_B = a_B exactly (exact profiles)
    sub = float(get_format(c["scale_format"]).min_positive)
    tiny = [sub / 2, sub / 2 * (1 + 2 ** -10), sub / 2 * (1 - 2 ** -10), sub, sub * 1.5, sub / 4,
            sub * 3, sub * 7.5, float(get_format(c["scale_format"]).min_normal),
            sub / 2 * 3, sub * 0.75]
    for rep in range(2):
        x = (normal((M, K)) * 2.0 ** -30).astype(np.float32)
        for i, bs in enumerate(blocks):
            a = tiny[(i + rep) % len(tiny)] * (1 if i % 2 else -1)
            blk = (normal(x[bs].shape) * abs(a) / 4).astype(np.float32)
            blk.reshape(-1)[int(rng.integers(0, blk.size))] = np.float32(a)
            x[bs] = np.clip(blk, -abs(a), abs(a))
        x[0, 0] = np.float32(T)  # the current amax is T in a normal block
        cases.append((x, T, tag_mask("bound_edge")))
    # stale amax: the held g is smaller or larger than the current amax (ratio rho)
    for rho in (2.0, smax / T, smax / T * (1 + 2 ** -8), 300.0, 0.25):
        x = (normal((M, K)) * 3).astype(np.float32)
        x[0, 0] = 5.0
        cur = amax_of(x)
        g = float(np.float32(cur / rho))
        cases.append((x, g, tag_mask("stale_amax") | (tag_mask("bound_edge") if rho != 2.0 and rho != 0.25 else 0)))
    # payload ties: g = 6T so the tensor scale is 1, block amax 6 * 2^k, elements at E2M1 midpoints
    mids = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, 0.0, 0.5, 1.0, 3.0, 4.0, 5.5, 0.125, 2.25])
    for k in (0, -3, 4):
        x = np.zeros((M, K))
        for i, bs in enumerate(blocks):
            n = x[bs].size
            vals = np.resize(np.roll(mids, i), n) * 2.0 ** (k + (i % 5) - 2)
            sign = np.where(rng.integers(0, 2, size=n, dtype=np.uint64) == 1, -1.0, 1.0)
            x[bs] = (vals * sign).reshape(x[bs].shape)
        x = x.astype(np.float32)
        g = 6 * T if _tensor_scale(c) else amax_of(x)
        cases.append((x, g, tag_mask("tie")))
    return cases


def _case_tags(c: dict[str, Any], x: np.ndarray, g: float, scales: np.ndarray, base: int) -> int:
    """Tags of one case from its data and expected scale codes (informative; outputs are normative)."""
    t = base
    sf = get_format(c["scale_format"])
    v = x.T if c["columnwise"] else x
    b = c["block"]
    if c["tile"] == "BxB":
        grid = np.abs(v.astype(np.float64)).reshape(v.shape[0] // b, b, v.shape[1] // b, b).max(axis=(1, 3))
    else:
        grid = np.abs(v.astype(np.float64)).reshape(v.shape[0], v.shape[1] // b, b).max(axis=2)
    if (grid == 0).any():
        t |= tag_mask("zero_block")
        if _tensor_scale(c):  # a zero block's scale rounds to zero too
            t |= tag_mask("zero_scale")
    if _tensor_scale(c) and g > 0 and not c["rht"]:
        T = Fraction(c["target"])
        u = [Fraction(float(a)) * T / Fraction(g) for a in grid.reshape(-1) if a > 0]
        if any(ui <= sf.min_positive / 2 for ui in u):
            t |= tag_mask("zero_scale")
        if any(ui > sf.max_finite for ui in u):
            t |= tag_mask("saturated_scale")
        cur = float(np.max(np.abs(v)))
        if np.float32(cur) != np.float32(g):
            t |= tag_mask("stale_amax")
    sub = (scales > 0) & (scales < (1 << sf.man_bits)) if sf.subnormals else np.zeros_like(scales, bool)
    if sub.any():
        t |= tag_mask("subnormal_scale")
    if _tensor_scale(c) and (scales == 0).any():
        t |= tag_mask("zero_scale")
    return t


def _quantize_case(meta: dict[str, Any], x: np.ndarray, g: float, r: np.ndarray | None, impl: str):
    p = meta["params"]
    q = quantize(x, p["scheme"], profile=p["profile"], block=p["block"], tile=p["tile"],
                 target=p["target"], amax=None if (g == 0 or not get_scheme(p["scheme"]).tensor_scale) else g,
                 rounding=p["rounding"], rbits=r, columnwise=p["columnwise"], rht=p["rht"],
                 scale_format=p["scale_format"], zero_scale_rule=p["zero_scale_rule"], impl=impl)
    deq = dequantize(q)
    return q, deq


def quantize_op(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    """fpspec's block quantizer on every case of a quantize set."""
    xs = inputs["x"].view(np.float32)
    amax = inputs["amax"].view(np.float32) if "amax" in inputs else np.zeros(xs.shape[0], np.float32)
    outs: dict[str, list[np.ndarray]] = {k: [] for k in ("codes", "scales", "decode_scale", "dequant")}
    for i in range(xs.shape[0]):
        r = inputs["r"][i] if "r" in inputs else None
        q, deq = _quantize_case(meta, xs[i], float(amax[i]), r, impl)
        outs["codes"].append(q.codes)
        outs["scales"].append(q.scales)
        outs["decode_scale"].append(np.array(q.decode_scale, dtype=np.float32).view(np.uint32))
        outs["dequant"].append(np.asarray(deq, dtype=np.float32).view(np.uint32))
    return {k: np.stack(v) for k, v in outs.items()}


register_operation("quantize", quantize_op)


def _plan(c: dict[str, Any], level: int, seed: int, model: str, name: str,
          cases: list[tuple[np.ndarray, float, int]], description: str, reqs: list[str]) -> SetPlan:
    rng = np.random.Generator(np.random.PCG64(seed + 7))
    xs = np.stack([cs[0] for cs in cases]).astype(np.float32)
    g = np.array([cs[1] for cs in cases], dtype=np.float32)
    n = len(cases)
    view = (K, M) if c["columnwise"] else (M, K)
    b = c["block"]
    sgrid = (view[0] // b if c["tile"] == "BxB" else view[0], view[1] // b)
    inputs = {"x": xs.view(np.uint32)}
    in_meta: dict[str, Any] = {"x": {"format": "fp32", "dtype": "uint32", "shape": [M, K],
                                     "role": "tensor X, row-major (M, K)"}}
    if _tensor_scale(c):
        inputs["amax"] = g.view(np.uint32)
        in_meta["amax"] = {"format": "fp32", "dtype": "uint32", "shape": [],
                           "role": "tensor amax g given to the quantizer (+0: all-zero tensor, measured)"}
    sr = c["rounding"].startswith("sr")
    if sr:
        inputs["r"] = rng.integers(0, 256, size=(n,) + view, dtype=np.uint64).astype(np.uint8)
        in_meta["r"] = {"format": "raw", "dtype": "uint8", "shape": list(view),
                        "role": "8-bit random value per element of the quantized view"}
    depends = [f"profile:{c['scheme']}/{c['profile']}", f"scale-format:{c['scale_format']}",
               f"zero-scale-rule:{'on' if c['zero_scale_rule'] else 'off'}"]
    if c["target"] is not None:
        depends.append(f"target:{c['target']:g}")
    if sr:
        depends.append("sr:sr-midpoint/8")
    common = {"rounding": c["rounding"], "rounding_format": "e2m1", "depends_on": sorted(depends)}
    if sr:
        common.update(sr_variant="sr-midpoint", sr_bits=8, random_input="r")
    outputs = {
        "codes": {"format": "e2m1", "dtype": "uint8", "shape": list(view),
                  "layout": "one E2M1 code per byte (low nibble), the quantized view row-major", **common},
        "scales": {"format": c["scale_format"], "dtype": "uint8", "shape": list(sgrid),
                   "layout": "one scale code per block, row-major block order", **common},
        "decode_scale": {"format": "fp32", "dtype": "uint32", "shape": [],
                         "layout": "FP32 bits of the tensor decode scale (1 for mxfp4)", **common},
        "dequant": {"format": "fp32", "dtype": "uint32", "shape": list(view),
                    "layout": "FP32 bits of the profile's dequantized view", **common},
    }
    params = {k: c[k] for k in ("scheme", "profile", "tile", "block", "target", "scale_format", "rounding",
                                "columnwise", "rht", "zero_scale_rule")}
    meta = make_meta(name, "quantize", model, description, reqs, seed, level, n, in_meta, outputs,
                     key="array", scheme=c["scheme"], profile=f"{c['scheme']}/{c['profile']}", params=params,
                     formats_used=sorted({"e2m1", c["scale_format"], "fp32"}))
    tags = np.array([cs[2] for cs in cases], dtype=np.uint32)

    def finish(plan: SetPlan, outs: dict[str, np.ndarray]) -> None:
        for i in range(n):
            plan.tags[i] |= np.uint32(_case_tags(c, xs[i], float(g[i]), outs["scales"][i], int(plan.tags[i])))
            if (outs["codes"][i] & 0x7 == 0x7).any():
                plan.tags[i] |= np.uint32(1 << TAGS["saturated_payload"])
        plan.tags[plan.tags & np.uint32(tag_mask("zero_scale", "saturated_scale", "stale_amax")) != 0] |= \
            np.uint32(1 << TAGS["profile_dependent"])

    return SetPlan(name, meta, inputs, tags, key=np.arange(n, dtype=np.uint64), impl="fast", finish=finish)


_REQ = {"ue5m3": ["FPS-BLK-2", "FPS-BLK-3"], "nvfp4": ["FPS-BLK-3"], "mxfp4": ["FPS-BLK-12"]}


def model_block_quantize(level: int) -> list[SetPlan]:
    """block-quantize: per scheme, profile, tile shape, T, scale format, payload rounding and
    layout: wide-range random blocks, zero blocks and an all-zero tensor, -0.0, blocks at and
    around the smallest scale (ties at half the smallest subnormal scale), stale tensor amax
    (held g below and above the current amax, up to and past the saturation bound), and payload
    ties at every E2M1 midpoint."""
    plans = []
    for i, c in enumerate(BLOCK_CONFIGS):
        seed = 3000 + i
        rng = np.random.Generator(np.random.PCG64(seed))
        name = set_name(c)
        plans.append(_plan(c, level, seed, "block-quantize", name, _cases(c, rng, level),
                           f"{c['scheme']}/{c['profile']} block quantization, {name[len('quantize-'):]}",
                           _REQ[c["scheme"]] + ["FPS-BLK-1", "FPS-BLK-14", "FPS-VEC-8"]))
    return plans


def model_range_bounds(level: int) -> list[SetPlan]:
    """range-bounds: the two edges of the T-target bound for each UE5M3 variant and T in
    {448, 2048}: a stale ratio rho = a/g at U/T (every block unsaturated) and one step past it
    (the top block saturates), and block amax at 2^-18 g/T (a tie that RNE sends to scale 0,
    then 1 by the zero-scale rule), just above it, and at 2^-14 g/T (full scale precision)."""
    plans = []
    i = 0
    for sf in ("ue5m3", "ue5m3fnu"):
        for T in (448.0, 2048.0):
            c = _cfg("ue5m3", "exact", target=T, scale_format=sf)
            f = get_format(sf)
            U = float(f.max_finite)
            cases = []
            for g in (1.0, 3.0, 1000.0):
                # large side: one block at a = rho * g
                for rho, extra in ((U / T, 0), (U / T * (1 + 2 ** -9), tag_mask("saturated_scale")),
                                   (U / T * (1 - 2 ** -9), 0), (U / T * 2, tag_mask("saturated_scale"))):
                    x = np.full((M, K), np.float32(g / 8), dtype=np.float32)
                    x[3, 5] = np.float32(rho * g)
                    cases.append((x, g, tag_mask("bound_edge", "stale_amax") | extra))
                # small side: block amax a = k * g / T
                for k in (2.0 ** -18, 2.0 ** -18 * (1 + 2 ** -8), 2.0 ** -18 * (1 - 2 ** -8), 2.0 ** -14,
                          2.0 ** -17, 3 * 2.0 ** -19):
                    x = np.zeros((M, K), dtype=np.float32)
                    x[0, 0] = np.float32(g)
                    x[5, 16:32] = np.float32(k * g / T)
                    x[6, 0:16] = -np.float32(k * g / T)
                    cases.append((x, g, tag_mask("bound_edge")))
            seed = 4000 + i
            i += 1
            name = "bounds-" + set_name(c, "ue5m3")[len("ue5m3-"):]
            plans.append(_plan(c, level, seed, "range-bounds", name, cases,
                               f"range bounds of T = {T:g} with {sf} scales (max {U:g})",
                               ["FPS-BND-1", "FPS-BND-2", "FPS-BLK-2", "FPS-VEC-8"]))
    return plans


coverage.COVERAGE_MODELS["block-quantize"] = model_block_quantize
coverage.COVERAGE_MODELS["range-bounds"] = model_range_bounds
