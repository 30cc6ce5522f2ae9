"""Published probe vectors run against every preset (FPS-GEMM-1, -5, -6, -7).

The vectors follow Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor
cores" (PeerJ CS 2021) and Khattak & Mikaitis, "Accurate Models of NVIDIA Tensor Cores"
(arXiv 2512.07004): extra alignment bits, carry bits, FMA (block) size, block rounding,
multi-block rounding, normalisation, plus the promotion interval and the accumulator's
place in the window.  Each expected output is derived by hand in the comment above it
and checked for both implementations, bit for bit.

Preset abbreviations: S seed-probe-matched, SN seed-probe-matched-nosnap, D decoded-fp32,
X exact, H8 km-h100-fp8, H8P km-h100-fp8-promote128, B8 km-b200-fp8, HB km-h100-bf16,
AB km-a100-bf16, V km-v100-fp16.
"""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.matmul import gemm
from fpspec.named_models import get_model
from fpspec.presets import PRESETS

from gemm_helpers import codes_of

ABBR = {"S": "seed-probe-matched", "SN": "seed-probe-matched-nosnap", "D": "decoded-fp32", "X": "exact",
        "H8": "km-h100-fp8", "H8P": "km-h100-fp8-promote128", "B8": "km-b200-fp8",
        "HB": "km-h100-bf16", "AB": "km-a100-bf16", "V": "km-v100-fp16"}
KM = ("H8", "H8P", "B8", "HB", "AB", "V")


def dot(pairs, k, fmt, model, **over):
    """One output: sum over (position, a, b) of a*b in a K-long dot product, both impls."""
    a = np.zeros((1, k))
    b = np.zeros((1, k))
    for pos, x, y in pairs:
        a[0, pos] = x
        b[0, pos] = y
    ac, bc = codes_of(a, fmt), codes_of(b, fmt)
    model = get_model(model, **over)  # the preset's chain as parameters, on any code format (FPS-GEMM-25)
    ye = gemm(ac, bc, model, fmt=fmt, impl="exact")
    yf = gemm(ac, bc, model, fmt=fmt, impl="fast")
    assert ye.view(np.uint32)[0, 0] == yf.view(np.uint32)[0, 0], (ye, yf)
    return ye[0, 0]


def check(expected: dict, pairs, k, fmt, **over):
    assert set(expected) == set(ABBR), "every preset must have its expected outcome"
    for abbr, want in expected.items():
        got = dot(pairs, k, fmt, ABBR[abbr], **over)
        assert got.view(np.uint32) == np.float32(want).view(np.uint32), (abbr, got, want)


def table(default, **specific):
    return {abbr: specific.get(abbr, default) for abbr in ABBR}


def test_fpsgemm5_extra_alignment_bits():
    """FPS-GEMM-5: products 1 and -2^-14 (e4m3: 1*1, -2^-7*2^-7), exact 1 - 2^-14.

    H8/H8P keep F = 13 bits below E = 0: |-2^-14| < 2^-13 is truncated -> 1.0.  B8, HB, AB,
    V keep >= 23 bits -> 1 - 2^-14.  S: 1 - 2^-14 snapped, 1024 - 2^-4 rounds to 1024 -> 1.0.
    SN, D, X: 1 - 2^-14 (representable)."""
    pairs = [(0, 1.0, 1.0), (1, -2.0**-7, 2.0**-7)]
    check(table(1 - 2.0**-14, S=1.0, H8=1.0, H8P=1.0), pairs, 64, "e4m3")
    # two's-complement (floor) truncation rounds the negative term down to -2^-13
    assert dot(pairs, 64, "e4m3", "km-h100-fp8", below_window="floor") == np.float32(1 - 2.0**-13)


