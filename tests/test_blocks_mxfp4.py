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
