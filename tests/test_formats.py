"""Format descriptors decode every code exactly (FPS-FMT-1, FPS-FMT-6)."""

from fractions import Fraction

import pytest

from fpspec.formats import FORMATS, CodeKind, get_format


def test_e2m1_values():
    """FPS-FMT-3: the E2M1 codebook."""
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
    """FPS-FMT-1: derived extremes."""
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
    """FPS-FMT-3: UE8M0 has no zero; 0xFF is NaN."""
    f = get_format("ue8m0")
    assert f.decode_exact(0) == Fraction(1, 2**127) and f.decode_exact(254) == 2**127
    assert f.kind(255) is CodeKind.NAN and not f.has_zero


@pytest.mark.parametrize("name", [n for n in FORMATS if FORMATS[n].bits <= 8])
def test_finite_codes_are_ordered_by_magnitude(name):
    """FPS-FMT-7: the rounding core relies on positive codes being ordered by magnitude."""
    f = get_format(name)
    finite = [c for c in range(f.magnitude_mask + 1) if f.kind(c) not in (CodeKind.NAN, CodeKind.INF)]
    values = [f.decode_exact(c) for c in finite]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert finite == list(range(len(finite)))


def test_predefined_table():
    """FPS-FMT-4: the predefined formats and their parameters, as the docs table states."""
    want = {  # name: (bits, E, M, bias, signed, subnormals, specials)
        "e2m1": (4, 2, 1, 1, True, True, "none"), "e4m3": (8, 4, 3, 7, True, True, "fn"),
        "ue4m3": (7, 4, 3, 7, False, True, "fn"),
        "ue5m3": (8, 5, 3, 15, False, True, "reserved-binade-nan"),
        "ue5m3fnu": (8, 5, 3, 15, False, True, "fn"), "ue8m0": (8, 8, 0, 127, False, False, "fn"),
        "e5m2": (8, 5, 2, 15, True, True, "ieee"), "fp16": (16, 5, 10, 15, True, True, "ieee"),
        "bf16": (16, 8, 7, 127, True, True, "ieee"), "fp32": (32, 8, 23, 127, True, True, "ieee"),
        "e4m3fnuz": (8, 4, 3, 8, True, True, "fnuz"), "e5m2fnuz": (8, 5, 2, 16, True, True, "fnuz"),
    }
    got = {n: (f.bits, f.exp_bits, f.man_bits, f.bias, f.signed, f.subnormals, f.specials.value)
           for n, f in FORMATS.items()}
    assert got == want
    assert get_format("fp16").max_finite == 65504 and get_format("bf16").min_subnormal == Fraction(1, 2**133)
    assert get_format("e5m2").min_subnormal == Fraction(1, 2**16)


def test_specials_rules():
    """FPS-FMT-2: which codes are Inf / NaN under each rule."""
    kinds = lambda name: [get_format(name).kind(c) for c in range(get_format(name).num_codes)]
    assert CodeKind.NAN not in kinds("e2m1") and CodeKind.INF not in kinds("e2m1")
    e5m2 = get_format("e5m2")
    assert [e5m2.kind(c) for c in (0x7C, 0x7D, 0x7E, 0x7F, 0xFC)] == [CodeKind.INF] + [CodeKind.NAN] * 3 + [CodeKind.INF]
    assert kinds("e4m3").count(CodeKind.NAN) == 2 and kinds("e4m3").count(CodeKind.INF) == 0
    assert kinds("ue5m3").count(CodeKind.NAN) == 8 and kinds("ue5m3fnu").count(CodeKind.NAN) == 1


def test_ue4m3_is_a_seven_bit_code():
    """FPS-FMT-5: ue4m3 codes 0x00..0x7F equal the E4M3 bytes with sign 0; 0x80.. are refused."""
    import numpy as np

    from fpspec.convert import decode, encode
    from fpspec.errors import FpspecError

    u, e = get_format("ue4m3"), get_format("e4m3")
    assert u.num_codes == 128 and u.storage_dtype == "uint8"
    for c in range(128):
        a, b = u.decode_exact(c), e.decode_exact(c)
        assert a == b or (a != a and b != b)
    x = np.array([0.001, 1.0, 448.0, 1e6], np.float32)
    assert encode(x, "ue4m3").tolist() == encode(x, "e4m3", overflow="sat").tolist()
    with pytest.raises(FpspecError, match="out of range"):
        decode(np.array([0x80], np.uint8), "ue4m3")
    with pytest.raises(ValueError):
        u.decode_exact(0x80)


def test_nan_codes_keep_sign_and_negative_zero():
    """FPS-FMT-3: -0 decodes to -0.0 in the fast table; NaN codes carry their sign bit."""
    import math

    from fpspec.fast.rounding import decode_table

    e4 = get_format("e4m3")
    assert math.copysign(1.0, e4.decode_exact(0xFF)) == -1.0
    assert math.copysign(1.0, e4.decode_exact(0x7F)) == 1.0
    assert math.copysign(1.0, decode_table("e4m3")[0x80]) == -1.0


def test_default_policy_table_in_docs():
    """FPS-RND-9, FPS-RND-10, FPS-RND-11, FPS-RND-12: docs/rounding.rst's table of defaults is
    what default_policies returns."""
    import pathlib
    import re

    from fpspec.choices import POLICY_RATIONALE, default_policies

    text = (pathlib.Path(__file__).parent.parent / "docs" / "rounding.rst").read_text()
    rows = re.findall(r"^``(\w+)``\s+(\w+)\s+(\w+)\s+(\w+)\s+(\w+)\s*$", text, re.M)
    assert {r[0] for r in rows} == set(FORMATS) == set(POLICY_RATIONALE)
    for name, overflow, nan, negative, zero in rows:
        p = default_policies(name)
        assert (p.overflow.value, p.nan.value, p.negative.value, p.zero.value) == (overflow, nan, negative, zero)


@pytest.mark.parametrize("name,max_value,min_sub,emin", [
    ("e4m3fnuz", 240, Fraction(1, 2**10), -7),
    ("e5m2fnuz", 57344, Fraction(1, 2**17), -15),
])
def test_fnuz_formats(name, max_value, min_sub, emin):
    """FPS-FMT-8: 0x80 is the one NaN, there is no Inf and no -0; the top binade holds
    numbers; max finite 0x7F."""
    f = get_format(name)
    kinds = [f.kind(c) for c in range(256)]
    assert kinds.count(CodeKind.NAN) == 1 and f.kind(0x80) is CodeKind.NAN
    assert CodeKind.INF not in kinds and kinds.count(CodeKind.ZERO) == 1 and f.kind(0) is CodeKind.ZERO
    assert f.max_finite_code == 0x7F and f.max_finite == max_value and f.decode_exact(0xFF) == -max_value
    assert f.min_subnormal == min_sub and f.emin == emin and f.nan_code == 0x80
    assert not f.has_negative_zero and not f.has_inf and get_format("e4m3").has_negative_zero
