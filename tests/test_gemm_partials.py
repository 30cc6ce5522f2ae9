"""FPS-GEMM-24: the BLAS partial-sum path (fpspec/fast/partials.py) equals the exact spec
bit for bit, on both sides of its exactness guard.

Every comparison forces the BLAS path (``blas_partials(True)``: any size) and checks from
``last_stats`` that it ran and how many (output, group) pairs fell back, so that a test
cannot pass by never reaching BLAS or by never exercising the guard."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

from fpspec.fast import partials, spans, steps
from fpspec.fast.chain import chain_plan
from fpspec.matmul import GemmWhatIfWarning, gemm
from fpspec.quantization import quantize
from fpspec.named_models import get_model
from fpspec.presets import PRESETS

from gemm_helpers import codes_of, random_quantized, wide_codes


def _same_bits(x: np.ndarray, y: np.ndarray) -> None:
    assert x.dtype == y.dtype
    view = np.uint16 if x.dtype == np.float16 else np.uint32
    bad = np.flatnonzero(x.view(view) != y.view(view))
    assert bad.size == 0, (f"{bad.size} of {x.size} differ; first at {np.unravel_index(bad[0], x.shape)}: "
                           f"exact {x.flat[bad[0]]!r} blas {y.flat[bad[0]]!r}")


def _blas(a, bt, model, **kw):
    """(exact result, BLAS-path result, PartialStats of the BLAS run or None if it did not run).
    Presets run on operands outside their contracts too (what-if runs, FPS-GEMM-25): the path
    must equal the exact spec on every operand kind."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GemmWhatIfWarning)
        ye = gemm(a, bt, model, impl="exact", allow_what_if=True, **kw)
        partials._LAST[0] = None
        with partials.blas_partials(True):
            yf = gemm(a, bt, model, impl="fast", allow_what_if=True, **kw)
    _same_bits(ye, yf)
    return ye, yf, partials.last_stats()


# ------------------------------------------------------------------ presets
#: Presets whose models the BLAS path takes (product-placed, encoded, G >= 16, plain window).
_CODE_PRESETS = ["seed-probe-matched", "seed-probe-matched-nosnap", "km-h100-fp8", "km-h100-fp8-promote128",
                 "km-b200-fp8", "km-h100-bf16", "sm90-f16", "sm90-fp8", "sm100-f16", "sm100-f8f6f4",
                 "sm100-mxf8f6f4", "sm89-fp8", "sm120-f8f6f4", "sm90-f16-f16acc"]


@pytest.mark.parametrize("fmt,span", [("e4m3", 2), ("e5m2", 3), ("bf16", 6), ("fp16", 3), ("bf16", 40)])
def test_fpsgemm23_code_presets(fmt, span):
    """FPS-GEMM-24: every preset the BLAS path takes, on code operands of every format with odd
    M and N, K = 128; narrow spans pass the guard, wide ones fall back."""
    rng = np.random.default_rng(2300 + span)
    a = wide_codes(rng, (3, 128), fmt, span=span)
    bt = wide_codes(rng, (5, 128), fmt, span=span)
    fell = passed = 0
    for name in _CODE_PRESETS:
        model = get_model(name)
        if fmt in ("fp16", "bf16") and "fp8" in name or fmt in ("e4m3", "e5m2") and "f16" in name:
            continue
        _, _, st = _blas(a, bt, name, fmt=fmt)
        assert st is not None and st.pairs == 3 * 5 * chain_plan(128, model).start.size, name
        fell += st.fallback
        passed += st.pairs - st.fallback
    if span < 6:
        assert passed > 0  # the guard lets partials through ...
    else:
        assert fell > 0  # ... and on wide spans sends some back to the product terms


def test_fpsgemm23_partial_groups_and_slices():
    """FPS-GEMM-24: K not a multiple of G (shorter last group), split K and promotions: the
    chain follows the plan's start, stop and action."""
    rng = np.random.default_rng(23)
    a = wide_codes(rng, (3, 150), "e4m3", span=2)
    bt = wide_codes(rng, (4, 150), "e4m3", span=2)
    for over in (dict(group_size=32, require_full_groups=False),
                 dict(group_size=32, require_full_groups=False, split_k=96, promotion_interval=64),
                 dict(group_size=20, window_bits=25, require_full_groups=False, align_exponent_floor=-2,
                      promotion_interval=60)):
        _, _, st = _blas(a, bt, get_model("km-h100-fp8-promote128", **over), fmt="e4m3")
        assert st is not None and st.pairs > 0
    seed = get_model("seed-probe-matched", group_size=48, split_k=96, promotion_interval=48)
    _, _, st = _blas(a, bt, seed, fmt="e4m3")
    assert st is not None and st.fallback == 0


