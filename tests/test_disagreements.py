"""The table of known disagreements names real fpspec choices that do what it says (FPS-DOC-5)."""

from __future__ import annotations

import re
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from fpspec.convert import encode
from fpspec.disagreements import DISAGREEMENTS, SELECTOR_KINDS, Selector, resolve
from fpspec.exact.rounding import round_to_code

from test_ml_dtypes_agreement import ML_07


def test_fps_doc_5_every_selector_resolves():
    """FPS-DOC-5: each fpspec name printed in the table exists in the code."""
    for d in DISAGREEMENTS:
        for b in d.behaviours:
            for s in b.selects:
                assert resolve(s) is not None, (d.key, str(s))


def test_fps_doc_5_unknown_names_are_refused():
    """FPS-DOC-5: the resolver is not a rubber stamp."""
    for bad in (Selector("rounding", "sr-bogus"), Selector("format", "e3m4"), Selector("nan", "maybe"),
                Selector("nbits", "0"), Selector("colour", "red")):
        with pytest.raises((ValueError, KeyError)):
            resolve(bad)


def test_table_shape():
    """Keys are unique; each disagreement names at least one reference's behaviour and fpspec's
    default; requirement ids are well formed; default selectors resolve."""
    keys = [d.key for d in DISAGREEMENTS]
    assert len(keys) == len(set(keys))
    for d in DISAGREEMENTS:
        assert len(d.behaviours) >= 1 and d.fpspec_default, d.key
        for s in d.default_selects:
            assert resolve(s) is not None, (d.key, str(s))
        for rid in d.requirements:
            assert re.fullmatch(r"FPS-[A-Z]+-\d+", rid), rid
        for b in d.behaviours:
            for s in b.selects:
                assert s.kind in SELECTOR_KINDS or s.kind in ("scheme", "profile", "preset"), s


def _enc(x, fmt, **kw):
    return encode(np.array([x], dtype=np.float64), fmt, **kw).tolist()[0]


def test_fps_doc_5_nan_into_e2m1_behaviours():
    """FPS-DOC-5: nan=zero gives code 0 (TE RN reference), nan=max gives +6 = 0x7 (TE SR fallback),
    the default refuses; ml_dtypes gives a zero code, which fpspec does not select."""
    assert _enc(np.nan, "e2m1", nan="zero") == 0x0
    assert _enc(np.nan, "e2m1", nan="max") == 0x7
    with pytest.raises(ValueError, match="NaN"):
        _enc(np.nan, "e2m1")
    md = np.array([np.nan, -np.nan], dtype=np.float32).astype(ml_dtypes.float4_e2m1fn).view(np.uint8) & 0xF
    assert md.tolist() == [0x8, 0x0]


def test_fps_doc_5_signed_zero_and_double_rounding():
    """FPS-DOC-5: -0.0 keeps its sign (0x8); 2.5 + 2^-30 from float64 rounds once to 3.0 (code 5),
    where the float32 detour of ml_dtypes before 0.7 gives 2.0 (0.7 rounds once too)."""
    assert _enc(-0.0, "e2m1") == 0x8
    x = 2.5 + 2.0**-30
    assert _enc(x, "e2m1") == 0x5 and round_to_code(Fraction(x), "e2m1", "rne") == 0x5
    assert _enc(float(np.float32(x)), "e2m1") == 0x4  # the detour, by name
    assert float(np.array([x]).astype(ml_dtypes.float4_e2m1fn)[0]) == (3.0 if ML_07 else 2.0)


def test_fps_doc_5_e4m3_overflow_and_e8m0_specials():
    """FPS-DOC-5: e4m3 nonfinite sends 465 (past the tie 464, which RNE sends to 448) to NaN 0x7F, as
    ml_dtypes does; sat clamps to 448 (0x7E);
    ue8m0 zero=nan / negative=nan give 0xFF, zero=min gives 0x00, the default refuses."""
    assert _enc(464.0, "e4m3", overflow="nonfinite") == 0x7E
    assert _enc(465.0, "e4m3", overflow="nonfinite") == 0x7F
    ml = np.array([464.0, 465.0], dtype=np.float32).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    assert ml.tolist() == [0x7E, 0x7F]
    assert _enc(465.0, "e4m3", overflow="sat") == 0x7E
    assert _enc(500.0, "ue4m3") == 0x7E
    assert _enc(0.0, "ue8m0", zero="nan") == 0xFF
    assert _enc(0.0, "ue8m0", zero="min") == 0x00
    assert _enc(-1.0, "ue8m0", negative="nan") == 0xFF
    with pytest.raises(ValueError):
        _enc(0.0, "ue8m0")
    with pytest.raises(ValueError):
        _enc(-1.0, "ue8m0")


