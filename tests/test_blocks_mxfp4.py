"""MXFP4 scheme: E8M0 scale modes computed exactly, element rounding (FPS-BLK-12, 13)."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.quantization import dequantize, quantize

IMPLS = ["fast", "exact"]


def _blocks(amaxes):
    x = np.zeros((1, 32 * len(amaxes)), np.float32)
    for i, a in enumerate(amaxes):
        x[0, 32 * i] = a
    return x


AMAXES = [6.0, 7.0, 4.0, 6.5, 0.0, 1.75, np.float32(2.0 ** -130), 3.0e38, 12.0]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("mode, expect", [
    # biased exponents: e + 127
    ("floor", [127, 127, 127, 127, 0, 125, 0, 252, 128]),   # floor(log2 a) - 2
    ("ceil", [128, 128, 127, 128, 0, 126, 0, 253, 129]),    # ceil(log2 a) - 2
    ("even", [127, 128, 127, 127, 0, 126, 0, 253, 128]),    # +1 iff a >= 1.75 * 2^floor
    ("rceil", [127, 128, 127, 128, 0, 126, 0, 253, 128]),   # ceil(log2(a / 6))
])
def test_scale_modes(mode, expect, impl):
    """FPS-BLK-12: hand-derived E8M0 codes for each scale mode (clamped at 2^-127, byte 0)."""
    q = quantize(_blocks(AMAXES), "mxfp4", profile=mode, impl=impl)
    assert q.scales.tolist() == [expect]


@pytest.mark.parametrize("impl", IMPLS)
def test_element_ties_rne_and_rna(impl):
    """FPS-BLK-13: amax 6 gives scale 1; ties go to even (rne) or away from zero (rna); +-6 clamp."""
    x = np.zeros((1, 32), np.float32)
    x[0, :6] = [6.0, 0.25, 2.5, -5.0, 1.25, -0.75]
    rne = quantize(x, "mxfp4", impl=impl)
    rna = quantize(x, "mxfp4", rounding="rna", impl=impl)
    assert rne.codes[0, :6].tolist() == [7, 0, 4, 0xE, 2, 0xA]
    assert rna.codes[0, :6].tolist() == [7, 1, 5, 0xF, 3, 0xA]
    # floor scale for amax 7: 2^0, so 7 clamps to 6
    y = np.zeros((1, 32), np.float32)
    y[0, 0] = 7.0
    assert quantize(y, "mxfp4", impl=impl).codes[0, 0] == 7
    assert dequantize(quantize(y, "mxfp4", impl=impl))[0, 0] == 6.0


def test_no_tensor_scale():
    """FPS-BLK-12: mxfp4 has no tensor scale and refuses a target T."""
    from fpspec.errors import FpspecError

    q = quantize(_blocks([3.0]), "mxfp4")
    assert q.encode_scale == 1 and q.decode_scale == 1
    with pytest.raises(FpspecError, match="target"):
        quantize(_blocks([3.0]), "mxfp4", target=448)


# ------------------------------------------------- torchao 0.18 and microxcaling (FPS-BLK-23, FPS-BLK-24)
def _f(bits: int) -> np.float32:
    return np.array([bits], dtype=np.uint32).view(np.float32)[0]


def _one_block(values, profile, rounding="rne", impl="fast"):
    """Scale byte, codes of the given leading values and dequantized bits of the first, for one block."""
    x = np.zeros((1, 32), np.float32)
    x[0, :len(values)] = np.asarray(values, dtype=np.float32)
    q = quantize(x, "mxfp4", profile=profile, rounding=rounding, impl=impl)
    d = dequantize(q).view(np.uint32)
    return int(q.scales[0, 0]), q.codes[0, :len(values)].tolist(), int(d[0, 0])


BYTE0 = [1.5 * 2.0 ** -125, 2.0 ** -126, 2.0 ** -127, -1.5 * 2.0 ** -126]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("profile, expect", [
    # the scale byte is 0 (a_B = 1.5 2^-125 < 2^-124): torchao divides by 2^-126, multiplies by 2^-127
    ("torchao-0.18-floor", (0x00, [5, 2, 1, 0xB], 0x00C00000)),
    ("torchao-0.18-even", (0x00, [5, 2, 1, 0xB], 0x00C00000)),
    ("torchao-0.18-ceil", (0x01, [5, 2, 1, 0xB], 0x01400000)),   # ceil: byte 1, no clamp involved
    ("torchao-0.18-rceil", (0x00, [0, 0, 0, 8], 0x00000000)),    # multiplier 1.0: every code a zero
    ("floor", (0x00, [7, 4, 2, 0xD], 0x01400000)),               # OCP: x / 2^-127
    ("microxcaling", (0x00, [7, 4, 2, 0xD], 0x01400000)),
])
def test_fps_blk_23_scale_byte_zero(profile, expect, impl):
    """FPS-BLK-23, FPS-BLK-13: x = [1.5 2^-125, 2^-126, 2^-127, -1.5 2^-126] in one block (values
    measured on torchao 0.18.0 and microxcaling, CPU): torchao FLOOR/EVEN quantize x / 2^-126 (3, 1,
    0.5, -1.5: codes 5 2 1 B) and dequantize 3 * 2^-127 = 0x00C00000; RCEIL multiplies by 1.0, so every
    code is a signed zero; OCP and microxcaling divide by 2^-127 (6, 2, 1, -3)."""
    assert _one_block(BYTE0, profile, impl=impl) == expect


@pytest.mark.parametrize("impl", IMPLS)
def test_fps_blk_23_ceil_of_a_subnormal_amax(impl):
    """FPS-BLK-23: CEIL with a_B = 2^-126 gives byte 0 (ceil(log2) - 2 = -128, clamped); torchao
    quantizes 2^-126 / 2^-126 = 1 (code 2), 2^-127 -> 0.5 (code 1)."""
    assert _one_block([2.0 ** -126, 2.0 ** -127], "torchao-0.18-ceil", impl=impl) == (0x00, [2, 1], 0x00400000)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("amax_bits, byte", [(0x43400001, 0x84), (0x45C00001, 0x89), (0x3BC00001, 0x75),
                                             (0x7F400001, 0xFC)])
def test_fps_blk_23_rceil_takes_a_binary32_log2(amax_bits, byte, impl):
    """FPS-BLK-22, FPS-BLK-23: a_B = 192.00002 (0x43400001): fp32(a_B / 6) = 32(1 + 2^-23) (0x42000001),
    whose log2 is 5 + 1.7e-7, within half the binary32 spacing above 5 (2^-22): RN32 gives 5, so
    torchao's byte is 5 + 127 = 0x84 where the exact ceil(log2(a_B / 6)) = 6 gives 0x85.  The amax
    element a_B / 2^5 = 6.0000005 then saturates (code 7) and a_B / 3 -> 2 (code 4).  Same for the
    other three amaxes (measured on torchao 0.18.0)."""
    a = _f(amax_bits)
    got = _one_block([a, np.float32(a / 3)], "torchao-0.18-rceil", impl=impl)
    assert got[:2] == (byte, [7, 4])
    assert _one_block([a, np.float32(a / 3)], "rceil", impl=impl)[:2] == (byte + 1, [5, 2])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("values, rounding, expect", [
    ([1.0, -0.0, -1e-30], "rne", (0x7D, [6, 0, 8])),                      # -0.0 -> +0; -1e-30 -> 0x8
    ([_f(0x447FFFFF), np.float32(3 * _f(0x447FFFFF) / 8)], "rne", (0x87, [6, 3])),  # FL(a_B) one too high
    ([_f(0x40FFFFFF), np.float32(3 * _f(0x40FFFFFF) / 8)], "rne", (0x80, [6, 3])),
    ([_f(0x3E7FFFFF), np.float32(3 * _f(0x3E7FFFFF) / 8)], "rne", (0x7B, [6, 3])),
    ([1.0, 0.0625 - 2.0 ** -28], "rna", (0x7D, [6, 1])),                # A = 0.25 - 2^-26 rounds up
    ([1.0, 0.0625 - 2.0 ** -28], "rne", (0x7D, [6, 1])),
    ([1.0, 0.0625 - 2.0 ** -28], "rtz", (0x7D, [6, 0])),
    ([_f(0x407FFFFF), 2.0], "rtz", (0x7E, [6, 6])),                      # A = 8(1 - 2^-24): FL(A) = 3
    ([8.0, -2.0 ** -149, -3 * 2.0 ** -149], "rne", (0x80, [6, 0, 8])),  # x / 2 underflows to -0.0, or not
])
def test_fps_blk_24_microxcaling(values, rounding, expect, impl):
    """FPS-BLK-22, FPS-BLK-24: microxcaling's results (measured, CPU): a_B = 1023.99994 (0x447FFFFF) has
    FL = 10, so e = 8 (byte 0x87) where floor(log2) - 2 = 7, and the amax element quantizes to
    4 (code 6); A = x / 2^e = 0.25 - 2^-26 gives t = 0.5 - 2^-25 and fp32(t + 0.5) = 1.0, so rna and rne
    round it up to 0.5 (code 1), rtz down; A = 8(1 - 2^-24) has FL = 3, so rtz gives floor(2 - 2^-23) 2^2
    = 4 (code 6, exact RTZ: 6); -0.0 and a negative x whose quotient underflows to -0.0 give +0."""
    assert _one_block(values, "microxcaling", rounding, impl)[:2] == expect


def test_fps_blk_23_24_profiles_as_data():
    """FPS-BLK-23, FPS-BLK-24: the new profiles read binary32, accept only their sources' roundings and
    carry their scale and byte-0 rules as named data."""
    from fpspec.errors import FpspecError
    from fpspec.schemes import Arithmetic, MxScaleMode, MxZeroByte, SignedZero, get_profile

    for mode in ("floor", "ceil", "even"):
        p = get_profile("mxfp4", f"torchao-0.18-{mode}")
        assert (p.mx_mode.value, p.mx_zero_byte, p.roundings) == (mode, MxZeroByte.MIN_NORMAL, ("rne",))
    r = get_profile("mxfp4", "torchao-0.18-rceil")
    assert (r.mx_mode, r.mx_zero_byte) == (MxScaleMode.RCEIL_FP32, MxZeroByte.ONE)
    m = get_profile("mxfp4", "microxcaling")
    assert (m.mx_mode, m.mx_zero_byte, m.signed_zero, m.roundings) == \
        (MxScaleMode.FLOOR_FP32, MxZeroByte.EXACT, SignedZero.POSITIVE, ("rne", "rna", "rtz"))
    assert m.arithmetic.binary32_input and r.arithmetic is Arithmetic.TORCHAO_MX
    assert not get_profile("mxfp4", "floor").arithmetic.binary32_input
    with pytest.raises(FpspecError, match="not accepted"):
        quantize(_blocks([1.0]), "mxfp4", profile="torchao-0.18-floor", rounding="rna")
    # binary64 input is narrowed first: 1 + 2^-30 is 1.0 to torchao, and quantizes as 1.0
    x64 = np.zeros((1, 32))
    x64[0, 0], x64[0, 1] = 6.0, 2.5 + 2.0 ** -30
    assert quantize(x64, "mxfp4", profile="torchao-0.18-floor").codes[0, 1] == 4   # 2.5 -> 2 (even)
    assert quantize(x64, "mxfp4", profile="floor").codes[0, 1] == 5                # exact: above the tie
