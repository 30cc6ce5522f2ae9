"""float32 and float64 inputs at every edge of every narrow format, exact vs fast, under
every mode and policy; hypothesis and seeded random bit patterns; hand-derived cases
(FPS-RND-0..4, FPS-RND-9..12)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpspec.choices import NanPolicy, NegativePolicy, OverflowPolicy, Policies, ZeroPolicy
from fpspec.convert import encode
from fpspec.errors import FpspecError
from fpspec.exact.rounding import encode_exact, round_to_code
from fpspec.fast.rounding import encode_fast
from fpspec.formats import get_format

from sweep_helpers import (DETERMINISTIC_MODES, NARROW_FORMATS, SR_MODES, accepting_policies,
                           mismatch_report)


def edge_inputs(fmt_name: str, dtype: type) -> np.ndarray:
    """Every value of the format, every midpoint (tie) between neighbours including the
    overflow boundary max + quantum/2, one ulp of ``dtype`` either side of each, half the
    smallest value, +-0, +-Inf, NaN; both signs."""
    f = get_format(fmt_name)
    vals = [float(v) for v in f.finite_values()]
    top = float(f.max_finite + Fraction(2) ** (f.emax - f.man_bits))  # first value past max finite
    mids = [(a + b) / 2 for a, b in zip(vals, vals[1:] + [top])]
    with np.errstate(over="ignore"):  # values past float32's range become Inf, dropped below
        base = np.array(vals + mids + [top, float(f.min_positive) / 2, float(f.min_positive) / 4],
                        dtype=dtype)
    base = base[np.isfinite(base)]
    ulps = np.concatenate([np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(0))])
    pos = np.concatenate([base, ulps, np.array([0.0, np.inf, np.nan], dtype=dtype)])
    return np.concatenate([pos, -pos])


def _policy_grid(fmt_name: str) -> list[Policies]:
    """Every accepting combination of overflow / NaN / negative / zero policy the format allows."""
    f = get_format(fmt_name)
    overflows = [OverflowPolicy.SAT] + ([OverflowPolicy.NONFINITE] if f.has_nan or f.has_inf else [])
    nans = ([NanPolicy.ZERO] if f.has_zero else []) + [NanPolicy.MAX] \
        + ([NanPolicy.NAN, NanPolicy.QUIET] if f.has_nan else []) \
        + ([NanPolicy.FLIPPED_ZERO] if f.has_zero and f.signed else [])
    negatives = ([NegativePolicy.ZERO] if f.has_zero else []) + ([NegativePolicy.NAN] if f.has_nan else []) \
        + [NegativePolicy.ABS]
    zeros = [ZeroPolicy.NAN, ZeroPolicy.MIN] if not f.has_zero else [ZeroPolicy.ERROR]
    grid = []
    for o, n, z in itertools.product(overflows, nans, zeros):
        for g in (negatives if not f.signed else [NegativePolicy.ERROR]):
            grid.append(Policies(overflow=o, nan=n, negative=g, zero=z))
    return grid


@pytest.mark.slow
@pytest.mark.parametrize("fmt", NARROW_FORMATS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edges_every_mode_every_policy(fmt, dtype):
    """FPS-RND-0..4, FPS-RND-9..12: ties, one ulp either side, overflow and subnormal edges,
    +-0, +-Inf, NaN; all deterministic modes; every accepting policy combination."""
    x = edge_inputs(fmt, dtype)
    for pol in _policy_grid(fmt):
        for mode in DETERMINISTIC_MODES:
            want = encode_exact(x, fmt, mode, policies=pol)
            got = encode_fast(x, fmt, mode, policies=pol)
            assert np.array_equal(got, want), f"{fmt} {mode} {pol}: " + mismatch_report(x, got, want)


@pytest.mark.parametrize("fmt", NARROW_FORMATS)
def test_edges_stochastic(fmt):
    """FPS-RND-5..7 on the edge inputs with random r."""
    x = edge_inputs(fmt, np.float64)
    r = np.random.default_rng(3).integers(0, 256, x.size).astype(np.uint8)
    pol = accepting_policies(fmt)
    for mode in SR_MODES:
        assert np.array_equal(encode_fast(x, fmt, mode, rbits=r, policies=pol),
                              encode_exact(x, fmt, mode, rbits=r, policies=pol)), mode


@pytest.mark.parametrize("dtype,utype", [(np.float32, np.uint32), (np.float64, np.uint64)])
def test_seeded_random_bit_patterns(dtype, utype):
    """FPS-RND-0: random bit patterns (every exponent, NaN payloads, subnormals) into each
    narrow format under a mode drawn per format; exact == fast."""
    rng = np.random.default_rng(2026)
    bits = rng.integers(0, np.iinfo(utype).max, size=3000, dtype=utype, endpoint=True)
    # bias half of them toward the formats' range: exponent near 0
    x = bits.view(dtype).copy()
    x[::2] = (rng.standard_normal(1500) * 2.0 ** rng.integers(-20, 20, 1500)).astype(dtype)
    for i, fmt in enumerate(NARROW_FORMATS):
        mode = DETERMINISTIC_MODES[i % len(DETERMINISTIC_MODES)]
        pol = accepting_policies(fmt)
        assert np.array_equal(encode_fast(x, fmt, mode, policies=pol),
                              encode_exact(x, fmt, mode, policies=pol)), (fmt, mode)
        r = rng.integers(0, 256, x.size).astype(np.uint8)
        sr = SR_MODES[i % 3]
        assert np.array_equal(encode_fast(x, fmt, sr, rbits=r, policies=pol),
                              encode_exact(x, fmt, sr, rbits=r, policies=pol)), (fmt, sr)


@settings(max_examples=150, deadline=None)
@given(data=st.data(),
       fmt=st.sampled_from(NARROW_FORMATS),
       mode=st.sampled_from(DETERMINISTIC_MODES + SR_MODES),
       wide=st.booleans())
def test_hypothesis_exact_equals_fast(data, fmt, mode, wide):
    """FPS-RND-0: hypothesis-chosen float32/float64 values (its float strategy favours 0, +-Inf,
    NaN, subnormals and boundaries), any mode, any accepting policy."""
    dtype = np.float64 if wide else np.float32
    width = 64 if wide else 32
    xs = data.draw(st.lists(st.floats(width=width, allow_nan=True, allow_infinity=True),
                            min_size=1, max_size=24))
    x = np.array(xs, dtype=dtype)
    pol = data.draw(st.sampled_from(_policy_grid(fmt)))
    nbits = data.draw(st.sampled_from([1, 3, 8, 13]))
    r = np.array(data.draw(st.lists(st.integers(0, (1 << nbits) - 1), min_size=x.size, max_size=x.size)),
                 dtype=np.uint16)
    kw = dict(rbits=r, nbits=nbits) if mode in SR_MODES else {}
    assert np.array_equal(encode_fast(x, fmt, mode, policies=pol, **kw),
                          encode_exact(x, fmt, mode, policies=pol, **kw))


# ----------------------------------------------------------------- hand-derived cases
def test_no_double_rounding_from_float64():
    """FPS-RND-0: float64 2.5 + 2^-30 is above the 2.5 tie between 2 and 3, so RNE gives 3.0
    (code 5).  Narrowing to float32 first (what ml_dtypes did before 0.7,
    tests/test_ml_dtypes_agreement.py) drops the 2^-30 and the tie then goes to the even code
    4 (2.0): the double rounding fpspec must not do."""
    x = np.array([2.5 + 2.0 ** -30], dtype=np.float64)
    assert encode(x, "e2m1", "rne").tolist() == [5]
    assert encode(x, "e2m1", "rne", impl="exact").tolist() == [5]
    assert encode(x.astype(np.float32), "e2m1", "rne").tolist() == [4]


def test_e4m3_overflow_boundary():
    """FPS-RND-9: e4m3 max finite is 448; the next step would be 480, so the rounding boundary is
    464.  RNE: 464 is a tie between 448 (0x7E, mantissa 110: even) and 480, so 448; 465 rounds
    past max finite: 0x7F (NaN) under nonfinite, 0x7E under sat."""
    x = np.array([464.0, 465.0, -465.0, np.inf], dtype=np.float32)
    assert encode(x, "e4m3", "rne", overflow="nonfinite").tolist() == [0x7E, 0x7F, 0xFF, 0x7F]
    assert encode(x, "e4m3", "rne", overflow="sat").tolist() == [0x7E, 0x7E, 0xFE, 0x7E]
    with pytest.raises(FpspecError, match=r"overflow.*index \[1\]"):
        encode(x, "e4m3", "rne", overflow="error")


@pytest.mark.parametrize("fmt", NARROW_FORMATS)
def test_overflow_boundary_of_every_format(fmt):
    """FPS-RND-9: at max + quantum/2 RNE goes to the even neighbour; max_finite_code's parity
    decides.  Just above it always overflows; just below it never does."""
    f = get_format(fmt)
    boundary = f.max_finite + Fraction(2) ** (f.emax - f.man_bits) / 2  # max + quantum/2
    sat = accepting_policies(fmt, overflow="sat")
    eps = Fraction(1, 2 ** 60)
    nf = f.inf_code if f.has_inf else f.nan_code
    assert round_to_code(boundary - eps, f, "rne", policies=sat) == f.max_finite_code
    if nf is not None:
        non = accepting_policies(fmt, overflow="nonfinite")
        assert round_to_code(boundary + eps, f, "rne", policies=non) == nf
        tie = round_to_code(boundary, f, "rne", policies=non)
        assert tie == (f.max_finite_code if f.max_finite_code % 2 == 0 else nf)


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "ue5m3", "ue8m0"])
def test_directed_overflow_ieee_7_4(fmt):
    """FPS-RND-9: under nonfinite, a mode that rounds the magnitude toward zero delivers max
    finite, not Inf/NaN (IEEE 754 sec. 7.4): rtz both signs, down for +, up for -."""
    f = get_format(fmt)
    big = float(f.max_finite) * 1.75
    non = accepting_policies(fmt, overflow="nonfinite")
    nf = f.inf_code if f.has_inf else f.nan_code
    assert round_to_code(big, f, "rtz", policies=non) == f.max_finite_code
    assert round_to_code(big, f, "down", policies=non) == f.max_finite_code
    assert round_to_code(big, f, "up", policies=non) == nf
    assert round_to_code(big, f, "rne", policies=non) == nf
    if f.signed:
        assert round_to_code(-big, f, "up", policies=non) == f.max_finite_code | f.sign_mask
        assert round_to_code(-big, f, "down", policies=non) == nf | f.sign_mask
        assert round_to_code(-big, f, "rtz", policies=non) == f.max_finite_code | f.sign_mask


def test_subnormal_edges_by_hand():
    """FPS-RND-1..3: e4m3 min subnormal 2^-9; half of it is a tie between +0 (even) and 0x01.
    RNE -> 0, RNA -> 1, up -> 1, a hair above -> 1; e2m1 0.25 (tie 0 / 0.5) RNE -> 0, 0.75 ->
    1.0 (code 2, even); e5m2 2^-17 (half its min subnormal) RNE -> 0."""
    half = Fraction(1, 2 ** 10)
    assert round_to_code(half, "e4m3", "rne") == 0
    assert round_to_code(half, "e4m3", "rna") == 1
    assert round_to_code(half, "e4m3", "up") == 1
    assert round_to_code(half, "e4m3", "down") == 0
    assert round_to_code(-half, "e4m3", "down") == 0x81
    assert round_to_code(half + Fraction(1, 2 ** 40), "e4m3", "rne") == 1
    assert round_to_code(0.25, "e2m1", "rne") == 0 and round_to_code(0.75, "e2m1", "rne") == 2
    assert round_to_code(-0.25, "e2m1", "rne") == 0x8  # -0 keeps its sign
    assert round_to_code(2.0 ** -17, "e5m2", "rne") == 0


def test_zero_and_sign_policies():
    """FPS-RND-11, FPS-RND-12: +-0, negatives and zero into unsigned / zero-less formats."""
    assert round_to_code(-0.0, "ue5m3", "rne") == 0  # -0 is zero, not negative
    assert round_to_code(-0.0, "e4m3", "rne") == 0x80
    with pytest.raises(FpspecError, match="negative"):
        round_to_code(-1.0, "ue5m3", "rne")
    assert encode(np.array([-1.0]), "ue5m3", negative="nan").tolist() == [0xFF]
    assert encode(np.array([-1.0]), "ue4m3", negative="zero").tolist() == [0]
    with pytest.raises(FpspecError, match=r"zero input to ue8m0.*index \[1\]"):
        encode(np.array([1.0, 0.0]), "ue8m0")
    assert encode(np.array([0.0, -0.0]), "ue8m0", zero="nan").tolist() == [0xFF, 0xFF]
    assert encode(np.array([0.0]), "ue8m0", zero="min").tolist() == [0]
    # below 2^-127 there is no smaller code: the result is code 0 (2^-127) in every mode
    for mode in DETERMINISTIC_MODES:
        assert round_to_code(2.0 ** -140, "ue8m0", mode) == 0


def test_nan_policies():
    """FPS-RND-10: NaN input under each policy; error names the first NaN."""
    x = np.array([1.0, np.nan, -np.nan], dtype=np.float32)
    with pytest.raises(FpspecError, match=r"NaN.*index \[1\]"):
        encode(x, "e2m1")
    assert encode(x, "e2m1", nan="zero").tolist() == [2, 0, 0]
    assert encode(x, "e2m1", nan="max").tolist() == [2, 7, 7]
    assert encode(x, "e4m3").tolist() == [0x38, 0x7F, 0xFF]
    assert encode(x, "e5m2").tolist() == [0x3C, 0x7F, 0xFF]
    with pytest.raises(FpspecError, match="no NaN code"):
        encode(x, "e2m1", nan="nan")


def test_exact_reference_accepts_fractions_beyond_float():
    """FPS-RND-0: the exact reference rounds any rational; 1/3 in e4m3 lies in the binade
    [1/4, 1/2) with quantum 1/32, between 10/32 and 11/32 at 10 2/3 quanta: RNE and up give
    11/32 (code 0x2B), rtz and down 10/32 (0x2A)."""
    f = get_format("e4m3")
    assert round_to_code(Fraction(1, 3), f, "rne") == 0x2B == f.join(0, 5, 3)
    assert f.decode_exact(0x2B) == Fraction(11, 32)
    assert round_to_code(Fraction(1, 3), f, "up") == 0x2B
    assert round_to_code(Fraction(1, 3), f, "rtz") == round_to_code(Fraction(1, 3), f, "down") == 0x2A
    assert round_to_code(Fraction(-1, 3), f, "down") == 0xAB


@pytest.mark.parametrize("fmt,make_bad,policies", [
    ("e2m1", lambda x: np.where(np.arange(x.size) % 997 == 500, np.nan, x), {}),
    ("ue5m3", lambda x: x, {}),  # negatives present: refused
    ("e4m3", lambda x: x * 100, {"overflow": "error"}),
    ("ue8m0", lambda x: np.abs(x) * (np.arange(x.size) % 1500 != 1234), {}),  # zero refused
])
def test_refusals_name_the_same_first_index(fmt, make_bad, policies):
    """FPS-RND-14: exact and fast refuse the same input, naming the same first index
    (the fast path runs chunks in parallel; the first refusal in element order wins)."""
    from fpspec.convert import resolve_policies

    rng = np.random.default_rng(11)
    x = make_bad(rng.standard_normal(300_000) * 3).astype(np.float32).reshape(600, 500)
    pol = resolve_policies(fmt, **policies)
    with pytest.raises(FpspecError) as fast:
        encode_fast(x, fmt, "rne", policies=pol)
    head = x.reshape(-1)[: int(np.ravel_multi_index(fast.value.index, x.shape)) + 1].reshape(1, -1)
    with pytest.raises(FpspecError) as exact:  # on the prefix up to the reported element
        encode_exact(head, fmt, "rne", policies=pol)
    assert exact.value.index == (0, head.size - 1)
    assert str(exact.value).split(" (first")[0] in str(fast.value)


def test_non_native_byte_order_and_numpy_scalars():
    """FPS-RND-0: a big-endian float array (as a .npy file may hold) is read by value, not by
    its swapped bytes; NumPy float scalars are exact inputs of round_to_code.
    (Before this test the fast path returned [0, 0] for big-endian [1.0, 3.0].)"""
    import ml_dtypes

    for dt in (">f2", ">f4", ">f8"):
        x = np.array([1.0, 3.0, -0.5, 2.5], dtype=dt)
        assert encode(x, "e2m1").tolist() == [2, 5, 0x9, 4]
        assert encode(x, "e2m1", impl="exact").tolist() == [2, 5, 0x9, 4]
    for v in (np.float16(1.5), np.float32(1.5), ml_dtypes.bfloat16(1.5), np.float64(1.5)):
        assert round_to_code(v, "e2m1") == 3
    assert round_to_code(np.float32("nan"), "e4m3") == 0x7F
