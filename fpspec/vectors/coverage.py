"""Named coverage models: which cases each vector set holds and why (docs/vectors.rst, FPS-VEC-8).

Each model is a function ``(level) -> list[SetPlan]``; a plan holds the meta
(without computed outputs), the inputs, the tags and the key.  Outputs are
computed afterwards by :func:`fpspec.vectors.ops.compute`, so the case lists
here never depend on the implementation under test.

Every random choice comes from ``numpy.random.Generator(PCG64(seed))`` drawing
integer bit patterns (a stream numpy keeps stable), with the seed recorded in
the meta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import SPEC_VERSION
from ..choices import RoundingMode, default_policies
from ..convert import encode
from ..formats import get_format
from .ops import float_view, policies_dict
from .schema import GENERATOR_VERSION, SCHEMA_VERSION, TAGS, tag_mask

__all__ = ["SetPlan", "COVERAGE_MODELS", "plans", "vector_policies", "encode_tags", "make_meta",
           "DETERMINISTIC_MODES", "TARGETS"]

#: The 4- and 8-bit conversion targets every encode model covers.
TARGETS = ("e2m1", "e4m3", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0", "e5m2")
DETERMINISTIC_MODES = ("rne", "rtz", "rna", "up", "down")
DECODE_FORMATS = ("e2m1", "e4m3", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0", "e5m2", "fp16", "bf16")


@dataclass
class SetPlan:
    name: str
    meta: dict[str, Any]
    inputs: dict[str, np.ndarray]
    tags: np.ndarray
    key: np.ndarray | None = None
    #: "exact" for sets small enough for the Fraction reference, else "fast".
    impl: str = "exact"
    #: Post-processing after outputs are computed (e.g. tags that depend on outputs).
    finish: Callable[["SetPlan", dict[str, np.ndarray]], None] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------ policies
#: FPS-VEC-9: where a format's default policy is "error" (no defined output), the
#: vectors use this named choice instead and record it in each output's meta.
#: e2m1 NaN -> +0 (code 0x0): TransformerEngine's NVFP4 reference; unsigned
#: negative -> NaN code and UE8M0 zero -> NaN code: ml_dtypes and the OCP reading.
_VECTOR_POLICY_OVERRIDES: dict[str, dict[str, str]] = {
    "e2m1": {"nan": "zero"},
    "ue4m3": {"negative": "nan"},
    "ue5m3": {"negative": "nan"},
    "ue5m3fnu": {"negative": "nan"},
    "ue8m0": {"negative": "nan", "zero": "nan"},
}

#: Extra outputs under other named policies, where known implementations choose
#: differently from fpspec's default (output name suffix -> policy changes).  The
#: declarations in vectors/declarations/ claim them.
_ALT_OUTPUTS: dict[str, list[tuple[str, str, dict[str, str]]]] = {
    # ml_dtypes float4_e2m1fn: NaN -> a zero of the opposite sign.
    "e2m1": [("rne_nan_flipped_zero", "rne", {"nan": "flipped-zero"})],
    # torch >= 2.12's cast to float8_e4m3fn saturates (+-Inf too); ml_dtypes gives NaN past 464.
    "e4m3": [("rne_ovf_sat", "rne", {"overflow": "sat"})],
    # ml_dtypes float8_e5m2 writes the IEEE quiet NaN 0x7E/0xFE.
    "e5m2": [("rne_nan_quiet", "rne", {"nan": "quiet"})],
    # E8M0 rounded on binary32 bits (ties up, the lowest binade up): ml_dtypes before 0.7 with
    # 0.0 and negatives -> NaN; torch with 0.0 -> 0x00 and negatives -> the code of |x|
    # (ml_dtypes 0.7 is the plain rna output).
    # rna_zero_min is the older approximation of torch's cast (before rne-bits existed).
    "ue8m0": [("rna_zero_min", "rna", {"zero": "min"}),
              ("rne_bits", "rne-bits", {}),
              ("rne_bits_zero_min_neg_abs", "rne-bits", {"zero": "min", "negative": "abs"})],
}


def vector_policies(fmt: str, **changes: str):
    pol = default_policies(fmt).with_(**_VECTOR_POLICY_OVERRIDES.get(fmt, {}))
    return pol.with_(**changes) if changes else pol


def _alternatives(fmt: str) -> list[dict[str, str]]:
    """Every single-policy change that a real implementation makes, for profile_dependent tags."""
    f = get_format(fmt)
    alts = [{"overflow": "sat"}, {"overflow": "nonfinite"}] if f.has_nan else [{"overflow": "sat"}]
    alts += ([{"nan": "zero"}] if f.has_zero else []) + [{"nan": "max"}] \
        + ([{"nan": "nan"}, {"nan": "quiet"}] if f.has_nan else []) \
        + ([{"nan": "flipped-zero"}] if f.has_zero and f.signed else [])
    if not f.signed:
        alts += [{"negative": "nan"}, {"negative": "abs"}] + ([{"negative": "zero"}] if f.has_zero else [])
    if not f.has_zero:
        alts += [{"zero": "nan"}, {"zero": "min"}]
    return alts


# ---------------------------------------------------------------------- meta
def make_meta(name: str, operation: str, coverage_model: str, description: str, requirements: list[str],
              seed: int | None, level: int, cases: int, inputs: dict[str, dict], outputs: dict[str, dict],
              key: str, **extra: Any) -> dict[str, Any]:
    meta = {
        "schema_version": SCHEMA_VERSION, "spec_version": SPEC_VERSION,
        "generator_version": GENERATOR_VERSION, "name": name, "operation": operation,
        "coverage_model": coverage_model, "description": description, "requirements": sorted(set(requirements)),
        "seed": seed, "level": level, "cases": cases, "key": key, "tags": dict(TAGS),
        "inputs": inputs, "outputs": outputs,
    }
    meta.update(extra)
    return meta


def _encode_output(fmt: str, mode: str, pol_changes: dict[str, str] | None = None,
                   sr_bits: int | None = None, random_input: str | None = None) -> dict[str, Any]:
    f = get_format(fmt)
    pol = vector_policies(fmt, **(pol_changes or {}))
    depends = [f"{k}-policy:{fmt}={v}" for k, v in policies_dict(pol).items()
               if v != "error" and (k != "negative" or not f.signed) and (k != "zero" or not f.has_zero)]
    o: dict[str, Any] = {"format": fmt, "dtype": f.storage_dtype, "shape": [], "rounding": mode,
                         "policies": policies_dict(pol), "depends_on": sorted(depends)}
    m = RoundingMode.parse(mode)
    if m.stochastic:
        o.update(sr_variant=m.value, sr_bits=sr_bits, random_input=random_input)
        o["depends_on"] = sorted(o["depends_on"] + [f"sr:{m.value}/{sr_bits}"])
    return o


def _float_input(fmt: str) -> dict[str, Any]:
    return {"format": fmt, "dtype": get_format(fmt).storage_dtype, "shape": [], "role": "value bits"}


# ---------------------------------------------------------------------- tags
def encode_tags(xbits: np.ndarray, in_fmt: str, target: str) -> np.ndarray:
    """Tags of each input of an encode case relative to ``target`` (exact float64 arithmetic)."""
    fi, ft = get_format(in_fmt), get_format(target)
    b = xbits.astype(np.uint64)
    with np.errstate(invalid="ignore"):
        x = float_view(xbits, in_fmt).astype(np.float64)
    tags = np.zeros(x.shape, dtype=np.uint32)

    def put(mask: np.ndarray, name: str) -> None:
        tags[mask] |= np.uint32(1 << TAGS[name])

    nan, inf = np.isnan(x), np.isinf(x)
    fin = ~nan & ~inf
    a = np.where(fin, np.abs(x), 0.0)
    put(nan, "nan_input")
    put(inf, "inf_input")
    put(fin & (a == 0), "zero_input")
    put(fin & (a == 0) & np.signbit(x), "negative_zero")
    expf = (b >> np.uint64(fi.man_bits)) & np.uint64(fi.exp_max_field)
    manf = b & np.uint64(fi.man_max_field)
    put((expf == 0) & (manf != 0), "subnormal_input")
    maxf = float(ft.max_finite)
    put(inf | (fin & (a > maxf)), "overflow")
    nz = fin & (a > 0)
    put(nz & (a < float(ft.min_normal)), "subnormal_output")
    if ft.has_zero:
        put(nz & (a <= float(ft.min_positive) / 2), "underflow")
    if not ft.signed:
        put(~nan & (x < 0), "negative_unsigned")
    # position between neighbours on the target's grid, unbounded above (exact in float64)
    _, e2 = np.frexp(np.where(nz, a, 1.0))
    e = np.maximum(e2.astype(np.int64) - 1, ft.emin)
    q = np.ldexp(1.0, (e - ft.man_bits).astype(np.int32))
    rem = a - np.floor(a / q) * q
    half = q / 2
    in_range = nz & (ft.subnormals | (a >= float(ft.min_normal)))
    put(in_range & (rem == half), "tie")
    put(in_range & (rem != 0), "inexact")
    put(in_range & (rem >= half), "guard")
    put(in_range & (rem != 0) & (rem != half), "sticky")
    put(nz & ~in_range, "inexact")  # below ue8m0's smallest value
    return tags


def _profile_dependent(x: np.ndarray, target: str, outputs: dict[str, dict]) -> np.ndarray:
    """Cases whose output changes under any one alternative policy (profile_dependent tag)."""
    dep = np.zeros(x.shape, dtype=bool)
    for o in outputs.values():
        if o.get("sr_bits"):
            continue
        base = o["policies"]
        ref = encode(x, target, o["rounding"], **base)
        for alt in _alternatives(target):
            if all(base[k] == v for k, v in alt.items()):
                continue
            pol = dict(base, **alt)
            try:
                got = encode(x, target, o["rounding"], **pol)
            except Exception:  # an alternative that refuses (error) or is impossible
                continue
            dep |= got != ref
    return dep


#: Only these inputs can change under another overflow / NaN / negative / zero policy.
_POLICY_SENSITIVE = tag_mask("nan_input", "inf_input", "overflow", "negative_unsigned", "zero_input")


def _finish_encode_tags(plan: SetPlan, outputs: dict[str, np.ndarray]) -> None:
    target = plan.extra["target"]
    x = float_view(plan.inputs["x"], plan.meta["inputs"]["x"]["format"])
    det = {k: v for k, v in plan.meta["outputs"].items() if not v.get("sr_bits")}
    sel = np.flatnonzero(plan.tags & np.uint32(_POLICY_SENSITIVE))
    if det and sel.size:
        dep = _profile_dependent(x[sel], target, det)
        plan.tags[sel[dep]] |= np.uint32(1 << TAGS["profile_dependent"])


# ------------------------------------------------------------------ models
def model_decode_all_codes(level: int) -> list[SetPlan]:
    """decode-all-codes: every code of every format of at most 16 bits, decoded to FP32 bits."""
    plans = []
    for fmt in DECODE_FORMATS:
        f = get_format(fmt)
        codes = np.arange(f.num_codes, dtype=f.storage_dtype)
        tags = np.zeros(f.num_codes, dtype=np.uint32)
        for c in range(f.num_codes):
            kind = f.kind(c).value
            t = {"nan": "nan_input", "inf": "inf_input", "zero": "zero_input",
                 "subnormal": "subnormal_input"}.get(kind)
            if t:
                tags[c] |= tag_mask(t)
            if kind == "zero" and f.signed and c & f.sign_mask:
                tags[c] |= tag_mask("negative_zero")
            if kind == "nan" and fmt in ("ue5m3",):
                tags[c] |= tag_mask("profile_dependent")
        out = {"value": {"format": "fp32", "dtype": "uint32", "shape": [], "source_format": fmt,
                         "nan_rule": "a NaN code decodes to 0x7FC00000 with the code's sign bit",
                         "depends_on": ["ue5m3-reserved-decode:nan"] if fmt == "ue5m3" else []}}
        name = f"decode-{fmt}"
        plans.append(SetPlan(name, make_meta(
            name, "decode", "decode-all-codes",
            f"every {fmt} code ({f.num_codes}) decoded exactly to FP32 bits",
            ["FPS-FMT-1", "FPS-FMT-3", "FPS-FMT-6", "FPS-VEC-8"], None, level, f.num_codes,
            {"code": {"format": fmt, "dtype": f.storage_dtype, "shape": [], "role": "code"}}, out,
            key="input:code"), {"code": codes}, tags, impl="exact" if f.bits <= 8 else "fast"))
    return plans


def _encode_plan(name: str, model: str, description: str, in_fmt: str, target: str, xbits: np.ndarray,
                 level: int, seed: int | None, reqs: list[str], impl: str) -> SetPlan:
    outputs = {m: _encode_output(target, m) for m in DETERMINISTIC_MODES}
    for oname, mode, changes in _ALT_OUTPUTS.get(target, []):
        outputs[oname] = _encode_output(target, mode, changes)
    meta = make_meta(name, "encode", model, description,
                     reqs + ["FPS-RND-0", "FPS-RND-1", "FPS-RND-2", "FPS-RND-3", "FPS-RND-4",
                             "FPS-RND-9", "FPS-RND-10", "FPS-VEC-8"],
                     seed, level, int(xbits.shape[0]), {"x": _float_input(in_fmt)}, outputs,
                     key="input:x", target=target)
    return SetPlan(name, meta, {"x": xbits}, encode_tags(xbits, in_fmt, target), impl=impl,
                   finish=_finish_encode_tags, extra={"target": target})


def model_exhaustive_16bit(level: int) -> list[SetPlan]:
    """exhaustive-16bit: every FP16 and BF16 bit pattern into each 4- and 8-bit format, every
    deterministic rounding (unsigned targets: the 32768 patterns with sign bit 0)."""
    plans = []
    for in_fmt in ("fp16", "bf16"):
        for t in TARGETS:
            n = 1 << 16 if get_format(t).signed else 1 << 15
            xbits = np.arange(n, dtype=np.uint16)
            plans.append(_encode_plan(
                f"encode-{in_fmt}-{t}-exhaustive", "exhaustive-16bit",
                f"every {in_fmt} input{'' if n == 65536 else ' with sign bit 0'} into {t}",
                in_fmt, t, xbits, level, None, [], "fast"))
    return plans


def _boundary_values(target: str, rng: np.random.Generator, n_random: int) -> np.ndarray:
    """FP32 boundary table of one target, crossed with sign, last bit, guard and sticky."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _boundary_values_inner(target, rng, n_random)


