"""NVFP4 scheme: TransformerEngine's reference arithmetic, hand-derived (FPS-BLK-8..11, 14)."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.quantization import dequantize, quantize

IMPLS = ["fast", "exact"]
FLT_MAX = np.finfo(np.float32).max


def _row(*blocks):
    out = []
    for b in blocks:
        out.extend(list(b) + [0.0] * (16 - len(b)))
    return np.array([out], dtype=np.float32)


@pytest.mark.parametrize("impl", IMPLS)
def test_scale_underflow_saturates_every_nonzero_element(impl):
    """FPS-BLK-8: TE has no zero-scale rule: a block whose scale rounds to E4M3 0x00 gets
    multiplier min(1/0, FLT_MAX) = FLT_MAX, so every nonzero x becomes +-6 (dequantized to 0)."""
    x = _row([1.0], [2.0 ** -40, -(2.0 ** -41), 0.0, -0.0])
    q = quantize(x, "nvfp4", impl=impl)
    assert q.profile == "te-fp32"
    assert q.scales.tolist() == [[0x7E, 0x00]]       # 448 = E4M3 0x7E
    assert q.codes[0, 16:20].tolist() == [0x7, 0xF, 0x0, 0x0]
    assert dequantize(q)[0, 16:18].tolist() == [0.0, -0.0]


@pytest.mark.parametrize("impl", IMPLS)
def test_negative_zero_maps_to_code_0(impl):
    """FPS-BLK-11: te-fp32 (TE's Python cast_to_fp4x2) maps a scaled -0.0 to code 0 but a small
    negative value to 0x8; the exact profile keeps -0.0 as 0x8."""
    x = _row([1.0, -0.0, -0.01])
    assert quantize(x, "nvfp4", impl=impl).codes[0, :3].tolist() == [0x7, 0x0, 0x8]
    assert quantize(x, "nvfp4", profile="exact", impl=impl).codes[0, :3].tolist() == [0x7, 0x8, 0x8]


@pytest.mark.parametrize("impl", IMPLS)
def test_te_kernel_keeps_negative_zero(impl):
    """FPS-BLK-9, FPS-BLK-11: TE's CUDA kernel converts with cvt.rn.satfinite.e2m1x2.f32, which copies
    the sign bit: -0.0, and a negative value whose product with the multiplier underflows to -0.0,
    get code 0x8 (te-fp32, the Python reference, gives the first 0x0), in RNE and in sr-add."""
    x = _row([1.0, -0.0, -0.01, -(2.0 ** -149)])
    for rounding, r in (("rne", None), ("sr-add", np.zeros(x.shape, np.uint8))):
        k = quantize(x, "nvfp4", profile="te-kernel", rounding=rounding, rbits=r, impl=impl)
        ref = quantize(x, "nvfp4", profile="te-fp32", rounding=rounding, rbits=r, impl=impl)
        assert k.codes[0, :4].tolist() == [0x7, 0x8, 0x8, 0x8]
        assert ref.codes[0, :4].tolist() == [0x7, 0x0, 0x8, 0x8]


@pytest.mark.parametrize("impl", IMPLS)
def test_amax_zero_reference_vs_kernel(impl):
    """FPS-BLK-9: a zero tensor: the reference's S_enc = min(2688/0, FLT_MAX) = FLT_MAX,
    the CUDA kernel's (profile te-kernel) S_enc = 1; codes and scales are all 0 either way."""
    z = np.zeros((1, 32), np.float32)
    ref = quantize(z, "nvfp4", impl=impl)
    ker = quantize(z, "nvfp4", profile="te-kernel", impl=impl)
    assert ref.encode_scale == FLT_MAX and ker.encode_scale == 1
    assert not ref.codes.any() and not ref.scales.any() and not ker.scales.any()


@pytest.mark.parametrize("impl", IMPLS)
def test_dequant_formula(impl):
    """FPS-BLK-14: te dequantization is e2m1 * ((e4m3 * amax) * fp32(1/2688))."""
    x = _row([3.0, 1.0])
    q = quantize(x, "nvfp4", impl=impl)
    # scale 448 (0x7E); payload 3 * 2688/(3*448)... multiplier = 1/(448 * fp32(3/2688)) ~ 2
    inv = np.float32(1) / np.float32(2688)
    expect = np.float32(6) * ((np.float32(448) * np.float32(3)) * inv)
    assert dequantize(q)[0, 0] == expect
    assert q.codes[0, :2].tolist() == [0x7, 0x4]


def test_rht_of_unit_vector():
    """FPS-BLK-10: the transform of e_0 is row 0 of diag(s) H16 / 4: s_0 * 1/4 everywhere."""
    from fpspec.exact.blocks import rht16_exact
    from fpspec.fast.rht import rht16_fast

    x = np.zeros((1, 16), np.float32)
    x[0, 0] = 1.0
    assert rht16_fast(x).tolist() == [[0.25] * 16] == rht16_exact(x).tolist()
    x = np.zeros((1, 16), np.float32)
    x[0, 3] = 2.0                               # s_3 = -1, H16 row 3 = (+,-,-,+,...)
    h_row3 = [1, -1, -1, 1] * 4
    assert rht16_fast(x).tolist() == [[-0.5 * h for h in h_row3]]


def test_rht_amax_is_taken_after_the_transform():
    """FPS-BLK-10: with rht the tensor amax is the transformed view's."""
    x = np.zeros((16, 16), np.float32)
    x[:, 0] = 4.0       # column 0 of X is row 0 of X^T: transform gives 4 * 16 * ... per group
    q = quantize(x, "nvfp4", columnwise=True, rht=True)
    # X^T row 0 = [4]*16 -> y_j = sum_i 4 s_i H[i,j] / 4 = sum_i s_i H[i, j]
    from fpspec.fast.rht import rht16_fast
    y = rht16_fast(np.ascontiguousarray(x.T))
    assert q.amax == np.max(np.abs(y)) and q.amax != 4.0


@pytest.mark.parametrize("impl", IMPLS)
def test_rht_bf16_output(impl):
    """FPS-BLK-20: rht_output="bf16" rounds the transformed view to bfloat16 before the amax and the
    quantization (TE's kernels): x = e_0 (1 + 2^-10) + e_1 2^-12 transforms to y_j = (1 + 2^-10
    +- 2^-12) / 4, which bfloat16 (8 significant bits) rounds to 1/4; the amax is then 1/4 instead
    of (1 + 2^-10 + 2^-12) / 4.  te-kernel rounds by default, te-fp32 does not."""
    x = np.zeros((16, 16), np.float32)
    x[0, 0] = 1 + 2.0 ** -10        # column 0 of X^T ... row 0 of the columnwise view
    x[1, 0] = 2.0 ** -12
    keep = quantize(x, "nvfp4", profile="te-fp32", columnwise=True, rht=True, impl=impl)
    bf16 = quantize(x, "nvfp4", profile="te-fp32", columnwise=True, rht=True, rht_output="bf16", impl=impl)
    kern = quantize(x, "nvfp4", profile="te-kernel", columnwise=True, rht=True, impl=impl)
    assert keep.amax == np.float32((1 + 2.0 ** -10 + 2.0 ** -12) / 4) and bf16.amax == np.float32(0.25)
    assert kern.amax == bf16.amax and np.array_equal(kern.codes, bf16.codes)
    assert bf16.params["rht_output"] == "bf16" and keep.params["rht_output"] == "fp32"


def test_rht_overflow_is_refused():
    """FPS-BLK-10, FPS-BLK-20: a transform past binary32 (inputs within a factor 4 of FLT_MAX) and a
    bfloat16 rounding past 0x1.fep127 are refused, naming the first element."""
    from fpspec.errors import FpspecError

    big = np.float32(np.finfo(np.float32).max)
    x = np.zeros((16, 16), np.float32)
    x[:, 0] = big                     # y_0 = 16 * big / 4 overflows
    for impl in IMPLS:
        with pytest.raises(FpspecError, match=r"overflows binary32.*\[0, 0\]"):
            quantize(x, "nvfp4", profile="te-fp32", columnwise=True, rht=True, impl=impl)
    from fpspec.exact.blocks import RHT_SIGNS

    y = np.zeros((16, 16), np.float32)
    y[:, 0] = np.array(RHT_SIGNS, np.float32) * (big * np.float32(0.2499))
    # y_0 = 16 * 0.2499 big / 4 = 0.9996 FLT_MAX: binary32, but past bfloat16's rounding bound 0x1.ffp127
    for impl in IMPLS:
        with pytest.raises(FpspecError, match="beyond bfloat16"):
            quantize(y, "nvfp4", profile="te-kernel", columnwise=True, rht=True, impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_dequant_overflow_is_refused_te_formula(impl):
    """FPS-BLK-21: finite inputs near FLT_MAX: te-fp32's codes are exact (scale 448, payload 6, 3, 0),
    but TE's dequantization computes s * g = 448 * 3.4e38 = inf: dequantize refuses, naming the first
    element and the formula; overflow="ieee" returns TE's values, +-inf and NaN for the zero payload."""
    from fpspec.errors import FpspecError

    big = float(np.finfo(np.float32).max)
    x = _row([big, -big / 2, 0.0])
    q = quantize(x, "nvfp4", impl=impl)
    assert q.scales[0, 0] == 0x7E and q.codes[0, :3].tolist() == [0x7, 0xD, 0x0]
    with pytest.raises(FpspecError, match=r"TransformerEngine's formula.*\[0, 0\]"):
        dequantize(q)
    d = dequantize(q, overflow="ieee")
    assert d[0, 0] == np.inf and d[0, 1] == -np.inf and np.isnan(d[0, 2])
    # the exact profile's formula rounds q s g / (6T) once: finite
    e = dequantize(quantize(x, "nvfp4", profile="exact", impl=impl))
    assert e[0, 0] == np.float32(big) and e[0, 1] == -np.float32(big / 2)


def test_te_amax_zero_held():
    """FPS-BLK-5, FPS-SCL-10: a held amax of 0 on a nonzero tensor: te-kernel uses S_enc = 1
    (block scale a_B / 6, 0x30 = 0.5 for a_B = 3), te-fp32 S_enc = FLT_MAX (every nonzero block
    saturates at 448), torchao-0.18 refuses; both paths agree."""
    from fpspec.errors import FpspecError

    x = _row([3.0, 1.5])
    for impl in IMPLS:
        k = quantize(x, "nvfp4", profile="te-kernel", amax=0.0, impl=impl)
        assert k.encode_scale == 1 and k.scales[0, 0] == 0x30 and k.codes[0, :2].tolist() == [0x7, 0x5]
        ref = quantize(x, "nvfp4", profile="te-fp32", amax=0.0, impl=impl)
        assert ref.encode_scale == FLT_MAX and ref.scales[0, 0] == 0x7E
        with pytest.raises(FpspecError, match="zero tensor amax"):
            quantize(x, "nvfp4", profile="torchao-0.18", amax=0.0, impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_2d_tiles_weight_and_transpose(impl):
    """FPS-BLK-6: 16x16 tiles: a weight and its transpose quantize identically."""
    rng = np.random.default_rng(9)
    w = rng.standard_t(2, (16, 32)).astype(np.float32)
    a = quantize(w, "nvfp4", tile="BxB", impl=impl)
    b = quantize(w, "nvfp4", tile="BxB", columnwise=True, impl=impl)
    assert np.array_equal(a.codes, b.codes.T) and np.array_equal(a.scales, b.scales.T)


@pytest.mark.parametrize("impl", IMPLS)
def test_torchao_lower_clamp(impl):
    """FPS-BLK-18: torchao 0.18 clamps block scales below at 2^-6 (E4M3 0x08), so the block that TE
    saturates under a zero scale becomes zeros; its tensor scales are 1/fp32(g/2688) and fp32(g/2688)."""
    x = _row([1.0], [2.0 ** -40, -(2.0 ** -41)])
    q = quantize(x, "nvfp4", profile="torchao-0.18", impl=impl)
    assert q.scales.tolist() == [[0x7E, 0x08]]
    assert q.codes[0, 16:18].tolist() == [0x0, 0x8]
    pts = np.float32(1) / np.float32(2688)
    assert q.decode_scale == pts and q.encode_scale == np.float32(1) / pts


@pytest.mark.parametrize("impl", IMPLS)
def test_torchao_block_scale_is_a_binary32_quotient(impl):
    """FPS-BLK-18: sbs = fp32(fp32(a_B / 6) / pts) is a binary32 quotient, rounded to E4M3 after.
    With pts = fp32(g / 2688) = 1 + 15 2^-23 and fp32(a_B / 6) = 1.0625 + 2^-19 the exact quotient
    lies 2^-27 above the E4M3 midpoint 1.0625 and rounds to it in binary32: a tie, which goes to the
    even code 1.0 (0x38), as torchao 0.18 gives; the binary64 quotient, no tie, rounds up to 1.125
    (0x39, what the fast kernel gave when it divided by pts in binary64)."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = 6.375011444091797   # a_B of block 0: fp32(a_B / 6) = 1.0625 + 2^-19
    x[0, 16] = 2688.0048828125    # g
    q = quantize(x, "nvfp4", profile="torchao-0.18", impl=impl)
    assert q.decode_scale == np.float32(1 + 15 * 2.0 ** -23)
    assert q.scales.tolist() == [[0x38, 0x7E]]


@pytest.mark.parametrize("profile", ["torchao-0.18", "torchao-0.18-cuda"])
def test_torchao_block_scales_next_to_e4m3_midpoints(profile):
    """FPS-BLK-18: block amaxes whose fp32(a_B / 6) / pts lies within an ulp of an E4M3 midpoint
    (where a binary64 quotient and the binary32 one round differently): both paths agree."""
    rng = np.random.default_rng(18)
    mids = [(1 + (2 * k + 1) / 16) * 2.0 ** e for k in range(8) for e in range(-5, 8)]
    g = rng.uniform(1000, 100000, 60).astype(np.float32)
    x = np.zeros((60, 32), np.float32)
    x[:, 16] = g
    inv = np.float32(1) / np.float32(2688)
    pts = g / np.float32(2688) if profile == "torchao-0.18" else g * inv
    bs = (np.array([mids[i] for i in rng.integers(len(mids), size=60)]) * pts).astype(np.float32)
    bs = (bs.view(np.uint32) + rng.integers(0, 3, 60).astype(np.uint32)).view(np.float32)
    x[:, 0] = np.minimum(bs.astype(np.float64) * 6.0, g * 0.99).astype(np.float32)
    for row in x:  # each row its own tensor: its own g and pts
        fast = quantize(row[None, :], "nvfp4", profile=profile, impl="fast")
        exact = quantize(row[None, :], "nvfp4", profile=profile, impl="exact")
        assert np.array_equal(fast.scales, exact.scales) and np.array_equal(fast.codes, exact.codes), row[[0, 16]]


def test_torchao_refuses_zero_tensor():
    """FPS-BLK-18: torchao 0.18 divides 0/0 for a zero tensor amax; fpspec refuses it."""
    from fpspec.errors import FpspecError

    for impl in IMPLS:
        with pytest.raises(FpspecError, match="zero tensor amax"):
            quantize(np.zeros((1, 16), np.float32), "nvfp4", profile="torchao-0.18", impl=impl)
