"""Exact reference vs fast path on every FP16 and every BF16 input (FPS-RND-0..4, FPS-RND-9..12).

Each test runs all five deterministic modes for one (input set, target) pair, so the
exact path's memoised binade/neighbour step (``locate``) is shared by the modes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from fpspec.choices import Policies
from fpspec.exact.rounding import encode_exact
from fpspec.fast.rounding import encode_fast
from fpspec.formats import get_format

from sweep_helpers import DETERMINISTIC_MODES, NARROW_FORMATS, accepting_policies, mismatch_report

#: The whole module is in the slow lane (python3 -m pytest -m "not slow" leaves it out).
pytestmark = pytest.mark.slow


def _check_all_modes(x: np.ndarray, fmt: str, pol: Policies) -> None:
    for mode in DETERMINISTIC_MODES:
        want = encode_exact(x, fmt, mode, policies=pol)
        got = encode_fast(x, fmt, mode, policies=pol)
        assert got.dtype == want.dtype
        assert np.array_equal(got, want), f"{fmt} {mode} {pol}: " + mismatch_report(x, got, want)


@pytest.mark.parametrize("fmt", NARROW_FORMATS)
def test_every_fp16_input(all_fp16, fmt):
    """FPS-RND-0, FPS-RND-14: every FP16 bit pattern (NaNs, Infs, subnormals, -0) into each narrow format,
    all deterministic modes, exact == fast; negatives into unsigned formats under the
    non-rejecting negative policy."""
    _check_all_modes(all_fp16, fmt, accepting_policies(fmt))


@pytest.mark.parametrize("fmt", NARROW_FORMATS)
def test_every_bf16_input(all_bf16, fmt):
    """FPS-RND-0, FPS-RND-14: every BF16 bit pattern into each narrow format, all deterministic modes."""
    _check_all_modes(all_bf16, fmt, accepting_policies(fmt))


@pytest.mark.parametrize("fmt", ["ue4m3", "ue5m3", "ue8m0"])
def test_unsigned_formats_on_magnitudes(all_fp16, fmt):
    """FPS-RND-11: on |x| no negative policy applies; the default (error) policy is kept."""
    mags = all_fp16[(all_fp16.view(np.uint16) >> 15) == 0]
    mags = mags[~np.isnan(mags) & (mags != 0)] if fmt == "ue8m0" else mags[~np.isnan(mags)]
    pol = accepting_policies(fmt, negative="error", zero="error")
    for mode in ("rne", "up", "down"):
        assert np.array_equal(encode_fast(mags, fmt, mode, policies=pol),
                              encode_exact(mags, fmt, mode, policies=pol))


@pytest.mark.parametrize("fmt,flip", [("e4m3", "sat"), ("e5m2", "sat"), ("ue5m3", "nonfinite"),
                                      ("e2m1", "sat"), ("ue8m0", "sat"), ("ue5m3fnu", "error")])
def test_every_overflowing_fp16_input_other_overflow_policy(all_fp16, fmt, flip):
    """FPS-RND-9: the non-default overflow policy on every FP16 input at or beyond half of max
    finite (Inf and NaN included): the only inputs where the overflow policy can matter."""
    f = get_format(fmt)
    x = all_fp16[~(np.abs(all_fp16.astype(np.float64)) < float(f.max_finite) / 2)]
    if flip == "error":
        x = x[np.abs(x.astype(np.float64)) <= float(f.max_finite)]  # in range: no refusal
    pol = accepting_policies(fmt, overflow=flip)
    for mode in ("rne", "rtz", "up", "down"):
        assert np.array_equal(encode_fast(x, fmt, mode, policies=pol),
                              encode_exact(x, fmt, mode, policies=pol)), (fmt, mode)


@pytest.mark.parametrize("src,dst", [("fp16", "bf16"), ("fp16", "fp32"), ("bf16", "fp16")])
def test_wide_targets(all_fp16, all_bf16, src, dst):
    """FPS-RND-0: FP16 -> BF16 / FP32 and BF16 -> FP16, exact == fast under every deterministic mode."""
    x = all_fp16 if src == "fp16" else all_bf16
    pol = accepting_policies(dst)
    _check_all_modes(x, dst, pol)


def test_wide_targets_match_ieee_casts(all_fp16, all_bf16):
    """FPS-RND-1: RNE into FP32 / BF16 / FP16 is the IEEE cast (numpy / ml_dtypes), NaN sign kept.

    FP16 -> FP32 is exact; BF16 -> FP16 through float32 is a single rounding because
    BF16 -> FP32 is exact.  NaN payloads differ (fpspec writes the canonical all-ones
    NaN), so NaNs are compared by class and sign only.
    """
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and overflow casts are intended
        cases = [
            (all_fp16, "fp32", all_fp16.astype(np.float32).view(np.uint32), np.uint32),
            (all_fp16, "bf16", all_fp16.astype(ml_dtypes.bfloat16).view(np.uint16), np.uint16),
            (all_bf16, "fp16", all_bf16.astype(np.float32).astype(np.float16).view(np.uint16), np.uint16),
        ]
    for x, dst, want, utype in cases:
        got = encode_fast(x, dst, "rne", policies=accepting_policies(dst)).astype(utype)
        with np.errstate(invalid="ignore"):
            nan = np.isnan(x.astype(np.float32))
        assert np.array_equal(got[~nan], want[~nan]), dst
        sign_bit = utype(1 << (8 * np.dtype(utype).itemsize - 1))
        assert np.array_equal(got[nan] & sign_bit, want[nan] & sign_bit)


def test_chunked_parallel_path_equals_single_thread(all_fp16):
    """FPS-RND-14: arrays of at least PARALLEL_MIN_ELEMENTS run in chunks on a thread pool; the
    codes equal the single-call ones (themselves proven equal to exact above), in every mode."""
    from fpspec.fast.parallel import PARALLEL_MIN_ELEMENTS

    reps = PARALLEL_MIN_ELEMENTS // all_fp16.size + 2
    big = np.tile(all_fp16, reps)
    r_small = np.random.default_rng(9).integers(0, 256, all_fp16.size).astype(np.uint8)
    for fmt in ("e2m1", "e4m3", "ue8m0"):
        pol = accepting_policies(fmt)
        for mode in DETERMINISTIC_MODES + ["sr-add"]:
            kw = dict(rbits=r_small) if mode == "sr-add" else {}
            kw_big = dict(rbits=np.tile(r_small, reps)) if mode == "sr-add" else {}
            small = encode_fast(all_fp16, fmt, mode, policies=pol, **kw)
            assert np.array_equal(encode_fast(big, fmt, mode, policies=pol, **kw_big), np.tile(small, reps))


def test_chunked_path_works_in_a_forked_child():
    """FPS-RND-14: after fork (multiprocessing workers), the child builds its own thread pool
    instead of queueing work on the parent's threads, which do not exist there."""
    import multiprocessing as mp

    from fpspec.fast.parallel import PARALLEL_MIN_ELEMENTS

    x = np.linspace(-7, 7, PARALLEL_MIN_ELEMENTS + 5).astype(np.float32)
    want = encode_fast(x, "e2m1", "rne")  # starts the parent's pool
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(encode_fast, (x, "e2m1", "rne")).get(timeout=120)
    assert np.array_equal(got, want)
