"""FPS-GEMM-10: the narrow window kernel (``gemm_window_narrow_rows``: int32 lanes, operands
on one scale) and its branch-free chain steps (``keep_magnitude``, ``keep_floor``,
``accumulate_row``, ``add_rne32``) equal the exact spec and the scalar steps they replace,
bit for bit, on adversarial values: window edges (shift counts 0, 1, 31, 32 and beyond),
negative truncation, FLOOR, zeros, subnormals, the largest exponents, overflow."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest

from fpspec.fast import kernels
from fpspec.fast.accumulate import _terms_kernel, narrow_window
from fpspec.fast.chain import (CONTINUE, END_SLICE, FLOOR, NO_TERMS, PROMOTE, TRUNCATE, accumulate,
                               accumulator_exponent, after_group, chain_plan, chain_spec, keep)
from fpspec.fast.fp32 import FP32_LATTICE, RNE, add_round
from fpspec.fast.steps import (accumulate_row, accumulator_exponent_row, add_rne32, after_group_row, keep_floor,
                               keep_magnitude)
from fpspec.gemm_operands import operand_formats
from fpspec.matmul import gemm
from fpspec.named_models import get_model

from gemm_helpers import codes_of, wide_codes

FLT_MAX = float(np.finfo(np.float32).max)
TINY = 2.0 ** -149


def _bits(y):
    return np.asarray(y, dtype=np.float32).view(np.uint32)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit-equal float64 values, any NaN equal to any NaN."""
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    bad = np.flatnonzero(got[ok].view(np.int64) != want[ok].view(np.int64))
    assert bad.size == 0, f"{bad.size} differ, first {got[ok][bad[0]]!r} vs {want[ok][bad[0]]!r}"


# ------------------------------------------------------------------ keep
@numba.njit
def _keeps(s, r):
    out = np.empty((4, s.size), dtype=np.int64)
    for i in range(s.size):
        out[0, i] = keep_magnitude(np.int32(s[i]), np.int32(r[i]))
        out[1, i] = keep(np.int64(s[i]), -np.int64(r[i]), TRUNCATE)
        out[2, i] = keep_floor(np.int32(s[i]), np.int32(r[i]))
        out[3, i] = keep(np.int64(s[i]), -np.int64(r[i]), FLOOR)
    return out


def test_fpsgemm10_branch_free_keep_equals_keep():
    """keep_magnitude(s, r) = keep(s, -r, TRUNCATE) and keep_floor(s, r) = keep(s, -r,
    FLOOR) for int32 s (zero, +-1, odd and even values, +-(2^31 - 1)) and every count
    0 .. 70 (a count of 31 or more leaves 0, or -1 for a negative s under FLOOR)."""
    edge = [0, 1, -1, 2, -2, 3, -3, 7, -7, 8, -8, 225, -225, 28800, -28800, 2 ** 30 - 1, -(2 ** 30 - 1),
            2 ** 31 - 1, -(2 ** 31 - 1), 2 ** 30, -(2 ** 30)]
    rng = np.random.default_rng(101)
    vals = np.concatenate([edge, rng.integers(-2 ** 31 + 1, 2 ** 31, 200)])
    s, r = (x.ravel() for x in np.meshgrid(vals, np.arange(71)))
    out = _keeps(s.astype(np.int64), r.astype(np.int64))
    assert np.array_equal(out[0], out[1])
    assert np.array_equal(out[2], out[3])
    k = _keeps(np.array([-7, -7, 7, 5, -5, -5, -(2 ** 31 - 1)]), np.array([1, 0, 1, 40, 40, 3, 31]))
    assert k[0].tolist() == [-3, -7, 3, 0, 0, 0, 0]
    assert k[2].tolist() == [-4, -7, 3, 0, -1, -1, -1]


