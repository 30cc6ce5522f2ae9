"""``fpspec probe`` (FPS-PRB-17) and the torch adapters' failure modes (FPS-PRB-16)."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from fpspec.cli import main
from fpspec.errors import FpspecError
from fpspec.probe.accept import DEFAULT_SHAPES, shapes_for_outputs


def test_fps_prb_17_help_explains_how_to_probe_a_new_gemm(capsys):
    """FPS-PRB-17: --help lists the targets and says how to plug in a new GEMM."""
    with pytest.raises(SystemExit) as exc:
        main(["probe", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    for text in ("Probing a new GEMM", "py:MODULE:FACTORY", "torch-scaled-mm-fast", "matmul(self, a, bt)",
                 "100 % is the only pass"):
        assert text in out


def test_fps_prb_17_probe_a_preset_json_report(tmp_path, capsys):
    """FPS-PRB-17: probing fpspec's own preset writes a JSON report that names it and passes."""
    out = tmp_path / "r.json"
    rc = main(["probe", "--target", "fpspec:km-h100-fp8-promote128", "--format", "e4m3", "--k", "256",
               "--scan-k", "96", "--accept-shapes", "16x16x256:8x8,8x8x512", "--report", str(out)])
    assert rc == 0
    rep = json.loads(out.read_text())
    assert rep["schema"] == "fpspec-probe-report/1"
    assert rep["nearest_preset"] == {"name": "km-h100-fp8-promote128", "differences": {}, "exact": True}
    assert rep["acceptance"]["compared"] == 128 and rep["acceptance"]["passed"] is True
    assert rep["fitted"]["parameters"]["promotion_interval"] == 128
    assert "acceptance: 128/128" in capsys.readouterr().out


def test_fps_prb_17_user_target_that_disagrees_fails(tmp_path, monkeypatch, capsys):
    """FPS-PRB-17: a py:MODULE:FACTORY target whose outputs stray from any model fails with exit 1."""
    (tmp_path / "my_gemm.py").write_text(
        "import numpy as np\n"
        "from fpspec.adapters.fpspec_model import ModelTarget\n"
        "class Noisy:\n"
        "    operand_format = 'e4m3'\n"
        "    def __init__(self):\n"
        "        self.base = ModelTarget('km-h100-fp8', 'e4m3')\n"
        "    def matmul(self, a, bt):\n"
        "        y = self.base.matmul(a, bt)\n"
        "        big = np.abs(y) > 100\n"  # last bit of large outputs flipped: no model does that
        "        return np.where(big, (y.view(np.uint32) ^ np.uint32(1)).view(np.float32), y)\n"
        "def make(fmt=None):\n"
        "    return Noisy()\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["probe", "--target", "py:my_gemm:make", "--k", "256", "--scan-k", "96", "--shape", "32x32",
               "--accept-shapes", "16x16x512"])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out


def test_fps_prb_17_bad_target_is_a_one_line_error(capsys):
    """FPS-PRB-17: an unknown target is exit 2 with one line naming it."""
    assert main(["probe", "--target", "cublas-magic"]) == 2
    err = capsys.readouterr().err.strip()
    assert "unknown probe target 'cublas-magic'" in err and len(err.splitlines()) == 1


def test_fps_prb_16_torch_targets_need_cuda(capsys):
    """FPS-PRB-16: without a CUDA device the torch targets say so (exit 2), never fall back silently."""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():  # pragma: no cover - a GPU machine
        return
    assert main(["probe", "--target", "torch-scaled-mm"]) == 2
    assert "needs a CUDA device" in capsys.readouterr().err


def test_fps_prb_16_missing_torch_is_named(monkeypatch):
    """FPS-PRB-16: torch is optional; its absence is a clear FpspecError."""
    from fpspec.adapters import torch_gemm

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(FpspecError, match="torch is not installed"):
        torch_gemm.require_torch("cuda")


def test_fps_prb_16_scaled_mm_adapter_passes_bits_through():
    """FPS-PRB-16: the _scaled_mm adapter hands operand bits to torch unchanged (checked on
    torch's CPU kernel with single exact products, padding M and N to multiples of 16)."""
    pytest.importorskip("torch")
    from fpspec.adapters.torch_gemm import TorchScaledMMTarget
    from fpspec.probe.operands import ProbeRow, ProductSplitter, build_operands, pow2

    t = TorchScaledMMTarget("e4m3", device="cpu")
    sp = ProductSplitter("e4m3")
    rows = [ProbeRow.of({3: pow2(e)}) for e in range(-18, 17, 3)]
    a, bt = build_operands(rows, 32, sp)
    y = t.matmul(a, bt)
    assert y.shape == (len(rows), len(rows)) and y.dtype == np.float32
    assert np.diagonal(y).tolist() == [2.0 ** e for e in range(-18, 17, 3)]
    ys = t.matmul_scaled(a, bt, 2.0, 0.25)
    assert np.diagonal(ys).tolist() == [2.0 ** (e - 1) for e in range(-18, 17, 3)]


def test_fps_prb_15_default_acceptance_spans_shapes():
    """FPS-PRB-15: the default acceptance set has >= 100,000 outputs, K from 256 to 16384,
    M and N from 64 to 4096."""
    shapes = shapes_for_outputs(100_000)
    assert sum(r * c for *_, r, c in shapes) >= 100_000
    ks = {k for _, _, k, _, _ in shapes}
    mn = {m for m, *_ in shapes} | {n for _, n, *_ in shapes}
    assert min(ks) == 256 and max(ks) == 16384 and min(mn) == 64 and max(mn) == 4096
    assert shapes == DEFAULT_SHAPES
    assert sum(r * c for *_, r, c in shapes_for_outputs(200_000)) >= 200_000