@pytest.mark.parametrize("scale_format", ["e4m3", "ue5m3", "ue8m0"])
def test_fpsgemm23_quantized_seed(scale_format):
    """FPS-GEMM-24: the seed models on E2M1 QuantizedTensors (alpha, snap), odd M and N,
    K = 80 (a group of 64 and one of 16); narrow scale ranges pass the guard, every scale
    code of the format may not."""
    rng = np.random.default_rng(len(scale_format))
    block = 32 if scale_format == "ue8m0" else 16
    for span, want_fallback in ((3, False), (None, True)):
        qa = random_quantized(rng, 3, 96, scale_format, block=block, span=span)
        qb = random_quantized(rng, 5, 96, scale_format, block=block, span=span)
        for name in ("seed-probe-matched", "seed-probe-matched-nosnap"):
            _, _, st = _blas(qa, qb, name)
            assert st is not None and st.pairs == 3 * 5 * 2
            if not want_fallback:
                assert st.fallback == 0
    if scale_format == "ue8m0":  # E8M0 spans 2^-127 .. 2^127: the guard must send groups back
        assert st.fallback > 0


# -------------------------------------------------------------- the guard's edge
def _bf16_pair(k_exp: int):
    """A (1, 64) and BT (1, 64) in BF16 whose group spans sum to 22 + k_exp + 6: A = [2^20,
    2^-k_exp, 0...], BT = [1, 1, 0...] (T - L of A: 21 + k_exp, of BT: 1, ceil(log2 64) = 6)."""
    a = np.zeros((1, 64))
    a[0, 0], a[0, 1] = 2.0 ** 20, 2.0 ** -k_exp
    b = np.zeros((1, 64))
    b[0, :2] = 1.0
    return codes_of(a, "bf16"), codes_of(b, "bf16")


def test_fpsgemm23_guard_limit():
    """FPS-GEMM-24: a span sum of exactly 53 passes the guard (the float64 sum is exact),
    54 falls back; both give the exact result.  Without snap or alpha, the seed model's
    group rounding (RNE to FP32) returns 2^20 for both."""
    model = get_model("seed-probe-matched-nosnap")
    for k_exp, fallback in ((25, 0), (26, 1)):
        a, bt = _bf16_pair(k_exp)
        ye, _, st = _blas(a, bt, model, fmt="bf16")
        assert st.fallback == fallback, k_exp
        assert ye[0, 0] == np.float32(2.0 ** 20)
    # group_rounding="none" keeps every bit: the exact value 2^20 + 2^-26 rounds (RTZ) to 2^20,
    # and the accumulator with 2^20 + 2^-3 shows the low part is carried
    a = np.zeros((1, 64))
    a[0, :2] = (2.0 ** 20, 2.0 ** -3)
    b = np.zeros((1, 64))
    b[0, :2] = 1.0
    ye, _, st = _blas(codes_of(a, "bf16"), codes_of(b, "bf16"),
                      get_model("seed-probe-matched-nosnap", group_rounding="none", accumulate_rounding="rne"),
                      fmt="bf16")
    assert st.fallback == 0 and ye[0, 0] == np.float32(2.0 ** 20 + 2.0 ** -3)


def test_fpsgemm23_cancellation():
    """FPS-GEMM-24: products 2^80, -2^80 and 2^-40 in one group: a float64 sum in the wrong
    order would lose 2^-40; the spans (121 bits) send the group back, and the result is
    exactly 2^-40.  With the cancelling pair alone the result is +0."""
    a = np.zeros((2, 64))
    b = np.zeros((2, 64))
    a[0, :3] = (2.0 ** 40, -(2.0 ** 40), 2.0 ** -20)
    b[0, :3] = (2.0 ** 40, 2.0 ** 40, 2.0 ** -20)
    a[1, :2] = (2.0 ** 40, -(2.0 ** 40))
    b[1, :2] = (2.0 ** 40, 2.0 ** 40)
    ye, _, st = _blas(codes_of(a, "bf16"), codes_of(b, "bf16"), "seed-probe-matched-nosnap", fmt="bf16")
    assert ye[0, 0] == np.float32(2.0 ** -40) and st.fallback >= 1
    assert ye[1, 1].view(np.uint32) == 0  # +0


