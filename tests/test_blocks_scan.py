"""The input scan's block amaxes (FPS-BLK-1, FPS-BLK-5, FPS-BLK-15).

For a binary32 rowwise 1xB view, ``prepare_view`` takes max |x| of every block from the
same pass that refuses bad input and measures the tensor amax, and the fast kernels of the
profiles read them instead of measuring each block again.
These tests hold that scan to numpy's reductions, hold the kernels' results with the
scanned amaxes to their results without them, and show that the kernels do read them.
"""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.errors import FpspecError
from fpspec.fast.blocks import quantize_view_fast
from fpspec.fast.scan import scan_values
from fpspec.quantization import prepare_view, quantize
from fpspec.schemes import BLOCK_SCHEMES, PROFILES, resolve_spec

FLT_MAX = np.float32(np.finfo(np.float32).max)


def _edge_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """binary32 values of every kind the scan orders: zeros of both signs, subnormals, normals
    of every binade, FLT_MAX, each with either sign."""
    bits = rng.integers(0, 0x7F800000, n, dtype=np.uint32)          # every finite magnitude
    bits[rng.random(n) < 0.2] = rng.integers(0, 1 << 23, 1, dtype=np.uint32)[0]   # subnormals
    bits[rng.random(n) < 0.05] = 0
    bits[rng.random(n) < 0.01] = 0x7F7FFFFF                          # FLT_MAX
    bits |= (rng.random(n) < 0.5).astype(np.uint32) << np.uint32(31)  # signs, -0.0 included
    return bits.view(np.float32)


@pytest.mark.parametrize("block", [16, 32])
@pytest.mark.parametrize("seed", range(4))
def test_block_amaxes_equal_numpy(block, seed):
    rng = np.random.default_rng(seed)
    n = block * (1024 * 3 + 7)  # several parallel chunks and a partial one
    x = _edge_values(rng, n)
    if seed == 1:
        x[: n // 2] = 0.0  # whole chunks of zero blocks
    got = scan_values(x, block)
    want = np.abs(x).reshape(-1, block).max(axis=1)
    assert got.bad == -1 and got.why == ""
    assert got.block_amax is not None and got.block_amax.dtype == np.float32
    assert np.array_equal(got.block_amax.view(np.uint32), want.view(np.uint32))  # +0.0, never -0.0
    assert got.amax == float(np.abs(x).max()) == scan_values(x).amax


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf, -np.nan])
@pytest.mark.parametrize("where", [0, 15, 16, 16 * 1024 * 2 + 3, 16 * 4000 - 1])
def test_block_scan_refuses_as_the_plain_scan(bad, where):
    """A NaN or an infinity anywhere: the same refusal (the first bad index) as without blocks."""
    x = np.random.default_rng(5).standard_normal(16 * 4000).astype(np.float32)
    x[where] = bad
    x[-1] = np.nan  # a later bad value does not hide the first
    got = scan_values(x, 16)
    assert (got.bad, got.why, got.block_amax) == (where, "non-finite", None)
    assert (got.bad, got.why) == scan_values(x)[1:3]


def test_block_scan_only_where_it_applies():
    x32 = np.ones(64, np.float32)
    assert scan_values(x32, 16).block_amax is not None
    assert scan_values(x32).block_amax is None                      # no block asked
    assert scan_values(x32[:48], 32).block_amax is None             # not whole blocks
    assert scan_values(x32, 8).block_amax is None                   # not a block length
    assert scan_values(x32.astype(np.float64), 16).block_amax is None  # binary64 values


def _spec(scheme: str, profile: str, tile: str = "1xB", block: int | None = None):
    return resolve_spec(scheme, profile, block=block, tile=tile, target=None, scale_format=None,
                        zero_scale_rule=None, rounding="rne", nbits=8, sr_eval=None, rht_output=None,
                        payload_format=None)


