"""The floor and ceiling of a binary32 log2 (FPS-BLK-22): exact rule, generated tables, torch's log2."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from fpspec.exact.log2 import derive_counts, float_log2_ceil, float_log2_floor, rn32_log2_is
from fpspec.fast.log2 import ABOVE_COUNTS, BELOW_COUNTS, float_log2_ceil_f32, float_log2_floor_f32


def _f(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint32).view(np.float32)[0])


def _near_powers_of_two(width: int) -> np.ndarray:
    """Bit patterns within ``width`` of bits(2^k) for every k, and the values just below FLT_MAX."""
    out = set()
    for k in range(-149, 128):
        b = int(np.array([2.0 ** k], dtype=np.float32).view(np.uint32)[0])
        out.update(range(max(1, b - width), min(0x7F800000, b + width + 1)))
    out.update(range(0x7F800000 - width, 0x7F800000))
    return np.array(sorted(out), dtype=np.uint32)


def test_fps_blk_22_tables_are_derived_from_the_exact_rule():
    """FPS-BLK-22: the fast path's generated tables equal the counts derived again here from the
    exact rule (rational bounds on ln, no libm), for every k."""
    below, above = derive_counts()
    assert tuple(below[k] for k in sorted(below)) == BELOW_COUNTS
    assert tuple(above[k] for k in sorted(above)) == ABOVE_COUNTS
    # none next to 1, 2, 4, 0.5; for |k| >= 64 (normal range) 44 below and 22 above, except on the side of
    # +-64 where the binary32 spacing of log2 x halves (below 64, above -64): 22 and 11
    assert [below[k] for k in (-1, 0, 1, 2)] == [0, 0, 0, 0] and below[3] == 1 and below[-2] == 1
    assert all(below[k] == 44 for k in [*range(65, 129), *range(-125, -63)]) and below[64] == 22
    assert all(above[k] == 22 for k in [*range(64, 128), *range(-125, -64)]) and above[-64] == 11
    assert [above[k] for k in range(-4, 4)] == [0] * 8 and above[4] == 1


def test_fps_blk_22_hand_derived_values():
    """FPS-BLK-22: x = 8(1 - 2^-24) (0x40FFFFFF): log2 x = 3 - 8.6e-8, within half the binary32
    spacing below 3 (2^-23 = 1.19e-7), so RN32 gives 3 and FL = 3 (floor(log2 x) = 2); one ulp lower,
    log2 x = 3 - 1.7e-7: FL = 2.  x = 16(1 + 2^-23) (0x41800001): log2 x = 4 + 1.7e-7, within half the
    spacing above 4 (2^-22 = 2.4e-7): CL = 4; the next value (4 + 3.4e-7) has CL = 5.  log2 FLT_MAX =
    128 - 1.7e-7 rounds to 128 (half the spacing below 128 is 2^-18), and so do the 44 largest values."""
    assert float_log2_floor(_f(0x40FFFFFF)) == 3 and float_log2_floor(_f(0x40FFFFFE)) == 2
    assert float_log2_ceil(_f(0x41800001)) == 4 and float_log2_ceil(_f(0x41800002)) == 5
    assert float_log2_floor(_f(0x7F7FFFFF)) == 128 and float_log2_floor(_f(0x7F7FFFD4)) == 128
    assert float_log2_floor(_f(0x7F7FFFD3)) == 127
    for v in (1.0, 2.0, 0.5, 2.0 ** -149, 2.0 ** 127):  # powers of two are exact
        k = Fraction(v).numerator.bit_length() - Fraction(v).denominator.bit_length()
        assert float_log2_floor(v) == float_log2_ceil(v) == k
    for top in (0.5, 1.0, 2.0, 4.0):  # no flip below 2^k for k in -1..2
        below = float(np.nextafter(np.float32(top), np.float32(0)))
        assert float_log2_floor(below) == float_log2_floor(top) - 1
    assert not rn32_log2_is(Fraction(_f(0x3F800001)), 0)  # RN32(log2 x) = 0 only for x = 1
    fast = float_log2_floor_f32(np.array([0x40FFFFFF, 0x40FFFFFE, 0x7F7FFFD4, 0x7F7FFFD3], np.uint32).view(np.float32))
    assert fast.tolist() == [3, 2, 128, 127]
    assert float_log2_ceil_f32(np.array([0x41800001, 0x41800002], np.uint32).view(np.float32)).tolist() == [4, 5]


def test_fps_blk_22_exact_equals_fast():
    """FPS-BLK-22: the exact rule and the table lookups agree next to every power of two (+-3 ulps
    and the table edges) and on random positive binary32 values, subnormals included."""
    below, above = derive_counts()
    bits = set(_near_powers_of_two(3).tolist())
    for k, n in below.items():
        top = 0x7F800000 if k == 128 else int(np.array([2.0 ** k], np.float32).view(np.uint32)[0])
        bits.update({top - n, top - n - 1})
    for k, n in above.items():
        base = int(np.array([2.0 ** k], np.float32).view(np.uint32)[0])
        bits.update({base + n, base + n + 1})
    rng = np.random.default_rng(22)
    bits.update(rng.integers(1, 0x7F800000, 1500).tolist())
    b = np.array(sorted(v for v in bits if 0 < v < 0x7F800000), dtype=np.uint32)
    x = b.view(np.float32)
    fl, cl = float_log2_floor_f32(x), float_log2_ceil_f32(x)
    for i in range(b.size):
        v = float(x[i])
        assert (float_log2_floor(v), float_log2_ceil(v)) == (fl[i], cl[i]), hex(int(b[i]))


def test_fps_blk_22_equals_floor_and_ceil_of_torch_log2():
    """FPS-BLK-22: floor and ceil of torch.log2 on CPU binary32 (not correctly rounded itself) equal
    FL and CL within 60 ulps of every power of two (where they differ from the exact floor and
    ceiling) and on 2^20 random positive binary32 values."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    b = np.concatenate([_near_powers_of_two(60),
                        rng.integers(1, 0x7F800000, 1 << 20, dtype=np.uint64).astype(np.uint32)])
    x = b.view(np.float32)
    t = torch.log2(torch.from_numpy(x.copy()))
    assert np.array_equal(torch.floor(t).numpy().astype(np.int64), float_log2_floor_f32(x))
    assert np.array_equal(torch.ceil(t).numpy().astype(np.int64), float_log2_ceil_f32(x))
    # and the rule is not the exact floor: 0x40FFFFFF is one of the values where they part
    assert float(torch.floor(torch.log2(torch.tensor([_f(0x40FFFFFF)], dtype=torch.float32)))[0]) == 3.0


def test_fast_log2_refuses_non_positive_values():
    with pytest.raises(ValueError):
        float_log2_floor_f32(np.array([0.0, 1.0], np.float32))
    with pytest.raises(ValueError):
        float_log2_ceil_f32(np.array([np.inf], np.float32))
