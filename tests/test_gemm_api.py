"""GEMM API, presets, specials, alpha, scale placement, errors and CLI (FPS-GEMM-2, -3, -4, -8, -9, -11, -12)."""

from __future__ import annotations

import json
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.matmul import GemmWhatIfWarning, gemm
from fpspec.cublas.library import LIBRARY
from fpspec.models import GemmModel, parse_overrides
from fpspec.named_models import get_model
from fpspec.presets import PRESETS
from fpspec.quantization import quantize
from fpspec.quantized import QuantizedTensor

from gemm_helpers import codes_of, random_quantized

FP32_MAX = np.float32(np.finfo(np.float32).max)


def _bits(y: np.ndarray) -> np.ndarray:
    return y.view(np.uint16 if y.dtype == np.float16 else np.uint32)


def both(a, bt, model, **kw):
    ye = gemm(a, bt, model, impl="exact", **kw)
    yf = gemm(a, bt, model, impl="fast", **kw)
    assert ye.dtype == yf.dtype and np.array_equal(_bits(ye), _bits(yf)), (ye, yf)
    return ye


# ----------------------------------------------------------------- presets
def test_fpsgemm3_preset_parameters():
    """FPS-GEMM-3: each preset carries the parameters its source states."""
    s = PRESETS["seed-probe-matched"].model
    assert (s.group_size, s.window_bits, s.fused, s.group_rounding, s.accumulate_rounding, s.snap_bits,
            s.alpha_source, s.scale_placement, s.operand_domain) == \
        (64, None, False, "rne", "rtz", 10, "amax", "product", "encoded")
    assert PRESETS["seed-probe-matched-nosnap"].model == s.replace(snap_bits=None)
    km = {"km-h100-fp8": (32, 13), "km-h100-fp8-promote128": (32, 13), "km-b200-fp8": (32, 25),
          "km-h100-bf16": (16, 25), "km-a100-bf16": (8, 24), "km-v100-fp16": (4, 23)}
    for name, (g, f) in km.items():
        m = PRESETS[name].model
        assert (m.group_size, m.window_bits, m.below_window, m.fused, m.accumulate_rounding,
                m.product_exponent) == (g, f, "truncate", True, "rtz", "operands"), name
        assert m.neab == f - 23
    assert PRESETS["km-h100-fp8-promote128"].model.promotion_interval == 128
    assert PRESETS["km-h100-fp8-promote128"].model.promotion_rounding == "rne"
    assert PRESETS["km-h100-fp8"].model.promotion_interval is None
    x = PRESETS["exact"].model
    assert (x.group_size, x.window_bits, x.group_rounding, x.accumulate_rounding, x.operand_domain) == \
        (None, None, "none", "rne", "decoded-exact")
    d = PRESETS["decoded-fp32"].model
    assert (d.group_size, d.group_rounding, d.accumulate_rounding, d.operand_domain) == \
        (1, "rne", "rne", "decoded-fp32")
    for p in PRESETS.values():
        assert p.summary and p.source


def test_fpsgemm3_overrides_and_validation():
    """FPS-GEMM-3: overrides by name or alias are validated; inconsistent models are refused."""
    assert get_model("km-h100-fp8", neab=2).window_bits == 25
    assert get_model("seed-probe-matched", G=32, L=None).group_size == 32
    assert get_model("seed-probe-matched", F=13).below_window == "truncate"
    assert get_model("km-h100-fp8", F=None).below_window == "exact"
    assert get_model("seed-probe-matched", fused=True).group_rounding == "none"
    assert parse_overrides(["G=16", "fused=false", "window_bits=none", "group_rounding=rz"]) == \
        {"G": 16, "fused": False, "window_bits": None, "group_rounding": "rz"}
    for bad in (dict(group_size=0), dict(group_rounding="rna"), dict(promotion_interval=48),
                dict(below_window="truncate"), dict(fused=True, group_rounding="rne"), dict(foo=1),
                dict(snap_bits=1.5), dict(fused="yes")):
        with pytest.raises(FpspecError):
            get_model("seed-probe-matched", **bad)
    with pytest.raises(FpspecError, match="unknown GEMM model preset"):
        get_model("h100")
    m = GemmModel.from_dict(PRESETS["km-b200-fp8"].model.to_dict())
    assert m == PRESETS["km-b200-fp8"].model


