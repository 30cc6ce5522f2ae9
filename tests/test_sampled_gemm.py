"""Sampled checking of a big GEMM: gemm_sample, check_gemm_sample, fpspec gemm-sample (FPS-OPD-8, FPS-OPD-9)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import fpspec
from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.cublas.library import resolve
from fpspec.quantized import QuantizedTensor
from fpspec.sampled import check_gemm_sample, gemm_sample, parse_selection, whole_tile_rows


def _x(m: int, k: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((m, k)) * np.exp2(rng.integers(-5, 5, (m, 1)))).astype(np.float32)


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype == np.float16 else np.uint32)


_CASTS = {"e4m3": (ml_dtypes.float8_e4m3fn, np.uint8), "bf16": (ml_dtypes.bfloat16, np.uint16),
          "fp16": (np.float16, np.uint16)}


def _operands(kind: str, m: int, n: int, k: int):
    """(A, BT, fmt) of one operand kind at M x N x K."""
    x, w = _x(m, k, 1), _x(n, k, 2)
    if kind in _CASTS:
        dtype, view = _CASTS[kind]
        return x.astype(dtype).view(view), w.astype(dtype).view(view), kind
    scheme, _, rest = kind.partition("-")
    tile = "BxB" if rest == "bxb" else "1xB"
    qa, qb = fpspec.quantize(x, scheme, tile=tile), fpspec.quantize(w, scheme, tile=tile)
    if rest == "codes":
        sf = "ue4m3" if scheme == "nvfp4" else "ue8m0"
        qa, qb = (QuantizedTensor.from_codes(q.codes, q.scales, payload_format="e2m1", scale_format=sf,
                                             block=q.block) for q in (qa, qb))
    return qa, qb, None


#: (preset, operand kind, (M, N, K)): every family of model, several shapes
CASES = [
    ("seed-probe-matched", "ue5m3", (40, 24, 256)),
    ("seed-probe-matched-nosnap", "ue5m3", (17, 9, 192)),
    ("seed-triton-h200-snap", "ue5m3", (33, 20, 128)),
    ("exact", "nvfp4-bxb", (48, 32, 128)),
    ("decoded-fp32", "nvfp4", (19, 21, 96)),
    ("sm100-mxf4nvf4", "nvfp4", (24, 16, 256)),
    ("sm100-mxf4nvf4", "mxfp4-codes", (20, 12, 128)),
    ("sm120-mxf4nvf4", "nvfp4-codes", (9, 30, 64)),
    ("sm120-mxf8f6f4", "mxfp4", (16, 16, 256)),
    ("km-h100-fp8-promote128", "e4m3", (21, 13, 384)),
    ("sm90-fp8", "e4m3", (16, 24, 128)),
    ("sm90-f16-f16acc", "fp16", (12, 20, 64)),
    ("km-v100-fp16", "fp16", (10, 7, 64)),
    ("cdna3-f16", "bf16", (18, 11, 96)),
    ("seed-triton-h200", "bf16", (25, 14, 128)),
]


@pytest.mark.parametrize("model,kind,shape", CASES, ids=[f"{m}-{k}-{'x'.join(map(str, s))}" for m, k, s in CASES])
def test_fps_opd_8_sampled_outputs_are_the_full_gemms(model, kind, shape):
    """FPS-OPD-8: gemm_sample gives the full GEMM's outputs at the sampled rows and columns, bit for
    bit (rows in any order with repeats and the last row, a column slice, a mask), and so does a
    GEMM of row slices (FPS-OPD-7) where the tiles allow one."""
    m, n, k = shape
    a, bt, fmt = _operands(kind, m, n, k)
    full = fpspec.gemm(a, bt, model, fmt=fmt)
    rows = [m - 1, 0, 5, 5, 2]
    cols_mask = np.zeros(n, bool)
    cols_mask[[0, n - 1, n // 2]] = True
    for cols, picked in ((slice(1, None, 3), np.arange(n)[1::3]), (cols_mask, np.flatnonzero(cols_mask)),
                         (None, np.arange(n))):
        s = gemm_sample(a, bt, model, rows=rows, cols=cols, fmt=fmt)
        assert s.dtype == full.dtype and s.shape == (len(rows), picked.size)
        assert np.array_equal(_bits(s), _bits(full)[np.ix_(rows, picked)])
    if not (isinstance(a, QuantizedTensor) and a.tile == "BxB"):
        direct = fpspec.gemm(a[rows], bt[[n - 1, 3]], model, fmt=fmt)
        assert np.array_equal(_bits(direct), _bits(full)[np.ix_(rows, [n - 1, 3])])


def test_fps_opd_8_bxb_operands_are_cut_to_whole_tiles():
    """FPS-OPD-8: a BxB operand is sliced by the tiles holding the rows asked for."""
    assert whole_tile_rows(np.array([33, 2, 3]), 16).tolist() == [*range(0, 16), *range(32, 48)]
    a, bt, _ = _operands("nvfp4-bxb", 64, 32, 64)
    full = fpspec.gemm(a, bt, "exact")
    s = gemm_sample(a, bt, "exact", rows=[63, 17], cols=[31])
    assert np.array_equal(_bits(s), _bits(full)[[63, 17]][:, [31]])


def test_fps_opd_8_library_presets_run_the_full_shapes_plan():
    """FPS-OPD-8: cublas-h200-bf16 at 2048 x 16 x 4096 cuts K into slices of 2048, while a 4 x 3 x 4096
    GEMM would run another kernel (slices of 48): the sample is computed under the full shape's plan
    (it equals the full GEMM), not the sample's (which differs)."""
    m, n, k = 2048, 16, 4096
    assert resolve("cublas-h200-bf16", (m, n, k)).split_k == 2048
    assert resolve("cublas-h200-bf16", (4, 3, k)).slice_plan[:2] == (48, 48)
    a, bt, fmt = _operands("bf16", m, n, k)
    rows, cols = [0, 1000, 2047, 5], [3, 15, 0]
    full = fpspec.gemm(a, bt, "cublas-h200-bf16", fmt=fmt)
    s = gemm_sample(a, bt, "cublas-h200-bf16", rows=rows, cols=cols, fmt=fmt)
    assert np.array_equal(_bits(s), _bits(full)[np.ix_(rows, cols)])
    naive = fpspec.gemm(a[rows], bt[cols], resolve("cublas-h200-bf16", (4, 3, k)), fmt=fmt)
    assert np.count_nonzero(_bits(naive) != _bits(s)) > 0


