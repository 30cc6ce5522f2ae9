"""FPS-GEMM-10, FPS-GEMM-14: the fast path's one chain under every kernel, bit-equal to
the exact spec: each kernel (general products, window rows, E2M1 block terms, E2M1
block sums, sequential FP32) with K slices, promotion, partial groups and groups
longer than K; the diagonal (rowdot); and the chain plan itself."""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.fast.accumulate import _terms_kernel, gemm_fast
from fpspec.fast.chain import CONTINUE, END_SLICE, PROMOTE, chain_plan
from fpspec.fast import kernels
from fpspec.matmul import gemm, rowdot
from fpspec.named_models import get_model

from gemm_helpers import random_quantized, wide_codes


def _both(a, bt, model, **kw):
    ye = gemm(a, bt, model, impl="exact", **kw)
    yf = gemm(a, bt, model, impl="fast", **kw)
    bad = np.flatnonzero(ye.view(np.uint32) != yf.view(np.uint32))
    assert bad.size == 0, f"{bad.size} differ, first {ye.flat[bad[0]]!r} vs {yf.flat[bad[0]]!r}"
    return ye


def _kernel(a, bt, model, fmt=None):
    return _terms_kernel(a, bt, model, fmt, chain_plan(a.shape[1], model))[0]


def test_fpsgemm14_chain_plan_groups_promotions_slices():
    """FPS-GEMM-14, FPS-GEMM-6: K = 100, G = 16, N_C = 32, S = 48: slices [0, 48), [48, 96),
    [96, 100); groups of 16 from each slice start; a promotion after 32 products of a
    slice; every slice ends its chain."""
    p = chain_plan(100, get_model("km-h100-fp8", require_full_groups=False, group_size=16,
                                  promotion_interval=32, split_k=48))
    assert p.start.tolist() == [0, 16, 32, 48, 64, 80, 96]
    assert p.stop.tolist() == [16, 32, 48, 64, 80, 96, 100]
    assert p.action.tolist() == [CONTINUE, PROMOTE, END_SLICE, CONTINUE, PROMOTE, END_SLICE, END_SLICE]
    assert p.longest == 16
    # a group longer than K is one group of K (the kernels size their buffers from this)
    p = chain_plan(72, get_model("seed-probe-matched", group_size=2 ** 40, promotion_interval=2 ** 70))
    assert (p.start.tolist(), p.stop.tolist(), p.action.tolist(), p.longest) == ([0], [72], [END_SLICE], 72)
    assert chain_plan(0, get_model("exact")).start.size == 0


@pytest.mark.parametrize("over", [dict(split_k=64), dict(split_k=128, promotion_interval=64),
                                  dict(group_size=2 ** 40), dict(split_k=160, group_size=None)])
@pytest.mark.parametrize("name,fmt,kernel,base", [
    ("km-h100-fp8", "e4m3", "gemm_window_narrow_rows", {}),
    ("km-h100-bf16", "bf16", "gemm_window_rows", dict(group_size=32)),  # G = 16 fits the narrow lanes
    ("seed-probe-matched-nosnap", "bf16", "gemm_products", {}),
    ("decoded-fp32", "fp16", "gemm_fp32_rows", {}),
])
def test_fpsgemm10_every_code_kernel_with_slices_and_long_groups(name, fmt, kernel, base, over):
    """FPS-GEMM-10, FPS-GEMM-14: each code-operand kernel (the narrow and the int64 window
    rows, the general products, the FP32 rows) with K slices, promotion inside slices, a
    group longer than K (G = 2^40: no 2^40-entry buffer) and slices without groups, K = 200."""
    rng = np.random.default_rng(len(name) + 7 * len(over))
    a = wide_codes(rng, (3, 200), fmt, span=20)
    bt = wide_codes(rng, (4, 200), fmt, span=20)
    over = {**base, **over}
    if name == "decoded-fp32":
        if over.get("group_size", 1) != 1:
            over.pop("group_size")  # decoded-fp32 is G = 1; it keeps the FP32 kernel
        over.setdefault("promotion_rounding", "rne")
    model = get_model(name, require_full_groups=False, **over)
    assert _kernel(a, bt, model, fmt) is getattr(kernels, kernel)
    _both(a, bt, model, fmt=fmt)


def test_fpsgemm10_general_kernel_specials_with_slices():
    """FPS-GEMM-10, FPS-GEMM-2: Inf and NaN products in some slices only: the general
    kernel's special values end their slice's chain and then the slice sum (Inf + Inf
    = Inf, Inf - Inf = NaN across slices)."""
    rng = np.random.default_rng(20)
    a = wide_codes(rng, (4, 128), "bf16", span=30)
    bt = wide_codes(rng, (3, 128), "bf16", span=30)
    a[0, 5] = 0x7F80   # +inf in slice 0
    a[1, 70] = 0xFF80  # -inf in slice 1 ...
    a[1, 5] = 0x7F80   # ... and +inf in slice 0: NaN after the slice sum
    a[2, 100] = 0x7FC0  # NaN
    bt[:, [5, 70]] = 0x3F80  # 1.0: the infinite products keep their signs
    model = get_model("km-h100-bf16", split_k=64)
    assert _kernel(a, bt, model, "bf16") is kernels.gemm_products
    y = _both(a, bt, model, fmt="bf16")
    assert np.isposinf(y[0]).all() and np.isnan(y[1]).all() and np.isnan(y[2]).all()