# ----------------------------------------------------------------- specials
def test_fpsgemm2_specials_overflow_and_zero_sign():
    """FPS-GEMM-2: Inf x 0 = NaN; Inf - Inf = NaN; an Inf term propagates; overflow of an
    FP32 rounding gives Inf under RNE and max finite under RZ; zero results are +0."""
    k = 32
    a = np.zeros((5, k))
    b = np.zeros((5, k))
    a[0, 0], b[0, 0] = np.inf, 0.0          # inf x 0
    a[1, 0], b[1, 0] = np.inf, 1.0          # +inf ...
    a[1, 1], b[1, 1] = -np.inf, 1.0         # ... - inf
    a[2, 0], b[2, 0] = np.inf, -2.0         # -inf alone
    a[3, 0], b[3, 0] = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 2.0  # 2 x bf16 max > FP32 max
    a[4, 0], b[4, 0] = 2.0**-100, -(2.0**-100)  # -2^-200 rounds to zero
    ac, bc = codes_of(a, "bf16"), codes_of(b, "bf16")
    # compare row i of A with row i of BT: the diagonal
    ex = np.diagonal(both(ac, bc, "exact", fmt="bf16"))
    km = np.diagonal(both(ac, bc, "km-h100-bf16", fmt="bf16"))
    assert np.isnan(ex[0]) and np.isnan(ex[1]) and ex[2] == -np.inf
    assert ex[3] == np.inf and km[3] == FP32_MAX
    assert ex[4].view(np.uint32) == 0 and km[4].view(np.uint32) == 0
    assert np.isnan(km[0]) and np.isnan(km[1]) and km[2] == -np.inf
    assert ex.view(np.uint32)[0] == 0x7FC00000 and km.view(np.uint32)[1] == 0x7FC00000
    fp = np.diagonal(both(ac, bc, "decoded-fp32", fmt="bf16"))  # IEEE float32 arithmetic path
    assert fp.view(np.uint32)[0] == 0x7FC00000 and fp.view(np.uint32)[1] == 0x7FC00000
    # max x 2 and max x -2: one block sums them exactly to 0; product by product they
    # round to +Inf and -Inf first, and Inf - Inf is NaN
    big = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    a2 = codes_of(np.array([[big, big] + [0.0] * 30]), "bf16")
    b2 = codes_of(np.array([[2.0, -2.0] + [0.0] * 30]), "bf16")
    assert both(a2, b2, "exact", fmt="bf16")[0, 0].view(np.uint32) == 0
    assert both(a2, b2, "km-h100-bf16", fmt="bf16")[0, 0].view(np.uint32) == 0
    assert np.isnan(both(a2, b2, "decoded-fp32", fmt="bf16")[0, 0])
    # the seed's chain as parameters (its preset takes quantized FP4 operands only, FPS-GEMM-25)
    assert np.isnan(both(a2, b2, get_model("seed-probe-matched-nosnap", group_size=1), fmt="bf16")[0, 0])


def test_fpsgemm2_cancellation_gives_plus_zero():
    """FPS-GEMM-2: 1 - 1 = +0 in every preset's chain (given as parameters: most presets'
    operand contracts take no e4m3 codes, FPS-GEMM-25)."""
    a = codes_of(np.array([[1.0, -1.0] + [0.0] * 62]), "e4m3")
    b = codes_of(np.array([[1.0, 1.0] + [0.0] * 62]), "e4m3")
    for name in PRESETS:
        assert _bits(both(a, b, get_model(name), fmt="e4m3"))[0, 0] == 0, name


