"""``fpspec quantize`` / ``fpspec dequantize`` (FPS-BLK-1, FPS-BLK-14)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.quantization import dequantize, quantize


@pytest.fixture
def tensor(tmp_path):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    p = tmp_path / "x.npy"
    np.save(p, x)
    return x, p


@pytest.mark.parametrize("args, kw", [
    (["--scheme", "ue5m3"], {}),
    (["--scheme", "ue5m3", "--profile", "seed-fp32", "--block", "32", "--target", "2048"],
     {"profile": "seed-fp32", "block": 32, "target": 2048}),
    (["--scheme", "ue5m3", "--scale-format", "ue5m3fnu", "--amax", "0.5", "--zero-scale-rule", "off"],
     {"scale_format": "ue5m3fnu", "amax": 0.5, "zero_scale_rule": False}),
    (["--scheme", "nvfp4", "--tile", "BxB", "--columnwise"], {"scheme": "nvfp4", "tile": "BxB", "columnwise": True}),
    (["--scheme", "nvfp4", "--columnwise", "--rht"], {"scheme": "nvfp4", "columnwise": True, "rht": True}),
    (["--scheme", "mxfp4", "--profile", "rceil", "--rounding", "rna"],
     {"scheme": "mxfp4", "profile": "rceil", "rounding": "rna"}),
    (["--scheme", "mxfp8"], {"scheme": "mxfp8"}),
    (["--scheme", "mxfp8", "--payload-format", "e5m2", "--profile", "even"],
     {"scheme": "mxfp8", "payload_format": "e5m2", "profile": "even"}),
    (["--scheme", "mxfp8", "--payload-format", "e4m3", "--rounding", "rna"],
     {"scheme": "mxfp8", "payload_format": "e4m3", "rounding": "rna"}),
])
def test_quantize_matches_api(tensor, tmp_path, args, kw):
    """FPS-BLK-1: the CLI writes exactly what the API computes, with the documented keys."""
    x, p = tensor
    out = tmp_path / "q.npz"
    assert main(["quantize", str(p), *args, "--out", str(out)]) == 0
    kw = dict(kw)
    scheme = kw.pop("scheme", "ue5m3")
    q = quantize(x, scheme, **kw)
    with np.load(out, allow_pickle=False) as z:
        assert set(z.files) == {"codes", "scales", "encode_scale", "decode_scale", "amax", "dequant", "meta"}
        assert z["codes"].dtype == np.uint8 and z["scales"].dtype == np.uint8
        assert np.array_equal(z["codes"], q.codes) and np.array_equal(z["scales"], q.scales)
        assert z["encode_scale"].dtype == np.float32 and z["amax"] == q.amax
        assert np.array_equal(z["dequant"].view(np.uint32), dequantize(q).view(np.uint32))
        assert json.loads(str(z["meta"]))["scheme"] == scheme
        assert json.loads(str(z["meta"]))["payload_format"] == kw.get("payload_format", q.payload_format)
    back = tmp_path / "d.npy"
    assert main(["dequantize", str(out), "--out", str(back)]) == 0
    assert np.array_equal(np.load(back).view(np.uint32), dequantize(q).view(np.uint32))


def test_sr_with_rbits(tensor, tmp_path):
    """FPS-BLK-7: --rounding sr reads one uint8 per element of the quantized view from --rbits."""
    x, p = tensor
    rb = np.random.default_rng(1).integers(0, 256, x.shape, dtype=np.uint8)
    rp = tmp_path / "r.npy"
    np.save(rp, rb)
    out = tmp_path / "q.npz"
    assert main(["quantize", str(p), "--scheme", "ue5m3", "--rounding", "sr", "--rbits", str(rp),
                 "--out", str(out)]) == 0
    with np.load(out) as z:
        assert np.array_equal(z["codes"], quantize(x, "ue5m3", rounding="sr", rbits=rb).codes)


def _bad(tmp_path, arr):
    p = tmp_path / "bad.npy"
    np.save(p, arr)
    return p


@pytest.mark.parametrize("make, extra, msg", [
    (lambda: np.array([[np.nan] * 16], np.float32), [], "non-finite"),
    (lambda: np.ones((2, 24), np.float32), [], "not a multiple of the block"),
    (lambda: np.ones((2, 16), np.float32), ["--amax", "-1"], "finite and positive"),
    (lambda: np.ones((2, 16), np.float32), ["--amax", "nan"], "finite and positive"),
    (lambda: np.ones((8, 16), np.float32), ["--tile", "BxB"], "tile"),
    (lambda: np.ones((2, 16), np.float32), ["--profile", "fast-and-loose"], "unknown profile"),
    (lambda: np.ones((2, 16), np.float32), ["--rounding", "sr"], "random bits"),
])
def test_bad_input_exit_2_nothing_written(tmp_path, capsys, make, extra, msg):
    """FPS-BLK-1: bad input gives a one-line error, exit status 2, and no output file."""
    p = _bad(tmp_path, make())
    out = tmp_path / "q.npz"
    assert main(["quantize", str(p), "--scheme", "ue5m3", *extra, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1
    assert not out.exists() and list(tmp_path.iterdir()) == [p]


def test_pad_flag(tmp_path):
    """FPS-BLK-1: --pad accepts K that is not a multiple of the block."""
    p = _bad(tmp_path, np.ones((2, 24), np.float32))
    out = tmp_path / "q.npz"
    assert main(["quantize", str(p), "--scheme", "ue5m3", "--pad", "--out", str(out)]) == 0
    with np.load(out) as z:
        assert z["codes"].shape == (2, 32)