def test_prepare_view_hands_on_block_amaxes_only_for_rowwise_binary32_views():
    x = np.random.default_rng(2).standard_normal((16, 64)).astype(np.float32)
    spec = _spec("ue5m3", "exact")
    pv = prepare_view(x, spec)
    assert np.array_equal(pv.block_amax, np.abs(x).reshape(-1, 16).max(axis=1))
    assert prepare_view(x.astype(np.float16), spec).block_amax is not None  # widened exactly
    assert prepare_view(x, spec, columnwise=True).block_amax is None       # transposed rows
    assert prepare_view(x, spec, rht=True).block_amax is None              # transformed values
    assert prepare_view(x, spec, impl="exact").block_amax is None          # the spec measures its own
    assert prepare_view(x, _spec("ue5m3", "exact", tile="BxB")).block_amax is None
    assert prepare_view(x.astype(np.float64), spec).block_amax is None
    assert prepare_view(x[:, :40], spec, pad=True).block_amax is None      # padded
    assert prepare_view(x, _spec("mxfp4", "floor")).block_amax.shape == (16 * 64 // 32,)  # blocks of 32


_READERS = sorted((s, p) for (s, p) in PROFILES if "1xB" in BLOCK_SCHEMES[s].tiles)


@pytest.mark.parametrize("scheme,profile", _READERS)
def test_kernels_with_scanned_amaxes_equal_kernels_measuring_them(scheme, profile):
    rng = np.random.default_rng(11)
    x = _edge_values(rng, 48 * 1344).reshape(48, 1344)  # 4032 blocks of 16: chunks and a partial one
    x[:, 1000:] = rng.standard_normal((48, 344)).astype(np.float32)
    spec = _spec(scheme, profile)
    scan = scan_values(x.reshape(-1), spec.block)
    try:
        measured = quantize_view_fast(x, spec, scan.amax, want_dequant=False)
    except FpspecError as exc:  # a profile that refuses this amax refuses it either way
        with pytest.raises(FpspecError, match=str(exc)[:30]):
            quantize_view_fast(x, spec, scan.amax, want_dequant=False, block_amax=scan.block_amax)
        return
    given = quantize_view_fast(x, spec, scan.amax, want_dequant=False, block_amax=scan.block_amax)
    assert np.array_equal(given.codes, measured.codes)
    assert np.array_equal(given.scales, measured.scales)
    full = quantize(x, scheme, profile=profile)  # the public path takes the scan's amaxes
    assert np.array_equal(full.codes, measured.codes) and np.array_equal(full.scales, measured.scales)


@pytest.mark.parametrize("scheme,profile", [("ue5m3", "exact"), ("ue5m3", "seed-fp32"), ("nvfp4", "torchao-0.18"),
                                            ("mxfp4", "floor"), ("mxfp8", "rceil")])
def test_kernels_read_the_given_block_amaxes(scheme, profile):
    """A mutation: one block's given amax quadrupled moves that block's scale code, and only it."""
    x = np.random.default_rng(3).standard_normal((4, 64 * 8)).astype(np.float32)
    spec = _spec(scheme, profile)
    scan = scan_values(x.reshape(-1), spec.block)
    wrong = scan.block_amax.copy()
    wrong[5] *= np.float32(4.0)
    a = quantize_view_fast(x, spec, scan.amax, want_dequant=False, block_amax=scan.block_amax)
    b = quantize_view_fast(x, spec, scan.amax, want_dequant=False, block_amax=wrong)
    moved = np.flatnonzero(a.scales.reshape(-1) != b.scales.reshape(-1))
    assert moved.tolist() == [5]


def test_given_block_amaxes_are_checked():
    x = np.ones((4, 64), np.float32)
    spec = _spec("ue5m3", "exact")
    with pytest.raises(FpspecError, match=r"one per block of the 4x64 view \(16\), got float32 \(15,\)"):
        quantize_view_fast(x, spec, 1.0, block_amax=np.ones(15, np.float32))
    with pytest.raises(FpspecError, match="must be float32"):
        quantize_view_fast(x, spec, 1.0, block_amax=np.ones(16, np.float64))


@pytest.mark.parametrize("tile", ["1xB", "BxB"])
@pytest.mark.parametrize("block", [16, 32])
def test_block_amax_grid_fast_equals_the_exact_grid(tile, block):
    """The fast twin of block_amax_grid_exact (FPS-BLK-6): max |x| per block or tile, exactly."""
    from fractions import Fraction

    from fpspec.exact.blocks import block_amax_grid_exact
    from fpspec.fast.blocks import block_amax_grid_fast

    rng = np.random.default_rng(block)
    x = _edge_values(rng, 4 * block * 3 * block).reshape(4 * block, 3 * block)
    x[:block, :block] = 0.0  # an all-zero tile and blocks
    got = block_amax_grid_fast(x, block, tile)
    want = block_amax_grid_exact(x, block, tile)
    assert got.shape == (len(want), len(want[0])) and got.dtype == np.float64
    assert [[Fraction(float(v)) for v in row] for row in got] == want
    assert got[0, 0] == 0.0 and got.max() == float(np.abs(x).max())
