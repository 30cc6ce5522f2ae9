"""Plain operand v1 files and QuantizedTensor row slices (FPS-OPD-1..7, docs/operands.rst)."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

import fpspec
from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.io import save_npz
from fpspec.plain_operand import ENTRIES, FORMAT_ID
from fpspec.quantized import QuantizedTensor


def _x(m: int, k: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)) * np.exp2(rng.integers(-6, 6, (m, 1)))).astype(np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype == np.float16 else np.uint32)


def _ascii(text: str, dtype=np.uint8) -> np.ndarray:
    return np.frombuffer(text.encode(), dtype=np.uint8).astype(dtype)


#: (scheme, quantize keywords, a GEMM model that takes the operands)
TENSORS = [
    ("ue5m3", {}, "seed-probe-matched"),
    ("ue5m3", {"profile": "seed-fp32", "target": 2048, "scale_format": "ue5m3fnu"}, "exact"),
    ("nvfp4", {}, "sm100-mxf4nvf4"),
    ("nvfp4", {"profile": "torchao-0.18", "tile": "BxB"}, "exact"),
    ("mxfp4", {"profile": "rceil"}, "sm100-mxf4nvf4"),
    ("mxfp8", {"payload_format": "e5m2"}, "exact"),
]


@pytest.mark.parametrize("scheme,kw,model", TENSORS)
def test_fps_opd_6_round_trip_keeps_dequantize_and_gemm_bits(tmp_path, scheme, kw, model):
    """FPS-OPD-6: a tensor written as plain operand v1 reads back with the same codes, scales,
    amax and tensor scales, and dequantizes and multiplies to the same bits (FPS-OPD-1: from_npz
    tells the file from fpspec's own by its format entry)."""
    qa, qb = fpspec.quantize(_x(32, 128, 1), scheme, **kw), fpspec.quantize(_x(16, 128, 2), scheme, **kw)
    qa.to_plain_npz(tmp_path / "a.npz")
    qb.to_plain_npz(tmp_path / "b.npz")
    ra, rb = QuantizedTensor.from_npz(tmp_path / "a.npz"), QuantizedTensor.from_npz(tmp_path / "b.npz")
    for q, r in ((qa, ra), (qb, rb)):
        assert np.array_equal(r.codes, q.codes) and np.array_equal(r.scales, q.scales)
        assert (r.scheme, r.profile, r.scale_format, r.payload_format, r.block, r.tile) == \
            (q.scheme, q.profile, q.scale_format, q.payload_format, q.block, q.tile)
        for name in ("amax", "encode_scale", "decode_scale"):
            assert np.float32(getattr(r, name)).view(np.uint32) == np.float32(getattr(q, name)).view(np.uint32)
        assert r.params.get("target") == q.params.get("target")
        assert np.array_equal(_bits(fpspec.dequantize(r)), _bits(fpspec.dequantize(q)))
    assert np.array_equal(_bits(fpspec.gemm(ra, rb, model)), _bits(fpspec.gemm(qa, qb, model)))
    z = np.load(tmp_path / "a.npz", allow_pickle=False)  # plain arrays only: no unicode, no objects
    assert set(z.files) <= set(ENTRIES) and all(z[k].dtype.kind in "uif" for k in z.files)


def test_fps_opd_6_codes_tensor_round_trip(tmp_path):
    """FPS-OPD-6: a tensor built from codes (scheme codes) writes no profile, amax or tensor scales."""
    q = fpspec.quantize(_x(16, 64), "nvfp4")
    c = QuantizedTensor.from_codes(q.codes, q.scales, payload_format="e2m1", scale_format="ue4m3", block=16)
    c.to_plain_npz(tmp_path / "c.npz")
    z = np.load(tmp_path / "c.npz")
    assert "profile" not in z.files and "amax" not in z.files
    r = QuantizedTensor.from_npz(tmp_path / "c.npz")
    assert r.scheme == "codes" and np.array_equal(r.codes, c.codes) and np.array_equal(r.scales, c.scales)
    assert np.array_equal(_bits(fpspec.gemm(r, r, "sm100-mxf4nvf4")), _bits(fpspec.gemm(c, c, "sm100-mxf4nvf4")))


def test_fps_opd_1_dequantize_reads_a_codes_file_as_gemm_does(tmp_path, capsys):
    """FPS-OPD-1: ``fpspec dequantize`` takes a plain file of scheme codes (it once said "unknown
    profile 'codes'"): each value is q s, rounded once to binary32, the values a GEMM multiplies;
    one past binary32 is refused, naming the formula, unless overflow='ieee'."""
    codes = np.array([[0x1, 0x2, 0xF, 0x9] * 4, [0x7, 0x0, 0x8, 0x3] * 4], np.uint8)  # 0.5 1 -6 -0.5; 6 0 -0 1.5
    c = QuantizedTensor.from_codes(codes, np.array([[0x40], [0x38]], np.uint8), payload_format="e2m1",
                                   scale_format="ue4m3", block=16)  # scales 2 and 1
    c.to_plain_npz(tmp_path / "c.npz")
    assert main(["dequantize", str(tmp_path / "c.npz"), "--out", str(tmp_path / "d.npy")]) == 0
    d = np.load(tmp_path / "d.npy")
    assert d.dtype == np.float32 and d[:, :4].tolist() == [[1.0, 2.0, -12.0, -1.0], [6.0, 0.0, -0.0, 1.5]]
    assert np.signbit(d[1, 2]) and np.array_equal(_bits(d), _bits(fpspec.dequantize(c)))
    ones = QuantizedTensor.from_codes(np.full((1, 16), 0x2, np.uint8), np.array([[0x38]], np.uint8),
                                      payload_format="e2m1", scale_format="ue4m3", block=16)
    assert fpspec.gemm(c, ones, "exact").reshape(-1).tolist() == [-40.0, 30.0] == d.sum(axis=1).tolist()
    big = QuantizedTensor.from_codes(np.full((1, 32), 0x7E, np.uint8), np.array([[254]], np.uint8),
                                     payload_format="e4m3", scale_format="ue8m0", block=32)  # 448 * 2^127
    with pytest.raises(FpspecError, match=r"element \[0, 0\] is inf: q s exceeds binary32"):
        fpspec.dequantize(big)
    assert np.isposinf(fpspec.dequantize(big, overflow="ieee")).all()


def _cnpy_style(q: QuantizedTensor, **change) -> dict:
    """What a C++ writer with cnpy::npz_save makes: names as std::vector<char> (int8), numbers of
    shape (1,), amax as the float32's uint32 bits, block an int64."""
    arrays = {"format": _ascii(FORMAT_ID, np.int8), "scheme": _ascii(q.scheme, np.int8),
              "profile": _ascii(q.profile, np.int8), "scale_format": _ascii(q.scale_format, np.int8),
              "block": np.array([q.block], np.int64), "tile": _ascii(q.tile, np.int8),
              "codes": q.codes, "scales": q.scales,
              "amax": np.array([np.float32(q.amax).view(np.uint32)], np.uint32)}
    arrays.update(change)
    return {k: v for k, v in arrays.items() if v is not None}


def test_fps_opd_3_fps_opd_4_a_cnpy_style_file_reads_as_the_tensor(tmp_path):
    """FPS-OPD-3, FPS-OPD-4: int8 text, (1,)-shaped numbers, uint32 amax bits and an int64 block read
    as the quantizer's tensor; encode and decode scales are derived (and checked when given)."""
    q = fpspec.quantize(_x(32, 64, 3), "nvfp4")
    save_npz(tmp_path / "p.npz", _cnpy_style(q))
    r = QuantizedTensor.from_npz(tmp_path / "p.npz")
    assert np.float32(r.decode_scale) == np.float32(q.decode_scale)
    assert np.float32(r.encode_scale) == np.float32(q.encode_scale)
    assert np.array_equal(_bits(fpspec.dequantize(r)), _bits(fpspec.dequantize(q)))
    # given scales equal to the derived ones are accepted; the profile defaults to the scheme's (te-fp32)
    save_npz(tmp_path / "p.npz", _cnpy_style(q, profile=None, decode_scale=np.float32(q.decode_scale),
                                              encode_scale=np.array([q.encode_scale], np.float32)))
    r = QuantizedTensor.from_npz(tmp_path / "p.npz")
    assert r.profile == "te-fp32" and np.array_equal(_bits(fpspec.dequantize(r)), _bits(fpspec.dequantize(q)))
    # a NumPy bytes scalar is a text entry too
    save_npz(tmp_path / "p.npz", _cnpy_style(q, scheme=np.array(b"nvfp4")))
    assert QuantizedTensor.from_npz(tmp_path / "p.npz").scheme == "nvfp4"


_Q = None


def _base() -> QuantizedTensor:
    global _Q
    if _Q is None:
        _Q = fpspec.quantize(_x(16, 64, 4), "nvfp4")
    return _Q


#: (what is changed, the entries changed (None removes one), a part of the message)
BAD_FILES = [
    ("unknown entry", {"meta": np.uint8(0)}, "unknown entries ['meta']"),
    ("missing codes", {"codes": None}, "missing entries ['codes']"),
    ("missing format version", {"format": _ascii("fpspec-plain-operand-v2")}, "version this fpspec does not read"),
    ("wrong format", {"format": _ascii("cnpy")}, "entry 'format': expected"),
    ("codes int16", {"codes": np.zeros((16, 64), np.int16)}, "entry 'codes': must be uint8"),
    ("codes 1-D", {"codes": np.zeros(1024, np.uint8)}, "entry 'codes': must be 2-D"),
    ("scales 1-D", {"scales": np.zeros(64, np.uint8)}, "entry 'scales': must be 2-D (16, 4)"),
    ("scales shape", {"scales": np.zeros((16, 2), np.uint8)}, "scales shape (16, 2) does not match"),
    ("text with NUL", {"scheme": _ascii("nvfp4\0")}, "entry 'scheme': byte 0x00"),
    ("text as unicode", {"tile": np.array("1xB")}, "entry 'tile': a text entry is a 1-D uint8 or int8"),
    ("text 2-D", {"tile": _ascii("1xB").reshape(1, 3)}, "entry 'tile': a text entry"),
    ("empty text", {"profile": np.zeros(0, np.uint8)}, "entry 'profile': a text entry holds 1 to 64"),
    ("block float", {"block": np.float32(16)}, "entry 'block': must be an integer"),
    ("block two values", {"block": np.array([16, 16], np.int32)}, "entry 'block': must hold one number"),
    ("block 32 for nvfp4", {"block": np.int32(32)}, "does not match codes"),
    ("tile", {"tile": _ascii("2x2")}, "entry 'tile': must be 1xB or BxB"),
    ("scheme", {"scheme": _ascii("nvfp8")}, "entry 'scheme': 'nvfp8' is not one of"),
    ("profile", {"profile": _ascii("te-fp64")}, "entry 'profile':"),
    ("columnwise", {"columnwise": np.int32(2)}, "entry 'columnwise': must be 0 or 1"),
    ("amax missing", {"amax": None}, "missing entry 'amax': nvfp4 has a tensor scale"),
    ("amax NaN", {"amax": np.float32("nan")}, "entry 'amax': must be a finite non-negative"),
    ("amax negative bits", {"amax": np.uint32(0xBF800000)}, "entry 'amax': must be a finite non-negative"),
    ("amax float64", {"amax": np.float64(1.5)}, "entry 'amax': must be float32 or uint32"),
    ("target zero", {"target": np.float32(0)}, "entry 'target': must be a positive finite float32, got 0x00000000"),
    ("target Inf bits", {"target": np.uint32(0x7F800000)}, "entry 'target': must be a positive finite float32"),
    ("decode scale", {"decode_scale": np.float32(1)}, "entry 'decode_scale': 0x3f800000 (1.0) is not the decode_scale"),
    ("payload code", {"codes": np.full((16, 64), 16, np.uint8)}, "payload code 0x10 out of range for e2m1"),
    ("NaN scale code", {"scales": np.full((16, 4), 0x7F, np.uint8)}, "block scale code 0x7f is NaN"),
    ("scale format", {"scale_format": _ascii("ue8m0")}, "scale format 'ue8m0' is not accepted by nvfp4/te-fp32"),
    ("payload format", {"payload_format": _ascii("e4m3")}, "nvfp4 payloads are e2m1, got payload format 'e4m3'"),
]
#: Files of scheme codes: the entries that do not apply to a tensor built from codes.
BAD_CODES_FILES = [
    ("codes with profile", {"profile": _ascii("te-fp32")}, "entry 'profile': scheme codes has no profile"),
    ("codes with amax", {"amax": np.float32(3)}, "entry 'amax': scheme codes has no tensor scale"),
    ("codes with target", {"target": np.float32(448)}, "entry 'target': scheme codes has no target"),
    ("mxfp4 with target", {"scheme": _ascii("mxfp4"), "scale_format": _ascii("ue8m0"), "block": np.int32(32),
                           "scales": np.zeros((16, 2), np.uint8), "target": np.float32(448)},
     "entry 'target': mxfp4 has no tensor scale"),
]


@pytest.mark.parametrize("what,change,message", BAD_FILES + BAD_CODES_FILES,
                         ids=[b[0] for b in BAD_FILES + BAD_CODES_FILES])
def test_fps_opd_5_bad_files_are_refused_naming_the_entry(tmp_path, what, change, message):
    """FPS-OPD-5: every damage of a plain operand file is one FpspecError that names the file and
    the entry (or the rule) it breaks."""
    q = _base()
    if what.startswith(("codes with", "mxfp4 with")):
        arrays = _cnpy_style(q, scheme=_ascii("codes"), profile=None, amax=None)
    else:
        arrays = _cnpy_style(q)
    arrays.update(change)
    path = tmp_path / "bad.npz"
    save_npz(path, {k: v for k, v in arrays.items() if v is not None})
    with pytest.raises(FpspecError) as exc:
        QuantizedTensor.from_npz(path)
    assert str(exc.value).startswith(f"{path}: ") and message in str(exc.value), str(exc.value)


def test_fps_opd_5_loading_never_runs_code(tmp_path):
    """FPS-OPD-5: an object (pickle) entry is refused before anything is unpickled."""
    path = tmp_path / "obj.npz"
    np.savez(path, format=_ascii(FORMAT_ID), codes=np.array([print], dtype=object))
    with pytest.raises(FpspecError, match="holds Python objects"):
        QuantizedTensor.from_npz(path)
    with zipfile.ZipFile(path) as zf:  # what was refused really was a pickled object array
        assert b"'descr': '|O'" in zf.read("codes.npy")[:128]


def test_fps_opd_1_neither_kind_of_file_names_both(tmp_path):
    """FPS-OPD-1: an .npz that is neither fpspec's nor a plain operand file says so."""
    save_npz(tmp_path / "x.npz", {"codes": np.zeros((1, 16), np.uint8)})
    with pytest.raises(FpspecError, match="nor a plain operand file"):
        QuantizedTensor.from_npz(tmp_path / "x.npz")


def test_fps_opd_6_cli_quantize_plain_then_dequantize_and_gemm(tmp_path, capsys):
    """FPS-OPD-6: ``fpspec quantize --npz-format plain`` writes a plain file that ``fpspec dequantize``
    and ``fpspec gemm`` take, to the bits of the fpspec-format path; a damaged one is exit 2, one line."""
    np.save(tmp_path / "x.npy", _x(16, 64, 5))
    np.save(tmp_path / "w.npy", _x(8, 64, 6))
    for name in ("x", "w"):
        for fmt in ("plain", "fpspec"):
            assert main(["quantize", str(tmp_path / f"{name}.npy"), "--scheme", "ue5m3", "--profile", "seed-fp32",
                         "--npz-format", fmt, "--out", str(tmp_path / f"{name}-{fmt}.npz")]) == 0
    assert "meta" not in np.load(tmp_path / "x-plain.npz").files
    outs = {}
    for fmt in ("plain", "fpspec"):
        assert main(["dequantize", str(tmp_path / f"x-{fmt}.npz"), "--out", str(tmp_path / f"d-{fmt}.npy")]) == 0
        assert main(["gemm", str(tmp_path / f"x-{fmt}.npz"), str(tmp_path / f"w-{fmt}.npz"), "--model",
                     "seed-probe-matched", "--bits", "--out", str(tmp_path / f"c-{fmt}.npy")]) == 0
        outs[fmt] = (np.load(tmp_path / f"d-{fmt}.npy"), np.load(tmp_path / f"c-{fmt}.npy"))
    assert np.array_equal(_bits(outs["plain"][0]), _bits(outs["fpspec"][0]))
    assert np.array_equal(outs["plain"][1], outs["fpspec"][1]) and outs["plain"][1].dtype == np.uint32
    arrays = dict(np.load(tmp_path / "x-plain.npz"))
    arrays["block"] = np.float32(16)
    save_npz(tmp_path / "bad.npz", arrays)
    capsys.readouterr()
    assert main(["dequantize", str(tmp_path / "bad.npz"), "--out", str(tmp_path / "d.npy")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "entry 'block': must be an integer" in err


# ------------------------------------------------------------------ row slices
@pytest.mark.parametrize("scheme,kw", [("nvfp4", {}), ("ue5m3", {"profile": "seed-portable"}),
                                       ("mxfp8", {}), ("nvfp4", {"columnwise": True}),
                                       ("mxfp4", {"profile": "even"})])
def test_fps_opd_7_row_slices_dequantize_to_the_rows_bit_for_bit(scheme, kw):
    """FPS-OPD-7: a slice, an index list (any order, repeats) and a mask keep each row's codes,
    block scales, amax and tensor scales: the slice dequantizes to those rows of the full tensor."""
    q = fpspec.quantize(_x(48, 96, 7), scheme, **kw)
    full = _bits(fpspec.dequantize(q))
    mask = np.zeros(q.shape[0], bool)
    mask[[1, 2, 30]] = True
    for sel, rows in ((slice(3, 20, 4), np.arange(3, 20, 4)), ([q.shape[0] - 1, 0, 5, 5], [q.shape[0] - 1, 0, 5, 5]),
                      (np.array([7], np.uint16), [7]), (mask, [1, 2, 30]), (slice(-2, None), [q.shape[0] - 2,
                                                                                             q.shape[0] - 1])):
        s = q[sel]
        assert s.shape == (len(rows), q.shape[1]) and s.source_shape is None
        assert np.array_equal(s.scales, q.scales[rows])
        assert (s.amax, s.encode_scale, s.decode_scale, s.params["target"]) == \
            (q.amax, q.encode_scale, q.decode_scale, q.params["target"])
        assert np.array_equal(_bits(fpspec.dequantize(s)), full[rows])
        assert s.params["view_shape"] == [len(rows), q.params["view_shape"][1]]
    assert np.array_equal(q.rows([4, 2]).codes, q.codes[[4, 2]])


def test_fps_opd_7_bxb_tensors_are_sliced_by_whole_tiles():
    """FPS-OPD-7: a BxB tensor's rows are taken by whole tiles (tiles in any order); a cut tile is
    refused naming the row, and so are single row numbers, column slices and bad row numbers."""
    q = fpspec.quantize(_x(48, 64, 8), "nvfp4", tile="BxB")
    rows = [*range(32, 48), *range(0, 16)]
    s = q[rows]
    assert np.array_equal(s.scales, q.scales[[2, 0]])
    assert np.array_equal(_bits(fpspec.dequantize(s)), _bits(fpspec.dequantize(q))[rows])
    cases = [
        (slice(0, 8), "whole tiles of 16 rows: 8 rows selected"),
        ([*range(1, 17)], "row 1 at position 0 of the selection is not row 0 of a tile"),
        ([*range(16, 31), 0], "row 0 at position 15"),
        (3, "is one row number"),
        ((slice(0, 16), slice(0, 16)), "sliced by rows only"),
        ([48], "row number 48 (position 0 of the selection) is outside 0..47"),
        ([-1], "row number -1"),
        ([1.5], "integer row numbers"),
        (np.ones(3, bool), "one flag per row (48)"),
    ]
    for sel, message in cases:
        with pytest.raises(FpspecError, match=None) as exc:
            q[sel]
        assert message in str(exc.value), (sel, str(exc.value))
    with pytest.raises(TypeError):
        iter(q)


def test_fps_opd_7_a_slice_round_trips_through_both_files(tmp_path):
    """FPS-OPD-7: a slice is a tensor like any other: it validates, and writes and reads back."""
    q = fpspec.quantize(_x(40, 64, 9), "ue5m3", pad=True)
    s = q[[39, 3]]
    s.validate()
    s.to_npz(tmp_path / "s.npz")
    s.to_plain_npz(tmp_path / "p.npz")
    for path in ("s.npz", "p.npz"):
        r = QuantizedTensor.from_npz(tmp_path / path)
        assert np.array_equal(_bits(fpspec.dequantize(r)), _bits(fpspec.dequantize(q))[[39, 3]])