def test_fpsgemm23_window_edge():
    """FPS-GEMM-24: a fused window (F = 13, G = 32) where the smallest product sits exactly at
    the window's quantum (kept: passes the guard) or one bit below it (truncated: falls back)."""
    model = get_model("km-h100-fp8")
    for low_exp, fallback, want in ((-13, 0, 1 + 2.0 ** -13), (-14, 1, 1.0)):
        a = np.zeros((1, 32))
        b = np.zeros((1, 32))
        a[0, :2] = (1.0, 2.0 ** (low_exp + 6))
        b[0, :2] = (1.0, 2.0 ** -6)
        ye, _, st = _blas(codes_of(a, "e4m3"), codes_of(b, "e4m3"), model, fmt="e4m3")
        assert st.fallback == fallback and ye[0, 0] == np.float32(want), low_exp


def test_fpsgemm23_subnormal_results():
    """FPS-GEMM-24: BF16 products near 2^-140 give FP32 subnormal outputs, in both guard
    outcomes (no window: seed; fused window: km-h100-bf16)."""
    rng = np.random.default_rng(231)
    x = rng.standard_normal((3, 64)) * 2.0 ** -70
    y = rng.standard_normal((4, 64)) * 2.0 ** -70
    a = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    bt = y.astype(ml_dtypes.bfloat16).view(np.uint16)
    for name in ("seed-probe-matched-nosnap", "km-h100-bf16", "sm90-f16"):
        ye, _, st = _blas(a, bt, name, fmt="bf16")
        assert st is not None
        assert (np.abs(ye) < np.float32(2.0 ** -126)).any() and (ye != 0).any()


def test_fpsgemm23_zeros_and_zero_alignment():
    """FPS-GEMM-24: groups of zeros, rows of zeros, and zero_alignment="emin" presets (zero
    products align at -126 + e)."""
    rng = np.random.default_rng(232)
    a = wide_codes(rng, (3, 64), "e4m3", span=2)
    bt = wide_codes(rng, (4, 64), "e4m3", span=2)
    a[0] = 0
    a[1, :32] = 0
    bt[2, 32:] = 0
    for name in ("sm100-f8f6f4", "sm89-fp8", "km-h100-fp8", "seed-probe-matched"):
        ye, _, st = _blas(a, bt, name, fmt="e4m3")
        assert st is not None
        assert (ye[0].view(np.uint32) == 0).all()


def test_fpsgemm23_specials_take_the_term_kernels():
    """FPS-GEMM-24, FPS-GEMM-2: a NaN or Inf operand keeps the GEMM off BLAS (the term
    kernels carry specials); results equal the exact spec's."""
    rng = np.random.default_rng(233)
    a = wide_codes(rng, (2, 64), "bf16", span=4)
    bt = wide_codes(rng, (3, 64), "bf16", span=4)
    a[0, 3] = 0x7F80  # +inf
    a[1, 7] = 0x7FC0  # nan
    ye, yf, st = _blas(a, bt, "seed-probe-matched", fmt="bf16")
    assert st is None and np.isnan(ye[1]).all() and np.isinf(ye[0]).any()


def test_fpsgemm23_not_taken():
    """FPS-GEMM-24: models outside the path's domain keep the term kernels (decoded domains,
    lanes and joins, groups shorter than BLAS_MIN_GROUP; block terms: the next tests), and a
    GEMM below BLAS_MIN_WORK products is left to them unless forced."""
    rng = np.random.default_rng(234)
    qa = random_quantized(rng, 2, 64, "e4m3")
    qb = random_quantized(rng, 3, 64, "e4m3")
    for name in ("decoded-fp32", "exact"):
        _, _, st = _blas(qa, qb, name)
        assert st is None, name
    a = wide_codes(rng, (2, 64), "e4m3", span=2)
    bt = wide_codes(rng, (3, 64), "e4m3", span=2)
    for name in ("cdna3-fp8", "sm70-f16", "km-v100-fp16"):
        _, _, st = _blas(a, bt, name, fmt="e4m3")
        assert st is None, name
    model = get_model("seed-probe-matched")
    assert not partials.applies(a, bt, model, chain_plan(64, model))  # 2 x 3 x 64 < BLAS_MIN_WORK
    with partials.blas_partials(True):
        assert partials.applies(a, bt, model, chain_plan(64, model))
    assert all(name in PRESETS for name in _CODE_PRESETS)


