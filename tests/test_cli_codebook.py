"""``fpspec formats / codebook / encode / decode / bench`` (FPS-CLI-1, FPS-CLI-2, FPS-CLI-3)."""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.convert import encode


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_codebook_ue5m3_json(capsys):
    """FPS-CLI-1, FPS-FMT-6: 256 codes, max finite 61440, code 0x01 = 2^-17, 0xF8..0xFF NaN."""
    code, out, _ = run(capsys, "codebook", "ue5m3", "--json")
    book = json.loads(out)
    assert code == 0 and book["name"] == "ue5m3" and len(book["codes"]) == 256
    assert book["max_finite"] == 61440 and book["min_normal"] == 2.0 ** -14
    assert book["min_subnormal"] == 2.0 ** -17
    c1 = book["codes"][1]
    assert c1 == {**c1, "code": 1, "bits": "00000001", "value": 2.0 ** -17, "kind": "subnormal"}
    assert Fraction(c1["exact"]) == Fraction(1, 2 ** 17)
    assert book["codes"][0xF7]["value"] == 61440 and book["codes"][0xF7]["kind"] == "normal"
    assert [c["value"] for c in book["codes"][0xF8:]] == ["nan"] * 8
    assert {c["kind"] for c in book["codes"][0xF8:]} == {"nan"}


def test_codebook_ue5m3fnu_json(capsys):
    """FPS-CLI-1: the FN variant has max 114688 (0xFE) and one NaN (0xFF)."""
    _, out, _ = run(capsys, "codebook", "ue5m3fnu", "--json")
    book = json.loads(out)
    assert book["max_finite"] == 114688 and book["codes"][0xFE]["value"] == 114688
    assert [c["kind"] for c in book["codes"]].count("nan") == 1