def _boundary_values_inner(target: str, rng: np.random.Generator, n_random: int) -> np.ndarray:
    f = get_format(target)
    vals: list[float] = []
    ulp = lambda v: np.spacing(np.float32(v)).astype(np.float64)  # noqa: E731
    pos = [float(v) for v in f.finite_values() if v > 0]
    qtop = float(f.max_finite) - (pos[-2] if len(pos) > 1 else 0.0)
    grid = ([0.0] if f.has_zero else []) + pos + [float(f.max_finite) + qtop, float(f.max_finite) + 2 * qtop]
    for lo, hi in zip(grid[:-1], grid[1:]):
        q = hi - lo
        for frac in (0.0, 0.25, 0.5, 0.75):  # guard x sticky at quarter resolution
            v = lo + frac * q
            vals += [v, float(np.float32(v) + ulp(v)), float(np.float32(v) - ulp(v)) if v > 0 else 0.0]
        vals.append(float(np.float32(hi) - ulp(hi)))
    # ue8m0 has no subnormal grid below its smallest value
    lo_edge = float(f.min_positive)
    vals += [lo_edge / 2, lo_edge / 4, lo_edge / 2 * 3 / 2, float(np.float32(lo_edge / 2) + ulp(lo_edge / 2)),
             float(np.float32(lo_edge / 2) - ulp(lo_edge / 2)), 2.0 ** -149, 2.0 ** -126, 2.0 ** -127,
             float(np.float32(2.0 ** -126) - ulp(2.0 ** -126)), 1.1754942e-38]
    big = float(np.finfo(np.float32).max)
    vals += [big, 2.0 ** 127, 2.0 ** 127 * 1.5, 2 * float(f.max_finite), 4 * float(f.max_finite)]
    arr = np.array([v for v in vals if v <= big], dtype=np.float64).astype(np.float32)
    specials = np.array([0x00000000, 0x7F800000, 0x7FC00000, 0x7F800001, 0x7FFFFFFF, 0x7FA00000],
                        dtype=np.uint32)
    rnd = rng.integers(0, 1 << 32, size=n_random, dtype=np.uint64).astype(np.uint32)
    # weighted random: half of the random cases are scaled into the target's range
    pos_bits = np.concatenate([arr.view(np.uint32), specials])
    mag = pos_bits & np.uint32(0x7FFFFFFF)
    allb = np.concatenate([mag, mag | np.uint32(0x80000000), rnd])
    lo_e = max(f.emin - f.man_bits - 2, -149) + 127
    hi_e = min(f.emax + 2, 127) + 127
    near = rng.integers(max(lo_e, 1), hi_e, size=n_random, dtype=np.uint64).astype(np.uint32)
    mant = rng.integers(0, 1 << 24, size=n_random, dtype=np.uint64).astype(np.uint32)
    near_bits = (mant & np.uint32(0x807FFFFF)) | (near << np.uint32(23)) | ((mant >> np.uint32(23)) << np.uint32(31))
    allb = np.concatenate([allb, near_bits])
    return np.unique(allb)


