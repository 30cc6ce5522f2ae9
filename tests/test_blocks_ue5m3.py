"""UE5M3 scheme: hand-derived expectations (FPS-BLK-1..7, 11, 14, 16, 17)."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.quantization import dequantize, quantize

IMPLS = ["fast", "exact"]
ONE = 0x78       # UE5M3 1.0
S448 = 0xBE      # UE5M3 448 = 1.75 * 2^8
SMAX = 0xF7      # UE5M3 61440


def _row(*blocks: list[float]) -> np.ndarray:
    out = []
    for b in blocks:
        out.extend(list(b) + [0.0] * (16 - len(b)))
    return np.array([out], dtype=np.float32)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("profile", ["exact", "seed-fp32"])
def test_block_at_tensor_amax_gets_scale_T(profile, impl):
    """FPS-BLK-2, FPS-BLK-3: a block whose amax is the tensor amax gets scale T = 448 and payload +-6."""
    x = _row([1.0, -1.0, 0.5])
    q = quantize(x, "ue5m3", profile=profile, impl=impl)
    assert q.scales.tolist() == [[S448]]
    # x G / s = 1 * 2688 / 448 = 6; 0.5 -> 3 (code 5)
    assert q.codes[0, :3].tolist() == [0x7, 0xF, 0x5]
    assert dequantize(q)[0, :3].tolist() == [1.0, -1.0, 0.5]
    assert q.encode_scale == np.float32(2688) and q.decode_scale == np.float32(1 / 2688)


@pytest.mark.parametrize("impl", IMPLS)
def test_zero_scale_rule(impl):
    """FPS-BLK-4: a block scale that rounds to 0 becomes 1.0 and its payload is all zeros;
    without the rule the scale code is 0x00 and every nonzero element saturates to +-6."""
    x = _row([1.0], [2.0 ** -40, -(2.0 ** -41)])
    on = quantize(x, "ue5m3", impl=impl)
    assert on.scales.tolist() == [[S448, ONE]]
    assert on.codes[0, 16:18].tolist() == [0x0, 0x8]   # 2^-40 * 2688 rounds to +0, the negative one to -0
    off = quantize(x, "ue5m3", zero_scale_rule=False, impl=impl)
    assert off.scales.tolist() == [[S448, 0x00]]
    assert off.codes[0, 16:18].tolist() == [0x7, 0xF]
    assert off.codes[0, 18] == 0x0                     # zeros stay zero
    assert dequantize(off)[0, 16:18].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("impl", IMPLS)
def test_scale_tie_at_2_pow_minus_18(impl):
    """FPS-BLK-4, FPS-BND-2: with g = T the scale request is a_B; 2^-18 is a tie that RNE sends to
    code 0 (then 1.0 by the rule): the request rounds to zero for u_B <= 2^-18 (not only <), and the
    next binary32 value above gets code 0x01."""
    tie = np.float32(2.0 ** -18)
    above = np.nextafter(tie, np.float32(1))
    x = _row([448.0], [tie], [above])
    q = quantize(x, "ue5m3", impl=impl)
    assert q.scales.tolist() == [[S448, ONE, 0x01]]
    q = quantize(x, "ue5m3", zero_scale_rule=False, impl=impl)
    assert q.scales.tolist() == [[S448, 0x00, 0x01]]
    # under the rule the tied block's payload is zero: |x| G = 2^-18 * 6 < 1/4
    on = quantize(x, "ue5m3", impl=impl)
    assert on.codes[0, 16] == 0 and on.scales[0, 1] == ONE


@pytest.mark.parametrize("impl", IMPLS)
def test_exact_e2m1_ties(impl):
    """FPS-BLK-2, FPS-BLK-7: g = 2688 gives G = 1; a block amax of 6 gives scale 1, so the payload is x:
    RNE ties go to the even code, RNA away from zero, 8-bit midpoint SR by the bytes given."""
    ties = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0]
    x = _row([2688.0], ties)
    rne = quantize(x, "ue5m3", impl=impl)
    assert rne.scales[0, 1] == ONE
    assert rne.codes[0, 16:26].tolist() == [7, 0, 2, 2, 4, 4, 6, 6, 0x8, 0xE]
    rna = quantize(x, "ue5m3", rounding="rna", impl=impl)
    assert rna.codes[0, 16:26].tolist() == [7, 1, 2, 3, 4, 5, 6, 7, 0x9, 0xF]
    # SR midpoint: a tie (delta = 1/2) goes up iff 1/2 + (2r+1)/512 >= 1, i.e. r >= 128
    r = np.zeros(x.shape, dtype=np.uint8)
    r[0, 17], r[0, 18] = 127, 128
    sr = quantize(x, "ue5m3", rounding="sr", rbits=r, impl=impl)
    assert sr.codes[0, 17:19].tolist() == [0, 2]


@pytest.mark.parametrize("impl", IMPLS)
def test_stale_amax_saturates_at_max_scale(impl):
    """FPS-BLK-17, FPS-BND-1: with a held amax g = 7 and T = 448 the scale request is 64 a_B;
    a_B = 960 asks for exactly 61440 (unsaturated), a_B = 961 saturates: payload +-6, dequant 960."""
    x = _row([960.0], [961.0, -961.0])
    q = quantize(x, "ue5m3", amax=7.0, impl=impl)
    assert q.scales.tolist() == [[SMAX, SMAX]]
    assert q.codes[0, [0, 16, 17]].tolist() == [0x7, 0x7, 0xF]
    assert dequantize(q)[0, [0, 16, 17]].tolist() == [960.0, 960.0, -960.0]
    # the FN variant has room up to 114688: a_B = 1000 asks for 64000, which rounds to 65536 (0xF8),
    # beyond UE5M3's 61440
    y = _row([1000.0])
    assert quantize(y, "ue5m3", amax=7.0, impl=impl).scales.tolist() == [[SMAX]]
    fnu = quantize(y, "ue5m3", amax=7.0, scale_format="ue5m3fnu", impl=impl)
    assert fnu.scales.tolist() == [[0xF8]]
    assert dequantize(fnu)[0, 0] == 1024.0   # payload 6 * 65536 / (6 * 448 / 7)


@pytest.mark.parametrize("impl", IMPLS)
def test_target_2048(impl):
    """FPS-BLK-2: T = 2048 maps the tensor amax to scale 2048 (code 0xD0: exponent field 11 + 15) and keeps payload 6."""
    q = quantize(_row([3.0]), "ue5m3", target=2048, impl=impl)
    assert q.scales.tolist() == [[0xD0]]
    assert q.codes[0, 0] == 7 and q.encode_scale == np.float32(4096)


@pytest.mark.parametrize("impl", IMPLS)
def test_seed_fp32_differs_from_exact_on_scale(impl):
    """FPS-BLK-16: g = 384 gives G = 7; a_B = 1.125 asks for 1.3125, a UE5M3 tie.  Real arithmetic
    rounds it to even (1.25, 0x7A); the seed's FP32 sequence computes 1.125 * fp32(7 * fp32(1/6))
    = 1.3125000894... and rounds up (1.375, 0x7B)."""
    x = _row([384.0], [1.125])
    assert quantize(x, "ue5m3", profile="exact", impl=impl).scales.tolist() == [[S448, 0x7A]]
    assert quantize(x, "ue5m3", profile="seed-fp32", impl=impl).scales.tolist() == [[S448, 0x7B]]


@pytest.mark.parametrize("impl", IMPLS)
def test_seed_fp32_differs_from_exact_on_payload(impl):
    """FPS-BLK-16: G = 7, scale 1.0 for both; x = 0.5 gives x G / s = 3.5 exactly, a tie that RNE
    sends to 4 (code 6).  The seed computes fp32(1 / fp32(1 * fp32(1/7))) = 6.9999995 and
    0.5 * 6.9999995 < 3.5 rounds to 3 (code 5)."""
    x = _row([384.0], [0.875, 0.5])
    e = quantize(x, "ue5m3", profile="exact", impl=impl)
    s = quantize(x, "ue5m3", profile="seed-fp32", impl=impl)
    assert e.scales[0, 1] == s.scales[0, 1] == ONE
    assert e.codes[0, 17] == 6 and s.codes[0, 17] == 5


@pytest.mark.parametrize("impl", IMPLS)
def test_negative_zero_keeps_sign(impl):
    """FPS-BLK-11: in ue5m3 profiles -0.0 gets code 0x8 (round_to_code semantics)."""
    q = quantize(_row([1.0, -0.0, 0.0]), "ue5m3", profile="seed-fp32", impl=impl)
    assert q.codes[0, :3].tolist() == [0x7, 0x8, 0x0]
    d = dequantize(q)
    assert np.signbit(d[0, 1]) and not np.signbit(d[0, 2])


@pytest.mark.parametrize("impl", IMPLS)
def test_all_zero_tensor(impl):
    """FPS-BLK-5: amax 0 uses G = 1; every scale rounds to 0 and becomes 1.0 by the rule."""
    q = quantize(np.zeros((2, 32), np.float32), "ue5m3", impl=impl)
    assert q.scales.tolist() == [[ONE, ONE], [ONE, ONE]]
    assert q.encode_scale == 1 and not q.codes.any() and q.amax == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_tiles_make_transpose_identical(impl):
    """FPS-BLK-6: with BxB tiles a tensor and its transpose get transposed codes and scales."""
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((32, 16)) * 2.0 ** rng.integers(-8, 8, (32, 16))).astype(np.float32)
    a = quantize(w, "ue5m3", tile="BxB", impl=impl)
    b = quantize(w, "ue5m3", tile="BxB", columnwise=True, impl=impl)
    assert a.scales.shape == (2, 1) and b.scales.shape == (1, 2)
    assert np.array_equal(a.codes, b.codes.T) and np.array_equal(a.scales, b.scales.T)


@pytest.mark.parametrize("impl", IMPLS)
def test_float64_input_exact_profile(impl):
    """FPS-BLK-1: binary64 inputs are used at their exact value by exact profiles, on both paths
    (no double rounding: 2.5 + 2^-30 over scale 1 is 3, code 5, where narrowing first would tie
    to 2); binary32 profiles narrow to binary32 first, as their operation sequence does."""
    x = np.zeros((1, 32))
    x[0, 0] = 2688.0                               # G = 1
    x[0, 16], x[0, 17] = 6.0, 2.5 + 2.0 ** -30     # a_B = 6: scale 1, payload = x
    e = quantize(x, "ue5m3", impl=impl)
    assert e.scales[0, 1] == ONE and e.codes[0, 17] == 5
    assert quantize(x.astype(np.float32), "ue5m3", impl=impl).codes[0, 17] == 4
    assert quantize(x, "ue5m3", profile="seed-fp32", impl=impl).codes[0, 17] == 4
    # an ordinary numpy (float64) array is accepted and equals its exact value's quantization
    y = np.random.default_rng(1).standard_normal((4, 32))
    assert np.array_equal(quantize(y, "ue5m3", impl=impl).codes, quantize(y, "ue5m3", impl="exact").codes)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("profile", ["exact", "seed-fp32"])
def test_held_amax_zero_means_encode_scale_one(profile, impl):
    """FPS-BLK-5, FPS-SCL-10: a held amax of 0 (delayed scaling of a tensor that was all zero at
    the refresh) gives encode scale 1, as the seed's kernel does: block scale a_B / 6 rounded to
    UE5M3, payload x / s_B.  a_B = 3 asks for 0.5 (0x70); 1.5 / 0.5 = 3 (code 5); a_B = 6e5 asks
    for 1e5, which saturates at 61440 (0xF7), and 6e5 / 61440 = 9.8 saturates at 6 (code 7)."""
    x = _row([3.0, 1.5, -0.25], [6e5, -1.0])
    q = quantize(x, "ue5m3", profile=profile, amax=0.0, impl=impl)
    assert q.encode_scale == 1 and q.decode_scale == 1 and q.amax == 0
    assert q.scales.tolist() == [[0x70, SMAX]]
    assert q.codes[0, [0, 1, 2, 16, 17]].tolist() == [0x7, 0x5, 0x9, 0x7, 0x8]
    assert q.params["amax_source"] == "given"
    # the same tensor measured as zero gives the same rule: encode scale 1
    assert quantize(np.zeros((1, 16), np.float32), "ue5m3", profile=profile, impl=impl).encode_scale == 1


@pytest.mark.parametrize("impl", IMPLS)
def test_seed_sr_fp32_evaluation_differs_from_exact(impl):
    """FPS-BLK-19: with G = 1 and scale 1 the payload is x.  y = 2^-10 - 2^-26, r = 255 (N = 8):
    delta = 2^-9 - 2^-25 and (2r+1)/512 = 1 - 2^-9 sum to 1 - 2^-25 < 1: exact SR keeps 0 (code
    0x0); the seed's fp32(delta + m) rounds that tie to 1.0 and rounds up to 0.5 (code 0x1).  With
    r = 254 the sum is 1 - 2^-25 - 2^-8 and both keep 0; at y = fp32(0.3) (delta = 0.6000000238,
    no bits below 2^-24) the bound is 2r + 1 >= 204.8: r = 102 rounds up in both, r = 101 in neither."""
    y = 2.0 ** -10 - 2.0 ** -26
    x = _row([6.0, y, y, -y, 0.3, 0.3])
    r = np.zeros(x.shape, np.uint8)
    r[0, 1:6] = [255, 254, 255, 102, 101]
    kw = dict(profile="seed-fp32", rounding="sr", rbits=r, amax=2688.0, impl=impl)
    exact = quantize(x, "ue5m3", **kw)
    fp32 = quantize(x, "ue5m3", sr_eval="fp32", **kw)
    assert exact.scales[0, 0] == fp32.scales[0, 0] == ONE
    assert exact.codes[0, 1:6].tolist() == [0x0, 0x0, 0x8, 0x1, 0x0]
    assert fp32.codes[0, 1:6].tolist() == [0x1, 0x0, 0x9, 0x1, 0x0]
    with pytest.raises(FpspecError, match="sr_eval"):
        quantize(x, "ue5m3", profile="exact", rounding="sr", rbits=r, sr_eval="fp32", impl=impl)


@pytest.mark.parametrize("impl", IMPLS)
def test_nbits_width_of_random_values(impl):
    """FPS-BLK-7: nbits sets N of the SR rules, as in encode: at the E2M1 tie 0.25 (delta 1/2) with
    N = 3, sr-midpoint rounds up iff 1/2 + (2r+1)/16 >= 1, i.e. r >= 4; r must be below 2^N."""
    x = _row([2688.0], [6.0] + [0.25] * 8)
    r = np.zeros(x.shape, np.uint8)
    r[0, 17:25] = np.arange(8)
    q = quantize(x, "ue5m3", rounding="sr", nbits=3, rbits=r, impl=impl)
    assert q.codes[0, 17:25].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert q.params["nbits"] == 3
    r16 = r.astype(np.uint16) * 8192  # the same probabilities with N = 16
    assert np.array_equal(quantize(x, "ue5m3", rounding="sr", nbits=16, rbits=r16, impl=impl).codes, q.codes)
    with pytest.raises(FpspecError, match=r"not below 2\^3.*\[0, 20\]"):
        quantize(x, "ue5m3", rounding="sr", nbits=3, rbits=np.where(np.arange(32) == 20, 8, r).astype(np.uint8),
                 impl=impl)


@pytest.mark.parametrize("value, where", [(1e39, (1, 3)), (-3.5e38, (0, 0)), (float("nan"), (1, 1))])
def test_float64_beyond_binary32_is_refused(value, where):
    """FPS-BLK-1: a float64 value whose binary32 rounding is infinite (or NaN) is refused, naming the
    value and its index, for every scheme and on both paths; FLT_MAX itself is accepted."""
    x = np.ones((2, 16))
    x[where] = value
    for scheme in ("ue5m3", "nvfp4", "mxfp4"):
        for impl in IMPLS:
            with pytest.raises(FpspecError, match=rf"{'non-finite' if value != value else 'beyond the binary32'}"
                               rf".*\[{where[0]}, {where[1]}\]"):
                quantize(x, scheme, impl=impl)
    x[where] = float(np.finfo(np.float32).max)
    assert quantize(x, "ue5m3").scales.max() == S448


@pytest.mark.parametrize("bad, kw, msg", [
    (np.array([[np.nan] + [0.0] * 15], np.float32), {}, "non-finite"),
    (np.array([[1.0] * 15 + [np.inf]], np.float32), {}, r"non-finite.*\[0, 15\]"),
    (np.ones((2, 24), np.float32), {}, "not a multiple of the block"),
    (np.ones((2, 16), np.float32), {"tile": "BxB"}, "16x16 tile"),
    (np.ones((2, 16), np.float32), {"amax": -1.0}, "finite and positive"),
    (np.ones((2, 16), np.float32), {"amax": 1e-50}, "stay so in binary32"),
    (np.ones((2, 16), np.float32), {"nbits": 0}, "nbits"),
    (np.ones((2, 16), np.float32), {"nbits": 8.0}, "nbits"),
    (np.ones((2, 16), np.float32), {"nbits": 33}, "nbits"),
    (np.ones((2, 16), np.float32), {"rounding": "sr", "rbits": np.ones((2, 16), np.int8)}, "uint8, uint16"),
    (np.ones((2, 16), np.float32), {"sr_eval": "fp64"}, "sr_eval must be one of"),
    (np.ones((2, 16), np.float32), {"rht_output": "fp8"}, "rht_output must be one of"),
    (np.ones((2, 16), np.float32), {"block": 8}, "blocks of 16 or 32"),
    (np.ones((2, 16), np.float32), {"tile": "16x16"}, "allows tiles"),
    (np.ones((2, 16), np.float32), {"amax": float("inf")}, "finite and positive"),
    (np.ones((2, 16), np.float32), {"amax": 1e300}, "finite and positive"),
    (np.ones((2, 16), np.float32), {"profile": "nope"}, "unknown profile"),
    (np.ones((2, 16), np.float32), {"scale_format": "ue4m3"}, "not accepted"),
    (np.ones((2, 16), np.float32), {"rounding": "sr"}, "random bits"),
    (np.ones((2, 16), np.float32), {"target": 0.1}, "binary32"),
    (np.ones((2, 16), np.int32), {}, "float array"),
])
def test_bad_input_is_refused(bad, kw, msg):
    """FPS-BLK-1: bad input gives one FpspecError naming what and where."""
    with pytest.raises(FpspecError, match=msg):
        quantize(bad, "ue5m3", **kw)


def test_pad():
    """FPS-BLK-1: pad=True zero-pads the view to whole blocks; the padding quantizes to code 0."""
    q = quantize(np.ones((2, 20), np.float32), "ue5m3", pad=True)
    assert q.codes.shape == (2, 32) and q.params["view_shape"] == [2, 20] and q.params["padded"]
    assert not q.codes[:, 20:].any() and (q.codes[:, :20] == 7).all()


def test_dequantize_refuses_inconsistent_containers():
    """FPS-BLK-14, FPS-BLK-21: dequantize refuses a container whose payload codes are not E2M1 codes,
    whose scale codes decode to NaN, whose T is missing or not a binary32 value, or whose amax is
    negative, naming the element or block; never a silent NaN."""
    from dataclasses import replace

    q = quantize(_row([1.0, 0.5], [2.0]), "ue5m3")
    bad_code = q.codes.copy()
    bad_code[0, 17] = 0x1F
    nan_scale = q.scales.copy()
    nan_scale[0, 1] = 0xF9
    for qt, msg in ((replace(q, codes=bad_code), r"payload code 31.*\[0, 17\]"),
                    (replace(q, scales=nan_scale), r"scale code 249 of block \[0, 1\]"),
                    (replace(q, params={**q.params, "target": None}, spec=None), "needs the target T"),
                    (replace(q, params={**q.params, "target": "0"}, spec=None), "must be positive"),
                    (replace(q, amax=np.float32(-1)), "amax")):
        with pytest.raises(FpspecError, match=msg):
            dequantize(qt)
    # a tensor never carries two answers: params that contradict the spec it carries are refused
    with pytest.raises(FpspecError, match=r"params target '2048' is not the spec's T = 448"):
        replace(q, params={**q.params, "target": "2048"})
    with pytest.raises(FpspecError, match=r"block 32 is not the spec's 16"):
        replace(q, block=32, scales=np.zeros((q.codes.shape[0], q.codes.shape[1] // 32), np.uint8))
    with pytest.raises(FpspecError, match="overflow must be"):
        dequantize(q, overflow="clip")


def test_npz_round_trip(tmp_path):
    """FPS-BLK-14: a QuantizedTensor written and read back dequantizes to the same bits."""
    from fpspec.quantized import QuantizedTensor

    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 32)).astype(np.float32)
    q = quantize(x, "ue5m3", profile="seed-fp32")
    q.to_npz(tmp_path / "q.npz", dequant=dequantize(q))
    r = QuantizedTensor.from_npz(tmp_path / "q.npz")
    assert np.array_equal(dequantize(r).view(np.uint32), dequantize(q).view(np.uint32))


@pytest.mark.parametrize("impl", IMPLS)
def test_fps_blk_25_seed_portable_dequantization_order(impl):
    """FPS-BLK-25, FPS-BLK-14: a block [709.4365, -1515.1641] with a held g = 2406.6875 (case 0 of the
    level-1 set quantize-ue5m3-seed-fp32-1x16, row 1): code 0x5 (3.0), scale 0xB9 (288),
    gd = 0x3F653556 under both seed profiles.  The kernel order fp32(fp32(3 * 288) * gd) gives
    0x44416501, the portable reference's fp32(3 * fp32(288 * gd)) 0x44416500 (values of the seed's
    own portable reference, CPU torch); recomputed here in numpy binary32."""
    x = np.zeros((1, 16), np.float32)
    x[0, 0], x[0, 1] = _bits32(0x44315BF0), _bits32(0xC4BD6540)
    gd = _bits32(0x3F653556)
    want_kernel = (np.float32(3) * np.float32(288)) * gd
    want_portable = np.float32(3) * (np.float32(288) * gd)
    assert (want_kernel.view(np.uint32), want_portable.view(np.uint32)) == (0x44416501, 0x44416500)
    got = {}
    for profile in ("seed-fp32", "seed-portable"):
        q = quantize(x, "ue5m3", profile=profile, amax=float(_bits32(0x45166B00)), impl=impl)
        assert (int(q.codes[0, 0]), int(q.scales[0, 0]), int(q.decode_scale.view(np.uint32))) == (5, 0xB9, 0x3F653556)
        got[profile] = int(dequantize(q).view(np.uint32)[0, 0])
    assert got == {"seed-fp32": 0x44416501, "seed-portable": 0x44416500}


def _bits32(b: int) -> np.float32:
    return np.array([b], dtype=np.uint32).view(np.float32)[0]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("sr_eval", ["exact", "fp32"])
def test_fps_blk_25_seed_triton_sign_of_zero(sr_eval, impl):
    """FPS-BLK-25, FPS-BLK-11: the seed's Triton kernel tests ``value < 0.0`` for the sign (round_e2m1 in
    backends/triton/_rounding.py): a payload that is -0.0 becomes +0 (code 0x0, dequantized +0.0), a
    negative value that rounds to zero stays -0 (0x8); seed-fp32 keeps -0.0 (0x8).  Same under RNE
    and under the seed's FP32 evaluation of SR."""
    x = _row([1.0, -0.0, -1e-9, 0.0])
    kw = dict(rounding="sr", sr_eval=sr_eval, rbits=np.full((1, 16), 200, np.uint8))
    for rounding_kw in ({}, kw):
        t = quantize(x, "ue5m3", profile="seed-triton", impl=impl, **rounding_kw)
        k = quantize(x, "ue5m3", profile="seed-fp32", impl=impl, **rounding_kw)
        assert t.codes[0, :4].tolist() == [0x7, 0x0, 0x8, 0x0] and k.codes[0, :4].tolist() == [0x7, 0x8, 0x8, 0x0]
        assert dequantize(t).view(np.uint32)[0, :4].tolist() == [0x3F800000, 0, 0x80000000, 0]
        assert np.array_equal(t.scales, k.scales)
