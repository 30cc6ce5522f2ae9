"""Arguments of the conversion API: names, aliases, refusals before any element is read (FPS-RND-16).

Every bad argument raises :class:`FpspecError` (one line, naming what was given), never a
ValueError from an enum, a Numba TypingError or a silent wrong code.
"""

from __future__ import annotations

import numpy as np
import pytest

from fpspec.choices import MODE_ALIASES, Policies, RoundingMode, check_nbits, validate_policies
from fpspec.cli import main
from fpspec.convert import decode, encode
from fpspec.errors import FpspecError
from fpspec.exact.rounding import encode_exact, round_to_code
from fpspec.fast.rounding import encode_fast
from fpspec.formats import FORMATS, get_format

X = np.array([0.3, -1.7, 2.5, 100.0], dtype=np.float32)


def test_rz_is_an_alias_of_rtz():
    """FPS-RND-16: ``rz`` (the GEMM models' name) is accepted wherever a mode is parsed; ``rtz``
    stays the canonical name."""
    assert RoundingMode.parse("rz") is RoundingMode.RTZ
    assert RoundingMode.parse("rz").value == "rtz"
    assert MODE_ALIASES["rz"] is RoundingMode.RTZ
    want = [0, 0xB, 4, 7]  # 0.3 -> 0, -1.7 -> -1.5 (0x8 | 3), 2.5 -> 2, 100 -> 6 (sat)
    assert encode(X, "e2m1", "rz").tolist() == encode(X, "e2m1", "rtz").tolist() == want
    assert encode(X, "e2m1", "rz", impl="exact").tolist() == want
    assert round_to_code(1.99, "e4m3", "rz") == round_to_code(1.99, "e4m3", "rtz") == 0x3F


def test_rz_on_the_command_line(tmp_path, capsys):
    """FPS-RND-16: ``fpspec encode --rounding rz`` writes the rtz codes."""
    np.save(tmp_path / "x.npy", X)
    assert main(["encode", str(tmp_path / "x.npy"), "--format", "e2m1", "--rounding", "rz",
                 "--out", str(tmp_path / "c.npy")]) == 0
    assert np.load(tmp_path / "c.npy").tolist() == [0, 0xB, 4, 7]


@pytest.mark.parametrize("kwargs,match", [
    (dict(fmt=5), r"a format is a name .* got 5 of type int"),
    (dict(fmt=None), r"a format is a name .* got None"),
    (dict(fmt=["e2m1"]), r"a format is a name .* got \['e2m1'\] of type list"),
    (dict(fmt="e9m9"), r"unknown format 'e9m9'; known: e2m1"),
    (dict(rounding=3), r"a rounding mode is a name .* got 3 of type int"),
    (dict(rounding=RoundingMode), r"a rounding mode is a name"),
    (dict(rounding="nearest-even"), r"unknown rounding mode 'nearest-even'; known: rne.*rz = rtz"),
    (dict(rounding="sr", nbits=8.0), r"nbits must be an integer in 1\.\.32, got 8\.0 of type float"),
    (dict(rounding="sr", nbits=0), r"nbits must be in 1\.\.32, got 0"),
    (dict(rounding="sr", nbits=-3), r"nbits must be in 1\.\.32, got -3"),
    (dict(rounding="sr", nbits=10 ** 12), r"nbits must be in 1\.\.32, got 1000000000000"),
    (dict(rounding="sr", nbits=33), r"nbits must be in 1\.\.32, got 33"),
    (dict(rounding="sr", nbits="8"), r"nbits must be an integer .* of type str"),
    (dict(rounding="sr", nbits=True), r"nbits must be an integer .* of type bool"),
    (dict(overflow="clamp"), r"unknown overflow policy 'clamp'; known: sat, nonfinite, error"),
    (dict(nan=0), r"unknown nan policy 0; known: error"),
    (dict(impl="slow"), r"impl must be 'fast' or 'exact' or 'torch', got 'slow'"),
    (dict(impl=1), r"impl must be 'fast' or 'exact' or 'torch', got 1"),
])
@pytest.mark.parametrize("impl", ["fast", "exact"])
def test_bad_arguments_raise_fpspec_error(kwargs, match, impl):
    """FPS-RND-16: a bad format, mode, width, policy or impl is an FpspecError with a clear message,
    on both paths, before any element is read."""
    kw = dict(kwargs)
    fmt = kw.pop("fmt", "e2m1")
    kw.setdefault("impl", impl)
    rounding = kw.pop("rounding", "rne")
    with pytest.raises(FpspecError, match=match):
        encode(X, fmt, rounding, rbits=np.zeros(X.shape, np.uint8), **kw)


