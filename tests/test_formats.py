"""Format descriptors decode every code exactly (FPS-FMT-1, FPS-FMT-6)."""

from fractions import Fraction

import pytest

from fpspec.formats import FORMATS, CodeKind, get_format


def test_e2m1_values():
    f = get_format("e2m1")
    pos = [f.decode_exact(c) for c in range(8)]
    assert pos == [Fraction(v) for v in (0, 0.5, 1, 1.5, 2, 3, 4, 6)]
    assert f.decode_exact(0x8) == 0 and f.kind(0x8) is CodeKind.ZERO


@pytest.mark.parametrize("name,max_code,max_value,min_sub", [
    ("ue5m3", 0xF7, 61440, Fraction(1, 2**17)),
    ("ue5m3fnu", 0xFE, 114688, Fraction(1, 2**17)),
    ("e4m3", 0x7E, 448, Fraction(1, 2**9)),
    ("e5m2", 0x7B, 57344, Fraction(1, 2**16)),
])
def test_extremes(name, max_code, max_value, min_sub):
    f = get_format(name)
    assert f.max_finite_code == max_code and f.max_finite == max_value
    assert f.min_subnormal == min_sub


def test_ue5m3_reserved_binade_is_nan():
    """FPS-FMT-6: 0xF8..0xFF of the seed UE5M3 are NaN; ue5m3fnu has only 0xFF."""
    f, fn = get_format("ue5m3"), get_format("ue5m3fnu")
    assert [f.kind(c) for c in range(0xF8, 0x100)] == [CodeKind.NAN] * 8
    assert [fn.kind(c) for c in range(0xF8, 0x100)] == [CodeKind.NORMAL] * 7 + [CodeKind.NAN]
    assert f.decode_exact(0x08) == Fraction(1, 2**14)


def test_ue8m0():
    f = get_format("ue8m0")
    assert f.decode_exact(0) == Fraction(1, 2**127) and f.decode_exact(254) == 2**127
    assert f.kind(255) is CodeKind.NAN and not f.has_zero


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].bits <= 8])
def test_finite_codes_are_ordered_by_magnitude(name):
    """The rounding core relies on positive codes being ordered by magnitude."""
    f = get_format(name)
    finite = [c for c in range(f.magnitude_mask + 1) if f.kind(c) not in (CodeKind.NAN, CodeKind.INF)]
    values = [f.decode_exact(c) for c in finite]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert finite == list(range(len(finite)))