def test_fpsgemm23_decline_when_mostly_fallback():
    """FPS-GEMM-24: left to the size rules, a GEMM whose sampled pairs mostly fail the guard
    goes to the term kernels (MAX_FALLBACK_SHARE), with the same result."""
    rng = np.random.default_rng(235)
    a = wide_codes(rng, (2, 64), "bf16", span=40)
    bt = wide_codes(rng, (3, 64), "bf16", span=40)
    model = get_model("km-h100-fp8")
    plan = chain_plan(64, model)
    partials._LAST[0] = None
    with partials.blas_partials(None):
        old = partials.BLAS_MIN_WORK
        partials.BLAS_MIN_WORK = 1
        try:
            assert partials.gemm_partials(a, bt, model, "bf16", plan, None) is None
        finally:
            partials.BLAS_MIN_WORK = old
    assert partials.last_stats() is None


def test_fpsgemm23_row_blocks_on_workers():
    """FPS-GEMM-24: M = 130 spans three row blocks (ROW_BLOCK_MIN = 64), run on two workers with
    one BLAS thread each; the results and the fallback count do not depend on the threads."""
    from fpspec.fast import parallel
    from fpspec.fast.parallel import set_threads

    rng = np.random.default_rng(236)
    a = wide_codes(rng, (130, 64), "e4m3", span=3)
    bt = wide_codes(rng, (3, 64), "e4m3", span=3)
    before = parallel._THREADS  # None: every CPU
    try:
        counts = []
        for n in (1, 2):
            set_threads(n)
            for name in ("km-b200-fp8", "seed-probe-matched"):
                _, _, st = _blas(a, bt, name, fmt="e4m3")
                counts.append(st)
        assert counts[:2] == counts[2:] and counts[0].pairs == 130 * 3 * 2
    finally:
        set_threads(before)


def test_fpsgemm23_window_cuts_the_accumulator():
    """FPS-GEMM-24: under a fused window c takes part in the alignment.  Group 1 leaves
    c = 2 + 2^-13 (24 significant bits kept, accumulate_bits=23); group 2 has no product, so
    E = e(c) = 1 and F = 13 cuts c to 2: the guard sees c's bit below 2^(1 - 13) and falls
    back (a BLAS partial of 0 added to c would keep 2 + 2^-13)."""
    model = get_model("km-h100-fp8", accumulate_bits=23)
    a = np.zeros((1, 64))
    b = np.zeros((1, 64))
    a[0, :3] = (1.0, 1.0, 2.0 ** -9)
    b[0, :3] = (1.0, 1.0, 2.0 ** -4)
    ye, _, st = _blas(codes_of(a, "e4m3"), codes_of(b, "e4m3"), model, fmt="e4m3")
    assert ye[0, 0] == np.float32(2.0) and st.fallback == 1 and st.pairs == 2


def _fp32_values(rng, n: int) -> np.ndarray:
    """Finite FP32 values from random bit patterns (every exponent, subnormals, both signs),
    with zeros and the largest finite values mixed in."""
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        v = bits.view(np.float32).astype(np.float64)
    v = np.where(np.isfinite(v), v, 0.0)
    v[::17] = 0.0
    v[1::19] = np.float32(3.4028234663852886e38)
    v[2::23] = -np.float32(3.4028234663852886e38)
    return v


def test_fpsgemm23_row_rounding_equals_accumulate():
    """FPS-GEMM-24: the branch-free row step of the seed rounding pair (group RNE, accumulator
    RTZ) equals the chain's ``accumulate`` on every pair tried: random FP32 accumulators
    against exact float64 group sums of 1 to 53 bits over the whole FP32 range and beyond
    (Inf after RNE, RTZ overflow to the largest finite value), sums equal to -c or to -c
    plus a few quanta (cancellation, subnormal results), FP32 midpoints and zero."""
    import math

    from fpspec.fast.chain import accumulate, chain_spec

    rng = np.random.default_rng(237)
    n = 6000
    c = _fp32_values(rng, n)
    sig = rng.integers(1, 1 << 53, n, dtype=np.int64) >> rng.integers(0, 53, n)
    x = np.ldexp(sig.astype(np.float64) * rng.choice([-1.0, 1.0], n), rng.integers(-200, 140, n))
    x[::7] = -c[::7]                                       # exact cancellation to zero
    x[1::11] = -c[1::11] + np.ldexp(1.0, -149) * rng.integers(-3, 4, c[1::11].size)  # near-cancellation
    mid = np.float32(1.0) + np.float32(2.0 ** -23)
    x[2::13] = (float(mid) + 2.0 ** -24) * np.ldexp(1.0, rng.integers(-140, 120, x[2::13].size))  # RNE ties
    x[3::29] = 0.0
    spec = chain_spec(get_model("seed-probe-matched"))
    row = c.copy()
    steps.accumulate_row_rne_rtz(row, x)
    want = np.empty(n)
    for k in range(n):
        if x[k] == 0.0:
            s, e = 0, 0
        else:
            m, ex = math.frexp(float(x[k]))
            s, e = int(math.ldexp(m, 53)), ex - 53
        want[k] = accumulate(float(c[k]), s, e, spec)
    assert np.array_equal(row.view(np.int64), want.view(np.int64))
    # the same step in binary32 rows (the seed chain's float32 state and partials): x as float32 is
    # RNE32(x), the step's own first rounding
    row32 = c.astype(np.float32)
    with np.errstate(over="ignore"):
        steps.accumulate_row_rne_rtz(row32, x.astype(np.float32))
    assert np.array_equal(row32.astype(np.float64).view(np.int64), want.view(np.int64))
    assert (row == np.float32(3.4028234663852886e38)).any() and np.isinf(row).any()  # both overflow outcomes
    assert ((np.abs(row) < 2.0 ** -126) & (row != 0)).any()  # subnormal results