def test_fpsgemm5_carry_bits():
    """FPS-GEMM-5, FPS-GEMM-13, FPS-GEMM-15: four products 1 and 2^-13 (2^-7*2^-6), exact 4 + 2^-13.

    The window is fixed at E = 0 before the carries (sum 4 needs two carry bits), so
    H8's 13-bit window keeps 2^-13: the exact block sum is 4 + 2^-13.  The block result
    then keeps accumulate_bits fraction bits at its own exponent 2: for H8/H8P 13 bits,
    quantum 2^(2-13) = 2^-11, and RZ(4 + 2^-13) = 4.0 (with 23 bits, quantum 2^-21, it
    would stay 4 + 2^-13).  B8, HB, AB, V keep 23 bits (neab >= 0): 4 + 2^-13.  S's snap
    maps 4096.125/1024 to 4.0; SN, D, X give 4 + 2^-13.  With K = 64 the second, all-zero
    block aligns the accumulator alone, at its own exponent 2: 13 window bits keep
    multiples of 2^-11, so H8 gives 4.0 even with 23 kept bits."""
    pairs = [(i, 1.0, 1.0) for i in range(4)] + [(4, 2.0**-7, 2.0**-6)]
    check(table(4 + 2.0**-13, S=4.0, H8=4.0, H8P=4.0), pairs, 32, "e4m3")
    assert dot(pairs, 32, "e4m3", "km-h100-fp8", accumulate_bits=23) == np.float32(4 + 2.0**-13)
    assert dot(pairs, 64, "e4m3", "km-h100-fp8", accumulate_bits=23) == np.float32(4.0)
    assert dot(pairs, 64, "e4m3", "km-b200-fp8") == np.float32(4 + 2.0**-13)


@pytest.mark.parametrize("abbr", KM)
def test_fpsgemm5_block_fma_size(abbr):
    """FPS-GEMM-5: products +1, -1 (k = 0, 1) and 2^-26 (fp16 2^-13 * 2^-13) at k = p.

    If p < G the tiny term shares the block of the ones: E = 0 and F <= 25 truncates it,
    the block sums to 0.  If p = G it lands in the next block after c = 0: its own
    exponent E = -26 keeps it, the output is 2^-26.  That locates G."""
    g = PRESETS[ABBR[abbr]].model.group_size
    base = [(0, 1.0, 1.0), (1, -1.0, 1.0)]
    assert dot(base + [(g - 1, 2.0**-13, 2.0**-13)], 64, "fp16", ABBR[abbr]) == 0.0
    assert dot(base + [(g, 2.0**-13, 2.0**-13)], 64, "fp16", ABBR[abbr]) == np.float32(2.0**-26)


def test_fpsgemm5_block_fma_size_exact_presets():
    """FPS-GEMM-5: the same vectors under the exact-group presets: no truncation, so the
    position does not matter; S snaps 2^-26 to 0."""
    base = [(0, 1.0, 1.0), (1, -1.0, 1.0)]
    for p in (3, 4, 31, 32, 63):
        for abbr, want in (("S", 0.0), ("SN", 2.0**-26), ("D", 2.0**-26), ("X", 2.0**-26)):
            assert dot(base + [(p, 2.0**-13, 2.0**-13)], 64, "fp16", ABBR[abbr]) == np.float32(want)


def test_fpsgemm1_block_rounding():
    """FPS-GEMM-1: one block with 1, 2^-24, 2^-25 (bf16), exact 1 + 3 * 2^-25 = 1 + 0.75 ulp.

    X and SN round the exact sum RNE -> 1 + 2^-23; S snaps that to 1.0; D adds in FP32:
    1 + 2^-24 is a tie -> 1, then 1 + 2^-25 -> 1.  Every KM preset rounds toward zero
    -> 1.0 (H8 and AB even drop 2^-25 in the window)."""
    pairs = [(0, 1.0, 1.0), (1, 2.0**-12, 2.0**-12), (2, 2.0**-12, 2.0**-13)]
    check(table(1.0, SN=1 + 2.0**-23, X=1 + 2.0**-23), pairs, 64, "bf16")
    # HB with RNE: 1 + 0.75 ulp -> up; AB with RNE: 2^-25 is below its 24-bit window, the
    # kept 1 + 2^-24 is a tie -> even -> 1.0
    assert dot(pairs, 64, "bf16", "km-h100-bf16", accumulate_rounding="rne") == np.float32(1 + 2.0**-23)
    assert dot(pairs, 64, "bf16", "km-a100-bf16", accumulate_rounding="rne") == np.float32(1.0)