def test_fps_doc_5_e8m0_ties_e5m2_nan_and_subnormals_against_ml_dtypes():
    """FPS-DOC-5: ml_dtypes sends the E8M0 tie 3.0 up to 4.0 (fpspec rna), fpspec rne to 2.0;
    ml_dtypes writes E5M2 NaN as 0x7E where fpspec writes 0x7F; the float32 subnormal
    0x400001 goes to 2^-126 in ml_dtypes before 0.7 (rne-bits) and to 2^-127 in 0.7 and in
    fpspec rne and rna."""
    x = np.array([3.0], dtype=np.float32)
    assert x.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)[0] == 0x81
    assert _enc(3.0, "ue8m0", rounding="rna") == 0x81 and _enc(3.0, "ue8m0") == 0x80
    nan = np.array([np.nan], dtype=np.float32)
    assert nan.astype(ml_dtypes.float8_e5m2).view(np.uint8)[0] == 0x7E
    assert encode(nan, "e5m2").tolist() == [0x7F]
    sub = np.array([0x400001], dtype=np.uint32).view(np.float32)
    assert sub.astype(ml_dtypes.float8_e8m0fnu).view(np.uint8)[0] == (0x00 if ML_07 else 0x01)
    assert encode(sub, "ue8m0").tolist() == [0x00] and encode(sub, "ue8m0", "rna").tolist() == [0x00]
    assert encode(sub, "ue8m0", "rne-bits").tolist() == [0x01]


def test_fps_doc_5_sr_variants_and_ties():
    """FPS-DOC-5: at 2.125 (delta = 1/8 between 2 and 3, N = 2) sr-add never rounds up, sr-midpoint
    rounds up for r = 3 only, sr-unbiased for r = 0 only; sr-add with r = 0 is RTZ; rne and rna part
    at the tie 2.5."""
    def codes(mode, x, n=2):
        return [round_to_code(x, "e2m1", mode, r=r, nbits=n) for r in range(1 << n)]
    assert codes("sr-add", 2.125) == [4, 4, 4, 4]
    assert codes("sr-midpoint", 2.125) == [4, 4, 4, 5]
    assert codes("sr-unbiased", 2.125) == [5, 4, 4, 4]
    assert [round_to_code(x, "e2m1", "sr-add", r=0) for x in (2.9, 5.9, 0.74)] == [4, 6, 1]
    assert round_to_code(2.5, "e2m1", "rne") == 4 and round_to_code(2.5, "e2m1", "rna") == 5


def test_ue5m3_variants_as_stated():
    """FPS-DOC-5: format=ue5m3 has max 61440 and 0xF8..0xFF NaN; format=ue5m3fnu max 114688."""
    a, b = resolve(Selector("format", "ue5m3")), resolve(Selector("format", "ue5m3fnu"))
    assert a.max_finite == 61440 and b.max_finite == 114688
    assert all(a.kind(c).value == "nan" for c in range(0xF8, 0x100))
    assert [b.kind(c).value for c in (0xF8, 0xFE, 0xFF)] == ["normal", "normal", "nan"]


# ------------------------------------------------- plot data of the SR bias figure


def test_sr_bias_curve_matches_hand_values_and_round_to_code():
    """The SR-bias plot's data: exact bias P(up) - delta, hand-derived for N = 2, and equal to
    the bias measured through the whole round_to_code on E2M1."""
    from fpspec_plots import sr_bias_by_round_to_code, sr_bias_curve

    d = [Fraction(1, 8), Fraction(1, 4), Fraction(3, 8), Fraction(5, 8)]
    # sr-add: up iff delta + r/4 >= 1: P(up) = #{r >= 4(1 - delta)} / 4
    assert sr_bias_curve("sr-add", 2, d) == [Fraction(-1, 8), Fraction(0), Fraction(-1, 8), Fraction(-1, 8)]
    # sr-midpoint: up iff delta + (2r+1)/8 >= 1
    assert sr_bias_curve("sr-midpoint", 2, d) == [Fraction(1, 8), Fraction(0), Fraction(1, 8), Fraction(1, 8)]
    # sr-unbiased: up iff r < 4 delta
    assert sr_bias_curve("sr-unbiased", 2, d) == [Fraction(1, 8), Fraction(0), Fraction(1, 8), Fraction(1, 8)]
    grid = [Fraction(j, 32) for j in range(1, 32)]
    for mode in ("sr-add", "sr-midpoint", "sr-unbiased"):
        for n in (2, 4):
            assert sr_bias_curve(mode, n, grid) == [sr_bias_by_round_to_code(mode, n, x) for x in grid]


