"""The mutant catalogue: plausible wrong implementations, as data (FPS-MUT-1).

A conformance pack is worth the bugs it catches.  Each :class:`Mutant` is one wrong kernel a
team could plausibly write (an operation order a profile excludes, a rounding mode at one
site, a named choice set otherwise, a layout mistake), written as a named variation of
fpspec's own implementation (:mod:`fpspec.mutants.variations`), with the pack's sets it
must fail (``sets``, globs over set names).  ``fpspec vectors mutants PACK`` runs every mutant
on its sets; the pack's acceptance test is that every mutant is killed (some set's outputs
differ) or carries a written argument (``equivalent``) that it is the same function on the
domain its sets cover.  The catalogue is built once, from the tables below.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..errors import FpspecError
from ..exact.blocks import RHT_SIGNS
from ..fast.rht import rht16_fast
from ..formats import get_format
from ..named_models import get_model
from ..vectors.checker import select_names, split_globs
from ..schemes import AmaxZero, SignedZero
from .binary32 import Fp32Steps
from .variations import (DecodeVariant, EncodeChoice, EncodeVia, Fp32Order, GemmChoice, GemmOperands, MxExponent,
                         OutputLayout, QuantizeChoice, Variation, subnormal_codes)

__all__ = ["Mutant", "CATALOGUE", "get_mutant", "mutants_for_set"]


@dataclass(frozen=True)
class Mutant:
    """One plausible wrong implementation (FPS-MUT-1).

    Attributes:
        name: ``<what it implements>:<what is wrong>``, unique.
        family: the kind of mistake (``operation-order``, ``rounding-site``, ``named-choice``,
            ``layout``, ``stochastic``, ``mx-scale``, ``conversion``, ``decode``, ``gemm``).
        sets: comma-separated globs of the pack's set names it runs on.
        variation: how it computes (a :class:`~fpspec.mutants.variations.Variation`).
        equivalent: empty, or the written argument that it is the same function as the
            spec on every input its sets could hold (then it needs no killing).
    """

    name: str
    family: str
    sets: str
    variation: Variation
    equivalent: str = ""

    @property
    def description(self) -> str:
        return self.variation.describe()


# ------------------------------------------------------------------ binary32 operation orders
#: The binary32 profiles and the glob of their sets; the step each mutant changes, per profile.
_FP32_PROFILES = {
    "ue5m3/seed-fp32": "quantize-ue5m3-seed-fp32-*",
    "ue5m3/seed-portable": "quantize-ue5m3-seed-portable-*",
    "nvfp4/te-fp32": "quantize-nvfp4-te-fp32-*",
    "nvfp4/te-kernel": "quantize-nvfp4-te-kernel-*",
}


def _fp32_variants(profile: str) -> list[tuple[str, str, Fp32Steps]]:
    """(mutant suffix, family, steps) for one binary32 profile."""
    s = Fp32Steps()
    te = profile.startswith("nvfp4/")
    out = [
        ("divide-first-scale", "operation-order", s.with_(block_scale="divide-first")),
        ("scale-times-ge-over-6", "operation-order", s.with_(block_scale="mul-then-divide")),
        ("scale-times-ge-then-sixth", "operation-order", s.with_(block_scale="mul-ge-then-sixth")),
        ("scale-over-6-over-gd", "operation-order", s.with_(block_scale="a-over-six-gd")),
        ("multiplier-ge-over-s", "operation-order", s.with_(multiplier="ge-over-s")),
        ("multiplier-recip-s-times-ge", "operation-order", s.with_(multiplier="recip-s-times-ge")),
        ("payload-divided-by-scale", "operation-order", s.with_(multiplier="divide-by-product")),
        ("global-6-times-t-over-g", "operation-order", s.with_(global_encode="six-times-t-over-g")),
        ("global-6t-times-recip-g", "operation-order", s.with_(global_encode="six-t-times-recip-g")),
        ("decode-scale-g-over-6t", "operation-order", s.with_(global_decode="g-over-six-t")),
        ("scale-rtz", "rounding-site", s.with_(scale_rounding="rtz")),
        ("scale-ties-away", "rounding-site", s.with_(scale_rounding="rna")),
        ("scale-round-up", "rounding-site", s.with_(scale_rounding="up")),
        ("payload-ties-away", "rounding-site", s.with_(payload_rounding="rna")),
        ("payload-rtz", "rounding-site", s.with_(payload_rounding="rtz")),
        ("scale-overflow-to-nan", "named-choice", s.with_(scale_saturate=False)),
        ("subnormal-scales-flushed", "named-choice", s.with_(scale_flush=True)),
        ("subnormal-inputs-flushed", "named-choice", s.with_(ftz_input=True)),
        ("signed-zero-" + ("keep" if te and profile.endswith("te-fp32") else "positive"), "named-choice",
         s.with_(signed_zero=SignedZero.KEEP if profile.endswith("te-fp32") else SignedZero.POSITIVE)),
        ("zero-scale-rule-" + ("on" if te else "off"), "named-choice", s.with_(zero_scale_rule=te)),
        ("multiplier-uncapped", "named-choice", s.with_(cap_multiplier=False)),
        ("zero-amax-" + ("one" if profile.endswith("te-fp32") else "flt-max"), "named-choice",
         s.with_(amax_zero=AmaxZero.ONE if profile.endswith("te-fp32") else AmaxZero.FLT_MAX)),
    ]
    own = {"ue5m3/seed-fp32": "seed-kernel", "ue5m3/seed-portable": "seed-portable"}.get(profile, "te")
    for order in ("seed-kernel", "seed-portable", "te", "q-s-over-ge", "q-times-s-g-over-six-t"):
        if order != own:
            out.append((f"dequantize-{order}", "operation-order", s.with_(dequant=order)))
    return out


def _fp32_mutants() -> list[Mutant]:
    return [Mutant(f"{profile}:{suffix}", family, sets, Fp32Order(steps))
            for profile, sets in _FP32_PROFILES.items() for suffix, family, steps in _fp32_variants(profile)]


# ------------------------------------------------------------------ named choices of the quantizer
def _choice(name: str, family: str, sets: str, equivalent: str = "", **changes: object) -> Mutant:
    return Mutant(name, family, sets, QuantizeChoice(dict(changes)), equivalent)


def _rht_view(signs: tuple[int, ...]):
    """A view function: the columnwise view transformed with other RHT signs s' (FPS-BLK-10).
    sum_i s'_i H_ij x_i / 4 is TE's transform of x_i s'_i s_i, so fpspec's own transform of the
    sign-flipped view (exact flips) computes it."""
    flip = np.array([a * b for a, b in zip(signs, RHT_SIGNS)], np.float32)

    def view(x: np.ndarray, spec, p: dict) -> np.ndarray:
        v = np.ascontiguousarray(x.T if p["columnwise"] else x)
        return rht16_fast(np.ascontiguousarray(v * np.tile(flip, v.shape[1] // 16)))
    return view


def _exact_profile_mutants() -> list[Mutant]:
    out = []
    for scheme in ("ue5m3", "nvfp4"):
        base = f"quantize-{scheme}-exact-1x16"
        nm = f"{scheme}/exact"
        if scheme == "ue5m3":  # (nvfp4 has blocks of 16 only)
            out.append(_choice(f"{nm}:block-32", "named-choice", base, block=32))
        out += [
            _choice(f"{nm}:in-binary32", "operation-order", base, profile="seed-fp32" if scheme == "ue5m3"
                    else "te-kernel"),
            _choice(f"{nm}:payload-ties-away", "rounding-site", base, rounding="rna"),
            _choice(f"{nm}:payload-rtz", "rounding-site", base, rounding="rtz"),
            _choice(f"{nm}:tile-16x16", "named-choice", base, tile="BxB"),
            _choice(f"{nm}:target-2048", "named-choice", base, target=2048.0),
        ]
    out += [
        _choice("ue5m3/exact:zero-scale-rule-off", "named-choice", "quantize-ue5m3-exact-1x16,bounds-ue5m3-exact-1x16",
                zero_scale_rule=False),
        _choice("ue5m3/exact:zero-scale-rule-on", "named-choice", "quantize-ue5m3-exact-1x16-nozsr",
                zero_scale_rule=True),
        _choice("nvfp4/exact:zero-scale-rule-on", "named-choice", "quantize-nvfp4-exact-1x16", zero_scale_rule=True),
        _choice("ue5m3/exact:other-ue5m3-variant", "named-choice", "quantize-ue5m3-exact-1x16,bounds-ue5m3-exact-1x16",
                scale_format="ue5m3fnu"),
        _choice("ue5m3fnu/exact:other-ue5m3-variant", "named-choice",
                "quantize-ue5m3-exact-1x16-ue5m3fnu,bounds-ue5m3-exact-1x16-ue5m3fnu", scale_format="ue5m3"),
        _choice("ue5m3/exact-t2048:target-448", "named-choice", "quantize-ue5m3-exact-1x16-t2048,bounds-*-t2048",
                target=448.0),
        _choice("ue5m3/exact-16x16:tile-1x16", "named-choice", "quantize-ue5m3-exact-16x16", tile="1xB"),
        _choice("ue5m3/exact-1x32:block-16", "named-choice", "quantize-ue5m3-exact-1x32", block=16),
        _choice("ue5m3/seed-fp32:real-arithmetic", "operation-order", "quantize-ue5m3-seed-fp32-1x16",
                profile="exact"),
        _choice("ue5m3/seed-fp32:seed-portable-dequantize", "operation-order", "quantize-ue5m3-seed-fp32-1x16",
                profile="seed-portable"),
        _choice("ue5m3/seed-fp32-colwise:rowwise-view", "layout", "quantize-ue5m3-seed-fp32-1x16-colwise",
                columnwise=False),
        _choice("nvfp4/te-fp32:te-kernel", "named-choice", "quantize-nvfp4-te-fp32-1x16", profile="te-kernel"),
        _choice("nvfp4/te-kernel:te-fp32", "named-choice", "quantize-nvfp4-te-kernel-1x16", profile="te-fp32"),
        _choice("nvfp4/te-fp32-rht:no-rht", "named-choice", "quantize-nvfp4-te-fp32-1x16-colwise-rht", rht=False),
        _choice("nvfp4/te-fp32-rht:bf16-transform", "named-choice", "quantize-nvfp4-te-fp32-1x16-colwise-rht",
                rht_output="bf16"),
        Mutant("nvfp4/te-fp32-rht:signs-reversed", "named-choice", "quantize-nvfp4-te-fp32-1x16-colwise-rht",
               Fp32Order(Fp32Steps(), view=_rht_view(tuple(reversed(RHT_SIGNS))))),
        Mutant("nvfp4/te-fp32-rht:no-signs", "named-choice", "quantize-nvfp4-te-fp32-1x16-colwise-rht",
               Fp32Order(Fp32Steps(), view=_rht_view((1,) * 16))),
        _choice("nvfp4/te-fp32-16x16:tile-1x16", "named-choice", "quantize-nvfp4-te-fp32-16x16", tile="1xB"),
        _choice("nvfp4/torchao-0.18:te-fp32", "named-choice", "quantize-nvfp4-torchao-0.18-1x16", profile="te-fp32"),
        _choice("nvfp4/torchao-0.18:cuda-reciprocals", "named-choice", "quantize-nvfp4-torchao-0.18-1x16",
                profile="torchao-0.18-cuda"),
        _choice("nvfp4/torchao-0.18-cuda:cpu-division", "named-choice", "quantize-nvfp4-torchao-0.18-cuda-1x16",
                profile="torchao-0.18"),
    ]
    return out


def _sr_mutants() -> list[Mutant]:
    out = []
    for prof in ("exact", "seed-fp32"):
        sets = f"quantize-ue5m3-{prof}-1x16-sr-midpoint*"
        out += [
            _choice(f"ue5m3/{prof}-sr:sr-add", "stochastic", sets, rounding="sr-add"),
            _choice(f"ue5m3/{prof}-sr:sr-unbiased", "stochastic", sets, rounding="sr-unbiased"),
            _choice(f"ue5m3/{prof}-sr:rne", "stochastic", sets, rounding="rne"),
            _choice(f"ue5m3/{prof}-sr:16-bit-width", "stochastic", sets, nbits=16),
        ]
    out.append(_choice("ue5m3/seed-fp32-sr:fp32-evaluation", "stochastic",
                       "quantize-ue5m3-seed-fp32-1x16-sr-midpoint*", sr_eval="fp32"))
    return out


def _mx_mutants() -> list[Mutant]:
    out = []
    modes = ("floor", "ceil", "even", "rceil")
    for scheme, pfs in (("mxfp4", ("",)), ("mxfp8", ("", "-e5m2"))):
        for pf in pfs:
            for mode in modes:
                sets = f"quantize-{scheme}-{mode}-1x32{pf}"
                for other in modes:
                    if other != mode:
                        out.append(_choice(f"{scheme}{pf}/{mode}:{other}", "mx-scale", sets, profile=other))
            fl = f"quantize-{scheme}-floor-1x32{pf}"
            out += [
                Mutant(f"{scheme}{pf}/floor:exponent-plus-one", "mx-scale", fl, MxExponent(offset=1)),
                Mutant(f"{scheme}{pf}/floor:exponent-minus-one", "mx-scale", fl, MxExponent(offset=-1)),
                _choice(f"{scheme}{pf}/floor:ties-away", "rounding-site", fl, rounding="rna"),
                _choice(f"{scheme}{pf}/floor-rna:rne", "rounding-site", fl + "-rna", rounding="rne"),
            ]
    out += [
        Mutant("mxfp4/floor:emax-of-e4m3", "mx-scale", "quantize-mxfp4-floor-1x32", MxExponent(emax_of="e4m3")),
        Mutant("mxfp8/floor:emax-of-e5m2", "mx-scale", "quantize-mxfp8-floor-1x32", MxExponent(emax_of="e5m2")),
        Mutant("mxfp8-e5m2/floor:emax-of-e4m3", "mx-scale", "quantize-mxfp8-floor-1x32-e5m2",
               MxExponent(emax_of="e4m3")),
    ]
    for mode in ("floor", "ceil", "even", "rceil"):
        out.append(_choice(f"mxfp4/torchao-0.18-{mode}:ocp-zero-byte", "mx-scale",
                           f"quantize-mxfp4-torchao-0.18-{mode}-1x32", profile=mode))
    out += [
        _choice("mxfp4/microxcaling:ocp-floor", "mx-scale", "quantize-mxfp4-microxcaling-1x32", profile="floor"),
        _choice("mxfp4/microxcaling-rna:ocp-floor", "mx-scale", "quantize-mxfp4-microxcaling-1x32-rna",
                profile="floor", rounding="rna"),
        _choice("mxfp4/microxcaling:ties-away", "rounding-site", "quantize-mxfp4-microxcaling-1x32", rounding="rna"),
        _choice("mxfp4/microxcaling-rtz:rne", "rounding-site", "quantize-mxfp4-microxcaling-1x32-rtz", rounding="rne"),
        _choice("mxfp4/torchao-0.18-rceil-cuda:cpu", "mx-scale", "quantize-mxfp4-torchao-0.18-rceil-cuda-1x32",
                profile="torchao-0.18-rceil"),
        _choice("mxfp4/rceil:torchao-binary32-rceil", "mx-scale", "quantize-mxfp4-rceil-1x32",
                profile="torchao-0.18-rceil"),
    ]
    return out


# ------------------------------------------------------------------ layouts
def _scales_column_major(name: str, a: np.ndarray, p: dict) -> np.ndarray:
    return np.ascontiguousarray(a.T).reshape(a.shape) if name == "scales" else a


def _codes_high_nibble(name: str, a: np.ndarray, p: dict) -> np.ndarray:
    return (a << 4).astype(np.uint8) if name == "codes" else a


def _scale_rows_reversed(name: str, a: np.ndarray, p: dict) -> np.ndarray:
    return np.ascontiguousarray(a[::-1]) if name == "scales" else a


def _layout_mutants() -> list[Mutant]:
    return [
        Mutant("ue5m3/exact:scales-column-major", "layout", "quantize-ue5m3-exact-1x16",
               OutputLayout("scale grid written in column-major block order", _scales_column_major)),
        Mutant("nvfp4/te-fp32:scales-column-major", "layout", "quantize-nvfp4-te-fp32-1x16",
               OutputLayout("scale grid written in column-major block order", _scales_column_major)),
        Mutant("ue5m3/exact:codes-in-high-nibble", "layout", "quantize-ue5m3-exact-1x16",
               OutputLayout("E2M1 codes in the high nibble", _codes_high_nibble)),
        Mutant("ue5m3/exact:scale-rows-reversed", "layout", "quantize-ue5m3-exact-1x16",
               OutputLayout("scale rows in reverse order", _scale_rows_reversed)),
    ]


# ------------------------------------------------------------------ conversions
_CONVERSION_FORMATS = ("e2m1", "e4m3", "e5m2", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0")


def _encode_mutants() -> list[Mutant]:
    out = []
    for f in _CONVERSION_FORMATS:
        sets = f"encode-fp32-{f}-boundary,encode-bf16-{f}-exhaustive,encode-fp16-{f}-exhaustive"
        fmt = get_format(f)
        out += [
            Mutant(f"encode-{f}:ties-away", "conversion", sets, EncodeChoice(rounding="rna")),
            Mutant(f"encode-{f}:rtz", "conversion", sets, EncodeChoice(rounding="rtz")),
            Mutant(f"encode-{f}:via-bf16", "conversion", f"encode-fp32-{f}-boundary", EncodeVia(via="bf16")),
            Mutant(f"encode-{f}:via-fp16", "conversion", f"encode-fp32-{f}-boundary", EncodeVia(via="fp16")),
            Mutant(f"encode-{f}:inputs-daz", "conversion", sets, EncodeVia(daz=True)),
        ]
        if fmt.subnormals:
            out.append(Mutant(f"encode-{f}:results-ftz", "conversion", sets, EncodeVia(ftz=True)))
        if f != "ue8m0":
            out.append(Mutant(f"encode-{f}:rne-on-bits", "conversion", sets, EncodeChoice(rounding="rne-bits"),
                              equivalent=f"FPS-RND-15: rne-bits is rne in every format with a mantissa field and "
                                         f"subnormals ({f}), so it is the same function"
                              if fmt.man_bits and fmt.subnormals else ""))
        if f != "e2m1":  # (E2M1 has neither Inf nor NaN: it always saturates)
            out.append(Mutant(f"encode-{f}:overflow-flipped", "conversion", sets, EncodeChoice(overflow_flipped=True)))
    for v in ("sr-add", "sr-midpoint", "sr-unbiased"):
        for f, widths in (("e2m1", (8, 16)), ("e4m3", (8,))):
            for n in widths:
                sets = f"sr-fp32-{f}-{v}-{n}"
                for other in ("sr-add", "sr-midpoint", "sr-unbiased"):
                    if other != v:
                        out.append(Mutant(f"sr-{f}-{v}-{n}:{other}", "stochastic", sets, EncodeChoice(rounding=other)))
                out.append(Mutant(f"sr-{f}-{v}-{n}:width-{32 - n if n == 16 else 16}", "stochastic", sets,
                                  EncodeChoice(nbits=16 if n == 8 else 24)))
    return out


def _decode_mutants() -> list[Mutant]:
    def inf_bits(c: np.ndarray, f) -> np.ndarray:
        sign = (c.astype(np.uint32) >> np.uint32(f.bits - 1)) & np.uint32(1) if f.signed else 0
        return (np.uint32(0x7F800000) | (np.uint32(sign) << np.uint32(31))).astype(np.uint32)

    def zero_bits(c: np.ndarray, f) -> np.ndarray:
        sign = (c.astype(np.uint32) >> np.uint32(f.bits - 1)) & np.uint32(1) if f.signed else np.uint32(0)
        return (np.uint32(sign) << np.uint32(31)).astype(np.uint32) * np.ones(c.shape, np.uint32)

    out = [
        Mutant("decode-ue5m3fnu:0xF8-0xFE-as-inf", "decode", "decode-ue5m3fnu",
               DecodeVariant("codes 0xF8..0xFE decoded as +inf (CuTeDSL FloatNV8E5M3FNU before PR #3617)",
                             lambda c, f: (c >= 0xF8) & (c < 0xFF), inf_bits)),
        Mutant("decode-ue5m3:0xF8-as-inf", "decode", "decode-ue5m3",
               DecodeVariant("code 0xF8 decoded as +inf", lambda c, f: c == 0xF8, inf_bits)),
        Mutant("decode-e4m3:nan-as-inf", "decode", "decode-e4m3",
               DecodeVariant("0x7F / 0xFF decoded as +-inf", lambda c, f: (c & 0x7F) == 0x7F, inf_bits)),
        Mutant("decode-ue8m0:nan-as-inf", "decode", "decode-ue8m0",
               DecodeVariant("0xFF decoded as +inf (2^128)", lambda c, f: c == 0xFF, inf_bits)),
    ]
    for f in ("e2m1", "e4m3", "e5m2", "ue4m3", "ue5m3", "ue5m3fnu", "fp16", "bf16"):
        out.append(Mutant(f"decode-{f}:subnormals-as-zero", "decode", f"decode-{f}",
                          DecodeVariant("subnormal codes decoded as zero", subnormal_codes, zero_bits)))
    return out


# ------------------------------------------------------------------ GEMM
#: (preset, set globs) of the pack's GEMM sets, and the parameter changes each is tried with.
_GEMM_SETS = {
    "seed-probe-matched": "gemm-seed-probe-matched-ue5m3-wide,gemm-seed-probe-matched-ue5m3-alpha-witness",
    "seed-probe-matched-nosnap": "gemm-seed-probe-matched-nosnap-ue5m3-wide",
    "seed-triton-h200": "gemm-seed-triton-h200-bf16-wide",
    "seed-triton-h200-snap": "gemm-seed-triton-h200-snap-bf16-wide,gemm-seed-triton-h200-snap-bf16-witness",
    "km-h100-fp8": "gemm-km-h100-fp8-e4m3-wide",
    "km-h100-fp8-promote128": "gemm-km-h100-fp8-promote128-e4m3-wide",
    "km-b200-fp8": "gemm-km-b200-fp8-e4m3-wide",
    "km-h100-bf16": "gemm-km-h100-bf16-bf16-wide",
    "km-a100-bf16": "gemm-km-a100-bf16-bf16-wide",
    "km-v100-fp16": "gemm-km-v100-fp16-fp16-wide",
    "sm90-fp8": "gemm-sm90-fp8-e4m3",
    "sm100-mxf4nvf4": "gemm-sm100-mxf4nvf4-*",
    "sm100-mxf8f6f4": "gemm-sm100-mxf8f6f4-*",
    "sm90-f16": "gemm-sm90-f16-bf16",
    "sm80-f16": "gemm-sm80-f16-bf16",
    "cdna3-fp8": "gemm-cdna3-fp8-*",
    "decoded-fp32": "gemm-decoded-fp32-*",
}


def _gemm_changes(preset: str) -> list[tuple[str, dict]]:
    m = get_model(preset)
    out: list[tuple[str, dict]] = []
    other = {"rne": "rtz", "rtz": "rne"}
    out.append((f"accumulate-{other[m.accumulate_rounding]}", {"accumulate_rounding": other[m.accumulate_rounding]}))
    if m.group_size:
        out.append(("group-half", {"group_size": m.group_size // 2, "instruction_k": None,
                                   "require_full_groups": False, "k_tile": None}))
        out.append(("group-double", {"group_size": m.group_size * 2, "instruction_k": None,
                                     "require_full_groups": False, "k_tile": None}))
    if m.group_rounding in other and not m.fused:
        out.append((f"group-sum-{other[m.group_rounding]}", {"group_rounding": other[m.group_rounding]}))
    if m.window_bits is not None:
        out.append(("window-one-bit-wider", {"window_bits": m.window_bits + 1}))
        out.append(("no-window", {"window_bits": None}))
    if m.promotion_interval:
        out.append(("promotion-never", {"promotion_interval": None}))
        out.append(("promotion-half", {"promotion_interval": m.promotion_interval // 2}))
    out.append(("split-k-128", {"split_k": 128}))
    if m.snap_bits is not None:
        out.append(("no-snap", {"snap_bits": None}))
        out.append(("snap-one-bit-finer", {"snap_bits": m.snap_bits + 1}))
    if m.operand_domain == "encoded" and m.alpha_source == "amax":
        out.append(("alpha-rounded-twice", {"alpha_rounding": "twice"}))
    return [(suffix, ch) for suffix, ch in out if _valid(m, ch)]


def _valid(m, changes: dict) -> bool:
    """Whether a parameter change gives a model fpspec can build (one that cannot is no mutant)."""
    try:
        m.replace(**changes)
    except FpspecError:
        return False
    return True


_PROMOTION_IS_SPLIT = ("with promotion interval N_C = 128 every partial restarts at 0 and is added to C in order "
                       "with FP32 RNE (FPS-GEMM-6): that is split-K with slices of 128 products, whose slice "
                       "results are added in order with FP32 RNE; the two parameters name one function")


def _gemm_mutants() -> list[Mutant]:
    out = []
    for preset, sets in _GEMM_SETS.items():
        for suffix, ch in _gemm_changes(preset):
            eq = _PROMOTION_IS_SPLIT if (preset, suffix) == ("km-h100-fp8-promote128", "split-k-128") else ""
            out.append(Mutant(f"gemm-{preset}:{suffix}", "gemm", sets, GemmChoice(ch), eq))
        out.append(Mutant(f"gemm-{preset}:k-reversed", "gemm", sets, GemmOperands(reverse_k=True)))
    for preset in ("seed-probe-matched", "decoded-fp32"):
        out.append(Mutant(f"gemm-{preset}:tensor-scales-dropped", "gemm", f"gemm-{preset}-ue5m3-wide",
                          GemmOperands(alpha_never=True)))
    out.append(Mutant("gemm-km-h100-fp8:operands-exchanged", "gemm", _GEMM_SETS["km-h100-fp8"],
                      GemmOperands(swap=True),
                      equivalent="every product a_k b_k is commutative and the chain reads only the products "
                                 "(and the K order), so B^T A^T transposed back is the same function"))
    return out


def _build() -> tuple[Mutant, ...]:
    ms = (_fp32_mutants() + _exact_profile_mutants() + _sr_mutants() + _mx_mutants() + _layout_mutants()
          + _encode_mutants() + _decode_mutants() + _gemm_mutants())
    names = [m.name for m in ms]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"duplicate mutant names: {sorted(dup)}"
    assert all(split_globs(m.sets) for m in ms), "a mutant without set globs would run on every set"
    return tuple(ms)


#: Every mutant, in catalogue order.
CATALOGUE: tuple[Mutant, ...] = _build()


def get_mutant(name: str) -> Mutant:
    for m in CATALOGUE:
        if m.name == name:
            return m
    raise FpspecError(f"unknown mutant {name!r} ({len(CATALOGUE)} in the catalogue; `fpspec vectors mutants "
                      f"--list` names them)")


def mutants_for_set(set_name: str) -> Iterable[Mutant]:
    """The mutants whose ``sets`` globs match a set name."""
    return [m for m in CATALOGUE if select_names([set_name], m.sets)]