# ------------------------------------------------------------ accumulate
def _fp32_values(rng, n):
    """FP32 values held in float64: random over the whole range, subnormals, zeros, the
    largest ones, Inf and NaN."""
    mant = rng.integers(1 << 23, 1 << 24, n).astype(np.float64)
    e = rng.integers(-149 - 23, 128 - 23, n)
    v = np.ldexp(mant, e) * rng.choice([-1.0, 1.0], n)
    v = v.astype(np.float32).astype(np.float64)
    special = [0.0, -0.0, TINY, -TINY, 2.0 ** -126, -(2.0 ** -126), FLT_MAX, -FLT_MAX, 2.0 ** 127,
               -(2.0 ** 127), math.inf, -math.inf, math.nan, 1.0, -1.0, 3.0, 2.0 ** -130 * 3]
    v[:len(special)] = special
    return v


def _row_case(spec, rng, n=6000):
    """c, acc, emax for accumulate_row: emax counts c's alignment exponent (fused) and is
    NO_TERMS only where acc is 0 and c is 0 or not finite, as the kernels hand them over."""
    c = _fp32_values(rng, n)
    acc = rng.integers(-2 ** 31 + 1, 2 ** 31, n)
    acc[::7] = rng.integers(-300, 300, acc[::7].size)
    acc[:40] = [0, 1, -1, 2 ** 31 - 1, -(2 ** 31 - 1)] * 8
    emax = np.empty(n, dtype=np.int64)
    for j in range(n):
        ec = accumulator_exponent(c[j], spec) if math.isfinite(c[j]) else NO_TERMS
        lo = ec if ec != NO_TERMS else -170
        emax[j] = max(lo, rng.integers(-170, 140)) if rng.random() < 0.5 else lo + int(rng.integers(0, 3))
    none = (acc == 0) & ((c == 0) | ~np.isfinite(c)) & (rng.random(n) < 0.5)
    emax[none] = NO_TERMS
    return c, acc.astype(np.int32), emax.astype(np.int32)


@pytest.mark.parametrize("name,over", [
    ("km-h100-fp8-promote128", {}),                # 13 bits, RTZ overflow to the largest value
    ("sm89-fp8", {}),                               # 13 bits, overflow to Inf, zeros at -126
    ("km-h100-bf16", {}),                           # the FP32 lattice
    ("sm90-f16", {}),                               # FP32 lattice, overflow to Inf
    ("km-h100-fp8", dict(below_window="floor")),    # c's kept part rounded toward -inf
    ("sm80-f16-f16acc", {}),                        # RNE: lane by lane
    ("km-h100-fp8", dict(fused=False)),             # not fused: lane by lane
])
def test_fpsgemm10_accumulate_row_equals_accumulate(name, over):
    """accumulate_row over a row = accumulate lane by lane, with c over FP32's range
    (subnormals, the largest values, Inf, NaN), kept sums up to 2^31 - 1 and alignment
    exponents from the bottom of the subnormals to past 2^128 (both overflow outcomes);
    the fused RTZ window models through the branch-free accumulate_rtz_bits."""
    spec = chain_spec(get_model(name, **over))
    rng = np.random.default_rng(len(name) + 11 * len(over))
    c, acc, emax = _row_case(spec, rng)
    row = c.copy()
    accumulate_row(row, acc, emax, spec, np.empty(c.size, dtype=np.int64))
    want = np.array([accumulate(float(c[j]), int(acc[j]), int(emax[j]) - spec.window, spec)
                     for j in range(c.size)])
    _same(row, want)
    finite = np.isfinite(want)
    assert (np.abs(want[finite]) < 2.0 ** -126).any() and (want[finite] != 0).any()  # subnormal results
    assert (np.abs(want) >= 2.0 ** 127).any()  # results at the top binade (Inf or the largest value)


def test_fpsgemm10_accumulator_exponent_row():
    """accumulator_exponent_row = accumulator_exponent for finite c (zeros per the zero rule)
    and NO_TERMS for Inf and NaN."""
    rng = np.random.default_rng(5)
    c = _fp32_values(rng, 2000)
    for name in ("km-h100-fp8", "sm89-fp8"):
        spec = chain_spec(get_model(name))
        emax = np.empty(c.size, dtype=np.int32)
        accumulator_exponent_row(c, emax, spec)
        want = [accumulator_exponent(float(x), spec) if math.isfinite(x) else NO_TERMS for x in c]
        assert emax.tolist() == want