def test_fpsgemm6_multi_block_rounding():
    """FPS-GEMM-6: 1 at k = 0, then 2^-24 and 2^-25 at k = 64, 65 (bf16, K = 128).

    S/SN: group 1 gives c = 1; group 2's partial 3 * 2^-25 is exact, RZ(1 + 3 * 2^-25)
    = 1 -> 1.0 (one block gave 1 + 2^-23 in the test above).  X: 1 + 2^-23.  D: 1.0.
    KM: the accumulator joins the block, RZ -> 1.0."""
    pairs = [(0, 1.0, 1.0), (64, 2.0**-12, 2.0**-12), (65, 2.0**-12, 2.0**-13)]
    check(table(1.0, X=1 + 2.0**-23), pairs, 128, "bf16")
    assert dot(pairs, 128, "bf16", "seed-probe-matched-nosnap", accumulate_rounding="rne") \
        == np.float32(1 + 2.0**-23)


def test_fpsgemm6_promotion_interval():
    """FPS-GEMM-6: 1 at k = 0 and 2^-14 (2^-7 * 2^-7) at k = 128 (e4m3, K = 256).

    H8: the block holding k = 128 aligns to c = 1 (E = 0), 2^-14 < 2^-13 is lost -> 1.0.
    H8P: after 128 products c = 1 went to the FP32 accumulator and c restarted at 0, so
    2^-14 is kept and RNE(1 + 2^-14) = 1 + 2^-14.  Wider windows keep it anyway; S snaps
    it away."""
    pairs = [(0, 1.0, 1.0), (128, 2.0**-7, 2.0**-7)]
    check(table(1 + 2.0**-14, S=1.0, H8=1.0), pairs, 256, "e4m3")


def test_fpsgemm5_normalisation_product_exponent():
    """FPS-GEMM-5, FPS-GEMM-13: 1.5 * 1.5 = 2.25 and two products 2^-13 (e4m3, K = 32: one
    block; a second block would re-align c at its exponent 1).

    KM aligns to ea + eb = 0 (the product is not normalised, significand 2.25 in [1, 4)),
    so the 13-bit window (quantum 2^-13) keeps both 2^-13: exact block sum 2.25 + 2^-12.
    H8/H8P keep 13 fraction bits at the result's exponent 1 (quantum 2^-12): 2.25 + 2^-12
    is on that lattice, RZ keeps it.  Aligned to floor(log2 2.25) = 1 instead, the window
    quantum is 2^-12 and each 2^-13 is truncated to 0 -> 2.25.  Every other preset sums
    2.25 + 2^-12 exactly (FP32 holds it); S snaps 2304.25/1024 to 2.25."""
    pairs = [(0, 1.5, 1.5), (1, 2.0**-7, 2.0**-6), (2, 2.0**-7, 2.0**-6)]
    check(table(2.25 + 2.0**-12, S=2.25), pairs, 32, "e4m3")
    assert dot(pairs, 32, "e4m3", "km-h100-fp8", product_exponent="exact") == np.float32(2.25)


def test_fpsgemm5_accumulator_in_window():
    """FPS-GEMM-5: block 1 gives c = 1 + 2^-13; block 2 holds 2 * 1 (E = 1), so a fused
    13-bit window cuts c to 1 -> 3.0 for H8/H8P.  Wider windows keep 3 + 2^-13; S snaps to 3."""
    pairs = [(0, 1.0, 1.0), (1, 2.0**-7, 2.0**-6), (32, 2.0, 1.0)]
    check(table(3 + 2.0**-13, S=3.0, H8=3.0, H8P=3.0), pairs, 64, "e4m3")
    # not fused, 23 kept bits: the partials are added outside the window -> nothing is lost
    assert dot(pairs, 64, "e4m3", "km-h100-fp8", fused=False, accumulate_bits=23) == np.float32(3 + 2.0**-13)
    # not fused, 13 kept bits (FPS-GEMM-13): c = 1 + 2^-13 (exponent 0, quantum 2^-13, kept);
    # c + p = 3 + 2^-13 has exponent 1, quantum 2^-12, RZ -> 3.0
    assert dot(pairs, 64, "e4m3", "km-h100-fp8", fused=False) == np.float32(3.0)