def test_fps_opd_9_check_gemm_sample_reports_each_mismatch():
    """FPS-OPD-9: a kernel output equal at the sample passes; one ulp off at a sampled position is a
    mismatch that names the position and both bit patterns; an unsampled error is not seen; the
    kernel's outputs may be float32 values or uint32 bits, the full C or only the sample."""
    a, bt, _ = _operands("ue5m3", 32, 24, 128)
    c = fpspec.gemm(a, bt, "seed-probe-matched")
    rows, cols = [3, 30], [0, 7, 23]
    res = check_gemm_sample(c, a, bt, "seed-probe-matched", rows=rows, cols=cols)
    assert res.passed and res.compared == 6 and res.mismatches() == []
    bad = _bits(c).copy()
    bad[30, 7] += 1
    bad[4, 4] ^= 0x80000000  # not sampled
    res = check_gemm_sample(bad, a, bt, "seed-probe-matched", rows=rows, cols=cols)
    assert not res.passed and res.mismatch_count == 1
    (mm,) = res.mismatches()
    assert (mm.row, mm.col, mm.expected, mm.got) == (30, 7, int(_bits(c)[30, 7]), int(_bits(c)[30, 7]) + 1)
    sampled = c[np.ix_(rows, cols)].astype(">f4")  # big-endian values are values too
    assert check_gemm_sample(sampled, a, bt, "seed-probe-matched", rows=rows, cols=cols, sampled=True).passed
    with pytest.raises(FpspecError, match=r"expected the full 32 x 24 C \(32, 24\)"):
        check_gemm_sample(sampled, a, bt, "seed-probe-matched", rows=rows, cols=cols)
    with pytest.raises(FpspecError, match="give them as float32 values or uint32 bit patterns, got float64"):
        check_gemm_sample(c.astype(np.float64), a, bt, "seed-probe-matched", rows=rows, cols=cols)
    h, g, fmt = _operands("fp16", 8, 6, 64)  # an FP16 output: float16 values or uint16 bits
    c16 = fpspec.gemm(h, g, "sm90-f16-f16acc", fmt=fmt)
    for given in (c16, c16.view(np.uint16)):
        assert check_gemm_sample(given, h, g, "sm90-f16-f16acc", rows=[7, 1], fmt=fmt).passed
    with pytest.raises(FpspecError, match="outputs are float16; give them as float16 values or uint16"):
        check_gemm_sample(c16.astype(np.float32), h, g, "sm90-f16-f16acc", rows=[7, 1], fmt=fmt)


