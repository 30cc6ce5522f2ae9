"""fpspec RNE vs ml_dtypes ``astype`` from float32 (FPS-RND-1, FPS-RND-13, FPS-RND-15).

Inputs: every float32 reachable from an FP16 or BF16 value, the edges of each target
(ties, one ulp either side, overflow boundary), and dense random float32 bit patterns.
Zero mismatches, except the differences listed in :data:`NAMED_DIFFERENCES`; each one
is checked to be exactly what it claims, on every input where it applies, and each is
reproduced bit for bit by the fpspec names in :data:`ML_DTYPES_SELECTORS`.  Two of them
depend on the release installed (:func:`fpspec.adapters.ml_dtypes_vectors.ml_dtypes_declaration`):
ml_dtypes 0.7 rounds E8M0 by value and casts float64 in one rounding.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fpspec.adapters.ml_dtypes_vectors import ML_DTYPES_07_DECLARATION, ml_dtypes_declaration
from fpspec.convert import encode
from fpspec.formats import CodeKind, get_format

from test_rounding_edges import edge_inputs

#: ml_dtypes 0.7 or newer installed (E8M0 by value, float64 in one rounding).
ML_07 = ml_dtypes_declaration() is ML_DTYPES_07_DECLARATION

#: Every known difference between fpspec's default RNE conversion and ml_dtypes (docs/rounding.rst).
NAMED_DIFFERENCES = {
    "e2m1-nan": "float4_e2m1fn maps NaN to a zero code with the sign bit flipped (+NaN -> 0x8, "
                "-NaN -> 0x0); e2m1 has no NaN and fpspec's default NaN policy is 'error'",
    "e5m2-nan-code": "float8_e5m2 writes NaN as 0x7E/0xFE (quiet bit only); fpspec writes the "
                     "canonical all-ones 0x7F/0xFF (FloatFormat.nan_code); same sign, both NaN",
    "e8m0-ties": "float8_e8m0fnu rounds ties (1.5 * 2^e) up, which is fpspec 'rna'; fpspec 'rne' "
                 "sends them to the even code",
    "e8m0-f32-subnormal": "before 0.7, float8_e8m0fnu sends every float32 subnormal strictly between "
                          "2^-127 and 1.5 * 2^-127 (bits 0x400001..0x5FFFFF) up to 2^-126 (code 0x01), "
                          "although it lies below the midpoint; fpspec rounds it to 2^-127 (0x00), "
                          "and so does 0.7",
    "float64-double-rounding": "before 0.7, ml_dtypes casts float64 through float32 (two roundings); "
                               "fpspec and 0.7 round the float64 value once",
    "e8m0-zero-negative": "float8_e8m0fnu maps 0 and negative inputs to 0xFF (NaN), which is "
                          "fpspec --zero nan --negative nan; fpspec's defaults refuse them",
}

#: The fpspec names that reproduce ml_dtypes' cast to each format, every input (FPS-RND-13).
ML_DTYPES_SELECTORS = {
    "e2m1": dict(rounding="rne", nan="flipped-zero"),
    "e4m3": dict(rounding="rne"),
    "e5m2": dict(rounding="rne", nan="quiet"),
    "ue8m0": dict(rounding="rna" if ML_07 else "rne-bits", zero="nan", negative="nan"),
}

_ML = {"e2m1": ml_dtypes.float4_e2m1fn, "e4m3": ml_dtypes.float8_e4m3fn,
       "e5m2": ml_dtypes.float8_e5m2, "ue8m0": ml_dtypes.float8_e8m0fnu}


@pytest.fixture(scope="module")
def float32_inputs(all_fp16, all_bf16) -> np.ndarray:
    rng = np.random.default_rng(12345)
    dense = rng.integers(0, 1 << 32, size=1 << 21, dtype=np.uint64).astype(np.uint32).view(np.float32)
    edges = np.concatenate([edge_inputs(f, np.float32) for f in _ML])
    with np.errstate(invalid="ignore"):
        return np.concatenate([all_fp16.astype(np.float32), all_bf16.astype(np.float32), edges, dense])


def _ml_codes(x: np.ndarray, fmt: str) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(_ML[fmt]).view(np.uint8)


def test_e4m3_no_differences(float32_inputs):
    """FPS-RND-13: float8_e4m3fn == fpspec e4m3 RNE with default policies, on every input
    (NaN sign kept, overflow past 464 and Inf -> NaN: the 'nonfinite' default)."""
    x = float32_inputs
    assert np.array_equal(encode(x, "e4m3", "rne"), _ml_codes(x, "e4m3"))


def test_e2m1_differs_only_on_nan(float32_inputs):
    """FPS-RND-13: float4_e2m1fn == fpspec e2m1 RNE (saturating) on every non-NaN input;
    on NaN the named difference 'e2m1-nan' holds exactly."""
    x = float32_inputs
    nan = np.isnan(x)
    ours = encode(x[~nan], "e2m1", "rne")
    assert np.array_equal(ours, _ml_codes(x[~nan], "e2m1"))
    # the difference, exactly: NaN with sign bit s -> code (1 - s) << 3
    sign = (x[nan].view(np.uint32) >> 31).astype(np.uint8)
    assert np.array_equal(_ml_codes(x[nan], "e2m1"), (1 - sign) << 3)
    # and fpspec refuses NaN by default, or maps it by a named policy
    assert set(encode(x[nan], "e2m1", nan="zero").tolist()) == {0}


def test_e5m2_differs_only_in_nan_code(float32_inputs):
    """FPS-RND-13: float8_e5m2 == fpspec e5m2 RNE on every non-NaN input (Inf -> Inf, overflow
    -> Inf); on NaN both give a NaN code of the same sign, ml_dtypes 0x7E, fpspec 0x7F."""
    x = float32_inputs
    nan = np.isnan(x)
    assert np.array_equal(encode(x[~nan], "e5m2", "rne"), _ml_codes(x[~nan], "e5m2"))
    sign = (x[nan].view(np.uint32) >> 31).astype(np.uint8) << 7
    assert np.array_equal(_ml_codes(x[nan], "e5m2"), 0x7E | sign)
    assert np.array_equal(encode(x[nan], "e5m2", "rne"), 0x7F | sign)
    f = get_format("e5m2")
    assert f.kind(0x7E) is CodeKind.NAN and f.kind(0x7F) is CodeKind.NAN


def _e8m0_f32_subnormal_quirk(x: np.ndarray) -> np.ndarray:
    """Where 'e8m0-f32-subnormal' applies (before 0.7): positive float32 bits 0x400001..0x5FFFFF."""
    bits = x.view(np.uint32)
    return (bits > 0x400000) & (bits < 0x600000) & (not ML_07)


def test_e8m0_is_rna_with_nan_for_zero_and_negative(float32_inputs):
    """FPS-RND-13: float8_e8m0fnu == fpspec ue8m0 'rna' with --zero nan --negative nan on
    every input (named differences 'e8m0-ties' and 'e8m0-zero-negative'), except, before 0.7,
    the float32 subnormals of 'e8m0-f32-subnormal', where ml_dtypes gives exactly code 1 and
    fpspec 0 (0.7 gives 0 there too); underflow below 2^-127 gives code 0 in both."""
    x = float32_inputs
    ml = _ml_codes(x, "ue8m0")
    ours = encode(x, "ue8m0", "rna", zero="nan", negative="nan")
    quirk = _e8m0_f32_subnormal_quirk(x)
    assert quirk.sum() > 100 or ML_07
    assert np.array_equal(ours[~quirk], ml[~quirk])
    assert set(ml[quirk].tolist()) <= {1} and set(ours[quirk].tolist()) <= {0}
    # every float32 subnormal of the quirk range, not just the sampled ones
    sub = np.arange(0x400001, 0x600000, dtype=np.uint32).view(np.float32)
    assert set(_ml_codes(sub, "ue8m0").tolist()) == ({0} if ML_07 else {1})
    assert set(encode(sub, "ue8m0", "rna").tolist()) == {0}
    tiny = (x > 0) & (x <= 2.0 ** -127)
    assert tiny.any() and set(ml[tiny].tolist()) == {0} and set(ours[tiny].tolist()) == {0}


def test_e8m0_rne_differs_exactly_on_ties_at_even_codes(float32_inputs):
    """FPS-RND-13 'e8m0-ties': with the same zero/negative policies, fpspec 'rne' differs from
    ml_dtypes (outside 'e8m0-f32-subnormal') exactly on the positive ties 1.5 * 2^e whose
    lower code is even (RNE keeps the even code, ml_dtypes goes up), and nowhere else."""
    x = float32_inputs
    keep = ~_e8m0_f32_subnormal_quirk(x)
    x = x[keep]
    ml = _ml_codes(x, "ue8m0")
    ours = encode(x, "ue8m0", "rne", zero="nan", negative="nan")
    differ = ours != ml
    bits = x.view(np.uint32)
    # positive normal float32 1.5 * 2^e: mantissa field exactly 0x400000
    exponent_field = (bits >> 23) & 0xFF
    tie = (bits >> 31 == 0) & ((bits & 0x7FFFFF) == 0x400000) & (exponent_field != 0xFF)
    # the lower neighbour 2^e has ue8m0 code e + 127, which is the float32 exponent field
    lower_even = (exponent_field % 2 == 0) & (exponent_field >= 1)
    # and the one subnormal tie, 1.5 * 2^-127 (bits 0x600000), between codes 0 (even) and 1
    subnormal_tie = bits == 0x600000
    assert subnormal_tie.any()
    assert np.array_equal(differ, (tie & lower_even) | subnormal_tie)
    assert np.array_equal(ours[differ], ml[differ] - 1)
    assert differ.sum() > 100


# ----------------------------------------------------------- reproduced by name
@pytest.mark.parametrize("fmt", list(_ML))
def test_ml_dtypes_reproduced_by_name_from_float32(float32_inputs, fmt):
    """FPS-RND-13, FPS-RND-15, FPS-RND-10: with the selectors of ML_DTYPES_SELECTORS fpspec equals
    ml_dtypes on every float32 input (NaNs, subnormals, overflow and the E8M0 quirks included),
    on the fast path and, for a sample, on the exact one."""
    x = float32_inputs
    ours = encode(x, fmt, **ML_DTYPES_SELECTORS[fmt])
    assert np.array_equal(ours, _ml_codes(x, fmt))
    sample = x[np.random.default_rng(3).integers(0, x.size, 3000)]
    assert np.array_equal(encode(sample, fmt, impl="exact", **ML_DTYPES_SELECTORS[fmt]), _ml_codes(sample, fmt))


@pytest.mark.parametrize("fmt", list(_ML))
def test_ml_dtypes_reproduced_by_name_from_fp16_and_bf16(all_fp16, all_bf16, fmt):
    """FPS-RND-13: ml_dtypes casts float16 and bfloat16 directly (its own conversion paths, not
    through float32); the same selectors reproduce every one of the 2 x 65536 inputs."""
    for x in (all_fp16, all_bf16):
        with np.errstate(invalid="ignore", over="ignore"):
            theirs = x.astype(_ML[fmt]).view(np.uint8)
        assert np.array_equal(encode(x, fmt, **ML_DTYPES_SELECTORS[fmt]), theirs), x.dtype


@pytest.mark.slow
def test_e8m0_selector_on_every_float32_subnormal_and_binade_edge():
    """FPS-RND-15: every float32 subnormal (both signs, 2^24 inputs) and, in every binade, the
    mantissas at 0, 1, just below / at / above the tie 0x400000 and the top: the release's
    E8M0 selector (rne-bits before 0.7, rna from 0.7) with ml_dtypes' policies equals
    float8_e8m0fnu on all of them."""
    sub = np.arange(1 << 23, dtype=np.uint32)
    mants = np.array([0, 1, 0x3FFFFF, 0x400000, 0x400001, 0x7FFFFE, 0x7FFFFF], dtype=np.uint32)
    edges = (np.arange(256, dtype=np.uint32)[:, None] << np.uint32(23) | mants[None, :]).reshape(-1)
    bits = np.concatenate([sub, edges])
    x = np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)
    assert np.array_equal(encode(x, "ue8m0", **ML_DTYPES_SELECTORS["ue8m0"]), _ml_codes(x, "ue8m0"))
    # the quirk by hand: 2^-127 stays code 0, anything above it in (2^-127, 2^-126) is code 1
    hand = np.array([0x400000, 0x400001, 0x5FFFFF, 0x600000, 0x7FFFFF, 0x3FFFFF, 1], np.uint32).view(np.float32)
    assert encode(hand, "ue8m0", "rne-bits").tolist() == [0, 1, 1, 1, 1, 0, 0]
    assert encode(hand, "ue8m0", "rne-bits", impl="exact").tolist() == [0, 1, 1, 1, 1, 0, 0]
    # and by value (rna): only from the tie 1.5 * 2^-127 (0x600000) up
    assert encode(hand, "ue8m0", "rna").tolist() == [0, 0, 0, 1, 1, 0, 0]
    assert encode(hand, "ue8m0", "rna", impl="exact").tolist() == [0, 0, 0, 1, 1, 0, 0]


def test_float64_inputs():
    """FPS-RND-0 'float64-double-rounding': from float64, ml_dtypes before 0.7 narrows to float32
    first; the selectors reproduce it on the float32-narrowed input, and fpspec's one rounding
    of the float64 value differs where the narrowing moved a value across a boundary.  0.7
    rounds the float64 value once: the selectors reproduce it on the float64 input itself."""
    rng = np.random.default_rng(8)
    x = (rng.standard_normal(20000) * 2.0 ** rng.integers(-10, 10, 20000)).astype(np.float64)
    x[:4] = [2.5 + 2.0 ** -30, 2.0 ** -127 * (1 + 2.0 ** -30), -2.5 - 2.0 ** -30, 3.0]
    for fmt, sel in ML_DTYPES_SELECTORS.items():
        xs = np.abs(x) if fmt == "ue8m0" else x
        with np.errstate(over="ignore"):
            theirs = xs.astype(_ML[fmt]).view(np.uint8)
        assert np.array_equal(encode(xs if ML_07 else xs.astype(np.float32), fmt, **sel), theirs), fmt
    assert encode(x[:1], "e2m1").tolist() == [5]
    assert x[:1].astype(ml_dtypes.float4_e2m1fn).view(np.uint8)[0] == (5 if ML_07 else 4)
