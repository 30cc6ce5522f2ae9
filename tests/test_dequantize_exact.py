"""Dequantization's exact twin (fpspec.exact.dequant) against the fast one (fpspec.fast.dequant)
(FPS-BLK-14, FPS-BLK-21).

Every dequantization rule of the schemes' profiles, every pair of a finite scale code and a
finite payload code, over a spread of tensor amaxes, targets and decode scales: the fast
table entry equals the exact formula bit for bit.  Whole tensors: fpspec.dequantize with
impl="fast" equals :func:`dequantize_blocks_exact` on quantized tensors of every profile, as
impl="exact" does, and the exact quantizer's own dequantized values equal it too.  A NaN (TE's 0 * inf)
is compared as a NaN: IEEE 754 leaves the sign of an invalid operation's NaN to the platform.
"""

from __future__ import annotations

import re
import zlib
from fractions import Fraction

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.exact.blocks import quantize_view_exact
from fpspec.exact.dequant import dequant_value_exact, dequantize_blocks_exact
from fpspec.fast.dequant import dequant_value_table
from fpspec.fast.rounding import decode_table
from fpspec.formats import get_format
from fpspec.quantization import dequantize, quantize
from fpspec.schemes import BLOCK_SCHEMES, PROFILES, Dequant, resolve_spec

f32 = np.float32


def _rules() -> list[tuple[Dequant, str, str]]:
    """Every (formula, scale format, payload format) a profile of a scheme dequantizes with."""
    rules = {(p.dequant, sf, pf) for p in PROFILES.values() for sf in p.scale_formats
             for pf in BLOCK_SCHEMES[p.scheme].payload_formats}
    return sorted(rules, key=lambda r: (r[0].value, r[1], r[2]))


def _settings(formula: Dequant) -> list[tuple[float, float | None, float]]:
    """(g, T, gd) spread: zero, tiny, ordinary, huge amaxes, default and odd targets; gd as the
    binary32 quantizers record it (fp32(1 / fp32(fp32(6T) / g))), and a random binary32 value.
    MX's formula reads none of them."""
    if formula is Dequant.MX:
        return [(0.0, None, 1.0)]
    rng = np.random.default_rng(29)
    out = []
    for g in (0.0, float(f32(2.0 ** -140)), 1.0, float(f32(3.1e-3)), 2688.0, float(f32(1e30)),
              float(np.finfo(np.float32).max)):
        for t in (448.0, float(f32(1.7))):
            six_t = f32(6.0) * f32(t)
            with np.errstate(over="ignore"):
                ge = min(six_t / f32(g), np.finfo(np.float32).max) if g > 0 else f32(1.0)
            gd = float(f32(1.0) / f32(ge))
            out.append((g, t, gd))
            out.append((g, t, float(f32(2.0 ** rng.uniform(-60, 60)))))
    return out


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise: the same binary32 bits, or both NaN."""
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


@pytest.mark.slow
@pytest.mark.parametrize("formula,scale_format,payload_format", _rules(),
                         ids=lambda v: v.value if isinstance(v, Dequant) else v)
def test_every_code_pair_of_every_rule_equals_the_exact_formula(formula, scale_format, payload_format):
    sf, pf = get_format(scale_format), get_format(payload_format)
    scale_codes = np.flatnonzero(np.isfinite(decode_table(sf)))
    payload_codes = np.flatnonzero(np.isfinite(decode_table(pf)))
    for g, t, gd in _settings(formula):
        values, _ = dequant_value_table(formula, sf, pf.name, g, t, f32(gd))
        want = np.array([[dequant_value_exact(formula, int(c), int(q), sf, pf, g, t, gd) for q in payload_codes]
                         for c in scale_codes], dtype=np.float32)
        got = values[np.ix_(scale_codes, payload_codes)]
        bad = np.argwhere(~_same(got, want))
        assert bad.size == 0, (g, t, gd, [(int(scale_codes[i]), int(payload_codes[j]), float(got[i, j]),
                                          float(want[i, j])) for i, j in bad[:3]])


def test_the_exact_formulas_give_the_documented_values():
    """Spot values of FPS-BLK-14 written out: exact q s g / (6T) once rounded; MX q 2^(c-127);
    TE's overflow in s g gives +-inf, and 0 * inf NaN."""
    e2m1, ue4m3, ue8m0 = get_format("e2m1"), get_format("ue4m3"), get_format("ue8m0")
    c1 = next(c for c in range(ue4m3.num_codes) if ue4m3.decode_exact(c) == 1)
    assert dequant_value_exact(Dequant.EXACT, c1, 0x7, ue4m3, e2m1, 2688.0, 448.0, 1.0) == 6.0   # 6 * 1 * 2688 / 2688
    assert dequant_value_exact(Dequant.EXACT, c1, 0xF, ue4m3, e2m1, 0.0, 448.0, 1.0) == -6.0     # g = 0: q s
    third = dequant_value_exact(Dequant.EXACT, c1, 0x2, ue4m3, e2m1, 1.0, 448.0, 1.0)            # 1 / 2688
    assert third == float(f32(Fraction(1, 2688)))
    assert dequant_value_exact(Dequant.MX, 127 + 3, 0x7, ue8m0, e2m1, 0.0, None, 1.0) == 48.0    # 6 * 2^3
    assert dequant_value_exact(Dequant.MX, 254, 0x7, ue8m0, e2m1, 0.0, None, 1.0) == np.inf      # 6 * 2^127
    big = float(np.finfo(np.float32).max)
    c448 = ue4m3.max_finite_code
    assert dequant_value_exact(Dequant.TE, c448, 0x9, ue4m3, e2m1, big, 448.0, 1.0) == -np.inf
    assert np.isnan(dequant_value_exact(Dequant.TE, c448, 0x0, ue4m3, e2m1, big, 448.0, 1.0))
    neg_zero = dequant_value_exact(Dequant.SEED_KERNEL, c1, 0x8, ue4m3, e2m1, 1.0, 448.0, 0.5)
    assert neg_zero == 0 and np.signbit(neg_zero)


