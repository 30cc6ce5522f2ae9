"""Range bounds of the target T (FPS-BND-*)."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from fpspec.bounds import range_bounds
from fpspec.cli import main


def test_headroom_ue5m3():
    """FPS-BND-1: U/T = 61440/448 = 960/7 = 137.142857... and 61440/2048 = 30, exactly."""
    assert range_bounds("ue5m3", 448).headroom == Fraction(960, 7)
    assert range_bounds("ue5m3", 2048).headroom == 30
    assert range_bounds("ue5m3fnu", 448).headroom == 256
    assert range_bounds("ue5m3fnu", 2048).headroom == 56
    assert range_bounds("ue4m3", 448).headroom == 1 == range_bounds("e4m3", 448).headroom
    assert range_bounds("ue8m0", 448).headroom == Fraction(2 ** 127, 448)


def test_min_nonzero_ratio_tie():
    """FPS-BND-2: scale code nonzero iff rho > s_min / (2T); for UE5M3 2^-18 / T, exclusive (the tie
    rounds to code 0); UE8M0 has no zero."""
    b = range_bounds("ue5m3", 448)
    assert b.min_nonzero_ratio == Fraction(1, 2 ** 18 * 448) and b.min_nonzero_exclusive
    assert range_bounds("ue4m3", 448).min_nonzero_ratio == Fraction(1, 2 ** 10 * 448)
    u = range_bounds("ue8m0", 1)
    assert u.min_nonzero_ratio == 0 and not u.min_nonzero_exclusive


def test_min_normal_ratio():
    """FPS-BND-3: scales are subnormal below rho = 2^emin / T (UE5M3: 2^-14 / T)."""
    assert range_bounds("ue5m3", 448).min_normal_ratio == Fraction(1, 2 ** 14 * 448)
    assert range_bounds("e4m3", 448).min_normal_ratio == Fraction(1, 2 ** 6 * 448)
    assert range_bounds("ue8m0", 2).min_normal_ratio == Fraction(1, 2 ** 128)


def test_bounds_agree_with_quantizer():
    """FPS-BND-1, FPS-BND-2: the figures are what the exact quantizer does at the edges."""
    import numpy as np

    from fpspec.quantization import quantize

    b = range_bounds("ue5m3", 448)
    # with g = T = 448 the block amax at the bound is rho * g = 2^-18 (a tie, code 0)
    assert b.min_nonzero_ratio * 448 == Fraction(1, 2 ** 18)
    x = np.zeros((1, 48), np.float32)
    x[0, 0] = 448.0
    x[0, 16] = 2.0 ** -18
    x[0, 32] = np.nextafter(np.float32(2.0 ** -18), np.float32(1))
    q = quantize(x, "ue5m3", impl="exact", zero_scale_rule=False)
    assert q.scales.tolist() == [[0xBE, 0x00, 0x01]]
    # headroom: held amax g = 7, block amax a_B = g * U / T = 960 asks for exactly U
    assert 7 * b.headroom == 960
    y = np.zeros((1, 16), np.float32)
    y[0, 0] = 960.0
    assert quantize(y, "ue5m3", amax=7.0, impl="exact").scales.tolist() == [[0xF7]]


def test_cli_text_and_json(capsys):
    """FPS-BND-4: `fpspec bounds` prints 137.14x and 30.00x; --json has the documented keys."""
    assert main(["bounds", "--scale-format", "ue5m3", "--target", "448"]) == 0
    assert "137.14x" in capsys.readouterr().out
    assert main(["bounds", "--scale-format", "ue5m3", "--target", "2048"]) == 0
    assert "30.00x" in capsys.readouterr().out
    assert main(["bounds", "--scale-format", "ue5m3", "--target", "448", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("scale_format", "target", "max_scale", "headroom", "min_nonzero_ratio", "min_normal_ratio"):
        assert key in d
    assert d["headroom_exact"] == "960/7" and d["max_scale"] == 61440.0
    assert d["min_nonzero_ratio_exact"] == "1/117440512"


@pytest.mark.parametrize("args", [["--scale-format", "ue5m3", "--target", "0"],
                                  ["--scale-format", "ue5m3", "--target", "abc"]])
def test_cli_bad_target(args, capsys):
    """FPS-BND-4: a bad T is a one-line error with exit status 2."""
    assert main(["bounds", *args]) == 2
    assert capsys.readouterr().err.count("\n") == 1