def test_fps_opd_9_selections():
    """FPS-OPD-9: numbers, ranges, random:N (reproducible, distinct, ascending) and all; bad items
    are refused naming the item."""
    assert parse_selection("0,5:8,:2,98:", 100).tolist() == [0, 5, 6, 7, 0, 1, 98, 99]
    assert parse_selection(None, 3).tolist() == [0, 1, 2] == parse_selection("all", 3).tolist()
    r = parse_selection("random:10", 1000, seed=4)
    assert r.tolist() == sorted(set(r.tolist())) and r.size == 10 and r.max() < 1000
    assert np.array_equal(r, parse_selection("random:10", 1000, seed=4))
    assert not np.array_equal(r, parse_selection("random:10", 1000, seed=5))
    for text, message in (("100", "outside 0..99"), ("5:5", "a range a:b needs 0 <= a < b <= 100"),
                          ("x", "'x' is not a whole number"), ("random:101", "draws 1 to 100"),
                          ("1,,2", "an empty item")):
        with pytest.raises(FpspecError, match="--rows item") as exc:
            parse_selection(text, 100)
        assert message in str(exc.value)


def test_fps_opd_9_cli_checks_a_kernels_output(tmp_path, capsys):
    """FPS-OPD-9: ``fpspec gemm-sample`` computes the sample (--out, --bits), checks a kernel's
    full output at it (--check: exit 0 equal, 1 a mismatch listed as C[i, j]), reads plain operand
    files and code arrays, and refuses bad input with one line and exit 2."""
    a, bt, _ = _operands("nvfp4", 40, 24, 128)
    a.to_plain_npz(tmp_path / "a.npz")
    bt.to_npz(tmp_path / "bt.npz")
    c = fpspec.gemm(a, bt, "sm100-mxf4nvf4")
    np.save(tmp_path / "c.npy", c)
    args = ["gemm-sample", str(tmp_path / "a.npz"), str(tmp_path / "bt.npz"), "--model", "sm100-mxf4nvf4",
            "--rows", "random:6", "--cols", "0,20:24"]
    assert main([*args, "--out", str(tmp_path / "s.npy"), "--bits"]) == 0
    rows, cols = parse_selection("random:6", 40, seed=0), parse_selection("0,20:24", 24, seed=1)
    assert np.array_equal(np.load(tmp_path / "s.npy"), _bits(c)[np.ix_(rows, cols)])
    capsys.readouterr()
    assert main([*args, "--check", str(tmp_path / "c.npy")]) == 0
    out = capsys.readouterr().out
    assert "30 of 30 outputs equal bit for bit" in out and out.rstrip().endswith("PASS")
    bad = _bits(c).copy()
    bad[rows[2], 21] ^= 1
    np.save(tmp_path / "bad.npy", bad)
    assert main([*args, "--check", str(tmp_path / "bad.npy")]) == 1
    out = capsys.readouterr().out
    assert f"C[{rows[2]}, 21]: expected 0x{int(_bits(c)[rows[2], 21]):08x}" in out and "29 of 30" in out
    x, w, _ = _operands("e4m3", 16, 8, 64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", w)
    np.save(tmp_path / "cx.npy", fpspec.gemm(x, w, "sm90-fp8", fmt="e4m3"))
    assert main(["gemm-sample", str(tmp_path / "x.npy"), str(tmp_path / "w.npy"), "--operand-format", "e4m3",
                 "--model", "sm90-fp8", "--rows", "15,0", "--check", str(tmp_path / "cx.npy")]) == 0
    capsys.readouterr()
    bad_calls = (([*args[:5], "--rows", "40", "--out", str(tmp_path / "t.npy")], "--rows item '40': outside 0..39"),
                 (args, "give --check C.npy"),
                 ([*args, "--check", str(tmp_path / "s.npy")], "the kernel's output has shape (6, 5)"))
    for call, message in bad_calls:
        assert main(call) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
