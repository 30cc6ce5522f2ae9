"""Block-quantization and range-bound vector sets (coverage models block-quantize, range-bounds).

Operation ``quantize``: inputs ``x`` (FP32 bits, (C, M, K)), ``amax`` (FP32 bits, (C,),
the tensor amax g handed to the quantizer; +0 only for an all-zero tensor, where
the quantizer measures it) and, for stochastic payload rounding, ``r`` (uint8,
one random value per element of the quantized view).  Outputs: ``codes``
(payload codes one per byte: E2M1, or E4M3 / E5M2 for mxfp8; the quantized view (M', K')), ``scales`` (one scale
code per block, row-major block order), ``decode_scale`` (FP32 bits) and
``dequant`` (FP32 bits of the profile's dequantization).  Expected outputs come
from :func:`fpspec.quantization.quantize` with ``impl="exact"`` (FPS-BLK-*).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Callable

import numpy as np

from ..fast.log2 import ABOVE_COUNTS, BELOW_COUNTS
from ..formats import get_format
from ..quantization import dequantize, quantize
from ..schemes import AmaxZero, get_profile, get_scheme
from . import coverage
from .coverage import SetPlan, make_meta
from .ops import from_twin, register_operation, split_impl, to_twin
from .schema import TAGS, tag_mask

__all__ = ["BLOCK_CONFIGS", "quantize_op", "quantize_case", "quantize_cases"]

M, K = 16, 32


def _cfg(scheme: str, profile: str, tile: str = "1xB", block: int | None = None, target: float | None = 448.0,
         scale_format: str | None = None, rounding: str = "rne", columnwise: bool = False, rht: bool = False,
         zero_scale_rule: bool | None = None, payload_format: str | None = None) -> dict[str, Any]:
    sch = get_scheme(scheme)
    block = block or sch.default_block
    prof = get_profile(scheme, profile)
    return {"scheme": scheme, "profile": profile, "tile": tile, "block": block,
            "target": target if sch.tensor_scale else None,
            "scale_format": scale_format or prof.scale_formats[0], "rounding": rounding,
            "columnwise": columnwise, "rht": rht,
            "zero_scale_rule": prof.zero_scale_rule if zero_scale_rule is None else zero_scale_rule,
            "payload_format": payload_format or sch.payload_formats[0]}


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
    # the named reproductions of public references (issue 10): appended, so earlier seeds stay
    _cfg("ue5m3", "seed-portable"),
    _cfg("nvfp4", "torchao-0.18"),
    _cfg("mxfp4", "torchao-0.18-floor"),
    _cfg("mxfp4", "torchao-0.18-ceil"),
    _cfg("mxfp4", "torchao-0.18-even"),
    _cfg("mxfp4", "torchao-0.18-rceil"),
    _cfg("mxfp4", "microxcaling"),
    _cfg("mxfp4", "microxcaling", rounding="rna"),
    _cfg("mxfp4", "microxcaling", rounding="rtz"),
    # mxfp8 (issue 15): every OCP scale rule with each FP8 payload, and ties away
    *[_cfg("mxfp8", mode, payload_format=pf) for pf in ("e4m3", "e5m2") for mode in ("floor", "ceil", "even", "rceil")],
    _cfg("mxfp8", "floor", rounding="rna"),
    _cfg("mxfp8", "floor", rounding="rna", payload_format="e5m2"),
    # torchao 0.18 as torch computes it on CUDA (FPS-BLK-29)
    _cfg("nvfp4", "torchao-0.18-cuda"),
    _cfg("mxfp4", "torchao-0.18-rceil-cuda"),
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
    if c["payload_format"] != get_scheme(c["scheme"]).payload_formats[0]:
        parts.append(c["payload_format"])
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
    if get_profile(c["scheme"], c["profile"]).amax_zero is not AmaxZero.REFUSE:
        # (a profile whose source divides 0 by 0 has no defined output for it: FPS-BLK-18)
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
    if c["scheme"] == "mxfp4":
        cases += _mx_cases(rng)
    if c["scheme"] == "mxfp8":
        cases += _mx8_cases(rng, c["payload_format"])
    return cases


# ------------------------------------------------------- MX scale rules and float log2
def _f32(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def _bits(k: int) -> int:
    """bits(2^k) of binary32 (bits(2^128) = 0x7F800000)."""
    return 0x7F800000 if k == 128 else int(np.array([2.0 ** k], dtype=np.float32).view(np.uint32)[0])


def _b_threshold(k: int) -> int:
    """B[k]: the smallest binary32 below 2^k whose binary32 log2 rounds to k (FPS-BLK-22)."""
    return _bits(k) - BELOW_COUNTS[k + 148]


def _a_threshold(k: int) -> int:
    """A[k]: the largest binary32 above 2^k whose binary32 log2 rounds to k."""
    return _bits(k) + ABOVE_COUNTS[k + 149]


def _amax_for_quotient(v: np.float32) -> np.float32:
    """A binary32 a with fp32(a / 6) = v (v a normal binary32 value below FLT_MAX / 6)."""
    a = np.float32(np.float64(v) * 6)
    for d in (0, -1, 1, -2, 2):
        cand = _f32(int(np.array([a], np.float32).view(np.uint32)[0]) + d)
        if np.float32(cand) / np.float32(6) == v:
            return cand
    raise AssertionError(f"no binary32 amax gives the quotient {v!r}")


def _mx_row(rng: np.random.Generator, a: float, specials: list[float]) -> np.ndarray:
    """One 32-element block with amax a (at a random position, random sign), the given special
    elements, and random values of at most a elsewhere."""
    a32 = np.float32(a)
    row = (rng.integers(0, 1 << 20, K, dtype=np.uint64).astype(np.float64) / (1 << 20) * 2 - 1) * float(a32)
    row = row.astype(np.float32)
    pos = rng.permutation(K)
    row[pos[0]] = a32 * (1 if rng.integers(0, 2) else -1)
    for p, v in zip(pos[1:], specials):
        row[p] = np.float32(v)
    return row


def _mx_cases(rng: np.random.Generator) -> list[tuple[np.ndarray, float, int]]:
    """Four cases (16 blocks each) that separate the MX scale rules and the binary32-log2
    references (FPS-BLK-12, FPS-BLK-22..24): block amaxes at B[k] (where a binary32 log2
    rounds up to k) and one below it; amaxes whose quotient fp32(a/6) is A[k] (where the log2
    rounds down to k) and one above it; elements whose quotient is 0.25 - 2^-26 or 8(1 - 2^-24)
    (microxcaling's binary32 add and log2), signed zeros and negative quotients that underflow;
    and scale-byte-0 blocks (subnormal amaxes, the edges of byte 0 under every rule)."""
    out = []
    dep = tag_mask("profile_dependent")
    # 1. block amax at B[k] and one ulp below, k spread over the range (not k = 128: microxcaling then
    #    dequantizes 4 * 2^126, past binary32)
    rows = []
    for k in (10, 3, -2, 127, 64, -64, -100, 20):
        for bits in (_b_threshold(k), _b_threshold(k) - 1):
            a = _f32(bits)
            rows.append(_mx_row(rng, a, [a * np.float32(0.375), -a / np.float32(3), a * np.float32(0.75)]))
    out.append((np.stack(rows), 0, dep))
    # 2. fp32(a_B / 6) at A[k] and one ulp above; four amaxes measured on torchao 0.18
    rows = [_mx_row(rng, _f32(b), [_f32(b) / np.float32(3)]) for b in (0x43400001, 0x45C00001, 0x3BC00001, 0x7F400001)]
    for k in (5, 10, -6, 100, 125, -100):
        for bits in (_a_threshold(k), _a_threshold(k) + 1):
            a = _amax_for_quotient(_f32(bits))
            rows.append(_mx_row(rng, a, [a / np.float32(3), a * np.float32(0.5)]))
    out.append((np.stack(rows), 0, dep))
    # 3. elements: A = 0.25 - 2^-26 and its neighbours (amax 1, e = -2), A = 8(1 - 2^-24) (the amax
    #    2^k(1 - 2^-24), k = -1..2), decision points +- 1 ulp, -0.0 and underflowing negatives
    q = 0.0625
    near = [q - 2.0 ** -28, q - 2.0 ** -29, q, q + 2.0 ** -27, -(q - 2.0 ** -28), 0.1875 - 2.0 ** -27, 0.125,
            0.3125, 0.4375, 0.625, 0.875, 1.25, -0.0, -(2.0 ** -149)]
    rows = [_mx_row(rng, 1.0, near), _mx_row(rng, 1.0, [-v for v in near])]
    for k in (-1, 0, 1, 2):
        a = np.float32(2.0 ** k * (1 - 2.0 ** -24))
        sc = 2.0 ** (k - 3)
        rows.append(_mx_row(rng, a, [4 * sc, 2 * sc, 6 * sc, 5 * sc, 7 * sc, 3.5 * sc, 0.25 * sc - 2.0 ** (k - 29), -0.0]))
    for a in (8.0, 16.0, 2.0 ** 20, 6.0 * 2.0 ** 100):
        rows.append(_mx_row(rng, a, [-(2.0 ** -149), -3 * 2.0 ** -149, -(2.0 ** -148), 2.0 ** -149, -0.0, -0.0,
                                     -1e-30, -1e-38]))
    for a in (6.0, 7.0, 1.75, 3.5, 0.75, 12.0):   # amaxes at the floor / ceil / even / rceil edges
        rows.append(_mx_row(rng, a, [a / 2, a / 4, -a * 0.625, a * 0.875, -0.0]))
    out.append((np.stack(rows), 0, dep | tag_mask("tie", "negative_zero")))
    # 4. scale byte 0 (and 1) under every rule
    rows = [np.zeros(K, np.float32)]
    rows[0][rng.permutation(K)[:6]] = -0.0
    for a in (2.0 ** -149, 3 * 2.0 ** -149, 4 * 2.0 ** -149, 2.0 ** -127, 2.0 ** -126, 1.5 * 2.0 ** -125,
              float(_f32(_bits(-124) - 1)), 2.0 ** -124, float(_f32(_amax_bits(6 * 2.0 ** -127) - 1)),
              6 * 2.0 ** -127, float(_f32(_amax_bits(6 * 2.0 ** -127) + 1)), 3 * 2.0 ** -129,
              float(_f32(0x00600000)), float(_f32(0x005FFFFF)), float(_f32(0x00E00000))):
        rows.append(_mx_row(rng, a, [a / 2, a * 0.75, -a / 4, 2.0 ** -149, -(2.0 ** -149), -0.0, a * 0.375]))
    out.append((np.stack(rows), 0, dep | tag_mask("zero_block", "subnormal_input", "negative_zero")))
    return [(x, float(np.max(np.abs(x))), t) for x, _, t in out]


def _mx8_cases(rng: np.random.Generator, pf: str) -> list[tuple[np.ndarray, float, int]]:
    """mxfp8 cases (FPS-BLK-27, FPS-BLK-28): every finite code and every midpoint of neighbouring
    codes of the payload format, both signs, in blocks whose amax is max 2^e (so the element is
    the code's value times 2^e) for e from -127 (byte 0) up; values past max (saturation); block
    amaxes at and one ulp around max 2^e, the EVEN point (2 - 2^-(m+1)) 2^k and powers of two
    (where the four scale rules part); subnormal and byte-0 blocks."""
    fmt = get_format(pf)
    top = float(fmt.max_finite)
    codes = [c for c in range(fmt.sign_mask) if fmt.kind(c).value not in ("nan", "inf")]
    vals = [float(fmt.decode_exact(c)) for c in codes]
    vals += [float((fmt.decode_exact(c) + fmt.decode_exact(c + 1)) / 2) for c in codes[:-1]]
    vals += [top * 1.0625, top * 1.125, top * 1.5]
    vals = vals + [-v for v in vals]
    vals[len(vals) // 2] = -0.0
    out = []
    dep = tag_mask("profile_dependent")
    max_e = 127 - fmt.emax - 1
    for e in (0, -127, -(fmt.emax + fmt.man_bits + 1), max_e // 2, max_e):
        per = K - 1
        rows = []
        for i in range(0, len(vals), per):
            row = np.zeros(K, np.float64)
            chunk = vals[i:i + per]
            row[0] = top
            row[1:1 + len(chunk)] = chunk
            rows.append((row * 2.0 ** e).astype(np.float32))
        while len(rows) % M:
            rows.append(rows[len(rows) % 3].copy())
        for j in range(0, len(rows), M):
            out.append((np.stack(rows[j:j + M]), 0, dep | tag_mask("tie", "negative_zero")))
    # block amaxes where the scale rules part, one ulp either side
    even = 2 - 2.0 ** -(fmt.man_bits + 1)
    rows = []
    for k in (0, 9, -20, 100, -126, 120):
        for base in (top * 2.0 ** (k - fmt.emax), even * 2.0 ** k, 2.0 ** k):
            if base >= 3.4e38:
                continue
            b = np.float32(base)
            for a in (np.nextafter(b, np.float32(0)), b, np.nextafter(b, np.float32(np.inf))):
                rows.append(_mx_row(rng, a, [a / np.float32(3), -a * np.float32(0.75), a * np.float32(2.0 ** -12)]))
    while len(rows) % M:
        rows.append(_mx_row(rng, 1.0, [0.5]))
    for j in range(0, len(rows), M):
        out.append((np.stack(rows[j:j + M]), 0, dep))
    # subnormal blocks and scale byte 0
    rows = [np.zeros(K, np.float32)]
    for a in (2.0 ** -149, 3 * 2.0 ** -149, 2.0 ** -140, 2.0 ** -127, 2.0 ** -126, top * 2.0 ** -127,
              top * 2.0 ** -126, 2.0 ** -118, 1.5 * 2.0 ** -110, 2.0 ** -100, 2.0 ** -130, 7 * 2.0 ** -135,
              2.0 ** -145, 2.0 ** -120, 3.0 * 2.0 ** -125):
        rows.append(_mx_row(rng, a, [a / 2, a * 0.75, -a / 4, 2.0 ** -149, -(2.0 ** -149), -0.0, a * 0.375]))
    out.append((np.stack(rows), 0, dep | tag_mask("zero_block", "subnormal_input", "negative_zero")))
    return [(x, float(np.max(np.abs(x))), t) for x, _, t in out]


def _amax_bits(v: float) -> int:
    return int(np.array([v], dtype=np.float32).view(np.uint32)[0])


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


#: Quantizer settings a case may carry beyond a set's params (the mutant catalogue's choices).
_OPTIONAL_SETTINGS = ("nbits", "sr_eval", "rht_output")


def quantize_case(x: np.ndarray, g: float, r: np.ndarray | None, p: dict[str, Any],
                  impl: str = "fast") -> dict[str, np.ndarray]:
    """fpspec's quantizer on one case with the settings ``p`` (a set's params): the four outputs."""
    tensor_scale = get_scheme(p["scheme"]).tensor_scale
    impl, device = split_impl(impl)
    x, r = to_twin(x, device), to_twin(r, device)
    q = quantize(x, p["scheme"], profile=p["profile"], block=p["block"], tile=p["tile"],
                 target=p["target"] if tensor_scale else None, amax=None if (g == 0 or not tensor_scale) else g,
                 rounding=p["rounding"], rbits=r, columnwise=p["columnwise"], rht=p["rht"],
                 scale_format=p["scale_format"], zero_scale_rule=p["zero_scale_rule"], impl=impl,
                 payload_format=p.get("payload_format"), **{k: p[k] for k in _OPTIONAL_SETTINGS if k in p})
    return {"codes": from_twin(q.codes), "scales": from_twin(q.scales),
            "decode_scale": np.array(q.decode_scale, dtype=np.float32).view(np.uint32),
            "dequant": np.asarray(from_twin(dequantize(q)), dtype=np.float32).view(np.uint32)}


CaseFn = Callable[[np.ndarray, float, "np.ndarray | None", dict[str, Any]], dict[str, np.ndarray]]


def quantize_cases(meta: dict[str, Any], inputs: dict[str, np.ndarray], case_fn: CaseFn) -> dict[str, np.ndarray]:
    """``case_fn(x, g, r, params)`` on every case of a quantize set, the outputs stacked."""
    xs = inputs["x"].view(np.float32)
    amax = inputs["amax"].view(np.float32) if "amax" in inputs else np.zeros(xs.shape[0], np.float32)
    outs: dict[str, list[np.ndarray]] = {}
    for i in range(xs.shape[0]):
        r = inputs["r"][i] if "r" in inputs else None
        for k, v in case_fn(xs[i], float(amax[i]), r, meta["params"]).items():
            outs.setdefault(k, []).append(np.asarray(v))
    return {k: np.stack(v) for k, v in outs.items()}


def quantize_op(meta: dict[str, Any], inputs: dict[str, np.ndarray], impl: str) -> dict[str, np.ndarray]:
    """fpspec's block quantizer on every case of a quantize set."""
    return quantize_cases(meta, inputs, lambda x, g, r, p: quantize_case(x, g, r, p, impl))


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
    pf = c["payload_format"]
    common = {"rounding": c["rounding"], "rounding_format": pf, "depends_on": sorted(depends)}
    if sr:
        common.update(sr_variant="sr-midpoint", sr_bits=8, random_input="r")
    outputs = {
        "codes": {"format": pf, "dtype": "uint8", "shape": list(view),
                  "layout": ("one E2M1 code per byte (low nibble)" if pf == "e2m1" else f"one {pf.upper()} code "
                             "per byte") + ", the quantized view row-major", **common},
        "scales": {"format": c["scale_format"], "dtype": "uint8", "shape": list(sgrid),
                   "layout": "one scale code per block, row-major block order", **common},
        "decode_scale": {"format": "fp32", "dtype": "uint32", "shape": [],
                         "layout": "FP32 bits of the tensor decode scale (1 for "
                         + ("mxfp4)" if pf == "e2m1" else "mxfp8)"), **common},
        "dequant": {"format": "fp32", "dtype": "uint32", "shape": list(view),
                    "layout": "FP32 bits of the profile's dequantized view", **common},
    }
    keys = ["scheme", "profile", "tile", "block", "target", "scale_format", "rounding", "columnwise", "rht",
            "zero_scale_rule"]
    if pf != "e2m1":  # (E2M1 sets keep their earlier params, so their pack entries stay)
        keys.append("payload_format")
    params = {k: c[k] for k in keys}
    meta = make_meta(name, "quantize", model, description, reqs, seed, level, n, in_meta, outputs,
                     key="array", scheme=c["scheme"], profile=f"{c['scheme']}/{c['profile']}", params=params,
                     formats_used=sorted({pf, c["scale_format"], "fp32"}))
    tags = np.array([cs[2] for cs in cases], dtype=np.uint32)

    def finish(plan: SetPlan, outs: dict[str, np.ndarray]) -> None:
        for i in range(n):
            plan.tags[i] |= np.uint32(_case_tags(c, xs[i], float(g[i]), outs["scales"][i], int(plan.tags[i])))
            fmt = get_format(pf)
            if ((outs["codes"][i] & (fmt.sign_mask - 1)) == fmt.max_finite_code).any():
                plan.tags[i] |= np.uint32(1 << TAGS["saturated_payload"])
        plan.tags[plan.tags & np.uint32(tag_mask("zero_scale", "saturated_scale", "stale_amax")) != 0] |= \
            np.uint32(1 << TAGS["profile_dependent"])

    return SetPlan(name, meta, inputs, tags, key=np.arange(n, dtype=np.uint64), impl="fast", finish=finish)


_REQ = {"ue5m3": ["FPS-BLK-2", "FPS-BLK-3"], "nvfp4": ["FPS-BLK-3"], "mxfp4": ["FPS-BLK-12", "FPS-BLK-22"],
        "mxfp8": ["FPS-BLK-26", "FPS-BLK-27", "FPS-BLK-28"]}
#: Profiles with a requirement of their own (the other sets cite their scheme's).
_PROFILE_REQ = {("nvfp4", "torchao-0.18"): ["FPS-BLK-18"], ("ue5m3", "seed-portable"): ["FPS-BLK-3", "FPS-BLK-25"],
                ("mxfp4", "microxcaling"): ["FPS-BLK-12", "FPS-BLK-22", "FPS-BLK-24"],
                ("nvfp4", "torchao-0.18-cuda"): ["FPS-BLK-18", "FPS-BLK-29"],
                ("mxfp4", "torchao-0.18-rceil-cuda"): ["FPS-BLK-12", "FPS-BLK-22", "FPS-BLK-23", "FPS-BLK-29"]}


def _reqs(c: dict[str, Any]) -> list[str]:
    key = (c["scheme"], c["profile"])
    if key in _PROFILE_REQ:
        return _PROFILE_REQ[key]
    if c["profile"].startswith("torchao-0.18-"):
        return ["FPS-BLK-12", "FPS-BLK-22", "FPS-BLK-23"]
    return _REQ[c["scheme"]]


def model_block_quantize(level: int) -> list[SetPlan]:
    """block-quantize: per scheme, profile, tile shape, T, scale format, payload rounding and
    layout: wide-range random blocks, zero blocks and an all-zero tensor (except for a profile
    that refuses a zero tensor amax), -0.0, blocks at and around the smallest scale (ties at half
    the smallest subnormal scale), stale tensor amax (held g below and above the current amax,
    up to and past the saturation bound), and payload ties at every E2M1 midpoint; mxfp4 sets
    add block amaxes where a binary32 log2 rounds across an integer (B[k], A[k] of FPS-BLK-22),
    elements that microxcaling's binary32 steps round differently, and scale-byte-0 blocks;
    mxfp8 sets (E4M3 and E5M2) add every FP8 code and midpoint at scale bytes from 0 up,
    saturating values, the amaxes where the scale rules part, and byte-0 blocks."""
    plans = []
    for i, c in enumerate(BLOCK_CONFIGS):
        seed = 3000 + i
        rng = np.random.Generator(np.random.PCG64(seed))
        name = set_name(c)
        plans.append(_plan(c, level, seed, "block-quantize", name, _cases(c, rng, level),
                           f"{c['scheme']}/{c['profile']} block quantization, {name[len('quantize-'):]}",
                           _reqs(c) + ["FPS-BLK-1", "FPS-BLK-14", "FPS-VEC-8"]))
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
