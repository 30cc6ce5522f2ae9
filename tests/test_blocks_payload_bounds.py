"""Binary32 payloads in 32-bit lanes (FPS-BLK-15, docs/scheme-ue5m3.rst "The fast path").

Under RNE with binary32 input the ``exact`` kernel counts the binary32 bounds of
``e2m1_rne_bounds`` below |x| instead of comparing |x| 6T with t d, and the binary32
profiles round y = fp32(x mult) with the encoder's steps (``rne_f32_magnitude``).  These
tests hold each bound to its definition with exact rationals, and both payload paths to the
exact spec on values at and next to every decision point of every block.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fpspec.fast.blocks import e2m1_rne_bounds
from fpspec.fast.rounding import decode_table
from fpspec.quantization import quantize

FLT_MAX = float(np.finfo(np.float32).max)
POINTS = [(Fraction(1, 4), True), (Fraction(3, 4), False), (Fraction(5, 4), True), (Fraction(7, 4), False),
          (Fraction(5, 2), True), (Fraction(7, 2), False), (Fraction(5), True)]


def _scale_values(name: str) -> np.ndarray:
    table = decode_table(name).copy()
    table[~np.isfinite(table)] = 0.0
    return table


def _next_up(v: float) -> float:
    return float(np.nextafter(np.float32(v), np.float32(np.inf)))


def _holds(v: float, h: Fraction, num: Fraction, strict: bool) -> bool:
    p = Fraction(v) * num
    return p <= h if strict else p < h


@pytest.mark.parametrize("target, g", [(448, 1.0), (448, 3.0e38), (448, 1.0e-30), (2048, 2688.0),
                                       (0.5, 7.25), (2.0 ** -20, 1.0), (2.0 ** 100, 1.5e-7), (6.0, 6.0)])
def test_each_bound_is_the_largest_binary32_on_its_side(target, g):
    """v_k is the largest binary32 v >= 0 with v 6T <= t_k d (ties down) or < t_k d (ties up), d = fp64(g s)."""
    stable = _scale_values("ue5m3")
    num = 6.0 * target
    bounds = e2m1_rne_bounds(stable, g, num)
    assert bounds.shape == (256, 7) and bounds.dtype == np.float32
    for c in range(256):
        d = g * float(stable[c])                       # the kernel's binary64 divisor
        for k, (t, strict) in enumerate(POINTS):
            h = Fraction(float(t) * d)                 # fp64(t d), as e2m1_magnitude forms it
            v = float(bounds[c, k])
            if v == -1.0:
                assert not _holds(0.0, h, Fraction(num), strict), (c, k)
                continue
            assert v >= 0 and _holds(v, h, Fraction(num), strict), (c, k, v)
            assert v == FLT_MAX or not _holds(_next_up(v), h, Fraction(num), strict), (c, k, v)


def test_bounds_known_values():
    """T = 448, g = 6T: d = 2688 s, so the bounds are t s / 1 on the binary32 grid."""
    stable = _scale_values("ue5m3")
    bounds = e2m1_rne_bounds(stable, 2688.0, 2688.0)
    one = int(np.flatnonzero(stable == 1.0)[0])
    below = np.nextafter(np.float32([0.75, 1.75, 3.5]), np.float32(0))
    assert bounds[one].tolist() == [0.25, float(below[0]), 1.25, float(below[1]), 2.5, float(below[2]), 5.0]
    assert bounds[0].tolist() == [0.0, -1.0, 0.0, -1.0, 0.0, -1.0, 0.0]  # d = 0 (the zero scale has its own rule)


def _decision_values(rng: np.random.Generator, x: np.ndarray, codes_scale: np.ndarray, target: float,
                     amax: float, scale_values: np.ndarray, fp32_mult: bool) -> np.ndarray:
    """x with the 15 elements after each block's first replaced by values at and next to a decision
    point of that block (the first keeps the block's amax, so its scale stays)."""
    out = x.copy()
    flat = out.reshape(-1, 16)
    for b in range(flat.shape[0]):
        s = Fraction(float(scale_values[codes_scale[b]]))
        if s == 0:
            continue
        for j in range(1, 16):
            t, _ = POINTS[rng.integers(0, 7)]
            if fp32_mult:  # y = fp32(x mult), mult about 6 / s G: x near t / mult
                q = t * s * Fraction(amax) / (6 * Fraction(target))
            else:          # |x| 6T = t g s
                q = t * Fraction(amax) * s / (6 * Fraction(target))
            v = np.float32(float(q))
            v = np.nextafter(v, np.float32(np.inf if rng.random() < 0.5 else 0)) if rng.random() < 0.5 else v
            flat[b, j] = v if rng.random() < 0.5 else -v
    return out


@pytest.mark.parametrize("scheme, profile, target, amax", [
    ("ue5m3", "exact", 448.0, None), ("ue5m3", "exact", 2048.0, 1000.5), ("ue5m3", "exact", 6.0, 2688.0),
    ("ue5m3", "exact", 0.5, None), ("nvfp4", "exact", None, None),
    ("ue5m3", "seed-fp32", 448.0, None), ("ue5m3", "seed-triton", 2048.0, None),
    ("nvfp4", "te-fp32", None, None), ("nvfp4", "te-kernel", None, None),
])
def test_payloads_at_decision_points_equal_the_exact_spec(scheme, profile, target, amax):
    rng = np.random.default_rng(abs(hash((scheme, profile, target, amax))) % 2 ** 32)
    x = (rng.standard_normal((64, 32)) * np.exp2(rng.integers(-8, 8, (64, 1)))).astype(np.float32)
    blocks = x.reshape(-1, 16)
    blocks[:, 0] = np.abs(blocks).max(axis=1) * rng.choice([-1.0, 1.0], blocks.shape[0])  # each block's max first
    kw = {"profile": profile}
    if target is not None:
        kw["target"] = target
    if amax is not None:
        kw["amax"] = amax
    first = quantize(x, scheme, **kw)
    held_amax = amax if amax is not None else float(np.abs(x).max())
    scale_name = "ue5m3" if scheme == "ue5m3" else "ue4m3"
    tgt = target if target is not None else 448.0
    y = _decision_values(rng, x, first.scales.reshape(-1), tgt, held_amax, _scale_values(scale_name),
                         profile != "exact")
    y[0, 1:3] = [0.0, -0.0]
    kw["amax"] = held_amax  # the same tensor amax as the first pass
    fast = quantize(y, scheme, **kw)
    exact = quantize(y, scheme, impl="exact", **kw)
    assert np.array_equal(fast.scales, first.scales)
    assert np.array_equal(fast.scales, exact.scales)
    diff = np.flatnonzero(fast.codes.reshape(-1) != exact.codes.reshape(-1))
    assert diff.size == 0, (diff[:5], y.reshape(-1)[diff[:5]], fast.codes.reshape(-1)[diff[:5]])
    # the decision points were reached: several magnitudes, ties included, in one array
    assert len(np.unique(fast.codes & 7)) >= 6