@pytest.mark.parametrize("fmt,policy,match", [
    ("ue8m0", dict(nan="zero"), r"NaN policy 'zero' is impossible for ue8m0: it has no zero \(code 0 is 2\^-127\)"),
    ("e2m1", dict(nan="nan"), r"NaN policy 'nan' is impossible for e2m1: it has no NaN code"),
    ("e2m1", dict(nan="quiet"), r"NaN policy 'quiet' is impossible for e2m1"),
    ("ue4m3", dict(nan="flipped-zero"), r"NaN policy 'flipped-zero' is impossible for ue4m3: it has no signed zero"),
    ("ue8m0", dict(nan="flipped-zero"), r"NaN policy 'flipped-zero' is impossible for ue8m0"),
    ("ue8m0", dict(negative="zero"), r"negative policy 'zero' is impossible for ue8m0: it has no zero"),
    ("e2m1", dict(overflow="nonfinite"), r"overflow policy 'nonfinite' is impossible for e2m1"),
])
def test_impossible_policies_are_refused_up_front(fmt, policy, match):
    """FPS-RND-16: a policy the format cannot honour is refused before any element is read, by
    the API, both paths and the CLI -- even for inputs where it would never apply.  (Before
    this, ``encode --nan zero`` into ue8m0 gave code 0 = 2^-127 for a NaN.)"""
    finite = np.array([1.0, 2.0], dtype=np.float32)
    for impl in ("fast", "exact"):
        with pytest.raises(FpspecError, match=match):
            encode(finite, fmt, impl=impl, **policy)
    pol = Policies(overflow=policy.get("overflow", "sat"), nan=policy.get("nan", "error"),
                   negative=policy.get("negative", "error"))  # names are parsed to the enums
    for fn in (encode_fast, encode_exact):
        with pytest.raises(FpspecError, match=match):
            fn(finite, fmt, policies=pol)
    with pytest.raises(FpspecError, match=match):
        round_to_code(1.0, fmt, policies=pol)
    with pytest.raises(FpspecError, match=match):
        validate_policies(fmt, pol)


def test_impossible_policy_on_the_command_line(tmp_path, capsys):
    """FPS-RND-16: ``fpspec encode --nan zero --format ue8m0`` exits 2 with the one-line message
    and writes nothing."""
    np.save(tmp_path / "x.npy", np.array([np.nan, 1.0], np.float32))
    code = main(["encode", str(tmp_path / "x.npy"), "--format", "ue8m0", "--nan", "zero",
                 "--out", str(tmp_path / "c.npy")])
    err = capsys.readouterr().err
    assert code == 2 and "NaN policy 'zero' is impossible for ue8m0" in err
    assert not (tmp_path / "c.npy").exists()


def test_rne_bits_is_refused_where_undefined():
    """FPS-RND-15, FPS-RND-16: rne-bits is defined for formats with a mantissa field and
    subnormals (all but ue8m0) and for ue8m0; every predefined format accepts it."""
    for f in FORMATS.values():
        encode(np.array([1.0], np.float32), f, "rne-bits", zero="nan" if not f.has_zero else None)
    from fpspec.formats import FloatFormat, Specials

    odd = FloatFormat("e3m2-nosub", 3, 2, 3, True, False, Specials.NONE)
    with pytest.raises(FpspecError, match="rne-bits is defined for"):
        encode(np.array([1.0]), odd, "rne-bits")
    with pytest.raises(FpspecError, match="rne-bits is defined for"):
        round_to_code(1.0, odd, "rne-bits")


def test_check_nbits_accepts_numpy_integers():
    """FPS-RND-16: an ``np.int64`` width is an integer like any other."""
    assert check_nbits(np.int64(16)) == 16 and check_nbits(np.uint8(1)) == 1


@pytest.mark.slow
def test_decode_has_the_same_impl_argument():
    """FPS-RND-16, FPS-FMT-3: ``decode(codes, fmt, impl=...)`` as ``encode``; both give the same
    float64 bits (signed zeros, Inf, NaN sign and binary32 NaN payloads included), and refuse
    bad codes and an unknown impl alike."""
    for name, f in FORMATS.items():
        codes = (np.arange(f.num_codes, dtype=f.storage_dtype) if f.bits <= 16 else
                 np.array([0, 0x80000000, 1, 0x7F800000, 0xFF800000, 0x7F800001, 0xFFC00001, 0x7FFFFFFF,
                           0x3F800000, 0x00800000], dtype=np.uint32))
        fast = decode(codes, name)
        exact = decode(codes, name, impl="exact")
        assert np.array_equal(fast.view(np.uint64), exact.view(np.uint64)), name
    assert decode(np.array([0x7F800001], np.uint32), "fp32").view(np.uint64)[0] == 0x7FF8000020000000
    for impl in ("fast", "exact"):
        with pytest.raises(FpspecError, match=r"code 16 out of range for e2m1.*index \[1\]"):
            decode(np.array([1, 16], np.uint8), "e2m1", impl=impl)
        with pytest.raises(FpspecError, match="unsigned integer"):
            decode(np.array([1.0]), "e2m1", impl=impl)
    with pytest.raises(FpspecError, match="impl must be"):
        decode(np.array([1], np.uint8), "e2m1", impl="fastest")
    with pytest.raises(FpspecError, match="a format is a name"):
        decode(np.array([1], np.uint8), 4)
    assert get_format("e2m1").decode_exact(0xF) == -6


def test_decode_impl_on_the_command_line(tmp_path):
    """FPS-RND-16: ``fpspec decode --impl exact`` writes the same values as the default."""
    np.save(tmp_path / "c.npy", np.arange(256, dtype=np.uint8))
    for impl in ("fast", "exact"):
        assert main(["decode", str(tmp_path / "c.npy"), "--format", "e4m3", "--impl", impl,
                     "--out", str(tmp_path / f"{impl}.npy")]) == 0
    a, b = np.load(tmp_path / "fast.npy"), np.load(tmp_path / "exact.npy")
    assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
