"""The branch-free float32 RNE kernel equals the general kernel and the exact spec (FPS-RND-14).

``encode_fast`` sends float32 input under RNE into a signed 4- or 8-bit format with
subnormals (e2m1, e4m3, e5m2) to :func:`fpspec.fast.rounding._encode_range_rne_f32`;
everything else goes through the general kernel, itself proven equal to the exact
reference exhaustively on FP16/BF16 and by sweeps.  Here: every float32 with each of
the 65536 possible top halves and eight bottom halves (every exponent, every mantissa
head, ties, sticky bits, NaN payloads, Inf, subnormals, both signs), every FP16 and BF16
value widened to float32, against the general kernel (float64 carries the same values)
and, on samples, the exact reference; every policy the kernel accepts.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fpspec.choices import NanPolicy, OverflowPolicy, Policies
from fpspec.errors import FpspecError
from fpspec.exact.rounding import encode_exact
from fpspec.fast.rounding import _rne_f32_spec, encode_fast
from fpspec.formats import FORMATS, get_format
from tools import f32_kernel_sweep

KERNEL_FORMATS = ["e2m1", "e4m3", "e5m2"]


def _policies(fmt: str) -> list[Policies]:
    f = get_format(fmt)
    overflows = [OverflowPolicy.SAT] + ([OverflowPolicy.NONFINITE] if f.has_nan or f.has_inf else [])
    nans = [NanPolicy.ZERO, NanPolicy.MAX, NanPolicy.FLIPPED_ZERO] + (
        [NanPolicy.NAN, NanPolicy.QUIET] if f.has_nan else [])
    return [Policies(overflow=o, nan=n) for o, n in itertools.product(overflows, nans)]


@pytest.fixture(scope="module")
def f32_grid() -> np.ndarray:
    """Every top 16 bits, with bottom halves 0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF and two random."""
    top = np.arange(1 << 16, dtype=np.uint32) << np.uint32(16)
    rng = np.random.default_rng(4)
    lows = np.array([0, 1, 0x7FFF, 0x8000, 0x8001, 0xFFFF, *rng.integers(0, 1 << 16, 2)], dtype=np.uint32)
    return (top[:, None] | lows[None, :]).reshape(-1).view(np.float32)


def test_the_kernel_takes_the_common_cases():
    """FPS-RND-14: which (format, policy) pairs the float32 kernel handles; the rest are refused by
    _rne_f32_spec and go to the general kernel."""
    taken = {name for name, f in FORMATS.items()
             if _rne_f32_spec(f, Policies(overflow="nonfinite" if f.has_inf else "sat", nan="zero")) is not None}
    assert taken == set(KERNEL_FORMATS)
    assert _rne_f32_spec(get_format("e4m3"), Policies(overflow="error", nan="nan")) is None
    assert _rne_f32_spec(get_format("e5m2"), Policies(overflow="sat", nan="nan")) is None  # Inf stays Inf


@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_kernel_equals_general_kernel_on_the_float32_grid(f32_grid, fmt):
    """FPS-RND-14: the float32 kernel == the general kernel (fed the same values as float64),
    every accepted policy, 524288 inputs each, through the chunked parallel path."""
    with np.errstate(invalid="ignore"):  # signalling NaNs widen to quiet NaNs of the same sign
        wide = f32_grid.astype(np.float64)
    for pol in _policies(fmt):
        got = encode_fast(f32_grid, fmt, "rne", policies=pol)
        want = encode_fast(wide, fmt, "rne", policies=pol)
        assert np.array_equal(got, want), (fmt, pol, np.flatnonzero(got != want)[:5])


@pytest.mark.slow
@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_kernel_equals_exact_on_every_fp16_and_bf16_value(all_fp16, all_bf16, fmt):
    """FPS-RND-0, FPS-RND-14: every FP16 and BF16 value, widened exactly to float32, through the
    float32 kernel == the exact reference (default policies with a NaN mapping), and == the
    general kernel on the 16-bit input itself under every accepted policy."""
    for x16 in (all_fp16, all_bf16):
        with np.errstate(invalid="ignore"):
            x = x16.astype(np.float32)
        pol = Policies(overflow=_policies(fmt)[0].overflow, nan="zero")
        assert np.array_equal(encode_fast(x, fmt, "rne", policies=pol), encode_exact(x, fmt, "rne", policies=pol))
        for pol in _policies(fmt):
            assert np.array_equal(encode_fast(x, fmt, "rne", policies=pol),
                                  encode_fast(x16, fmt, "rne", policies=pol)), (fmt, pol)


@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_kernel_equals_exact_on_a_grid_sample(f32_grid, fmt):
    """FPS-RND-14: a sample of the grid against the exact reference directly, default policies
    (NaN inputs removed where the default refuses them)."""
    x = f32_grid[np.random.default_rng(1).integers(0, f32_grid.size, 20000)]
    if fmt == "e2m1":
        x = x[~np.isnan(x)]
    assert np.array_equal(encode_fast(x, fmt, "rne"), encode_exact(x, fmt, "rne"))


def test_nan_refusal_names_the_first_nan():
    """FPS-RND-10, FPS-RND-14: under e2m1's default NaN policy (error) the float32 kernel's
    refusal names the first NaN in element order, on a large chunked array and in 2-D."""
    x = np.linspace(-7, 7, 600_000).astype(np.float32)
    x[[412_345, 500_000]] = np.nan
    with pytest.raises(FpspecError, match=r"NaN input to e2m1 .*index \[412345\]"):
        encode_fast(x, "e2m1", "rne")
    y = np.linspace(-7, 7, 600_000).astype(np.float32).reshape(3, 200_000)
    y[2, 345] = np.nan
    y[2, 346] = np.nan
    with pytest.raises(FpspecError, match=r"index \[2, 345\]"):
        encode_fast(y, "e2m1", "rne")


def _slices(fmt: str) -> list[int]:
    """2^20-input slices (top 12 bits) around the format's boundaries, both signs: the subnormal
    binade and the lowest normal one, max finite and the overflow threshold, Inf and NaN."""
    f = get_format(fmt)
    tops = {int(np.array([v], np.float32).view(np.uint32)[0]) >> 20
            for v in (2.0 ** (f.emin - f.man_bits), 2.0 ** (f.emin - 1), 2.0 ** f.emin, float(f.max_finite))}
    tops |= {0x000, 0x7F8, 0x7FF}
    return sorted(tops | {t | 0x800 for t in tops})


@pytest.mark.parametrize("fmt", KERNEL_FORMATS)
def test_full_domain_sweep_tool_on_boundary_slices(fmt):
    """FPS-RND-14: ``tools.f32_kernel_sweep`` (every float32, docs/rounding.rst quotes a run)
    on 2^20-input slices at the format's boundaries, both of its policy pairs: no mismatch."""
    tool = f32_kernel_sweep
    for pol in tool.CASES[fmt]:
        res = tool.sweep(fmt, pol, slices=_slices(fmt), slice_bits=20)
        assert res["inputs"] == len(_slices(fmt)) << 20
        assert res["mismatches"] == 0, res["first"]


def test_sweep_tool_reports_a_broken_kernel(monkeypatch):
    """The sweep finds a kernel that is wrong on one input (the tie 2^-6 + 2^-10 of e4m3, which
    rounds to even: code 0x08) and names its bits."""
    import numba

    from fpspec.fast import rounding

    real = rounding._encode_range_rne_f32
    tie = int(np.array([2.0 ** -6 + 2.0 ** -10], np.float32).view(np.uint32)[0])

    @numba.njit(nogil=True)
    def broken(bits, out, lo, hi, *args):
        res = real(bits, out, lo, hi, *args)
        for i in range(lo, hi):
            if bits[i] == tie:
                out[i] += 1
        return res

    monkeypatch.setattr(rounding, "_encode_range_rne_f32", broken)
    res = f32_kernel_sweep.sweep("e4m3", Policies(overflow="sat", nan="nan"), slices=[tie >> 20], slice_bits=20)
    assert res["mismatches"] == 1
    assert res["first"] == [(f"0x{tie:08X}", 0x09, 0x08)]