def model_fp32_boundary(level: int) -> list[SetPlan]:
    """fp32-boundary: FP32 inputs at every tie, one ulp either side, overflow and subnormal edges,
    +-0, +-Inf and NaNs, for both signs, every neighbour pair (both last bits), guard and sticky
    at quarter positions; plus seeded random bit patterns (half of them near the target's range)."""
    plans = []
    for i, t in enumerate(TARGETS):
        seed = 1000 + i
        rng = np.random.Generator(np.random.PCG64(seed))
        xbits = _boundary_values(t, rng, 256 if level == 1 else 65536)
        plans.append(_encode_plan(f"encode-fp32-{t}-boundary", "fp32-boundary",
                                  f"FP32 boundary table and weighted random cases into {t}",
                                  "fp32", t, xbits, level, seed, [], "fast"))
    return plans


def _sr_threshold(variant: str, delta: np.ndarray, nbits: int) -> np.ndarray:
    """The first r whose decision differs from r = 0's (exact on multiples of 2^-(N+1)), per delta."""
    n = 1 << nbits
    if variant == "sr-midpoint":      # up iff r >= (2^(N+1)(1-delta) - 1) / 2
        t = np.ceil((2.0 * n * (1 - delta) - 1) / 2)
    elif variant == "sr-add":         # up iff r >= 2^N (1 - delta)
        t = np.ceil(n * (1 - delta))
    else:                             # sr-unbiased: up iff r < delta 2^N
        t = np.ceil(delta * n)
    return np.clip(t, 0, n - 1).astype(np.int64)