# -------------------------------------------------------------- operands
def _qt(codes, scales, scale_format="ue4m3", block=16, amax=2688.0, target=448, decode=1.0):
    return QuantizedTensor(codes=np.array(codes, dtype=np.uint8), scales=np.array(scales, dtype=np.uint8),
                           scale_format=scale_format, block=block, tile="1xB", encode_scale=np.float32(1 / decode),
                           decode_scale=np.float32(decode), amax=np.float32(amax), scheme="nvfp4",
                           profile="test", params={"target": str(target)})


def test_fpsgemm4_layout_bt_rows_are_columns():
    """FPS-GEMM-4: C[m, n] = sum_k A[m, k] BT[n, k]; checked on integer-valued codes where
    every preset's chain (given as parameters, FPS-GEMM-25) is exact."""
    a = np.array([[1, 2, 0, 0], [3, -1, 4, 0]], dtype=float)
    bt = np.array([[1, 1, 1, 1], [2, 0, -1, 0], [0, 0, 0, 6]], dtype=float)
    pad = np.zeros((2, 60)), np.zeros((3, 60))
    ac = codes_of(np.hstack([a, pad[0]]), "e4m3")
    bc = codes_of(np.hstack([bt, pad[1]]), "e4m3")
    for name in PRESETS:
        assert np.array_equal(both(ac, bc, get_model(name), fmt="e4m3"), (a @ bt.T).astype(np.float32)), name