def test_kind_counts_of_wide_formats():
    """The codebook summary's class counts equal an enumeration (16-bit) and hand counts (fp32)."""
    from fpspec_tables import kind_counts

    from fpspec.formats import FORMATS, CodeKind

    for f in FORMATS.values():
        if f.bits <= 16:
            enumerated = {k: 0 for k in CodeKind}
            for c in range(f.num_codes):
                enumerated[f.kind(c)] += 1
            assert kind_counts(f) == enumerated, f.name
    fp32 = FORMATS["fp32"]
    counts = kind_counts(fp32)
    assert counts[CodeKind.NORMAL] == 2 * 254 * 2**23 and counts[CodeKind.NAN] == 2 * (2**23 - 1)
    assert sum(counts.values()) == 2**32


def test_exact_value_formatting():
    from fpspec_tables import exact_decimal, power_form

    assert power_form(Fraction(3, 4)) == "3*2^-2" and power_form(Fraction(61440)) == "15*2^12"
    assert power_form(Fraction(1, 2**17)) == "2^-17" and power_form(Fraction(-6)) == "-3*2^1"
    assert power_form(Fraction(5)) == "5" and power_form(Fraction(0)) == "0"
    assert exact_decimal(Fraction(1, 2**17)) == "0.00000762939453125"
    assert exact_decimal(Fraction(-3, 2)) == "-1.5" and exact_decimal(Fraction(448)) == "448"
    assert exact_decimal(Fraction(1, 2**127)).startswith("~5.87747175e-39")


# ------------------------------------------- block-scaling and GEMM names (FPS-DOC-5)


def test_fps_doc_5_block_profiles_do_what_the_table_says():
    """FPS-DOC-5: a block far below the tensor amax gets scale 1.0 (0x78) and payload 0 under the
    seed's zero-scale rule, scale 0x00 and payload +6 under TE's nvfp4 profile and under
    ue5m3 with the rule off; the profiles carry the amax = 0, signed-zero and MX choices claimed."""
    from fpspec.quantization import quantize

    x = np.zeros((1, 32), np.float32)
    x[0, 0], x[0, 16] = 1000.0, 1e-6
    seed = quantize(x, "ue5m3", profile=resolve(Selector("profile", "ue5m3/exact")).name,
                    zero_scale_rule=resolve(Selector("zero-scale-rule", "on")))
    te = quantize(x, "nvfp4", profile="te-fp32")
    off = quantize(x, "ue5m3", zero_scale_rule=resolve(Selector("zero-scale-rule", "off")))
    assert seed.scales[0, 1] == 0x78 and seed.codes[0, 16] == 0
    assert te.scales[0, 1] == 0x00 and te.codes[0, 16] == 0x7
    assert off.scales[0, 1] == 0x00 and off.codes[0, 16] == 0x7
    p = {name: resolve(Selector("profile", name)) for name in
         ("nvfp4/te-fp32", "nvfp4/te-kernel", "ue5m3/seed-fp32", "ue5m3/exact", "mxfp4/floor", "mxfp4/rceil")}
    assert p["nvfp4/te-fp32"].amax_zero.value == "flt-max" and p["nvfp4/te-kernel"].amax_zero.value == "one"
    assert p["ue5m3/seed-fp32"].amax_zero.value == "one"
    assert p["nvfp4/te-fp32"].signed_zero.value == "positive" and p["ue5m3/exact"].signed_zero.value == "keep"
    assert p["mxfp4/floor"].mx_mode.value == "floor" and p["mxfp4/rceil"].mx_mode.value == "rceil"
    assert p["ue5m3/seed-fp32"].dequant == "seed-kernel" and p["nvfp4/te-fp32"].dequant == "te"


def test_fps_doc_5_gemm_presets_carry_the_stated_parameters():
    """FPS-DOC-5: seed-probe-matched: G = 64, exact group sum RNE, RZ across groups, snap 2^-10;
    -nosnap: no snap; km-h100-fp8: fused 32-product blocks, 13 kept bits, truncation, RZ;
    -promote128: FP32 promotion every 128 products."""
    seed = resolve(Selector("preset", "seed-probe-matched")).model
    assert (seed.group_size, seed.group_rounding, seed.accumulate_rounding, seed.snap_bits) == (64, "rne", "rtz", 10)
    assert resolve(Selector("preset", "seed-probe-matched-nosnap")).model.snap_bits is None
    km = resolve(Selector("preset", "km-h100-fp8")).model
    assert (km.group_size, km.window_bits, km.below_window, km.fused, km.accumulate_rounding) == \
        (32, 13, "truncate", True, "rtz")
    assert resolve(Selector("preset", "km-h100-fp8-promote128")).model.promotion_interval == 128
    with pytest.raises(KeyError):
        resolve(Selector("preset", "km-h100-fp9"))
    with pytest.raises(Exception):
        resolve(Selector("profile", "nvfp4/torchao-0.17"))


