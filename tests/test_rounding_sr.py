"""Stochastic rounding as a pure function of explicit random bits (FPS-RND-5..8).

Every random value r in [0, 2^N) for N = 8 (the seed paper's byte) and N = 3, on sampled
inputs (ties, one float32/float64 ulp either side, subnormal and max edges, random
positions), all three SR variants: exact == fast.  Then the definitions, derived by hand.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fpspec.exact.rounding import encode_exact, round_to_code
from fpspec.fast.rounding import encode_fast
from fpspec.formats import CodeKind, get_format

from sweep_helpers import SR_MODES, accepting_policies, mismatch_report


def sample_inputs(fmt_name: str, dtype: type) -> np.ndarray:
    """Signed inputs around the interesting points of a format, representable in ``dtype``."""
    f = get_format(fmt_name)
    vals = [float(v) for v in f.finite_values()]
    pts: list[float] = []
    top = float(f.max_finite + Fraction(2) ** (f.emax - f.man_bits))  # first value past max finite
    for lo, hi in zip(vals, vals[1:] + [top]):
        for frac in (0.5, 0.25, 0.75, 1 / 256, 255 / 256, 129 / 256, 127 / 256):
            pts.append(lo + (hi - lo) * frac)
    pts += [float(f.min_positive) / 2, float(f.min_positive) * 0.001, float(f.max_finite) * 4]
    with np.errstate(over="ignore"):  # points past float32's range become Inf (kept where valid)
        base = np.array(pts, dtype=dtype)
    near = np.concatenate([np.nextafter(base, dtype(np.inf)), np.nextafter(base, dtype(0))])
    x = np.concatenate([base, near, np.array([0.0, np.inf], dtype=dtype)])
    x = x[x != 0] if not f.has_zero else x
    x = x[np.isfinite(x)] if not (f.has_inf or f.has_nan) else x
    rng = np.random.default_rng(len(fmt_name))
    x = rng.permutation(x)[:96]  # keep the r sweep affordable: 96 inputs x 2^N values
    if f.signed:
        x = np.concatenate([x, -x[: len(x) // 3]])
    return x


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["e2m1", "e4m3", "ue5m3", "ue8m0", "e5m2"])
@pytest.mark.parametrize("nbits", [8, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_r_exact_equals_fast(fmt, nbits, dtype):
    """FPS-RND-5, FPS-RND-6, FPS-RND-7: for every r in [0, 2^N), exact == fast."""
    x0 = sample_inputs(fmt, dtype)
    n_r = 1 << nbits
    x = np.repeat(x0, n_r)
    r = np.tile(np.arange(n_r, dtype=np.uint16 if nbits > 8 else np.uint8), x0.size)
    pol = accepting_policies(fmt, overflow="sat" if fmt == "e2m1" else None)
    for mode in SR_MODES:
        want = encode_exact(x, fmt, mode, rbits=r, nbits=nbits, policies=pol)
        got = encode_fast(x, fmt, mode, rbits=r, nbits=nbits, policies=pol)
        assert np.array_equal(got, want), f"{fmt} {mode} N={nbits}: " + mismatch_report(x, got, want)


def test_wide_random_values_exact_equals_fast():
    """FPS-RND-8: N = 16 and N = 32 (the widest the fast path accepts), random r."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(3000) * 3).astype(np.float64)
    for nbits, rdtype in ((16, np.uint16), (32, np.uint32)):
        r = rng.integers(0, 1 << nbits, size=x.size, dtype=np.uint64).astype(rdtype)
        for mode in SR_MODES:
            want = encode_exact(x, "e2m1", mode, rbits=r, nbits=nbits)
            got = encode_fast(x, "e2m1", mode, rbits=r, nbits=nbits)
            assert np.array_equal(got, want), (mode, nbits)