def model_sr(level: int) -> list[SetPlan]:
    """sr-threshold: stochastic rounding with the random value at 0, 2^N-1 and at / one off the
    decision threshold, for deltas at quarter points, 1/2 +- 1 ulp, grid points of 2^-N and
    2^-(N+1), across every neighbour pair of the target, both signs; plus seeded random pairs."""
    plans = []
    combos = [("e2m1", v, b) for v in ("sr-midpoint", "sr-add", "sr-unbiased") for b in (8, 16)]
    combos += [("e4m3", v, 8) for v in ("sr-midpoint", "sr-add", "sr-unbiased")]
    for idx, (t, variant, nbits) in enumerate(combos):
        f = get_format(t)
        seed = 2000 + idx
        rng = np.random.Generator(np.random.PCG64(seed))
        pos = [float(v) for v in f.finite_values() if v >= 0]
        grid = pos + [2 * pos[-1] - pos[-2]]
        if t == "e4m3":  # a representative subset of binades keeps the set small
            grid = [g for g in grid if g <= 2.0 ** -6 or 0.875 <= g <= 2.5 or g >= 384]
        n = 1 << nbits
        deltas = sorted({0.0, 0.25, 0.5, 0.75, 1 / n, 1 - 1 / n, 0.5 - 1 / n, 0.5 + 1 / n,
                         1 / (2 * n), 1 - 1 / (2 * n), 37 / n, 0.5 - 2.0 ** -20, 0.5 + 2.0 ** -20})
        xs, rs, tg = [], [], []
        for lo, hi in zip(grid[:-1], grid[1:]):
            if hi - lo <= 0:
                continue
            for d in deltas:
                v = np.float32(lo + d * (hi - lo))
                dd = (float(v) - lo) / (hi - lo)
                thr = int(_sr_threshold(variant, np.array([dd]), nbits)[0])
                cand = {0: "sr_extreme", n - 1: "sr_extreme"}
                for rr in (thr - 1, thr, thr + 1):
                    if 0 <= rr < n:
                        cand.setdefault(rr, "sr_threshold")
                for rr, why in cand.items():
                    for sgn in (1.0, -1.0):
                        xs.append(np.float32(sgn * v))
                        rs.append(rr)
                        tg.append(tag_mask(why))
        # specials and random pairs
        for v in (0.0, -0.0, np.inf, -np.inf, np.nan, float(f.max_finite) * 4):
            for rr in (0, n - 1):
                xs.append(np.float32(v))
                rs.append(rr)
                tg.append(tag_mask("sr_extreme"))
        nr = 512 if level == 1 else 1 << 16
        rx = (rng.integers(0, 1 << 24, size=nr, dtype=np.uint64).astype(np.float64) / (1 << 24)
              * float(f.max_finite) * 1.25).astype(np.float32)
        rsgn = rng.integers(0, 2, size=nr, dtype=np.uint64).astype(bool)
        rx[rsgn] = -rx[rsgn]
        rr_ = rng.integers(0, n, size=nr, dtype=np.uint64)
        xs += list(rx)
        rs += [int(v) for v in rr_]
        tg += [0] * nr
        xbits = np.array(xs, dtype=np.float32).view(np.uint32)
        rdtype = np.uint8 if nbits <= 8 else (np.uint16 if nbits <= 16 else np.uint32)
        rbits = np.array(rs, dtype=rdtype)
        tags = encode_tags(xbits, "fp32", t) | np.array(tg, dtype=np.uint32)
        name = f"sr-fp32-{t}-{variant}-{nbits}"
        o = _encode_output(t, variant, sr_bits=nbits, random_input="r")
        m = RoundingMode.parse(variant)
        reqs = {"sr-midpoint": "FPS-RND-5", "sr-add": "FPS-RND-6", "sr-unbiased": "FPS-RND-7"}[m.value]
        meta = make_meta(name, "encode", "sr-threshold",
                         f"{variant} stochastic rounding with {nbits}-bit random values into {t}",
                         ["FPS-RND-0", reqs, "FPS-VEC-8"], seed, level, len(xs),
                         {"x": _float_input("fp32"),
                          "r": {"format": "raw", "dtype": np.dtype(rdtype).name, "shape": [],
                                "role": f"random value, {nbits} bits"}},
                         {"code": o}, key="array", target=t)
        key = np.arange(len(xs), dtype=np.uint64)
        plans.append(SetPlan(name, meta, {"x": xbits, "r": rbits}, tags, key=key,
                             impl="fast", extra={"target": t}))
    return plans


#: Coverage model name -> (function, one-line documentation).  Block, bounds and GEMM
#: models register themselves here from their own modules.
COVERAGE_MODELS: dict[str, Callable[[int], list[SetPlan]]] = {
    "decode-all-codes": model_decode_all_codes,
    "exhaustive-16bit": model_exhaustive_16bit,
    "fp32-boundary": model_fp32_boundary,
    "sr-threshold": model_sr,
}


def model_docs() -> dict[str, str]:
    return {k: " ".join((fn.__doc__ or "").split()) for k, fn in COVERAGE_MODELS.items()}


def plans(level: int, models: list[str] | None = None) -> list[SetPlan]:
    out: list[SetPlan] = []
    for name, fn in COVERAGE_MODELS.items():
        if models is None or name in models:
            out.extend(fn(level))
    return out