@pytest.mark.parametrize("scale_format", ["ue4m3", "ue5m3", "ue5m3fnu", "ue8m0"])
def test_fpsgemm10_block_kernels_with_slices(scale_format):
    """FPS-GEMM-10, FPS-GEMM-14: E2M1 operands through the block-sum rows kernel (no window;
    the local scale integers are per planned group, so slices that restart the groups
    are covered, and the wide UE5M3 / UE8M0 spans take the exact path) and the
    block-term kernel (block placement with a window), with slices and promotion."""
    rng = np.random.default_rng(len(scale_format))
    block = 32 if scale_format == "ue8m0" else 16
    a = random_quantized(rng, 3, 256, scale_format, block)
    bt = random_quantized(rng, 2, 256, scale_format, block, amax=5.0)
    for name, over, kernel in (
            ("seed-probe-matched", dict(split_k=96, group_size=32), "gemm_block_sums_rows"),
            ("seed-probe-matched", dict(split_k=128, promotion_interval=64, group_size=32),
             "gemm_block_sums_rows"),
            ("exact", dict(split_k=64, operand_domain="encoded", alpha_source="amax"), "gemm_block_sums_rows"),
            ("seed-probe-matched", dict(scale_placement="block", window_bits=13, fused=True, split_k=128,
                                        group_size=64, promotion_interval=64), "gemm_blocks")):
        model = get_model(name, **over)
        assert _kernel(a, bt, model) is getattr(kernels, kernel)
        _both(a, bt, model)


def test_fpsgemm10_rowdot_is_the_diagonal():
    """FPS-GEMM-1: rowdot(a, bt) is the diagonal of gemm(a, bt), for code arrays and for
    quantized operands, fast and exact alike."""
    rng = np.random.default_rng(5)
    a = wide_codes(rng, (5, 96), "e4m3")
    bt = wide_codes(rng, (5, 96), "e4m3")
    for name in ("km-h100-fp8", "seed-probe-matched", "decoded-fp32"):
        name = get_model(name)  # the chain as parameters: the seed preset takes FP4 operands only (FPS-GEMM-25)
        want = np.diagonal(gemm(a, bt, name, fmt="e4m3", impl="exact")).copy()
        for impl in ("fast", "exact"):
            got = rowdot(a, bt, name, fmt="e4m3", impl=impl)
            assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    qa = random_quantized(rng, 3, 64, "ue4m3")
    qb = random_quantized(rng, 3, 64, "ue4m3", amax=5.0)
    want = np.diagonal(gemm(qa, qb, "seed-probe-matched", impl="exact")).copy()
    assert np.array_equal(rowdot(qa, qb, "seed-probe-matched").view(np.uint32), want.view(np.uint32))
    from fpspec.errors import FpspecError
    with pytest.raises(FpspecError, match="one shape"):
        rowdot(a, bt[:3], "km-h100-fp8", fmt="e4m3")


def test_fpsgemm10_fast_path_output_is_float32_of_fp32_values():
    """FPS-GEMM-10: gemm_fast returns float32 (M, N), NaN as 0x7FC00000."""
    a = np.array([[0x7F] + [0x38] * 31], dtype=np.uint8)  # e4m3 NaN, then ones
    y = gemm_fast(a, a, get_model("km-h100-fp8"), fmt="e4m3")
    assert y.dtype == np.float32 and y.shape == (1, 1) and y.view(np.uint32)[0, 0] == 0x7FC00000


@pytest.mark.parametrize("snap_bits, alpha", [(10, None), (12, 0.37109375), (None, 3.0517578125e-05), (None, None)])
def test_fpsgemm10_finish_row_equals_finish(snap_bits, alpha):
    """FPS-GEMM-7, FPS-GEMM-8: the branch-free row finish (snap as rint(y 2^L) 2^-L, then
    alpha) equals ``finish`` output by output on FP32 values of every exponent, exact ties of
    the snap lattice (even and odd), values that snap to -0 and +0, the largest finite
    values, subnormals, Inf and NaN."""
    from fpspec.fast.chain import NO_SNAP, FinishSpec, finish
    from fpspec.fast.steps import finish_row

    rng = np.random.default_rng(1007)
    bits = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        y = bits.view(np.float32).astype(np.float64)
    lattice = 2.0 ** -(snap_bits or 10)
    ties = (rng.integers(-2000, 2000, 600) + 0.5) * lattice         # halfway: to even
    near = (rng.integers(-3, 4, 300) + rng.choice([0.25, 0.5, 0.75], 300)) * lattice
    special = np.array([0.0, -0.0, 0.4 * lattice, -0.4 * lattice, -0.5 * lattice, 0.5 * lattice,
                        float(np.float32(3.4028234663852886e38)), -float(np.float32(3.4028234663852886e38)),
                        2.0 ** -149, -2.0 ** -149, np.inf, -np.inf, np.nan])
    y = np.concatenate([y, ties, near, special]).astype(np.float32).astype(np.float64)  # FP32 values
    fin = FinishSpec(NO_SNAP if snap_bits is None else snap_bits, alpha is not None,
                     0.0 if alpha is None else float(np.float32(alpha)))
    got = np.empty_like(y)
    finish_row(y, got, fin)
    want = np.array([finish(float(v), fin) for v in y])
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"first difference at {np.flatnonzero(~same)[0]}: {y[~same][0]!r}"
    if snap_bits is not None:  # a negative value that snaps to zero gives -0
        to_zero = (y < 0) & (got == 0)
        assert to_zero.any() and np.signbit(got[to_zero]).all()
