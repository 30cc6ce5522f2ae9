"""FPS-GEMM-10: the fast path equals the exact spec bit for bit on wide-range operands.

FP32 outputs are compared as uint32 bits; operands span wide exponent ranges, so that
window truncation, group rounding and cross-group rounding all show (narrow-range or
BF16-rounded comparisons would hide model differences)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from fpspec.matmul import gemm
from fpspec.named_models import get_model
from fpspec.presets import PRESETS

from gemm_helpers import random_quantized, wide_codes


def _same_bits(x: np.ndarray, y: np.ndarray) -> None:
    assert x.dtype == y.dtype and x.dtype in (np.float32, np.float16)
    view = np.uint16 if x.dtype == np.float16 else np.uint32
    bx, by = x.view(view), y.view(view)
    bad = np.flatnonzero(bx != by)
    assert bad.size == 0, (f"{bad.size} of {bx.size} differ; first at {np.unravel_index(bad[0], x.shape)}: "
                           f"exact {x.flat[bad[0]]!r} fast {y.flat[bad[0]]!r}")


def _both(a, bt, model, **kw):
    """Exact and fast bits of one GEMM; a preset runs as its parameters (a GemmModel), so that its
    chain is compared on every operand kind, not only those of its operand contract (FPS-GEMM-25)."""
    model = get_model(model) if isinstance(model, str) else model
    ye = gemm(a, bt, model, impl="exact", **kw)
    yf = gemm(a, bt, model, impl="fast", **kw)
    _same_bits(ye, yf)
    return ye


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2", "fp16", "bf16"])
def test_fpsgemm10_codes_every_preset(fmt):
    """FPS-GEMM-10: every preset, every code format, K = 128 (whole groups), wide range."""
    rng = np.random.default_rng(10 + len(fmt))
    a = wide_codes(rng, (3, 128), fmt)
    bt = wide_codes(rng, (4, 128), fmt)
    outs = {name: _both(a, bt, name, fmt=fmt) for name in PRESETS}
    # the comparison is not vacuous: the presets disagree on these operands
    assert len({o.tobytes() for o in outs.values()}) >= 4


_VARIANTS = [
    dict(group_size=8, window_bits=5, fused=True, group_rounding="none", accumulate_rounding="rne"),
    dict(group_size=8, window_bits=5, below_window="floor"),
    dict(group_size=16, window_bits=-3, fused=True, group_rounding="none"),
    dict(group_size=4, window_bits=20, fused=False, group_rounding="rz", accumulate_rounding="rne",
         promotion_interval=12, promotion_rounding="rz"),
    dict(group_size=4, window_bits=10, fused=False, group_rounding="none"),
    dict(group_size=32, window_bits=13, align_exponent_floor=-3, fused=True, group_rounding="none"),
    dict(group_size=3, fused=True, group_rounding="none", snap_bits=3, output_format="bf16"),
    dict(group_size=None, group_rounding="rz", accumulate_rounding="rz", snap_bits=-2),
    dict(group_size=5, product_exponent="operands", window_bits=9, require_full_groups=False),
]


@pytest.mark.parametrize("variant", range(len(_VARIANTS)))
@pytest.mark.parametrize("fmt", ["e4m3", "bf16"])
def test_fpsgemm10_codes_parameter_variants(fmt, variant):
    """FPS-GEMM-10: non-preset parameter combinations (floor truncation, negative windows,
    RZ promotion, partial groups, snap, BF16 output) agree too; K = 72 leaves partial groups."""
    rng = np.random.default_rng(100 + variant)
    a = wide_codes(rng, (3, 72), fmt, span=20)
    bt = wide_codes(rng, (3, 72), fmt, span=20)
    _both(a, bt, get_model("seed-probe-matched", **_VARIANTS[variant]), fmt=fmt)


def test_fpsgemm10_specials_and_overflow():
    """FPS-GEMM-10, FPS-GEMM-2: NaN, Inf and FP32 overflow take the same path in both."""
    rng = np.random.default_rng(7)
    a = wide_codes(rng, (4, 64), "bf16", span=60)
    bt = wide_codes(rng, (4, 64), "bf16", span=60)
    a[0, 5] = 0x7F80   # +inf
    a[1, 9] = 0x7FC0   # nan
    a[2, 3] = 0xFF80   # -inf
    bt[2, 3] = 0x0000  # -inf x 0 = nan
    a[3, :8] = 0x7F7F  # bf16 max: products overflow FP32
    bt[3, :8] = 0x7F7F
    for name in ("km-h100-bf16", "seed-probe-matched", "exact", "decoded-fp32", "km-h100-fp8-promote128"):
        y = _both(a, bt, name, fmt="bf16")
        assert np.isnan(y[1]).all() and np.isnan(y[2, 2])
    assert np.isinf(gemm(a, bt, "exact", fmt="bf16")[3]).all()


@pytest.mark.slow
@pytest.mark.parametrize("scale_format,block,tile", [
    ("ue4m3", 16, "1xB"), ("ue4m3", 16, "BxB"), ("ue5m3", 16, "1xB"), ("ue5m3fnu", 32, "1xB"),
    ("ue8m0", 32, "1xB"), ("ue5m3", 16, "BxB"),
])
def test_fpsgemm10_quantized_presets(scale_format, block, tile):
    """FPS-GEMM-10: E2M1 operands with every scale format (full code range: UE5M3 and
    UE8M0 spans exceed int64 and take the multi-limb fallback), 1-D and 2-D tiles."""
    rng = np.random.default_rng(zlib.crc32(f"{scale_format}{block}{tile}".encode()))
    a = random_quantized(rng, 16 if tile == "BxB" else 3, 128, scale_format, block, tile)
    bt = random_quantized(rng, 2, 128, scale_format, block, "1xB", amax=5.0)
    names = ["seed-probe-matched", "seed-probe-matched-nosnap", "exact", "decoded-fp32", "km-h100-fp8-promote128"]
    for name in names:
        _both(a, bt, name)
    for over in (dict(scale_placement="block", window_bits=13, fused=True),
                 dict(scale_placement="block", group_size=32, window_bits=4),
                 dict(alpha_source="decode-scales", alpha_rounding="twice"),
                 dict(alpha_rounding="twice"), dict(output_format="bf16")):
        _both(a, bt, get_model("seed-probe-matched", **over))


def test_fpsgemm10_quantized_nan_scale():
    """FPS-GEMM-10, FPS-GEMM-2: a NaN block scale makes exactly the outputs that use it NaN."""
    rng = np.random.default_rng(3)
    a = random_quantized(rng, 3, 64, "ue4m3", 16)
    bt = random_quantized(rng, 2, 64, "ue4m3", 16)
    a.scales[1, 2] = 0x7F
    for name in ("seed-probe-matched", "km-h100-fp8"):
        y = _both(a, bt, name)
        assert np.isnan(y[1]).all() and not np.isnan(y[[0, 2]]).any()


def test_fpsgemm10_fp32_add_and_integer_rounding_primitives():
    """FPS-GEMM-10: the fast FP32 add-and-round (TwoSum) and integer-to-FP32 rounding equal
    the exact rounding of the exact sum, on wide gaps, ties, subnormals and overflow."""
    from fractions import Fraction

    from fpspec.exact.binary32 import round_fp32
    from fpspec.fast.fp32 import py_add_round as add2_round_fp32
    from fpspec.fast.fp32 import py_round_acc_int as round_int_to_fp32

    rng = np.random.default_rng(2)
    f32max = float(np.finfo(np.float32).max)
    xs = [1.0, -1.0, 2.0**-149, -(2.0**-149), 2.0**-126, f32max, -f32max, 3.0, 1 + 2.0**-23,
          2.0**127, 0.0]
    for _ in range(3000):
        e = int(rng.integers(-149, 128))
        xs.append(float(np.float32(rng.choice([-1, 1]) * (1 + rng.random()) * 2.0**e)))
    xs = [x for x in xs if np.isfinite(x)]
    pairs = [(xs[i], xs[j]) for i, j in rng.integers(0, len(xs), (4000, 2))]
    # ties and near-ties: y just below, at and above half an ulp of x
    for x in xs[:400]:
        if x == 0.0:
            continue
        with np.errstate(over="ignore"):
            ulp = float(np.spacing(np.float32(abs(x))))
        if not np.isfinite(ulp):
            continue
        for y in (ulp / 2, -ulp / 2, ulp / 2 + ulp / 2**20, ulp / 2 - ulp / 2**20, ulp / 2**30):
            if np.float32(y) == y:
                pairs.append((x, y))
    for x, y in pairs:
        ex = Fraction(x) + Fraction(y)
        for mode in ("rne", "rz"):
            want = round_fp32(ex, mode)
            want = float(want)
            got = add2_round_fp32(x, y, mode)
            assert np.float32(got).view(np.uint32) == np.float32(want).view(np.uint32), (x, y, mode)
    for _ in range(3000):
        s = int(rng.integers(-(1 << 62), 1 << 62)) >> int(rng.integers(0, 62))
        e = int(rng.integers(-260, 160))
        for mode in ("rne", "rz"):
            want = float(round_fp32(Fraction(s) * Fraction(2) ** e, mode))
            got = round_int_to_fp32(s, e, mode)
            assert np.float32(got).view(np.uint32) == np.float32(want).view(np.uint32), (s, e, mode)


_ACC_SPLIT_VARIANTS = [
    dict(accumulate_bits=13),
    dict(accumulate_bits=13, promotion_interval=64),
    dict(accumulate_bits=0, accumulate_rounding="rne"),
    dict(accumulate_bits=7, accumulate_rounding="rne", fused=False, group_rounding="rz", window_bits=None),
    dict(split_k=64),
    dict(split_k=96, promotion_interval=64, accumulate_bits=13),
    dict(split_k=32, group_size=None, window_bits=None, fused=False, group_rounding="none"),
    dict(split_k=160, accumulate_bits=11, snap_bits=12, output_format="bf16"),
]


@pytest.mark.slow
@pytest.mark.parametrize("variant", range(len(_ACC_SPLIT_VARIANTS)))
@pytest.mark.parametrize("fmt", ["e4m3", "fp16", "bf16"])
def test_fpsgemm13_fpsgemm14_accumulate_bits_and_split_k(fmt, variant):
    """FPS-GEMM-13, FPS-GEMM-14, FPS-GEMM-10: kept accumulator bits (RZ and RNE, down to 0)
    and split K (slices with their own promotion, a short last slice, one group per slice,
    snap and BF16 after the slice sum) agree bit for bit, on km-h100-fp8 (fused window)
    and decoded-fp32 (sequential chain) bases; K = 224 leaves a short last slice."""
    rng = np.random.default_rng(300 + variant + 7 * len(fmt))
    a = wide_codes(rng, (3, 224), fmt, span=30)
    bt = wide_codes(rng, (4, 224), fmt, span=30)
    over = _ACC_SPLIT_VARIANTS[variant]
    outs = []
    for base in ("km-h100-fp8", "decoded-fp32"):
        b = dict(over)
        if base == "decoded-fp32" and b.get("group_size", 1) is None:
            b.pop("group_size")
        try:
            m = get_model(base, require_full_groups=False, **b)
        except Exception:
            m = get_model(base, **{k: v for k, v in b.items() if k in ("accumulate_bits", "split_k")})
        outs.append(_both(a, bt, m, fmt=fmt))
    # not vacuous: the two bases disagree on these operands (BF16 output may hide it)
    assert over.get("output_format") == "bf16" or not np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32))


def test_fpsgemm14_quantized_split_k():
    """FPS-GEMM-14: split K on E2M1 operands (slices of whole scale blocks) agrees, and a
    slice that cuts a scale block is an FpspecError."""
    from fpspec.errors import FpspecError

    rng = np.random.default_rng(14)
    a = random_quantized(rng, 3, 256, "ue5m3", 16, "1xB")
    bt = random_quantized(rng, 2, 256, "ue5m3", 16, "1xB", amax=5.0)
    for name, over in (("seed-probe-matched", dict(split_k=128)),
                       ("km-h100-fp8-promote128", dict(split_k=96)),
                       ("seed-probe-matched", dict(split_k=64, scale_placement="block", window_bits=13,
                                                   fused=True))):
        _both(a, bt, get_model(name, **over))
    with pytest.raises(FpspecError, match="block size"):
        gemm(a, bt, "km-h100-fp8", split_k=8, group_size=8)


def test_fpsgemm13_fast_bits_rounding_primitives():
    """FPS-GEMM-13, FPS-GEMM-10: the fast rounding to b < 23 fraction bits (of an integer
    times 2^e, and of a TwoSum pair) equals the exact round_acc: ties, binade bottoms
    (RZ steps down half a quantum there), subnormal range, overflow to Inf / the RZ clamp."""
    from fractions import Fraction

    from fpspec.exact.binary32 import round_acc
    from fpspec.fast.fp32 import py_add_round as add2_round_fp32
    from fpspec.fast.fp32 import py_round_acc_int as round_int_to_fp32

    rng = np.random.default_rng(13)
    for bits in (0, 5, 13, 22):
        cases = [(1 << bits, 0), ((1 << bits) + 1, -1), (3, -1), ((1 << 40) + 1, 90), (1, -140),
                 (3, -141), ((1 << 62) - 1, 66), ((1 << 24) - 1, 104), (1, 128)]
        for _ in range(1500):
            s = int(rng.integers(-(1 << 62), 1 << 62)) >> int(rng.integers(0, 62))
            cases.append((s, int(rng.integers(-220, 120))))
        for s, e in cases:
            for mode in ("rne", "rz"):
                want = round_acc(Fraction(s) * Fraction(2) ** e, mode, bits)
                got = round_int_to_fp32(s, e, mode, bits)
                assert np.float32(float(want)).view(np.uint32) == np.float32(got).view(np.uint32), \
                    (s, e, mode, bits)
        xs = [float(np.float32(rng.choice([-1, 1]) * (1 + rng.random()) * 2.0 ** int(rng.integers(-149, 128))))
              for _ in range(800)]
        xs += [2.0 ** 127, -(2.0 ** -126), 1.0, 2.0 ** -149]
        xs = [x for x in xs if np.isfinite(x)]
        pairs = [(xs[i], xs[j]) for i, j in rng.integers(0, len(xs), (1500, 2))]
        for x in xs[:200]:
            q = 2.0 ** (max(np.frexp(x)[1] - 1, -126) - bits)
            for y in (q / 2, -q / 2, q / 2 ** 20, -(q / 2 ** 20), 2.0 ** -149, -(2.0 ** -149)):
                if np.float32(y) == y:
                    pairs.append((x, y))
        for x, y in pairs:
            for mode in ("rne", "rz"):
                want = round_acc(Fraction(x) + Fraction(y), mode, bits)
                got = add2_round_fp32(x, y, mode, bits)
                assert np.float32(float(want)).view(np.uint32) == np.float32(got).view(np.uint32), \
                    (x, y, mode, bits)