def test_codebook_text_and_formats(capsys):
    """FPS-CLI-1: the text codebook lists every code; `formats` lists every format."""
    code, out, _ = run(capsys, "codebook", "e2m1")
    assert code == 0 and "0xF" in out and "max_finite=6.0" in out
    code, out, _ = run(capsys, "formats", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["e4m3"]["max_finite"] == 448 and rows["ue8m0"]["min_subnormal"] is None
    assert rows["e2m1"]["default_overflow"] == "sat" and rows["e4m3"]["default_overflow"] == "nonfinite"


def test_encode_decode_round_trip(tmp_path, capsys):
    """FPS-CLI-1: encode then decode through .npy files; every e4m3 value survives the trip."""
    values = np.array([float(v) for v in __import__("fpspec").formats.E4M3.finite_values()])
    x = np.concatenate([values, -values]).astype(np.float32).reshape(2, -1)
    src, codes, back = tmp_path / "x.npy", tmp_path / "c.npy", tmp_path / "y.npy"
    np.save(src, x)
    assert run(capsys, "encode", str(src), "--to", "e4m3", "--rounding", "rne", "--out", str(codes))[0] == 0
    c = np.load(codes)
    assert c.dtype == np.uint8 and c.shape == x.shape
    assert run(capsys, "decode", str(codes), "--from", "e4m3", "--out", str(back))[0] == 0
    y = np.load(back)
    assert y.dtype == np.float64 and np.array_equal(y, x.astype(np.float64))
    assert np.array_equal(np.signbit(y), np.signbit(x))


def test_encode_stochastic_and_wide_targets(tmp_path, capsys):
    """FPS-CLI-1: --rbits/--nbits reach the SR modes; fp16/fp32 codes are uint16/uint32 patterns."""
    x = np.full(256, 0.25, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "r.npy", np.arange(256, dtype=np.uint8))
    argv = ["encode", str(tmp_path / "x.npy"), "--to", "e2m1", "--rounding", "sr",
            "--rbits", str(tmp_path / "r.npy"), "--out", str(tmp_path / "c.npy")]
    assert run(capsys, *argv)[0] == 0
    assert np.load(tmp_path / "c.npy").tolist() == [0] * 128 + [1] * 128
    np.save(tmp_path / "w.npy", np.array([1.0, -2.5], np.float64))
    for fmt, dtype, want in (("fp16", np.uint16, [0x3C00, 0xC100]), ("fp32", np.uint32, [0x3F800000, 0xC0200000])):
        assert run(capsys, "encode", str(tmp_path / "w.npy"), "--to", fmt, "--out", str(tmp_path / "o.npy"))[0] == 0
        o = np.load(tmp_path / "o.npy")
        assert o.dtype == dtype and o.tolist() == want


@pytest.mark.parametrize("setup,argv_tail,message", [
    ("x", ["--to", "e9m9"], "invalid choice"),
    ("ints", ["--to", "e2m1"], "float array"),
    ("nan", ["--to", "e2m1"], r"NaN input to e2m1 under NaN policy 'error' \(first at index \[1, 0\]\)"),
    ("x", ["--to", "e2m1", "--rounding", "sr"], "needs --rbits"),
    ("x", ["--to", "e2m1", "--rounding", "sr", "--rbits", "rshape"], "rbits shape"),
    ("x", ["--to", "e2m1", "--rounding", "sr", "--rbits", "rdtype"], "rbits must be uint8"),
    ("x", ["--to", "e2m1", "--rounding", "sr", "--rbits", "rbig", "--nbits", "4"],
     r"random value 16 is not below 2\^4 \(nbits = 4\) \(first at index \[0, 1\]\)"),
    ("x", ["--to", "e2m1", "--rounding", "fastest"], "unknown rounding mode"),
    ("missing", ["--to", "e2m1"], "no such file"),
    ("neg", ["--to", "ue5m3"], r"negative input to unsigned ue5m3.*index \[0, 1\]"),
])
def test_encode_bad_input(tmp_path, capsys, setup, argv_tail, message):
    """FPS-CLI-2: bad input -> exit 2, one line naming the problem (and the first index), no output."""
    arrays = {
        "x": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32),
        "ints": np.array([1, 2], np.int32),
        "nan": np.array([[1.0, 2.0], [np.nan, 4.0]], np.float32),
        "neg": np.array([[1.0, -2.0]], np.float32),
        "rshape": np.zeros(3, np.uint8),
        "rdtype": np.zeros((2, 2), np.int16),
        "rbig": np.array([[1, 16], [0, 0]], np.uint8),
    }
    src = tmp_path / f"{setup}.npy"
    if setup != "missing":
        np.save(src, arrays[setup])
    for name in ("rshape", "rdtype", "rbig"):
        np.save(tmp_path / f"{name}.npy", arrays[name])
    argv_tail = [str(tmp_path / f"{a}.npy") if a in ("rshape", "rdtype", "rbig") else a for a in argv_tail]
    out = tmp_path / "out.npy"
    if message == "invalid choice":  # argparse usage errors also exit 2
        with pytest.raises(SystemExit) as exc:
            main(["encode", str(src), *argv_tail, "--out", str(out)])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    else:
        code, _, err = run(capsys, "encode", str(src), *argv_tail, "--out", str(out))
        assert code == 2
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("fpspec encode: error:")
        import re
        assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


def test_decode_bad_input(tmp_path, capsys):
    """FPS-CLI-2: codes out of range (with index) or of a float dtype -> exit 2, nothing written."""
    np.save(tmp_path / "c.npy", np.array([[0, 1], [2, 16]], np.uint8))
    np.save(tmp_path / "f.npy", np.array([1.0]))
    out = tmp_path / "y.npy"
    code, _, err = run(capsys, "decode", str(tmp_path / "c.npy"), "--from", "e2m1", "--out", str(out))
    assert code == 2 and "code 16 out of range for e2m1 (4 bits) (first at index [1, 1])" in err
    code, _, err = run(capsys, "decode", str(tmp_path / "f.npy"), "--from", "e2m1", "--out", str(out))
    assert code == 2 and "unsigned integer" in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_npy_loading_never_unpickles(tmp_path, capsys):
    """FPS-CLI-3: an object array (which needs pickle) is refused, not loaded."""
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    code, _, err = run(capsys, "encode", str(tmp_path / "o.npy"), "--to", "e2m1", "--out",
                       str(tmp_path / "out.npy"))
    assert code == 2 and "pickle" in err


