"""Decode every code of every format of at most 16 bits: exact == fast (FPS-FMT-3)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from fpspec.convert import decode
from fpspec.errors import FpspecError
from fpspec.fast.rounding import decode_fast, decode_table
from fpspec.formats import FORMATS, CodeKind, get_format


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n, f in FORMATS.items() if f.bits <= 16])
def test_every_code_exact_equals_fast(name):
    """FPS-FMT-3: value, sign of zero, NaN and signed Inf of every code agree."""
    f = get_format(name)
    codes = np.arange(f.num_codes, dtype=f.storage_dtype)
    fast = decode_fast(codes, f)
    assert fast.dtype == np.float64 and np.array_equal(decode_table(f), fast, equal_nan=True)
    for c in range(f.num_codes):
        exact = f.decode_exact(c)
        kind = f.kind(c)
        got = float(fast[c])
        sign = f.split(c)[0]
        if kind is CodeKind.NAN:
            assert math.isnan(got) and math.isnan(exact), hex(c)
            assert math.copysign(1.0, got) == math.copysign(1.0, exact) == (-1.0 if sign else 1.0)
        elif kind is CodeKind.INF:
            assert got == exact and math.isinf(got), hex(c)
        else:
            assert got == exact, hex(c)  # float == Fraction compares exact values
            assert math.copysign(1.0, got) == (-1.0 if sign else 1.0), hex(c)


@pytest.mark.parametrize("name,dtype", [("fp16", np.float16), ("bf16", ml_dtypes.bfloat16),
                                        ("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2),
                                        ("e2m1", ml_dtypes.float4_e2m1fn),
                                        ("ue8m0", ml_dtypes.float8_e8m0fnu),
                                        ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz),
                                        ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz)])
def test_decode_matches_the_ieee_or_ml_dtypes_type(name, dtype):
    """FPS-FMT-3: every code decodes as numpy / ml_dtypes reads the same bits."""
    f = get_format(name)
    codes = np.arange(f.num_codes, dtype=np.uint16 if f.bits > 8 else np.uint8)
    theirs = codes.view(dtype) if f.bits in (8, 16) else codes.astype(np.uint8).view(dtype)
    with np.errstate(invalid="ignore"):
        theirs = theirs.astype(np.float64)
    ours = decode(codes, f)
    assert np.array_equal(ours, theirs, equal_nan=True)
    assert np.array_equal(np.signbit(ours), np.signbit(theirs))


def test_fp32_decode_sampled():
    """FPS-FMT-3: fp32 codes decode as the float32 of the same bits (sampled + specials)."""
    rng = np.random.default_rng(5)
    codes = np.concatenate([rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(np.uint32),
                            np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 1], np.uint32)])
    f = get_format("fp32")
    ours = decode(codes, f)
    for c, v in zip(codes[-6:].tolist(), ours[-6:].tolist()):
        exact = f.decode_exact(c)
        assert (math.isnan(v) and math.isnan(exact)) or v == exact
    with np.errstate(invalid="ignore"):
        theirs = codes.view(np.float32).astype(np.float64)
    assert np.array_equal(ours, theirs, equal_nan=True)


def test_decode_refuses_out_of_range_codes():
    """FPS-FMT-3: a code >= 2^bits is refused with its index."""
    with pytest.raises(FpspecError, match=r"code 16 out of range for e2m1.*index \[0, 2\]"):
        decode(np.array([[1, 2, 16]], np.uint8), "e2m1")
    with pytest.raises(FpspecError, match="unsigned integer"):
        decode(np.array([1.0]), "e2m1")


@pytest.mark.parametrize("name,dtype", [("e4m3fnuz", ml_dtypes.float8_e4m3fnuz),
                                        ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz)])
def test_fnuz_encode_matches_ml_dtypes(name, dtype):
    """FPS-FMT-8: encoding into an FNUZ format never writes 0x80 for a zero (signed zeros and
    negative underflow give 0x00), NaN and overflow give 0x80; exact == fast == ml_dtypes."""
    from fpspec.convert import encode
    from fpspec.exact.rounding import encode_exact

    rng = np.random.default_rng(8)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1e-30, 1e-30, 240, -247, 250, -57344, 61440,
                         -65536, 2.0 ** -11, -(2.0 ** -18)], np.float32)
    x = np.concatenate([specials, rng.integers(0, 1 << 32, 30000, dtype=np.uint64).astype(np.uint32)
                        .view(np.float32)])
    fast = encode(x, name, "rne")
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = x.astype(dtype).view(np.uint8)
    assert np.array_equal(fast, theirs)
    assert np.array_equal(encode_exact(x[:3000], name, "rne"), fast[:3000])
    assert fast[1] == 0 and fast[5] == 0 and fast[4] == 0x80 and fast[3] == 0x80