def test_fpsgemm6_add_rne32_equals_add_round():
    """add_rne32 = add_round(x, y, RNE, FP32) on FP32 pairs: far apart (TwoSum's error
    nonzero), cancelling, ties, the overflow boundary (FLT_MAX + 2^103 is the midpoint to
    2^128: Inf), subnormals, signed zeros (+0), Inf and NaN; and after_group_row's
    promotion, its slice end and its CONTINUE = after_group."""
    rng = np.random.default_rng(9)
    x = _fp32_values(rng, 20000)
    y = np.concatenate([_fp32_values(rng, 10000), -x[:5000] * rng.choice([1.0, 0.5, 2.0], 5000),
                        _fp32_values(rng, 5000)])
    pairs = [(FLT_MAX, 2.0 ** 103), (FLT_MAX, 2.0 ** 102), (FLT_MAX, -(2.0 ** 103)), (1.0, 2.0 ** -24),
             (1.0 + 2.0 ** -23, 2.0 ** -24), (-0.0, -0.0), (0.0, -0.0), (math.inf, -math.inf),
             (2.0 ** 100, 2.0 ** -100), (TINY, -TINY), (TINY, TINY), (math.nan, 1.0)]
    x[:len(pairs)] = [p[0] for p in pairs]
    y[:len(pairs)] = [p[1] for p in pairs]
    got = np.array([add_rne32(a, b) for a, b in zip(x, y)])
    _same(got, np.array([add_round(a, b, RNE, FP32_LATTICE) for a, b in zip(x, y)]))
    assert got[0] == math.inf and got[1] == FLT_MAX and math.copysign(1.0, got[5]) == 1.0
    spec = chain_spec(get_model("km-h100-fp8-promote128"))
    c, big, total = y.copy(), x.copy(), np.zeros(x.size)
    after_group_row(c, big, total, PROMOTE, spec)
    assert (c == 0).all()
    _same(big, np.array([after_group(float(cj), float(bj), 0.0, PROMOTE, spec)[1] for cj, bj in zip(y, x)]))
    # the other actions: CONTINUE leaves the row, END_SLICE is after_group lane by lane
    c, big, total = y.copy(), x.copy(), y[::-1].copy()
    after_group_row(c, big, total, CONTINUE, spec)
    _same(c, y)
    _same(total, y[::-1])
    after_group_row(c, big, total, END_SLICE, spec)
    want = [after_group(float(cj), float(bj), float(tj), END_SLICE, spec) for cj, bj, tj in zip(y, x, y[::-1])]
    assert (c == 0).all() and (big == 0).all()
    _same(total, np.array([w[2] for w in want]))


# ---------------------------------------------------------------- kernel
def _kernel(a, bt, model, fmt):
    return _terms_kernel(a, bt, model, fmt, chain_plan(a.shape[1], model))[0]


