"""Dequantization through per-block code tables (FPS-BLK-14, FPS-BLK-21).

The kernel computes a block's value of every E2M1 code once, fp32((q F) / D) with F the
factor of the block's scale code, and looks each element's code up.  These tests hold it
to the same formula evaluated element by element in NumPy (binary64 products and
quotients, one rounding to binary32), including values that overflow, and check the
refusal of a non-finite scale code.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.fast.dequant import dequant_factors
from fpspec.quantization import dequantize, quantize

_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _reference(qt) -> np.ndarray:
    """fp32((q F) / D) element by element, F per block from :func:`dequant_factors`."""
    spec = qt.resolved_spec()
    target = None if spec.target is None else float(spec.target)
    factors, divisor = dequant_factors(spec.profile.dequant, qt.scales, qt.scale_format, float(qt.amax), target,
                                       qt.decode_scale)
    f = np.asarray(factors, dtype=np.float64).reshape(qt.scales.shape)
    if qt.tile == "BxB":
        f = np.repeat(f, qt.block, axis=0)
    per_elem = np.repeat(f, qt.block, axis=1)
    q = qt.codes
    with np.errstate(over="ignore", invalid="ignore"):
        v = ((_E2M1[q & 7] * per_elem) / divisor).astype(np.float32)
    return np.where(q & 8, -v, v)


@pytest.mark.parametrize("scheme,profile,tile,block", [
    ("ue5m3", "exact", "1xB", 16), ("ue5m3", "exact", "1xB", 32), ("ue5m3", "exact", "BxB", 16),
    ("ue5m3", "seed-fp32", "1xB", 16), ("ue5m3", "seed-portable", "1xB", 32), ("nvfp4", "te-fp32", "1xB", 16),
    ("nvfp4", "torchao-0.18", "1xB", 16), ("mxfp4", "floor", "1xB", 32), ("mxfp4", "rceil", "1xB", 32)])
def test_tables_equal_the_formula_element_by_element(scheme, profile, tile, block):
    rng = np.random.default_rng(block)
    x = (rng.standard_normal((64, 256 * 5)) * 2.0 ** rng.uniform(-20, 20, (64, 1))).astype(np.float32)
    x[3, :] = 0.0
    qt = quantize(x, scheme, profile=profile, tile=tile, block=block)
    got = dequantize(qt)
    assert np.array_equal(got.view(np.uint32), _reference(qt).view(np.uint32))


def test_overflowing_tables_give_the_formulas_ieee_values_and_the_first_bad_element():
    """TE's dequantization overflows in s g for huge values (FPS-BLK-21): +-inf, and NaN for
    the zero payload; the refusal names the first such element in row-major order."""
    rng = np.random.default_rng(4)
    x = (rng.uniform(-1, 1, (32, 256)) * np.finfo(np.float32).max).astype(np.float32)
    x[0, :40] = 1.0  # the first blocks stay finite
    qt = quantize(x, "nvfp4", profile="te-fp32")
    ref = _reference(qt)
    got = dequantize(qt, overflow="ieee")
    assert np.array_equal(got.view(np.uint32), ref.view(np.uint32))
    first = np.unravel_index(int(np.flatnonzero(~np.isfinite(ref))[0]), ref.shape)
    with pytest.raises(FpspecError, match=rf"element \[{first[0]}, {first[1]}\]"):
        dequantize(qt)


@pytest.mark.parametrize("scheme,code", [("ue5m3", 250), ("ue5m3", 255), ("nvfp4", 127), ("mxfp4", 255)])
def test_a_non_finite_scale_code_is_refused_with_its_block(scheme, code):
    x = np.random.default_rng(1).standard_normal((8, 128)).astype(np.float32)
    qt = quantize(x, scheme)
    scales = qt.scales.copy()
    scales[2, 3] = code
    bad = dataclasses.replace(qt, scales=scales)
    with pytest.raises(FpspecError, match=rf"scale code {code} of block \[2, 3\] is not a finite"):
        dequantize(bad)
    assert np.array_equal(dequantize(dataclasses.replace(qt, scales=qt.scales.copy())), dequantize(qt))


@pytest.mark.parametrize("fmt,code,what", [("e4m3", 0x7F, "a NaN"), ("e4m3", 0xFF, "a NaN"),
                                           ("e5m2", 0x7C, "an Inf"), ("e5m2", 0xFE, "a NaN")])
def test_an_fp8_nan_or_inf_payload_code_is_refused_with_its_element(fmt, code, what):
    """FPS-BLK-28: an MX quantizer saturates and never writes NaN or Inf codes; dequantize
    names the first one (a later one does not hide it)."""
    x = np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32)
    qt = quantize(x, "mxfp8", payload_format=fmt)
    codes = qt.codes.copy()
    codes[5, 70] = code
    codes[7, 1] = code
    with pytest.raises(FpspecError, match=rf"payload code 0x{code:02x} is {what} code of {fmt}.*\[5, 70\]"):
        dequantize(dataclasses.replace(qt, codes=codes))
    largest = codes.copy()
    largest[5, 70] = largest[7, 1] = 0x7B if fmt == "e5m2" else 0x7E  # the largest finite magnitude
    assert np.isfinite(dequantize(dataclasses.replace(qt, codes=largest), overflow="ieee")).all()