def _up_count(x: Fraction | float, fmt: str, mode: str, nbits: int = 8) -> int:
    """How many of the 2^N random values send |x| to the upper neighbour (exact path)."""
    lo = round_to_code(x, fmt, "rtz")
    return sum(round_to_code(x, fmt, mode, r=r, nbits=nbits) != lo for r in range(1 << nbits))


def test_seed_midpoint_rule_quarter():
    """FPS-RND-5: x = 0.25 in e2m1 lies halfway (delta = 1/2) between 0 and 0.5; the seed rule
    rounds up iff 1/2 + (2r+1)/512 >= 1, i.e. iff r >= 128 (r = 127.5 is the boundary)."""
    codes = [round_to_code(0.25, "e2m1", "sr-midpoint", r=r) for r in range(256)]
    assert codes == [0] * 128 + [1] * 128
    fast = encode_fast(np.full(256, 0.25, np.float32), "e2m1", "sr", rbits=np.arange(256, dtype=np.uint8))
    assert fast.tolist() == codes
    # the sign is carried: -0.25 gives -0 (0x8) and -0.5 (0x9)
    assert [round_to_code(-0.25, "e2m1", "sr-midpoint", r=r) for r in (127, 128)] == [0x8, 0x9]


def test_sr_add_with_r_zero_is_rtz():
    """FPS-RND-6: add-and-truncate with r = 0 adds nothing: it is round toward zero."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(2000) * 4).astype(np.float32)
    zeros = np.zeros(x.size, np.uint8)
    for fmt in ("e2m1", "e4m3"):
        assert np.array_equal(encode_fast(x, fmt, "sr-add", rbits=zeros), encode_fast(x, fmt, "rtz"))
    # and r = 2^N - 1 rounds up everything except delta < 2^-N
    assert round_to_code(2 + Fraction(1, 256), "e2m1", "sr-add", r=255) == 5
    assert round_to_code(2 + Fraction(1, 512), "e2m1", "sr-add", r=255) == 4


@pytest.mark.parametrize("k", [0, 1, 37, 128, 200, 255])
def test_up_counts_on_the_grid(k):
    """FPS-RND-5..7: for delta = k/256 (x = 2 + k/256 in e2m1, neighbours 2 and 3) every SR
    variant sends exactly k of the 256 random values up: P(up) = delta exactly.

    midpoint: up iff (2r+1)/512 >= 1 - k/256  iff r >= 255.5 - k  -> k values;
    add:      up iff r/256 >= 1 - k/256       iff r >= 256 - k    -> k values;
    unbiased: up iff r < k                                        -> k values.
    (k = 0 is x = 2 exactly: never up.)
    """
    x = 2 + Fraction(k, 256)
    for mode in ("sr-midpoint", "sr-add", "sr-unbiased"):
        assert _up_count(x, "e2m1", mode) == k, mode


@pytest.mark.parametrize("k", [0, 1, 100, 254])
def test_up_counts_between_grid_points(k):
    """FPS-RND-5..7: delta = (k + 1/2)/256 separates the variants (derived as above):
    midpoint r >= 255 - k -> k+1 values; add r >= 256 - k -> k; unbiased r <= k -> k+1."""
    x = 2 + Fraction(2 * k + 1, 512)
    assert _up_count(x, "e2m1", "sr-midpoint") == k + 1
    assert _up_count(x, "e2m1", "sr-add") == k
    assert _up_count(x, "e2m1", "sr-unbiased") == k + 1


def test_sr_unbiased_expectation_is_exact():
    """FPS-RND-7: sum over all r of the decoded results / 2^N equals x when delta is a multiple
    of 2^-N (here in e4m3's subnormal range, quantum 2^-9, and in a normal binade)."""
    f = get_format("e4m3")
    for x in (Fraction(3, 512) + Fraction(5, 512 * 256), Fraction(100) + Fraction(8 * 77, 256)):
        total = sum(f.decode_exact(round_to_code(x, "e4m3", "sr-unbiased", r=r)) for r in range(256))
        assert total / 256 == x


def test_sr_overflow_and_exact_values():
    """FPS-RND-8: SR never moves an exactly representable value, and a value past max finite
    that rounds up follows the overflow policy (e2m1 saturates to 6; e4m3 nonfinite -> NaN)."""
    for r in (0, 77, 255):
        for mode in ("sr-midpoint", "sr-add", "sr-unbiased"):
            assert round_to_code(3.0, "e2m1", mode, r=r) == 5
            assert round_to_code(6.5, "e2m1", mode, r=r) == 7
    # 448 < x = 456 < 480 (the next e4m3 step): up -> overflow -> 0x7F under nonfinite
    ups = {round_to_code(456.0, "e4m3", "sr-unbiased", r=r) for r in range(256)}
    assert ups == {0x7E, 0x7F}
    assert get_format("e4m3").kind(0x7F) is CodeKind.NAN


def test_bad_random_bits_are_refused():
    """FPS-RND-8: r must be below 2^N; rbits of the wrong shape or dtype are refused."""
    from fpspec.errors import FpspecError

    x = np.array([1.25, 2.5], np.float32)
    with pytest.raises(FpspecError, match=r"random value not below 2\^3.*index \[1\]"):
        encode_fast(x, "e2m1", "sr", rbits=np.array([1, 8], np.uint8), nbits=3)
    with pytest.raises(FpspecError, match="shape"):
        encode_fast(x, "e2m1", "sr", rbits=np.array([1], np.uint8))
    with pytest.raises(FpspecError, match="uint8, uint16 or uint32"):
        encode_fast(x, "e2m1", "sr", rbits=np.array([1, 2], np.int64))
    with pytest.raises(FpspecError, match="r in"):
        round_to_code(1.25, "e2m1", "sr", r=256)


@pytest.mark.parametrize("mode,nbits", [("sr-unbiased", 16), ("sr-midpoint", 16), ("sr-midpoint", 24),
                                        ("sr-midpoint", 32), ("sr-unbiased", 32), ("sr-add", 32)])
def test_float64_far_below_the_quantum(mode, nbits):
    """FPS-RND-5..8, FPS-RND-14 (issue 10 item 3): float64 2^-13 into e2m1 lies delta = 2^-12 of the
    quantum 0.5 above 0.  sr-unbiased sends r up iff r < 2^-12 2^N (r < 16 for N = 16);
    sr-midpoint iff (2r+1)/2^(N+1) >= 1 - 2^-12, i.e. r >= 2^N - 2^(N-12) - 1/2 (the top
    2^(N-12) values); sr-add iff r/2^N >= 1 - 2^-12, the same top 2^(N-12) values.
    (Before the fix the fast path treated every float64 more than 64 bits below the quantum
    as if delta were 2^-64: it rounded only r = 0 up, and sr-midpoint never.)"""
    top = 1 << nbits
    ups = 1 << (nbits - 12)
    # r next to 0, to both flip points (ups and top - ups) and to 2^N - 1
    r = np.unique(np.concatenate([np.arange(40), np.arange(ups - 8, ups + 8), np.arange(top - ups - 8, top - ups + 8),
                                  np.arange(top - 40, top)])).astype(np.uint32)
    x = np.full(r.size, 2.0 ** -13)
    if mode == "sr-unbiased":
        want = (r < ups).astype(np.uint8)
    else:
        want = (r >= top - ups).astype(np.uint8)
    assert encode_exact(x, "e2m1", mode, rbits=r, nbits=nbits).tolist() == want.tolist()
    assert encode_fast(x, "e2m1", mode, rbits=r, nbits=nbits).tolist() == want.tolist()
    # and the issue's own case
    if (mode, nbits) == ("sr-unbiased", 16):
        got = encode_fast(np.full(8, 2.0 ** -13), "e2m1", mode, nbits=16, rbits=np.arange(8, dtype=np.uint16))
        assert got.tolist() == [1] * 8