def test_fpsgemm7_snap_ties_to_even():
    """FPS-GEMM-7: the snap rounds c * 1024 half to even: 2^-11 (0.5/1024) -> 0,
    3 * 2^-11 (1.5/1024) -> 2/1024, 5 * 2^-11 (2.5/1024) -> 2/1024, 7 * 2^-11 -> 4/1024;
    the negative values mirror them, and -2^-11 snaps to -0 (0x80000000)."""
    for num, want in ((1, 0.0), (3, 2.0**-9), (5, 2.0**-9), (7, 2.0**-8)):
        got = dot([(0, num * 2.0**-6, 2.0**-5)], 64, "e4m3", "seed-probe-matched")
        assert got.view(np.uint32) == np.float32(want).view(np.uint32), (num, got)
        got = dot([(0, num * 2.0**-6, -(2.0**-5))], 64, "e4m3", "seed-probe-matched")
        assert got.view(np.uint32) == np.float32(-want).view(np.uint32)


def test_fpsgemm14_split_k_slices_added_rne():
    """FPS-GEMM-14: 1 at k = 0 and three products 2^-25 (bf16 2^-12 * 2^-13) at k = 32..34,
    K = 64, km-h100-bf16 (G = 16, F = 25, RZ).

    One chain: the block holding k = 32..34 aligns to c = 1 (E = 0); F = 25 keeps the
    2^-25 terms, the exact sum 1 + 3 * 2^-25 = 1 + 0.75 ulp is rounded RZ -> 1.0.
    split_k = 32: slice 0 gives 1.0, slice 1 gives 3 * 2^-25 exactly (one block at its
    own exponent); the slices are added with FP32 RNE: RNE(1 + 0.75 ulp) = 1 + 2^-23.
    split_k = 48: slice 0 (k < 48) holds all of them -> 1.0, slice 1 is 0 -> 1.0."""
    pairs = [(0, 1.0, 1.0)] + [(32 + i, 2.0**-12, 2.0**-13) for i in range(3)]
    assert dot(pairs, 64, "bf16", "km-h100-bf16") == np.float32(1.0)
    assert dot(pairs, 64, "bf16", "km-h100-bf16", split_k=32) == np.float32(1 + 2.0**-23)
    assert dot(pairs, 64, "bf16", "km-h100-bf16", split_k=48) == np.float32(1.0)
    # with promotion every 16 inside slices of 32 (RZ promotion): slice 1 = RZ(3 * 2^-25),
    # exact; the slice sum is still RNE -> 1 + 2^-23
    assert dot(pairs, 64, "bf16", "km-h100-bf16", split_k=32, promotion_interval=16,
               promotion_rounding="rz") == np.float32(1 + 2.0**-23)


def test_fpsgemm15_km_kept_bits_rule():
    """FPS-GEMM-15: every km preset keeps min(23, 23 + neab) fraction bits: 13 for the
    H100/H200 FP8 presets (neab = -10), 23 for B200 FP8 (neab = 2), H100 BF16 (2),
    A100 BF16 (1), V100 FP16 (0)."""
    want = {"km-h100-fp8": 13, "km-h100-fp8-promote128": 13, "km-b200-fp8": 23, "km-h100-bf16": 23,
            "km-a100-bf16": 23, "km-v100-fp16": 23}
    for name, bits in want.items():
        m = PRESETS[name].model
        assert (m.accumulate_bits, min(23, m.window_bits)) == (bits, bits), name
        assert m.split_k is None