def test_a_non_finite_code_is_refused():
    with pytest.raises(FpspecError, match="scale code 127 is not a finite ue4m3 value"):
        dequant_value_exact(Dequant.TE, 127, 0, "ue4m3", "e2m1", 1.0, 448.0, 1.0)
    with pytest.raises(FpspecError, match="payload code 127 is not a finite e4m3 value"):
        dequant_value_exact(Dequant.MX, 127, 127, "ue8m0", "e4m3", 0.0, None, 1.0)
    with pytest.raises(FpspecError, match="scales must have the shape"):
        dequantize_blocks_exact(np.zeros((2, 32), np.uint8), np.zeros((2, 1), np.uint8), Dequant.MX, "ue8m0",
                                "e2m1", 0.0, None, 1.0, 16, "1xB")


_CASES = [(scheme, name, tile, block) for (scheme, name), p in PROFILES.items()
          for tile in BLOCK_SCHEMES[scheme].tiles for block in BLOCK_SCHEMES[scheme].blocks]


def _tensor(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """Rows of very different magnitudes, a zero row, signed zeros."""
    x = rng.standard_normal(shape) * 2.0 ** rng.uniform(-30, 30, (shape[0], 1))
    x[1, :] = 0.0
    x[2, ::3] = -0.0
    return x.astype(np.float32)


@pytest.mark.parametrize("scheme,profile,tile,block", _CASES, ids=lambda v: str(v))
def test_whole_tensors_fast_equals_exact(scheme, profile, tile, block):
    """Seeded tensors of every profile through fpspec.quantize, then fpspec.dequantize (fast)
    against dequantize_blocks_exact on the same codes, element by element."""
    rng = np.random.default_rng(zlib.crc32(f"{scheme} {profile} {tile} {block}".encode()))
    x = _tensor(rng, (2 * block, 4 * block))
    spec = resolve_spec(scheme, profile, block=block, tile=tile)
    qt = quantize(x, scheme, profile=profile, tile=tile, block=block)
    got = dequantize(qt, overflow="ieee")
    want, bad = dequantize_blocks_exact(qt.codes, qt.scales, spec.profile.dequant, spec.scale_format,
                                        spec.payload_format, float(qt.amax), spec.target, float(qt.decode_scale),
                                        block, tile)
    assert _same(got, want).all(), np.argwhere(~_same(got, want))[:3]
    assert bad == -1
    assert _same(dequantize(qt, overflow="ieee", impl="exact"), got).all()  # the public door, both twins


@pytest.mark.parametrize("scheme,profile", [("ue5m3", "exact"), ("ue5m3", "seed-fp32"), ("ue5m3", "seed-portable"),
                                            ("nvfp4", "te-fp32"), ("nvfp4", "torchao-0.18"), ("mxfp4", "floor"),
                                            ("mxfp8", "rceil")])
def test_the_exact_quantizers_values_are_the_exact_dequantization(scheme, profile):
    """The exact quantizer dequantizes each element as it quantizes it (quantize_view_exact's
    ``dequant``); the exact dequantization of its codes gives the same values."""
    spec = resolve_spec(scheme, profile)
    x = _tensor(np.random.default_rng(7), (3, 2 * spec.block)).astype(np.float64)
    g = float(np.float32(np.abs(x).max()))
    res = quantize_view_exact(x, spec, g)
    want, _ = dequantize_blocks_exact(res.codes, res.scales, spec.profile.dequant, spec.scale_format,
                                      spec.payload_format, g, spec.target, float(res.decode_scale), spec.block,
                                      spec.tile)
    assert _same(res.dequant, want).all()


def test_an_overflowing_tensor_reports_the_same_first_element():
    """TE's s g overflows for huge inputs (FPS-BLK-21): both twins give +-inf and NaN in the
    same places and name the same first element."""
    rng = np.random.default_rng(4)
    x = (rng.uniform(-1, 1, (16, 64)) * np.finfo(np.float32).max).astype(np.float32)
    x[0, :40] = 1.0
    spec = resolve_spec("nvfp4", "te-fp32")
    qt = quantize(x, "nvfp4", profile="te-fp32")
    got = dequantize(qt, overflow="ieee")
    want, bad = dequantize_blocks_exact(qt.codes, qt.scales, Dequant.TE, spec.scale_format, spec.payload_format,
                                        float(qt.amax), spec.target, float(qt.decode_scale), 16, "1xB")
    assert _same(got, want).all()
    assert _same(dequantize(qt, overflow="ieee", impl="exact"), got).all()
    assert not np.isfinite(want).all()
    assert bad == int(np.flatnonzero(~np.isfinite(want.reshape(-1)))[0])
    assert 0 < bad
    for impl in ("fast", "exact"):
        with pytest.raises(FpspecError, match=re.escape(f"the dequantized value of element {[bad // 64, bad % 64]}")):
            dequantize(qt, impl=impl)