def test_fpsgemm4_quantized_operands_from_quantize():
    """FPS-GEMM-4: operands from fpspec.quantization (nvfp4, ue5m3, mxfp4, 2-D tiles) run; the
    'exact' preset equals the exact dot product of the dequantized values, rounded once."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    for scheme, tile in (("nvfp4", "1xB"), ("ue5m3", "1xB"), ("mxfp4", "1xB"), ("nvfp4", "BxB")):
        qa, qb = quantize(x, scheme, tile=tile), quantize(w, scheme, tile=tile)
        y = both(qa, qb, "exact")
        assert y.shape == (16, 16) and y.dtype == np.float32
        both(qa, qb, "seed-probe-matched")
        # exact preset: the exact products of q * s * decode_scale, one rounding
        from fpspec.fast.rounding import decode_table
        va = decode_table("e2m1")[qa.codes] * decode_table(qa.scale_format)[qa.scale_code_per_element()]
        vb = decode_table("e2m1")[qb.codes] * decode_table(qb.scale_format)[qb.scale_code_per_element()]
        da, db = Fraction(float(qa.decode_scale)), Fraction(float(qb.decode_scale))
        for i, j in ((0, 0), (3, 7), (15, 15)):
            s = sum(Fraction(float(p)) * Fraction(float(q)) for p, q in zip(va[i], vb[j])) * da * db
            lo = np.float32(float(s))
            assert abs(Fraction(float(y[i, j])) - s) <= abs(Fraction(float(lo)) - s)


# ------------------------------------------------------------------ alpha
def test_fpsgemm8_alpha_once_twice_decode():
    """FPS-GEMM-8: c = 1 (payload 1 x 1, scales 1); alpha from amax 3 and 5 with T = 448:
    exact alpha = 15 / 2688^2.  'once' gives the FP32 nearest to it; 'twice' rounds 3/2688
    and 5/2688 first; 'decode-scales' multiplies the two FP32 decode scales."""
    one = [[2] + [0] * 15]  # E2M1 code 2 = 1.0
    qa = _qt(one, [[0x38]], amax=3.0, decode=0.25)
    qb = _qt(one, [[0x38]], amax=5.0, decode=0.5)
    exact = Fraction(15, 2688 ** 2)
    y1 = both(qa, qb, "seed-probe-matched-nosnap")[0, 0]
    lo = np.float32(float(exact))
    cands = [np.nextafter(lo, np.float32(-1)), lo, np.nextafter(lo, np.float32(1))]
    best = min(cands, key=lambda c: abs(Fraction(float(c)) - exact))
    assert y1 == best
    y2 = both(qa, qb, "seed-probe-matched-nosnap", alpha_rounding="twice")[0, 0]
    fa = min([np.float32(3 / 2688), np.nextafter(np.float32(3 / 2688), np.float32(1)),
              np.nextafter(np.float32(3 / 2688), np.float32(0))], key=lambda c: abs(Fraction(float(c)) - Fraction(3, 2688)))
    fb = min([np.float32(5 / 2688), np.nextafter(np.float32(5 / 2688), np.float32(1)),
              np.nextafter(np.float32(5 / 2688), np.float32(0))], key=lambda c: abs(Fraction(float(c)) - Fraction(5, 2688)))
    assert y2 == np.float32(fa) * np.float32(fb)  # numpy float32 * is RNE
    y3 = both(qa, qb, "seed-probe-matched-nosnap", alpha_source="decode-scales")[0, 0]
    assert y3 == np.float32(0.125)
    # code arrays have no alpha
    assert both(codes_of(np.ones((1, 64)), "e4m3"), codes_of(np.ones((1, 64)), "e4m3"),
                get_model("seed-probe-matched-nosnap"), fmt="e4m3")[0, 0] == 64.0


def test_fpsgemm8_snap_before_alpha():
    """FPS-GEMM-8: the snap acts on c, then alpha scales: c = 2^-11 snaps to 0 (tie to even),
    so y = 0 whatever alpha is; without the snap y = RNE32(alpha 2^-11)."""
    qa = _qt([[1] + [0] * 15], [[0x18]], decode=1.0)  # E2M1 0.5 x scale 2^-4 = 2^-5
    qb = _qt([[1] + [0] * 15], [[0x20]], decode=1.0)  # 0.5 x 2^-3 = 2^-4
    # c = 2^-5 x 2^-4 = 2^-9 = 2/1024: on the lattice, the snap keeps it
    assert both(qa, qb, "seed-probe-matched", alpha_source="decode-scales")[0, 0] == np.float32(2.0**-9)
    qb2 = _qt([[1] + [0] * 15], [[0x10]], decode=1.0)  # 0.5 x 2^-5: c = 2^-11 -> snap 0
    assert both(qa, qb2, "seed-probe-matched", alpha_source="decode-scales")[0, 0] == 0.0
    assert both(qa, qb2, "seed-probe-matched-nosnap", alpha_source="decode-scales")[0, 0] == np.float32(2.0**-11)


def test_fpsgemm4_scale_placement_block_vs_product():
    """FPS-GEMM-4: three products 1.5 x 1 with scales 1 and a window of F = 0 bits.
    Per product (exponent 0, quantum 1) each 1.5 keeps 1 -> 3.  Folded into one block
    term 4.5 (exponent 2, quantum 4) it keeps 4.  Decode scales 1: alpha = 1 (FPS-GEMM-8)."""
    qa = _qt([[3, 3, 3] + [0] * 13], [[0x38]])
    qb = _qt([[2, 2, 2] + [0] * 13], [[0x38]])
    common = dict(window_bits=0, product_exponent="exact", alpha_source="decode-scales", snap_bits=None)
    assert both(qa, qb, "seed-probe-matched", scale_placement="product", **common)[0, 0] == 3.0
    assert both(qa, qb, "seed-probe-matched", scale_placement="block", **common)[0, 0] == 4.0
    # without a window the placement does not matter
    assert both(qa, qb, "seed-probe-matched", scale_placement="block", alpha_source="decode-scales")[0, 0] == 4.5


def test_fpsgemm12_output_bf16():
    """FPS-GEMM-12: BF16 output rounds the FP32 result RNE: 1 + 2^-8 is a tie -> 1.0;
    1 + 3 * 2^-8 -> 1 + 2^-6 (tie to even mantissa); 1 + 2^-8 + 2^-9 -> 1 + 2^-7."""
    for extra, want in (([2.0**-8], 1.0), ([2.0**-7, 2.0**-8], 1 + 2.0**-6), ([2.0**-8, 2.0**-9], 1 + 2.0**-7)):
        a = np.zeros((1, 64))
        a[0, 0] = 1.0
        a[0, 1:1 + len(extra)] = extra
        b = np.zeros((1, 64))
        b[0, :1 + len(extra)] = 1.0
        y = both(codes_of(a, "fp16"), codes_of(b, "fp16"), "exact", fmt="fp16", output_format="bf16")
        assert y[0, 0] == np.float32(want)


# ------------------------------------------------------------------ errors
def test_fpsgemm9_bad_input():
    """FPS-GEMM-9: shape, dtype, format and K errors are FpspecErrors naming the problem."""
    a8 = np.zeros((2, 64), np.uint8)
    with pytest.raises(FpspecError, match="K mismatch"):
        gemm(a8, np.zeros((3, 32), np.uint8), "exact", fmt="e4m3")
    with pytest.raises(FpspecError, match="uint16"):
        gemm(a8, a8, "exact", fmt="fp16")
    with pytest.raises(FpspecError, match="need fmt"):
        gemm(a8, a8, "exact")
    with pytest.raises(FpspecError, match="2-D"):
        gemm(np.zeros(64, np.uint8), a8, "exact", fmt="e4m3")
    with pytest.raises(FpspecError, match="multiple of group_size=32"):
        gemm(np.zeros((2, 48), np.uint8), np.zeros((2, 48), np.uint8), "km-h100-fp8", fmt="e4m3")
    assert gemm(np.zeros((2, 48), np.uint8), np.zeros((2, 48), np.uint8), "km-h100-fp8", fmt="e4m3",
                require_full_groups=False).shape == (2, 2)
    rng = np.random.default_rng(9)
    q = random_quantized(rng, 2, 64, "ue4m3", 16)
    with pytest.raises(FpspecError, match="both"):
        gemm(q, a8, "exact")
    with pytest.raises(FpspecError, match="group_size a multiple"):
        gemm(q, q, "seed-probe-matched", scale_placement="block", group_size=8)
    with pytest.raises(FpspecError, match="unknown GEMM model parameter"):
        gemm(q, q, "exact", groupsize=4)
    with pytest.raises(FpspecError, match="impl"):
        gemm(q, q, "exact", impl="gpu")


# --------------------------------------------------------------------- CLI
def test_fpsgemm11_cli_quantized_codes_bits_and_errors(tmp_path, capsys):
    """FPS-GEMM-11: fpspec gemm on quantize output and on code arrays; --bits; --set;
    fpspec models --json; bad input exits 2 with one line."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((4, 64)).astype(np.float32)
    qa, qb = quantize(x, "nvfp4"), quantize(w, "nvfp4")
    qa.to_npz(tmp_path / "A.npz")
    qb.to_npz(tmp_path / "B.npz")
    out = tmp_path / "C.npy"
    assert main(["gemm", str(tmp_path / "A.npz"), str(tmp_path / "B.npz"), "--model", "seed-probe-matched",
                 "--out", str(out)]) == 0
    assert np.array_equal(np.load(out), gemm(qa, qb, "seed-probe-matched"))
    # NVFP4 through an FP8 model: outside its contract (FPS-GEMM-25), refused, or run as a what-if
    assert main(["gemm", str(tmp_path / "A.npz"), str(tmp_path / "B.npz"), "--model", "km-h100-fp8",
                 "--set", "G=16", "--set", "require_full_groups=false", "--bits", "--out", str(out)]) == 2
    assert "km-h100-fp8 takes e4m3 or e5m2 code arrays" in capsys.readouterr().err
    assert main(["gemm", str(tmp_path / "A.npz"), str(tmp_path / "B.npz"), "--model", "km-h100-fp8",
                 "--set", "G=16", "--set", "require_full_groups=false", "--bits", "--allow-what-if",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().err.startswith("fpspec gemm: warning: what-if: km-h100-fp8 takes")
    got = np.load(out)
    assert got.dtype == np.uint32
    with pytest.warns(GemmWhatIfWarning, match="what-if: km-h100-fp8"):
        want = gemm(qa, qb, "km-h100-fp8", group_size=16, allow_what_if=True)
    assert np.array_equal(got, want.view(np.uint32))
    a8 = rng.integers(0, 0x7E, (3, 64)).astype(np.uint8)
    b8 = rng.integers(0, 0x7E, (2, 64)).astype(np.uint8)
    np.save(tmp_path / "a.npy", a8)
    np.save(tmp_path / "b.npy", b8)
    assert main(["gemm", "--format", "e4m3", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                 "--model", "km-h100-fp8-promote128", "--out", str(out)]) == 0
    assert np.array_equal(np.load(out), gemm(a8, b8, "km-h100-fp8-promote128", fmt="e4m3"))
    capsys.readouterr()
    for argv in (["--model", "nope"], ["--model", "exact", "--set", "bogus=1"],
                 ["--model", "exact", "--set", "G"]):
        assert main(["gemm", "--format", "e4m3", str(tmp_path / "a.npy"), str(tmp_path / "b.npy"),
                     *argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("fpspec gemm: error:") and err.count("\n") == 1
    np.save(tmp_path / "b48.npy", b8[:, :48])
    assert main(["gemm", "--format", "e4m3", str(tmp_path / "a.npy"), str(tmp_path / "b48.npy"),
                 "--model", "exact", "--out", str(out)]) == 2
    assert "K mismatch" in capsys.readouterr().err
    assert main(["models", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert set(listing) == set(PRESETS) | set(LIBRARY)  # LIBRARY: FPS-CUB-6
    assert listing["km-b200-fp8"]["parameters"]["window_bits"] == 25


def test_fpsgemm13_fpsgemm14_new_fields_validated_and_settable():
    """FPS-GEMM-13, FPS-GEMM-14, FPS-GEMM-3: accumulate_bits and split_k are validated
    (0..23; a positive multiple of group_size), settable by --set (alias S for split_k),
    listed by fpspec models --json."""
    import json

    from fpspec.errors import FpspecError
    from fpspec.models import parse_overrides
    from fpspec.named_models import get_model, presets_json

    for bad, why in ((dict(accumulate_bits=24), "0..23"), (dict(accumulate_bits=-1), "0..23"),
                     (dict(split_k=0), "positive"), (dict(split_k=48), "multiple of group_size=32")):
        with pytest.raises(FpspecError, match=why):
            get_model("km-h100-fp8", **bad)
    m = get_model("km-h100-fp8", **parse_overrides(["S=2816", "accumulate_bits=23"]))
    assert (m.split_k, m.accumulate_bits) == (2816, 23)
    js = json.loads(presets_json())
    assert js["km-h100-fp8"]["parameters"]["accumulate_bits"] == 13
    assert js["km-h100-fp8"]["parameters"]["split_k"] is None


# ----------------------------------------------------- the seed's alpha order
#: (amax_a, amax_b) as float32 bits, with T_a = T_b = 448, and the FP32 bits of alpha
#: under each rounding.  n = RNE32(amax_a amax_b); d = (6 * 448)^2 = 7225344 = 2^14 * 441
#: (exact in binary64 and binary32); 1/d in binary32 is 0x34149B93.  The three rows are
#: the three ways the orders part: the seed's two orders together against once (and
#: twice); the reciprocal alone; the division alone.  Checked independently with numpy
#: float32 arithmetic below (n / d and n * (1 / d) are IEEE binary32 operations there).
_ALPHA_CASES = [
    # amax_a      amax_b       n            once         twice        fp32-divide  fp32-reciprocal
    (0x3E666666, 0x3FA66666, 0x3E95C28F, 0x332DDEFA, 0x332DDEFA, 0x332DDEFB, 0x332DDEFB),
    (0x3E666666, 0x3F0CCCCD, 0x3DFD70A4, 0x32931F23, 0x32931F23, 0x32931F23, 0x32931F24),
    (0x3E666666, 0x3F4CCCCD, 0x3E3851EB, 0x32D5FEBF, 0x32D5FEBF, 0x32D5FEBE, 0x32D5FEBF),
]


def _f32(bits: int) -> np.float32:
    return np.uint32(bits).view(np.float32)


@pytest.mark.parametrize("case", range(len(_ALPHA_CASES)))
def test_fpsgemm8_alpha_in_the_seeds_fp32_order(case):
    """FPS-GEMM-8: alpha = RNE32(RNE32(amax_a amax_b) / RNE32((6 T_a)(6 T_b))) (fp32-divide,
    the seed's expression on a CPU) and RNE32(RNE32(amax_a amax_b) * RNE32(1 / d))
    (fp32-reciprocal: torch on CUDA divides a tensor by a Python float as a product with
    the reciprocal; the seed presets' order).  With c = 1 (payload 1, scales 1) the output
    is alpha itself; once and twice differ from the seed's orders on these amaxes."""
    ba, bb, bn, b_once, b_twice, b_div, b_rec = _ALPHA_CASES[case]
    amax_a, amax_b = _f32(ba), _f32(bb)
    # independent check of the table with numpy's IEEE float32 arithmetic
    n = amax_a * amax_b
    d = np.float32((448.0 * 6.0) * (448.0 * 6.0))
    assert n.view(np.uint32) == bn and (np.float32(1) / d).view(np.uint32) == 0x34149B93
    assert (n / d).view(np.uint32) == b_div and (n * (np.float32(1) / d)).view(np.uint32) == b_rec
    one = [[2] + [0] * 15]  # E2M1 code 2 = 1.0, scale 0x38 = 1.0
    qa = _qt(one, [[0x38]], amax=float(amax_a), decode=0.25)
    qb = _qt(one, [[0x38]], amax=float(amax_b), decode=0.5)
    for rounding, want in (("once", b_once), ("twice", b_twice), ("fp32-divide", b_div), ("fp32-reciprocal", b_rec)):
        y = both(qa, qb, "seed-probe-matched-nosnap", alpha_rounding=rounding)[0, 0]
        assert y.view(np.uint32) == want, (rounding, hex(int(y.view(np.uint32))))
    for name in ("seed-probe-matched", "seed-probe-matched-nosnap"):
        assert PRESETS[name].model.alpha_rounding == "fp32-reciprocal"
        assert both(qa, qb, name)[0, 0].view(np.uint32) == b_rec


def test_fpsgemm8_fp32_divide_equals_torch_cpu():
    """FPS-GEMM-8: fp32-divide is the seed's alpha expression as torch computes it on a CPU
    (float32 tensors, a Python-float denominator), on random amax pairs and targets."""
    torch = pytest.importorskip("torch")
    from fpspec.exact.accumulate import tensor_alpha

    rng = np.random.default_rng(8)
    m = get_model("seed-probe-matched", alpha_rounding="fp32-divide")
    differ = 0
    for _ in range(300):
        amax_a, amax_b = (np.float32(rng.random() * 10 ** rng.uniform(-3, 3)) for _ in range(2))
        t_a, t_b = (float(rng.choice([448.0, 2048.0, 61440.0, 1.5, 100.25])) for _ in range(2))
        want = ((torch.tensor([amax_a]) * torch.tensor([amax_b])).to(torch.float32)
                / ((t_a * 6.0) * (t_b * 6.0))).numpy()[0]
        qa = _qt([[2] + [0] * 15], [[0x38]], amax=float(amax_a), target=t_a)
        qb = _qt([[2] + [0] * 15], [[0x38]], amax=float(amax_b), target=t_b)
        got = np.float32(float(tensor_alpha(qa, qb, m)))
        assert got.view(np.uint32) == want.view(np.uint32), (amax_a, amax_b, t_a, t_b)
        once = np.float32(float(tensor_alpha(qa, qb, get_model("seed-probe-matched", alpha_rounding="once"))))
        differ += once != got
    assert differ > 30  # not vacuous: once differs on a good share of the pairs


# --------------------------------------------------------- signed zeros, steps 6-8
def test_fpsgemm7_negative_value_snaps_to_minus_zero_through_alpha():
    """FPS-GEMM-7, FPS-GEMM-2: c = -0.5 x 2^-4 x 0.5 x 2^-5 = -2^-11 snaps to -0 (half of
    1/1024, ties to even) and alpha (here 1) keeps the sign: -0.0, as the seed's
    torch.round(1024 c) / 1024 * alpha gives; +2^-11 gives +0."""
    neg = _qt([[9] + [0] * 15], [[0x18]], decode=1.0)  # E2M1 code 9 = -0.5, scale 2^-4
    pos = _qt([[1] + [0] * 15], [[0x18]], decode=1.0)
    b = _qt([[1] + [0] * 15], [[0x10]], decode=1.0)    # 0.5 x 2^-5
    for name in ("seed-probe-matched",):
        y = both(neg, b, name, alpha_source="decode-scales")[0, 0]
        assert y.view(np.uint32) == 0x80000000
        assert both(pos, b, name, alpha_source="decode-scales")[0, 0].view(np.uint32) == 0
        assert both(neg, b, name)[0, 0].view(np.uint32) == 0x80000000  # the preset's own alpha
    # without the snap c stays -2^-11
    assert both(neg, b, "seed-probe-matched-nosnap", alpha_source="decode-scales")[0, 0] == np.float32(-(2.0 ** -11))


def test_fpsgemm2_alpha_underflow_and_bf16_keep_the_sign():
    """FPS-GEMM-2, FPS-GEMM-8, FPS-GEMM-12: RNE32(alpha y) of a negative y that underflows is
    -0 (an IEEE binary32 product): c = -2^-11, alpha = 2^-70 2^-70 = 2^-140, alpha c =
    -2^-151 < half the smallest subnormal; a BF16 output of -2^-149 (below BF16's
    smallest subnormal 2^-133) is -0 too.  A zero of the chain itself stays +0."""
    neg = _qt([[9] + [0] * 15], [[0x18]], decode=2.0 ** -70)
    b = _qt([[1] + [0] * 15], [[0x10]], decode=2.0 ** -70)
    y = both(neg, b, "seed-probe-matched-nosnap", alpha_source="decode-scales")[0, 0]
    assert y.view(np.uint32) == 0x80000000
    a = np.zeros((1, 64))
    bb = np.zeros((1, 64))
    a[0, 0], bb[0, 0] = 2.0 ** -75, -(2.0 ** -74)  # product -2^-149, exact in FP32
    ac, bc = codes_of(a, "bf16"), codes_of(bb, "bf16")
    assert both(ac, bc, "exact", fmt="bf16")[0, 0].view(np.uint32) == 0x80000001
    assert both(ac, bc, "exact", fmt="bf16", output_format="bf16")[0, 0].view(np.uint32) == 0x80000000
    a[0, 1], bb[0, 1] = 2.0 ** -75, 2.0 ** -74  # cancels: the chain's zero is +0, and so the output
    ac, bc = codes_of(a, "bf16"), codes_of(bb, "bf16")
    for name in ("exact", "km-h100-bf16", "seed-probe-matched"):  # chains given as parameters (FPS-GEMM-25)
        assert both(ac, bc, get_model(name, output_format="bf16"), fmt="bf16")[0, 0].view(np.uint32) == 0, name