def _window_edges(fmt: str, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Operands whose products sit at every distance from the group's largest one: row 0 of
    A (ones) times column j of B has one product of the format's largest magnitude per 16
    and then products top 2^-s (1 + 2^-m) of both signs for s = 0 .. 40 (cut by 0, 1, ...,
    31 and more bits), zeros, subnormals; row 1 is all zero (no terms), row 2 mixes the
    largest, subnormal and odd values of both signs."""
    vals = {"e4m3": (448.0, 2.0 ** -9, 2.0 ** -6, 1.125), "e5m2": (57344.0, 2.0 ** -16, 2.0 ** -14, 1.25),
            "fp16": (65504.0, 2.0 ** -24, 2.0 ** -14, 1.0 + 2.0 ** -10)}[fmt]
    top, sub, norm, odd = vals
    a = np.zeros((4, k))
    b = np.zeros((6, k))
    a[0] = 1.0
    a[2] = rng.choice([top, -top, sub, -sub, norm, odd, -odd, 0.0, 1.0, -3.0], k)
    a[3] = -odd
    for j in range(6):
        for g0 in range(0, k, 16):
            b[j, g0] = top if j % 2 == 0 else -top
            for i in range(1, 16):
                s = (j * 7 + i * 3 + g0) % 41
                v = min(max(top * 2.0 ** -s * odd, sub), top)
                b[j, g0 + i] = float(np.float32(v)) * (-1.0 if (i + j) % 3 == 0 else 1.0)
    b[5, ::5] = 0.0
    b[4, 1::4] = sub
    a = np.clip(a, -top, top)
    return codes_of(_representable(a, fmt), fmt), codes_of(_representable(b, fmt), fmt)


def _edge_operands(fmt, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """The window-edge operands of :func:`_window_edges` (B random and wide where its format
    differs from A's) with random wide-range rows added to both."""
    fa, fb = operand_formats(fmt)
    a, bt = _window_edges(fa, k, rng)
    if fa != fb:
        bt = wide_codes(rng, (6, k), fb, span=10)
    return (np.concatenate([a, wide_codes(rng, (3, k), fa, span=12)]),
            np.concatenate([bt, wide_codes(rng, (5, k), fb, span=12)]))


def _representable(x, fmt):
    from gemm_helpers import _DT
    return x.astype(np.float32).astype(_DT[fmt]).astype(np.float64)


@pytest.mark.slow
@pytest.mark.parametrize("name,fmt,over", [
    ("km-h100-fp8-promote128", "e4m3", {}),
    ("km-h100-fp8", "e4m3", dict(require_full_groups=False, group_size=16, promotion_interval=48, split_k=96)),
    ("km-h100-fp8", "e4m3", dict(below_window="floor")),
    ("km-h100-fp8", "e4m3", dict(align_exponent_floor=4)),
    ("km-h100-fp8", "e4m3", dict(fused=False)),
    ("km-h100-fp8", "e4m3", dict(zero_alignment="emin")),
    ("sm89-fp8", "e4m3", {}),
    ("sm90-fp8", ("e4m3", "e5m2"), {}),
    ("km-v100-fp16", "fp16", {}),
    ("sm70-f16", "fp16", {}),
])
def test_fpsgemm10_narrow_kernel_equals_exact(name, fmt, over):
    """The narrow kernel takes FP8 (and FP16 at G = 4) operands under a window and equals
    the exact spec on window edges, signs, zeros, subnormals, the largest values and random
    wide-range operands, with promotions, K slices, FLOOR, an exponent floor, a non-fused
    chain and both zero rules."""
    model = get_model(name, **over)
    a, bt = _edge_operands(fmt, 192, np.random.default_rng(sum(map(ord, name)) + len(over)))
    assert _kernel(a, bt, model, fmt) is kernels.gemm_window_narrow_rows
    ye, yf = (gemm(a, bt, model, fmt=fmt, impl=impl) for impl in ("exact", "fast"))
    assert np.array_equal(_bits(ye), _bits(yf))
    assert (ye[1] == 0).all()


def test_fpsgemm10_narrow_window_bound_is_exact():
    """narrow_window follows its bound G (2^pa - 1)(2^pb - 1) <= 2^31 - 1 to the unit: BF16 and
    FP16 under a 25-bit window in groups of 16 (pa + pb = 27) take the int32 lanes, 17 products
    would not; and where a group's kept sum may pass 2^31 - 1 the row kernel keeps int64."""
    m = get_model("km-h100-fp8")
    edge = (2 ** 31 - 1) // ((2 ** 11 - 1) * (2 ** 4 - 1))   # a group of 69939 of the largest products
    assert narrow_window(m, edge, 10, 11, 3, 4, 10)
    assert not narrow_window(m, edge + 1, 10, 11, 3, 4, 10)
    assert not narrow_window(m, 32, 5, 11, 3, 4, 10)        # wa + wb < F
    bf = get_model("km-h100-bf16")
    assert narrow_window(bf, 16, 18, 19, 7, 8, 126)          # BF16: 16 x 524287 x 255 = 2139090960
    assert narrow_window(bf, 16, 15, 16, 10, 11, 14)         # FP16: 16 x 65535 x 2047 = 2146402320
    assert not narrow_window(bf, 17, 15, 16, 10, 11, 14)     # 2280552465
    rng = np.random.default_rng(3)
    a, bt = wide_codes(rng, (2, 64), "bf16"), wide_codes(rng, (3, 64), "bf16")
    assert _kernel(a, bt, get_model("km-h100-bf16"), "bf16") is kernels.gemm_window_narrow_rows
    assert _kernel(a, bt, get_model("km-h100-bf16", G=32), "bf16") is kernels.gemm_window_rows


# ------------------------------------------------------- float32 products
def _range(float32=True, bits=8, low=-20, high=10, least=-20):
    from fpspec.fast.operands import ValueRange
    return ValueRange(float32, bits, low, high, least)


def test_fpsgemm10_float_products_guard_edges():
    """float_products holds exactly up to each of its bounds: significands of 24 bits
    together (25 not), product exponents down to -126 and up to 125 (floor(log2) sums),
    F - least ea - least eb <= 127, truncation only, float32 values only."""
    from fpspec.fast.accumulate import float_products
    m = get_model("km-h100-fp8")  # F = 13
    ok = _range()
    assert float_products(m, ok, ok)
    assert float_products(m, _range(bits=12), _range(bits=12))
    assert not float_products(m, _range(bits=12), _range(bits=13))
    assert float_products(m, _range(low=-63, least=-50), _range(low=-63, least=-50))
    assert not float_products(m, _range(low=-63, least=-50), _range(low=-64, least=-50))
    assert float_products(m, _range(high=62), _range(high=63))
    assert not float_products(m, _range(high=63), _range(high=63))
    assert float_products(m, _range(least=-57), _range(least=-57))      # 13 + 114 = 127
    assert not float_products(m, _range(least=-57), _range(least=-58))  # 128
    assert not float_products(m, _range(float32=False), ok)
    assert not float_products(get_model("km-h100-fp8", below_window="floor"), ok, ok)


def test_fpsgemm10_aligned_values_equal_integer_reference():
    """aligned_values (one integer pass) gives every value m 2^(e - w) as float32 exactly
    where all are float32 numbers, and the value range (bits, floor(log2) extremes, least
    exponent) of the nonzero ones, as a Python-integer reference computes them; one value
    past float32 (25 bits, 2^128, below 2^-149) turns the float32 flag off."""
    from fpspec.fast.kernels import AlignedOperand
    from fpspec.fast.operands import aligned_values
    rng = np.random.default_rng(11)
    m = rng.integers(-(2 ** 24) + 1, 2 ** 24, (40, 33)).astype(np.int32)
    m[:, ::5] = 0
    m[0, :6] = [1, -1, 2 ** 23, -(2 ** 24 - 1), 3 * 2 ** 20, 7]
    e = rng.integers(-60, 60, m.shape).astype(np.int32)
    w = 20

    def reference(m, e, w):
        nz = [(int(x), int(y)) for x, y in zip(m.ravel(), e.ravel()) if x]
        bits = max(abs(x).bit_length() - ((abs(x) & -abs(x)).bit_length() - 1) for x, _ in nz)
        lgs = [abs(x).bit_length() - 1 + y - w for x, y in nz]
        return bits, min(lgs), max(lgs), min(y for _, y in nz)

    v, r = aligned_values(AlignedOperand(m, e), w)
    assert r.float32 and (r.bits, r.low, r.high, r.least_exponent) == reference(m, e, w)
    want = np.array([math.ldexp(float(x), int(y) - w) for x, y in zip(m.ravel(), e.ravel())]).reshape(m.shape)
    assert np.array_equal(v.astype(np.float64), want)
    for x, y in ((2 ** 24 + 1, 0), (1, 128 + w), (1, -150 + w), (3, -150 + w)):
        m2, e2 = m.copy(), e.copy()
        m2[3, 3], e2[3, 3] = x, y
        v2, r2 = aligned_values(AlignedOperand(m2, e2), w)
        assert v2 is None and not r2.float32, (x, y)
    m2, e2 = m.copy(), e.copy()
    m2[3, 3], e2[3, 3] = 2, -150 + w  # 2^-149: the smallest float32 subnormal
    assert aligned_values(AlignedOperand(m2, e2), w)[1].float32
    zero = aligned_values(AlignedOperand(np.zeros((2, 3), np.int32), np.zeros((2, 3), np.int32)), 5)
    assert zero[1].float32 and not zero[0].any()


@pytest.mark.parametrize("name,fmt,over", [
    ("km-h100-fp8-promote128", "e4m3", {}),
    ("km-h100-fp8", "e4m3", dict(align_exponent_floor=4)),
    ("km-h100-fp8", "e4m3", dict(fused=False)),
    ("km-h100-fp8", "e4m3", dict(zero_alignment="emin")),
    ("sm90-fp8", ("e4m3", "e5m2"), {}),
    ("km-v100-fp16", "fp16", {}),
])
def test_fpsgemm10_narrow_float_and_integer_products_agree(name, fmt, over, monkeypatch):
    """The narrow kernel's two forms of pass 2, float32 products (taken by default where
    float_products proves them exact: FP8, and FP16 at G = 4) and the integer shifts (forced
    here), both equal the exact spec on the window-edge operands and wide random ones."""
    import fpspec.fast.accumulate as acc
    model = get_model(name, **over)
    k = 160
    a, bt = _edge_operands(fmt, k, np.random.default_rng(sum(map(ord, name)) + 7 * len(over)))
    kernel, ops = _terms_kernel(a, bt, model, fmt, chain_plan(k, model))
    assert kernel is kernels.gemm_window_narrow_rows and ops[-1] is True
    # zeros align at -126 under zero_alignment="emin": beyond the int8 lanes
    assert ops[2].ez.dtype == ops[3].ez.dtype == (np.int16 if over.get("zero_alignment") == "emin" else np.int8)
    ye = gemm(a, bt, model, fmt=fmt, impl="exact")
    assert np.array_equal(_bits(ye), _bits(gemm(a, bt, model, fmt=fmt, impl="fast")))
    monkeypatch.setattr(acc, "float_products", lambda *args: False)
    kernel, ops = _terms_kernel(a, bt, model, fmt, chain_plan(k, model))
    assert kernel is kernels.gemm_window_narrow_rows and ops[-1] is False
    assert np.array_equal(_bits(ye), _bits(gemm(a, bt, model, fmt=fmt, impl="fast")))


@pytest.mark.parametrize("fmt, top, group_sum", [("bf16", 2 - 2.0 ** -7, 16 * (255 << 11) * 255),
                                                  ("fp16", 2 - 2.0 ** -10, 16 * (2047 << 5) * 2047)])
def test_fpsgemm10_narrow_group_sums_at_the_int32_edge(fmt, top, group_sum, monkeypatch):
    """A group of 16 products of the largest significands, all of one sign and binade, under
    km-h100-bf16's 25-bit window: its kept sum, 16 (255 2^11) 255 = 2130739200 (BF16) and
    16 (2047 2^5) 2047 = 2145387008 (FP16), lies within 0.8 % and 0.1 % of 2^31 - 1.  The
    narrow kernel takes it (float32 products, then the integer shifts forced) and equals
    the exact spec; the rows of opposite sign reach -group_sum, and a row with one smaller
    product shows the sum is not saturated."""
    import fpspec.fast.accumulate as acc
    assert group_sum < 2 ** 31 - 1 and 2 * group_sum > 2 ** 31
    model = get_model("km-h100-bf16")
    k = 64
    a = np.full((3, k), top)
    a[1] = -top
    a[2, 5] = 1.0
    bt = np.full((2, k), top)
    bt[1] = -top
    a, bt = codes_of(a, fmt), codes_of(bt, fmt)
    ye = gemm(a, bt, model, fmt=fmt, impl="exact")
    for forced in (False, True):
        if forced:
            monkeypatch.setattr(acc, "float_products", lambda *args: False)
        kernel, ops = _terms_kernel(a, bt, model, fmt, chain_plan(k, model))
        assert kernel is kernels.gemm_window_narrow_rows and ops[-1] is (not forced)
        assert np.array_equal(_bits(ye), _bits(gemm(a, bt, model, fmt=fmt, impl="fast")))
    assert ye[0, 0] == ye[1, 1] == -ye[0, 1] > 0 and ye[2, 0] < ye[0, 0]
    # groups of 32 would pass 2^31: the bound refuses them, and the int32 lanes forced on
    # them anyway give wrong sums (so these operands do test the edge)
    wide = get_model("km-h100-bf16", G=32)
    assert _terms_kernel(a, bt, wide, fmt, chain_plan(k, wide))[0] is kernels.gemm_window_rows
    monkeypatch.setattr(acc, "narrow_window", lambda *args: True)
    assert not np.array_equal(_bits(gemm(a, bt, wide, fmt=fmt, impl="exact")),
                              _bits(gemm(a, bt, wide, fmt=fmt, impl="fast")))


def test_fpsgemm10_float_products_scale_extremes():
    """Under a fused window an accumulator near 2^34 far above the products (down to 2^-48)
    makes 2^(F - E) small and most kept parts 0 or a few quanta (va vb 2^(F - E) below 1 or
    just above), and groups of zeros leave E from c alone: equal to the exact spec with
    the float32 products."""
    model = get_model("km-v100-fp16")  # G = 4, F = 23, fused
    k = 64
    a = np.zeros((3, k))
    bt = np.zeros((4, k))
    a[:, :4] = 65504.0
    bt[:, :4] = 65504.0                   # c near 2^32 after the first group
    a[:, 8:] = 2.0 ** -24
    bt[:, 8:] = np.linspace(2.0 ** -24, 3.0, k - 8)   # products down to 2^-48, far below c
    a[1, 8:] *= -1.0
    bt[2, 20:40] = 0.0
    a, bt = codes_of(_representable(a, "fp16"), "fp16"), codes_of(_representable(bt, "fp16"), "fp16")
    kernel, ops = _terms_kernel(a, bt, model, "fp16", chain_plan(k, model))
    assert ops[-1] is True
    ye, yf = (gemm(a, bt, model, fmt="fp16", impl=impl) for impl in ("exact", "fast"))
    assert np.array_equal(_bits(ye), _bits(yf))


def test_fpsgemm10_narrow_lanes_widths():
    """narrow_lanes takes the narrowest lanes that hold the exponents (int8 up to 31, int16
    up to 2000, none beyond), marks zeros absent unless zeros align, and every sum of two
    real exponents stays above ``absent_sums`` while every sum with ``absent`` stays at or
    below it, without wrapping."""
    from fpspec.fast.kernels import LANE_WIDTHS, AlignedOperand
    from fpspec.fast.operands import narrow_lanes
    op = AlignedOperand(np.array([[0, 3, -5]], np.int32), np.array([[-7, 31, -31]], np.int32))
    lanes = narrow_lanes(op, False, None, 31)
    assert lanes.ez.dtype == np.int8 and lanes.ez.tolist() == [[-97, 31, -31]] and lanes.absent == -97
    assert narrow_lanes(op, True, None, 31).ez.tolist() == [[-7, 31, -31]]
    assert narrow_lanes(op, False, None, 32).ez.dtype == np.int16
    assert narrow_lanes(op, False, None, 2001) is None
    for lane, limit, absent, absent_sums in LANE_WIDTHS:
        lo, hi = np.iinfo(lane).min, np.iinfo(lane).max
        assert -2 * limit > absent_sums >= absent + limit and absent - limit >= lo and 2 * limit <= hi


@pytest.mark.slow
def test_fpsgemm10_narrow_kernel_random_sweep_over_window_presets():
    """A seeded random sweep: every preset with a window, on FP8, FP16 and BF16 codes of
    random exponent spans (2 to 20 binades) and K of 64 to 320, wherever the narrow kernel
    takes the GEMM: fast equals exact bit for bit.  All 64 cases (16 presets x 4 formats, from
    seed-triton-h200 and km-v100-fp16 to sm100-f16, with the BF16 and FP16 codes under the 25-bit
    windows of G = 16 and the FP16 accumulator of sm80-f16-f16acc) take the float32
    products at these spans; the integer shifts are forced in
    test_fpsgemm10_narrow_float_and_integer_products_agree."""
    from fpspec.fast.accumulate import exact_only_reason
    from fpspec.presets import PRESETS

    rng = np.random.default_rng(20261202)
    ran = floats = 0
    for name, preset in PRESETS.items():
        model = preset.model
        if model.window_bits is None:
            continue
        for fmt in ("e4m3", "e5m2", "fp16", "bf16"):
            k = 64 * int(rng.integers(1, 6))
            a = wide_codes(rng, (4, k), fmt, span=int(rng.integers(2, 21)))
            bt = wide_codes(rng, (5, k), fmt, span=int(rng.integers(2, 21)))
            if exact_only_reason(a, bt, model) is not None:  # a model the fast path leaves to the exact one
                continue
            kernel, ops = _terms_kernel(a, bt, model, fmt, chain_plan(k, model))
            if kernel is not kernels.gemm_window_narrow_rows:
                continue
            ye, yf = (gemm(a, bt, model, fmt=fmt, impl=impl) for impl in ("exact", "fast"))
            view = np.uint16 if ye.dtype == np.float16 else np.uint32
            assert np.array_equal(ye.view(view), yf.view(view)), (name, fmt, k)
            ran += 1
            floats += ops[-1] is True
    assert ran == floats == 64, (ran, floats)


@pytest.mark.slow
@pytest.mark.parametrize("name,over,m,k", [
    ("km-h100-fp8-promote128", dict(require_full_groups=False), 37, 150),  # groups of 32, the last of 22
    ("km-h100-fp8", dict(require_full_groups=False, group_size=30), 17, 97),  # 30, 30, 30, 7: 2 and 3 left over
    ("km-h100-fp8", dict(require_full_groups=False, group_size=18, split_k=54), 16, 101),  # 18s, slices of 54
])
def test_fpsgemm10_narrow_row_blocks_and_leftover_products(name, over, m, k):
    """The narrow kernel's row blocks (NARROW_ROW_BLOCK rows through a group at a time: M of
    16, 17 and 37 end a block exactly, one row past it and mid-block) and its products four
    at a time (groups whose length is not a multiple of 4 leave 1 to 3 to the one-at-a-time
    loop): fast equals exact on wide random E4M3 operands with zeros."""
    rng = np.random.default_rng(m * k)
    a = wide_codes(rng, (m, k), "e4m3", span=6)
    bt = wide_codes(rng, (23, k), "e4m3", span=6)
    a[::5, ::7] = 0  # +0 codes among the products taken four at a time
    model = get_model(name, **over)
    plan = chain_plan(k, model)
    assert kernels.NARROW_ROW_BLOCK == 16 and ((plan.stop - plan.start) % 4 != 0).any()
    kernel, ops = _terms_kernel(a, bt, model, "e4m3", plan)
    assert kernel is kernels.gemm_window_narrow_rows and ops[-1] is True
    ye, yf = (gemm(a, bt, model, fmt="e4m3", impl=impl) for impl in ("exact", "fast"))
    assert np.array_equal(_bits(ye), _bits(yf))