def test_bench_encode_json_runs(capsys):
    """FPS-CLI-1: `fpspec bench encode --json` reports elements/s for fpspec and ml_dtypes and the
    ratio (timing values are not asserted: performance is measured, not tested)."""
    code, out, _ = run(capsys, "bench", "encode", "-n", "4096", "--repeat", "1", "--json")
    rows = json.loads(out)["results"]
    assert code == 0 and [r["case"] for r in rows] == ["float32->e2m1 rne", "float32->e4m3 rne"]
    for r in rows:
        assert r["codes_equal"] is True and r["ratio"] == pytest.approx(r["baseline_s"] / r["fpspec_s"])


def test_bench_gemm_json_reports_the_path(capsys):
    """FPS-CLI-1, FPS-GEMM-24: `fpspec bench gemm --json` at 256^3 (past the BLAS path's size
    rule) says which path ran, the partials' type, the fallback and sum-again shares, and
    the ratio against numpy float32 matmul (timings are not asserted)."""
    code, out, _ = run(capsys, "bench", "gemm", "--size", "256", "--repeat", "1", "--cases", "nvfp4", "--json")
    rows = json.loads(out)["results"]
    assert code == 0 and [r["case"] for r in rows] == ["seed nvfp4 256^3"]
    r = rows[0]
    assert (r["path"], r["partials"], r["fallback_share"]) == ("blas", "float32", 0.0)
    assert 0.0 <= r["resum_share"] <= 1 / 64
    assert r["ratio"] == pytest.approx(r["baseline_s"] / r["fpspec_s"])


def test_bench_gemm_cublas_bf16_case(capsys):
    """FPS-CLI-1, FPS-CUB-6: `fpspec bench gemm --cases bf16` runs the cuBLAS BF16 library preset,
    resolved at the bench's shape, on the term kernels, without a goal (timings not asserted)."""
    code, out, _ = run(capsys, "bench", "gemm", "--size", "64", "--repeat", "1", "--cases", "bf16", "--json")
    rows = json.loads(out)["results"]
    assert code == 0 and [(r["case"], r["preset"], r["path"], r["goal"]) for r in rows] == [
        ("cublas-h200 bf16 64^3", "cublas-h200-bf16", "terms", "-")]


def test_bench_quantize_json_reports_the_element_passes(capsys):
    """FPS-CLI-1: `fpspec bench quantize --json` reports, beside the ratio, the time of the two
    element passes (tensor amax scan and E2M1 encode) and fpspec's time as a multiple of it
    (timings are not asserted), and the peak memory."""
    code, out, _ = run(capsys, "bench", "quantize", "-n", "65536", "--k", "256", "--repeat", "1",
                       "--profiles", "exact", "--json")
    rows = json.loads(out)["results"]
    assert code == 0 and [r["case"] for r in rows] == ["ue5m3/exact B=16 rne"]
    r = rows[0]
    assert r["elements"] == 65536 and r["element_passes_s"] > 0
    assert r["of_element_passes"] == pytest.approx(r["fpspec_s"] / r["element_passes_s"], abs=0.006)
    assert r["peak_memory_x_input"] >= 1.0
    assert r["dequantize_s"] > 0 and r["dequantize_elem_per_s"] == pytest.approx(65536 / r["dequantize_s"])


def test_bench_ratio_text():
    """FPS-CLI-1: the printed ratio tells 1/3.7 from a goal of 1/4 (one decimal below 1/20),
    stays whole far below, and prints speed-ups with two decimals."""
    from fpspec.cli.bench import _ratio_text

    assert [_ratio_text(r) for r in (1 / 3.68, 1 / 4.0, 1 / 12.96, 1 / 157.2, 2.714, 1.0)] == [
        "1/3.7", "1/4.0", "1/13.0", "1/157", "2.71", "1.00"]


@pytest.mark.slow
def test_module_entry_point():
    """FPS-CLI-1: `python -m fpspec` is the same CLI, with exit status 2 on bad input."""
    done = subprocess.run([sys.executable, "-m", "fpspec", "codebook", "nosuch"], capture_output=True, text=True)
    assert done.returncode == 2 and "invalid choice" in done.stderr
    assert encode(np.array([1.0]), "e2m1").tolist() == [2]