# ------------------------------------------- every reference behaviour has a name (issue 10)
#: The behaviours no fpspec name reproduces, each because its source cannot run here or is unmeasured.
NOT_REPRODUCED = {
    ("sr-variant", "TE CUDA kernels on sm_100+ (PTX cvt.rs.satfinite.e2m1x4.f32)"),
    ("gemm-group", "seed CPU oracle (reproduce/diagnostics/numerics.py, accumulate_issue_terms)"),
}


def test_fps_doc_5_what_is_not_reproduced_says_why():
    """FPS-DOC-5: a behaviour noted "not reproduced" is one of the listed few, and its note gives the
    reason (its source runs only on hardware that is not here, or is unmeasured); a behaviour with no
    selector says in its note what fpspec does instead."""
    found = set()
    for d in DISAGREEMENTS:
        for b in d.behaviours:
            if "not reproduced" in b.note:
                found.add((d.key, b.who))
                assert b.note.startswith("not reproduced") and ":" in b.note and len(b.note) > 60, (d.key, b.who)
            if not b.selects:
                assert b.note, (d.key, b.who)
    assert found == NOT_REPRODUCED


def _mx(values, profile, rounding="rne"):
    from fpspec.quantization import dequantize, quantize

    x = np.zeros((1, 32), np.float32)
    x[0, :len(values)] = values
    q = quantize(x, "mxfp4", profile=resolve(Selector("profile", f"mxfp4/{profile}")).name, rounding=rounding)
    return int(q.scales[0, 0]), q.codes[0, :len(values)].tolist(), dequantize(q)[0, :len(values)]


def test_fps_doc_5_mx_rows_do_what_the_table_says():
    """FPS-DOC-5: mx-byte-zero: a block of 1.5 2^-125 and 2^-127 has byte 0; OCP and microxcaling divide
    by 2^-127 (codes 7, 2: 6 and 1), torchao FLOOR by 2^-126 (5, 1: 3 and 0.5) and dequantizes with
    2^-127, torchao RCEIL multiplies by 1 (zeros).  mx-scale: amax 1023.99994 gets byte 0x87 from
    microxcaling's binary32 log2 and 0x86 from the exact floor; amax 192.00002 gets 0x84 from torchao
    RCEIL and 0x85 from the exact RCEIL.  signed-zero: microxcaling gives -0.0 code 0x0."""
    tiny = [1.5 * 2.0 ** -125, 2.0 ** -127]
    assert _mx(tiny, "floor")[:2] == (0, [7, 2]) and _mx(tiny, "microxcaling")[:2] == (0, [7, 2])
    b, c, d = _mx(tiny, "torchao-0.18-floor")
    assert (b, c) == (0, [5, 1]) and d[0] == np.float32(3 * 2.0 ** -127)
    assert _mx(tiny, "torchao-0.18-rceil")[:2] == (0, [0, 0])
    a = np.array([0x447FFFFF, 0x43400001], np.uint32).view(np.float32)
    assert _mx([a[0]], "microxcaling")[0] == 0x87 and _mx([a[0]], "floor")[0] == 0x86
    assert _mx([a[1]], "torchao-0.18-rceil")[0] == 0x84 and _mx([a[1]], "rceil")[0] == 0x85
    assert _mx([1.0, -0.0], "microxcaling")[1] == [6, 0] and _mx([1.0, -0.0], "torchao-0.18-floor")[1] == [6, 8]
    assert _mx([1.0, 0.0625 - 2.0 ** -28], "microxcaling", "rna")[1] == [6, 1]


def test_fps_doc_5_seed_rows_do_what_the_table_says():
    """FPS-DOC-5: dequant-order: the seed-portable and seed-fp32 profiles give the same codes and scales
    and dequantize in their own orders (with the held amax of the level-1 example, g = 2406.6875, they
    differ in the last bit on a few percent of a random tensor's elements); signed-zero: seed-triton
    gives -0.0 code 0x0, seed-portable 0x8."""
    from fpspec.quantization import dequantize, quantize

    rng = np.random.default_rng(25)
    x = (rng.standard_normal((16, 64)) * 600).astype(np.float32)
    x[0, 1] = -0.0
    q = {p: quantize(x, "ue5m3", profile=resolve(Selector("profile", f"ue5m3/{p}")).name, amax=2406.6875)
         for p in ("seed-fp32", "seed-portable", "seed-triton")}
    assert np.array_equal(q["seed-fp32"].scales, q["seed-portable"].scales)
    assert np.array_equal(q["seed-fp32"].codes, q["seed-portable"].codes)
    k, p = dequantize(q["seed-fp32"]).view(np.uint32), dequantize(q["seed-portable"]).view(np.uint32)
    assert 0 < np.count_nonzero(k != p) < k.size // 4
    assert q["seed-portable"].codes[0, 1] == 0x8 and q["seed-triton"].codes[0, 1] == 0x0