@pytest.mark.parametrize("name", ["sm100-mxf4nvf4", "km-h100-fp8"])
def test_fpsgemm23_window_row_equals_accumulate(name):
    """FPS-GEMM-24: the row step of a fused window with RTZ accumulation
    (``accumulate_row_window``) leaves a lane to the pair step exactly where the guard
    fails and otherwise equals ``accumulate`` of the exact partial in quanta 2^(E - F),
    E = max(AEA + AEB, e(c), floor), lane by lane: random FP32 accumulators (zero, Inf,
    NaN, low bits below the window, values that set E), products whose lsb lies at, above
    or just below the window's quantum, no terms on either side, sums that cancel c."""
    from fractions import Fraction

    from fpspec.fast.chain import NO_TERMS, accumulate, accumulator_exponent, chain_spec

    spec = chain_spec(get_model(name))
    rng = np.random.default_rng(2600)
    n = 4000
    c = _fp32_values(rng, n)                            # every exponent: c mostly sets E
    near = np.ldexp(rng.integers(-(1 << 8), 1 << 8, n).astype(np.float64), rng.integers(-26, -8, n))
    c[n // 4:] = near[n // 4:]                          # few bits, near the products' sums
    c[::31] = np.inf
    c[1::37] = np.nan
    c[2::5] = np.float32(1.0) + np.float32(2.0 ** -23) * rng.integers(0, 1 << 23, c[2::5].size)  # low bits
    ae_i = -3
    ae_b = rng.integers(-8, 6, n)
    ae_b[::41] = NO_TERMS
    low_i = -6
    q_terms = np.maximum(ae_i + ae_b, spec.exponent_floor) - spec.window
    low_b = q_terms - low_i + rng.integers(-2, 4, n)   # lsb of the products: below the quantum for some
    sig = rng.integers(-(1 << 34), 1 << 34, n)
    x = sig.astype(np.float64) * np.ldexp(1.0, low_i + low_b)
    x[3::13] = -c[3::13]                               # cancels c (where c is a multiple of the lsb)
    x[ae_b == NO_TERMS] = 0.0
    row = c.copy()
    emax = np.empty(n, dtype=np.int64)
    left = np.zeros(n, dtype=np.bool_)
    steps.accumulate_row_window(row, x, low_i, low_b.astype(np.int32), ae_i, ae_b.astype(np.int32), spec,
                                   emax, left)
    done = 0
    for j in range(n):
        ec = accumulator_exponent(float(c[j]), spec) if np.isfinite(c[j]) else NO_TERMS
        eb = NO_TERMS if ae_b[j] == NO_TERMS else ae_i + int(ae_b[j])
        e = max(eb, ec)
        q = max(e, spec.exponent_floor) - spec.window
        must_leave = (e == NO_TERMS or not np.isfinite(c[j]) or low_i + int(low_b[j]) < q
                      or (Fraction(float(c[j])) / Fraction(2) ** q).denominator != 1)
        if must_leave or left[j]:
            assert left[j] and row.view(np.int64)[j] == c.view(np.int64)[j], (j, c[j], x[j])
            continue
        done += 1
        acc = Fraction(float(x[j])) / Fraction(2) ** q
        assert acc.denominator == 1
        want = accumulate(float(c[j]), int(acc), q, spec)
        assert row.view(np.int64)[j] == np.float64(want).view(np.int64), (j, c[j], x[j], q)
    assert done > n // 8 and left.sum() > n // 8   # both sides of the guard were taken


def test_fpsgemm23_square_tiles():
    """FPS-GEMM-24: 16 x 16 scale tiles (tile="BxB", one scale per tile, shared by 16 rows)
    reach every element's scale through the repeated grid."""
    rng = np.random.default_rng(238)
    qa = random_quantized(rng, 32, 64, "e4m3", tile="BxB", span=4)
    qb = random_quantized(rng, 16, 64, "e4m3", tile="BxB", span=4)
    _, _, st = _blas(qa, qb, "seed-probe-matched")
    assert st is not None and st.pairs == 32 * 16 and st.fallback == 0


@pytest.mark.parametrize("scale_format", ["e4m3", "ue4m3", "ue5m3", "ue5m3fnu", "ue8m0"])
@pytest.mark.parametrize("zero_terms", [False, True])
def test_fpsgemm23_block_spans_equal_group_spans(scale_format, zero_terms):
    """FPS-GEMM-24: the block-scaled operand pass (a mask of the payload magnitudes per scale
    block, then tables per mask and scale code) gives the decoded values and exactly
    ``group_spans`` of them: every scale code (zero, subnormal, largest, NaN), every payload
    code, blocks whose codes are all zeros or one magnitude, and groups that start and end
    inside a block (lengths 1, 7, 16, 23, 64)."""
    from fpspec.fast.rounding import decode_table
    from fpspec.formats import get_format
    from fpspec.models import ZERO_ALIGNMENT_EXPONENT

    rng = np.random.default_rng(2411)
    sf = get_format(scale_format)
    rows, k, block = 48, 256, 16
    codes = rng.integers(0, 16, (rows, k)).astype(np.uint8)
    codes[0] = 0                                   # all zeros
    codes[1] = rng.choice([0, 8], k)               # +-0 only
    codes[2] = rng.choice([7, 15], k)              # one magnitude
    codes[3, ::3] = 0
    scales = rng.integers(0, sf.num_codes, (rows, k // block)).astype(np.uint8)
    scales[4:12] = np.arange(sf.num_codes, dtype=np.int64)[: 8 * (k // block)].reshape(8, -1) % sf.num_codes
    scales[12:20] = (np.arange(8 * (k // block)).reshape(8, -1) + sf.num_codes - 64) % sf.num_codes
    lengths = np.array([1, 7, 16, 23, 64, 9, 64, 36, 36], dtype=np.int64)
    stop = np.cumsum(lengths)
    start = stop - lengths
    assert stop[-1] == k
    zero = ZERO_ALIGNMENT_EXPONENT if zero_terms else 0
    tables = spans._block_tables("e2m1", scale_format, zero, zero_terms)
    pieces = spans.block_pieces(start, stop, block)
    cuts = sorted(set(start.tolist()) | set(range(0, k + 1, block)) | {k})  # K cut at group and block ends
    assert pieces[0].tolist() == cuts[:-1] and pieces[1].tolist() == cuts[1:]
    assert pieces[2].tolist()[:6] == [0, 1, 2, 2, 3, 3] and pieces[3].tolist()[:6] == [0, 0, 0, 1, 1, 2]
    values, got_spans, bad = spans.block_values_and_spans(codes, scales, *tables, pieces, start.size,
                                                          np.empty((rows, k)))
    pv, sv = decode_table(get_format("e2m1")), decode_table(sf)
    with np.errstate(invalid="ignore"):
        want = pv[codes] * sv[np.repeat(scales, block, axis=1)]
    assert np.array_equal(values, want, equal_nan=True)
    assert bad == int((~np.isfinite(want)).sum())
    assert (bad > 0) == bool((~np.isfinite(sv)).any())  # the NaN scale codes are drawn
    finite = np.where(np.isfinite(want), want, 0.0)
    wanted = spans.group_spans(finite, start, stop, -126, zero, zero_terms)
    for got, exp, name in zip(got_spans, wanted, ("T", "L", "AE")):
        assert np.array_equal(got, exp), f"{name} differs at {np.argwhere(got != exp)[:3].tolist()}"


@pytest.mark.parametrize("name", ["sm100-mxf4nvf4", "sm120-mxf4nvf4"])
@pytest.mark.parametrize("scale_format, block, span, falls", [("ue4m3", 16, 4, False), ("ue8m0", 32, 3, False),
                                                              ("ue8m0", 32, 30, True), ("ue8m0", 16, 60, True)])
def test_fpsgemm23_block_terms_aligned_by_scales(name, scale_format, block, span, falls):
    """FPS-GEMM-22, FPS-GEMM-24: block-term presets (terms of 16 products times both scales,
    aligned at e(s_a) + e(s_b), fused window F = 35) through BLAS equal the exact spec: NVFP4
    and MXFP4 (UE8M0 blocks of 32 holding two terms each) scales, a narrow span where every
    term fits the window and wide spans where terms lose bits below it (those pairs fall
    back to the block terms), zero payload blocks and a zero UE4M3 scale (which aligns at
    -126 under zero_alignment="emin")."""
    rng = np.random.default_rng(2500 + span + block)
    qa = random_quantized(rng, 9, 256, scale_format, block=block, span=span)
    qb = random_quantized(rng, 7, 256, scale_format, block=block, span=span)
    qa.codes[1, :64] = 0                                   # a group of zero terms in row 1
    qb.codes[2, 16:48] = 8                                 # -0 payloads
    if scale_format == "ue4m3":
        qa.scales[3, 0] = 0                                # a zero scale (UE8M0 has none)
    _, _, st = _blas(qa, qb, name)
    assert st is not None and st.pairs == 9 * 7 * 4
    assert (st.fallback > 0) == falls


def test_fpsgemm23_block_terms_declined():
    """FPS-GEMM-24: block terms the guard cannot bound stay with the term kernels: aligned by
    their own value (block_exponent="value": E may exceed the scales' sum), a term across
    two scale blocks (term 32 over blocks of 16), a slice plan whose groups cut terms."""
    rng = np.random.default_rng(2510)
    qa = random_quantized(rng, 4, 128, "ue4m3")
    qb = random_quantized(rng, 3, 128, "ue4m3")
    base = get_model("sm100-mxf4nvf4")
    plan = chain_plan(128, base)
    with partials.blas_partials(True):
        assert partials.applies(qa, qb, base, plan)
        assert not partials.applies(qa, qb, base.replace(block_exponent="value", zero_alignment="excluded"), plan)
        assert not partials.applies(qa, qb, base.replace(block_term_size=32), plan)
        cut = base.replace(slice_plan=(40, 88), instruction_k=None)  # groups at 0, 40, 104: terms cut
        assert not partials.applies(qa, qb, cut, chain_plan(128, cut))


# -------------------------------------------------------------- float32 partials
def _blas32(a, bt, model, force=True, **kw):
    """:func:`_blas` with float32 partials forced on (True) or off (False) or left to the rules."""
    with partials.float32_partials(force):
        return _blas(a, bt, model, **kw)


def test_fpsgemm24_float32_partials_sum_again():
    """FPS-GEMM-24: float32 partials are exact only under the 24-bit bound.  A = [2^24, 1, 1],
    B = [1, 1, 1]: float32 BLAS adding in order would give 2^24 (2^24 + 1 ties to even, twice),
    the exact sum is 2^24 + 2; the spans (25 + 1 + 6 > 24) make the pair summed again in
    float64.  A = [2^20, 2^4] (spans 17 + 1 + 6 = 24) is exact in float32 and is not.  A third
    column with a span past 53 sends its pair to the fallback and the row pair by pair; the
    first two columns are then summed again or not, as before."""
    model = get_model("seed-probe-matched-nosnap")
    a = np.zeros((2, 64))
    a[0, :3] = (2.0 ** 24, 1.0, 1.0)
    a[1, :2] = (2.0 ** 20, 2.0 ** 4)
    for wide in (False, True):
        b = np.zeros((3 if wide else 2, 64))
        b[0, :3] = 1.0
        b[1, :3] = (1.0, 1.0, 0.0)
        if wide:
            b[2, :2] = (2.0 ** 40, 2.0 ** -40)
        ye, _, st = _blas32(codes_of(a, "bf16"), codes_of(b, "bf16"), model, fmt="bf16")
        assert st.dtype == "float32"
        assert ye[0, 0] == np.float32(2.0 ** 24 + 2) and ye[0, 1] == np.float32(2.0 ** 24 + 1)
        assert ye[1, 0] == np.float32(2.0 ** 20 + 2.0 ** 4)
        # row 0 sums (0, 0) and (0, 1) again; row 1 fits; the wide column's pairs fall back
        assert st.resummed == 2, wide
        assert st.fallback == (2 if wide else 0)


@pytest.mark.parametrize("scale_format,span,dtype", [("e4m3", 3, "float32"), ("ue5m3", 6, "float32"),
                                                     ("e4m3", None, "float32"), ("ue8m0", 3, "float64")])
def test_fpsgemm24_float32_partials_quantized(scale_format, span, dtype):
    """FPS-GEMM-24: the seed models on E2M1 operands with float32 partials forced on, equal to
    the exact spec: narrow scale ranges fit 24 bits, every E4M3 scale code makes many pairs
    summed again (and some fall back); E8M0 scales give values past float32 (6 x 2^127), so
    the partials stay float64.  Forced off, the partials are float64 and the results the same."""
    rng = np.random.default_rng(2400 + (span or 0))
    block = 32 if scale_format == "ue8m0" else 16
    qa = random_quantized(rng, 9, 192, scale_format, block=block, span=span)
    qb = random_quantized(rng, 11, 192, scale_format, block=block, span=span)
    ye, _, st = _blas32(qa, qb, "seed-probe-matched")
    assert st.dtype == dtype and st.pairs == 9 * 11 * 3
    if span is None:
        assert st.resummed > 0
    _, yf, off = _blas32(qa, qb, "seed-probe-matched", force=False)
    assert off.dtype == "float64" and off.resummed == 0
    _same_bits(ye, yf)


def test_fpsgemm24_float32_partials_range():
    """FPS-GEMM-24: BF16 products below float32's smallest subnormal (lsbs near 2^-200) or
    sums near 2^128 keep float64 partials, and the results equal the exact spec."""
    rng = np.random.default_rng(2401)

    def bf16(shape, scale):
        return codes_of((rng.standard_normal(shape) * scale).astype(ml_dtypes.bfloat16).astype(np.float64), "bf16")

    for scale in (2.0 ** -100, 2.0 ** 62):
        _, _, st = _blas32(bf16((3, 64), scale), bf16((4, 64), scale), "seed-probe-matched", fmt="bf16")
        assert st.dtype == "float64", scale
    _, _, st = _blas32(bf16((3, 64), 1.0), bf16((4, 64), 1.0), "seed-probe-matched", fmt="bf16")
    assert st.dtype == "float32"


def test_fpsgemm24_float32_partials_chosen_by_sample():
    """FPS-GEMM-24: left to the rules, float32 partials are taken for the seed chain where the
    sampled share of pairs over 24 bits is at most RESUM_MAX_SHARE (NVFP4 of normal data),
    not where it is above (BF16 over 20 binades), nor for other chains (a window)."""
    rng = np.random.default_rng(2402)
    x = rng.standard_normal((24, 128)).astype(np.float32)
    qa = quantize(x, "nvfp4")
    _, _, st = _blas32(qa, qa, "seed-probe-matched", force=None)
    assert st.dtype == "float32"
    wide = (rng.standard_normal((8, 128)) * np.exp2(rng.integers(-10, 10, (8, 128)))).astype(ml_dtypes.bfloat16)
    wide = codes_of(wide.astype(np.float64), "bf16")
    _, _, st = _blas32(wide, wide, "seed-probe-matched", force=None, fmt="bf16")
    assert st.dtype == "float64"
    _, _, st = _blas32(wide, wide, "km-h100-bf16", fmt="bf16")
    assert st.dtype == "float64"


@pytest.mark.slow
def test_fpsgemm24_float32_partials_random_sweep():
    """FPS-GEMM-24: a seeded sweep of the seed models with float32 partials forced on, over
    FP8, FP16 and BF16 codes of 2 to 14 binades (K = 209: three groups of 64 and one of 17),
    and of normally distributed values, fast equal to exact bit for bit; across the sweep
    partials are taken as they are, pairs are summed again (spans over 24 bits) and pairs
    fall back (over 53), so every branch of chain_partials_seed runs."""
    rng = np.random.default_rng(20261202)
    dtypes = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2, "fp16": np.float16,
              "bf16": ml_dtypes.bfloat16}
    direct = resummed = fell = 0
    for fmt in ("e4m3", "e5m2", "fp16", "bf16"):
        for span in (None, 2, 5, 9, 14):  # None: normally distributed values
            if span is None:
                a, bt = (codes_of(rng.standard_normal(shape).astype(dtypes[fmt]).astype(np.float64), fmt)
                         for shape in ((5, 209), (7, 209)))
            else:
                a = wide_codes(rng, (5, 209), fmt, span=span)
                bt = wide_codes(rng, (7, 209), fmt, span=span)
            for name in ("seed-probe-matched", "seed-probe-matched-nosnap"):
                _, _, st = _blas32(a, bt, name, fmt=fmt)
                assert st.dtype == "float32", (fmt, span, name)
                direct += st.pairs - st.resummed - st.fallback
                resummed += st.resummed
                fell += st.fallback
    assert direct > 0 and resummed > 0 and fell > 0
